"""``kill -9`` of a running campaign, then ``--resume``: nothing finished is lost or changed, nothing leaks, and the
resumed campaign spends the rest of its budget on configurations not evaluated before the kill.

Real processes throughout: ``evoforge run`` in its own session (its Ray, its actors, their evaluation
processes), killed with SIGKILL to the whole process group mid-campaign, then resumed by a second
``evoforge run --resume`` that must start a Ray of its own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from evoforge.search.store import OptunaStore
from optuna.trial import TrialState

from evoforge.core import EvalResult
from tests.conftest import FIXTURES, REPO
from tests.reliability.conftest import children_of, wait_gone

try:
    from evoforge.search.strategies import get_strategy  # noqa: F401  (a campaign needs one)
except ImportError:
    pytest.skip("the search strategies (evoforge.search.strategies.get_strategy) are not in this checkout yet",
                allow_module_level=True)

# The seed's SPACE is 6x4: 24 configurations, each legal on the interpreter's nvidia-sm90. A budget below that: the
# strategy cannot run dry, and the whole budget must go to distinct configurations (tests/evoforge/
# test_campaign_budget.py holds fresh and resumed campaigns to the same).
SEED = FIXTURES / "relu_space" / "six_by_four.py"
BUDGET = 20
KILL_AFTER = 4  # finished trials recorded before the kill
CAMPAIGN = "killed"


def _config(tmp: Path) -> Path:
    path = tmp / "campaign.toml"
    path.write_text(f"""
[campaign]
name = "{CAMPAIGN}"
backend = "interpreter"
budget_evals = {BUDGET}
workers = 2
timeout_s = 30
trials = 2
timing_budget_ms = 50
seed = 7
# the default operators (params, rule): before issue V, a resumed rule:retune kept proposing the evaluated
# neighbours of the best parents, and the campaign stopped short of its budget

[[tasks]]
spec = "L1/19"
seed_kernel = "{SEED}"
set = {{batch_size = 4, dim = 1000}}
""")
    return path


def _study(db: Path) -> optuna.Study | None:
    """The campaign's one study (named ``<campaign>/<task name>``), once it exists."""
    if not db.exists():
        return None
    try:
        storage = optuna.storages.RDBStorage(f"sqlite:///{db}", engine_kwargs={"connect_args": {"timeout": 60}})
        names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    except Exception:  # the schema is being created
        return None
    mine = [n for n in names if n.startswith(CAMPAIGN + "/")]
    return optuna.load_study(study_name=mine[0], storage=storage) if mine else None


def _finished(db: Path) -> list[optuna.trial.FrozenTrial]:
    study = _study(db)
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)) if study else []


def _descendants(pid: int) -> set[int]:
    out, frontier = set(), [pid]
    while frontier:
        for child in children_of(frontier.pop()):
            if child not in out:
                out.add(child)
                frontier.append(child)
    return out


def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens there once the socket is closed


def _snapshot(trial: optuna.trial.FrozenTrial) -> tuple:
    return trial.number, trial.state, trial.values, trial.params, json.dumps(trial.user_attrs, sort_keys=True)


@pytest.mark.slow
def test_kill_9_mid_campaign_then_resume_loses_nothing_and_spends_the_rest_on_new_configs(tmp_path):
    run_dir = tmp_path / "run"
    db = run_dir / "optuna.db"
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115
    first = subprocess.Popen([sys.executable, "-m", "evoforge.cli", "run", str(_config(tmp_path)), "--out",
                              str(run_dir), "--quiet"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(_finished(db)) < KILL_AFTER:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the campaign recorded too few trials in time"
            time.sleep(0.2)
        family = _descendants(first.pid)  # Ray's processes, the actors and their evaluation processes
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        log.close()

    # Nothing keeps running: not Ray, not an actor, not an evaluation process (they live in sessions of
    # their own and go with their parents).
    assert family, "the campaign started no processes?"
    assert wait_gone(sorted(family), timeout_s=30) == []

    before = {t.number: _snapshot(t) for t in _finished(db)}
    assert KILL_AFTER <= len(before) < BUDGET

    resumed = subprocess.run([sys.executable, "-m", "evoforge.cli", "run", "--resume", str(run_dir), "--quiet",
                              "--json"], cwd=REPO, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "RAY_ADDRESS": _dead_address()})  # a stale pointer to no Ray
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])

    study = _study(db)
    task = study.study_name.split("/", 1)[1]
    trials = study.get_trials(deepcopy=False)
    # Nothing finished before the kill was lost or changed.
    after = {t.number: _snapshot(t) for t in trials}
    for number, snap in before.items():
        assert after.get(number) == snap, f"trial {number} changed across the kill and resume"
    # Nothing is left RUNNING, and the budget is reached exactly.
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.FAIL}
    assert len(trials) == BUDGET
    assert summary["tasks"][task]["evaluations"] == BUDGET
    assert sorted(t.number for t in trials) == list(range(BUDGET))
    # The whole budget went to distinct configurations, before the kill and after it, and nothing stopped it early.
    configs = [t.user_attrs["params"] for t in trials]
    assert len(set(configs)) == BUDGET, configs
    assert summary["tasks"][task]["stopped_early"] is None

    # Candidates and the result cache are intact: every trial has its candidate, every cache entry parses.
    store = OptunaStore(run_dir=run_dir, campaign=CAMPAIGN)
    loaded = store.load(task)
    assert len(loaded) == BUDGET
    assert all(s.candidate.id == s.user_attrs["candidate_id"] for s in loaded)
    entries = list((run_dir / "cache").glob("*.json"))
    assert entries
    for entry in entries:
        EvalResult.from_dict(json.loads(entry.read_text()))
    assert summary["tasks"][task]["best_speedup"] is not None  # the export worked on the joined record
    assert (run_dir / "summary.json").exists()
