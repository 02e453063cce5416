"""Seed kernel: softmax over the last dimension of a 2-D tensor, one program per row.

LOOPED (a SPACE entry) switches the reduction's form:
- 0, one pass: the whole row sits in registers (BLOCK = next power of two of the row length); one read, one
  write. Fast while the row fits; registers spill once it does not.
- 1, looped: online softmax over chunks of BLOCK (running max and sum in one sweep, then a normalizing sweep);
  two reads, one write, any row length.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK": [256, 512, 1024, 2048, 4096],
    "LOOPED": [0, 1],
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3],
}
PARAMS = {"BLOCK": 1024, "LOOPED": 0, "num_warps": 4, "num_stages": 2}


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, LOOPED: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)
    if LOOPED:
        running_max = tl.full((BLOCK,), -float("inf"), tl.float32)
        running_sum = tl.zeros((BLOCK,), tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            v = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
            new_max = tl.maximum(running_max, v)
            scale = tl.where(new_max == -float("inf"), 0.0, tl.exp(running_max - new_max))
            running_sum = running_sum * scale + tl.where(mask, tl.exp(v - new_max), 0.0)
            running_max = new_max
        row_max = tl.max(running_max, 0)
        lane_scale = tl.where(running_max == -float("inf"), 0.0, tl.exp(running_max - row_max))
        row_sum = tl.sum(running_sum * lane_scale, 0)
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            v = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
            out = tl.exp(v - row_max) / row_sum
            tl.store(y_row + start + cols, out.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        mask = cols < n_cols
        v = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(v - tl.max(v, 0))
        out = e / tl.sum(e, 0)
        tl.store(y_row + cols, out.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        block = PARAMS["BLOCK"] if PARAMS["LOOPED"] else triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](
            x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=block, LOOPED=PARAMS["LOOPED"],
            num_warps=PARAMS["num_warps"], num_stages=PARAMS["num_stages"],
        )
        return y.reshape(x.shape)
