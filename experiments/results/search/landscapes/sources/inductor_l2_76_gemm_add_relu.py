"""Seed from torch.compile for /work/main/.kb/level2/76_Gemm_Add_ReLU.py: Inductor's Triton (torch 2.11.0+cu130, cuda) as plain kernels.

Made by evoforge (inductor-seed); each kernel's block sizes and warps are PARAMS entries, Inductor's choice the default.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language import math as tl_math
from triton.language.extra import libdevice

import torch.nn.functional as F  # noqa: F401  (the task's Model may use it)

SPACE = {'k0_BLOCK_M': [32, 64, 128, 256], 'k0_BLOCK_N': [16, 32, 64, 128, 256], 'k0_BLOCK_K': [16, 32, 64, 128], 'k0_GROUP_M': [1, 4, 8, 16], 'k0_num_warps': [1, 2, 4, 8, 16], 'k0_num_stages': [1, 2, 3, 4, 5], 'k0_PRECISION': ['ieee', 'tf32x3', 'bf16x3', 'bf16x6', 'bf16x3-split'], 'k0_SPLIT_K': [1, 2, 4, 8, 16, 32, 64], 'k1_XBLOCK': [128, 256, 512, 1024, 2048], 'k1_num_warps': [1, 2, 4, 8, 16], 'k1_num_stages': [1, 2, 3, 4, 5]}
PARAMS = {'k0_BLOCK_M': 128, 'k0_BLOCK_N': 64, 'k0_BLOCK_K': 32, 'k0_GROUP_M': 8, 'k0_num_warps': 4, 'k0_num_stages': 3, 'k0_PRECISION': 'tf32x3', 'k0_SPLIT_K': 1, 'k1_XBLOCK': 512, 'k1_num_warps': 8, 'k1_num_stages': 1}

# The task's main shape (the one timed): its init inputs. forward_main_shape's kernels were compiled for it.
MAIN_SHAPE_INIT = [8192, 8192, [8192]]


def _plain(value):
    """Init inputs as JSON would keep them (tuples as lists), to compare with MAIN_SHAPE_INIT."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@triton.jit
