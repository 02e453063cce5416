"""The H200 suite: one campaign per task (templates as seeds, Optuna + rule operators, no LLM), then the
best kernel re-timed against eager PyTorch and torch.compile in one process with do_bench (median, L2 flushed).

Writes/updates experiments/results/h200/summary.csv (one row per task; re-running a task replaces its row)
and experiments/results/h200/README.md (the table, geometric means, and where each target stands).
Split the suite across device calls with --tasks.

  python experiments/benchmarks/h200_suite.py --tasks L1/23 L1/40 --budget 24 --minutes 1.5
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import torch

SUITE = ["L1/23", "L1/40", "L1/36", "L1/33", "L1/88", "L1/95", "L1/89", "L1/9", "L1/1",
         "L2/12", "L2/14", "L2/76", "experiments/tasks/matmul_bf16_4096.py"]


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().split("\n")[0]  # one line per GPU
    except Exception:
        return ""


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke test of this script, not a benchmark
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _bench(fn) -> float:
    if DEVICE == "cpu":
        import statistics

        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median"))


def balanced_bench(fns: dict) -> dict[str, float]:
    """Each function timed twice, in order and then in reverse (A B C C B A), and the two medians averaged.

    At the H200's power cap a tensor-core GEMM's clock depends on what ran before it: timed one after another,
    the last kernel inherits the heat of the others (bf16 cuBLAS measured 0.178 ms first and 0.191 ms after
    other GEMMs). Two seconds of all the functions in turn bring the board to its steady state; the mirrored
    order then gives every function the same history on average (experiments/results/h200/gemm_clocks.md).
    """
    from evoforge.backends.base import mirrored_times, warm_in_turn

    if DEVICE == "cuda":
        warm_in_turn(fns, seconds=2.0, sync=torch.cuda.synchronize)
    return mirrored_times(fns, _bench)


def _inputs(tm):
    """The task's inputs, drawn on the device where its get_inputs allows (a 6 GiB level-1 input took seconds to
    draw on the host, twice a task: the timing's own cost, not the kernels'), else on the host and moved."""
    torch.manual_seed(1)
    try:
        with torch.device(DEVICE):
            made = tm.get_inputs()
    except Exception:  # noqa: BLE001  (a get_inputs that needs the host: numpy, a CPU-only op)
        torch.manual_seed(1)
        made = tm.get_inputs()
    return [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in made]


def time_reference(task) -> dict:
    """The reference, eager and compiled (timed later, beside the best kernel), and the compile's seconds."""
    from evoforge.task import load_task_module

    tm = load_task_module(task)
    torch.manual_seed(0)
    model = tm.Model(*tm.get_init_inputs()).to(DEVICE)
    inputs = _inputs(tm)
    with torch.no_grad():
        model(*inputs)
        t0 = time.perf_counter()
        compiled = torch.compile(model) if DEVICE == "cuda" else model
        compiled(*inputs)
        compile_s = time.perf_counter() - t0
    return {"eager": lambda: model(*inputs), "compile": lambda: compiled(*inputs), "compile_s": compile_s}


def time_best(task, source: str, params: dict):
    """The best kernel as a callable on the task's inputs (timed by balanced_bench with the references)."""
    import tempfile

    from evoforge.task import exec_module_file, load_task_module

    path = Path(tempfile.mkdtemp()) / "best.py"
    path.write_text(source)
    module = exec_module_file(str(path), f"best_{abs(hash(source))}")
    module.PARAMS.update(params)
    tm = load_task_module(task)
    init = tm.get_init_inputs()
    torch.manual_seed(0)
    ref = tm.Model(*init).to(DEVICE)
    torch.manual_seed(0)
    new = module.ModelNew(*init)
    try:
        new.load_state_dict(ref.state_dict())
    except Exception:
        pass
    new = new.to(DEVICE)
    inputs = _inputs(tm)
    return lambda: new(*inputs)


