"""The search protocol: a strategy proposes, never evaluates (like Optuna's sampler)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evoforge.core import Candidate, EvalResult


@dataclass(frozen=True)
class Proposal:
    """What to evaluate next: an operator applied to parents, or exact parameter values for a structure.

    ``operator`` names a mutator (``params``, ``rule:...``, ``llm-stage``, ``llm-repair``, ``crossover``...).
    When ``params`` is set the child is ``parents[0].with_params(params)`` and no mutator is needed.
    """

    operator: str
    parents: tuple[Candidate, ...] = ()
    params: dict[str, Any] | None = None
    stage: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Strategy(Protocol):
    """``ask`` returns up to ``n`` proposals without evaluating anything; ``tell`` feeds one result back.

    Results may arrive in any order and ``ask`` may be called again before earlier proposals are told
    (an asynchronous pool never waits for a generation).
    """

    name: str

    def ask(self, n: int) -> list[Proposal]: ...

    def tell(self, candidate: Candidate, result: EvalResult) -> None: ...
