"""The finalists re-timed before a campaign names its best kernel (``--confirm``).

A campaign picks its best kernel as the fastest of many timings, each taken once, in its own candidate process. Where
the device's figures move from one process to the next (on the H200, identical Conv2d-task code read 0.92-1.03x of
one build with where its buffers landed: experiments/results/kernelbench/README.md), the fastest timing is partly
luck: the exported kernel re-times slower than the campaign said, and can be slower than the seed it came from. So
when a task's search is done, its finalists (the ``FINALISTS`` fastest correct candidates, and the seed where it is
correct) are evaluated once more each, in fresh processes, and torch.compile's build is timed again; the best kernel
is the finalist with the fastest re-timing, held to the median of the build's timings. The re-timings are the
evaluation's own (correctness runs included: a finalist that fails its re-check is not exported), go to no strategy
and to no trial of the record, and are kept in the task's study (``CONFIRM_ATTR``).

A campaign with a time budget ends its search early enough for this (``reserve_s``): ``RESERVE`` of the budget, or
more where its tasks' re-timings need more at the campaign's own evaluation time (up to ``MAX_RESERVE``). The
finalists go in order of what the export cannot do without: each task's search best and its seed (``MUST``: the
seed is the input the export must never be slower than) go first for every task, and are made even where the budget
ran out (L2/54 on the H200: a campaign of ten tasks at 3 minutes reserved 18 s, skipped every re-timing, and exported
a variant re-timed at 0.816x torch.compile where its seed, torch.compile's own kernels, re-timed at 1.043x); the
other finalists and torch.compile's re-timing are made while the budget lasts, and the summary counts the ones it
skipped.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from evoforge.core import Candidate, EvalResult, json_safe

#: the fastest correct candidates of a task re-timed (the seed besides, where it is correct and not among them)
FINALISTS = 3
#: the share of a campaign's time budget its search leaves for the re-timings, at the least
RESERVE = 0.1
#: ... and at the most, however many re-timings its tasks need
MAX_RESERVE = 0.5
#: the first finalists of each task (its search best, then its seed where that is correct) re-timed even when the
#: budget has run out: without them the export is the search's luck, and can be slower than its input
MUST = 2
#: the pool's key of a finalist's re-timing (the task's name and the candidate's id beside it)
CONFIRM_JOB = "confirm"
#: the study attribute that holds the task's re-timings
CONFIRM_ATTR = "confirmation"
#: ``--confirm`` values: "auto" (on a device; off on the interpreter, whose times say nothing of a GPU), "on", "off"
CONFIRM_SETTINGS = ("auto", "on", "off")
#: Between the input draws of one re-check and the next (the chain draws from its seed plus offsets below 4e6).
RECHECK_SEED_STRIDE = 10_000_019


def recheck_options(options: dict[str, Any], k: int) -> dict[str, Any]:
    """The chain's options for the ``k``-th re-check of a campaign: its own input draws. The search's evaluations
    meet one new draw each and the others from the task's pool (``ChainOptions.fresh_draws``), so a kernel right on
    a few draws alone (an answer that depends on the values, an accuracy at the edge of the tolerance) can pass
    some of them; its re-check must see draws no evaluation of the search saw: its seed gives it fixed draws and a
    pool of its own (judge/chain.py). (L2/18's bf16 split, once thought such a kernel, was not: the re-timing script
    that called it incorrect lacked the chain's yardstick for a 3-pass split; experiments/benchmarks/split_yardstick.py
    puts its error at 0.43x the chain's bound on both draws it tries.)"""
    return {**options, "seed": int(options.get("seed", 42)) + RECHECK_SEED_STRIDE * (k + 1)}


@dataclass
class Confirmation:
    """One task's re-timings: the finalists still to send, each finalist's re-timing, the build's."""

    finalists: list[Candidate] = field(default_factory=list)
    to_send: list[Candidate] = field(default_factory=list)
    baseline_to_send: bool = False
    retimes: dict[str, EvalResult] = field(default_factory=dict)
    baseline_retimes: list[EvalResult] = field(default_factory=list)
    skipped: int = 0  # re-timings the time budget left no room for

    @property
    def done(self) -> bool:
        return not self.to_send and not self.baseline_to_send

    @property
    def must_left(self) -> int:
        """How many of the first ``MUST`` finalists are still to send (made even once the budget has run out)."""
        sent = len(self.finalists) - len(self.to_send)
        return max(0, min(MUST, len(self.finalists)) - sent)

    def summary(self, chosen: str | None, search_best: str | None) -> dict[str, Any]:
        return json_safe({
            "finalists": [c.id for c in self.finalists],
            "retimed": {cid: {"status": str(r.status), "speedup": r.speedup, "runtime_ms": r.runtime_ms}
                        for cid, r in self.retimes.items()},
            "compile_retimed": [r.speedup for r in self.baseline_retimes if r.ok],
            "skipped": self.skipped, "chosen": chosen, "search_best": search_best,
            "changed": bool(chosen and search_best and chosen != search_best)})

    def to_attr(self, chosen: str | None, search_best: str | None) -> str:
        """The study attribute: the summary, and every re-timing whole (a resume with nothing left to search
        exports by them again)."""
        return json.dumps({**self.summary(chosen, search_best),
                           "results": {cid: json_safe(r.to_dict()) for cid, r in self.retimes.items()},
                           "compile_results": [json_safe(r.to_dict()) for r in self.baseline_retimes]})

    @classmethod
    def from_attr(cls, text: str, history: list[tuple[Candidate, EvalResult]]) -> Confirmation | None:
        """The re-timings a study kept (``to_attr``), their finalists found in the task's restored history; None
        where the attribute is unreadable or names a finalist the history lacks."""
        try:
            data = json.loads(text)
            by_id = {c.id: c for c, _ in history}
            finalists = [by_id[cid] for cid in data["finalists"]]
            return cls(finalists=finalists,
                       retimes={cid: EvalResult.from_dict(r) for cid, r in data.get("results", {}).items()},
                       baseline_retimes=[EvalResult.from_dict(r) for r in data.get("compile_results", [])],
                       skipped=int(data.get("skipped", 0)))
        except (ValueError, KeyError, TypeError):
            return None


def reserve_s(budget_s: float, tasks: int, evaluation_s: float | None, evaluators: int) -> float:
    """The seconds a campaign's search leaves of ``budget_s`` for its re-timings: ``RESERVE`` of it, or the ``MUST``
    re-timings of each of ``tasks`` at ``evaluation_s`` each (the campaign's median evaluation, in wall time) spread
    over its ``evaluators``, whichever is longer; never more than ``MAX_RESERVE`` of the budget."""
    need = MUST * tasks * evaluation_s / max(1, evaluators) if evaluation_s else 0.0
    return min(MAX_RESERVE * budget_s, max(RESERVE * budget_s, need))


def finalists(history: list[tuple[Candidate, EvalResult]], seed: Candidate, k: int = FINALISTS) -> list[Candidate]:
    """The ``k`` fastest correct candidates by their search timing (one per id, none below the physical floor), and
    the seed where it is correct and not among them, in the order they are re-timed: the search's best, the seed,
    then the others fastest first (the first ``MUST`` are re-timed even past the budget). One correct kernel alone
    is re-checked too (on draws of its own: ``recheck_options``)."""
    ok = sorted(((c, r) for c, r in history if r.ok and r.speedup is not None and not r.below_floor
                 and not c.meta.get("no_child")), key=lambda cr: -float(cr[1].speedup or 0.0))
    out: list[Candidate] = []
    for c, _ in ok:
        if c.id not in {f.id for f in out}:
            out.append(c)
        if len(out) == k:
            break
    if any(c.id == seed.id for c, _ in ok) and seed.id not in {f.id for f in out}:
        out.append(next(c for c, _ in ok if c.id == seed.id))
    if seed.id in {f.id for f in out[1:]}:  # second: the input the export must not be slower than
        out.insert(1, out.pop(next(i for i, f in enumerate(out) if f.id == seed.id)))
    return out


def next_retimings(open_: list[tuple[str, Confirmation]], free: int,
                   out_of_time: bool) -> list[tuple[str, Candidate | None]]:
    """The re-timings for ``free`` evaluators now, taken from the tasks' confirmations (task name, finalist; None
    for torch.compile's build): every task's first ``MUST`` finalists before any task's others, those even when the
    budget is ``out_of_time``; the others and the build's while it is not, else counted as skipped."""
    out: list[tuple[str, Candidate | None]] = []
    for name, c in open_:
        while len(out) < free and c.must_left:
            out.append((name, c.to_send.pop(0)))
    for name, c in open_:
        if c.must_left:
            continue  # its first ones wait for an evaluator
        if out_of_time:
            c.skipped += len(c.to_send) + int(c.baseline_to_send)
            c.to_send, c.baseline_to_send = [], False
            continue
        while len(out) < free and c.to_send:
            out.append((name, c.to_send.pop(0)))
        if len(out) < free and c.baseline_to_send:
            c.baseline_to_send = False
            out.append((name, None))
    return out


def chosen(confirmation: Confirmation) -> tuple[Candidate, EvalResult] | None:
    """The re-timed finalist with the fastest correct re-timing (its re-timing as its result, the search's speedup
    kept in ``details``); finalists the budget left no time for are not among them (re-timed and not re-timed
    figures are not compared). None where the search's best was not re-timed (the search's timings choose) or none
    was re-timed correct."""
    if not confirmation.finalists or confirmation.finalists[0].id not in confirmation.retimes:
        return None
    best: tuple[Candidate, EvalResult] | None = None
    for c in confirmation.finalists:
        r = confirmation.retimes.get(c.id)
        if r is None or not r.ok or not r.speedup:
            continue
        if best is None or r.speedup > (best[1].speedup or 0.0):
            best = (c, r)
    return best


def compile_speedup(first: EvalResult | None, retimes: list[EvalResult]) -> float | None:
    """torch.compile's speedup over the reference: the median of its first timing and its re-timings."""
    values = [r.speedup for r in ([first] if first is not None else []) + retimes
              if r is not None and r.ok and r.speedup]
    return statistics.median(values) if values else None


def confirmed_result(result: EvalResult, search: EvalResult | None) -> EvalResult:
    """A finalist's re-timing as its result, with what the search had timed beside it."""
    return replace(result, details={**result.details, "confirmed": True,
                                    "search_speedup": search.speedup if search is not None else None})
