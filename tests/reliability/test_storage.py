"""The Optuna record under contention: two processes on one SQLite study, and a real PostgreSQL server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from evoforge.search.store import OptunaStore, open_storage, redact_url
from optuna.trial import TrialState

from evoforge.core import UsageError
from tests.conftest import REPO, free_port
from tests.reliability.store_writer import CAMPAIGN, TASK, record_many

N_PER_WRITER = 30


def _start_writer(run_dir: Path, url: str, writer: str, n: int, start_at: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.store_writer", str(run_dir), url, writer,
                             str(n), str(start_at)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _assert_all_recorded(store: OptunaStore, writers: dict[str, int]) -> None:
    """Every trial of every writer is there, finished, numbered without gaps, with its candidate and artifact."""
    trials = optuna.load_study(study_name=store.study_name(TASK), storage=store.storage).get_trials()
    assert len(trials) == sum(writers.values())
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.FAIL}
    for writer, n in writers.items():
        mine = sorted(t.user_attrs["i"] for t in trials if t.user_attrs["writer"] == writer)
        assert mine == list(range(n)), f"writer {writer} lost trials"
    loaded = store.load(TASK)
    assert len(loaded) == len(trials)  # each trial has its candidate file and its stored result
    assert all(s.candidate.id == s.user_attrs["candidate_id"] for s in loaded)
    with_artifact = [t for t in trials if any(k.startswith("artifacts:") for k in t.system_attrs)]
    assert len(with_artifact) == len(trials)


def _two_writers(run_dir: Path, url: str) -> None:
    """This process and a second one record N trials each into one study, at the same moment."""
    start_at = time.time() + 6.0  # both have imported and opened the store by then
    other = _start_writer(run_dir, url, "B", N_PER_WRITER, start_at)
    store = OptunaStore(run_dir=run_dir, campaign=CAMPAIGN, storage_url=url)
    store.study(TASK)
    time.sleep(max(0.0, start_at - time.time()))
    numbers = record_many(store, "A", N_PER_WRITER)
    out, err = other.communicate(timeout=180)
    assert other.returncode == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1]) == {"writer": "B", "recorded": N_PER_WRITER}
    assert len(set(numbers)) == N_PER_WRITER
    _assert_all_recorded(store, {"A": N_PER_WRITER, "B": N_PER_WRITER})


def test_two_processes_record_into_one_sqlite_study_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    _two_writers(tmp_path, url)


def test_a_writer_waits_for_a_lock_held_by_another_process(tmp_path):
    """A reader or writer holding SQLite's lock for seconds delays a record; it does not fail it."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    store = OptunaStore(run_dir=tmp_path, campaign=CAMPAIGN, storage_url=url)
    store.study(TASK)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(tmp_path / 'optuna.db')!r}, isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(4)\n"
        "db.execute('COMMIT')\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        record_many(store, "A", 2)
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert waited > 2.0  # it really waited for the lock ...
    _assert_all_recorded(store, {"A": 2})  # ... and then recorded


# ---------------------------------------------------------------- PostgreSQL


def test_postgres_records_from_two_processes_and_loads_back(postgres_url, tmp_path):
    """The storage of a Ray cluster: writers in several processes (machines) share one study on PostgreSQL."""
    _two_writers(tmp_path, postgres_url)
    # A later process (a resume, a report) reads the same record back.
    again = OptunaStore(run_dir=tmp_path, campaign=CAMPAIGN, storage_url=postgres_url)
    assert len(again.load(TASK)) == 2 * N_PER_WRITER
    assert again.close_interrupted() == 0


def test_storage_that_does_not_connect_is_one_line_naming_the_flag_without_the_password():
    pytest.importorskip("psycopg2", reason="psycopg2-binary is not installed (pip install psycopg2-binary)")
    url = f"postgresql+psycopg2://evoforge:hunter2-secret@127.0.0.1:{free_port()}/nowhere"
    with pytest.raises(UsageError) as err:
        open_storage(url)
    message = str(err.value)
    assert "\n" not in message and message.startswith("--storage ")
    assert "hunter2-secret" not in message and redact_url(url) in message
    assert "cannot connect" in message


def test_redact_url_hides_only_the_password():
    assert redact_url("postgresql+psycopg2://me:pw@db.example:5432/x") == "postgresql+psycopg2://me:***@db.example:5432/x"
    assert redact_url("postgresql://me:p@ss@host/x") == "postgresql://me:***@host/x"
    assert redact_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
