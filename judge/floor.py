"""The physical floor of a task on a device: the time no correct kernel of the reference's algorithm beats, from the
bytes it must move and the FLOPs it must do at the device's ceilings (the knowledge base's), and the verdict on a
time under it. The judge (``judge/chain.py``) reports ``pct_of_floor`` against the measured ceilings and holds a
time to the datasheet's: a time under the floor is ``implausible``, never ``ok``."""

from __future__ import annotations

import torch

from evoforge.core import EvalStatus

_DTYPE_PEAK = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


def physical_floor_ms(arch: str, *, bytes_moved: int, flops: int, dtype: torch.dtype,
                      passes: float = 1.0, measured: bool = True) -> tuple[float, float, float] | None:
    """(floor, memory floor, compute floor) in ms: no correct kernel of the reference's algorithm runs faster.

    The floor is max(bytes x passes / bandwidth, FLOPs / peak); the memory floor counts each input read
    and each output written once, the one bound no algorithm escapes. For float32 the fastest exact-enough
    arithmetic is three 16-bit tensor-core products per step (or 3xTF32), so its peak is the larger of the
    fp32 rate and a third of the bf16 or tf32 rate. The compute term counts the reference's FLOPs: a kernel
    that finds a cheaper algorithm may beat it, which a task admits with ``EVOFORGE_ALLOW = ["fewer_flops"]``.
    ``measured=True`` takes the knowledge base's measured ceilings (what ``pct_of_floor`` reports against);
    ``measured=False`` the datasheet's, the bounds the judge holds a time to (``floor_verdict``).
    """
    try:
        from evoforge import knowledge

        ceil = knowledge.ceilings(arch, measured=measured)
    except Exception:
        return None
    bandwidth = ceil.get("bandwidth_gbs")
    if not bandwidth:
        return None
    memory_ms = bytes_moved / (bandwidth * 1e9) * 1e3
    peaks = ceil.get("peak_tflops") or {}
    name = _DTYPE_PEAK.get(dtype, "fp32")
    peak = peaks.get(name)
    if name == "fp32":
        peak = max([p for p in (peaks.get("fp32"), (peaks.get("tf32") or 0) / 3, (peaks.get("bf16") or 0) / 3) if p]
                   or [0]) or None
    compute_ms = flops / (peak * 1e12) * 1e3 if peak and flops else 0.0
    return max(memory_ms * passes, compute_ms), memory_ms, compute_ms


def floor_verdict(cand_ms: float, *, memory_floor_ms: float, compute_floor_ms: float, flops: float,
                  allow: tuple[str, ...]) -> tuple[EvalStatus | None, str]:
    """``implausible`` for a time no correct kernel can reach: under the memory floor always; under the compute
    floor (the reference's FLOPs at peak) unless the task admits fewer FLOPs (``EVOFORGE_ALLOW =
    ["fewer_flops"]``: an algebraic rewrite). 3% slack for the measurement's own spread."""
    if cand_ms < 0.97 * memory_floor_ms:
        return EvalStatus.IMPLAUSIBLE, (
            f"measured {cand_ms:.4g} ms is below the memory floor {memory_floor_ms:.4g} ms (every input read and "
            "every output written once at the device's datasheet bandwidth): impossible, so the timing or the "
            "kernel is suspect")
    if cand_ms < 0.97 * compute_floor_ms and "fewer_flops" not in allow:
        return EvalStatus.IMPLAUSIBLE, (
            f"measured {cand_ms:.4g} ms is below the compute floor {compute_floor_ms:.4g} ms (the reference's "
            f"{flops:.3g} FLOPs at the device's datasheet peak): impossible unless the kernel does fewer FLOPs than the "
            "reference (an algebraic rewrite); a task that admits one says so with EVOFORGE_ALLOW = ['fewer_flops']")
    return None, ""


def below_floor(cand_ms: float, *, compute_floor_ms: float, allow: tuple[str, ...]) -> bool:
    """Whether an ``ok`` time is flagged as under the floor (shown, never a task's best): under the reference's
    FLOPs at peak where the task does not admit fewer. Where it does (``fewer_flops``), the time is the rewrite's
    and counts like any other (before 2026-12-07 it was flagged all the same, and L2/14's campaign on an H100 had
    30 correct evaluations at 22x and no best kernel)."""
    return cand_ms < 0.97 * compute_floor_ms and "fewer_flops" not in allow
