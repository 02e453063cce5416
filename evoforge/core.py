"""The shared vocabulary: Candidate, EvalStatus, EvalResult.

Everything that crosses a process or machine boundary (a Ray actor, the sandbox child, the Optuna record)
is one of these, turned into plain JSON-able dicts by ``to_dict``/``from_dict``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import enum
import functools
import hashlib
import json
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, TypeVar

T = TypeVar("T")


class EvalStatus(enum.StrEnum):
    """How a candidate ended. Exactly one per evaluation; only ``OK`` carries a fitness."""

    OK = "ok"
    INVALID = "invalid"  # breaks a hard rule of the target hardware; never compiled
    REJECTED = "rejected"  # static or runtime anti-cheat
    COMPILE_ERROR = "compile_error"  # syntax, import or JIT error
    RUNTIME_ERROR = "runtime_error"  # raised while running
    INCORRECT = "incorrect"  # ran, but does not compute the reference's function
    IMPLAUSIBLE = "implausible"  # correct, but timed faster than the device's physical floor allows
    TIMEOUT = "timeout"  # killed past its time limit
    CRASHED = "crashed"  # the process died (segfault, abort, OOM kill)

    @property
    def is_failure(self) -> bool:
        return self is not EvalStatus.OK


class UsageError(Exception):
    """A mistake the user can fix (bad file, flag or config). The CLI prints it as one line, exit code 2."""


# Terminal colour and cursor codes (Ray colours the tracebacks it forwards; compilers colour their errors).
_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# The line a Python traceback ends with: the exception's (dotted) name, then its message.
_ERROR_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failed|Failure)\b")


def without_terminal_codes(text: str) -> str:
    return _TERMINAL_CODES.sub("", text)


def last_error_line(output: str, *, fallback: bool = True, limit: int = 500) -> str:
    """The cause a child process's output gives for its end: its last error line (a traceback ends with it),
    else (``fallback``) its last line; colour codes stripped, at most ``limit`` characters. A message quoting a
    child quotes this first: the output's first characters are a preamble, cut before the cause."""
    lines = [line.strip() for line in without_terminal_codes(output).splitlines() if line.strip()]
    found = next((line for line in reversed(lines) if _ERROR_LINE.match(line)), None)
    if found is None and fallback and lines:
        found = lines[-1]
    return (found or "")[:limit]


class DeprecatedFlag(argparse.Action):
    """An old spelling of a flag, kept working: it stores into the new flag's ``dest`` and says so in one line.

    ``p.add_argument("--trials", dest="correctness_runs", type=int, action=DeprecatedFlag, new="--correctness-runs",
    help=argparse.SUPPRESS)``: scripts and configs written for the old name keep running.
    """

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"evoforge: note: {option_string} is now {self.new} (the old name still works)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _module_assignment(tree: ast.Module, name: str) -> ast.Assign | ast.AnnAssign | None:
    """The module-level statement that assigns ``name`` (the first one), if any."""
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return node
    return None


def _literal(node: ast.Assign | ast.AnnAssign | None) -> Any:
    try:
        return ast.literal_eval(node.value) if node is not None and node.value is not None else None
    except ValueError:
        return None


def per_source(max_chars: int) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """A function of a kernel source, its answers kept per source until the sources kept hold ``max_chars`` characters
    (least recently asked dropped first; a source longer than that is answered and not kept).

    A campaign's driver reads every child's structure (its declaration, its language, the knowledge base's model of
    it) and its tasks' structures interleave: a cache counted in entries either holds too few for a campaign of 200
    tasks (each child's check parsed its source again: 150 ms for a 44 KB Inductor seed) or too much memory for
    Inductor's large sources (the knowledge base's model of one is about 100 bytes per character). Counted in source
    characters, it holds a thousand small sources or the hundred largest, in bounded memory."""

    def wrap(fn: Callable[[str], T]) -> Callable[[str], T]:
        kept: OrderedDict[str, T] = OrderedDict()
        held = [0]
        lock = threading.Lock()

        @functools.wraps(fn)
        def cached(source: str) -> T:
            with lock:
                if source in kept:
                    kept.move_to_end(source)
                    return kept[source]
            value = fn(source)
            if len(source) <= max_chars:
                with lock:
                    if source not in kept:
                        kept[source] = value
                        held[0] += len(source)
                    while held[0] > max_chars:
                        old, _ = kept.popitem(last=False)
                        held[0] -= len(old)
            return value

        cached.cache_held = lambda: (len(kept), held[0])  # type: ignore[attr-defined]
        return cached

    return wrap


