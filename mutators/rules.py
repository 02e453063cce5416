"""Rule-based operators: children made by moves the knowledge base knows are legal, with no LLM call.

They act on the candidate convention: tunables are ``SPACE`` entries whose values the evaluator injects into
``PARAMS``, and a template marks each structural switch it implements as a SPACE entry (``LOOPED`` for the
reduction form, ``GROUP_M`` for grouped tile ordering, ``PERSISTENT`` for the persistent grid,
``INPUT_PRECISION`` for the fp32 dot precision). A move changes only ``params``, so the child shares the parent's
structure and is cheap to evaluate; every child is checked against the hard rules of the target before it is
returned, so none is spent on a config that cannot compile (a 5-stage 256x256x128 tile, 3 warps).

Randomness is explicit: each operator takes a ``seed`` and draws from ``random.Random`` seeded by that seed, the
context's seed, the parent's id and a per-operator counter, so a run replays exactly.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from evoforge.knowledge.precision import dtype_bytes
from evoforge.mutators.base import MutationContext, MutationError, NothingNew
from evoforge.mutators.names import (
    RULE_GROUPED_ORDERING,
    RULE_INPUT_PRECISION,
    RULE_PERSISTENT,
    RULE_REDUCTION_FORM,
    RULE_RETUNE,
)

from evoforge import knowledge
from evoforge.core import Candidate, EvalResult, declared_space

#: SPACE entries that switch structure; retuning leaves them to the operator that knows what they mean.
STRUCTURAL_SWITCHES = frozenset({"LOOPED", "PERSISTENT", "INPUT_PRECISION"})
GROUP_KEYS = ("GROUP_M", "GROUP_SIZE_M")

#: A candidate change: the params to set, and a short description recorded in the child's meta.
Move = tuple[dict[str, Any], str]


@dataclass(frozen=True)
class _Parent:
    """The parent's space and full parameter values (the module's PARAMS overridden by its own)."""

    candidate: Candidate
    space: dict[str, list[Any]]
    params: dict[str, Any]

    @classmethod
    def of(cls, candidate: Candidate) -> _Parent:
        declared, defaults = declared_space(candidate.source)
        space = candidate.space or declared
        return cls(candidate, space, {**defaults, **candidate.params})


class _RuleOperator:
    """Shared mechanics: seeding, the legality check, and building the child."""

    name = "rule"
    stage = ""

    def __init__(self, *, arch: str | None = None, seed: int = 0, max_tries: int = 64) -> None:
        self.arch = knowledge.resolve_arch(arch) if arch else None
        self.seed = seed
        self.max_tries = max_tries
        self._calls = 0

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool:
        return self._unsupported(_Parent.of(parent)) is None

    def _unsupported(self, parent: _Parent) -> str | None:
        """Why this operator cannot act on ``parent``; None when it can."""
        raise NotImplementedError

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate:
        if not parents:
            raise MutationError(f"{self.name}: no parent given")
        parent = _Parent.of(parents[0])
        reason = self._unsupported(parent)
        if reason:
            raise MutationError(f"{self.name}: {reason}")
        arch = context.arch or self.arch
        if not arch:
            raise MutationError(f"{self.name}: no target arch (context.arch is empty)")
        arch = knowledge.resolve_arch(arch)
        self._calls += 1
        rng = random.Random(self._seed_for(context, parent.candidate))
        checked = evaluated = 0
        for change, note in self._moves(parent, context, arch, rng):
            params = {**parent.params, **change}
            if params == parent.params:
                continue
            child = parent.candidate.with_params(change, parents=(parent.candidate.id,), operator=self.name,
                                                 stage=self.stage, meta={**parent.candidate.meta, "move": note})
            if child.id in context.evaluated:  # its result is known or coming: the campaign would not run it again
                evaluated += 1
                continue
            checked += 1
            if checked > self.max_tries:
                break
            ok, _ = knowledge.is_legal(params, arch, source=parent.candidate.source,
                                       elem_bytes=_elem_bytes(parent.candidate, context))
            if ok:
                return child
        where = f"from {_describe(parent.params, parent.space)} on {arch}"
        if evaluated:
            raise NothingNew(f"{self.name}: no legal move {where} that is not a configuration already evaluated")
        raise MutationError(f"{self.name}: no legal move {where}")

    def _seed_for(self, context: MutationContext, parent: Candidate) -> int:
        key = f"{self.name}:{self.seed}:{context.seed}:{parent.id}:{self._calls}"
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")

    def _moves(self, parent: _Parent, context: MutationContext, arch: str, rng: random.Random) -> Iterator[Move]:
        """Candidate changes, best first: (params to set, a short description)."""
        raise NotImplementedError


def _describe(params: dict[str, Any], space: dict[str, list[Any]]) -> str:
    return "{" + ", ".join(f"{k}={params.get(k)!r}" for k in space) + "}"


def _elem_bytes(candidate: Candidate, context: MutationContext) -> int | None:
    """Operand size for the shared-memory rule: the candidate's declared dtype, else the task's inputs'."""
    if candidate.meta.get("dtype"):
        return dtype_bytes(candidate.meta["dtype"])
    if context.task_source:
        return dtype_bytes(knowledge.infer_task_dtype(context.task_source))
    return None


def _neighbours(values: list[Any], current: Any) -> list[Any]:
    """The values beside ``current`` in SPACE order (the nearest one when current is not listed)."""
    if current in values:
        i = values.index(current)
    else:
        numeric = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if not numeric or not isinstance(current, int | float):
            return list(values[:1])
        i = values.index(min(numeric, key=lambda v: abs(v - current)))
        return [values[i]]
    return [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]


