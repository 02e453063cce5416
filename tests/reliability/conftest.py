"""Shared pieces of the reliability tests: fault kernels, a sandboxed evaluator with short limits, process probes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from evoforge.core import Candidate
from tests.conftest import FIXTURES

FAULTS = FIXTURES / "faults"
HOST_MEMORY_LIMIT = 2 * 1024**3  # address space of the evaluation process: reached in seconds, not minutes
HANG_TIMEOUT_S = 6.0


def candidate(name: str, **params: object) -> Candidate:
    """A fault kernel from tests/fixtures/faults, or one of tests/fixtures/relu."""
    path = FAULTS / f"{name}.py"
    if not path.exists():
        path = FIXTURES / "relu" / f"{name}.py"
    return Candidate.from_source(path.read_text(), params=dict(params))


def good() -> Candidate:
    return candidate("correct")


def pid_alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    """The pids still alive after up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in pids if pid_alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def wait_for_file(path: Path, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written within {timeout_s:g} s")


def evaluator_kwargs(timeout_s: float = HANG_TIMEOUT_S, containment: str = "auto") -> dict[str, object]:
    """What EvalPool and Evaluator take: the interpreter, two correctness trials, no timing, short limits.
    ``containment="none"`` for a test that follows a candidate's processes by the PIDs it reports."""
    from evoforge.backends.registry import get_backend
    from evoforge.judge.chain import ChainOptions

    backend = get_backend("interpreter")
    return {"backend": "interpreter", "arch": backend.arch, "options": ChainOptions(trials=2, timing=False),
            "timeout_s": timeout_s, "knowledge": False,
            "child_env": {**backend.evaluation_process().env, "EVOFORGE_CONTAINMENT": containment},
            "memory_limit_bytes": HOST_MEMORY_LIMIT}


# The fault kernels crash, hang and start processes on purpose: their task allows what the judge would otherwise
# refuse (tests/judge/test_adversarial.py holds candidates to the defaults), so containment is what is tested.
FAULT_ALLOWANCES = ["threads", "processes", "native", "introspection"]


@pytest.fixture(scope="session")
def relu_small():
    from evoforge.task import Task

    return Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000}, allow=FAULT_ALLOWANCES)


@pytest.fixture(scope="session")
def fault_evaluator():
    """One sandboxed evaluator for every fault: a campaign reuses its evaluator the same way."""
    from evoforge.judge.evaluator import Evaluator

    evaluator = Evaluator(**evaluator_kwargs())
    yield evaluator
    evaluator.close()


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


# Small bounds, so that each adversarial candidate meets its bound in about a second.
BOUNDS_ENV = {"EVOFORGE_MAX_PROCESSES": "12", "EVOFORGE_MAX_DISK_BYTES": str(48 << 20), "EVOFORGE_MAX_FILES": "1500",
              "EVOFORGE_MAX_FILE_BYTES": str(16 << 20), "EVOFORGE_TMP_BYTES": str(32 << 20),
              "EVOFORGE_MAX_OPEN_FILES": "200"}


@pytest.fixture(scope="session")
def bounded_evaluator(tmp_path_factory):
    """One evaluator (contained where bwrap is installed) with small resource bounds, for every adversarial candidate
    of tests/fixtures/containment; it hides ``run_dir`` as a campaign hides its own."""
    from evoforge.judge.evaluator import Evaluator

    run_dir = tmp_path_factory.mktemp("run")
    kwargs = evaluator_kwargs(timeout_s=60)
    kwargs["child_env"] = {**kwargs["child_env"], **BOUNDS_ENV}
    evaluator = Evaluator(**kwargs, hide_paths=[str(run_dir)])
    yield evaluator, run_dir
    evaluator.close()
