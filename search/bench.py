"""Score a search strategy on a recorded landscape: how often it finds the exhaustive best within a budget.

Every evaluation is a replay of a timing recorded on a GPU (``backends/replay.py``), so a run of hundreds of
repeated searches takes seconds on a CPU. The figure of merit is the one DESIGN.md uses: the probability that
the best config found within ``budget`` evaluations is within 2% of the exhaustive best, beside random search.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evoforge.backends.replay import Landscape
from evoforge.mutators.names import PARAMS
from evoforge.search.base import Proposal, Strategy
from evoforge.search.strategies import DEFAULT, RANDOM, strategy_accepts
from evoforge.search.strategy_spec import build_strategy, check_strategy

from evoforge.core import Candidate, DeprecatedFlag, EvalResult, EvalStatus, UsageError

WITHIN = 1.02


def child_of(proposal: Proposal) -> Candidate | None:
    """What a campaign would build for a parameter proposal; None for an operator that needs a mutator."""
    if proposal.params is None or not proposal.parents:
        return None
    parent = proposal.parents[0]
    return parent.with_params(proposal.params, operator=proposal.operator,
                              parents=tuple(p.id for p in proposal.parents))


def legality(landscape: Landscape) -> Callable[[Mapping[str, Any]], dict[str, Any] | None]:
    """What the knowledge base's hard rules say of a config of ``landscape``, as a campaign with the knowledge
    base on asks before it evaluates a parameter move (``Campaign._outside_legal_space``): None where it may run,
    else the refusal's details (``knowledge.refusal``: the rules it breaks, whether they are a size boundary).

    The rules read the recorded kernel's source where the file names a template of this checkout
    (``knowledge/templates/...``), with the landscape's fixed params bound in; else only what the names say
    (tiles x stages at the landscape's ``elem_bytes``, or its dtype's size). The Triton version is the recording's.
    """
    from evoforge.knowledge.precision import dtype_bytes

    from evoforge import knowledge

    kb_root = Path(knowledge.__file__).resolve().parent
    kernel = Path(landscape.kernel)
    path = kb_root / kernel.relative_to("knowledge") if kernel.parts[:1] == ("knowledge",) else None
    source = path.read_text() if path is not None and path.is_file() else None
    fixed = dict(landscape.meta.get("fixed_params") or {})
    elem_bytes = landscape.meta.get("elem_bytes")
    if source is None and not isinstance(elem_bytes, int):
        dtype = str(landscape.meta.get("dtype", "")).removeprefix("torch.")
        elem_bytes = dtype_bytes(dtype) if dtype else None
    version = str(landscape.meta["triton"]) if landscape.meta.get("triton") else None
    seen: dict[tuple[str, ...], dict[str, Any] | None] = {}

    def refused(params: Mapping[str, Any]) -> dict[str, Any] | None:
        key = tuple(json.dumps(params.get(k), default=str) for k in landscape.space)
        if key not in seen:
            ok, violations = knowledge.is_legal({**fixed, **params}, landscape.arch, source=source,
                                                elem_bytes=None if source else elem_bytes, triton_version=version)
            seen[key] = None if ok else knowledge.refusal(violations)
        return seen[key]

    return refused


def knowledge_hints(landscape: Landscape) -> dict[str, Any]:
    """What a campaign with the knowledge base on tells the search of ``landscape``'s task before anything runs
    (``Campaign._knowledge_hints``): the values its rules call unsafe for the dtype (``unsafe``) and the parameters
    that grow together (``moves_together``), as the default strategy's options."""
    from evoforge import knowledge

    return knowledge.search_hints(landscape.space, str(landscape.meta.get("dtype", "")), landscape.arch)


