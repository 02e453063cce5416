"""What reading a record back costs, counted in rows and statements (never seconds): a resume of a 100k-trial record
and a report on it must read what they use, not every attribute of every trial (issue AA: 71 s to resume 10k
trials through Optuna's ``get_trials``, 36 s to report)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy
from evoforge.search import record_rows
from evoforge.search.store import OptunaStore, RecordStorage

from evoforge.core import Candidate, EvalResult, EvalStatus
from tests.rowcount import CountingConnection, Rows

SOURCE = 'SPACE = {"BLOCK": list(range(1, 200)), "num_warps": [2, 4]}\nPARAMS = {"BLOCK": 64, "num_warps": 2}\n'
EXTRA = {f"attr_{i}": i for i in range(30)}  # a trial's other attributes: worker, tokens, decision, ...


def _recorded(tmp_path: Path, tasks: int, trials: int) -> OptunaStore:
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    for t in range(tasks):
        for i in range(1, trials + 1):
            child = Candidate.from_source(SOURCE, task=f"t{t}").with_params({"BLOCK": i}, operator="params")
            result = EvalResult(status=EvalStatus.OK, runtime_ms=1.0, speedup=1.0 + i) if i % 3 else \
                EvalResult.failure(EvalStatus.COMPILE_ERROR, "no")
            store.record(f"t{t}", child, result, extra_attrs=EXTRA)
    return store


def _counted(store: OptunaStore) -> RecordStorage:
    """The store's record opened again through a connection that counts the rows it hands back."""
    counting = RecordStorage(store.storage_url, engine_kwargs={"connect_args": {"factory": CountingConnection}})
    store.storage = counting
    Rows.reset()
    return counting


def test_a_resume_reads_a_few_rows_per_trial_whatever_else_was_recorded(tmp_path: Path) -> None:
    store = _recorded(tmp_path, tasks=1, trials=30)
    _counted(store)
    loaded = store.load("t0", user_keys=("no_child", "ticket", "reply_problem"))
    assert len(loaded) == 30 and [s.number for s in loaded] == list(range(30))
    assert loaded[1].candidate.params["BLOCK"] == 2 and loaded[1].result.speedup == 3.0
    assert loaded[2].result.status is EvalStatus.COMPILE_ERROR
    assert loaded[0].candidate.operator == "params" and loaded[0].user_attrs["candidate_id"] == loaded[0].candidate.id
    # Optuna's get_trials: the trial, its value, its parameters, ~56 attributes and artifacts, ~60 rows a trial
    assert Rows.fetched <= 8 * 30, Rows.fetched
    assert Rows.statements <= 6, Rows.statements


def test_every_attribute_is_read_back_when_asked_for_all(tmp_path: Path) -> None:
    store = _recorded(tmp_path, tasks=1, trials=3)
    loaded = store.load("t0")
    assert loaded[0].user_attrs["attr_29"] == 29 and loaded[0].user_attrs["status"] == "ok"
    assert loaded[2].user_attrs["status"] == "compile_error"


def test_many_studies_are_read_in_four_statements(tmp_path: Path) -> None:
    store = _recorded(tmp_path, tasks=6, trials=4)
    ids = record_rows.study_ids(store.storage, [f"c/t{t}" for t in range(6)])
    statements = 0

    def count(*_: object) -> None:
        nonlocal statements
        statements += 1

    sqlalchemy.event.listen(store.storage.engine, "before_cursor_execute", count)
    rows = record_rows.read_trials(store.storage, ids.values(), user_keys=["status"], system_keys=[])
    assert statements <= 3  # trials, values, the one user key (no system key asked)
    assert sorted(len(v) for v in rows.values()) == [4] * 6
    first = rows[ids["c/t0"]]
    assert [r.value for r in first] == [2.0, 3.0, None, 5.0] and first[2].user_attrs == {"status": "compile_error"}


def test_a_resume_finds_trials_left_running_in_one_look_over_every_study(tmp_path: Path) -> None:
    import optuna

    store = _recorded(tmp_path, tasks=6, trials=3)
    optuna.load_study(study_name="c/t4", storage=store.storage).ask()  # a writer of an older version died here
    _counted(store)
    assert store.close_interrupted() == 1
    # the campaign's studies, their open trials, their results: not every trial of every study (~200 rows here)
    assert Rows.fetched <= 10, Rows.fetched
    study = optuna.load_study(study_name="c/t4", storage=store.storage)
    left = study.get_trials(deepcopy=False)[-1]
    assert left.state == optuna.trial.TrialState.FAIL and left.user_attrs["status"] == "crashed"


def test_a_resumed_study_is_opened_without_writing(tmp_path: Path) -> None:
    _recorded(tmp_path, tasks=1, trials=2)
    again = OptunaStore(run_dir=tmp_path, campaign="c")
    writes: list[str] = []
    sqlalchemy.event.listen(again.storage.engine, "before_cursor_execute",
                            lambda _c, _cur, sql, *_: writes.append(sql) if sql.lstrip()[:6].upper() in (
                                "INSERT", "UPDATE", "DELETE") else None)
    study = again.study("t0")
    assert writes == [] and study.metric_names == ["speedup"] and study.user_attrs["task"] == "t0"
