"""Contained candidates (bubblewrap): every route out that the issue names is closed, and the campaign goes on.

The probe kernel (tests/fixtures/containment/probe.py) is allowed what the judge's Python guards would refuse
(reading /proc, sockets), so what stops it here is the containment itself: a PID namespace without the processes
that hold the API key, no network, a read-only file system with a private /tmp, the run directory out of sight.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading

import pytest
from evoforge.backends.evaluator import Evaluator

from evoforge.core import Candidate, EvalStatus
from tests.conftest import FIXTURES, REPO
from tests.reliability.conftest import evaluator_kwargs, good

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

SECRET = "sk-evoforge-containment-test-0042"


@pytest.fixture(scope="module")
def probe_report(tmp_path_factory):
    from evoforge.task import Task

    run_dir = tmp_path_factory.mktemp("run")
    (run_dir / "optuna.db").write_text("the record")
    sibling = tmp_path_factory.mktemp("other-evaluator") / "candidate.py"
    sibling.write_text("another candidate's source")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    patch = pytest.MonkeyPatch()
    patch.setenv("OPENAI_API_KEY", SECRET)  # in the caller's environment, as a campaign with an LLM has it
    task = Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000},
                     allow=["introspection", "network", "processes"])
    evaluator = Evaluator(**{**evaluator_kwargs(timeout_s=120), "hide_paths": [str(run_dir)]})
    try:
        params = {"SECRET": SECRET, "RUN_DIR": str(run_dir), "SIBLING": str(sibling), "PORT": port,
                  "REPO_FILE": str(REPO / "planted-by-candidate.txt")}
        source = (FIXTURES / "containment" / "probe.py").read_text()
        result = evaluator.evaluate(task, Candidate.from_source(source, params=params))
        after = evaluator.evaluate(task, good())
        containment = evaluator.containment
    finally:
        evaluator.close()
        patch.undo()
        server.close()
    assert result.status is EvalStatus.RUNTIME_ERROR, result.message
    seen = json.loads(result.message.rsplit("EBORP", 1)[0].rsplit("PROBE", 1)[1])
    return {"seen": seen, "after": after, "containment": containment, "run_dir": run_dir}


def test_the_judge_says_its_candidates_are_contained(probe_report):
    assert probe_report["containment"]["mode"] == "bwrap", probe_report["containment"]


def test_no_process_holding_the_key_is_in_sight(probe_report):
    seen = probe_report["seen"]
    assert seen["secret_in_environ"] == [] and not seen["secret_in_own_env"]
    assert max(seen["pids"]) < 100  # a PID namespace of its own: bwrap, the forkserver, the candidates


def test_the_run_directory_and_other_candidates_are_out_of_sight(probe_report):
    seen = probe_report["seen"]
    assert seen["run_dir_listing"] == {"ok": True, "value": []}  # an empty directory stands in its place
    assert not seen["write_run_dir"]["ok"] and not (probe_report["run_dir"] / "planted.txt").exists()
    assert not seen["read_sibling"]["ok"]


def test_the_file_system_is_read_only_but_its_own_directory(probe_report):
    seen = probe_report["seen"]
    assert not seen["write_repo"]["ok"] and not (REPO / "planted-by-candidate.txt").exists()
    assert seen["write_own_dir"]["ok"]


def test_no_network(probe_report):
    assert not probe_report["seen"]["connect"]["ok"]


def test_the_campaign_goes_on(probe_report):
    assert probe_report["after"].status is EvalStatus.OK, probe_report["after"].message


def test_a_python_installed_under_tmp_stays_visible(tmp_path, monkeypatch):
    """A checkout or virtual environment under /tmp (CI's clean clones, a user's scratch venv) must be bound into
    the private /tmp, or bwrap cannot even start the interpreter and candidates run uncontained."""
    from evoforge.backends import containment

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    monkeypatch.setattr(containment.sys, "prefix", str(venv))
    args = containment.bwrap_arguments(writable=[str(tmp_path / "judge")], hidden=[], network=False)
    binds = {(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--ro-bind"}
    assert str(venv).startswith("/tmp/") and (str(venv), str(venv)) in binds
