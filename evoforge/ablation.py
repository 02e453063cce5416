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
in one Ray session, on one evaluation pool per evaluator set-up (``search.pool.PoolShare``: its actors and their
evaluation processes start once, not once per campaign). A (variant, seed) whose run directory has
``summary.json`` is done and not run again, so a killed ablation continues where it stopped (an unfinished run
is resumed from its record).

The statistics (``ablation_stats``) follow KernelBench; the comparison page is ``report.write_ablation_report``.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import logging
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evoforge.ablation_stats import AGGREGATE_NOTE, SUMMARY_COLUMNS, aggregate
from evoforge.config import CampaignConfig, config_from_dict
from evoforge.core import UsageError

log = logging.getLogger("evoforge.ablation")

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


def print_aggregate(agg: pd.DataFrame, confidence: float, console: Any = None) -> None:
    """The per-variant table on the terminal, compact (mean ± half-width); aggregate.csv has every column."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape
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
        table.add_row(escape(str(row["variant"])), pm(row, "success_rate"), geo, ci, *(pm(row, f) for f in fast))
    console.print(table)
    console.print(AGGREGATE_NOTE.format(confidence=confidence), style="dim", highlight=False)


# ---------------------------------------------------------------------------------------------- files
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


def run_campaign(config: CampaignConfig, resume: bool, tick: Tick, *, pools: Any = None) -> None:
    """One campaign to the end (``summary.json`` written), resumed from its record when ``resume``; its evaluation
    pool lent by ``pools`` (a ``search.pool.PoolShare``) when given."""
    from evoforge.campaign import Campaign

    campaign = Campaign(config, resume=resume, progress=False, pools=pools)
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
        if campaign.start():
            asyncio.run(run_with_ticks())
        else:
            campaign.finish()
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
        pools = None  # the evaluation pools every campaign borrows (started once, by the first that needs one)
        runner = self.runner
        try:
            with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
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
                            if self.runner is run_campaign:
                                from evoforge.search.pool import PoolShare

                                pools = PoolShare(hide_paths=[str(self.out_dir.resolve())])
                                runner = functools.partial(run_campaign, pools=pools)
                        runner(config, (run_dir / "config.json").is_file(), tick)
                    if not (run_dir / "report" / "index.html").is_file():
                        self._report(run_dir)
                    bar.advance(job)
                    self.write_summary(plan)
                bar.update(job, description="runs")
        finally:
            if pools is not None:
                pools.shutdown()
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

        from evoforge.backends.registry import get_backend
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
