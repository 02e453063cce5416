"""What one evaluation costs the campaign's driver to record, counted in statements (never in seconds), and what it
costs the rules to be asked again.

Issue AA: Optuna's ``create_new_trial`` looked the trial up and ran an upsert for every one of a trial's ~35
attributes and parameters (76 statements, 119 ms of the driver's CPU per trial on SQLite), which held a campaign to
five evaluations a second; ``RecordStorage.record_trial`` writes the same rows in a few bulk inserts.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from evoforge.search.store import OptunaStore
from optuna.trial import TrialState

from evoforge.core import Candidate, EvalResult, EvalStatus

SOURCE = 'SPACE = {"BLOCK": [64, 128, 256], "num_warps": [2, 4]}\nPARAMS = {"BLOCK": 64, "num_warps": 2}\n'


def _child(block: int) -> Candidate:
    return Candidate.from_source(SOURCE, task="t").with_params({"BLOCK": block}, operator="params")


def _statements(store: OptunaStore, fn) -> int:
    count = 0

    def counted(*_: object) -> None:
        nonlocal count
        count += 1

    sqlalchemy.event.listen(store.storage.engine, "before_cursor_execute", counted)
    try:
        fn()
    finally:
        sqlalchemy.event.remove(store.storage.engine, "before_cursor_execute", counted)
    return count


def test_a_trial_is_written_in_a_few_statements_whatever_its_attributes(tmp_path: Path) -> None:
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    store.record("t", _child(64), EvalResult(status=EvalStatus.OK, runtime_ms=1.0, speedup=1.5))  # the study's first
    many = {f"attr_{i}": i for i in range(40)}
    n = _statements(store, lambda: store.record("t", _child(128), EvalResult(
        status=EvalStatus.OK, runtime_ms=1.0, speedup=2.0), extra_attrs=many))
    assert n <= 12, n  # Optuna's own path: a look-up and an upsert per attribute, over 150 here


def test_the_fast_write_is_the_trial_optuna_would_have_written(tmp_path: Path) -> None:
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    first = store.record("t", _child(64), EvalResult(status=EvalStatus.OK, runtime_ms=1.0, speedup=1.5),
                         extra_attrs={"worker": "w-0"}, started_at=100.0, finished_at=101.0)
    second = store.record("t", _child(256), EvalResult.failure(EvalStatus.COMPILE_ERROR, "no"))
    assert (first, second) == (0, 1)
    study = optuna.load_study(study_name="c/t", storage=store.storage_url)
    ok, failed = study.get_trials(deepcopy=False)
    assert ok.state == TrialState.COMPLETE and ok.value == 1.5 and ok.params == {"BLOCK": 64, "num_warps": 2}
    assert ok.user_attrs["worker"] == "w-0" and ok.user_attrs["status"] == "ok"
    assert (ok.datetime_complete - ok.datetime_start).total_seconds() == pytest.approx(1.0)
    assert json.loads(ok.system_attrs["evoforge:result"])["speedup"] == 1.5
    assert failed.state == TrialState.FAIL and failed.value is None and failed.params["BLOCK"] == 256
    assert study.best_trial.number == 0


def test_a_parameter_another_writer_recorded_otherwise_is_refused_as_optuna_refuses_it(tmp_path: Path) -> None:
    store = OptunaStore(run_dir=tmp_path, campaign="c")
    store.record("t", _child(64), EvalResult(status=EvalStatus.OK, runtime_ms=1.0, speedup=1.5))
    study_id = store.study("t")._study_id
    other = optuna.trial.create_trial(state=TrialState.COMPLETE, value=1.0, params={"BLOCK": 3},
                                      distributions={"BLOCK": optuna.distributions.IntDistribution(1, 5)})
    with pytest.raises(ValueError):
        store.storage.record_trial(study_id, other)
    assert len(store.storage.get_all_trials(study_id)) == 1


def test_the_rules_answer_a_config_asked_again_from_what_they_said(monkeypatch) -> None:
    from evoforge.knowledge import legality

    params = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 5, "num_warps": 4}
    first = legality.is_legal(params, "nvidia-sm90", elem_bytes=2)
    monkeypatch.setattr(legality, "_is_legal", lambda *a, **k: pytest.fail("asked the rules again"))
    assert legality.is_legal(dict(reversed(params.items())), "nvidia-sm90", elem_bytes=2) == first
    assert first[0] is False  # 256x256x128 bf16 tiles over 5 stages do not fit in shared memory
