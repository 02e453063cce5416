"""A run directory whose disk fills up: one clear line, and what was recorded before stays readable."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import optuna
import pytest
from evoforge.search.durable import DiskFull
from evoforge.search.store import OptunaStore
from optuna.trial import TrialState

from tests.conftest import FIXTURES, REPO, cli_main
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


def _fill_until_full(store: OptunaStore) -> tuple[int, DiskFull]:
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
    store = OptunaStore(run_dir=run_dir, campaign="locks")
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
    again = OptunaStore(run_dir=run_dir, campaign="locks")
    again.close_interrupted()
    assert len(again.load(TASK)) == len(trials)
    assert len(record_many(again, "after", 3)) == 3
    assert len(again.load(TASK)) == len(trials) + 3


def test_full_disk_under_a_candidate_file_is_the_same_clear_error(small_disk):
    disk, _grow = small_disk
    run_dir = disk / "run"
    store = OptunaStore(run_dir=run_dir, campaign="locks")
    _fill(disk / "ballast")  # something else filled the disk up
    with pytest.raises(DiskFull) as err:
        record_many(store, "w", 1)  # the candidate file is written first: it is what fails
    assert f"{run_dir / 'candidates'}:" in str(err.value) and "--resume" in str(err.value)


def _strategies_available() -> bool:
    try:
        from evoforge.search.strategies import get_strategy  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _strategies_available(), reason="the search strategies are not in this checkout yet")
def test_campaign_whose_run_directory_fills_up_ends_in_one_line_and_resumes(small_disk, tmp_path, capsys):
    """The disk fills mid-campaign (another writer took the space): one line, exit 2, then a clean resume."""
    disk, _grow = small_disk
    run_dir = disk / "run"
    budget = 10
    args = ["run", "--task", "L1/19", "--set", "batch_size=4", "--set", "dim=1000", "--seed-kernel",
            str(FIXTURES / "relu" / "correct.py"), "--backend", "interpreter", "--budget-evals", str(budget),
            "--correctness-runs", "1", "--workers", "1", "--name", "full", "--operators", "params", "--quiet"]
    campaign = subprocess.Popen([sys.executable, "-m", "evoforge.cli", *args, "--out", str(run_dir)], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = run_dir / "optuna.db"
    deadline = time.monotonic() + 180
    while _count_finished(db) < 3:
        assert campaign.poll() is None, campaign.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the campaign recorded too few trials in time"
        time.sleep(0.2)
    ballast = _fill(disk / "ballast")
    out, err = campaign.communicate(timeout=180)

    lines = err.strip().splitlines()
    assert campaign.returncode == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert lines[-1].startswith("evoforge: error: no space left on the disk of ")
    assert str(run_dir) in lines[-1] and f"--resume {run_dir}" in lines[-1]

    with sqlite3.connect(db) as conn:  # what was recorded is intact
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    recorded = _count_finished(db)
    assert recorded >= 3

    ballast.unlink()  # the user frees space, and resumes (in this process: the command's own is the first run's)
    resumed = cli_main(capsys, "run", "--resume", str(run_dir), "--quiet", "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (task,) = json.loads(resumed.stdout.strip().splitlines()[-1])["tasks"].values()
    assert task["evaluations"] == budget
    assert _count_finished(db) == budget


def _count_finished(db) -> int:
    if not db.exists():
        return 0
    try:
        storage = optuna.storages.RDBStorage(f"sqlite:///{db}", engine_kwargs={"connect_args": {"timeout": 60}})
        (summary,) = optuna.get_all_study_summaries(storage, include_best_trial=False)
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
    except Exception:  # not created yet
        return 0
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)))


def _fill(path):
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return path