def run_search(landscape: Landscape, strategy: Strategy, *, budget: int, batch: int = 1, seed: int = 0,
               refused: Callable[[Mapping[str, Any]], dict[str, Any] | None] | None = None,
               ) -> list[tuple[Candidate, EvalResult]]:
    """Ask and tell until ``budget`` evaluations; with ``batch`` > 1, up to that many proposals are in flight and
    they finish in random order, as in an asynchronous evaluation pool.

    With ``refused`` (``legality(landscape)``), a parameter move into a config the knowledge base forbids is what a
    campaign with the knowledge base on makes of it: told to the strategy as ``invalid`` with the refusal in its
    details, never evaluated, not counted in the budget (at most ten times the budget of them, as in the campaign).

    On a landscape that holds only a sample of its space (a recording cut short), a proposal of a config the file
    lacks is dropped: it costs no evaluation and the strategy is told nothing (the answer is unknown, not a
    failure; told as one, a strategy would learn a resource limit that is not there), so the strategy searches the
    recorded sample and its other proposals are drawn instead. The config counts as proposed: it is not asked again.
    """
    order = random.Random(seed)
    inflight: list[Proposal] = []
    history: list[tuple[Candidate, EvalResult]] = []
    dropped = skipped = 0
    limit = math.prod(len(v) for v in landscape.space.values())  # every config dropped: nothing left to ask
    while len(history) < budget and dropped < limit:
        want = min(batch - len(inflight), budget - len(history) - len(inflight))
        if want > 0:
            inflight.extend(strategy.ask(want))
        if not inflight:
            break  # the strategy has nothing left to propose (the space is exhausted)
        proposal = inflight.pop(order.randrange(len(inflight)) if batch > 1 else 0)
        child = child_of(proposal)
        if child is None:
            parent = proposal.parents[0] if proposal.parents else landscape.seed_candidate()
            child = parent.with_params({}, operator=proposal.operator)
            result = EvalResult.failure(EvalStatus.INVALID, f"replay cannot apply operator {proposal.operator!r}")
        elif (refused is not None and proposal.operator == PARAMS and skipped < 10 * budget
              and (why := refused(child.params)) is not None):
            skipped += 1
            strategy.tell(child, EvalResult.failure(
                EvalStatus.INVALID, f"outside the legal space ({', '.join(why['refused_by'])})", backend="replay",
                arch=landscape.arch, details=why))
            continue
        elif not landscape.holds(child.params):
            dropped += 1
            continue
        else:
            result = landscape.evaluate(child.params)
        strategy.tell(child, result)
        history.append((child, result))
    return history


def best_ratio(history: list[tuple[Candidate, EvalResult]], exhaustive_ms: float) -> float:
    times = [r.runtime_ms for _, r in history if r.ok and r.runtime_ms is not None]
    return min(times) / exhaustive_ms if times else math.inf


def best_ratios(history: list[tuple[Candidate, EvalResult]], exhaustive_ms: float,
                budgets: Sequence[int]) -> dict[int, float]:
    """Best found / exhaustive best after the first ``b`` evaluations, for each ``b``: a strategy is never told its
    budget, so the first 20 evaluations of a 50-evaluation search are a 20-evaluation search."""
    return {b: best_ratio(history[:b], exhaustive_ms) for b in budgets}


def _summary(ratios: list[float]) -> dict[str, float | None]:
    med = statistics.median(ratios)
    return {"p_within_2pct": sum(r <= WITHIN for r in ratios) / len(ratios),
            "median_best_ratio": med if math.isfinite(med) else None}


def search_bench(landscape_path: str | Path, *, budget: int, repeats: int, strategy: str = DEFAULT,
                 seed: int = 0, batch: int = 1, baseline: str | None = RANDOM,
                 progress: Callable[[int], None] | None = None, checkpoints: Sequence[int] = (),
                 kb: bool = False) -> dict[str, Any]:
    """Run ``strategy`` ``repeats`` times (seeds seed, seed+1, ...) and the baseline the same way.

    ``kb``: as a campaign with the knowledge base on: the strategy is told what the knowledge base says before
    anything runs (``knowledge_hints``: the values its rules call unsafe for the landscape's dtype, the parameters
    that grow together), and every strategy's (the baseline's too) parameter moves into configs its hard rules
    forbid are refused unevaluated (``legality``).

    Returns p_within_2pct and median_best_ratio (best found / exhaustive best, >= 1) for both; with
    ``checkpoints`` (budgets up to ``budget``), the same two figures after that many evaluations of each run
    under ``at`` (``random_at`` for the baseline).
    """
    if budget < 1 or repeats < 1 or batch < 1:
        raise UsageError("--budget-evals, --repeats and --batch must be at least 1")
    landscape = Landscape.load(landscape_path)
    best = landscape.best_ms
    check_strategy(strategy)
    out: dict[str, Any] = {"landscape": Path(landscape.path).name, "kernel": landscape.kernel, "gpu": landscape.gpu,
                           "configs": len(landscape.rows), "exhaustive_best_ms": best, "strategy": strategy,
                           "budget": budget, "repeats": repeats, "batch": batch, "seed": seed}
    if any(not 1 <= b <= budget for b in checkpoints):
        raise UsageError(f"checkpoints {list(checkpoints)} must lie between 1 and the budget ({budget})")
    runs = [(strategy, "")] + ([(baseline, "random_")] if baseline else [])
    refused = None
    if kb:
        hints = knowledge_hints(landscape)
        out.update(kb=True, **hints)
        refused = legality(landscape)
        out["illegal_configs"] = sum(refused(landscape.params_of(r)) is not None for r in landscape.rows)
    for spec, prefix in runs:
        # the hints go to the strategy that reads them (the default); every strategy gets the hard rules' refusals
        options = ({k: v for k, v in hints.items() if strategy_accepts(spec.split(":")[0], k)}
                   if kb and not prefix else None)
        ratios: dict[int, list[float]] = {b: [] for b in (budget, *checkpoints)}
        for r in range(repeats):
            strat = build_strategy(spec, seed=seed + r, initial=[landscape.seed_candidate()], options=options)
            history = run_search(landscape, strat, budget=budget, batch=batch, seed=seed + r, refused=refused)
            for b, ratio in best_ratios(history, best, list(ratios)).items():
                ratios[b].append(ratio)
            if progress is not None:
                progress(1)
        out.update({prefix + k: v for k, v in _summary(ratios[budget]).items()})
        if checkpoints:
            out[prefix + "at"] = {str(b): _summary(ratios[b]) for b in checkpoints}
    return out


