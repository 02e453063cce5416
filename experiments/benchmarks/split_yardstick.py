"""Would a fp32 GEMM task's bf16-split kernel pass the chain's float64 criterion? A CPU estimate (issue R, L2/18).

The chain passes a fp32 output whose RMS distance from the float64 reference is at most 2x a yardstick: the larger of
the reference's own distance and that of the float64 reference on inputs rounded to 16 significant bits (a 3-pass
split's precision; ``judge/compare.py``). This script computes, for a KernelBench task whose first op is a Linear,
the reference's own distance (fp32 on the CPU, not cuBLAS), the rounded-input distance, and the distance of the same
model with its GEMM emulated as three bf16 products (hi*hi + hi*lo + lo*hi, fp32 accumulation): the knowledge base's
fp32 GEMM start. Two input draws.

    .venv/bin/python experiments/benchmarks/split_yardstick.py L2/18
"""

from __future__ import annotations

import sys
import time

import torch
from evoforge.judge.compare import round_significand

from evoforge.task import Task, load_task_module


def main(spec: str) -> None:
    task = Task.load(spec)
    module = load_task_module(task)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))

    def rms(a: torch.Tensor, b: torch.Tensor) -> float:
        return float(((a.double() - b.double()) ** 2).mean().sqrt())

    def bf16(t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.bfloat16).float()

    real_forward = linear.forward

    def split_forward(x: torch.Tensor) -> torch.Tensor:
        w = linear.weight.detach()
        xh, wh = bf16(x), bf16(w)
        xl, wl = bf16(x - xh), bf16(w - wh)
        return xh @ wh.t() + (xh @ wl.t() + xl @ wh.t()) + linear.bias

    print(f"{task.name}, torch {torch.__version__}")
    for seed in (7, 8):
        torch.manual_seed(seed)
        inputs = module.get_inputs()
        t0 = time.time()
        with torch.no_grad():
            ref = model(*inputs)
            linear.forward = split_forward
            split = model(*inputs)
            linear.forward = real_forward
            model.double()
            ref64 = model(*[x.double() for x in inputs])
            rounded64 = model(*[x.double() for x in round_significand(inputs)])
            model.float()
        own, rounded, emulated = rms(ref, ref64), rms(rounded64, ref64), rms(split, ref64)
        print(f"draw {seed}: reference's own {own:.3g}, inputs at 16 bits {rounded:.3g}, the chain's bound "
              f"{2 * max(own, rounded):.3g}; bf16 split (emulated) {emulated:.3g}: "
              f"{'passes' if emulated <= 2 * max(own, rounded) else 'fails'} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "L2/18")