class RetuneLaunch(_RuleOperator):
    """Move one or two launch/tiling parameters to a neighbouring value of their SPACE list.

    Neighbours, not random draws: a small step from a good parent keeps most of what made it good, and the
    hard rules prune the steps that cannot fit (shared memory, warps) before any GPU time is spent.
    """

    name = RULE_RETUNE
    stage = "autotuning"

    def _tunable(self, parent: _Parent) -> list[str]:
        return [k for k, v in parent.space.items() if k not in STRUCTURAL_SWITCHES and len(v) > 1]

    def _unsupported(self, parent: _Parent) -> str | None:
        return None if self._tunable(parent) else "SPACE has no tunable parameter with two or more values"

    def _moves(self, parent: _Parent, context: MutationContext, arch: str, rng: random.Random) -> Iterator[Move]:
        keys = self._tunable(parent)
        singles = [{k: v} for k in keys for v in _neighbours(parent.space[k], parent.params.get(k))]
        pairs = [
            {a: va, b: vb}
            for a, b in itertools.combinations(keys, 2)
            for va in _neighbours(parent.space[a], parent.params.get(a))
            for vb in _neighbours(parent.space[b], parent.params.get(b))
        ]
        rng.shuffle(singles)
        rng.shuffle(pairs)
        first, second = (pairs, singles) if pairs and rng.random() < 0.5 else (singles, pairs)
        for change in [*first, *second]:
            yield change, "retune " + ", ".join(f"{k} {parent.params.get(k)!r}->{v!r}" for k, v in change.items())


class _Switch(_RuleOperator):
    """Set one structural SPACE entry to another of its values."""

    key = ""

    def _unsupported(self, parent: _Parent) -> str | None:
        if len(parent.space.get(self.key, [])) < 2:
            return f"the source declares no {self.key} switch in SPACE"
        return None

    def _targets(self, parent: _Parent, context: MutationContext, arch: str) -> list[Any]:
        current = parent.params.get(self.key)
        return [v for v in parent.space[self.key] if v != current]

    def _moves(self, parent: _Parent, context: MutationContext, arch: str, rng: random.Random) -> Iterator[Move]:
        targets = self._targets(parent, context, arch)
        rng.shuffle(targets)
        for value in targets:
            yield {self.key: value}, f"{self.key} {parent.params.get(self.key)!r}->{value!r}"


class ReductionForm(_Switch):
    """Switch a reduction between its one-pass form (row in registers) and its looped form (chunks of BLOCK).

    One pass reads once but spills when the row outgrows the registers; the looped form reads twice and fits
    any row. Which wins depends on the row length and the device, so the search tries both.
    """

    name = RULE_REDUCTION_FORM
    stage = "algorithmic"
    key = "LOOPED"


class PersistentGrid(_Switch):
    """Switch between one program per tile and a persistent grid (one program per SM looping over tiles)."""

    name = RULE_PERSISTENT
    stage = "persistent_kernel"
    key = "PERSISTENT"


class GroupedOrdering(_RuleOperator):
    """Add grouped tile ordering (GROUP_M > 1) or remove it (GROUP_M = 1, or 0 where the template uses 0)."""

    name = RULE_GROUPED_ORDERING
    stage = "memory_access"

    @staticmethod
    def _key(parent: _Parent) -> str | None:
        return next((k for k in GROUP_KEYS if len(parent.space.get(k, [])) > 1), None)

    def _unsupported(self, parent: _Parent) -> str | None:
        return None if self._key(parent) else "the source declares no GROUP_M in SPACE"

    def _moves(self, parent: _Parent, context: MutationContext, arch: str, rng: random.Random) -> Iterator[Move]:
        key = self._key(parent)
        assert key is not None
        values = parent.space[key]
        current = parent.params.get(key, values[0])
        grouped = [v for v in values if isinstance(v, int) and v > 1]
        flat = [v for v in values if v in (0, 1)]
        if isinstance(current, int) and current > 1:
            targets, verb = flat, "remove"
        else:
            targets, verb = grouped, "add"
        rng.shuffle(targets)
        for value in targets:
            yield {key: value}, f"{verb} grouped ordering: {key} {current!r}->{value!r}"


class InputPrecision(_Switch):
    """Toggle ``input_precision`` of an fp32 ``tl.dot`` among the choices the task's dtype and tolerance allow.

    The knowledge base decides which (``tf32x3`` and ``ieee`` for an fp32 task, none for a 16-bit one, where
    the setting changes nothing): plain TF32 is never offered to a task held to fp32 accuracy.
    """

    name = RULE_INPUT_PRECISION
    stage = "dtype_fix"
    key = "INPUT_PRECISION"

    def _targets(self, parent: _Parent, context: MutationContext, arch: str) -> list[Any]:
        dtype = parent.candidate.meta.get("dtype") or (
            knowledge.infer_task_dtype(context.task_source) if context.task_source else "float32"
        )
        tolerance = parent.candidate.meta.get("fp32_tolerance", "strict")
        allowed = knowledge.allowed_input_precisions(arch, str(dtype), fp32_tolerance=tolerance)
        if not allowed:
            raise MutationError(f"{self.name}: input_precision changes nothing for {dtype} inputs")
        current = parent.params.get(self.key)
        return [v for v in parent.space[self.key] if v in allowed and v != current]
