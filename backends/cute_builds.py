"""Compile ahead: CuTe candidates are built with nvcc on CPU threads while the GPU evaluates others.

Compile time is the cost of CuTe (a CUTLASS-based kernel takes one to three minutes of nvcc). Building inside
the evaluation would hold a GPU evaluator idle for that long; nvcc needs no GPU. So the campaign hands each
CuTe child to ``BuildAhead`` first: the build runs on a thread (nvcc is a process of its own, so threads run
builds in parallel), the child goes to the evaluators once its library is in the build cache, where the
candidate's own ``load`` finds it. A build that fails never reaches a GPU: its trimmed compile error is the
child's result, the message a repair operator gets.

One build per distinct (CUDA source, params, target): candidates that share one (a retuned child whose params
came back to an earlier point, two operators that made the same kernel) share its future, so nvcc never runs
twice for the same library, in flight or after (the on-disk cache of ``backends/cute.py`` serves later ones).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from evoforge.backends.cute import (
    Build,
    CuteCompileError,
    CuteToolchainError,
    build_candidate,
    cuda_source_of,
    defines_from_params,
    kill_running_builds,
    nvcc_arch,
    source_key,
)

from evoforge.core import Candidate, EvalResult, EvalStatus


def default_build_workers() -> int:
    """nvcc is single-threaded and memory-hungry on CUTLASS headers (about 1-2 GB each): one per core, up to 16."""
    return max(1, min(16, os.cpu_count() or 1))


@dataclass(frozen=True)
class BuildOutcome:
    """What a candidate's build came to: its library, or the compile error that is its result.

    ``compile_s`` is the nvcc time this build cost (0 for a library that was cached or built for another
    candidate); ``how`` is ``nvcc``, ``cached`` (on disk already), ``shared`` (built for another candidate of
    this campaign) or ``prebuilt``.
    """

    source_key: str
    build: Build | None
    failure: EvalResult | None
    compile_s: float
    how: str

    def as_meta(self) -> dict[str, Any]:
        return {"source_key": self.source_key, "compile_s": round(self.compile_s, 3), "how": self.how}


class BuildAhead:
    """A pool of nvcc builds keyed by library: ``submit(candidate)`` returns the future of its outcome."""

    def __init__(self, *, arch: str, workers: int | None = None, opt: str = "-O3", timeout_s: float = 900.0) -> None:
        self.arch = arch
        self.timeout_s = timeout_s  # one nvcc run; a CUTLASS kernel takes 1-3 minutes on an idle core
        self.target = nvcc_arch(arch)
        self.opt = opt
        self.workers = workers or default_build_workers()
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="evoforge-nvcc")
        self._builds: dict[str, Future[BuildOutcome]] = {}
        self._lock = threading.Lock()
        self.nvcc_runs = 0  # builds that ran nvcc (a cache hit does not)

    def key(self, candidate: Candidate) -> str:
        """The library's identity: the same as ``backends.cute.source_key`` names it in the cache."""
        src, _ = cuda_source_of(candidate.source)
        return source_key(src, arch=self.target, defines=defines_from_params(candidate.params), opt=self.opt)

    def submit(self, candidate: Candidate) -> Future[BuildOutcome]:
        """The build of ``candidate``'s library, started now or shared with the one already started."""
        try:
            key = self.key(candidate)
        except CuteCompileError as e:  # no CUDA_SRC literal, or a param that cannot be a macro: no nvcc at all
            done: Future[BuildOutcome] = Future()
            done.set_result(BuildOutcome("", None, _failure(str(e), self.arch, 0.0), 0.0, "none"))
            return done
        with self._lock:
            known = self._builds.get(key)
            if known is not None:
                return _shared(known)
            future = self._executor.submit(self._build, candidate, key)
            self._builds[key] = future
            return future

    def build_all(self, candidates: list[Candidate]) -> list[BuildOutcome]:
        """A whole generation's builds at once, in parallel; returns when all are done (outcomes in order)."""
        futures = [self.submit(c) for c in candidates]
        return [f.result() for f in futures]

    def _build(self, candidate: Candidate, key: str) -> BuildOutcome:
        started = time.perf_counter()
        try:
            info = build_candidate(candidate, self.arch, opt=self.opt, timeout_s=self.timeout_s)
        except CuteCompileError as e:
            with self._lock:
                self.nvcc_runs += 1
            seconds = time.perf_counter() - started
            return BuildOutcome(key, None, _failure(str(e), self.arch, seconds, len(e.raw_log)), seconds, "nvcc")
        except CuteToolchainError as e:  # not the candidate's fault, but it cannot run: said on its result
            return BuildOutcome(key, None, _failure(f"the CuTe toolchain is unusable here: {e}", self.arch, 0.0),
                                0.0, "none")
        if not info.cached:
            with self._lock:
                self.nvcc_runs += 1
        how = "prebuilt" if info.prebuilt else "cached" if info.cached else "nvcc"
        return BuildOutcome(key, info, None, info.seconds, how)

    def close(self, *, kill: bool = True) -> None:
        """Builds not started are dropped; running ones are killed (``kill``), so nothing waits on nvcc after."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        if kill:
            kill_running_builds()


def _shared(first: Future[BuildOutcome]) -> Future[BuildOutcome]:
    """A second candidate's view of a build already started: the same outcome, its nvcc time not counted again."""
    out: Future[BuildOutcome] = Future()

    def relay(done: Future[BuildOutcome]) -> None:
        try:
            o = done.result()
        except Exception as e:  # pragma: no cover - _build catches what nvcc can raise
            out.set_exception(e)
            return
        failure = o.failure
        if failure is not None:
            failure = EvalResult.from_dict({**failure.to_dict(), "compile_s": 0.0})
        out.set_result(BuildOutcome(o.source_key, o.build, failure, 0.0,
                                    "shared" if o.how == "nvcc" else o.how))

    first.add_done_callback(relay)
    return out


def _failure(message: str, arch: str, seconds: float, raw_chars: int = 0) -> EvalResult:
    return EvalResult.failure(EvalStatus.COMPILE_ERROR, message, arch=arch, compile_s=seconds,
                              details={"stage": "compile", "ahead": True, "raw_log_chars": raw_chars})
