"""The judge's handle on one candidate's process (judge/runner.py): start it, ask, kill it and what it started.

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
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoforge.judge.options import ARENA_MODES

from evoforge.core import EvalStatus, last_error_line, without_terminal_codes

_MAX_REPLY_BYTES = 1 << 20
_WATCH_S = 0.1  # how often the judge looks at what a candidate's process takes while it waits
_SINGLE_THREADED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
_CONTEXT: Any = None
CONTAINMENT: Any = None  # how this judge's candidates run (judge/containment.py), decided with the context


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
        context.set_forkserver_preload(["evoforge.judge.runner"])
        global CONTAINMENT
        from evoforge.judge.containment import contain

        home = tempfile.gettempdir()  # the judge's private directory: candidates' directories and the arena
        writable = [home] + [os.environ[k] for k in ("TRITON_CACHE_DIR",) if os.environ.get(k)]
        hide = [p for p in os.environ.get("EVOFORGE_HIDE", "").split(os.pathsep) if p]
        CONTAINMENT = contain(directory=Path(home) / ".containment", writable=writable, hide=hide)
        if CONTAINMENT.executable:
            context.set_executable(CONTAINMENT.executable)
        _CONTEXT = context
    return _CONTEXT


def arena_mode(device: str) -> str:
    """How the judge's arena reaches the candidate's process (judge/arena.py). Shared (CUDA IPC, or a mapped file
    on the CPU) unless the candidate is contained on a GPU: its process cannot open a CUDA IPC handle from inside
    bubblewrap's namespaces (measured on the H200: cudaErrorMapBufferObjectFailed), so the arena is exported as a
    file descriptor where the driver can (judge/vmm.py), else staged through a file. ``EVOFORGE_ARENA=shared|
    staged|exported`` decides instead (the tests run each protocol on the CPU)."""
    forced = os.environ.get("EVOFORGE_ARENA", "")
    if forced in ARENA_MODES:
        return forced
    if not device.startswith("cuda"):
        return "shared"
    _bare_context()
    if CONTAINMENT is None or CONTAINMENT.mode != "bwrap":
        return "shared"
    from evoforge.judge import vmm

    return "exported" if vmm.supported(device) else "staged"


def _parent_imports() -> None:
    """What the judge's side needs before it starts a candidate's process: the process target (the runner; its
    import, torch._dynamo's, paid here) and the CUDA IPC reductions the arena handle travels by."""
    import evoforge.judge.runner  # noqa: F401
    import torch.multiprocessing  # noqa: F401


class CandidatesCannotLoad(Exception):
    """No candidate's process can load here (the forkserver's children cannot import the runner: evoforge, torch
    or Triton is out of their reach); the message is the cause, one line."""


def forkserver_log() -> Path:
    """Where the forkserver and its children write until a candidate's own log takes over (``serve`` opens it):
    what a candidate's process says when it dies before loading (an import that fails in the child) is read here,
    not lost in the judge's stderr. In multiprocessing's private directory of this process."""
    from multiprocessing import util

    return Path(util.get_temp_dir()) / "forkserver.log"


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _log_since(path: Path, offset: int, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(offset, _log_size(path) - n))
            return without_terminal_codes(f.read().decode(errors="replace")).strip()
    except OSError:
        return ""


def warm_up() -> None:
    """Start the forkserver (again, if something ended it) and wait until it has imported what it preloads:
    seconds, paid here rather than from any candidate's time limit. A fresh forkserver's first child loads the
    runner; if it cannot, ``CandidatesCannotLoad`` says why (no candidate could load either)."""
    from multiprocessing import forkserver

    context = _bare_context()
    server = forkserver._forkserver  # type: ignore[attr-defined]
    before = server._forkserver_pid
    # One thread per candidate process: the math libraries' pools are fixed when they load (in the forkserver),
    # and a thread the candidate did not start must not look like one it did.
    saved = {k: os.environ.get(k) for k in _SINGLE_THREADED}
    os.environ.update(dict.fromkeys(_SINGLE_THREADED, "1"))
    log = os.open(forkserver_log(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    stderr = os.dup(2)
    os.dup2(log, 2)  # what a started forkserver (and each child, until it opens its own log) writes goes there
    try:
        server.ensure_running()
    finally:
        os.dup2(stderr, 2)
        os.close(stderr)
        os.close(log)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    _parent_imports()  # while the forkserver imports the same: two processes, two cores
    if server._forkserver_pid != before:
        offset = _log_size(forkserver_log())
        process = context.Process(target=_load_runner, daemon=True, name="evoforge-warm-up")
        process.start()
        process.join()
        if process.exitcode != 0:
            said = last_error_line(_log_since(forkserver_log(), offset), fallback=False)
            raise CandidatesCannotLoad(f"a candidate's process cannot load evoforge's runner: "
                                       f"{said or 'it ' + _signal_name(process.exitcode)}"
                                       + _hidden_needs_note())


def _load_runner() -> None:
    """The warm-up child: what every candidate's process imports before its candidate (preloaded by the
    forkserver, so nothing to do unless the preload failed, which multiprocessing does not say)."""
    import evoforge.judge.runner  # noqa: F401


def _hidden_needs_note() -> str:
    """Where containment hides a folder the judge imports from (it stays hidden, on purpose), that is the cause."""
    if CONTAINMENT is None or not CONTAINMENT.hidden_needs:
        return ""
    return (" (containment hides " + ", ".join(CONTAINMENT.hidden_needs) + ", which this Python imports from: "
            "keep the run directory and credential folders apart from the Python environment)")


@dataclass(frozen=True)
class Bounds:
    """What one candidate's process may take of the machine, beyond time: processes and threads at once (counted
    by the judge, since a per-user limit does not bind root), bytes and files written into its directory, the size
    of any one file (``RLIMIT_FSIZE``, set in the process). Each from its ``EVOFORGE_MAX_*`` variable."""

    processes: int = 256  # EVOFORGE_MAX_PROCESSES: processes and threads of the candidate, together
    disk_bytes: int = 4 << 30  # EVOFORGE_MAX_DISK_BYTES: written into the judge's directory (the candidate's own)
    files: int = 100_000  # EVOFORGE_MAX_FILES: files made there
    file_bytes: int = 2 << 30  # EVOFORGE_MAX_FILE_BYTES: any one file, anywhere

    @classmethod
    def from_environment(cls) -> Bounds:
        names = {"processes": "EVOFORGE_MAX_PROCESSES", "disk_bytes": "EVOFORGE_MAX_DISK_BYTES",
                 "files": "EVOFORGE_MAX_FILES", "file_bytes": "EVOFORGE_MAX_FILE_BYTES"}
        return cls(**{field: int(os.environ[var]) for field, var in names.items() if os.environ.get(var)})


def tasks_of(pids: list[int]) -> int:
    """Processes and threads, together, of the processes ``pids`` (those already gone count nothing)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[17])  # num_threads
        except (OSError, IndexError, ValueError):
            pass
    return total


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                found.append(int(entry))
    return found


def _system_tasks() -> int:
    """Every task on the machine (the fourth field of /proc/loadavg): one cheap read that tells whether a precise
    count is worth making."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 0


def directory_usage(path: Path, exclude: tuple[str, ...] = ()) -> tuple[int, int]:
    """(bytes on disk, files) under ``path``, but for the folders ``exclude``."""
    used, files = 0, 0
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in exclude]
        for name in names + dirs:
            try:
                used += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
            files += 1
    return used, files


class ResourceWatch:
    """The judge's watch on one candidate's use of processes and disk, while it waits for the candidate's answer.

    Cheap signs first (the machine's task count, the free space and free inodes of the file system holding the
    judge's directory), a precise count only when a sign moved by more than the bound: a waiting judge costs
    almost nothing, and a fork bomb or a disk fill is found within one poll."""

    def __init__(self, bounds: Bounds, directory: Path, exclude: tuple[str, ...] = ()) -> None:
        self.bounds = bounds
        self.directory = directory  # everything the candidate may write to (the judge's directory, its own inside)
        self.exclude = exclude
        self._tasks = _system_tasks()
        self._base = directory_usage(directory, exclude)
        self._sign = self._free()

    def _free(self) -> tuple[int, int]:
        try:
            st = os.statvfs(self.directory)
        except OSError:
            return (0, 0)
        return st.f_bavail * st.f_frsize, st.f_favail

    def over(self, pgid: int | None, root: int | None) -> str | None:
        """What the candidate took past its bounds (the message of its refusal), else None."""
        b = self.bounds
        if pgid is not None and _system_tasks() - self._tasks > b.processes:
            members = set(group_members(pgid)) | ({root, *descendants(root)} if root else set())
            count = tasks_of(sorted(members))
            if count > b.processes:
                return (f"refused: the candidate ran {count} processes and threads at once, over its bound of "
                        f"{b.processes} (a fork bomb?); all of them were killed")
            self._tasks = _system_tasks() - count  # the machine's own work moved the sign: start from here
        space, inodes = self._free()
        if self._sign[0] - space > b.disk_bytes or self._sign[1] - inodes > b.files:
            used, files = directory_usage(self.directory, self.exclude)
            grown, made = used - self._base[0], files - self._base[1]
            if grown > b.disk_bytes:
                return (f"refused: the candidate wrote {grown >> 20} MiB into its directory, over its bound of "
                        f"{b.disk_bytes >> 20} MiB; it was killed and its files removed")
            if made > b.files:
                return (f"refused: the candidate made {made} files in its directory, over its bound of {b.files}; "
                        "it was killed and its files removed")
            self._sign = (space + max(grown, 0), inodes + max(made, 0))  # others' writes moved the sign
        return None


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


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


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

    def __init__(self, *, spec: dict[str, Any], workdir: Path, startup_timeout_s: float,
                 arena_fd: int | None = None) -> None:
        warm_up()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.bounds = Bounds.from_environment()
        # In the evaluation process, everything a candidate may write is the judge's private directory (its TMPDIR);
        # the judge's arena file there grows on the judge's account, not the candidate's.
        watched = Path(tempfile.gettempdir()) if os.environ.get("EVOFORGE_PARENT_PID") else workdir
        arena = (spec.get("arena") or {}).get("path")
        self._watch = ResourceWatch(self.bounds, watched, exclude=(os.path.dirname(arena),) if arena else ())
        self._host_pid: int | None = None
        context = _context()
        self._conn, child_conn = context.Pipe(duplex=True)
        self._nonce = secrets.token_hex(8)
        self._early_log = _log_size(forkserver_log())  # what the process says before its own log takes over
        spec = {**spec, "workdir": str(workdir), "nonce": self._nonce, "max_file_bytes": self.bounds.file_bytes}
        from evoforge.judge.runner import serve

        self._process = context.Process(target=serve, args=(child_conn,), daemon=False,
                                        name="evoforge-candidate")
        self._process.start()
        child_conn.close()
        # The spec (with the arena's CUDA IPC handle) goes over the channel, not with the start: the process
        # first closes every descriptor it inherited, and opening the handle initialises CUDA, whose own
        # descriptors must come after that.
        try:
            self._send(spec, arena_fd)
        except (BrokenPipeError, OSError):
            pass  # the read below reports how it died
        self.pid = self._process.pid
        self.requests = 0
        self.arena_generation = -1  # the judge's arena generation this process has mapped
        self.ready = self._read(self._nonce, startup_timeout_s, what="importing the candidate")

    def _send(self, message: dict[str, Any], arena_fd: int | None) -> None:
        """One message; an exported arena's descriptor right after the message whose handle names it."""
        self._conn.send(message)
        if (message.get("arena") or {}).get("fd_follows"):
            if arena_fd is None:
                raise ValueError("an exported arena's handle needs its descriptor (arena_fd)")
            from evoforge.judge.arena import send_fd

            send_fd(self._conn, arena_fd)

    def request(self, op: str, timeout_s: float, *, arena_fd: int | None = None, **payload: Any) -> dict[str, Any]:
        """Send one request and wait for its reply (or for ``timeout_s`` seconds, then kill)."""
        self.requests += 1
        nonce = f"{self.requests}-{secrets.token_hex(8)}"
        try:
            self._send({"op": op, "nonce": nonce, **payload}, arena_fd)
        except (BrokenPipeError, OSError):
            pass  # the read below sees the death and says how it died
        return self._read(nonce, timeout_s, what=op)

    def _read(self, nonce: str, timeout_s: float, *, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + max(timeout_s, 1e-3)
        try:
            while not self._conn.poll(min(max(deadline - time.monotonic(), 0), _WATCH_S)):
                refused = self._watch.over(self._root(), self._root())
                if refused:
                    self.kill()
                    raise CandidateGone(EvalStatus.REJECTED, f"{refused} ({what})")
                if time.monotonic() >= deadline:
                    self.kill()
                    raise CandidateGone(EvalStatus.TIMEOUT, f"no result after {timeout_s:.3g} s ({what}: a hang, or "
                                        "far too slow); the candidate's process was killed")
            raw = self._conn.recv_bytes(_MAX_REPLY_BYTES)
        except (EOFError, ConnectionResetError, BrokenPipeError) as e:
            code = self._reap()
            tail = self.output_tail() or _log_since(forkserver_log(), self._early_log, 1500)
            cause = last_error_line(tail, fallback=False)
            raise CandidateGone(EvalStatus.CRASHED, f"the candidate's process {_signal_name(code)} ({what})"
                                + (f": {cause}" if cause else "")
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
                return without_terminal_codes(f.read().decode(errors="replace")).strip()
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

        from evoforge.judge.containment import host_pid

        wrapper = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]  (bwrap, outside)
        inside = next(iter(descendants(wrapper)), None) if wrapper else None  # its first child is inside
        return host_pid(self._process.pid, inside) if inside else None

    def _root(self) -> int | None:
        """The candidate process's PID here (and its process group's: it leads one), found once."""
        if self._host_pid is None and self._process.exitcode is None:
            self._host_pid = self.host_pid()
        return self._host_pid

    def kill(self) -> None:
        """SIGKILL the process and everything it started (a candidate allowed to start processes): its process group
        at once (a fork bomb's new children are born into it and cannot outrun one kill), then whatever left the
        group, until nothing is left."""
        root = self._root()
        if root is None:
            self._process.join(timeout=10)
            return
        for _ in range(10):
            try:
                os.killpg(root, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            left = [*descendants(root), root] if os.path.exists(f"/proc/{root}") else []
            left += [p for p in group_members(root) if p not in left]
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if not left or all(not _running(p) for p in left):
                break
            time.sleep(0.05)
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

