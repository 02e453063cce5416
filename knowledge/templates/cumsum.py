"""Inclusive prefix sum along one dimension: a scan over contiguous rows with a carried prefix.

Seed for level1/89_cumsum (32768 x 32768 fp32, dim=1; rows of 128 KB: one read and one write is the floor).
The scanned dimension is made the last, contiguous one (a no-op copy-free view for dim = -1, the KernelBench
case; a transposing copy otherwise). A program owns ROWS rows and walks them in [ROWS, BLOCK] tiles:
tl.cumsum of the tile along the row plus the running carry, then carry += the tile's row sums. The loads of
tile i+1 do not depend on the carry, so they can be issued while tile i is scanned; ROWS > 1 puts more
independent bytes in flight per program when rows are short.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK": [512, 1024, 2048, 4096, 8192],
    "ROWS": [1, 2, 4],
    "num_warps": [2, 4, 8, 16],
}
PARAMS = {"BLOCK": 1024, "ROWS": 1, "num_warps": 4}


@triton.jit
def cumsum_rows_kernel(x_ptr, y_ptr, n_rows, L, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    row_base = rows.to(tl.int64) * L
    cols = tl.arange(0, BLOCK)
    last = (cols == BLOCK - 1)[None, :]
    carry = tl.zeros([ROWS], dtype=tl.float32)
    for start in range(0, L, BLOCK):
        c = start + cols
        mask = row_mask[:, None] & (c < L)[None, :]
        offs = row_base[:, None] + c[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.cumsum(x, 1) + carry[:, None]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
        # The next carry is the tile's last prefix (masked tails load 0, so it is the running total). Written
        # as a selection, not `carry += tl.sum(x, 1)`: Triton 3.6's OptimizeThreadLocality pass asserts on a
        # loop-carried sum whose final value is unused (seen on sm90).
        carry = tl.sum(tl.where(last, y, 0.0), 1)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        xs = x.movedim(dim, -1).contiguous()
        length = xs.shape[-1]
        n_rows = xs.numel() // max(length, 1)
        y = torch.empty_like(xs)
        rows = PARAMS["ROWS"]
        block = min(PARAMS["BLOCK"], triton.next_power_of_2(length))
        cumsum_rows_kernel[(triton.cdiv(n_rows, rows),)](xs, y, n_rows, length, BLOCK=block, ROWS=rows,
                                                         num_warps=PARAMS["num_warps"])
        return y.movedim(-1, dim)
