"""Choices by their outcomes: operators by an area-under-the-curve bandit, as OpenTuner's AUCBanditMetaTechnique
does; a tuner's proposal sources by a Beta bandit.

In the AUC bandit each operator keeps a sliding window of recent outcomes (1 when its child beat its parent, else
0); an operator's score is the recency-weighted area under that curve plus an exploration bonus, so an operator
that used to work but stopped is dropped quickly, and one that was never tried is tried first.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np


class AUCBandit:
    def __init__(self, arms: Sequence[str], *, seed: int, window: int = 100, exploration: float = 0.5) -> None:
        self.arms = tuple(dict.fromkeys(arms))
        self.window = window
        self.exploration = exploration
        self._history: deque[tuple[str, bool]] = deque(maxlen=window)
        self._rng = np.random.default_rng(seed)

    def auc(self, arm: str) -> float:
        outcomes = [ok for a, ok in self._history if a == arm]
        n = len(outcomes)
        if not n:
            return 0.0
        return sum((i + 1) * ok for i, ok in enumerate(outcomes)) / (n * (n + 1) / 2)

    def uses(self, arm: str) -> int:
        return sum(a == arm for a, _ in self._history)

    def score(self, arm: str) -> float:
        n = self.uses(arm)
        if n == 0:
            return math.inf
        return self.auc(arm) + self.exploration * math.sqrt(2 * math.log(len(self._history)) / n)

    def select(self, available: Sequence[str] | None = None) -> str:
        arms = [a for a in self.arms if available is None or a in available]
        if not arms:
            raise ValueError("no operator available to select")
        scores = np.array([self.score(a) for a in arms])
        best = np.flatnonzero(scores == scores.max())
        return arms[int(self._rng.choice(best))]

    def update(self, arm: str, success: bool) -> None:
        if arm in self.arms:
            self._history.append((arm, bool(success)))


class BetaBandit:
    """Thompson sampling over arms whose every outcome is a success or not: each arm's chance of success is a
    Beta(1 + successes, 1 + failures) belief, one draw per arm, the highest draw chosen.

    For a choice made a few dozen times in a whole search (which of a tuner's proposal sources to ask next), where
    a window of recent outcomes would be nearly empty: with no outcome yet the arms are drawn evenly, and one that
    keeps succeeding takes over after a handful of results while the other is still tried now and then.
    """

    def __init__(self, arms: Sequence[str], *, seed: int) -> None:
        self.arms = tuple(dict.fromkeys(arms))
        self.outcomes: dict[str, list[int]] = {a: [0, 0] for a in self.arms}  # [successes, failures]
        self._rng = np.random.default_rng(seed)

    def select(self) -> str:
        draws = [self._rng.beta(1 + self.outcomes[a][0], 1 + self.outcomes[a][1]) for a in self.arms]
        return self.arms[int(np.argmax(draws))]

    def update(self, arm: str, success: bool) -> None:
        if arm in self.outcomes:
            self.outcomes[arm][0 if success else 1] += 1
