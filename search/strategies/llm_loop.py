"""What the two published LLM loops share, as strategies: ``stages`` (Xe-Forge) and ``cutegen`` (CuTeGen).

Both refine one kernel step by step with LLM operators, and each step depends on how the last one ended, so a
loop keeps one proposal (or one round of independent samples) in flight and decides when its result is told.
The campaign stamps each child with its proposal's ``ticket`` and records ``decision(candidate)`` beside the
trial: which step it was, whether the loop took it, and why. A proposal steers its operator through
``Proposal.stage`` and ``Proposal.meta["notes"]`` (what became of the earlier attempts at this step).

A loop runs only where the campaign has its operators; otherwise, and after a loop has finished (``then =
"tune"``), the parameter tuner of the ``default`` strategy takes the proposals (composition, as TPE falls back to
random sampling): the tuner is told every result, so it starts from the fastest kernel the loop found.

Resume: the campaign tells a restored strategy the recorded trials in order, tickets included. A ticket the loop
has not issued yet is issued again by asking the loop for its next proposal, which replays the loop's decisions
exactly (it is deterministic given the results it is told).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evoforge.mutators.names import PARAMS
from evoforge.search.base import Proposal
from evoforge.search.strategies.default import DefaultStrategy
from evoforge.search.strategies.proposals import runtime_of

from evoforge.core import Candidate, EvalResult, UsageError

THEN = ("tune", "stop")


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def outcome(result: EvalResult) -> str:
    """A result in a few words, for a decision's ``why`` and a note to the model."""
    if result.ok:
        return f"correct, {fmt_ms(result.runtime_ms)}"
    message = " ".join(result.message.split())
    return f"{result.status}: {message[:300]}" if message else str(result.status)


class LoopStrategy:
    """The plumbing of a sequential LLM loop; a subclass writes ``_next`` (the next proposal, or None while it
    waits), ``_told`` (what a result does to the loop) and ``summary``."""

    name = "loop"
    needs: tuple[str, ...] = ()  # operators without which the loop cannot run (the tuner then takes over)

    def __init__(self, *, seed: int, initial: Sequence[Candidate] = (), operators: Sequence[str] = (PARAMS,),
                 then: str = "tune", unsafe: Sequence[Mapping[str, Any]] = (),
                 moves_together: Sequence[Sequence[str]] = ()) -> None:
        """``unsafe`` and ``moves_together``: the knowledge base's hints (``DefaultStrategy``), for the tuner."""
        if then not in THEN:
            raise UsageError(f"--strategy {self.name}: then must be one of {', '.join(THEN)}, got {then!r}")
        self.seed = seed
        self.initial = tuple(initial)
        self.operators = tuple(dict.fromkeys(operators))
        self.then = then
        self.tuner = DefaultStrategy(seed=seed, initial=self.initial, operators=(PARAMS,), unsafe=unsafe,
                                     moves_together=moves_together) if PARAMS in self.operators else None
        self.issued = 0
        self.in_flight: dict[str, dict[str, Any]] = {}  # ticket -> what the loop asked for
        self.decisions: dict[str, dict[str, Any]] = {}  # ticket (or candidate id) -> the decision recorded
        self.log: list[dict[str, Any]] = []  # every decision in order
        self.finished = False

    # -- the Strategy protocol -------------------------------------------------------------------------------
    @property
    def runs_loop(self) -> bool:
        return all(op in self.operators for op in self.needs)

    def ask(self, n: int) -> list[Proposal]:
        """The loop's next proposals (none while it waits on a result); the tuner's where the loop cannot run,
        or once it has finished and ``then`` is ``tune``."""
        if self.runs_loop and not self.finished:
            out: list[Proposal] = []
            while len(out) < n:
                proposal = self._issue()
                if proposal is None:
                    break
                out.append(proposal)
            return out
        if self.tuner is None or (self.runs_loop and self.then == "stop"):
            return []
        return self.tuner.ask(n)

    def tell(self, candidate: Candidate, result: EvalResult) -> None:
        if self.tuner is not None and not candidate.meta.get("no_child") \
                and not candidate.meta.get("reference"):
            self.tuner.tell(candidate, result)
        ticket = candidate.meta.get("ticket")
        asked = self.in_flight.pop(ticket, None) if isinstance(ticket, str) else None
        if asked is None and isinstance(ticket, str) and ticket.startswith(f"{self.name}/"):
            asked = self._replay(ticket)
        if not self.runs_loop:
            return
        self._told(candidate, result, asked)

    def decision(self, candidate: Candidate) -> dict[str, Any] | None:
        """What the loop decided about ``candidate`` (recorded beside its trial)."""
        ticket = candidate.meta.get("ticket")
        return self.decisions.get(ticket) if ticket else self.decisions.get(candidate.id)

    # -- for subclasses --------------------------------------------------------------------------------------
    def _next(self) -> tuple[Proposal, dict[str, Any]] | None:
        raise NotImplementedError

    def _told(self, candidate: Candidate, result: EvalResult, asked: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        raise NotImplementedError

    def _decide(self, candidate: Candidate, asked: dict[str, Any] | None, *, accepted: bool, why: str,
                **more: Any) -> dict[str, Any]:
        decision = {"strategy": self.name, **{k: v for k, v in (asked or {}).items() if k != "notes"},
                    "operator": candidate.operator, "accepted": accepted, "why": why, **more}
        key = candidate.meta.get("ticket") or candidate.id
        self.decisions[key] = decision
        self.log.append(decision)
        return decision

    @staticmethod
    def runtime(result: EvalResult) -> float | None:
        return runtime_of(result)

    def _llm_failed(self, candidate: Candidate, asked: dict[str, Any] | None) -> bool:
        """The child is not the asked operator's: the endpoint failed and the campaign fell back to another."""
        return asked is not None and candidate.operator != asked["operator"] and not candidate.meta.get("no_child")

    # -- tickets ---------------------------------------------------------------------------------------------
    def _issue(self) -> Proposal | None:
        made = self._next()
        if made is None:
            return None
        proposal, asked = made
        ticket = f"{self.name}/{self.issued}"
        self.issued += 1
        asked = {**asked, "operator": proposal.operator, "ticket": ticket}
        self.in_flight[ticket] = asked
        meta = {**proposal.meta, "ticket": ticket}
        return Proposal(operator=proposal.operator, parents=proposal.parents, params=proposal.params,
                        stage=proposal.stage, meta=meta)

    def _replay(self, ticket: str) -> dict[str, Any] | None:
        """A restored campaign tells a ticket this loop has not issued: ask the loop again up to it."""
        try:
            number = int(ticket.rsplit("/", 1)[1])
        except ValueError:
            return None
        while self.issued <= number and self.runs_loop and not self.finished:
            if self._issue() is None:
                break
        return self.in_flight.pop(ticket, None)
