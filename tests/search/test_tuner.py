"""The parts of the default tuner a user notices: failures are learned, and the space is an ordered grid."""

from __future__ import annotations

from evoforge.search.strategies.space import ParamSpace
from evoforge.search.tuning.bandit import BetaBandit
from evoforge.search.tuning.surrogate import FailureModel
from evoforge.search.tuning.tuner import EXPLORE, WALK, StructureTuner


def _walk_finds_best(space: ParamSpace, ms, told: list[tuple[int, ...]], steps: int, seed: int,
                     **options: float) -> bool:
    """Whether a walk told ``told`` first finds the 1.0 config of ``ms`` within ``steps`` more evaluations."""
    tuner = StructureTuner(space=space, seed=seed, sampler="random", n_start=1, explore_every=0, **options)
    for idx in told:
        tuner.tell(idx, ms(idx))
    for _ in range(steps):
        idx = tuner.ask()
        tuner.tell(idx, ms(idx))
    return tuner.best()[1] == 1.0


def test_numeric_choices_are_ordered_and_categorical_ones_are_not() -> None:
    space = ParamSpace.from_dict({"BLOCK": [256, 64, 128], "layout": ["row", "col"]})
    assert space.names == ("BLOCK", "layout")
    assert space.values == ((64, 128, 256), ("row", "col")) and space.ordinal == (True, False)
    assert sorted(space.neighbours((1, 0))) == [(0, 0), (1, 1), (2, 0)]  # 128 -> 64 or 256, never 64 -> 256
    assert space.indices_of({"BLOCK": 128, "layout": "col"}) == (1, 1)
    assert space.indices_of({"BLOCK": 96, "layout": "col"}) is None


def test_a_config_larger_than_one_that_failed_is_predicted_to_fail() -> None:
    space = ParamSpace.from_dict({"BLOCK": [16, 32, 64, 128], "stages": [1, 2, 3, 4], "warps": [1, 2, 4]})
    xs, failed = [], []
    for b in range(4):
        for s in range(4):
            xs.append((b, s, 1))
            failed.append(b + s >= 5)  # shared memory grows with both
    model = FailureModel(space).fit(xs, failed)
    assert model.predict((3, 3, 0)) == 1.0  # at least as large as a failure in BLOCK and stages
    assert model.predict((0, 0, 2)) == 0.0  # at most as large as a config that ran


def test_the_tuner_stops_proposing_configs_that_cannot_fit() -> None:
    space = ParamSpace.from_dict({"BLOCK": [16, 32, 64, 128, 256], "stages": [1, 2, 3, 4, 5]})

    def runtime(idx: tuple[int, ...]) -> float | None:
        b, s = idx
        if b + s >= 6:
            return None  # OutOfResources
        return 1.0 / (1 + b + s) + 0.01 * abs(b - s)  # fastest just inside the boundary

    tuner = StructureTuner(space=space, seed=0)
    failures = 0
    for _ in range(14):
        idx = tuner.ask()
        failures += runtime(idx) is None
        tuner.tell(idx, runtime(idx))
    best = tuner.best()
    assert best is not None and sum(best[0]) == 5  # on the boundary: the fastest configs that fit
    assert failures <= 4  # of the 10 configs that do not fit


def test_a_walk_stuck_at_a_local_optimum_four_steps_from_the_best_escapes() -> None:
    """Two basins: the walk starts in the worse one (1.05), whose two-step neighbourhood holds nothing faster; the
    best (1.0) is four steps away, past configs slower than the local optimum. Once most of the local optimum's
    neighbourhood has run without gain, the walk goes on from the next best configs, past its own reach."""

    space = ParamSpace.from_dict({f"P{d}": [1, 2, 3, 4, 5, 6] for d in range(4)})
    trap, best = (1, 1, 1, 1), (3, 3, 1, 1)

    def ms(idx: tuple[int, ...]) -> float:
        return min(1.05 + 0.1 * sum(abs(i - j) for i, j in zip(idx, trap, strict=True)),
                   1.0 + 0.03 * sum(abs(i - j) for i, j in zip(idx, best, strict=True)))

    def finds_best(seed: int, **options: int) -> bool:
        return _walk_finds_best(space, ms, [trap], 59, seed, **options)

    assert sum(finds_best(seed) for seed in range(10)) >= 7  # measured 9 of 10
    assert sum(finds_best(seed, patience=0) for seed in range(10)) <= 2  # no escape: 0 of 10


