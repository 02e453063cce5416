"""KernelBench-format tasks: a module with ``Model``, ``get_inputs`` and ``get_init_inputs``.

A ``Task`` is a plain, picklable description (path, constant overrides, extra correctness shapes). The module
itself is executed only where it is used: in the evaluation process, by ``load_task_module``.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import os
import re
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoforge.core import UsageError

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
# EVOFORGE_ALLOW's words: what a candidate's process may do (threads, processes, native code, torch.compile,
# reading frames, sockets) and what the judge admits (fewer_flops: a time under the reference's FLOPs at peak).
ALLOWABLE = ("threads", "processes", "native", "compile", "introspection", "network", "fewer_flops")


KERNELBENCH_ENV = "EVOFORGE_KERNELBENCH"


@dataclass(frozen=True)
class KernelBenchSource:
    """Where KernelBench's levels are and how evoforge found them (said by ``--version`` and by every error)."""

    path: Path | None  # None: found nowhere
    how: str  # "--kernelbench", "kernelbench in config X", "EVOFORGE_KERNELBENCH", "the fetch cache", ...
    explicit: bool = False  # named by the user: a folder that is not KernelBench is an error, not a fall-through

    def describe(self) -> str:
        if self.path is None:
            return f"KernelBench not found (evoforge kernelbench fetch puts it in {kernelbench_cache_dir()})"
        problem = "" if is_kernelbench(self.path) else ": not a KernelBench folder"
        return f"KernelBench {self.path} ({self.how}{problem})"


