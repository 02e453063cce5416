"""What the campaign's driver spends per child, counted (never timed): a structure's source is read once for all its
configs, a result cache's entry costs no fsync, and the walk's question "what does this categorical path cost against
that one" reads a table, not every pair of configs ever timed (issue AA: at 128 simulated devices the driver's source
parses were ~2 ms of its ~12 ms per evaluation, the cache's fsyncs ~0.7 ms; on the fp32 GEMM's landscape the 300th
proposal took 0.4 s, all of it in reading the pairs)."""

from __future__ import annotations

import ast
import itertools
import math
import os
import random
import uuid
from pathlib import Path

from evoforge.knowledge import is_legal
from evoforge.search.cache import ResultCache
from evoforge.search.store import OptunaStore
from evoforge.search.strategies.space import ParamSpace
from evoforge.search.tuning.choices import ChoiceEffects

from evoforge.core import Candidate, EvalResult, EvalStatus, declared_space, source_language
from tests.conftest import FIXTURES


def _counting(monkeypatch, module, name: str) -> list[int]:
    calls = [0]
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_every_config_of_a_structure_is_judged_from_its_source_parsed_once_per_reader(monkeypatch) -> None:
    """Before, each child's legality, language and declared space parsed its whole source again (3 parses a child)."""
    kernel = next(p for p in sorted((FIXTURES / "relu").glob("*.py")) if "SPACE" in p.read_text())
    source = kernel.read_text() + f"\n# {uuid.uuid4()}\n"  # a source no earlier test has parsed
    space, _ = declared_space(source)
    parses = _counting(monkeypatch, ast, "parse")
    configs = [{name: values[i % len(values)] for name, values in space.items()} for i in range(20)]
    for config in configs:
        is_legal(config, "nvidia-sm90", source=source)
        assert source_language(source) == "triton"
        got_space, got_params = declared_space(source)
        got_space[next(iter(got_space))].append("changed by its caller")  # each caller has its own copy
        got_params["changed"] = True
    assert parses[0] <= 3, parses[0]  # once per reader (the rules' source model, the language, the space), not per child
    assert declared_space(source) == (space, declared_space(source)[1]) and "changed" not in declared_space(source)[1]


def test_a_cache_entry_is_not_fsynced_and_a_candidate_file_is(tmp_path: Path, monkeypatch) -> None:
    """A cache entry a power cut loses costs one evaluation again; a candidate's source is the record's own."""
    fsyncs = _counting(monkeypatch, os, "fsync")
    child = Candidate.from_source('SPACE = {"BLOCK": [64]}\nPARAMS = {"BLOCK": 64}\n', task="t")
    result = EvalResult(status=EvalStatus.OK, runtime_ms=1.0, speedup=2.0)
    cache = ResultCache(tmp_path / "cache", backend="interpreter", arch="nvidia-sm90", options={})
    cache.put({"task": "t"}, child, result)
    assert fsyncs[0] == 0 and cache.get({"task": "t"}, child).speedup == 2.0
    OptunaStore(run_dir=tmp_path, campaign="c").save_candidate(child)
    assert fsyncs[0] == 1


def test_a_candidates_identity_is_hashed_once(monkeypatch) -> None:
    """The driver reads a child's ``id`` and ``structure_id`` many times on its way (the route, the cache, the
    record, a task's coverage): an Inductor seed's source is tens of kilobytes, hashed once, not at every read. The
    ids are the same values as ever (stored records are keyed by them)."""
    import hashlib

    source = f'# {uuid.uuid4()}\nSPACE = {{"BLOCK": [64, 128]}}\nPARAMS = {{"BLOCK": 64}}\n' + "x = 1\n" * 5000
    child = Candidate.from_source(source, task="t").with_params({"BLOCK": 128})
    expected_id = hashlib.sha256((source + "\0" + '{"BLOCK": 128}').encode()).hexdigest()[:16]
    expected_structure = hashlib.sha256(source.encode()).hexdigest()[:16]
    hashes = _counting(monkeypatch, hashlib, "sha256")
    for _ in range(100):
        assert child.id == expected_id and child.structure_id == expected_structure
    assert hashes[0] <= 2, hashes[0]


def _timed_paths(seed: int) -> tuple[ParamSpace, ChoiceEffects, dict[tuple[int, ...], float]]:
    """The fp32 GEMM's kind of space: tiles, and a SPLIT whose paths cost 1x, 1.9x, 3.5x; PRECISION read only where
    SPLIT is none (inert elsewhere, learned as configs one flip apart time the same)."""
    space = ParamSpace.from_dict({"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "warps": [2, 4, 8],
                                  "SPLIT": ["bf16x3", "tf32x3", "none"], "PRECISION": ["tf32", "tf32x3", "ieee"]})
    rng = random.Random(seed)
    factor = {"bf16x3": 1.0, "tf32x3": 1.9, "none": 3.5}
    precision = {"tf32": 1.0, "tf32x3": 1.4, "ieee": 2.2}
    choices, timed = ChoiceEffects(space), {}
    for idx in rng.sample(list(space.all_indices()), 400):
        p = space.params_of(idx)
        ms = (1.0 + 0.3 * abs(idx[0] - 2) + 0.2 * abs(idx[1] - 3) + 0.1 * idx[4]) * factor[p["SPLIT"]] * (
            precision[p["PRECISION"]] if p["SPLIT"] == "none" else 1.0) * (1.0 + 0.02 * rng.random())
        timed[idx] = ms
        choices.observe(idx, ms, timed)
    return space, choices, timed