def run_task(spec: str, *, budget: int, minutes: float, out_dir: Path, seed: int,
             overrides: dict | None = None) -> dict:
    from evoforge.knowledge import find_template_for

    from evoforge.campaign import Campaign
    from evoforge.config import CampaignConfig, TaskConfig
    from evoforge.export import task_slug
    from evoforge.task import Task

    task = Task.load(spec, overrides=overrides)
    template = find_template_for(task)
    row: dict = {"task": task.name, "template": template.name if template else ""}
    ref = time_reference(task)
    row.update(torch_compile_s=ref["compile_s"])
    passes = _floor_passes(task)
    memory_ms = memory_floor_ms(task, passes)
    row.update(floor_ms=memory_ms, memory_floor_ms=memory_ms, floor_passes=passes)
    if template is None:
        with torch.no_grad():
            times = balanced_bench({"eager": ref["eager"], "compile": ref["compile"]})
        row.update(eager_ms=times["eager"], compile_ms=times["compile"], correct=False,
                   note="no template serves this task")
        return row
    run_out = out_dir / "runs" / task_slug(task.name)
    shutil.rmtree(run_out, ignore_errors=True)  # a re-run replaces the task's row and its run
    cfg = CampaignConfig(name=f"h200-{task_slug(task.name)}", out=str(run_out),
                         backend="cuda" if DEVICE == "cuda" else "interpreter", budget_evals=budget, budget_minutes=minutes, seed=seed,
                         operators=["params", "rule"], timeout_s=180,
                         tasks=[TaskConfig(spec=spec, set=dict(overrides or {}), floor_passes=passes)])
    t0 = time.perf_counter()
    campaign = Campaign(cfg, progress=False)
    try:
        campaign.setup()
        summary = asyncio.run(campaign.run())
    finally:
        campaign.close()
    wall_s = time.perf_counter() - t0
    t = summary["tasks"][task.name]
    row.update(evaluations=t["evaluations"], wall_s=wall_s, statuses=json.dumps(t["statuses"]),
               chain_speedup=t["best_speedup"], best_operator=t["best_operator"],
               best_params=json.dumps(t["best_params"]))
    state = campaign.tasks[task.name]
    best = state.best()
    fns = {"eager": ref["eager"], "compile": ref["compile"]}
    if best is not None:
        fns["best"] = time_best(task, best[0].source, best[0].params)
    with torch.no_grad():
        times = balanced_bench(fns)
    row.update(eager_ms=times["eager"], compile_ms=times["compile"], retime="mirrored")
    if best is None:
        row.update(correct=False)
        return row
    cand, result = best
    best_ms = times["best"]
    row["floor_ms"], note = pick_floor(memory_ms, result.floor_ms or 0.0, best_ms)
    if note:
        row["note"] = note
    row.update(correct=True, best_ms=best_ms, speedup_vs_eager=row["eager_ms"] / best_ms,
               speedup_vs_compile=row["compile_ms"] / best_ms, pct_of_floor=100 * row["floor_ms"] / best_ms)
    return row


def _floor_passes(task) -> float:
    from evoforge.knowledge import template_floor_passes

    passes = template_floor_passes(task)
    return 1.0 if passes is None else passes


def memory_floor_ms(task, passes: float) -> float:
    """Bytes of inputs, outputs and weights (a GEMM fusion's weight matrix is read too) x passes over the
    measured copy bandwidth."""
    from evoforge import knowledge

    io, weights = io_bytes(task)
    return (io + weights) * passes / (knowledge.ceilings("nvidia-sm90")["bandwidth_gbs"] * 1e9) * 1e3


def pick_floor(memory_ms: float, flop_ms: float, best_ms: float) -> tuple[float, str]:
    """The floor a kernel is held to, and a note when it is not the obvious one.

    Compute-bound tasks (matmul) are bounded by arithmetic, not bytes. The FLOP floor counts the reference's
    FLOPs, so a kernel faster than it does less arithmetic (an algebraic rewrite, such as a sum moved in
    front of a GEMM): its floor is then the memory floor alone.
    """
    if flop_ms and best_ms >= 0.97 * flop_ms:
        return max(memory_ms, flop_ms), ""
    if flop_ms:
        return memory_ms, (f"fewer FLOPs than the reference (its FLOP floor {flop_ms:.3g} ms): timed against "
                           "the memory floor")
    return memory_ms, ""


def io_bytes(task) -> tuple[int, int]:
    """(bytes of inputs and outputs, bytes of weights and buffers) at the task's shapes, from meta tensors."""
    from evoforge.task import load_task_module

    tm = load_task_module(task)
    with torch.device("meta"):
        model = tm.Model(*tm.get_init_inputs())
        inputs = list(tm.get_inputs())
        out = model(*inputs)
    size = lambda ts: sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))  # noqa: E731
    return size([*inputs, *(out if isinstance(out, tuple) else [out])]), size([*model.parameters(), *model.buffers()])


def refloor(csv: Path, overrides: dict | None = None) -> None:
    """Recompute every row's floor with today's rules (weights counted, the manifest's floor passes), keeping
    its measured times: the floor is a formula over the task (at the shapes the rows ran with), not a
    measurement."""
    from evoforge.task import Task

    df = pd.read_csv(csv)
    for i, r in df.iterrows():
        name = str(r["task"])
        if name.startswith("level"):  # level1/23_Softmax -> L1/23
            level, rest = name.removeprefix("level").split("/", 1)
            spec = f"L{level}/{rest.split('_', 1)[0]}"
        else:
            spec = _task_path(name)
        task = Task.load(spec, overrides=overrides)
        passes = _floor_passes(task)
        memory = memory_floor_ms(task, passes)
        # The row's floor exceeds its memory floor only where the FLOP floor set it.
        flop_floor = r["floor_ms"] if r["floor_ms"] > 1.01 * r["memory_floor_ms"] else 0.0
        correct = r.get("correct") == True  # noqa: E712
        floor, note = pick_floor(memory, flop_floor, r["best_ms"] if correct else math.inf)
        df.loc[i, ["floor_ms", "memory_floor_ms", "floor_passes"]] = [floor, memory, passes]
        if correct:
            df.loc[i, "pct_of_floor"] = 100 * floor / r["best_ms"]
        if note:
            df.loc[i, "note"] = note
    df.to_csv(csv, index=False)


