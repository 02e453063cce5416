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
from evoforge.search.strategies.names import BAYES, BUILTIN, CUTEGEN, DEFAULT, EVOLUTION, RANDOM, STAGES

from evoforge.core import UsageError

_REGISTRY: dict[str, Callable[..., Strategy]] = {}
_builtin_loaded = False


def register_strategy(name: str) -> Callable[[Callable[..., Strategy]], Callable[..., Strategy]]:
    """Register a strategy of one's own (a plug-in) under ``name``: ``get_strategy(name, ...)`` then builds it."""
    def deco(factory: Callable[..., Strategy]) -> Callable[..., Strategy]:
        _load_builtin()  # a plug-in registered under a built-in's name replaces it, whenever the built-ins load
        _REGISTRY[name] = factory
        return factory

    return deco


def _load_builtin() -> None:
    """The built-in strategies, by name, imported the first time a strategy is asked for. The members import their
    names from ``names`` and nothing of this registry, so there is no import circle."""
    global _builtin_loaded
    if _builtin_loaded:
        return
    from evoforge.search.strategies.bayes import BayesStrategy
    from evoforge.search.strategies.cutegen import CuTeGenLoop
    from evoforge.search.strategies.default import DefaultStrategy
    from evoforge.search.strategies.evolution import EvolutionStrategy
    from evoforge.search.strategies.random_search import RandomSearch
    from evoforge.search.strategies.stages import StagePipeline

    for factory in (BayesStrategy, CuTeGenLoop, DefaultStrategy, EvolutionStrategy, RandomSearch, StagePipeline):
        _REGISTRY[factory.name] = factory
    _builtin_loaded = True  # only once every member loaded: a failed import is raised again, not hidden


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


__all__ = ["BAYES", "BUILTIN", "CUTEGEN", "DEFAULT", "EVOLUTION", "RANDOM", "STAGES", "get_strategy",
           "register_strategy", "strategy_accepts", "strategy_names"]
