"""CUDA C++ with CuTe as the second kernel language: compile with nvcc, load with ctypes, count launches.

A CuTe candidate is a Python module, so it fits the same chain and the same Optuna record as a Triton one::

    CUDA_SRC = r'''
    #include <cute/tensor.hpp>
    __global__ void relu_kernel(...) { ... }
    extern "C" cudaError_t relu(const float* x, float* y, int64_t n, cudaStream_t stream) { ...launch... }
    '''
    SPACE = {"THREADS": [128, 256, 512]}      # tunables reach nvcc as -DTHREADS=256
    PARAMS = {"THREADS": 256}
    class ModelNew(nn.Module):
        def forward(self, x):
            lib = load(CUDA_SRC, params=PARAMS)   # compiled once per (source, params, arch), then cached
            y = torch.empty_like(x)
            lib.relu(x, y, x.numel(), None)       # tensors pass as device pointers, None as the current stream
            return y

No torch C++ headers and no torch extension build are involved, so a candidate compiles on a machine without
a GPU (``compile_only``) and one built elsewhere can be carried to a GPU machine without nvcc
(``EVOFORGE_CUTE_PREBUILT``). Every call through a loaded library counts as one kernel launch for the
anti-cheat (``backends/launches.counted_launch``, which the judge's launch counters hear).

Environment: ``EVOFORGE_CUTE_CACHE`` (compiled libraries; default ``~/.cache/evoforge/cute`` of the real user,
also inside the sandbox whose HOME is a temporary folder), ``EVOFORGE_CUTE_PREBUILT`` (a folder of
``<source_key>.so`` looked up before compiling), ``EVOFORGE_CUTLASS_INCLUDE`` (a CUTLASS ``include`` folder, instead
of the one in the ``nvidia-cutlass`` package), ``CUDA_HOME`` (where nvcc lives when it is not on PATH).
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoforge.core import Candidate, UsageError

USER_FILE = "CUDA_SRC.cu"  # the name nvcc reports for the candidate's own source: "CUDA_SRC.cu(12): error: ..."
DEFAULT_ARCH = "sm_90a"
# A release build, as CUTLASS's own (CMake Release): -DNDEBUG drops the device-side asserts of CUTLASS/CuTe (and the
# candidate's), which cost registers and branches inside the mainloop.
BASE_FLAGS = ("-std=c++17", "--expt-relaxed-constexpr", "-lineinfo", "-DNDEBUG", "--shared", "-Xcompiler", "-fPIC")
MESSAGE_LIMIT = 3500  # the chain keeps up to 4000 characters of an exception: stay whole inside it

# Appended to every source: turns a cudaError_t into its name for the Python side.
_ERROR_STRING_HELPER = """
extern "C" const char* evoforge_cuda_error_string(int code) {
  return cudaGetErrorName(static_cast<cudaError_t>(code));
}
"""


class CuteCompileError(Exception):
    """nvcc rejected the candidate's source. ``str()`` is the trimmed log a repair prompt needs."""

    def __init__(self, message: str, *, raw_log: str = "", command: list[str] | None = None) -> None:
        super().__init__(message)
        self.raw_log = raw_log
        self.command = command or []


class CuteToolchainError(UsageError):
    """nvcc or the CuTe headers are missing here: nothing the candidate did; the message says how to fix it."""


class CuteLaunchError(RuntimeError):
    """A launch function returned a CUDA error, or was called with arguments that cannot be device pointers."""


# ---------------------------------------------------------------------------------------------- toolchain


def cutlass_include_dir() -> Path:
    """The CUTLASS/CuTe ``include`` folder: ``$EVOFORGE_CUTLASS_INCLUDE``, else the ``nvidia-cutlass`` package's."""
    env = os.environ.get("EVOFORGE_CUTLASS_INCLUDE")
    if env:
        path = Path(env)
        if not (path / "cute" / "tensor.hpp").is_file():
            raise CuteToolchainError(f"EVOFORGE_CUTLASS_INCLUDE={env}: no cute/tensor.hpp there (point it at "
                                     "CUTLASS's include folder)")
        return path
    import importlib.util

    spec = importlib.util.find_spec("cutlass_library")  # finds the package without importing it
    if spec is not None and spec.origin:
        path = Path(spec.origin).parent / "source" / "include"
        if (path / "cute" / "tensor.hpp").is_file():
            return path
    raise CuteToolchainError("the CuTe headers were not found: pip install 'evoforge[cute]' (nvidia-cutlass ships "
                             "them in cutlass_library/source/include), or set EVOFORGE_CUTLASS_INCLUDE to a CUTLASS "
                             "include folder")


