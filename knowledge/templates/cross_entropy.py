"""Cross-entropy loss (mean over the batch, ignore_index -100): row logsumexp minus the target logit.

Seed for level1/95_CrossEntropyLoss (32768 x 4096 fp32 logits, 512 MB: one read is the floor).
- kernel 1: a program owns ROWS rows; it streams them in [ROWS, BLOCK_C] tiles with an online max and
  rescaled sum (log2 units, one exp2 per element), so any vocabulary size works; at KernelBench's 4096 classes
  and BLOCK_C = 4096 the loop runs once and a row is read exactly once. The target logit is one gathered load
  per row (a sector of the row just read: an L2 hit). It writes the program's partial loss sum and count of
  non-ignored targets.
- kernel 2 (one program): sums the partials in a fixed order and divides: deterministic, no atomics.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "ROWS": [1, 2, 4, 8],
    "BLOCK_C": [1024, 2048, 4096, 8192],
    "num_warps": [4, 8, 16],
}
PARAMS = {"ROWS": 2, "BLOCK_C": 4096, "num_warps": 8}

IGNORE_INDEX = -100


@triton.jit
def ce_rows_kernel(x_ptr, t_ptr, loss_ptr, count_ptr, B, C, stride_x, ignore_index,
                   ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < B
    row_base = rows.to(tl.int64) * stride_x
    cols = tl.arange(0, BLOCK_C)
    m = tl.full([ROWS], -float("inf"), tl.float32)
    s = tl.zeros([ROWS], dtype=tl.float32)
    for start in range(0, C, BLOCK_C):
        c = start + cols
        col_mask = c < C
        x = tl.load(x_ptr + row_base[:, None] + c[None, :], mask=row_mask[:, None] & col_mask[None, :],
                    other=0.0, eviction_policy="evict_first").to(tl.float32)
        # Rows past the batch read zeros (finite); columns past C are -inf and add nothing to the sum.
        x = tl.where(col_mask[None, :], x * 1.4426950408889634, -float("inf"))
        m_new = tl.maximum(m, tl.max(x, 1))
        s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new[:, None]), 1)
        m = m_new
    lse = (m + tl.log2(s)) * 0.6931471805599453
    t = tl.load(t_ptr + rows, mask=row_mask, other=ignore_index)
    valid = row_mask & (t != ignore_index)
    x_t = tl.load(x_ptr + row_base + tl.where(valid, t, 0), mask=valid, other=0.0).to(tl.float32)
    loss = tl.where(valid, lse - x_t, 0.0)
    tl.store(loss_ptr + pid, tl.sum(loss, 0))
    tl.store(count_ptr + pid, tl.sum(valid.to(tl.float32), 0))


@triton.jit
def ce_mean_kernel(loss_ptr, count_ptr, out_ptr, P, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    count = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, P, BLOCK):
        mask = start + offs < P
        total += tl.load(loss_ptr + start + offs, mask=mask, other=0.0)
        count += tl.load(count_ptr + start + offs, mask=mask, other=0.0)
    tl.store(out_ptr, (tl.sum(total, 0) / tl.sum(count, 0)).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = predictions.contiguous()
        t = targets.contiguous()
        batch, classes = x.shape
        rows = PARAMS["ROWS"]
        block_c = min(PARAMS["BLOCK_C"], triton.next_power_of_2(classes))
        programs = triton.cdiv(batch, rows)
        losses = torch.empty((programs,), device=x.device, dtype=torch.float32)
        counts = torch.empty((programs,), device=x.device, dtype=torch.float32)
        ce_rows_kernel[(programs,)](x, t, losses, counts, batch, classes, x.stride(0), IGNORE_INDEX,
                                    ROWS=rows, BLOCK_C=block_c, num_warps=PARAMS["num_warps"])
        out = torch.empty((), device=x.device, dtype=x.dtype)
        ce_mean_kernel[(1,)](losses, counts, out, programs, BLOCK=min(triton.next_power_of_2(programs), 4096),
                             num_warps=8)
        return out
