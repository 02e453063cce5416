"""GEMM, divide, sum over the output features, scale: folded into a column sum and a GEMV.

Seed for level2/14_Gemm_Divide_Sum_Scaling: y = sum_j (x @ W^T)[:, j] / 2 * s, x 1024 x 8192, W 8192 x 8192.
The sum over j commutes with the product: y = (s / 2) * x @ w_sum with w_sum[k] = sum_j W[j, k]. That turns a
137 GFLOP GEMM whose output is thrown away into two memory-bound passes: read W once (256 MB) and x once
(32 MB), ~0.07 ms on an H200 against ~2.7 ms for eager's fp32 GEMM. Accuracy is at least the reference's:
each output is one length-K dot product over exact-ish fp32 column sums instead of a sum of 8192 rounded
GEMM outputs. Deterministic: no atomics.
- kernel 1 (grid K/BLOCK_K x SPLIT): partial column sums of W over SPLIT row slices (coalesced rows);
- kernel 2 (grid K/BLOCK_K): folds the SPLIT partials into w_sum;
- kernel 3 (grid B/BLOCK_M): y[i] = (s / 2) * sum_k x[i, k] * w_sum[k], a [BLOCK_M, BLOCK_K] tile at a time.
w_sum is recomputed every call (W is a parameter the caller may change), never cached.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "COL_BLOCK_K": [32, 64, 128, 256],
    "COL_BLOCK_J": [8, 16, 32, 64],
    "SPLIT": [4, 8, 16, 32],
    "GEMV_BLOCK_M": [1, 2, 4, 8, 16],
    "GEMV_BLOCK_K": [256, 512, 1024, 2048],
    "num_warps": [2, 4, 8],
}
PARAMS = {"COL_BLOCK_K": 128, "COL_BLOCK_J": 32, "SPLIT": 16, "GEMV_BLOCK_M": 16, "GEMV_BLOCK_K": 1024,
          "num_warps": 4}


@triton.jit
def column_partial_sum_kernel(w_ptr, part_ptr, H, K, stride_wh, rows_per_split,
                              BLOCK_J: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_k = tl.program_id(0)
    split = tl.program_id(1)
    cols = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    col_mask = cols < K
    j0 = split * rows_per_split
    j_end = tl.minimum(j0 + rows_per_split, H)
    acc = tl.zeros([BLOCK_J, BLOCK_K], dtype=tl.float32)
    for j in range(j0, j_end, BLOCK_J):
        rows = j + tl.arange(0, BLOCK_J)
        mask = (rows < j_end)[:, None] & col_mask[None, :]
        w = tl.load(w_ptr + rows.to(tl.int64)[:, None] * stride_wh + cols[None, :], mask=mask, other=0.0,
                    eviction_policy="evict_first")
        acc += w.to(tl.float32)
    tl.store(part_ptr + split * K + cols, tl.sum(acc, 0), mask=col_mask)


@triton.jit
def column_sum_finish_kernel(part_ptr, wsum_ptr, K, n_split, SPLIT_P2: tl.constexpr, BLOCK_K: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    s = tl.arange(0, SPLIT_P2)
    mask = (s < n_split)[:, None] & (cols < K)[None, :]
    parts = tl.load(part_ptr + s[:, None] * K + cols[None, :], mask=mask, other=0.0)
    tl.store(wsum_ptr + cols, tl.sum(parts, 0), mask=cols < K)


@triton.jit
def gemv_scale_kernel(x_ptr, wsum_ptr, y_ptr, B, K, stride_xb, scale, BLOCK_M: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < B
    cols0 = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        cols = k + cols0
        col_mask = cols < K
        w = tl.load(wsum_ptr + cols, mask=col_mask, other=0.0)
        x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * stride_xb + cols[None, :],
                    mask=row_mask[:, None] & col_mask[None, :], other=0.0, eviction_policy="evict_first")
        acc += x.to(tl.float32) * w[None, :]
    tl.store(y_ptr + rows, (tl.sum(acc, 1) * scale).to(y_ptr.dtype.element_ty), mask=row_mask)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = x.contiguous()
        w = self.weight.contiguous()
        batch, k = x.shape
        hidden = w.shape[0]
        warps = PARAMS["num_warps"]
        bk = min(PARAMS["COL_BLOCK_K"], triton.next_power_of_2(k))
        bj = PARAMS["COL_BLOCK_J"]
        split = max(1, min(PARAMS["SPLIT"], triton.cdiv(hidden, bj)))
        rows_per_split = triton.cdiv(triton.cdiv(hidden, split), bj) * bj
        split = triton.cdiv(hidden, rows_per_split)
        partials = torch.empty((split, k), device=x.device, dtype=torch.float32)
        column_partial_sum_kernel[(triton.cdiv(k, bk), split)](w, partials, hidden, k, w.stride(0),
                                                               rows_per_split, BLOCK_J=bj, BLOCK_K=bk,
                                                               num_warps=warps)
        wsum = torch.empty((k,), device=x.device, dtype=torch.float32)
        column_sum_finish_kernel[(triton.cdiv(k, bk),)](partials, wsum, k, split,
                                                         SPLIT_P2=triton.next_power_of_2(split), BLOCK_K=bk,
                                                         num_warps=warps)
        y = torch.empty((batch, 1), device=x.device, dtype=x.dtype)
        bm = PARAMS["GEMV_BLOCK_M"]
        gk = min(PARAMS["GEMV_BLOCK_K"], triton.next_power_of_2(k))
        gemv_scale_kernel[(triton.cdiv(batch, bm),)](x, wsum, y, batch, k, x.stride(0),
                                                     float(self.scaling_factor) / 2.0, BLOCK_M=bm, BLOCK_K=gk,
                                                     num_warps=warps)
        return y
