"""The candidate's process: it imports one candidate, builds ``ModelNew`` and runs ``forward`` on inputs the judge
lends it, and nothing more.

The judge (judge/chain.py, in the evaluation process) owns the task module, the reference, the inputs, the
expected outputs, the comparator and its clocks; none of them exist here. A candidate that patches torch, reads
the call stack or the garbage collector for an expected output, or fakes a timer, finds nothing of the judge's
to patch or read. What this process reports (launch counts, the ATen ops ``forward`` called, its own event
times) is cross-checked by the judge where it can be (outputs of timed runs, wall clock), and the guards
below turn the tricks of the reward-hack kinds into violations with a name:

- threads, processes, native libraries (ctypes, cffi, cpp_extension), torch.compile/dynamo: refused when the
  candidate's own code asks for them (Triton's and torch's own use is not), unless the task allows them;
- reading the call stack (``sys._getframe``, ``inspect``, traceback and generator frames), the garbage
  collector's object lists, tracing hooks, other processes' ``/proc`` entries: refused;
- replacing a function of torch, Triton, evoforge or the standard library the harness uses, or an attribute of
  one of their classes: reported as tampering;
- a thread left running, a tensor subclass returned (a lazy value computed on first use), work left on a CUDA
  stream the timed stream never waits for.

Started by multiprocessing's ``forkserver`` (which imported torch and Triton once, before any CUDA context),
one process per candidate, so nothing one candidate did reaches the next. This is not a security sandbox:
code that rewrites this module's own objects in memory is a determined attacker (docs/isolation.md).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import signal
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import evoforge.judge.compare  # noqa: F401  (the judge's comparator is in the snapshot: patching it is seen)
import torch
import torch._dynamo  # noqa: F401  (its import re-wraps torch functions such as manual_seed: done before any snapshot)
import torch.utils.deterministic  # noqa: F401
import triton  # noqa: F401  (imported by the forkserver before any candidate: Triton's own state is not theirs)

try:  # Triton's interpreter imports its gluon dialect on a kernel's first launch: once here, not per candidate
    import triton.experimental.gluon.language  # noqa: F401
except Exception:  # noqa: BLE001  (an older or newer Triton without it)
    pass
from evoforge.judge.arena import ArenaView, dtype_name, receive_fd
from evoforge.judge.guards import LaunchCounter, OpRecorder

_getframe = sys._getframe  # the harness's own references, taken before any candidate runs
_perf_counter = time.perf_counter
_listdir = os.listdir
_Thread_start = threading.Thread.start
_start_new_thread = threading._start_new_thread  # type: ignore[attr-defined]

CAPABILITIES = ("threads", "processes", "native", "compile", "introspection", "network")

_STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
_SITE = tuple({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
_TORCH_DIR = os.path.dirname(torch.__file__)
_TRITON_DIR = os.path.dirname(triton.__file__)
_EVOFORGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout (editable) or site
_COMPILE_DIRS = (os.path.join(_TORCH_DIR, "_dynamo"), os.path.join(_TORCH_DIR, "_inductor"))
_EXTENSION_FILES = (os.path.join(_TORCH_DIR, "utils", "cpp_extension.py"),)

_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork",
                             "os.forkpty", "pty.spawn", "os.startfile"})
_NATIVE_EVENTS = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
                            "ctypes.cdata/buffer", "ctypes.call_function", "ctypes.string_at", "ctypes.wstring_at",
                            "ctypes.set_errno"})
_NETWORK_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"})
_INTROSPECTION_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys._getframemodulename",
                                   "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                                   "gc.get_referents", "sys._current_exceptions"})
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_WATCHED = (_PROCESS_EVENTS | _NATIVE_EVENTS | _INTROSPECTION_EVENTS | _NETWORK_EVENTS
            | {"object.__getattr__", "open", "import"})
# Modules whose only use in a candidate is what the task does not allow (most are imported already, by torch or
# Triton, and then raise no event: their use is what the hook and the wrappers refuse).
_FORBIDDEN_IMPORTS = {"ctypes": ("native", "calls native code of its own"),
                      "cffi": ("native", "calls native code of its own"),
                      "_ctypes": ("native", "calls native code of its own"),
                      "subprocess": ("processes", "starts a process"),
                      "multiprocessing": ("processes", "starts a process"),
                      "_posixsubprocess": ("processes", "starts a process"),
                      "concurrent": ("threads", "starts a thread"),
                      "torch._inductor": ("compile", "runs torch.compile"),
                      "torch.utils.cpp_extension": ("native", "builds a native extension")}

# Modules whose functions the harness (and the judge's protocol through it) relies on: replacing one is tampering.
PROTECTED_MODULES = ("builtins", "time", "statistics", "math", "gc", "os", "threading", "_thread", "json", "ctypes",
                     "torch._C",
                     "subprocess", "torch", "torch.cuda", "torch.nn", "torch.nn.functional", "torch.testing",
                     "torch.utils._python_dispatch", "torch.utils.deterministic", "torch.multiprocessing.reductions",
                     "torch.autograd", "triton", "triton.testing", "triton.runtime", "triton.runtime.jit",
                     "triton.runtime.interpreter", "triton.runtime.autotuner", "triton.runtime.driver", "numpy")


class GuardViolation(PermissionError):
    """Raised into the candidate's code when it asks for something the task does not allow."""


