"""How a grid point of a structure's space becomes a Proposal, and how a told candidate maps back to one."""

from __future__ import annotations

import enum
from typing import Any

from evoforge.mutators.names import PARAMS
from evoforge.search.base import Proposal
from evoforge.search.strategies.space import ParamSpace

from evoforge.core import Candidate, EvalResult, EvalStatus


def params_proposal(parent: Candidate, space: ParamSpace, idx: tuple[int, ...], *, operator: str = PARAMS,
                    parents: tuple[Candidate, ...] = (), **meta: Any) -> Proposal:
    """``parent`` with the values of grid point ``idx``: the child is ``parent.with_params(params)``."""
    return Proposal(operator=operator, parents=parents or (parent,), params=space.params_of(idx), meta=dict(meta))


def runtime_of(result: EvalResult) -> float | None:
    """The fitness a strategy minimizes: runtime_ms of a correct run; None for any failure."""
    if result.ok and result.runtime_ms is not None and result.runtime_ms > 0:
        return float(result.runtime_ms)
    return None


class FailureKind(enum.StrEnum):
    """What a failure says about the config's values.

    ``resource``: it did not fit or did not build (OutOfResources is a compile error; a hard rule's ``invalid``):
    a size boundary, crossed by growing tiles and stages. ``property``: it ran, and its values make it wrong or
    unusable (``incorrect``, ``rejected``, an impossible time, a crash or a hang): a choice such as a precision
    or a fast path, not a size, so the configs next to it are no likelier to fail for being close. ``refused``: the
    knowledge base refused it before it ran, for a reason that is not a size boundary (its accumulator past the
    register file: more warps fix it); known in advance, so there is nothing to learn: taught as a resource
    boundary it made the walk condemn the 8-warp configs next to a refused 4-warp one (matmul_bf16_4096 at 30
    evaluations: 0.93 -> 0.62). A refusal by size rules only (shared memory) stays ``resource``.
    """

    RESOURCE = "resource"
    PROPERTY = "property"
    REFUSED = "refused"


_PROPERTY_STATUSES = frozenset({EvalStatus.INCORRECT, EvalStatus.REJECTED, EvalStatus.IMPLAUSIBLE, EvalStatus.CRASHED,
                                EvalStatus.TIMEOUT})


def failure_kind(result: EvalResult) -> FailureKind | None:
    """None for a correct, timed run; else the kind of failure its status names."""
    if runtime_of(result) is not None:
        return None
    if result.details.get("refused_by") and not result.details.get("size_boundary"):
        return FailureKind.REFUSED
    return FailureKind.PROPERTY if EvalStatus(result.status) in _PROPERTY_STATUSES else FailureKind.RESOURCE
