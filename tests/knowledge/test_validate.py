"""The validators, as ``knowledge.validate`` and ``kb lint`` apply them: each hard rule on a kernel that breaks
it, and a correct kernel that breaks none."""

from __future__ import annotations

import pytest

from evoforge import knowledge
from evoforge.core import Candidate
from tests.knowledge.kernels import ARANGE_1000, BLOCK_PTR_COPY, MATMUL, VECTOR_ADD, with_launch


def hard(violations: list[knowledge.Violation]) -> dict[str, list[knowledge.Violation]]:
    out: dict[str, list[knowledge.Violation]] = {}
    for v in violations:
        if v.severity == "hard":
            out.setdefault(v.rule, []).append(v)
    return out


@pytest.mark.parametrize("arch", ["nvidia-sm90", "nvidia-sm80", "intel-xe2", "intel-xe-hpc"])
def test_a_correct_simple_kernel_breaks_nothing(arch: str) -> None:
    assert knowledge.validate(Candidate.from_source(VECTOR_ADD), arch, triton_version="3.6.0") == []


def test_non_power_of_two_arange_is_hard_and_points_at_the_line() -> None:
    found = hard(knowledge.validate(Candidate.from_source(ARANGE_1000), "nvidia-sm90"))
    (v,) = found["arange-pow2"]
    assert v.line == 9 and "1000" in v.message and "1024" in v.message


def test_non_power_of_two_arange_through_a_param_is_caught() -> None:
    source = VECTOR_ADD
    assert not hard(knowledge.validate(Candidate.from_source(source, params={"BLOCK": 512}), "nvidia-sm90"))
    found = hard(knowledge.validate(Candidate.from_source(source, params={"BLOCK": 1000}), "nvidia-sm90"))
    assert [v.rule for v in found["arange-pow2"]] == ["arange-pow2"]


def test_three_warps_is_hard() -> None:
    source = with_launch(VECTOR_ADD, 'num_warps=PARAMS["num_warps"]', "num_warps=3")
    (v,) = hard(knowledge.validate(Candidate.from_source(source), "nvidia-sm90"))["num-warps-legal"]
    assert "power of two" in v.message
    assert hard(knowledge.validate(Candidate.from_source(VECTOR_ADD, params={"num_warps": 64}), "nvidia-sm90"))


def test_a_256x256x128_fp16_tile_with_5_stages_does_not_fit_sm90() -> None:
    params = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 5}
    (v,) = hard(knowledge.validate(Candidate.from_source(MATMUL, params=params), "nvidia-sm90"))[
        "shared-memory-budget"]
    assert "655360" in v.message and "640 KiB" in v.message and "232448" in v.message
    # the default tile (128x128x64, 3 stages: 96 KiB) fits
    assert "shared-memory-budget" not in hard(knowledge.validate(Candidate.from_source(MATMUL), "nvidia-sm90"))


def test_shared_memory_buffers_follow_the_arch() -> None:
    """128x128x128 fp16, 4 stages: 4 buffers (256 KiB) on Hopper, 3 (192 KiB) on Ampere's cp.async pipeline."""
    params = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 4}
    cand = Candidate.from_source(MATMUL, params=params)
    assert "shared-memory-budget" in hard(knowledge.validate(cand, "nvidia-sm90"))
    assert "shared-memory-budget" in hard(knowledge.validate(cand, "nvidia-sm80"))  # 196608 > 166912
    small = Candidate.from_source(MATMUL, params={**params, "num_stages": 2, "BLOCK_K": 64})
    assert not hard(knowledge.validate(small, "nvidia-sm89"))  # 1 buffer of 32 KiB


def test_fp32_operands_double_the_estimate() -> None:
    source = MATMUL.replace(".to(tl.float16)", ".to(tl.float32)")
    params = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 4}  # 128 KiB fp16, 256 KiB fp32
    assert not hard(knowledge.validate(Candidate.from_source(MATMUL, params=params), "nvidia-sm90"))
    assert "shared-memory-budget" in hard(knowledge.validate(Candidate.from_source(source, params=params),
                                                             "nvidia-sm90"))


