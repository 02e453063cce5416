"""One spelling per strategy: ``evoforge.search.strategies.names`` is the only place a built-in strategy's name is
written, and every name the code hands where a strategy is expected is one the registry builds. A name written out
elsewhere is a rename waiting to break silently (the record and configs store these strings)."""

from __future__ import annotations

import ast

from evoforge.search.strategies import get_strategy
from evoforge.search.strategies import names as strategy_names_module
from evoforge.search.strategies.names import BUILTIN

from tests.mutators.test_operator_names import _docstrings, _items
from tests.test_architecture import REPO, modules

NAMES_MODULE = "evoforge.search.strategies.names"
# A base class's ``name`` that no strategy is registered under: its subclasses name themselves.
BASES = {("search/strategies/llm_loop.py", "loop")}
CONSTANTS = {v: k for k, v in vars(strategy_names_module).items() if k.isupper() and isinstance(v, str)}


def _is_strategy(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in ("strategy", "strategy_name")) or \
        (isinstance(node, ast.Name) and node.id in ("strategy", "strategy_name"))


def strategy_positions(tree: ast.AST, *, in_strategies: bool) -> list[ast.expr]:
    """Where a strategy's name is expected: ``strategy=`` of a call, ``get_strategy``'s first argument, the default
    of a ``strategy`` parameter, either side of a comparison with a strategy, and, in search/strategies/, a strategy
    class's ``name``."""
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            out += [kw.value for kw in node.keywords if kw.arg in ("strategy", "strategy_name")]
            func = node.func
            if node.args and ((isinstance(func, ast.Name) and func.id == "get_strategy")
                              or (isinstance(func, ast.Attribute) and func.attr == "get_strategy")):
                out.append(node.args[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args]
            pairs = list(zip(args[len(args) - len(node.args.defaults):], node.args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d]
            out += [d for a, d in pairs if a.arg in ("strategy", "strategy_name")]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_strategy(s) for s in sides):
                out += [v for s in sides if not _is_strategy(s) for v in _items(s)]
        elif in_strategies and isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["name"]:
                    out.append(stmt.value)
    return out


def problems(module: str, where: str, text: str) -> list[str]:
    tree = ast.parse(text, filename=where)
    docstrings = _docstrings(tree)
    out = []
    for node in strategy_positions(tree, in_strategies=module.startswith("evoforge.search.strategies.")):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and (where, node.value) not in BASES:
            if node.value in BUILTIN:
                out.append(f"{where}:{node.lineno}: the strategy {node.value!r} written out: import "
                           f"{CONSTANTS[node.value]} from {NAMES_MODULE}")
            else:
                out.append(f"{where}:{node.lineno}: {node.value!r} where a strategy is expected is no registered "
                           f"strategy ({NAMES_MODULE})")
    return out


def test_code_names_strategies_by_their_constants() -> None:
    found = [p for module, path in sorted(modules().items()) if module != NAMES_MODULE
             for p in problems(module, str(path.relative_to(REPO)), path.read_text())]
    assert not found, "\n".join(found)


def test_every_built_in_name_builds_its_strategy() -> None:
    assert {get_strategy(name, seed=0).name for name in BUILTIN} == set(BUILTIN)


def test_the_scan_sees_a_strategy_name_written_out_or_unknown() -> None:
    code = '''
from evoforge.search.strategies.names import DEFAULT

def run(config, strategy="evolution"):
    s = get_strategy("default", seed=0)
    t = build(strategy="evolutoin", seed=1)
    if config.strategy == "stages" or config.strategy != DEFAULT:
        return strategies.get_strategy(DEFAULT, seed=2)

class Mine:
    name = "bayes"
'''
    found = problems("evoforge.search.strategies.made_up", "search/strategies/made_up.py", code)
    assert sorted(int(p.split(":")[1]) for p in found) == [4, 5, 6, 7, 11], "\n".join(found)
