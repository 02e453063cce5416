"""The default parameter tuner of one structure: an Optuna sampler to start, then boundary-seeking local search.

Measured on recorded H200 landscapes (see experiments/results/search/), three generic facts make this fast:
- the fast configs sit together, but moves that only work in pairs (a bigger tile needs more warps; a deeper
  pipeline needs a smaller K step) make one-parameter hill climbing stall: the walk uses every config within
  two ordinal steps of the best found (radius 1 and 2), drawn at random;
- models that ranked those neighbours (ridge regression with pairwise terms, GP expected improvement, Thompson
  sampling) did worse than drawing them at random, so no value model orders the walk; the Optuna sampler,
  told every result, proposes whenever the walk is stuck (the best's neighbourhood is used up);
- resource failures (OutOfResources) mark where the chip is full, and the fastest configs use as much of it as
  fits: once a failure is seen, a failure model (logistic, plus monotonicity in the dimensions it finds
  resource-like) skips neighbours that will not fit, and the walk prefers neighbours next to the learned
  boundary (``boundary=False`` turns that off: 0.54 instead of 0.72-0.8 on matmul_bf16_4096 at budget 30);
- with no failure seen there is no boundary to follow, and a plain walk is weak on a flat landscape: then every
  ``explore_every``-th proposal is the sampler's (softmax_fp16_32768x1024: 0.95 instead of 0.92).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from evoforge.search.strategies.optuna_tuner import OptunaTuner
from evoforge.search.strategies.space import ParamSpace
from evoforge.search.strategies.surrogate import FailureModel, failure_probability


class StructureTuner:
    """Proposes grid points of one ``ParamSpace``; ``tell`` takes runtime_ms, or None for a failure."""

    def __init__(self, *, space: ParamSpace, seed: int, sampler: str = "tpe", n_start: int = 5,
                 anchors: int = 1, fail_threshold: float = 0.5, boundary: bool = True,
                 boundary_threshold: float = 0.7, explore_every: int = 3) -> None:
        self.explore_every = explore_every
        self.space = space
        self.sampler = OptunaTuner(space=space, sampler=sampler, seed=seed,
                                   n_startup_trials=max(n_start, 1) if sampler in ("tpe", "gp") else None)
        self.n_start = n_start
        self.anchors = anchors
        self.fail_threshold = fail_threshold
        self.boundary = boundary
        self.boundary_threshold = boundary_threshold
        self._rng = np.random.default_rng(seed + 7_919)
        self.results: dict[tuple[int, ...], float | None] = {}
        self.pending: set[tuple[int, ...]] = set()
        self.local_moves = 0
        self._failure_model: FailureModel | None = None
        self._pfail_cache: dict[tuple[int, ...], float] = {}

    @property
    def seen(self) -> set[tuple[int, ...]]:
        return self.sampler.seen

    @property
    def exhausted(self) -> bool:
        return self.space.enumerable and len(self.seen) >= self.space.size

    def best(self) -> tuple[tuple[int, ...], float] | None:
        ok = [(i, v) for i, v in self.results.items() if v is not None]
        return min(ok, key=lambda t: t[1]) if ok else None

    def ask(self) -> tuple[int, ...] | None:
        """A config nobody has proposed: a local move when there is an incumbent, else the sampler's choice."""
        if self.exhausted:
            return None
        idx = None
        asked = len(self.results) + len(self.pending)
        explore = (self.explore_every and asked % self.explore_every == 0
                   and not any(v is None for v in self.results.values()))
        if asked >= self.n_start and self.best() is not None and not explore:
            idx = self._local_move()
        if idx is None:
            idx = self.sampler.ask()
        else:
            self.sampler.enqueue(idx)
            self.local_moves += 1
        if idx is not None:
            self.pending.add(idx)
        return idx

    def mark(self, idx: Sequence[int]) -> None:
        """Treat ``idx`` as proposed (it is being evaluated elsewhere) so it is never proposed again."""
        idx = tuple(idx)
        if idx not in self.seen:
            self.sampler.enqueue(idx)
            self.pending.add(idx)

    def tell(self, idx: Sequence[int], runtime_ms: float | None) -> None:
        idx = tuple(idx)
        self.pending.discard(idx)
        if idx in self.results:
            return
        self.results[idx] = runtime_ms
        self.sampler.tell(idx, runtime_ms)
        self._failure_model = None
        self._pfail_cache = {}

    # --- local search --------------------------------------------------------------------------------------
    def _fail_model(self) -> FailureModel:
        if self._failure_model is None:
            xs = list(self.results)
            self._failure_model = FailureModel(self.space).fit(xs, [self.results[x] is None for x in xs])
        return self._failure_model

    def _pfail(self, idx: tuple[int, ...]) -> float:
        if idx not in self._pfail_cache:
            self._pfail_cache[idx] = failure_probability(self._fail_model(), self.results, idx)
        return self._pfail_cache[idx]

    def _local_move(self) -> tuple[int, ...] | None:
        ranked = sorted((v, i) for i, v in self.results.items() if v is not None)
        any_failure = any(v is None for v in self.results.values())
        for _, anchor in ranked[:self.anchors]:
            pool = [n for n in self.space.neighbours(anchor) + self.space.neighbours2(anchor) if n not in self.seen]
            pool = [n for n in pool if self._pfail(n) < self.fail_threshold]
            if self.boundary and any_failure:
                near = [n for n in pool if max((self._pfail(m) for m in self.space.neighbours(n)), default=0.0)
                        >= self.boundary_threshold]
                pool = near or pool
            if pool:
                return pool[int(self._rng.integers(len(pool)))]
        return None
