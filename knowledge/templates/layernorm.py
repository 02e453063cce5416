"""LayerNorm over the trailing dims with a split reduction: partial sums per chunk, then normalise.

Seed for level1/40_LayerNorm: x is (16, 64, 256, 256) and normalized_shape = (64, 256, 256), so there are
only 16 rows of 4M elements each. One program per row would use 16 of 132 SMs; instead every row is cut
into chunks of BLOCK * ITERS elements and
- kernel 1 (grid rows x chunks) writes, per chunk, sum(x - k) and sum((x - k)^2) with k = the row's first
  element (shifted sums: E[x^2] - E[x]^2 without the catastrophic cancellation when |mean| >> std);
- kernel 2 (same grid) folds its row's partials (a few hundred floats, L2-resident) into mean and rstd and
  writes y = (x - mean) * rstd * w + b.
Programs are numbered chunk-major (consecutive programs take the same chunk of every row), so each chunk of
w and b comes from HBM once and is an L2 hit for the other rows; row-major numbering streams all of w and b
(32 MB) once per row.
Memory: x is read twice (the floor for a row too long to keep on chip: floor_passes 2 counts read+read+write
over read+write ~ 1.5x), w and b once. REVERSE runs kernel 2's programs in the opposite order to kernel 1's,
so the chunks kernel 1 read last are still in L2 when kernel 2 starts.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK": [1024, 2048, 4096, 8192],
    "ITERS": [1, 2, 4, 8, 16],
    "num_warps": [4, 8, 16],
    "REVERSE": [True, False],
}
PARAMS = {"BLOCK": 2048, "ITERS": 16, "num_warps": 8, "REVERSE": True}


@triton.jit
def ln_partial_kernel(x_ptr, part_ptr, N, n_rows, n_chunks, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    chunk = pid // n_rows
    row = pid % n_rows
    x_row = x_ptr + row.to(tl.int64) * N
    shift = tl.load(x_row).to(tl.float32)
    base = chunk.to(tl.int64) * (BLOCK * ITERS)
    cols = tl.arange(0, BLOCK)
    acc1 = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(ITERS):
        offs = base + i * BLOCK + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - shift, 0.0)
        acc1 += d
        acc2 += d * d
    slot = (row * n_chunks + chunk) * 2
    tl.store(part_ptr + slot, tl.sum(acc1, 0))
    tl.store(part_ptr + slot + 1, tl.sum(acc2, 0))


@triton.jit
def ln_normalize_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, N, n_rows, n_chunks, eps,
                        BLOCK: tl.constexpr, ITERS: tl.constexpr, P_BLOCK: tl.constexpr,
                        REVERSE: tl.constexpr):
    pid = tl.program_id(0)
    if REVERSE:
        pid = tl.num_programs(0) - 1 - pid
    chunk = pid // n_rows
    row = pid % n_rows
    x_row = x_ptr + row.to(tl.int64) * N
    y_row = y_ptr + row.to(tl.int64) * N
    p = tl.arange(0, P_BLOCK)
    pmask = p < n_chunks
    parts = part_ptr + (row * n_chunks + p) * 2
    s1 = tl.sum(tl.load(parts, mask=pmask, other=0.0), 0)
    s2 = tl.sum(tl.load(parts + 1, mask=pmask, other=0.0), 0)
    shift = tl.load(x_row).to(tl.float32)
    mean_d = s1 / N
    var = tl.maximum(s2 / N - mean_d * mean_d, 0.0)
    mean = shift + mean_d
    rstd = 1.0 / tl.sqrt(var + eps)
    base = chunk.to(tl.int64) * (BLOCK * ITERS)
    cols = tl.arange(0, BLOCK)
    for i in tl.static_range(ITERS):
        offs = base + i * BLOCK + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = self.ln.weight.numel()
        rows = x.numel() // n
        y = torch.empty_like(x)
        block = min(PARAMS["BLOCK"], triton.next_power_of_2(n))
        iters = PARAMS["ITERS"]
        n_chunks = triton.cdiv(n, block * iters)
        partials = torch.empty((rows * n_chunks, 2), device=x.device, dtype=torch.float32)
        grid = (rows * n_chunks,)
        ln_partial_kernel[grid](x, partials, n, rows, n_chunks, BLOCK=block, ITERS=iters,
                                num_warps=PARAMS["num_warps"])
        ln_normalize_kernel[grid](x, self.ln.weight.contiguous(), self.ln.bias.contiguous(), y, partials, n,
                                  rows, n_chunks, self.ln.eps, BLOCK=block, ITERS=iters,
                                  P_BLOCK=triton.next_power_of_2(n_chunks), REVERSE=PARAMS["REVERSE"],
                                  num_warps=PARAMS["num_warps"])
        return y
