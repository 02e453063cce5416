"""A campaign's set-up overlapped with its evaluations (issue Y): the device evaluates the tasks whose seeds are ready
while torch.compile captures the others, and a task joins when its capture arrives."""

from __future__ import annotations

import json

import optuna
import pytest

from tests.conftest import PLAIN_RELU_TASK, cli_main

#: A KernelBench-format task (an elementwise op) whose torch.compile capture cannot finish until the campaign has
#: evaluated something: in the capture's process (``python -m evoforge.mutators.inductor_capture``) its import waits until
#: the run's result cache holds a result, then writes what it saw. Deterministic: no timing decides the order.
GATED_TASK = '''
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

if sys.argv and sys.argv[0].endswith("inductor_capture.py") and os.environ.get("GATE_CACHE"):
    _cache, _deadline = Path(os.environ["GATE_CACHE"]), time.monotonic() + 600
    while time.monotonic() < _deadline and not (_cache.is_dir() and any(_cache.rglob("*.json"))):
        time.sleep(0.1)
    Path(os.environ["GATE_SAW"]).write_text("a result" if any(_cache.rglob("*.json")) else "nothing in 600 s")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.abs(x) * 2.0


batch_size = 4
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_a_task_with_a_seed_is_evaluated_while_another_is_still_captured(tmp_path, capsys, monkeypatch, caplog):
    """Before, every capture finished before the evaluators started: the gated capture would have waited for a
    result that could not come (600 s, then 'nothing'). Now the ReLU's seed is evaluated while the other task's
    capture is under way; that task joins when its capture arrives, and both spend their budget."""
    task_file = tmp_path / "abs_double.py"
    task_file.write_text(GATED_TASK)
    out = tmp_path / "run"
    saw = tmp_path / "saw.txt"
    monkeypatch.setenv("GATE_CACHE", str(out / "cache"))
    monkeypatch.setenv("GATE_SAW", str(saw))
    config = tmp_path / "overlap.toml"
    config.write_text(f"""
[campaign]
name = "overlap"
budget_evals = 2
operators = ["params"]
workers = 1
{PLAIN_RELU_TASK}
[[tasks]]
spec = "{task_file}"
""")
    proc = cli_main(capsys, "run", str(config), "--backend", "interpreter", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert saw.read_text() == "a result"  # the capture went on while the ReLU was evaluated
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["not_started"] == {}
    tasks = summary["tasks"]
    assert set(tasks) == {"level1/19_ReLU", "abs_double"}, list(tasks)
    for name, task in tasks.items():
        assert task["evaluations"] == 2 and task["best_speedup"] is not None, (name, task)
    assert "1 task(s) (and 1 joining as torch.compile's captures of them arrive)" in proc.stderr
    assert any("abs_double: its seed arrived; it joins the campaign" in r.getMessage() for r in caplog.records)
    storage = f"sqlite:///{out}/optuna.db"
    joined = optuna.load_study(study_name="overlap/abs_double", storage=storage).trials
    assert joined[0].user_attrs["operator"] == "inductor-seed"
    first_relu = optuna.load_study(study_name="overlap/level1/19_ReLU", storage=storage).trials[0]
    assert first_relu.datetime_complete < joined[0].datetime_start