def test_dot_k_below_16_is_hard() -> None:
    found = hard(knowledge.validate(Candidate.from_source(MATMUL, params={"BLOCK_K": 8}), "nvidia-sm90"))
    assert "dot-min-k" in found


def test_mismatched_dot_operands_and_bf16_out_dtype_are_hard() -> None:
    source = MATMUL.replace(").to(tl.float16)\n        acc", ").to(tl.bfloat16)\n        acc")
    source = source.replace("acc += tl.dot(a, b)", "acc += tl.dot(a, b, out_dtype=tl.bfloat16)")
    messages = [v.message for v in hard(knowledge.validate(Candidate.from_source(source), "nvidia-sm90"))["dot-operands"]]
    assert any("float16" in m and "bfloat16" in m for m in messages)
    assert any("out_dtype" in m for m in messages)


def test_block_pointers_are_fine_on_3_6_and_hard_on_3_7() -> None:
    cand = Candidate.from_source(BLOCK_PTR_COPY)
    on_36 = knowledge.validate(cand, "nvidia-sm90", triton_version="3.6.0")
    assert not hard(on_36)
    assert {v.rule for v in on_36} >= {"block-ptr-deprecated"}
    on_37 = hard(knowledge.validate(cand, "nvidia-sm90", triton_version="3.7.0"))
    assert len(on_37["block-ptr-removed"]) == 2  # both make_block_ptr calls, with their lines
    assert {v.line for v in on_37["block-ptr-removed"]} == {11, 12}
    assert hard(knowledge.validate(cand, "intel-xe2", triton_version="3.7.1+git0abc"))


def test_descriptor_with_a_strided_last_dimension_is_hard_on_intel() -> None:
    source = BLOCK_PTR_COPY.replace(
        "src = tl.make_block_ptr(x_ptr, (M, N), (sxm, 1), (pid * BLOCK_M, 0), (BLOCK_M, BLOCK_N), (1, 0))",
        "src = tl.make_tensor_descriptor(x_ptr, (N, M), (1, sxm), (BLOCK_N, BLOCK_M))")
    assert "intel-2d-block-stride" in hard(knowledge.validate(Candidate.from_source(source), "intel-xe2"))
    assert "descriptor-last-stride" in hard(knowledge.validate(Candidate.from_source(source), "nvidia-sm90"))


def test_swizzled_ordering_on_a_2d_grid_is_hard() -> None:
    template = knowledge.template_source("matmul_grouped")
    broken = template.replace("grid = (num_tiles,)",
                              'grid = (triton.cdiv(M, PARAMS["BLOCK_M"]), triton.cdiv(N, PARAMS["BLOCK_N"]))')
    assert "swizzle-1d-grid" not in hard(knowledge.validate(Candidate.from_source(template), "intel-xe2"))
    assert "swizzle-1d-grid" in hard(knowledge.validate(Candidate.from_source(broken), "intel-xe2"))


# -- Intel --------------------------------------------------------------------------------------------------
def test_hard_coded_32_warps_is_hard_on_intel_only() -> None:
    source = with_launch(VECTOR_ADD, 'num_warps=PARAMS["num_warps"]', "num_warps=32")
    assert "intel-no-hardcoded-32-warps" in hard(knowledge.validate(Candidate.from_source(source), "intel-xe2"))
    assert not hard(knowledge.validate(Candidate.from_source(source), "nvidia-sm90"))
    tuned = VECTOR_ADD.replace('"num_warps": [2, 4, 8]', '"num_warps": [8, 16, 32]')
    assert not hard(knowledge.validate(Candidate.from_source(tuned, params={"num_warps": 32}), "intel-xe2"))


