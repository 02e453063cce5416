"""Where the campaign driver's time per proposal goes as a task's history grows (issue AA), on a CPU.

Three measurements, each printed as JSON lines:

``--proposals``: the default strategy searching every recorded landscape (``search.bench.run_search``, the knowledge
base on), each proposal timed; the mean ms per proposal in six windows of its history, and over the proposals made at
5-20 and at 60-100 results.

``--same-proposals FILE``: every landscape searched with seeds 0-1, one and four proposals in flight, 120 evaluations;
the configs proposed, written to FILE (run before and after a change to the driver, then compare the two files).

``--source-models DIR``: the knowledge base's model of each ``*.py`` source in DIR built once, timed (a campaign's
legality check builds it for a structure it has not kept).

``--parses EVALS PER_TASK``: one replay campaign (``scale_bench.run_one``, 32 simulated devices), ``ast.parse`` calls
counted: parses per evaluation when EVALS / PER_TASK tasks interleave.

    .venv/bin/python experiments/benchmarks/driver_costs.py --proposals
    .venv/bin/python experiments/benchmarks/driver_costs.py --parses 3000 3
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _landscapes() -> list[Path]:
    import scale_bench

    return scale_bench.landscape_files()


def _search(path: Path, *, seed: int, budget: int, batch: int = 1, timer: list[tuple[int, float]] | None = None):
    from evoforge.backends.replay import Landscape
    from evoforge.search.bench import (
        DEFAULT,
        build_strategy,
        knowledge_hints,
        legality,
        run_search,
        strategy_accepts,
    )

    landscape = Landscape.load(path)
    options = {k: v for k, v in knowledge_hints(landscape).items() if strategy_accepts(DEFAULT, k)}
    strategy = build_strategy(DEFAULT, seed=seed, initial=[landscape.seed_candidate()], options=options)
    if timer is not None:
        ask, tell, told = strategy.ask, strategy.tell, [0]

        def timed_ask(n: int):
            t0 = time.perf_counter()
            out = ask(n)
            timer.append((told[0], time.perf_counter() - t0))
            return out

        def counted_tell(child, result):
            told[0] += 1
            return tell(child, result)

        strategy.ask, strategy.tell = timed_ask, counted_tell  # type: ignore[method-assign]
    return run_search(landscape, strategy, budget=budget, batch=batch, seed=seed, refused=legality(landscape))


def proposals(budget: int) -> None:
    def mean_ms(rows: list[tuple[int, float]]) -> float | None:
        return round(1e3 * sum(t for _, t in rows) / len(rows), 2) if rows else None

    for path in _landscapes():
        timer: list[tuple[int, float]] = []
        history = _search(path, seed=0, budget=budget, timer=timer)
        w = max(1, len(timer) // 6)
        print(json.dumps({"landscape": path.stem, "evaluations": len(history),
                          "windows_ms": [mean_ms(timer[i:i + w]) for i in range(0, len(timer), w)],
                          "at_5_20_ms": mean_ms([r for r in timer if 5 <= r[0] < 20]),
                          "at_60_100_ms": mean_ms([r for r in timer if 60 <= r[0] < 100])}), flush=True)


def same_proposals(out: Path) -> None:
    found = {}
    for path in _landscapes():
        for seed in (0, 1):
            for batch in (1, 4):
                history = _search(path, seed=seed, budget=120, batch=batch)
                found[f"{path.stem}:{seed}:{batch}"] = [sorted(c.params.items()) for c, _ in history]
    out.write_text(json.dumps(found))
    print(json.dumps({"searches": len(found), "file": str(out)}))


def source_models(folder: Path) -> None:
    from evoforge.knowledge.source_model import SourceModel

    for path in sorted(folder.glob("*.py"), key=lambda p: p.stat().st_size):
        source = path.read_text()
        t0 = time.perf_counter()
        SourceModel(source)
        print(json.dumps({"file": path.name, "chars": len(source),
                          "model_ms": round(1e3 * (time.perf_counter() - t0), 1)}), flush=True)


def parses(evals: int, per_task: int) -> None:
    import scale_bench
    from evoforge.search.pool import init_ray

    calls = [0]
    real = ast.parse

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    ast.parse = counted  # type: ignore[assignment]
    init_ray("", num_cpus=2)
    out = scale_bench.run_one(evals=evals, devices=32, per_task=per_task, storage="sqlite", url=None,
                              work=Path(tempfile.mkdtemp()), per_actor=16, delay_s=0.0, profile=None, seed=0)
    print(json.dumps({"evaluations": out["evals"], "tasks": out["tasks"], "parses": calls[0],
                      "parses_per_evaluation": round(calls[0] / max(out["evals"], 1), 2),
                      "driver_cpu_ms_per_eval": out["driver_cpu_ms_per_eval"]}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proposals", action="store_true")
    ap.add_argument("--budget", type=int, default=300, help="evaluations per search for --proposals")
    ap.add_argument("--same-proposals", type=Path, metavar="FILE")
    ap.add_argument("--source-models", type=Path, metavar="DIR")
    ap.add_argument("--parses", type=int, nargs=2, metavar=("EVALS", "PER_TASK"))
    args = ap.parse_args()
    if args.proposals:
        proposals(args.budget)
    if args.same_proposals:
        same_proposals(args.same_proposals)
    if args.source_models:
        source_models(args.source_models)
    if args.parses:
        parses(*args.parses)


if __name__ == "__main__":
    main()