def declared_space(source: str) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Read the module-level ``SPACE`` and ``PARAMS`` literals of a candidate source: the one reader of the
    convention (the knowledge base's source model, the rule operators and the export read it through here).

    Returns empty dicts when the source does not parse or declares nothing: the static check reports parse
    errors, this function only reads what is there. Each call gets its own copies (a campaign's driver reads one
    source's declaration for every child of it: parsed once, ``_declared``).
    """
    space, params = _declared(source)
    return {k: list(v) for k, v in space.items()}, copy.deepcopy(params)


@per_source(16 << 20)
def _declared(source: str) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}, {}
    space = _literal(_module_assignment(tree, "SPACE"))
    params = _literal(_module_assignment(tree, "PARAMS"))
    space = {str(k): list(v) for k, v in space.items()} if isinstance(space, dict) else {}
    params = dict(params) if isinstance(params, dict) else {}
    return space, params


def undeclared_params(source: str, names: Any) -> list[str]:
    """Names among ``names`` that the source declares in neither ``SPACE`` nor ``PARAMS``: a value set for one of
    them reaches nothing (``BLOKC=1024`` would be evaluated as if it had not been given)."""
    space, params = declared_space(source)
    return sorted(set(names) - set(space) - set(params))


def check_params(source: str, params: Any, *, where: str) -> None:
    """A parameter the candidate does not declare is a typo (``BLOKC``), refused in one line, not ignored."""
    unknown = undeclared_params(source, params)
    if unknown:
        space, defaults = declared_space(source)
        declared = sorted({*space, *defaults})
        raise UsageError(f"{where}: the candidate declares no parameter {', '.join(unknown)} "
                         f"(its SPACE and PARAMS name: {', '.join(declared) or 'none'})")


LANGUAGES = ("triton", "cute")


@per_source(16 << 20)
def source_language(source: str) -> str:
    """The kernel language a candidate module is written in, read from its source (no code is run; the answer is
    kept per source: a campaign's driver asks it of every child of a structure).

    A module-level ``LANGUAGE = "cute"`` literal says it; without one, a module that keeps CUDA C++ in a
    module-level ``CUDA_SRC`` and imports ``evoforge.backends.cute`` (the CuTe contract) is CuTe; anything else
    is Triton (whose static check then says what is missing).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "triton"
    declared = _literal(_module_assignment(tree, "LANGUAGE"))
    if isinstance(declared, str) and declared.lower() in LANGUAGES:
        return declared.lower()
    if _module_assignment(tree, "CUDA_SRC") is not None:
        for node in tree.body:
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(n == "evoforge.backends.cute" or n.startswith("evoforge.backends.cute.") for n in names):
                return "cute"
    return "triton"


def params_lines(source: str) -> tuple[int, int] | None:
    """The first and last line (1-based) of the module's literal ``PARAMS = {...}``; None where there is none."""
    try:
        node = _module_assignment(ast.parse(source), "PARAMS")
    except SyntaxError:
        return None
    if node is None or not isinstance(_literal(node), dict):
        return None
    return node.lineno, node.end_lineno or node.lineno


def json_safe(value: Any) -> Any:
    """NaN and infinities become None (JSON has neither); containers are walked."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


@functools.lru_cache(maxsize=4096)
def source_hash(source: str) -> str:
    """A source's identity (a structure's id), kept per source: a campaign's driver asks it of the same few sources
    hundreds of thousands of times (every candidate's ``id`` and ``structure_id``), and an Inductor seed's source is
    tens of kilobytes to hash."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


#: the ``operator`` a task's first kernel carries: a record name, no registered operator (it has no parent); the
#: operators' names live in ``evoforge.mutators.names``
SEED_OPERATOR = "seed"


@dataclass(frozen=True)
class Candidate:
    """One individual: a structure (the source) and the values of its tunable parameters.

    ``params`` are injected into the module's ``PARAMS`` dict before ``ModelNew`` is built, so Optuna tunes
    values while mutators change the source.
    """

    source: str
    task: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    space: dict[str, list[Any]] = field(default_factory=dict)
    parents: tuple[str, ...] = ()
    operator: str = SEED_OPERATOR
    stage: str = ""
    language: str = "triton"  # the kernel language: "triton" or "cute" (CUDA C++ with CuTe)
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_source(cls, source: str, **kwargs: Any) -> Candidate:
        """Build a candidate whose space and default params are the ones the source declares; its language is
        the one the source is written in (``source_language``) unless ``language`` is given."""
        space, defaults = declared_space(source)
        params = {**defaults, **kwargs.pop("params", {})}
        kwargs.setdefault("space", space)
        if kwargs.get("language") is None:
            kwargs["language"] = source_language(source)
        return cls(source=source, params=params, **kwargs)

    @property
    def structure_id(self) -> str:
        """Identity of the structure alone: children that only retune parameters share it."""
        return source_hash(self.source)

    @functools.cached_property
    def id(self) -> str:
        """The source and the parameter values hashed, once per candidate (a candidate is immutable: a change is a
        new one, ``with_params``/``replace``); the driver reads a child's id several times on its way."""
        params = json.dumps(self.params, sort_keys=True, default=str)
        return hashlib.sha256((self.source + "\0" + params).encode()).hexdigest()[:16]

    def with_params(self, params: dict[str, Any], **changes: Any) -> Candidate:
        return replace(self, params={**self.params, **params}, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["parents"] = list(self.parents)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Candidate:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["parents"] = tuple(d.get("parents", ()))
        return cls(**d)


@dataclass(frozen=True)
class EvalResult:
    """What the verification chain says about one candidate. A failure is a status with a message."""

    status: EvalStatus
    message: str = ""
    runtime_ms: float | None = None
    ref_ms: float | None = None
    speedup: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    criterion: str = ""  # which correctness criterion decided
    pct_of_floor: float | None = None
    floor_ms: float | None = None
    below_floor: bool = False
    timing_representative: bool = True
    backend: str = ""
    arch: str = ""
    device_name: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    compile_s: float | None = None
    eval_s: float | None = None
    cached: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is EvalStatus.OK

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["status"] = EvalStatus(d["status"])
        return cls(**d)

    @classmethod
    def failure(cls, status: EvalStatus, message: str, **kwargs: Any) -> EvalResult:
        return cls(status=status, message=message, **kwargs)


# ---------------------------------------------------------------- the device's turn


class DeviceTurn:
    """The device's turn in this process: an exclusive ``flock`` on the device's lock file, taken at the outermost
    entry of a thread and kept through nested ones (Inductor's ``benchmark_gpu`` calls its parent's; a judge holding
    the turn may run a compile that benchmarks), other threads waiting. One per lock file and process
    (``device_turn_holder``): two descriptors of one file in one process would lock each other out. The kernel drops
    the lock when the holder exits or dies. ``backends.base.device_turn`` and Inductor's benchmarking in a capture
    or the judge's compile (``take_turn_while_benchmarking``) hold it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @contextlib.contextmanager
    def __call__(self) -> Any:
        import fcntl
        import os

        with self._lock:
            if self._depth == 0:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    os.close(self._fd)  # closing the descriptor releases the lock
                    self._fd = None


_TURNS: dict[str, DeviceTurn] = {}
_TURNS_LOCK = threading.Lock()


def device_turn_holder(path: str) -> DeviceTurn:
    """This process's ``DeviceTurn`` of the lock file ``path``."""
    with _TURNS_LOCK:
        return _TURNS.setdefault(path, DeviceTurn(path))


def take_turn_while_benchmarking(path: str) -> None:
    """Inductor's GPU benchmarking (autotuning launch configs and GEMM tiles) in this process holds the device's turn
    at ``path``: through ``set_gpu_benchmark_lock_context``, Inductor's own hook, where torch has it; else (torch
    2.11) each benchmarker class's GPU timing methods wrapped, once."""
    import functools

    from torch._inductor.runtime import benchmarking

    turn = device_turn_holder(path)
    if hasattr(benchmarking, "set_gpu_benchmark_lock_context"):
        benchmarking.set_gpu_benchmark_lock_context(turn)
        return
    for cls in vars(benchmarking).values():
        if not (isinstance(cls, type) and issubclass(cls, benchmarking.Benchmarker)):
            continue
        for name in ("benchmark_gpu", "benchmark_gpu_with_cuda_graph"):
            method = cls.__dict__.get(name)
            if method is None or getattr(method, "_evoforge_turn", False):
                continue

            def held(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
                with turn():
                    return _method(*args, **kwargs)

            wrapped = functools.wraps(method)(held)
            wrapped._evoforge_turn = True  # type: ignore[attr-defined]
            setattr(cls, name, wrapped)
