"""Dense fp32 matmul C = A @ B: grouped tiles, tensor cores through a precise input precision.

Seed for level1/1_Square_matrix_multiplication_ (4096^3 fp32). PyTorch's fp32 matmul (cuBLAS SGEMM, no TF32)
runs at the fp32 FMA peak; plain TF32 is ~8x faster but fails the fp32 check (0.29 max abs err at 4096).
``PRECISION = "tf32x3"`` splits each operand into a TF32 head and tail and issues three tensor-core products
(error ~1.9e-4 from float64 at 4096, below PyTorch's own 9.5e-4), which is the way past cuBLAS; "ieee" is the
exact FMA path (correct, no faster than cuBLAS). Both pass the chain; TF32 alone is not in SPACE.
- Grouped launch order (GROUP_M tiles of M share each B column panel) keeps panels L2-resident.
- Edge tiles are handled with masks (never with wrapped indices plus contiguity hints, which would be a lie
  on odd sizes); EVEN_K drops the K mask when K % BLOCK_K == 0, the usual KernelBench case.
- B_KMAJOR copies B transposed first (a 64 MB copy at 4096, ~30 us) so both operands are K-contiguous, the
  layout Hopper's wgmma wants for 32-bit inputs; try both.
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
PARAMS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
          "PRECISION": "tf32x3", "B_KMAJOR": False}


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
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
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    if PARAMS["B_KMAJOR"]:
        b = b.t().contiguous().t()  # same values, K-contiguous storage
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    bm, bn, bk = PARAMS["BLOCK_M"], PARAMS["BLOCK_N"], PARAMS["BLOCK_K"]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=PARAMS["GROUP_M"],
                        PRECISION=PARAMS["PRECISION"], EVEN_K=k % bk == 0, num_warps=PARAMS["num_warps"],
                        num_stages=PARAMS["num_stages"])
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul(A, B)
