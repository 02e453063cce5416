"""Where candidates' processes run: inside bubblewrap where the machine allows it.

The judge starts the forkserver that forks each candidate's process (backends/candidate_process.py) through a
small wrapper that execs ``bwrap``, so every candidate runs with:

- a PID namespace of its own: the judge, the Ray actor, the campaign driver and whatever holds the LLM API key
  are not in its ``/proc`` at all (no environment, no memory to read);
- no network (a network namespace with only a loopback of its own), unless the task allows ``network``;
- the file system read-only, a private ``/tmp`` in which only the judge's own directory (the candidates'
  working directories and the shared arena) is writable, and the Python paths and Triton cache it needs are
  visible; credential folders of ``$HOME`` (``.ssh``, ``.aws``...) and the paths the caller names (the run
  directory, the storage file) are out of sight.

Where ``bwrap`` is missing or cannot make namespaces here, candidates run uncontained and the judge says so in
one line, once (``Containment.why``). ``EVOFORGE_CONTAINMENT=none`` turns it off; ``=bwrap`` makes a missing
``bwrap`` an error instead of a warning. On a GPU the device nodes are bound in; whether CUDA IPC crosses the
namespace has to be shown on the machine (docs/isolation.md says where it was).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# Folders of $HOME that hold credentials, kept out of a candidate's sight.
CREDENTIAL_DIRS = (".ssh", ".aws", ".azure", ".gnupg", ".docker", ".kube", ".config/gcloud", ".config/gh",
                   ".netrc", ".git-credentials", ".pgpass", ".pypirc", ".huggingface", ".cache/huggingface/token")


@dataclass(frozen=True)
class Containment:
    """How candidates' processes are contained: ``mode`` is ``bwrap`` or ``none``; ``why`` one line saying what
    is and is not contained; ``executable`` the wrapper multiprocessing starts the forkserver with."""

    mode: str
    why: str
    executable: str | None = None
    hidden: tuple[str, ...] = field(default=())


def _visible_under(root: str, paths: list[str]) -> list[str]:
    return sorted({p for p in paths if p and (p == root or p.startswith(root.rstrip("/") + "/"))})


def bwrap_arguments(*, writable: list[str], hidden: list[str], network: bool) -> list[str]:
    """The ``bwrap`` options (before ``--``): read-only root, private /tmp with the judge's directory writable and
    the Python paths under /tmp visible, device nodes bound (GPUs), PID namespace, no network."""
    args = ["--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev",
            "--proc", "/proc", "--tmpfs", "/tmp"]
    if not network:
        args.append("--unshare-net")
    needed_under_tmp = _visible_under("/tmp", [p for p in _python_needs() if os.path.isdir(p)]
                                      + [os.environ.get("TRITON_CACHE_DIR", "")])
    # One bind per tree (a path inside another bound one is visible already).
    needed_under_tmp = [p for p in needed_under_tmp
                        if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in needed_under_tmp)]
    for path in needed_under_tmp:
        if not any(path.startswith(w.rstrip("/") + "/") or path == w for w in writable):
            args += ["--ro-bind", path, path]
    for path in hidden:
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]  # an empty, read-only folder in its place
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    for path in writable:
        os.makedirs(path, exist_ok=True)
        args += ["--bind", path, path]
    return args


def _python_needs() -> list[str]:
    """What the candidate's Python must see wherever it lies (a checkout or virtual environment under /tmp
    included): its import path, its installation (``sys.prefix``, the interpreter's own directory) and the tree
    evoforge itself is imported from (an editable install maps its top-level folders, not a ``sys.path`` entry)."""
    package_root = str(Path(__file__).resolve().parent.parent)
    return [*(p for p in sys.path if p), sys.prefix, os.path.dirname(os.path.realpath(sys.executable)),
            os.path.dirname(os.path.abspath(sys.executable)), package_root]


def hidden_paths(extra: list[str]) -> list[str]:
    """The caller's paths to hide (its credential folders, run directory, storage file: ``Evaluator`` names them)
    that exist, minus any that holds what Python needs (a run directory containing the checkout stays visible)."""
    candidates = [os.path.abspath(p) for p in extra if p]
    needed = _python_needs()
    out = []
    for path in candidates:
        if not os.path.exists(path):
            continue
        if any(n == path or n.startswith(path.rstrip("/") + "/") for n in needed):
            continue
        out.append(path)
    return sorted(set(out))


def contain(*, directory: Path, writable: list[str], hide: list[str], network: bool = False) -> Containment:
    """Decide how this judge's candidates run; write the wrapper into ``directory`` (the judge's own)."""
    wanted = os.environ.get("EVOFORGE_CONTAINMENT", "auto")
    if wanted == "none":
        return Containment("none", "candidates are not contained (EVOFORGE_CONTAINMENT=none): they see the file "
                           "system, the network and the processes of the user running evoforge")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        why = ("candidates are not contained: bwrap (bubblewrap) is not installed, so they see the file system, "
               "the network and the processes of the user running evoforge (apt-get install bubblewrap)")
        if wanted == "bwrap":
            raise RuntimeError(why)
        return Containment("none", why)
    hidden = hidden_paths(hide)
    args = bwrap_arguments(writable=writable, hidden=hidden, network=network)
    probe = subprocess.run([bwrap, *args, "--", sys.executable, "-c", "pass"], capture_output=True, text=True,
                           timeout=60)
    if probe.returncode != 0:
        why = ("candidates are not contained: bwrap cannot make namespaces here "
               f"({(probe.stderr or '').strip()[:160]}); they see the file system, the network and the processes "
               "of the user running evoforge")
        if wanted == "bwrap":
            raise RuntimeError(why)
        return Containment("none", why)
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "contained-python"
    quoted = " ".join(_shell_quote(a) for a in [bwrap, *args, "--", sys.executable])
    wrapper.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n')
    wrapper.chmod(0o700)
    return Containment("bwrap", "candidates run in bubblewrap: their own PID namespace, "
                       + ("the network, " if network else "no network, ")
                       + f"the file system read-only but their own directory, {len(hidden)} credential or run "
                       "path(s) out of sight", executable=str(wrapper), hidden=tuple(hidden))


def _shell_quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def host_pid(inner: int, namespace_of: int) -> int | None:
    """The PID, in this process's namespace, of the process numbered ``inner`` in the PID namespace that process
    ``namespace_of`` (seen from here) lives in. multiprocessing reports the forkserver's children by their inner
    numbers; signals must go to the outer ones."""
    try:
        namespace = os.readlink(f"/proc/{namespace_of}/ns/pid")
    except OSError:
        return None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                numbers = line.split()[1:]
                if len(numbers) > 1 and int(numbers[-1]) == inner:
                    return int(entry)
    return None