def _format_table(res: dict[str, Any]) -> str:
    rows = [("strategy", "budget", "repeats", "batch", "p_within_2pct", "median_best_ratio"),
            (res["strategy"], res["budget"], res["repeats"], res["batch"], f"{res['p_within_2pct']:.2f}",
             _fmt(res["median_best_ratio"]))]
    if "random_p_within_2pct" in res:
        rows.append((RANDOM, res["budget"], res["repeats"], res["batch"], f"{res['random_p_within_2pct']:.2f}",
                     _fmt(res["random_median_best_ratio"])))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{res['landscape']}: {res['configs']} configs recorded on {res['gpu']}, exhaustive best "
             f"{res['exhaustive_best_ms']:.4f} ms (CPU replay of recorded timings; knowledge base "
             f"{'on, as a campaign runs' if res.get('kb') else 'off'})"]
    lines += ["  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _fmt(x: float | None) -> str:
    return f"{x:.4f}" if x is not None else "none found"


def _main(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.progress import Progress

    total = args.repeats * 2
    with Progress(transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(escape(f"search-bench {args.strategy}"), total=total)
        res = search_bench(args.landscape, budget=args.budget_evals, repeats=args.repeats, strategy=args.strategy,
                           seed=args.seed, batch=args.batch, progress=lambda k: bar.advance(task, k), kb=args.kb)
    print(json.dumps(res) if args.json else _format_table(res))
    return 0


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``search-bench LANDSCAPE.json --budget-evals N --repeats R [--strategy NAME] [--seed S] [--no-kb]
    [--json]``."""
    p = subparsers.add_parser(
        "search-bench", help="score a search strategy on a recorded landscape (CPU replay)",
        description="Replay a recorded tuning landscape and report how often a strategy gets within 2%% of the "
                    "exhaustive best within a budget, beside random search.")
    p.add_argument("landscape", metavar="LANDSCAPE.json", help="a recorded landscape (space + rows)")
    p.add_argument("--budget-evals", type=int, default=30, metavar="N",
                   help="evaluations per search (default 30), as `evoforge run --budget-evals`")
    p.add_argument("--budget", dest="budget_evals", type=int, action=DeprecatedFlag, new="--budget-evals",
                   help=argparse.SUPPRESS)
    p.add_argument("--repeats", type=int, default=100, help="searches with different seeds (default 100)")
    p.add_argument("--strategy", default=DEFAULT,
                   help="registered strategy name; bayes:gp / bayes:cmaes pick the Optuna sampler (default: default)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first repeat (default 0)")
    p.add_argument("--batch", type=int, default=1, help="proposals in flight, finishing in random order (default 1)")
    p.add_argument("--kb", action=argparse.BooleanOptionalAction, default=True,
                   help="as a campaign runs (the default, the knowledge base on): tell the strategy what the knowledge "
                        "base says of the landscape (values unsafe for its dtype, parameters that grow together) and "
                        "refuse unevaluated every strategy's moves into configs its hard rules forbid; --no-kb: as "
                        "`evoforge run --no-kb`")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.set_defaults(func=_main)
    return p