def _task_path(name: str) -> str:
    return str(Path(__file__).resolve().parents[1] / "tasks" / f"{name}.py")


def write_report(csv: Path) -> None:
    df = pd.read_csv(csv)
    ok = df[df["correct"] == True]  # noqa: E712
    geo = lambda s: math.exp(sum(math.log(x) for x in s) / len(s)) if len(s) else float("nan")  # noqa: E731
    lines = ["# H200 suite", "",
             f"Script: `experiments/benchmarks/h200_suite.py`; GPU {df['gpu'].iloc[0]}, driver {df['driver'].iloc[0]}, "
             f"torch {df['torch'].iloc[0]}, Triton {df['triton'].iloc[0]}, dates {', '.join(sorted(set(df['date'])))}.",
             "Times: `triton.testing.do_bench` median (L2 flushed) of eager PyTorch, `torch.compile` (default mode) "
             "and the campaign's best kernel, in one process, KernelBench default shapes. Floor: bytes of inputs, "
             "weights and outputs x passes / 4.27 TB/s (measured copy bandwidth), or the reference's FLOPs / "
             "measured peak where larger (unless the kernel found an algorithm with fewer FLOPs). Rows with "
             "retime=mirrored in summary.csv time eager, compile and best together after the campaign, after 2 s "
             "of all three in turn, in mirrored order (A B C C B A, the two medians averaged: at the power cap a "
             "GEMM's clock depends on what ran before it); older rows timed eager and compile before the campaign and best after it.",
             "", "| task | eager ms | compile ms | best ms | vs eager | vs compile | % of floor (passes) | evals |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for _, r in df.iterrows():
        if r.get("correct") == True:  # noqa: E712
            lines.append(f"| {r['task']} | {r['eager_ms']:.4g} | {r['compile_ms']:.4g} | {r['best_ms']:.4g} | "
                         f"{r['speedup_vs_eager']:.2f}x | {r['speedup_vs_compile']:.2f}x | "
                         f"{r['pct_of_floor']:.0f}% ({r['floor_passes']:g}) | {int(r['evaluations'])} |")
        else:
            eager, comp = r.get("eager_ms", float("nan")), r.get("compile_ms", float("nan"))
            lines.append(f"| {r['task']} | {eager:.4g} | {comp:.4g} | - | - | - | - | "
                         f"{r.get('evaluations', '-')} (no correct kernel: {r.get('note', '')}) |")
    lines += ["", f"Correct: {len(ok)} of {len(df)} tasks. Geometric-mean speedup over torch.compile "
              f"{geo(ok['speedup_vs_compile']):.3f}x, over eager {geo(ok['speedup_vs_eager']):.3f}x "
              "(over the correct tasks)."]
    notes = csv.parent / "notes.md"  # what a reader must know about these rows, kept across re-runs
    if notes.is_file():
        lines += ["", notes.read_text().rstrip()]
    (csv.parent / "README.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="*", default=SUITE)
    parser.add_argument("--budget", type=int, default=24)
    parser.add_argument("--minutes", type=float, default=1.5, help="campaign wall-clock budget per task")
    parser.add_argument("--out", default="experiments/results/h200")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="K=V task constant (smoke tests on a CPU)")
    parser.add_argument("--refloor", action="store_true",
                        help="recompute the floors of the rows in OUT/summary.csv (no GPU) and rewrite the report")
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / "summary.csv"
    from evoforge.task import parse_assignments

    overrides = {k: v for item in args.set for k, v in parse_assignments(item, flag="--set").items()}
    if args.refloor:
        refloor(csv, overrides)
        write_report(csv)
        return
    meta = {"gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu (smoke test)", "driver": _driver(), "torch": torch.__version__,
            "triton": __import__("triton").__version__, "date": datetime.date.today().isoformat()}
    for spec in args.tasks:
        try:
            row = run_task(spec, budget=args.budget, minutes=args.minutes, out_dir=out_dir, seed=args.seed,
                           overrides=overrides)
        except Exception as e:  # one task's failure must not lose the others' rows
            row = {"task": spec, "correct": False, "note": f"{e.__class__.__name__}: {str(e)[:300]}"}
        row.update(meta)
        print(json.dumps(row, default=str), flush=True)
        old = pd.read_csv(csv) if csv.exists() else pd.DataFrame()
        if not old.empty and "task" in old:
            old = old[old["task"] != row["task"]]
        pd.concat([old, pd.DataFrame([row])], ignore_index=True).to_csv(csv, index=False)
    write_report(csv)
    print((out_dir / "README.md").read_text())


if __name__ == "__main__":
    main()
