"""evoforge against torch.compile where nobody wrote a template (issue R): KernelBench tasks run as a user runs them
(`evoforge run`, default options, a fixed time per task), the exported kernels re-timed in another process against
eager and torch.compile's default (static) build.

1. ``--select`` (CPU, committed before any tuning): a seeded draw of ``--count`` tasks among the level-1 and level-2
   tasks that no shipped template serves and that have a seed from torch.compile (a correct seed under the strict
   rule, else under the vendor rule: cuBLAS/cuDNN's GEMM and convolution ops allowed, ``VENDOR_OPS``), read from the
   committed coverage rows (experiments/results/kernelbench/*.jsonl). The tasks with no seed at all (one library
   call: Inductor writes no Triton) are issues S and U, not this sample.
2. ``--run`` (GPU): ``--part K/N`` of the sample as one `evoforge run` (a config of those tasks, each with its rule's
   ``allow_ops``; everything else default) with ``--budget-minutes`` = ``--minutes-per-task`` x tasks (the
   search's time: it starts once every task has its seed; the set-up before it, torch.compile's captures, is not
   counted, and tasks already started are evaluated while the others capture). Then, in this process (not the
   campaign's), for each
   task: eager, torch.compile (default, static), the exported best kernel (``RUN/best/<task>.py``) and the seed
   (``RUN/seeds/<task>.py``) checked against the reference and timed together (the coverage script's timing:
   0.5 s of all in turn, then mirrored do_bench medians, L2 flushed; with ``--placements N`` the median of N
   rounds, each under another state of the caching allocator). Rows go to ``OUT/vs_compile.jsonl``.
3. ``--summarize``: ``OUT/vs_compile.md`` from every jsonl given: correct, geomean over torch.compile, the share at or
   above 1.0x, the worst, for the exported kernels and for the seeds alone; the campaign's own figures beside them.

    python3 experiments/benchmarks/kernelbench_vs_compile.py --select --seed 20261202 --count 40 \\
        --out experiments/results/kernelbench/vs_compile_sample_2026-12-02.json                        # CPU
    python3 -P experiments/benchmarks/kernelbench_vs_compile.py --run \\
        --sample experiments/results/kernelbench/vs_compile_sample_2026-12-02.json --part 1/2 \\
        --minutes-per-task 0.5 --out $OUT                                                               # GPU
    python3 experiments/benchmarks/kernelbench_vs_compile.py --summarize OUT1/vs_compile.jsonl ... \\
        --sample experiments/results/kernelbench/vs_compile_sample_2026-12-02.json --out DIR
    python3 experiments/benchmarks/kernelbench_vs_compile.py --smoke --out /tmp/vsc                     # CPU

The GEMM family (issue S) runs the same way from its listed tasks (strict rule):
``--sample experiments/results/kernelbench/gemm_family_tasks_2026-12-03.json --part K/N``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "results" / "kernelbench"
#: The vendor rule: the GEMM and convolution ops of cuBLAS/cuDNN allowed (torch.compile's static build may call
#: another of them than its shape-generic build: mm and a fused bias where the generic one calls addmm).
VENDOR_OPS = ["addmm", "baddbmm", "bmm", "convolution", "mm"]
#: --smoke: two small tasks on the CPU (the interpreter; a campaign of a few evaluations, nothing timed).
SMOKE = [{"spec": "L1/20", "rule": "strict", "allow_ops": [], "set": {"batch_size": 4, "dim": 256}},
         {"spec": "L2/9", "rule": "vendor", "allow_ops": VENDOR_OPS,
          "set": {"batch_size": 8, "in_features": 32, "out_features": 16}}]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def coverage_files() -> list[Path]:
    """The committed coverage rows (the search's own rows file is not one: its seeds are in coverage_from_search)."""
    return sorted(p for p in RESULTS.glob("*.jsonl") if not p.name.startswith(("search_", "vs_compile")))


def population() -> list[dict[str, Any]]:
    """Every level-1/2 task no template serves with a correct seed from torch.compile, under the rule it has one."""
    from evoforge.knowledge import find_template_for

    from evoforge.task import Task

    rows = _load("kernelbench_coverage").read_rows(coverage_files())
    out = []
    for spec in sorted({s for s, _ in rows}, key=lambda s: (s.split("/")[0], int(s.split("/")[1]))):
        for rule in ("strict", "vendor"):
            row = rows.get((spec, rule))
            if row is not None and row.get("status") == "ok":
                if find_template_for(Task.load(spec)) is None:
                    out.append({"spec": spec, "rule": rule, "allow_ops": VENDOR_OPS if rule == "vendor" else []})
                break
    return out


def select(seed: int, count: int) -> dict[str, Any]:
    tasks = population()
    drawn = random.Random(seed).sample(tasks, count)
    return {"date": datetime.date.today().isoformat(), "seed": seed, "count": count, "population": len(tasks),
            "population_rule": "level-1/2 KernelBench tasks no shipped template serves, with a correct seed from "
                               "torch.compile in the committed coverage rows (strict rule where it has one, else "
                               "vendor: cuBLAS/cuDNN's GEMM and convolution ops allowed)",
            "coverage_files": [p.name for p in coverage_files()], "tasks": drawn}


# ------------------------------------------------------------------------------------------------ the campaign
def write_config(tasks: list[dict[str, Any]], run_dir: Path, minutes: float) -> Path:
    """A campaign config of these tasks, every setting but the tasks', their rules and the time left default."""
    lines = ["[campaign]", 'name = "vs-compile"', f'out = "{run_dir}"', f"budget_minutes = {minutes:g}", ""]
    for t in tasks:
        lines += ["[[tasks]]", f'spec = "{t["spec"]}"']
        if t.get("allow_ops"):
            lines.append(f"allow_ops = {json.dumps(t['allow_ops'])}")
        if t.get("set"):
            lines.append("set = {" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in t["set"].items()) + "}")
        lines.append("")
    path = run_dir.parent / "vs_compile.toml"
    path.write_text("\n".join(lines))
    return path


