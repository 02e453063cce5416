"""Linear without bias, plus a separate bias parameter, ReLU: one GEMM kernel with the tail fused.

Seed for level2/76_Gemm_Add_ReLU (x 1024 x 8192, W 8192 x 8192, fp32: 137 GFLOP). The bias add and ReLU run
on the fp32 accumulator in registers: the output is written once. The GEMM is the matmul seed's: grouped
tiles, tensor cores through ``PRECISION = "tf32x3"`` (fp32-accurate), masks on every edge; W is nn.Linear's
(out, in) weight, K-contiguous as W^T tiles. Same parameter names as the reference (``self.gemm`` with
bias=False, ``self.bias``) so its state_dict loads into ModelNew.
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
}
PARAMS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
          "PRECISION": "tf32x3"}


@triton.jit
def gemm_add_relu_kernel(x_ptr, w_ptr, y_ptr, bias_ptr, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn,
                         stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr, EVEN_K: tl.constexpr):
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
    x_ptrs = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n.to(tl.int64)[None, :] * stride_wn  # W^T tile
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(x_ptrs, mask=m_mask[:, None], other=0.0)
            b = tl.load(w_ptrs, mask=n_mask[None, :], other=0.0)
        else:
            k_mask = offs_k < K - k * BLOCK_K
            a = tl.load(x_ptrs, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
            b = tl.load(w_ptrs, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    bias = tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    v = acc + bias[None, :]
    out = tl.where(v > 0, v, 0.0)
    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n.to(tl.int64)[None, :] * stride_yn
    tl.store(y_ptrs, out.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def linear_add_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """y = epilogue(x @ weight.T + bias); weight is nn.Linear's (out, in): already K-contiguous for wgmma."""
    x = x.contiguous()
    m, k = x.shape
    n = weight.shape[0]
    y = torch.empty((m, n), device=x.device, dtype=x.dtype)
    bm, bn, bk = PARAMS["BLOCK_M"], PARAMS["BLOCK_N"], PARAMS["BLOCK_K"]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    gemm_add_relu_kernel[grid](x, weight, y, bias, m, n, k, x.stride(0), x.stride(1), weight.stride(1),
                               weight.stride(0), y.stride(0), y.stride(1), BLOCK_M=bm, BLOCK_N=bn,
                               BLOCK_K=bk, GROUP_M=PARAMS["GROUP_M"], PRECISION=PARAMS["PRECISION"],
                               EVEN_K=k % bk == 0, num_warps=PARAMS["num_warps"], num_stages=PARAMS["num_stages"])
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return linear_add_relu(x, self.gemm.weight, self.bias)