def cutlass_version() -> str:
    try:
        from importlib.metadata import version

        return version("nvidia-cutlass")
    except Exception:
        return "unknown"


def nvcc_path() -> str:
    """nvcc on PATH, else under ``$CUDA_HOME`` or ``/usr/local/cuda``."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    raise CuteToolchainError("nvcc was not found (not on PATH, nor in $CUDA_HOME/bin or /usr/local/cuda/bin): "
                             "install the CUDA toolkit, or carry libraries prebuilt elsewhere and point "
                             "EVOFORGE_CUTE_PREBUILT at them")


_NVCC_VERSION: dict[str, str] = {}


def nvcc_version() -> str:
    """The last line of ``nvcc --version`` (the build), cached per process; part of the cache key."""
    nvcc = nvcc_path()
    if nvcc not in _NVCC_VERSION:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CuteToolchainError(f"{nvcc} --version failed: {e}") from e
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        _NVCC_VERSION[nvcc] = " ".join(lines[-2:]) if lines else "unknown"
    return _NVCC_VERSION[nvcc]


def nvcc_arch(arch: str | None) -> str:
    """The nvcc target for a knowledge-base arch key or an nvcc name.

    ``nvidia-sm90`` -> ``sm_90a``: Hopper's wgmma, TMA multicast and setmaxnreg exist only for the
    arch-specific target, and an ``sm_90a`` library runs on every sm_90 part (H100, H200). Explicit nvcc names
    (``sm_90``, ``sm_80``) are kept as given.
    """
    if not arch:
        return DEFAULT_ARCH
    key = arch.strip().lower()
    m = re.fullmatch(r"nvidia-sm(\d+)([a-z]?)", key)
    if m:
        number = int(m.group(1))
        return f"sm_{number}{m.group(2) or ('a' if number >= 90 else '')}"
    m = re.fullmatch(r"(?:sm_?|compute_)?(\d{2,3})([af]?)", key)
    if m:
        return f"sm_{m.group(1)}{m.group(2)}"
    raise CuteToolchainError(f"--arch {arch}: CuTe/CUDA C++ targets NVIDIA GPUs only (give nvidia-sm80, "
                             "nvidia-sm90 or an nvcc name like sm_90a)")


def _gencode(arch: str) -> list[str]:
    number = arch[3:]
    if number.endswith(("a", "f")):  # arch-specific machine code runs on that arch only: no PTX to carry
        return ["-gencode", f"arch=compute_{number},code=sm_{number}"]
    return ["-gencode", f"arch=compute_{number},code=[sm_{number},compute_{number}]"]  # PTX: newer GPUs JIT it


def device_arch(device_index: int | None = None) -> str:
    """The nvcc target of the current CUDA device (9.0 -> sm_90a)."""
    import torch

    if not torch.cuda.is_available():
        raise CuteLaunchError("no CUDA device here: a CuTe kernel cannot run (check that it compiles with "
                              "evoforge eval TASK CANDIDATE --language cute --compile-only)")
    major, minor = torch.cuda.get_device_capability(device_index)
    return nvcc_arch(f"nvidia-sm{major}{minor}")


def defines_from_params(params: dict[str, Any] | None) -> dict[str, str]:
    """Tunable values as ``-D`` macros: ints, floats, bools (0/1) and identifier-like strings."""
    out: dict[str, str] = {}
    for name, value in (params or {}).items():
        if not re.fullmatch(r"[A-Za-z_]\w*", str(name)):
            raise CuteCompileError(f"PARAMS key {name!r} cannot be a C macro name")
        if isinstance(value, bool):
            out[name] = "1" if value else "0"
        elif isinstance(value, int | float):
            out[name] = repr(value)
        elif isinstance(value, str) and re.fullmatch(r"[A-Za-z_][\w:]*|-?\d+(\.\d*)?[fF]?", value):
            out[name] = value
        else:
            raise CuteCompileError(f"PARAMS[{name!r}] = {value!r}: only numbers, bools and identifiers can be "
                                   "passed to nvcc as -D macros")
    return out


def default_cache_dir() -> Path:
    env = os.environ.get("EVOFORGE_CUTE_CACHE")
    if env:
        return Path(env)
    try:  # the real home: the sandbox points HOME at a temporary folder, which would defeat the cache
        import pwd

        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        home = Path.home()
    return home / ".cache" / "evoforge" / "cute"


def source_key(src: str, *, arch: str, defines: dict[str, str], opt: str = "-O3") -> str:
    """Identity of a build from what the candidate controls (source, macros, target, optimization level).

    Prebuilt libraries are named by it, so a GPU machine without nvcc finds one built elsewhere."""
    payload = json.dumps({"src": src, "arch": arch, "defines": sorted(defines.items()), "opt": opt,
                          "flags": BASE_FLAGS}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def _cache_key(skey: str) -> str:
    """The local cache adds what else changes a build: the compiler and the headers."""
    payload = f"{skey}\0{nvcc_version()}\0{cutlass_version()}\0{cutlass_include_dir()}"
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


# ---------------------------------------------------------------------------------------------- nvcc log


_DIAG = re.compile(r"^(?P<loc>\S.*?)\((?P<line>\d+)\): (?P<kind>catastrophic error|error|warning|remark)"
                   r"(?P<code>[^:]*): (?P<text>.*)$")
_FRAME_USER = re.compile(r"at line (\d+) of (\S*" + re.escape(USER_FILE) + r")")
_WITH = re.compile(r' \[with .*\]"')
_COUNT = re.compile(r"^(\d+) errors? detected in the compilation")


@dataclass
class _Diagnostic:
    loc: str
    line: int
    kind: str
    text: str
    code_lines: list[str]
    frames: list[str]

    @property
    def in_user_file(self) -> bool:
        return Path(self.loc).name == USER_FILE

    def user_line(self) -> int | None:
        if self.in_user_file:
            return self.line
        for frame in self.frames:  # innermost first: the user-code line closest to the fault
            m = _FRAME_USER.search(frame)
            if m:
                return int(m.group(1))
        return None


def _shorten_frame(frame: str, width: int = 240) -> str:
    frame = _WITH.sub('"', frame.strip())  # the template arguments are most of the length and rarely the point
    return frame if len(frame) <= width else frame[: width - 3] + "..."


def _parse_diagnostics(log: str) -> tuple[list[_Diagnostic], list[str]]:
    diags: list[_Diagnostic] = []
    loose: list[str] = []  # lines outside any diagnostic block (ptxas, nvlink, the host compiler, the linker)
    current: _Diagnostic | None = None
    in_frames = False
    for raw in log.splitlines():
        line = raw.rstrip()
        m = _DIAG.match(line)
        if m:
            current = _Diagnostic(loc=m.group("loc"), line=int(m.group("line")), kind=m.group("kind"),
                                  text=m.group("text").strip(), code_lines=[], frames=[])
            diags.append(current)
            in_frames = False
            continue
        if current is None or not line.strip() or _COUNT.match(line.strip()):
            if line.strip():
                loose.append(line.strip())
            if not line.strip():
                current = None
            continue
        stripped = line.strip()
        if stripped.startswith("detected during"):
            in_frames = True
            rest = stripped[len("detected during"):].strip(" :")
            if rest:  # the single-frame form: "detected during instantiation of ... at line 5 of X.cu"
                current.frames.append(rest)
            continue
        if in_frames:
            if current.frames and not re.match(r"(instantiation of|processing of|implicit generation of|"
                                               r"during |based on|required by)", stripped):
                current.frames[-1] += " " + stripped  # a frame wrapped over two lines
            else:
                current.frames.append(stripped)
        elif len(current.code_lines) < 2:
            current.code_lines.append(line)
    return diags, loose


def trim_nvcc_log(log: str, *, include_dir: str | Path | None = None, limit: int = MESSAGE_LIMIT,
                  max_errors: int = 3, max_frames: int = 4) -> str:
    """The part of nvcc's output that names the fault.

    CuTe errors are template errors: one mistake gives a static_assert deep in a header, then five to fifty
    "instantiation of ..." frames with every template argument spelled out, then follow-on errors. Kept: each
    error's ``file(line): error: text`` with header paths shortened, the user-code line it was reached from
    (``CUDA_SRC.cu(5)``) first, a few frames with the template arguments dropped (always the ones in the
    candidate's own source), and the first few distinct errors; the rest is counted, not shown.
    """
    if include_dir:
        prefix = str(include_dir).rstrip("/") + "/"
        log = log.replace(prefix, "")
    diags, loose = _parse_diagnostics(log)
    errors = [d for d in diags if d.kind != "warning" and d.kind != "remark"]
    out: list[str] = []
    if not errors:
        # no front-end diagnostic: ptxas/nvlink/host compiler/linker. Keep the lines that say error, then the tail.
        faults = [line for line in loose if re.search(r"\b(error|fatal|undefined reference)\b", line, re.I)]
        text = "\n".join(faults[:20]) or log.strip()
        if len(text) > limit:
            text = text[: limit // 2] + "\n...\n" + text[-limit // 2:]
        return text
    seen: set[tuple[int | None, str]] = set()
    distinct: list[_Diagnostic] = []
    for d in errors:
        key = (d.user_line(), d.text)
        if key not in seen:
            seen.add(key)
            distinct.append(d)
    total = len(errors)
    m = next((_COUNT.match(line) for line in loose if _COUNT.match(line)), None)
    if m:
        total = max(total, int(m.group(1)))
    out.append(f"nvcc: {total} error(s); the first {min(max_errors, len(distinct))} distinct shown, "
               f"template arguments dropped")
    for d in distinct[:max_errors]:
        user_line = d.user_line()
        text = d.text if len(d.text) <= 400 else d.text[:397] + "..."
        if d.in_user_file:
            out.append(f"{USER_FILE}({d.line}): {d.kind}: {text}")
        elif user_line is not None:
            out.append(f"{USER_FILE}({user_line}): {d.kind}: {text}")
            out.append(f"  raised in {d.loc}({d.line}), instantiated from line {user_line} of {USER_FILE}")
        else:
            out.append(f"{d.loc}({d.line}): {d.kind}: {text}")
        out.extend("  " + c.strip() for c in d.code_lines[:1] if c.strip())
        if d.frames:
            user = [i for i, f in enumerate(d.frames) if _FRAME_USER.search(f)]
            keep = {0, len(d.frames) - 1, *user[-max_frames:]}
            out.append(f"  instantiation chain ({len(keep)} of {len(d.frames)} frames, innermost first):")
            previous = -1
            for i in sorted(keep):
                if i > previous + 1:
                    out.append(f"    ... {i - previous - 1} frame(s) in library headers")
                out.append("    " + _shorten_frame(d.frames[i]))
                previous = i
        out.append("")
    rest = distinct[max_errors:]
    if rest:
        out.append(f"further errors ({len(rest)} distinct), first lines only:")
        for d in rest[:5]:
            where = f"{USER_FILE}({d.user_line()})" if d.user_line() is not None else f"{d.loc}({d.line})"
            out.append(f"  {where}: {d.text[:200]}")
    text = "\n".join(out).rstrip()
    if len(text) > limit:
        text = text[: limit - 40].rstrip() + "\n... (cut to stay under the message limit)"
    return text


# ---------------------------------------------------------------------------------------------- compile


_COMPILE_LOCK = threading.Lock()
_RUNNING: set[subprocess.Popen[str]] = set()  # nvcc processes of this process's builds, while they run
_RUNNING_LOCK = threading.Lock()


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_running_builds() -> int:
    """Kill the nvcc runs this process started and that are still running (their builds fail as killed); returns
    how many. For a campaign or a benchmark that stops before its builds do."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _kill(proc)
    return len(running)


@dataclass(frozen=True)
class Build:
    path: Path
    source_key: str
    arch: str
    cached: bool
    prebuilt: bool
    seconds: float


def build(src: str, *, arch: str | None = DEFAULT_ARCH, defines: dict[str, Any] | None = None, opt: str = "-O3",
          cache_dir: Path | None = None, timeout_s: float = 600.0) -> Build:
    """Compile ``src`` to a shared library, or find it prebuilt or cached; raise ``CuteCompileError`` on failure."""
    arch = nvcc_arch(arch)
    macros = defines_from_params(defines)
    skey = source_key(src, arch=arch, defines=macros, opt=opt)
    prebuilt_dir = os.environ.get("EVOFORGE_CUTE_PREBUILT")
    if prebuilt_dir and (Path(prebuilt_dir) / f"{skey}.so").is_file():
        return Build(Path(prebuilt_dir) / f"{skey}.so", skey, arch, cached=True, prebuilt=True, seconds=0.0)
    include = cutlass_include_dir()
    nvcc = nvcc_path()
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    key = _cache_key(skey)
    target = cache / f"{key}.so"
    if target.is_file():
        return Build(target, skey, arch, cached=True, prebuilt=False, seconds=0.0)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"build-{key}-", dir=cache) as tmp:
        work = Path(tmp)
        (work / USER_FILE).write_text(src + "\n" + _ERROR_STRING_HELPER)
        command = [nvcc, *BASE_FLAGS, opt, *_gencode(arch), f"-I{include}",
                   *(f"-D{k}={v}" for k, v in sorted(macros.items())), USER_FILE, "-o", "lib.so"]
        proc = subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # its own process group: kill_running_builds ends nvcc's children
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            _kill(proc)
            proc.communicate()
            raise CuteCompileError(f"nvcc ran past {timeout_s:.0f} s (deep template recursion?); killed",
                                   command=command) from e
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        log = (stdout or "") + (stderr or "")
        if proc.returncode != 0 or not (work / "lib.so").is_file():
            raise CuteCompileError(trim_nvcc_log(log, include_dir=include) or f"nvcc exited {proc.returncode}",
                                   raw_log=log, command=command)
        (work / "build.json").write_text(json.dumps({"source_key": skey, "arch": arch, "defines": macros,
                                                     "opt": opt, "nvcc": nvcc_version(),
                                                     "cutlass": cutlass_version(), "command": command}))
        os.replace(work / "lib.so", target)  # atomic: a concurrent worker sees no half-written library
        os.replace(work / "build.json", cache / f"{key}.json")
        (cache / f"{key}.cu").write_text(src)
    return Build(target, skey, arch, cached=False, prebuilt=False, seconds=time.perf_counter() - started)