def _owner(filename: str, candidate_file: str) -> str:
    if filename == candidate_file:
        return "candidate"
    if filename.startswith(_EVOFORGE_DIR) and not filename.startswith(_SITE):
        return "evoforge"
    if filename.startswith(_TORCH_DIR):
        return "torch"
    if filename.startswith(_TRITON_DIR):
        return "triton"
    if filename.startswith(_SITE):
        return "site"
    if filename.startswith(_STDLIB) or filename.startswith("<frozen"):
        return "stdlib"
    return "other"


def _skip_stdlib(filename: str, owner: str) -> bool:
    return owner == "stdlib" or filename == __file__


def _skip_introspection_helpers(filename: str, owner: str) -> bool:
    """inspect.currentframe/stack and traceback.extract_stack read frames for whoever called them."""
    return filename.endswith(("/inspect.py", "/traceback.py"))


CANDIDATE_MODULE = "evoforge_candidate"
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python (C types cannot be patched at all)
_PROTECTED_ROOTS = ("torch", "triton", "evoforge", "statistics", "threading", "time", "json")


class CandidateGuard:
    """Watches the candidate's own code: an audit hook (PEP 578) for processes, native code and introspection, a
    guard on thread starts and torch.compile, and a snapshot of the functions the harness relies on."""

    def __init__(self, *, candidate_file: str, allow: tuple[str, ...] = ()) -> None:
        self.candidate_file = candidate_file
        self.allow = frozenset(allow)
        self.armed = False
        self.violations: list[dict[str, str]] = []
        self._busy = False
        self._snapshot: dict[tuple[str, str], int] = {}
        self._modules: dict[str, int] = {}
        self._baseline_threads: set[str] = set()
        self._watched: list[tuple[dict[str, Any], str, Any, str]] = []
        self._installed = False  # a set-up that fails before the guard is in place has nothing of it to sweep
        self._pid = str(os.getpid())

    # ------------------------------------------------------------------ installation
    def install(self) -> None:
        sys.addaudithook(self._hook)  # cannot be removed: it lives as long as this process
        self._installed = True
        guard = self

        def start(thread: threading.Thread) -> None:
            guard._refuse_if_candidate("threads", "starts a thread (threading.Thread.start): work on another thread "
                                       "escapes the op watch and the timed stream")
            return _Thread_start(thread)

        def start_new_thread(function: Callable[..., Any], args: tuple[Any, ...], kwargs: Any = None) -> int:
            guard._refuse_if_candidate("threads", "starts a thread (_thread.start_new_thread)")
            return _start_new_thread(function, args, *([kwargs] if kwargs is not None else []))

        threading.Thread.start = start  # type: ignore[method-assign]
        threading._start_new_thread = start_new_thread  # type: ignore[attr-defined]
        import _thread

        _thread.start_new_thread = start_new_thread  # type: ignore[assignment]
        _thread.start_new = start_new_thread  # type: ignore[attr-defined]
        original_compile = torch.compile

        def compile_(*args: Any, **kwargs: Any) -> Any:
            guard._refuse_if_candidate("compile", "calls torch.compile: the kernels must be the candidate's own")
            return original_compile(*args, **kwargs)

        torch.compile = compile_  # type: ignore[assignment]
        import _posixsubprocess

        fork_exec = _posixsubprocess.fork_exec

        def guarded_fork_exec(*args: Any, **kwargs: Any) -> Any:  # multiprocessing's spawn raises no audit event
            guard._refuse_if_candidate("processes", "starts a process (_posixsubprocess.fork_exec)")
            return fork_exec(*args, **kwargs)

        _posixsubprocess.fork_exec = guarded_fork_exec  # type: ignore[attr-defined]
        from multiprocessing import forkserver

        forkserver._forkserver._forkserver_address = None  # type: ignore[attr-defined]  (ours is not theirs to use)
        self._guard_dispatch_modes()
        self.snapshot()

    def _guard_dispatch_modes(self) -> None:
        """The op watch is a TorchDispatchMode: the candidate may not switch dispatch modes off around its ops."""
        import torch.utils._python_dispatch as python_dispatch

        guard = self

        def wrap(owner: Any, name: str) -> None:
            original = getattr(owner, name, None)
            if original is None:
                return

            def guarded(*args: Any, **kwargs: Any) -> Any:
                guard._refuse_if_candidate("introspection", f"calls {name}: torch ops hidden from the op watch")
                return original(*args, **kwargs)

            setattr(owner, name, guarded)

        for name in ("_disable_current_modes", "_pop_mode_temporarily", "_pop_mode"):
            wrap(python_dispatch, name)
        for name in ("_pop_torch_dispatch_stack", "_unset_dispatch_mode", "_DisableTorchDispatch",
                     "_DisableTorchFunction", "_DisableTorchFunctionSubclass", "_set_torch_dispatch_mode"):
            wrap(torch._C, name)

    def snapshot(self) -> None:
        """What replacing would be tampering: the protected modules' functions, classes and submodules, and the
        methods of the Python classes they define (class attributes are not audited: they are compared)."""
        self._snapshot.clear()
        self._classes: dict[tuple[type, str], int] = {}
        self._modules = {name: id(sys.modules[name]) for name in PROTECTED_MODULES if name in sys.modules}
        for name in [*self._modules, *(n for n in list(sys.modules) if n.startswith("evoforge."))]:
            module = sys.modules.get(name)
            if module is None:
                continue
            self._modules.setdefault(name, id(module))
            for attr, value in list(vars(module).items()):
                if callable(value) or isinstance(value, type(sys)):
                    self._snapshot[(name, attr)] = id(value)
                if (isinstance(value, type) and value.__flags__ & _HEAPTYPE
                        and str(getattr(value, "__module__", "")).startswith(_PROTECTED_ROOTS)):
                    for key, member in list(vars(value).items()):
                        if callable(member) or isinstance(member, staticmethod | classmethod | property):
                            self._classes[(value, key)] = id(member)
        # (namespace, key, the object itself, what to call it): one flat list compared by identity (``is``, never
        # ``==``, which a replacement could answer), so a sweep is a few thousand lookups
        self._watched = []
        for (name, attr) in self._snapshot:
            namespace = vars(sys.modules[name])
            self._watched.append((namespace, attr, namespace.get(attr), f"replaces {name}.{attr}"))
        for (cls, attr) in self._classes:
            namespace = vars(cls)
            self._watched.append((namespace, attr, namespace.get(attr), f"patches {cls.__module__}."
                                  f"{cls.__qualname__}.{attr} (a method of a class it does not own)"))

    def baseline_threads(self) -> None:
        self._baseline_threads = set(_listdir("/proc/self/task"))

    # ------------------------------------------------------------------ the audit hook
    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.armed or self._busy or event not in _WATCHED:
            return
        self._busy = True  # set first: reading a frame below raises an event of its own
        try:
            self._check(event, args, _getframe(1))  # the frame that raised the event
        finally:
            self._busy = False

    def _owner_past(self, frame: Any, skip: Callable[[str, str], bool]) -> str:
        """The owner of the innermost frame from ``frame`` outwards that ``skip(filename, owner)`` does not pass."""
        while frame is not None:
            filename = frame.f_code.co_filename
            owner = _owner(filename, self.candidate_file)
            if not skip(filename, owner):
                return owner
            frame = frame.f_back
        return "stdlib"

    def _record(self, kind: str, message: str) -> None:
        if len(self.violations) < 20:
            self.violations.append({"kind": kind, "message": message})

    def _refuse(self, kind: str, message: str) -> None:
        self._record(kind, message)
        raise GuardViolation(f"evoforge: the candidate {message} (refused: the task does not allow '{kind}')")

    def _refuse_if_candidate(self, capability: str, message: str) -> None:
        """For the wrappers on thread starts and torch.compile: refuse when the candidate's code asked."""
        if not self.armed or capability in self.allow or self._busy:
            return
        self._busy = True
        try:
            owner = self._owner_past(_getframe(2), _skip_stdlib)
        finally:
            self._busy = False
        if owner == "candidate":
            self._refuse(capability, message)

    def _check(self, event: str, args: tuple[Any, ...], frame: Any) -> None:
        if event in _INTROSPECTION_EVENTS or event == "object.__getattr__":
            if "introspection" in self.allow or (event == "object.__getattr__" and args[1] not in _FRAME_ATTRIBUTES):
                return
            if self._owner_past(frame, _skip_introspection_helpers) == "candidate":
                what = f"reads a frame ({args[1]})" if event == "object.__getattr__" else f"calls {event}"
                self._refuse("introspection", f"inspects the interpreter: it {what}; the judge's state is not in "
                             "this process, and the harness is not the candidate's to read")
            return
        owner = self._owner_past(frame, _skip_stdlib)
        if event == "open":
            path = os.fsdecode(args[0]) if isinstance(args[0], str | bytes) else ""
            parts = path.split("/")
            if (owner == "candidate" and "introspection" not in self.allow and len(parts) > 2 and parts[1] == "proc"
                    and parts[2].isdigit() and parts[2] != self._pid):
                self._refuse("introspection", f"opens {path}: another process's memory, maps or environment")
            return
        if event in _NETWORK_EVENTS:
            if owner == "candidate" and "network" not in self.allow:
                self._refuse("network", f"opens a connection ({event}: {args[1] if len(args) > 1 else ''})")
            return
        if event == "import":
            module = str(args[0])
            for name, (capability, what) in _FORBIDDEN_IMPORTS.items():
                if owner == "candidate" and capability not in self.allow and (
                        module == name or module.startswith(name + ".")):
                    self._refuse(capability, f"{what}: it imports {module}")
            return
        files = []
        f = frame
        while f is not None:
            files.append(f.f_code.co_filename)
            f = f.f_back
        from_candidate = any(name == self.candidate_file for name in files)
        if from_candidate and "compile" not in self.allow and any(name.startswith(_COMPILE_DIRS) for name in files):
            self._refuse("compile", f"runs torch.compile/dynamo (seen as {event} from torch's compiler)")
        if from_candidate and "native" not in self.allow and any(name in _EXTENSION_FILES for name in files):
            self._refuse("native", f"builds a native extension with torch.utils.cpp_extension ({event})")
        capability = "processes" if event in _PROCESS_EVENTS else "native"
        if owner == "candidate" and capability not in self.allow:
            what = "starts a process" if capability == "processes" else "calls native code of its own"
            self._refuse(capability, f"{what} ({event})")

    # ------------------------------------------------------------------ after each request
    def sweep(self) -> list[dict[str, str]]:
        """Violations found since the last sweep, including tampering and threads left running."""
        if not self._installed:
            return []
        for name, ident in self._modules.items():
            if id(sys.modules.get(name)) != ident:
                self._record("tamper", f"replaces the module {name} in sys.modules")
        for what in [what for namespace, attr, held, what in self._watched if namespace.get(attr) is not held]:
            self._record("tamper", what)
        if "threads" not in self.allow:
            for tid in set(_listdir("/proc/self/task")) - self._baseline_threads:
                try:
                    comm = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
                except OSError:
                    continue  # ended meanwhile
                if not comm.startswith(("cuda", "cupti", "nvrtc")):
                    self._record("threads", f"leaves a thread running (thread {tid}, '{comm}') after forward returns")
                    self._baseline_threads.add(tid)
        dynamo = sys.modules.get("torch._dynamo.utils")
        if dynamo is not None and "compile" not in self.allow:
            counters = getattr(dynamo, "counters", {})
            if sum(counters.get("frames", {}).values()):
                self._record("compile", "ran code through torch.compile/dynamo")
                counters.clear()
        found, self.violations = self.violations, []
        return found

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        self.armed = True
        try:
            yield
        finally:
            self.armed = False


