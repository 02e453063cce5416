"""Every mutation operator, by its one name: the registry the config, the strategies, the bandit and the record share.

An operator's ``name`` is its key here, the ``operator`` its children carry, the arm the bandit credits and the
``operator`` of its trial. A config names operators one by one (``llm-repair``, ``rule:retune``) or by family
(``rule``: every rule operator, ``llm``: every LLM operator); ``params`` is no mutator: the strategies make
parameter moves themselves (Optuna samplers, mutation of a grid point), so it is reserved here and passes through.
``crossover`` (the evolution strategy mixing two parents' values) is a strategy's move too: reserved, never built.
The names themselves live in ``mutators/names.py``, which the operators, this registry and the strategies import.

A new operator is a class with a ``name`` (and ``applicable``/``propose``, see ``mutators.base.Mutator``) and one
``register_operator`` call saying how it is built from ``OperatorSettings``; it is then configurable by name,
credited by the bandit and held to tests/mutators/test_conformance.py without another line anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evoforge.mutators.base import LLMClient, Mutator
from evoforge.mutators.llm_client import LLMConfig
from evoforge.mutators.llm_ops import (
    LLMCrossover,
    LLMGenerate,
    LLMOptimize,
    LLMRepair,
    LLMStageRewrite,
    PromptBuilder,
)
from evoforge.mutators.names import FAMILIES, LLM, PARAMS, RULE, STRATEGY_MOVES
from evoforge.mutators.rules import (
    GroupedOrdering,
    InputPrecision,
    PersistentGrid,
    ReductionForm,
    RetuneLaunch,
)

from evoforge.core import UsageError


@dataclass(frozen=True)
class OperatorSettings:
    """What operators are built from: the target arch, the seed, the ``[llm]`` settings (repair attempts, delayed
    feedback) and, for the LLM family, the client and the prompt builder they share."""

    arch: str
    seed: int = 0
    llm: LLMConfig = field(default_factory=LLMConfig)
    client: LLMClient | None = None
    builder: PromptBuilder | None = None


Factory = Callable[..., Mutator]  # (settings, **options) -> the operator


@dataclass(frozen=True)
class OperatorKind:
    name: str
    family: str
    build: Factory


_REGISTRY: dict[str, OperatorKind] = {}


def register_operator(name: str, *, family: str, build: Factory) -> None:
    """Make ``name`` an operator of ``family`` built by ``build(settings, **options)``."""
    if family not in FAMILIES:
        raise ValueError(f"operator {name}: family must be one of {', '.join(FAMILIES)}, got {family!r}")
    if name in STRATEGY_MOVES or name in FAMILIES:
        raise ValueError(f"operator {name}: the name is reserved")
    _REGISTRY[name] = OperatorKind(name=name, family=family, build=build)


def operator_names(family: str | None = None) -> list[str]:
    """Registered operators in registration order, all of them or one family's."""
    return [k.name for k in _REGISTRY.values() if family is None or k.family == family]


def family_of(name: str) -> str | None:
    """``rule`` or ``llm`` for a registered operator, None for anything else (``params``)."""
    kind = _REGISTRY.get(name)
    return kind.family if kind else None


def expand_operators(names: Iterable[str], *, source: str = "operators") -> list[str]:
    """Config names -> operator names: a family stands for each of its members, ``params`` passes through, and a
    name the registry does not know is a UsageError naming ``source`` and the known names."""
    out: list[str] = []
    for name in names:
        if name == PARAMS or name in _REGISTRY:
            members = [name]
        elif name in FAMILIES:
            members = operator_names(name)
        else:
            known = ", ".join([PARAMS, *FAMILIES, *_REGISTRY])
            raise UsageError(f"{source}: unknown operator {name!r} (known: {known})")
        out.extend(m for m in members if m not in out)
    return out


def build_operators(names: Iterable[str], settings: OperatorSettings,
                    options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Mutator]:
    """The mutators a config's ``operators`` name (``params`` needs none), keyed by their names.

    ``options`` holds keyword arguments per operator name (``{"llm-stage": {"stage": "fusion"}}``).
    """
    wanted = [n for n in expand_operators(names) if n != PARAMS]
    if any(_REGISTRY[n].family == LLM for n in wanted):
        if settings.client is None:
            raise UsageError("operators include LLM operators but no model is set: give --llm-model NAME "
                             "(and --llm-base-url URL), or drop them from operators")
        if settings.builder is None:
            settings = OperatorSettings(arch=settings.arch, seed=settings.seed, llm=settings.llm,
                                        client=settings.client, builder=PromptBuilder())
    out: dict[str, Mutator] = {}
    for name in wanted:
        mutator = _REGISTRY[name].build(settings, **dict((options or {}).get(name, {})))
        if mutator.name != name:
            raise ValueError(f"operator {name}: builds {type(mutator).__name__} named {mutator.name!r}; an "
                             "operator's name is its registry key")
        out[name] = mutator
    return out


# -- the operators evoforge ships ---------------------------------------------------------------------------------
def _builder(cls: type, defaults: Callable[[OperatorSettings], dict[str, Any]]) -> Factory:
    """Build ``cls`` from the settings' defaults, any of them replaced by the operator's own options."""
    def build(settings: OperatorSettings, **options: Any) -> Mutator:
        return cls(**{**defaults(settings), **options})

    return build


for _rule in (RetuneLaunch, ReductionForm, GroupedOrdering, InputPrecision, PersistentGrid):
    register_operator(_rule.name, family=RULE, build=_builder(_rule, lambda s: {"arch": s.arch, "seed": s.seed}))

def _llm(cls: type, **from_settings: Callable[[OperatorSettings], Any]) -> Factory:
    """An LLM operator from the shared client and prompt builder, at the ``[llm]`` temperature set for its name
    (or its own when none is), with ``from_settings`` read from the settings; its own options over all."""
    def defaults(s: OperatorSettings) -> dict[str, Any]:
        out = {"client": s.client, "builder": s.builder, "temperature": s.llm.temperature_of(cls.name)}
        return {**out, **{key: read(s) for key, read in from_settings.items()}}

    return _builder(cls, defaults)


register_operator(LLMStageRewrite.name, family=LLM, build=_llm(LLMStageRewrite, seed=lambda s: s.seed))
register_operator(LLMRepair.name, family=LLM, build=_llm(LLMRepair, max_attempts=lambda s: s.llm.repair_attempts))
register_operator(LLMOptimize.name, family=LLM, build=_llm(
    LLMOptimize, feedback_after=lambda s: s.llm.feedback_after, delay_feedback=lambda s: s.llm.delay_feedback))
register_operator(LLMCrossover.name, family=LLM, build=_llm(
    LLMCrossover, feedback_after=lambda s: s.llm.feedback_after, delay_feedback=lambda s: s.llm.delay_feedback))
register_operator(LLMGenerate.name, family=LLM, build=_llm(LLMGenerate))
