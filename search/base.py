"""The plug-in contracts of search/: a ``Strategy`` proposes, never evaluates (like Optuna's sampler); a ``Store``
records every evaluation and gives a campaign back (like Optuna's storages).

Every strategy passes tests/search/test_conformance.py; every store passes tests/search/test_store_conformance.py.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evoforge.core import Candidate, EvalResult


@dataclass(frozen=True)
class Proposal:
    """What to evaluate next: an operator applied to parents, or exact parameter values for a structure.

    ``operator`` is a name of ``evoforge.mutators.names``: a registered operator (``rule:...``, ``llm-stage``,
    ``llm-repair``...) or a move the strategy makes itself (``params``, ``crossover``). When ``params`` is set the
    child is ``parents[0].with_params(params)`` and no mutator is needed.
    """

    operator: str
    parents: tuple[Candidate, ...] = ()
    params: dict[str, Any] | None = None
    stage: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


#: The ``EvalResult.details`` key that marks a result told for a proposal that repeated an evaluated configuration.
REPEAT = "repeat"


def is_repeat(result: EvalResult) -> bool:
    """Whether ``result`` was told for a repeat (see ``Strategy``): nothing new was evaluated."""
    return bool(result.details.get(REPEAT))


@runtime_checkable
class Strategy(Protocol):
    """``ask`` returns up to ``n`` proposals without evaluating anything; ``tell`` feeds one result back.

    Results may arrive in any order and ``ask`` may be called again before earlier proposals are told
    (an asynchronous pool never waits for a generation).

    A proposal whose child repeats a configuration already evaluated (or under way) in the run is not evaluated
    again; it is told all the same, with the result of the one it repeats, or, where its operator found no move
    that was not evaluated already, as a no-child, marked either way by ``result.details[REPEAT]`` (``is_repeat``):
    nothing was learned, and it cost no budget, so a strategy proposes something else in its place.
    """

    name: str

    def ask(self, n: int) -> list[Proposal]: ...

    def tell(self, candidate: Candidate, result: EvalResult) -> None: ...


@dataclass(frozen=True)
class StoredTrial:
    """One recorded evaluation as a store gives it back: its number in the task's record, the candidate, the
    result, and the attributes recorded beside them (operator, status, tokens, ``extra_attrs``...)."""

    number: int
    candidate: Candidate
    result: EvalResult
    user_attrs: dict[str, Any]


@runtime_checkable
class Store(Protocol):
    """The record of one campaign: every evaluated candidate with its result, in the order they finished.

    ``save_candidate`` writes a candidate before its evaluation starts (a trial never lacks its candidate);
    ``record`` writes one finished evaluation and returns its number (0, 1, 2... per task), with when it was handed
    to an evaluator and when its result came back (``started_at``, ``finished_at``: epoch seconds); ``load`` gives a task's
    records back in that order, candidates and results equal to what was recorded; a store opened again on the
    same record sees all of it (``--resume``). ``close_interrupted`` finishes what a killed writer left half
    written and says how many; ``study`` makes a task's (empty) record exist.
    """

    def study(self, task_name: str) -> Any: ...

    def save_candidate(self, candidate: Candidate) -> None: ...

    def record(self, task_name: str, candidate: Candidate, result: EvalResult, *,
               extra_attrs: dict[str, Any] | None = None, started_at: float | None = None,
               finished_at: float | None = None) -> int: ...

    def load(self, task_name: str, *, user_keys: Collection[str] | None = None) -> list[StoredTrial]: ...

    def close_interrupted(self) -> int: ...
