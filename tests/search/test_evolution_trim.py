"""An island's trim (drop the worst, preferring one that nearly duplicates a better one) measures every pair of its
members on every result told: a resume replays 100k results. It measures them a structure at a time, not a Python
call per pair, and keeps the same members as the pairwise rule."""

from __future__ import annotations

import numpy as np
import pytest
from evoforge.search.strategies.evolution import EvolutionStrategy
from evoforge.search.strategies.space import ParamSpace

from evoforge.core import Candidate, EvalResult, EvalStatus

SOURCES = ['SPACE = {"BLOCK": [16, 32, 64, 128, 256], "warps": [2, 4, 8], "order": ["a", "b"]}\nPARAMS = {}\n',
           'SPACE = {"BLOCK": [16, 32, 64, 128, 256], "warps": [2, 4, 8]}\nPARAMS = {}\nX = 1\n']


def _tell_many(strategy: EvolutionStrategy, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(n):
        source = SOURCES[int(rng.integers(2))]
        params = {"BLOCK": int(rng.choice([16, 32, 64, 128, 256])), "warps": int(rng.choice([2, 4, 8]))}
        if "order" in source:
            params["order"] = str(rng.choice(["a", "b"]))
        child = Candidate.from_source(source, task="t", params=params, operator="params")
        strategy.tell(child, EvalResult(EvalStatus.OK, runtime_ms=float(rng.uniform(1, 2)), ref_ms=1.0, speedup=1.0))


def test_the_trim_measures_no_pair_one_call_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = ParamSpace.distance

    def counted(self, a, b):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return real(self, a, b)

    monkeypatch.setattr(ParamSpace, "distance", counted)
    strategy = EvolutionStrategy(seed=0, islands=1, island_size=8)
    _tell_many(strategy, 60, seed=1)
    assert len(strategy.islands[0]) == 8
    assert calls == 0  # the pairwise rule: ~20 calls per result told past the island's size


@pytest.mark.parametrize("seed", range(5))
def test_the_trim_keeps_what_the_pairwise_rule_keeps(seed: int) -> None:
    strategy = EvolutionStrategy(seed=seed, islands=1, island_size=30)
    _tell_many(strategy, 30, seed=seed)
    ranked = sorted(strategy.islands[0], key=lambda i: i.runtime_ms)
    pairwise = [any(strategy._near_duplicate(ind, better) for better in ranked[:rank])
                for rank, ind in enumerate(ranked)]
    assert strategy._crowded(ranked) == pairwise and any(pairwise) and not all(pairwise)
