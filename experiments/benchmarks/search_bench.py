"""Benchmark of the search strategies on tuning landscapes (CPU replay of recorded timings).

    .venv/bin/python experiments/benchmarks/search_bench.py [--repeats 200] [--only default | --new | --only-kb] [LANDSCAPE.json ...]
    .venv/bin/python experiments/benchmarks/search_bench.py --render    # the .md again from the .json, nothing run

Writes experiments/results/search/search_bench.{md,json}: for every registered strategy (and the Optuna samplers
behind ``bayes``: TPE, CMA-ES), every landscape and batch size, the probability of finding a config within 2% of
the exhaustive best after 20, 30 and 50 evaluations (one 50-evaluation search per seed: a strategy is never told
its budget, so its first 20 evaluations are a 20-evaluation search), and the median ratio best-found /
exhaustive-best at 30, over ``repeats`` seeds. Batch 4 means four proposals in flight that finish in random order
(an asynchronous pool).

Landscapes: the two recorded on an H200 in shared/landscapes, every file in experiments/results/search/landscapes
(recorded ones, and derived ones, which say so in a ``derived`` field and are labelled derived in the table).
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
SHARED = [REPO.parent / "shared" / "landscapes" / name
          for name in ("matmul_bf16_4096.json", "softmax_fp16_32768x1024.json")]
COMMITTED = REPO / "experiments" / "results" / "search" / "landscapes"
BUDGET = 50
CHECKPOINTS = (20, 30, 50)
# (strategy, batch, as a campaign with the knowledge base on: its hints and refusals)
STRATEGIES = [("default", 1, False), ("default", 4, False), ("default", 1, True), ("bayes", 1, False),
              ("bayes:cmaes", 1, False), ("evolution", 1, False), ("random", 1, False), ("random", 1, True)]
LABELS = {"default": "default (evoforge)", "bayes": "Optuna TPE (bayes)", "bayes:cmaes": "Optuna CMA-ES (bayes:cmaes)",
          "evolution": "evolution", "random": "random"}


def label(res: dict) -> str:
    return LABELS.get(res["strategy"], res["strategy"]) + (" + knowledge base" if res.get("kb") else "")


def default_landscapes() -> list[Path]:
    return [p for p in SHARED if p.is_file()] + sorted(COMMITTED.glob("*.json"))


def _cell(args: tuple[str, str, int, bool, int, str, int]) -> dict:
    from evoforge.search.bench import search_bench

    path, strategy, batch, kb, repeats, commit, seed = args
    t0 = time.perf_counter()
    res = search_bench(path, budget=BUDGET, repeats=repeats, strategy=strategy, batch=batch, baseline=None,
                       checkpoints=CHECKPOINTS, kb=kb, seed=seed)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    res["commit"] = commit  # the checkout's commit when the run started: later commits do not relabel it
    return res


def _kind(path: Path) -> str:
    data = json.loads(path.read_text())
    if data.get("derived"):
        return "derived"
    recorded = data.get("recorded") or {}
    if recorded.get("complete") is False:  # cut short by --max-seconds: a uniform sample of the space
        return f"recorded ({data.get('gpu', 'unknown GPU')}), incomplete: {recorded.get('stopped', 'a sample')}"
    return f"recorded ({data.get('gpu', 'unknown GPU')})"


def _has_unsafe(path: Path) -> bool:
    """Whether the knowledge base says anything of this landscape's space (else a KB row adds nothing): unsafe
    values for its dtype, parameters that grow together (``search.bench.knowledge_hints``), or configs its hard
    rules refuse (``search.bench.legality``)."""
    from evoforge.backends.replay import Landscape
    from evoforge.search.bench import knowledge_hints, legality

    landscape = Landscape.load(path)
    refused = legality(landscape)
    return (any(knowledge_hints(landscape).values())
            or any(refused(landscape.params_of(r)) is not None for r in landscape.rows))


def _versions() -> dict[str, str]:
    import cmaes
    import numpy
    import optuna

    return {"python": platform.python_version(), "optuna": optuna.__version__, "cmaes": cmaes.__version__,
            "numpy": numpy.__version__, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "platform": platform.platform()}


def floor_row(strategy: str, batch: int, kb: bool, *, says_anything: bool) -> bool:
    """Whether ``--floor`` measures this row: the default as a campaign runs it (with the knowledge base where it
    says anything of the landscape, else plain), the samplers of the floor rule (TPE, CMA-ES, evolution) and
    random, all at batch 1."""
    if batch != 1:
        return False
    if strategy == "default":
        return kb == says_anything
    return strategy == "random" or not kb


def _p(res: dict, budget: int) -> float:
    return res["at"][str(budget)]["p_within_2pct"]


def render(meta: dict, results: list[dict], kinds: dict[str, str]) -> str:
    repeats, first = meta["repeats"], meta.get("seed", 0)
    lines = ["# Search strategies on tuning landscapes", "",
             "CPU replays of tuning landscapes (`backends/replay.py`); no GPU ran for this table. Recorded landscapes "
             "hold timings measured on a GPU; derived ones (`experiments/benchmarks/derive_landscapes.py`) are the "
             "recorded bf16 GEMM landscape with a numerics choice added whose times are stated factors of recorded "
             "ones: stand-ins, not measurements.", "",
             f"P@n: share of {repeats} repeats (seeds {first}..{first + repeats - 1}) whose best correct config after n evaluations "
             "is within 2% of the exhaustive best (the fastest correct config in the file); median@30: median of best "
             "found / exhaustive best after 30. Batch 4: four proposals in flight, finishing in random order. One "
             f"{BUDGET}-evaluation search per seed, read after 20, 30 and 50.", "",
             f"Run {meta['date']} on {meta['machine']}, Python {meta['python']}, Optuna {meta['optuna']}, cmaes "
             f"{meta['cmaes']}, numpy {meta['numpy']}, {_commits_line(meta, results)}; "
             "`experiments/benchmarks/search_bench.py`.", ""]
    by_landscape: dict[str, list[dict]] = {}
    for r in results:
        by_landscape.setdefault(r["landscape"], []).append(r)
    lines += ["## The bar as a campaign runs it: the knowledge base on (the default)", "",
              "A campaign with the knowledge base on (the default; `--no-kb` turns it off) tells the strategy the "
              "values its rules call unsafe for the dtype and the parameters that grow together (a tile dimension and "
              "the warps: one step of the tuner's walk), and refuses unevaluated every parameter move into a config "
              "its hard rules forbid (`Campaign._outside_legal_space`; here `search.bench.legality`): random search "
              "gets the same refusals. Where the knowledge base says nothing of a landscape (no unsafe value, no "
              "grouped parameters, no refused config) the campaign's search is the plain default's, and so are the "
              "figures.", "",
              "| landscape | kind | refused configs | default P@30 | random P@30 | >= 0.8 and >= 2x random |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name, rows in by_landscape.items():
        default = next((r for r in rows if r["strategy"] == "default" and r["batch"] == 1 and r.get("kb")), None)
        rnd = next((r for r in rows if r["strategy"] == "random" and r.get("kb")), None)
        plain = default is None
        if plain:  # the knowledge base says nothing here: the default's own rows
            default = next((r for r in rows if r["strategy"] == "default" and r["batch"] == 1), None)
            rnd = next((r for r in rows if r["strategy"] == "random" and not r.get("kb")), None)
        if default is None or rnd is None:
            continue
        d, q = _p(default, 30), _p(rnd, 30)
        verdict = "yes" if d >= 0.8 and d >= 2 * q else ("no (2x random > 1)" if 2 * q > 1 else "no")
        refused = "none (the knowledge base says nothing here)" if plain else \
            f"{default.get('illegal_configs', 0)} of {default['configs']}"
        lines.append(f"| {name} | {kinds[name]} | {refused} | {d:.2f} | {q:.2f} | {verdict} |")
    lines += ["", "## With the knowledge base off (`--no-kb`, an ablation)", "",
              "| landscape | kind | configs | default P@30 | random P@30 | default >= 0.8 and >= 2x random |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name, rows in by_landscape.items():
        default = next((r for r in rows if r["strategy"] == "default" and r["batch"] == 1 and not r.get("kb")), None)
        rnd = next((r for r in rows if r["strategy"] == "random" and not r.get("kb")), None)
        if default is None or rnd is None:
            continue
        d, q = _p(default, 30), _p(rnd, 30)
        verdict = "yes" if d >= 0.8 and d >= 2 * q else ("no (2x random > 1)" if 2 * q > 1 else "no")
        lines.append(f"| {name} | {kinds[name]} | {default['configs']} | {d:.2f} | {q:.2f} | {verdict} |")
    lines += ["", "## Every strategy", "",
              "| landscape | strategy | batch | P@20 | P@30 | P@50 | median@30 |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, rows in by_landscape.items():
        for r in rows:
            med = r["at"]["30"]["median_best_ratio"]
            med_text = f"{med:.4f}" if med is not None else "none found"
            lines.append(f"| {name} | {label(r)} | {r['batch']} | "
                         + " | ".join(f"{_p(r, b):.2f}" for b in CHECKPOINTS) + f" | {med_text} |")
    return "\n".join(lines) + "\n"


def _commits_line(meta: dict, results: list[dict]) -> str:
    """Which commit measured which rows: one, or (after ``--only``) the rows re-run and the rows kept."""
    by_commit: dict[str, list[str]] = {}
    for r in results:
        name = LABELS.get(r["strategy"], r["strategy"])
        rows = by_commit.setdefault(r.get("commit", meta["commit"]), [])
        if name not in rows:
            rows.append(name)
    if len(by_commit) == 1:
        return f"evoforge commit {next(iter(by_commit))}"
    kept = meta.get("kept_from", {})
    parts = [f"{', '.join(names)} at commit {c}" + (f" (kept from the run of {kept[c]})" if c in kept else "")
             for c, names in by_commit.items()]
    return "evoforge " + "; ".join(parts)


def _kept_rows(out: Path, only: list[str], repeats: int) -> tuple[list[dict], dict]:
    """The rows of the earlier run in ``out`` whose strategy ``--only`` does not re-run, and its meta."""
    path = out / "search_bench.json"
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: --only and --new keep rows of an earlier run, and it cannot be read ({exc}); "
                         "run without --only or --new") from None
    if earlier["meta"]["repeats"] != repeats:
        raise SystemExit(f"{path}: the earlier run has {earlier['meta']['repeats']} repeats, not {repeats}; "
                         f"pass --repeats {earlier['meta']['repeats']} or run without --only or --new")
    rows = [{"commit": earlier["meta"]["commit"], **r} for r in earlier["results"] if r["strategy"] not in only]
    return rows, earlier["meta"]


def _earlier_kinds(out: Path) -> dict[str, str]:
    """The kind (recorded, derived) of each landscape of the earlier run in ``out``, as it labelled them."""
    try:
        return dict(json.loads((out / "search_bench.json").read_text()).get("kinds", {}))
    except (OSError, ValueError):
        return {}


def wanted(cell: tuple[str, str, int, bool], have: set[tuple[str, str, int, bool]], *, only: list[str],
           new: bool) -> bool:
    """Whether a run measures ``cell`` (landscape, strategy, batch, knowledge base), given the cells of the earlier
    run (``have``): everything; with ``only``, those strategies (and every cell of a landscape the earlier run
    lacks); with ``new``, the cells the earlier run lacks only (a new landscape's every row, a strategy missing on
    a landscape)."""
    if new:
        return cell not in have
    return not only or cell[1] in only or cell[0] not in {c[0] for c in have}


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("landscapes", nargs="*", type=Path)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0,
                    help="the first repeat's seed (default 0): seeds SEED..SEED+repeats-1, so runs of disjoint seeds "
                         "pool into one of more repeats (holdout_report.py pools them)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "search")
    ap.add_argument("--only", action="append", default=[], metavar="STRATEGY",
                    help="re-run only this strategy's rows (repeatable) and keep the others from the earlier "
                         "search_bench.json in --out (a landscape it lacks gets every strategy); each row says "
                         "which commit measured it")
    ap.add_argument("--new", action="store_true",
                    help="score only what the earlier search_bench.json in --out lacks (a new landscape's every row, a "
                         "strategy missing on a landscape) and keep all its rows (each says which commit measured it)")
    ap.add_argument("--only-kb", action="store_true",
                    help="re-run only the knowledge-base rows (default + KB, random + KB) on every landscape and keep "
                         "every other row of the earlier search_bench.json in --out")
    ap.add_argument("--floor", action="store_true",
                    help="only the rows the floor rule compares (issue T): the default as a campaign runs it (the "
                         "knowledge base on where it says anything of the landscape), TPE, CMA-ES, evolution and "
                         "random, batch 1; no batch-4 row, no default without the knowledge base beside its KB row")
    ap.add_argument("--render", action="store_true",
                    help="run nothing: write search_bench.md again from the search_bench.json in --out")
    args = ap.parse_args()
    if args.render:
        try:
            data = json.loads((args.out / "search_bench.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"--render: {args.out / 'search_bench.json'} cannot be read ({exc}); run without --render",
                  file=sys.stderr)
            return 2
        (args.out / "search_bench.md").write_text(render(data["meta"], data["results"], data["kinds"]))
        return 0
    if args.only_kb and (args.only or args.new):
        print("--only-kb: give it alone (it re-runs the knowledge-base rows and keeps every other)", file=sys.stderr)
        return 2
    if args.only and args.new:
        print("--only and --new: choose one (--new re-runs nothing the earlier run measured)", file=sys.stderr)
        return 2
    known = {s for s, _, _ in STRATEGIES}
    if any(o not in known for o in args.only):
        print(f"--only {[o for o in args.only if o not in known]}: choose from {sorted(known)}", file=sys.stderr)
        return 2
    landscapes = args.landscapes or default_landscapes()
    for path in landscapes:
        if not path.is_file():
            print(f"{path}: landscape file not found", file=sys.stderr)
            return 2
    kinds = {p.name: _kind(p) for p in landscapes}
    kept, earlier = [], None
    if args.only or args.new or args.only_kb:
        try:
            kept, earlier = _kept_rows(args.out, args.only, args.repeats)
            if args.only_kb:
                kept = [r for r in kept if not r.get("kb")]
        except SystemExit as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.new or args.only_kb:  # every earlier row stays: landscapes can be added one call at a time
            kinds = {**_earlier_kinds(args.out), **kinds}
        else:
            kept = [r for r in kept if r["landscape"] in kinds]
    have = {(r["landscape"], r["strategy"], r["batch"], bool(r.get("kb"))) for r in kept}
    commit = _commit()
    says = {p: _has_unsafe(p) for p in landscapes}
    cells = [(str(p), s, b, kb, args.repeats, commit, args.seed) for p in landscapes for s, b, kb in STRATEGIES
             if (not kb or says[p]) and (kb if args.only_kb else
                                         wanted((p.name, s, b, kb), have, only=args.only, new=args.new))
             and (not args.floor or floor_row(s, b, kb, says_anything=says[p]))]
    args.out.mkdir(parents=True, exist_ok=True)
    partial = args.out / "search_bench.partial.jsonl"  # each row as it ends: a run cut short keeps what it measured
    partial.write_text("")
    fresh = []
    with ProcessPoolExecutor(args.workers) as pool:
        for res in pool.map(_cell, cells):
            fresh.append(res)
            with partial.open("a") as f:
                f.write(json.dumps(res) + "\n")
    names = list(dict.fromkeys([r["landscape"] for r in kept] + [p.name for p in landscapes]))
    rank = {(s, b, kb): n for n, (s, b, kb) in enumerate(STRATEGIES)}
    results = sorted(kept + fresh, key=lambda r: (names.index(r["landscape"]), rank.get(
        (r["strategy"], r["batch"], bool(r.get("kb"))), len(rank))))
    meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "budget": BUDGET,
            "checkpoints": list(CHECKPOINTS), "repeats": args.repeats, "seed": args.seed, "commit": commit,
            **_versions()}
    if args.floor:
        meta["floor"] = True
    if earlier is not None:
        meta["only"] = args.only or (["knowledge-base rows"] if args.only_kb else ["new landscapes"])
        meta["kept_from"] = {**earlier.get("kept_from", {}), earlier["commit"]: earlier["date"]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "search_bench.json").write_text(json.dumps({"meta": meta, "kinds": kinds, "results": results},
                                                           indent=1) + "\n")
    partial.unlink()
    text = render(meta, results, kinds)
    (args.out / "search_bench.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