# ---------------------------------------------------------------------- the harness


def _short_traceback(exc: BaseException, source_file: str, limit_chars: int = 4000) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if f.filename == source_file]
    lines = [f"  line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in own[-3:]]
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if len(text) > limit_chars:
        text = text[: limit_chars // 2] + "\n...\n" + text[-limit_chars // 2:]
    return "\n".join([*lines, text]) if lines else text


def is_compile_exception(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"CompilationError", "OutOfResources", "PTXASError", "CompileTimeAssertionFailure",
                         "UnsupportedLanguageConstruct", "InterpreterError", "CuteCompileError"})


class _Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@contextlib.contextmanager
def _poisoned_allocations() -> Iterator[None]:
    """New memory from torch.empty & co. is filled with NaN (ints: max value), so unwritten outputs fail."""
    import torch.utils.deterministic as det

    was_det, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield
    finally:
        det.fill_uninitialized_memory = was_fill
        torch.use_deterministic_algorithms(was_det, warn_only=was_warn)


def _use_first_autotune_config() -> None:
    """Multi-config ``triton.autotune`` needs a GPU to benchmark; on the interpreter this process uses the first
    config (patched once, before the candidate loads: the process is the candidate's alone)."""
    from triton.runtime.autotuner import Autotuner

    original = Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(self.configs) > 1:
            self.configs = self.configs[:1]
        return original(self, *args, **kwargs)

    Autotuner.run = run


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, tuple | list):
        return [x for item in out for x in _flatten(item)]
    if isinstance(out, dict):
        return [x for key in sorted(out) for x in _flatten(out[key])]
    return [out]


