"""Search where the fastest configs compute the wrong answer: what a user notices is that the default strategy
stops proposing incorrect values, keeps tuning the rest, and still finds the fastest correct config.

Landscapes: the derived ones committed in experiments/results/search/landscapes (the recorded H200 bf16 GEMM
landscape with a numerics choice added; experiments/benchmarks/derive_landscapes.py), replayed by the real replay
backend, searched by the real strategies with real Optuna samplers and fixed seeds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from evoforge.backends.replay import Landscape
from evoforge.search.bench import run_search, search_bench
from evoforge.search.strategies import get_strategy
from evoforge.search.strategies.proposals import FailureKind, failure_kind
from evoforge.search.strategies.space import ParamSpace
from evoforge.search.tuning.causes import CauseModel
from evoforge.search.tuning.choices import ChoiceEffects
from evoforge.search.tuning.surrogate import FailureModel
from evoforge.search.tuning.tuner import StructureTuner

from evoforge import knowledge
from evoforge.core import EvalResult, EvalStatus

DERIVED = Path(__file__).resolve().parents[2] / "experiments" / "results" / "search" / "landscapes"
FP32 = DERIVED / "derived_matmul_fp32_split.json"
FP8 = DERIVED / "derived_matmul_fp16_fp8.json"
ACC = DERIVED / "derived_matmul_fp16_acc.json"
SPLIT_SPACE = {"BLOCK": [64, 128, 256], "warps": [4, 8], "SPLIT": ["bf16x3", "tf32x3", "none"],
               "PRECISION": ["tf32", "tf32x3", "ieee"]}


def test_an_incorrect_result_is_a_property_of_the_config_and_out_of_resources_a_size_boundary() -> None:
    for status in ("incorrect", "rejected", "implausible", "crashed", "timeout"):
        assert failure_kind(EvalResult.failure(EvalStatus(status), "x")) is FailureKind.PROPERTY
    for status in ("compile_error", "invalid", "runtime_error"):
        assert failure_kind(EvalResult.failure(EvalStatus(status), "x")) is FailureKind.RESOURCE
    assert failure_kind(EvalResult(status=EvalStatus.OK, runtime_ms=1.0)) is None


def test_the_cause_of_incorrect_results_is_learned_as_the_pair_of_values_that_makes_them() -> None:
    """SPLIT=none with PRECISION=tf32 is incorrect; each value alone is fine (bf16x3 never reads PRECISION)."""
    space = ParamSpace.from_dict(SPLIT_SPACE)

    def idx(block, warps, split, precision):
        return space.indices_of({"BLOCK": block, "warps": warps, "SPLIT": split, "PRECISION": precision})

    incorrect = [idx(64, 4, "none", "tf32"), idx(256, 8, "none", "tf32")]
    correct = [idx(128, 8, "bf16x3", "tf32"), idx(64, 4, "none", "ieee"), idx(256, 4, "tf32x3", "tf32x3")]
    model = CauseModel(space).fit(incorrect, correct)
    assert model.predict(idx(128, 4, "none", "tf32")) >= 0.8  # new tiles, the same pair: still incorrect
    assert model.predict(idx(64, 4, "bf16x3", "tf32")) < 0.3  # the same tiles, a safe split: correct
    assert model.predict(idx(256, 8, "none", "tf32x3")) < 0.3
    known = CauseModel(space, known=[((space.names.index("PRECISION"), 0), (space.names.index("SPLIT"), 2))])
    assert known.fit([], correct).predict(idx(128, 4, "none", "tf32")) == 1.0  # told in advance


def test_a_choice_that_changes_nothing_is_learned_as_inert_and_a_slow_one_as_slow() -> None:
    space = ParamSpace.from_dict(SPLIT_SPACE)

    def idx(split, precision, block=128):
        return space.indices_of({"BLOCK": block, "warps": 8, "SPLIT": split, "PRECISION": precision})

    choices = ChoiceEffects(space)
    timed = {idx("bf16x3", "tf32"): 1.0, idx("bf16x3", "ieee"): 1.0, idx("tf32x3", "tf32"): 1.95}
    for i, t in timed.items():
        choices.observe(i, t, timed)
    assert choices.canonical(idx("bf16x3", "tf32x3", 64)) == choices.canonical(idx("bf16x3", "ieee", 64))
    assert choices.canonical(idx("none", "tf32x3")) != choices.canonical(idx("none", "ieee"))  # read there
    split = space.names.index("SPLIT")
    assert choices.flip(idx("bf16x3", "tf32"), split, 1) is True  # bf16x3 -> tf32x3 costs 95%
    assert choices.flip(idx("tf32x3", "tf32"), split, 0) is False
    # SPLIT none reads PRECISION: the move there is timed per PRECISION it lands on, whichever one the bf16 split
    # (which reads none) happened to hold
    choices.observe(idx("none", "ieee"), 4.0, {**timed, idx("none", "ieee"): 4.0})
    assert choices.costs(idx("bf16x3", "tf32"), idx("none", "ieee")) is True
    assert choices.costs(idx("bf16x3", "tf32"), idx("none", "tf32x3")) is None  # never timed


def test_once_a_path_is_timed_slower_the_tuner_spends_its_evaluations_on_the_fast_one() -> None:
    """A categorical choice that makes every tile size 1.9x or 3.5x slower (an operand split into more MMAs): once
    a config on it is timed against the same tiles on the fast path, neither the walk nor the sampler's proposals
    go back to it; the fast path's tiles get the evaluations."""
    space = ParamSpace.from_dict({"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "warps": [2, 4, 8],
                                  "PATH": ["fast", "slow", "slower"]})
    factor = {"fast": 1.0, "slow": 1.9, "slower": 3.5}

    def ms(idx: tuple[int, ...]) -> float:
        tiles = 1.0 + 0.3 * abs(idx[0] - 2) + 0.2 * abs(idx[1] - 3) + 0.1 * abs(idx[2] - 1)
        return tiles * factor[space.params_of(idx)["PATH"]]

    late = []
    for seed in range(6):
        tuner = StructureTuner(space=space, seed=seed, sampler="cmaes")
        paths = []
        for _ in range(40):
            idx = tuner.ask()
            tuner.tell(idx, ms(idx))
            paths.append(space.params_of(idx)["PATH"])
        late.append(sum(p != "fast" for p in paths[20:]))
        assert space.params_of(tuner.best()[0])["PATH"] == "fast"
    assert sum(late) / len(late) <= 2  # of the last 20 evaluations; 7-11 before paths were compared


