"""Evaluation throughput of the Ray pool: evaluations per minute and how busy the GPUs are.

A parameter sweep of the bf16 matmul template (experiments/tasks/matmul_bf16_4096.py, 4096^3; its legal space
excludes every configuration that exceeds shared memory on sm90) goes through `EvalPool` exactly as a campaign
sends it: actors with their sandboxed evaluation processes, every candidate through the whole chain (static
checks, compile, three correctness trials, interleaved timing). Modes are GPUSxPER: GPUS devices with PER
actors each; actors sharing a device take turns to measure (backends.base.device_turn), so one compiles while
another runs. The same configurations are swept in every mode, each with a cold Triton cache of its own, so no
mode profits from another's compiles. Before the timed window every actor evaluates one configuration outside
the sweep (process start, CUDA context and imports are a campaign's start-up, not its steady state).

GPU busy: `nvidia-smi`'s utilization.gpu (share of each sample period in which a kernel ran), sampled every
100 ms over the timed window, averaged over the GPUs in use. Compile share: the chain's `compile_s` (load +
first-call JIT) summed over the sweep, over actor-seconds. Timing agreement: per configuration, the candidate's
runtime in each mode against the first mode's (median and worst relative difference): turns must keep the
measurements as clean as one actor per GPU.

  python experiments/benchmarks/throughput.py --modes 1x1 1x2 2x1 2x2 --evals 64 --out experiments/results/h200/throughput.json
  python experiments/benchmarks/throughput.py --backend interpreter --set M=64 --set N=64 --set K=64 --evals 4   # CPU smoke
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from evoforge.judge.chain import ChainOptions
from evoforge.knowledge import find_template_for, legal_configs
from evoforge.search.pool import EvalPool, init_ray

from evoforge.core import Candidate
from evoforge.task import Task, parse_assignments


class UtilizationSampler:
    """`nvidia-smi -lms` in the background; mean utilization.gpu per GPU over the window it ran (``mean``), or over
    any part of it (``busy``: each sample is kept with the host time it arrived)."""

    def __init__(self, period_ms: int = 100) -> None:
        self.samples: dict[int, list[float]] = {}
        self.timed: list[tuple[float, int, float]] = []  # (host time, GPU index, utilization %)
        self.proc: subprocess.Popen | None = None
        self.period_ms = period_ms
        self.thread: threading.Thread | None = None

    def __enter__(self) -> UtilizationSampler:
        try:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu",
                                          "--format=csv,noheader,nounits", f"-lms={self.period_ms}"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return self
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                index, util = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.setdefault(int(index), []).append(util)
            self.timed.append((time.time(), int(index), util))

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.thread is not None:
            self.thread.join(timeout=5)

    def busy(self, start: float, end: float, gpu: int = 0) -> float | None:
        """Mean busy share of nvidia-smi's GPU ``gpu`` over the host-time window [start, end)."""
        values = [u for t, i, u in self.timed if i == gpu and start <= t < end]
        return statistics.fmean(values) / 100 if values else None

    def mean(self, gpus: int) -> float | None:
        """Mean busy share of the first ``gpus`` devices this process sees (nvidia-smi numbers them all: with
        CUDA_VISIBLE_DEVICES=1, the first device is nvidia-smi's index 1)."""
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        order = [int(x) for x in visible.split(",") if x.strip().isdigit()] or sorted(self.samples)
        used = [statistics.fmean(self.samples[i]) / 100 for i in order[:gpus] if self.samples.get(i)]
        return statistics.fmean(used) if used else None


def sweep_candidates(source: str, arch: str, n: int, seed: int) -> list[Candidate]:
    """n + 8 distinct legal configurations of the template (the 8 extra warm the actors up)."""
    base = Candidate.from_source(source)
    configs = legal_configs(base.space, arch, source=source)
    random.Random(seed).shuffle(configs)
    return [Candidate.from_source(source, params=dict(c)) for c in configs[: n + 8]]


