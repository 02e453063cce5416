"""A campaign on ``--backend replay``: the real engine (Ray actors, the strategy, the parameter operators, the
knowledge base, the cache, the Optuna record) with a simulated device answering each evaluation from a recorded H200
landscape, or, for a task without one, from a seeded cost model with a failure mix.

Before issue AA, ``evoforge run --backend replay`` stopped with "runs no kernel". The campaigns here share the test
process's Ray (``cli_main``) and spend a few evaluations each, with no delay: nothing hinges on wall-clock time.
"""

from __future__ import annotations

import json

import optuna
import pytest
from evoforge.backends.replay import CostModel, Landscape
from optuna.trial import TrialState

from evoforge.cli import main
from evoforge.core import EvalStatus
from tests.conftest import REPO, cli_main

MATMUL = REPO / "tests" / "search" / "landscapes" / "matmul_bf16_4096.json"
SOFTMAX = REPO / "tests" / "search" / "landscapes" / "softmax_fp16_32768x1024.json"
RELU = ["--task", "L1/19", "--set", "batch_size=4", "--set", "dim=1000"]


def _trials(storage: str, study: str) -> list[optuna.trial.FrozenTrial]:
    trials = optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
    return [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)]


def _params(trial: optuna.trial.FrozenTrial) -> dict:
    params = trial.user_attrs["params"]
    return json.loads(params) if isinstance(params, str) else params


def _run(capsys, *argv: str) -> dict:
    done = cli_main(capsys, "run", "--backend", "replay", "--quiet", "--json", *argv)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_landscape_campaign_records_what_the_h200_answered_and_resumes(capsys, tmp_path) -> None:
    out = tmp_path / "run"
    summary = _run(capsys, "--landscape", str(MATMUL), "--budget-evals", "8", "--workers", "2", "--out", str(out),
                   "--name", "aa")
    task = summary["tasks"]["matmul_bf16_4096"]
    assert summary["backend"] == "replay" and summary["arch"] == "nvidia-sm90"
    assert task["evaluations"] == 8
    trials = _trials(f"sqlite:///{out}/optuna.db", "aa/matmul_bf16_4096")
    assert len(trials) == 8
    landscape = Landscape.load(MATMUL)
    for trial in trials:  # every trial is the file's answer for its config, evaluated by an actor
        recorded = landscape.evaluate(_params(trial))
        assert trial.user_attrs["status"] == str(recorded.status)
        assert trial.user_attrs["runtime_ms"] == recorded.runtime_ms
        assert trial.user_attrs["backend"] == "replay" and trial.user_attrs["worker"].startswith("worker-")
    assert len({json.dumps(_params(t), sort_keys=True) for t in trials}) == 8  # distinct configs
    assert any(t.user_attrs["operator"] == "params" for t in trials)  # the strategy's own moves reached the actors
    assert any((out / "cache").iterdir())  # results went through the result cache
    best = min(t.user_attrs["runtime_ms"] for t in trials if t.user_attrs["status"] == "ok")
    assert task["best_runtime_ms"] == best

    resumed = _run(capsys, "--resume", str(out), "--budget-evals", "12")
    assert resumed["tasks"]["matmul_bf16_4096"]["evaluations"] == 12
    assert len(_trials(f"sqlite:///{out}/optuna.db", "aa/matmul_bf16_4096")) == 12


@pytest.mark.slow
def test_a_task_without_a_landscape_gets_the_seeded_cost_models_failures_beside_a_landscape(capsys, tmp_path) -> None:
    """Several simulated devices served by one actor process, a cost-model task with a failure mix beside a
    landscape task: each answer is the one the seed, the task and the config decide."""
    out = tmp_path / "run"
    failures = {"compile_error": 0.3, "incorrect": 0.2}
    summary = _run(capsys, *RELU, "--landscape", str(SOFTMAX), "--budget-evals", "10", "--workers", "4",
                   "--devices-per-actor", "4", "--replay-failures", "compile_error=0.3,incorrect=0.2",
                   "--seed", "5", "--out", str(out), "--name", "cm")
    assert set(summary["tasks"]) == {"level1/19_ReLU", "softmax_fp16_32768x1024"}
    model = CostModel(seed=5, failures=failures)
    relu = _trials(f"sqlite:///{out}/optuna.db", "cm/level1/19_ReLU")
    assert len(relu) == summary["tasks"]["level1/19_ReLU"]["evaluations"] >= 8
    statuses = {t.user_attrs["status"] for t in relu}
    assert "ok" in statuses and statuses & {"compile_error", "incorrect"}, statuses
    for trial in relu:
        expected = model.evaluate("level1/19_ReLU", _params(trial))
        assert trial.user_attrs["status"] == str(expected.status)
        assert trial.user_attrs["runtime_ms"] == expected.runtime_ms
    softmax = _trials(f"sqlite:///{out}/optuna.db", "cm/softmax_fp16_32768x1024")
    assert {t.user_attrs["status"] for t in softmax} == {"ok"}  # the file's answers, not the cost model's failures


@pytest.mark.slow
def test_a_replay_campaign_records_into_postgresql(capsys, tmp_path, postgres_url) -> None:
    out = tmp_path / "run"
    summary = _run(capsys, "--landscape", str(SOFTMAX), "--budget-evals", "5", "--workers", "2",
                   "--storage", postgres_url, "--out", str(out), "--name", "pg-replay")
    assert summary["tasks"]["softmax_fp16_32768x1024"]["evaluations"] == 5
    assert len(_trials(postgres_url, "pg-replay/softmax_fp16_32768x1024")) == 5


def test_the_cost_model_is_a_function_of_seed_task_and_config() -> None:
    model = CostModel(seed=1, failures={"timeout": 0.25})
    params = {"BLOCK": 256, "num_warps": 4}
    assert model.evaluate("t", params) == model.evaluate("t", dict(reversed(params.items())))
    drawn = [model.evaluate("t", {"BLOCK": b, "num_warps": w}) for b in range(64) for w in (1, 2, 4, 8)]
    timeouts = sum(r.status == EvalStatus.TIMEOUT for r in drawn) / len(drawn)
    assert 0.15 < timeouts < 0.35
    assert all(0.4 < r.runtime_ms < 2.5 for r in drawn if r.ok)
    assert CostModel(seed=2).evaluate("t", params).runtime_ms != CostModel(seed=1).evaluate("t", params).runtime_ms


@pytest.mark.parametrize(("argv", "words"), [
    (["--backend", "cuda", "--landscape", str(MATMUL)], ["--landscape", "--backend replay"]),
    (["--landscape", str(MATMUL)], ["--landscape", "--backend replay"]),
    (["--task", "L1/19", "--replay-delay", "1"], ["--replay-delay", "--backend replay"]),
    (["--backend", "replay", "--landscape", str(MATMUL), "--replay-failures", "melted=0.5"],
     ["--replay-failures", "melted", "compile_error"]),
    (["--backend", "replay", "--landscape", str(MATMUL), "--replay-failures", "timeout=2"],
     ["--replay-failures", "timeout", "probability"]),
    (["--backend", "replay", "--landscape", str(MATMUL), "--devices-per-actor", "0"], ["--devices-per-actor"]),
    (["--backend", "replay", "--landscape", str(MATMUL), "--landscape", str(MATMUL)], ["--landscape", "matmul_bf16"]),
])
def test_a_replay_flag_where_it_cannot_work_is_one_line_naming_it(capsys, tmp_path, argv, words) -> None:
    code = main(["run", *argv, "--out", str(tmp_path / "run")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    for word in words:
        assert word in lines[0], lines[0]
    assert not (tmp_path / "run").exists()