def compile_cuda(src: str, *, arch: str = DEFAULT_ARCH, defines: dict[str, Any] | None = None, opt: str = "-O3",
                 cache_dir: Path | None = None) -> Path:
    """The path of the compiled shared library for ``src`` (cached); ``CuteCompileError`` names the fault."""
    return build(src, arch=arch, defines=defines, opt=opt, cache_dir=cache_dir).path


def prebuild(src: str, out_dir: Path, *, arch: str = DEFAULT_ARCH, params: dict[str, Any] | None = None,
             opt: str = "-O3") -> Path:
    """Build here and copy to ``out_dir/<source_key>.so``, where ``load`` finds it through EVOFORGE_CUTE_PREBUILT."""
    result = build(src, arch=arch, defines=params, opt=opt)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{result.source_key}.so"
    shutil.copyfile(result.path, target)
    return target


# ---------------------------------------------------------------------------------------------- load


_C_TYPES: dict[str, Any] = {
    "void": None, "int": ctypes.c_int, "int32_t": ctypes.c_int32, "unsigned": ctypes.c_uint,
    "unsigned int": ctypes.c_uint, "uint32_t": ctypes.c_uint32, "long": ctypes.c_long, "long long": ctypes.c_longlong,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "ptrdiff_t": ctypes.c_ssize_t,
    "float": ctypes.c_float, "double": ctypes.c_double, "bool": ctypes.c_bool, "cudaStream_t": ctypes.c_void_p,
    "cudaError_t": ctypes.c_int, "char": ctypes.c_char,
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|__host__|inline|static|"
                         r"CUTE_HOST|CUTLASS_HOST)\b")