def kernelbench_cache_dir() -> Path:
    """Where ``evoforge kernelbench fetch`` unpacks KernelBench: ``$XDG_CACHE_HOME/evoforge/kernelbench``, else
    ``~/.cache/evoforge/kernelbench``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evoforge" / "kernelbench"


def _levels_root(folder: Path) -> Path:
    """A KernelBench clone holds its levels in ``KernelBench/``; the folder itself otherwise."""
    inner = folder / "KernelBench"
    return inner if not _levels(folder) and _levels(inner) else folder


def _levels(folder: Path) -> list[str]:
    try:
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"level\d+", p.name))
    except OSError:
        return []


def is_kernelbench(folder: Path) -> bool:
    """A folder with at least one ``levelN/`` in it (directly, or in a clone's ``KernelBench/``)."""
    return bool(_levels(_levels_root(folder)))


def _checkout_kernelbench() -> Path | None:
    """``../shared/kernelbench`` beside a checkout (``make test`` and ``make demo`` from a clone); an installed
    package has no checkout around it, and looks nowhere near site-packages."""
    repo = Path(__file__).resolve().parent.parent
    if not (repo / "pyproject.toml").is_file():
        return None
    for candidate in (repo.parent / "shared" / "kernelbench", repo / "shared" / "kernelbench"):
        if is_kernelbench(candidate):
            return candidate
    return None


# The command line's ``--kernelbench DIR`` for the command it runs (``chosen_kernelbench``); None elsewhere.
_chosen: KernelBenchSource | None = None


@contextmanager
def chosen_kernelbench(folder: str | Path | None, *, how: str = "--kernelbench") -> Iterator[None]:
    """Within the block, KernelBench is ``folder`` for every task resolved in this process (a command's flag, which
    outranks the rest); the previous choice comes back after it, so nothing leaks into the next command."""
    global _chosen
    previous = _chosen
    if folder is not None:
        _chosen = KernelBenchSource(Path(folder).expanduser().resolve(), how, explicit=True)
    try:
        yield
    finally:
        _chosen = previous


def locate_kernelbench(config_dir: str | Path | None = None, *, config_how: str = "") -> KernelBenchSource:
    """KernelBench's folder, by the first way in that names one: ``--kernelbench``, a campaign config's
    ``kernelbench`` key, ``$EVOFORGE_KERNELBENCH``, the fetch cache, ``../shared/kernelbench`` beside a checkout."""
    if _chosen is not None:
        return _chosen
    if config_dir:
        return KernelBenchSource(Path(config_dir).expanduser(), config_how or "the config's kernelbench", explicit=True)
    env = os.environ.get(KERNELBENCH_ENV)
    if env:
        return KernelBenchSource(Path(env).expanduser(), KERNELBENCH_ENV, explicit=True)
    cache = kernelbench_cache_dir()
    if is_kernelbench(cache):
        return KernelBenchSource(cache, "the cache of `evoforge kernelbench fetch`")
    checkout = _checkout_kernelbench()
    if checkout is not None:
        return KernelBenchSource(checkout, "beside the checkout: ../shared/kernelbench")
    return KernelBenchSource(None, "not found")


def default_kernelbench_dir() -> Path:
    """KernelBench's folder as ``locate_kernelbench`` finds it (the fetch cache's place where it finds none)."""
    return locate_kernelbench().path or kernelbench_cache_dir()


def kernelbench_order() -> str:
    """The ways in, in the order ``locate_kernelbench`` tries them (for --help)."""
    return (f"--kernelbench DIR, then kernelbench = \"DIR\" in a campaign config's [campaign], then ${KERNELBENCH_ENV}, "
            f"then {kernelbench_cache_dir()} (where `evoforge kernelbench fetch` unpacks it), then "
            "../shared/kernelbench beside a checkout")


def kernelbench_flag_help() -> str:
    return (f"KernelBench folder (holding level1/, level2/) for L1/23-style tasks; looked up in this order: "
            f"{kernelbench_order()} (`evoforge kernelbench where` says which is in use)")


def ways_to_kernelbench() -> str:
    """Every way in, for the one line a user reads when none found KernelBench."""
    return (f"give --kernelbench DIR, or kernelbench = \"DIR\" in the campaign config's [campaign], or set "
            f"{KERNELBENCH_ENV}=DIR, or run `evoforge kernelbench fetch` (it unpacks into {kernelbench_cache_dir()})")


def kernelbench_root(source: KernelBenchSource, spec: str) -> Path:
    """The folder holding ``levelN/`` for ``spec``, or one UsageError line naming the way in to fix."""
    if source.path is None:
        raise UsageError(f"task {spec}: KernelBench not found: {ways_to_kernelbench()}")
    if not is_kernelbench(source.path):
        where = f"{source.path} (from {source.how})"
        raise UsageError(f"task {spec}: {where} is not a KernelBench folder (no level1/, level2/ in it): point "
                         f"{source.how} at the folder holding level1/, or run `evoforge kernelbench fetch`")
    return _levels_root(source.path)


_SHORT = re.compile(r"^(?:kb:)?(?:level|L)(\d+)[/:](\d+)$", re.IGNORECASE)


def is_kernelbench_spec(spec: str) -> bool:
    """``L1/23``, ``level1/23``, ``kb:L1:23``: KernelBench problem 23 of level 1 (not a path)."""
    return bool(_SHORT.match(spec.strip()))


def _nearest_problems(level_dir: Path, level: str, number: int, count: int = 3) -> str:
    by_number = []
    for p in level_dir.glob("*.py"):
        head = p.stem.split("_", 1)[0]
        if head.isdigit():
            by_number.append((abs(int(head) - number), int(head), p.stem))
    nearest = sorted(by_number)[:count]
    return ", ".join(f"L{level}/{n} ({stem})" for _, n, stem in sorted(nearest, key=lambda t: t[1]))


def resolve_task_path(spec: str, *, base_dir: Path | None = None, kernelbench: KernelBenchSource | None = None) -> Path:
    """Turn a task spec into a file: a path, or ``L1/23`` / ``level1/23`` for KernelBench problem 23 of level 1,
    looked up where ``locate_kernelbench`` (or ``kernelbench``) says."""
    m = _SHORT.match(spec.strip())
    if m:
        source = kernelbench or locate_kernelbench()
        root = kernelbench_root(source, spec)
        level, number = m.groups()
        level_dir = root / f"level{level}"
        if not level_dir.is_dir():
            raise UsageError(f"task {spec}: KernelBench at {root} (from {source.how}) has no level{level} "
                             f"(it has {', '.join(_levels(root))})")
        matches = sorted(level_dir.glob(f"{int(number)}_*.py"))
        if not matches:
            raise UsageError(f"task {spec}: KernelBench level {level} has no problem {int(number)} ({level_dir}, "
                             f"from {source.how}); nearest: {_nearest_problems(level_dir, level, int(number))}")
        return matches[0]
    path = Path(spec)
    if not path.is_absolute() and base_dir is not None and not path.exists():
        path = base_dir / path
    if not path.exists():
        source = kernelbench or locate_kernelbench()
        root = _levels_root(source.path) if source.path is not None else None
        if root is not None and (root / spec).exists():
            return root / spec
        raise UsageError(f"task {spec}: file not found (give a path to a KernelBench-format .py file, or L1/23)"
                         + _near_kernelbench_file(spec, root, source))
    return path


def _near_kernelbench_file(spec: str, root: Path | None, source: KernelBenchSource) -> str:
    """``level1/19_Relu.py`` where KernelBench has ``level1/19_ReLU.py``: the names nearest the one given."""
    parts = Path(spec).parts
    if root is None or len(parts) != 2 or not (root / parts[0]).is_dir():
        return ""
    names = sorted(p.name for p in (root / parts[0]).glob("*.py"))
    close = difflib.get_close_matches(parts[1], names, n=3, cutoff=0.5)
    if not close:
        return ""
    return f"; nearest in {root / parts[0]} (from {source.how}): {', '.join(f'{parts[0]}/{c}' for c in close)}"


def read_candidate_file(path: str, *, flag: str = "CANDIDATE") -> str:
    """The text of a candidate (or seed kernel) file; a missing or unreadable one is a UsageError naming ``flag``."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{flag} {path}: file not found")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{flag} {path}: cannot read ({e.__class__.__name__})") from None


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside brackets, so ``shape=(77,),n=3`` is two assignments."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def parse_assignments(text: str, *, flag: str) -> dict[str, Any]:
    """Parse ``k=v,k=v`` (values are Python literals, else strings)."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in _split_top_level(text, ","))):
        if "=" not in part:
            raise UsageError(f"{flag} {text!r}: expected NAME=VALUE, got {part!r}")
        key, value = (s.strip() for s in part.split("=", 1))
        if not key.isidentifier():
            raise UsageError(f"{flag} {text!r}: {key!r} is not a Python name")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def parse_shapes(text: str | None) -> list[dict[str, Any]]:
    """``"batch_size=16,dim=1000;batch_size=3,dim=777"`` -> two override dicts."""
    if not text:
        return []
    return [parse_assignments(s, flag="--shapes") for s in _split_top_level(text, ";") if s.strip()]


@dataclass(frozen=True)
class Task:
    """A reference to compute, at one main shape plus extra correctness shapes."""

    path: str
    name: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)
    shapes: tuple[dict[str, Any], ...] = ()
    allow_ops: tuple[str, ...] = ()
    # What the candidate's process may do beyond launching kernels (judge/runner.py CAPABILITIES: threads,
    # processes, native, compile, introspection) and what the judge admits (fewer_flops: faster than the
    # reference's FLOPs at peak, an algebraic rewrite). From EVOFORGE_ALLOW in the task file or the config.
    allow: tuple[str, ...] = ()
    # Multiplies the bytes of inputs + outputs in the memory floor. A softmax whose rows do not fit on chip
    # reads x twice and writes y once: 3 x size over (in + out) = 2 x size, so 1.5.
    floor_passes: float = 1.0

    @classmethod
    def load(
        cls,
        spec: str,
        *,
        overrides: dict[str, Any] | None = None,
        shapes: list[dict[str, Any]] | None = None,
        allow_ops: list[str] | None = None,
        allow: list[str] | None = None,
        floor_passes: float | None = None,
        base_dir: Path | None = None,
    ) -> Task:
        """Resolve and check a task file without executing it; every problem is one UsageError line."""
        path = resolve_task_path(spec, base_dir=base_dir).resolve()
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"task {path}: cannot read ({e.__class__.__name__}: {e})") from None
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as e:
            raise UsageError(f"task {path}: syntax error at line {e.lineno}: {e.msg}") from None
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        missing = [r for r in REQUIRED if r not in defined]
        if missing:
            raise UsageError(f"task {path}: missing {', '.join(missing)} (a KernelBench task defines Model, get_inputs, get_init_inputs)")
        constants = module_constants(tree)
        for shape in [overrides or {}, *(shapes or [])]:
            unknown = sorted(set(shape) - set(constants))
            if unknown:
                raise UsageError(
                    f"task {path}: no module constant {', '.join(unknown)} to set "
                    f"(it has: {', '.join(sorted(constants)) or 'none'})"
                )
            for key, value in shape.items():
                _check_kind(path, key, value, constants[key])
        declared_allow = constants.get("EVOFORGE_ALLOW_OPS") or ()
        capabilities = tuple(constants.get("EVOFORGE_ALLOW") or ()) + tuple(allow or ())
        unknown_capabilities = sorted(set(capabilities) - set(ALLOWABLE))
        if unknown_capabilities:
            raise UsageError(f"task {path}: unknown allowance {', '.join(unknown_capabilities)} "
                             f"(EVOFORGE_ALLOW takes: {', '.join(ALLOWABLE)})")
        passes = floor_passes if floor_passes is not None else constants.get("EVOFORGE_FLOOR_PASSES", 1.0)
        return cls(
            path=str(path),
            name=task_name(path),
            overrides=dict(overrides or {}),
            shapes=tuple(dict(s) for s in shapes or ()),
            allow_ops=tuple(declared_allow) + tuple(allow_ops or ()),
            allow=tuple(dict.fromkeys(capabilities)),
            floor_passes=float(passes),
        )

    @property
    def source(self) -> str:
        return Path(self.path).read_text()

    def key(self) -> dict[str, Any]:
        """Everything about the task that changes an evaluation's result (for the result cache)."""
        return {"source": self.source, "overrides": self.overrides, "shapes": list(self.shapes),
                "allow_ops": list(self.allow_ops), "allow": list(self.allow)}

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "overrides": self.overrides, "shapes": list(self.shapes),
                "allow_ops": list(self.allow_ops), "allow": list(self.allow), "floor_passes": self.floor_passes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        return cls(path=d["path"], name=d.get("name", ""), overrides=dict(d.get("overrides", {})),
                   shapes=tuple(d.get("shapes", ())), allow_ops=tuple(d.get("allow_ops", ())),
                   allow=tuple(d.get("allow", ())),
                   floor_passes=float(d.get("floor_passes", 1.0)))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list | tuple):
        return "tuple"
    return type(value).__name__


