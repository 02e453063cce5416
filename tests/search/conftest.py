"""Landscapes for the search tests: two recorded on an H200 (copies of shared/landscapes) and a tiny synthetic one."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from evoforge.backends.replay import Landscape

LANDSCAPES = Path(__file__).resolve().parent / "landscapes"
MATMUL = LANDSCAPES / "matmul_bf16_4096.json"
SOFTMAX = LANDSCAPES / "softmax_fp16_32768x1024.json"

TINY_SPACE = {"BLOCK": [16, 32, 64, 128], "num_warps": [1, 2, 4], "order": ["row", "col"]}


def tiny_landscape(*, all_fail: bool = False) -> Landscape:
    """24 configs: one best (BLOCK=64, 4 warps, row), resource failures at BLOCK=128 with 4 warps."""
    rows = []
    for block, warps, order in itertools.product(*TINY_SPACE.values()):
        cfg = {"BLOCK": block, "num_warps": warps, "order": order}
        if all_fail or (block == 128 and warps == 4):
            rows.append({**cfg, "ms": None, "status": "OutOfResources"})
            continue
        ms = 1.0 + 0.3 * abs(block.bit_length() - 7) + 0.2 * abs(warps - 4) + (0.05 if order == "col" else 0.0)
        rows.append({**cfg, "ms": ms, "rel_err": 1e-3, "status": "ok"})
    return Landscape(path="tiny.json", kernel="tiny", gpu="NVIDIA H200", arch="nvidia-sm90", space=TINY_SPACE,
                     rows=tuple(rows), baseline_ms={"torch": 2.0})


@pytest.fixture
def tiny() -> Landscape:
    return tiny_landscape()


@pytest.fixture(scope="session")
def matmul() -> Landscape:
    return Landscape.load(MATMUL)
