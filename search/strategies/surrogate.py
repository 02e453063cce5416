"""A small numpy model fitted on a few dozen evaluated configs: which configs will fail to run.

It works in the normalized index space of ``ParamSpace`` so that order (64 < 128 < 256) is what it learns from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from evoforge.search.strategies.space import ParamSpace


class FailureModel:
    """L2-regularized logistic regression of failure on normalized coordinates.

    Resource failures (OutOfResources, too many registers) grow with tile sizes and stages: a linear boundary in
    index space is the right prior, and a neighbour on the far side of it is skipped before it costs a run.
    """

    def __init__(self, space: ParamSpace, *, l2: float = 0.1, steps: int = 25, monotone: bool = True,
                 resource_weight: float = 0.5) -> None:
        self.space = space
        self.l2 = l2
        self.monotone = monotone
        self.resource_weight = resource_weight
        self._failed: list[np.ndarray] = []
        self._ran: list[np.ndarray] = []
        self._resource = np.zeros(0, dtype=bool)
        self.steps = steps
        self._w: np.ndarray | None = None
        self._constant: float | None = 0.0

    def _phi(self, idx: Sequence[int]) -> np.ndarray:
        return np.concatenate(([1.0], self.space.normalized(idx)))

    def fit(self, xs: Sequence[Sequence[int]], failed: Sequence[bool]) -> FailureModel:
        y = np.asarray(failed, dtype=float)
        if len(y) == 0 or y.min() == y.max():  # nothing to separate: all ran, or none did
            self._constant = float(y[0]) if len(y) else 0.0
            self._w = None
            return self
        self._constant = None
        self._failed = [np.asarray(x) for x, f in zip(xs, y, strict=True) if f]
        self._ran = [np.asarray(x) for x, f in zip(xs, y, strict=True) if not f]
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
        self._resource = np.array([self.space.ordinal[d] and w[1 + d] > self.resource_weight
                                   for d in range(self.space.dims)], dtype=bool)
        return self

    def predict(self, idx: Sequence[int]) -> float:
        """Probability that ``idx`` fails."""
        if self._w is None:
            return float(self._constant or 0.0)
        if self.monotone and self._resource.any():
            # Resource use only grows with the resource dimensions: at least as large as a config that failed
            # fails; at most as large as one that ran, runs (other dimensions may differ).
            x = np.asarray(idx)
            r = self._resource
            if any(np.all(x[r] >= f[r]) for f in self._failed):
                return 1.0
            if any(np.all(x[r] <= o[r]) for o in self._ran):
                return 0.0
        return float(1.0 / (1.0 + np.exp(-(self._phi(idx) @ self._w))))


def failure_probability(model: FailureModel, results: Mapping[tuple[int, ...], float | None],
                        idx: tuple[int, ...]) -> float:
    """Observed where known (1 failed, 0 ran), else the model's estimate."""
    if idx in results:
        return 1.0 if results[idx] is None else 0.0
    return model.predict(idx)
