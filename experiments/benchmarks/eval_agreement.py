"""Does `evoforge eval` measure what an independent do_bench measures? And what does the chain cost?

For each seed kernel: the chain's speedup (sandboxed process, interleaved timing, L2 flushed) against an
independent `triton.testing.do_bench` (median; reference, candidate, candidate, reference, each kernel's two
medians averaged) of the same kernel and of the PyTorch reference in this process. Bar: within 3%. Then the chain's overhead per candidate for a small elementwise kernel: seconds from
submit to result with a cold Triton cache (compile included) and a warm one (compile excluded).

Run on a GPU:  python experiments/benchmarks/eval_agreement.py --out experiments/results/h200/eval_agreement.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from evoforge.backends.base import mirrored_times, warm_in_turn
from evoforge.judge.chain import ChainOptions, _clone
from evoforge.judge.evaluator import Evaluator
from evoforge.knowledge import find_template_for

from evoforge.core import Candidate
from evoforge.task import Task, exec_module_file, load_task_module

TASKS = ["L1/19", "L1/88", "L1/23", "L1/40", "L1/1", "experiments/tasks/matmul_bf16_4096.py"]


def independent_speedup(task: Task, candidate: Candidate) -> dict[str, float]:
    import triton.testing

    module = exec_module_file(str(_write(candidate)), f"bench_{candidate.id}")
    module.PARAMS.update(candidate.params)
    tm = load_task_module(task)
    init = tm.get_init_inputs()
    torch.manual_seed(0)
    ref = tm.Model(*init).cuda().eval()
    torch.manual_seed(0)
    new = module.ModelNew(*init).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in tm.get_inputs()]
    a, b = _clone(inputs), _clone(inputs)
    with torch.no_grad():
        # Two seconds of both in turn, then mirrored order (ref, candidate, candidate, ref): at the power cap a
        # GEMM's clock depends on what ran before it (experiments/results/h200/gemm_clocks.md).
        fns = {"ref": lambda: ref(*a), "candidate": lambda: new(*b)}
        warm_in_turn(fns, seconds=2.0, sync=torch.cuda.synchronize)
        times = mirrored_times(fns, lambda f: triton.testing.do_bench(f, warmup=100, rep=500, return_mode="median"))
        ref_ms, new_ms = times["ref"], times["candidate"]
        # The chain's own method on the same objects in this process: where do_bench and the chain disagree,
        # this says whether the method (interleaving) or the sandboxed process makes the difference.
        from evoforge.backends.cuda import CudaBackend

        inter = CudaBackend().time_interleaved(fns)
    return {"ref_ms": ref_ms, "runtime_ms": new_ms, "speedup": ref_ms / new_ms,
            "interleaved_ref_ms": inter["ref"].median_ms, "interleaved_ms": inter["candidate"].median_ms,
            "interleaved_speedup": inter["ref"].median_ms / inter["candidate"].median_ms,
            "clocks_power": _nvidia_smi("clocks.sm,clocks.max.sm,power.draw")}  # GEMMs are clock-bound


def _write(candidate: Candidate) -> Path:
    path = Path(tempfile.mkdtemp()) / f"cand_{candidate.id}.py"
    path.write_text(candidate.source)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="experiments/results/h200/eval_agreement.json")
    parser.add_argument("--tasks", nargs="*", default=TASKS)
    args = parser.parse_args()
    rows = []
    evaluator = Evaluator(backend="cuda", arch="nvidia-sm90", options=ChainOptions(trials=3), timeout_s=300)
    for spec in args.tasks:
        task = Task.load(spec)
        template = find_template_for(task)
        if template is None:
            rows.append({"task": task.name, "error": "no template"})
            continue
        cand = Candidate.from_source(template.read_text(), task=task.name)
        result = evaluator.evaluate(task, cand)
        row = {"task": task.name, "template": template.name, "status": str(result.status),
               "chain_speedup": result.speedup, "chain_ms": result.runtime_ms, "chain_ref_ms": result.ref_ms,
               "pct_of_floor": result.pct_of_floor, "message": result.message[:300]}
        if result.ok:
            ind = independent_speedup(task, cand)
            row.update({"do_bench_ms": ind["runtime_ms"], "do_bench_ref_ms": ind["ref_ms"],
                        "do_bench_speedup": ind["speedup"],
                        "speedup_diff_pct": 100 * (result.speedup / ind["speedup"] - 1),
                        **{k: ind[k] for k in ("interleaved_ms", "interleaved_ref_ms", "interleaved_speedup",
                                               "clocks_power")}})
        rows.append(row)
        print(json.dumps(row), flush=True)
        _save(args.out, rows, {})  # a run cut by its time limit keeps the rows it finished
    evaluator.close()

    # Overhead of the chain per candidate: a small elementwise kernel, worker already running.
    overhead = {}
    relu = Task.load("L1/19", overrides={"batch_size": 16, "dim": 16384})
    source = find_template_for(relu).read_text()
    cache_dir = tempfile.mkdtemp(prefix="triton-cold-")
    ev = Evaluator(backend="cuda", arch="nvidia-sm90", options=ChainOptions(trials=3, timing_budget_ms=100),
                   timeout_s=300, child_env={"TRITON_CACHE_DIR": cache_dir})
    t0 = time.perf_counter()
    ev.sandbox._start()
    overhead["worker_start_s"] = time.perf_counter() - t0
    cold, warm = [], []
    space = Candidate.from_source(source).space
    block_key = next((k for k in space if "BLOCK" in k), None)
    values = space.get(block_key, [None]) if block_key else [None]
    for v in values[:3]:
        cand = Candidate.from_source(source, params={block_key: v} if block_key else {})
        t = time.perf_counter()
        r = ev.evaluate(relu, cand)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        r2 = ev.evaluate(relu, cand)  # same kernel again: Triton's disk cache holds it
        warm.append(time.perf_counter() - t)
        overhead.setdefault("statuses", []).extend([str(r.status), str(r2.status)])
        overhead.setdefault("phases_s", []).append(r2.details.get("phases_s"))
        overhead.setdefault("failures", []).extend(x.message[:300] for x in (r, r2) if not x.ok)
    ev.close()
    shutil.rmtree(cache_dir, ignore_errors=True)
    overhead.update({"submit_to_result_compile_included_s": statistics.median(cold),
                     "submit_to_result_compile_excluded_s": statistics.median(warm),
                     "timing_budget_ms": 100, "trials": 3})
    _save(args.out, rows, overhead)
    print(json.dumps(overhead), flush=True)


def _save(out: str, rows: list[dict], overhead: dict) -> None:
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "triton": __import__("triton").__version__, "driver": _nvidia_smi("driver_version") or os.environ.get("NVIDIA_DRIVER_VERSION", ""),
            "date": datetime.date.today().isoformat(), "script": "experiments/benchmarks/eval_agreement.py"}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"meta": meta, "agreement": rows, "overhead": overhead}, indent=2))


def _nvidia_smi(fields: str) -> str:
    """The first GPU's values of ``nvidia-smi --query-gpu=FIELDS`` (one line per GPU)."""
    try:
        import subprocess

        return subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().split("\n")[0]
    except Exception:
        return ""


if __name__ == "__main__":
    main()