def _check_kind(path: Path, key: str, value: Any, default: Any) -> None:
    """A constant set to a value of another kind than the task's own (``batch_size=abc``, ``dim=seven``) is the
    user's mistake, said now in one line: drawn into ``torch.rand`` it would fail inside the judge, where it reads
    as a failed kernel."""
    if default is None:  # not a literal in the task file: nothing to compare with
        return
    want, got = _kind(default), _kind(value)
    if want == got or (want == "number" and got == "integer"):
        return
    raise UsageError(f"task {path}: {key}={value!r} is not {'an' if want[0] in 'aeiou' else 'a'} {want} like the "
                     f"task's own {key} = {default!r}; give {key}=<{want}> (in --set, --shapes or the config)")


def task_name(path: Path) -> str:
    """``level1/23_Softmax`` for KernelBench files, else the file stem."""
    parent = path.parent.name
    return f"{parent}/{path.stem}" if re.fullmatch(r"level\d", parent) else path.stem


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments (the shape constants a task exposes), each name of a
    ``D, H, W = 16, 32, 32`` unpacking and of a ``height = width = 256`` chain."""
    out: dict[str, Any] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, SyntaxError):
            value = None
        for target in node.targets:
            if isinstance(target, ast.Name):
                out[target.id] = value
            elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
                n = len(target.elts)
                values = value if isinstance(value, tuple) and len(value) == n else [None] * n
                out.update({e.id: v for e, v in zip(target.elts, values, strict=True)})
    return out


def module_constants_of(task: Task) -> dict[str, Any]:
    """The task file's module-level literal constants (before overrides), read without running it."""
    return module_constants(ast.parse(Path(task.path).read_text()))