def _describe(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"tensor": True, "shape": list(value.shape), "dtype": dtype_name(value.dtype),
                "device": str(value.device), "type": type(value).__name__}
    if isinstance(value, bool | int | float) or value is None:
        return {"tensor": False, "value": value}
    return {"tensor": False, "type": type(value).__name__}


class Harness:
    """One candidate, its ModelNew instances (one per shape) and the outputs of its last timed block."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.device = spec["device"]
        self.source_file = spec["source_file"]
        self.interpreted = bool(spec.get("interpreted"))
        self.language = spec.get("language", "triton")
        self.arena = ArenaView()
        self.models: dict[str, Any] = {}
        self.kept: list[Any] = []
        self.guard = CandidateGuard(candidate_file=self.source_file, allow=tuple(spec.get("allow", ())))
        self.module: Any = None
        self.backend: Any = None
        self.is_cuda = self.device.startswith("cuda")
        self._sync: Callable[[], None] = lambda: None

    # ---------------------------------------------------------------- set-up
    def start(self) -> None:
        torch.set_num_threads(1)  # no intra-op pool: every thread here is one the harness knows of
        from evoforge.backends.registry import get_backend

        self.backend = get_backend(self.spec["backend"], **self.spec.get("backend_options", {}))
        if self.is_cuda:
            index = torch.device(self.device).index or 0
            torch.cuda.set_device(index)
            self._sync = torch._C._cuda_synchronize  # device-wide: every stream of this process's context
            torch.zeros(1, device=self.device).add_(1)  # the context, its threads and the allocator, before the baseline
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            end.record()
            self._sync()
            self._events = (torch.cuda.Event, torch.cuda.Event.elapsed_time)  # taken before the candidate loads
        self.attach(self.spec["arena"])
        if self.interpreted:
            _use_first_autotune_config()
        import numpy

        for dtype in (numpy.float32, numpy.float64):  # BLAS's own pool, if it keeps one, starts now
            numpy.ones((256, 256), dtype=dtype) @ numpy.ones((256, 256), dtype=dtype)
        self.guard.baseline_threads()  # threads that exist now are the libraries'; a new one is the candidate's
        self.guard.install()
        self._load()

    def attach(self, handle: dict[str, Any]) -> None:
        """Map the judge's arena; a failure is the judge's to hear as such (kind ``arena``), not the candidate's."""
        try:
            self.arena.attach(handle)
        except Exception as e:  # noqa: BLE001
            raise _Failure("arena", f"mapping the judge's arena ({handle.get('device')}): "
                           f"{type(e).__name__}: {e}") from e

    def _load(self) -> None:
        Path(self.source_file).write_text(self.spec["source"])
        import importlib.util

        spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, self.source_file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[CANDIDATE_MODULE] = module  # Triton's JIT reads the source through the module
        try:
            with self.guard.watching():
                spec.loader.exec_module(module)
        except BaseException as e:  # noqa: BLE001  (a SystemExit from a candidate's import is its failure too)
            raise _Failure("compile_error", "importing the candidate failed: "
                           + _short_traceback(e, self.source_file)) from e
        params = getattr(module, "PARAMS", None)
        if self.spec.get("params"):
            if not isinstance(params, dict):
                raise _Failure("compile_error", "the candidate has tunable params but its module defines no PARAMS dict")
            params.update(self.spec["params"])
        self.module = module

    # ---------------------------------------------------------------- requests
    def build(self, request: dict[str, Any]) -> dict[str, Any]:
        torch.manual_seed(int(request["seed"]))
        init_inputs = request["init_inputs"]
        try:
            with self.guard.watching():
                model = self.module.ModelNew(*init_inputs)
                state = request.get("state")
                if state is not None:
                    ref_state = {k: self.arena.build(v) for k, v in state.items()}
                    new_state = model.state_dict()
                    if ref_state and set(ref_state) == set(new_state) and all(
                            ref_state[k].shape == new_state[k].shape for k in ref_state):
                        model.load_state_dict({k: v.detach().cpu() for k, v in ref_state.items()})
                model = model.to(self.device)
        except GuardViolation:
            raise
        except Exception as e:
            raise _Failure("runtime_error", "ModelNew(*get_init_inputs()) raised: "
                           + _short_traceback(e, self.source_file)) from e
        self.models[request["key"]] = model
        return {}

    def _forward(self, model: Any, inputs: Any, what: str) -> Any:
        try:
            with torch.no_grad():
                out = model(*inputs)
            self._sync()
            return out
        except GuardViolation:
            raise
        except Exception as e:
            kind = "compile_error" if is_compile_exception(e) else "runtime_error"
            raise _Failure(kind, f"{what}: " + _short_traceback(e, self.source_file)) from e

    def _check_outputs(self, out: Any) -> tuple[list[Any], list[dict[str, Any]]]:
        """The outputs, flat, and what the judge is told of them; a tensor subclass (a value computed lazily,
        when first read) is a violation."""
        flat = _flatten(out)
        for i, value in enumerate(flat):
            if isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter):
                self.guard.violations.append({"kind": "lazy", "message": f"returns a {type(value).__name__} (a "
                                              f"torch.Tensor subclass) as output {i}: outputs must be plain "
                                              "tensors, computed when forward returns"})
        return flat, [_describe(v) for v in flat]

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        model = self.models[request["key"]]
        inputs = self.arena.build(request["inputs"])
        launches = LaunchCounter(candidate_file=self.source_file)
        recorder = OpRecorder(candidate_file=self.source_file) if request.get("watch", True) else None
        launches.recorder = recorder
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.guard.watching())
            if request.get("poison", True):
                stack.enter_context(_poisoned_allocations())
            stack.enter_context(launches.active())
            if recorder is not None:
                stack.enter_context(recorder)
            out = self._forward(model, inputs, request.get("what", "forward raised"))
        with self.guard.watching():  # a tensor subclass's own code runs when its outputs are read
            flat, described = self._check_outputs(out)
            reply: dict[str, Any] = {"launches": launches.launches, "kernels": dict(launches.kernels),
                                     "outputs": described,
                                     "ops": dict(recorder.ops) if recorder is not None else {},
                                     "streams": len(launches.streams)}
            receive = request.get("receive")
            if receive is not None:
                reply["copied"] = self._copy_into(flat, receive)
        return reply

    def _copy_into(self, flat: list[Any], receive: list[Any]) -> bool:
        """Outputs copied into the judge's receive buffers, when they match them (else the judge says why)."""
        if len(flat) != len(receive):
            return False
        pairs = []
        for value, desc in zip(flat, receive, strict=True):
            if desc is None:
                continue
            if not isinstance(value, torch.Tensor):
                return False
            target = self.arena.tensor(desc)
            if tuple(value.shape) != tuple(target.shape) or value.dtype != target.dtype:
                return False
            pairs.append((target, value))
        with torch.no_grad():
            for target, value in pairs:
                target.copy_(value.detach().to(target.device))
        self._sync()
        return True

    def estimate(self, request: dict[str, Any]) -> dict[str, Any]:
        """Per-call time of flush + forward over ``calls`` calls (3; the interpreter's block sizes ask for one), after a
        warm-up call (compilation stays out of it)."""
        model = self.models[request["key"]]
        inputs = self.arena.build(request["settle"])
        calls = max(1, int(request.get("calls", 3)))
        with self.guard.watching(), torch.no_grad():
            model(*inputs)
            self._sync()
            start = _perf_counter()
            for _ in range(calls):
                self.backend.flush()
                model(*inputs)
            self._sync()
        return {"per_call_ms": max((_perf_counter() - start) * 1e3 / calls, 1e-3)}

    def time(self, request: dict[str, Any]) -> dict[str, Any]:
        """One block: ``settle_reps`` untimed calls on the settle set (the device settles on this kernel alone), then
        ``reps`` timed calls, each on its own pool set.

        On a GPU each timed call is bracketed by events on the timing stream; after its end event, the timing
        stream waits for every other stream a launch used and a second event is recorded: work left on a side
        stream shows as the difference. Outputs of the timed calls are kept for the judge to check.
        """
        model = self.models[request["key"]]
        settle = self.arena.build(request["settle"])
        pool = [self.arena.build(d) for d in request["pool"]]
        reps = int(request["reps"])
        self.kept = []
        launches = LaunchCounter(candidate_file=self.source_file)
        times, joined = [], []
        warm_reps = int(request.get("settle_reps", reps))  # 0 where times are not representative (nothing settles)
        settle_reps = max(warm_reps, reps)
        # The timed calls sit evenly among the second half's calls, the rest of which run on the settle set: the
        # device is timed at the state it reaches over the whole block, as a block of repeated calls would be,
        # yet no timed call sees inputs another timed call saw.
        positions = {int((k + 0.5) * settle_reps / reps) for k in range(reps)}
        with self.guard.watching(), torch.no_grad(), launches.active():
            recent: collections.deque[Any] = collections.deque(maxlen=reps + 1)
            for _ in range(warm_reps):
                self.backend.flush()
                recent.append(model(*settle))  # as many outputs alive as the timed half keeps: their memory is
            recent.clear()                      # then in the allocator's cache, not allocated while timed
            if self.is_cuda:
                event_cls = self._events[0]
                timing_stream = torch.cuda.current_stream()
                marks = []
                for j in range(settle_reps):
                    self.backend.flush()
                    if j not in positions:
                        model(*settle)
                        continue
                    launches.streams.clear()
                    s, e, e2 = event_cls(enable_timing=True), event_cls(enable_timing=True), event_cls(enable_timing=True)
                    s.record(timing_stream)
                    out = model(*pool[len(marks) % len(pool)])
                    e.record(timing_stream)
                    for stream in list(launches.streams):
                        if stream != timing_stream:
                            timing_stream.wait_stream(stream)
                    e2.record(timing_stream)
                    marks.append((s, e, e2))
                    self.kept.append(out)
                self._sync()
                elapsed = self._events[1]
                for s, e, e2 in marks:
                    times.append(float(elapsed(s, e)))
                    joined.append(float(elapsed(s, e2)))
            else:
                for j in range(settle_reps):
                    self.backend.flush()
                    if j not in positions:
                        model(*settle)
                        continue
                    t0 = _perf_counter()
                    out = model(*pool[len(times) % len(pool)])
                    self._sync()
                    times.append((_perf_counter() - t0) * 1e3)
                    self.kept.append(out)
                joined = list(times)
        return {"times_ms": times, "joined_ms": joined}

    def fetch(self, request: dict[str, Any]) -> dict[str, Any]:
        copied = []
        with self.guard.watching():
            for index, receive in zip(request["indices"], request["receive"], strict=True):
                flat, _ = self._check_outputs(self.kept[index])
                copied.append(self._copy_into(flat, receive))
        return {"copied": copied}

    def drop(self, request: dict[str, Any]) -> dict[str, Any]:
        self.kept = []
        if request.get("key") is not None:
            self.models.pop(request["key"], None)
        return {}


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the forkserver's death is ours
    except (OSError, AttributeError):
        pass


