"""The scripted model the loop tests and the ablation run against: each behaviour is what a real model sends,
and the operators read it as they would a real reply (through the real client and a loopback server)."""

from __future__ import annotations

import pytest
from evoforge.mutators.base import MutationContext
from evoforge.mutators.llm_ops import LLMGenerate, LLMOptimize, LLMRepair, LLMReplyError, LLMStageRewrite

from evoforge.core import Candidate, EvalResult, EvalStatus
from evoforge.task import Task
from tests.fakellm import FakeLLMServer
from tests.kernelmodel import WRONG, KernelModel
from tests.mutators.conftest import run

OK = EvalResult(EvalStatus.OK, runtime_ms=1.0, ref_ms=1.0, speedup=1.0)


@pytest.fixture(scope="module")
def relu() -> Task:
    return Task.load("L1/19", overrides={"batch_size": 4, "dim": 100})


def _context(task: Task, **changes) -> MutationContext:
    return MutationContext(task_name=task.name, task_source=task.source, arch="nvidia-sm90", **changes)


def test_generate_wrong_then_a_drifting_patch_repairs_it(make_client, fake_llm: FakeLLMServer, relu: Task) -> None:
    model = KernelModel()
    fake_llm.default = model
    client = make_client()
    generated = run(LLMGenerate(client=client).propose((), _context(relu)))
    assert WRONG in generated.source and "class ModelNew" in generated.source
    failed = EvalResult.failure(EvalStatus.INCORRECT, "max abs err 0.5")
    repaired = run(LLMRepair(client=client).propose((generated,), _context(relu, parent_result=failed)))
    assert repaired.meta["reply_kind"] == "patches" and WRONG not in repaired.source
    assert repaired.source.count("tl.store(") == generated.source.count("tl.store(")
    assert model.calls == {"generate": 1, "repair": 1}


@pytest.mark.parametrize("behaviour, problem", [("unchanged", "unchanged"), ("truncated", "truncated"),
                                                ("refusal", "unreadable")])
def test_unusable_replies_are_read_as_such(make_client, fake_llm: FakeLLMServer, relu: Task, behaviour: str,
                                           problem: str) -> None:
    fake_llm.default = KernelModel({"optimize": [behaviour]})
    from evoforge import knowledge

    parent = Candidate.from_source(knowledge.template_source("elementwise_relu"), task=relu.name)
    with pytest.raises(LLMReplyError) as caught:
        run(LLMOptimize(client=make_client()).propose((parent,), _context(relu, parent_result=OK)))
    assert caught.value.meta["reply_problem"] == problem


def test_stage_defaults_bare_modules_and_bursts(make_client, fake_llm: FakeLLMServer, relu: Task) -> None:
    from evoforge import knowledge

    fake_llm.default = KernelModel({"stage:memory_access": ["429", "bare"]})
    parent = Candidate.from_source(knowledge.template_source("elementwise_relu"), task=relu.name)
    op = LLMStageRewrite(client=make_client())
    child = run(op.propose((parent,), _context(relu, parent_result=OK, stage="memory_access")))
    assert child.stage == "memory_access" and child.source.startswith("# revision")  # the 429 was retried
    with pytest.raises(LLMReplyError, match="unchanged"):
        run(op.propose((parent,), _context(relu, parent_result=OK, stage="fusion")))