def test_a_tile_grown_with_its_warps_is_one_step_of_the_walk() -> None:
    """The H200 fp32 GEMM's trap: the walk settles at 64-row tiles with 4 warps (1.05 here, 1.07x there), and the
    best (1.0) has twice the rows, twice the warps and a deeper K tile: three steps, past configs all slower than
    the trap. The knowledge base's register rule says the rows and the warps grow together (the accumulator's
    registers per thread stay the same), so that pair is one step and the best is within the walk's two."""

    space = ParamSpace.from_dict({"BLOCK_M": [32, 64, 128, 256], "num_warps": [2, 4, 8, 16],
                                  "BLOCK_K": [16, 32, 64], "num_stages": [2, 3, 4]})
    trap = space.indices_of({"BLOCK_M": 64, "num_warps": 4, "BLOCK_K": 16, "num_stages": 3})
    best = space.indices_of({"BLOCK_M": 128, "num_warps": 8, "BLOCK_K": 32, "num_stages": 3})

    def ms(idx: tuple[int, ...]) -> float:
        return 1.0 if idx == best else 1.05 + 0.1 * sum(abs(i - j) for i, j in zip(idx, trap, strict=True))

    together = [("BLOCK_M", "num_warps")]
    assert sum(_walk_finds_best(space, ms, [trap], 20, seed, moves_together=together)
               for seed in range(40)) >= 20  # measured 27 of 40
    assert sum(_walk_finds_best(space, ms, [trap], 20, seed) for seed in range(40)) <= 4  # measured 0 of 40
    # shrinking is not a joint step (both ways cost the H200 fp8-operand GEMM 0.94 -> 0.72 at 30)
    tuner = StructureTuner(space=space, seed=0, moves_together=together)
    shrunk = space.indices_of({"BLOCK_M": 32, "num_warps": 2, "BLOCK_K": 32, "num_stages": 3})
    assert best in tuner._reach(trap) and shrunk not in tuner._reach(trap)


def test_a_stuck_walk_goes_on_from_a_config_as_fast_as_its_incumbent() -> None:
    """The incumbent (1.05) is a local optimum; a config within 2% of it (1.06: the transposed tile, on the H200
    fp8-operand GEMM) sits far from it, and the best (1.0) is two steps from that config, five from the incumbent.
    Once the walk is stuck it walks both neighbourhoods; anchored at the incumbent alone it rarely got there."""

    space = ParamSpace.from_dict({f"P{d}": [1, 2, 3, 4, 5] for d in range(3)})
    trap, tie, best = (3, 1, 1), (1, 3, 1), (1, 4, 2)

    def ms(idx: tuple[int, ...]) -> float:
        if idx == best:
            return 1.0
        return min(1.05 + 0.1 * sum(abs(i - j) for i, j in zip(idx, trap, strict=True)),
                   1.06 + 0.1 * sum(abs(i - j) for i, j in zip(idx, tie, strict=True)))

    def finds_best(seed: int, **options: float) -> bool:
        return _walk_finds_best(space, ms, [trap, tie], 30, seed, **options)

    assert sum(finds_best(seed) for seed in range(40)) >= 18  # measured 24 of 40
    assert sum(finds_best(seed, ties=0.0) for seed in range(40)) <= 8  # the incumbent alone: 4 of 40


