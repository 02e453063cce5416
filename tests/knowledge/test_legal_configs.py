"""The search space narrowed by hard rules, against what a real H200 did with every config of a space."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoforge import knowledge

REPO = Path(__file__).resolve().parents[2]


def landscape(name: str) -> dict:
    for folder in (REPO.parent / "shared" / "landscapes", REPO / "shared" / "landscapes"):
        if (folder / name).is_file():
            return json.loads((folder / name).read_text())
    pytest.skip(f"landscape {name} not found beside the repo (../shared/landscapes)")


def _key(config: dict, names: list[str]) -> tuple:
    return tuple(config[n] for n in names)


def test_legal_configs_exclude_every_out_of_resources_row_and_keep_every_ok_row() -> None:
    """matmul_bf16_4096 on the H200: 96 of 432 configs raised OutOfResources. The grouped-matmul template
    (the landscape's kernel, written as a candidate) must lose exactly those."""
    data = landscape("matmul_bf16_4096.json")
    names = list(data["space"])
    legal = {_key(c, names) for c in knowledge.legal_configs(
        data["space"], "nvidia-sm90", source=knowledge.template_source("matmul_grouped"))}
    out_of_resources = [r for r in data["rows"] if r["status"] == "OutOfResources"]
    ran = [r for r in data["rows"] if r["status"] == "ok"]
    assert len(out_of_resources) == 96 and len(ran) == 336
    assert [r for r in out_of_resources if _key(r, names) in legal] == []
    dropped = [r for r in ran if _key(r, names) not in legal]
    assert dropped == []
    assert len(legal) == 336


def test_the_same_space_without_a_source_uses_the_parameter_names() -> None:
    data = landscape("matmul_bf16_4096.json")
    names = list(data["space"])
    by_name = {_key(c, names) for c in knowledge.legal_configs(data["space"], "nvidia-sm90", elem_bytes=2)}
    assert by_name == {_key(r, names) for r in data["rows"] if r["status"] == "ok"}


def test_softmax_space_loses_nothing() -> None:
    """All 120 softmax configs (up to 32 warps) ran on the H200; the rules must not remove one."""
    data = landscape("softmax_fp16_32768x1024.json")
    assert len(knowledge.legal_configs(data["space"], "nvidia-sm90")) == len(data["rows"]) == 120


def test_each_arch_applies_its_own_budget() -> None:
    """sm89 (99 KiB) keeps fewer configs than sm80 (163 KiB) under the same num_stages - 1 buffering."""
    space = {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64, 128],
             "num_warps": [4, 8], "num_stages": [2, 3, 4, 5]}
    src = knowledge.template_source("matmul_grouped")
    counts = {a: len(knowledge.legal_configs(space, a, source=src, elem_bytes=2))
              for a in ("nvidia-sm90", "nvidia-sm80", "nvidia-sm89")}
    assert counts["nvidia-sm80"] > counts["nvidia-sm89"] > 0
    assert counts["nvidia-sm90"] == 168  # 336 of the 432-row landscape, over the 2 GROUP_M values
    tile = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4, "num_warps": 8}  # 3 x 48 KiB on sm89
    assert knowledge.is_legal(tile, "nvidia-sm80", source=src, elem_bytes=2)[0]
    assert not knowledge.is_legal(tile, "nvidia-sm89", source=src, elem_bytes=2)[0]


def test_is_legal_names_the_broken_rules() -> None:
    src = knowledge.template_source("matmul_grouped")
    ok, violations = knowledge.is_legal({"BLOCK_M": 128, "num_warps": 8}, "nvidia-sm90", source=src)
    assert ok and violations == []
    ok, violations = knowledge.is_legal(
        {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 5, "num_warps": 3}, "nvidia-sm90",
        source=src)
    assert not ok
    assert {v.rule for v in violations} == {"shared-memory-budget", "num-warps-legal"}
    assert all(v.severity == "hard" for v in violations)


def test_intel_legality_reads_grf_mode_and_warps() -> None:
    assert knowledge.is_legal({"num_warps": 64}, "intel-xe2")[0]
    assert not knowledge.is_legal({"num_warps": 64, "grf_mode": "256"}, "intel-xe2")[0]
    assert not knowledge.is_legal({"num_warps": 4, "warp_size": 8}, "intel-xe-hpc")[0]
    assert not knowledge.is_legal({"num_warps": 128}, "intel-xe2")[0]


def test_a_split_precision_gemm_counts_each_distinct_operand_tile() -> None:
    """hi*hi + hi*lo + lo*hi reads four tiles per K step, each multi-buffered: 128x256x32 at 5 stages fits
    shared memory as one bf16 operand pair (120 KiB of 227) but not as two (240 KiB)."""
    src = knowledge.template_source("matmul")  # SPLIT bf16x3 by default; tile sizes unpacked in its launcher
    config = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "num_stages": 5}
    ok, violations = knowledge.is_legal({**config, "SPLIT": "bf16x3"}, "nvidia-sm90", source=src)
    assert not ok and "one per distinct dot operand" in violations[0].message
    single = knowledge.template_source("matmul_bf16")  # one dot, bf16 operands: the same tile fits
    assert knowledge.is_legal(config, "nvidia-sm90", source=single)[0]
