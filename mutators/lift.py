"""A plain kernel made tunable: launch constants written into a seed become a ``SPACE`` and ``PARAMS``.

A user's kernel often launches with its constants written in (``kernel[grid](x, y, n, BLOCK=1024,
num_warps=4)``) and declares no ``SPACE``: parameter moves and the rule operators then have nothing to act on,
and a campaign without an LLM stops after the seed. ``lift_launch_constants`` rewrites such a source so each
literal tile size, group size, ``num_warps`` and ``num_stages`` of a launch is read from ``PARAMS`` (and the same
literal in that launch's grid too, so the grid keeps matching the tile), with a power-of-two range around the
written value narrowed by the target's hard rules. The written values are the defaults: the lifted seed computes
exactly what the user wrote. Its children are recorded under ``LIFTED_SEED``, the name the record shows for it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from evoforge.knowledge.source_model import SourceModel, is_pow2

from evoforge.core import declared_space

#: The operator a lifted seed carries in the record (the seed as written, its launch constants made tunable).
LIFTED_SEED = "lifted-seed"

#: Constexpr names that shape tiles or the grid, and so may be tuned without changing what is computed.
TUNABLE_NAME = re.compile(r"BLOCK|TILE|BLK|^B_?[MNK]$|GROUP|WARP|SPLIT_K|CHUNK|NUM_SM", re.IGNORECASE)
TUNABLE_OPTIONS = ("num_warps", "num_stages")
_WARPS = (1, 2, 4, 8, 16)
_STAGES = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Lifted:
    """The rewritten source and what was lifted: ``{key: (kernel, launch argument, written value)}``."""

    source: str
    space: dict[str, list[int]]
    params: dict[str, int]
    origins: dict[str, tuple[str, str, int]] = field(default_factory=dict)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())


def _int_literal(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def value_range(name: str, value: int) -> list[int]:
    """The values a lifted constant may take: powers of two around the written one (the written one included)."""
    if name == "num_warps":
        values = set(_WARPS)
    elif name == "num_stages":
        values = set(_STAGES)
    elif is_pow2(value):
        values = {value >> 2, value >> 1, value << 1, value << 2} - {0}
        if re.search("GROUP", name, re.IGNORECASE):
            values = {1, 4, 8, 16}
    else:
        values = set()
    return sorted({v for v in values if 1 <= v <= 1 << 16} | {value})


def _apply(source: str, edits: list[tuple[ast.AST, str]]) -> str:
    """Replace each node's source span by its text (spans do not overlap), last first."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()))
    data = source.encode()

    def at(lineno: int, col: int) -> int:
        return offsets[lineno - 1] + col

    spans = sorted(((at(n.lineno, n.col_offset), at(n.end_lineno or n.lineno, n.end_col_offset or 0), text)
                    for n, text in edits), reverse=True)
    for start, end, text in spans:
        data = data[:start] + text.encode() + data[end:]
    return data.decode()


def _grid_nodes(model: SourceModel, grid: ast.expr, scope: str) -> list[ast.expr]:
    """The grid expression and the local assignments a name in it comes from (``grid = (cdiv(n, 1024),)``)."""
    out: list[ast.expr] = [grid]
    local = model.scope_locals(scope)
    seen: set[str] = set()
    stack = [grid]
    while stack:
        node = stack.pop()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id not in seen and sub.id in local:
                seen.add(sub.id)
                for expr in local[sub.id]:
                    if expr is not None:
                        out.append(expr)
                        stack.append(expr)
    return out


def lift_launch_constants(source: str, *, arch: str | None = None) -> Lifted | None:
    """The source with its launches' literal tile sizes and warps/stages read from a new ``SPACE``/``PARAMS``;
    None when there is nothing to lift (a SPACE is declared already, or no launch writes such a literal)."""
    space, _ = declared_space(source)
    if space:
        return None
    try:
        model = SourceModel(source)
    except SyntaxError:
        return None
    edits: list[tuple[ast.AST, str]] = []
    params: dict[str, int] = {}
    origins: dict[str, tuple[str, str, int]] = {}
    for launch in model.launches:
        fn = model.functions[launch.kernel]
        bound: list[tuple[str, ast.expr]] = list(zip(fn.params, launch.node.args, strict=False))
        bound += [(k.arg, k.value) for k in launch.node.keywords if k.arg]
        grid_literals: dict[int, str] = {}
        for name, node in bound:
            value = _int_literal(node)
            if value is None:
                continue
            tile = name in fn.constexprs and bool(TUNABLE_NAME.search(name)) and is_pow2(value)
            if not tile and name not in TUNABLE_OPTIONS:
                continue
            key = name
            if key in params and params[key] != value:
                key = f"{name}_{launch.kernel}"
            params[key] = value
            origins[key] = (launch.kernel, name, value)
            edits.append((node, f'PARAMS["{key}"]'))
            if tile:
                grid_literals[value] = key
        # The grid that divides by a lifted tile literal reads the same PARAMS entry.
        if grid_literals:
            for expr in _grid_nodes(model, launch.grid, launch.scope):
                for sub in ast.walk(expr):
                    value = _int_literal(sub) if isinstance(sub, ast.Constant) else None
                    if value in grid_literals and value not in (0, 1):
                        edits.append((sub, f'PARAMS["{grid_literals[value]}"]'))
    if not params:
        return None
    unique: dict[tuple[int, int, int, int], tuple[ast.AST, str]] = {}
    for node, text in edits:
        unique.setdefault((node.lineno, node.col_offset, node.end_lineno or 0, node.end_col_offset or 0), (node, text))
    body = _apply(source, list(unique.values()))
    lifted_space = {k: value_range(origins[k][1], v) for k, v in params.items()}
    header = (f"SPACE = {lifted_space!r}  # lifted from the launch constants ({LIFTED_SEED})\n"
              f"PARAMS = {params!r}\n")
    text = _insert_after_imports(body, header)
    if arch:
        lifted_space = _legal_values(text, lifted_space, params, arch)
        text = _insert_after_imports(body, f"SPACE = {lifted_space!r}  # lifted from the launch constants "
                                           f"({LIFTED_SEED})\nPARAMS = {params!r}\n")
    return Lifted(source=text, space=lifted_space, params=params, origins=origins)


def _legal_values(source: str, space: dict[str, list[int]], params: dict[str, int],
                  arch: str) -> dict[str, list[int]]:
    """Each key's values that the target's hard rules allow with the other keys at their written values."""
    from evoforge import knowledge

    out: dict[str, list[int]] = {}
    for key, values in space.items():
        kept = [v for v in values if v == params[key] or knowledge.is_legal({**params, key: v}, arch,
                                                                            source=source)[0]]
        out[key] = kept
    return out


def _insert_after_imports(source: str, text: str) -> str:
    """``text`` placed after the module docstring and the leading imports."""
    tree = ast.parse(source)
    line = 0
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Import | ast.ImportFrom) or (
                i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            line = node.end_lineno or node.lineno
        else:
            break
    lines = source.splitlines(keepends=True)
    rest = "".join(lines[line:]).lstrip("\n")
    return "".join(lines[:line]) + ("\n" if line else "") + text + "\n\n" + rest


def describe_lift(lifted: Lifted) -> dict[str, Any]:
    """What the record keeps of a lift (the child's ``meta``)."""
    return {"lifted": {k: {"kernel": kern, "argument": arg, "written": v}
                       for k, (kern, arg, v) in lifted.origins.items()}}
