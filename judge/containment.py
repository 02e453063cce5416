"""Where candidates' processes run: inside bubblewrap where the machine allows it.

The judge starts the forkserver that forks each candidate's process (judge/candidate_process.py) through a
small wrapper that execs ``bwrap``, so every candidate runs with:

- a PID namespace of its own: the judge, the Ray actor, the campaign driver and whatever holds the LLM API key
  are not in its ``/proc`` at all (no environment, no memory to read);
- no network (a network namespace with only a loopback of its own), unless the task allows ``network``;
- the file system read-only, a private ``/tmp`` in which only the judge's own directory (the candidates'
  working directories and the shared arena) is writable, and the Python paths and Triton cache it needs are
  visible; credential folders of ``$HOME`` (``.ssh``, ``.aws``...) and the paths the caller names (the run
  directory, the storage file) are out of sight.

Contained or not, each candidate's process drops every capability (``drop_capabilities``), and the process holding
the LLM key is undumpable and starts Ray without it (``protect_secrets``, ``without_secrets``).

Where ``bwrap`` is missing or cannot make namespaces here, candidates run uncontained and the judge says so in
one line, once (``Containment.why``). ``EVOFORGE_CONTAINMENT=none`` turns it off; ``=bwrap`` makes a missing
``bwrap`` an error instead of a warning. ``EVOFORGE_BWRAP`` names a bwrap binary carried to a machine
without one. On a GPU the device nodes are bound in; whether CUDA IPC crosses the namespace is shown by
experiments/benchmarks/containment_gpu.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
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
    hidden_needs: tuple[str, ...] = field(default=())  # paths this Python imports from that lie in hidden folders


def _visible_under(root: str, paths: list[str]) -> list[str]:
    return sorted({p for p in paths if p and (p == root or p.startswith(root.rstrip("/") + "/"))})


# Device nodes a GPU backend needs inside the sandbox (NVIDIA, Intel and AMD); the rest of /dev is a minimal one.
GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd", "/dev/accel")
TMP_BYTES = 1 << 30  # the private /tmp and /dev/shm, each (EVOFORGE_TMP_BYTES): RAM a candidate may fill


def gpu_devices() -> list[str]:
    """The GPU device nodes of this machine (bound into the sandbox so CUDA, Level Zero or ROCm work there)."""
    import glob

    return sorted({p for pattern in GPU_DEVICE_GLOBS for p in glob.glob(pattern)})


#: Variables naming folders a candidate's toolchain reads (Triton's cache; CuTe's headers, build cache and prebuilt
#: libraries, which ``backends/cute.load`` looks in before it would compile): seen read-only inside, wherever they lie.
TOOLCHAIN_PATHS = ("TRITON_CACHE_DIR", "EVOFORGE_CUTLASS_INCLUDE", "EVOFORGE_CUTE_CACHE", "EVOFORGE_CUTE_PREBUILT")


def tmp_bytes() -> int:
    return int(os.environ.get("EVOFORGE_TMP_BYTES") or TMP_BYTES)


def bwrap_arguments(*, writable: list[str], hidden: list[str], network: bool,
                    devices: list[str] | None = None, tmp_size: int | None = None) -> list[str]:
    """The ``bwrap`` options (before ``--``): no capabilities (as root, bwrap would otherwise leave the candidate
    every one: it could remount the root read-write or unmount what hides a folder), read-only root, a minimal
    read-only /dev with only the GPU nodes bound in (never the host's disks), a private /tmp and /dev/shm of
    bounded size with the judge's directory writable and the Python paths under /tmp visible, PID namespace, no
    network."""
    size = str(tmp_size or tmp_bytes())
    args = ["--die-with-parent", "--unshare-pid", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev"]
    for node in gpu_devices() if devices is None else devices:
        args += ["--dev-bind", node, node]
    args += ["--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--proc", "/proc", "--size", size, "--tmpfs", "/tmp"]
    if not network:
        args.append("--unshare-net")
    needed_under_tmp = _visible_under("/tmp", _python_needs()
                                      + [path for name in TOOLCHAIN_PATHS
                                         if (path := os.environ.get(name, "")) and os.path.exists(path)])
    # One bind per tree (a path inside another bound one is visible already); none inside a hidden folder (it
    # stays hidden, whatever lies in it) or a writable one (bound below).
    needed_under_tmp = [p for p in needed_under_tmp
                        if not any(_within(p, q) and p != q for q in needed_under_tmp)
                        and not any(_within(p, q) for q in [*hidden, *writable])]
    for path in needed_under_tmp:
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


def bwrap_executable() -> str | None:
    """``EVOFORGE_BWRAP`` (a bwrap carried to a machine without one), else the one on ``PATH``."""
    carried = os.environ.get("EVOFORGE_BWRAP")
    if carried:
        return carried if os.access(carried, os.X_OK) else None
    return shutil.which("bwrap")


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


#: What a candidate's process imports before its candidate (the runner: evoforge, torch, Triton, NumPy) and CuTe's
#: Python side: found wherever this Python finds them, an editable install's mapped folders included.
IMPORTED_BY_THE_RUNNER = ("evoforge", "evoforge.backends", "evoforge.judge", "evoforge.knowledge",
                          "evoforge.mutators", "evoforge.search", "torch", "triton", "numpy", "cutlass")


def _module_folders() -> list[str]:
    """The folders modules are found in apart from ``sys.path``: those of the runner's imports, wherever a finder
    maps them, and every folder an editable install's finder maps a package to (setuptools' ``MAPPING``, installed
    by a ``.pth`` file), so a candidate's own import of such a package works too."""
    import importlib.util

    found: list[str] = []
    for name in IMPORTED_BY_THE_RUNNER:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            found += list(spec.submodule_search_locations or [])
            if spec.origin and os.path.isabs(spec.origin):
                found.append(os.path.dirname(spec.origin))
    for finder in sys.meta_path:
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", ""), None), "MAPPING", None)
        if isinstance(mapping, dict):
            found += [str(v) for v in mapping.values() if isinstance(v, str | os.PathLike)]
    return found