def test_a_resource_failure_on_one_path_does_not_condemn_larger_tiles_on_another() -> None:
    """A split into fp32 parts needs twice the shared memory: its failures say nothing about the bf16 split."""
    space = ParamSpace.from_dict({"BLOCK": [32, 64, 128, 256], "stages": [2, 3, 4], "SPLIT": ["bf16x3", "tf32x3"]})

    def idx(block, stages, split):
        return space.indices_of({"BLOCK": block, "stages": stages, "SPLIT": split})

    # tf32x3 fails from BLOCK 128 x 3 stages on; bf16x3 ran up to BLOCK 128 x 4 stages
    failed = [idx(128, 3, "tf32x3"), idx(256, 2, "tf32x3"), idx(256, 4, "bf16x3")]
    ran = [idx(32, 2, "tf32x3"), idx(64, 3, "tf32x3"), idx(128, 2, "tf32x3"), idx(128, 4, "bf16x3"),
           idx(64, 4, "bf16x3"), idx(32, 3, "bf16x3")]
    model = FailureModel(space).fit(failed + ran, [True] * len(failed) + [False] * len(ran))
    assert model.predict(idx(128, 3, "bf16x3")) == 0.0  # no larger than a bf16x3 config that ran
    assert model.predict(idx(256, 3, "tf32x3")) == 1.0  # no smaller than a tf32x3 config that failed


@pytest.mark.parametrize("path", [FP8, ACC])
def test_the_default_stops_proposing_the_unsafe_value_and_finds_the_best_correct_config(path: Path) -> None:
    landscape = Landscape.load(path)
    incorrect = []
    for seed in range(6):
        history = run_search(landscape, get_strategy("default", seed=seed, initial=[landscape.seed_candidate()]),
                             budget=30, seed=seed)
        incorrect.append(sum(r.status is EvalStatus.INCORRECT for _, r in history))
    assert sum(incorrect) / len(incorrect) <= 3  # of 30 evaluations; half the space is incorrect
    res = search_bench(path, budget=30, repeats=12, strategy="default", seed=500)
    assert res["p_within_2pct"] >= 0.75  # measured 0.97-1.0 over 200 repeats
    assert res["random_p_within_2pct"] <= 0.4 and res["median_best_ratio"] < res["random_median_best_ratio"]


def test_the_knowledge_base_names_unsafe_values_by_task_dtype_and_the_search_never_proposes_them() -> None:
    landscape = Landscape.load(FP32)
    unsafe = knowledge.unsafe_values(landscape.space, "float32", landscape.arch)
    assert unsafe == [{"SPLIT": "none", "PRECISION": "tf32"}]
    assert knowledge.unsafe_values(landscape.space, "bfloat16") == []  # tf32 changes nothing on 16-bit operands
    assert knowledge.unsafe_values({"ACC": ["fp32", "fp16"]}, "float16") == [{"ACC": "fp16"}]
    for seed in range(3):
        strategy = get_strategy("default", seed=seed, initial=[landscape.seed_candidate()], unsafe=unsafe)
        history = run_search(landscape, strategy, budget=30, seed=seed)
        assert not [c.params for c, _ in history if c.params["SPLIT"] == "none" and c.params["PRECISION"] == "tf32"]


