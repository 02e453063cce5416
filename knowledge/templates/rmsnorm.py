"""RMSNorm over dim 1 (features) of (batch, features, *spatial): a reduction across a strided dimension.

Seed for level1/36_RMSNorm_ (112 x 64 x 512 x 512 fp32, 7.5 GB in and out). The reduced dimension has
stride H*W, so a program owns a tile of BLOCK_S contiguous spatial positions for one batch index and holds
all features of it: a [BLOCK_F, BLOCK_S] tile whose rows are contiguous runs (coalesced 16-byte vectors),
reduced along the feature axis. Every element is read once and written once (the floor).
- ONE_PASS (next_power_of_2(features) <= BLOCK_F): the whole [features, BLOCK_S] tile stays in registers.
- otherwise: loop over feature chunks of BLOCK_F twice (sum of squares, then scale and store); the
  second sweep re-reads a tile of features * BLOCK_S * 4 bytes that is still in L1/L2.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK_S": [32, 64, 128, 256, 512],
    "BLOCK_F": [16, 32, 64, 128],
    "num_warps": [2, 4, 8, 16],
}
PARAMS = {"BLOCK_S": 128, "BLOCK_F": 64, "num_warps": 4}


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, F, S, eps, BLOCK_F: tl.constexpr, BLOCK_S: tl.constexpr,
                   ONE_PASS: tl.constexpr):
    pid_s = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    base = b * F * S
    s_offs = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    s_mask = s_offs < S
    f_offs = tl.arange(0, BLOCK_F)
    if ONE_PASS:
        mask = (f_offs < F)[:, None] & s_mask[None, :]
        offs = base + f_offs.to(tl.int64)[:, None] * S + s_offs[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / F + eps)
        y = x * rstd[None, :]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_F, BLOCK_S], dtype=tl.float32)
        for f0 in range(0, F, BLOCK_F):
            f = f0 + f_offs
            mask = (f < F)[:, None] & s_mask[None, :]
            offs = base + f.to(tl.int64)[:, None] * S + s_offs[None, :]
            x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / F + eps)
        for f0 in range(0, F, BLOCK_F):
            f = f0 + f_offs
            mask = (f < F)[:, None] & s_mask[None, :]
            offs = base + f.to(tl.int64)[:, None] * S + s_offs[None, :]
            x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            tl.store(y_ptr + offs, (x * rstd[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, features = x.shape[0], x.shape[1]
        spatial = x.numel() // max(batch * features, 1)
        y = torch.empty_like(x)
        f_tile = triton.next_power_of_2(features)
        one_pass = f_tile <= PARAMS["BLOCK_F"]
        block_f = f_tile if one_pass else PARAMS["BLOCK_F"]
        block_s = min(PARAMS["BLOCK_S"], triton.next_power_of_2(spatial))
        grid = (triton.cdiv(spatial, block_s), batch)
        rmsnorm_kernel[grid](x, y, features, spatial, self.eps, BLOCK_F=block_f, BLOCK_S=block_s,
                             ONE_PASS=one_pass, num_warps=PARAMS["num_warps"])
        return y
