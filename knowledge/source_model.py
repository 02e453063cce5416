"""A static model of a candidate module: its Triton kernels, their launches, and the values each launch binds.

Rules are checked before anything compiles, so everything here comes from the source (``ast``) and the
candidate's parameters. A constexpr is known when it is a literal, a module constant, a ``PARAMS`` entry
(candidate params override the module's ``PARAMS``), a kernel default, an autotune ``Config`` value, or simple
arithmetic of those; anything else is ``UNKNOWN`` and no rule judges it (a false "invalid" would throw away a
good kernel; the compiler still catches what this misses).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from evoforge.core import declared_space, per_source


class _Unknown:
    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()

#: Launch keywords that are compiler options rather than kernel arguments.
LAUNCH_OPTIONS = frozenset(
    {"num_warps", "num_stages", "num_ctas", "maxnreg", "grf_mode", "warp_size", "threads_per_warp",
     "enable_fp_fusion", "launch_cooperative_grid", "waves_per_eu", "matrix_instr_nonkdim", "kpack"}
)

TILE_NAME = re.compile(r"^(?:BLOCK|TILE|BLK|B)_?(?:SIZE_)?([MNK])$", re.IGNORECASE)
_GROUP_NAME = re.compile(r"^GROUP(?:_SIZE)?_?[MN]?$", re.IGNORECASE)
_DTYPE_BYTES = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
    "float8e4nv": 1, "float8e5": 1, "float8e4b15": 1, "float8e4b8": 1, "float8e5b16": 1, "float8_e4m3fn": 1,
    "float8_e5m2": 1, "half": 2, "float": 4, "double": 8,
}


def dotted(node: ast.AST) -> str:
    """``tl.program_id`` -> "tl.program_id"; "" when the node is not a plain dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _tail(node: ast.AST) -> str:
    name = dotted(node)
    return name.rsplit(".", 1)[-1] if name else ""


