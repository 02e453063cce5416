"""What a verification chain is asked to do (trials, timing, tolerances...): plain values, torch-free.

Its own module so that whoever only passes options along (the campaign, the pool's actors, the CLI) does not
import torch for them: the judge (judge/chain.py) imports torch; those who hand it its options need not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: How the judge's arena reaches the candidate's process (judge/arena.py, ``candidate_process.arena_mode``).
ARENA_MODES = ("shared", "staged", "exported")


@dataclass(frozen=True)
class ChainOptions:
    trials: int = 3  # correctness trials at the main shape, fresh inputs each; extra shapes get one each
    seed: int = 42
    timing: bool = True
    timing_budget_ms: float = 1000.0
    anticheat: bool = True
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype name -> (atol, rtol)
    timeout_s: float = 120.0  # the candidate's process gets this long (its waits for the device excluded)
    variants: bool = True  # signed and scaled inputs beside the task's own distribution
    odd_shape: bool = True  # an odd-sized shape when the task gives no extra shapes
    # The main shape's draws unpredictable to the candidate: one new draw (a secret seed) and the rest picked at
    # random from the task's earlier draws, whose reference answers the judge kept (a campaign's evaluations);
    # without it every evaluation draws the same seeds (``evoforge eval --seed``: a verdict repeats exactly)
    fresh_draws: bool = False
    # "compile": no candidate; torch.compile's default (static) build of the reference is timed against the
    # reference as candidates are (the baseline a campaign holds its kernels to, once per task)
    baseline: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "seed": self.seed, "timing": self.timing,
                "timing_budget_ms": self.timing_budget_ms, "anticheat": self.anticheat,
                "tolerances": {k: list(v) for k, v in self.tolerances.items()}, "timeout_s": self.timeout_s,
                "variants": self.variants, "odd_shape": self.odd_shape, "baseline": self.baseline,
                "fresh_draws": self.fresh_draws}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChainOptions:
        d = dict(d)
        d["tolerances"] = {k: tuple(v) for k, v in d.get("tolerances", {}).items()}
        return cls(**d)
