"""A strategy as the user writes it: ``NAME`` or ``NAME:SAMPLER`` (``bayes:cmaes`` is the bayes strategy with
Optuna's CMA-ES sampler). ``evoforge run`` (``--strategy``, ``strategy =`` in a config) and
``evoforge search-bench`` read it through here, so both accept the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evoforge.search.base import Strategy
from evoforge.search.strategies import get_strategy, strategy_names

from evoforge.core import Candidate, UsageError


def parse_strategy(spec: str) -> tuple[str, dict[str, Any]]:
    """``bayes:gp`` is the bayes strategy with the GP sampler; a plain name has no options."""
    name, _, sampler = spec.strip().partition(":")
    return name, ({"sampler": sampler} if sampler else {})


def build_strategy(spec: str, *, seed: int, initial: Sequence[Candidate] = (),
                   operators: Sequence[str] | None = None, flag: str = "--strategy",
                   options: dict[str, Any] | None = None) -> Strategy:
    """The strategy ``spec`` names, with ``options`` (the config's ``strategy_options``) over the spec's own;
    an unknown name, sampler or option is one UsageError line naming ``flag``."""
    name, opts = parse_strategy(spec)
    opts.update(options or {})
    if name not in strategy_names():
        raise UsageError(f"{flag} {spec}: unknown strategy (choose from {', '.join(strategy_names())}; "
                         "bayes:tpe, bayes:gp, bayes:cmaes, bayes:random pick Optuna's sampler)")
    try:
        if operators is not None:
            opts["operators"] = list(operators)
        return get_strategy(name, seed=seed, initial=tuple(initial), **opts)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{flag} {spec}: {e}") from None


def check_strategy(spec: str, *, flag: str = "--strategy", options: dict[str, Any] | None = None) -> None:
    """Fail now, before anything is written, if ``spec`` (with ``options``) names no strategy this install can
    build."""
    build_strategy(spec, seed=0, flag=flag, options=options)
