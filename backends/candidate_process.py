"""The judge's handle on one candidate's process (backends/runner.py): start it, ask, kill it and what it started.

Requests go out pickled (the judge is trusted); replies come back as JSON of bounded size and are never
unpickled, so nothing the candidate's process writes can run code here. A reply that is not JSON, carries the
wrong nonce or comes too late ends the process: its candidate is ``crashed`` or ``timeout``, and the judge goes
on with the next candidate in a fresh process.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from evoforge.core import EvalStatus

_MAX_REPLY_BYTES = 1 << 20
_SINGLE_THREADED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
_CONTEXT: Any = None
CONTAINMENT: Any = None  # how this judge's candidates run (backends/containment.py), decided with the context


def _context() -> Any:
    """multiprocessing's forkserver, with torch, Triton and the runner imported once in it (before any CUDA
    context exists, so forking it is safe): a candidate process starts in tens of milliseconds."""
    context = _bare_context()
    _parent_imports()
    return context


def _bare_context() -> Any:
    """The forkserver context, its preload and its containment decided, without importing anything heavy here:
    the forkserver can start importing torch while this process still does."""
    global _CONTEXT
    if _CONTEXT is None:
        import tempfile
        from multiprocessing import util

        if len(tempfile.gettempdir()) > 60:  # the forkserver's socket lives there: AF_UNIX paths hold 107 bytes
            previous, tempfile.tempdir = tempfile.tempdir, "/tmp"
            try:
                util.get_temp_dir()  # made now, kept (and removed at exit) by multiprocessing
            finally:
                tempfile.tempdir = previous
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["evoforge.backends.runner"])
        global CONTAINMENT
        from evoforge.backends.containment import contain

        home = tempfile.gettempdir()  # the judge's private directory: candidates' directories and the arena
        writable = [home] + [os.environ[k] for k in ("TRITON_CACHE_DIR",) if os.environ.get(k)]
        hide = [p for p in os.environ.get("EVOFORGE_HIDE", "").split(os.pathsep) if p]
        CONTAINMENT = contain(directory=Path(home) / ".containment", writable=writable, hide=hide)
        if CONTAINMENT.executable:
            context.set_executable(CONTAINMENT.executable)
        _CONTEXT = context
    return _CONTEXT


def _parent_imports() -> None:
    """What the judge's side needs before it starts a candidate's process: the process target (the runner; its
    import, torch._dynamo's, paid here) and the CUDA IPC reductions the arena handle travels by."""
    import evoforge.backends.runner  # noqa: F401
    import torch.multiprocessing  # noqa: F401


def warm_up() -> None:
    """Start the forkserver (again, if something ended it) and wait until it has imported what it preloads:
    seconds, paid here rather than from any candidate's time limit."""
    from multiprocessing import forkserver

    context = _bare_context()
    server = forkserver._forkserver  # type: ignore[attr-defined]
    before = server._forkserver_pid
    # One thread per candidate process: the math libraries' pools are fixed when they load (in the forkserver),
    # and a thread the candidate did not start must not look like one it did.
    saved = {k: os.environ.get(k) for k in _SINGLE_THREADED}
    os.environ.update(dict.fromkeys(_SINGLE_THREADED, "1"))
    try:
        server.ensure_running()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    _parent_imports()  # while the forkserver imports the same: two processes, two cores
    if server._forkserver_pid != before:
        process = context.Process(target=_nothing, daemon=True, name="evoforge-warm-up")
        process.start()
        process.join()


def _nothing() -> None:
    pass


class CandidateGone(Exception):
    """The candidate's process can no longer answer: the status and message its candidate ends with."""

    def __init__(self, status: EvalStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (read from /proc: children of children included)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in parents.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


class CandidateProcess:
    """One candidate's process: the candidate imported, ModelNew built per shape, forward run on request."""

    def __init__(self, *, spec: dict[str, Any], workdir: Path, startup_timeout_s: float) -> None:
        warm_up()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        context = _context()
        self._conn, child_conn = context.Pipe(duplex=True)
        self._nonce = secrets.token_hex(8)
        spec = {**spec, "workdir": str(workdir), "nonce": self._nonce}
        from evoforge.backends.runner import serve

        self._process = context.Process(target=serve, args=(child_conn,), daemon=False,
                                        name="evoforge-candidate")
        self._process.start()
        child_conn.close()
        # The spec (with the arena's CUDA IPC handle) goes over the channel, not with the start: the process
        # first closes every descriptor it inherited, and opening the handle initialises CUDA, whose own
        # descriptors must come after that.
        try:
            self._conn.send(spec)
        except (BrokenPipeError, OSError):
            pass  # the read below reports how it died
        self.pid = self._process.pid
        self.requests = 0
        self.arena_generation = -1  # the judge's arena generation this process has mapped
        self.ready = self._read(self._nonce, startup_timeout_s, what="importing the candidate")

    def request(self, op: str, timeout_s: float, **payload: Any) -> dict[str, Any]:
        """Send one request and wait for its reply (or for ``timeout_s`` seconds, then kill)."""
        self.requests += 1
        nonce = f"{self.requests}-{secrets.token_hex(8)}"
        try:
            self._conn.send({"op": op, "nonce": nonce, **payload})
        except (BrokenPipeError, OSError):
            pass  # the read below sees the death and says how it died
        return self._read(nonce, timeout_s, what=op)

    def _read(self, nonce: str, timeout_s: float, *, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + max(timeout_s, 1e-3)
        try:
            while not self._conn.poll(max(deadline - time.monotonic(), 0)):
                if time.monotonic() >= deadline:
                    self.kill()
                    raise CandidateGone(EvalStatus.TIMEOUT, f"no result after {timeout_s:.3g} s ({what}: a hang, or "
                                        "far too slow); the candidate's process was killed")
            raw = self._conn.recv_bytes(_MAX_REPLY_BYTES)
        except (EOFError, ConnectionResetError, BrokenPipeError) as e:
            code = self._reap()
            tail = self.output_tail()
            raise CandidateGone(EvalStatus.CRASHED, f"the candidate's process {_signal_name(code)} ({what})"
                                + (f"; its last output:\n{tail}" if tail else "")) from e
        except OSError as e:  # a length prefix the candidate garbled: a message longer than any reply
            self.kill()
            raise CandidateGone(EvalStatus.CRASHED, "the candidate's process wrote something other than its reply "
                                f"on its channel to the judge ({e}); it was killed") from e
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or reply.get("nonce") != nonce:
            self.kill()
            raise CandidateGone(EvalStatus.CRASHED, "the candidate's process wrote something other than its reply on "
                                f"its channel to the judge: {raw[:120]!r}; it was killed")
        return reply

    def output_tail(self, n: int = 1500) -> str:
        """The end of what the candidate's process printed (its stdout and stderr share one log)."""
        try:
            with open(self.workdir / "output.log", "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(f.tell() - n, 0))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def _reap(self) -> int | None:
        self._process.join(timeout=10)
        if self._process.exitcode is None:
            self.kill()
        return self._process.exitcode

    def host_pid(self) -> int | None:
        """The candidate process's PID here: multiprocessing knows it by its number inside the containment's PID
        namespace, where there is one."""
        if self._process.pid is None:
            return None
        if CONTAINMENT is None or CONTAINMENT.mode != "bwrap":
            return self._process.pid
        from multiprocessing import forkserver

        from evoforge.backends.containment import host_pid

        wrapper = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]  (bwrap, outside)
        inside = next(iter(descendants(wrapper)), None) if wrapper else None  # its first child is inside
        return host_pid(self._process.pid, inside) if inside else None

    def kill(self) -> None:
        """SIGKILL the process and everything it started (a candidate allowed to start processes)."""
        root = self.host_pid()
        if root is None:
            self._process.join(timeout=10)
            return
        for pid in [*descendants(root), root]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._process.join(timeout=10)

    def close(self) -> None:
        if self._process.exitcode is None:
            try:
                self._conn.send({"op": "exit", "nonce": ""})
            except (BrokenPipeError, OSError):
                pass
            self._process.join(timeout=2)
        self.kill()
        self._conn.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

