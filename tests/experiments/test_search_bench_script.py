"""experiments/benchmarks/search_bench.py --only: one strategy's rows re-run, the others kept, and the table says
which commit measured which rows (a partial re-run must never pass for a whole one)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.experiments.conftest import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("search_bench")


def _row(strategy: str, **extra) -> dict:
    return {"landscape": "a.json", "strategy": strategy, "batch": 1, "configs": 10,
            "at": {str(n): {"p_within_2pct": 0.5, "median_best_ratio": 1.01} for n in (20, 30, 50)}, **extra}


def _tiny_landscape(tmp_path: Path) -> Path:
    """A four-config H200 landscape whose fast half (ACC fp16) is incorrect."""
    tiny = tmp_path / "tiny.json"
    tiny.write_text(json.dumps({"gpu": "NVIDIA H200", "dtype": "torch.float16", "space": {"B": [1, 2], "ACC": ["fp32", "fp16"]},
                                "rows": [{"B": 1, "ACC": "fp32", "ms": 1.0, "status": "ok"},
                                         {"B": 2, "ACC": "fp32", "ms": 0.5, "status": "ok"},
                                         {"B": 1, "ACC": "fp16", "ms": 0.4, "status": "incorrect"},
                                         {"B": 2, "ACC": "fp16", "ms": 0.3, "status": "incorrect"}]}))
    return tiny


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


def test_new_scores_what_the_earlier_run_lacks_and_nothing_already_measured(bench) -> None:
    have = {("matmul_bf16_4096.json", s, b, kb) for s, b, kb in bench.STRATEGIES}
    have |= {("fp16_acc.json", "default", 1, False), ("fp16_acc.json", "random", 1, True)}

    def wanted(name, **kw):
        return [c for c in bench.STRATEGIES if bench.wanted((name, *c), have, **kw)]

    assert wanted("matmul_bf16_4096.json", only=[], new=True) == []
    assert wanted("matmul_fp32_split_4096.json", only=[], new=True) == bench.STRATEGIES  # a new landscape
    # a landscape added with the default's rows only gets the strategies it lacks (TPE, CMA-ES, ... beside them)
    assert ("bayes", 1, False) in wanted("fp16_acc.json", only=[], new=True)
    assert ("default", 1, False) not in wanted("fp16_acc.json", only=[], new=True)
    assert ("random", 1, True) not in wanted("fp16_acc.json", only=[], new=True)
    assert wanted("matmul_bf16_4096.json", only=["default"], new=False) == [
        c for c in bench.STRATEGIES if c[0] == "default"]


def test_new_adds_a_landscape_and_keeps_every_earlier_row_even_those_not_named(bench, tmp_path: Path,
                                                                                monkeypatch) -> None:
    """Landscapes recorded one at a time are scored one call at a time; the table keeps the rows measured before."""
    tiny = _tiny_landscape(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    earlier = {"meta": {"repeats": 1, "commit": "aaa1111", "date": "2026-11-30 19:16 UTC"},
               "kinds": {"a.json": "recorded (NVIDIA H200)"}, "results": [_row("default"), _row("random")]}
    (out / "search_bench.json").write_text(json.dumps(earlier))
    monkeypatch.setattr(sys, "argv", ["search_bench.py", "--new", "--repeats", "1", "--workers", "1",
                                      "--out", str(out), str(tiny)])
    assert bench.main() == 0
    rows = json.loads((out / "search_bench.json").read_text())["results"]
    assert [(r["landscape"], r["strategy"]) for r in rows[:2]] == [("a.json", "default"), ("a.json", "random")]
    added = [(r["strategy"], r["batch"], bool(r.get("kb"))) for r in rows if r["landscape"] == "tiny.json"]
    assert added == bench.STRATEGIES  # every strategy, the knowledge base's rows too (ACC fp16 is unsafe)
    table = (out / "search_bench.md").read_text()
    assert "| a.json | recorded (NVIDIA H200) |" in table and "| tiny.json | recorded (NVIDIA H200) |" in table


def test_only_kb_re_runs_the_knowledge_base_rows_and_keeps_every_other(bench, tmp_path: Path, monkeypatch) -> None:
    """The knowledge base's rows (default and random, as a campaign with it on runs them) are re-measured alone;
    the table shows them in their own bar, every other row kept with the commit that measured it."""
    tiny = _tiny_landscape(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    old_kb = _row("default", kb=True)
    old_kb["landscape"] = "tiny.json"
    earlier = {"meta": {"repeats": 1, "commit": "aaa1111", "date": "2026-11-30 19:16 UTC"},
               "kinds": {"a.json": "recorded (NVIDIA H200)"}, "results": [_row("default"), _row("random"), old_kb]}
    (out / "search_bench.json").write_text(json.dumps(earlier))
    monkeypatch.setattr(sys, "argv", ["search_bench.py", "--only-kb", "--repeats", "1", "--workers", "1",
                                      "--out", str(out), str(tiny)])
    assert bench.main() == 0
    rows = json.loads((out / "search_bench.json").read_text())["results"]
    assert [(r["landscape"], r["strategy"], bool(r.get("kb")), r["commit"] == "aaa1111") for r in rows] == [
        ("a.json", "default", False, True), ("a.json", "random", False, True),
        ("tiny.json", "default", True, False), ("tiny.json", "random", True, False)]
    table = (out / "search_bench.md").read_text()
    assert "## The bar as a campaign runs it: the knowledge base on" in table
    assert "| tiny.json | recorded (NVIDIA H200) | 0 of 4 |" in table


def test_the_bar_is_the_campaigns_and_a_landscape_the_knowledge_base_says_nothing_of_keeps_its_default_rows(
        bench, tmp_path: Path, monkeypatch) -> None:
    """The first table is the search as a campaign runs it (the knowledge base on): a landscape it says nothing of
    (the softmax recording) is there with the default's own figures, not left out; --render writes it again from
    the json without running anything."""
    kb_row = _row("default", kb=True, illegal_configs=3)
    kb_row["landscape"] = "b.json"
    rnd_kb = _row("random", kb=True)
    rnd_kb["landscape"] = "b.json"
    data = {"meta": {"repeats": 1, "commit": "aaa1111", "date": "2026-12-02 09:00 UTC", "machine": "m",
                     "python": "3", "optuna": "5", "cmaes": "0", "numpy": "2"},
            "kinds": {"a.json": "recorded (NVIDIA H200)", "b.json": "derived"},
            "results": [_row("default"), _row("random"), kb_row, rnd_kb]}
    (tmp_path / "search_bench.json").write_text(json.dumps(data))
    monkeypatch.setattr(sys, "argv", ["search_bench.py", "--render", "--out", str(tmp_path)])
    assert bench.main() == 0
    table = (tmp_path / "search_bench.md").read_text()
    bar = table.split("## With the knowledge base off")[0]
    assert "| a.json | recorded (NVIDIA H200) | none (the knowledge base says nothing here) | 0.50 | 0.50 |" in bar
    assert "| b.json | derived | 3 of 10 | 0.50 | 0.50 |" in bar
    monkeypatch.setattr(sys, "argv", ["search_bench.py", "--render", "--out", str(tmp_path / "none")])
    assert bench.main() == 2


def test_floor_measures_the_default_as_a_campaign_runs_it_and_the_samplers_it_must_not_fall_below(bench) -> None:
    rows = [(s, b, kb) for s, b, kb in bench.STRATEGIES if bench.floor_row(s, b, kb, says_anything=True)]
    assert rows == [("default", 1, True), ("bayes", 1, False), ("bayes:cmaes", 1, False), ("evolution", 1, False),
                    ("random", 1, False), ("random", 1, True)]
    plain = [(s, b, kb) for s, b, kb in bench.STRATEGIES if bench.floor_row(s, b, kb, says_anything=False)]
    assert ("default", 1, False) in plain and ("default", 1, True) not in plain
