"""Issue T's figures split by the held-out file: design half, held-out half, and the landscapes of neither.

    .venv/bin/python experiments/benchmarks/holdout_report.py RUN.json [RUN2.json ...] [--earlier search_bench.json] \
        [--holdout experiments/results/search/landscapes/holdout_2026-12-03.json] --out STEM [--command "..."]

Reads a ``search_bench.py`` run (``--floor`` rows are enough) and writes STEM.md and STEM.json: per landscape the
default's P(within 2%) at 20, 30 and 50 evaluations as a campaign runs it (the knowledge base on where it says
anything of the landscape), the best of Optuna's TPE, CMA-ES and evolution at each budget, random, and the floor
rule's verdict (issue T: the default's P at 20, 30 and 50 at least the best of the three minus ``FLOOR_SLACK``),
each half apart. ``--earlier``: a committed run whose rows stand for the landscapes this run lacks (the older
landscapes, labelled with the commit that measured them, never mixed into a half).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

CHECKPOINTS = ("20", "30", "50")
FLOOR_SLACK = 0.03
FLOOR = {"bayes": "TPE", "bayes:cmaes": "CMA-ES", "evolution": "evolution"}


def _p(row: dict, n: str) -> float:
    return row["at"][n]["p_within_2pct"]


def summarize(rows: list[dict]) -> dict:
    """One landscape's figures from its rows: the default as a campaign runs it, the floor samplers, random."""
    default = (next((r for r in rows if r["strategy"] == "default" and r["batch"] == 1 and r.get("kb")), None)
               or next((r for r in rows if r["strategy"] == "default" and r["batch"] == 1 and not r.get("kb")), None))
    floor = {FLOOR[r["strategy"]]: r for r in rows if r["strategy"] in FLOOR and r["batch"] == 1 and not r.get("kb")}
    rnd = next((r for r in rows if r["strategy"] == "random" and not r.get("kb")), None)
    if default is None or len(floor) < len(FLOOR):
        return {}
    out: dict = {"repeats": default["repeats"], "kb": bool(default.get("kb")), "configs": default["configs"],
                 "commit": default.get("commit"), "default": {}, "best_floor": {}, "best_floor_by": {},
                 "random": {}, "floor_holds": {}, "samplers": {}}
    for n in CHECKPOINTS:
        best_name = max(floor, key=lambda k: _p(floor[k], n))
        d, b = _p(default, n), _p(floor[best_name], n)
        out["default"][n], out["best_floor"][n], out["best_floor_by"][n] = d, b, best_name
        out["random"][n] = _p(rnd, n) if rnd else None
        out["floor_holds"][n] = d >= b - FLOOR_SLACK - 1e-9
        out["samplers"][n] = {k: _p(r, n) for k, r in floor.items()}
    out["floor"] = all(out["floor_holds"].values())
    r30 = out["random"]["30"]
    out["p30_bar"] = out["default"]["30"] >= 0.8 or (r30 is not None and r30 > 0.9)
    return out


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.25 / n) / n)