def _bf16_split_kernel(x_ptr, hi_ptr, lo_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # hi: x rounded to nearest-even at bf16's 8 significant bits by integer arithmetic on the fp32 bits (bit-exact
    # whatever the backend's conversion mode); lo = x - hi is exact in fp32, then rounded to bf16.
    bits = x.to(tl.int32, bitcast=True)
    hi = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
    lo = (x - hi).to(tl.bfloat16).to(tl.float32)
    tl.store(hi_ptr + offs, hi.to(hi_ptr.dtype.element_ty), mask=mask)
    tl.store(lo_ptr + offs, lo.to(lo_ptr.dtype.element_ty), mask=mask)


def _bf16_parts(x, split):
    """x's bf16 hi and lo parts (x = hi + lo to 16 significant bits) with x's sizes and strides, for a GEMM
    template's three bf16 products; x itself twice where ``split`` is off. The parts cover the storage x spans (a
    view's gaps are split too, and never read). On the interpreter they are fp32 tensors holding the bf16 values."""
    if not split:
        return x, x
    span = 1 + sum((size - 1) * stride for size, stride in zip(x.shape, x.stride()) if size > 0)
    dtype = torch.float32 if os.environ.get("TRITON_INTERPRET", "0") == "1" else torch.bfloat16
    hi = torch.empty(span, dtype=dtype, device=x.device)
    lo = torch.empty(span, dtype=dtype, device=x.device)
    _bf16_split_kernel[(triton.cdiv(span, 2048),)](x, hi, lo, span, BLOCK=2048, num_warps=8)
    return torch.as_strided(hi, x.shape, x.stride()), torch.as_strided(lo, x.shape, x.stride())


@triton.jit
def is_floating(x):
    return promote_to_tensor(x).dtype.is_floating()


@triton.jit
def maximum(a, b):
    mask = a > b
    if is_floating(a):
        mask |= a != a
    return tl.where(mask, a, b)


@triton.jit
def promote_to_tensor(x):
    # Addition promotes to tensor for us
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def triton_tem_fused_mm_t_0_main(arg_A, arg_B, out_ptr0, arg_A_lo, arg_B_lo, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr, SPLIT_K: tl.constexpr):
    EVEN_K : tl.constexpr = True
    USE_FAST_ACCUM : tl.constexpr = False
    ACC_TYPE : tl.constexpr = tl.float32
    INDEX_DTYPE : tl.constexpr = tl.int32
    A = arg_A
    if PRECISION == 'bf16x3-split':
        A_LO = arg_A_lo
    B = arg_B
    if PRECISION == 'bf16x3-split':
        B_LO = arg_B_lo

    M = 1024
    N = 8192
    K = 8192
    if M * N == 0:
        # early exit due to zero-size input(s)
        return
    stride_am = 8192
    stride_ak = 1
    stride_bk = 1
    stride_bn = 8192

    # based on triton.ops.matmul
    pid = tl.program_id(0).to(INDEX_DTYPE)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N

    # re-order program ID for better L2 performance
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if ((stride_am == 1 and stride_ak == M) or (stride_am == K and stride_ak == 1)) and (M >= BLOCK_M and K > 1):
        offs_a_m = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    else:
        offs_a_m = rm % M
    if ((stride_bk == 1 and stride_bn == K) or (stride_bk == N and stride_bn == 1)) and (N >= BLOCK_N and K > 1):
        offs_b_n = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    else:
        offs_b_n = rn % N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)

    k_lo = 0
    k_hi = tl.cdiv(K, BLOCK_K)
    if SPLIT_K > 1:
        k_per_split = tl.cdiv(k_hi, SPLIT_K)
        k_lo = tl.program_id(1) * k_per_split
        k_hi = tl.minimum(k_lo + k_per_split, k_hi)
    for k_idx in range(k_lo, k_hi):

        a_k_idx_vals = offs_k[None, :] + (k_idx * BLOCK_K)
        b_k_idx_vals = offs_k[:, None] + (k_idx * BLOCK_K)

        idx_m = offs_a_m[:, None]
        idx_n = a_k_idx_vals
        xindex = idx_n + 8192*idx_m
        a = tl.load(A + (xindex))
        if PRECISION == 'bf16x3-split':
            a_lo = tl.load(A_LO + (xindex))

        idx_m = b_k_idx_vals
        idx_n = offs_b_n[None, :]
        xindex = idx_n + 8192*idx_m
        b = tl.load(B + ((tl.broadcast_to(idx_m + 8192*idx_n, [BLOCK_K, BLOCK_N])).broadcast_to(xindex.shape)))
        if PRECISION == 'bf16x3-split':
            b_lo = tl.load(B_LO + ((tl.broadcast_to(idx_m + 8192*idx_n, [BLOCK_K, BLOCK_N])).broadcast_to(xindex.shape)))


        if PRECISION == 'bf16x3-split':
            part = tl.dot(a_lo, b, out_dtype=tl.float32)
            part = tl.dot(a, b_lo, part, out_dtype=tl.float32)
            acc += tl.dot(a, b, part, out_dtype=tl.float32)
        else:
            acc += tl.dot(a, b, input_precision=PRECISION, out_dtype=ACC_TYPE)


    # rematerialize rm and rn to save registers
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)

    # inductor generates a suffix
    xindex = idx_n + 8192*idx_m
    if SPLIT_K == 1:
        tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), acc, mask)
    else:
        tl.atomic_add(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), acc, mask, sem="relaxed")