def is_pow2(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and value & (value - 1) == 0


def _walk_no_nested(body: list[ast.stmt]) -> list[ast.AST]:
    """All nodes of a function body, not descending into nested functions, lambdas or classes."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        out.append(node)
        for child in reversed(list(ast.iter_child_nodes(node))):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                continue
            stack.append(child)
    return out


def _local_assignments(body: list[ast.stmt], *, unpack: bool = False) -> dict[str, list[ast.expr | None]]:
    """Name -> every expression assigned to it (None where the value is not a plain expression).

    ``unpack`` pairs ``a, b = x, y`` element-wise: for a launcher's tile sizes
    (``bm, bn = PARAMS["BLOCK_M"], PARAMS["BLOCK_N"]``). Inside a kernel it stays off: a branch such as
    ``if WIDEN: a, b = a.to(tl.float32), b.to(tl.float32)`` would count as the operands' dtype everywhere.
    """
    found: dict[str, list[ast.expr | None]] = {}

    def ambiguous(target: ast.expr) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                found.setdefault(node.id, []).append(None)

    for node in _walk_no_nested(body):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
                elif (unpack and isinstance(target, ast.Tuple | ast.List)
                      and isinstance(node.value, ast.Tuple | ast.List)
                      and len(target.elts) == len(node.value.elts)
                      and all(isinstance(t, ast.Name) for t in target.elts)):
                    # bm, bn, bk = PARAMS["BLOCK_M"], PARAMS["BLOCK_N"], PARAMS["BLOCK_K"]: pairwise
                    for t, value in zip(target.elts, node.value.elts, strict=True):
                        found.setdefault(t.id, []).append(value)  # type: ignore[union-attr]
                else:
                    ambiguous(target)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, ast.AugAssign):
            ambiguous(node.target)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            ambiguous(node.target)
        elif isinstance(node, ast.NamedExpr):
            ambiguous(node.target)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    ambiguous(item.optional_vars)
    return found


Guards = tuple[tuple[ast.expr, bool], ...]


@dataclass(frozen=True)
class DotCall:
    node: ast.Call
    a: ast.expr
    b: ast.expr
    keywords: dict[str, ast.expr]
    in_loop: bool
    guards: Guards = ()

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass
class JitFunction:
    """One ``@triton.jit`` function and the parts of its body the rules read (all parameter-independent)."""

    name: str
    node: ast.FunctionDef
    params: tuple[str, ...]
    constexprs: frozenset[str]
    defaults: dict[str, ast.expr]
    autotune_configs: tuple[ast.Call, ...] | None
    locals: dict[str, list[ast.expr | None]]
    aranges: list[tuple[ast.Call, Guards]] = field(default_factory=list)
    dots: list[DotCall] = field(default_factory=list)
    descriptors: list[ast.Call] = field(default_factory=list)
    descriptor_stores: list[tuple[ast.Call, Guards]] = field(default_factory=list)  # desc.store([...], tile)
    descriptor_loads: list[ast.Call] = field(default_factory=list)  # desc.load([...]): a host or device descriptor
    block_ptr_calls: list[ast.Call] = field(default_factory=list)
    program_id_axes: set[int] = field(default_factory=set)
    helper_calls: list[ast.Call] = field(default_factory=list)
    uses_num_programs: bool = False
    text: str = ""

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def uses_descriptors(self) -> bool:
        """Tiles move through tensor descriptors: made in the kernel, or passed in from the host
        (``TensorDescriptor``) and read with ``desc.load``."""
        return bool(self.descriptors or self.descriptor_loads)

    def tile_params(self) -> dict[str, str]:
        """{"M": "BLOCK_M", "N": ..., "K": ...} from the constexpr names (BLOCK_M, BLOCK_SIZE_K, BM, TILE_N ...)."""
        tiles: dict[str, str] = {}
        for name in self.params:
            m = TILE_NAME.match(name)
            if m and name in self.constexprs:
                tiles.setdefault(m.group(1).upper(), name)
        return tiles

    def group_param(self) -> str | None:
        return next((p for p in self.params if p in self.constexprs and _GROUP_NAME.match(p)), None)


@dataclass(frozen=True)
class Launch:
    """``kernel[grid](...)`` inside ``scope`` (a Python function's name, "" at module level)."""

    kernel: str
    node: ast.Call
    grid: ast.expr
    scope: str

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass
class Unit:
    """One jit function under one binding: the values a launch (or an autotune config, or PARAMS when nothing
    launches it) gives its constexprs, plus the compiler options of the launch that reaches it."""

    fn: JitFunction
    env: dict[str, Any]
    options: dict[str, Any]
    line: int
    root: str
    origin: str  # "launch", "config", "params"
    grid_dims: int | None = None
    hardcoded_options: frozenset[str] = frozenset()
    launch: Launch | None = None
    option_lines: dict[str, int] = field(default_factory=dict)  # where each option's value is written

    def value(self, name: str) -> Any:
        return self.env.get(name, UNKNOWN)

    def option(self, name: str, default: Any = UNKNOWN) -> Any:
        """A launch option; also read from the constexprs, where Intel kernels declare ``grf_mode``."""
        if name in self.options:
            return self.options[name]
        return self.env.get(name, default)


class Resolver:
    """Evaluates an expression to a Python value where the source pins it down, else ``UNKNOWN``."""

    def __init__(
        self,
        model: SourceModel,
        params: dict[str, Any],
        env: dict[str, Any] | None = None,
        local_exprs: dict[str, list[ast.expr | None]] | None = None,
    ) -> None:
        self.model = model
        self.params = params
        self.env = env or {}
        self.local_exprs = local_exprs or {}
        self._busy: set[str] = set()

    def value(self, expr: ast.expr | None, depth: int = 0) -> Any:
        if expr is None or depth > 24:
            return UNKNOWN
        try:
            return self._value(expr, depth)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, KeyError, IndexError, RecursionError):
            return UNKNOWN

    def name(self, name: str, depth: int = 0) -> Any:
        if name in self.env:
            return self.env[name]
        if name in self.local_exprs:
            if name in self._busy:
                return UNKNOWN
            self._busy.add(name)
            try:
                values = [self.value(e, depth + 1) for e in self.local_exprs[name]]
            finally:
                self._busy.discard(name)
            if values and all(v is not UNKNOWN for v in values) and all(v == values[0] for v in values):
                return values[0]
            return UNKNOWN
        if name == "PARAMS":
            return self.params
        if name == "SPACE":
            return self.model.space
        if name in self.model.constants:
            if name in self._busy:
                return UNKNOWN
            self._busy.add(name)
            try:
                return Resolver(self.model, self.params).value(self.model.constants[name], depth + 1)
            finally:
                self._busy.discard(name)
        return UNKNOWN

    def _value(self, e: ast.expr, depth: int) -> Any:
        v = self.value
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            return self.name(e.id, depth)
        if isinstance(e, ast.Tuple | ast.List):
            return tuple(v(x, depth + 1) for x in e.elts)
        if isinstance(e, ast.Dict):
            keys = [v(k, depth + 1) if k is not None else UNKNOWN for k in e.keys]
            if any(k is UNKNOWN for k in keys):
                return UNKNOWN
            return {k: v(x, depth + 1) for k, x in zip(keys, e.values, strict=True)}
        if isinstance(e, ast.Subscript):
            base = v(e.value, depth + 1)
            key = v(e.slice, depth + 1)
            if isinstance(base, dict) and key in base:
                return base[key]
            if isinstance(base, tuple) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            return UNKNOWN
        if isinstance(e, ast.UnaryOp):
            operand = v(e.operand, depth + 1)
            if operand is UNKNOWN:
                return UNKNOWN
            if isinstance(e.op, ast.USub):
                return -operand
            if isinstance(e.op, ast.UAdd):
                return +operand
            if isinstance(e.op, ast.Not):
                return not operand
            return UNKNOWN
        if isinstance(e, ast.BinOp):
            left, right = v(e.left, depth + 1), v(e.right, depth + 1)
            if not all(isinstance(x, int | float) for x in (left, right)):
                return UNKNOWN
            ops = {
                ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a / b, ast.Mod: lambda a, b: a % b,
                ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
                ast.Pow: lambda a, b: a**b if abs(b) < 64 else UNKNOWN,
            }
            op = ops.get(type(e.op))
            return op(left, right) if op else UNKNOWN
        if isinstance(e, ast.BoolOp):
            values = [v(x, depth + 1) for x in e.values]
            decisive = False if isinstance(e.op, ast.And) else True  # one known False decides an `and`
            if any(x is not UNKNOWN and bool(x) == decisive for x in values):
                return decisive
            if any(x is UNKNOWN for x in values):
                return UNKNOWN
            return all(values) if isinstance(e.op, ast.And) else any(values)
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            left, right = v(e.left, depth + 1), v(e.comparators[0], depth + 1)
            if left is UNKNOWN or right is UNKNOWN:
                return UNKNOWN
            ops = {
                ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
                ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
                ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
            }
            op = ops.get(type(e.ops[0]))
            return op(left, right) if op else UNKNOWN
        if isinstance(e, ast.IfExp):
            test = v(e.test, depth + 1)
            if test is not UNKNOWN:
                return v(e.body if test else e.orelse, depth + 1)
            body, orelse = v(e.body, depth + 1), v(e.orelse, depth + 1)
            return body if body is not UNKNOWN and body == orelse else UNKNOWN
        if isinstance(e, ast.Call):
            return self._call(e, depth)
        return UNKNOWN

    def _call(self, e: ast.Call, depth: int) -> Any:
        func = e.func
        args = [self.value(a, depth + 1) for a in e.args]
        if isinstance(func, ast.Attribute) and func.attr == "get":
            base = self.value(func.value, depth + 1)
            if isinstance(base, dict) and args and args[0] is not UNKNOWN:
                return base.get(args[0], args[1] if len(args) > 1 else None)
            return UNKNOWN
        if e.keywords or any(a is UNKNOWN for a in args):
            return UNKNOWN
        tail = _tail(func)
        if tail == "next_power_of_2" and len(args) == 1 and isinstance(args[0], int):
            return 1 if args[0] <= 1 else 1 << (args[0] - 1).bit_length()
        if tail == "cdiv" and len(args) == 2:
            return -(-args[0] // args[1])
        if isinstance(func, ast.Name) and func.id in ("min", "max") and args:
            return (min if func.id == "min" else max)(*args)
        if isinstance(func, ast.Name) and func.id in ("int", "bool", "str", "float") and len(args) == 1:
            return {"int": int, "bool": bool, "str": str, "float": float}[func.id](args[0])
        return UNKNOWN


class _GuardedScan(ast.NodeVisitor):
    """Visits a function body remembering the if-conditions over each node (``guards``): a branch that a
    binding rules out is dead code for that binding (``if LOOPED: ... else: ...``). Nested definitions are
    not part of the body."""

    def __init__(self) -> None:
        self.guards: list[tuple[ast.expr, bool]] = []

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        for polarity, body in ((True, node.body), (False, node.orelse)):
            self.guards.append((node.test, polarity))
            for stmt in body:
                self.visit(stmt)
            self.guards.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return


class _BodyScan(_GuardedScan):
    """Collects what the rules read from a jit function body, tracking loop nesting for ``tl.dot``."""

    def __init__(self, fn: JitFunction, jit_names: set[str]) -> None:
        super().__init__()
        self.fn = fn
        self.jit_names = jit_names
        self.loop_depth = 0

    def _loop(self, node: ast.For | ast.While) -> None:
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    visit_For = _loop
    visit_While = _loop

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted(node.func)
        tail = name.rsplit(".", 1)[-1] if name else ""
        fn = self.fn
        if tail == "arange" and not name.startswith(("torch.", "np.", "numpy.")):
            fn.aranges.append((node, tuple(self.guards)))
        elif tail == "dot" and name not in ("np.dot", "numpy.dot", "torch.dot") and len(node.args) >= 2:
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            fn.dots.append(DotCall(node, node.args[0], node.args[1], kw, self.loop_depth > 0, tuple(self.guards)))
        elif tail == "make_tensor_descriptor":
            fn.descriptors.append(node)
        elif (tail in ("store", "load") and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Name) and node.func.value.id not in ("tl", "triton", "tle")):
            if tail == "store":  # a tile stored through a tensor descriptor
                fn.descriptor_stores.append((node, tuple(self.guards)))
            else:
                fn.descriptor_loads.append(node)
        elif tail in ("make_block_ptr", "advance"):
            fn.block_ptr_calls.append(node)
        elif tail == "program_id":
            axis = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "axis"), None)
            if isinstance(axis, ast.Constant) and isinstance(axis.value, int):
                fn.program_id_axes.add(axis.value)
            else:
                fn.program_id_axes.add(-1)
        elif tail == "num_programs":
            fn.uses_num_programs = True
        elif isinstance(node.func, ast.Name) and node.func.id in self.jit_names:
            fn.helper_calls.append(node)
        self.generic_visit(node)


