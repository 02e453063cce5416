"""``evoforge ablate``: every variant x task x seed of an ablation file, then one table a paper can use.

An ablation file is a campaign TOML (``[campaign]``, ``[[tasks]]``, ``[llm]``) plus::

    [ablation]
    seeds = [0, 1, 2]

    [[variants]]
    name = "default"

    [[variants]]
    name = "no-kb"
    knowledge = false            # any [campaign] key
    llm.delay_feedback = false   # any [llm] key

Each (variant, seed) is one campaign holding all the tasks, in ``DIR/runs/<variant>-s<seed>``; all of them run
in one Ray session. A (variant, seed) whose run directory has ``summary.json`` is done and not run again, so a
killed ablation continues where it stopped (an unfinished run is resumed from its record).

The statistics follow KernelBench: ``fast_p`` is the fraction of tasks whose kernel is correct *and* faster
than ``p`` times the reference (a failure counts as speedup 0, so it is never fast); the geometric-mean
speedup is taken over correct kernels only. Each metric is computed per seed and reported as the mean over
seeds with a Student-t confidence interval across seeds (the geometric mean's interval on the log scale).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evoforge.config import CampaignConfig, config_from_dict
from evoforge.core import UsageError

log = logging.getLogger("evoforge.ablation")

P_VALUES = (0.0, 1.0, 1.5, 2.0)
SUMMARY_COLUMNS = ("variant", "task", "seed", "correct", "best_speedup", "evaluations", "evals_to_first_correct",
                   "tokens", "wall_s", "best_runtime_ms", "ref_ms", "timing_representative", "pct_of_floor",
                   "best_operator")
AGGREGATE_NOTE = ("Means over seeds with {confidence:.0%} Student-t intervals across seeds. fast_p: fraction of "
                  "tasks correct and faster than p x the reference (a failure counts as speedup 0). Geometric "
                  "mean over correct kernels only (failures left out; see success rate), interval on the log "
                  "scale.")
_ABLATION_KEYS = {"seeds", "confidence"}
_SET_BY_ABLATION = {"name", "out", "seed"}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


# ---------------------------------------------------------------------------------------------- the file
@dataclass(frozen=True)
class Variant:
    name: str
    overrides: dict[str, Any]


@dataclass(frozen=True)
class AblationSpec:
    path: Path
    base: dict[str, Any]  # the campaign part of the file: {"campaign": ..., "tasks": ..., "llm": ...}
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...]
    confidence: float = 0.95
    forced: dict[str, Any] = field(default_factory=dict)  # [campaign] keys set from the command line, over all

    def config_for(self, variant: Variant, seed: int, out_dir: Path) -> CampaignConfig:
        """The campaign of one (variant, seed): the base, the variant's overrides, and its own name/out/seed."""
        data = copy.deepcopy(self.base)
        campaign = dict(data.get("campaign", {}))
        overrides = copy.deepcopy(variant.overrides)
        llm = {**data.get("llm", {}), **overrides.pop("llm", {})}
        campaign.update(overrides)
        campaign.update(self.forced)
        campaign.update(name=run_name(variant.name, seed), seed=seed,
                        out=str((out_dir / "runs" / run_name(variant.name, seed)).resolve()))
        data.update(campaign=campaign, llm=llm)
        return config_from_dict(data, source=f"ablation {self.path} (variant {variant.name!r})",
                                base_dir=self.path.parent)


def run_name(variant: str, seed: int) -> str:
    return f"{variant}-s{seed}"


def load_ablation(path: str | Path) -> AblationSpec:
    """Read and check an ablation file; every mistake (an unknown key included) is one line naming the file."""
    p = Path(path)
    where = f"ablation {p}"
    if not p.is_file():
        raise UsageError(f"{where}: file not found")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{where}: not valid TOML ({e})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not a text file") from None
    known = {"campaign", "tasks", "llm", "ablation", "variants"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]} (known: [campaign], [[tasks]], [llm], [ablation], "
                         "[[variants]])")
    table = data.get("ablation", {})
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [ablation] must be a table")
    bad = sorted(set(table) - _ABLATION_KEYS)
    if bad:
        raise UsageError(f"{where}: unknown key ablation.{bad[0]} (known: {', '.join(sorted(_ABLATION_KEYS))})")
    seeds = table.get("seeds", [0])
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        raise UsageError(f"{where}: ablation.seeds must be a non-empty list of integers, e.g. seeds = [0, 1, 2]")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"{where}: ablation.seeds lists a seed twice")
    confidence = table.get("confidence", 0.95)
    if not isinstance(confidence, float | int) or isinstance(confidence, bool) or not 0 < confidence < 1:
        raise UsageError(f"{where}: ablation.confidence must be a number between 0 and 1 (e.g. 0.95)")
    variants = _variants(data.get("variants"), where)
    base = {k: data[k] for k in ("campaign", "tasks", "llm") if k in data}
    spec = AblationSpec(path=p.resolve(), base=base, seeds=tuple(seeds), variants=variants,
                        confidence=float(confidence))
    for variant in variants:  # every variant's campaign is checked before anything runs
        config = spec.config_for(variant, seeds[0], Path("."))
        if not config.tasks:
            raise UsageError(f"{where}: no tasks (give [[tasks]] entries, shared by every variant)")
    return spec


