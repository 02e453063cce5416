"""Parameter tuning of one structure through an Optuna sampler, asked and told one config at a time.

Three things make Optuna's samplers work on kernel spaces:
- numeric choices are integer indices (``IntDistribution``), so TPE, GP and CMA-ES see their order;
- a failure is told as a COMPLETE trial carrying a violated constraint (``Trial.set_constraint``) and a
  penalty value: samplers ignore FAIL trials, and a sampler told only FAIL keeps proposing the same broken
  config;
- a config already proposed is never proposed again: a duplicate costs a real evaluation. A duplicate the
  sampler insists on is replaced by the nearest config not yet seen.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import optuna
from evoforge.search.strategies.space import ParamSpace
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import Trial, TrialState

from evoforge.core import UsageError

SAMPLER_NAMES = ("tpe", "gp", "cmaes", "random")
FAILURE_CONSTRAINT = "failed"
_DUPLICATE_RETRIES = 3
PENALTY_LOG_MARGIN = math.log(1.5)  # a failure counts as 1.5x slower than the slowest config seen


def make_sampler(name: str, *, seed: int, n_startup_trials: int | None = None) -> optuna.samplers.BaseSampler:
    """An Optuna sampler by short name; ``n_startup_trials`` is the random start of TPE and GP."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                              n_startup_trials=10 if n_startup_trials is None else n_startup_trials)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed, deterministic_objective=True,
                                             n_startup_trials=10 if n_startup_trials is None else n_startup_trials,
                                             warn_independent_sampling=False)
        if name == "cmaes":
            if importlib.util.find_spec("cmaes") is None:
                raise UsageError("sampler 'cmaes' needs the cmaes package: pip install cmaes")
            return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False,
                                                n_startup_trials=1 if n_startup_trials is None else n_startup_trials)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLER_NAMES)})")


