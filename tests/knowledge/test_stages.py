"""The nine stages and the static signs that call for each."""

from __future__ import annotations

import pytest

from evoforge import knowledge
from evoforge.core import UsageError
from tests.knowledge.kernels import BLOCK_PTR_COPY, MATMUL, VECTOR_ADD

NINE = ["algorithmic", "discovery", "dtype_fix", "fusion", "memory_access", "block_pointers",
        "persistent_kernel", "device_specific", "autotuning"]


def test_nine_stages_in_order_with_guidance_and_signs() -> None:
    stages = knowledge.stages()
    assert [s.name for s in stages] == NINE == list(knowledge.STAGE_NAMES)
    for s in stages:
        assert s.purpose and len(s.guidance) >= 2 and s.signs and s.triggers


PURE_TORCH = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
'''

TWO_KERNELS_NO_SPACE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        t = torch.empty_like(x)
        y = torch.empty_like(x)
        scale[(triton.cdiv(x.numel(), 1024),)](x, t, x.numel(), BLOCK=1024)
        relu[(triton.cdiv(x.numel(), 1024),)](t, y, x.numel(), BLOCK=1024)
        return y
'''


def test_pure_pytorch_calls_for_discovery() -> None:
    assert knowledge.analyze(PURE_TORCH)[:1] == ["discovery"]


def test_two_launches_without_space_call_for_fusion_and_autotuning() -> None:
    stages = knowledge.analyze(TWO_KERNELS_NO_SPACE)
    assert {"fusion", "autotuning", "device_specific"} <= set(stages)
    signs = knowledge.analyze_signs(TWO_KERNELS_NO_SPACE)
    assert any("no SPACE" in s for s in signs["autotuning"])


def test_a_tuned_elementwise_kernel_needs_little() -> None:
    assert knowledge.analyze(VECTOR_ADD) == []


def test_an_ungrouped_fp16_matmul_calls_for_memory_access_and_persistence() -> None:
    stages = knowledge.analyze(MATMUL)
    assert {"memory_access", "block_pointers", "persistent_kernel"} <= set(stages)
    assert "dtype_fix" not in stages  # operands are cast to fp16


def test_fp32_dot_calls_for_dtype_fix_and_block_ptr_for_descriptors() -> None:
    fp32 = MATMUL.replace(".to(tl.float16)\n", ".to(tl.float32)\n")
    assert "dtype_fix" in knowledge.analyze(fp32)
    assert "block_pointers" in knowledge.analyze(BLOCK_PTR_COPY)


def test_intel_matmul_without_grf_mode_calls_for_device_specific() -> None:
    template = knowledge.template_source("matmul_grouped")
    assert "device_specific" in knowledge.analyze(template, "intel-xe2")
    assert "device_specific" not in knowledge.analyze(template, "nvidia-sm90")


def test_unparsable_source_calls_for_nothing() -> None:
    assert knowledge.analyze("def broken(:\n") == []


def test_launches_in_the_two_arms_of_an_if_are_not_a_fusion_sign() -> None:
    alternative = TWO_KERNELS_NO_SPACE.replace(
        "        scale[(triton.cdiv(x.numel(), 1024),)](x, t, x.numel(), BLOCK=1024)\n"
        "        relu[(triton.cdiv(x.numel(), 1024),)](t, y, x.numel(), BLOCK=1024)\n",
        "        if x.numel() > 4096:\n"
        "            scale[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n"
        "        else:\n"
        "            relu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n")
    assert alternative != TWO_KERNELS_NO_SPACE
    assert "fusion" not in knowledge.analyze(alternative)
    assert "fusion" in knowledge.analyze(TWO_KERNELS_NO_SPACE)


HOST_DESCRIPTORS = '''
import triton
import triton.language as tl

@triton.jit
def mm(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([0, k]), b_desc.load([k, 0]), acc)
    c_desc.store([0, 0], acc.to(c_desc.dtype))
'''


def test_descriptors_passed_from_the_host_are_descriptors() -> None:
    """A kernel that reads its dot operands with desc.load on TensorDescriptors built on the host (TMA on
    Hopper) is not told to move from pointer tensors to tensor descriptors; a pointer GEMM is."""
    sign = "tl.dot operands come from pointer tensors, not tensor descriptors"
    assert sign not in sum(knowledge.analyze_signs(HOST_DESCRIPTORS, "intel-xe2").values(), [])
    assert sign in sum(knowledge.analyze_signs(MATMUL, "intel-xe2").values(), [])


def test_the_cute_guide_follows_the_arch():
    hopper, ampere = knowledge.cute_guide("nvidia-sm90"), knowledge.cute_guide("nvidia-sm80")
    for text in (hopper, ampere):
        assert "CUDA_SRC" in text and "local_tile" in text and "SM80_16x8x16_F32F16F16F32_TN" in text
        assert "elem_less" in text and "cp.async" in text
    assert "wgmma" in hopper and "SM90_TMA_LOAD" in hopper and "sm_90a" in hopper
    assert "SM90_TMA_LOAD" not in ampere and "sm_80" in ampere
    with pytest.raises(UsageError, match="NVIDIA GPUs only"):
        knowledge.cute_guide("intel-xe2")


def test_every_rule_names_a_stage_of_stages_yaml():
    assert {rule.stage for rule in knowledge.rules()} <= set(knowledge.STAGE_NAMES)
