"""The ``Store`` contract (search/base.py), one suite for every store and storage, as Optuna's pytest_storages.

A new store, or a new storage behind ``OptunaStore``, is correct by passing it: add it to ``STORES``.
PostgreSQL runs on a server of the test session's own (tests/conftest.py ``postgres_url``); it skips with the
reason where no server binaries are installed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from evoforge.search.base import Store
from evoforge.search.store import OptunaStore

from evoforge.core import Candidate, EvalResult, EvalStatus

CAMPAIGN = "conformance"
SOURCE = "SPACE = {'BLOCK': [64, 128]}\nPARAMS = {'BLOCK': 64}\nclass ModelNew:\n    pass\n"

OpenStore = Callable[[], Store]  # opens the same record again on every call (a resume, another process)


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> OpenStore:
    url = f"sqlite:///{tmp_path / 'record.db'}"
    return lambda: OptunaStore(run_dir=tmp_path / "run", campaign=CAMPAIGN, storage_url=url)


def _default(tmp_path: Path, request: pytest.FixtureRequest) -> OpenStore:
    return lambda: OptunaStore(run_dir=tmp_path / "run", campaign=CAMPAIGN)  # RUN_DIR/optuna.db


def _postgres(tmp_path: Path, request: pytest.FixtureRequest) -> OpenStore:
    url = request.getfixturevalue("postgres_url")
    campaign = f"{CAMPAIGN}-{tmp_path.name}"  # one server for the session: each test its own studies
    return lambda: OptunaStore(run_dir=tmp_path / "run", campaign=campaign, storage_url=url)


STORES = {"optuna-sqlite": _sqlite, "optuna-run-dir": _default, "optuna-postgresql": _postgres}


@pytest.fixture(params=sorted(STORES))
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStore:
    return STORES[request.param](tmp_path, request)


def _child(block: int, **changes: object) -> Candidate:
    return Candidate.from_source(SOURCE, **{"task": "t", **changes}, params={"BLOCK": block})


def _ok(ms: float) -> EvalResult:
    return EvalResult(EvalStatus.OK, runtime_ms=ms, ref_ms=1.0, speedup=1.0 / ms, backend="interpreter",
                      arch="nvidia-sm90", versions={"torch": "x"})


def test_is_a_store(open_store: OpenStore) -> None:
    assert isinstance(open_store(), Store)


def test_records_come_back_in_order_and_equal(open_store: OpenStore) -> None:
    store = open_store()
    store.study("t")
    seed = _child(64, operator="seed")
    child = _child(128, operator="rule:retune", parents=(seed.id,), stage="autotuning",
                   meta={"model": "m", "prompt_tokens": 12})
    failed = _child(64, operator="llm-repair", parents=(child.id,))
    results = [_ok(2.0), _ok(0.5), EvalResult.failure(EvalStatus.INCORRECT, "max_abs_err 3 at (0, 1)")]
    numbers = []
    for cand, result in zip((seed, child, failed), results, strict=True):
        store.save_candidate(cand)
        numbers.append(store.record("t", cand, result, extra_attrs={"worker": "w0"}))
    assert numbers == [0, 1, 2]
    loaded = store.load("t")
    assert [s.number for s in loaded] == [0, 1, 2]
    assert [s.candidate for s in loaded] == [seed, child, failed]
    assert [s.result for s in loaded] == results
    assert loaded[1].user_attrs["operator"] == "rule:retune" and loaded[2].user_attrs["status"] == "incorrect"
    assert loaded[1].user_attrs["prompt_tokens"] == 12 and loaded[0].user_attrs["worker"] == "w0"


def test_a_store_opened_again_sees_everything_recorded(open_store: OpenStore) -> None:
    first = open_store()
    for block in (64, 128):
        first.record("t", _child(block), _ok(block / 64))
    again = open_store()  # --resume, a report, another machine of the cluster
    assert [s.candidate.params for s in again.load("t")] == [{"BLOCK": 64}, {"BLOCK": 128}]
    assert again.record("t", _child(64, operator="params"), _ok(1.0)) == 2
    assert again.close_interrupted() == 0  # nothing was left half written


def test_tasks_have_records_of_their_own(open_store: OpenStore) -> None:
    store = open_store()
    store.study("empty")
    store.record("a", _child(64, task="a"), _ok(1.0))
    store.record("b", _child(128, task="b"), _ok(2.0))
    assert [s.candidate.task for s in store.load("a")] == ["a"]
    assert [s.candidate.task for s in store.load("b")] == ["b"]
    assert store.load("empty") == []


def test_what_json_cannot_hold_survives_as_none(open_store: OpenStore) -> None:
    store = open_store()
    odd = EvalResult(EvalStatus.OK, runtime_ms=1.0, speedup=2.0, max_abs_err=float("nan"),
                     details={"inf": float("inf")})
    store.record("t", _child(64), odd)
    (back,) = store.load("t")
    assert back.result.max_abs_err is None and back.result.details == {"inf": None}
    assert back.result.speedup == 2.0
