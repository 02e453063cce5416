"""Seed for the smoke ablation (level1/19_ReLU at batch_size=16, dim=1024 on the Triton interpreter).

The shipped template (knowledge/templates/elementwise_relu.py) is tuned for a GPU streaming 1.6e9 elements;
on 16K elements in the interpreter its 4K-8K blocks leave nothing to tune. This one spans small blocks too, so
the strategies have a space with a real optimum to find in a few evaluations.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {"BLOCK": [128, 256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4]}
PARAMS = {"BLOCK": 256, "num_warps": 4}


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.0).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = PARAMS["BLOCK"]
        relu_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, num_warps=PARAMS["num_warps"])
        return y
