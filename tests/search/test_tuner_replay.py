"""A tuner rebuilt from a record (a resume) is told thousands of results before it is asked anything: each enters
its sampler's study finished, in one step, not through Optuna's enqueue, ask and tell (issue AA: half of a 10k-trial
resume's CPU). Counted in the sampler's asks, never in seconds; what the sampler learns is the same."""

from __future__ import annotations

import optuna
import pytest
from evoforge.search.strategies.space import ParamSpace
from evoforge.search.tuning.optuna_tuner import FAILURE_CONSTRAINT, PENALTY_LOG_MARGIN, OptunaTuner

SPACE = {"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [16, 32, 64, 128], "warps": [2, 4, 8]}


def _told(tuner: OptunaTuner, n: int) -> list[tuple[int, ...]]:
    configs = list(tuner.space.all_indices())[:n]
    for k, idx in enumerate(configs):
        tuner.tell(idx, None if k % 5 == 4 else 1.0 + k, penalize=k % 10 != 9)
    return configs


def test_a_replayed_record_asks_the_sampler_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    tuner = OptunaTuner(space=ParamSpace.from_dict(SPACE), sampler="tpe", seed=0)
    asks = 0
    real_ask = tuner.study.ask

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal asks
        asks += 1
        return real_ask(*args, **kwargs)

    monkeypatch.setattr(tuner.study, "ask", counted)
    configs = _told(tuner, 30)
    assert asks == 0
    assert len(tuner._study.get_trials(deepcopy=False)) == 0  # nothing built until the study is read (a first ask)
    trials = tuner.study.get_trials(deepcopy=False)
    assert len(trials) == 30 and set(configs) <= tuner.seen
    ok, penalized, unpenalized = trials[0], trials[4], trials[9]
    assert ok.state == optuna.trial.TrialState.COMPLETE and ok.system_attrs[f"constraints:{FAILURE_CONSTRAINT}"] == 0.0
    assert penalized.value == pytest.approx(max(t.value for t in trials[:4]) + PENALTY_LOG_MARGIN)
    assert penalized.system_attrs[f"constraints:{FAILURE_CONSTRAINT}"] == 1.0
    assert unpenalized.state == optuna.trial.TrialState.FAIL
    idx = tuner.ask()  # asked at last: a config nobody has seen, by the sampler that learned all of them
    assert asks >= 1 and idx is not None and idx not in configs


def test_a_config_marked_before_the_first_ask_is_in_the_study_when_the_sampler_asks() -> None:
    tuner = OptunaTuner(space=ParamSpace.from_dict(SPACE), sampler="tpe", seed=0)
    tuner.enqueue((1, 1, 1))  # under way elsewhere, not told yet
    assert tuner.ask() != (1, 1, 1)
    running = [t for t in tuner.study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING]
    assert len(running) == 2  # the one under way and the one just asked
    tuner.tell((1, 1, 1), 2.0)
    assert tuner.study.best_value == pytest.approx(0.6931, abs=1e-3)
