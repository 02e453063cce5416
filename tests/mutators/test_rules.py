"""Rule-based operators: each makes a child that differs from its parent and breaks no hard rule."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from evoforge.mutators.base import MutationContext, MutationError, Mutator, NothingNew
from evoforge.mutators.registry import OperatorSettings, build_operators
from evoforge.mutators.rules import (
    GroupedOrdering,
    InputPrecision,
    PersistentGrid,
    ReductionForm,
    RetuneLaunch,
)

from evoforge import knowledge
from evoforge.core import Candidate, UsageError

FP32_TASK = """
import torch
def get_inputs():
    return [torch.rand(256, 256), torch.rand(256, 256)]
"""
FP16_TASK = """
import torch
def get_inputs():
    return [torch.rand(256, 256, dtype=torch.float16), torch.rand(256, 256, dtype=torch.float16)]
"""


def matmul(**params: object) -> Candidate:
    return Candidate.from_source(knowledge.template_source("matmul_grouped"), task="mm", params=dict(params))


def softmax(**params: object) -> Candidate:
    return Candidate.from_source(knowledge.template_source("softmax_rows"), task="sm", params=dict(params))


def context(arch: str = "nvidia-sm90", *, seed: int = 0, task_source: str = FP32_TASK) -> MutationContext:
    return MutationContext(task_name="t", task_source=task_source, arch=arch, seed=seed)


def propose(op: Mutator, parent: Candidate, ctx: MutationContext) -> Candidate:
    return asyncio.run(op.propose((parent,), ctx))


def hard(candidate: Candidate, arch: str) -> list[knowledge.Violation]:
    return [v for v in knowledge.validate(candidate, arch) if v.severity == "hard"]


CASES = [
    (RetuneLaunch, matmul, "autotuning"),
    (RetuneLaunch, softmax, "autotuning"),
    (ReductionForm, softmax, "algorithmic"),
    (GroupedOrdering, matmul, "memory_access"),
    (InputPrecision, matmul, "dtype_fix"),
    (PersistentGrid, matmul, "persistent_kernel"),
]


@pytest.mark.parametrize("arch", ["nvidia-sm90", "intel-xe2"])
@pytest.mark.parametrize(("cls", "make", "stage"), CASES, ids=[f"{c.__name__}-{m.__name__}" for c, m, _ in CASES])
def test_child_differs_keeps_structure_and_stays_legal(cls, make, stage: str, arch: str) -> None:
    op = cls(seed=1)
    assert isinstance(op, Mutator)
    parent = make()
    assert op.applicable(parent, None)
    for seed in range(5):
        child = propose(op, parent, context(arch, seed=seed))
        assert child.params != parent.params and child.id != parent.id
        assert child.structure_id == parent.structure_id  # a parameter move, not a rewrite
        assert child.parents == (parent.id,) and child.operator == op.name and child.stage == stage
        assert child.operator.startswith("rule:") and child.meta["move"]
        assert hard(child, arch) == []


def test_retune_moves_one_or_two_params_to_neighbours() -> None:
    parent = matmul()
    space = parent.space
    for seed in range(20):
        child = propose(RetuneLaunch(seed=seed), parent, context())
        changed = {k for k in space if child.params[k] != parent.params[k]}
        assert 1 <= len(changed) <= 2
        assert not changed & {"PERSISTENT", "INPUT_PRECISION"}
        for k in changed:
            i, j = space[k].index(parent.params[k]), space[k].index(child.params[k])
            assert abs(i - j) == 1


def test_retune_never_steps_out_of_shared_memory() -> None:
    """From 128x256x64 with 4 stages (192 KiB on sm90), a 5th stage alone (240 KiB), BLOCK_K 128 alone (384 KiB)
    or BLOCK_M 256 alone (256 KiB) cannot fit; the operator only returns the moves that do (and whose accumulator
    fits the registers: 4 warps would need 256 a thread)."""
    parent = matmul(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=4, num_warps=8)
    assert hard(parent, "nvidia-sm90") == []
    seen = set()
    for seed in range(40):
        child = propose(RetuneLaunch(seed=seed), parent, context(task_source=FP16_TASK))
        assert hard(child, "nvidia-sm90") == []
        p = child.params
        assert (p["BLOCK_M"] * p["BLOCK_K"] + p["BLOCK_K"] * p["BLOCK_N"]) * 2 * p["num_stages"] <= 232448
        seen.add(tuple(sorted(child.params.items())))
    assert len(seen) > 5


def test_operators_are_deterministic_given_their_seed_and_the_context() -> None:
    parent = matmul()
    first = [propose(RetuneLaunch(seed=7), parent, context(seed=3)).params for _ in range(3)]
    op_a, op_b = RetuneLaunch(seed=7), RetuneLaunch(seed=7)
    runs_a = [propose(op_a, parent, context(seed=3)).params for _ in range(4)]
    runs_b = [propose(op_b, parent, context(seed=3)).params for _ in range(4)]
    assert runs_a == runs_b
    assert first == [runs_a[0]] * 3  # a fresh operator starts from the same draw
    assert len({tuple(sorted(p.items())) for p in runs_a}) > 1  # the counter moves on between calls


def test_grouped_ordering_adds_and_removes() -> None:
    removed = propose(GroupedOrdering(), matmul(GROUP_M=8), context())
    assert removed.params["GROUP_M"] == 1 and "remove" in removed.meta["move"]
    added = propose(GroupedOrdering(), matmul(GROUP_M=1), context())
    assert added.params["GROUP_M"] == 8 and "add" in added.meta["move"]


def test_input_precision_offers_only_what_the_task_dtype_allows() -> None:
    source = knowledge.template_source("matmul_grouped").replace(
        '"INPUT_PRECISION": ["tf32x3", "ieee"]', '"INPUT_PRECISION": ["tf32x3", "ieee", "tf32"]')
    parent = Candidate.from_source(source, params={"INPUT_PRECISION": "ieee"})
    for seed in range(10):
        child = propose(InputPrecision(seed=seed), parent, context())
        assert child.params["INPUT_PRECISION"] == "tf32x3"  # tf32 would fail an fp32 tolerance
    with pytest.raises(MutationError, match="changes nothing for float16"):
        propose(InputPrecision(), parent, context(task_source=FP16_TASK))


def test_switches_a_template_does_not_declare_are_refused() -> None:
    for op, parent in ((ReductionForm(), matmul()), (PersistentGrid(), softmax()), (GroupedOrdering(), softmax()),
                       (InputPrecision(), softmax())):
        assert not op.applicable(parent, None)
        with pytest.raises(MutationError, match="declares no"):
            propose(op, parent, context())


def test_no_legal_move_is_a_mutation_error() -> None:
    source = knowledge.template_source("softmax_rows").replace(
        '"num_warps": [1, 2, 4, 8, 16]', '"num_warps": [3, 4]').replace(
        '"BLOCK": [256, 512, 1024, 2048, 4096]', '"BLOCK": [1024]').replace(
        '"LOOPED": [0, 1]', '"LOOPED": [0]').replace('"num_stages": [1, 2, 3]', '"num_stages": [2]')
    parent = Candidate.from_source(source)
    with pytest.raises(MutationError, match="no legal move"):
        propose(RetuneLaunch(), parent, context())


def test_rule_operators_skip_configs_already_evaluated() -> None:
    """A move onto a config the run has evaluated (or has under way) is never the child: the campaign would not
    evaluate it again, and before issue V ``rule:retune`` kept proposing such neighbours of the best parents until
    the task stopped with most of its budget unspent. With every legal move evaluated: ``NothingNew``."""
    source = (Path(__file__).parents[1] / "fixtures" / "relu_space" / "six_by_four.py").read_text()
    parent = Candidate.from_source(source, params={"BLOCK": 128, "num_warps": 1})  # a corner: three neighbours
    op = RetuneLaunch(seed=3)
    neighbours = [parent.with_params(p) for p in ({"BLOCK": 256}, {"num_warps": 2}, {"BLOCK": 256, "num_warps": 2})]
    for left in neighbours:
        evaluated = frozenset({parent.id, *(c.id for c in neighbours if c is not left)})
        for seed in range(4):
            ctx = replace(context(seed=seed), evaluated=evaluated)
            assert propose(op, parent, ctx).params == left.params
    ctx = replace(context(), evaluated=frozenset({parent.id, *(c.id for c in neighbours)}))
    with pytest.raises(NothingNew, match="already evaluated"):
        propose(op, parent, ctx)


def test_rule_operators_for_an_arch() -> None:
    ops = list(build_operators(["rule"], OperatorSettings(arch="h100", seed=2)).values())
    assert [op.name for op in ops] == ["rule:retune", "rule:reduction-form", "rule:grouped-ordering",
                                      "rule:input-precision", "rule:persistent"]
    assert all(isinstance(op, Mutator) for op in ops)
    ctx = MutationContext(task_name="t", task_source=FP32_TASK, arch="", seed=0)
    child = propose(ops[0], matmul(), ctx)  # the operator's own arch stands in for an empty context.arch
    assert hard(child, "nvidia-sm90") == []
    with pytest.raises(UsageError, match="--arch gfx90a: unknown"):
        build_operators(["rule"], OperatorSettings(arch="gfx90a"))


def test_children_of_templates_still_parse(tmp_path: Path) -> None:
    child = propose(ReductionForm(), softmax(), context())
    path = tmp_path / "child.py"
    path.write_text(child.source)
    compile(child.source, str(path), "exec")
    assert child.params["LOOPED"] == 1


def test_every_rule_operator_names_a_stage_of_the_knowledge_base() -> None:
    ops = build_operators(["rule"], OperatorSettings(arch="nvidia-sm90")).values()
    assert {op.stage for op in ops} <= set(knowledge.STAGE_NAMES)  # type: ignore[attr-defined]
