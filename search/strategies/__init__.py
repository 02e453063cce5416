"""Search strategies behind one registry, like Kernel Tuner's strategies and Optuna's samplers.

``get_strategy(name, *, seed, **opts)`` builds one; every strategy implements ``Strategy`` (``ask(n)``,
``tell(candidate, result)``) and passes the shared conformance suite (tests/search/test_conformance.py).
Common options: ``initial`` (the seed candidates; the first one's ``space`` is what parameter moves search)
and ``operators`` (the operator names a campaign has mutators for).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from evoforge.search.base import Strategy

from evoforge.core import UsageError

# The built-in strategies' names, each written here once: a module registers under its own, and the config's and
# the search benchmark's defaults name theirs through these.
BAYES = "bayes"
CUTEGEN = "cutegen"
DEFAULT = "default"
EVOLUTION = "evolution"
RANDOM = "random"
STAGES = "stages"
BUILTIN = (BAYES, CUTEGEN, DEFAULT, EVOLUTION, RANDOM, STAGES)

_REGISTRY: dict[str, Callable[..., Strategy]] = {}


def register_strategy(name: str) -> Callable[[Callable[..., Strategy]], Callable[..., Strategy]]:
    def deco(factory: Callable[..., Strategy]) -> Callable[..., Strategy]:
        _REGISTRY[name] = factory
        return factory

    return deco


def _load_builtin() -> None:
    from evoforge.search.strategies import (  # noqa: F401  (registration)
        bayes,
        cutegen,
        default,
        evolution,
        random_search,
        stages,
    )


def strategy_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get_strategy(name: str, *, seed: int, **opts: Any) -> Strategy:
    """A strategy by registered name; an unknown name or option is a UsageError naming it."""
    _load_builtin()
    if name not in _REGISTRY:
        raise UsageError(f"--strategy {name}: unknown strategy (choose from {', '.join(sorted(_REGISTRY))})")
    try:
        return _REGISTRY[name](seed=seed, **opts)
    except TypeError as exc:
        raise UsageError(f"--strategy {name}: {exc}") from None


def strategy_accepts(name: str, option: str) -> bool:
    """Whether the strategy registered as ``name`` takes the keyword option ``option`` (the campaign gives the
    knowledge base's hints, ``unsafe`` and ``moves_together``, only to a strategy that reads them)."""
    _load_builtin()
    factory = _REGISTRY.get(name)
    if factory is None:
        return False
    try:
        return option in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


__all__ = ["get_strategy", "register_strategy", "strategy_accepts", "strategy_names"]
