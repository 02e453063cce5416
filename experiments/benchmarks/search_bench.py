"""Benchmark of the search strategies on recorded H200 landscapes (CPU replay of recorded timings).

    .venv/bin/python experiments/benchmarks/search_bench.py [--repeats 200] [--budget-evals 30] [LANDSCAPE.json ...]

Writes experiments/results/search/search_bench.{md,json}: for each strategy, landscape and batch size, the
probability of finding a config within 2% of the exhaustive best in ``budget`` evaluations, and the median ratio
best-found / exhaustive-best, over ``repeats`` seeds. Batch 4 means four proposals in flight that finish in
random order (an asynchronous pool).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_LANDSCAPES = [REPO.parent / "shared" / "landscapes" / name
                      for name in ("matmul_bf16_4096.json", "softmax_fp16_32768x1024.json")]
STRATEGIES = [("default", 1), ("default", 4), ("bayes", 1), ("bayes", 4), ("bayes:cmaes", 1), ("evolution", 1),
              ("random", 1)]
LABELS = {"default": "default (evoforge)", "bayes": "bayes (Optuna TPE alone)",
          "bayes:cmaes": "bayes:cmaes (Optuna CMA-ES alone)", "evolution": "evolution",
          "random": "random"}


def _cell(args: tuple[str, str, int, int, int]) -> dict:
    from evoforge.search.bench import search_bench

    path, strategy, batch, budget, repeats = args
    t0 = time.perf_counter()
    res = search_bench(path, budget=budget, repeats=repeats, strategy=strategy, batch=batch, baseline=None)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    return res


def _versions() -> dict[str, str]:
    import numpy
    import optuna

    return {"python": platform.python_version(), "optuna": optuna.__version__, "numpy": numpy.__version__,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs ({platform.processor() or 'cpu'})",
            "platform": platform.platform()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("landscapes", nargs="*", type=Path, default=DEFAULT_LANDSCAPES)
    ap.add_argument("--budget-evals", "--budget", dest="budget", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "search")
    args = ap.parse_args()
    for path in args.landscapes:
        if not path.is_file():
            print(f"{path}: landscape file not found", file=sys.stderr)
            return 2
    cells = [(str(p), s, b, args.budget, args.repeats) for p in args.landscapes for s, b in STRATEGIES]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(_cell, cells))
    meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "budget": args.budget,
            "repeats": args.repeats, **_versions(),
            "note": "CPU replays of timings recorded on one NVIDIA H200 (torch 2.11.0+cu130, Triton 3.6.0); "
                    "nothing was run on a GPU for this table."}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "search_bench.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    lines = ["# Search strategies on recorded landscapes", "",
             f"{meta['note']} Budget {args.budget} evaluations, {args.repeats} repeats (seeds 0..{args.repeats - 1}) "
             "per row. p_within_2pct: share of repeats whose best config is within 2% of the exhaustive best; "
             "median_best_ratio: median of best found / exhaustive best (1.0 is the best). Batch 4: four proposals "
             "in flight, finishing in random order.", "",
             f"Run {meta['date']} on {meta['machine']}, Python {meta['python']}, Optuna {meta['optuna']}, "
             f"numpy {meta['numpy']}; `{Path(sys.argv[0]).as_posix()}`.", "",
             "| strategy | landscape | batch | budget | repeats | p_within_2pct | median_best_ratio |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        med = f"{r['median_best_ratio']:.4f}" if r["median_best_ratio"] is not None else "none found"
        lines.append(f"| {LABELS.get(r['strategy'], r['strategy'])} | {r['landscape']} | {r['batch']} | {r['budget']} "
                     f"| {r['repeats']} | {r['p_within_2pct']:.2f} | {med} |")
    (args.out / "search_bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
