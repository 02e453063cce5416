"""The seed templates: clean under every arch's hard rules, and correct when run (Triton interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoforge import knowledge
from evoforge.core import Candidate

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["matmul_grouped", "softmax_rows"])
@pytest.mark.parametrize("arch", ["nvidia-sm90", "nvidia-sm80", "nvidia-sm89", "intel-xe2", "intel-xe-hpc"])
def test_templates_break_no_hard_rule(name: str, arch: str) -> None:
    cand = Candidate.from_source(knowledge.template_source(name))
    assert cand.space and cand.params
    assert [v for v in knowledge.validate(cand, arch) if v.severity == "hard"] == []


def test_template_names() -> None:
    assert {"matmul_grouped", "softmax_rows"} <= set(knowledge.template_names())


RUN = r'''
import importlib.util, sys, torch
def load(path):
    spec = importlib.util.spec_from_file_location("cand", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
torch.manual_seed(0)
mm = load(sys.argv[1])
for dtype, tol in ((torch.float32, 1e-4), (torch.float16, 5e-2)):
    for cfg in (dict(GROUP_M=8, PERSISTENT=0, INPUT_PRECISION="ieee"),
                dict(GROUP_M=1, PERSISTENT=1, INPUT_PRECISION="tf32x3")):
        mm.PARAMS.update(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, **cfg)
        A, B = torch.randn(150, 70, dtype=dtype), torch.randn(70, 130, dtype=dtype)
        err = (mm.ModelNew()(A, B).double() - A.double() @ B.double()).abs().max().item()
        assert err < tol, (dtype, cfg, err)
sm = load(sys.argv[2])
for looped in (0, 1):
    sm.PARAMS.update(LOOPED=looped, BLOCK=256)
    x = torch.randn(7, 1000)
    err = (sm.ModelNew()(x) - torch.softmax(x, -1)).abs().max().item()
    assert err < 1e-6, (looped, err)
print("templates ok")
'''


def test_templates_compute_the_right_function_in_every_form(tmp_path: Path) -> None:
    """Each structural switch the rule operators flip (GROUP_M, PERSISTENT, INPUT_PRECISION, LOOPED) keeps the
    result right, at sizes that are not multiples of the tiles."""
    folder = REPO / "knowledge" / "templates"
    script = tmp_path / "run_templates.py"
    script.write_text(RUN)
    proc = subprocess.run([sys.executable, str(script), str(folder / "matmul_grouped.py"),
                           str(folder / "softmax_rows.py")], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "templates ok" in proc.stdout
