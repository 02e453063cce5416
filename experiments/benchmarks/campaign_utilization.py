"""How busy a campaign keeps the GPU, from its first second (issue Y): `evoforge run` as a user runs it (its own
process, the installed package, default options) over a mix of KernelBench tasks, some served by a template (a seed
at once), some started from torch.compile's capture, while `nvidia-smi` samples the GPU's utilization every 250 ms
(throughput.py's ``UtilizationSampler``).

Per run: wall time, the first evaluation's start after the command's (from the record's trials), evaluations and
evaluations per minute, the GPU's busy share over the whole run and per window (the first 30 s, 30-60 s, then each
minute), and when each task's first trial started. ``--pythonpath DIR`` runs another build of evoforge (e.g. a
commit's tree installed with ``pip install --target DIR``) for a before/after on the same machine.

    python3 -P experiments/benchmarks/campaign_utilization.py --out $OUT/new.json                     # GPU
    python3 -P experiments/benchmarks/campaign_utilization.py --pythonpath /tmp/old --out $OUT/old.json
    python3 experiments/benchmarks/campaign_utilization.py --backend interpreter --budget-minutes 0.2 \\
        --tasks L1/19 --set batch_size=4 --set dim=1000 --out /tmp/cu.json                            # CPU smoke
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Three level-1 tasks a template serves (a seed at once) and three without one (torch.compile's capture, one of
#: them with the vendor's convolution allowed): what an overnight benchmark campaign mixes.
TASKS = [("L1/19", []), ("L1/23", []), ("L1/40", []), ("L1/29", []), ("L1/96", []),
         ("L2/1", ["addmm", "baddbmm", "bmm", "convolution", "mm"])]


def _load(name: str) -> Any:
    """A sibling script as a module (``python -P`` keeps this folder off sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def write_config(path: Path, tasks: list[tuple[str, list[str]]], sets: list[str], budget_minutes: float,
                 per_device: int = 0) -> None:
    lines = ["[campaign]", 'name = "utilization"', f"budget_minutes = {budget_minutes:g}"]
    lines += [f"evaluators_per_device = {per_device}", ""] if per_device else [""]
    for spec, allow in tasks:
        lines += ["[[tasks]]", f'spec = "{spec}"']
        if allow:
            lines.append(f"allow_ops = {json.dumps(allow)}")
        if sets:
            lines.append("set = {" + ", ".join(f"{k} = {v}" for k, v in (s.split("=", 1) for s in sets)) + "}")
        lines.append("")
    path.write_text("\n".join(lines))


def trial_times(run_dir: Path) -> list[dict[str, Any]]:
    """Every trial of the run's record: its task, start and end (epoch s), status."""
    import sqlite3

    con = sqlite3.connect(f"file:{run_dir / 'optuna.db'}?mode=ro", uri=True)
    rows = con.execute("SELECT s.study_name, t.datetime_start, t.datetime_complete, t.state FROM trials t "
                       "JOIN studies s ON s.study_id = t.study_id").fetchall()
    con.close()

    def epoch(text: str | None) -> float | None:
        return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC).timestamp() if text else None

    return [{"task": name.split("/", 1)[1], "start": epoch(a), "end": epoch(b), "state": state}
            for name, a, b, state in rows]


