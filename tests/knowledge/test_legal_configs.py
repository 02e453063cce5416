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


def _spills(row: dict) -> bool:
    """The fp32 accumulator alone over the 255 registers an NVIDIA thread can have."""
    return row["BLOCK_M"] * row["BLOCK_N"] // (32 * row["num_warps"]) > 255


def test_legal_configs_exclude_every_out_of_resources_row_and_keep_every_ok_row() -> None:
    """matmul_bf16_4096 on the H200: 96 of 432 configs raised OutOfResources. The grouped-matmul template
    (the landscape's kernel, written as a candidate) must lose exactly those, and the 56 that ran with an
    accumulator past the register file, every one at least 3.5x slower than the best: no config worth running."""
    data = landscape("matmul_bf16_4096.json")
    names = list(data["space"])
    legal = {_key(c, names) for c in knowledge.legal_configs(
        data["space"], "nvidia-sm90", source=knowledge.template_source("matmul_grouped"))}
    out_of_resources = [r for r in data["rows"] if r["status"] == "OutOfResources"]
    ran = [r for r in data["rows"] if r["status"] == "ok"]
    assert len(out_of_resources) == 96 and len(ran) == 336
    assert [r for r in out_of_resources if _key(r, names) in legal] == []
    dropped = [r for r in ran if _key(r, names) not in legal]
    assert dropped == [r for r in ran if _spills(r)] and len(dropped) == 56
    best = min(r["ms"] for r in ran)
    assert min(r["ms"] for r in dropped) > 3.5 * best
    assert len(legal) == 280


def test_the_same_space_without_a_source_uses_the_parameter_names() -> None:
    data = landscape("matmul_bf16_4096.json")
    names = list(data["space"])
    by_name = {_key(c, names) for c in knowledge.legal_configs(data["space"], "nvidia-sm90", elem_bytes=2)}
    assert by_name == {_key(r, names) for r in data["rows"] if r["status"] == "ok" and not _spills(r)}


def test_an_accumulator_past_the_register_file_is_illegal_and_its_fp16_half_is_not() -> None:
    """256x128 over 4 warps is 256 fp32 registers a thread for the accumulator alone (NVIDIA allows 255):
    4.7x the best on the H200 fp16 GEMM recording. 8 warps halve it; an fp16 accumulator (out_dtype) too."""
    src = knowledge.template_source("matmul_fp16")
    tile = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "GROUP_M": 8, "OPERANDS": "fp16"}
    ok, violations = knowledge.is_legal({**tile, "num_warps": 4, "ACC": "fp32"}, "nvidia-sm90", source=src)
    assert not ok and [v.rule for v in violations] == ["accumulator-registers"]
    assert "256 registers per thread" in violations[0].message
    assert knowledge.is_legal({**tile, "num_warps": 8, "ACC": "fp32"}, "nvidia-sm90", source=src)[0]
    assert knowledge.is_legal({**tile, "num_warps": 4, "ACC": "fp16"}, "nvidia-sm90", source=src)[0]
    # Intel's register file is another rule (grf_pressure, advice): not this one.
    assert knowledge.is_legal({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 4}, "intel-xe2")[0]


def test_no_recorded_config_near_the_best_is_illegal() -> None:
    """The hard rules against every H200 GEMM landscape recorded with a template of this checkout: no correct
    config within 1.3x of the best may be refused, whatever rule refuses it (a refused config is never run)."""
    folder = REPO / "experiments" / "results" / "search" / "landscapes"
    for path in sorted(folder.glob("matmul_*.json")):  # every recording (derived_* are stand-ins)
        data = json.loads(path.read_text())
        src = (REPO / data["kernel"]).read_text()
        ran = [r for r in data["rows"] if r["status"] == "ok"]
        best = min(r["ms"] for r in ran)
        near = [r for r in ran if r["ms"] < 1.3 * best]
        refused = [r for r in near if not knowledge.is_legal(
            {**data["fixed_params"], **{k: r[k] for k in data["space"]}}, "nvidia-sm90", source=src)[0]]
        assert near and refused == [], path.name


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
    assert counts["nvidia-sm90"] == 140  # 280 of the 432-row landscape, over the 2 GROUP_M values
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
    assert {v.rule for v in violations} == {"shared-memory-budget", "num-warps-legal", "accumulator-registers"}
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


