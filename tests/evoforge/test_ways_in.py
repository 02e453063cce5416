"""Ways in (issue 15) through a real campaign: a plain kernel is tuned; one with nothing to tune says why it stops."""

from __future__ import annotations

import json

import optuna

from tests.conftest import FIXTURES, run_cli


def test_a_plain_kernel_is_tuned_and_an_untunable_one_says_why_it_stopped(tmp_path):
    config = tmp_path / "ways.toml"
    config.write_text(f"""
[campaign]
name = "ways"
budget_evals = 3
operators = ["params", "rule"]

[[tasks]]
spec = "L1/19"
seed_kernel = "{FIXTURES / 'relu' / 'plain_constants.py'}"
set = {{batch_size = 4, dim = 1000}}

[[tasks]]
spec = "L1/20"
seed_kernel = "{FIXTURES / 'leaky' / 'plain_computed.py'}"
set = {{batch_size = 4, dim = 1000}}
""")
    out = tmp_path / "run"
    proc = run_cli("run", str(config), "--backend", "interpreter", "--out", str(out), "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])["tasks"]
    relu, leaky = summary["level1/19_ReLU"], summary["level1/20_LeakyReLU"]
    # The plain ReLU kernel got a SPACE from its launch constants and spent its whole budget on it.
    assert relu["evaluations"] == 3 and "stopped" not in relu
    trials = optuna.load_study(study_name="ways/level1/19_ReLU", storage=f"sqlite:///{out}/optuna.db").trials
    assert trials[0].user_attrs["operator"] == "lifted-seed"
    assert {json.loads(t.user_attrs["params"])["BLOCK"] for t in trials} > {1024}
    # The LeakyReLU kernel has nothing to lift: it stops early, and says why and what would let it go on.
    assert leaky["evaluations"] < 3
    assert "stopped after" in leaky["stopped"] and "SPACE" in leaky["stopped"] and "--llm-model" in leaky["stopped"]
