"""How a grid point of a structure's space becomes a Proposal, and how a told candidate maps back to one."""

from __future__ import annotations

from typing import Any

from evoforge.search.base import Proposal
from evoforge.search.strategies.space import ParamSpace

from evoforge.core import Candidate, EvalResult


def params_proposal(parent: Candidate, space: ParamSpace, idx: tuple[int, ...], *, operator: str = "params",
                    parents: tuple[Candidate, ...] = (), **meta: Any) -> Proposal:
    """``parent`` with the values of grid point ``idx``: the child is ``parent.with_params(params)``."""
    return Proposal(operator=operator, parents=parents or (parent,), params=space.params_of(idx), meta=dict(meta))


def runtime_of(result: EvalResult) -> float | None:
    """The fitness a strategy minimizes: runtime_ms of a correct run; None for any failure."""
    if result.ok and result.runtime_ms is not None and result.runtime_ms > 0:
        return float(result.runtime_ms)
    return None