def render(report: dict) -> str:
    meta = report["meta"]
    lines = [f"# Issue T: the default against Optuna's samplers, design and held-out halves ({meta['holdout_date']})",
             "",
             f"Split: `{meta['holdout']}` (drawn before its landscapes were recorded; the held-out half is "
             "never used to design or tune a search). CPU replay of timings recorded on a GPU (each landscape file "
             "names it) "
             "(`experiments/benchmarks/search_bench.py`), no GPU ran for this table.", "",
             "P@n: share of seeds whose best correct config after n evaluations is within 2% of the exhaustive best "
             "(one 50-evaluation search per seed, read at 20, 30, 50). **default**: the campaign's default as a "
             "campaign runs it (the knowledge base on where it says anything of the landscape: its hints, and "
             "refusals of configs its hard rules forbid; `kb` below). **best sampler**: the best at that budget of "
             "Optuna TPE (`bayes`), Optuna CMA-ES (`bayes:cmaes`) and `evolution`, each without the knowledge base, "
             "named under it. **floor**: issue T's rule, the default's P at 20, 30 and 50 each at least the best "
             f"sampler's minus {FLOOR_SLACK}; the cell that breaks it is marked with `!`. **P@30 bar**: P@30 >= 0.8, "
             "or random above 0.9 at 30.", "",
             f"Run: {meta['run']}", "", f"Command: `{meta['command']}`", ""]
    if meta.get("note"):
        lines += [meta["note"], ""]
    for half, title in (("design", "Design half"), ("held_out", "Held-out half"), ("earlier", "Landscapes of neither half")):
        names = report["halves"].get(half) or []
        if not names:
            continue
        lines += [f"## {title}", ""]
        if half == "earlier":
            lines += [f"Rows kept from `{meta['earlier']}` (not re-run here; the commit that measured each is named).",
                      ""]
        lines += ["| landscape | repeats | default P@20 / 30 / 50 | best sampler P@20 / 30 / 50 | random P@20 / 30 / 50 "
                  "| floor | P@30 bar |", "| --- | --- | --- | --- | --- | --- | --- |"]
        holds = bar = 0
        for name in names:
            s = report["landscapes"][name]
            dflt = " / ".join(f"{s['default'][n]:.2f}" + ("" if s["floor_holds"][n] else "!") for n in CHECKPOINTS)
            best = " / ".join(f"{s['best_floor'][n]:.2f} ({s['best_floor_by'][n]})" for n in CHECKPOINTS)
            rnd = " / ".join("-" if s["random"][n] is None else f"{s['random'][n]:.2f}" for n in CHECKPOINTS)
            kb = ", kb" if s["kb"] else ""
            commit = f", {s['commit']}" if half == "earlier" and s.get("commit") else ""
            lines.append(f"| {name} | {s['repeats']}{kb}{commit} | {dflt} | {best} | {rnd} | "
                         f"{'holds' if s['floor'] else 'fails'} | {'yes' if s['p30_bar'] else 'no'} |")
            holds += s["floor"]
            bar += s["p30_bar"]
        mean = {n: sum(report["landscapes"][k]["default"][n] for k in names) / len(names) for n in CHECKPOINTS}
        mbest = {n: sum(report["landscapes"][k]["best_floor"][n] for k in names) / len(names) for n in CHECKPOINTS}
        lines += ["", f"Floor holds on {holds} of {len(names)}; P@30 bar met on {bar} of {len(names)}. Mean default "
                  f"P@20 / 30 / 50: {' / '.join(f'{mean[n]:.3f}' for n in CHECKPOINTS)}; mean best sampler: "
                  f"{' / '.join(f'{mbest[n]:.3f}' for n in CHECKPOINTS)}.", ""]
    counts = sorted({s["repeats"] for s in report["landscapes"].values()})
    lines += ["Precision: " + "; ".join(f"a P near 0.5 from {n} seeds has a standard error of {_se(0.5, n):.3f} "
                                        f"(near 0.9: {_se(0.9, n):.3f})" for n in counts)
              + ". A floor verdict within a standard error of the line is a coin toss.", ""]
    return "\n".join(lines)


def side_by_side(runs: list[dict]) -> list[dict]:
    """Runs of the same seeds whose rows are of different landscapes (the design half, then the held-out half once
    the design was committed) as one run of those seeds; each row keeps the commit that measured it."""
    by_span: dict[tuple[int, int], list[dict]] = {}
    for run in runs:
        by_span.setdefault((run["meta"].get("seed", 0), run["meta"]["repeats"]), []).append(run)
    out = []
    for group in by_span.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        names = [{r["landscape"] for r in run["results"]} for run in group]
        if sum(len(n) for n in names) != len(set().union(*names)):
            raise SystemExit("runs of overlapping seeds measure the same landscape: give each landscape's rows once "
                             "per seed (search_bench.py --seed)")
        results = [{"commit": run["meta"].get("commit"), **r} for run in group for r in run["results"]]
        commits = "+".join(dict.fromkeys(str(run["meta"].get("commit")) for run in group))
        out.append({"meta": {**group[0]["meta"], "commit": commits,
                             "date": " and ".join(str(run["meta"].get("date")) for run in group)}, "results": results})
    return out