def _links_out(folder: str) -> list[str]:
    """Every path a link at the top of ``folder`` leads through (an installer that links each package from its
    cache: site-packages/torch -> /tmp/cache/.../torch), each hop of a chain of links included."""
    out: list[str] = []
    try:
        entries = [e.path for e in os.scandir(folder) if e.is_symlink()]
    except OSError:
        return out
    for path in entries:
        for _ in range(40):  # the kernel's own bound on a chain of links
            if not os.path.islink(path):
                break
            try:
                path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
            except OSError:
                break
            out.append(path)
    return out


def _python_needs() -> list[str]:
    """Every path the judge's Python imports from, which the candidate's must see wherever it lies (a checkout,
    a virtual environment or a package cache under /tmp included): its import path (``sys.path``, files such as
    zipped eggs too, ``PYTHONPATH``), its installation (``sys.prefix`` and the base one, whole: headers and
    libraries too; the interpreter's own directory), the folders finders map packages to (``_module_folders``: the
    tree evoforge itself is imported from included), and where links in any of these lead (``_links_out``)."""
    paths = [*(p for p in sys.path if p), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              os.path.dirname(os.path.abspath(sys.executable)), str(Path(__file__).resolve().parent.parent)]
    paths += _module_folders()
    paths = [os.path.abspath(p) for p in paths if p and os.path.exists(p)]
    paths += [os.path.realpath(p) for p in paths]
    for folder in [p for p in paths if os.path.isdir(p)]:
        paths += _links_out(folder)
    return sorted({p for p in paths if os.path.exists(p)})


def hidden_paths(extra: list[str]) -> list[str]:
    """The caller's paths to hide (its credential folders, run directory, storage file: ``Evaluator`` names them)
    that exist. A folder stays hidden though this Python imports from inside it (``hidden_needs`` says so)."""
    return sorted({os.path.abspath(p) for p in extra if p and os.path.exists(os.path.abspath(p))})


def hidden_needs(hidden: list[str]) -> list[str]:
    """The paths this Python imports from that lie in a hidden folder: a candidate's process cannot import from
    them, which the judge names when no candidate can load."""
    needs = _python_needs()
    return sorted({h for h in hidden if any(_within(n, h) for n in needs)})


