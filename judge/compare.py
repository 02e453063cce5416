"""Output comparison with dtype-aware tolerances and a float64 criterion.

Criteria, in order (the result says which one decided):
1. ``allclose``: ``|out - ref| <= atol + rtol * |ref|`` elementwise against the reference computed in the
   task's own dtype, with the tolerances below, and ``||out - ref|| <= rtol * ||ref||`` over the whole output
   (so a reference whose values all lie under atol is not matched by any constant).
2. ``float64``: where (1) fails and the reference can run in float64, the candidate passes if its distance from
   the float64 result, over the whole output (root mean square), is at most ``F64_FACTOR`` x a yardstick, and
   no element is further than ``F64_MAX_FACTOR`` x the yardstick's largest distance. The yardstick is the
   larger of the reference's own distance from float64 and the distance that rounding the float32 inputs to
   ``SPLIT_BITS`` significant bits costs (the float64 reference on rounded inputs): the precision of a
   3-pass split (bf16x3, tf32x3), which an fp32 task admits. Plain TF32 (11 bits) lands 30x and more beyond
   it on inputs whose signs cancel; on all-positive inputs it can hide, which is why the chain also runs
   signed inputs (judge/chain.py).
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
F64_MAX_FACTOR = 8.0
SPLIT_BITS = 16  # significant bits of x = hi + lo in two bf16 parts; TF32 keeps 11


def round_significand(x: Any, bits: int = SPLIT_BITS) -> Any:
    """float32 tensors (nested in lists and tuples) rounded to nearest at ``bits`` significant bits."""
    if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
        drop = 24 - bits
        raw = x.contiguous().view(torch.int32)
        rounded = (raw + ((1 << (drop - 1)) - 1) + ((raw >> drop) & 1)) & ~((1 << drop) - 1)
        return torch.where(torch.isfinite(x), rounded.view(torch.float32), x)
    if isinstance(x, list | tuple):
        return type(x)(round_significand(i, bits) for i in x)
    return x


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


#: Elements compared at a time: the comparison's temporaries (differences, masks) are a few of these, not a few
#: copies of the output (an 8 GiB output held the judge at 98 GiB on the H200 and ran it out of memory).
COMPARE_CHUNK = 1 << 24


@dataclass
class _FloatStats:
    nonfinite: int = 0  # elements finite in one and not the other
    first_nonfinite: int = 0
    max_abs: float = 0.0
    argmax_abs: int = 0
    max_rel: float = 0.0
    over: int = 0  # elements beyond atol + rtol * |expected|
    err_norm: float = 0.0
    ref_norm: float = 0.0
    ref_abs_max: float = 0.0


def _float_stats(g: torch.Tensor, e: torch.Tensor, work: torch.dtype, atol: float, rtol: float) -> _FloatStats:
    """What the comparison needs of a floating output, chunk by chunk of the flattened tensors (the same figures as
    over the whole; the norms summed in float64). Non-finite mismatches are counted first: they decide alone."""
    chunk = COMPARE_CHUNK
    gf, ef = g.reshape(-1), e.reshape(-1)
    n = ef.numel()
    st = _FloatStats()
    for lo in range(0, n, chunk):
        gc, ec = gf[lo:lo + chunk], ef[lo:lo + chunk]
        bad = torch.isfinite(gc) != torch.isfinite(ec)
        count = int(bad.sum())
        if count:
            if not st.nonfinite:
                st.first_nonfinite = lo + int(bad.nonzero()[0])
            st.nonfinite += count
    if st.nonfinite:
        return st
    err_sq = ref_sq = 0.0
    for lo in range(0, n, chunk):
        g64, e64 = gf[lo:lo + chunk].to(work), ef[lo:lo + chunk].to(work)
        both_nan = torch.isnan(g64) & torch.isnan(e64)
        diff = (g64 - e64).abs()
        diff = torch.where(both_nan | (torch.isinf(g64) & (g64 == e64)), torch.zeros_like(diff), diff)
        diff = torch.nan_to_num(diff, nan=0.0)
        if diff.numel():
            top = int(diff.argmax())
            value = float(diff[top])
            if value > st.max_abs or lo == 0:
                st.max_abs, st.argmax_abs = value, lo + top
            rel = diff / e64.abs().clamp_min(1e-12)
            st.max_rel = max(st.max_rel, float(torch.nan_to_num(rel, posinf=0.0).max()))
            del rel
        st.over += int((diff > atol + rtol * torch.nan_to_num(e64.abs(), posinf=0.0)).sum())
        finite_ref = torch.nan_to_num(e64, posinf=0.0, neginf=0.0)
        err_sq += float(torch.linalg.vector_norm(diff, dtype=torch.float64)) ** 2
        ref_sq += float(torch.linalg.vector_norm(finite_ref, dtype=torch.float64)) ** 2
        if finite_ref.numel():
            st.ref_abs_max = max(st.ref_abs_max, float(finite_ref.abs().max()))
    st.err_norm, st.ref_norm = err_sq ** 0.5, ref_sq ** 0.5
    return st


def compare_outputs(got: Any, expected: Any, *, reference64: Callable[[], Any] | None = None,
                    rounded64: Callable[[], Any] | None = None,
                    tolerances: dict[torch.dtype, tuple[float, float]] | None = None) -> Comparison:
    """Compare a candidate's output with the reference's. ``reference64`` computes the float64 result lazily,
    ``rounded64`` the float64 result on inputs rounded to ``SPLIT_BITS`` (criterion 2's yardstick)."""
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
        if not (e.is_floating_point() or e.is_complex()):
            g64, e64 = g.detach().to(work), e.detach().to(work)
            mismatched = (g64 != e64)
            if bool(mismatched.any()):
                where = _index(int(mismatched.flatten().nonzero()[0]), e.shape)
                return Comparison(False, "exact", float((g64 - e64).abs().max()), float("inf"),
                                  f"output {i}: {int(mismatched.sum())} of {e.numel()} elements differ "
                                  f"(integer output must match exactly); first at index {where}: "
                                  f"got {g64[where].item()}, expected {e64[where].item()}")
            continue
        atol, rtol = tol.get(e.dtype, (1e-4, 1e-4))
        st = _float_stats(g.detach(), e.detach(), work, atol, rtol)
        if st.nonfinite:
            where = _index(st.first_nonfinite, e.shape)
            return Comparison(False, "nonfinite", float("inf"), float("inf"),
                              f"output {i}: {st.nonfinite} of {e.numel()} elements are NaN/Inf where the "
                              f"reference is finite (or the reverse); first at index {where}: "
                              f"got {g[where].item()}, expected {e[where].item()}")
        worst_abs = max(worst_abs, st.max_abs)
        worst_rel = max(worst_rel, st.max_rel)
        if st.over:
            where = _index(st.argmax_abs, e.shape)
            failing.append((i, f"output {i}: {st.over} of {e.numel()} elements "
                               f"({100.0 * st.over / max(e.numel(), 1):.2f}%) differ beyond "
                               f"atol={atol:g}, rtol={rtol:g}; max abs err {st.max_abs:.4g} at index "
                               f"{where}: got {g[where].item():.6g}, "
                               f"expected {e[where].item():.6g}"))
            continue
        # Over the whole output too: every element within atol of a reference whose values all lie under atol
        # (a softmax over 400k columns: 2.5e-6 each) says nothing; its error must be small beside its norm.
        if st.ref_norm > 0 and st.err_norm > rtol * st.ref_norm:
            failing.append((i, f"output {i}: every element is within atol={atol:g} of the reference, but the error "
                               f"over the whole output is {st.err_norm / st.ref_norm:.3g} of its norm (rtol={rtol:g}): "
                               f"the reference's values are themselves that small (largest "
                               f"{st.ref_abs_max:.3g})"))
    if not failing:
        return Comparison(True, "allclose", worst_abs, worst_rel, "")
    if reference64 is not None:
        try:
            ref64_list = flatten_outputs(reference64())
        except Exception:  # the reference does not run in float64: criterion 1 stands
            ref64_list = None
        rounded_list = None
        if ref64_list is not None and rounded64 is not None and any(
                _as_tensor(exp_list[i]).dtype == torch.float32 for i, _ in failing):
            try:
                rounded_list = flatten_outputs(rounded64())
            except Exception:
                rounded_list = None
        if ref64_list is not None:
            verdicts = []
            for i, _ in failing:
                r64 = _as_tensor(ref64_list[i]).detach().double()
                cand = _as_tensor(got_list[i]).detach().double() - r64
                refd = _as_tensor(exp_list[i]).detach().double() - r64
                cand_rms, ref_rms = float(cand.pow(2).mean().sqrt()), float(refd.pow(2).mean().sqrt())
                cand_max, ref_max = float(cand.abs().max()), float(refd.abs().max())
                if rounded_list is not None and _as_tensor(exp_list[i]).dtype == torch.float32:
                    split = _as_tensor(rounded_list[i]).detach().double() - r64
                    ref_rms = max(ref_rms, float(split.pow(2).mean().sqrt()))
                    ref_max = max(ref_max, float(split.abs().max()))
                verdicts.append((i, cand_rms, ref_rms, cand_max, ref_max,
                                 cand_rms <= F64_FACTOR * ref_rms and cand_max <= F64_MAX_FACTOR * ref_max))
            yardstick = "the reference's own" + (f" or {SPLIT_BITS}-bit inputs'" if rounded_list is not None else "")
            if all(v[5] for v in verdicts):
                return Comparison(True, "float64", worst_abs, worst_rel,
                                  "; ".join(f"output {i}: {c:.3g} (rms) from float64 vs {yardstick} {r:.3g}"
                                            for i, c, r, *_ in verdicts))
            i, c, r, cm, rm, _ = next(v for v in verdicts if not v[5])
            msg = dict(failing)[i]
            if c > F64_FACTOR * r:
                why = f"rms distance from a float64 reference {c:.3g} exceeds {F64_FACTOR:g}x {yardstick} {r:.3g}"
            else:
                why = f"max abs distance from a float64 reference {cm:.3g} exceeds {F64_MAX_FACTOR:g}x {yardstick} {rm:.3g}"
            return Comparison(False, "float64", worst_abs, worst_rel, f"{msg}; {why}")
    return Comparison(False, "allclose", worst_abs, worst_rel, failing[0][1])