# The persistent-TMA configurations of the H200 throughput sweep (experiments/results/h200/throughput.json,
# matmul_bf16.py with TMA=True, bf16 4096^3, Triton 3.6): (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages,
# SUBTILE, compiled), plus three from gemm_clocks.json. Two ran out of shared memory.
TMA_SWEEP = [
    (256, 256, 32, 4, 4, False, False), (128, 64, 64, 4, 5, False, True), (128, 256, 32, 8, 3, False, True),
    (64, 64, 64, 8, 4, False, True), (64, 256, 64, 4, 5, False, False), (256, 128, 64, 4, 2, True, True),
    (128, 128, 128, 4, 3, False, True), (64, 64, 32, 4, 5, False, True), (256, 64, 32, 4, 4, False, True),
    (128, 128, 128, 4, 2, False, True), (64, 256, 64, 4, 5, True, True), (128, 128, 32, 8, 3, True, True),
    (128, 64, 64, 4, 2, False, True), (128, 64, 128, 4, 2, True, True), (64, 256, 64, 4, 2, True, True),
    (64, 64, 128, 4, 5, False, True), (128, 64, 32, 8, 4, False, True), (128, 64, 64, 8, 2, True, True),
    (64, 256, 128, 4, 2, False, True), (64, 128, 32, 4, 2, False, True), (128, 128, 128, 8, 3, False, True),
    (128, 64, 128, 4, 2, False, True), (128, 256, 32, 4, 5, False, True), (128, 256, 32, 8, 5, True, True),
    (128, 256, 32, 8, 5, False, True), (128, 128, 64, 4, 3, False, True), (256, 64, 128, 8, 2, False, True),
    (64, 256, 64, 8, 2, False, True), (64, 256, 64, 4, 3, False, True), (256, 64, 64, 4, 2, False, True),
    (128, 256, 64, 8, 3, False, True), (128, 256, 64, 8, 4, True, True), (256, 128, 64, 8, 3, False, True),
]


def _tma_config(bm, bn, bk, warps, stages, subtile, *, tma=True) -> dict:
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": warps, "num_stages": stages,
            "TMA": tma, "SUBTILE": subtile}


def test_a_tma_epilogue_counts_its_staged_output_tile() -> None:
    """A tile stored through a tensor descriptor passes through shared memory: with it counted (half of it when
    stored in two pieces) the rule calls exactly the two out-of-resources configs of the sweep invalid."""
    src = knowledge.template_source("matmul_bf16")
    verdicts = {row: knowledge.is_legal(_tma_config(*row[:6]), "nvidia-sm90", source=src) for row in TMA_SWEEP}
    fits = {row: not _rules(violations) & {"shared-memory-budget"} for row, (_, violations) in verdicts.items()}
    assert [row for row, fit in fits.items() if fit != row[6]] == []
    ok, violations = verdicts[(256, 256, 32, 4, 4, False, False)]
    smem = [v for v in violations if v.rule == "shared-memory-budget"]
    assert "epilogue" in smem[0].message and "tensor descriptor" in smem[0].message


def _rules(violations: list) -> set[str]:
    return {v.rule for v in violations}


def test_a_kernel_its_launcher_does_not_call_for_these_parameters_is_not_judged() -> None:
    """TMA=False never launches the TMA kernel (`if PARAMS["TMA"] and ...: return matmul_tma(...)`): its
    epilogue must not make a pointer configuration that fits (measured 0.2006 ms on the H200) invalid."""
    src = knowledge.template_source("matmul_bf16")
    tma = knowledge.is_legal(_tma_config(256, 256, 32, 4, 4, False), "nvidia-sm90", source=src)[1]
    pointer = knowledge.is_legal(_tma_config(256, 256, 32, 4, 4, False, tma=False), "nvidia-sm90", source=src)[1]
    assert "shared-memory-budget" in _rules(tma) and "shared-memory-budget" not in _rules(pointer)
    assert knowledge.is_legal(_tma_config(128, 256, 64, 8, 4, False, tma=False), "nvidia-sm90", source=src)[0]
