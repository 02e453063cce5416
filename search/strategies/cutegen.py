"""``cutegen``: CuTeGen's loop. Generate, test, debug, optimize one evolving kernel.

1. **Generate**: ``llm-generate`` writes a kernel from the task's reference (``samples`` independent ones per round,
   evaluated in parallel); with ``from_seed = true`` the campaign's seed kernel is the first kernel instead.
2. **Test**: the verification chain judges it.
3. **Debug**: a kernel that fails goes to ``llm-repair`` with the chain's exact error, a targeted patch of that
   fault, up to ``debug_attempts`` times in a row. A generation round with no correct kernel starts another.
4. **Optimize**: ``llm-optimize`` rewrites the evolving kernel; a rewrite that fails is debugged the same way, and
   one whose debugging runs out leaves the evolving kernel where it was. A correct rewrite becomes the evolving
   kernel (``advance = "correct"``, CuTeGen's progressive refinement; ``"faster"``: only when faster), the fastest
   so far is kept apart, and after ``patience`` steps without a new best the loop goes back to it.

Performance figures are held back until the structure settles: ``llm-optimize`` shows them only once the evolving
kernel's lineage has been correct for ``[llm] feedback_after`` steps, so a debugged kernel (a structure that just
changed) starts the count again. ``[llm] delay_feedback = false`` shows them from the first step (the ablation).

Options (``[campaign] strategy_options``): ``samples`` (1), ``debug_attempts`` (3), ``steps`` (optimization
steps; 0: until the budget ends), ``advance``, ``patience`` (3; 0: never go back), ``from_seed`` (false),
``then`` (``stop``; ``tune``: after ``steps`` the parameter tuner takes the rest of the budget).
Every child's decision is recorded beside its trial (phase generate / debug / optimize, step, whether it became
the evolving kernel, why, whether its prompt carried figures).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoforge.mutators.names import LLM_GENERATE, LLM_OPTIMIZE, LLM_REPAIR, PARAMS
from evoforge.search.base import Proposal
from evoforge.search.strategies.llm_loop import LoopStrategy, fmt_ms, outcome
from evoforge.search.strategies.names import CUTEGEN

from evoforge.core import SEED_OPERATOR, Candidate, EvalResult, UsageError

ADVANCE = ("correct", "faster")


class CuTeGenLoop(LoopStrategy):
    name = CUTEGEN

    def __init__(self, *, seed: int, initial: Sequence[Candidate] = (), operators: Sequence[str] = (PARAMS,),
                 samples: int = 1, debug_attempts: int = 3, steps: int = 0, advance: str = "correct",
                 patience: int = 3, from_seed: bool = False, then: str = "stop",
                 unsafe: Sequence[Mapping[str, Any]] = (), moves_together: Sequence[Sequence[str]] = ()) -> None:
        # a task with no seed kernel (its reference stands in) has nothing to start from but a generation
        self.from_seed = bool(from_seed) and not (initial and initial[0].meta.get("reference"))
        super().__init__(seed=seed, initial=initial, operators=operators, then=then, unsafe=unsafe,
                         moves_together=moves_together)
        if advance not in ADVANCE:
            raise UsageError(f"--strategy cutegen: advance must be one of {', '.join(ADVANCE)}, got {advance!r}")
        if samples < 1 or debug_attempts < 0 or steps < 0 or patience < 0:
            raise UsageError("--strategy cutegen: samples >= 1, and debug_attempts, steps, patience >= 0")
        self.samples = int(samples)
        self.debug_attempts = int(debug_attempts)
        self.steps_limit = int(steps)
        self.advance = advance
        self.patience = int(patience)
        self.phase = "optimize" if self.from_seed else "generate"
        # generation rounds
        self.round = 0
        self.to_generate = 0 if self.from_seed else self.samples
        self.open_chains = 0
        self.chains = 0
        self.round_correct: list[tuple[Candidate, EvalResult]] = []
        self.round_failures: list[str] = []
        self.repairs_queued: list[tuple[Candidate, dict[str, Any]]] = []
        self._targets: dict[str, Candidate] = {}  # failed generations by id, while their repair is asked
        # the evolving kernel
        self.current: tuple[Candidate, EvalResult] | None = None
        self.best: tuple[Candidate, EvalResult] | None = None
        self.steps = 0
        self.since_best = 0
        self.debug_target: Candidate | None = None
        self.debug_used = 0
        self.waiting = False
        self.notes: list[str] = []
        # for the summary
        self.generations = 0
        self.debug_total = 0
        self.first_correct: str | None = None
        self.first_feedback_step: int | None = None

    @property
    def needs(self) -> tuple[str, ...]:  # type: ignore[override]
        return (LLM_OPTIMIZE,) if self.from_seed else (LLM_GENERATE, LLM_OPTIMIZE)

    # -- what to ask ------------------------------------------------------------------------------------------
    def _next(self) -> tuple[Proposal, dict[str, Any]] | None:
        if self.finished:
            return None
        if self.phase == "generate":
            if self.repairs_queued:
                target, chain = self.repairs_queued.pop(0)
                return Proposal(operator=LLM_REPAIR, parents=(target,)), \
                    {"phase": "debug", "chain": chain["chain"], "attempt": chain["attempt"], "repairs": target.id}
            if self.to_generate > 0:
                self.to_generate -= 1
                self.open_chains += 1
                self.chains += 1
                self.generations += 1
                meta = {"notes": list(self.notes)} if self.notes else {}
                return Proposal(operator=LLM_GENERATE, meta=meta), \
                    {"phase": "generate", "round": self.round + 1, "chain": self.chains, "attempt": 0}
            return None
        if self.waiting or (self.current is None and self.debug_target is None):
            return None
        self.waiting = True
        meta = {"notes": list(self.notes)} if self.notes else {}
        if self.debug_target is not None:
            return Proposal(operator=LLM_REPAIR, parents=(self.debug_target,), meta=meta), \
                {"phase": "debug", "step": self.steps + 1, "attempt": self.debug_used + 1,
                 "repairs": self.debug_target.id}
        assert self.current is not None
        return Proposal(operator=LLM_OPTIMIZE, parents=(self.current[0],), meta=meta), \
            {"phase": "optimize", "step": self.steps + 1, "from": self.current[0].id,
             "from_ms": self.runtime(self.current[1])}

    # -- what a result does ------------------------------------------------------------------------------------
    def _told(self, candidate: Candidate, result: EvalResult, asked: dict[str, Any] | None) -> None:
        if asked is None:
            self._told_seed(candidate, result)
        elif "chain" in asked:
            self._told_generation(candidate, result, asked)
        else:
            self._told_step(candidate, result, asked)

    def _told_seed(self, candidate: Candidate, result: EvalResult) -> None:
        if candidate.operator != SEED_OPERATOR or candidate.meta.get("no_child") or self.current is not None:
            return
        if not self.from_seed:
            self._decide(candidate, None, accepted=False, role="seed",
                         why="the campaign's seed kernel, evaluated as a baseline; the loop starts from generation")
            return
        if result.ok:
            self._become(candidate, result)
            self._decide(candidate, None, accepted=True, role="seed", why=f"the first kernel ({outcome(result)})")
        elif LLM_REPAIR in self.operators and self.debug_attempts:
            self.current = None
            self.phase = "seed-debug"
            self.debug_target = candidate
            self._decide(candidate, None, accepted=False, role="seed", why=f"{outcome(result)}; debug it")
        else:
            self.finished = True
            self._decide(candidate, None, accepted=False, role="seed", why=f"{outcome(result)}; nothing to debug with")

    def _unusable(self, candidate: Candidate, asked: dict[str, Any]) -> str | None:
        if candidate.meta.get("no_child"):
            return f"no usable reply ({candidate.meta.get('reply_problem', 'unreadable')})"
        if self._llm_failed(candidate, asked):
            return f"the LLM was unavailable; {candidate.operator} made this child instead"
        return None

    def _told_generation(self, candidate: Candidate, result: EvalResult, asked: dict[str, Any]) -> None:
        attempt = int(asked.get("attempt", 0))
        unusable = self._unusable(candidate, asked)
        if unusable is None and result.ok:
            self.round_correct.append((candidate, result))
            self.first_correct = self.first_correct or candidate.id
            self._decide(candidate, asked, accepted=True, runtime_ms=self.runtime(result),
                         why=f"{outcome(result)} after {attempt} debug step(s)")
            self._chain_ended()
            return
        can_debug = LLM_REPAIR in self.operators and attempt < self.debug_attempts
        if unusable is not None:
            target = self._pending_target(asked)
            can_debug = can_debug and target is not None
            why = f"{unusable}: {result.message[:300]}"
        else:
            target = candidate
            why = outcome(result)
        if can_debug and target is not None:
            self.repairs_queued.append((target, {"chain": asked["chain"], "attempt": attempt + 1}))
            self.debug_total += 1
            self._decide(candidate, asked, accepted=False, why=why, next="debug")
            self._targets[target.id] = target
            return
        self.round_failures.append(why[:200])
        self._decide(candidate, asked, accepted=False, why=why, next="chain ends")
        self._chain_ended()

    def _pending_target(self, asked: dict[str, Any]) -> Candidate | None:
        return self._targets.get(asked.get("repairs", ""))

    def _chain_ended(self) -> None:
        self.open_chains -= 1
        if self.open_chains > 0 or self.to_generate > 0 or self.repairs_queued:
            return
        self.round += 1
        if self.round_correct:
            chosen = min(self.round_correct, key=lambda cr: self.runtime(cr[1]) or float("inf"))
            self._become(*chosen)
            self.phase = "optimize"
            self.notes = []
            return
        self.to_generate = self.samples  # nothing correct: generate again, told what went wrong
        self.notes = [f"An earlier generated kernel failed: {f}" for f in self.round_failures[-3:]]
        self.round_failures = []

    def _become(self, candidate: Candidate, result: EvalResult) -> None:
        self.current = (candidate, result)
        ms = self.runtime(result)
        if self.best is None or (ms is not None and ms < (self.runtime(self.best[1]) or float("inf"))):
            self.best = (candidate, result)

    def _told_step(self, candidate: Candidate, result: EvalResult, asked: dict[str, Any]) -> None:
        self.waiting = False
        if candidate.meta.get("feedback") and self.first_feedback_step is None:
            self.first_feedback_step = int(asked.get("step", 0))
        feedback = candidate.meta.get("feedback")
        unusable = self._unusable(candidate, asked)
        debugging = asked["phase"] == "debug"
        if debugging:
            self.debug_used += 1
            self.debug_total += 1
        if unusable is None and result.ok:
            self._progress(candidate, result, asked, feedback)
            return
        left = LLM_REPAIR in self.operators and self.debug_used < self.debug_attempts
        why = f"{unusable}: {result.message[:300]}" if unusable else outcome(result)
        if unusable is not None:
            if debugging and left:  # the same fault still waits for its fix
                self._decide(candidate, asked, accepted=False, why=why, next="debug", feedback=feedback)
                self.notes = [f"Your previous reply could not be used: {result.message[:300]}"]
                return
            if debugging:
                self._revert(candidate, asked, why, feedback)
                return
            self.steps += 1
            self.since_best += 1
            self.notes = [f"Your previous reply could not be used: {result.message[:300]}"]
            self._decide(candidate, asked, accepted=False, why=why, next="optimize", feedback=feedback)
            self._check_end()
            return
        if not debugging:
            self.debug_used = 0
            left = LLM_REPAIR in self.operators and self.debug_attempts > 0
        if left:
            self.debug_target = candidate
            self.notes = []
            self._decide(candidate, asked, accepted=False, why=why, next="debug", feedback=feedback)
            return
        self._revert(candidate, asked, why, feedback)

    def _revert(self, candidate: Candidate, asked: dict[str, Any], why: str, feedback: Any) -> None:
        """Debugging ran out: the evolving kernel stays where it was (a seed that never passed: the loop ends)."""
        self.debug_target = None
        self.debug_used = 0
        if self.current is None:
            self.finished = True
            self._decide(candidate, asked, accepted=False, why=f"{why}; debugging ran out", next="end")
            return
        self.steps += 1
        self.since_best += 1
        self.notes = [f"A rewrite failed verification and could not be repaired ({why[:200]}); try another idea."]
        self._decide(candidate, asked, accepted=False, feedback=feedback, next="optimize",
                     why=f"{why}; debugging ran out, back to {self.current[0].id}")
        self._check_end()

    def _progress(self, candidate: Candidate, result: EvalResult, asked: dict[str, Any], feedback: Any) -> None:
        self.debug_target = None
        self.debug_used = 0
        self.notes = []
        ms = self.runtime(result)
        best_ms = self.runtime(self.best[1]) if self.best else None
        from_ms = self.runtime(self.current[1]) if self.current else None
        better = best_ms is None or (ms is not None and ms < best_ms)
        takes = self.advance == "correct" or from_ms is None or (ms is not None and ms < from_ms)
        if self.current is None:  # a debugged seed: the first kernel
            takes = True
        else:
            self.steps += 1
        if takes:
            self.current = (candidate, result)
        if better:
            self.best = (candidate, result)
            self.since_best = 0
        else:
            self.since_best += 1
        why = f"{outcome(result)}" + (", the fastest so far" if better else f", not faster than {fmt_ms(best_ms)}")
        back = (self.patience and self.since_best >= self.patience and self.best is not None
                and self.current is not None and self.current[0].id != self.best[0].id)
        if back:
            assert self.best is not None
            self.current = self.best
            self.since_best = 0
            why += f"; {self.patience} steps without a new best: back to the fastest kernel"
        self.phase = "optimize"
        self._decide(candidate, asked, accepted=takes and not back, best=better, runtime_ms=ms, why=why,
                     feedback=feedback, next="optimize")
        self._check_end()

    def _check_end(self) -> None:
        if self.steps_limit and self.steps >= self.steps_limit:
            self.finished = True

    def summary(self) -> dict[str, Any]:
        return {"strategy": self.name, "from_seed": self.from_seed, "rounds": self.round,
                "generations": self.generations, "first_correct": self.first_correct,
                "debug_attempts": self.debug_total, "optimize_steps": self.steps,
                "first_feedback_step": self.first_feedback_step,
                "best": self.best[0].id if self.best else None,
                "best_ms": self.runtime(self.best[1]) if self.best else None, "finished": self.finished}