def phases(run: Path, t0: float, t1: float) -> dict[str, Any]:
    """Where an evaluation's time went, from the results the campaign cached (``run/cache/*.json``): medians of
    each phase the chain records, and the share of the run in which some evaluation held the device's turn (the
    GPU can be busy at most then and in the correctness runs before it)."""
    import statistics

    rows = []
    for f in sorted((run / "cache").glob("*.json")):
        try:
            r = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if r.get("cached") or not r.get("eval_s"):
            continue
        rows.append(r)
    if not rows:
        return {}
    out: dict[str, Any] = {"evaluations": len(rows), "eval_s": round(statistics.median(r["eval_s"] for r in rows), 3)}
    names = sorted({k for r in rows for k in ((r.get("details") or {}).get("phases_s") or {})})
    for name in names:
        values = [r["details"]["phases_s"][name] for r in rows if name in ((r.get("details") or {}).get("phases_s") or {})]
        out[f"{name}_median"] = round(statistics.median(values), 3)
        out[f"{name}_sum"] = round(sum(values), 1)
    turns = sorted((max(a, t0), min(b, t1)) for r in rows for a, b in [((r.get("details") or {}).get("turn") or (0, 0))]
                   if b > a)
    held, end = 0.0, t0
    for a, b in turns:  # the union of the windows (turns of one device never overlap; of two they may)
        if b > end:
            held += b - max(a, end)
            end = b
    out["turn_held_share"] = round(held / max(t1 - t0, 1e-9), 3)
    out["turn_hold_s_median"] = round(statistics.median(b - a for a, b in turns), 3) if turns else None
    memo = [(r.get("details") or {}).get("reference_memo") for r in rows]
    if any(memo):
        out["reference_memo_hits"] = sum(m["hits"] for m in memo if m)
        out["reference_memo_misses"] = sum(m["misses"] for m in memo if m)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="*", help="SPEC... (default: the six of TASKS, their rules included)")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE for every task (a CPU smoke's sizes)")
    ap.add_argument("--budget-minutes", type=float, default=1.0)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--evaluators-per-device", type=int, default=0, help="the campaign's (0: its default)")
    ap.add_argument("--pythonpath", default="", help="prepend this to the campaign's PYTHONPATH (another build)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/campaign_utilization"))
    ap.add_argument("--label", default="")
    ap.add_argument("--limit-s", type=float, default=0, help="stop the campaign (SIGINT) after this many seconds; "
                    "what its record holds is still read")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    tasks = [(t, []) for t in args.tasks] if args.tasks else TASKS
    work = args.work / (args.label or "run")
    subprocess.run(["rm", "-rf", str(work)], check=False)
    work.mkdir(parents=True)
    config = work / "campaign.toml"
    write_config(config, tasks, args.set, args.budget_minutes, args.evaluators_per_device)
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (args.pythonpath, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-P", "-c", "from evoforge.cli import main; main()", "run", str(config), "--out",
           str(work / "run"), "--backend", args.backend, "--quiet"]
    t0 = time.time()
    with _load("throughput").UtilizationSampler(period_ms=250) as sampler, (work / "campaign.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(work))
        try:
            code = proc.wait(timeout=args.limit_s or None)
        except subprocess.TimeoutExpired:
            proc.send_signal(__import__("signal").SIGINT)
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            code = f"stopped at --limit-s {args.limit_s:g} (exit {code})"
        t1 = time.time()
    trials = trial_times(work / "run") if (work / "run" / "optuna.db").exists() else []
    starts = [t["start"] for t in trials if t["start"]]
    first_by_task = {}
    for t in sorted(trials, key=lambda t: t["start"] or 0):
        first_by_task.setdefault(t["task"], round(t["start"] - t0, 1) if t["start"] else None)
    windows = [("0-30 s", 0, 30), ("30-60 s", 30, 60)] + [
        (f"{a}-{a + 60} s", a, a + 60) for a in range(60, int(t1 - t0) + 60, 60)]
    summary = json.loads((work / "run" / "summary.json").read_text()) if (work / "run" / "summary.json").exists() else {}
    result = {
        "label": args.label, "exit": code, "evaluators_per_device": args.evaluators_per_device or "default", "wall_s": round(t1 - t0, 1), "budget_minutes": args.budget_minutes,
        "tasks": [s for s, _ in tasks], "evaluations": len(trials),
        "evaluations_per_min": round(len(trials) / ((t1 - t0) / 60), 2),
        "first_evaluation_s": round(min(starts) - t0, 1) if starts else None,
        "first_trial_s_by_task": first_by_task,
        "gpu_busy": sampler.busy(t0, t1), "gpu_busy_windows": {name: sampler.busy(t0 + a, t0 + b)
                                                              for name, a, b in windows},
        "campaign_elapsed_s": summary.get("elapsed_s"), "not_started": summary.get("not_started"),
        "phases": phases(work / "run", t0, t1),
        "per_task": {n: {k: t.get(k) for k in ("evaluations", "best_speedup", "vs_compile", "stopped_early")}
                     for n, t in (summary.get("tasks") or {}).items()},
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
        "commit": os.environ.get("EVOFORGE_COMMIT", ""), "pythonpath": args.pythonpath,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("label", "exit", "wall_s", "evaluations", "evaluations_per_min",
                                             "first_evaluation_s", "gpu_busy", "gpu_busy_windows", "phases")}))


if __name__ == "__main__":
    main()
