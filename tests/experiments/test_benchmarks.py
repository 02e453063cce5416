"""The GPU benchmark scripts run end to end on the interpreter, so a device call never finds them broken."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "experiments" / "benchmarks"
FIXTURES = REPO / "tests" / "fixtures"
SMALL = ["--set", "M=64", "--set", "N=64", "--set", "K=64"]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_throughput_sweeps_every_mode_and_compares_their_timings(tmp_path):
    out = tmp_path / "throughput.json"
    _run("throughput.py", "--backend", "interpreter", *SMALL, "--evals", "2", "--modes", "1x1", "1x2",
         "--out", str(out))
    runs = json.loads(out.read_text())["runs"]
    assert [r["mode"] for r in runs] == ["1x1", "1x2"]
    for r in runs:
        assert r["statuses"] == {"ok": 2} and r["evals_per_min"] > 0
    assert runs[1]["timing_diff_median"] is not None  # the same configurations, timed in both modes


def test_suite_writes_a_row_and_refloor_keeps_its_times(tmp_path):
    # the evaluation budget ends the campaign; the minutes are only a backstop (a busy machine is slow)
    _run("h200_suite.py", "--tasks", "experiments/tasks/matmul_bf16_4096.py", *SMALL, "--budget", "2",
         "--minutes", "8", "--out", str(tmp_path))
    row = pd.read_csv(tmp_path / "summary.csv").iloc[0]
    assert row["task"] == "matmul_bf16_4096" and bool(row["correct"]) and row["evaluations"] == 2
    _run("h200_suite.py", "--refloor", *SMALL, "--out", str(tmp_path))
    again = pd.read_csv(tmp_path / "summary.csv").iloc[0]
    assert again["best_ms"] == row["best_ms"] and again["memory_floor_ms"] > 0
    assert "matmul_bf16_4096" in (tmp_path / "README.md").read_text()


def _load(script: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"), BENCH / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_busy_is_read_for_the_gpus_the_process_uses(monkeypatch):
    """nvidia-smi numbers every GPU on the host; a run on CUDA_VISIBLE_DEVICES=1 must report GPU 1's samples."""
    sampler = _load("throughput.py").UtilizationSampler()
    sampler.samples = {0: [90.0, 90.0], 1: [10.0, 30.0]}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert sampler.mean(1) == pytest.approx(0.2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert sampler.mean(2) == pytest.approx(0.55)


def test_suite_times_the_kernels_in_mirrored_order():
    """eager, compile and best are timed A B C C B A and each gets the mean of its two timings."""
    suite = _load("h200_suite.py")
    calls: list[str] = []
    times = suite.balanced_bench({k: (lambda k=k: calls.append(k)) for k in ("eager", "compile", "best")})
    runs = [k for i, k in enumerate(calls) if i == 0 or calls[i - 1] != k]
    assert runs == ["eager", "compile", "best", "compile", "eager"]  # the two "best" timings run back to back
    assert calls.count("eager") == calls.count("compile") == calls.count("best") > 0
    assert set(times) == {"eager", "compile", "best"}


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
