"""A small numpy model fitted on a few dozen evaluated configs: which configs will fail to run.

It works in the normalized index space of ``ParamSpace`` so that order (64 < 128 < 256) is what it learns from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from evoforge.search.strategies.space import ParamSpace


class FailureModel:
    """L2-regularized logistic regression of failure on normalized coordinates.

    Resource failures (OutOfResources, too many registers) grow with tile sizes and stages: a linear boundary in
    index space is the right prior, and a neighbour on the far side of it is skipped before it costs a run.
    Fit it on resource failures only: an incorrect result says nothing about size. A categorical choice enters
    one-hot (its order means nothing) and splits the monotone rule by path only where the data say it changes
    what a tile costs.
    """

    def __init__(self, space: ParamSpace, *, l2: float = 0.1, steps: int = 25, monotone: bool = True,
                 resource_weight: float = 0.5, same_choices: bool = True,
                 own_path: Sequence[int] = ()) -> None:
        self.own_path = sorted(set(own_path))
        self._fail_context: list[int] = []  # categorical dims a failure's reach is limited to (set by fit)
        self.same_choices = same_choices
        self.space = space
        self.l2 = l2
        self.monotone = monotone
        self.resource_weight = resource_weight
        self._failed = np.zeros((0, space.dims), dtype=int)
        self._ran = np.zeros((0, space.dims), dtype=int)
        self._resource = np.zeros(0, dtype=bool)
        self.steps = steps
        self._w: np.ndarray | None = None
        self._constant: float | None = 0.0
        self._ordinal = np.array(space.ordinal, dtype=bool)
        self._categorical = [d for d in range(space.dims) if not space.ordinal[d]]
        self._context: list[int] = []

    def _phi(self, idx: Sequence[int]) -> np.ndarray:
        """Ordinal indices scaled to [0, 1]; a categorical dimension one-hot (its order means nothing)."""
        return np.concatenate(([1.0], self.space.normalized(idx)[self._ordinal],
                               *(np.eye(self.space.sizes[d])[idx[d]] for d in self._categorical)))

    def fit(self, xs: Sequence[Sequence[int]], failed: Sequence[bool]) -> FailureModel:
        y = np.asarray(failed, dtype=float)
        if len(y) == 0 or y.min() == y.max():  # nothing to separate: all ran, or none did
            self._constant = float(y[0]) if len(y) else 0.0
            self._w = None
            return self
        self._constant = None
        self._failed = np.array([x for x, f in zip(xs, y, strict=True) if f], dtype=int)
        self._ran = np.array([x for x, f in zip(xs, y, strict=True) if not f], dtype=int)
        phi = np.array([self._phi(x) for x in xs])
        w = np.zeros(phi.shape[1])
        reg = self.l2 * np.eye(len(w))
        reg[0, 0] = 0.0
        for _ in range(self.steps):  # Newton steps
            p = 1.0 / (1.0 + np.exp(-(phi @ w)))
            grad = phi.T @ (p - y) + reg @ w
            hess = phi.T @ (phi * (p * (1 - p))[:, None]) + reg + 1e-9 * np.eye(len(w))
            w -= np.linalg.solve(hess, grad)
        self._w = w
        # Dimensions whose growth makes failure likelier: the resource dimensions. The prior is the hardware's:
        # tile sizes and pipeline stages use more shared memory and registers as their values grow, so only a
        # positive weight counts (on a landscape mirrored to break that prior, 0.67 instead of 0.75).
        weight = np.zeros(self.space.dims)
        weight[self._ordinal] = w[1:1 + int(self._ordinal.sum())]
        self._resource = np.array([self.space.ordinal[d] and weight[d] > self.resource_weight
                                   for d in range(self.space.dims)], dtype=bool)
        self._context = self._choices_that_matter() if self.same_choices else []
        self._fail_context = sorted(set(self._context) | set(self.own_path))
        return self

    def _choices_that_matter(self) -> list[int]:
        """The categorical dimensions that change what a tile costs (a split into hi and lo parts doubles the
        operand tiles): the fewest that tell apart every failed config from a config at least as large in the
        resource dimensions that ran (a greedy hitting set). A choice that never does (a precision the kernel
        reads only on another path) is left out, so failures on one of its values still teach the others."""
        r = self._resource
        if not self._categorical or not r.any() or not len(self._failed) or not len(self._ran):
            return []
        conflicts = []
        for f in self._failed:
            for o in self._ran[np.all(self._ran[:, r] >= f[r], axis=1)]:
                differ = frozenset(d for d in self._categorical if o[d] != f[d])
                if differ:
                    conflicts.append(differ)
        chosen: list[int] = []
        while conflicts:
            d = max(self._categorical, key=lambda d: sum(d in c for c in conflicts))
            chosen.append(d)
            conflicts = [c for c in conflicts if d not in c]
        return chosen

    def predict(self, idx: Sequence[int]) -> float:
        """Probability that ``idx`` fails."""
        if self._w is None:
            return float(self._constant or 0.0)
        if self.monotone and self._resource.any():
            # Resource use only grows with the resource dimensions: at least as large as a config that failed
            # fails; at most as large as one that ran, runs (other dimensions may differ), among configs that
            # agree on the categorical choices seen to change what a tile costs (and, for a failure, on the
            # choices ``own_path`` names: known to change a tile's work, so its cost).
            x = np.asarray(idx)
            r, c = self._resource, self._context
            failed, ran = self._failed, self._ran
            cf = self._fail_context
            if len(failed) and np.any(np.all(failed[:, r] <= x[r], axis=1) & np.all(failed[:, cf] == x[cf], axis=1)):
                return 1.0
            if len(ran) and np.any(np.all(ran[:, r] >= x[r], axis=1) & np.all(ran[:, c] == x[c], axis=1)):
                return 0.0
        return float(1.0 / (1.0 + np.exp(-(self._phi(idx) @ self._w))))

