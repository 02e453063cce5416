"""The evaluation process: reads requests as JSON lines on stdin, answers each on a private pipe.

Started by judge/sandbox.py with a scrubbed environment, its own temporary directory and resource limits.
This process is the judge (judge/chain.py); each candidate runs in a process of its own below it
(judge/runner.py), started from a forkserver this process starts once. File descriptor 1 is pointed at
stderr so only this module writes the protocol.
Each answer echoes its request's id, so the parent can tell a result from anything a candidate wrote into
the pipe. When its parent dies (a Ray actor killed from outside) the process goes too, with whatever a
candidate started: a hung kernel is never left spinning on a CPU or GPU.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import sys
import tempfile
from pathlib import Path


def _limit_resources() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps of untrusted code
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = int(os.environ.get("EVOFORGE_MAX_OPEN_FILES", "4096"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    limit = os.environ.get("EVOFORGE_MEMORY_LIMIT_BYTES")
    if limit:  # address space: only where the backend allows it (CUDA maps far more than it uses)
        resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: SIGKILL when the parent (the sandbox's owner) dies, however it dies."""
    parent = os.environ.get("EVOFORGE_PARENT_PID")
    if not sys.platform.startswith("linux") or not parent:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the parent died before the request took effect
        os._exit(1)


def _watch_parent() -> None:
    """A forked watchdog in this process group: once the parent's end of stdin closes (it exited, or was
    killed however), kill the whole group: this process and any process a candidate started."""
    import evoforge.judge.candidate_process  # noqa: F401  (its /proc readers serve the watchdog, loaded now)

    if os.fork() != 0:
        return
    try:
        os.closerange(1, 1 << 16)  # hold no end of the result pipe: the parent must see EOF when we die
        poller = select.poll()
        poller.register(0, 0)  # no events asked for: wakes only on hang-up or error
        while not poller.poll():
            pass
    finally:
        _kill_below_group()
        os.killpg(0, signal.SIGKILL)
        os._exit(0)


def _kill_below_group() -> None:
    """Every process started below this process group that left it: a candidate's process leads a group of its
    own (so the judge can kill a fork bomb in one call), so the group's kill alone would leave it, and whatever it
    started, running once the judge is gone. Found from /proc while the forkserver (in this group) still holds
    them as children."""
    from evoforge.judge.candidate_process import descendants, group_members  # imported before the fork

    me, group = os.getpid(), os.getpgid(0)
    for _ in range(5):
        below = {pid for member in group_members(group) if member != me for pid in descendants(member)}
        others = set()
        for pid in below:
            try:
                others.add(os.getpgid(pid))
            except ProcessLookupError:
                pass
        others.discard(group)
        if not others:
            return
        for pg in others:
            try:
                os.killpg(pg, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _release_device_memory() -> None:
    """Cached device blocks go back to the driver after each evaluation: other evaluators of the same GPU
    (evaluators_per_device) can then use the memory this one no longer needs."""
    import torch

    for device in (torch.cuda, getattr(torch, "xpu", None)):
        try:
            if device is not None and device.is_available() and device.is_initialized():
                device.empty_cache()
        except Exception:  # a broken context is the next request's problem (runtime_error restarts us)
            pass


def main() -> int:
    _die_with_parent()
    _watch_parent()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _limit_resources()
    from evoforge.judge.candidate_process import CandidatesCannotLoad, warm_up

    # First the forkserver that starts candidates' processes (torch and Triton imported in it), which imports
    # while this process does: start-up costs one import's time on two cores, not two.
    try:
        warm_up()
    except CandidatesCannotLoad as e:  # no candidate could run here: the caller stops, saying why
        protocol.write(json.dumps({"ready": False, "error": str(e)}) + "\n")
        return 2
    import triton  # noqa: F401  (import cost paid before "ready", not inside the first timeout)
    from evoforge.backends.registry import get_backend
    from evoforge.judge.chain import ChainOptions, VerificationChain

    from evoforge.core import Candidate, json_safe
    from evoforge.task import Task

    chains: dict[str, VerificationChain] = {}  # one per backend: the judge's state (its arena) lives on
    from evoforge.judge import candidate_process

    containment = candidate_process.CONTAINMENT
    protocol.write(json.dumps({"ready": True, "pid": os.getpid(),
                               "containment": {"mode": containment.mode, "why": containment.why}
                               if containment is not None else {}}) + "\n")
    workdir = Path(tempfile.mkdtemp(prefix="evoforge-eval-"))
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        key = json.dumps([request["backend"], request.get("backend_options", {})], sort_keys=True)
        if key not in chains:
            chains[key] = VerificationChain(get_backend(request["backend"], **request.get("backend_options", {})),
                                            ChainOptions(), workdir / f"backend-{len(chains)}")

        def notify(event: str, request_id: object = request.get("id")) -> None:
            protocol.write(json.dumps({"id": request_id, "event": event}) + "\n")

        chain = chains[key]
        chain.options = ChainOptions.from_dict(request.get("options", {}))
        chain.notify = notify
        result = chain.run(Task.from_dict(request["task"]), Candidate.from_dict(request["candidate"]))
        chain.trim()
        _release_device_memory()
        answer = {"id": request.get("id"), "result": json_safe(result.to_dict())}
        protocol.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
