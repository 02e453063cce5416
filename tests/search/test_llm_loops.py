"""The two published loops as strategies (``stages``: Xe-Forge, ``cutegen``: CuTeGen), driven the way the campaign
drives them (proposal -> child stamped with its ticket -> result told), with scripted results: every decision
rule, without an LLM or an evaluation. The end-to-end runs are in tests/evoforge/test_llm_loops_campaign.py."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest
from evoforge.search.base import Proposal
from evoforge.search.strategies import get_strategy

from evoforge import knowledge
from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError

SEED = Candidate.from_source(knowledge.template_source("elementwise_relu"), task="t", operator="seed")
LLM_OPS = ("params", "llm-stage", "llm-repair", "llm-optimize", "llm-generate")


def ok(ms: float) -> EvalResult:
    return EvalResult(EvalStatus.OK, runtime_ms=ms, ref_ms=1.0, speedup=1.0 / ms)


def failed(message: str = "max abs err 0.5 at [3, 7]") -> EvalResult:
    return EvalResult.failure(EvalStatus.INCORRECT, message)


class Driver:
    """The campaign's side of the protocol: children from proposals, results from a script."""

    def __init__(self, strategy) -> None:
        self.strategy = strategy
        self.told: list[tuple[Candidate, EvalResult]] = []
        self.made = 0

    def child(self, proposal: Proposal, *, no_child: str = "") -> Candidate:
        parent = proposal.parents[0] if proposal.parents else SEED
        meta = {"ticket": proposal.meta["ticket"]}
        if no_child:
            return replace(parent, operator=proposal.operator, parents=(parent.id,), meta={
                **meta, "no_child": True, "reply_problem": no_child})
        self.made += 1
        source = f"{parent.source}\n# {proposal.operator} {proposal.stage} child {self.made}\n"
        parents = () if proposal.operator == "llm-generate" else (parent.id,)
        return Candidate.from_source(source, task="t", operator=proposal.operator, stage=proposal.stage,
                                     parents=parents, meta=meta)

    def tell(self, candidate: Candidate, result: EvalResult) -> dict | None:
        self.told.append((candidate, result))
        self.strategy.tell(candidate, result)
        return self.strategy.decision(candidate)

    def step(self, result: EvalResult | Callable[[Proposal], EvalResult], *, no_child: str = "") -> tuple[
            Proposal, Candidate, dict | None]:
        (proposal,) = self.strategy.ask(1)
        child = self.child(proposal, no_child=no_child)
        outcome = result(proposal) if callable(result) else result
        if no_child:
            outcome = EvalResult.failure(EvalStatus.INVALID, f"{proposal.operator}: reply problem {no_child}")
        return proposal, child, self.tell(child, outcome)


def stages(**options) -> Driver:
    driver = Driver(get_strategy("stages", seed=0, initial=(SEED,), operators=LLM_OPS, **options))
    assert driver.strategy.ask(1) == []  # it waits for the input's verdict
    assert driver.tell(SEED, ok(2.0))["role"] == "input"
    return driver


# -- stages ----------------------------------------------------------------------------------------------------
def test_stages_run_in_the_configured_order_each_from_the_kernel_kept_so_far() -> None:
    driver = stages(order=["fusion", "memory_access", "autotuning"], attempts=1)
    p1, c1, d1 = driver.step(ok(1.5))
    assert (p1.operator, p1.stage, p1.parents) == ("llm-stage", "fusion", (SEED,))
    assert d1["accepted"] and d1["stage"] == "fusion" and "faster than the stage input" in d1["why"]
    p2, _, d2 = driver.step(ok(1.8))  # slower than 1.5: not kept, and its one attempt is spent
    assert p2.stage == "memory_access" and p2.parents == (c1,)
    assert not d2["accepted"] and "not faster" in d2["why"] and d2["next"] == "next stage"
    p3, _, _ = driver.step(ok(1.0))
    assert p3.stage == "autotuning" and p3.parents == (c1,)  # the slower rewrite went nowhere
    assert driver.strategy.finished
    summary = driver.strategy.summary()
    assert [s["ended"] for s in summary["stages"]] == ["kept", "not faster", "kept"]
    assert summary["input_ms"] == 2.0 and summary["final_ms"] == 1.0 and summary["speedup_over_input"] == 2.0