def test_a_categorical_value_the_start_never_ran_is_run_at_the_incumbents_tiles() -> None:
    """Four precision paths; the start ran three of them (the incumbent on the second fastest, 1.2x, at the best
    tiles), and the fastest path, d, never. A path never timed is neither mirrored nor transferred to, and in the
    walk's draw its flip is one neighbour of dozens (L2/1's convolution on an H100: a walk on the bf16 split first
    ran the rounded-TF32 path after 26 evaluations). The walk now runs it at the incumbent's tiles once three
    results in a row have not improved the incumbent."""
    space = ParamSpace.from_dict({"M": [1, 2, 3, 4], "N": [1, 2, 3, 4], "K": [1, 2, 3], "P": ["a", "b", "c", "d"]})
    factor, centre = {"a": 1.2, "b": 2.5, "c": 3.0, "d": 1.0}, {"M": 3, "N": 2, "K": 2}

    def ms(idx: tuple[int, ...]) -> float:
        p = space.params_of(idx)
        return (1 + 0.1 * sum(abs(p[k] - v) for k, v in centre.items())) * factor[p["P"]]

    told = [space.indices_of({"M": 3, "N": 2, "K": 2, "P": "a"}), space.indices_of({"M": 1, "N": 4, "K": 1, "P": "b"}),
            space.indices_of({"M": 4, "N": 1, "K": 3, "P": "c"})]
    assert sum(_walk_finds_best(space, ms, told, 6, seed) for seed in range(40)) >= 36  # measured 40 of 40
    assert sum(_walk_finds_best(space, ms, told, 6, seed, probe_untried=False) for seed in range(40)) <= 14  # 6


def test_a_path_timed_as_fast_at_the_incumbents_tiles_is_walked_into_whatever_it_cost_elsewhere() -> None:
    """Path b cost 1.33x path a at one tile and 1.02x at the incumbent's: the mean over the two pairs says b costs
    time (1.17x), but where a path's cost moves with the tiles, the pair at the incumbent's tiles is the evidence for
    a move from it, so the walk may enter b with a tile change; elsewhere the mean still decides."""
    space = ParamSpace.from_dict({"M": [1, 2, 3, 4], "N": [1, 2, 3, 4], "P": ["a", "b"]})
    at = lambda m, n, p: space.indices_of({"M": m, "N": n, "P": p})  # noqa: E731
    times = {at(1, 1, "a"): 1.5, at(1, 1, "b"): 2.0, at(3, 3, "a"): 1.0, at(3, 3, "b"): 1.02}
    for local_cost, allowed in ((True, True), (False, False)):
        tuner = StructureTuner(space=space, seed=0, sampler="random", n_start=1, explore_every=0,
                               local_cost=local_cost)
        for idx, ms in times.items():
            tuner.tell(idx, ms)
        assert tuner.choices.costs(at(3, 3, "a"), at(4, 3, "b"))  # the mean over both pairs
        assert tuner._worth_flipping(at(3, 3, "a"), at(4, 3, "b")) is allowed
        assert not tuner._worth_flipping(at(2, 2, "a"), at(2, 1, "b"))  # not timed at these tiles: the mean


def test_a_failure_is_not_certain_on_a_path_seen_to_do_different_work() -> None:
    """The fp32 GEMM's tf32x3 split is twice the time of its bf16x3 split at equal tiles and holds larger operand
    tiles. A tf32x3 failure of 128-wide tiles made the resource model certain the same tiles fail on bf16x3 (the
    whole landscape's best config, recorded on the H200, was then never proposed). Once the two paths are timed
    apart by more than 1.3x, a failure is certain only on its own path."""
    space = ParamSpace.from_dict({"BLOCK": [32, 64, 128, 256], "stages": [2, 3, 4], "SPLIT": ["bf16x3", "tf32x3"]})

    def at(block: int, stages: int, split: str) -> tuple[int, ...]:
        idx = space.indices_of({"BLOCK": block, "stages": stages, "SPLIT": split})
        assert idx is not None
        return idx

    def tuner_after(**options: float) -> StructureTuner:
        tuner = StructureTuner(space=space, seed=0, **options)
        for block, stages in ((32, 2), (64, 2), (32, 3)):
            tuner.tell(at(block, stages, "tf32x3"), 2.0 / block)
            tuner.tell(at(block, stages, "bf16x3"), 1.0 / block)  # half the time at the same tiles
        tuner.tell(at(128, 3, "tf32x3"), None)  # out of resources on tf32x3
        tuner.tell(at(64, 4, "tf32x3"), None)
        return tuner

    assert tuner_after()._pfail(at(128, 4, "tf32x3")) == 1.0  # larger than a failure on its own path
    assert tuner_after()._pfail(at(128, 3, "bf16x3")) < 0.5  # the same tiles on the cheaper path: proposed
    assert tuner_after(own_path_factor=0.0)._pfail(at(128, 3, "bf16x3")) == 1.0  # read across paths: condemned