_EXTERN_C = re.compile(r'extern\s+"C"\s+(?P<ret>[\w\s\*]+?)\s*\b(?P<name>\w+)\s*\((?P<args>[^)]*)\)\s*\{')


@dataclass(frozen=True)
class Signature:
    name: str
    restype: Any
    argtypes: tuple[Any, ...]
    stream_args: tuple[int, ...]  # positions of cudaStream_t parameters: None there means the current stream
    returns_error: bool


def _c_type(decl: str, *, is_return: bool = False) -> tuple[Any, bool]:
    """(ctypes type, is_stream) of one declaration such as ``const float* __restrict__ x``."""
    text = _QUALIFIERS.sub(" ", decl.split("=")[0])
    pointer = "*" in text or "[" in text
    words = text.replace("*", " ").replace("[", " ").replace("]", " ").split()
    if not is_return and len(words) > 1:
        words = words[:-1]  # drop the parameter name
    base = " ".join(words).replace("std::", "")
    if pointer:
        return ctypes.c_void_p, False
    if base in _C_TYPES:
        return _C_TYPES[base], base == "cudaStream_t"
    raise CuteLaunchError(f"extern \"C\" parameter type {decl.strip()!r} cannot be passed from Python: use "
                          "pointers, integers, float/double or cudaStream_t")


