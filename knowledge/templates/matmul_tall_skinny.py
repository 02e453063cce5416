"""Tall-skinny fp32 matmul C = A @ B with a tiny K: the output write is the whole cost.

Seed for level1/9_Tall_skinny_matrix_multiplication_: A is (32768, 32), B is (32, 32768), C is (32768, 32768)
fp32 = 4.3 GB written for 8 MB read, 69 GFLOP. At the fp32 FMA rate the FLOPs alone take as long as the write
(PyTorch: 2.56 ms); on tensor cores they are nearly free and the kernel becomes a store stream (write floor
~1.0 ms). SPLIT pre-splits A and B once (8 MB, microseconds) into hi/lo parts and issues three MMAs per tile
(lo*hi + hi*lo + hi*hi); "none" uses one tl.dot with PRECISION (Triton's in-register tf32x3, or ieee FMAs).
Measured on an H200 at the default shape (do_bench, L2 flushed):
- SPLIT "tf32x3" (default), BLOCK_N 256: 1.97 ms; error 4.1e-6 from float64, under PyTorch's own 5.4e-6.
- SPLIT "bf16x3": 1.42 ms; error 5.2e-5 from float64: passes the chain's fp32 allclose (1e-4 + 1e-4 |ref|)
  with a wide margin, but it is ~10x PyTorch's own float64 distance at K = 32 (bf16x3 keeps ~16 bits of
  each product; long sums hide that, K = 32 does not).
- "none": tf32x3 2.75-3.1 ms, ieee 2.8 ms; plain TF32 (inaccurate, not in SPACE) 1.77 ms.
BLOCK_K = K: one iteration (EVEN_K; SINGLE_STEP chains the three MMAs into the still-zero accumulator).
TMA_STORE writes the tile with two bulk copies (tensor descriptor) where rows are 16-byte aligned: neutral
for bf16x3, 10% slower for tf32x3 here. A and B stay in L2, so GROUP_M matters little.
The Triton interpreter (3.6) multiplies bf16 tiles as raw 16-bit integers, so under TRITON_INTERPRET the
bf16 parts are widened to fp32 before tl.dot: the same products (bf16 x bf16 is exact in fp32).
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [16, 32, 64],
    "GROUP_M": [1, 4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
    "SPLIT": ["bf16x3", "tf32x3", "none"],
    "PRECISION": ["tf32x3", "ieee"],
    "B_KMAJOR": [False, True],
    "TMA_STORE": [False, True],
}
PARAMS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 2,
          "SPLIT": "tf32x3", "PRECISION": "tf32x3", "B_KMAJOR": True, "TMA_STORE": False}

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def split_kernel(x_ptr, hi_ptr, lo_ptr, n, TF32: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # hi = x rounded to nearest-even at bf16's 8 (TF32's 11) significant bits, by integer arithmetic on the
    # fp32 bits: bit-exact whatever the backend's conversion mode (the interpreter truncates). lo = x - hi is
    # exact in fp32 and of random sign, so the dropped lo*lo term has no bias.
    bits = x.to(tl.int32, bitcast=True)
    if TF32:
        hi = ((bits + 0xFFF + ((bits >> 13) & 1)) & -8192).to(tl.float32, bitcast=True)
        tl.store(hi_ptr + offs, hi, mask=mask)
        tl.store(lo_ptr + offs, x - hi, mask=mask)
    else:
        hi = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
        tl.store(hi_ptr + offs, hi.to(tl.bfloat16), mask=mask)
        tl.store(lo_ptr + offs, (x - hi).to(tl.bfloat16), mask=mask)


@triton.jit
def tall_skinny_matmul_kernel(a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, c_ptr, c_desc, M, N, K, stride_am, stride_ak,
                              stride_bk, stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                              SPLIT: tl.constexpr, PRECISION: tl.constexpr, EVEN_K: tl.constexpr,
                              WIDEN: tl.constexpr, TMA_STORE: tl.constexpr, SINGLE_STEP: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * num_pid_n
    group_id = pid // width
    first_m = group_id * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % group_m
    pid_n = (pid % width) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N
    a_offs = offs_m.to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_offs = offs_k[:, None] * stride_bk + offs_n.to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a_mask = m_mask[:, None]
            b_mask = n_mask[None, :]
        else:
            k_mask = offs_k < K - k * BLOCK_K
            a_mask = m_mask[:, None] & k_mask[None, :]
            b_mask = k_mask[:, None] & n_mask[None, :]
        if SPLIT:
            a_hi = tl.load(a_ptr + a_offs, mask=a_mask, other=0.0)
            a_lo = tl.load(a_lo_ptr + a_offs, mask=a_mask, other=0.0)
            b_hi = tl.load(b_ptr + b_offs, mask=b_mask, other=0.0)
            b_lo = tl.load(b_lo_ptr + b_offs, mask=b_mask, other=0.0)
            if WIDEN:
                a_hi, a_lo = a_hi.to(tl.float32), a_lo.to(tl.float32)
                b_hi, b_lo = b_hi.to(tl.float32), b_lo.to(tl.float32)
            # The small products go into a fresh accumulator and the step joins the running sum with one IEEE
            # add (Triton's own tf32x3/bf16x3 do the same): chained into the large running sum, the MMA's
            # truncating accumulation cost 5x PyTorch's error at 4096 (measured on an H200).
            if SINGLE_STEP:  # K <= BLOCK_K: acc is still zero, chaining into it is the fresh accumulator
                acc = tl.dot(a_lo, b_hi, acc, input_precision="tf32")
                acc = tl.dot(a_hi, b_lo, acc, input_precision="tf32")
                acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")
            else:
                part = tl.dot(a_lo, b_hi, input_precision="tf32")
                part = tl.dot(a_hi, b_lo, part, input_precision="tf32")
                acc += tl.dot(a_hi, b_hi, part, input_precision="tf32")
        else:
            a = tl.load(a_ptr + a_offs, mask=a_mask, other=0.0)
            b = tl.load(b_ptr + b_offs, mask=b_mask, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_offs += BLOCK_K * stride_ak
        b_offs += BLOCK_K * stride_bk
    if TMA_STORE:
        # Two [BLOCK_M, BLOCK_N / 2] bulk copies through shared memory, clipped at the edges by the copy
        # engine.
        out = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        out0, out1 = tl.split(out)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], out0.to(c_desc.dtype))
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], out1.to(c_desc.dtype))
    else:
        c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n.to(tl.int64)[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def split_operand(x: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """hi, lo with x ~= hi + lo: bf16 parts (16 significant bits), or fp32 parts with hi exact in TF32."""
    x = x.contiguous()
    dtype = torch.float32 if mode == "tf32x3" else torch.bfloat16
    hi = torch.empty(x.shape, device=x.device, dtype=dtype)
    lo = torch.empty(x.shape, device=x.device, dtype=dtype)
    n = x.numel()
    split_kernel[(triton.cdiv(n, 2048),)](x, hi, lo, n, TF32=mode == "tf32x3", BLOCK=2048, num_warps=8)
    return hi, lo


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    mode = PARAMS["SPLIT"]
    split = mode != "none"
    if split:
        a, a_lo = split_operand(a, mode)
        if mode == "tf32x3":  # 32-bit wgmma operands must be K-contiguous: split B^T, view it back
            b_t, b_lo_t = split_operand(b.t(), mode)
            b, b_lo = b_t.t(), b_lo_t.t()
        else:  # 16-bit operands may be MN-major
            b, b_lo = split_operand(b, mode)
    else:
        if PARAMS["B_KMAJOR"]:
            b = b.t().contiguous().t()  # same values, K-contiguous storage
        a_lo, b_lo = a, b
    c = torch.empty((m, n), device=a.device, dtype=torch.float32)
    bm, bn, bk = PARAMS["BLOCK_M"], PARAMS["BLOCK_N"], PARAMS["BLOCK_K"]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    # The copy engine needs 16-byte aligned rows: other widths fall back to masked pointer stores.
    tma = PARAMS["TMA_STORE"] and (c.stride(0) * c.element_size()) % 16 == 0
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn // 2]) if tma else c
    tall_skinny_matmul_kernel[grid](a, a_lo, b, b_lo, c, c_desc, m, n, k, a.stride(0), a.stride(1),
                                    b.stride(0), b.stride(1), c.stride(0), c.stride(1), BLOCK_M=bm,
                                    BLOCK_N=bn, BLOCK_K=bk, GROUP_M=PARAMS["GROUP_M"], SPLIT=split,
                                    PRECISION=PARAMS["PRECISION"], EVEN_K=k % bk == 0, SINGLE_STEP=k <= bk,
                                    WIDEN=mode == "bf16x3" and INTERPRETED, TMA_STORE=tma,
                                    num_warps=PARAMS["num_warps"], num_stages=PARAMS["num_stages"])
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul(A, B)