def contain(*, directory: Path, writable: list[str], hide: list[str], network: bool = False,
            devices: list[str] | None = None) -> Containment:
    """Decide how this judge's candidates run; write the wrapper into ``directory`` (the judge's own)."""
    wanted = os.environ.get("EVOFORGE_CONTAINMENT", "auto")
    if wanted == "none":
        return Containment("none", "candidates are not contained (EVOFORGE_CONTAINMENT=none): they see the file "
                           "system, the network and the processes of the user running evoforge")
    devices = gpu_devices() if devices is None else devices
    bwrap = bwrap_executable()
    if bwrap is None:
        carried = os.environ.get("EVOFORGE_BWRAP")
        why = (f"candidates are not contained: EVOFORGE_BWRAP={carried} is not an executable file"
               if carried else "candidates are not contained: bwrap (bubblewrap) is not installed")
        why += (", so they see the file system, the network and the processes of the user running evoforge "
                "(apt-get install bubblewrap, or point EVOFORGE_BWRAP at a bwrap binary)")
        if wanted == "bwrap":
            raise RuntimeError(why)
        return Containment("none", why)
    hidden = hidden_paths(hide)
    needs_hidden = hidden_needs(hidden)
    args = bwrap_arguments(writable=writable, hidden=hidden, network=network, devices=devices)
    probe = subprocess.run([bwrap, *args, "--", sys.executable, "-c", "pass"], capture_output=True, text=True,
                           timeout=60)
    if probe.returncode != 0:
        cannot = (f"bwrap cannot start this Python with {', '.join(needs_hidden)} hidden (it imports from there)"
                  if needs_hidden else "bwrap cannot make namespaces here")
        why = (f"candidates are not contained: {cannot} "
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
    return Containment("bwrap", "candidates run in bubblewrap: their own PID namespace, no capabilities, "
                       + ("the network, " if network else "no network, ")
                       + f"the file system read-only but their own directory, a private /tmp of "
                       f"{tmp_bytes() >> 20} MiB, {len(hidden)} credential or run path(s) out of sight"
                       + (f", {len(devices)} GPU device node(s) bound in (a GPU candidate's inputs and outputs are "
                          "staged through a file: no CUDA IPC crosses the namespaces)" if devices else ""),
                       executable=str(wrapper), hidden=tuple(hidden), hidden_needs=tuple(needs_hidden))


# Words in a variable's name that mark it a credential (the sandbox scrubs them; their holders are made undumpable).
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")


def secret_names(environ: Mapping[str, str] | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    """The variables of ``environ`` (this process's by default) that hold a credential: named like one, or named
    in ``extra`` (the ``[llm]`` table's ``api_key_env``, whatever it is called)."""
    env = os.environ if environ is None else environ
    return sorted(k for k, v in env.items() if v and (k in extra or any(w in k.upper() for w in SECRET_WORDS)))


def make_undumpable() -> bool:
    """``PR_SET_DUMPABLE`` 0 for this process: another process of the same user can no longer read its
    ``/proc/<pid>/environ`` or ``mem``, nor ptrace it (root still can, with ``CAP_SYS_PTRACE``: candidates' processes
    drop every capability, ``drop_capabilities``). For the processes that hold the LLM key. True where it took."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # 4 = PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False


def protect_secrets(extra: tuple[str, ...] = ()) -> bool:
    """Make this process undumpable if it holds a credential in its environment (see ``make_undumpable``)."""
    return bool(secret_names(extra=extra)) and make_undumpable()


@contextlib.contextmanager
def without_secrets(extra: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """This process's credentials out of ``os.environ`` for the duration: what is started meanwhile (a local Ray's
    daemons, and the workers they start) never holds them. Put back afterwards for the LLM client."""
    names = secret_names(extra=extra)
    saved = {k: os.environ.pop(k) for k in names}
    try:
        yield names
    finally:
        os.environ.update(saved)


def drop_capabilities() -> None:
    """Give up every capability for good (bounding set, then permitted, effective and inheritable; no new privileges
    through exec): a candidate's process run by root keeps root's user id but not its power to read other
    processes' memory (``CAP_SYS_PTRACE``), bypass file permissions, mount, or load modules. Linux only; a system
    without prctl or capset is left as it is."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # PR_CAPBSET_DROP; EINVAL: past the last
            break

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3, this thread; all zero
    libc.capset(ctypes.byref(header), ctypes.byref(data))


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