def _variants(raw: Any, where: str) -> tuple[Variant, ...]:
    if not raw:
        raise UsageError(f"{where}: no [[variants]] (give at least one, e.g. [[variants]] name = \"default\")")
    if not isinstance(raw, list) or not all(isinstance(v, dict) for v in raw):
        raise UsageError(f"{where}: variants must be [[variants]] tables")
    out, names = [], set()
    for i, entry in enumerate(raw):
        entry = dict(entry)
        name = entry.pop("name", None)
        if not isinstance(name, str) or not _NAME.match(name):
            raise UsageError(f"{where}: variants[{i}] needs name = \"...\" (letters, digits, '.', '_', '-')")
        if name in names:
            raise UsageError(f"{where}: two variants are named {name!r}")
        names.add(name)
        if "tasks" in entry:
            raise UsageError(f"{where}: variant {name!r} sets tasks; every variant runs the file's [[tasks]]")
        fixed = sorted(set(entry) & (_SET_BY_ABLATION | {"campaign"}))
        if fixed:
            raise UsageError(f"{where}: variant {name!r} sets {fixed[0]}, which the ablation sets itself "
                             "(name, out and seed come from the variant name and [ablation] seeds)")
        if "llm" in entry and not isinstance(entry["llm"], dict):
            raise UsageError(f"{where}: variant {name!r}: llm must be a table (llm.KEY = VALUE)")
        out.append(Variant(name=name, overrides=entry))
    return tuple(out)


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
    """fast_p over a grid of thresholds p (0 .. a little past the best speedup), per variant, for plotting."""
    top = float(summary["best_speedup"].max()) if summary["best_speedup"].notna().any() else 2.0
    grid = np.unique(np.concatenate([np.linspace(0.0, max(2.0, top * 1.05), points), P_VALUES]))
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


