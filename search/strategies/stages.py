"""``stages``: Xe-Forge's pipeline. One ordered pass through the optimization stages over a correct kernel.

Each stage rewrites the kernel the previous stages left (``llm-stage`` asked for that stage). A rewrite is kept
only if it passes the verification chain and is faster than the stage's input (``accept = "faster"``, by at
least ``min_gain``); otherwise the input goes on unchanged to the next stage. A rewrite that fails verification
is sent back with the chain's findings (``llm-repair`` on the failed child: its exact error) and a correct rewrite
that is not faster is tried again with that finding in the prompt, until one is kept or the stage's ``attempts``
(LLM proposals per stage) run out. A reply that sends the kernel back unchanged is the model saying the stage
does not apply (the stage prompt asks for exactly that): the stage is skipped, not retried. So the pipeline's
result is never slower than its input: every kernel it keeps was measured faster than the one it replaced.

Options (``[campaign] strategy_options``): ``order`` (stage names, default all nine of knowledge/stages.yaml in
their order), ``accept`` (``faster``, or ``correct``: keep any correct rewrite, the final kernel being the fastest
kept), ``min_gain`` (a fraction: 0.02 keeps only rewrites at least 2% faster), ``attempts`` (default 3),
``then`` (``tune``: after the last stage the parameter tuner takes the rest of the budget; ``stop``).

A task with no kernel to start from (the campaign's seed is the task's reference) gets its input from
``llm-generate``: a generation that fails is repaired with the chain's findings, or generated again, up to
``attempts`` proposals; the first correct kernel is the pass's input.

Every stage decision is recorded beside its trial (``decision``: stage, attempt, role ``rewrite``/``repair``,
accepted, why, the stage input's and the child's runtime) and the pass as a whole in the campaign summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoforge.knowledge import STAGE_NAMES
from evoforge.mutators.names import LLM_GENERATE, LLM_REPAIR, LLM_STAGE, PARAMS
from evoforge.search.base import Proposal
from evoforge.search.strategies.llm_loop import LoopStrategy, fmt_ms, outcome
from evoforge.search.strategies.names import STAGES

from evoforge.core import SEED_OPERATOR, Candidate, EvalResult, UsageError

ACCEPT = ("faster", "correct")


class StagePipeline(LoopStrategy):
    name = STAGES
    needs = (LLM_STAGE,)

    def __init__(self, *, seed: int, initial: Sequence[Candidate] = (), operators: Sequence[str] = (PARAMS,),
                 order: Sequence[str] | None = None, accept: str = "faster", min_gain: float = 0.0,
                 attempts: int = 3, then: str = "tune", unsafe: Sequence[Mapping[str, Any]] = (),
                 moves_together: Sequence[Sequence[str]] = ()) -> None:
        super().__init__(seed=seed, initial=initial, operators=operators, then=then, unsafe=unsafe,
                         moves_together=moves_together)
        self.order = tuple(order) if order is not None else STAGE_NAMES
        unknown = [s for s in self.order if s not in STAGE_NAMES]
        if unknown or not self.order:
            raise UsageError(f"--strategy stages: order names unknown stage(s) {unknown} (stages: "
                             f"{', '.join(STAGE_NAMES)})")
        if accept not in ACCEPT:
            raise UsageError(f"--strategy stages: accept must be one of {', '.join(ACCEPT)}, got {accept!r}")
        if attempts < 1 or not 0 <= min_gain < 1:
            raise UsageError("--strategy stages: attempts must be at least 1 and min_gain in [0, 1)")
        self.accept = accept
        self.min_gain = float(min_gain)
        self.attempts = int(attempts)
        self.input: tuple[Candidate, EvalResult] | None = None
        self.head: tuple[Candidate, EvalResult] | None = None  # the kernel the next stage starts from
        self.best: tuple[Candidate, EvalResult] | None = None  # the fastest kept (== head under "faster")
        self.stage_index = 0
        self.used = 0  # LLM proposals spent on the current stage
        self.repair_target: Candidate | None = None
        self._failed: dict[str, Candidate] = {}  # failed rewrites by id, while a repair of them is asked
        self.notes: list[str] = []
        self.waiting = False
        self.stages: list[dict[str, Any]] = []  # one entry per finished stage
        # no kernel to start from: the input is generated from the reference (and repaired) first
        self.generating = bool(self.initial and self.initial[0].meta.get("reference")) and LLM_GENERATE in self.operators
        self.input_used = 0

    # -- what to ask ------------------------------------------------------------------------------------------
    @property
    def stage(self) -> str:
        return self.order[self.stage_index]

    def _next(self) -> tuple[Proposal, dict[str, Any]] | None:
        if self.waiting or self.finished:
            return None
        if self.head is None:
            return self._next_input() if self.generating else None
        self.used += 1
        asked = {"stage": self.stage, "step": self.stage_index + 1, "attempt": self.used,
                 "input": self.head[0].id, "input_ms": self.runtime(self.head[1])}
        meta = {"notes": list(self.notes)} if self.notes else {}
        self.waiting = True
        if self.repair_target is not None:
            target, self.repair_target = self.repair_target, None
            return Proposal(operator=LLM_REPAIR, parents=(target,), stage=self.stage, meta=meta), \
                {**asked, "role": "repair", "repairs": target.id}
        return Proposal(operator=LLM_STAGE, parents=(self.head[0],), stage=self.stage, meta=meta), \
            {**asked, "role": "rewrite"}

    def _next_input(self) -> tuple[Proposal, dict[str, Any]]:
        self.input_used += 1
        self.waiting = True
        asked = {"stage": "input", "attempt": self.input_used, "phase": "input"}
        meta = {"notes": list(self.notes)} if self.notes else {}
        if self.repair_target is not None:
            target, self.repair_target = self.repair_target, None
            return Proposal(operator=LLM_REPAIR, parents=(target,), meta=meta), \
                {**asked, "role": "repair", "repairs": target.id}
        return Proposal(operator=LLM_GENERATE, meta=meta), {**asked, "role": "generate"}

    # -- what a result does ------------------------------------------------------------------------------------
    def _told(self, candidate: Candidate, result: EvalResult, asked: dict[str, Any] | None) -> None:
        if asked is None:
            self._told_input(candidate, result)
            return
        if asked.get("phase") == "input":
            self._told_generated(candidate, result, asked)
            return
        self.waiting = False
        base_ms = asked.get("input_ms")
        ms = self.runtime(result)
        left = self.used < self.attempts
        if candidate.meta.get("no_child") or self._llm_failed(candidate, asked):
            problem = candidate.meta.get("reply_problem", "fallback")
            if problem == "unchanged" and asked["role"] == "rewrite":
                self._decide(candidate, asked, accepted=False, next="next stage",
                             why="the model returned the kernel unchanged: the stage does not apply to it")
                self._end_stage("does not apply")
                return
            why = (f"no usable reply ({problem}): {result.message[:300]}" if candidate.meta.get("no_child")
                   else f"the LLM was unavailable; {candidate.operator} made this child instead")
            self._decide(candidate, asked, accepted=False, why=why, next="retry" if left else "next stage")
            self.notes = [f"Your previous reply for this stage could not be used: {result.message[:300]}"]
            if asked["role"] == "repair" and asked.get("repairs"):  # the failed rewrite still waits for its fix
                self.repair_target = self._failed.get(asked["repairs"])
            if not left:
                self._end_stage("attempts spent")
            return
        if not result.ok:
            repairable = LLM_REPAIR in self.operators and left
            self._decide(candidate, asked, accepted=False, runtime_ms=None, why=outcome(result),
                         next="repair" if repairable else ("retry" if left else "next stage"))
            if repairable:
                self._failed[candidate.id] = candidate
                self.repair_target = candidate
                self.notes = []
            else:
                self.notes = [f"A rewrite for this stage failed verification ({outcome(result)}); avoid that fault."]
            if not left:
                self._end_stage("attempts spent")
            return
        if self._keeps(ms, base_ms):
            gain = f"{base_ms / ms:.3g}x faster than" if base_ms and ms else "as fast as"
            self._decide(candidate, asked, accepted=True, runtime_ms=ms, next="next stage",
                         why=f"correct and {gain} the stage input ({fmt_ms(ms)} against {fmt_ms(base_ms)})")
            self.head = (candidate, result)
            if self.best is None or (ms is not None and ms < (self.runtime(self.best[1]) or float("inf"))):
                self.best = (candidate, result)
            self._end_stage("kept", kept=candidate.id)
            return
        self._decide(candidate, asked, accepted=False, runtime_ms=ms, next="retry" if left else "next stage",
                     why=f"correct but not faster than the stage input ({fmt_ms(ms)} against {fmt_ms(base_ms)})")
        self.notes = [f"A rewrite for this stage was correct but not faster: {fmt_ms(ms)} against "
                      f"{fmt_ms(base_ms)} for the current kernel. Find a change that makes it faster."]
        if not left:
            self._end_stage("not faster")

    def _keeps(self, ms: float | None, base_ms: float | None) -> bool:
        if ms is None:
            return False
        if self.accept == "correct" or base_ms is None:
            return True
        return ms < base_ms * (1.0 - self.min_gain)

    def _told_input(self, candidate: Candidate, result: EvalResult) -> None:
        """The campaign's seed (or the first kernel told): the pipeline's input, which must be correct."""
        if self.input is not None or candidate.meta.get("no_child"):
            return
        if self.initial and candidate.id != self.initial[0].id and candidate.operator != SEED_OPERATOR:
            return
        self.input = (candidate, result)
        if result.ok:
            self.head = self.best = (candidate, result)
            self._decide(candidate, None, accepted=True, role="input", runtime_ms=self.runtime(result),
                         why=f"the pipeline's input ({outcome(result)})")
        else:
            self.finished = True
            self._decide(candidate, None, accepted=False, role="input",
                         why=f"the pipeline needs a correct kernel to start from; the input is {outcome(result)}")

    def _told_generated(self, candidate: Candidate, result: EvalResult, asked: dict[str, Any]) -> None:
        """A generated (or repaired) kernel meant to be the pass's input."""
        self.waiting = False
        usable = not candidate.meta.get("no_child") and not self._llm_failed(candidate, asked)
        if usable and result.ok:
            self.input = self.head = self.best = (candidate, result)
            self.notes = []
            self._decide(candidate, asked, accepted=True, runtime_ms=self.runtime(result), next="first stage",
                         why=f"the pipeline's input, generated from the reference ({outcome(result)})")
            return
        left = self.input_used < self.attempts
        why = outcome(result) if usable else f"no usable reply: {result.message[:300]}"
        if usable:
            self._failed[candidate.id] = candidate
        if left and usable and LLM_REPAIR in self.operators:
            self.repair_target = candidate
            self.notes = []
            self._decide(candidate, asked, accepted=False, why=why, next="repair")
            return
        if left and not usable and asked["role"] == "repair" and asked.get("repairs") in self._failed:
            self.repair_target = self._failed[asked["repairs"]]  # the fault still waits for its fix
            self.notes = [f"Your previous reply could not be used: {result.message[:300]}"]
            self._decide(candidate, asked, accepted=False, why=why, next="repair")
            return
        if left:
            self.notes = [f"An earlier kernel for this task failed: {why[:300]}"]
            self._decide(candidate, asked, accepted=False, why=why, next="generate again")
            return
        self.finished = True
        self._decide(candidate, asked, accepted=False, next="end",
                     why=f"{why}; no correct kernel to start the pass from after {self.input_used} attempt(s)")

    def _end_stage(self, ended: str, *, kept: str | None = None) -> None:
        self.stages.append({"stage": self.stage, "ended": ended, "attempts": self.used, "kept": kept,
                            "runtime_ms": self.runtime(self.head[1]) if self.head else None})
        self.stage_index += 1
        self.used = 0
        self.repair_target = None
        self.notes = []
        if self.stage_index >= len(self.order):
            self.finished = True

    def summary(self) -> dict[str, Any]:
        """The pass as a whole: each stage's end, the input and the final kernel (never slower than the input)."""
        final = self.best if self.accept == "correct" else self.head
        in_ms = self.runtime(self.input[1]) if self.input else None
        out_ms = self.runtime(final[1]) if final else None
        return {"strategy": self.name, "order": list(self.order), "accept": self.accept, "attempts": self.attempts,
                "finished": self.finished, "stages": list(self.stages),
                "input": self.input[0].id if self.input else None, "input_ms": in_ms,
                "final": final[0].id if final else None, "final_ms": out_ms,
                "speedup_over_input": in_ms / out_ms if in_ms and out_ms else None}
