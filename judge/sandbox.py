"""Run the verification chain in a child process that can be killed.

A hang past the timeout is ``timeout``; a child that dies (segfault, abort, OOM kill, exit) is ``crashed``;
the caller survives both and the next evaluation gets a fresh process. The child is reused between
evaluations while it stays healthy, so Python, torch and Triton are imported once, not per candidate.

The child answers each request with one JSON line carrying the request's id on a private pipe. A line that
is not such an answer (a candidate that wrote into the pipe), or anything written while no request is in
flight, means the process can no longer be trusted: it is killed and the candidate recorded as ``crashed``,
so a later candidate never receives an earlier one's answer. The child dies with its parent (a Ray actor
killed from outside), so a hung kernel is never left spinning.

What is isolated: the process (killable), its environment (only an allowlist of variables passes; nothing
named like a key, token, secret or password), its working and temporary directory (a fresh one), core dumps
(off), open files and, where the backend allows, address space. What is not: the file system and the network
are those of the user running evoforge. This is not a security sandbox against a determined attacker: run
the workers in a container per Ray worker (or a VM) for that.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evoforge.judge.containment import SECRET_WORDS, protect_secrets

from evoforge.core import (
    Candidate,
    EvalResult,
    EvalStatus,
    UsageError,
    last_error_line,
    without_terminal_codes,
)
from evoforge.task import Task

_ENV_PREFIXES = ("PATH", "LANG", "LC_", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CUDA_", "NVIDIA_",
                 "TRITON_", "OMP_NUM_THREADS", "MKL_", "OPENBLAS_", "TORCH_", "PYTORCH_", "ZE_", "ONEAPI_", "SYCL_",
                 "NEOReadDebugKeys", "HIP_", "ROCR_", "CC", "CXX", "EVOFORGE_KERNELBENCH", "EVOFORGE_CUTE_",
                 "EVOFORGE_CUTLASS_INCLUDE", "EVOFORGE_CONTAINMENT", "EVOFORGE_HIDE", "EVOFORGE_BWRAP",
                 "EVOFORGE_MAX_", "EVOFORGE_TMP_BYTES", "EVOFORGE_ARENA")


def scrubbed_environment(extra: dict[str, str] | None = None, *, home: str) -> dict[str, str]:
    """Only what a kernel needs to compile and run; nothing that looks like a credential."""
    env = {k: v for k, v in os.environ.items()
           if k.startswith(_ENV_PREFIXES) and not any(w in k.upper() for w in SECRET_WORDS)}
    env.setdefault("TRITON_CACHE_DIR", str(Path.home() / ".triton" / "cache"))
    env.update({"HOME": home, "TMPDIR": home, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


_MAX_LINE_BYTES = 16 << 20  # a result is a few KB; a longer line is a candidate flooding the pipe
# How long an evaluation may wait for its device's turn, in timeouts (other evaluations of the GPU measure).
TURN_WAIT_FACTOR = 4
# Beyond an evaluation's timeout, how long the judge may take before this process stops waiting for it.
JUDGE_GRACE_S = 30.0
_FLOOD = "\0flood"


def _event(line: str | None, request_id: str) -> str | None:
    """The progress event a result-pipe line carries for this request ("turn-wait", "turn"), else None."""
    if not line or '"event"' not in line:
        return None
    message = _parse_line(line)
    event = message.get("event")
    return event if message.get("id") == request_id and event in ("turn-wait", "turn") else None


def _parse_line(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


_SAID: set[str] = set()


def _say_uncontained(containment: dict[str, str]) -> None:
    """Candidates that run uncontained are never so silently: one line on this process's stderr (the user's
    terminal, or the driver's through Ray's log forwarding), once per reason."""
    why = containment.get("why", "")
    if containment.get("mode") == "none" and why not in _SAID:
        _SAID.add(why)
        print(f"evoforge: {why}", file=sys.stderr, flush=True)


class EvaluationEnvironmentError(UsageError):
    """The evaluation process cannot start here, whatever the candidate: it (or a candidate's process below it)
    cannot import evoforge, torch or Triton, or dies before it is ready. One line naming the cause: a campaign
    stops at start-up on it (``EvalPool.wait_started``) instead of recording every candidate ``crashed``."""


class Sandbox:
    """One evaluation process for one backend; restarted after it dies or hangs."""

    def __init__(self, *, backend: str, backend_options: dict[str, Any] | None = None, timeout_s: float = 120.0,
                 startup_timeout_s: float = 180.0, memory_limit_bytes: int | None = None,
                 child_env: dict[str, str] | None = None, turn_wait_s: float | None = None) -> None:
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.timeout_s = timeout_s
        # Waiting for the device's turn (other evaluations of the same GPU measuring) does not count against
        # timeout_s: a healthy kernel must not time out because its neighbour hung. It has a bound of its own.
        self.turn_wait_s = turn_wait_s if turn_wait_s is not None else TURN_WAIT_FACTOR * timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.memory_limit_bytes = memory_limit_bytes
        self.child_env = dict(child_env or {})
        self._proc: subprocess.Popen[str] | None = None
        self._home: tempfile.TemporaryDirectory[str] | None = None
        self._stderr_path: Path | None = None
        self._pending = b""  # bytes read from the result pipe past the last complete line
        self._requests = 0
        self.restarts = 0
        self.containment: dict[str, str] = {}  # how the judge's candidates run, from its "ready" line

    def _start(self) -> None:
        # This process starts judges from a scrubbed environment; if it holds a credential itself (``evoforge eval``
        # run from a shell with a key), no candidate may read it from /proc/<this pid>.
        protect_secrets()
        self._home = tempfile.TemporaryDirectory(prefix="evoforge-sandbox-")
        extra = dict(self.child_env)
        if self.memory_limit_bytes:
            extra["EVOFORGE_MEMORY_LIMIT_BYTES"] = str(self.memory_limit_bytes)
        extra["EVOFORGE_PARENT_PID"] = str(os.getpid())  # the child dies with this process
        env = scrubbed_environment(extra, home=self._home.name)
        self._stderr_path = Path(self._home.name) / "stderr.log"
        stderr = open(self._stderr_path, "w")  # noqa: SIM115  (owned by the child)
        # -P: the installed evoforge, whatever folder this process runs in (a checkout's partial evoforge/ there
        # would shadow it); the forkserver below inherits the flag.
        self._proc = subprocess.Popen([sys.executable, "-P", "-m", "evoforge.judge.worker"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=self._home.name,
                                      text=True, start_new_session=True)
        stderr.close()
        self._pending = b""
        line = self._read_line(self.startup_timeout_s)
        self.containment = _parse_line(line).get("containment") or {} if line else {}
        _say_uncontained(self.containment)
        if not line or not _parse_line(line).get("ready"):
            refused = _parse_line(line).get("error") if line else None
            try:
                code = self._proc.wait(timeout=5) if line is not None else None
            except subprocess.TimeoutExpired:
                code = None
            tail = self._stderr_tail()
            self._kill()
            if refused or line is not None:  # it said why, or died before ready: no candidate could run here
                cause = refused or last_error_line(tail) or (f"it {_signal_name(code)}, saying nothing"
                                                             if code is not None else "it said nothing")
                raise EvaluationEnvironmentError(f"the evaluation process for backend {self.backend} cannot start: "
                                                 f"{cause}")
            raise RuntimeError(f"the evaluation process for backend {self.backend} did not start within "
                               f"{self.startup_timeout_s:g} s: {tail}")

    def start(self) -> None:
        """Start the evaluation process now, not at the first candidate (a campaign's start-up check); raises
        ``EvaluationEnvironmentError`` where it cannot start."""
        if self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._start()

    def _read_line(self, timeout_s: float) -> str | None:
        """One line from the result pipe, read unbuffered so no line waits unseen in a buffer.

        None: nothing within the timeout; "": EOF (the process died); ``_FLOOD``: a line past any result's size.
        """
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._pending:
                if len(self._pending) > _MAX_LINE_BYTES:
                    return _FLOOD
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                if sel.select(timeout=remaining):
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        return ""
                    self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode(errors="replace") + "\n"

    def _unexpected_output(self) -> bool:
        """Anything on the result pipe while no request is in flight: a candidate wrote into it."""
        if self._proc is None or self._proc.stdout is None:
            return False
        if self._pending:
            return True
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout.fileno(), selectors.EVENT_READ)
            return bool(sel.select(timeout=0))

    def _stderr_tail(self, n: int = 1500) -> str:
        try:
            text = self._stderr_path.read_text(errors="replace") if self._stderr_path else ""
        except OSError:
            return ""
        return without_terminal_codes(text)[-n:].strip()

    def _kill(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream:
                    try:
                        stream.close()
                    except OSError:
                        pass
        self._proc = None
        if self._home is not None:
            self._home.cleanup()
            self._home = None

    def close(self) -> None:
        self._kill()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def evaluate(self, task: Task, candidate: Candidate, options: dict[str, Any] | None = None,
                 timeout_s: float | None = None) -> EvalResult:
        if self._proc is None or self._proc.poll() is not None or self._unexpected_output():
            if self._proc is not None:
                self.restarts += 1
            self._kill()
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        self._requests += 1
        request_id = f"{self._requests}-{secrets.token_hex(8)}"
        limit = timeout_s or self.timeout_s
        # The judge holds the candidate's process to ``limit`` itself and answers ``timeout``; this process's
        # own clock is the backstop for a judge that stops answering, with room for the judge's own work.
        request = {"id": request_id, "task": task.to_dict(), "candidate": candidate.to_dict(),
                   "backend": self.backend, "backend_options": self.backend_options,
                   "options": {**(options or {}), "timeout_s": limit}}
        started = time.perf_counter()
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # read below sees EOF and reports the crash
        budget, waiting = limit + max(JUDGE_GRACE_S, 0.5 * limit), False
        while True:
            segment = time.perf_counter()
            line = self._read_line(self.turn_wait_s if waiting else max(budget, 1e-3))
            event = _event(line, request_id)
            if event == "turn-wait":  # the clock stops while the device is someone else's
                budget -= time.perf_counter() - segment
                waiting = True
            elif event == "turn":
                waiting = False
            else:
                break
        elapsed = time.perf_counter() - started
        if line is None:
            self._kill()
            if waiting:
                return EvalResult.failure(EvalStatus.TIMEOUT, f"waited {self.turn_wait_s:g} s for the device's turn "
                                          "(other evaluations of this GPU held it); the evaluation process was "
                                          "killed", eval_s=elapsed, backend=self.backend)
            return EvalResult.failure(EvalStatus.TIMEOUT, f"no result after {limit:g} s (a hang, or far too slow); "
                                      "the evaluation process was killed", eval_s=elapsed, backend=self.backend)
        if line == _FLOOD:
            self._kill()
            return EvalResult.failure(EvalStatus.CRASHED, f"the evaluation process wrote over {_MAX_LINE_BYTES >> 20} "
                                      "MiB on its result pipe without ending a line (did the candidate write into "
                                      "it?); the process was killed", eval_s=elapsed, backend=self.backend)
        if line == "":
            assert self._proc is not None
            try:
                code = self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # closed its result pipe but lives on
                os.killpg(self._proc.pid, signal.SIGKILL)
                code = self._proc.wait()
            tail = self._stderr_tail()
            self._kill()
            cause = last_error_line(tail, fallback=False)
            return EvalResult.failure(EvalStatus.CRASHED, f"the evaluation process {_signal_name(code)}"
                                      + (f": {cause}" if cause else "")
                                      + (f"; its last output:\n{tail}" if tail else ""), eval_s=elapsed,
                                      backend=self.backend)
        answer = _parse_line(line)
        if answer.get("id") != request_id or not isinstance(answer.get("result"), dict):
            self._kill()
            return EvalResult.failure(EvalStatus.CRASHED, "the evaluation process wrote something other than "
                                      "this candidate's result on its result pipe (did the candidate write into "
                                      f"it?): {line.strip()[:200]!r}; the process was killed", eval_s=elapsed,
                                      backend=self.backend)
        result = EvalResult.from_dict(answer["result"])
        if result.details.get("judge_error"):
            self._kill()  # the judge's own side failed (its device context may be broken): start clean next time
        return result