def print_aggregate(agg: pd.DataFrame, confidence: float, console: Any = None) -> None:
    """The per-variant table on the terminal, compact (mean ± half-width); aggregate.csv has every column."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    def frac(x: float) -> str:
        text = f"{x:.2f}"
        return text[1:] if text.startswith("0.") else text

    def pm(row: pd.Series, metric: str) -> str:
        mean, lo, hi = row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"]
        if pd.isna(mean):
            return "–"
        return frac(mean) + ("" if pd.isna(lo) else f"±{frac(max(mean - lo, hi - mean))}")

    if console is None:
        console = Console()
        if not console.is_terminal:  # a log file or a pipe: no terminal to fit, so keep every digit
            console = Console(width=max(console.width, 110))
    fast = [c for c in agg.columns if c.startswith("fast_") and not c.endswith(("_lo", "_hi"))]
    seeds = int(agg["seeds"].max()) if len(agg) else 0
    tasks = int(agg["tasks"].max()) if len(agg) else 0
    table = Table(title=f"ablation: {seeds} seeds x {tasks} tasks per variant; mean over seeds ± {confidence:.0%} CI",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("variant", "correct", "geomean x", "CI", *fast):
        table.add_column(col, justify="left" if col == "variant" else "right", no_wrap=True)
    for _, row in agg.iterrows():
        geo = "–" if pd.isna(row["geomean_speedup"]) else f"{row['geomean_speedup']:.3g}"
        ci = ("–" if pd.isna(row["geomean_speedup_lo"])
              else f"{row['geomean_speedup_lo']:.2g}–{row['geomean_speedup_hi']:.2g}")
        table.add_row(str(row["variant"]), pm(row, "success_rate"), geo, ci, *(pm(row, f) for f in fast))
    console.print(table)
    console.print(AGGREGATE_NOTE.format(confidence=confidence), style="dim", highlight=False)


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


def summary_rows(run_dir: Path, variant: str, seed: int) -> list[dict[str, Any]]:
    """The summary.csv rows of one finished (variant, seed) run, read back through its Optuna record."""
    from evoforge.report import open_run, task_stats

    run = open_run(run_dir)
    elapsed = (run.summary or {}).get("elapsed_s")
    rows = []
    for task, df in run.trials.items():
        s = task_stats(df)
        rows.append({"variant": variant, "task": task, "seed": seed, "correct": s["best_speedup"] is not None,
                     "best_speedup": s["best_speedup"], "evaluations": s["evaluations"],
                     "evals_to_first_correct": s["evals_to_first_correct"], "tokens": s["tokens"],
                     # the tasks of one campaign run interleaved: wall time is the campaign's
                     "wall_s": elapsed if elapsed is not None else s["wall_s"],
                     "best_runtime_ms": s["best_runtime_ms"], "ref_ms": s["ref_ms"],
                     "timing_representative": s["timing_representative"], "pct_of_floor": s["pct_of_floor"],
                     "best_operator": s["best_operator"]})
    return rows


# ---------------------------------------------------------------------------------------------- running
Tick = Callable[[int, int], None]  # (evaluations done, evaluations planned) of the campaign running now
RunCampaign = Callable[[CampaignConfig, bool, Tick], None]


def run_campaign(config: CampaignConfig, resume: bool, tick: Tick) -> None:
    """One campaign to the end (``summary.json`` written), resumed from its record when ``resume``."""
    from evoforge.campaign import Campaign

    campaign = Campaign(config, resume=resume, progress=False)
    planned = config.budget_evals * len(config.tasks)

    async def run_with_ticks() -> None:
        async def ticker() -> None:
            while True:
                tick(sum(s.evaluations for s in campaign.tasks.values()), planned)
                await asyncio.sleep(0.5)

        ticking = asyncio.ensure_future(ticker())
        try:
            await campaign.run()
        finally:
            ticking.cancel()
        tick(sum(s.evaluations for s in campaign.tasks.values()), planned)

    try:
        campaign.setup()
        if resume:
            campaign.restore()
        asyncio.run(run_with_ticks())
    finally:
        campaign.close()


class Ablation:
    """Runs an ablation's (variant, seed) campaigns in order and keeps summary.csv up to date."""

    def __init__(self, spec: AblationSpec, *, out_dir: Path, progress: bool = True,
                 runner: RunCampaign = run_campaign) -> None:
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.progress = progress
        self.runner = runner

    def plan(self) -> list[tuple[Variant, int, Path]]:
        return [(v, s, self.out_dir / "runs" / run_name(v.name, s)) for v in self.spec.variants
                for s in self.spec.seeds]

    def run(self) -> pd.DataFrame:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "ablation.json").write_text(json.dumps(
            {"file": str(self.spec.path), "seeds": list(self.spec.seeds), "confidence": self.spec.confidence,
             "variants": [{"name": v.name, **v.overrides} for v in self.spec.variants]}, indent=2))
        plan = self.plan()
        ray_started: bool | None = None  # Ray starts only when a run is left to do
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), disable=not self.progress, transient=False) as bar:
                job = bar.add_task("runs", total=len(plan))
                evals = bar.add_task("evaluations", total=None, visible=False)

                def tick(done: int, planned: int) -> None:
                    bar.update(evals, completed=done, total=planned, visible=True)

                for variant, seed, run_dir in plan:
                    name = run_name(variant.name, seed)
                    if (run_dir / "summary.json").is_file():
                        bar.update(job, description=f"runs ({name} done before)")
                    else:
                        bar.update(job, description=f"runs (now {name})")
                        bar.update(evals, completed=0, total=None, description=f"{name} evaluations")
                        config = self.spec.config_for(variant, seed, self.out_dir)
                        if ray_started is None:
                            ray_started = self._init_ray()
                        self.runner(config, (run_dir / "config.json").is_file(), tick)
                    if not (run_dir / "report" / "index.html").is_file():
                        self._report(run_dir)
                    bar.advance(job)
                    self.write_summary(plan)
                bar.update(job, description="runs")
        finally:
            if ray_started:
                import ray

                ray.shutdown()
        return self.write_summary(plan)

    @staticmethod
    def _report(run_dir: Path) -> None:
        """Each run's own report, linked from the ablation's; a report that fails must not stop the runs."""
        from evoforge.report import write_run_report

        try:
            write_run_report(run_dir)
        except Exception as e:  # noqa: BLE001 (logged with its reason; summary.csv is what matters)
            log.warning("report of %s failed: %s: %s", run_dir, e.__class__.__name__, e)

    def _init_ray(self) -> bool:
        """One Ray session for every campaign of the ablation (each campaign's own init is then a no-op)."""
        if self.runner is not run_campaign:
            return False
        import ray

        from evoforge.backends.base import get_backend
        from evoforge.search.pool import init_ray

        if ray.is_initialized():
            return False
        first = self.spec.config_for(self.spec.variants[0], self.spec.seeds[0], self.out_dir)
        workers = max([self.spec.config_for(v, self.spec.seeds[0], self.out_dir).workers
                       for v in self.spec.variants] + [2])
        # On a GPU the pool's size follows the devices (evaluators_per_device each): let Ray count the CPUs.
        on_devices = get_backend(first.backend, arch=first.arch or None).device_count() > 0
        local_cpus = None if on_devices else workers
        init_ray(first.ray_address, num_cpus=None if first.ray_address else local_cpus)
        return True

    def write_summary(self, plan: list[tuple[Variant, int, Path]]) -> pd.DataFrame:
        rows = []
        for variant, seed, run_dir in plan:
            if (run_dir / "summary.json").is_file():
                rows.extend(summary_rows(run_dir, variant.name, seed))
        summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
        summary.to_csv(self.out_dir / "summary.csv", index=False)
        return summary


def write_aggregate(out_dir: Path, summary: pd.DataFrame, confidence: float) -> pd.DataFrame:
    agg = aggregate(summary, confidence=confidence)
    agg.to_csv(out_dir / "aggregate.csv", index=False)
    return agg
