"""Untrusted code is contained: no credentials, a fresh directory, no core dumps, limited files and memory.

The spy kernel (tests/fixtures/faults/spy.py) reports what it sees through its error message, the channel a
repair prompt carries back to an LLM, and leaves a file in its working directory.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest
from evoforge.judge.evaluator import Evaluator

from evoforge.core import EvalStatus
from tests.reliability.conftest import HOST_MEMORY_LIMIT, candidate, evaluator_kwargs

SECRETS = {
    "OPENAI_API_KEY": "sk-evoforge-test-parent-secret-0001",
    "ANTHROPIC_API_KEY": "sk-ant-test-0002",
    "HF_TOKEN": "hf_test_0003",
    "AWS_SECRET_ACCESS_KEY": "aws-test-0004",
    "PGPASSWORD": "pg-test-0005",
    "GITHUB_TOKEN": "ghp_test_0006",
    "TRITON_API_KEY": "looks-like-a-triton-setting-0007",  # an allowed prefix, still a credential
}


@pytest.fixture(scope="module")
def spy_report(relu_small, tmp_path_factory):
    """Run the spy once, with credentials in the parent's environment and the run directory as cwd."""
    run_dir = tmp_path_factory.mktemp("run")
    patch = pytest.MonkeyPatch()
    for name, value in SECRETS.items():
        patch.setenv(name, value)
    patch.chdir(run_dir)
    evaluator = Evaluator(**evaluator_kwargs())
    try:
        result = evaluator.evaluate(relu_small, candidate("spy"))
    finally:
        evaluator.close()
        patch.undo()
    assert result.status is EvalStatus.RUNTIME_ERROR, result.message
    seen = json.loads(result.message.rsplit("YPS", 1)[0].rsplit("SPY", 1)[1])  # after the quoted source line
    return {"seen": seen, "message": result.message, "run_dir": run_dir}


def test_no_credential_reaches_the_candidate(spy_report):
    seen = spy_report["seen"]
    assert seen["OPENAI_API_KEY"] is None
    assert seen["env"] == {}  # nothing named like a key, token or secret
    assert not set(SECRETS) & set(seen["env_names"])
    for value in SECRETS.values():
        assert value not in spy_report["message"]
    assert "TRITON_INTERPRET" in seen["env_names"]  # what a kernel needs does pass


def test_the_candidate_runs_in_a_fresh_directory_not_the_run_directory(spy_report):
    seen, run_dir = spy_report["seen"], spy_report["run_dir"]
    cwd = Path(seen["cwd"])
    assert cwd == Path(seen["home"]) == Path(seen["tmpdir"])  # cwd, HOME and TMPDIR: one private directory
    assert run_dir.resolve() not in (cwd.resolve(), *cwd.resolve().parents)
    assert Path(os.path.expanduser("~")).resolve() != cwd.resolve()
    assert not (run_dir / "spy-was-here.txt").exists()
    assert not cwd.exists()  # removed with the evaluation process


def test_no_core_dumps_limited_files_and_address_space(spy_report):
    seen = spy_report["seen"]
    assert seen["rlimit_core"] == [0, 0]
    assert seen["rlimit_nofile"][0] <= 4096
    assert seen["rlimit_as"] == [HOST_MEMORY_LIMIT, HOST_MEMORY_LIMIT]
    assert resource.getrlimit(resource.RLIMIT_AS) != (HOST_MEMORY_LIMIT, HOST_MEMORY_LIMIT)  # the child's only
