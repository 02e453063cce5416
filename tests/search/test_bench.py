"""search-bench: the figure the strategies are judged by, and its command line."""

from __future__ import annotations

import argparse
import json

import pytest
from evoforge.search.bench import add_subparser, search_bench

from evoforge.core import UsageError
from tests.search.conftest import MATMUL, SOFTMAX


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="evoforge")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_default_beats_random_search_on_the_matmul_landscape() -> None:
    res = search_bench(MATMUL, budget=30, repeats=25, strategy="default", seed=100)
    assert res["p_within_2pct"] >= 0.6  # measured 0.8 over 200 repeats; random search gets 0.26
    assert res["random_p_within_2pct"] <= 0.5
    assert 1.0 <= res["median_best_ratio"] <= 1.02
    assert res["median_best_ratio"] < res["random_median_best_ratio"]


def test_with_the_knowledge_base_no_evaluation_goes_to_a_refused_config() -> None:
    """--kb runs the search as a campaign with the knowledge base on: the 96 configs that ran out of shared memory
    on the H200 and the 56 whose accumulator spilled past the register file (3.6x the best or slower) are refused
    unevaluated; the whole budget goes to the 280 others."""
    from evoforge.backends.replay import Landscape
    from evoforge.search.bench import legality, run_search
    from evoforge.search.strategy_spec import build_strategy

    from evoforge.core import EvalStatus

    land = Landscape.load(MATMUL)
    refused = legality(land)
    verdicts = [refused(land.params_of(r)) for r in land.rows]
    assert sum(v is not None for v in verdicts) == 96 + 56
    assert all(v is not None for v, r in zip(verdicts, land.rows, strict=True) if r["status"] == "OutOfResources")
    for strategy in ("default", "random"):
        for seed in range(100, 105):
            strat = build_strategy(strategy, seed=seed, initial=[land.seed_candidate()])
            history = run_search(land, strat, budget=30, seed=seed, refused=refused)
            assert len(history) == 30
            assert [c.params for c, _ in history if refused(c.params) is not None] == []
            assert all(r.ok for _, r in history if r.status != EvalStatus.INVALID)


def test_a_refusal_that_is_no_size_boundary_teaches_the_walk_nothing() -> None:
    """An accumulator past the register file is refused at 4 warps and fits at 8: taught to the tuner as a
    resource boundary (as every invalid result was before), the walk condemned the 8-warp configs beside it and the
    default found the best in 12 of these 20 seeds instead of 17 (0.62 instead of 0.915 over 200)."""
    from evoforge.backends.replay import Landscape
    from evoforge.search.bench import best_ratios, legality, run_search
    from evoforge.search.strategies.proposals import FailureKind, failure_kind
    from evoforge.search.strategy_spec import build_strategy

    from evoforge.core import EvalResult, EvalStatus

    spill = EvalResult.failure(EvalStatus.INVALID, "", details={"refused_by": ["accumulator-registers"],
                                                                "size_boundary": False})
    smem = EvalResult.failure(EvalStatus.INVALID, "", details={"refused_by": ["shared-memory-budget"],
                                                               "size_boundary": True})
    assert failure_kind(spill) is FailureKind.REFUSED and failure_kind(smem) is FailureKind.RESOURCE
    land = Landscape.load(MATMUL)
    refused = legality(land)
    hits = 0
    for seed in range(100, 120):
        strat = build_strategy("default", seed=seed, initial=[land.seed_candidate()])
        hits += best_ratios(run_search(land, strat, budget=30, seed=seed, refused=refused), land.best_ms, [30])[30] <= 1.02
    assert hits >= 16


def test_asynchronous_batches_of_four_still_find_the_best_region() -> None:
    res = search_bench(MATMUL, budget=30, repeats=10, strategy="default", seed=200, batch=4, baseline=None)
    assert res["median_best_ratio"] <= 1.04 and "random_p_within_2pct" not in res


def test_cli_json_is_the_last_line(capsys) -> None:
    assert _cli(["search-bench", str(SOFTMAX), "--budget-evals", "10", "--repeats", "3", "--strategy", "bayes",
                 "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["strategy"] == "bayes" and res["budget"] == 10 and res["repeats"] == 3
    assert {"p_within_2pct", "median_best_ratio", "random_p_within_2pct", "random_median_best_ratio"} <= set(res)


def test_cli_table_names_both_strategies(capsys) -> None:
    assert _cli(["search-bench", str(SOFTMAX), "--budget-evals", "5", "--repeats", "2", "--strategy", "evolution"]) == 0
    out = capsys.readouterr().out
    assert "evolution" in out and "random" in out and "p_within_2pct" in out


def test_a_bad_landscape_path_is_a_usage_error_naming_it(tmp_path) -> None:
    with pytest.raises(UsageError, match="missing.json"):
        _cli(["search-bench", str(tmp_path / "missing.json"), "--budget-evals", "5", "--repeats", "1"])
    with pytest.raises(UsageError, match="--strategy nope"):
        search_bench(SOFTMAX, budget=5, repeats=1, strategy="nope")


@pytest.mark.parametrize("strategy", ["default", "random"])
def test_a_landscape_recorded_in_part_spends_the_budget_on_recorded_configs_only(strategy: str) -> None:
    """A recording cut short holds a sample of its space: a config it lacks was never measured, so a search is
    neither charged for it nor told it failed (the default would read a failure as a resource limit)."""
    from evoforge.backends.replay import Landscape
    from evoforge.search.bench import run_search
    from evoforge.search.strategies import get_strategy

    full = Landscape.load(MATMUL)
    best = min(full.ok_rows(), key=lambda r: r["ms"])
    rows = tuple(r for i, r in enumerate(full.rows) if i % 3 == 0 or r is best)  # about a third, best kept
    sample = Landscape(path="sample.json", kernel=full.kernel, gpu=full.gpu, arch=full.arch, space=full.space,
                       rows=rows, baseline_ms=full.baseline_ms)
    assert not sample.complete and full.complete
    strat = get_strategy(strategy, seed=3, initial=[sample.seed_candidate()])
    history = run_search(sample, strat, budget=25, seed=3)
    assert len(history) == 25
    assert all(sample.holds(c.params) for c, _ in history)
    assert not any(r.status == "invalid" for _, r in history)


def test_where_nothing_fails_the_default_keeps_up_with_optuna_tpe_at_twenty_evaluations() -> None:
    """softmax_fp16_32768x1024 (recorded on the H200): nothing fails and the fastest configs sit in a corner (one row
    per program), far from CMA-ES's centred start. A walk with CMA-ES's proposals interleaved found one within 2% in
    0.815 of 200 seeds after 20 evaluations, Optuna TPE in 0.99: the tuner now asks TPE as well, as often as its
    proposals improve the incumbent against the walk's (0.825 of these 80 seeds before, 0.96 after)."""
    res = search_bench(SOFTMAX, budget=20, repeats=80, strategy="default", baseline=None)
    assert res["p_within_2pct"] >= 0.9
