"""Tall-skinny fp32 matmul C = A @ B with a tiny K: the output write is the whole cost.

Seed for level1/9_Tall_skinny_matrix_multiplication_: A is (32768, 32), B is (32, 32768), C is (32768, 32768)
fp32 = 4.3 GB written for 8 MB read, 69 GFLOP. At the fp32 FMA peak (~51-67 TFLOP/s) the FLOPs alone take
1.0-1.35 ms, as long as the write: PyTorch sits at ~2.5 ms. With ``PRECISION = "tf32x3"`` the products run on
tensor cores (3 TF32 MMAs, error at fp32 level for K = 32) and the kernel becomes a pure store stream
(4.3 GB at ~4.3 TB/s, ~1.0 ms); "ieee" keeps exact FMAs. BLOCK_K = K (one iteration, EVEN_K) at the default
shape; A and B together are 8 MB and stay in L2, so GROUP_M matters little. Large BLOCK_N tiles give each
program long contiguous row segments to store; stores are marked evict_first (streamed, not reused).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [16, 32, 64],
    "GROUP_M": [1, 4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
    "PRECISION": ["tf32x3", "ieee"],
    "B_KMAJOR": [False, True],
}
PARAMS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 2,
          "PRECISION": "tf32x3", "B_KMAJOR": False}


@triton.jit
def tall_skinny_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  PRECISION: tl.constexpr, EVEN_K: tl.constexpr):
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
    a_ptrs = a_ptr + offs_m.to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n.to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=m_mask[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=n_mask[None, :], other=0.0)
        else:
            k_mask = offs_k < K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :],
             eviction_policy="evict_first")


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    if PARAMS["B_KMAJOR"]:
        b = b.t().contiguous().t()  # same values, K-contiguous storage
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    bm, bn, bk = PARAMS["BLOCK_M"], PARAMS["BLOCK_N"], PARAMS["BLOCK_K"]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    tall_skinny_matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=PARAMS["GROUP_M"],
                        PRECISION=PARAMS["PRECISION"], EVEN_K=k % bk == 0, num_warps=PARAMS["num_warps"],
                        num_stages=PARAMS["num_stages"])
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul(A, B)
