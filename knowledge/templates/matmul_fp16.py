"""Dense fp16 matmul C = A @ B: grouped tiles on the tensor cores, with two numerics choices that are faster and
wrong for an fp16 task, so that a search has to learn to leave them alone.

Seed for experiments/tasks/matmul_fp16_4096.py. The kernel is matmul_bf16.py's pointer kernel (grouped launch
order, EVEN_K / EVEN_MN drop the masks a shape does not need, int64 offsets only past 2^31 elements) on fp16
operands, plus:
- ACC: "fp32" (the default, as cuBLAS accumulates) or "fp16": the MMA accumulates in fp16, half the accumulator
  registers. At K = 4096 the running sums of randn products reach hundreds, where an fp16 ulp is 0.25: the
  result is far outside fp16 tolerance against torch.matmul (fp32 accumulation).
- OPERANDS: "fp16" (the default) or "fp8": both operands rounded once to float8 e4m3 before the GEMM (B stored
  K-major, as the fp8 tensor cores need on sm90), twice the fp16 MMA rate and a 3-bit mantissa: incorrect for
  an fp16 task.
- SPLIT_K: 1 (the default) gives each program a whole K loop; S > 1 cuts K into S slices over a second grid
  axis, each slice's fp32 partial tile goes to a (S, M, N) fp32 workspace, and a second kernel sums the slices
  in order (deterministic, no atomics) into C. It is for shapes whose output tiles are too few to fill the GPU
  and whose K is long (1024 x 1024 x 16384: 64 tiles of 128 x 128 for 132 SMs); elsewhere it only adds the
  workspace's round trip through memory.
ACC and OPERANDS exist to be recorded as tuning landscapes (experiments/benchmarks/record_landscape.py) and as
choices a campaign may meet; the knowledge base says in advance that they are unsafe for an fp16 task
(knowledge/rules/precision.yaml, ``unsafe_values``). Under TRITON_INTERPRET the fp16 accumulator is computed in
fp32 and rounded (numpy), so the interpreter cannot see ACC's error: only a GPU run can.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK_M": [64, 128, 256],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [1, 8],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
    "ACC": ["fp32", "fp16"],
    "OPERANDS": ["fp16", "fp8"],
    "SPLIT_K": [1, 2, 4, 8],
}
PARAMS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
          "ACC": "fp32", "OPERANDS": "fp16", "SPLIT_K": 1}


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, EVEN_MN: tl.constexpr, INT64: tl.constexpr,
                  ACC16: tl.constexpr, SPLIT_K: tl.constexpr):
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
    if INT64:
        rm, rn, rk = offs_m.to(tl.int64), offs_n.to(tl.int64), offs_k.to(tl.int64)
    else:
        rm, rn, rk = offs_m, offs_n, offs_k
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    if ACC16:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float16)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if SPLIT_K == 1:
        k_first, k_last = 0, tl.cdiv(K, BLOCK_K)
    else:  # this program's slice of the K steps; its partial tile goes to slice pid_k of the fp32 workspace
        pid_k = tl.program_id(1)
        k_steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
        k_first = pid_k * k_steps
        k_last = tl.minimum(k_first + k_steps, tl.cdiv(K, BLOCK_K))
        a_ptrs += k_first * BLOCK_K * stride_ak
        b_ptrs += k_first * BLOCK_K * stride_bk
        c_ptr += pid_k.to(tl.int64) * M * N
    for k in range(k_first, k_last):
        if EVEN_K and EVEN_MN:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        elif EVEN_K:
            a = tl.load(a_ptrs, mask=m_mask[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=n_mask[None, :], other=0.0)
        else:
            k_mask = offs_k < K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        if ACC16:
            acc = tl.dot(a, b, acc, out_dtype=tl.float16)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    if EVEN_MN:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty))
    else:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def splitk_sum_kernel(ws_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    """C = the sum of the workspace's SPLIT_K slices, in slice order."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    ws_ptrs = ws_ptr + offs
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptrs, mask=mask, other=0.0)
        ws_ptrs += MN
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def to_fp8(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A as float8 e4m3 (row-major); B as float8 with K contiguous (the transpose stored, viewed back)."""
    a8 = a.to(torch.float8_e4m3fn)
    b8 = torch.empty((b.shape[1], b.shape[0]), device=b.device, dtype=torch.float8_e4m3fn).copy_(b.t()).t()
    return a8, b8


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    if PARAMS["OPERANDS"] == "fp8":
        a, b = to_fp8(a, b)
    split_k = PARAMS["SPLIT_K"]
    # Split K: the tiles write fp32 partials to a (SPLIT_K, M, N) workspace, row-major, summed into C below.
    out = c if split_k == 1 else torch.empty((split_k, m, n), device=c.device, dtype=torch.float32)
    grid = (triton.cdiv(m, PARAMS["BLOCK_M"]) * triton.cdiv(n, PARAMS["BLOCK_N"]), split_k)
    # Tile sizes passed straight from PARAMS: the knowledge base's static checks (shared-memory budget) read
    # them at the launch and cannot follow a tuple-unpacked local.
    matmul_kernel[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(-2),
                        out.stride(-1), BLOCK_M=PARAMS["BLOCK_M"], BLOCK_N=PARAMS["BLOCK_N"],
                        BLOCK_K=PARAMS["BLOCK_K"], GROUP_M=PARAMS["GROUP_M"], EVEN_K=k % PARAMS["BLOCK_K"] == 0,
                        EVEN_MN=m % PARAMS["BLOCK_M"] == 0 and n % PARAMS["BLOCK_N"] == 0,
                        INT64=max(m * k, k * n, split_k * m * n) >= 2**31, ACC16=PARAMS["ACC"] == "fp16",
                        SPLIT_K=split_k, num_warps=PARAMS["num_warps"], num_stages=PARAMS["num_stages"])
    if split_k > 1:
        splitk_sum_kernel[(triton.cdiv(m * n, 1024),)](out, c, m * n, SPLIT_K=split_k, BLOCK=1024, num_warps=4)
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul(A, B)
