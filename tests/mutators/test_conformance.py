"""The ``Mutator`` contract (mutators/base.py), one suite for every operator in the registry.

Each registered operator is built by name, given a parent it applies to (the first shipped template that
declares what it acts on) and held to what the search relies on: its children carry its name and their parent,
it never hands back its parent unchanged, the same seed gives the same child, and the bandit of the evolution
strategy credits it when its child beats its parent. LLM operators get their replies from ``ScriptedLLM``.
An operator that writes a kernel from the reference alone (``llm-generate``) makes a root: its child descends from
no kernel, and the rest of the contract holds for it as for the others.
A new operator is collected here as soon as it is registered.
"""

from __future__ import annotations

from functools import cache

import pytest
from evoforge.mutators.base import MutationContext, MutationError, Mutator
from evoforge.mutators.prompt_builder import PromptBuilder
from evoforge.mutators.registry import (
    FAMILIES,
    PARAMS,
    OperatorSettings,
    build_operators,
    expand_operators,
    family_of,
    operator_names,
)
from evoforge.search.strategies.evolution import EvolutionStrategy

from evoforge import knowledge
from evoforge.config import CampaignConfig, validate_config
from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError
from tests.mutators.conftest import run
from tests.scriptedllm import ScriptedLLM

ARCH = "nvidia-sm90"
TASK = """import torch

class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)

def get_inputs():
    return [torch.rand(256, 256), torch.rand(256, 256)]

def get_init_inputs():
    return []
"""
OK = EvalResult(EvalStatus.OK, runtime_ms=2.0, ref_ms=2.0, speedup=1.0)
FASTER = EvalResult(EvalStatus.OK, runtime_ms=1.0, ref_ms=2.0, speedup=2.0)
FAILED = EvalResult.failure(EvalStatus.COMPILE_ERROR, "NameError: msk is not defined")


def _reply(messages: list[dict]) -> str:
    """A model that rewrites the kernel it was sent (the last python block of the prompt) into a new one, or,
    sent only the reference, writes one (a shipped template, changed)."""
    text = str(messages[-1]["content"])
    marker = "```python\n"
    for parent in (p for p in _templates().values() if p.source in text):
        return f"{marker}{parent.source}\n# rewritten by the model\n```\n"
    if TASK in text:
        return f"{marker}{knowledge.template_source('matmul')}\n# written by the model\n```\n"
    raise AssertionError("the prompt carries neither a parent kernel nor the reference")


def _settings(seed: int = 0) -> OperatorSettings:
    return OperatorSettings(arch=ARCH, seed=seed, client=ScriptedLLM(model="scripted", default=_reply),
                            builder=PromptBuilder())


def _build(name: str, seed: int = 0) -> Mutator:
    return build_operators([name], _settings(seed))[name]


@cache
def _templates() -> dict[str, Candidate]:
    return {t: Candidate.from_source(knowledge.template_source(t), task="t", meta={"dtype": "float32"})
            for t in knowledge.template_names() if not t.startswith("cute")}


def _context(parent: Candidate, result: EvalResult, seed: int = 1) -> MutationContext:
    other = next(c for c in _templates().values() if c.structure_id != parent.structure_id)
    return MutationContext(task_name="t", task_source=TASK, arch=ARCH, top=((parent, OK), (other, OK)),
                           parent_result=result, seed=seed)


@cache
def _case(name: str) -> tuple[Candidate, EvalResult, Candidate]:
    """(parent, its result, a child): the first shipped template the operator applies to and makes a child of."""
    op = _build(name)
    tried = []
    for template, parent in _templates().items():
        for result in (OK, FAILED):
            if not op.applicable(parent, result):
                continue
            try:
                return parent, result, run(op.propose((parent,), _context(parent, result)))
            except MutationError as e:
                tried.append(f"{template}: {e}")
    raise AssertionError(f"{name} makes no child of any shipped template: {tried or 'applies to none'}")


NAMES = operator_names()
ROOTS = {"llm-generate"}  # operators whose children descend from no kernel


def test_the_registry_holds_every_operator_the_campaign_offers() -> None:
    assert set(operator_names("rule")) >= {"rule:retune", "rule:reduction-form", "rule:grouped-ordering",
                                           "rule:input-precision", "rule:persistent"}
    assert operator_names("llm") == ["llm-stage", "llm-repair", "llm-optimize", "llm-crossover", "llm-generate"]


def test_config_names_are_registry_names() -> None:
    assert expand_operators(["params", "llm"]) == [PARAMS, *operator_names("llm")]
    assert expand_operators(["rule:retune", "rule"]) == operator_names("rule")
    with pytest.raises(UsageError, match=r"config x.toml: operators: unknown operator 'llm_repair' \(known: "):
        validate_config(CampaignConfig(operators=["params", "llm_repair"]), "config x.toml")
    with pytest.raises(UsageError, match="no model is set"):
        build_operators(["llm-repair"], OperatorSettings(arch=ARCH))


@pytest.mark.parametrize("name", NAMES)
def test_is_built_by_its_name_and_named_by_it(name: str) -> None:
    op = _build(name)
    assert isinstance(op, Mutator) and op.name == name and family_of(name) in FAMILIES


@pytest.mark.parametrize("name", NAMES)
def test_its_child_carries_its_name_and_its_parent(name: str) -> None:
    parent, _, child = _case(name)
    assert child.operator == name and child.task == parent.task
    if name in ROOTS:
        assert child.parents == ()  # written from the reference: the root of a lineage
    else:
        assert parent.id in child.parents


@pytest.mark.parametrize("name", NAMES)
def test_never_returns_its_parent_unchanged(name: str) -> None:
    parent, result, child = _case(name)
    assert (child.source, child.params) != (parent.source, parent.params)
    op = _build(name)
    if family_of(name) == "llm":  # a model that sends the kernel back as it was makes no child
        op.client.push(f"```python\n{parent.source}```\n")  # type: ignore[attr-defined]
        with pytest.raises(MutationError, match="unchanged"):
            run(op.propose((parent,), _context(parent, result)))
    else:
        for seed in range(5):
            again = run(op.propose((parent,), _context(parent, result, seed=seed)))
            assert (again.source, again.params) != (parent.source, parent.params)


@pytest.mark.parametrize("name", NAMES)
def test_the_same_seed_makes_the_same_child(name: str) -> None:
    parent, result, _ = _case(name)
    first = run(_build(name, seed=3).propose((parent,), _context(parent, result, seed=7)))
    second = run(_build(name, seed=3).propose((parent,), _context(parent, result, seed=7)))
    assert (first.source, first.params, first.stage) == (second.source, second.params, second.stage)


@pytest.mark.parametrize("name", NAMES)
def test_the_bandit_credits_it_when_its_child_beats_its_parent(name: str) -> None:
    parent, result, _ = _case(name)
    strategy = EvolutionStrategy(seed=0, initial=(parent,), operators=(name,))
    strategy.tell(parent, result)
    (proposal,) = strategy.ask(1)
    assert proposal.operator == name and proposal.parents == (parent,)  # the campaign dispatches by this name
    child = run(_build(name).propose(proposal.parents, _context(parent, result)))
    strategy.tell(child, FASTER)
    assert strategy.bandit.uses(name) == 1 and strategy.bandit.auc(name) == 1.0
