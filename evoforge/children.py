"""How a strategy's proposal becomes a child: its parameters set on the parent, an operator's mutation (with what
the operator may read, ``MutationContext``), a fallback to an operator that needs no LLM when the endpoint fails,
or ``NoChild`` saying why none was made (what the operator spent is kept with it)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from evoforge.config import CampaignConfig
from evoforge.core import SEED_OPERATOR, Candidate, EvalResult, EvalStatus
from evoforge.mutators.base import Failure, LLMError, MutationContext, MutationError, Mutator, NothingNew
from evoforge.mutators.names import LLM, LLM_GENERATE, PARAMS
from evoforge.mutators.registry import family_of
from evoforge.search.base import Proposal
from evoforge.starts.knowledge import KNOWLEDGE_START
from evoforge.task_state import TaskState

log = logging.getLogger("evoforge.campaign")


@dataclass(frozen=True)
class NoChild:
    """An operator that produced no child, and what it spent trying (prompt, reply, tokens)."""

    result: EvalResult
    meta: dict[str, Any] = field(default_factory=dict)


class ChildMaker:
    """Makes the children of one campaign's proposals with its operators (``mutators``, shared with the campaign)."""

    def __init__(self, mutators: dict[str, Mutator], config: CampaignConfig) -> None:
        self.mutators = mutators
        self.config = config

    def context(self, state: TaskState, parent: Candidate | None, proposal: Proposal | None = None,
                 number: int | None = None) -> MutationContext:
        """What an operator may read. The parent's result is its own evaluation: a no-child recorded under its
        id is no verdict on it. ``number`` (the proposal's) seeds the context, so two proposals made at once
        still differ."""
        parent_result = state.results.get(parent.id) if parent is not None else None
        failures = tuple(Failure(c, r) for c, r in state.history[-20:]
                         if not r.ok and not c.meta.get("no_child"))[-4:]
        notes = tuple(str(n) for n in (proposal.meta.get("notes", ()) if proposal else ()))
        return MutationContext(task_name=state.task.name, task_source=state.task.source, arch=self.config.arch,
                               top=state.top(), failures=failures, parent_result=parent_result,
                               lineage_correct_steps=state.correct_steps.get(parent.id, 0) if parent else 0,
                               knowledge_enabled=self.config.knowledge,
                               seed=self.config.seed + (state.evaluations if number is None else number),
                               stage=proposal.stage if proposal else "", notes=notes, language=state.seed.language,
                               evaluated=frozenset(state.submitted.union(state.results)))

    async def materialize(self, state: TaskState, proposal: Proposal) -> Candidate | NoChild:
        """Turn a proposal into a child, or into an ``invalid`` result saying why no child could be made."""
        made = await self.make(state, proposal)
        ticket = proposal.meta.get("ticket")
        if ticket is None or isinstance(made, NoChild):
            return made if ticket is None else NoChild(made.result, {**made.meta, "ticket": ticket})
        return replace(made, meta={**made.meta, "ticket": ticket})

    async def make(self, state: TaskState, proposal: Proposal) -> Candidate | NoChild:
        from evoforge.mutators.llm_client import scrub_secrets

        number = state.proposals
        state.proposals += 1
        parents = proposal.parents or (state.seed,)
        parent = parents[0]
        if proposal.params is not None:
            return parent.with_params(proposal.params, operator=proposal.operator or PARAMS,
                                      parents=(parent.id,), stage=proposal.stage, meta={})
        if proposal.operator in (SEED_OPERATOR, KNOWLEDGE_START):
            return parent
        mutator = self.mutators.get(proposal.operator)
        if mutator is None:
            return NoChild(EvalResult.failure(EvalStatus.INVALID,
                                              f"no operator named {proposal.operator!r} in this campaign"))
        context = self.context(state, parent, proposal, number)
        if not mutator.applicable(parent, context.parent_result):
            # Nothing for this operator to act on (no GROUP_M to toggle...): spend the slot on one that has.
            child = await self.fallback(parent, context)
            if child is None:
                return NoChild(EvalResult.failure(EvalStatus.INVALID, f"{proposal.operator}: not applicable to "
                                                  "this parent and no other operator applies"))
            return replace(child, task=state.task.name)
        try:
            # llm-generate reads the reference: no kernel is its parent (the seed is what it must differ from)
            given = tuple(proposal.parents) or ((state.seed,) if not state.seed_is_reference else ())
            child = await mutator.propose(given if mutator.name == LLM_GENERATE else tuple(parents), context)
        except MutationError as e:
            return NoChild(EvalResult.failure(EvalStatus.INVALID, f"{proposal.operator}: {e}"),
                           {**(getattr(e, "meta", {}) or {}), **({"nothing_new": True} if isinstance(e, NothingNew)
                                                                else {})})
        except LLMError as e:
            # The endpoint failed, not the child: fall back to an operator that needs no LLM.
            log.warning("%s unavailable (%s); falling back to a non-LLM operator", proposal.operator,
                        scrub_secrets(str(e))[:200])
            child = await self.fallback(parent, context)
            if child is None:
                return NoChild(EvalResult.failure(EvalStatus.INVALID, scrub_secrets(
                    f"{proposal.operator}: the LLM is unavailable ({e}) and no other operator applies")[:1000]))
        return replace(child, task=state.task.name)

    async def fallback(self, parent: Candidate, context: MutationContext) -> Candidate | None:
        for name, mutator in self.mutators.items():
            if family_of(name) == LLM or not mutator.applicable(parent, context.parent_result):
                continue
            try:
                return await mutator.propose((parent,), context)
            except MutationError:
                continue
        if parent.space:
            import random

            rng = random.Random(context.seed)
            key = rng.choice(sorted(parent.space))
            return parent.with_params({key: rng.choice(parent.space[key])}, operator=PARAMS,
                                      parents=(parent.id,), meta={"fallback": True})
        return None