def load_task_module(task: Task, shape: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute the task file as a fresh module (not registered in ``sys.modules``) with constants set."""
    return exec_module_file(task.path, f"evoforge_task_{abs(hash(task.path))}", {**task.overrides, **(shape or {})})


def exec_module_file(path: str, module_name: str, constants: dict[str, Any] | None = None) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # Triton's JIT reads the function's source through linecache/inspect; it needs the module registered
    # while it executes. Registered under a unique name and removed afterwards so nothing leaks.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(module_name, None)
    for key, value in (constants or {}).items():
        setattr(module, key, value)
    return module


def parse_allow_ops(value: str | None, *, flag: str = "--allow-ops") -> list[str]:
    """``--allow-ops addmm,convolution``: the ATen ops a kernel may leave to PyTorch (cuBLAS/cuDNN), each checked to
    be one (a misspelt op would allow nothing and fail every candidate)."""
    if not value:
        return []
    ops = [o.strip().removeprefix("aten.") for o in value.split(",") if o.strip()]
    import torch

    unknown = [o for o in ops if not o.isidentifier() or not hasattr(torch.ops.aten, o)]
    if unknown:
        raise UsageError(f"{flag} {unknown[0]}: no ATen op of that name (give ATen op names separated by commas, "
                         "as a 'not started' line names them: e.g. addmm, bmm, convolution)")
    return ops