def run_sweep(task: Task, candidates: list[Candidate], *, gpus: int, per_device: int, backend: str, arch: str,
              timeout_s: float) -> dict[str, Any]:
    cache = tempfile.mkdtemp(prefix=f"triton-cache-{gpus}x{per_device}-")
    kwargs = {"backend": backend, "arch": arch, "options": ChainOptions(trials=3).to_dict(),
              "timeout_s": timeout_s, "knowledge": False, "child_env": {"TRITON_CACHE_DIR": cache}}
    size = gpus * per_device
    pool = EvalPool(size=size, evaluator_kwargs=kwargs, num_gpus=1.0 / per_device if backend == "cuda" else 0.0,
                    timeout_s=timeout_s)
    try:
        warm, sweep = candidates[-size:], candidates[: len(candidates) - 8]
        for i, cand in enumerate(warm):  # one per actor: start-up is not the steady state
            pool.submit(("warm", i), task, cand)
        while pool.in_flight():
            pool.poll(0.5)
        statuses: dict[str, int] = {}
        runtimes: dict[int, float] = {}
        compile_s = 0.0
        pending = list(enumerate(sweep))
        with UtilizationSampler() as util:
            t0 = time.perf_counter()
            while pending or pool.in_flight():
                while pending and pool.free():
                    i, cand = pending.pop(0)
                    pool.submit(i, task, cand)
                for key, _cand, result, _tag in pool.poll(0.2):
                    statuses[str(result.status)] = statuses.get(str(result.status), 0) + 1
                    compile_s += result.compile_s or 0.0
                    if result.ok:
                        runtimes[key] = result.runtime_ms
            wall = time.perf_counter() - t0
        return {"mode": f"{gpus}x{per_device}", "gpus": gpus, "per_device": per_device, "evaluations": len(sweep),
                "wall_s": wall, "evals_per_min": 60 * len(sweep) / wall, "gpu_busy": util.mean(gpus),
                "compile_share": compile_s / (wall * size), "statuses": statuses, "runtime_ms": runtimes}
    finally:
        pool.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="experiments/tasks/matmul_bf16_4096.py")
    parser.add_argument("--set", action="append", default=[], help="K=V task constant")
    parser.add_argument("--evals", type=int, default=24, help="configurations in the sweep")
    parser.add_argument("--modes", nargs="+", default=["1x1", "1x2", "2x1", "2x2"],
                        help="GPUSxPER: GPUs used and actors per GPU")
    parser.add_argument("--backend", default="cuda", choices=["cuda", "interpreter"])
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    overrides = {k: v for item in args.set for k, v in parse_assignments(item, flag="--set").items()}
    task = Task.load(args.task, overrides=overrides)
    template = find_template_for(task)
    arch = "nvidia-sm90"  # the interpreter checks candidates against the same rules
    candidates = sweep_candidates(template.read_text(), arch, args.evals, args.seed)
    if args.backend == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
    modes = [tuple(int(x) for x in m.split("x")) for m in args.modes]
    init_ray(num_cpus=max(g * p for g, p in modes) + 2)
    runs = []
    for gpus, per_device in modes:
        run = run_sweep(task, candidates, gpus=gpus, per_device=per_device, backend=args.backend, arch=arch,
                        timeout_s=args.timeout)
        base = runs[0]["runtime_ms"] if runs else run["runtime_ms"]
        diffs = sorted(abs(ms / base[k] - 1) for k, ms in run["runtime_ms"].items() if k in base)
        run.update(vs_first_mode=run["evals_per_min"] / (runs[0] if runs else run)["evals_per_min"],
                   timing_diff_median=statistics.median(diffs) if diffs else None,
                   timing_diff_max=diffs[-1] if diffs else None)
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items() if k != "runtime_ms"}), flush=True)
        if args.out:  # a run cut by its time limit keeps the modes it finished
            _save(args.out, task, template, overrides, args, runs)


def _save(out: str, task: Task, template: Path, overrides: dict, args: argparse.Namespace, runs: list) -> None:
    import torch
    import triton

    meta = {"script": "experiments/benchmarks/throughput.py", "task": task.name, "template": template.name,
            "shapes": overrides, "backend": args.backend, "date": datetime.date.today().isoformat(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            "gpu_count": torch.cuda.device_count(), "cpus": os.cpu_count(), "torch": torch.__version__,
            "triton": triton.__version__}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"meta": meta, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
