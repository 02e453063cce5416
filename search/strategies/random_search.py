"""Uniform random search over the seed candidate's space: the baseline every figure is compared with."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from evoforge.mutators.names import PARAMS
from evoforge.search.base import Proposal
from evoforge.search.strategies.names import RANDOM
from evoforge.search.strategies.proposals import params_proposal
from evoforge.search.strategies.space import ParamSpace

from evoforge.core import Candidate, EvalResult

_REJECTION_TRIES = 1_000  # for spaces too large to enumerate


class RandomSearch:
    """Draws configs uniformly without replacement; never proposes a config proposed or told before.

    The space searched is that of the first seed in ``initial``, or else of the first candidate told (a
    campaign evaluates its seed first): until then ``ask`` returns nothing.
    """

    name = RANDOM

    def __init__(self, *, seed: int, initial: Sequence[Candidate] = (),
                 operators: Sequence[str] = (PARAMS,)) -> None:
        self._rng = np.random.default_rng(seed)
        self.seen: set[tuple[int, ...]] = set()
        self.base: Candidate | None = None
        self.space = ParamSpace.from_dict({})
        self._pool: list[tuple[int, ...]] | None = None
        if initial:
            self._adopt(initial[0])

    def _adopt(self, base: Candidate) -> None:
        self.base = base
        self.space = ParamSpace.from_dict(base.space)
        self._pool = list(self.space.all_indices()) if self.space.enumerable else None

    def _draw(self) -> tuple[int, ...] | None:
        if not self.space.dims:
            return None
        if self._pool is not None:
            while self._pool:
                j = int(self._rng.integers(len(self._pool)))
                self._pool[j], self._pool[-1] = self._pool[-1], self._pool[j]
                idx = self._pool.pop()
                if idx not in self.seen:
                    return idx
            return None
        for _ in range(_REJECTION_TRIES):
            idx = self.space.random_indices(self._rng)
            if idx not in self.seen:
                return idx
        return None

    def ask(self, n: int) -> list[Proposal]:
        out = []
        for _ in range(max(n, 0)):
            idx = self._draw()
            if idx is None:
                break
            self.seen.add(idx)
            assert self.base is not None
            out.append(params_proposal(self.base, self.space, idx))
        return out

    def tell(self, candidate: Candidate, result: EvalResult) -> None:
        if self.base is None:
            self._adopt(candidate)
        if candidate.structure_id == self.base.structure_id:
            idx = self.space.indices_of(candidate.params)
            if idx is not None:
                self.seen.add(idx)
