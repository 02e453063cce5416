"""The Intel XPU backend on a machine without an Intel GPU: what can be decided without one.

Nothing here runs on Intel hardware (there is none on the development or CI machines; docs/intel.md).
"""

from __future__ import annotations

import json

import pytest
from evoforge.backends import xpu
from evoforge.backends.registry import get_backend
from evoforge.knowledge.hardware import model_fact

from evoforge import knowledge
from tests.conftest import cli_main


@pytest.mark.parametrize(("name", "arch"), [
    ("Intel(R) Arc(TM) B580 Graphics", "intel-xe2"),
    ("Intel(R) Arc(TM) B570 Graphics", "intel-xe2"),
    ("Intel(R) Arc(TM) Pro B70 Graphics", "intel-xe2"),
    ("Intel(R) Arc(TM) 140V GPU (16GB)", "intel-xe2"),  # Lunar Lake: Xe2 integrated
    ("Intel(R) Data Center GPU Max 1550", "intel-xe-hpc"),
    ("Intel(R) Data Center GPU Max 1100", "intel-xe-hpc"),
    ("Intel(R) Arc(TM) A770 Graphics", "intel-xe-hpg"),  # Alchemist is not Xe2
])
def test_arch_by_device_name(name, arch):
    assert xpu.arch_for_xpu_name(name) == arch
    assert xpu.arch_for_xpu_properties({"name": name, "gpu_eu_count": 1}) == arch  # the name wins


def test_arch_by_properties_when_the_name_says_nothing():
    anonymous = "Intel(R) Graphics [0xe2ff]"
    assert xpu.describe_xpu_arch({"name": anonymous, "gpu_eu_count": 1024, "sub_group_sizes": [16, 32]})[0] == \
        "intel-xe-hpc"
    assert xpu.describe_xpu_arch({"name": anonymous, "gpu_eu_count": 160, "sub_group_sizes": [16, 32]})[0] == \
        "intel-xe2"
    arch, why = xpu.describe_xpu_arch({"name": anonymous, "gpu_eu_count": 512, "sub_group_sizes": [8, 16, 32]})
    assert arch == "intel-xe-hpg" and "8" in why
    arch, why = xpu.describe_xpu_arch({"name": anonymous})
    assert arch == "intel-xe2" and "--arch" in why  # a guess says it is one


def test_mapped_archs_have_knowledge_and_tunables_match_it():
    for arch in ("intel-xe2", "intel-xe-hpc"):
        assert arch in knowledge.arch_names()
        space = xpu.tunable_space(arch)
        assert space["sub_group_size"] == model_fact(arch, "sub_group_sizes")
        assert set(space["grf_mode"]) <= set(model_fact(arch, "grf_modes"))
    assert xpu.tunable_space("nvidia-sm90") == {}


def test_launch_options_speak_the_installed_backends_dialect():
    params = {"BLOCK": 128, "grf_mode": "large", "sub_group_size": 16}
    current = xpu.launch_options(params, option_fields={"num_warps", "warp_size", "grf_mode"})
    assert current == {"grf_mode": "256", "warp_size": 16}
    older = xpu.launch_options({"grf_mode": "256", "threads_per_warp": 32},
                               option_fields={"num_warps", "threads_per_warp", "grf_mode"}, old_grf_names=True)
    assert older == {"grf_mode": "large", "threads_per_warp": 32}
    assert xpu.launch_options({"grf_mode": "auto"}, option_fields={"grf_mode"}) == {"grf_mode": "auto"}
    with pytest.raises(ValueError, match="grf_mode"):
        xpu.launch_options({"grf_mode": "huge"}, option_fields={"grf_mode"})
    with pytest.raises(ValueError, match="lanes"):
        xpu.launch_options({"sub_group_size": 64}, option_fields={"warp_size"})


def test_launch_options_are_empty_off_intel():
    """Here there is no Intel backend for Triton: CUDA's Triton would reject grf_mode, so nothing is passed."""
    assert xpu.launch_options({"grf_mode": "256", "sub_group_size": 16}) == {}


def test_xpu_is_unavailable_here_with_a_reason():
    ok, reason = xpu.XpuBackend().available()
    assert not ok and "XPU" in reason
    assert get_backend("auto").name != "xpu"


def test_cli_backends_lists_xpu_unavailable_with_a_reason(capsys):
    proc = cli_main(capsys, "backends", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["backend"]: r for r in json.loads(proc.stdout)}
    assert rows["xpu"]["available"] is False
    assert "XPU" in rows["xpu"]["reason"] and "torch" in rows["xpu"]["reason"]
