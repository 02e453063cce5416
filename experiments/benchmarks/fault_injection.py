"""What faulty candidates cost a campaign: a sweep with crashes and hangs mixed in, against a clean sweep.

A campaign-like sweep of ReLU candidates (parameter and structure variants of tests/fixtures/relu/correct.py)
through the real EvalPool (Ray actors, each with its sandboxed evaluation process) on the Triton interpreter.
The faulty sweep mixes fault kernels (segfault, abort, os._exit, a hang, a garbled result pipe) in at a fixed
fraction; the clean sweep evaluates the healthy candidates alone. Reported: that every healthy candidate was
evaluated ``ok`` in both, what each fault ended as and cost, and the throughput of healthy evaluations per
minute, faulty vs clean (the loss is what crashes and hangs cost: a restarted process, a timeout).

Run: ``python experiments/benchmarks/fault_injection.py [--candidates 40] [--fault-fraction 0.25]
[--timeout 5] [--workers 2] [--out experiments/results/faults/fault_injection.txt]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
FAULT_KINDS = ["segfault", "hang", "abort", "exit", "garble_protocol"]
MEMORY_LIMIT = 4 * 1024**3


def fault_source(name: str) -> str:
    path = FIXTURES / "faults" / f"{name}.py"
    return (path if path.exists() else FIXTURES / "relu" / f"{name}.py").read_text()


def candidates(n: int, fault_fraction: float, seed: int) -> list[tuple[str, Any]]:
    """(kind, candidate) pairs in a fixed shuffled order: "healthy" or the fault kernel's name."""
    from evoforge.core import Candidate

    base = (FIXTURES / "relu" / "correct.py").read_text()
    n_faulty = round(n * fault_fraction)
    combos = [(b, w) for b in (256, 512, 1024, 2048) for w in (2, 4, 8)]
    healthy = [("healthy", Candidate.from_source(base + f"# variant {i}\n", operator="params",
                                                 params={"BLOCK": combos[i % len(combos)][0],
                                                         "num_warps": combos[i % len(combos)][1]}))
               for i in range(n - n_faulty)]
    faulty = [(kind, Candidate.from_source(fault_source(kind) + f"# variant {i}\n", operator="llm"))
              for i, kind in enumerate(FAULT_KINDS[i % len(FAULT_KINDS)] for i in range(n_faulty))]
    items = healthy + faulty
    random.Random(seed).shuffle(items)
    return items


def sweep(items: list[tuple[str, Any]], task: Any, *, workers: int, timeout_s: float, trials: int,
          timing_budget_ms: float) -> dict[str, Any]:
    """Evaluate every item through a fresh, warmed-up EvalPool, steady-state: a free actor gets the next one."""
    from evoforge.backends.registry import get_backend
    from evoforge.judge.chain import ChainOptions
    from evoforge.search.pool import EvalPool

    backend = get_backend("interpreter")
    kwargs = {"backend": "interpreter", "arch": backend.arch,
              "options": ChainOptions(trials=trials, timing_budget_ms=timing_budget_ms).to_dict(),
              "timeout_s": timeout_s, "knowledge": False, "memory_limit_bytes": MEMORY_LIMIT}
    pool = EvalPool(size=workers, evaluator_kwargs=kwargs, timeout_s=timeout_s, grace_s=120)
    try:
        warm = items[0][1].__class__.from_source((FIXTURES / "relu" / "correct.py").read_text())
        for i in range(workers):  # every actor's evaluation process started before the clock starts
            pool.submit(f"warm-{i}", task, warm)
        _drain(pool, workers)
        queue = list(enumerate(items))
        results: dict[int, Any] = {}
        started = time.perf_counter()
        while queue or pool.in_flight():
            while queue and pool.free():
                index, (_kind, cand) = queue.pop(0)
                pool.submit(index, task, cand)
            for index, _c, result, _w in pool.poll(timeout_s=0.2):
                results[index] = result
        wall_s = time.perf_counter() - started
        restarts = sum(s.restarts for s in pool.slots)
    finally:
        pool.shutdown()
    return {"results": results, "wall_s": wall_s, "actor_restarts": restarts}


def _drain(pool: Any, n: int) -> None:
    got = 0
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        for _k, _c, result, _w in pool.poll(timeout_s=0.5):
            if not result.ok:
                raise SystemExit(f"warm-up evaluation failed: {result.status}: {result.message[:500]}")
            got += 1


