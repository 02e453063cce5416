"""Evolution's own promises: operator names from the campaign, repairs of failed parents, a learning bandit,
islands that keep some diversity."""

from __future__ import annotations

import json
from dataclasses import replace

from evoforge.search.bench import child_of
from evoforge.search.strategies import get_strategy
from evoforge.search.tuning.bandit import AUCBandit

from evoforge.core import EvalResult, EvalStatus
from tests.search.conftest import tiny_landscape

OPERATORS = ["params", "rule:retune", "llm-stage", "llm-repair", "crossover"]


def _fake_child(proposal, n: int):
    """What an LLM operator would return: a new structure (its source changes) with the parent's space."""
    parent = proposal.parents[0]
    return parent.__class__.from_source(parent.source + f"\n# variant {n}\n", params=parent.params,
                                        operator=proposal.operator, parents=(parent.id,))


def test_operators_come_from_the_list_and_a_failed_child_gets_repaired() -> None:
    landscape = tiny_landscape()
    strategy = get_strategy("evolution", seed=3, initial=[landscape.seed_candidate()], operators=OPERATORS)
    seen_ops: set[str] = set()
    repaired = None
    for n in range(40):
        for proposal in strategy.ask(2):
            seen_ops.add(proposal.operator)
            assert proposal.operator in OPERATORS
            if proposal.operator == "llm-repair":
                repaired = proposal.parents[0]
            child = child_of(proposal) or _fake_child(proposal, n)
            if proposal.params is None and proposal.operator == "llm-stage":
                result = EvalResult.failure(EvalStatus.COMPILE_ERROR, "CompilationError: bad rewrite")
            elif proposal.params is None:
                result = EvalResult(status=EvalStatus.OK, runtime_ms=5.0)
            else:
                result = landscape.evaluate(child.params)
            strategy.tell(child, result)
    assert {"params", "crossover", "llm-stage", "llm-repair"} <= seen_ops
    assert repaired is not None and "# variant" in repaired.source  # the failed LLM child went back to repair
    assert strategy.diversity()["structures"] >= 2


def test_params_proposals_carry_exact_values_of_the_space() -> None:
    landscape = tiny_landscape()
    strategy = get_strategy("evolution", seed=0, initial=[landscape.seed_candidate()], operators=["params"])
    for proposal in strategy.ask(6):
        assert proposal.operator == "params" and set(proposal.params) == set(landscape.space)


def test_the_bandit_prefers_the_operator_that_keeps_improving() -> None:
    bandit = AUCBandit(["good", "bad"], seed=0, window=50, exploration=0.2)
    picks = []
    for _ in range(200):
        arm = bandit.select()
        picks.append(arm)
        bandit.update(arm, arm == "good")
    assert picks[-100:].count("good") > 80
    assert bandit.select(["bad"]) == "bad"  # only what is applicable is chosen


def test_islands_exchange_their_best() -> None:
    landscape = tiny_landscape()
    strategy = get_strategy("evolution", seed=1, initial=[landscape.seed_candidate()], operators=["params"],
                            islands=2, island_size=4, migration_interval=4)
    for _ in range(20):
        for proposal in strategy.ask(1):
            child = child_of(proposal)
            strategy.tell(child, landscape.evaluate(child.params))
    bests = [min(i.runtime_ms for i in island) for island in strategy.islands]
    assert all(len(island) <= 4 for island in strategy.islands)
    assert bests[0] == bests[1] == min(i.runtime_ms for i in strategy.population())


def test_a_proposal_told_as_a_repeat_is_followed_by_a_config_nobody_proposed() -> None:
    """Where an operator's child repeats an evaluated config, the campaign tells the strategy (the config's result,
    or a no-child, marked ``repeat``) instead of evaluating it. The next proposal is then a parameter config not yet
    proposed, so operators that keep landing on evaluated neighbours cannot use up a task's proposals: before issue V
    a campaign with 24 legal configs stopped after 11 of its 20 evaluations."""
    for name in ("default", "evolution"):
        landscape = tiny_landscape()
        strategy = get_strategy(name, seed=5, initial=[landscape.seed_candidate()], operators=["params", "rule:retune"])
        evaluated: set[str] = set()
        owed = False
        while len(evaluated) < len(landscape.rows):
            proposals = strategy.ask(1)
            assert proposals, (name, len(evaluated))  # configs are left: it has one to propose
            proposal = proposals[0]
            child = child_of(proposal)
            if owed:
                assert child is not None and json.dumps(child.params, sort_keys=True) not in evaluated, name
            if child is None:  # rule:retune: every move of it repeats an evaluated config (the worst case)
                parent = proposal.parents[0]
                no_child = replace(parent, operator=proposal.operator, parents=(parent.id,), meta={"no_child": True})
                strategy.tell(no_child, EvalResult.failure(EvalStatus.INVALID, "nothing new", details={"repeat": True}))
                owed = True
                continue
            owed = False
            evaluated.add(json.dumps(child.params, sort_keys=True))
            strategy.tell(child, landscape.evaluate(child.params))
