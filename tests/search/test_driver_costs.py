"""What the campaign's driver spends per child, counted (never timed): a structure's source is read once for all its
configs, and a result cache's entry costs no fsync (issue AA: at 128 simulated devices the driver's source parses
were ~2 ms of its ~12 ms per evaluation, the cache's fsyncs ~0.7 ms)."""

from __future__ import annotations

import ast
import os
import uuid
from pathlib import Path

from evoforge.knowledge import is_legal
from evoforge.search.cache import ResultCache
from evoforge.search.store import OptunaStore

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
