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
the likelier cause (``pair_weight`` < 1). Causes known in advance (the knowledge base's ``unsafe_values``: plain
tf32 on an fp32 task) enter as ``known``, conjunctions of any size: a config holding one is predicted incorrect
until a correct config that holds it is seen.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from evoforge.search.strategies.space import ParamSpace

Literal = tuple[int, int]  # (dimension, value index)
Cause = tuple[Literal, ...]  # one or two literals, sorted


class CauseModel:
    """Fit on incorrect and correct grid points; ``predict(idx)`` is the probability that ``idx`` is incorrect.

    Prior weight of a cause: 1 for one categorical value, ``ordinal_weight`` for an ordinal one (incorrectness
    lives in choices, rarely in sizes), times ``pair_weight`` for a pair. A cause held by ``k`` incorrect configs
    weighs ``support ** (k - 1)`` more: one cause that explains every incorrect config is a likelier account than
    one pair per config (for independent causes the odds grow geometrically with the configs explained).
    """

    def __init__(self, space: ParamSpace, *, pair_weight: float = 0.3, ordinal_weight: float = 0.2,
                 support: float = 3.0, known: Iterable[Cause] = ()) -> None:
        self.space = space
        self.pair_weight = pair_weight
        self.ordinal_weight = ordinal_weight
        self.support = support
        self.known: tuple[frozenset[Literal], ...] = tuple(frozenset(c) for c in known)
        self._free = [d for d, n in enumerate(space.sizes) if n > 1]
        self._hypotheses: list[dict[Cause, float]] = []
        self._known_live: list[frozenset[Literal]] = list(self.known)

    def _causes(self, idx: Sequence[int]) -> list[Cause]:
        lits = [(d, int(idx[d])) for d in self._free]
        return [(lit,) for lit in lits] + list(itertools.combinations(lits, 2))

    def _prior(self, cause: Cause) -> float:
        weight = 1.0 if len(cause) == 1 else self.pair_weight
        for d, _ in cause:
            weight *= 1.0 if not self.space.ordinal[d] else self.ordinal_weight
        return weight

    def fit(self, incorrect: Iterable[Sequence[int]], correct: Iterable[Sequence[int]]) -> CauseModel:
        correct_list = [tuple(idx) for idx in correct]
        refuted: set[Cause] = set()
        for idx in correct_list:
            refuted.update(self._causes(idx))
        live = [[c for c in self._causes(idx) if c not in refuted] for idx in incorrect]
        support: dict[Cause, int] = {}
        for causes in live:
            for c in causes:
                support[c] = support.get(c, 0) + 1
        # A config with no live cause needs three or more values together, or its result was flaky: it explains
        # nothing beyond itself (and is never proposed again anyway).
        self._hypotheses = [{c: self._prior(c) * self.support ** (support[c] - 1) for c in causes}
                            for causes in live if causes]
        correct_lits = [frozenset((d, int(idx[d])) for d in range(self.space.dims)) for idx in correct_list]
        self._known_live = [k for k in self.known if not any(k <= lits for lits in correct_lits)]
        return self

    @property
    def active(self) -> bool:
        """Whether anything has been learned (or is known) at all: no incorrect result, no prediction."""
        return bool(self._hypotheses or self._known_live)

    def predict(self, idx: Sequence[int]) -> float:
        if self._known_live:
            lits = {(d, int(idx[d])) for d in range(self.space.dims)}
            if any(k <= lits for k in self._known_live):
                return 1.0
        if not self._hypotheses:
            return 0.0
        held = set(self._causes(idx))
        best = 0.0
        for live in self._hypotheses:
            best = max(best, sum(w for c, w in live.items() if c in held) / sum(live.values()))
            if best >= 1.0:
                break
        return best