def test_grf_mode_must_be_a_known_string_and_256_caps_warps() -> None:
    def lint(launch: str) -> dict[str, list[knowledge.Violation]]:
        src = with_launch(VECTOR_ADD, 'num_warps=PARAMS["num_warps"])', launch + ")")
        return hard(knowledge.validate(Candidate.from_source(src), "intel-xe2"))

    assert not lint('num_warps=PARAMS["num_warps"], grf_mode="256"')
    assert "intel-grf-mode" in lint('num_warps=PARAMS["num_warps"], grf_mode=256')
    assert "intel-grf-mode" in lint('num_warps=PARAMS["num_warps"], grf_mode="huge"')
    assert "intel-grf-mode" in lint('num_warps=64, grf_mode="256"')


def test_autotuned_grf_mode_needs_a_constexpr_parameter() -> None:
    source = '''
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": 256, "grf_mode": "256"}, num_warps=8),
           triton.Config({"BLOCK": 512, "grf_mode": "default"}, num_warps=16)]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''
    (v,) = hard(knowledge.validate(Candidate.from_source(source), "intel-xe2"))["intel-grf-mode-constexpr"]
    assert v.line == 11  # the def line
    fixed = source.replace("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, grf_mode: tl.constexpr):")
    assert not hard(knowledge.validate(Candidate.from_source(fixed), "intel-xe2"))


def test_sub_group_size_must_be_16_or_32() -> None:
    src = with_launch(VECTOR_ADD, 'num_warps=PARAMS["num_warps"])', 'num_warps=PARAMS["num_warps"], warp_size=8)')
    assert "intel-sub-group-size" in hard(knowledge.validate(Candidate.from_source(src), "intel-xe2"))
    ok = src.replace("warp_size=8", "warp_size=16")
    assert not hard(knowledge.validate(Candidate.from_source(ok), "intel-xe2"))


def test_advice_never_makes_a_kernel_invalid() -> None:
    advice = knowledge.validate(Candidate.from_source(MATMUL), "intel-xe2")
    assert advice and all(v.severity == "advice" for v in advice)
    assert {"intel-tensor-descriptors", "int64-offsets"} <= {v.rule for v in advice}


def test_unparsable_source_is_left_to_the_static_check() -> None:
    assert knowledge.validate(Candidate(source="def broken(:\n"), "nvidia-sm90") == []


def test_fp32_dot_without_precision_is_advised_and_tf32x3_is_not() -> None:
    fp32 = MATMUL.replace(".to(tl.float16)\n", ".to(tl.float32)\n")
    rules = {v.rule for v in knowledge.validate(Candidate.from_source(fp32), "nvidia-sm90")}
    assert "fp32-dot-precision" in rules
    fixed = fp32.replace("tl.dot(a, b)", 'tl.dot(a, b, input_precision="tf32x3")')
    assert "fp32-dot-precision" not in {v.rule for v in knowledge.validate(Candidate.from_source(fixed), "nvidia-sm90")}
    split = fp32.replace("tl.dot(a, b)", 'tl.dot(a, b, input_precision="bf16x3")')  # the judge admits it on fp32
    assert "fp32-dot-precision" not in {v.rule for v in knowledge.validate(Candidate.from_source(split), "nvidia-sm90")}


AUTOTUNED = '''
import triton
import triton.language as tl


def configs():
    return [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 8}, num_warps=4, num_stages=2),
            triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3)]


@triton.autotune(configs=configs(), key=["K"])
@triton.jit
def mm(a_ptr, b_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
       grf_mode: tl.constexpr):
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :]).to(tl.float16)
        b = tl.load(b_ptr + rk[:, None] * BLOCK_N + rn[None, :]).to(tl.float16)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], acc)


def run(a, b, c):
    mm[(1,)](a, b, c, a.shape[1], grf_mode=256)
'''


def test_autotune_configs_from_a_factory_are_each_checked() -> None:
    found = hard(knowledge.validate(Candidate.from_source(AUTOTUNED), "nvidia-sm90"))
    (v,) = found["dot-min-k"]
    assert "K = 8" in v.message
    intel = hard(knowledge.validate(Candidate.from_source(AUTOTUNED), "intel-xe2"))
    (grf,) = intel["intel-grf-mode"]  # passed once at the launch, reported once, at the launch
    assert grf.line == 27 and "string" in grf.message
