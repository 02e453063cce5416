"""Sigmoid, elementwise: one read, one write; the kernel is a bandwidth test.

Seed for level1/21_Sigmoid. A 1-D grid of BLOCK-element tiles over the flattened tensor, int64 offsets
(4096 x 393216 = 1.6e9 elements sits just under int32's limit; any larger shape would wrap), every tail
masked.
On an H200 (measured at 4096 x 393216 fp32) 512-1024 elements per program with 2-4 warps streams at
97-100% of the copy bandwidth; 2048-8192 with 4-8 warps lands at 91-96%, and cache-eviction hints
(evict_first) cost 3-7%: leave them out of pure streams.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {"BLOCK": [512, 1024, 2048, 4096, 8192], "num_warps": [2, 4, 8, 16]}
PARAMS = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def sigmoid_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    # 1 / (1 + e^-x) through exp2: one MUFU.EX2 and one divide; exp2 overflows to inf for x << 0, giving 0.
    xf = x.to(tl.float32)
    y = 1.0 / (1.0 + tl.exp2(-xf * 1.4426950408889634))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = PARAMS["BLOCK"]
        sigmoid_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, num_warps=PARAMS["num_warps"])
        return y
