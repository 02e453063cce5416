"""Which parameter values make a config compute the wrong answer: causes learned from the configs told.

A resource failure (OutOfResources) marks where the chip is full and grows with tile sizes (``surrogate``). An
incorrect result is another kind of fact: the config ran, and something in its values (a dot precision, an
fp16 accumulator, a fast path that drops a mask) changes what it computes. The config right next to it (the same
tiles, a safe precision) is usually correct, and often the fastest correct one, so a boundary model that pushes
the search away from the failure is pulled the wrong way.

The model here is the small hypothesis space such failures live in: every incorrect config has a cause, one
value or a pair of values it holds (SPLIT=none together with PRECISION=tf32), and a cause is refuted by any
correct config that holds it too. A config's chance of being incorrect is, for the incorrect config that
explains it best, the prior mass of that config's unrefuted causes the candidate also holds; a single value is
the likelier cause (``pair_weight`` < 1). Causes known in advance (the knowledge base: tf32 on an fp32 task)
enter as ``known`` and are never refuted by absence of evidence, only by a correct config that holds them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from evoforge.search.strategies.space import ParamSpace

Literal = tuple[int, int]  # (dimension, value index)
Cause = tuple[Literal, ...]  # one or two literals, sorted


class CauseModel:
    """Fit on incorrect and correct grid points; ``predict(idx)`` is the probability that ``idx`` is incorrect."""

    def __init__(self, space: ParamSpace, *, pair_weight: float = 0.3, known: Iterable[Cause] = ()) -> None:
        self.space = space
        self.pair_weight = pair_weight
        self.known: tuple[Cause, ...] = tuple(tuple(sorted(c)) for c in known)
        self._free = [d for d, n in enumerate(space.sizes) if n > 1]
        self._hypotheses: list[dict[Cause, float]] = []
        self._refuted: set[Cause] = set()

    def _causes(self, idx: Sequence[int]) -> list[Cause]:
        lits = [(d, int(idx[d])) for d in self._free]
        return [(lit,) for lit in lits] + list(itertools.combinations(lits, 2))

    def _weight(self, cause: Cause) -> float:
        return 1.0 if len(cause) == 1 else self.pair_weight

    def fit(self, incorrect: Iterable[Sequence[int]], correct: Iterable[Sequence[int]]) -> CauseModel:
        refuted: set[Cause] = set()
        for idx in correct:
            refuted.update(self._causes(idx))
        self._refuted = refuted
        self._hypotheses = []
        for idx in incorrect:
            live = {c: self._weight(c) for c in self._causes(idx) if c not in refuted}
            if live:  # else: a cause of three or more values, or a flaky result; it explains nothing beyond itself
                self._hypotheses.append(live)
        for cause in self.known:
            if cause not in refuted:
                self._hypotheses.append({cause: 1.0})
        return self

    @property
    def active(self) -> bool:
        """Whether anything has been learned (or is known) at all: no incorrect result, no prediction."""
        return bool(self._hypotheses)

    def predict(self, idx: Sequence[int]) -> float:
        if not self._hypotheses:
            return 0.0
        held = set(self._causes(idx))
        best = 0.0
        for live in self._hypotheses:
            total = sum(live.values())
            best = max(best, sum(w for c, w in live.items() if c in held) / total)
            if best >= 1.0:
                break
        return best

    def suspects(self, idx: Sequence[int]) -> list[int]:
        """The dimensions of ``idx`` that hold an unrefuted cause: what a repair should change."""
        held = set(self._causes(idx))
        dims: set[int] = set()
        for live in self._hypotheses:
            for cause in live:
                if cause in held:
                    dims.update(d for d, _ in cause)
        return sorted(dims)