def pool(runs: list[dict]) -> dict:
    """Runs of disjoint seeds as one: each row's P is the share over every seed of the runs that measured it (a
    run of seeds 0..99 and one of 100..199 make the run of 200 repeats, seed for seed). Runs of the same seeds
    over different landscapes are put side by side first (``side_by_side``)."""
    runs = side_by_side(runs)
    if len(runs) == 1:
        return runs[0]
    spans = sorted((r["meta"].get("seed", 0), r["meta"].get("seed", 0) + r["meta"]["repeats"]) for r in runs)
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)):
        raise SystemExit(f"runs of overlapping seeds {spans}: pool only runs of disjoint seeds (search_bench.py --seed)")
    rows: dict[tuple, dict] = {}
    for run in runs:
        for r in run["results"]:
            key = (r["landscape"], r["strategy"], r["batch"], bool(r.get("kb")))
            r = {"commit": run["meta"].get("commit"), **r}
            if key not in rows:
                rows[key] = {**r, "at": {n: dict(v) for n, v in r["at"].items()}}
                continue
            have, n_have = rows[key], rows[key]["repeats"]
            for n in CHECKPOINTS:
                have["at"][n] = {"p_within_2pct": (have["at"][n]["p_within_2pct"] * n_have
                                                   + r["at"][n]["p_within_2pct"] * r["repeats"]) / (n_have + r["repeats"])}
            have["repeats"] = n_have + r["repeats"]
            if have.get("commit") != r.get("commit"):
                have["commit"] = f"{have.get('commit')}+{r.get('commit')}"
    meta = {**runs[0]["meta"], "repeats": sum(r["meta"]["repeats"] for r in runs), "seed": spans[0][0],
            "pooled": [f"seeds {a}..{b - 1}: {run['meta'].get('date')}" for (a, b), run in zip(
                spans, sorted(runs, key=lambda r: r["meta"].get("seed", 0)), strict=True)]}
    return {"meta": meta, "results": list(rows.values())}


def build(run: dict, holdout: dict, earlier: dict | None) -> dict:
    by: dict[str, list[dict]] = {}
    for r in run["results"]:
        by.setdefault(r["landscape"].removesuffix(".json"), []).append({"commit": run["meta"].get("commit"), **r})
    landscapes = {k: s for k, rows in by.items() if (s := summarize(rows))}
    halves = {"design": [k for k in holdout["design"] if k in landscapes],
              "held_out": [k for k in holdout["held_out"] if k in landscapes], "earlier": []}
    if earlier is not None:
        old: dict[str, list[dict]] = {}
        for r in earlier["results"]:
            name = r["landscape"].removesuffix(".json")
            if name not in landscapes and name not in holdout["design"] + holdout["held_out"]:
                old.setdefault(name, []).append({"commit": earlier["meta"].get("commit"), **r})
        for k, rows in old.items():
            if s := summarize(rows):
                landscapes[k] = s
                halves["earlier"].append(k)
    return {"landscapes": landscapes, "halves": halves}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, nargs="+", help="search_bench.json of one run, or of runs of disjoint seeds")
    ap.add_argument("--earlier", type=Path)
    ap.add_argument("--holdout", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "search"
                    / "landscapes" / "holdout_2026-12-03.json")
    ap.add_argument("--out", type=Path, required=True, help="STEM: writes STEM.md and STEM.json")
    ap.add_argument("--command", default="", help="the command that produced RUN, quoted in the report")
    ap.add_argument("--note", default="", help="a paragraph for the report (what was run where, what was not)")
    args = ap.parse_args()
    run = pool([json.loads(p.read_text()) for p in args.run])
    holdout = json.loads(args.holdout.read_text())
    earlier = json.loads(args.earlier.read_text()) if args.earlier else None
    report = build(run, holdout, earlier)
    report["meta"] = {"holdout": str(args.holdout.name), "holdout_date": holdout["date"], "command": args.command,
                      "note": args.note, "earlier": str(args.earlier) if args.earlier else None,
                      "run": ", ".join(f"{k} {v}" for k, v in run["meta"].items()
                                       if k in ("date", "commit", "repeats", "pooled", "machine", "python", "optuna", "cmaes"))}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(render(report))
    print(render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