def summarize(name: str, items: list[tuple[str, Any]], run: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    results = run["results"]
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    cost_s: dict[str, list[float]] = defaultdict(list)
    for index, (kind, _cand) in enumerate(items):
        result = results.get(index)
        by_kind[kind][str(result.status) if result else "missing"] += 1
        if result is not None and result.eval_s is not None:
            cost_s[kind].append(result.eval_s)
    healthy = sum(1 for k, _ in items if k == "healthy")
    healthy_ok = by_kind["healthy"]["ok"]
    per_min = healthy_ok / (run["wall_s"] / 60)
    lines = [f"## {name}: {len(items)} candidates ({healthy} healthy), wall {run['wall_s']:.1f} s, "
             f"actor restarts {run['actor_restarts']}",
             f"healthy evaluated ok: {healthy_ok}/{healthy}; healthy evaluations per minute: {per_min:.1f}",
             f"{'kind':<18}{'n':>4}  {'median s':>9}  statuses"]
    for kind in ["healthy", *FAULT_KINDS]:
        if kind in by_kind:
            n = sum(by_kind[kind].values())
            median = statistics.median(cost_s[kind]) if cost_s[kind] else float("nan")
            statuses = ", ".join(f"{s} {c}" for s, c in sorted(by_kind[kind].items()))
            lines.append(f"{kind:<18}{n:>4}  {median:>9.2f}  {statuses}")
    return lines, {"healthy": healthy, "healthy_ok": healthy_ok, "per_min": per_min, "by_kind": by_kind}


def machine() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.machine()} {os.cpu_count()} CPUs ({model or platform.processor()}), {gpu}, {platform.system()} " \
           f"{platform.release()}"


def versions() -> str:
    from importlib.metadata import version

    return ", ".join([f"python {platform.python_version()}"] +
                     [f"{p} {version(p)}" for p in ("torch", "triton", "ray", "optuna")])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=40)
    parser.add_argument("--fault-fraction", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds before a hang is killed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=3, help="correctness trials (a campaign's default)")
    parser.add_argument("--timing-budget-ms", type=float, default=1000.0, help="timing budget (a campaign's default)")
    parser.add_argument("--out", default=str(REPO / "experiments" / "results" / "faults" / "fault_injection.txt"))
    args = parser.parse_args(argv)

    from evoforge.search.pool import init_ray

    from evoforge.task import Task

    task = Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000})
    items = candidates(args.candidates, args.fault_fraction, args.seed)
    healthy_items = [item for item in items if item[0] == "healthy"]
    init_ray(num_cpus=args.workers)
    options = {"workers": args.workers, "timeout_s": args.timeout, "trials": args.trials,
               "timing_budget_ms": args.timing_budget_ms}
    faulty_run = sweep(items, task, **options)
    clean_run = sweep(healthy_items, task, **options)

    faulty_lines, faulty = summarize("faulty sweep", items, faulty_run)
    clean_lines, clean = summarize("clean sweep (the healthy candidates alone)", healthy_items, clean_run)
    loss = 1 - faulty["per_min"] / clean["per_min"]
    n_faults = len(items) - len(healthy_items)
    per_fault_s = (faulty_run["wall_s"] - clean_run["wall_s"]) * args.workers / max(1, n_faults)
    every_healthy = faulty["healthy_ok"] == faulty["healthy"] and clean["healthy_ok"] == clean["healthy"]
    no_fault_passed = all(faulty["by_kind"][k]["ok"] == 0 for k in FAULT_KINDS if k in faulty["by_kind"])
    verdict = "PASS" if every_healthy and no_fault_passed else "FAIL"
    lines = [
        "# Fault injection (experiments/benchmarks/fault_injection.py)",
        f"date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"machine: {machine()}",
        f"versions: {versions()}",
        f"sweep: {args.candidates} candidates, {args.fault_fraction:.0%} faulty ({', '.join(FAULT_KINDS)} in turn), "
        f"{args.workers} EvalPool actors on the Triton interpreter, hang timeout {args.timeout:g} s, "
        f"task L1/19 ReLU (batch_size=4, dim=1000), {args.trials} correctness trials, timing budget "
        f"{args.timing_budget_ms:g} ms (a campaign's defaults)",
        "median s: the evaluation's own time (eval_s); a crash also costs the next candidate of that actor "
        "a fresh evaluation process (imports), which is in the wall time, not in eval_s",
        "",
        *faulty_lines, "",
        *clean_lines, "",
        f"throughput of healthy evaluations: {faulty['per_min']:.1f}/min with faults vs {clean['per_min']:.1f}/min "
        f"clean -> loss {loss:.0%}",
        f"cost of one fault: {per_fault_s:.1f} actor-seconds (extra wall time x actors / faults: the timeout for "
        "a hang, a restarted evaluation process for a crash)",
        f"every healthy candidate evaluated ok in both sweeps: {'yes' if every_healthy else 'NO'}; "
        f"no fault kernel passed: {'yes' if no_fault_passed else 'NO'} -> {verdict}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
