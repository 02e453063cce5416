"""One child's route from what an operator made to the record (``Campaign._ready`` and what it calls): outside the
knowledge base's legal space (told, not recorded), a repeat of a child evaluated or under way (told), the
precheck's verdict or a cached result (recorded without the GPU), a CuTe build first, or a free evaluator; then
``_absorb``: the result in the task's history, told to its strategy, written to the record. Every step that ends a
child's time in flight takes it off ``TaskState.in_flight`` here or in the loop. A part of ``Campaign``
(``evoforge/campaign.py``), which holds the state these methods read and write."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from evoforge import stopping
from evoforge.children import NoChild
from evoforge.core import Candidate, EvalResult, EvalStatus, json_safe
from evoforge.judge.precheck import precheck
from evoforge.mutators.names import PARAMS
from evoforge.search.base import REPEAT, Proposal
from evoforge.task_state import TaskState

log = logging.getLogger("evoforge.campaign")

#: what an operator wrote in a child's meta that the record keeps as trial attributes (prompt and reply go to
#: artifacts, tokens and model are the store's own)
RECORDED_META = ("no_child", "ticket", "reply_problem", "reply_kind", "finish_reason", "feedback",
                 "repair_attempts", "repaired_status", "repair_error", "stages_done", "build", "inductor_config")


class ChildRoute:
    """A part of ``Campaign``: see the module's docstring."""

    def _outside_legal_space(self, state: TaskState, child: Candidate) -> bool:
        """A parameter move into a config the hardware rules forbid is not a sample of the space at all.

        The knowledge base narrows the space the strategy searches: such a config is told to the strategy as
        ``invalid`` (so it is not proposed again) but is neither evaluated, recorded nor counted in the budget.
        Structure changes (rule and LLM operators) that break a rule are still recorded as ``invalid`` children.
        """
        if not self.config.knowledge or child.operator != PARAMS or state.illegal_skipped >= 10 * max(
                1, self.config.budget_evals):
            return False
        from evoforge import knowledge

        if state.task.name in self._legality:  # a landscape: its rules read the recorded kernel, as search-bench's
            details = self._legality[state.task.name](child.params)
            if details is None:
                return False
            rules = ", ".join(details["refused_by"])
        else:
            legal, violations = knowledge.is_legal(child.params, self.config.arch, source=child.source)
            if legal:
                return False
            rules = ", ".join(sorted({v.rule for v in violations if v.severity == "hard"}))
            details = knowledge.refusal(violations)
        state.illegal_skipped += 1
        state.strategy.tell(child, EvalResult.failure(EvalStatus.INVALID, f"outside the legal space ({rules})",
                                                      backend=self.backend.name, arch=self.config.arch,
                                                      details=details))
        return True

    def _repeats_a_child(self, state: TaskState, child: Candidate) -> bool:
        """A child identical (source and params) to one already evaluated or under way is not evaluated, recorded
        or counted again: two parents' moves often land on the same config (a CuTe campaign at 4096^3 spent 5 of
        its 24 evaluations on repeats). The strategy is told of it all the same (``_tell_repeat``), so it proposes
        something else in its place. Past four times the budget of repeats, with nothing else under way, the task
        stops (saying so, ``_stop``), so a campaign never spins."""
        if child.id in state.submitted or child.id in state.results:
            if child.id in state.results:
                self._tell_repeat(state, child, state.results[child.id])
            else:
                state.repeats_waiting.setdefault(child.id, []).append(child)
            self._count_repeat(state, others_in_flight=state.in_flight - 1)  # in flight: this one, until dropped
            return True
        state.submitted.add(child.id)
        return False

    def _nothing_new(self, state: TaskState, proposal: Proposal, failed: NoChild) -> bool:
        """An operator whose every move from the parent lands on a config evaluated or under way (``NothingNew``)
        made no child and no failure: nothing is recorded or counted, and the strategy is told, as of a repeat."""
        if not failed.meta.get("nothing_new"):
            return False
        parent = (proposal.parents or (state.seed,))[0]
        meta = {k: v for k, v in failed.meta.items() if k != "nothing_new"}
        child = replace(parent, operator=proposal.operator or "?", parents=(parent.id,), stage=proposal.stage,
                        meta={**meta, "no_child": True})
        self._tell_repeat(state, child, replace(failed.result, backend=self.backend.name, arch=self.config.arch))
        self._count_repeat(state, others_in_flight=state.in_flight)
        return True

    def _tell_repeat(self, state: TaskState, child: Candidate, result: EvalResult) -> None:
        """The strategy learns that a proposal came to a config already evaluated: the result of that config,
        marked as a repeat (``search.base.REPEAT``), so it credits no operator and proposes a new config next."""
        state.strategy.tell(child, replace(result, details={**result.details, REPEAT: True}))

    def _count_repeat(self, state: TaskState, *, others_in_flight: int) -> None:
        """A task whose every legal config is evaluated stops at its first repeat after that (``stopping.covered``);
        past four times the budget of repeats, with nothing else under way, any task stops."""
        state.repeats_skipped += 1
        if stopping.covered(state, self.config, list(self.mutators)) or (state.repeats_skipped >= 4 * max(8, self.config.budget_evals)
                                    and others_in_flight <= 0):
            self._stop(state)

    def _absorb(self, state: TaskState, candidate: Candidate, result: EvalResult, *, record: bool = True,
                worker: str = "", started_at: float | None = None) -> None:
        evaluation = state.evaluations
        state.history.append((candidate, result))
        state.statuses[str(result.status)] += 1
        if result.ok and state.first_correct_at is None:
            state.first_correct_at = evaluation
        if not candidate.meta.get("no_child"):  # a no-child is no evaluation of its parent's source
            state.results[candidate.id] = result
            parent_steps = max((state.correct_steps.get(p, 0) for p in candidate.parents), default=0)
            state.correct_steps[candidate.id] = parent_steps + 1 if result.ok else 0
        state.strategy.tell(candidate, result)
        if not candidate.meta.get("no_child"):
            for repeat in state.repeats_waiting.pop(candidate.id, ()):  # told once the one they repeat has its result
                self._tell_repeat(state, repeat, result)
        if result.details.get("judge_out_of_memory"):
            state.judge_out_of_memory += 1
            # Only where the task's own first evaluation (its seed, not a child) did not fit either: a child that
            # hoards the device's memory in its process could otherwise stop its task for every child after it.
            first = state.history[0][1]
            if state.judge_out_of_memory >= stopping.JUDGE_OOM_STOP and first.details.get("judge_out_of_memory"):
                self._stop_out_of_memory(state)
        if record:
            assert self.store is not None
            extra: dict[str, Any] = {"worker": worker, "wall_time_s": round(self.elapsed_s(), 3),
                                     "evaluation": evaluation}
            extra.update({k: json_safe(candidate.meta[k]) for k in RECORDED_META if k in candidate.meta})
            if (vs := state.vs_compile(result)) is not None:
                extra["vs_compile"] = vs
            decide = getattr(state.strategy, "decision", None)
            decision = decide(candidate) if callable(decide) else None
            if decision:
                extra["decision"] = json_safe(decision)
            now = time.time()
            self.store.record(state.task.name, candidate, result, extra_attrs=extra,
                              started_at=now if started_at is None else started_at, finished_at=now)

    def _failed_proposal(self, state: TaskState, proposal: Proposal, failed: NoChild,
                         started_at: float | None = None) -> None:
        """Record an operator that made no child: the parent's source, the operator's name and why."""
        parent = (proposal.parents or (state.seed,))[0]
        child = replace(parent, operator=proposal.operator or "?", parents=(parent.id,), stage=proposal.stage,
                        meta={"no_child": True, **failed.meta})
        self._absorb(state, child, replace(failed.result, backend=self.backend.name, arch=self.config.arch),
                     started_at=started_at)

    def _proposed(self, state: TaskState) -> None:
        """A child is asked of an operator: under way until it lands (``_landed``)."""
        state.in_flight += 1

    def _landed(self, state: TaskState) -> None:
        """A child's time in flight is over: told, recorded without the GPU, or evaluated. The one place but
        ``_proposed`` where the count moves."""
        state.in_flight -= 1

    def _evaluated(self, state: TaskState, candidate: Candidate, result: EvalResult, *, worker: str = "",
                   started_at: float | None = None) -> None:
        """A child's result from an evaluator (or its build's failure): landed, cached, absorbed."""
        assert self.cache is not None
        self._landed(state)
        self.cache.put(state.task.key(), candidate, result)
        self._absorb(state, candidate, result, worker=worker, started_at=started_at)

    def _ready(self, state: TaskState, proposal: Proposal, made: Candidate | NoChild,
               asked_at: float) -> tuple[str, Candidate | None]:
        """What becomes of what an operator made for ``proposal``: ``"told"`` (the strategy learns it, nothing is
        recorded: every move was evaluated, a config outside the legal space, a repeat), ``"recorded"`` (told and in
        the record without the GPU: a failed proposal, the precheck's verdict, a result in the cache), ``"build"``
        (a CuTe child for nvcc first) or ``"evaluate"`` (for a free evaluator), with the child as it goes on."""
        assert self.store is not None and self.cache is not None
        if isinstance(made, NoChild):
            self._landed(state)
            if self._nothing_new(state, proposal, made):
                return "told", None  # its operator's every move was evaluated: the strategy proposes again
            self._failed_proposal(state, proposal, made, started_at=asked_at)
            return "recorded", None
        if self._outside_legal_space(state, made):
            self._landed(state)  # never sampled: the strategy learns it, the record and budget do not
            return "told", None
        if self._repeats_a_child(state, made):
            self._landed(state)  # the same kernel at the same params: its result is known or coming
            return "told", None
        # The child's one static check; its verdict travels with it to the actor and the chain.
        made, early = precheck(made, backend=self.backend.name, arch=self.config.arch,
                               knowledge=self.config.knowledge)
        self.store.save_candidate(made)
        early = early or self.cache.get(state.task.key(), made)
        if early is not None:
            self._landed(state)
            self._absorb(state, made, early)
            return "recorded", made
        if made.language == "cute" and self.builds is not None:
            return "build", made
        return "evaluate", made