def test_a_walk_on_a_slower_path_moves_its_best_tiles_to_the_faster_path() -> None:
    """Two paths timed apart (the tf32x3 split twice the time of bf16x3 at equal tiles), and the fastest config so
    far on the slower one: its tiles on the faster path are predicted twice as fast, and are run next, not left to
    a walk that happens to flip the choice (on the recorded fp32 GEMM one walk stayed on tf32x3 for 25 of 30)."""
    space = ParamSpace.from_dict({"BLOCK": [32, 64, 128, 256], "stages": [2, 3, 4], "SPLIT": ["bf16x3", "tf32x3"]})

    def at(block: int, stages: int, split: str) -> tuple[int, ...]:
        idx = space.indices_of({"BLOCK": block, "stages": stages, "SPLIT": split})
        assert idx is not None
        return idx

    def first_move(seed: int, **options: bool) -> tuple[int, ...]:
        tuner = StructureTuner(space=space, seed=seed, sampler="random", n_start=1, explore_every=0, **options)
        tuner.tell(at(32, 2, "bf16x3"), 1.0)
        tuner.tell(at(32, 2, "tf32x3"), 2.0)
        tuner.tell(at(128, 3, "tf32x3"), 0.8)  # the incumbent, on the slower path
        return tuner.ask()

    assert all(first_move(seed) == at(128, 3, "bf16x3") for seed in range(10))
    assert sum(first_move(seed, transfer=False) == at(128, 3, "bf16x3") for seed in range(10)) <= 3


def test_a_choice_seen_to_cost_time_is_not_paid_for_again_with_another_value_beside_it() -> None:
    """The tf32x3 split, timed with PRECISION tf32, costs twice the bf16x3 split at equal tiles. With PRECISION ieee
    it is a path never timed, but the part of the move that was timed (the split) costs the same there: the walk
    does not flip into it (before, each PRECISION the slower split can carry cost one more evaluation)."""
    space = ParamSpace.from_dict({"BLOCK": [32, 64, 128], "stages": [2, 3], "SPLIT": ["bf16x3", "tf32x3"],
                                  "PRECISION": ["tf32", "ieee"]})

    def at(block: int, stages: int, split: str, precision: str) -> tuple[int, ...]:
        idx = space.indices_of({"BLOCK": block, "stages": stages, "SPLIT": split, "PRECISION": precision})
        assert idx is not None
        return idx

    def split_moves(**options: bool) -> list[tuple[int, ...]]:
        tuner = StructureTuner(space=space, seed=0, sampler="random", n_start=1, explore_every=0, **options)
        tuner.tell(at(32, 2, "bf16x3", "tf32"), 1.0)
        tuner.tell(at(32, 2, "tf32x3", "tf32"), 2.0)
        tuner.tell(at(64, 2, "bf16x3", "tf32"), 0.6)  # the incumbent
        pool = tuner._pool(at(64, 2, "bf16x3", "tf32"), tuner._proposed_kernels())
        d = space.names.index("SPLIT")
        return [n for n in pool if space.values[d][n[d]] == "tf32x3"]

    assert split_moves() == []
    assert split_moves(compose=False)  # each PRECISION on the slower split was worth a run


