"""The search credits an operator under the name its children carry (STYLE: one name per concept).

Before the operator registry this failed: the strategy's arm was ``llm-optimize`` while LLMOptimize's children
carried ``llm_optimize``, so an LLM child that halved the runtime left the arm at 0 uses. The mutator
conformance suite checks the same for every registered operator.
"""

from __future__ import annotations

from collections.abc import Callable

from evoforge.mutators.base import MutationContext
from evoforge.mutators.llm_client import OpenAIClient
from evoforge.mutators.llm_ops import LLMOptimize
from evoforge.search.strategies.evolution import EvolutionStrategy

from evoforge.core import Candidate, EvalResult, EvalStatus
from tests.fakellm import FakeLLMServer
from tests.mutators.conftest import run
from tests.mutators.test_llm_ops import CORRECT, FASTER, REFERENCE, module


def test_the_bandit_credits_an_llm_child_that_beat_its_parent(fake_llm: FakeLLMServer,
                                                               make_client: Callable[..., OpenAIClient]) -> None:
    seed = Candidate.from_source(CORRECT, task="add")
    strategy = EvolutionStrategy(seed=0, initial=(seed,), operators=("llm-optimize",))
    parent_result = EvalResult(EvalStatus.OK, runtime_ms=2.0, ref_ms=2.0, speedup=1.0)
    strategy.tell(seed, parent_result)
    (proposal,) = strategy.ask(1)
    assert proposal.operator == "llm-optimize" and proposal.parents == (seed,)

    fake_llm.push(module(FASTER))
    context = MutationContext(task_name="add", task_source=REFERENCE, arch="nvidia-sm90", seed=1,
                              parent_result=parent_result)
    child = run(LLMOptimize(client=make_client()).propose(proposal.parents, context))
    strategy.tell(child, EvalResult(EvalStatus.OK, runtime_ms=1.0, ref_ms=2.0, speedup=2.0))  # twice as fast

    assert strategy.bandit.uses("llm-optimize") == 1 and strategy.bandit.auc("llm-optimize") == 1.0
    assert child.operator == proposal.operator
