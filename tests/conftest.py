"""Shared fixtures: a real sandboxed evaluator on the Triton interpreter, real KernelBench tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def kernelbench_dir() -> Path:
    from evoforge.task import default_kernelbench_dir

    return default_kernelbench_dir()


@pytest.fixture(scope="session")
def relu_task():
    from evoforge.task import Task, parse_shapes

    return Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000}, shapes=parse_shapes("batch_size=3,dim=777"))


@pytest.fixture(scope="session")
def interpreter_evaluator():
    """One sandboxed evaluation process reused across tests, as a campaign reuses it. Built from the backend's
    name alone: the interpreter brings its own environment (TRITON_INTERPRET=1) and memory limit."""
    from evoforge.backends.chain import ChainOptions
    from evoforge.backends.evaluator import Evaluator

    evaluator = Evaluator(backend="interpreter", options=ChainOptions(trials=3, timing=False, seed=42),
                          timeout_s=10, knowledge=False)
    yield evaluator
    evaluator.close()


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evoforge.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd or REPO)