def test_the_walk_and_the_explorer_share_the_proposals_by_what_improves_the_incumbent() -> None:
    """After the start, while nothing has failed, the walk and the exploring sampler (TPE) each propose as often as
    their proposals have improved the incumbent on this task; once anything fails, the walk alone proposes (the
    failures shape the space, and the walk follows them). Where the knowledge base gave hints of the space, the
    explorer has no share: every third proposal is the tuner's sampler's, as before."""
    bandit = BetaBandit((WALK, EXPLORE), seed=0)
    for _ in range(8):
        bandit.update(WALK, False)
        bandit.update(EXPLORE, True)
    assert sum(bandit.select() == EXPLORE for _ in range(200)) >= 180

    space = ParamSpace.from_dict({"BLOCK": [16, 32, 64, 128, 256], "num_warps": [1, 2, 4, 8]})

    def ms(idx: tuple[int, ...]) -> float:
        return 1.0 + 0.2 * idx[0] + 0.1 * idx[1]  # the fastest in the smallest corner, away from a centred start

    tuner = StructureTuner(space=space, seed=0, sampler="cmaes")
    sources = []
    for _ in range(14):
        idx = tuner.ask()
        sources.append(tuner._source_of.get(idx))
        tuner.tell(idx, ms(idx))
    assert {WALK, EXPLORE} <= set(sources[5:]) and set(sources[:5]) == {None}  # CMA-ES's start, then both
    assert sum(tuner.sources.outcomes[EXPLORE]) > 0 and tuner.explored > 0
    tuner.tell(tuner.ask(), None)  # a resource failure
    assert all(tuner._source() == WALK for _ in range(20))

    hinted = StructureTuner(space=space, seed=0, sampler="cmaes", moves_together=[("BLOCK", "num_warps")])
    for _ in range(14):
        idx = hinted.ask()
        assert hinted._source_of.get(idx) != EXPLORE
        hinted.tell(idx, ms(idx))
    assert hinted.explored == 0 and sum(map(sum, hinted.sources.outcomes.values())) > 0


def test_the_explorer_proposes_what_a_study_rebuilt_from_every_result_would_adding_each_result_once() -> None:
    """The exploring sampler is asked each round as if its study were built then from every result (the configs
    under way as running trials, which TPE's constant liar reads), but the study grows by one trial a result
    instead of being rebuilt (issue AA: the rebuild's cost grew with each task's history). With four configs in
    flight and a rebuilt study as the yardstick at every round (nothing fails here: a failure ends the explorer's
    share)."""
    from evoforge.search.strategies.proposals import FailureKind
    from evoforge.search.tuning.optuna_tuner import OptunaTuner

    space = ParamSpace.from_dict({"BLOCK": [16, 32, 64, 128, 256], "num_warps": [1, 2, 4, 8], "stages": [1, 2, 3]})

    def ms(idx: tuple[int, ...]) -> float:
        return 1.0 + 0.2 * abs(idx[0] - 1) + 0.1 * idx[1] + 0.05 * idx[2]

    tuner = StructureTuner(space=space, seed=3, sampler="cmaes")
    real_explore, rounds, checked = tuner._explore, [0], []

    def rebuilt_then_real() -> tuple[int, ...] | None:  # the pre-AA explorer, asked once, beside the real one
        fresh = OptunaTuner(space=space, sampler="tpe", seed=tuner._explorer_seed + tuner.explored,
                            n_startup_trials=max(tuner.n_start, 1))
        for idx, value in tuner.results.items():
            fresh.tell(idx, value, penalize=tuner.kinds.get(idx) is not FailureKind.PROPERTY)
        for idx in tuner.seen - tuner.results.keys():
            fresh.enqueue(idx)
        expected = fresh.ask()
        got = real_explore()
        rounds[0] += 1
        if not tuner._twin(expected):  # a twin is asked again: the first answer is the one compared
            checked.append((expected, got))
        return got

    tuner._explore = rebuilt_then_real  # type: ignore[method-assign]
    in_flight: list[tuple[int, ...]] = []
    for _ in range(40):
        while len(in_flight) < 4:
            idx = tuner.ask()
            if idx is None:
                break
            in_flight.append(idx)
        idx = in_flight.pop(0)
        tuner.tell(idx, ms(idx))
    assert rounds[0] >= 5 and len(checked) >= 5
    assert all(expected == got for expected, got in checked), checked
    complete = [t for t in tuner._explorer.study.trials if t.state.name == "COMPLETE"]
    assert len(complete) == len(tuner.results)  # each result once, not once a round
