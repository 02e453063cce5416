"""Issue 18, a newcomer's first day: each command the issue names, run in this process (no Ray, no evaluation).

A mistake of the user's is exit 2 and one line naming the flag, said before anything is written: a failed start
leaves no run directory for the corrected command to trip on, a typo is refused instead of ignored, and a shape
the task cannot be drawn at is the user's, not the kernel's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evoforge.cli import main
from evoforge.core import EvalResult, EvalStatus, UsageError
from tests.conftest import FIXTURES

SEED = str(FIXTURES / "relu" / "correct.py")
RUN = ["run", "--task", "L1/19", "--set", "batch_size=4", "--set", "dim=1000", "--backend", "interpreter",
       "--budget-evals", "2", "--quiet", "--seed-kernel", SEED]
EVAL = ["eval", "L1/19", SEED, "--backend", "interpreter", "--no-timing"]


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("evoforge: error: ")
    return lines[0]


def _config(out: Path, **campaign: object):
    from evoforge.config import config_from_dict

    return config_from_dict({"campaign": {"backend": "interpreter", "budget_evals": 2, "out": str(out), **campaign},
                             "tasks": [{"spec": "L1/19", "seed_kernel": SEED, "set": {"batch_size": 4, "dim": 1000}}]},
                            source="test")


@pytest.mark.parametrize("flags, words", [
    (["--strategy", "nosuch"], ["--strategy nosuch", "unknown strategy", "bayes:cmaes"]),
    (["--backend", "nosuch"], ["--backend nosuch", "unknown backend", "interpreter"]),
    (["--operators", "params,nosuch"], ["--operators", "unknown operator 'nosuch'", "params"]),
])
def test_a_failed_start_leaves_nothing_for_the_corrected_command_to_trip_on(tmp_path, capsys, flags, words):
    out = tmp_path / "run"
    line = one_line_error(capsys, [*RUN, *flags, "--out", str(out)])
    for word in words:
        assert word in line
    assert not out.exists(), sorted(p.name for p in out.iterdir())


def test_the_strategies_search_bench_accepts_run_accepts(tmp_path):
    """``bayes:cmaes`` was accepted by ``search-bench`` and refused by ``run``; both read one strategy spec."""
    from evoforge.campaign import Campaign

    campaign = Campaign(_config(tmp_path / "run", strategy="bayes:cmaes"), progress=False)
    campaign.prepare()  # everything but Ray and the evaluators
    assert type(campaign.tasks["level1/19_ReLU"].strategy).__name__ == "BayesStrategy"


def test_two_campaigns_sharing_a_storage_are_kept_apart(tmp_path):
    """The second campaign under the default name was loaded into the first one's studies and its report counted
    the first one's trials. Now it is refused, naming the way out; under a name of its own it has its own study."""
    from evoforge.campaign import Campaign
    from evoforge.core import Candidate

    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    first = Campaign(_config(tmp_path / "a", storage=storage), progress=False)
    first.prepare()
    assert first.store is not None
    first.store.record("level1/19_ReLU", Candidate.from_source(Path(SEED).read_text(), task="level1/19_ReLU"),
                       EvalResult(status=EvalStatus.OK, speedup=1.0, runtime_ms=1.0, ref_ms=1.0))
    with pytest.raises(UsageError) as info:
        Campaign(_config(tmp_path / "b", storage=storage), progress=False).prepare()
    message = str(info.value)
    assert "campaign/level1/19_ReLU" in message and "1 trial" in message and "--name" in message
    assert f"--resume {(tmp_path / 'a').resolve()}" in message
    second = Campaign(_config(tmp_path / "b", storage=storage, name="second"), progress=False)
    second.prepare()
    assert second.store is not None and second.store.existing("level1/19_ReLU")[0] == 0
    assert first.store.existing("level1/19_ReLU")[0] == 1


def test_a_parameter_typo_is_refused(capsys):
    line = one_line_error(capsys, [*EVAL, "--param", "BLOKC=1024"])
    assert "--param" in line and "BLOKC" in line and "BLOCK, num_warps" in line


def test_a_parameter_typo_in_the_python_api_is_refused_before_anything_starts():
    import evoforge

    with pytest.raises(UsageError, match="declares no parameter BLOKC"):
        evoforge.evaluate("L1/19", SEED, backend="interpreter", params={"BLOKC": 1024})


@pytest.mark.parametrize("flags, words", [
    (["--set", "batch_size=abc"], ["batch_size='abc'", "not an integer", "--set"]),
    (["--set", "batch_size=3", "--shapes", "batch_size=3,dim=seven"], ["dim='seven'", "not an integer"]),
    (["--set", "batch_size=4", "--set", "dim=-5"], ["cannot draw its inputs", "dim=-5", "--set"]),
])
def test_the_users_shapes_are_blamed_not_the_kernel(capsys, flags, words):
    """These were ``runtime_error``, exit 1, with a torch traceback: the kernel blamed for the user's typo."""
    line = one_line_error(capsys, [*EVAL, *flags])
    for word in words:
        assert word in line