def parse_signatures(src: str) -> dict[str, Signature]:
    """The ``extern "C"`` functions of a source, with ctypes types read from their declarations."""
    out: dict[str, Signature] = {}
    for m in _EXTERN_C.finditer(src):
        name = m.group("name")
        restype, _ = _c_type(m.group("ret"), is_return=True)
        params = [p for p in (a.strip() for a in m.group("args").split(",")) if p and p != "void"]
        types, streams = [], []
        for i, p in enumerate(params):
            ctype, is_stream = _c_type(p)
            types.append(ctype)
            if is_stream:
                streams.append(i)
        ret_words = _QUALIFIERS.sub(" ", m.group("ret")).split()
        out[name] = Signature(name, restype, tuple(types), tuple(streams),
                              returns_error=ret_words in (["cudaError_t"], ["int"]))
    return out


class CuteFunction:
    """One ``extern "C"`` launch function: tensors become device pointers, None a stream, each call is counted."""

    def __init__(self, library: CuteLibrary, fn: Any, signature: Signature) -> None:
        self._library = library
        self._fn = fn
        self.signature = signature
        fn.restype = signature.restype
        fn.argtypes = list(signature.argtypes)

    def _convert(self, i: int, value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            if value.device.type != "cuda":
                raise CuteLaunchError(f"{self.signature.name}: argument {i} is a tensor on {value.device}; a CUDA "
                                      "kernel can only read device memory")
            return value.data_ptr()
        if value is None and i in self.signature.stream_args:
            return torch.cuda.current_stream().cuda_stream
        return value

    def __call__(self, *args: Any) -> Any:
        from evoforge.backends.launches import counted_launch

        sig = self.signature
        if len(args) != len(sig.argtypes):
            raise CuteLaunchError(f"{sig.name} takes {len(sig.argtypes)} argument(s), got {len(args)}")
        converted = [self._convert(i, a) for i, a in enumerate(args)]
        with counted_launch("cute"):
            result = self._fn(*converted)
        if sig.returns_error and result:
            raise CuteLaunchError(f"{sig.name} returned CUDA error {result} ({self._library.error_name(result)})")
        return result


class CuteLibrary:
    """A loaded library: its ``extern "C"`` functions as attributes."""

    def __init__(self, path: Path, src: str, build_info: Build | None = None) -> None:
        self.path = path
        self.build = build_info
        self._lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        self.signatures = parse_signatures(src)
        self._functions: dict[str, CuteFunction] = {}

    def error_name(self, code: int) -> str:
        try:
            fn = self._lib.evoforge_cuda_error_string
            fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_int]
            return (fn(int(code)) or b"?").decode()
        except AttributeError:
            return "?"

    def __getattr__(self, name: str) -> CuteFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._functions:
            if name not in self.signatures:
                known = ", ".join(sorted(self.signatures)) or "none"
                raise AttributeError(f"CUDA_SRC has no extern \"C\" function {name!r} (found: {known})")
            self._functions[name] = CuteFunction(self, getattr(self._lib, name), self.signatures[name])
        return self._functions[name]


