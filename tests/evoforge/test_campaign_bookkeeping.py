"""What the campaign keeps of a proposal that made no child, without a pool: the real record (Optuna SQLite),
the real operators and a scripted model.

A reply the operator cannot use (or that sends the kernel back unchanged, which the stage prompt asks for when
the stage does not apply) is recorded under the parent's source. Before issue K that record was then read back
as the parent's own result: a correct parent became ``invalid``, optimize, stage and crossover stopped applying to
it, repair was offered for a correct kernel and its delayed-feedback count went back to 0.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import optuna
import pytest
from evoforge.mutators.llm_client import LLMConfig
from evoforge.mutators.registry import OperatorSettings, build_operators
from evoforge.search.base import Proposal
from evoforge.search.store import OptunaStore
from evoforge.search.strategies import get_strategy

from evoforge.campaign import Campaign
from evoforge.config import CampaignConfig, TaskConfig
from evoforge.core import Candidate, EvalResult, EvalStatus
from evoforge.task import Task
from evoforge.task_state import TaskState
from tests.conftest import FIXTURES
from tests.scriptedllm import ScriptedLLM

RELU = (FIXTURES / "relu" / "correct.py").read_text()
OPERATORS = ["llm-stage", "llm-optimize", "llm-repair", "llm-crossover"]
OK = EvalResult(EvalStatus.OK, runtime_ms=2.0, ref_ms=1.0, speedup=0.5, backend="interpreter")


def _campaign(run_dir, client: ScriptedLLM) -> tuple[Campaign, TaskState]:
    config = CampaignConfig(name="b", out=str(run_dir), backend="interpreter", arch="nvidia-sm90",
                            operators=OPERATORS, tasks=[TaskConfig(spec="L1/19", set={"batch_size": 4, "dim": 100})],
                            llm=LLMConfig(model="scripted", feedback_after=1))
    campaign = Campaign(config, progress=False)
    campaign.backend = SimpleNamespace(name="interpreter")
    campaign.store = OptunaStore(run_dir=run_dir, campaign="b")
    campaign.mutators = build_operators(OPERATORS, OperatorSettings(arch="nvidia-sm90", llm=config.llm,
                                                                    client=client))
    task = Task.load("L1/19", overrides={"batch_size": 4, "dim": 100})
    seed = Candidate.from_source(RELU, task=task.name, operator="seed")
    state = TaskState(task=task, seed=seed, strategy=get_strategy("default", seed=0, operators=OPERATORS,
                                                                   initial=(seed,)))
    campaign.tasks[task.name] = state
    campaign.store.study(task.name)
    return campaign, state


def _propose(campaign: Campaign, state: TaskState, operator: str, parent: Candidate):
    proposal = Proposal(operator=operator, parents=(parent,))
    made = asyncio.run(campaign.maker.materialize(state, proposal))
    return proposal, made


@pytest.mark.parametrize("operator", ["llm-stage", "llm-optimize"])
def test_an_unchanged_reply_leaves_a_correct_parent_correct(tmp_path, operator: str) -> None:
    client = ScriptedLLM()
    campaign, state = _campaign(tmp_path / "run", client)
    seed = state.seed
    campaign._absorb(state, seed, OK)
    client.push(f"This stage does not apply; the kernel is unchanged.\n\n```python\n{RELU}```\n")
    proposal, made = _propose(campaign, state, operator, seed)
    assert not isinstance(made, Candidate) and "unchanged" in made.result.message
    campaign._failed_proposal(state, proposal, made)

    context = campaign.maker.context(state, seed)
    assert context.parent_result is not None and context.parent_result.ok  # still the seed's own verdict
    assert context.lineage_correct_steps == 1  # the feedback delay keeps its count
    assert context.failures == ()  # a declined stage is no failure to show the model
    for name in ("llm-stage", "llm-optimize", "llm-crossover"):
        assert campaign.mutators[name].applicable(seed, context.parent_result), name
    assert not campaign.mutators["llm-repair"].applicable(seed, context.parent_result)

    # The next proposal on the seed is the operator's own (no fallback to a parameter move), and with the
    # lineage correct for one step the figures are in the prompt (feedback_after = 1).
    variant = RELU.replace('PARAMS = {"BLOCK": 1024', 'PARAMS = {"BLOCK": 2048')
    client.push(f"```python\n{variant}```\n")
    _, child = _propose(campaign, state, "llm-optimize", seed)
    assert isinstance(child, Candidate) and child.operator == "llm-optimize" and child.meta["feedback"] is True
    assert "Measured performance of the current kernel" in client.requests[-1]["messages"][-1]["content"]

    # The record says what happened: one trial for the seed, one for the reply that made no child.
    study = optuna.load_study(study_name=f"b/{state.task.name}", storage=campaign.store.storage)
    declined = study.trials[1].user_attrs
    assert (declined["operator"], declined["status"], declined["no_child"], declined["reply_problem"]) == (
        operator, "invalid", True, "unchanged")
    assert declined["prompt_tokens"] > 0

    # And a resumed campaign reads it the same way.
    again, again_state = _campaign(tmp_path / "run", ScriptedLLM())
    assert again.restore() == 2
    resumed = again.maker.context(again_state, again_state.seed)
    assert resumed.parent_result.ok and resumed.lineage_correct_steps == 1


def _judge_oom() -> EvalResult:
    return EvalResult.failure(EvalStatus.RUNTIME_ERROR, "the judge failed while evaluating: the judge ran out of "
                              "device memory ...", details={"judge_error": True, "judge_out_of_memory": True})


def test_children_cannot_stop_their_task_by_running_the_judge_out_of_memory(tmp_path) -> None:
    """A task whose judge runs out of device memory stops (tests/evoforge/test_campaign.py), but only where its
    seed did not fit either: a child that holds the device's memory in its own process makes the judge fail beside
    it, and two such children must not end the search for every child after them."""
    campaign, state = _campaign(tmp_path / "run", ScriptedLLM())
    campaign._absorb(state, state.seed, OK)
    for n in range(3):
        child = state.seed.with_params({"BLOCK": 2048 >> n}, operator="params")
        campaign._absorb(state, child, _judge_oom())
    assert state.judge_out_of_memory == 3 and state.task.name not in campaign.stopped

    campaign, state = _campaign(tmp_path / "run2", ScriptedLLM())
    campaign._absorb(state, state.seed, _judge_oom())
    assert state.task.name not in campaign.stopped  # one may be a neighbour's moment
    campaign._absorb(state, state.seed.with_params({"BLOCK": 2048}, operator="params"), _judge_oom())
    assert "ran out of the device's memory on 2 evaluations" in campaign.stopped[state.task.name]
