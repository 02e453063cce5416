"""The mutation protocol: an operator turns parents into one child, given a frozen snapshot of the search."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evoforge.core import Candidate, EvalResult


@dataclass(frozen=True)
class Failure:
    """A recent failed child and the exact message a repair needs."""

    candidate: Candidate
    result: EvalResult


@dataclass(frozen=True)
class MutationContext:
    """Everything an operator may read; never the live archive.

    ``task_source`` is the reference module; ``arch`` the knowledge-base key of the target; ``top`` the best
    correct candidates with their results (best first); ``failures`` recent failures; ``parent_result`` the
    parent's own result (a repair reads its message); ``lineage_correct_steps`` how many consecutive steps the
    parent's lineage has been correct (delayed performance feedback reads it).
    """

    task_name: str
    task_source: str
    arch: str
    top: tuple[tuple[Candidate, EvalResult], ...] = ()
    failures: tuple[Failure, ...] = ()
    parent_result: EvalResult | None = None
    lineage_correct_steps: int = 0
    hardware: dict[str, Any] = field(default_factory=dict)
    knowledge_enabled: bool = True
    seed: int = 0


class MutationError(Exception):
    """The operator could not produce a child (nothing applicable, unparsable reply). The message says why."""


@runtime_checkable
class Mutator(Protocol):
    """``name`` is recorded as the trial's ``operator``. Async, since LLM operators wait on the network."""

    name: str

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool: ...

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate: ...
