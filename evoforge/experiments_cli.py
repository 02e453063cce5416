"""``evoforge report``, ``evoforge ablate`` and ``evoforge dashboard``: reading and comparing campaigns."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from evoforge.core import UsageError


def _quiet_optuna() -> None:
    """Reading a record is not news: no INFO line per study, no experimental-API warning per call."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def cmd_report(args: argparse.Namespace) -> int:
    from evoforge.report import write_report

    _quiet_optuna()
    page = write_report(args.run_dir)
    print(f"report: {page}  (open it in a browser; figures beside it as PNG and SVG)")
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    from rich.console import Console

    from evoforge.ablation import Ablation, load_ablation, print_aggregate, write_aggregate
    from evoforge.report import write_ablation_report

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _quiet_optuna()
    spec = load_ablation(args.ablation)
    if args.seeds:
        try:
            seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
        except ValueError:
            raise UsageError(f"--seeds {args.seeds}: expected integers separated by commas, e.g. 0,1") from None
        if not seeds or len(set(seeds)) != len(seeds):
            raise UsageError(f"--seeds {args.seeds}: give each seed once, e.g. 0,1")
        spec = replace(spec, seeds=seeds)
    if args.budget_evals is not None:
        if args.budget_evals < 1:
            raise UsageError("--budget-evals must be at least 1")
        spec = replace(spec, forced={**spec.forced, "budget_evals": args.budget_evals})
    out = Path(args.out) if args.out else Path("runs") / "ablations" / spec.path.stem
    plan_size = len(spec.variants) * len(spec.seeds)
    console = Console()
    console.print(f"ablation {spec.path.name}: {len(spec.variants)} variants x {len(spec.seeds)} seeds = "
                  f"{plan_size} campaigns, into {out}", markup=False, highlight=False)
    summary = Ablation(spec, out_dir=out, progress=not args.quiet).run()
    agg = write_aggregate(out, summary, spec.confidence)
    print_aggregate(agg, spec.confidence)
    page = write_ablation_report(out)
    console.print(f"{out}/summary.csv (one row per variant, task, seed), {out}/aggregate.csv, report {page}",
                  markup=False, highlight=False)
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from evoforge.dashboard import serve

    _quiet_optuna()
    try:
        serve(args.run_dir, host=args.host, port=args.port)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a dashboard is meant to stop
    return 0


def add_subparser(sub: Any) -> None:
    p = sub.add_parser("report", help="write RUN_DIR/report/index.html (leaderboard, curves, lineage, source)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, or an ablation directory (summary.csv)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("ablate", help="run every variant x task x seed of an ablation file; table and plots")
    p.add_argument("ablation", metavar="ABLATION.toml", help="campaign TOML plus [ablation] seeds and [[variants]]")
    p.add_argument("--out", help="ablation directory (default runs/ablations/<file stem>); rerun to resume")
    p.add_argument("--seeds", help="comma-separated seeds instead of the file's (e.g. 0 for a first look)")
    p.add_argument("--budget-evals", type=int, help="evaluations per task and run, over the file's")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_ablate)

    p = sub.add_parser("dashboard", help="optuna-dashboard on a run's record, sources and prompts included")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.set_defaults(func=cmd_dashboard)