@pytest.mark.parametrize("kb", [True, False])
def test_a_campaign_tells_its_search_what_the_knowledge_base_says_before_anything_runs(tmp_path, kb) -> None:
    """The search benchmark's "as a campaign runs it" rows told the default strategy the unsafe values; the
    campaign itself did not. Now a campaign with the knowledge base on gives its default strategy the values the
    rules call unsafe for the task's dtype and the parameters that grow together; with it off, neither."""
    from evoforge.campaign import Campaign
    from evoforge.config import config_from_dict

    config = config_from_dict({"campaign": {"backend": "interpreter", "budget_evals": 2, "out": str(tmp_path / "r"),
                                            "knowledge": kb},
                               "tasks": [{"spec": "L1/1", "set": {"N": 32}}]}, source="test")
    campaign = Campaign(config, progress=False)
    campaign.prepare()
    strategy = campaign.tasks["level1/1_Square_matrix_multiplication_"].strategy
    assert ({"SPLIT": "none", "PRECISION": "tf32"} in strategy.unsafe) is kb  # L1/1 is fp32: plain tf32 fails it
    assert (("BLOCK_M", "num_warps") in strategy.moves_together) is kb
    # the template's tuner keeps what its SPACE holds: no plain tf32 there (it fails an fp32 task), both tile axes
    tuner = strategy._tuner(strategy.seed_structure)
    assert tuner.known_causes == () and len(tuner.together) == (2 if kb else 0)


@pytest.mark.parametrize("name", ["default", "stages", "cutegen"])
def test_every_strategy_with_the_tuner_behind_it_takes_the_knowledge_bases_hints(name) -> None:
    """The LLM loops (Xe-Forge's stages, CuTeGen's) tune with the default's tuner once their loop is done; the
    campaign gives the knowledge base's hints only to a strategy that takes them, and these did not."""
    from evoforge.search.strategies import strategy_accepts
    from evoforge.search.strategy_spec import build_strategy

    landscape = Landscape.load(FP32)
    hints = {"unsafe": [{"SPLIT": "none", "PRECISION": "tf32"}], "moves_together": [["BLOCK", "warps"]]}
    assert all(strategy_accepts(name, k) for k in hints)
    strategy = build_strategy(name, seed=0, initial=[landscape.seed_candidate()], options=hints)
    tuner = strategy if name == "default" else strategy.tuner
    assert tuner.unsafe == hints["unsafe"] and tuner.moves_together == [("BLOCK", "warps")]


def test_the_knowledge_base_calls_unsafe_exactly_the_fp32_dot_precisions_the_judge_rejects() -> None:
    """The rules and the chain's comparator must agree: a precision the judge admits (a 3-pass split) named unsafe
    is a fast, correct choice the search never tries, and one the judge rejects offered to a mutator is a wasted
    evaluation. Each precision Triton offers is emulated on fp32 inputs (TF32: 11 significant bits; bf16x3:
    hi*hi + hi*lo + lo*hi of bf16 parts; tf32x3 the same of TF32 parts; bf16x6 the six products of three bf16
    parts) and judged as judge/chain.py judges it."""
    import torch
    from evoforge.judge import compare

    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(128, 2048, generator=gen), torch.randn(2048, 128, generator=gen)

    def parts(x, n, cut):
        out, rest = [], x
        for _ in range(n):
            part = cut(rest)
            out.append(part.double())
            rest = rest - part
        return out

    def bf16(x):
        return x.bfloat16().float()

    def tf32(x):
        return compare.round_significand(x, 11)

    def split(cut, n, terms):
        pa, pb = parts(a, n, cut), parts(b, n, cut)
        return sum(pa[i] @ pb[j] for i, j in terms).float()

    three = [(0, 0), (0, 1), (1, 0)]
    outputs = {"ieee": a @ b, "tf32": split(tf32, 1, [(0, 0)]), "bf16x3": split(bf16, 2, three),
               "tf32x3": split(tf32, 2, three), "bf16x6": split(bf16, 3, [*three, (1, 1), (0, 2), (2, 0)])}
    rounded = compare.round_significand([a, b])
    rejected = {name for name, out in outputs.items() if not compare.compare_outputs(
        out, a @ b, reference64=lambda: a.double() @ b.double(),
        rounded64=lambda: rounded[0].double() @ rounded[1].double()).ok}
    assert rejected == {"tf32"}
    space = {"INPUT_PRECISION": list(outputs)}
    assert knowledge.unsafe_values(space, "float32") == [{"INPUT_PRECISION": v} for v in sorted(rejected)]
    split_space = {"SPLIT": ["bf16x3", "none"], "PRECISION": list(outputs)}
    assert knowledge.unsafe_values(split_space, "float32") == [
        {"SPLIT": "none", "PRECISION": v} for v in sorted(rejected)]
    for arch in ("nvidia-sm90", "intel-xe2"):  # what a mutator offers an fp32 task: every precision the judge admits
        assert set(knowledge.allowed_input_precisions(arch, "float32")) == set(outputs) - rejected
        assert set(knowledge.allowed_input_precisions(arch, "float32", fp32_tolerance="loose")) == set(outputs)


def test_checkpoints_read_one_search_at_several_budgets() -> None:
    res = search_bench(FP32, budget=50, repeats=6, strategy="random", baseline=None, checkpoints=(20, 30, 50))
    p = [res["at"][b]["p_within_2pct"] for b in ("20", "30", "50")]
    assert p == sorted(p) and res["at"]["50"]["p_within_2pct"] == res["p_within_2pct"]