def test_a_task_on_its_default_shapes_warns_before_minutes_of_silence_on_the_interpreter():
    from evoforge.judge.task_inputs import check_task_inputs, size_warning

    from evoforge.task import Task

    default = Task.load("L1/19")  # 4096 x 393216 float32: 6.4 GB
    warning = size_warning(default, check_task_inputs(default), host=True, backend="interpreter")
    assert warning is not None and "6.4 GB" in warning and "--set" in warning
    assert size_warning(default, check_task_inputs(default), host=False, backend="cuda") is None
    small = Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000})
    assert size_warning(small, check_task_inputs(small), host=True, backend="interpreter") is None


def test_replay_says_it_is_for_search_bench(capsys):
    line = one_line_error(capsys, ["eval", "L1/19", SEED, "--backend", "replay"])
    assert "search-bench" in line and "choose another" in line


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    out = capsys.readouterr().out.strip().splitlines()
    assert info.value.code == 0 and len(out) == 1
    assert out[0].startswith("evoforge 0.1.0 (") and "triton" in out[0] and "optuna" in out[0]


def test_correctness_runs_is_the_word_and_trials_still_works(capsys):
    """``--trials`` meant correctness repeats while the record's trial is one evaluation; the old word still
    parses, with a note."""
    from evoforge.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["eval", "L1/19", SEED, "--correctness-runs", "5"]).correctness_runs == 5
    assert parser.parse_args(["run", "--correctness-runs", "5"]).correctness_runs == 5
    assert parser.parse_args(["eval", "L1/19", SEED, "--trials", "4"]).correctness_runs == 4
    assert "--trials is now --correctness-runs" in capsys.readouterr().err


def test_search_bench_counts_its_budget_in_evaluations_as_run_does(capsys):
    from tests.search.test_bench import SOFTMAX

    assert main(["search-bench", str(SOFTMAX), "--budget-evals", "3", "--repeats", "1", "--json"]) == 0
    assert main(["search-bench", str(SOFTMAX), "--budget", "3", "--repeats", "1", "--json"]) == 0
    assert "--budget is now --budget-evals" in capsys.readouterr().err


def test_search_bench_replays_the_search_as_a_campaign_runs_it_unless_told_no_kb(capsys):
    """`evoforge run` has the knowledge base on unless --no-kb; search-bench, which says what a campaign's search
    would find, read a search with it off unless --kb: its figure was not the campaign's."""
    import json

    from tests.search.test_bench import MATMUL

    assert main(["search-bench", str(MATMUL), "--budget-evals", "3", "--repeats", "1", "--json"]) == 0
    on = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert on["kb"] is True and on["illegal_configs"] == 152 and ["BLOCK_M", "num_warps"] in on["moves_together"]
    assert main(["search-bench", str(MATMUL), "--budget-evals", "3", "--repeats", "1", "--no-kb", "--json"]) == 0
    assert "kb" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["search-bench", str(MATMUL), "--budget-evals", "3", "--repeats", "1"]) == 0
    assert "knowledge base on, as a campaign runs" in capsys.readouterr().out


def test_sizes_a_task_unpacks_on_one_line_can_be_set():
    """KernelBench's 3-D tasks write ``D, H, W = 24, 32, 32`` (and 15 tasks ``height = width = 256``); ``--set H=8``
    was refused ("no module constant D, H, W to set"), so such a task could not be made small enough for the
    interpreter, and the chain's odd sizes never varied those dimensions."""
    from evoforge.judge.task_inputs import check_task_inputs

    from evoforge.task import Task

    task = Task.load("L2/24", overrides={"batch_size": 2, "D": 5, "H": 6, "W": 7})
    assert check_task_inputs(task).shapes[0] == (2, 3, 5, 6, 7)
    with pytest.raises(UsageError, match="it has: .*D, H, W"):
        Task.load("L2/24", overrides={"depth": 3})
    chained = Task.load("L2/32", overrides={"batch_size": 2, "height": 9, "width": 7})  # height = width = 256
    assert check_task_inputs(chained).shapes[0] == (2, 64, 9, 7)


def test_a_host_backends_start_does_not_run_the_reference_on_the_meta_device():
    """The reference's peak on the meta device sizes an evaluation's share of device memory, which only a backend
    with devices shares; its first meta kernel imports torch._dynamo (2-3 s of every interpreter campaign's start
    on two cores, for a figure nothing read). Run in a fresh process: this one has imported torch._dynamo."""
    import subprocess
    import sys

    code = """
import sys, tempfile
from pathlib import Path
from evoforge.backends.registry import available_backend
from evoforge.config import CampaignConfig, TaskConfig
from evoforge.search.pool import judge_need_bytes
from evoforge.task_start import TaskStarts
cfg = CampaignConfig(tasks=[TaskConfig(spec="L1/19", seed_kernel=sys.argv[1], set={"batch_size": 4, "dim": 1000})])
starts = TaskStarts(config=cfg, backend=available_backend("interpreter"), run_dir=Path(tempfile.mkdtemp()),
                    generate=False)
starts.load()
name = next(iter(starts.need_bytes))
assert starts.need_bytes[name] == judge_need_bytes(16000), starts.need_bytes
print("torch._dynamo" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-c", code, SEED], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"
