"""The two plug-in contracts of mutators/: an operator (``Mutator``) turns parents into one child, given a frozen
snapshot of the search; an ``LLMClient`` answers a list of messages with one ``Completion``.

Every operator is registered by its ``name`` in ``mutators/registry.py`` and passes tests/mutators/
test_conformance.py; every LLM client passes tests/mutators/test_llm_client_conformance.py.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    parent's lineage has been correct (delayed performance feedback reads it). A strategy may steer one proposal:
    ``stage`` names the stage it asked for (``llm-stage`` runs that one), ``notes`` are findings it wants the model
    told (an earlier attempt at the same step was correct but slower, or its reply could not be used).
    ``language`` is the kernel language the task is searched in (``triton`` or ``cute``): what a kernel written
    from the reference alone must be in. ``evaluated`` holds the ids (``Candidate.id``) of every child evaluated or
    under way in this run: an operator that chooses a configuration skips those (the campaign would not evaluate
    them again) and raises ``NothingNew`` when nothing else is left to it.
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
    stage: str = ""
    notes: tuple[str, ...] = ()
    language: str = "triton"
    evaluated: frozenset[str] = frozenset()


class MutationError(Exception):
    """The operator could not produce a child (nothing applicable, unparsable reply). The message says why."""


class NothingNew(MutationError):
    """Every move the operator could make from this parent lands on a configuration already evaluated or under way
    (``MutationContext.evaluated``): no child, and no failure either. The campaign records nothing and spends no
    budget on it; the strategy is told, so another proposal takes its place."""


@runtime_checkable
class Mutator(Protocol):
    """``name`` is the operator's one name: its registry key, the ``operator`` its children carry, the bandit's arm,
    the trial's ``operator``. ``propose`` never returns a parent unchanged (it raises ``MutationError`` instead).
    Async, since LLM operators wait on the network."""

    name: str

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool: ...

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate: ...


Message = dict[str, Any]


@dataclass(frozen=True)
class Completion:
    """One reply: its text, the model that answered, the tokens and money it cost, whether it came from the
    cache (a cached reply costs nothing), and why the model stopped (``finish_reason``: ``stop``, ``length`` when
    the reply was cut at ``max_tokens``; empty where the endpoint does not say)."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached: bool
    latency_s: float
    finish_reason: str = ""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLMError(Exception):
    """An LLM call failed after the retries it was allowed. ``reason`` is one of: ``unreachable``, ``timeout``,
    ``auth``, ``not_found``, ``rate_limited``, ``server_error``, ``bad_request``, ``bad_response``,
    ``unavailable`` (breaker open), ``budget``. The message never holds the API key."""

    def __init__(
        self, message: str, *, reason: str, status_code: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class LLMUnavailable(LLMError):
    """The circuit breaker is open: the endpoint failed repeatedly; no request is sent until the cool-down ends."""


class LLMBudgetExceeded(LLMError):
    """The token or USD budget is spent; no further (uncached) call is made."""


@runtime_checkable
class LLMClient(Protocol):
    """One async method. A failure of the endpoint (unreachable, rate limited past its retries, budget spent) is an
    ``LLMError``, never a reply: the campaign then falls back to non-LLM operators.
    ``opts`` reach the server (``top_p``, ``seed``...) except ``cache_salt``, which only tells two requests with
    the same messages apart."""

    async def complete(self, messages: Sequence[Message], *, model: str | None = None,
                       temperature: float | None = None, max_tokens: int | None = None,
                       **opts: Any) -> Completion: ...
