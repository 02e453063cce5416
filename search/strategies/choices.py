"""What a categorical choice does to the time, learned from configs one flip apart: nothing, or a lot.

Template spaces hold choices that matter only on some paths (the fp32 GEMM reads PRECISION only when SPLIT is
none; the bf16 GEMM reads SUBTILE only when TMA is on) and choices that change the kernel's path and with it the
time of every tile size alike (an operand split in three MMAs against one in six). A local walk that flips them
at random pays a whole evaluation to learn each again. Two configs that differ in one categorical dimension
``d`` tell what flipping ``d`` does; it is remembered for the same values of the other categorical choices (the
path is chosen by those, not by tile sizes):
- the same time (within ``tolerance``, below the spread of repeated measurements of one kernel): ``d`` is inert
  there, and a config that differs from one already proposed only in inert choices is that config again;
- slower by more than ``margin``: the walk does not flip ``d`` that way again (the sampler still may); a walk
  flips ``d`` together with a tile size only once the flip alone was timed and was not slower (or did not fit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from evoforge.search.strategies.space import ParamSpace

Context = tuple[int, tuple[int, ...]]  # (dimension, the other categorical dimensions' values)


class ChoiceEffects:
    def __init__(self, space: ParamSpace, *, tolerance: float = 0.002, margin: float = 0.05) -> None:
        self.space = space
        self.tolerance = tolerance
        self.margin = margin
        self._categorical = [d for d in range(space.dims) if not space.ordinal[d] and space.sizes[d] > 1]
        self._inert: set[Context] = set()
        self._log_ratio: dict[tuple[Context, int, int], list[float]] = {}  # (context, from, to) -> log(t_to/t_from)

    def _context(self, idx: Sequence[int], d: int) -> Context:
        """The other categorical values, inert ones set to their first: one path, one context."""
        canon = self.canonical(idx, skip=d)
        return d, tuple(canon[c] for c in self._categorical if c != d)

    def observe(self, idx: Sequence[int], runtime_ms: float, timed: Mapping[tuple[int, ...], float | None]) -> None:
        """Learn from ``idx``'s time against every timed config one categorical flip away."""
        for d in self._categorical:
            for v in range(self.space.sizes[d]):
                if v == idx[d]:
                    continue
                other = timed.get((*idx[:d], v, *idx[d + 1:]))
                if other is None:
                    continue
                context = self._context(idx, d)
                if abs(other - runtime_ms) <= self.tolerance * min(other, runtime_ms):
                    self._inert.add(context)
                ratio = math.log(runtime_ms / other)
                self._log_ratio.setdefault((context, v, idx[d]), []).append(ratio)
                self._log_ratio.setdefault((context, idx[d], v), []).append(-ratio)

    def canonical(self, idx: Sequence[int], *, skip: int = -1) -> tuple[int, ...]:
        """``idx`` with every choice that is inert in its context set to its first value."""
        out = list(idx)
        for d in self._categorical:
            if d != skip and (d, tuple(idx[c] for c in self._categorical if c != d)) in self._inert:
                out[d] = 0
        return tuple(out)

    def flip(self, anchor: Sequence[int], d: int, value: int) -> bool | None:
        """What flipping ``d`` of ``anchor`` to ``value`` was seen to do: True when it cost more than ``margin``,
        False when it did not, None when that flip was never timed in this context."""
        seen = self._log_ratio.get((self._context(anchor, d), anchor[d], value))
        if not seen:
            return None
        return sum(seen) / len(seen) > math.log1p(self.margin)

    @property
    def any_inert(self) -> bool:
        return bool(self._inert)
