"""Every shipped template through the verification chain on the GPU at KernelBench default shapes.

Prints one JSON line per (task, template): status, speedup over eager PyTorch, % of the memory floor, and the
message when it failed; writes them to --out. A quick health check of the seeds a campaign starts from.

  python experiments/benchmarks/templates_check.py --out experiments/results/h200/templates.jsonl
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch
import yaml
from evoforge.judge.chain import ChainOptions
from evoforge.judge.evaluator import Evaluator

from evoforge.core import Candidate
from evoforge.task import Task


def pairs() -> list[tuple[str, Path, float]]:
    root = Path(__file__).resolve().parents[2] / "knowledge" / "templates"
    data = yaml.safe_load((root / "index.yaml").read_text()) or {}
    entries = data.get("templates", data)
    items = entries.items() if isinstance(entries, dict) else ((e.get("file"), e) for e in entries)
    out = []
    for name, entry in items:
        passes = entry.get("floor_passes", 1.0)
        for task in entry.get("tasks", []):
            p = passes.get(task, 1.0) if isinstance(passes, dict) else passes
            out.append((task, root / (entry.get("file") or name), float(p)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="experiments/results/h200/templates.jsonl")
    parser.add_argument("--only", nargs="*", default=None, help="task names to check (default: all)")
    args = parser.parse_args()
    ev = Evaluator(backend="cuda", arch="nvidia-sm90", options=ChainOptions(trials=2, timing_budget_ms=300),
                   timeout_s=240)
    lines = []
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "triton": __import__("triton").__version__, "date": datetime.date.today().isoformat()}
    for task_name, path, passes in pairs():
        if args.only and task_name not in args.only:
            continue
        try:
            task = Task.load(task_name if task_name.endswith(".py") else task_name + ".py", floor_passes=passes)
            r = ev.evaluate(task, Candidate.from_source(path.read_text(), task=task.name))
            row = {"task": task.name, "template": path.name, "status": str(r.status), "speedup": r.speedup,
                   "runtime_ms": r.runtime_ms, "ref_ms": r.ref_ms, "pct_of_floor": r.pct_of_floor,
                   "criterion": r.criterion, "max_abs_err": r.max_abs_err, "message": r.message[:600], **meta}
        except Exception as e:
            row = {"task": task_name, "template": path.name, "status": "script_error", "message": str(e)[:600]}
        lines.append(json.dumps(row))
        print(lines[-1], flush=True)
    ev.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
