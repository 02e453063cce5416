"""Output comparison with dtype-aware tolerances and a float64 criterion.

Criteria, in order (the result says which one decided):
1. ``allclose``: ``|out - ref| <= atol + rtol * |ref|`` elementwise against the reference computed in the
   task's own dtype, with the tolerances below.
2. ``float64``: where (1) fails and the reference can run in float64, the candidate passes if its max
   abs distance from the float64 result is at most ``F64_FACTOR`` x the reference's own distance. A kernel
   more accurate than PyTorch (3xTF32 on a long fp32 matmul) passes; plain TF32 does not.
NaN or Inf where the reference is finite always fails. Integer and bool outputs must match exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# (atol, rtol) per output dtype. fp32 is tight: fp32 arithmetic lands far under 1e-4 relative on these
# sizes; a looser answer (tf32) must earn its pass through the float64 criterion.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-8, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}
F64_FACTOR = 2.0


@dataclass(frozen=True)
class Comparison:
    ok: bool
    criterion: str
    max_abs_err: float
    max_rel_err: float
    message: str


def flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, tuple | list):
        return [x for item in out for x in flatten_outputs(item)]
    if isinstance(out, dict):
        return [x for key in sorted(out) for x in flatten_outputs(out[key])]
    return [out]


def _as_tensor(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, int | float | bool):
        return torch.tensor(x)
    return None


def _index(flat_index: int, shape: torch.Size) -> tuple[int, ...]:
    out = []
    for dim in reversed(shape):
        out.append(flat_index % dim if dim else 0)
        flat_index = flat_index // dim if dim else 0
    return tuple(reversed(out))


def compare_outputs(got: Any, expected: Any, *, reference64: Callable[[], Any] | None = None,
                    tolerances: dict[torch.dtype, tuple[float, float]] | None = None) -> Comparison:
    """Compare a candidate's output with the reference's; ``reference64`` computes the float64 result lazily."""
    tol = {**TOLERANCES, **(tolerances or {})}
    got_list, exp_list = flatten_outputs(got), flatten_outputs(expected)
    if len(got_list) != len(exp_list):
        return Comparison(False, "structure", float("inf"), float("inf"),
                          f"forward returned {len(got_list)} output(s); the reference returns {len(exp_list)}")
    worst_abs = worst_rel = 0.0
    failing: list[tuple[int, str]] = []
    for i, (g_raw, e_raw) in enumerate(zip(got_list, exp_list, strict=True)):
        g, e = _as_tensor(g_raw), _as_tensor(e_raw)
        if e is None:
            continue  # a non-tensor reference output (None, a string) is not compared
        if g is None:
            return Comparison(False, "structure", float("inf"), float("inf"),
                              f"output {i} is {type(g_raw).__name__}, expected a tensor")
        if g.shape != e.shape:
            return Comparison(False, "shape", float("inf"), float("inf"),
                              f"output {i} has shape {tuple(g.shape)}, expected {tuple(e.shape)}")
        if g.dtype != e.dtype:
            return Comparison(False, "dtype", float("inf"), float("inf"),
                              f"output {i} has dtype {g.dtype}, expected {e.dtype}")
        # Compared where the tensors live (a GPU output can be gigabytes): float32 holds the difference of two
        # float32/16 values to far better than any tolerance here; float64 outputs stay float64.
        work = torch.float64 if e.dtype == torch.float64 else torch.float32
        g64, e64 = g.detach().to(work), e.detach().to(work)
        if not (e.is_floating_point() or e.is_complex()):
            mismatched = (g64 != e64)
            if bool(mismatched.any()):
                where = _index(int(mismatched.flatten().nonzero()[0]), e.shape)
                return Comparison(False, "exact", float((g64 - e64).abs().max()), float("inf"),
                                  f"output {i}: {int(mismatched.sum())} of {e.numel()} elements differ "
                                  f"(integer output must match exactly); first at index {where}: "
                                  f"got {g64[where].item()}, expected {e64[where].item()}")
            continue
        bad_finite = torch.isfinite(g64) != torch.isfinite(e64)
        both_nan = torch.isnan(g64) & torch.isnan(e64)
        if bool(bad_finite.any()):
            where = _index(int(bad_finite.flatten().nonzero()[0]), e.shape)
            return Comparison(False, "nonfinite", float("inf"), float("inf"),
                              f"output {i}: {int(bad_finite.sum())} of {e.numel()} elements are NaN/Inf where the "
                              f"reference is finite (or the reverse); first at index {where}: "
                              f"got {g64[where].item()}, expected {e64[where].item()}")
        diff = (g64 - e64).abs()
        diff = torch.where(both_nan | (torch.isinf(g64) & (g64 == e64)), torch.zeros_like(diff), diff)
        diff = torch.nan_to_num(diff, nan=0.0)
        atol, rtol = tol.get(e.dtype, (1e-4, 1e-4))
        rel = diff / e64.abs().clamp_min(1e-12)
        worst_abs = max(worst_abs, float(diff.max()) if diff.numel() else 0.0)
        worst_rel = max(worst_rel, float(torch.nan_to_num(rel, posinf=0.0).max()) if rel.numel() else 0.0)
        over = diff > atol + rtol * torch.nan_to_num(e64.abs(), posinf=0.0)
        if bool(over.any()):
            flat = int(diff.flatten().argmax())
            where = _index(flat, e.shape)
            failing.append((i, f"output {i}: {int(over.sum())} of {e.numel()} elements "
                               f"({100.0 * float(over.sum()) / max(e.numel(), 1):.2f}%) differ beyond "
                               f"atol={atol:g}, rtol={rtol:g}; max abs err {float(diff.max()):.4g} at index "
                               f"{where}: got {g64.flatten()[flat].item():.6g}, "
                               f"expected {e64.flatten()[flat].item():.6g}"))
    if not failing:
        return Comparison(True, "allclose", worst_abs, worst_rel, "")
    if reference64 is not None:
        try:
            ref64_list = flatten_outputs(reference64())
        except Exception:  # the reference does not run in float64: criterion 1 stands
            ref64_list = None
        if ref64_list is not None:
            verdicts = []
            for i, _ in failing:
                r64 = _as_tensor(ref64_list[i]).detach().double()
                cand = _as_tensor(got_list[i]).detach().double()
                refd = _as_tensor(exp_list[i]).detach().double()
                cand_err = float((cand - r64).abs().max())
                ref_err = float((refd - r64).abs().max())
                verdicts.append((i, cand_err, ref_err, cand_err <= F64_FACTOR * ref_err))
            if all(v[3] for v in verdicts):
                return Comparison(True, "float64", worst_abs, worst_rel,
                                  "; ".join(f"output {i}: {c:.3g} from float64 vs the reference's own {r:.3g}"
                                            for i, c, r, _ in verdicts))
            i, c, r, _ = next(v for v in verdicts if not v[3])
            msg = dict(failing)[i]
            return Comparison(False, "float64", worst_abs, worst_rel,
                              f"{msg}; max abs distance from a float64 reference {c:.3g} exceeds "
                              f"{F64_FACTOR:g}x the reference's own {r:.3g}")
    return Comparison(False, "allclose", worst_abs, worst_rel, failing[0][1])
