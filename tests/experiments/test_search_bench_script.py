"""experiments/benchmarks/search_bench.py --only: one strategy's rows re-run, the others kept, and the table says
which commit measured which rows (a partial re-run must never pass for a whole one)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "benchmarks" / "search_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("search_bench_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _row(strategy: str, **extra) -> dict:
    return {"landscape": "a.json", "strategy": strategy, "batch": 1, "configs": 10,
            "at": {str(n): {"p_within_2pct": 0.5, "median_best_ratio": 1.01} for n in (20, 30, 50)}, **extra}


def test_only_keeps_the_other_strategies_rows_with_the_commit_that_measured_them(bench, tmp_path: Path) -> None:
    earlier = {"meta": {"repeats": 200, "commit": "aaa1111", "date": "2026-11-30 19:16 UTC"},
               "results": [_row("default"), _row("random")]}
    (tmp_path / "search_bench.json").write_text(json.dumps(earlier))
    kept, meta = bench._kept_rows(tmp_path, ["default"], 200)
    assert [(r["strategy"], r["commit"]) for r in kept] == [("random", "aaa1111")]
    rows = [_row("default", commit="bbb2222"), *kept]
    line = bench._commits_line({"commit": "bbb2222", "kept_from": {"aaa1111": meta["date"]}}, rows)
    assert "default (evoforge) at commit bbb2222" in line
    assert "random at commit aaa1111 (kept from the run of 2026-11-30 19:16 UTC)" in line


def test_only_refuses_an_earlier_run_of_another_size_naming_the_file_and_the_fix(bench, tmp_path: Path) -> None:
    (tmp_path / "search_bench.json").write_text(json.dumps({"meta": {"repeats": 50, "commit": "a"}, "results": []}))
    with pytest.raises(SystemExit, match=r"search_bench.json: the earlier run has 50 repeats, not 200; pass --repeats 50"):
        bench._kept_rows(tmp_path, ["default"], 200)
    with pytest.raises(SystemExit, match="run without --only"):
        bench._kept_rows(tmp_path / "missing", ["default"], 200)