@triton.jit
def triton_poi_fused_add_relu_1_main(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 8388608
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x2 = xindex
    x0 = (xindex % 8192)
    tmp0 = tl.load(in_out_ptr0 + (x2), None)
    tmp1 = tl.load(in_ptr0 + (x0), None, eviction_policy='evict_last')
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = maximum(tmp3, tmp2)
    tl.store(in_out_ptr0 + (x2), tmp4, None)


@triton.jit
def triton_poi_fused_add_relu_0(in_out_ptr0, in_ptr0, ks0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x2 = xindex
    x0 = (xindex % ks0)
    tmp0 = tl.load(in_out_ptr0 + (x2), xmask, eviction_policy='evict_last')
    tmp1 = tl.load(in_ptr0 + (x0), xmask, eviction_policy='evict_last')
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = maximum(tmp3, tmp2)
    tl.store(in_out_ptr0 + (x2), tmp4, xmask)


class TaskModel(nn.Module):
    """
    Simple model that performs a matrix multiplication, adds a bias term, and applies ReLU.
    """

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        # The task's Model makes the parameters (its forward removed): same names, shapes and init.
        made = TaskModel(*args, **kwargs)
        for name, child in made.named_children():
            setattr(self, name, child)
        for name, p in made.named_parameters(recurse=False):
            self.register_parameter(name, p)
        for name, b in made.named_buffers(recurse=False):
            self.register_buffer(name, b)
        for name, value in vars(made).items():  # plain attributes the forward reads (a multiplier)
            if not name.startswith('_') and name != 'training':
                setattr(self, name, value)
        # The main shape's kernels serve a model made with the main shape's init inputs (a guard, as
        # torch.compile's static build has one per shape); every other model, the generic ones.
        self._main_shape = _plain(args) == MAIN_SHAPE_INIT and not kwargs
        self._main_state = None  # its parameters' sizes, strides and dtypes, checked at the first call

    def forward(self, x):
        if self._main_shape and self._main_state is None:
            self._main_state = bool(self.gemm.weight.shape == (8192, 8192) and self.gemm.weight.stride() == (8192, 1) and self.gemm.weight.dtype == torch.float32 and self.bias.shape == (8192,) and self.bias.stride() == (1,) and self.bias.dtype == torch.float32)
        if self._main_shape and self._main_state and x.shape == (1024, 8192) and x.stride() == (8192, 1) and x.dtype == torch.float32:
            return self.forward_main_shape(x)
        return self.forward_any_shape(x)

    def forward_main_shape(self, x):
        device_ = x.device
        arg0_1 = self.gemm.weight
        arg1_1 = x
        arg2_1 = self.bias
        buf0 = torch.empty_strided((1024, 8192), (8192, 1), dtype=torch.float32, device=device_)
        _a1, _a1_lo = _bf16_parts(arg1_1, PARAMS['k0_PRECISION'] == 'bf16x3-split')
        _b1, _b1_lo = _bf16_parts(arg0_1, PARAMS['k0_PRECISION'] == 'bf16x3-split')
        triton_tem_fused_mm_t_0_main[triton.cdiv(1024, PARAMS['k0_BLOCK_M']) * triton.cdiv(8192, PARAMS['k0_BLOCK_N']), PARAMS['k0_SPLIT_K'], 1](_a1, _b1, buf0.zero_() if PARAMS['k0_SPLIT_K'] > 1 else buf0, _a1_lo, _b1_lo, BLOCK_M=PARAMS['k0_BLOCK_M'], BLOCK_N=PARAMS['k0_BLOCK_N'], BLOCK_K=PARAMS['k0_BLOCK_K'], GROUP_M=PARAMS['k0_GROUP_M'], num_warps=PARAMS['k0_num_warps'], num_stages=PARAMS['k0_num_stages'], PRECISION=PARAMS['k0_PRECISION'], SPLIT_K=PARAMS['k0_SPLIT_K'])
        del arg0_1
        del arg1_1
        buf1 = buf0
        del buf0
        triton_poi_fused_add_relu_1_main[triton.cdiv(8388608, PARAMS['k1_XBLOCK']),](buf1, arg2_1, 8388608, XBLOCK=PARAMS['k1_XBLOCK'], num_warps=PARAMS['k1_num_warps'], num_stages=PARAMS['k1_num_stages'])
        del arg2_1
        return buf1

    def forward_any_shape(self, x):
        device_ = x.device
        arg0_1 = self.gemm.weight.size()[0]
        arg1_1 = self.gemm.weight.size()[1]
        arg2_1 = self.gemm.weight
        arg3_1 = x.size()[0]
        arg4_1 = x
        arg5_1 = self.bias
        s59 = arg0_1
        s70 = arg1_1
        s77 = arg3_1
        arg2_1_size = arg2_1.size()
        s27 = arg2_1_size[1]
        buf0 = torch.empty_strided((s77, s59), (s59, 1), dtype=torch.float32, device=device_)
        torch.mm(arg4_1, torch.as_strided(arg2_1, (s27, s59), (1, s27), 0), out=buf0)
        del arg2_1
        del arg4_1
        buf1 = buf0
        del buf0
        triton_poi_fused_add_relu_0_xnumel = s59 * s77
        triton_poi_fused_add_relu_0[triton.cdiv(triton_poi_fused_add_relu_0_xnumel, 1024),](buf1, arg5_1, s59, triton_poi_fused_add_relu_0_xnumel, XBLOCK=1024, num_warps=4, num_stages=1)
        del arg5_1
        return buf1
