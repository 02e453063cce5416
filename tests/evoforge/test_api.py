"""Results a Python user can hold: ``evoforge.evaluate`` and ``evoforge.run`` give back objects that print as one
line, whose figures are attributes, whose whole record is one attribute away, and a quiet call prints nothing the
user did not ask for.

One real campaign (the interpreter, L1/19 at 8x1000, three evaluations, the ``params`` operator) and two
evaluations run once, in a script of their own as a user runs one: what it prints, on either stream and from any
process (Optuna, Ray, the campaign's logger), is what it asked for and nothing else. The other tests read that
campaign back from its run directory.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pandas as pd
import pytest

from evoforge.api import LEADERBOARD_COLUMNS, BestKernel, CampaignResult, KernelResult, _quiet_optuna
from evoforge.core import EvalResult, EvalStatus, UsageError
from tests.conftest import FIXTURES

TASK = "level1/19_ReLU"
SCRIPT = textwrap.dedent("""
    import optuna
    import evoforge

    SET = {"batch_size": 8, "dim": 1000}
    config = {"campaign": {"name": "relu", "backend": "interpreter", "budget_evals": 3, "operators": ["params"],
                           "workers": 1, "out": "runs/relu"},
              "tasks": [{"spec": "L1/19", "seed_kernel": "my_relu.py", "set": SET}]}
    campaign = evoforge.run(config, progress=False)
    print(repr(campaign))
    print(optuna.logging.get_verbosity())
    with evoforge.Evaluator(backend="interpreter", timing=False, correctness_runs=1) as ev:
        print(repr(ev.evaluate("L1/19", "my_relu.py", set=SET)))
        print(repr(ev.evaluate("L1/19", "nan.py", set=SET)))