def _ratio_over_pairs(choices: ChoiceEffects, anchor, to) -> float | None:
    """``ChoiceEffects.ratio`` as it was first written: the mean over every pair, read whole at each question."""
    start, end = choices.path(anchor), choices.path(to)
    if start == end:
        return 0.0
    seen = [r if (choices.path(a), choices.path(b)) == (start, end) else -r for a, b, r in choices._pairs
            if {(choices.path(a), choices.path(b))} & {(start, end), (end, start)}]
    return sum(seen) / len(seen) if seen else None


def _part_costs_over_pairs(choices: ChoiceEffects, start, end) -> bool:
    moved = {k for k in range(len(start)) if start[k] != end[k]}
    for a, b, ratio in choices._pairs:
        pa, pb = choices.path(a), choices.path(b)
        for x, y, r in ((pa, pb, ratio), (pb, pa, -ratio)):
            part = {k for k in range(len(x)) if x[k] != y[k]}
            if (r > math.log1p(choices.margin) and part and part <= moved
                    and all(x[k] == start[k] and y[k] == end[k] for k in part)):
                return True
    return False


def test_what_a_path_costs_is_the_mean_over_every_pair_timed_between_the_two_paths() -> None:
    """The table gives the very answers (to the bit) that reading every pair gives, before and after a choice is
    learned inert (which merges paths, and pairs with them)."""
    for seed in range(3):
        space, choices, timed = _timed_paths(seed)
        assert choices.any_inert  # PRECISION where SPLIT is not none
        configs = random.Random(seed).sample(list(space.all_indices()), 25)
        for anchor, to in itertools.product(configs, configs):
            assert choices.ratio(anchor, to) == _ratio_over_pairs(choices, anchor, to)
            start, end = choices.path(anchor), choices.path(to)
            assert choices._part_costs(start, end) == _part_costs_over_pairs(choices, start, end)
        assert any(choices.costs(a, t) for a, t in itertools.product(configs, configs))


def test_a_question_about_two_paths_reads_no_pair_of_configs(monkeypatch) -> None:
    """The walk asks what a path costs against another a thousand times per proposal; before, each question walked
    every pair timed (here ~1,300: two path look-ups each), so a task's proposals slowed as its history grew."""
    space, choices, _ = _timed_paths(0)
    assert len(choices._pairs) > 1000
    configs = random.Random(1).sample(list(space.all_indices()), 30)
    split = space.names.index("SPLIT")
    other = tuple((v + 1) % 3 if d == split else v for d, v in enumerate(configs[0]))
    choices.ratio(configs[0], other)  # two paths: the table is built, once, after the last inert choice was learned
    paths = _counting(monkeypatch, ChoiceEffects, "path")
    for anchor, to in itertools.product(configs, configs):
        choices.costs(anchor, to)
    assert paths[0] <= 4 * len(configs) ** 2, paths[0]  # anchor's and destination's, for the ratio and the parts


def test_a_campaign_of_hundreds_of_structures_parses_each_once_and_its_cache_stays_bounded(monkeypatch) -> None:
    """A campaign's tasks' children interleave: 300 structures asked in turn, three rounds. The knowledge base's model
    of a source was kept for the last 64 sources, so every child of a campaign with more live structures parsed its
    source again (150 ms for a 44 KB Inductor seed); kept by source characters, each is parsed once. Adversarial: a
    source larger than the whole budget is answered right, and what is kept never passes the budget."""
    from evoforge.knowledge import source_model

    kernel = next(p for p in sorted((FIXTURES / "relu").glob("*.py")) if "SPACE" in p.read_text()).read_text()
    sources = [kernel + f"\n# structure {i} {uuid.uuid4()}\n" for i in range(300)]
    parses = _counting(monkeypatch, ast, "parse")
    for _ in range(3):
        for source in sources:
            assert source_language(source) == "triton"
            assert declared_space(source)[0]
            assert is_legal(dict(declared_space(source)[1]), "nvidia-sm90", source=source) is not None
    assert parses[0] <= 3 * len(sources), parses[0]  # once per reader and source, not once per child

    @source_model.per_source(1000)
    def length(source: str) -> int:
        return len(source)

    assert length("x" * 5000) == 5000 and length.cache_held() == (0, 0)  # too large to keep: answered, not kept
    for i in range(50):
        assert length(f"{i:03d}" * 100) == 300
        assert length.cache_held()[1] <= 1000
    assert length.cache_held() == (3, 900)
