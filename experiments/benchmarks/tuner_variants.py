"""Score variants of the default tuner (its ``tuner_options``) on landscapes, with and without the knowledge base.

The quick comparison behind the 100-seed figures in search/tuning/tuner.py and experiments/results/search/
README.md (``search_bench.py`` writes the 200-seed table): P(within 2% of the exhaustive best) after 20, 30 and 50
evaluations of one 50-evaluation search per seed, seeds 0..N-1, default strategy, batch 1 (``--batch``).

    .venv/bin/python experiments/benchmarks/tuner_variants.py LANDSCAPE.json[,LANDSCAPE.json...] N '{"ties": 0.0}'
    .venv/bin/python experiments/benchmarks/tuner_variants.py LANDSCAPE.json 200:400 '{"n_start": 8}' --kb-only
    .venv/bin/python experiments/benchmarks/tuner_variants.py LANDSCAPE.json 200 '{}' --kb-only --at 8,12,20 --median
    .venv/bin/python experiments/benchmarks/tuner_variants.py LANDSCAPE.json 200 '{}' --kb-only --at 30 --batch 4
"""

from __future__ import annotations

import argparse
import json
import statistics
from concurrent.futures import ProcessPoolExecutor

from evoforge.backends.replay import Landscape
from evoforge.search.bench import best_ratios, knowledge_hints, legality, run_search
from evoforge.search.strategy_spec import build_strategy


def one(args: tuple[str, bool, int, dict, tuple[int, ...], int]) -> dict[int, float]:
    path, kb, seed, tuner_options, at, batch = args
    landscape = Landscape.load(path)
    options: dict = knowledge_hints(landscape) if kb else {}
    if tuner_options:
        options["tuner_options"] = tuner_options
    strategy = build_strategy("default", seed=seed, initial=[landscape.seed_candidate()], options=options or None)
    history = run_search(landscape, strategy, budget=max(at), batch=batch, seed=seed,
                         refused=legality(landscape) if kb else None)
    return best_ratios(history, landscape.best_ms, list(at))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("landscapes", help="landscape files, comma-separated")
    ap.add_argument("seeds", help="N (seeds 0..N-1) or LO:HI (seeds LO..HI-1, a held-out set)")
    ap.add_argument("tuner_options", nargs="?", default="{}", help="the default's tuner_options, as JSON")
    ap.add_argument("--at", default="20,30,50", help="evaluations to read P(within 2%%) at (the search runs to the "
                    "largest); with --median, the median best ratio too")
    ap.add_argument("--kb-only", action="store_true", help="only with the knowledge base (as a campaign runs)")
    ap.add_argument("--median", action="store_true")
    ap.add_argument("--batch", type=int, default=1, help="proposals in flight, finishing in random order")
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.seeds.split(":")) if ":" in args.seeds else (0, int(args.seeds))
    at = tuple(int(x) for x in args.at.split(","))
    tuner_options = json.loads(args.tuner_options)
    with ProcessPoolExecutor(2) as pool:
        for path in args.landscapes.split(","):
            for kb in (True,) if args.kb_only else (False, True):
                ratios = list(pool.map(one, [(path, kb, s, tuner_options, at, args.batch) for s in range(lo, hi)]))
                p = {b: sum(r[b] <= 1.02 for r in ratios) / len(ratios) for b in at}
                medians = {b: round(statistics.median(r[b] for r in ratios), 3) for b in at} if args.median else ""
                print(path.split("/")[-1], "kb" if kb else "  ", p, medians, flush=True)


if __name__ == "__main__":
    main()
