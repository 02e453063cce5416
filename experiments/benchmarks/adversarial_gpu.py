"""Reward hacks against `evoforge eval` on a GPU: every fixture of tests/fixtures/adversarial/manifest.yaml, the
GPU-only kinds (side streams, work deferred to the judge's synchronisation, a CUDA-IPC helper, cuBLAS through
ctypes) included, through the real sandboxed evaluator on the CUDA backend. Each must get the manifest's
verdict with a message naming the trick; the honest controls must pass. Also times the chain's overhead.

  python experiments/benchmarks/adversarial_gpu.py --out experiments/results/h200
  python experiments/benchmarks/adversarial_gpu.py --backend interpreter --out /tmp/x   (a smoke run, CPU)
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

import yaml
from evoforge.judge.chain import ChainOptions
from evoforge.judge.evaluator import Evaluator

from evoforge.core import Candidate, EvalStatus
from evoforge.task import Task

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def _fixture(name: str, entry: dict) -> Path:
    folder = FIXTURES / ("adversarial_gpu" if entry.get("gpu") else "adversarial")
    return folder / entry.get("file", f"{name}.py")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--out", default="experiments/results/h200")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    manifest = yaml.safe_load((FIXTURES / "adversarial" / "manifest.yaml").read_text())
    on_gpu = args.backend != "interpreter"
    tasks = {name: Task.load(t["spec"], overrides={**t["set"], **(t.get("gpu", {}) if on_gpu else {})})
             for name, t in manifest["tasks"].items()}
    evaluator = Evaluator(backend=args.backend, options=ChainOptions(trials=3), timeout_s=300, knowledge=False)
    rows = []
    entries = [(n, h, False) for n, h in manifest["hacks"].items()] + [(n, h, True) for n, h in
                                                                         manifest["honest"].items()]
    try:
        for name, entry, honest in entries:
            if ((entry.get("gpu") and not on_gpu) or (entry.get("cpu_only") and on_gpu)
                    or (args.only and name not in args.only)):
                continue
            candidate = Candidate.from_source(_fixture(name, entry).read_text())
            started = time.perf_counter()
            result = evaluator.evaluate(tasks[entry["task"]], candidate)
            expected = EvalStatus.OK if honest else EvalStatus(entry["status"])
            words = "" if honest else entry["words"]
            row = {"fixture": name, "kind": 0 if honest else entry["kind"], "task": entry["task"],
                   "expected": str(expected), "status": str(result.status), "message": result.message,
                   "as_expected": result.status is expected and words in result.message,
                   "speedup": result.speedup, "wall_s": round(time.perf_counter() - started, 2)}
            rows.append(row)
            shown = ("fixture", "status", "as_expected", "wall_s") + (() if row["as_expected"] else ("message",))
            print(json.dumps({k: row[k] for k in shown}), flush=True)
        overhead = _overhead(evaluator, tasks["relu"], FIXTURES / "relu" / "correct.py") if not args.only else {}
    finally:
        evaluator.close()
    import torch
    import triton

    meta = {"date": datetime.date.today().isoformat(), "backend": args.backend, "python": platform.python_version(),
            "torch": torch.__version__, "triton": triton.__version__,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            "tasks": {k: {"spec": t.path.rsplit("/", 1)[-1], "set": t.overrides} for k, t in tasks.items()},
            "overhead": overhead}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "adversarial.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "adversarial.md").write_text(_markdown(meta, rows))
    print(f"{sum(r['as_expected'] for r in rows)} of {len(rows)} as expected; overhead {overhead}")


def _overhead(evaluator: Evaluator, task: Task, path: Path) -> dict[str, float]:
    """Seconds from submit to result for a correct small kernel (compiled before: Triton's disk cache), with
    and without timing: median of five (experiments/benchmarks/eval_agreement.py measures the compile too)."""
    source = path.read_text()
    out = {}
    for timing in (True, False):
        evaluator.options = ChainOptions(trials=3, timing=timing)
        times = []
        for i in range(5):
            started = time.perf_counter()
            assert evaluator.evaluate(task, Candidate.from_source(source + f"\n# {i}\n")).ok
            times.append(time.perf_counter() - started)
        out["with_timing_s" if timing else "without_timing_s"] = round(sorted(times)[2], 3)
    return out


def _markdown(meta: dict, rows: list[dict]) -> str:
    lines = [f"# Reward hacks against the judge ({meta['backend']}, {meta['gpu']})", "",
             f"`experiments/benchmarks/adversarial_gpu.py`, {meta['date']}, torch {meta['torch']}, Triton "
             f"{meta['triton']}, Python {meta['python']}. Tasks: "
             + ", ".join(f"{k} = {v['spec']} {v['set']}" for k, v in meta["tasks"].items()) + ".", "",
             f"**{sum(r['as_expected'] for r in rows)} of {len(rows)}** got the verdict the manifest "
             "(`tests/fixtures/adversarial/manifest.yaml`) asks for, with a message naming the trick; kind 0 are "
             "honest controls that must pass.", "",
             "| kind | fixture | task | verdict | as expected | message |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        message = r["message"].replace("|", "\\|").replace("\n", " ")[:220]
        lines.append(f"| {r['kind']} | {r['fixture']} | {r['task']} | {r['status']} | "
                     f"{'yes' if r['as_expected'] else '**no**'} | {message} |")
    o = meta["overhead"] or {"with_timing_s": None, "without_timing_s": None}
    lines += ["", f"Chain overhead, submit to result, a correct ReLU at the relu shape (compiled, median of 5): "
                  f"{o['with_timing_s']} s with timing, {o['without_timing_s']} s without.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
