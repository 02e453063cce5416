"""Dense fp32 matmul C = A @ B: grouped tiles on tensor cores, at fp32-level accuracy.

Seed for level1/1_Square_matrix_multiplication_ (4096^3 fp32). PyTorch's fp32 matmul (cuBLAS SGEMM, no TF32)
runs at the fp32 FMA peak (~51 TFLOP/s measured); plain TF32 is far faster but fails the fp32 check (0.29 max
abs err at 4096). SPLIT chooses the accurate way onto the tensor cores:
- "bf16x3" (default): a prologue kernel splits each operand once into bf16 hi and lo (x = hi + lo to 16
  significant bits); the main loop issues three bf16 MMAs, lo*hi + hi*lo + hi*hi, with operands straight
  from shared memory (bf16 runs at twice the TF32 rate, and 16-bit operands may be MN-major). H200, 4096:
  0.79 ms (eager 2.68 ms), error 8.2e-4 from float64 against PyTorch's own 4.7e-3.
- "tf32x3": the same with fp32 hi/lo parts and TF32 MMAs (B split transposed: 32-bit wgmma operands must be
  K-contiguous): 1.55 ms, error 1.0e-3.
- "none": one tl.dot on the fp32 tiles with PRECISION "tf32x3" (Triton splits in registers inside the loop:
  1.69 ms with B_KMAJOR, 3.99 ms without) or "ieee" (exact FMAs, 3.2 ms).
Each K step's three products go into a fresh accumulator that joins the running sum with one IEEE add, as
Triton's own tf32x3/bf16x3 do: chained straight into the running sum, the MMA's truncating accumulation gave
5x PyTorch's error (measured). The extra accumulator tile costs registers: 128 x 256 tiles spill (2.2 ms);
128 x 128 x 64 with 8 warps is the measured best.
SPLIT_K splits the K loop over a second grid axis for problems with fewer output tiles than SMs (L1/6: a 256x256
output, K = 524288, four 128x128 tiles for 132 SMs): each program sums its share of the K tiles into a slice of an
fp32 workspace and reduce_kernel adds the slices in split order (the same bits on every run). The knowledge base's
shape rule (knowledge/starts.py) starts it where the tiles leave SMs idle; 1 (no workspace) otherwise.
Edge tiles are handled with masks (never wrapped indices plus contiguity hints, a lie on odd sizes); EVEN_K
drops the K mask when K % BLOCK_K == 0. Grouped launch order (GROUP_M) keeps B panels L2-resident.
The Triton interpreter (3.6) multiplies bf16 tiles as raw 16-bit integers, so under TRITON_INTERPRET the
bf16 parts are widened to fp32 before tl.dot: the same products (bf16 x bf16 is exact in fp32).
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64],
    "GROUP_M": [1, 4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
    "SPLIT": ["bf16x3", "tf32x3", "none"],
    "PRECISION": ["tf32x3", "ieee"],
    "B_KMAJOR": [False, True],
    "SPLIT_K": [1, 2, 4, 8, 16, 32, 64],
}
PARAMS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
          "SPLIT": "bf16x3", "PRECISION": "tf32x3", "B_KMAJOR": True, "SPLIT_K": 1}

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
def matmul_kernel(a_ptr, a_lo_ptr, b_ptr, b_lo_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                  stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SPLIT: tl.constexpr, PRECISION: tl.constexpr,
                  EVEN_K: tl.constexpr, WIDEN: tl.constexpr, SPLIT_K: tl.constexpr):
    pid = tl.program_id(0)
    # SPLIT_K > 1: program (pid, pid_k) sums the pid_k-th share of the K tiles into its own slice of c (a
    # [SPLIT_K, M, N] fp32 workspace, contiguous), which reduce_kernel adds up in a fixed order.
    pid_k = tl.program_id(1)
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    k_first = pid_k * per_split
    k_last = tl.minimum(k_first + per_split, k_tiles)
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
    k_base = k_first.to(tl.int64) * BLOCK_K
    a_offs = offs_m.to(tl.int64)[:, None] * stride_am + (k_base + offs_k[None, :]) * stride_ak
    b_offs = (k_base + offs_k[:, None]) * stride_bk + offs_n.to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(k_first, k_last):
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
            part = tl.dot(a_lo, b_hi, input_precision="tf32")
            part = tl.dot(a_hi, b_lo, part, input_precision="tf32")
            acc += tl.dot(a_hi, b_hi, part, input_precision="tf32")
        else:
            a = tl.load(a_ptr + a_offs, mask=a_mask, other=0.0)
            b = tl.load(b_ptr + b_offs, mask=b_mask, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_offs += BLOCK_K * stride_ak
        b_offs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n.to(tl.int64)[None, :] * stride_cn
    if SPLIT_K > 1:
        c_ptrs += pid_k.to(tl.int64) * M * N
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def reduce_kernel(ws_ptr, c_ptr, n, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    """c = the sum of the SPLIT_K partial products, in split order (the same bits on every run)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(ws_ptr + offs, mask=mask, other=0.0)
    for s in range(1, SPLIT_K):
        acc += tl.load(ws_ptr + s * n + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc, mask=mask)


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
    # no more splits than K tiles: each split gets at least one
    splits = max(1, min(PARAMS["SPLIT_K"], triton.cdiv(k, bk)))
    out = c if splits == 1 else torch.empty((splits, m, n), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), splits)
    matmul_kernel[grid](a, a_lo, b, b_lo, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        n, 1, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                        GROUP_M=PARAMS["GROUP_M"], SPLIT=split, PRECISION=PARAMS["PRECISION"],
                        EVEN_K=k % bk == 0, WIDEN=mode == "bf16x3" and INTERPRETED, SPLIT_K=splits,
                        num_warps=PARAMS["num_warps"], num_stages=PARAMS["num_stages"])
    if splits > 1:
        reduce_kernel[(triton.cdiv(m * n, 1024),)](out, c, m * n, SPLIT_K=splits, BLOCK=1024, num_warps=4)
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul(A, B)
