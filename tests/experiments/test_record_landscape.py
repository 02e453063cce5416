"""The landscape recorder runs end to end on the interpreter (--smoke), so the GPU call never finds it broken, and
what it writes is a landscape the replay backend and the search benchmark read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from evoforge.backends.replay import Landscape

from evoforge.core import EvalStatus

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "experiments" / "benchmarks" / "record_landscape.py"
NAMES = ["matmul_fp32_split_4096", "matmul_fp16_acc_4096", "matmul_fp16_fp8_4096"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("landscapes")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--workers", "1", "--out", str(out)], cwd=REPO,
                          env=env, text=True, capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(name in proc.stdout for name in NAMES)  # one summary line per landscape
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_choice_is_recorded_and_replays(smoke: Path, name: str) -> None:
    landscape = Landscape.load(smoke / f"{name}.json")
    for param, values in landscape.space.items():
        if not all(isinstance(v, int) for v in values):  # every value of a categorical choice is exercised
            assert {r[param] for r in landscape.rows} == set(values), param
    for row in landscape.rows:
        assert row["status"] in ("ok", "incorrect") and row["ms"] is not None
        result = landscape.evaluate(landscape.params_of(row))
        assert result.status is (EvalStatus.OK if row["status"] == "ok" else EvalStatus.INCORRECT)
    data = json.loads((smoke / f"{name}.json").read_text())
    assert data["recorded"]["complete"] and not data["recorded"]["timing_representative"]


def test_fp8_operands_are_judged_incorrect_by_the_chain_comparator(smoke: Path) -> None:
    rows = {r["OPERANDS"]: r for r in json.loads((smoke / "matmul_fp16_fp8_4096.json").read_text())["rows"]}
    assert rows["fp16"]["status"] == "ok"
    assert rows["fp8"]["status"] == "incorrect" and rows["fp8"]["rel_err"] > 10 * rows["fp16"]["rel_err"]


def test_configs_that_build_one_kernel_share_one_measurement(smoke: Path) -> None:
    rows = json.loads((smoke / "matmul_fp32_split_4096.json").read_text())["rows"]
    shared = [r for r in rows if "same_as" in r]
    assert shared and all(r["SPLIT"] != "none" for r in shared)  # PRECISION is read only when SPLIT is none
    for r in shared:
        first = next(m for m in rows if all(m[k] == v for k, v in r["same_as"].items()) and "same_as" not in m)
        assert (r["ms"], r["status"]) == (first["ms"], first["status"])


def _recorder():
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_landscape_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("bits", "status"), [(16, "ok"), (11, "incorrect")])
def test_an_fp32_result_is_judged_as_the_chain_judges_it(bits: int, status: str) -> None:
    """A 3-pass split keeps 16 significant bits of each fp32 input and the chain passes it; plain TF32 keeps 11
    and fails. The recorder must give the chain's verdict, or its landscape teaches the search a false cause."""
    import types

    import torch
    from evoforge.backends import compare

    recorder = _recorder()
    gen = torch.Generator().manual_seed(0)
    inputs = (torch.randn(256, 512, generator=gen), torch.randn(512, 256, generator=gen))

    class ModelNew(torch.nn.Module):
        def forward(self, a, b):  # the dot at the precision of a kernel that keeps ``bits`` of each input
            a, b = compare.round_significand([a, b], bits)
            return (a.double() @ b.double()).float()

    template = types.SimpleNamespace(PARAMS={}, ModelNew=ModelNew)
    references = recorder.float64_references(inputs, compare.round_significand)
    row = recorder.measure(template, {}, inputs, recorder.reference(*inputs), references, compare.compare_outputs,
                           smoke=True)
    assert row["status"] == status, row
