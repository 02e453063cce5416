"""Small candidate sources the knowledge tests lint: one correct, and one per rule they must break."""

VECTOR_ADD = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {"BLOCK": [256, 512, 1024], "num_warps": [2, 4, 8]}
PARAMS = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, PARAMS["BLOCK"]),)
        add_kernel[grid](x, y, out, n, BLOCK=PARAMS["BLOCK"], num_warps=PARAMS["num_warps"])
        return out
'''

ARANGE_1000 = '''
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_kernel(x_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, 1000)
    tl.store(x_ptr + cols, tl.load(x_ptr + cols))


class ModelNew(nn.Module):
    def forward(self, x):
        row_kernel[(1,)](x, x.shape[1], BLOCK=1024)
        return x
'''

MATMUL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64, 128],
         "num_warps": [4, 8], "num_stages": [2, 3, 4, 5]}
PARAMS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3}


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak).to(tl.float16)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn).to(tl.float16)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))


class ModelNew(nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, PARAMS["BLOCK_M"]), triton.cdiv(N, PARAMS["BLOCK_N"]))
        mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=PARAMS["BLOCK_M"], BLOCK_N=PARAMS["BLOCK_N"],
                        BLOCK_K=PARAMS["BLOCK_K"], num_warps=PARAMS["num_warps"], num_stages=PARAMS["num_stages"])
        return c
'''

BLOCK_PTR_COPY = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, M, N, sxm, sym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(x_ptr, (M, N), (sxm, 1), (pid * BLOCK_M, 0), (BLOCK_M, BLOCK_N), (1, 0))
    dst = tl.make_block_ptr(y_ptr, (M, N), (sym, 1), (pid * BLOCK_M, 0), (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1)), boundary_check=(0, 1))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.shape[0], 64),)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0),
                                                     BLOCK_M=64, BLOCK_N=64, num_warps=4)
        return y
'''


def with_launch(source: str, old: str, new: str) -> str:
    """``source`` with one launch fragment replaced (the fixture a test needs, derived from a correct one)."""
    assert old in source, old
    return source.replace(old, new)
