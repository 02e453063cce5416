"""BatchNorm2d, both modes, each as the kernels the mode needs.

Seed for level1/33_BatchNorm (64 x 64 x 512 x 512 fp32, 4.3 GB). evoforge builds the reference and the
candidate and calls ``.eval()`` on both, so the chain checks and times the inference form: the running stats
fold into one scale and shift per channel, and the op is one elementwise pass (read + write, the floor).
Each program owns a run of BLOCK * ITERS elements of one (n, c) plane, loads the channel's four parameters
once as scalars and streams the rest (H200, eval: 2.19 ms = 92% of the copy floor at BLOCK 1024, ITERS 4,
4 warps; eviction hints cost 4%).
The training form (``self.training``: batch statistics, and the running-stat update the output does not show)
is kept correct as well, since a campaign may time a task in train mode:
- kernel 1 (grid C x N): shifted partial sums of one (n, c) plane (k = x[0, c, 0]);
- kernel 2: the same elementwise pass, with scale and shift from the folded partials;
- kernel 3 (one program): running_mean/var with momentum (unbiased variance) and num_batches_tracked += 1.
Training costs read + read + write (3 passes over x's size).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {
    "BLOCK": [512, 1024, 2048, 4096, 8192],
    "ITERS": [1, 2, 4, 8],
    "num_warps": [4, 8, 16],
}
PARAMS = {"BLOCK": 1024, "ITERS": 4, "num_warps": 4}


@triton.jit
def bn_apply_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, var_ptr, C, S, eps,
                    BLOCK: tl.constexpr, ITERS: tl.constexpr):
    plane = tl.program_id(0)  # n * C + c
    c = plane % C
    scale = tl.load(w_ptr + c).to(tl.float32) / tl.sqrt(tl.load(var_ptr + c).to(tl.float32) + eps)
    shift = tl.load(b_ptr + c).to(tl.float32) - tl.load(mean_ptr + c).to(tl.float32) * scale
    base = plane.to(tl.int64) * S
    start = tl.program_id(1).to(tl.int64) * (BLOCK * ITERS)
    cols = tl.arange(0, BLOCK)
    for i in tl.static_range(ITERS):
        offs = start + i * BLOCK + cols
        mask = offs < S
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + offs, (x * scale + shift).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def bn_partial_kernel(x_ptr, part_ptr, N, C, S, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    n = tl.program_id(1)
    base = (n * C + c).to(tl.int64) * S
    shift = tl.load(x_ptr + c.to(tl.int64) * S).to(tl.float32)  # x[0, c, 0]
    cols = tl.arange(0, BLOCK)
    acc1 = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, S, BLOCK):
        offs = start + cols
        mask = offs < S
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - shift, 0.0)
        acc1 += d
        acc2 += d * d
    slot = (c * N + n) * 2
    tl.store(part_ptr + slot, tl.sum(acc1, 0))
    tl.store(part_ptr + slot + 1, tl.sum(acc2, 0))


@triton.jit
def bn_batch_stats_kernel(x_ptr, part_ptr, mean_ptr, var_ptr, N, C, S, P_BLOCK: tl.constexpr):
    """Per channel: fold N partials into the batch mean and biased variance."""
    c = tl.program_id(0)
    p = tl.arange(0, P_BLOCK)
    pmask = p < N
    parts = part_ptr + (c * N + p) * 2
    s1 = tl.sum(tl.load(parts, mask=pmask, other=0.0), 0)
    s2 = tl.sum(tl.load(parts + 1, mask=pmask, other=0.0), 0)
    count = N * S
    mean_d = s1 / count
    var = tl.maximum(s2 / count - mean_d * mean_d, 0.0)
    tl.store(mean_ptr + c, tl.load(x_ptr + c.to(tl.int64) * S).to(tl.float32) + mean_d)
    tl.store(var_ptr + c, var)


@triton.jit
def bn_running_update_kernel(mean_ptr, var_ptr, rm_ptr, rv_ptr, nbt_ptr, C, count, momentum,
                             CUMULATIVE: tl.constexpr, C_BLOCK: tl.constexpr):
    nbt = tl.load(nbt_ptr) + 1
    tl.store(nbt_ptr, nbt)
    if CUMULATIVE:
        factor = 1.0 / nbt.to(tl.float32)
    else:
        factor = momentum
    for c0 in range(0, C, C_BLOCK):
        c = c0 + tl.arange(0, C_BLOCK)
        m = c < C
        mean = tl.load(mean_ptr + c, mask=m, other=0.0)
        unbiased = tl.load(var_ptr + c, mask=m, other=0.0) * (count / tl.maximum(count - 1.0, 1.0))
        rm = tl.load(rm_ptr + c, mask=m, other=0.0)
        rv = tl.load(rv_ptr + c, mask=m, other=0.0)
        tl.store(rm_ptr + c, (rm + factor * (mean - rm)).to(rm_ptr.dtype.element_ty), mask=m)
        tl.store(rv_ptr + c, (rv + factor * (unbiased - rv)).to(rv_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        bn = self.bn
        n, c = x.shape[0], x.shape[1]
        s = x.numel() // max(n * c, 1)
        y = torch.empty_like(x)
        block = min(PARAMS["BLOCK"], triton.next_power_of_2(s))
        iters = min(PARAMS["ITERS"], triton.cdiv(s, block))
        use_batch_stats = bn.training or bn.running_mean is None
        if use_batch_stats:
            partials = torch.empty((c * n, 2), device=x.device, dtype=torch.float32)
            mean = torch.empty((c,), device=x.device, dtype=torch.float32)
            var = torch.empty((c,), device=x.device, dtype=torch.float32)
            bn_partial_kernel[(c, n)](x, partials, n, c, s, BLOCK=block, num_warps=PARAMS["num_warps"])
            bn_batch_stats_kernel[(c,)](x, partials, mean, var, n, c, s, P_BLOCK=triton.next_power_of_2(n))
            if bn.training and bn.track_running_stats and bn.running_mean is not None:
                momentum = 0.0 if bn.momentum is None else bn.momentum
                bn_running_update_kernel[(1,)](mean, var, bn.running_mean, bn.running_var,
                                               bn.num_batches_tracked, c, float(n * s), momentum,
                                               CUMULATIVE=bn.momentum is None,
                                               C_BLOCK=min(triton.next_power_of_2(c), 1024))
        else:
            mean, var = bn.running_mean, bn.running_var
        grid = (n * c, triton.cdiv(s, block * iters))
        bn_apply_kernel[grid](x, y, bn.weight, bn.bias, mean, var, c, s, bn.eps, BLOCK=block, ITERS=iters,
                              num_warps=PARAMS["num_warps"])
        return y