""")


@pytest.fixture(scope="module")
def quiet_script(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    here = tmp_path_factory.mktemp("api")
    shutil.copy(FIXTURES / "relu" / "correct.py", here / "my_relu.py")
    shutil.copy(FIXTURES / "relu" / "nan.py", here / "nan.py")
    (here / "script.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "script.py"], cwd=here, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, here / "runs" / "relu"


@pytest.fixture(scope="module")
def campaign(quiet_script: tuple[subprocess.CompletedProcess[str], Path]) -> CampaignResult:
    return CampaignResult.load(quiet_script[1])


@pytest.mark.slow
def test_a_quiet_campaign_and_two_evaluations_print_only_what_the_script_asked_for(quiet_script):
    done, _ = quiet_script
    assert done.stderr == "", done.stderr  # no Optuna "A new study created", no Ray banner, no log line
    lines = done.stdout.splitlines()
    assert len(lines) == 4, done.stdout
    run, verbosity, correct, incorrect = lines
    assert re.fullmatch(rf"CampaignResult\(name='relu', task='{TASK}', evaluations=3, speedup=[\d.e+-]+, "
                        rf"runtime_ms=[\d.e+-]+, file='runs/relu/best/level1_19_ReLU.py'\)", run), run
    assert verbosity == str(optuna.logging.INFO)  # the script's own Optuna verbosity, given back after the run
    assert correct == f"KernelResult(status='ok', file='my_relu.py', task='{TASK}')"
    assert re.fullmatch(rf"KernelResult\(status='incorrect', message='[^\n]{{1,80}}', file='nan.py', "
                        rf"task='{TASK}'\)", incorrect), incorrect


def test_the_best_kernel_is_a_small_object_that_still_reads_as_the_summary_line(campaign):
    best = campaign.best()
    line = campaign.summary["tasks"][TASK]
    assert isinstance(best, BestKernel) and best.task == TASK
    assert (best.speedup, best.runtime_ms, best.operator, best.params) == (
        line["best_speedup"], line["best_runtime_ms"], line["best_operator"], line["best_params"])
    assert best.vs_compile is None  # the interpreter times no torch.compile baseline
    assert best.recommendation == "reference"  # the interpreter's kernel is slower than PyTorch on the CPU
    assert (campaign.run_dir.parent.parent / best.file).is_file()
    assert best.details == line and best["best_speedup"] == best.speedup  # as best() read before: a dict
    assert best["exported"]["file"] == best.file and dict(best) == line
    assert campaign.best("L1/19") == campaign.best(TASK) == best  # the spec names the task too
    assert campaign.best_kernels() == {TASK: best}
    assert "\n" not in repr(best) and "{" not in repr(best) and f"file='{best.file}'" in repr(best)


def test_the_leaderboard_is_a_dataframe_of_the_columns_evoforge_run_prints(campaign):
    board = campaign.leaderboard()
    assert isinstance(board, pd.DataFrame) and tuple(board.columns) == LEADERBOARD_COLUMNS
    assert board["task"].tolist() == [TASK]
    row = board.iloc[0]
    # Which candidate is fastest is the interpreter's timing: the row names the campaign's own best, whatever it is.
    assert (row["evaluations"], row["ok"], row["failures"]) == (3, 3, "")
    assert row["best_operator"] == campaign.best().operator and row["best_operator"]
    assert row["best_speedup"] == campaign.best().speedup and math.isnan(row["vs_compile"])
    numeric = ["evaluations", "ok", "best_speedup", "vs_compile", "best_runtime_ms", "ref_ms", "compile_ms",
               "best_pct_of_floor"]
    assert all(pd.api.types.is_numeric_dtype(board[c]) for c in numeric), board.dtypes


def test_the_record_names_its_objective_value_speedup(campaign):
    trials = campaign.study().trials_dataframe()
    assert len(trials) == 3 and trials["value_speedup"].max() == pytest.approx(campaign.best().speedup)
    study = optuna.load_study(study_name=f"relu/{TASK}", storage=campaign.storage)  # the record, without evoforge
    assert study.metric_names == ["speedup"]


def test_a_campaign_of_several_tasks_prints_its_counts_and_asks_which_task(campaign):
    line = campaign.summary["tasks"][TASK]
    failed = {**line, "evaluations": 2, "statuses": {"incorrect": 2}, "best_speedup": None, "exported": {}}
    several = CampaignResult(run_dir=campaign.run_dir, storage=campaign.storage,
                             summary={**campaign.summary, "tasks": {TASK: line, "other": failed},
                                      "not_started": {"L1/23": "no way in"}})
    assert repr(several) == ("CampaignResult(name='relu', tasks=2, evaluations=5, not_started=1, with_a_kernel=1, "
                             f"run_dir='{campaign.run_dir}')")
    with pytest.raises(UsageError, match=r"2 tasks .*best_kernels\(\) or leaderboard\(\)"):
        several.best()
    with pytest.raises(UsageError, match="not in campaign relu"):
        several.best("L9/9")
    assert several.best("other").file is None and several.best_kernels().keys() == {TASK, "other"}
    board = several.leaderboard()
    assert board["failures"].tolist() == ["", "incorrect 2"] and math.isnan(board["best_speedup"].iloc[1])


def test_a_folder_that_holds_no_finished_campaign_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="no summary.json there") as e:
        CampaignResult.load(tmp_path)
    assert "\n" not in str(e.value)


def test_an_evaluation_keeps_every_field_of_the_chain_and_prints_one_line():
    message = "max abs err 0.5 at (3, 7) on the main shape\n" + "a long trace line\n" * 40
    result = KernelResult(status=EvalStatus.INCORRECT, message=message, max_abs_err=0.5,
                          details={"kernels": {"main": ["relu_kernel"]}}, task=TASK, file="k.py")
    assert isinstance(result, EvalResult) and not result.ok and result.message == message
    assert EvalResult.from_dict(result.to_dict()).max_abs_err == 0.5  # the record's round trip drops file and task
    assert repr(result) == (f"KernelResult(status='incorrect', message='max abs err 0.5 at (3, 7) on the main "
                            f"shape\u2026', file='k.py', task='{TASK}')")
    assert json.dumps(result.to_dict())  # everything, one call away


def test_optuna_is_quiet_while_campaigns_run_and_the_callers_verbosity_comes_back():
    before = optuna.logging.get_verbosity()
    try:
        optuna.logging.set_verbosity(optuna.logging.DEBUG)
        with _quiet_optuna():
            assert optuna.logging.get_verbosity() == optuna.logging.WARNING
            with _quiet_optuna():  # a second campaign overlapping the first (run_async)
                pass
            assert optuna.logging.get_verbosity() == optuna.logging.WARNING
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # quieter than the campaign's: kept
        with _quiet_optuna():
            assert optuna.logging.get_verbosity() == optuna.logging.ERROR
    finally:
        optuna.logging.set_verbosity(before)

