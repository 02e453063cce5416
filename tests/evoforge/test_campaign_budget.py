"""A campaign spends its budget on distinct configurations while legal ones are left unevaluated, fresh and resumed,
and says truly why when it stops before its budget.

Before issue V, a repeated proposal was dropped without the strategy being told, and ``rule:retune`` kept proposing
the evaluated neighbours of the best parents: with 24 legal configurations and a budget of 20, the default strategy
stopped after 11 evaluations and the evolution strategy after 16, each saying that going on needed "more budget than
its SPACE holds". Real parts: the interpreter backend, a local Ray, the Optuna record, the default operators
(``params``, ``rule``). A campaign killed with ``kill -9`` and resumed is held to the same in
tests/reliability/test_campaign_kill.py (one killed campaign for both its checks).
"""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

import evoforge
from tests.conftest import FIXTURES

SEED = FIXTURES / "relu_space" / "six_by_four.py"  # SPACE 6x4: 24 configurations, each legal on nvidia-sm90
LEGAL = 24
BUDGET = 20  # below the legal space: the whole budget must go to distinct configurations
TASK = "level1/19_ReLU"
SET = {"batch_size": 4, "dim": 1000}


def _configs(out, name: str) -> list[str]:
    study = optuna.load_study(study_name=f"{name}/{TASK}", storage=f"sqlite:///{out}/optuna.db")
    return [t.user_attrs["params"] for t in study.get_trials(deepcopy=False)
            if t.state in (TrialState.COMPLETE, TrialState.FAIL)]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["default", "evolution", "random"])
def test_the_budget_goes_to_distinct_configs_until_the_legal_space_is_covered(tmp_path, strategy: str) -> None:
    out, name = tmp_path / "run", f"v-{strategy}"
    fresh = evoforge.run(name=name, out=str(out), backend="interpreter", arch="nvidia-sm90", strategy=strategy,
                         budget_evals=BUDGET, workers=1, progress=False,
                         tasks=[{"spec": "L1/19", "seed_kernel": str(SEED), "set": SET}])
    task = fresh.summary["tasks"][TASK]
    configs = _configs(out, name)
    assert (task["evaluations"], len(configs), len(set(configs))) == (BUDGET, BUDGET, BUDGET), task["stopped_early"]
    assert task["stopped_early"] is None

    # Resumed with more budget than configurations left: it evaluates each of the 4 it has not, then stops, saying
    # that the legal space is covered (and how much of it was evaluated), not that it needs more budget.
    resumed = evoforge.run(resume=out, budget_evals=LEGAL + 4, progress=False)
    task = resumed.summary["tasks"][TASK]
    configs = _configs(out, name)
    assert (task["evaluations"], len(configs), len(set(configs))) == (LEGAL, LEGAL, LEGAL), task["stopped_early"]
    why = task["stopped_early"]
    assert f"after {LEGAL} of {LEGAL + 4} evaluations: the legal space of {LEGAL} configurations is covered: " \
           f"{LEGAL} distinct configurations evaluated of {LEGAL} legal ones" in why, why
    assert "more budget" not in why and "a larger SPACE in the seed" in why
