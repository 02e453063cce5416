"""Why a task of a campaign stops before its budget, in one line a user can act on; and what the seed's SPACE
has covered (``coverage``), which is when a campaign with only parameter moves has nothing new to try.

The campaign decides when to ask (``Campaign._stop``, ``_stop_out_of_memory``, ``stop_reason``); these functions
say what is true and what going on would need. Nothing here changes the campaign's state."""

from __future__ import annotations

import functools
import itertools
import json
from collections import Counter
from typing import Any

from evoforge.config import CampaignConfig
from evoforge.mutators.names import LLM, PARAMS
from evoforge.mutators.registry import family_of
from evoforge.task_state import TaskState

#: The most configurations of a seed's SPACE a task that stops early counts through (``coverage``; the hard rules
#: take about half a millisecond a configuration).
COUNTABLE_SPACE = 10_000

#: Evaluations of one task the judge itself runs out of device memory on, its first among them, before the task
#: stops (one may be a neighbour's evaluation holding the memory for a moment; two say the task does not fit).
JUDGE_OOM_STOP = 2


def config_key(params: dict[str, Any], space: dict[str, list[Any]]) -> str:
    return json.dumps([params.get(name) for name in space], default=str)


@functools.lru_cache(maxsize=64)
def legal_configs(source: str, space_json: str, arch: str, knowledge_on: bool) -> frozenset[str] | None:
    """The configs of a SPACE (``config_key``) its hard rules allow on ``arch`` (all of them with the knowledge
    base off); None for a SPACE with nothing to tune or too large to count (``COUNTABLE_SPACE``)."""
    import math

    from evoforge import knowledge

    space = json.loads(space_json)
    if not any(len(v) > 1 for v in space.values()) or math.prod(len(v) for v in space.values()) > COUNTABLE_SPACE:
        return None
    configs = (knowledge.legal_configs(space, arch, source=source) if knowledge_on
               else [dict(zip(space, values, strict=True)) for values in itertools.product(*space.values())])
    return frozenset(config_key(c, space) for c in configs)


def coverage(state: TaskState, config: CampaignConfig) -> tuple[int, int] | None:
    """How many distinct configs of the seed's SPACE were evaluated, of how many its hard rules allow (every one
    with the knowledge base off): what a task that stops for want of proposals has covered. None where the SPACE
    is too large to count (``COUNTABLE_SPACE``)."""
    from evoforge.core import declared_space

    seed = state.seed
    declared, defaults = declared_space(seed.source)
    space = seed.space or declared
    legal = legal_configs(seed.source, json.dumps(space, default=str), config.arch, config.knowledge)
    if legal is None:
        return None
    done = {config_key({**defaults, **c.params}, space) for c, _ in state.history
            if not c.meta.get("no_child") and c.structure_id == seed.structure_id}
    return len(done & legal), len(legal)


def covered(state: TaskState, config: CampaignConfig, operators: list[str]) -> bool:
    """Whether nothing an operator of this campaign can make is new: no LLM operator (the rule operators only set
    parameters), one structure evaluated, and every legal config of its SPACE evaluated."""
    if any(family_of(op) == LLM for op in operators) or any(
            c.structure_id != state.seed.structure_id for c, _ in state.history if not c.meta.get("no_child")):
        return False
    done = coverage(state, config)
    return done is not None and done[0] >= done[1]


def nothing_to_propose(state: TaskState, config: CampaignConfig, operators: list[str]) -> str:
    """Why a task whose strategy has nothing left to propose stopped: what was tried and what going on would
    need (a strategy told to stop after its loop says so instead)."""
    tried = ", ".join(f"{op} {n}" for op, n in Counter(c.operator for c, _ in state.history).items())
    strategy = state.strategy
    if getattr(strategy, "finished", False) and getattr(strategy, "then", "") == "stop":
        return (f"the {config.strategy} strategy finished its loop after {state.evaluations} of "
                f"{config.budget_evals} evaluations (tried {tried or 'nothing'}) and was told to stop there; "
                "going on needs --strategy-option then=tune (the parameter tuner takes the rest of the budget) or "
                "more of its steps (--strategy-option steps=N)")
    ops = [op for op in operators if family_of(op) != LLM]
    space = state.seed.space
    dims = "x".join(str(len(v)) for v in space.values())
    done = coverage(state, config)
    legal = "legal " if config.knowledge else ""
    what = "nothing left to try"
    needs = []
    if not any(len(v) > 1 for v in space.values()):
        needs.append("a SPACE in the seed (SPACE/PARAMS, or launch constants written as literals that can be "
                     "lifted)")
    elif done is not None and done[0] >= done[1]:
        what = (f"the {legal}space of {done[1]} configurations is covered: {done[0]} distinct "
                f"configurations evaluated of {done[1]} {legal}ones")
        needs.append(f"a larger SPACE in the seed (its {dims} hold {done[1]} {legal}configurations, each "
                     "evaluated)")
    elif done is not None:
        what = f"nothing left to try: {done[0]} distinct configurations evaluated of {done[1]} {legal}ones"
        if PARAMS not in config.operators:
            needs.append(f"params in --operators (the tuner proposes the {done[1] - done[0]} {legal}"
                         "configurations the operators did not reach)")
    if not any(family_of(op) == LLM for op in operators):
        needs.append("an LLM endpoint (--llm-model NAME --llm-base-url URL)")
    n = state.repeats_skipped
    repeats = f", {n} proposal{'s' if n != 1 else ''} repeated a configuration already evaluated" if n else ""
    return (f"the {config.strategy} strategy had no new candidate to propose after {state.evaluations} of "
            f"{config.budget_evals} evaluations: {what} (tried {tried or 'nothing'}{repeats}; operators "
            f"{', '.join(config.operators)}{' (none applies to the seed)' if not ops else ''}); going on needs "
            f"{' or '.join(needs) or 'other operators'}")


def judge_out_of_memory(state: TaskState, input_bytes: int) -> str:
    """Why a task stopped whose evaluations the judge could not hold in the device's memory (its inputs, the
    reference's outputs, the comparison, beside the candidate's process): every further child would fail the same
    way and be recorded as if it were the child's fault."""
    gib = input_bytes / 2**30
    size = f"its inputs are {gib:.1f} GiB; " if gib >= 0.05 else ""
    return (f"the judge ran out of the device's memory on {state.judge_out_of_memory} evaluations of this task "
            f"({size}the judge holds several times that beside the candidate's process): going on needs a smaller "
            "shape (--set), one evaluator per device (--evaluators-per-device 1), or a device with more memory")


def out_of_time(state: TaskState, config: CampaignConfig) -> str:
    return (f"stopped after {state.evaluations} of {config.budget_evals} evaluations: the time budget "
            f"({config.budget_minutes:g} min) ran out")
