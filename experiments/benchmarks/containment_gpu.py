"""Containment on a GPU machine, in one call: the adversarial candidates of tests/fixtures/containment (the CPU
suite's, here on the CUDA backend) under bubblewrap, a contained CUDA kernel computing correctly, and the overhead
per candidate (contained against uncontained evaluation time of an ordinary kernel, several repeats).

Needs only what the candidate process path needs (torch, Triton, numpy, PyYAML, evoforge); no Optuna, Ray or
openai. Without a bwrap on PATH, point EVOFORGE_BWRAP at a carried one (see docs/isolation.md):

  EVOFORGE_BWRAP=$PWD/.carry/bwrap/bwrap python experiments/benchmarks/containment_gpu.py --out $OUT
  python experiments/benchmarks/containment_gpu.py --backend interpreter --repeats 2 --out /tmp/x   (CPU smoke)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from evoforge.judge.chain import ChainOptions
from evoforge.judge.containment import bwrap_executable, gpu_devices
from evoforge.judge.evaluator import Evaluator

from evoforge.core import Candidate, EvalStatus
from evoforge.task import Task

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
TEMPLATES = Path(__file__).resolve().parents[2] / "knowledge" / "templates"
BOUNDS = {"EVOFORGE_MAX_PROCESSES": "64", "EVOFORGE_MAX_DISK_BYTES": str(256 << 20), "EVOFORGE_MAX_FILES": "5000",
          "EVOFORGE_MAX_FILE_BYTES": str(64 << 20), "EVOFORGE_TMP_BYTES": str(128 << 20),
          "EVOFORGE_MAX_OPEN_FILES": "512"}
KEY = "sk-evoforge-gpu-" + secrets.token_hex(8)


def source(name: str) -> str:
    path = FIXTURES / "containment" / f"{name}.py"
    return (path if path.exists() else FIXTURES / "relu" / f"{name}.py").read_text()


def evaluator(backend: str, mode: str, run_dir: Path) -> Evaluator:
    return Evaluator(backend=backend, options=ChainOptions(trials=2), timeout_s=120, knowledge=False,
                     child_env={"EVOFORGE_CONTAINMENT": mode, **BOUNDS}, hide_paths=[str(run_dir)])


def report(message: str, start: str, end: str) -> dict:
    found = re.search(start + r"(\{.*?\})" + end, message)
    return json.loads(found.group(1)) if found else {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=os.environ.get("OUT", "experiments/results/h200"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bwrap = bwrap_executable()
    facts = {"host": platform.node(), "kernel": platform.release(), "uid": os.getuid(), "bwrap": bwrap,
             "bwrap_ldd": subprocess.run(["ldd", bwrap], capture_output=True, text=True).stdout if bwrap else "",
             "gpu_devices": gpu_devices()}
    print(json.dumps(facts, indent=1), flush=True)
    os.environ["OPENAI_API_KEY"] = KEY  # this process holds a key, as a campaign's does
    run_dir = Path(tempfile.mkdtemp(prefix="containment-run-"))
    (run_dir / "optuna.db").write_text("the record")
    # The interpreter is slow; on a GPU, 256 MiB a tensor (KernelBench's own L1/19 size, 6 GiB a tensor, makes a
    # staged arena copy tens of GiB per evaluation: see docs/isolation.md).
    small = {"batch_size": 4, "dim": 1000} if args.backend == "interpreter" else {"batch_size": 4096, "dim": 16384}
    open_task = Task.load("L1/19", overrides=small, allow=["introspection", "network", "processes"])
    plain_task = Task.load("L1/19", overrides=small)
    good = Candidate.from_source(source("correct"))
    # A kernel with a large arena (the staged arena copies it at every request): L1/1's 4096^2 fp32 GEMM, the
    # shipped template (its 3xTF32 split keeps it correct).
    gemm_task = Task.load("L1/1", overrides={"N": 256} if args.backend == "interpreter" else {})
    gemm = Candidate.from_source((TEMPLATES / "matmul.py").read_text())
    rows, timing = [], {}
    for mode in ("bwrap", "none"):
        ev = evaluator(args.backend, mode, run_dir)
        try:
            for label, task, candidate in (("relu", plain_task, good), ("gemm", gemm_task, gemm)):
                first = ev.evaluate(task, candidate)  # starts the judge, compiles (not timed as a candidate)
                containment = ev.containment
                times, statuses, phases = [], [], []
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    result = ev.evaluate(task, candidate)
                    times.append(time.perf_counter() - started)
                    statuses.append(str(result.status))
                    phases.append(result.details.get("phases_s"))
                timing[f"{mode} {label}"] = {
                    "containment": containment, "first": str(first.status), "speedup": first.speedup,
                    "eval_s": times, "statuses": statuses, "max_abs_err": first.max_abs_err,
                    "arena": first.details.get("arena", "shared"), "phases_s": phases, "message": first.message[:300]}
                print(mode, label, json.dumps(timing[f"{mode} {label}"]), flush=True)
            if mode != "bwrap":
                continue
            attacks = [
                ("probe", open_task, Candidate.from_source(source("probe"), params={
                    "SECRET": KEY, "RUN_DIR": str(run_dir), "SIBLING": str(run_dir / "optuna.db"), "PORT": 9,
                    "REPO_FILE": str(Path.cwd() / "planted.txt"), "OTHERS": [str(run_dir / "optuna.db")]})),
                ("key_hunter", open_task, Candidate.from_source(source("key_hunter"),
                                                                params={"NEEDLE_HEX": KEY.encode().hex()})),
                ("fork_bomb", open_task, Candidate.from_source(source("fork_bomb"))),
                ("fill_own_dir", open_task, Candidate.from_source(source("fill"), params={"MODE": "spread"})),
                ("many_files", open_task, Candidate.from_source(source("fill"), params={"MODE": "many"})),
                ("one_huge_file", open_task, Candidate.from_source(source("fill"), params={"MODE": "big"})),
                ("fill_tmp", open_task, Candidate.from_source(source("fill"), params={"WHERE": "/tmp",
                                                                                     "MODE": "spread"})),
                ("open_files", open_task, Candidate.from_source(source("open_files"))),
            ]
            for name, task, candidate in attacks:
                started = time.perf_counter()
                result = ev.evaluate(task, candidate)
                after = ev.evaluate(plain_task, good)
                row = {"attack": name, "status": str(result.status), "eval_s": round(time.perf_counter() - started, 2),
                       "next_ok": after.status is EvalStatus.OK, "message": result.message[:300]}
                if name == "probe":
                    row["seen"] = report(result.message, "PROBE", "EBORP")
                if name == "key_hunter":
                    row["seen"] = report(result.message, "HUNT", "TNUH")
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            ev.close()
    write(out, facts, timing, rows)


def verdict(row: dict) -> str:
    seen = row.get("seen") or {}
    if row["attack"] == "probe":
        ok = (seen.get("secret_in_environ") == [] and not seen.get("connect", {}).get("ok")
              and not seen.get("write_repo", {}).get("ok") and seen.get("run_dir_listing", {}).get("value") == []
              and int(seen.get("capabilities", "1"), 16) == 0 and seen.get("read_others") == [])
        return "closed" if ok else f"OPEN: {json.dumps(seen)[:200]}"
    if row["attack"] == "key_hunter":
        return "no key found" if seen and not seen["environ_hits"] and not seen["mem_hits"] else "KEY FOUND"
    return "stopped" if row["status"] in ("rejected", "runtime_error") else "NOT STOPPED"


def write(out: Path, facts: dict, timing: dict, rows: list[dict]) -> None:
    lines = ["# Containment on the GPU machine", "", f"bwrap: `{facts['bwrap']}`; GPU nodes bound: "
             f"{', '.join(facts['gpu_devices']) or 'none'}; uid {facts['uid']}; kernel {facts['kernel']}", ""]
    lines += ["| mode | containment | arena | first result | speedup | max abs err | median eval s | all ok |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for mode, t in timing.items():
        lines.append(f"| {mode} | {t['containment'].get('mode', '?')} | {t['arena']} | {t['first']} | "
                     f"{t['speedup'] and round(t['speedup'], 3)} | {t['max_abs_err']} | "
                     f"{statistics.median(t['eval_s']):.3f} | {all(s == 'ok' for s in t['statuses'])} |")
    for label in ("relu", "gemm"):
        contained, plain = timing.get(f"bwrap {label}"), timing.get(f"none {label}")
        if contained and plain:
            overhead = statistics.median(contained["eval_s"]) - statistics.median(plain["eval_s"])
            lines += ["", f"Overhead per candidate, {label} (median contained minus median uncontained): "
                      f"{overhead * 1e3:.0f} ms"]
    lines += ["", "| attack | status | verdict | next candidate ok | s | message |", "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        message = row["message"].replace("|", "/").replace("\n", " ")[:140]
        lines.append(f"| {row['attack']} | {row['status']} | {verdict(row)} | {row['next_ok']} | {row['eval_s']} | "
                     f"{message} |")
    (out / "containment_gpu.md").write_text("\n".join(lines) + "\n")
    (out / "containment_gpu.json").write_text(json.dumps({"facts": facts, "timing": timing, "attacks": rows},
                                                         indent=1, default=str))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
