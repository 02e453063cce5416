"""A run directory whose disk fills up: one clear line, and what was recorded before stays readable."""

from __future__ import annotations

import sqlite3
import subprocess

import optuna
import pytest
from evoforge.search.store import DiskFull, Store
from optuna.trial import TrialState

from tests.reliability.store_writer import TASK, record_many


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (needs root, or CAP_SYS_ADMIN); ``grow(size)`` stands for the user freeing space."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()[:200]}")

    def grow(size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mount_point)], check=True)

    try:
        yield mount_point, grow
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def _fill_until_full(store: Store) -> tuple[int, DiskFull]:
    recorded = 0
    for k in range(1000):
        try:
            recorded += len(record_many(store, f"w{k}", 1))
        except DiskFull as e:
            return recorded, e
    raise AssertionError("a 1 MiB disk never filled up")


def test_full_disk_is_one_clear_error_and_the_record_survives(small_disk):
    disk, grow = small_disk
    run_dir = disk / "run"
    store = Store(run_dir=run_dir, campaign="locks")
    recorded, error = _fill_until_full(store)
    assert recorded > 10
    message = str(error)
    assert "\n" not in message and str(run_dir) in message
    assert "no space left" in message and f"--resume {run_dir}" in message  # where, and what to do

    # What was recorded before is readable as it was: the database is intact, every finished trial loads.
    with sqlite3.connect(run_dir / "optuna.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    reader = optuna.storages.RDBStorage(f"sqlite:///{run_dir / 'optuna.db'}")
    trials = optuna.load_study(study_name=store.study_name(TASK), storage=reader).get_trials()
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)]
    assert len(finished) >= recorded
    assert len(trials) - len(finished) <= 1  # at most the trial being written when the disk filled

    # Once there is room again, a resume closes what was cut short and records on.
    grow("8m")
    again = Store(run_dir=run_dir, campaign="locks")
    again.close_interrupted()
    assert len(again.load(TASK)) == len(trials)
    assert len(record_many(again, "after", 3)) == 3
    assert len(again.load(TASK)) == len(trials) + 3


def test_full_disk_under_a_candidate_file_is_the_same_clear_error(small_disk):
    disk, _grow = small_disk
    run_dir = disk / "run"
    store = Store(run_dir=run_dir, campaign="locks")
    with open(disk / "ballast", "wb", buffering=0) as ballast:  # something else filled the disk up
        try:
            while True:
                ballast.write(b"\0" * 4096)
        except OSError:
            pass
    with pytest.raises(DiskFull) as err:
        record_many(store, "w", 1)  # the candidate file is written first: it is what fails
    assert f"{run_dir / 'candidates'}:" in str(err.value) and "--resume" in str(err.value)
