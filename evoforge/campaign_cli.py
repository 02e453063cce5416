"""``evoforge run``: a campaign from a TOML config, flags overriding it; ``--resume RUN_DIR`` continues one."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

from evoforge.config import (
    RESUME_OVERRIDES,
    CampaignConfig,
    TaskConfig,
    load_config,
    resolve_kernelbench_specs,
    resolved_config_from_file,
    validate_config,
)
from evoforge.core import DeprecatedFlag, UsageError
from evoforge.mutators.names import LLM
from evoforge.mutators.registry import expand_operators, family_of
from evoforge.task import kernelbench_flag_help, parse_allow_ops, parse_assignments, parse_shapes

QUICKSTART_OUT = "runs/quickstart"


def apply_flags(config: CampaignConfig, args: argparse.Namespace) -> CampaignConfig:
    simple = {"out": "out", "budget_evals": "budget_evals", "budget_minutes": "budget_minutes",
              "backend": "backend", "storage": "storage", "ray_address": "ray_address", "strategy": "strategy",
              "arch": "arch", "seed": "seed", "workers": "workers", "name": "name", "timeout": "timeout_s",
              "correctness_runs": "correctness_runs", "evaluators_per_device": "evaluators_per_device",
              "build_workers": "build_workers"}
    for flag, key in simple.items():
        value = getattr(args, flag, None)
        if value is not None:
            setattr(config, key, value)
    for item in getattr(args, "strategy_option", None) or []:
        config.strategy_options = {**config.strategy_options,
                                   **parse_assignments(item, flag="--strategy-option")}
    if args.operators:
        config.operators = [o.strip() for o in args.operators.split(",") if o.strip()]
    if args.no_kb:
        config.knowledge = False
    landscapes = [str(Path(f).absolute()) for f in getattr(args, "landscape", None) or []]
    if args.task or landscapes:
        config.tasks = [TaskConfig(spec=t) for t in args.task or []] + [TaskConfig(spec=f, landscape=f)
                                                                        for f in landscapes]
    if getattr(args, "replay_delay", None) is not None:
        config.replay.delay_s = args.replay_delay
    if getattr(args, "replay_failures", None):
        failures = parse_assignments(args.replay_failures, flag="--replay-failures")
        bad = [k for k, v in failures.items() if not isinstance(v, int | float) or isinstance(v, bool)]
        if bad:
            raise UsageError(f"--replay-failures {bad[0]}={failures[bad[0]]!r}: give each status a probability, "
                             "e.g. --replay-failures compile_error=0.1,incorrect=0.05")
        config.replay.failures = {k: float(v) for k, v in failures.items()}
    if getattr(args, "devices_per_actor", None) is not None:
        config.replay.devices_per_actor = args.devices_per_actor
    if getattr(args, "kernelbench", None):  # recorded, so a resume finds the same tasks without the flag
        config.kernelbench = str(Path(args.kernelbench).expanduser().resolve())
    resolve_kernelbench_specs(config, "kernelbench in the config")
    if getattr(args, "allow_ops", None):
        ops = parse_allow_ops(args.allow_ops)
        for t in config.tasks:
            t.allow_ops = sorted({*t.allow_ops, *ops})
    if getattr(args, "compile_baseline", None):
        config.compile_baseline = args.compile_baseline
    if getattr(args, "confirm", None):
        config.confirm = args.confirm
    if args.seed_kernel:
        if len(config.tasks) > 1 and not args.task:
            raise UsageError("--seed-kernel with several tasks in the config: give --task T for the one it seeds")
        for t in config.tasks:
            t.seed_kernel = str(Path(args.seed_kernel).resolve())
    if getattr(args, "language", None):
        for t in config.tasks:
            t.language = args.language
    overrides: dict[str, Any] = {}
    for item in args.set or []:
        overrides.update(parse_assignments(item, flag="--set"))
    shapes = parse_shapes(args.shapes) if args.shapes else None
    for t in config.tasks:
        t.set = {**t.set, **overrides}
        if shapes is not None:
            t.shapes = shapes
    for flag, key in {"llm_base_url": "base_url", "llm_model": "model", "llm_api_key_env": "api_key_env"}.items():
        value = getattr(args, flag, None)
        if value:
            setattr(config.llm, key, value)
    if args.llm_model and not args.operators and not any(
            family_of(name) == LLM for name in expand_operators(config.operators, source="operators")):
        config.operators = [*config.operators, LLM]  # --llm-model alone turns the LLM operators on
    validate_config(config, "flags")
    return config


def print_leaderboard(summary: dict[str, Any]) -> None:
    """The summary on the terminal. Names and reasons are the user's words (a task file, a config, a reason
    quoting `[[tasks]]`): they are printed literally, never read as rich markup."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=150)  # a log file: no wrapping of the leaderboard
    table = Table(title=escape(f"campaign {summary['campaign']} on {summary['backend']} ({summary['arch']})"))
    for col in ("task", "evals", "ok", "best speedup", "vs compile", "best ms", "ref ms", "compile ms", "% floor", "by",
                "failures"):
        table.add_column(col)
    interpreted = False
    for name, t in summary["tasks"].items():
        statuses = t["statuses"]
        failures = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()) if k != "ok") or "-"
        best = t["best_speedup"]
        interpreted |= t.get("timing_representative") is False
        table.add_row(escape(name), str(t["evaluations"]), str(statuses.get("ok", 0)),
                      f"{best:.3g}x" if best else "-",
                      f"{t['vs_compile']:.3g}x" if t.get("vs_compile") else "-",
                      f"{t['best_runtime_ms']:.4g}" if t["best_runtime_ms"] else "-",
                      f"{t['ref_ms']:.4g}" if t["ref_ms"] else "-",
                      f"{t['compile_ms']:.4g}" if t.get("compile_ms") else "-",
                      f"{t['best_pct_of_floor']:.0f}%" if t.get("best_pct_of_floor") else "-",
                      escape(t["best_operator"] or "-"), escape(failures))
    console.print(table)
    for name, t in summary["tasks"].items():
        if t.get("stopped_early"):
            console.print(f"{name} stopped early: {t['stopped_early']}", style="yellow", markup=False,
                          highlight=False, soft_wrap=True)  # one line each, whole in a log file too
    for name, t in summary["tasks"].items():
        if (t.get("exported") or {}).get("recommendation") == "torch.compile":
            console.print(f"{name}: the best kernel runs at {t['vs_compile']:.3g}x torch.compile's build of the "
                          f"reference ({(t.get('exported') or {}).get('recommendation', '?')} recommended)",
                          style="yellow", markup=False, highlight=False, soft_wrap=True)
    for name, why in summary.get("not_started", {}).items():
        console.print(f"{name} not started: {why}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    if interpreted:
        console.print("[yellow]Times come from the Triton interpreter on the CPU: they check correctness, "
                      "not GPU speed.[/yellow]")
    run_dir = summary["run_dir"]
    console.print(f"Best kernels: {run_dir}/best/   Record: {run_dir}/optuna.db\n"
                  f"Next: evoforge report {run_dir}   |   evoforge dashboard {run_dir}   |   "
                  f"evoforge run --resume {run_dir} --budget-evals N", markup=False, highlight=False)


def cmd_run(args: argparse.Namespace) -> int:
    from evoforge.campaign import Campaign

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.json").is_file():
            raise UsageError(f"--resume {run_dir}: no config.json there (not a run directory)")
        if args.config:
            raise UsageError("--resume takes its config from the run directory; drop the CONFIG argument")
        config = resolved_config_from_file(run_dir / "config.json")
        config.out = str(run_dir)
        config = apply_flags(config, args) if _any_override(args) else config
    else:
        config = apply_flags(load_config(args.config), args)
    from evoforge.search.durable import disk_full_error, no_space_left

    campaign = Campaign(config, resume=bool(args.resume), progress=not args.quiet)
    try:
        summary = asyncio.run(campaign.run()) if campaign.start() else campaign.finish()
    except OSError as e:
        if no_space_left(e):
            raise disk_full_error(config.run_dir(), config.run_dir()) from None
        raise
    finally:
        campaign.close()
    if args.json:
        import json

        print(json.dumps(summary, default=str))
    else:
        print_leaderboard(summary)
    return 0


def quickstart_config() -> Path:
    """The quickstart campaign shipped in the package (``evoforge/data/quickstart.toml``, the file
    ``experiments/quickstart.toml`` of a checkout), so ``evoforge quickstart`` runs it from any folder."""
    from importlib import resources

    path = Path(str(resources.files("evoforge") / "data" / "quickstart.toml"))
    if not path.is_file():
        raise UsageError(f"quickstart: {path} is missing from this installation (reinstall evoforge)")
    return path


def cmd_quickstart(args: argparse.Namespace) -> int:
    """``make demo``'s campaign: started the first time, continued (``--resume``) when OUT holds it already."""
    out = Path(args.out or QUICKSTART_OUT)
    argv = ["--resume", str(out)] if (out / "config.json").is_file() else [str(quickstart_config()), "--out", str(out)]
    for flag in ("budget_evals", "backend", "workers", "kernelbench"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    argv += [f for f in ("--quiet", "--json") if getattr(args, f[2:])]
    parser = argparse.ArgumentParser(prog="evoforge")
    add_subparser(parser.add_subparsers(dest="command"))
    return cmd_run(parser.parse_args(["run", *argv]))


def _any_override(args: argparse.Namespace) -> bool:
    flags = {"timeout_s": "timeout"}  # config key -> the flag's dest, where they differ
    return any(getattr(args, flags.get(k, k), None) not in (None, False, []) for k in RESUME_OVERRIDES)


def add_subparser(sub: Any) -> None:
    p = sub.add_parser("run", help="run a campaign (evolution + Bayesian tuning, recorded in Optuna)")
    p.add_argument("config", nargs="?", help="campaign TOML (e.g. experiments/quickstart.toml)")
    p.add_argument("--task", action="append", help="task file or L1/23 (repeatable; replaces the config's tasks)")
    p.add_argument("--landscape", action="append", metavar="FILE",
                   help="--backend replay: a recorded landscape (JSON) as a task, its evaluations answered from the "
                        "file (repeatable; with --task, beside those tasks, which a seeded cost model answers)")
    p.add_argument("--replay-delay", type=float, metavar="SECONDS",
                   help="--backend replay: how long each simulated evaluation keeps its device busy (default 0)")
    p.add_argument("--replay-failures", metavar="STATUS=P,...",
                   help="--backend replay: the cost model's failure mix for tasks without a landscape, e.g. "
                        "compile_error=0.1,incorrect=0.05,timeout=0.01 (default: none fail)")
    p.add_argument("--devices-per-actor", type=int, metavar="N",
                   help="--backend replay: simulated devices (--workers of them) one Ray actor process serves at "
                        "once (default 1)")
    p.add_argument("--kernelbench", metavar="DIR", help=kernelbench_flag_help())
    p.add_argument("--seed-kernel", help="starting kernel (a module defining ModelNew)")
    p.add_argument("--build-workers", type=int,
                   help="CuTe: nvcc builds run ahead on this many CPU threads (default: one per core, up to 16)")
    p.add_argument("--language", choices=["triton", "cute"],
                   help="kernel language of every task (default: the seed's own; cute: CUDA C++ with CuTe, "
                        "compiled with nvcc, run on --backend cuda)")
    p.add_argument("--out", help="run directory (default runs/<name>)")
    p.add_argument("--name", help="campaign name (studies are named <name>/<task>)")
    p.add_argument("--budget-evals", type=int, help="evaluations per task")
    p.add_argument("--budget-minutes", type=float, help="the search's wall-clock minutes, counted once every task "
                   "has its seed (torch.compile's captures before that are not counted; tasks already started are "
                   "evaluated meanwhile)")
    p.add_argument("--backend", help="auto, cuda, xpu, interpreter, or replay (a simulated device: recorded "
                                     "landscapes and a seeded cost model; see --landscape)")
    p.add_argument("--arch", help="knowledge-base arch (default: the device's)")
    p.add_argument("--set", action="append", metavar="K=V", help="override a task constant (all tasks)")
    p.add_argument("--shapes", help='extra correctness shapes for all tasks: "batch_size=3,dim=777;..."')
    p.add_argument("--storage", help="Optuna RDB URL (default sqlite:///RUN_DIR/optuna.db)")
    p.add_argument("--ray-address", help="join an existing Ray cluster (default: start Ray locally)")
    p.add_argument("--strategy", help="search strategy (default: default; the LLM loops: stages, cutegen; see docs/llm.md)")
    p.add_argument("--strategy-option", action="append", metavar="K=V",
                   help="an option of the strategy, over the config's strategy_options (repeatable; e.g. "
                        "attempts=2, order=['memory_access','autotuning'])")
    p.add_argument("--operators", help="comma-separated operators: params, rule, llm, llm-repair, ...")
    p.add_argument("--seed", type=int, help="random seed of the campaign")
    p.add_argument("--workers", type=int, help="evaluation actors (default: evaluators_per_device per GPU, "
                   "2 on the interpreter)")
    p.add_argument("--evaluators-per-device", type=int, metavar="N",
                   help="evaluation actors per GPU, taking turns to measure (default 2; 1: one at a time)")
    p.add_argument("--timeout", type=float, help="seconds before one evaluation is killed")
    p.add_argument("--correctness-runs", type=int, metavar="N",
                   help="runs of each candidate with fresh random inputs, compared with the reference (default 3); "
                        "not Optuna's trials: a trial of the record is one whole evaluation")
    p.add_argument("--trials", dest="correctness_runs", type=int, action=DeprecatedFlag, new="--correctness-runs",
                   help=argparse.SUPPRESS)
    p.add_argument("--no-kb", action="store_true", help="turn the knowledge base off (ablation)")
    p.add_argument("--allow-ops", metavar="OP,...",
                   help="ATen ops every task's kernels may leave to PyTorch (cuBLAS/cuDNN), e.g. addmm,convolution")
    p.add_argument("--compile-baseline", choices=["auto", "on", "off"],
                   help="time torch.compile's default build of each task's reference (auto, the default: on a GPU)")
    p.add_argument("--confirm", choices=["auto", "on", "off"],
                   help="re-time each task's finalists before naming its best kernel (auto, the default: on a GPU)")
    p.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (vLLM, Ollama, LiteLLM, OpenAI)")
    p.add_argument("--llm-model", help="model name; turns the LLM operators on")
    p.add_argument("--llm-api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a campaign from its run directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.set_defaults(func=cmd_run)

    q = sub.add_parser("quickstart", help="the demo campaign (make demo's), from any folder: no GPU, no API key",
                       description="Run the quickstart campaign shipped with evoforge (evoforge/data/quickstart.toml: "
                                   "four KernelBench level-1 tasks at small shapes, 12 evaluations each); a second "
                                   "call continues the first run (--resume) instead of overwriting it.")
    q.add_argument("--out", help=f"run directory (default {QUICKSTART_OUT}, in the current folder)")
    q.add_argument("--budget-evals", type=int, help="evaluations per task (default 12)")
    q.add_argument("--backend", help="auto (default), cuda, xpu or interpreter")
    q.add_argument("--workers", type=int, help="evaluation actors (default: automatic)")
    q.add_argument("--kernelbench", metavar="DIR", help=kernelbench_flag_help())
    q.add_argument("--quiet", action="store_true", help="no progress output")
    q.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    q.set_defaults(func=cmd_quickstart)