def test_an_unchanged_reply_means_the_stage_does_not_apply() -> None:
    driver = stages(order=["algorithmic", "fusion"], attempts=3)
    p1, _, d1 = driver.step(ok(1.0), no_child="unchanged")
    assert p1.stage == "algorithmic" and not d1["accepted"] and "does not apply" in d1["why"]
    p2, _, _ = driver.step(ok(1.0))
    assert p2.stage == "fusion" and p2.parents == (SEED,)  # no retry of a stage that does not apply


def test_a_failed_rewrite_goes_back_with_the_chains_findings_until_correct_and_faster() -> None:
    driver = stages(order=["memory_access", "fusion"], attempts=3)
    _, broken, d1 = driver.step(failed("max abs err 0.5 at [3, 7]"))
    assert not d1["accepted"] and d1["next"] == "repair" and "max abs err 0.5" in d1["why"]
    p2, repaired, d2 = driver.step(ok(1.9))
    assert (p2.operator, p2.parents, p2.stage) == ("llm-repair", (broken,), "memory_access")
    assert d2["role"] == "repair" and d2["accepted"] and d2["attempt"] == 2
    p3, _, _ = driver.step(ok(1.0))
    assert p3.stage == "fusion" and p3.parents == (repaired,)


def test_a_correct_but_slower_rewrite_is_retried_with_that_finding_then_the_input_goes_on() -> None:
    driver = stages(order=["memory_access", "fusion"], attempts=2)
    driver.step(ok(2.5))
    p2, _, d2 = driver.step(ok(2.2))
    assert p2.operator == "llm-stage" and p2.stage == "memory_access"
    assert any("correct but not faster" in n and "2.5 ms" in n for n in p2.meta["notes"])
    assert not d2["accepted"] and d2["next"] == "next stage"
    p3, _, _ = driver.step(ok(1.9))
    assert p3.stage == "fusion" and p3.parents == (SEED,) and "notes" not in p3.meta


def test_an_unusable_reply_is_an_attempt_and_the_model_is_told_why() -> None:
    driver = stages(order=["memory_access"], attempts=2)
    _, _, d1 = driver.step(ok(1.0), no_child="truncated")
    assert not d1["accepted"] and d1["next"] == "retry" and "truncated" in d1["why"]
    p2, _, _ = driver.step(ok(1.0))
    assert p2.stage == "memory_access" and "could not be used" in p2.meta["notes"][0]
    assert driver.strategy.finished


def test_min_gain_and_the_correct_rule() -> None:
    strict = stages(order=["fusion"], attempts=1, min_gain=0.1)
    assert not strict.step(ok(1.9))[2]["accepted"]  # 5% faster is not 10%
    loose = stages(order=["fusion", "memory_access"], attempts=1, accept="correct")
    assert loose.step(ok(3.0))[2]["accepted"]  # any correct rewrite is kept...
    loose.step(ok(2.5))
    assert loose.strategy.summary()["final_ms"] == 2.0  # ...but the final kernel is the fastest kept, the input


@pytest.mark.parametrize("seed", range(20))
def test_the_final_kernel_is_never_slower_than_the_input(seed: int) -> None:
    rng = random.Random(seed)
    driver = stages(attempts=rng.randint(1, 3), accept=rng.choice(["faster", "correct"]))
    while not driver.strategy.finished:
        kind = rng.random()
        if kind < 0.15:
            driver.step(ok(1.0), no_child=rng.choice(["unchanged", "unreadable", "truncated"]))
        else:
            driver.step(failed() if kind < 0.4 else ok(rng.uniform(0.5, 4.0)))
    summary = driver.strategy.summary()
    assert summary["final_ms"] <= summary["input_ms"]
    assert len(summary["stages"]) == len(knowledge.STAGE_NAMES)


def test_after_the_last_stage_the_tuner_takes_the_budget_or_the_pipeline_stops() -> None:
    tune = stages(order=["fusion"], attempts=1)
    _, kept, _ = tune.step(ok(1.0))
    follow = [p for _ in range(6) for p in tune.strategy.ask(1)]
    assert len(follow) == 6 and all(p.operator == "params" and p.params is not None for p in follow)
    tuned = [p.parents[0].structure_id for p in follow]
    assert tuned.count(kept.structure_id) > len(tuned) / 2  # mostly the fastest structure the pipeline kept
    stop = stages(order=["fusion"], attempts=1, then="stop")
    stop.step(ok(1.0))
    assert stop.strategy.ask(2) == []


