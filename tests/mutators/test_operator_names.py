"""One spelling per operator: ``evoforge.mutators.names`` is the only place an operator's name is written, every
name the code hands where an operator is expected is one the registry builds (or a strategy's own move), and the
strings the record holds never change (stored studies are read back by them)."""

from __future__ import annotations

import ast

import pytest
from evoforge.mutators import names
from evoforge.mutators.registry import operator_names, register_operator

from evoforge import knowledge
from evoforge.core import SEED_OPERATOR
from tests.test_architecture import REPO, modules

NAMES_MODULE = "evoforge.mutators.names"
CONSTANTS = {k: v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
# What may stand where an operator is expected: a registered operator, a strategy's own move, a task's seed.
OPERATOR_LIKE = {*names.OPERATORS, *names.STRATEGY_MOVES, SEED_OPERATOR}
# Record names that are no operator and are written once, where they are made: the reference standing as a task's
# first candidate (evoforge/starts/generate.py REFERENCE_START) and torch.compile's build standing as the baseline
# job's candidate
# (judge/evaluator.py). The other starts name theirs with a constant beside the code that makes them
# (mutators/lift.py LIFTED_SEED, mutators/inductor_seed.py INDUCTOR_SEED, evoforge/starts/knowledge.py KNOWLEDGE_START).
RECORD_ONLY = {"reference", "torch.compile"}
# Written out where the code is being rewritten by another change; each is to import its constant when it lands.
PENDING: set[tuple[str, str]] = set()


def test_the_registry_builds_exactly_the_named_operators() -> None:
    assert operator_names() == list(names.OPERATORS)
    assert operator_names(names.RULE) == list(names.RULE_OPERATORS)
    assert operator_names(names.LLM) == list(names.LLM_OPERATORS)


def test_the_record_keeps_its_strings() -> None:
    """Trials store these strings; a study recorded before a rename would no longer read as the same operator."""
    assert CONSTANTS == {
        "PARAMS": "params", "CROSSOVER": "crossover",
        "RULE_RETUNE": "rule:retune", "RULE_REDUCTION_FORM": "rule:reduction-form",
        "RULE_PERSISTENT": "rule:persistent", "RULE_GROUPED_ORDERING": "rule:grouped-ordering",
        "RULE_INPUT_PRECISION": "rule:input-precision",
        "LLM_STAGE": "llm-stage", "LLM_REPAIR": "llm-repair", "LLM_OPTIMIZE": "llm-optimize",
        "LLM_CROSSOVER": "llm-crossover", "LLM_GENERATE": "llm-generate",
        "RULE": "rule", "LLM": "llm",
        "REPAIR_STEP": "repair", "OPTIMIZE_STEP": "optimize", "CROSSOVER_STEP": "crossover",
        "GENERATE_STEP": "generate",
    }
    assert SEED_OPERATOR == "seed"


@pytest.mark.parametrize("name", [*names.STRATEGY_MOVES, *names.FAMILIES])
def test_a_strategy_move_or_a_family_cannot_be_registered(name: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        register_operator(name, family=names.RULE, build=lambda settings: None)
    assert name not in operator_names()


def test_an_llm_step_is_never_a_stage_name() -> None:
    """A child's ``stage`` is a stage of knowledge/stages.yaml or an LLM step: a reader can tell which."""
    assert not set(names.LLM_STEPS) & set(knowledge.STAGE_NAMES)


# -- the code ---------------------------------------------------------------------------------------------------
def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _items(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]


def _is_operator(node: ast.expr) -> bool:
    """``x.operator``, ``operator`` or ``op``: an expression that holds an operator's name."""
    return (isinstance(node, ast.Attribute) and node.attr == "operator") or \
        (isinstance(node, ast.Name) and node.id in ("operator", "op"))


def _is_operators(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in ("operators", "mutators")) or \
        (isinstance(node, ast.Name) and node.id == "operators")


def operator_positions(tree: ast.AST, *, in_mutators: bool) -> list[ast.expr]:
    """The expressions the code gives where an operator's name is expected: ``operator=`` of a call, the default of
    an ``operator``/``operators`` parameter, either side of a comparison with an operator, what is looked up in a
    list of operators, a loop's ``needs`` and, in mutators/, an operator class's ``name``."""
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            out += [v for kw in node.keywords if kw.arg == "operator" for v in _items(kw.value)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args]
            pairs = list(zip(args[len(args) - len(node.args.defaults):], node.args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d]
            out += [v for a, d in pairs if a.arg in ("operator", "operators") for v in _items(d)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_operator(s) for s in sides):
                out += [v for s in sides if not _is_operator(s) for v in _items(s)]
            elif isinstance(node.ops[0], ast.In | ast.NotIn) and _is_operators(node.comparators[0]):
                out += _items(node.left)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):  # a private base names no operator
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    target = stmt.targets[0].id
                    if target == "needs" or (target == "name" and in_mutators):
                        out += _items(stmt.value)
    return out


def from_names(tree: ast.AST) -> dict[str, str]:
    """Local name -> the constant of evoforge.mutators.names it is bound to."""
    return {a.asname or a.name: a.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == NAMES_MODULE for a in node.names}


def problems(module: str, where: str, text: str) -> list[str]:
    """What ``text`` (module ``module``, file ``where``) writes out or names wrongly, one line each."""
    tree = ast.parse(text, filename=where)
    docstrings = _docstrings(tree)
    spelled = {v: k for k, v in CONSTANTS.items() if v in names.OPERATORS}
    out = [f"{where}:{node.lineno}: {node.value!r} is spelled names.{spelled[node.value]}"
           for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in docstrings
           and isinstance(node.value, str) and node.value in spelled]
    imported = from_names(tree)
    for node in operator_positions(tree, in_mutators=module.startswith("evoforge.mutators.")):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if (where, node.value) in PENDING or node.value in RECORD_ONLY or node.value in spelled:
                continue
            if node.value in OPERATOR_LIKE:
                home = "evoforge.core" if node.value == SEED_OPERATOR else "evoforge.mutators.names"
                out.append(f"{where}:{node.lineno}: the operator {node.value!r} written out: import its constant "
                           f"from {home}")
            else:
                out.append(f"{where}:{node.lineno}: {node.value!r} where an operator is expected is no "
                           "registered operator (evoforge.mutators.names, mutators/registry.py)")
        elif isinstance(node, ast.Name) and node.id in imported:
            value = getattr(names, imported[node.id])
            if value not in OPERATOR_LIKE:
                out.append(f"{where}:{node.lineno}: names.{imported[node.id]} ({value!r}) where an operator is "
                           "expected is no registered operator")
    return out


def test_code_names_operators_by_the_constants_the_registry_builds() -> None:
    found = [p for module, path in sorted(modules().items()) if module != NAMES_MODULE
             for p in problems(module, str(path.relative_to(REPO)), path.read_text())]
    assert not found, "\n".join(found)


def test_the_scan_sees_a_name_no_operator_has() -> None:
    """Each way of handing an operator that the scan reads, with a name written out or unknown to the registry."""
    code = '''
from evoforge.mutators.names import LLM_REPAIR, REPAIR_STEP

def ask(parent, operator="params"):
    child = Proposal(operator="llm_repair", parents=(parent,))
    other = Proposal(operator=REPAIR_STEP)
    if child.operator in ("crossover", LLM_REPAIR) or "rule:retune" in self.operators:
        return 'llm-stage'
    return parent.operator != "mystery"

class Loop:
    needs = ("llm-optimize",)
'''
    found = problems("evoforge.search.strategies.made_up", "search/strategies/made_up.py", code)
    lines = sorted(int(p.split(":")[1]) for p in found)
    assert lines == [4, 5, 6, 7, 7, 8, 9, 12], "\n".join(found)
