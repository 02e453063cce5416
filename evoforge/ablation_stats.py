"""The numbers of an ablation: ``summary.csv`` (one row per variant, task and seed) and what is computed from it.

The statistics follow KernelBench: ``fast_p`` is the fraction of tasks whose kernel is correct *and* faster
than ``p`` times the reference (a failure counts as speedup 0, so it is never fast); the geometric-mean
speedup is taken over correct kernels only. Each metric is computed per seed and reported as the mean over
seeds with a Student-t confidence interval across seeds (the geometric mean's interval on the log scale).
Pure functions over data frames: the ablation runner writes the file, the report and the terminal read it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evoforge.core import UsageError

P_VALUES = (0.0, 1.0, 1.5, 2.0)
SUMMARY_COLUMNS = ("variant", "task", "seed", "correct", "best_speedup", "evaluations", "evals_to_first_correct",
                   "tokens", "wall_s", "best_runtime_ms", "ref_ms", "timing_representative", "pct_of_floor",
                   "best_operator")
AGGREGATE_NOTE = ("Means over seeds with {confidence:.0%} Student-t intervals across seeds. fast_p: fraction of "
                  "tasks correct and faster than p x the reference (a failure counts as speedup 0). Geometric "
                  "mean over correct kernels only (failures left out; see success rate), interval on the log "
                  "scale.")


# ---------------------------------------------------------------------------------------------- statistics
def t_quantile(confidence: float, df: int) -> float:
    """Two-sided Student-t critical value: P(|T| < t) = confidence with ``df`` degrees of freedom.

    Exact for integer ``df`` through the closed form of the t distribution (Abramowitz & Stegun 26.7.3/4),
    solved by bisection; no SciPy needed.
    """
    if df < 1:
        raise ValueError("df must be at least 1")

    def inside(t: float) -> float:  # P(|T| < t)
        theta = math.atan(t / math.sqrt(df))
        s, c = math.sin(theta), math.cos(theta)
        if df % 2 == 1:
            total, term = 0.0, c
            for k in range(1, (df - 1) // 2 + 1):
                total += term
                term *= c * c * (2 * k) / (2 * k + 1)
            return 2 / math.pi * (theta + s * total) if df > 1 else 2 * theta / math.pi
        total, term = 0.0, 1.0
        for k in range(1, df // 2 + 1):
            total += term
            term *= c * c * (2 * k - 1) / (2 * k)
        return s * total

    lo, hi = 0.0, 1.0
    while inside(hi) < confidence:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if inside(mid) < confidence else (lo, mid)
    return (lo + hi) / 2


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval of the finite values; (nan, nan, nan) if none, no interval from one."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size == 1:
        return mean, math.nan, math.nan
    half = t_quantile(confidence, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


def _correct_speedups(df: pd.DataFrame) -> pd.Series:
    """Speedup of each row, 0 for a failure (KernelBench's convention for fast_p)."""
    return df["best_speedup"].where(df["correct"], 0.0).fillna(0.0).astype(float)


def per_seed(summary: pd.DataFrame, p_values: Iterable[float] = P_VALUES) -> pd.DataFrame:
    """One row per (variant, seed): success rate, geometric-mean speedup of correct kernels, fast_p."""
    rows = []
    for (variant, seed), df in summary.groupby(["variant", "seed"], sort=False):
        speed = _correct_speedups(df)
        correct = df["correct"].astype(bool)
        good = speed[correct & (speed > 0)]
        row = {"variant": variant, "seed": seed, "tasks": len(df), "success_rate": float(correct.mean()),
               "geomean_speedup": float(np.exp(np.log(good).mean())) if len(good) else math.nan}
        for p in p_values:
            row[fast_name(p)] = float((correct & (speed > p)).mean())
        row["evals_to_first_correct"] = float(df["evals_to_first_correct"].mean()) if correct.any() else math.nan
        row["tokens"] = float(df["tokens"].sum())
        row["wall_s"] = float(df["wall_s"].max())
        rows.append(row)
    return pd.DataFrame(rows)


def fast_name(p: float) -> str:
    return f"fast_{p:g}"


def aggregate(summary: pd.DataFrame, *, p_values: Iterable[float] = P_VALUES,
              confidence: float = 0.95) -> pd.DataFrame:
    """Per variant: each per-seed metric's mean over seeds with its interval (``_lo``/``_hi`` columns)."""
    p_values = tuple(p_values)
    seeds = per_seed(summary, p_values)
    rows = []
    for variant, df in seeds.groupby("variant", sort=False):
        row: dict[str, Any] = {"variant": variant, "seeds": len(df), "tasks": int(df["tasks"].max())}
        for metric in ("success_rate", *(fast_name(p) for p in p_values)):
            mean, lo, hi = mean_ci(df[metric], confidence)
            row.update({metric: mean, f"{metric}_lo": max(lo, 0.0) if not math.isnan(lo) else lo,
                        f"{metric}_hi": min(hi, 1.0) if not math.isnan(hi) else hi})
        logs = np.log(df["geomean_speedup"].to_numpy(dtype=float))
        mean, lo, hi = mean_ci(logs, confidence)
        row.update(geomean_speedup=math.exp(mean) if not math.isnan(mean) else math.nan,
                   geomean_speedup_lo=math.exp(lo) if not math.isnan(lo) else math.nan,
                   geomean_speedup_hi=math.exp(hi) if not math.isnan(hi) else math.nan,
                   geomean_seeds=int(np.isfinite(logs).sum()))
        for metric in ("evals_to_first_correct", "tokens", "wall_s"):
            row[metric] = float(df[metric].mean()) if df[metric].notna().any() else math.nan
        rows.append(row)
    columns = ["variant", "seeds", "tasks", "success_rate", "success_rate_lo", "success_rate_hi",
               "geomean_speedup", "geomean_speedup_lo", "geomean_speedup_hi", "geomean_seeds"]
    for p in p_values:
        columns += [fast_name(p), f"{fast_name(p)}_lo", f"{fast_name(p)}_hi"]
    columns += ["evals_to_first_correct", "tokens", "wall_s"]
    return pd.DataFrame(rows, columns=columns)


def fast_p_curves(summary: pd.DataFrame, *, confidence: float = 0.95, points: int = 200) -> pd.DataFrame:
    """fast_p over a grid of thresholds p (0 .. a little past the best speedup), per variant, for plotting.

    The grid is dense on a linear and on a logarithmic scale (from half the smallest speedup), so a curve of
    interpreter speedups (1e-4x) is as visible on a log axis as one of GPU speedups (1-5x)."""
    speeds = summary["best_speedup"][summary["best_speedup"] > 0]
    top = float(speeds.max()) if not speeds.empty else 2.0
    high = max(2.0, top * 1.05)
    low = min(float(speeds.min()) / 2 if not speeds.empty else 0.5, 0.5)
    grid = np.unique(np.concatenate([np.linspace(0.0, high, points), np.geomspace(low, high, points), P_VALUES]))
    rows = []
    for variant, df in summary.groupby("variant", sort=False):
        per = {seed: (_correct_speedups(d).to_numpy(), d["correct"].to_numpy(dtype=bool))
               for seed, d in df.groupby("seed")}
        for p in grid:
            values = [float((ok & (speed > p)).mean()) for speed, ok in per.values()]
            mean, lo, hi = mean_ci(values, confidence)
            rows.append({"variant": variant, "p": float(p), "fast_p": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def format_aggregate(agg: pd.DataFrame) -> pd.DataFrame:
    """The aggregate table as text, each metric as ``mean [lo, hi]``."""
    def cell(row: pd.Series, metric: str, spec: str) -> str:
        mean, lo, hi = row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"]
        if pd.isna(mean):
            return "–"
        return f"{mean:{spec}}" + ("" if pd.isna(lo) else f" [{lo:{spec}}, {hi:{spec}}]")

    fast = [c for c in agg.columns if c.startswith("fast_") and not c.endswith(("_lo", "_hi"))]
    out = pd.DataFrame({"variant": agg["variant"], "seeds": agg["seeds"], "tasks": agg["tasks"]})
    out["success rate"] = [cell(r, "success_rate", ".2f") for _, r in agg.iterrows()]
    out["geomean speedup"] = [cell(r, "geomean_speedup", ".3g") for _, r in agg.iterrows()]
    for name in fast:
        out[name] = [cell(r, name, ".2f") for _, r in agg.iterrows()]
    out["evals to 1st correct"] = [f"{v:.1f}" if pd.notna(v) else "–" for v in agg["evals_to_first_correct"]]
    out["tokens/run"] = [f"{v:.0f}" if pd.notna(v) else "–" for v in agg["tokens"]]
    out["wall s/run"] = [f"{v:.0f}" if pd.notna(v) else "–" for v in agg["wall_s"]]
    return out


# ---------------------------------------------------------------------------------------------- files
def read_summary(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise UsageError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
    missing = [c for c in ("variant", "task", "seed", "correct", "best_speedup") if c not in df.columns]
    if missing:
        raise UsageError(f"{path}: not an ablation summary (no column {missing[0]})")
    for col in SUMMARY_COLUMNS:
        if col not in df.columns:
            df[col] = math.nan
    df["correct"] = df["correct"].map(_as_bool).fillna(False).astype(bool)
    df["timing_representative"] = df["timing_representative"].map(_as_bool)
    for col in ("best_speedup", "evaluations", "evals_to_first_correct", "tokens", "wall_s"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.strip().lower())
    return None


def read_confidence(root: Path) -> float:
    meta = root / "ablation.json"
    try:
        return float(json.loads(meta.read_text()).get("confidence", 0.95))
    except (OSError, ValueError, AttributeError):
        return 0.95