def test_a_resumed_pipeline_replays_its_decisions() -> None:
    first = stages(order=["algorithmic", "memory_access", "fusion"], attempts=2)
    first.step(failed())
    first.step(ok(1.5))
    first.step(ok(1.7))
    again = Driver(get_strategy("stages", seed=0, initial=(SEED,), operators=LLM_OPS,
                                order=["algorithmic", "memory_access", "fusion"], attempts=2))
    for candidate, result in [(SEED, ok(2.0)), *first.told]:
        again.tell(candidate, result)  # what the campaign's restore does
    (want,) = first.strategy.ask(1)
    (got,) = again.strategy.ask(1)
    assert (got.operator, got.stage, got.parents, got.meta) == (want.operator, want.stage, want.parents, want.meta)


def test_with_no_kernel_to_start_from_the_input_is_generated_and_repaired_first() -> None:
    """A task without a seed kernel (the campaign's seed is the reference): before this, the pass waited for an
    input that never came and the campaign ended with nothing evaluated."""
    reference = Candidate(source="class Model: ...\n", task="t", operator="reference", meta={"reference": True})
    ops = ("llm-stage", "llm-repair", "llm-generate")
    driver = Driver(get_strategy("stages", seed=0, initial=(reference,), operators=ops, order=["fusion"],
                                 attempts=3))
    p1, generated, d1 = driver.step(failed("max abs err 0.5 at [3, 7]"))
    assert (p1.operator, p1.parents) == ("llm-generate", ()) and d1["next"] == "repair"
    p2, repaired, d2 = driver.step(ok(2.0))
    assert (p2.operator, p2.parents) == ("llm-repair", (generated,))
    assert d2["accepted"] and "the pipeline's input" in d2["why"]
    p3, _, _ = driver.step(ok(1.0))
    assert (p3.operator, p3.stage, p3.parents) == ("llm-stage", "fusion", (repaired,))
    assert driver.strategy.summary()["input"] == repaired.id and driver.strategy.summary()["final_ms"] == 1.0

    given_up = Driver(get_strategy("stages", seed=0, initial=(reference,), operators=ops, attempts=2))
    given_up.step(ok(1.0), no_child="unreadable")
    p, _, d = given_up.step(ok(1.0), no_child="truncated")
    assert p.operator == "llm-generate" and d["next"] == "end" and "no correct kernel" in d["why"]
    assert given_up.strategy.ask(1) == [] and given_up.strategy.finished


def test_bad_options_are_one_line() -> None:
    with pytest.raises(UsageError, match="unknown stage"):
        get_strategy("stages", seed=0, order=["fusion", "warp_magic"])
    with pytest.raises(UsageError, match="accept must be one of"):
        get_strategy("stages", seed=0, accept="vibes")
    with pytest.raises(UsageError, match="--strategy stages"):
        get_strategy("stages", seed=0, attempt=3)


# -- cutegen ---------------------------------------------------------------------------------------------------
def cutegen(**options) -> Driver:
    return Driver(get_strategy("cutegen", seed=0, initial=(SEED,), operators=LLM_OPS, **options))


def test_cutegen_generates_then_debugs_the_exact_fault_then_optimizes() -> None:
    driver = cutegen(debug_attempts=2)
    driver.tell(SEED, ok(2.0))  # the campaign's seed: a baseline, not where the loop starts
    assert driver.strategy.decision(SEED)["role"] == "seed"
    p1, generated, d1 = driver.step(failed("max abs err 1.0 at [0, 5]"))
    assert p1.operator == "llm-generate" and p1.parents == () and generated.parents == ()
    assert d1["phase"] == "generate" and d1["next"] == "debug"
    p2, repaired, d2 = driver.step(ok(3.0))
    assert (p2.operator, p2.parents) == ("llm-repair", (generated,))
    assert d2["phase"] == "debug" and d2["accepted"]
    p3, optimized, d3 = driver.step(ok(2.5))
    assert (p3.operator, p3.parents) == ("llm-optimize", (repaired,))
    assert d3["phase"] == "optimize" and d3["accepted"] and d3["best"]
    p4, _, _ = driver.step(failed())
    assert p4.parents == (optimized,)
    summary = driver.strategy.summary()
    assert summary["generations"] == 1 and summary["debug_attempts"] == 1 and summary["optimize_steps"] == 1  # the last is being debugged


