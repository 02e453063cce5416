"""Bayesian parameter tuning through Optuna samplers (TPE by default; GP, CMA-ES, random selectable).

One in-memory study per structure, over the space that structure declares; see ``optuna_tuner`` for how
order, failures and duplicates are handled. The structure tuned is the one with the best result so far.
"""

from __future__ import annotations

from collections.abc import Sequence

from evoforge.mutators.names import PARAMS
from evoforge.search.base import Proposal, is_repeat
from evoforge.search.strategies.names import BAYES
from evoforge.search.strategies.proposals import params_proposal, runtime_of
from evoforge.search.strategies.space import ParamSpace
from evoforge.search.tuning.optuna_tuner import SAMPLER_NAMES, OptunaTuner, make_sampler

from evoforge.core import Candidate, EvalResult


class BayesStrategy:
    """``sampler`` is one of tpe, gp, cmaes, random; ``n_startup_trials`` is the random start of TPE and GP.

    Structures come from ``initial`` or from told candidates (a campaign tells its seed first).
    """

    name = BAYES

    def __init__(self, *, seed: int, initial: Sequence[Candidate] = (), sampler: str = "tpe",
                 n_startup_trials: int | None = None, operators: Sequence[str] = (PARAMS,)) -> None:
        if sampler not in SAMPLER_NAMES:
            raise ValueError(f"sampler={sampler!r} is not one of {', '.join(SAMPLER_NAMES)}")
        make_sampler(sampler, seed=seed)  # fails now, with the install hint, if the sampler's package is missing
        self.seed = seed
        self.sampler = sampler
        self.n_startup_trials = n_startup_trials
        self._bases: dict[str, Candidate] = {}
        self._tuners: dict[str, OptunaTuner] = {}
        self._best: dict[str, float] = {}
        for cand in initial:
            self._tuner_for(cand)

    def _tuner_for(self, cand: Candidate) -> OptunaTuner | None:
        sid = cand.structure_id
        if sid not in self._tuners:
            space = ParamSpace.from_dict(cand.space)
            if not space.dims:
                return None
            self._bases[sid] = cand
            self._tuners[sid] = OptunaTuner(space=space, sampler=self.sampler, seed=self.seed + len(self._tuners),
                                            n_startup_trials=self.n_startup_trials)
        return self._tuners[sid]

    def _order(self) -> list[str]:
        """Structures to tune, the best first; structures without a correct result after those that have one."""
        return sorted(self._tuners, key=lambda s: (s not in self._best, self._best.get(s, 0.0)))

    def ask(self, n: int) -> list[Proposal]:
        out: list[Proposal] = []
        for sid in self._order():
            tuner = self._tuners[sid]
            while len(out) < n:
                idx = tuner.ask()
                if idx is None:
                    break
                out.append(params_proposal(self._bases[sid], tuner.space, idx, sampler=self.sampler))
            if len(out) >= n:
                break
        return out

    def tell(self, candidate: Candidate, result: EvalResult) -> None:
        if is_repeat(result):  # its config was told when it was evaluated; the sampler learns nothing new
            return
        tuner = self._tuner_for(candidate)
        if tuner is None:
            return
        idx = tuner.space.indices_of(candidate.params)
        if idx is None:
            return
        ms = runtime_of(result)
        tuner.tell(idx, ms)
        sid = candidate.structure_id
        if ms is not None and ms < self._best.get(sid, float("inf")):
            self._best[sid] = ms
