"""Issue U: which convolution tasks start under the strict rule (no cuDNN), checked by the verification chain:
on the Triton interpreter at small sizes (the default), or at the task's own sizes on a GPU (``--device cuda``).
Correctness only: the interpreter's times say nothing of a GPU, and on a GPU several tasks are judged side by side
(``--workers``), so no time is recorded.

On the CPU, for each task (``--tasks``, or ``--sample FILE``'s): its module-level sizes shrunk (``small_sizes``: a batch of 2,
channels to a few per group, spatial sizes to what the kernel's reach needs), torch.compile's capture made on the CPU
(``python -m evoforge.mutators.inductor_capture``, Inductor's Triton under a stand-in driver), the campaign's set-up
turned on it (``InductorStarts.seed``, ``evoforge/starts/inductor.py``, the strict rule: the seed and the ``triton-conv`` start), and each
through the verification chain on the interpreter (its default correctness runs, odd and extra shapes). A row per
task to ``OUT/conv_starts_cpu.jsonl`` as it finishes; ``--summarize`` writes the table.

On a GPU the task is not shrunk: the campaign's own capture (``InductorStarts.capture`` on the ``cuda`` backend,
side by side as a campaign runs them), its starts, and the chain on that backend with its timing off. Rows go to
``OUT/conv_starts_cuda.jsonl``.

    .venv/bin/python experiments/benchmarks/conv_starts.py \\
        --sample experiments/results/kernelbench/conv_family_sample_2026-12-03.json --workers 2 --out /tmp/cs
    .venv/bin/python experiments/benchmarks/conv_starts.py --summarize /tmp/cs/conv_starts_cpu.jsonl --out DIR
    python3 -P experiments/benchmarks/conv_starts.py --device cuda --workers 8 \\
        --family experiments/results/kernelbench/conv_family_tasks_2026-12-03.json --part 1/2 --out /tmp/cs   # GPU
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: On a GPU: the captures' compile threads each (InductorStarts.begin's share of the host's cores).
CAPTURES_SIDE_BY_SIDE = 4
#: On a GPU, one task's evaluations at a time: tasks judged side by side (8 on an H100, 2026-12-07) ran each other
#: out of device memory, as a campaign's memory accounting (search/pool.py) keeps them from doing. Captures still
#: run side by side (``--workers``).
_ONE_JUDGE = threading.Lock()
SPATIAL = ("height", "width", "depth", "length", "height_in", "width_in", "depth_in", "length_in", "input_length",
           "seq_len", "H", "W", "D", "L")


def _ints(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, int)]
    return []


def _module_values(task_file: Path, shrink: Any = None) -> dict[str, Any]:
    """The module-level values the task's assignments compute (literals, names, tuples, arithmetic), in order; with
    ``shrink(name, value, values)``, each name's value replaced as it is assigned, so that what is computed from it
    (``bias_shape = (out_channels, 1, 1)``) follows."""
    values: dict[str, Any] = {}
    for node in ast.parse(task_file.read_text()).body:
        if not isinstance(node, ast.Assign):
            continue
        try:
            value = eval(compile(ast.Expression(node.value), str(task_file), "eval"),  # noqa: S307 (the task's sizes)
                         {"__builtins__": {}}, dict(values))
        except Exception:
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                pairs = [(target.id, value)]
            elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts) and \
                    isinstance(value, tuple) and len(value) == len(target.elts):
                pairs = list(zip([e.id for e in target.elts], value, strict=True))  # type: ignore[attr-defined]
            else:
                continue
            for name, v in pairs:
                values[name] = shrink(name, v, values) if shrink else v
    return values


def small_sizes(task_file: Path) -> dict[str, Any]:
    """The task's module-level sizes, shrunk for the interpreter, and what is computed from them: ``batch_size`` 2;
    each channel count to at most 8 (kept a multiple of ``groups`` where the task has one); each spatial size to at
    most what the kernel's reach (dilation x (kernel - 1) + 1) needs plus 5, at least 8."""
    original = _module_values(task_file)
    groups = max([1] + [v for name, v in original.items() if "groups" in name and isinstance(v, int)])
    kernels = [k for name, v in original.items() if name.startswith("kernel") for k in _ints(v)]
    reach = max([1] + [d * (k - 1) + 1 for k in kernels for d in (_ints(original.get("dilation")) or [1])])

    def shrink(name: str, value: Any, _values: dict[str, Any]) -> Any:
        if not isinstance(value, int) or isinstance(value, bool) or name.startswith("kernel"):
            return value
        if name == "batch_size":
            return min(value, 2)
        if "channels" in name or name.endswith("_features"):
            if value <= 8:
                return value
            g = groups if groups > 1 and value % groups == 0 else 1
            return g * max(1, min(value // g, max(1, 8 // g)))
        if name in SPATIAL or name.endswith(("_height", "_width", "_depth", "_length")):
            return min(value, max(8, reach + 5))
        return value

    small = _module_values(task_file, shrink)
    return {name: list(v) if isinstance(v, tuple) else v for name, v in small.items()
            if name in original and v != original[name]}


def _task_file(spec: str) -> Path:
    from evoforge.task import resolve_task_path

    return Path(resolve_task_path(spec))


def run_one(spec: str, folder: Path, timeout_s: float, device: str = "cpu") -> dict[str, Any]:
    """One task: capture, the strict rule's starts, each through the chain (on the interpreter at small sizes, or
    on ``device`` "cuda" at the task's own)."""
    from evoforge.mutators.conv_kernel import TRITON_CONV

    from evoforge.starts.inductor import InductorStarts
    from evoforge.task import Task

    row: dict[str, Any] = {"spec": spec, "device": device}
    path = _task_file(spec)
    sizes = small_sizes(path) if device == "cpu" else {}
    row.update(task=path.stem, sizes=sizes, transposed="transpose" in path.read_text().lower())
    work = folder / spec.replace("/", "_")
    (work / "seeds").mkdir(parents=True, exist_ok=True)
    task = Task.load(spec, overrides=sizes)
    captured = work / "seeds" / f"{task.name.replace('/', '_')}.inductor.json"
    started = time.monotonic()
    backend = None
    if device == "cpu":
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        proc = subprocess.run([sys.executable, "-m", "evoforge.mutators.inductor_capture", str(path), "cpu",
                               str(captured), json.dumps(sizes)], capture_output=True, text=True, timeout=timeout_s,
                              env=env)
        failed = proc.returncode != 0 or not captured.exists()
        why = proc.stderr.strip().splitlines()[-1:] or ""
    else:  # the campaign's own capture, on its backend
        from evoforge.backends.registry import get_backend

        backend = get_backend(device)
        InductorStarts(run_dir=work, backend=backend, timeout_s=timeout_s).capture(task, CAPTURES_SIDE_BY_SIDE)
        failed = not captured.exists()
        why = captured.with_suffix(".failed").read_text() if failed and captured.with_suffix(".failed").exists() \
            else ""
    row["capture_s"] = round(time.monotonic() - started, 1)
    if failed:
        row.update(status="capture_failed", message=why)
        return row
    try:
        seed, variants = InductorStarts(run_dir=work, backend=backend, timeout_s=timeout_s).seed(task)
    except Exception as e:  # a task with no seed: said in one line
        row.update(status="no_seed", message=str(e)[:300])
        return row
    candidates = {"seed": seed}
    for variant in variants:
        if variant.meta.get("inductor_config") == TRITON_CONV:
            candidates[TRITON_CONV] = variant
    row["seed_is_kernel"] = "_evoforge_conv(" in seed.source
    with _ONE_JUDGE if device != "cpu" else contextlib.nullcontext():
        _judge(row, task, candidates, device, timeout_s)
    ok = [n for n in candidates if row[n]["status"] == "ok"]
    row["status"] = "ok" if ok else "incorrect"
    row["correct_starts"] = ok
    return row


def _judge(row: dict[str, Any], task: Any, candidates: dict[str, Any], device: str, timeout_s: float) -> None:
    from evoforge.judge.chain import ChainOptions
    from evoforge.judge.evaluator import Evaluator

    from evoforge.core import Candidate

    evaluator = Evaluator(backend="interpreter" if device == "cpu" else device,
                          options=ChainOptions(timing=device == "cpu"), timeout_s=timeout_s, knowledge=False)
    try:
        for name, candidate in candidates.items():
            began = time.monotonic()
            result = evaluator.evaluate(task, Candidate.from_source(candidate.source, task=task.name,
                                                                    operator=candidate.operator))
            row[name] = {"status": str(result.status.value), "message": result.message[:900],
                         "eval_s": round(time.monotonic() - began, 1)}
    finally:
        evaluator.close()


def summarize(rows: list[dict[str, Any]]) -> str:
    for r in rows:  # a row cut short (a capture past its time) says not whether the task's convolution is transposed
        r.setdefault("transposed", "transpose" in _task_file(r["spec"]).read_text().lower())
    def line(label: str, group: list[dict[str, Any]]) -> str:
        ok = [r for r in group if r.get("status") == "ok"]
        kernel = [r for r in group if TRITON_OK(r)]
        return f"| {label} | {len(group)} | {len(ok)} | {len(kernel)} |"

    def TRITON_OK(r: dict[str, Any]) -> bool:  # noqa: N802
        return (r.get("triton-conv") or {}).get("status") == "ok" or (
            r.get("seed_is_kernel") and (r.get("seed") or {}).get("status") == "ok")

    out = ["| tasks | count | a correct start under the strict rule | the kernel among them |", "| --- | ---: | ---: | ---: |",
           line("all", rows), line("transposed", [r for r in rows if r.get("transposed")]),
           line("not transposed", [r for r in rows if not r.get("transposed")]), "",
           "| task | sizes | seed | triton-conv | why not |", "| --- | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: r["spec"]):
        why = r.get("message", "") if r.get("status") not in ("ok", "incorrect") else "; ".join(
            f"{n}: {r[n]['message'][:120]}" for n in ("seed", "triton-conv") if n in r and r[n]["status"] != "ok")
        out.append(f"| {r['spec']} | {json.dumps(r.get('sizes', {}))} | {(r.get('seed') or {}).get('status', '-')} | "
                   f"{(r.get('triton-conv') or {}).get('status', '-')} | {why} |")
    return "\n".join(out) + "\n"


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _triton_version() -> str:
    import triton

    return triton.__version__


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="*", default=[])
    ap.add_argument("--sample", type=Path, help="a committed sample (its tasks' specs)")
    ap.add_argument("--family", type=Path, help="a committed task list (conv_family_tasks_*.json): all its tasks")
    ap.add_argument("--part", default="1/1", help="K/N: the K-th of N equal slices of the tasks, in order")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--summarize", type=Path, nargs="*")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        rows = [json.loads(line) for f in args.summarize for line in f.read_text().splitlines() if line.strip()]
        (args.out / f"conv_starts_{args.device}.md").write_text(summarize(rows))
        print((args.out / f"conv_starts_{args.device}.md").read_text())
        return 0
    specs = list(args.tasks)
    if args.sample:
        data = json.loads(args.sample.read_text())
        specs += [t["spec"] for t in (data["tasks"] if isinstance(data, dict) else data)]
    if args.family:
        specs += [t["spec"] for t in json.loads(args.family.read_text())["tasks"]]
    k, n = (int(v) for v in args.part.split("/"))
    specs = specs[(k - 1) * len(specs) // n:k * len(specs) // n]
    rows_file = args.out / f"conv_starts_{args.device}.jsonl"
    done = {json.loads(line)["spec"] for line in rows_file.read_text().splitlines()} if rows_file.exists() else set()
    import torch

    meta = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M+00:00"), "script": __file__,
            "argv": sys.argv[1:], "torch": torch.__version__, "commit": os.environ.get("EVOFORGE_COMMIT", ""),
            "machine": f"{os.cpu_count()} CPUs, the Triton interpreter" if args.device == "cpu" else
            f"{os.cpu_count()} CPUs, {torch.cuda.get_device_name()}, driver {_driver()}",
            "triton": _triton_version()}
    (args.out / f"conv_starts_{args.device}.meta.json").write_text(json.dumps(meta, indent=1))
    folder = Path(tempfile.mkdtemp(prefix="conv-starts-"))

    def one(spec: str) -> dict[str, Any]:
        try:
            return run_one(spec, folder, args.timeout, args.device)
        except Exception as e:
            return {"spec": spec, "status": "error", "message": f"{type(e).__name__}: {e}"[:300],
                    "transposed": "transpose" in _task_file(spec).read_text().lower()}

    with ThreadPoolExecutor(max_workers=args.workers) as pool:  # a row as each task finishes: a stop keeps them
        for future in as_completed([pool.submit(one, s) for s in specs if s not in done]):
            row = future.result()
            with rows_file.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps({k: row.get(k) for k in ("spec", "status", "correct_starts", "capture_s")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