_LOADED: dict[tuple[str, str], CuteLibrary] = {}
_FAST: dict[tuple[Any, ...], CuteLibrary] = {}  # forward calls load() every time: skip hashing the source


def _fast_key(src: str, params: dict[str, Any] | None, arch: str | None, opt: str) -> tuple[Any, ...] | None:
    try:
        device = None
        if arch is None:
            import torch

            device = torch.cuda.current_device() if torch.cuda.is_available() else None
        key = (src, tuple(sorted((params or {}).items())), arch, opt, device,
               os.environ.get("EVOFORGE_CUTE_PREBUILT", ""))
        hash(key)
        return key
    except TypeError:  # an unhashable parameter value: take the slow path, which reports it
        return None


def load(src: str, *, params: dict[str, Any] | None = None, arch: str | None = None, opt: str = "-O3") -> CuteLibrary:
    """Compile (once per source, params and arch; then from the cache) and load a CuTe source.

    ``arch`` defaults to the current CUDA device's. Cheap after the first call (a dictionary lookup): call it
    from ``forward``.
    """
    fast = _fast_key(src, params, arch, opt)
    if fast is not None and fast in _FAST:
        return _FAST[fast]
    target = nvcc_arch(arch) if arch else device_arch()
    macros = defines_from_params(params)
    skey = source_key(src, arch=target, defines=macros, opt=opt)
    handle = (skey, os.environ.get("EVOFORGE_CUTE_PREBUILT", ""))
    if handle not in _LOADED:
        with _COMPILE_LOCK:
            if handle not in _LOADED:
                info = build(src, arch=target, defines=macros, opt=opt)
                _LOADED[handle] = CuteLibrary(info.path, src, info)
    if fast is not None:
        _FAST[fast] = _LOADED[handle]
    return _LOADED[handle]