def run_campaign(config: Path, log: Path, extra: list[str]) -> tuple[int, float]:
    """`evoforge run CONFIG` as a user runs it (its own process, the installed package: ``-P``)."""
    t0 = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.run([sys.executable, "-P", "-c", "from evoforge.cli import main; main()", "run",
                               str(config), "--quiet", *extra], stdout=f, stderr=subprocess.STDOUT, cwd=str(log.parent))
    return proc.returncode, time.perf_counter() - t0


# ------------------------------------------------------------------------------------------------ re-timing
def _host(values: list[Any]) -> list[Any]:
    return [v.cpu() if hasattr(v, "cpu") else v for v in values]


def _correct(task: Any, source: str, device: str) -> str:
    """'' when the kernel matches the reference at the main shape on fresh inputs (the chain's tolerances, its
    float64 criterion included), else why not: the re-timing times what was checked."""
    import torch
    from evoforge.judge.compare import compare_outputs, flatten_outputs, round_significand

    from evoforge.task import exec_module_file, load_task_module

    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"vsc_{abs(hash(source))}.py"
    path.write_text(source)
    module = exec_module_file(str(path), f"vsc_{abs(hash(source))}")
    tm = load_task_module(task)
    init = tm.get_init_inputs()
    torch.manual_seed(0)
    ref = tm.Model(*init).to(device)
    new = module.ModelNew(*init)
    try:
        new.load_state_dict(ref.state_dict())
    except Exception:  # noqa: BLE001  (a model with no state)
        pass
    new = new.to(device)
    torch.manual_seed(7)
    with torch.device(device):
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in tm.get_inputs()]
    with torch.no_grad():
        got, expected = flatten_outputs(new(*inputs)), flatten_outputs(ref(*[
            x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
        def reference64(xs: list[Any], where: str) -> list[Any]:
            return flatten_outputs(__import__("copy").deepcopy(ref).to(where).double()(*[
                x.to(where).double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]))

        # the float64 criterion's yardstick as the chain has it (judge/compare.py): the larger of the reference's
        # own distance and that of its inputs rounded to a 3-pass split's precision, which an fp32 task admits
        try:
            cmp = compare_outputs(got, expected, reference64=lambda: reference64(inputs, device),
                                  rounded64=lambda: reference64(round_significand(inputs), device))
        except torch.OutOfMemoryError:  # a large task's float64 copies do not fit beside it: compared on the host
            torch.cuda.empty_cache()
            got, expected, inputs = _host(got), _host(expected), _host(inputs)
            torch.cuda.empty_cache()
            cmp = compare_outputs(got, expected, reference64=lambda: reference64(inputs, "cpu"),
                                  rounded64=lambda: reference64(round_significand(inputs), "cpu"))
    return "" if cmp.ok else cmp.message[:300]


def compile_without_tf32(task: Any) -> str:
    """A candidate module of torch.compile's default (static) build of the reference run with cuDNN's TF32 off: where
    the default build fails the chain's check (its convolution in TF32), the build of torch.compile a user would need
    for the chain's accuracy, timed and checked as any kernel is."""
    return task.source + '''

PARAMS = {}


class ModelNew(Model):
    """torch.compile of the reference, each call with cuDNN's TF32 off (fp32 convolutions in fp32)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._compiled = torch.compile(super().forward)

    def forward(self, *args):
        cudnn = torch.backends.cudnn
        with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                         allow_tf32=False):
            return self._compiled(*args)
'''


def retime(task_entry: dict[str, Any], run_dir: Path, summary: dict[str, Any], device: str,
           placements: int = 0) -> dict[str, Any]:
    import torch

    from evoforge.export import task_slug
    from evoforge.task import Task

    task = Task.load(task_entry["spec"], overrides=task_entry.get("set") or None)
    row: dict[str, Any] = {"spec": task_entry["spec"], "task": task.name, "rule": task_entry["rule"],
                           "allow_ops": task_entry["allow_ops"]}
    t = (summary.get("tasks") or {}).get(task.name)
    if t is None:
        row["error"] = (summary.get("not_started") or {}).get(task.name, "not in the campaign's summary")
        return row
    row.update({k: t.get(k) for k in ("evaluations", "statuses", "best_speedup", "best_operator", "vs_compile",
                                      "seed_vs_compile", "compile_speedup", "compile_baseline", "compile_correct",
                                      "stopped_early", "confirmation")})
    row["campaign_vs_compile"] = row.pop("vs_compile")
    row["campaign_seed_vs_compile"] = row.pop("seed_vs_compile")
    exported = run_dir / "best" / f"{task_slug(task.name)}.py"
    info = json.loads(exported.with_suffix(".json").read_text()) if exported.with_suffix(".json").exists() else {}
    row["recommendation"] = info.get("recommendation")
    kernels: dict[str, tuple[str, dict]] = {}
    if exported.exists():
        kernels["best"] = (exported.read_text(), {})
    seed_file = run_dir / "seeds" / f"{task.name.replace('/', '_')}.py"
    if seed_file.exists():
        kernels["seed"] = (seed_file.read_text(), {})
    if row.get("compile_correct") is False:  # the default build fails the chain: the one with cuDNN's TF32 off too
        kernels["compile_no_tf32"] = (compile_without_tf32(task), {})
    for name, (source, _) in list(kernels.items()):
        why = _correct(task, source, device)
        row[f"{name}_correct"] = not why
        if why:
            row[f"{name}_error"] = why
            kernels.pop(name)
    if not kernels or device != "cuda":
        return row
    try:
        times = _load("kernelbench_coverage").time_kernels(task, kernels, _load("h200_suite"), placements)
        row["placements"] = placements
    except Exception as e:  # noqa: BLE001  (recorded; the other tasks are timed)
        row["timing_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        return row
    finally:
        torch.cuda.empty_cache()
    row.update({f"{k}_ms": v for k, v in times.items()})
    for name in kernels:
        row[f"{name}_vs_eager"] = times["eager"] / times[name]
        row[f"{name}_vs_compile"] = times["compile"] / times[name]
    if "compile_no_tf32" in times:
        for name in ("best", "seed"):
            if name in times:
                row[f"{name}_vs_compile_no_tf32"] = times["compile_no_tf32"] / times[name]
    return row


def warm(tasks: list[dict[str, Any]], folder: Path, workers: int) -> None:
    """torch.compile of each reference run once in worker processes, side by side, so that the re-timing's own
    compile finds Inductor's caches filled (as the coverage script warms them)."""
    from evoforge.task import Task

    cov = _load("kernelbench_coverage")
    folder.mkdir(parents=True, exist_ok=True)
    env = cov.device_turn_env(max(1, workers), "cuda")  # their autotuning takes turns (Inductor's caches keep it)

    def one(t: dict[str, Any]) -> None:
        path = Task.load(t["spec"]).path
        out = folder / f"{t['spec'].replace('/', '_')}.warm.json"
        cov._worker(["--warm-one", path, str(out), json.dumps(t.get("set") or {})], out, 300, "torch.compile", env)

    with ThreadPoolExecutor(max(1, workers)) as pool:
        list(pool.map(one, tasks))


def run(args: argparse.Namespace) -> None:
    import torch

    sample = SMOKE if args.smoke else json.loads(args.sample.read_text())["tasks"]
    k, n = (int(x) for x in args.part.split("/"))
    mine = sample[k - 1::n]
    if args.only:
        wanted = {x.strip() for x in args.only.split(",") if x.strip()}
        unknown = wanted - {t["spec"] for t in mine}
        if unknown:
            raise SystemExit(f"--only: {', '.join(sorted(unknown))} not in part {args.part} of the sample")
        mine = [t for t in mine if t["spec"] in wanted]
    device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / "run"
    if args.retime:
        run_dir, code, campaign_s = args.retime, 0, 0.0
    else:
        config = write_config(mine, run_dir, args.minutes_per_task * len(mine))
        extra = ["--backend", "interpreter", "--budget-evals", "3"] if args.smoke else []
        code, campaign_s = run_campaign(config, args.out / "campaign.log", extra)
        print(f"campaign over {len(mine)} tasks: exit {code}, {campaign_s:.0f} s", flush=True)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    if device == "cuda":
        t0 = time.perf_counter()
        warm(mine, args.out / "warm", args.workers)
        print(f"torch.compile warmed for {len(mine)} tasks in {time.perf_counter() - t0:.0f} s", flush=True)
    rows_path = args.out / "vs_compile.jsonl"
    for entry in mine:
        row = retime(entry, run_dir, summary, device, args.placements)
        row.update(part=args.part, minutes_per_task=args.minutes_per_task, campaign_s=campaign_s,
                   tasks_in_campaign=len(mine))
        with rows_path.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")
        print(json.dumps({k: row.get(k) for k in ("spec", "evaluations", "best_operator", "best_vs_compile",
                                                  "seed_vs_compile", "campaign_vs_compile", "error")}), flush=True)
    suite = _load("h200_suite")
    meta = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"), "torch": torch.__version__,
            "triton": __import__("triton").__version__,
            "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "none (CPU smoke)",
            "driver": suite._driver() if device == "cuda" else "", "commit": _load("kernelbench_coverage")._commit(),
            "script": "experiments/benchmarks/kernelbench_vs_compile.py", "argv": sys.argv[1:],
            "campaign_exit": code, "campaign_s": campaign_s}
    (args.out / f"meta_{k}of{n}.json").write_text(json.dumps(meta, indent=1))


# ------------------------------------------------------------------------------------------------ summary
def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def figures(rows: list[dict[str, Any]], name: str, n: int) -> str:
    """Correct, geomean over torch.compile, share at or above 1.0x, the worst: for ``name`` (best or seed)."""
    timed = [r[f"{name}_vs_compile"] for r in rows if f"{name}_vs_compile" in r]
    correct = sum(1 for r in rows if r.get(f"{name}_correct"))
    if not timed:
        return f"{name}: correct {correct} of {n}; none timed"
    return (f"{name}: correct {correct} of {n}; geomean {_geo(timed):.3f}x static torch.compile ({len(timed)} timed); "
            f"at or above 1.0x: {sum(v >= 1.0 for v in timed)} of {n} ({100 * sum(v >= 1.0 for v in timed) / n:.0f}%); "
            f"below 0.9x: {sum(v < 0.9 for v in timed)}; worst {min(timed):.3f}x")


def latest_rows(paths: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per task: a task re-run (``--only``) in a later file replaces its earlier row; the replaced specs."""
    by_spec: dict[str, dict[str, Any]] = {}
    replaced = []
    for p in paths:
        for line in p.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                if row["spec"] in by_spec and row["spec"] not in replaced:
                    replaced.append(row["spec"])
                by_spec[row["spec"]] = dict(row, rows_file=p.name)
    return list(by_spec.values()), replaced


def summarize(paths: list[Path], sample: Path | None, out: Path) -> str:
    rows, replaced = latest_rows(paths)
    n = len(rows)
    lines = ["# evoforge against torch.compile on KernelBench tasks without a template", "",
             f"Rows: {n} tasks from {', '.join(p.name for p in paths)}"
             + (f"; re-run, the later row kept: {', '.join(replaced)}." if replaced else ".")]
    if sample is not None and sample.exists():
        sel = json.loads(sample.read_text())
        if sel.get("listed"):  # a family listed whole, not a draw
            lines += ["", f"Tasks: {sel['count']}, listed on {sel['date']}: {sel['population_rule']}; `{sample.name}`."]
        else:
            how = f"drawn with seed {sel['seed']}" if "seed" in sel else f"drawn ({sel.get('draw', 'how: not said')})"
            lines += ["", f"Sample: {sel['count']} tasks {how} on {sel['date']} from a "
                      f"population of {sel['population']} ({sel['population_rule']}); `{sample.name}`."]
    lines += ["", "Exported kernels (each task run as `evoforge run` with default options; re-timed in another "
              "process against eager and torch.compile's default static build):", "",
              f"- {figures(rows, 'best', n)}", f"- {figures(rows, 'seed', n)} (the seed alone, for comparison)"]
    wrong = [r["spec"] for r in rows if r.get("compile_correct") is False]
    if wrong:
        lines.append(f"- torch.compile's own build fails the chain's correctness check (the campaign's baseline job) "
                     f"on {len(wrong)} of {n}: {', '.join(wrong)}; the figures above still hold evoforge to its time")
        exact = [r for r in rows if "compile_no_tf32_ms" in r]
        for r in exact:
            ok = {True: "passes", False: "fails"}.get(r.get("compile_no_tf32_correct"), "unchecked")
            lines.append(f"  - {r['spec']}: torch.compile with cuDNN's TF32 off {r['compile_no_tf32_ms']:.4g} ms "
                         f"({ok} the check) against the default's {r['compile_ms']:.4g} ms; the exported kernel "
                         f"{r.get('best_vs_compile_no_tf32', float('nan')):.3f}x of it")
        if exact:
            held = [dict(r, best_vs_compile=r["best_vs_compile_no_tf32"], seed_vs_compile=r.get(
                "seed_vs_compile_no_tf32", r.get("seed_vs_compile"))) if r.get("compile_no_tf32_correct")
                and "best_vs_compile_no_tf32" in r else r for r in rows]
            lines.append(f"- held instead to the fastest torch.compile build that passes the check (cuDNN's TF32 off "
                         f"where the default fails it): {figures(held, 'best', n)}")
    same = [r["seed_ms"] / r["best_ms"] for r in rows if r.get("best_operator") == "inductor-seed"
            and r.get("seed_ms") and r.get("best_ms")]
    if same:
        lines.append(f"- the re-timing's own spread: where the exported kernel is the seed (same source, same "
                     f"config; {len(same)} tasks) the two files' times differ by {min(same):.3f}x to {max(same):.3f}x")
    lines += ["",
              "| task | rule | evaluations | best from | eager ms | compile ms | seed ms | best ms | seed vs compile | "
              "best vs compile | campaign's vs compile | compile correct | recommendation |",
              "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]

    def f(r: dict[str, Any], key: str) -> str:
        return f"{r[key]:.4g}" if isinstance(r.get(key), float) else ""

    for r in sorted(rows, key=lambda r: (r["spec"].split("/")[0], int(r["spec"].split("/")[1]))):
        rule = r["rule"] + (f" ({', '.join(r['allow_ops'])})" if r.get("allow_ops") else "")
        best = r.get("best_operator") or r.get("error") or r.get("best_error") or "no correct kernel"
        lines.append(f"| {r['task']} | {rule} | {r.get('evaluations', '')} | {str(best)[:80]} | {f(r, 'eager_ms')} | "
                     f"{f(r, 'compile_ms')} | {f(r, 'seed_ms')} | {f(r, 'best_ms')} | {f(r, 'seed_vs_compile')} | "
                     f"{f(r, 'best_vs_compile')} | {f(r, 'campaign_vs_compile')} | "
                     f"{ {True: 'yes', False: 'no'}.get(r.get('compile_correct'), '')} | {r.get('recommendation') or ''} |")
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "vs_compile.md").write_text(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--select", action="store_true", help="draw the sample (write it to --out)")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--run", action="store_true", help="run a part of the sample and re-time it (GPU)")
    ap.add_argument("--sample", type=Path, help="the committed sample (--select's output)")
    ap.add_argument("--part", default="1/1", help="K/N: every Nth task of the sample from the Kth")
    ap.add_argument("--only", default="", help="SPEC,...: just these tasks of the part (a re-run; --summarize keeps "
                                                   "the last row of a task)")
    ap.add_argument("--minutes-per-task", type=float, default=0.5)
    ap.add_argument("--retime", type=Path, help="with --run: no campaign; re-time this finished run's folder (RUN_DIR, "
                    "holding summary.json, best/ and seeds/) for the part's tasks")
    ap.add_argument("--placements", type=int, default=0,
                    help="re-time under N states of the caching allocator and keep the medians (identical code "
                         "moved by up to 10%% with the state on level-2 convolution tasks)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--smoke", action="store_true", help="two small tasks on the CPU (interpreter)")
    ap.add_argument("--summarize", type=Path, nargs="*", help="write OUT/vs_compile.md from these jsonl files")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.select:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(select(args.seed, args.count), indent=1) + "\n")
        print(f"{args.count} tasks written to {args.out}")
    elif args.summarize is not None:
        print(summarize(args.summarize, args.sample, args.out))
    elif args.run or args.smoke:
        if args.smoke:
            os.environ.setdefault("TRITON_INTERPRET", "1")
        elif args.sample is None:
            ap.error("--run needs --sample")
        run(args)
    else:
        ap.error("one of --select, --run, --smoke, --summarize")


if __name__ == "__main__":
    main()
