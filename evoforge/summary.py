"""A task's row of a campaign's ``summary.json``: what it evaluated, its best kernel, where it stands beside
torch.compile's build, and why it stopped early if it did. Written by ``Campaign.finish``; read by the report, the
API's ``CampaignResult``, the ablation tables and the benchmarks."""

from __future__ import annotations

from typing import Any

from evoforge.core import EvalResult, json_safe
from evoforge.task_state import TaskState


def compile_figures(state: TaskState, best: EvalResult | None, seed_result: EvalResult | None, *,
                    setting: str, timed_here: bool) -> dict[str, Any]:
    """The task's figures beside torch.compile's build: its time, its speedup over the reference, the best kernel's
    and the seed's speed over it; where it was not timed, why. ``setting``: ``--compile-baseline``; ``timed_here``:
    whether this campaign times the build at all (``Campaign.times_compile``)."""
    baseline = state.baseline
    if baseline is None:
        why = ("not timed (--compile-baseline off)" if setting == "off" else
               "not timed on the interpreter (its times say nothing of a GPU; --compile-baseline on times it)"
               if not timed_here else "not timed (the campaign ended first)")
    else:
        why = "timed" if state.compile_speedup else f"failed: {baseline.message}"
    return {"compile_ms": baseline.runtime_ms if state.compile_speedup and baseline else None,
            "compile_speedup": state.compile_speedup, "vs_compile": state.vs_compile(best),
            "seed_vs_compile": state.vs_compile(seed_result), "compile_baseline": why,
            # whether torch.compile's own result passes the chain's comparison (cuDNN's TF32 convolutions may not)
            "compile_correct": baseline.details.get("correct") if baseline is not None and baseline.ok else None}


def task_summary(state: TaskState, *, exported: Any, stopped_early: str | None,
                 compile: dict[str, Any]) -> dict[str, Any]:
    """The task's row: ``exported`` is what ``export_best`` wrote, ``compile`` the ``compile_figures``."""
    best = state.best()
    row = {
        "language": state.seed.language,
        "evaluations": state.evaluations, "statuses": dict(state.statuses),
        "first_correct_at": state.first_correct_at,
        "illegal_skipped": state.illegal_skipped,
        "best_speedup": best[1].speedup if best else None,
        "best_runtime_ms": best[1].runtime_ms if best else None,
        "ref_ms": best[1].ref_ms if best else None,
        "best_pct_of_floor": best[1].pct_of_floor if best else None,
        "best_operator": best[0].operator if best else None,
        **compile,
        "best_params": best[0].params if best else None,
        "timing_representative": best[1].timing_representative if best else None,
        "exported": exported,
        "stopped_early": stopped_early,
        "tokens": sum(int(c.meta.get("prompt_tokens", 0)) + int(c.meta.get("completion_tokens", 0))
                      for c, _ in state.history),
        "llm_calls": sum(1 for c, _ in state.history if "prompt_tokens" in c.meta),
        "no_child": sum(1 for c, _ in state.history if c.meta.get("no_child")),
        "compile_s": round(sum(float(r.compile_s or 0.0) for c, r in state.history if "build" in c.meta), 1),
        # evaluations that ran out of device memory beside others and were run again alone (search.pool)
        "reruns_alone": sum(1 for _, r in state.history if r.details.get("rerun_alone")),
    }
    if state.confirmation is not None and state.confirmation.finalists:
        search = state.search_best()
        row["confirmation"] = state.confirmation.summary(best[0].id if best else None,
                                                         search[0].id if search else None)
    report = getattr(state.strategy, "summary", None)
    if callable(report):
        row["strategy"] = json_safe(report())
    return row