def test_cutegen_samples_in_parallel_and_starts_from_the_fastest_correct_one() -> None:
    driver = cutegen(samples=3)
    proposals = driver.strategy.ask(5)
    assert [p.operator for p in proposals] == ["llm-generate"] * 3
    children = [driver.child(p) for p in proposals]
    for child, result in zip(children, [ok(3.0), failed(), ok(2.0)], strict=True):
        driver.tell(child, result)
    (debug,) = driver.strategy.ask(2)  # the failed sample is debugged before the round ends
    assert debug.operator == "llm-repair" and debug.parents == (children[1],)
    driver.tell(driver.child(debug), failed("still wrong"))
    driver.tell(driver.child(driver.strategy.ask(1)[0]), failed("still wrong"))
    driver.tell(driver.child(driver.strategy.ask(1)[0]), failed("still wrong"))  # 3 debug attempts, then it ends
    (optimize,) = driver.strategy.ask(2)
    assert optimize.operator == "llm-optimize" and optimize.parents == (children[2],)


def test_cutegen_reverts_when_debugging_runs_out_and_goes_back_to_the_best() -> None:
    driver = cutegen(debug_attempts=1, patience=3)  # a reverted step counts too
    _, first, _ = driver.step(ok(2.0))
    _, broken, d = driver.step(failed())
    assert d["next"] == "debug"
    p, _, d = driver.step(failed("still wrong"))
    assert p.parents == (broken,) and "debugging ran out" in d["why"]
    p, slower, d = driver.step(ok(2.4))
    assert p.parents == (first,) and d["accepted"] and not d["best"]  # progressive: it moves on to it
    p, _, d = driver.step(ok(2.6))
    assert p.parents == (slower,) and "back to the fastest" in d["why"]
    p, _, _ = driver.step(ok(1.0))
    assert p.parents == (first,)


def test_cutegen_from_the_seed_and_a_step_limit() -> None:
    driver = Driver(get_strategy("cutegen", seed=0, initial=(SEED,), operators=LLM_OPS, from_seed=True,
                                 steps=2, then="tune"))
    assert driver.strategy.ask(1) == []
    driver.tell(SEED, ok(2.0))
    p, _, _ = driver.step(ok(1.0))
    assert p.operator == "llm-optimize" and p.parents == (SEED,)
    driver.step(ok(1.2))
    assert driver.strategy.finished and all(p.params is not None for p in driver.strategy.ask(2))


def test_a_loop_without_its_operators_is_the_tuner() -> None:
    for name in ("stages", "cutegen"):
        strategy = get_strategy(name, seed=0, initial=(SEED,), operators=("params",))
        assert all(p.operator == "params" and p.params is not None for p in strategy.ask(3))


def test_strategy_options_from_the_command_line() -> None:
    """``evoforge run --strategy stages --strategy-option K=V``: the options reach the strategy, over the config's;
    a wrong one stops the run before it starts, naming the flag."""
    from evoforge.campaign_cli import apply_flags
    from evoforge.cli import build_parser
    from evoforge.config import CampaignConfig

    def flags(*argv: str) -> CampaignConfig:
        args = build_parser().parse_args(["run", "--task", "L1/19", *argv])
        return apply_flags(CampaignConfig(strategy_options={"attempts": 5}), args)

    config = flags("--strategy", "stages", "--strategy-option", "order=['memory_access', 'autotuning']",
                   "--strategy-option", "accept=correct")
    assert config.strategy_options == {"attempts": 5, "order": ["memory_access", "autotuning"], "accept": "correct"}
    built = get_strategy(config.strategy, seed=0, **config.strategy_options)
    assert (built.order, built.accept, built.attempts) == (("memory_access", "autotuning"), "correct", 5)
    with pytest.raises(UsageError, match=r"^flags: --strategy stages: order names unknown stage"):
        flags("--strategy", "stages", "--strategy-option", "order=['warp_magic']")
    with pytest.raises(UsageError, match="--strategy-option"):
        flags("--strategy", "stages", "--strategy-option", "attempts")


def test_cutegen_from_a_seed_that_is_the_reference_generates() -> None:
    reference = Candidate(source="class Model: ...\n", task="t", operator="reference", meta={"reference": True})
    driver = Driver(get_strategy("cutegen", seed=0, initial=(reference,), operators=LLM_OPS, from_seed=True))
    (proposal,) = driver.strategy.ask(1)  # before: it waited for a seed's verdict that never came
    assert proposal.operator == "llm-generate"
