"""What each LLM loop spent per task in an ablation: LLM calls, replies that made no child, evaluations, tokens.

Reads an ``evoforge ablate`` directory (each run's record through Optuna and its ``summary.json``) and prints a
markdown table, one row per variant (means over its tasks and seeds)::

    python experiments/benchmarks/llm_loop_costs.py runs/ablations/llm_loops > experiments/results/llm/llm_loops_cpu.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from evoforge.report import open_run


def costs(root: Path) -> pd.DataFrame:
    rows = []
    for run_dir in sorted((root / "runs").iterdir()):
        if not (run_dir / "summary.json").is_file():
            continue
        variant = run_dir.name.rsplit("-s", 1)[0]
        run = open_run(run_dir)
        for task, df in run.trials.items():
            llm = df[df["prompt_tokens"].notna()] if "prompt_tokens" in df else df.iloc[0:0]
            no_child = df["no_child"].fillna(False).astype(bool) if "no_child" in df else pd.Series(False, df.index)
            rows.append({
                "variant": variant, "task": task, "trials": len(df), "evaluated": int((~no_child).sum()),
                "correct": int((df["status"] == "ok").sum()), "llm_calls": len(llm),
                "no_child": int(no_child.sum()),
                "prompt_tokens": int(pd.to_numeric(llm["prompt_tokens"]).sum()) if len(llm) else 0,
                "completion_tokens": int(pd.to_numeric(llm["completion_tokens"]).sum()) if len(llm) else 0,
            })
    return pd.DataFrame(rows)


def table(df: pd.DataFrame, order: list[str]) -> str:
    per = df.groupby("variant", sort=False).mean(numeric_only=True)
    per = per.loc[[v for v in order if v in per.index] + [v for v in per.index if v not in order]]
    per["tokens"] = per["prompt_tokens"] + per["completion_tokens"]
    per["tokens_per_call"] = per["tokens"] / per["llm_calls"].where(per["llm_calls"] > 0)
    lines = ["| variant | trials | evaluated | correct | LLM calls | no child | prompt tokens | completion tokens "
             "| tokens | tokens per call |", "|" + " --- |" * 10]
    for variant, r in per.iterrows():
        lines.append(f"| {variant} | {r.trials:.1f} | {r.evaluated:.1f} | {r.correct:.1f} | {r.llm_calls:.1f} "
                     f"| {r.no_child:.1f} | {r.prompt_tokens:.0f} | {r.completion_tokens:.0f} | {r.tokens:.0f} "
                     f"| {r.tokens_per_call:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ablation_dir", type=Path)
    args = parser.parse_args(argv)
    if not (args.ablation_dir / "runs").is_dir():
        print(f"{args.ablation_dir}: not an ablation directory (no runs/); give the --out of evoforge ablate",
              file=sys.stderr)
        return 2
    df = costs(args.ablation_dir)
    meta = json.loads((args.ablation_dir / "ablation.json").read_text()) if (
        args.ablation_dir / "ablation.json").is_file() else {}
    print(f"# Per task, means over {df['task'].nunique()} task(s) and the seeds of {meta.get('file', '?')}\n")
    print(table(df, [v["name"] for v in meta.get("variants", [])]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
