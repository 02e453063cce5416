"""Hardware specs as data: every fact sourced, measured ceilings preferred, unknown archs refused clearly."""

from __future__ import annotations

from typing import Any

import pytest

from evoforge import knowledge
from evoforge.core import UsageError

ARCHS = ["intel-xe-hpc", "intel-xe2", "nvidia-sm80", "nvidia-sm89", "nvidia-sm90"]


def _facts(node: Any, path: str = "") -> list[tuple[str, dict]]:
    if isinstance(node, dict):
        if "value" in node:
            return [(path, node)]
        return [f for k, v in node.items() for f in _facts(v, f"{path}.{k}")]
    return []


def test_the_five_archs_are_known() -> None:
    assert knowledge.arch_names() == ARCHS


@pytest.mark.parametrize("arch", ARCHS)
def test_every_fact_names_its_source(arch: str) -> None:
    spec = knowledge.load_arch(arch)
    facts = _facts(spec["programming_model"]) + _facts(spec["devices"])
    assert len(facts) > 15
    unsourced = [path for path, fact in facts if not str(fact.get("source", "")).strip()]
    assert unsourced == []


def test_h200_ceilings_are_the_measured_ones() -> None:
    ceil = knowledge.ceilings("nvidia-sm90")
    assert ceil["device"] == "H200 SXM"
    assert ceil["bandwidth_gbs"] == 4270
    assert ceil["peak_tflops"] == {"fp32": 51.0, "tf32": 393.0, "bf16": 692.0, "fp16": 989.5}
    assert ceil["basis"]["bf16"] == "measured" and ceil["basis"]["fp16"] == "datasheet"
    assert "lent H200" in ceil["sources"]["bandwidth_gbs"]


def test_h100_ceilings_come_from_its_datasheet() -> None:
    ceil = knowledge.ceilings("nvidia-sm90", device="NVIDIA H100 80GB HBM3")
    assert ceil["device"] == "H100 SXM" and ceil["bandwidth_gbs"] == 3350 and ceil["basis"]["bf16"] == "datasheet"


def test_hopper_limits() -> None:
    spec = knowledge.load_arch("h200")  # an alias
    pm = spec["programming_model"]
    assert pm["shared_memory_per_block_bytes"]["value"] == 232448 == 227 * 1024
    assert spec["devices"]["H200 SXM"]["sm_count"]["value"] == 132
    assert spec["devices"]["H200 SXM"]["l2_mb"]["value"] == 60
    assert spec["devices"]["H100 SXM"]["l2_mb"]["value"] == 50


def test_intel_facts_cover_sub_groups_slm_and_grf() -> None:
    for arch in ("intel-xe2", "intel-xe-hpc"):
        pm = knowledge.load_arch(arch)["programming_model"]
        assert pm["sub_group_sizes"]["value"] == [16, 32]
        assert pm["slm_per_work_group_bytes"]["value"] == 131072
        assert pm["grf_registers"]["value"]["256"] == 256
    assert set(knowledge.load_arch("b580")["devices"]) == {"Arc B580", "Arc Pro B70"}


def test_unknown_arch_is_one_clear_usage_error() -> None:
    with pytest.raises(UsageError, match=r"--arch sm75: unknown \(choose from intel-xe-hpc, .*nvidia-sm90\)"):
        knowledge.ceilings("sm75")


@pytest.mark.parametrize("arch", ARCHS)
def test_summary_states_the_limits_a_kernel_writer_needs(arch: str) -> None:
    text = knowledge.hardware_summary(arch)
    assert arch in text and "num_warps" in text and "GB/s" in text
    if arch == "nvidia-sm90":
        assert "232448" in text and "4270" in text


def test_load_arch_returns_a_copy() -> None:
    knowledge.load_arch("nvidia-sm90")["programming_model"]["warp_size"]["value"] = 64
    assert knowledge.load_arch("nvidia-sm90")["programming_model"]["warp_size"]["value"] == 32
