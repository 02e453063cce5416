"""The parameter space a candidate declares, seen as a grid of ordinal indices.

Numeric choices (block sizes, warps, stages) are ordered: 64 < 128 < 256. A sampler that sees them as
categories cannot learn that 128 lies between its neighbours, so every numeric parameter is encoded as the
index of its value in the sorted list; only non-numeric choices stay categorical.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ENUMERATE_LIMIT = 200_000  # spaces up to this many configs are enumerated; larger ones are sampled


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def value_key(value: Any) -> str:
    """A hashable, order-independent spelling of one parameter value."""
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class ParamSpace:
    """Names in a fixed order and, for each, its allowed values (sorted when all numeric)."""

    names: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    ordinal: tuple[bool, ...]

    @classmethod
    def from_dict(cls, space: Mapping[str, Sequence[Any]]) -> ParamSpace:
        names, values, ordinal = [], [], []
        for name in sorted(space):
            vals = list(dict.fromkeys(space[name], None)) if all(_hashable(v) for v in space[name]) \
                else list(space[name])
            if not vals:
                continue
            is_ordinal = all(_is_number(v) for v in vals)
            if is_ordinal:
                vals = sorted(vals)
            names.append(name)
            values.append(tuple(vals))
            ordinal.append(is_ordinal)
        return cls(tuple(names), tuple(values), tuple(ordinal))

    @property
    def dims(self) -> int:
        return len(self.names)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.values)

    @property
    def size(self) -> int:
        return math.prod(self.sizes) if self.names else 0

    @property
    def enumerable(self) -> bool:
        return 0 < self.size <= ENUMERATE_LIMIT

    # --- conversions -------------------------------------------------------------------------------------
    def indices_of(self, params: Mapping[str, Any]) -> tuple[int, ...] | None:
        """The grid point of ``params``, or None when a value is missing or not in the space."""
        out = []
        for name, lookup in zip(self.names, self._lookup, strict=True):
            if name not in params:
                return None
            i = lookup.get(_fast_key(params[name]))
            if i is None:
                return None
            out.append(i)
        return tuple(out)

    @property
    def _lookup(self) -> tuple[dict[Any, int], ...]:
        """Per dimension, value -> index, keyed as value_key compares (True is not 1, 1.0 is not 1)."""
        cached = self.__dict__.get("_lookup_cache")
        if cached is None:
            cached = tuple({_fast_key(v): i for i, v in reversed(list(enumerate(vals)))} for vals in self.values)
            object.__setattr__(self, "_lookup_cache", cached)
        return cached

    def params_of(self, idx: Sequence[int]) -> dict[str, Any]:
        return {name: vals[i] for name, vals, i in zip(self.names, self.values, idx, strict=True)}

    def key_of(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """Identity of a config inside this space (values of the space's names only)."""
        return tuple(value_key(params.get(name)) for name in self.names)

    def normalized(self, idx: Sequence[int]) -> np.ndarray:
        """Indices scaled to [0, 1] per dimension (a constant dimension maps to 0.5)."""
        return np.array([(i / (n - 1)) if n > 1 else 0.5 for i, n in zip(idx, self.sizes, strict=True)])

    # --- moves -------------------------------------------------------------------------------------------
    def all_indices(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(n) for n in self.sizes))

    def random_indices(self, rng: np.random.Generator) -> tuple[int, ...]:
        return tuple(int(rng.integers(n)) for n in self.sizes)

    def neighbours(self, idx: Sequence[int]) -> list[tuple[int, ...]]:
        """One step along one dimension: +-1 on an ordinal index, any other value of a categorical one."""
        return [(*idx[:d], j, *idx[d + 1:]) for d in range(self.dims) for j in self.steps(idx, d)]

    def neighbours2(self, idx: Sequence[int]) -> list[tuple[int, ...]]:
        """Two steps along two different dimensions at once (a tile grows while the warps grow with it)."""
        out = []
        for d1 in range(self.dims):
            for n1 in self.steps(idx, d1):
                for d2 in range(d1 + 1, self.dims):
                    for n2 in self.steps(idx, d2):
                        p = list(idx)
                        p[d1], p[d2] = n1, n2
                        out.append(tuple(p))
        return out

    def steps(self, idx: Sequence[int], d: int) -> list[int]:
        """The values one step from ``idx`` along dimension ``d``: +-1 on an ordinal index, any other value of a
        categorical one."""
        i, n = idx[d], self.sizes[d]
        steps = (i - 1, i + 1) if self.ordinal[d] else tuple(j for j in range(n) if j != i)
        return [j for j in steps if 0 <= j < n]

    def distance(self, a: Sequence[int], b: Sequence[int]) -> float:
        """Mean per-dimension distance in [0, 1]: normalized index gap, or 0/1 for a categorical."""
        if not self.names:
            return 0.0
        total = 0.0
        for i, j, gaps in zip(a, b, self.index_gaps, strict=True):
            if gaps is None:
                total += float(i != j)
            elif gaps:
                total += abs(i - j) / gaps
        return total / len(self.names)

    @property
    def index_gaps(self) -> tuple[int | None, ...]:
        """Per dimension, the index gap across it (n - 1; 0 for a single value) on an ordinal one, None on a
        categorical one: an island's trim measures every pair of its members, a resume trims on every result it
        replays, and ``sizes`` is a new tuple on every call."""
        cached = self.__dict__.get("_gaps_cache")
        if cached is None:
            cached = tuple(max(n - 1, 0) if o else None for n, o in zip(self.sizes, self.ordinal, strict=True))
            object.__setattr__(self, "_gaps_cache", cached)
        return cached


def _fast_key(value: Any) -> Any:
    """A dict key equal for two values exactly when their value_key is: type and value for the common scalar
    types, the JSON spelling for anything else."""
    if isinstance(value, bool | int | float | str) or value is None:
        return type(value), value
    return value_key(value)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