def _decorator_parts(node: ast.FunctionDef) -> tuple[bool, ast.Call | None]:
    jit, autotune = False, None
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        tail = _tail(target)
        if tail == "jit":
            jit = True
        elif tail == "autotune" and isinstance(dec, ast.Call):
            autotune = dec
    return jit, autotune


def _is_constexpr(annotation: ast.expr | None) -> bool:
    return annotation is not None and _tail(annotation) == "constexpr"


class _HostCalls(_GuardedScan):
    """The if-conditions over each call of one Python function inside another's body."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found: list[Guards] = []

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == self.name:
            self.found.append(tuple(self.guards))
        self.generic_visit(node)


class SourceModel:
    """The parsed module. Built once per source (``parse``); ``units(params)`` binds parameter values."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._scope_locals: dict[str, dict[str, list[ast.expr | None]]] = {}
        self.tree = ast.parse(source)
        self.space, self.params_literal = declared_space(source)
        self.constants: dict[str, ast.expr] = {}
        self.constant_lines: dict[str, int] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.constants[node.targets[0].id] = node.value
                self.constant_lines[node.targets[0].id] = node.lineno
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.constants[node.target.id] = node.value
                self.constant_lines[node.target.id] = node.lineno
        self.functions: dict[str, JitFunction] = {}
        self.python_functions: dict[str, ast.FunctionDef] = {}
        self._host_calls: dict[str, list[tuple[str, Guards]]] = {}
        defs = [n for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef)]
        for node in defs:
            jit, autotune = _decorator_parts(node)
            if not jit:
                self.python_functions.setdefault(node.name, node)
                continue
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            params = tuple(a.arg for a in [*positional, *args.kwonlyargs])
            constexprs = frozenset(a.arg for a in [*positional, *args.kwonlyargs] if _is_constexpr(a.annotation))
            defaults: dict[str, ast.expr] = {}
            for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True):
                defaults[a.arg] = d
            for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                if d is not None:
                    defaults[a.arg] = d
            self.functions[node.name] = JitFunction(
                name=node.name,
                node=node,
                params=params,
                constexprs=constexprs,
                defaults=defaults,
                autotune_configs=self._autotune_configs(autotune),
                locals=_local_assignments(node.body),
                text=ast.get_source_segment(source, node) or "",
            )
        for fn in self.functions.values():
            _BodyScan(fn, set(self.functions)).visit(ast.Module(body=fn.node.body, type_ignores=[]))
        self.launches = self._launches()

    def _autotune_configs(self, autotune: ast.Call | None) -> tuple[ast.Call, ...] | None:
        if autotune is None:
            return None
        configs = next((k.value for k in autotune.keywords if k.arg == "configs"), None)
        if configs is None and autotune.args:
            configs = autotune.args[0]
        if isinstance(configs, ast.Name):
            configs = self.constants.get(configs.id)
        elif isinstance(configs, ast.Call) and isinstance(configs.func, ast.Name) and not configs.args:
            configs = self._returned_list(configs.func.id)  # configs=_autotune_configs()
        if isinstance(configs, ast.List | ast.Tuple):
            calls = tuple(c for c in configs.elts if isinstance(c, ast.Call) and _tail(c.func) == "Config")
            return calls if len(calls) == len(configs.elts) else None
        return None

    def _returned_list(self, name: str) -> ast.expr | None:
        """The literal list a module-level config factory returns, when it returns exactly one."""
        node = next((n for n in self.tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if node is None:
            return None
        returns = [n.value for n in _walk_no_nested(node.body) if isinstance(n, ast.Return)]
        return returns[0] if len(returns) == 1 and isinstance(returns[0], ast.List) else None

    def _launches(self) -> list[Launch]:
        scopes: list[tuple[str, list[ast.AST]]] = [
            ("", _walk_no_nested([n for n in self.tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]))
        ]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef) and node.name not in self.functions:
                scopes.append((node.name, _walk_no_nested(node.body)))
        out: list[Launch] = []
        for scope, nodes in scopes:
            for node in nodes:
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Subscript)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in self.functions
                ):
                    out.append(Launch(node.func.value.id, node, node.func.slice, scope))
        return out

    # -- binding -------------------------------------------------------------------------------------------------
    def scope_locals(self, scope: str) -> dict[str, list[ast.expr | None]]:
        """The local assignments of a host function, kept per scope (the model is read-only once built, and every
        config of a structure is bound through them)."""
        kept = self._scope_locals.get(scope)
        if kept is None:
            node = self.python_functions.get(scope)
            kept = _local_assignments(node.body, unpack=True) if node is not None else {}
            self._scope_locals[scope] = kept
        return kept

    def merged_params(self, params: dict[str, Any] | None) -> dict[str, Any]:
        return {**self.params_literal, **(params or {})}

    def host_call_guards(self, name: str) -> list[tuple[str, Guards]]:
        """Every call of the Python function ``name`` from another Python function: (caller, the if-conditions
        it sits under). Parameter-independent: scanned once per name, read on every ``units(params)``."""
        if name not in self._host_calls:
            self._host_calls[name] = self._scan_host_calls(name)
        return self._host_calls[name]

    def _scan_host_calls(self, name: str) -> list[tuple[str, Guards]]:
        out: list[tuple[str, Guards]] = []
        for caller, node in self.python_functions.items():
            if caller == name:
                continue
            scan = _HostCalls(name)
            for stmt in node.body:
                scan.visit(stmt)
            out.extend((caller, guards) for guards in scan.found)
        return out

    def launch_live(self, launch: Launch, params: dict[str, Any]) -> bool:
        """False when every call of the launch's host function sits under a condition these parameters rule
        out (``if PARAMS["TMA"] and ...: return matmul_tma(...)``): that kernel never runs for them."""
        if not launch.scope:
            return True
        calls = self.host_call_guards(launch.scope)
        if not calls:
            return True
        for caller, guards in calls:
            r = Resolver(self, params, local_exprs=self.scope_locals(caller))
            if all(not ((value := r.value(test)) is not UNKNOWN and bool(value) != polarity)
                   for test, polarity in guards):
                return True
        return False

    def units(self, params: dict[str, Any] | None = None) -> list[Unit]:
        """Every (jit function, binding) the module can run, for these parameter values."""
        merged = self.merged_params(params)
        units: list[Unit] = []
        reached: set[str] = set()
        for launch in self.launches:
            fn = self.functions[launch.kernel]
            if not self.launch_live(launch, merged):
                reached.add(fn.name)  # launched, just not with these parameters: no binding from PARAMS either
                continue
            resolver = Resolver(self, merged, local_exprs=self.scope_locals(launch.scope))
            base_env, options, hardcoded = self._launch_binding(fn, launch, resolver)
            grid_dims = self._grid_dims(launch.grid, resolver)
            configs = fn.autotune_configs or ()
            launch_lines = {k.arg: launch.line for k in launch.node.keywords if k.arg}
            bindings: list[tuple[dict[str, Any], dict[str, Any], frozenset[str], int, str, dict[str, int]]] = []
            if configs:
                module = Resolver(self, merged)
                for config in configs:
                    env, opts, lines = dict(base_env), dict(options), dict(launch_lines)
                    values = module.value(config.args[0]) if config.args else UNKNOWN
                    if isinstance(values, dict):
                        for k, val in values.items():
                            (env if k in fn.params else opts)[k] = val
                            lines[k] = config.lineno
                    for kw in config.keywords:
                        if kw.arg in LAUNCH_OPTIONS:
                            opts[kw.arg] = module.value(kw.value)
                            lines[kw.arg] = config.lineno
                    bindings.append((env, opts, hardcoded, config.lineno, "config", lines))
            else:
                bindings.append((base_env, options, hardcoded, launch.line, "launch", launch_lines))
            for env, opts, hard, line, origin, lines in bindings:
                unit = Unit(fn, env, opts, line, fn.name, origin, grid_dims, hard, launch, lines)
                units.append(unit)
                reached.add(fn.name)
                units.extend(self._helpers(unit, merged, reached, depth=0))
        for fn in self.functions.values():
            if fn.name in reached:
                continue
            if any(call for other in self.functions.values() for call in other.helper_calls
                   if isinstance(call.func, ast.Name) and call.func.id == fn.name):
                continue  # a helper: bound through its caller
            module = Resolver(self, merged)
            env = {p: UNKNOWN for p in fn.params}
            for p in fn.constexprs:
                if p in merged:
                    env[p] = merged[p]
                elif p in fn.defaults:
                    env[p] = module.value(fn.defaults[p])
            options = {k: merged[k] for k in LAUNCH_OPTIONS if k in merged}
            unit = Unit(fn, env, options, fn.line, fn.name, "params")
            units.append(unit)
            units.extend(self._helpers(unit, merged, reached, depth=0))
        return units

    def _launch_binding(
        self, fn: JitFunction, launch: Launch, resolver: Resolver
    ) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
        env: dict[str, Any] = {p: UNKNOWN for p in fn.params}
        exprs: dict[str, ast.expr] = {}
        for name, arg in zip(fn.params, launch.node.args, strict=False):
            exprs[name] = arg
        options: dict[str, Any] = {}
        hardcoded: set[str] = set()
        for kw in launch.node.keywords:
            if kw.arg is None:
                continue
            if kw.arg in fn.params:
                exprs[kw.arg] = kw.value
            else:
                options[kw.arg] = resolver.value(kw.value)
                if not self._reads_params(kw.value, resolver.local_exprs, set()):
                    hardcoded.add(kw.arg)
        module = Resolver(self, resolver.params)
        for p in fn.constexprs:
            if p in exprs:
                env[p] = resolver.value(exprs[p])
            elif p in fn.defaults:
                env[p] = module.value(fn.defaults[p])
        return env, options, frozenset(hardcoded)

    def _reads_params(self, expr: ast.expr, local_exprs: dict[str, list[ast.expr | None]], seen: set[str]) -> bool:
        """Whether the value comes (at least partly) from PARAMS, i.e. is tunable rather than hard-coded."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Name):
                if node.id == "PARAMS":
                    return True
                if node.id in seen:
                    continue
                seen.add(node.id)
                for sub in local_exprs.get(node.id, []):
                    if sub is not None and self._reads_params(sub, local_exprs, seen):
                        return True
                const = self.constants.get(node.id)
                if const is not None and self._reads_params(const, {}, seen):
                    return True
        return False

    def _grid_dims(self, grid: ast.expr, resolver: Resolver, depth: int = 0) -> int | None:
        """How many grid axes have more than one program, as far as the source says."""
        if depth > 4:
            return None
        if isinstance(grid, ast.Lambda):
            return self._grid_dims(grid.body, resolver, depth + 1)
        if isinstance(grid, ast.Name):
            exprs = resolver.local_exprs.get(grid.id) or ([self.constants[grid.id]] if grid.id in self.constants else [])
            # several assignments (branches): the widest grid any branch launches is the one to judge
            dims = {self._grid_dims(e, resolver, depth + 1) for e in exprs if e is not None} - {None}
            return max(dims) if dims else None
        if isinstance(grid, ast.Tuple | ast.List):
            count = 0
            for elt in grid.elts:
                if isinstance(elt, ast.Starred):
                    return None
                if resolver.value(elt) == 1:
                    continue
                count += 1
            return max(count, 1)
        return None

    def _helpers(self, caller: Unit, params: dict[str, Any], reached: set[str], depth: int) -> list[Unit]:
        if depth > 4:
            return []
        out: list[Unit] = []
        resolver = Resolver(self, params, caller.env, caller.fn.locals)
        for call in caller.fn.helper_calls:
            helper = self.functions[call.func.id]  # type: ignore[attr-defined]
            env: dict[str, Any] = {p: UNKNOWN for p in helper.params}
            for name, arg in zip(helper.params, call.args, strict=False):
                if name in helper.constexprs:
                    env[name] = resolver.value(arg)
            for kw in call.keywords:
                if kw.arg in helper.constexprs:
                    env[kw.arg] = resolver.value(kw.value)
            module = Resolver(self, params)
            for p in helper.constexprs:
                if env[p] is UNKNOWN and p in helper.defaults and not any(
                    kw.arg == p for kw in call.keywords
                ):
                    env[p] = module.value(helper.defaults[p])
            unit = Unit(helper, env, caller.options, call.lineno, caller.root, caller.origin, caller.grid_dims,
                        caller.hardcoded_options, caller.launch, caller.option_lines)
            reached.add(helper.name)
            out.append(unit)
            out.extend(self._helpers(unit, params, reached, depth + 1))
        return out

    # -- reading values inside a unit ---------------------------------------------------------------------------
    def resolver(self, unit: Unit, params: dict[str, Any] | None = None) -> Resolver:
        return Resolver(self, self.merged_params(params), unit.env, unit.fn.locals)

    def live(self, guards: Guards, unit: Unit, params: dict[str, Any] | None = None) -> bool:
        """False when a condition the call sits under is known, for this binding, to skip it."""
        r = self.resolver(unit, params)
        for test, polarity in guards:
            value = r.value(test)
            if value is not UNKNOWN and bool(value) != polarity:
                return False
        return True

    def operand_dtype(self, expr: ast.expr, unit: Unit, depth: int = 0) -> str | None:
        """The dtype an operand is cast to (``x.to(tl.float16)``), following simple local assignments."""
        if depth > 6:
            return None
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "to" and expr.args:
            name = _tail(expr.args[0])
            if name in _DTYPE_BYTES:
                return name
            inner = self.resolver(unit).value(expr.args[0])
            if isinstance(inner, str) and inner in _DTYPE_BYTES:
                return inner
        if isinstance(expr, ast.Attribute) and expr.attr == "T":
            return self.operand_dtype(expr.value, unit, depth + 1)
        if isinstance(expr, ast.Call) and _tail(expr.func) in ("trans", "permute", "reshape"):
            return self.operand_dtype(expr.args[0], unit, depth + 1) if expr.args else None
        if isinstance(expr, ast.Name):
            found = {self.operand_dtype(e, unit, depth + 1) for e in unit.fn.locals.get(expr.id, []) if e is not None}
            found.discard(None)
            return found.pop() if len(found) == 1 else None
        return None


def dtype_bytes(name: str | None) -> int | None:
    return _DTYPE_BYTES.get(name) if name else None


@per_source(8 << 20)  # about 0.8 GB of models at most (~100 bytes a source character)
def _parse_cached(source: str) -> SourceModel:
    return SourceModel(source)


def parse(source: str) -> SourceModel:
    """The model of ``source`` (cached: legal_configs checks hundreds of configs of one source)."""
    return _parse_cached(source)
