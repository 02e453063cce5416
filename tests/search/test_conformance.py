"""One suite every registered strategy passes (like Optuna's sampler tests), run through the registry."""

from __future__ import annotations

import importlib.util

import pytest
from evoforge.search.base import Proposal, Strategy
from evoforge.search.bench import child_of, run_search
from evoforge.search.strategies import BUILTIN, get_strategy, strategy_names
from evoforge.search.strategies.space import value_key

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError
from tests.search.conftest import TINY_SPACE, tiny_landscape


def _variants(*, model_samplers: bool) -> list[pytest.param]:
    """Every registered strategy; bayes also with each Optuna sampler. GP and CMA-ES (whose packages are
    optional, and GP costs ~0.5 s an ask) run the cheaper half of the suite: the dedupe they rely on is the
    same code as TPE's."""
    out = [pytest.param((name, {}), id=name) for name in strategy_names()]
    out.append(pytest.param(("bayes", {"sampler": "random"}), id="bayes-random"))
    if model_samplers:
        for sampler, module in (("gp", "scipy"), ("cmaes", "cmaes")):
            marks = pytest.mark.skipif(importlib.util.find_spec(module) is None,
                                       reason=f"optuna's {sampler} sampler needs the {module} package")
            out.append(pytest.param(("bayes", {"sampler": sampler}), id=f"bayes-{sampler}", marks=marks))
    return out


def _builder(name: str, opts: dict):
    def build(*, seed: int = 0, initial: bool = True) -> Strategy:
        seeds = [tiny_landscape().seed_candidate()] if initial else []
        return get_strategy(name, seed=seed, initial=seeds, **opts)

    return build


@pytest.fixture(params=_variants(model_samplers=True))
def make(request):
    return _builder(*request.param)


@pytest.fixture(params=_variants(model_samplers=False))
def make_full(request):
    return _builder(*request.param)


def _key(params: dict) -> tuple:
    return tuple(value_key(params[k]) for k in sorted(TINY_SPACE))


def _drive(strategy: Strategy, landscape, *, budget: int, batch: int = 1) -> list[Candidate]:
    return [c for c, _ in run_search(landscape, strategy, budget=budget, batch=batch, seed=1)]


def test_the_registry_has_the_four_strategies() -> None:
    assert {"random", "bayes", "evolution", "default"} <= set(strategy_names())


def test_each_strategy_is_registered_under_its_one_name() -> None:
    """The name a config gives, the registry's key and the strategy's ``name`` (in the record and summary) are one
    string, written once in ``evoforge.search.strategies``; studies and configs read these strings back."""
    assert BUILTIN == ("bayes", "cutegen", "default", "evolution", "random", "stages")
    assert strategy_names() == sorted(BUILTIN)
    for name in strategy_names():
        assert get_strategy(name, seed=0).name == name


def test_an_unknown_strategy_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--strategy nope"):
        get_strategy("nope", seed=0)


def test_ask_returns_at_most_n_and_is_a_strategy(make) -> None:
    strategy = make()
    assert isinstance(strategy, Strategy)
    assert strategy.ask(0) == []
    proposals = strategy.ask(3)
    assert 1 <= len(proposals) <= 3
    assert all(isinstance(p, Proposal) and p.operator for p in proposals)


def test_proposals_stay_inside_the_space(make) -> None:
    for child in _drive(make(), tiny_landscape(), budget=14, batch=3):
        for name, values in TINY_SPACE.items():
            assert child.params[name] in values


def test_never_proposes_a_config_twice_and_exhausts_the_space(make_full) -> None:
    children = _drive(make_full(), tiny_landscape(), budget=40, batch=4)
    keys = [_key(c.params) for c in children]
    assert len(keys) == len(set(keys)), "a duplicate costs a real evaluation"
    assert len(keys) == 24  # every config once, then nothing more to propose


def test_never_proposes_a_config_told_by_someone_else(make_full) -> None:
    strategy = make_full()
    landscape = tiny_landscape()
    told = landscape.seed_candidate().with_params({"BLOCK": 64, "num_warps": 4, "order": "row"}, operator="llm-stage")
    strategy.tell(told, landscape.evaluate(told.params))
    children = _drive(strategy, landscape, budget=30)
    assert _key(told.params) not in {_key(c.params) for c in children}


def test_survives_out_of_order_tells(make) -> None:
    strategy = make()
    landscape = tiny_landscape()
    first = strategy.ask(4)
    second = strategy.ask(2)
    for proposal in reversed(first + second):  # results arrive in another order than asked
        child = child_of(proposal)
        strategy.tell(child, landscape.evaluate(child.params))
    assert strategy.ask(2)


def test_survives_all_failures_and_keeps_proposing_new_configs(make_full) -> None:
    children = _drive(make_full(), tiny_landscape(all_fail=True), budget=24, batch=2)
    keys = [_key(c.params) for c in children]
    assert len(keys) == 24 and len(set(keys)) == 24


def test_deterministic_given_seed(make) -> None:
    runs = [[_key(c.params) for c in _drive(make(seed=7), tiny_landscape(), budget=13, batch=2)] for _ in range(2)]
    assert runs[0] == runs[1]


def test_finds_the_best_of_a_tiny_landscape(make_full) -> None:
    landscape = tiny_landscape()
    best = landscape.best_ms
    found = []
    for seed in range(3):
        history = run_search(landscape, make_full(seed=seed), budget=24, seed=seed)
        found.append(min(r.runtime_ms for _, r in history if r.ok))
    assert found == [best] * 3


def test_waits_for_a_told_seed_when_built_without_one(make) -> None:
    """A campaign builds the strategy with no candidate, evaluates its seed, and tells it first."""
    strategy = make(initial=False)
    assert strategy.ask(2) == []
    landscape = tiny_landscape()
    seed = landscape.seed_candidate()
    strategy.tell(seed, landscape.evaluate(seed.params))
    proposals = strategy.ask(2)
    assert proposals and all(p.params is not None and set(p.params) >= set(TINY_SPACE) for p in proposals)


def test_a_failure_result_keeps_its_status(make) -> None:
    """A strategy only reads results; it must accept every status the chain can produce."""
    strategy = make()
    for status in EvalStatus:
        proposal = strategy.ask(1)[0]
        child = child_of(proposal)
        result = EvalResult(status=status, runtime_ms=1.0 if status is EvalStatus.OK else None,
                            message="" if status is EvalStatus.OK else f"{status}: test")
        strategy.tell(child, result)
