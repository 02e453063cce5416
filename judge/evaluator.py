"""The chain's front door: checks that need no process (``precheck``), then the sandboxed run."""

from __future__ import annotations

import os
from typing import Any

from evoforge.backends.registry import get_backend
from evoforge.judge.options import ChainOptions
from evoforge.judge.precheck import precheck
from evoforge.judge.sandbox import Sandbox

from evoforge.core import Candidate, EvalResult
from evoforge.task import Task


class Evaluator:
    """Evaluates candidates of one backend, one at a time, reusing one sandboxed process.

    Built from a backend's name alone: the backend says how its evaluation process is set up (the interpreter's
    ``TRITON_INTERPRET=1`` and memory limit), so ``Evaluator(backend="interpreter")`` works wherever it is made.
    ``child_env`` adds variables to the backend's; ``memory_limit_bytes`` replaces the backend's limit.
    ``arch`` defaults to the device's (which, on a GPU, asks the driver).
    """

    def __init__(self, *, backend: str, arch: str | None = None, options: ChainOptions | None = None,
                 timeout_s: float = 120.0, knowledge: bool = True, backend_options: dict[str, Any] | None = None,
                 child_env: dict[str, str] | None = None, memory_limit_bytes: int | None = None,
                 hide_paths: list[str] | None = None) -> None:
        device = get_backend(backend, arch=arch, **(backend_options or {}))
        # A simulated device (the replay backend in a campaign) answers itself: no sandbox process is started.
        self.simulated = device if getattr(device, "simulated", False) else None
        process = device.evaluation_process()
        self.backend = device.name
        self.arch = arch or device.arch
        self.options = options or ChainOptions()
        self.knowledge = knowledge
        limit = memory_limit_bytes if memory_limit_bytes is not None else process.memory_limit_bytes
        env = {**process.env, **(child_env or {})}
        # What contained candidates must not see: the caller's credential folders and its run directory and
        # storage (the judge's own $HOME is a fresh directory, so the caller names them).
        from evoforge.judge.containment import CREDENTIAL_DIRS

        home = os.path.expanduser("~")
        hidden = [os.path.join(home, d) for d in CREDENTIAL_DIRS] + list(hide_paths or [])
        env["EVOFORGE_HIDE"] = os.pathsep.join(p for p in [*env.get("EVOFORGE_HIDE", "").split(os.pathsep), *hidden]
                                               if p)
        self.sandbox = Sandbox(backend=self.backend, backend_options={**(backend_options or {}), "arch": self.arch},
                               timeout_s=timeout_s, child_env=env, memory_limit_bytes=limit)

    def precheck(self, candidate: Candidate) -> EvalResult | None:
        return precheck(candidate, backend=self.backend, arch=self.arch, knowledge=self.knowledge)[1]

    def evaluate(self, task: Task, candidate: Candidate, options: ChainOptions | None = None, *,
                 timeout_s: float | None = None) -> EvalResult:
        """One candidate through the chain; ``options`` and ``timeout_s`` replace the evaluator's own for this one
        (one evaluator, and its warm process, serving several campaigns or callers)."""
        chosen = options or self.options
        if self.simulated is not None:
            checked, failure = precheck(candidate, backend=self.backend, arch=self.arch, knowledge=self.knowledge)
            return failure or self.simulated.answer(task.name, checked)
        if chosen.baseline:  # no candidate runs: the judge times the baseline (``compile_baseline``)
            return self.sandbox.evaluate(task, candidate, chosen.to_dict(), timeout_s=timeout_s)
        # A candidate stamped by the campaign's precheck is not checked statically again; the stamp goes on.
        checked, failure = precheck(candidate, backend=self.backend, arch=self.arch, knowledge=self.knowledge)
        return failure or self.sandbox.evaluate(task, checked, chosen.to_dict(), timeout_s=timeout_s)

    def compile_baseline(self, task: Task, options: ChainOptions | None = None, *,
                         timeout_s: float | None = None) -> EvalResult:
        """torch.compile's default (static) build of the task's reference, timed against the reference in the
        judge as a candidate is: ``runtime_ms`` is torch.compile's time, ``speedup`` its speedup over eager."""
        from dataclasses import replace

        return self.evaluate(task, baseline_candidate(task), replace(options or self.options, baseline="compile"),
                             timeout_s=timeout_s)

    def start(self) -> dict[str, str]:
        """Start the evaluation process now (a simulated device has none); how its candidates are contained."""
        if self.simulated is not None:
            return {"mode": "simulated", "why": "the replay backend answers from recorded timings: nothing runs"}
        self.sandbox.start()
        return self.containment

    @property
    def containment(self) -> dict[str, str]:
        """How this evaluator's candidates run (mode and a one-line why), as its judge reported when it started;
        empty before the first evaluation."""
        return dict(self.sandbox.containment)

    def close(self) -> None:
        self.sandbox.close()


def baseline_candidate(task: Task) -> Candidate:
    """What stands for torch.compile's build where a candidate is expected (the pool's jobs carry one)."""
    return Candidate(source=task.source, task=task.name, operator="torch.compile", meta={"baseline": True})
