"""Score variants of the default tuner (its ``tuner_options``) on landscapes, with and without the knowledge base.

The quick comparison behind the 100-seed figures in search/strategies/tuner.py and experiments/results/search/
README.md (``search_bench.py`` writes the 200-seed table): P(within 2% of the exhaustive best) after 20, 30 and 50
evaluations of one 50-evaluation search per seed, seeds 0..N-1, default strategy, batch 1.

    .venv/bin/python experiments/benchmarks/tuner_variants.py LANDSCAPE.json[,LANDSCAPE.json...] N '{"ties": 0.0}'
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ProcessPoolExecutor

from evoforge.backends.replay import Landscape
from evoforge.search.bench import best_ratios, legality, run_search
from evoforge.search.strategy_spec import build_strategy

from evoforge import knowledge


def one(args: tuple[str, bool, int, dict]) -> dict[int, float]:
    path, kb, seed, tuner_options = args
    landscape = Landscape.load(path)
    options: dict = {}
    if kb:
        options["unsafe"] = knowledge.unsafe_values(landscape.space, str(landscape.meta.get("dtype", "")),
                                                    landscape.arch)
    if tuner_options:
        options["tuner_options"] = tuner_options
    strategy = build_strategy("default", seed=seed, initial=[landscape.seed_candidate()], options=options or None)
    history = run_search(landscape, strategy, budget=50, seed=seed, refused=legality(landscape) if kb else None)
    return best_ratios(history, landscape.best_ms, [20, 30, 50])


def main() -> None:
    paths, n = sys.argv[1].split(","), int(sys.argv[2])
    tuner_options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    with ProcessPoolExecutor(2) as pool:
        for path in paths:
            for kb in (False, True):
                ratios = list(pool.map(one, [(path, kb, s, tuner_options) for s in range(n)]))
                p = {b: sum(r[b] <= 1.02 for r in ratios) / n for b in (20, 30, 50)}
                print(path.split("/")[-1], "kb" if kb else "  ", p, flush=True)


if __name__ == "__main__":
    main()
