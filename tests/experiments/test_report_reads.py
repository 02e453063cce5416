"""What `evoforge report` and the dashboard's notes read from a record, counted in rows (never seconds): what they
show, not every attribute of every trial (issue AA: 36 s for a 10k-trial record through Optuna's ``get_trials``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evoforge.search import store as store_module
from evoforge.search.store import OptunaStore, RecordStorage

from evoforge.core import Candidate, EvalResult, EvalStatus
from evoforge.report import SHOWN_COLUMNS, open_run, task_stats
from tests.rowcount import CountingConnection, Rows

SOURCE = 'SPACE = {"BLOCK": list(range(1, 200))}\nPARAMS = {"BLOCK": 64}\n'
EXTRA = {f"attr_{i}": i for i in range(30)}  # what else a trial carries: decisions, kernels by shape, tokens...
TASKS, TRIALS = 4, 12


@pytest.fixture
def counted_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    for t in range(TASKS):
        for i in range(1, TRIALS + 1):
            child = Candidate.from_source(SOURCE, task=f"t{t}").with_params({"BLOCK": i}, operator="params")
            result = EvalResult(status=EvalStatus.OK, runtime_ms=1.0 / i, ref_ms=1.0, speedup=float(i)) if i % 4 \
                else EvalResult.failure(EvalStatus.INCORRECT, "wrong")
            store.record(f"t{t}", child, result, extra_attrs={**EXTRA, "wall_time_s": float(i)})
    (tmp_path / "config.json").write_text(json.dumps({"name": "c", "backend": "replay"}))
    monkeypatch.setattr(store_module, "open_storage", lambda url: RecordStorage(
        url, engine_kwargs={"connect_args": {"factory": CountingConnection}}))
    Rows.reset()
    return tmp_path


def test_the_report_reads_only_the_columns_it_shows(counted_run: Path) -> None:
    run = open_run(counted_run, columns=SHOWN_COLUMNS)
    trials = TASKS * TRIALS
    # Optuna's get_trials: every attribute, parameter and artifact of every trial, ~60 rows a trial
    assert Rows.fetched <= trials * (len(SHOWN_COLUMNS) + 3), (Rows.fetched, trials)
    stats = task_stats(run.trials["t1"])
    assert stats["evaluations"] == TRIALS and stats["correct_trials"] == TRIALS - TRIALS // 4
    assert stats["best_speedup"] == 11.0 and stats["best_operator"] == "params"
    assert list(run.trials["t0"]["number"]) == list(range(TRIALS)) and "attr_3" not in run.trials["t0"]


def test_every_column_is_there_when_all_are_asked_for(counted_run: Path) -> None:
    run = open_run(counted_run)
    df = run.trials["t2"]
    assert df["attr_29"].tolist() == [29] * TRIALS and df["versions"].tolist()[0] == {}
    assert df.loc[3, "status"] == "incorrect" and df.loc[3, "value"] != df.loc[3, "value"]  # NaN, never 0


def test_the_outcomes_figure_of_many_tasks_draws_the_busiest_and_says_so(counted_run: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from evoforge import report

    monkeypatch.setattr(report, "STATUS_ROWS", 3)
    page = report.write_run_report(counted_run).read_text()
    assert f"draws the 3 tasks with the most evaluations of {TASKS}" in page
    assert all(f"<td>t{t}</td>" in page for t in range(TASKS))  # the table keeps every task