def serve(conn: Any) -> None:
    """The candidate process's main: close what it inherited, read its spec, set up, then answer the judge's
    requests until it closes the channel.

    Requests arrive pickled (the judge is trusted); every reply is one JSON document, so the judge never
    unpickles anything this process wrote.
    """
    _die_with_parent()
    # Only the channel to the judge and the standard streams stay open: the forkserver's and the resource
    # tracker's pipes that multiprocessing hands a child are nothing a candidate should be able to write to.
    keep = sorted({0, 1, 2, conn.fileno()})
    for low, high in zip(keep, [*keep[1:], 1 << 16], strict=True):
        os.closerange(low + 1, high)
    try:
        spec = conn.recv()
        receive_fd(conn, spec)  # an exported arena's descriptor comes next on the channel
    except (EOFError, OSError, RuntimeError):
        return
    workdir = spec["workdir"]
    import resource

    from evoforge.judge.containment import drop_capabilities

    # A process group of its own, which the judge kills in one call (a fork bomb's children are born into it), and
    # no capabilities: run by root, the candidate keeps the user id but cannot read the memory or environment of
    # an undumpable process (those holding the LLM key), mount, or bypass file permissions.
    os.setpgid(0, 0)
    drop_capabilities()

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file past the limit is a failed write, not a dead process
    limit = int(spec.get("max_file_bytes", 2 << 30))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    log = os.open(os.path.join(workdir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)  # whatever the candidate prints goes to its log (the judge quotes its tail on a crash)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = sys.stderr
    os.chdir(workdir)
    os.environ.update({"HOME": workdir, "TMPDIR": workdir})
    import tempfile

    tempfile.tempdir = workdir  # the forkserver may have cached its own
    harness = Harness(spec)

    def reply(nonce: Any, body: dict[str, Any], *, sweep: bool = True) -> None:
        body["nonce"] = nonce
        body["violations"] = body.get("violations", []) + (harness.guard.sweep() if sweep else [])
        conn.send_bytes(json.dumps(body, default=str).encode())

    try:
        harness.start()
        reply(spec.get("nonce"), {"ready": True, "pid": os.getpid()})
    except _Failure as f:
        reply(spec.get("nonce"), {"error": {"kind": f.kind, "message": str(f)}})
        return
    except GuardViolation as v:
        reply(spec.get("nonce"), {"error": {"kind": "rejected", "message": str(v)}})
        return
    handlers = {"build": harness.build, "call": harness.call, "estimate": harness.estimate, "time": harness.time,
                "fetch": harness.fetch, "drop": harness.drop, "ping": lambda request: {}}
    while True:
        try:
            request = conn.recv()
            receive_fd(conn, request)
        except (EOFError, OSError, RuntimeError):
            return
        if request.get("op") == "exit":
            return
        try:
            if "arena" in request:  # the judge's arena grew: map the new one
                harness.attach(request["arena"])
            harness.arena.pull(request.get("stage"))
            body = handlers[request["op"]](request)
        except _Failure as f:
            body = {"error": {"kind": f.kind, "message": str(f)}}
        except GuardViolation as v:
            body = {"error": {"kind": "rejected", "message": str(v)}}
        except Exception as e:  # the harness itself failed on what the candidate did (e.g. a broken context)
            body = {"error": {"kind": "runtime_error", "message": _short_traceback(e, harness.source_file)}}
        try:
            harness.arena.push(request.get("stage"))  # staged: what the judge reads back after the reply
        except Exception as e:  # noqa: BLE001  (a context the candidate broke: the judge hears why)
            body = body if "error" in body else {"error": {"kind": "runtime_error", "message": _short_traceback(
                e, harness.source_file)}}
        reply(request.get("nonce"), body, sweep=request["op"] not in ("fetch", "drop"))


__all__ = ["CAPABILITIES", "CandidateGuard", "GuardViolation", "serve"]
