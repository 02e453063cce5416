"""Search on KernelBench tasks nobody hand-tuned: one campaign of fixed budget (no LLM: Optuna and the rule
operators) over tasks chosen at random among those no shipped template serves, each starting from its seed from
torch.compile (``inductor-seed``), then the seed and the best kernel timed against eager and torch.compile.

1. The order: every level-1 and level-2 task without a template, shuffled with ``--seed`` (written to
   ``OUT/selection.json`` with every pick and every skip).
2. Captures (coverage script's workers: torch.compile of the reference warmed, then ``inductor_capture.capture``),
   in that order, until ``--pick`` tasks have a seed: under the strict rule where it gives one, else with exactly
   the vendor ops Inductor calls allowed (``allow_ops``: the rule the result runs under is in its row). A task
   whose capture gives no seed under either rule is skipped, its reason listed.
3. One campaign over the picked tasks (``--part K/N`` of them), ``--budget`` evaluations each, the captures placed
   where the campaign's own set-up finds them (the path a user's campaign takes). ``--minutes`` bounds this call's
   share; a campaign left unfinished in ``OUT/run`` is resumed by the next call given the same ``OUT/run``
   (``evoforge run --resume``), and only finished tasks are timed.
4. For every task, in this process with nothing else on the GPU: eager, torch.compile, the seed and the best
   kernel timed together (0.5 s of all in turn, then mirrored do_bench medians; the coverage script's timing).

Rows go to ``OUT/search.jsonl`` as each task is timed; ``--summarize`` writes ``OUT/search.md`` (geomean speedup
over eager and torch.compile, fast_1 against each, the search's gain over its seed) from every jsonl given.

    python3 -P experiments/benchmarks/kernelbench_search.py --pick 30 --part 1/3 --budget 8 --minutes 6 \\
        --deadline 540 --captures CAPTURES --selection experiments/results/kernelbench/search_selection_seed0.json \\
        --out $OUT                                                                                      # GPU
    python3 experiments/benchmarks/kernelbench_search.py --summarize experiments/results/kernelbench/search_*.jsonl \\
        --out experiments/results/kernelbench
    python3 experiments/benchmarks/kernelbench_search.py --smoke --out /tmp/search                          # CPU
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import importlib.util
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: --smoke: two small tasks no template serves, one per rule, on the CPU (capture under the stand-in driver).
SMOKE = {"L1/20": {"batch_size": 4, "dim": 256}, "L2/9": {"batch_size": 8, "in_features": 32, "out_features": 16}}


def _load(name: str) -> Any:
    """A sibling script (the coverage script's capture and timing, the suite's helpers), loaded by path."""
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def untemplated(levels: list[int], seed: int) -> list[str]:
    """Every task of the levels that no shipped template serves, in the order ``seed`` shuffles them to."""
    from evoforge.knowledge import find_template_for

    from evoforge.task import Task

    cov = _load("kernelbench_coverage")
    specs = [s for s in cov.task_list(levels, None) if find_template_for(Task.load(s)) is None]
    random.Random(seed).shuffle(specs)
    return specs


def choose(order: list[str], captures: dict[str, dict], pick: int) -> tuple[list[dict], list[dict]]:
    """The first ``pick`` tasks of ``order`` with a seed (strict where it has one, else vendor ops allowed), and
    the ones skipped before them with the reason. Tasks not captured end the choice (capture more first)."""
    cov = _load("kernelbench_coverage")
    picked, skipped = [], []
    for spec in order:
        if len(picked) == pick or spec not in captures:
            break
        made = cov.convert(captures[spec])
        if not isinstance(made["strict"], str):
            picked.append({"spec": spec, "rule": "strict", "allow_ops": []})
        elif isinstance(made.get("vendor"), tuple):
            picked.append({"spec": spec, "rule": "vendor", "allow_ops": list(made["vendor"][1])})
        else:
            skipped.append({"spec": spec, "reason": made["strict"]})
    return picked, skipped


def _seed_row(history: list, source_of_seed: str) -> tuple[Any, Any]:
    for cand, result in history:
        if cand.operator == source_of_seed:
            return cand, result
    return None, None


def campaign_over(picked: list[dict], *, out: Path, budget: int, seed: int, captures: dict[str, dict],
                  device: str, per_device: int, timing_ms: float, overrides: dict[str, dict],
                  minutes: float = 0.0) -> tuple[Any, dict]:
    """One campaign over the picked tasks, each from the capture placed where the campaign's set-up reads it.

    ``OUT/run`` holding a campaign already (an earlier call's, carried back): it is resumed (``evoforge run
    --resume``). ``minutes``: this call's share of the campaign's time (0: none); what is left goes on next call."""
    from evoforge.mutators.inductor_seed import InductorCapture

    from evoforge.campaign import Campaign
    from evoforge.config import CampaignConfig, TaskConfig
    from evoforge.task import Task

    run_dir = out / "run"
    resume = (run_dir / "config.json").exists()
    before_s = 0.0
    if resume and (run_dir / "campaign_state.json").exists():
        before_s = float(json.loads((run_dir / "campaign_state.json").read_text()).get("elapsed_s", 0.0))
    (run_dir / "seeds").mkdir(parents=True, exist_ok=True)
    for p in picked:
        task = Task.load(p["spec"], overrides=overrides.get(p["spec"]) or None)
        data = {k: v for k, v in captures[p["spec"]].items()  # the capture alone, not the script's timings
                if k in InductorCapture.__dataclass_fields__ or k == "no_seed"}
        (run_dir / "seeds" / f"{task.name.replace('/', '_')}.inductor.json").write_text(json.dumps(data))
    cfg = CampaignConfig(name="kernelbench-search", out=str(run_dir), backend="cuda" if device == "cuda" else "interpreter",
                         budget_evals=budget, seed=seed, operators=["params", "rule"], timeout_s=180,
                         budget_minutes=before_s / 60 + minutes if minutes else 0.0,
                         evaluators_per_device=per_device, timing_budget_ms=timing_ms,
                         tasks=[TaskConfig(spec=p["spec"], set=dict(overrides.get(p["spec"], {})),
                                           allow_ops=p["allow_ops"]) for p in picked])
    campaign = Campaign(cfg, resume=resume, progress=False)
    try:
        summary = asyncio.run(campaign.run()) if campaign.start() else campaign.finish()
    finally:
        campaign.close()
    return campaign, summary


def time_task(task: Any, state: Any, cov: Any, suite: Any, device: str) -> dict[str, Any]:
    """Eager, torch.compile, the seed and the best kernel, timed together (the coverage script's timing)."""
    import torch
    from evoforge.mutators.inductor_seed import INDUCTOR_SEED

    row: dict[str, Any] = {}
    seed_cand, seed_result = _seed_row(state.history, INDUCTOR_SEED)
    best = state.best()
    row["seed_status"] = str(seed_result.status) if seed_result is not None else "not evaluated"
    if seed_result is not None and not seed_result.ok:
        row["seed_message"] = seed_result.message[:300]
    if best is None:
        return row
    cand, result = best
    row.update(best_operator=cand.operator, best_params=cand.params, chain_speedup=result.speedup)
    if device != "cuda":
        return row
    try:
        kernels = {"best": (cand.source, cand.params)}
        if seed_result is not None and seed_result.ok:
            kernels["seed"] = (seed_cand.source, seed_cand.params)
        times = cov.time_kernels(task, kernels, suite)
        row.update({f"{k}_ms": v for k, v in times.items()})
        row.update(vs_eager=times["eager"] / times["best"], vs_compile=times["compile"] / times["best"])
        if "seed" in times:
            row.update(seed_vs_eager=times["eager"] / times["seed"], seed_vs_compile=times["compile"] / times["seed"],
                       gain_over_seed=times["seed"] / times["best"])
    except Exception as e:  # noqa: BLE001  (a timing failure is recorded, the run goes on)
        row["timing_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        torch.cuda.empty_cache()
    return row


def run(args: argparse.Namespace) -> None:
    import torch

    from evoforge.task import Task

    cov = _load("kernelbench_coverage")
    device = "cpu" if args.smoke else "cuda"
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if args.smoke:
        order, overrides = list(SMOKE), dict(SMOKE)
    elif args.selection:  # a committed choice, as it was made (templates added since do not reshuffle it)
        order, overrides = json.loads(args.selection.read_text())["order"], {}
    else:
        order, overrides = untemplated(args.levels, args.seed), {}
    folder = args.captures or args.out / "captures"
    captures: dict[str, dict] = {}
    at = 0
    while True:  # capture in the shuffled order until enough tasks have a seed (or the order ends)
        picked, skipped = choose(order, captures, args.pick)
        if len(picked) == args.pick or at >= len(order):
            break
        batch = order[at:at + max(args.pick - len(picked), args.workers)]
        at += len(batch)
        items = [(s, Task.load(s, overrides=overrides.get(s) or None).path, overrides.get(s, {})) for s in batch]
        captures.update(cov._capture_all(items, device, folder, args.workers, args.capture_timeout))
    print(f"captured {len(captures)} tasks in {time.perf_counter() - t0:.0f} s: {len(picked)} picked, "
          f"{len(skipped)} skipped", flush=True)
    (args.out / "selection.json").write_text(json.dumps(
        {"seed": args.seed, "levels": args.levels, "untemplated": len(order), "order": order, "picked": picked,
         "skipped": skipped}, indent=1))
    k, n = (int(x) for x in args.part.split("/"))
    mine = picked[k - 1::n]
    if args.tasks:  # this call's tasks named (the picks' own rules kept): say, the biggest ones together
        unknown = sorted(set(args.tasks) - {p["spec"] for p in picked})
        if unknown:
            print(f"--tasks: {', '.join(unknown)} not among the {len(picked)} picked tasks "
                  f"(see {args.out / 'selection.json'}); name picked tasks only", file=sys.stderr)
            raise SystemExit(2)
        mine = [p for p in picked if p["spec"] in args.tasks]
    rows_path = args.out / "search.jsonl"
    done = {json.loads(line)["spec"] for line in rows_path.read_text().splitlines()} if rows_path.exists() else set()
    if all(p["spec"] in done for p in mine):
        print("nothing left to run in this part", flush=True)
        return
    if device == "cuda":  # torch.compile of each reference warmed in parallel workers, so that its timing below
        # finds Inductor's caches filled (captures reused from an earlier call were warmed on another machine)
        todo = [p for p in mine if p["spec"] not in done]
        for p in todo:
            (folder / f"{p['spec'].replace('/', '_')}.warm.json").unlink(missing_ok=True)
        cov._capture_all([(p["spec"], Task.load(p["spec"]).path, {}) for p in todo], device, folder, args.workers,
                         args.capture_timeout)
    t1 = time.perf_counter()
    campaign, summary = campaign_over(mine, out=args.out, budget=args.budget, seed=args.seed, captures=captures,
                                      device=device, per_device=args.evaluators_per_device,
                                      timing_ms=args.timing_ms, overrides=overrides, minutes=args.minutes)
    campaign_s = time.perf_counter() - t1
    print(f"campaign over {len(mine)} tasks: {campaign_s:.0f} s", flush=True)
    suite = _load("h200_suite")
    for p in (p for p in mine if p["spec"] not in done):
        task = Task.load(p["spec"], overrides=overrides.get(p["spec"]) or None)
        state = campaign.tasks[task.name]
        t = summary["tasks"][task.name]
        # Cut by this call's share of time (its stop says so too), or not stopped at all: the next call goes on.
        if t["evaluations"] < args.budget and (campaign.out_of_time() or not t.get("stopped_early")):
            print(f"{p['spec']}: {t['evaluations']} of {args.budget} evaluations; the next call resumes it", flush=True)
            continue  # its campaign goes on next call (OUT/run carried back), then it is timed
        if args.deadline and time.perf_counter() - t0 > args.deadline:
            print(f"stopped by --deadline {args.deadline:g} s before timing {p['spec']}", flush=True)
            break
        row = {"task": task.name, "spec": p["spec"], "rule": p["rule"], "allow_ops": p["allow_ops"],
               "budget": args.budget, "evaluations": t["evaluations"], "statuses": t["statuses"],
               "stopped": t.get("stopped_early") or "", "campaign_s": campaign_s, "tasks_in_campaign": len(mine)}
        row.update(time_task(task, state, cov, suite, device))
        with rows_path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps({k: row.get(k) for k in ("spec", "rule", "evaluations", "best_operator", "vs_eager",
                                                  "vs_compile", "gain_over_seed")}), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
            "triton": __import__("triton").__version__,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (CPU smoke)",
            "driver": suite._driver() if device == "cuda" else "", "commit": cov._commit(),
            "script": "experiments/benchmarks/kernelbench_search.py", "argv": sys.argv[1:]}
    (args.out / f"meta_{k}of{n}.json").write_text(json.dumps(meta, indent=1))


def summarize(paths: list[Path], selection: Path | None, out: Path) -> str:
    cov = _load("kernelbench_coverage")
    _geo = cov._geo
    rows = [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]
    timed = [r for r in rows if "vs_eager" in r]
    seeded = [r for r in timed if "gain_over_seed" in r]
    lines = ["# Search on KernelBench tasks without a template (no LLM)", "",
             f"Rows: {len(rows)} tasks from {', '.join(str(p) for p in paths)}.", ""]
    if selection is not None and selection.exists():
        sel = json.loads(selection.read_text())
        lines += [f"Chosen with seed {sel['seed']} among the {sel['untemplated']} level-{'/'.join(map(str, sel['levels']))} "
                  f"tasks no template serves; {len(sel['picked'])} picked, {len(sel['skipped'])} skipped before them "
                  "(no seed under either rule):", ""]
        lines += [f"- skipped {s['spec']}: {s['reason'][:160]}" for s in sel["skipped"]]
        lines.append("")
    n = len(rows)
    correct = [r for r in rows if r.get("best_operator")]
    lines += [f"- a correct kernel: {len(correct)} of {n} (the rest: the seed and every child failed the chain)",
              f"- geomean speedup of the best kernel over eager {_geo([r['vs_eager'] for r in timed]):.3f}x, over "
              f"torch.compile {_geo([r['vs_compile'] for r in timed]):.3f}x ({len(timed)} timed)",
              f"- fast_1 (correct and faster) vs eager {sum(r['vs_eager'] > 1 for r in timed)} of {n}, "
              f"vs torch.compile {sum(r['vs_compile'] > 1 for r in timed)} of {n}",
              f"- the seed alone: geomean over eager {_geo([r['seed_vs_eager'] for r in seeded]):.3f}x, over "
              f"torch.compile {_geo([r['seed_vs_compile'] for r in seeded]):.3f}x; fast_1 vs eager "
              f"{sum(r['seed_vs_eager'] > 1 for r in seeded)}, vs torch.compile "
              f"{sum(r['seed_vs_compile'] > 1 for r in seeded)} ({len(seeded)} with a correct seed)",
              f"- the search's gain over its seed (seed time / best time): geomean {_geo([r['gain_over_seed'] for r in seeded]):.3f}x, "
              f"more than 2% on {sum(r['gain_over_seed'] > 1.02 for r in seeded)} of {len(seeded)}", "",
              "| task | rule | evaluations | best from | seed ms | best ms | eager ms | compile ms | best vs eager | "
              "best vs compile | gain over seed |",
              "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    for r in sorted(rows, key=lambda r: (r["spec"].split("/")[0], int(r["spec"].split("/")[1]))):
        rule = r["rule"] + (f" ({', '.join(r['allow_ops'])})" if r.get("allow_ops") else "")
        best = r.get("best_operator") or f"no correct kernel (seed: {r.get('seed_status', '')})"
        f = functools.partial(cov._fmt, r)
        lines.append(f"| {r['task']} | {rule} | {r['evaluations']} | {best} | {f('seed_ms')} | {f('best_ms')} | "
                     f"{f('eager_ms')} | {f('compile_ms')} | {f('vs_eager')} | {f('vs_compile')} | "
                     f"{f('gain_over_seed')} |")
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.md").write_text(text)
    return text


def coverage_rows(rows: list[dict], selection: dict, captures: Path) -> list[dict]:
    """The search's seeds as rows of the coverage script (same captures, same chain, same timing): the rule the
    search ran under from its seed's evaluation and timing, the other rule from the capture's conversion, and a
    row for each task skipped for want of a seed, so that the coverage counts the tasks the search reached."""
    from evoforge.task import Task

    cov = _load("kernelbench_coverage")
    by = {r["spec"]: r for r in rows}
    out: list[dict] = []
    for spec in [p["spec"] for p in selection["picked"]] + [s["spec"] for s in selection["skipped"]]:
        data = json.loads((captures / f"{spec.replace('/', '_')}.json").read_text())
        warm = captures / f"{spec.replace('/', '_')}.warm.json"
        if warm.exists():
            data.update(json.loads(warm.read_text()))
        base = {"spec": spec, "capture_s": data.get("capture_s"), "torch_compile_s": data.get("torch_compile_s"),
                "torch_compile_error": data.get("torch_compile_error"), "from": "kernelbench_search"}
        r = by.get(spec)
        base["task"] = r["task"] if r else Task.load(spec).name  # a skipped task named as the others are
        for rule, made in cov.convert(data).items():
            if made == "same as strict":
                continue
            row = dict(base, rule=rule)
            if r is None or rule != r["rule"]:
                row.update(status="no_seed", message=made if isinstance(made, str) else "")
                if not isinstance(made, str):  # a seed the search did not run (its other rule): not judged
                    continue
            else:
                row.update(allow_ops=r["allow_ops"], status=r["seed_status"],
                           message="" if r["seed_status"] == "ok" else
                           r.get("seed_message") or "the seed's evaluation in the search campaign")
                if "seed_ms" in r:
                    row.update(seed_ms=r["seed_ms"], eager_ms=r["eager_ms"], compile_ms=r["compile_ms"],
                               vs_eager=r["seed_vs_eager"], vs_compile=r["seed_vs_compile"])
            out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--seed", type=int, default=0, help="shuffles the tasks and seeds the campaign")
    ap.add_argument("--pick", type=int, default=30, help="tasks with a seed to choose")
    ap.add_argument("--part", default="1/1", help="K/N: every Nth picked task from the Kth (split over device calls)")
    ap.add_argument("--tasks", nargs="*", help="these picked tasks instead of --part (a campaign's evaluators per "
                    "GPU follow its biggest task: an 8 GiB task in every part would hold each part to one)")
    ap.add_argument("--budget", type=int, default=16, help="evaluations per task")
    ap.add_argument("--evaluators-per-device", type=int, default=4)
    ap.add_argument("--timing-ms", type=float, default=400.0, help="the chain's timing budget per evaluation")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--capture-timeout", type=float, default=240.0)
    ap.add_argument("--captures", type=Path, help="captures of an earlier call (reused; new ones are added)")
    ap.add_argument("--minutes", type=float, default=0.0,
                    help="this call's campaign time; an unfinished campaign (OUT/run) resumes on the next call")
    ap.add_argument("--deadline", type=float, default=0.0, help="no task is timed after this many seconds in all")
    ap.add_argument("--smoke", action="store_true", help="two small tasks on the CPU (interpreter)")
    ap.add_argument("--summarize", type=Path, nargs="*", help="write OUT/search.md from these jsonl files")
    ap.add_argument("--selection", type=Path, help="a run's selection.json: its order is used again (and with "
                    "--summarize, its picks and skips are listed)")
    ap.add_argument("--coverage-from", type=Path, help="with --summarize and --selection: the search's captures "
                    "folder; its seeds are written as coverage rows (OUT/coverage_from_search.jsonl)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.summarize is not None:
        print(summarize(args.summarize, args.selection, args.out))
        if args.coverage_from:  # the seeds as coverage rows, beside the summary
            rows = [json.loads(line) for p in args.summarize for line in p.read_text().splitlines() if line.strip()]
            made = coverage_rows(rows, json.loads(args.selection.read_text()), args.coverage_from)
            (args.out / "coverage_from_search.jsonl").write_text("".join(json.dumps(r) + "\n" for r in made))
        return
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        args.pick = min(args.pick, 2)
    run(args)


if __name__ == "__main__":
    main()