# ---------------------------------------------------------------------------------------------- compile-only


def cuda_source_of(source: str) -> tuple[str, int]:
    """The ``CUDA_SRC`` string literal of a candidate module and the line it starts on (no code is run)."""
    tree = ast.parse(source)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "CUDA_SRC" for t in targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value, node.value.lineno
            raise CuteCompileError("CUDA_SRC is not a plain string literal: compile-only reads it without running "
                                   "the module (write it as CUDA_SRC = r\"\"\"...\"\"\"; tunables go in PARAMS)")
    raise CuteCompileError("the module defines no CUDA_SRC string")


def cute_unavailable(backend: Any, arch: str | None) -> str | None:
    """Why a CuTe candidate cannot be evaluated on ``backend`` here (None: it can), as the end of a sentence
    that starts with "a CuTe kernel"."""
    if getattr(backend, "name", "") != "cuda":
        return (f"runs on --backend cuda only (this one is {getattr(backend, 'name', backend)}): CUDA C++ needs an "
                "NVIDIA GPU; on this machine check that it compiles with evoforge eval TASK KERNEL --compile-only")
    try:
        nvcc_arch(arch)
    except CuteToolchainError as e:
        return f"cannot target {arch} ({e})"
    if os.environ.get("EVOFORGE_CUTE_PREBUILT"):
        return None  # libraries built elsewhere; a missing one is that candidate's compile error
    try:
        nvcc_path()
        cutlass_include_dir()
    except CuteToolchainError as e:
        return f"cannot be built here: {e}"
    return None


def _located(message: str, source: str) -> str:
    """A compile error with the line map from CUDA_SRC's lines to the module's."""
    try:
        offset = cuda_source_of(source)[1] - 1
    except (CuteCompileError, SyntaxError):
        return message
    return message + f"\n(line N of {USER_FILE} is line N+{offset} of the candidate module)"


def build_candidate(candidate: Candidate, arch: str | None = "nvidia-sm90", *, opt: str = "-O3",
                    timeout_s: float = 600.0) -> Build:
    """Build (or find cached) the library of a CuTe candidate with its ``params`` as macros, without running any
    of its code; ``CuteCompileError`` carries the trimmed log and the line map, the message a repair needs."""
    try:
        src, _ = cuda_source_of(candidate.source)
        return build(src, arch=nvcc_arch(arch), defines=candidate.params, opt=opt, timeout_s=timeout_s)
    except CuteCompileError as e:
        raise CuteCompileError(_located(str(e), candidate.source), raw_log=e.raw_log, command=e.command) from e
