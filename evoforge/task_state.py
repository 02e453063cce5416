"""What a campaign knows about one task while it runs (``TaskState``): its strategy, seed, every evaluated child, and
the counts its stopping rules (``evoforge/stopping.py``) read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evoforge import confirm
from evoforge.core import Candidate, EvalResult
from evoforge.search.base import Strategy
from evoforge.task import Task


@dataclass
class TaskState:
    """What the campaign knows about one task: every evaluated child, in order."""

    task: Task
    strategy: Strategy
    seed: Candidate
    history: list[tuple[Candidate, EvalResult]] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    correct_steps: dict[str, int] = field(default_factory=dict)  # candidate id -> correct steps in its lineage
    results: dict[str, EvalResult] = field(default_factory=dict)  # candidate id -> its evaluation (no no-child)
    proposals: int = 0  # children asked of operators so far (each gets its own context seed)
    in_flight: int = 0
    first_correct_at: int | None = None
    illegal_skipped: int = 0  # parameter proposals outside the knowledge base's legal space
    starts: list[Candidate] = field(default_factory=list)  # knowledge starts still to send (after the seed)
    submitted: set[str] = field(default_factory=set)  # ids of children sent to be evaluated (or served) this run
    repeats_skipped: int = 0  # children identical to one evaluated or under way, not evaluated again
    repeats_waiting: dict[str, list[Candidate]] = field(default_factory=dict)  # id under way -> its repeats, untold
    judge_out_of_memory: int = 0  # evaluations the judge itself could not hold in the device's memory
    baseline: EvalResult | None = None  # torch.compile's default build of the reference, timed (compile_baseline)
    confirmation: confirm.Confirmation | None = None  # the finalists' re-timings (evoforge/confirm.py)

    @property
    def compile_speedup(self) -> float | None:
        """torch.compile's speedup over the reference, where its baseline was timed (the median with its
        re-timings, where the finalists were re-timed)."""
        b = self.baseline
        if b is None or not b.ok or not b.speedup:
            return None
        return confirm.compile_speedup(b, self.confirmation.baseline_retimes if self.confirmation else [])

    def vs_compile(self, result: EvalResult | None) -> float | None:
        """A correct result's speed over torch.compile's build: its speedup over the reference divided by
        torch.compile's, each timed against the reference in its own evaluation (so a drift of the device's clocks
        between the two cancels)."""
        if result is None or not result.ok or not result.speedup or not self.compile_speedup:
            return None
        return result.speedup / self.compile_speedup

    @property
    def evaluations(self) -> int:
        return len(self.history)

    @property
    def seed_is_reference(self) -> bool:
        """No kernel to start from: the task's reference stands in, and the first kernel is generated."""
        return bool(self.seed.meta.get("reference"))

    def best(self) -> tuple[Candidate, EvalResult] | None:
        """The fastest correct candidate: among the finalists by their re-timings once those are made
        (``evoforge/confirm.py``), else by the search's timings."""
        if self.confirmation is not None and self.confirmation.done and (
                chosen := confirm.chosen(self.confirmation)) is not None:
            return chosen[0], confirm.confirmed_result(chosen[1], self.results.get(chosen[0].id))
        failed = ({cid for cid, r in self.confirmation.retimes.items() if not r.ok}
                  if self.confirmation is not None else set())
        return self.search_best(exclude=failed)  # a kernel that failed its re-check has no fitness

    def seed_result(self) -> EvalResult | None:
        """The seed's evaluation: its re-timing where it was a finalist, else the search's."""
        retimed = self.confirmation.retimes.get(self.seed.id) if self.confirmation is not None else None
        return retimed if retimed is not None and retimed.ok else self.results.get(self.seed.id)

    def search_best(self, exclude: set[str] | frozenset[str] = frozenset()) -> tuple[Candidate, EvalResult] | None:
        """The fastest correct candidate by the search's own timings (none of ``exclude``)."""
        ok = [(c, r) for c, r in self.history if r.ok and r.speedup is not None and not r.below_floor
              and c.id not in exclude]
        return max(ok, key=lambda cr: cr[1].speedup) if ok else None

    def top(self, k: int = 4) -> tuple[tuple[Candidate, EvalResult], ...]:
        ok = sorted(((c, r) for c, r in self.history if r.ok and r.speedup is not None),
                    key=lambda cr: -cr[1].speedup)
        seen, out = set(), []
        for c, r in ok:  # diverse: one per structure
            if c.structure_id not in seen:
                seen.add(c.structure_id)
                out.append((c, r))
            if len(out) == k:
                break
        return tuple(out)
