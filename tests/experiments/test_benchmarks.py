"""The GPU benchmark scripts run end to end on the interpreter, so a device call never finds them broken."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "experiments" / "benchmarks"
SMALL = ["--set", "M=64", "--set", "N=64", "--set", "K=64"]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_throughput_sweeps_every_mode_and_compares_their_timings(tmp_path):
    out = tmp_path / "throughput.json"
    _run("throughput.py", "--backend", "interpreter", *SMALL, "--evals", "2", "--modes", "1x1", "1x2",
         "--out", str(out))
    runs = json.loads(out.read_text())["runs"]
    assert [r["mode"] for r in runs] == ["1x1", "1x2"]
    for r in runs:
        assert r["statuses"] == {"ok": 2} and r["evals_per_min"] > 0
    assert runs[1]["timing_diff_median"] is not None  # the same configurations, timed in both modes


@pytest.mark.slow
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
