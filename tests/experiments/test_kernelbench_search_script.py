"""The KernelBench search script (experiments/benchmarks/kernelbench_search.py) end to end on the interpreter, so a
device call never finds it broken. A file of its own beside test_benchmarks.py: each holds about a minute of
scripts, and the suite's workers (one file each) run them side by side."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.experiments.test_benchmarks import BENCH, REPO, _load, _run

FIXTURES = REPO / "tests" / "fixtures"


@pytest.mark.slow
def test_kernelbench_search_runs_a_campaign_from_inductor_seeds_under_each_rule(tmp_path):
    """Two tasks no template serves, captured on the CPU: LeakyReLU, and L2/9, whose GEMM torch.compile leaves to
    cuBLAS and which now starts under the strict rule too (the capture's GEMM build, Inductor's Triton template):
    both start from their Inductor seed and keep a correct kernel, over two calls (a device call's time limit cuts
    a campaign; the next call resumes it)."""
    # The two captures as the script makes them on the CPU (``--capture-one``; capturing is tested with the seed
    # builder), committed so that this test runs the search, not three minutes of Inductor's CPU autotuning.
    (tmp_path / "captures").mkdir()
    for name in ("L1_20.json", "L2_9.json"):
        shutil.copy(FIXTURES / "kernelbench_search" / name, tmp_path / "captures" / name)
    # A first call whose share of time (a second of search) ends before every task has its evaluations: what is not
    # done waits in OUT/run; the next call resumes it to the budget and times both tasks.
    first = _run("kernelbench_search.py", "--smoke", "--budget", "3", "--minutes", "0.02", "--out", str(tmp_path))
    rows_file = tmp_path / "search.jsonl"
    assert "the next call resumes it" in first.stdout
    assert not rows_file.exists() or len(rows_file.read_text().splitlines()) < 2  # a task is left for the next call
    _run("kernelbench_search.py", "--smoke", "--budget", "3", "--out", str(tmp_path))
    rows = {r["spec"]: r for r in map(json.loads, (tmp_path / "search.jsonl").read_text().splitlines())}
    assert rows["L1/20"]["rule"] == "strict" and rows["L2/9"]["rule"] == "strict" and rows["L2/9"]["allow_ops"] == []
    for row in rows.values():
        assert row["seed_status"] == "ok" and row["best_operator"] and row["evaluations"] == 3
    selection = json.loads((tmp_path / "selection.json").read_text())
    assert [p["spec"] for p in selection["picked"]] == ["L1/20", "L2/9"]
    text = _load("kernelbench_search.py").summarize([tmp_path / "search.jsonl"], tmp_path / "selection.json", tmp_path)
    assert "a correct kernel: 2 of 2" in text
    # The seeds count in the coverage too: the rule run from the search, the other from the capture's conversion.
    cover = _load("kernelbench_search.py").coverage_rows(list(rows.values()), selection, tmp_path / "captures")
    got = {(r["spec"], r["rule"]): r["status"] for r in cover}
    assert got == {("L1/20", "strict"): "ok", ("L2/9", "strict"): "ok"}
    # A call may name its tasks among the picks (the biggest together); a task not picked is one line, exit 2.
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    wrong = subprocess.run([sys.executable, str(BENCH / "kernelbench_search.py"), "--smoke", "--tasks", "L1/19",
                            "--out", str(tmp_path)], cwd=REPO, env=env, text=True, capture_output=True, timeout=600)
    assert wrong.returncode == 2 and "--tasks: L1/19 not among the 2 picked tasks" in wrong.stderr
    again = _run("kernelbench_search.py", "--smoke", "--tasks", "L2/9", "--out", str(tmp_path))
    assert "nothing left to run" in again.stdout


def test_a_task_the_search_skipped_is_named_in_the_coverage_as_every_other(tmp_path):
    """A task skipped for want of a seed became a coverage row named "L1/7" where every other row reads
    "level1/7_Matmul..."; it is named by its file too."""
    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "L1_19.json").write_text(json.dumps({"no_seed": "torch.compile failed on this task (X)"}))
    cover = _load("kernelbench_search.py").coverage_rows([], {"picked": [], "skipped": [{"spec": "L1/19"}]}, captures)
    assert {(r["task"], r["rule"], r["status"]) for r in cover} == {("level1/19_ReLU", "strict", "no_seed"),
                                                                 ("level1/19_ReLU", "vendor", "no_seed")}
