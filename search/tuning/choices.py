"""What a categorical choice does to the time, learned from configs one flip apart: nothing, or a lot.

Template spaces hold choices that matter only on some paths (the fp32 GEMM reads PRECISION only when SPLIT is
none; the bf16 GEMM reads SUBTILE only when TMA is on) and choices that change the kernel's path and with it the
time of every tile size alike (an operand split in three MMAs against one in six). A local walk that flips them
at random pays a whole evaluation to learn each again. Two configs timed at the same tile sizes on different
categorical paths tell what moving between those paths does (the path is chosen by the categorical values, not
by tile sizes):
- one categorical dimension ``d`` apart and the same time (within ``tolerance``, below the spread of repeated
  measurements of one kernel): ``d`` is inert there, and a config that differs from one already proposed only in
  inert choices is that config again (its path is the same path);
- slower by more than ``margin``: the tuner does not move onto that path from the faster one again; a walk enters
  a path together with a tile change only once the path alone was timed and was not slower (or did not fit).
A path is read whole at its destination: from the bf16 split (which reads no PRECISION) to SPLIT none is one move
per PRECISION it lands on, not one per PRECISION the bf16 config happened to carry.
A move never timed whose change contains one seen to cost time in another context, in the same direction (from
the bf16 split to the tf32 split, timed with one PRECISION), is taken to cost time too (``compose``): on the
recorded fp32 GEMM the walk otherwise paid once more for every PRECISION the slower split can carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from evoforge.search.strategies.space import ParamSpace

Context = tuple[int, tuple[int, ...]]  # (dimension, the other categorical dimensions' values)


class ChoiceEffects:
    def __init__(self, space: ParamSpace, *, tolerance: float = 0.002, margin: float = 0.05,
                 compose: bool = True) -> None:
        self.compose = compose
        self.space = space
        self.tolerance = tolerance
        self.margin = margin
        self._categorical = [d for d in range(space.dims) if not space.ordinal[d] and space.sizes[d] > 1]
        self._ordinal = [d for d in range(space.dims) if space.ordinal[d]]
        self._inert: set[Context] = set()
        # Configs timed at the same sizes on different paths: (from, to, log(t_to / t_from)). Kept as configs, not
        # as paths, because what a path is changes as inert choices are learned.
        self._pairs: list[tuple[tuple[int, ...], tuple[int, ...], float]] = []
        self._paths: dict[tuple[int, ...], tuple[int, ...]] = {}
        # The pairs' log ratios by the two paths they join (the lesser path first, each ratio from it to the other,
        # in the order they were timed: the sums ``ratio`` takes are the same, to the bit, as over the list), read by
        # ``ratio`` and ``_part_costs`` a thousand times a proposal: rebuilt, like ``_paths``, when a choice is
        # learned inert (which merges paths). A walk's cost per proposal then grows with the paths, not with the
        # pairs (the fp32 GEMM's 300th proposal read 20,000 pairs twice per path pair it weighed: 0.4 s).
        self._by_paths: dict[tuple[tuple[int, ...], tuple[int, ...]], list[float]] | None = {}
        self._means: dict[tuple[tuple[int, ...], tuple[int, ...]], float | None] = {}
        # each entry's largest and smallest ratio, kept with it (``_part_costs`` asks whether any pair cost more)
        self._extremes: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, float]] = {}

    def _context(self, idx: Sequence[int], d: int) -> Context:
        """The other categorical values, inert ones set to their first: one path, one context."""
        canon = self.canonical(idx, skip=d)
        return d, tuple(canon[c] for c in self._categorical if c != d)

    def observe(self, idx: Sequence[int], runtime_ms: float, timed: Mapping[tuple[int, ...], float | None]) -> None:
        """Learn from ``idx``'s time against every timed config at the same sizes on another categorical path."""
        idx = tuple(idx)
        for other, other_ms in timed.items():
            if other_ms is None or other == idx or any(other[d] != idx[d] for d in self._ordinal):
                continue
            ratio = math.log(runtime_ms / other_ms)
            self._pairs.append((other, idx, ratio))
            flipped = [d for d in self._categorical if other[d] != idx[d]]
            if len(flipped) == 1 and abs(other_ms - runtime_ms) <= self.tolerance * min(other_ms, runtime_ms):
                self._inert.add(self._context(idx, flipped[0]))
                self._paths, self._by_paths = {}, None
            elif self._by_paths is not None:
                self._index(other, idx, ratio)

    def _index(self, a: tuple[int, ...], b: tuple[int, ...], ratio: float) -> None:
        pa, pb = self.path(a), self.path(b)
        key, signed = ((pa, pb), ratio) if pa <= pb else ((pb, pa), -ratio)
        self._by_paths.setdefault(key, []).append(signed)  # type: ignore[union-attr]
        high, low = self._extremes.get(key, (signed, signed))
        self._extremes[key] = (max(high, signed), min(low, signed))
        self._means = {}

    def _pairs_by_paths(self) -> dict[tuple[tuple[int, ...], tuple[int, ...]], list[float]]:
        if self._by_paths is None:
            self._by_paths, self._means, self._extremes = {}, {}, {}
            for a, b, ratio in self._pairs:
                self._index(a, b, ratio)
        return self._by_paths

    def canonical(self, idx: Sequence[int], *, skip: int = -1) -> tuple[int, ...]:
        """``idx`` with every choice that is inert in its context set to its first value."""
        out = list(idx)
        for d in self._categorical:
            if d != skip and (d, tuple(idx[c] for c in self._categorical if c != d)) in self._inert:
                out[d] = 0
        return tuple(out)

    def path(self, idx: Sequence[int]) -> tuple[int, ...]:
        """The kernel's path: its categorical values, those inert there set to their first."""
        key = tuple(idx[d] for d in self._categorical)
        if key not in self._paths:
            canon = self.canonical(idx)
            self._paths[key] = tuple(canon[d] for d in self._categorical)
        return self._paths[key]

    def costs(self, anchor: Sequence[int], to: Sequence[int]) -> bool | None:
        """What moving from ``anchor``'s path to ``to``'s was seen to do to the time at equal sizes: True when it
        cost more than ``margin``, False when it did not (or the path is the same), None when never timed.

        The destination's path is read whole: from the bf16 split (which never reads PRECISION) to SPLIT none is a
        different move for each PRECISION it lands on, and each is timed once, not once per PRECISION the walk
        happens to leave behind. A move never timed is True where a part of it was seen to cost (``compose``)."""
        ratio = self.ratio(anchor, to)
        if ratio is not None:
            return ratio > math.log1p(self.margin)
        if self.compose and self._part_costs(self.path(anchor), self.path(to)):
            return True
        return None

    def ratio(self, anchor: Sequence[int], to: Sequence[int]) -> float | None:
        """The mean log ratio of ``to``'s path's time over ``anchor``'s at equal sizes: 0.0 on the same path, None
        when the two paths were never timed at equal sizes."""
        start, end = self.path(anchor), self.path(to)
        if start == end:
            return 0.0
        by_paths = self._pairs_by_paths()
        if (start, end) not in self._means:
            ratios = by_paths.get((start, end) if start <= end else (end, start), [])
            seen = ratios if start <= end else [-r for r in ratios]
            self._means[(start, end)] = sum(seen) / len(seen) if seen else None
        return self._means[(start, end)]

    def _part_costs(self, start: tuple[int, ...], end: tuple[int, ...]) -> bool:
        """Whether a pair of paths timed elsewhere changed some of the values ``start`` -> ``end`` changes, the same
        way, and nothing else, and cost more than ``margin``."""
        moved = {k for k in range(len(start)) if start[k] != end[k]}
        self._pairs_by_paths()
        for (pa, pb), (high, low) in self._extremes.items():
            for x, y, r in ((pa, pb, high), (pb, pa, -low)):
                part = {k for k in range(len(x)) if x[k] != y[k]}
                if (r > math.log1p(self.margin) and part and part <= moved
                        and all(x[k] == start[k] and y[k] == end[k] for k in part)):
                    return True
        return False

    def flip(self, anchor: Sequence[int], d: int, value: int) -> bool | None:
        """``costs`` of flipping ``d`` of ``anchor`` to ``value`` alone."""
        return self.costs(anchor, (*anchor[:d], value, *anchor[d + 1:]))

    def work_changing(self, factor: float) -> set[int]:
        """Categorical dimensions seen to change the time at equal sizes by more than ``factor`` either way."""
        out: set[int] = set()
        for a, b, ratio in self._pairs:
            if abs(ratio) > math.log(factor):
                out.update(d for d in self._categorical if a[d] != b[d])
        return out

    @property
    def any_inert(self) -> bool:
        return bool(self._inert)