class OptunaTuner:
    """An in-memory study over one ``ParamSpace``; configs are grid indices, values are log(runtime_ms)."""

    def __init__(self, *, space: ParamSpace, sampler: str = "tpe", seed: int,
                 n_startup_trials: int | None = None) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        self._sampler_name, self._n_startup_trials = sampler, n_startup_trials
        self._rng = np.random.default_rng(seed)
        self._study = optuna.create_study(direction="minimize",
                                          sampler=make_sampler(sampler, seed=seed, n_startup_trials=n_startup_trials))
        # told before any ask, (config, value, violation): added to the study when it is next read
        self._backlog: list[tuple[tuple[int, ...], float | None, float | None]] = []
        self._dims = [d for d, n in enumerate(space.sizes) if n > 1]  # constant dimensions are not sampled
        self._dists: dict[str, BaseDistribution] = {
            space.names[d]: (IntDistribution(0, space.sizes[d] - 1) if space.ordinal[d]
                             else CategoricalDistribution(tuple(range(space.sizes[d]))))
            for d in self._dims}
        # pending: proposed, not yet told; None: marked before this tuner was ever asked, not yet in the study
        self._trials: dict[tuple[int, ...], Trial | None] = {}
        self._asked = False
        self.seen: set[tuple[int, ...]] = set()  # proposed or told, by anyone
        self._worst_ok: float | None = None
        self._constraints = sampler != "cmaes"  # CMA-ES reads only the penalty value (and warns on constraints)

    @property
    def study(self) -> optuna.Study:
        """The sampler's study, holding every result told so far. Results told before this tuner was ever asked (a
        resume replaying a thousand tasks' records) enter it here, at its first read: a resume reaches its first
        proposal without building every task's study, and each task pays for its own when it is next tuned."""
        if self._backlog:
            backlog, self._backlog = self._backlog, []
            self._study.add_trials([self._frozen(*told) for told in backlog])
        return self._study

    # --- the sampler's view -------------------------------------------------------------------------------
    def _idx_of_trial(self, trial: Trial) -> tuple[int, ...]:
        idx = [0] * self.space.dims
        for d in self._dims:
            idx[d] = int(trial.params[self.space.names[d]])
        return tuple(idx)

    def _trial_params(self, idx: Sequence[int]) -> dict[str, int]:
        return {self.space.names[d]: int(idx[d]) for d in self._dims}

    def ask(self) -> tuple[int, ...] | None:
        """A config nobody has proposed yet, chosen by the sampler; None when the space is exhausted."""
        if self.space.enumerable and len(self.seen) >= self.space.size:
            return None
        if not self._asked:  # from now on the sampler's study holds every config under way, as it always did
            self._asked = True
            for idx in [i for i, t in self._trials.items() if t is None]:
                del self._trials[idx]
                self.enqueue(idx)
        for _ in range(_DUPLICATE_RETRIES):
            trial = self.study.ask(self._dists)
            idx = self._idx_of_trial(trial)
            if idx not in self.seen:
                self._register(idx, trial)
                return idx
            self.study.tell(trial, state=TrialState.FAIL)  # invisible to samplers, costs no evaluation
            wanted = idx
        fallback = self.nearest_unseen(wanted)
        if fallback is None:
            return None
        self.enqueue(fallback)
        return fallback

    def enqueue(self, idx: Sequence[int]) -> None:
        """Record a config chosen elsewhere (a local move) as a trial, so the sampler learns from its result."""
        idx = tuple(idx)
        if idx in self._trials:
            return
        if not self._asked:
            # Nothing asked of the sampler yet (a resume replaying its record, a structure told before it is
            # tuned): the config enters the study finished, when its result is told, in one step instead of
            # Optuna's enqueue, ask and tell (2.5 ms a trial, half of a 10k-trial resume's CPU).
            self._register(idx, None)
            return
        self.study.enqueue_trial(self._trial_params(idx), skip_if_exists=False)
        trial = self.study.ask(self._dists)
        self._register(idx, trial)

    def _register(self, idx: tuple[int, ...], trial: Trial | None) -> None:
        self._trials[idx] = trial
        self.seen.add(idx)

    def withdraw(self, idx: Sequence[int]) -> None:
        """Take back a proposal that will not be evaluated (replaced before it ran): a FAIL trial, and ``idx``
        may be proposed again."""
        idx = tuple(idx)
        if idx not in self._trials:
            return
        trial = self._trials.pop(idx)
        if trial is not None:
            self.study.tell(trial, state=TrialState.FAIL)
        self.seen.discard(idx)

    def tell(self, idx: Sequence[int], runtime_ms: float | None, *, penalize: bool = True) -> None:
        """Feed one result back: ``runtime_ms`` of a correct run, or None for any failure.

        ``penalize=False`` is for a failure that says nothing about the speed of the values sampled (an
        incorrect result: the same tiles with a safe precision may be the fastest config): a FAIL trial, which
        the samplers skip, instead of a penalty value that pulls them away from its neighbourhood.
        """
        idx = tuple(idx)
        self.seen.add(idx)
        if idx not in self._trials:  # told without having been asked here (another operator's child): record it too
            self.enqueue(idx)
        trial = self._trials.pop(idx)
        if (runtime_ms is None or runtime_ms <= 0) and not penalize:
            self._finish(idx, trial, None, None)
            return
        if runtime_ms is not None and runtime_ms > 0:
            value = math.log(runtime_ms)
            self._worst_ok = value if self._worst_ok is None else max(self._worst_ok, value)
            self._finish(idx, trial, value, 0.0)
        else:
            value = (self._worst_ok if self._worst_ok is not None else 0.0) + PENALTY_LOG_MARGIN
            self._finish(idx, trial, value, 1.0)

    def _finish(self, idx: tuple[int, ...], trial: Trial | None, value: float | None, violation: float | None,
                ) -> None:
        """The study's trial of ``idx`` finished: COMPLETE with ``value`` (and the failure constraint), or FAIL."""
        if trial is not None:
            if value is None:
                self.study.tell(trial, state=TrialState.FAIL)
                return
            if self._constraints:
                trial.set_constraint(FAILURE_CONSTRAINT, violation)
            self.study.tell(trial, value)
            return
        self._backlog.append((idx, value, violation))

    def _frozen(self, idx: tuple[int, ...], value: float | None, violation: float | None) -> optuna.trial.FrozenTrial:
        params = self._trial_params(idx)
        return optuna.trial.create_trial(
            state=TrialState.FAIL if value is None else TrialState.COMPLETE, value=value, params=params,
            distributions={k: self._dists[k] for k in params},
            constraints={FAILURE_CONSTRAINT: violation} if self._constraints and value is not None else None)

    def start_round(self, *, seed: int, seen: set[tuple[int, ...]], running: Iterable[tuple[int, ...]]) -> None:
        """Ask from here as a tuner made now with ``seed``, told every result so far in the order they were told
        and then the configs under way (``running``, in that order) would: a new sampler (and duplicate stand-ins)
        seeded with ``seed`` over the same finished trials, the configs under way as running trials after them (TPE's
        constant liar reads those), ``seen`` what it may not propose. Costs one trial a result over a search, where a
        study rebuilt for each round adds every result again."""
        self._study.sampler = make_sampler(self._sampler_name, seed=seed, n_startup_trials=self._n_startup_trials)
        self._rng = np.random.default_rng(seed)
        self.seen = set(seen)
        for idx in running:  # enter the study at the round's first ask, after the results told before it
            self.enqueue(idx)

    def end_round(self) -> None:
        """The round's running trials (the configs under way, its proposals) leave the study as FAIL, which no
        sampler reads, so each result told later is added after every earlier one, as a rebuilt study holds it."""
        for trial in self._trials.values():
            if trial is not None:
                self._study.tell(trial, state=TrialState.FAIL)
        self._trials = {}
        self._asked = False

    def nearest_unseen(self, idx: Sequence[int]) -> tuple[int, ...] | None:
        """The unseen config closest to ``idx`` (ties broken at random): a duplicate's stand-in."""
        if self.space.enumerable:
            pool = [p for p in self.space.all_indices() if p not in self.seen]
        else:
            pool = [self.space.random_indices(self._rng) for _ in range(256)]
            pool = [p for p in pool if p not in self.seen]
        if not pool:
            return None
        dist = np.array([self.space.distance(idx, p) for p in pool]) + 1e-9 * self._rng.random(len(pool))
        return pool[int(np.argmin(dist))]
