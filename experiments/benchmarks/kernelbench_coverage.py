"""Coverage of KernelBench by the ways in that need no LLM: which tasks get a correct seed from torch.compile's
Triton (``inductor-seed``), under which compute rule, and how fast each seed is against eager and torch.compile.

Seeds only, no search. For every task of the levels asked (or ``--tasks``):

1. In parallel worker processes (``--workers``; compiling is CPU work): torch.compile (default mode) of the
   reference, run once so that Inductor's caches hold it, then ``inductor_capture.capture`` (its own settings:
   symbolic sizes) written as JSON.
2. The capture converted under both rules: ``strict`` (all of the reference's compute in the seed's kernels, the
   chain's default) and ``vendor`` (the GEMMs and convolutions Inductor keeps in cuBLAS/cuDNN allowed: the task's
   ``allow_ops`` are set to exactly the ops the seed calls). Where the rules give the same seed it is one row.
3. One after another in this process, nothing else on the GPU: each seed through the verification chain (the
   campaign's evaluator, cuda backend, 3 correctness runs), and, where correct, the seed, eager and torch.compile
   timed together: 0.5 s of the three in turn, then mirrored do_bench medians (warm-up 25 ms, 100 ms each, L2
   flushed; the suite's balanced_bench with shorter windows, so that 200 tasks fit a session's device time).
   The chain gives the verdict only (its own timing is off: the times are these).

Rows go to ``OUT/coverage.jsonl`` as each task finishes (a call cut by its time limit keeps them; a re-run skips
the tasks already there), and ``--summarize`` writes ``OUT/coverage.md`` from every jsonl given.

    python3 -P experiments/benchmarks/kernelbench_coverage.py --levels 1 2 --shard 0/3 --out $OUT     # GPU
    python3 experiments/benchmarks/kernelbench_coverage.py --summarize experiments/results/kernelbench/*.jsonl \\
        --out experiments/results/kernelbench
    python3 experiments/benchmarks/kernelbench_coverage.py --smoke --out /tmp/cov                      # CPU
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: --smoke: two small tasks on the CPU (capture under the stand-in driver, the interpreter evaluates).
SMOKE = {"L1/19": {"batch_size": 4, "dim": 256}, "L2/76": {"batch_size": 8, "in_features": 32, "out_features": 16, "bias_shape": [16]}}


def _suite() -> Any:
    """h200_suite's timing helpers (balanced_bench, time_reference, time_best), loaded by path."""
    spec = importlib.util.spec_from_file_location("h200_suite", REPO / "experiments" / "benchmarks" / "h200_suite.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def warm_one(task_path: str, out: str, overrides: dict[str, Any]) -> None:
    """Worker: torch.compile (default mode) of the reference, run once, so that Inductor's caches hold what the
    timing compiles later. A process of its own: capture's settings (symbolic sizes) must not meet this one. Its
    autotuning holds the device's turn where the environment names one (``device_turn_env``)."""
    import torch
    from evoforge.mutators.inductor_capture import DEVICE_TURN_ENV, take_turn_while_benchmarking

    from evoforge.task import exec_module_file

    if os.environ.get(DEVICE_TURN_ENV):
        take_turn_while_benchmarking(os.environ[DEVICE_TURN_ENV])

    row: dict[str, Any] = {}
    module = exec_module_file(task_path, "evoforge_cov_task", overrides)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).to("cuda")
    torch.manual_seed(1)
    inputs = [x.to("cuda") if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            torch.compile(model)(*inputs)
        row["torch_compile_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001  (recorded: torch.compile itself fails on this task)
        first = (str(e).strip().splitlines() or [""])[0][:200]
        row["torch_compile_error"] = f"{type(e).__name__}: {first}"
    Path(out).write_text(json.dumps(row))


def device_turn_env(side_by_side: int, device: str) -> dict[str, str]:
    """The environment of worker processes side by side on ``device`` (``inductor_capture.capture_env``): their
    compiles share the cores, and their autotuning takes turns on the GPU (the campaign's device lock): timed at
    once, their choices of launch configs and tiles are the contention's, and Inductor's caches keep them."""
    from evoforge.mutators.inductor_capture import capture_env

    turn = None
    if device == "cuda":
        from evoforge.backends.base import device_turn_path
        from evoforge.backends.cuda import CudaBackend

        turn = device_turn_path(CudaBackend().lock_key)
    return capture_env(side_by_side, turn)


def capture_one(task_path: str, device: str, out: str, overrides: dict[str, Any]) -> None:
    """Worker: ``inductor_capture.capture`` of the task, its seconds, or the reason there is no seed."""
    from evoforge.mutators.inductor_capture import NoInductorSeed, capture

    row: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        row.update(json.loads(capture(task_path, overrides=overrides, device=device).to_json()))
    except NoInductorSeed as e:
        row["no_seed"] = str(e)
    row["capture_s"] = time.perf_counter() - t0
    Path(out).write_text(json.dumps(row))


def capture_iter(tasks: list[tuple[str, str, dict]], device: str, folder: Path, workers: int, timeout_s: float,
                 stop_at: float = 0.0) -> Iterator[tuple[str, dict | None]]:
    """Each task's capture (torch.compile warmed, then ``inductor_capture.capture``), in worker processes side by
    side, yielded as each is done: (name, its data), or (name, None) where ``stop_at`` (a ``time.perf_counter``)
    came before it was made (not captured: a later call does it)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = device_turn_env(min(workers, max(1, len(tasks))), device)  # as many side by side as will run at once

    def left() -> float:
        return stop_at - time.perf_counter() if stop_at else math.inf

    def one(item: tuple[str, str, dict]) -> tuple[str, dict | None]:
        name, path, overrides = item
        stem = folder / name.replace("/", "_")
        out, warm = stem.with_suffix(".json"), stem.with_suffix(".warm.json")
        row: dict[str, Any] = {}
        steps = [("torch.compile", ["--warm-one", path, str(warm), json.dumps(overrides)], warm)] if device == "cuda" else []
        steps.append(("capture", ["--capture-one", path, device, str(out), json.dumps(overrides)], out))
        for what, argv, target in steps:
            if not target.exists():
                if left() <= 0:
                    return name, None
                cut = left() < timeout_s
                failed = _worker(argv, target, min(timeout_s, left()), what, env)
                if failed and cut and "did not finish" in failed:
                    return name, None  # stopped by the call's time, not the task's fault
                if failed and what == "capture":
                    return name, {**row, "no_seed": failed}
            if target.exists():
                row.update(json.loads(target.read_text()))
        return name, row

    with ThreadPoolExecutor(workers) as pool:
        for future in as_completed([pool.submit(one, item) for item in tasks]):
            yield future.result()


def _capture_all(tasks: list[tuple[str, str, dict]], device: str, folder: Path, workers: int,
                 timeout_s: float) -> dict[str, dict]:
    return {name: data for name, data in capture_iter(tasks, device, folder, workers, timeout_s) if data is not None}


def _worker(argv: list[str], out: Path, timeout_s: float, what: str, env: dict[str, str] | None = None) -> str:
    """Run this script as a worker; "" when it wrote ``out``, else the reason (its last stderr line, with the
    traceback kept beside ``out`` as .log)."""
    try:
        proc = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, timeout=timeout_s,
                              env=env)
    except subprocess.TimeoutExpired:
        return f"{what} did not finish within {timeout_s:g} s"
    if proc.returncode != 0 or not out.exists():
        out.with_suffix(".log").write_text(proc.stderr[-20000:])
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return f"{what} process failed ({tail})"
    return ""


def convert(data: dict) -> dict[str, Any]:
    """The capture under both rules: {rule: (source, allow_ops) or reason}."""
    from evoforge.mutators.inductor_seed import EXTERN_OPS, InductorCapture, NoInductorSeed, seed_from_capture

    if "no_seed" in data:
        return {"strict": data["no_seed"], "vendor": data["no_seed"]}
    fields = {k: v for k, v in data.items() if k in InductorCapture.__dataclass_fields__}
    cap = InductorCapture(**fields)
    out: dict[str, Any] = {}
    try:
        out["strict"] = (seed_from_capture(cap), ())
    except NoInductorSeed as e:
        out["strict"] = str(e)
        m = re.search(r"allow_ops = (\[[^\]]*\])", str(e))
        ops = tuple(json.loads(m.group(1))) if m else ()
        if not ops:
            out["vendor"] = str(e)
            return out
        try:
            out["vendor"] = (seed_from_capture(cap, allow_ops=ops), ops)
        except NoInductorSeed as e2:
            out["vendor"] = str(e2)
        return out
    out["vendor"] = "same as strict"  # no vendor call: the rules do not differ
    assert set(EXTERN_OPS)  # the ops a vendor seed may name come from this table
    return out


def verdicts(name: str, spec: str, overrides: dict, data: dict, evaluator: Any,
             moves: dict[str, dict[str, Any]] | None = None) -> list[tuple[dict, str, Any]]:
    """The capture under each rule through the verification chain: (row, seed source, candidate) per rule; with
    ``moves``, each correct seed's moved parameters judged too (``judge_moves``)."""
    from evoforge.mutators.inductor_seed import INDUCTOR_SEED

    from evoforge.core import Candidate
    from evoforge.task import Task

    out: list[tuple[dict, str, Any]] = []
    base = {"task": name, "spec": spec, "capture_s": data.get("capture_s"),
            "torch_compile_s": data.get("torch_compile_s"), "torch_compile_error": data.get("torch_compile_error")}
    for rule, made in convert(data).items():
        row = dict(base, rule=rule)
        if isinstance(made, str):
            if made == "same as strict":
                continue
            row.update(status="no_seed", message=made)
            out.append((row, "", None))
            continue
        source, ops = made
        task = Task.load(spec, overrides=overrides or None, allow_ops=list(ops))
        cand = Candidate.from_source(source, task=task.name, operator=INDUCTOR_SEED)
        row.update(allow_ops=list(ops), space=len(cand.space))
        t0 = time.perf_counter()
        result = evaluator.evaluate(task, cand)
        row.update(status=str(result.status), message=result.message[:300], chain_s=time.perf_counter() - t0,
                   chain_speedup=result.speedup)
        if moves and result.ok:
            row["moves"] = judge_moves(task, source, cand, moves, evaluator)
        out.append((row, source, cand))
    return out


def moved_params(params: dict[str, Any], space: dict[str, list[Any]], move: dict[str, Any]) -> dict[str, Any] | None:
    """The seed's PARAMS with a move's values set on every key of that name (``PRECISION``, or a kernel's
    ``k0_PRECISION`` in a seed of several kernels), where SPACE offers the value; None where no key takes it."""
    out, hit = dict(params), False
    for name, value in move.items():
        for key in params:
            if (key == name or key.endswith("_" + name)) and value in space.get(key, []):
                out[key], hit = value, True
    return out if hit else None


def judge_moves(task: Any, source: str, cand: Any, moves: dict[str, dict[str, Any]], evaluator: Any) -> dict[str, Any]:
    """Each named move of a correct seed's parameters (``--moves``) through the chain: {name: {params, status}}."""
    from evoforge.mutators.inductor_seed import INDUCTOR_SEED

    from evoforge.core import Candidate

    out: dict[str, Any] = {}
    for name, move in moves.items():
        params = moved_params(cand.params, cand.space, move)
        if params is None:
            continue
        result = evaluator.evaluate(task, Candidate.from_source(source, task=task.name, operator=INDUCTOR_SEED,
                                                                params=params))
        out[name] = {"params": params, "status": str(result.status), "message": result.message[:200]}
    return out


def needs_timing(judged: list[tuple[dict, str, Any]], data: dict, device: str) -> bool:
    return device == "cuda" and "torch_compile_error" not in data and any(r["status"] == "ok" for r, _, _ in judged)


def time_seeds(spec: str, overrides: dict, judged: list[tuple[dict, str, Any]], suite: Any) -> None:
    """Where a rule's seed is correct: the seed, eager and torch.compile timed together, into its row."""
    import torch

    from evoforge.task import Task

    for row, source, cand in judged:
        if row["status"] != "ok":
            continue
        task = Task.load(spec, overrides=overrides or None, allow_ops=row["allow_ops"])
        moved = {name: m for name, m in row.get("moves", {}).items() if m["status"] == "ok"}
        try:
            times = time_kernels(task, {"seed": (source, cand.params),
                                        **{f"move:{n}": (source, m["params"]) for n, m in moved.items()}}, suite)
            row.update(eager_ms=times["eager"], compile_ms=times["compile"], seed_ms=times["seed"],
                       vs_eager=times["eager"] / times["seed"], vs_compile=times["compile"] / times["seed"])
            for n, m in moved.items():
                m.update(ms=times[f"move:{n}"], vs_compile=times["compile"] / times[f"move:{n}"])
        except Exception as e:  # noqa: BLE001  (a timing failure is recorded, the run goes on)
            row["timing_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        finally:
            torch.cuda.empty_cache()


def time_kernels(task: Any, kernels: dict[str, tuple[str, dict]], suite: Any, placements: int = 0) -> dict[str, float]:
    """Eager, torch.compile and each named kernel (source, params) of the task, timed together (ms; with
    ``placements``, the median over that many allocator states)."""
    import torch

    ref = suite.time_reference(task)
    fns = {"eager": ref["eager"], "compile": ref["compile"]}
    fns.update({name: suite.time_best(task, source, params) for name, (source, params) in kernels.items()})
    with torch.no_grad():
        return _bench_together(fns, placements)


def write_rows(rows_path: Path, judged: list[tuple[dict, str, Any]]) -> None:
    with rows_path.open("a") as f:
        for row, _, _ in judged:
            f.write(json.dumps(row) + "\n")
            print(json.dumps({**{k: row.get(k) for k in ("spec", "rule", "status", "vs_eager", "vs_compile")},
                              **{f"move:{n}": (m["status"], m.get("vs_compile")) for n, m in row.get("moves", {}).items()}}),
                  flush=True)


def _bench_together(fns: dict[str, Any], placements: int = 0) -> dict[str, float]:
    """Half a second of every function in turn, then each timed in order and in reverse (mirrored do_bench
    medians): the board's state is the same for all (experiments/results/h200/gemm_clocks.md). With
    ``placements``, the median of that many rounds, each under another state of the caching allocator
    (``placement_times``)."""
    import statistics

    import torch
    from evoforge.backends.base import warm_in_turn

    warm_in_turn(fns, seconds=0.5, sync=torch.cuda.synchronize)
    if placements:
        return {k: statistics.median(v) for k, v in placement_times(fns, placements).items()}
    return _mirrored_do_bench(fns)


def _mirrored_do_bench(fns: dict[str, Any]) -> dict[str, float]:
    import triton.testing
    from evoforge.backends.base import mirrored_times

    return mirrored_times(fns, lambda f: float(triton.testing.do_bench(f, warmup=25, rep=100,
                                                                        return_mode="median")))


def placement_times(fns: dict[str, Any], rounds: int, seed: int = 0) -> dict[str, list[float]]:
    """Each function timed (mirrored do_bench medians) under ``rounds`` states of the caching allocator: before a
    round the cache is emptied and a pad of a random size (1-512 MiB, kept for the round) allocated, so that the
    intermediates and outputs a call allocates land at other device addresses. On the H200 identical code moved
    by up to 10% with the round on level-2 convolution tasks (seed_profile_placements_2026-12-03.jsonl): one
    round's ratio between two builds is not their difference."""
    import random

    import torch

    rng = random.Random(seed)
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        pad = torch.empty(rng.randint(1, 512) * 2**20 + rng.randint(0, 4095) * 512, dtype=torch.uint8, device="cuda")
        times = _mirrored_do_bench(fns)
        del pad
        for k, v in times.items():
            out[k].append(round(v, 5))
    return out


#: A correct seed's row written untimed because the call's deadline came first.
NOT_TIMED = "not timed: the device call's --deadline came first"


def done_specs(paths: list[Path]) -> set[str]:
    """Tasks whose rows are made: every task with a row in these files, but for one whose correct seed is still
    untimed (``NOT_TIMED``): a later call judges it again (its capture kept) and times it; the summary takes that
    call's row, the later one."""
    rows = read_rows([p for p in paths if p.exists()])
    untimed = {spec for (spec, _), r in rows.items() if r.get("timing_error") == NOT_TIMED}
    return {spec for spec, _ in rows} - untimed


def read_rows(paths: list[Path]) -> dict[tuple[str, str], dict]:
    """Every row of these jsonl files by (task, rule); where one appears twice, the later file's (a re-check)."""
    return {(r["spec"], r["rule"]): r for p in paths for line in p.read_text().splitlines() if line.strip()
            for r in [json.loads(line)]}


def task_list(levels: list[int], only: list[str] | None) -> list[str]:
    from evoforge.task import default_kernelbench_dir

    if only:
        return only
    specs = []
    for level in levels:
        numbers = sorted(int(p.name.split("_")[0]) for p in (default_kernelbench_dir() / f"level{level}").glob("*.py"))
        specs += [f"L{level}/{n}" for n in numbers]
    return specs


def time_untimed(untimed: Path, out: Path, deadline: float) -> None:
    """The correct seeds a call judged but did not time (``NOT_TIMED`` rows of ``untimed``), timed from the same
    captures (``OUT/captures``) and conversion: the verdict stands (the row says which file it came from), only
    the timing is new. A call of a few minutes times what a judging call's deadline left."""
    from evoforge.mutators.inductor_seed import INDUCTOR_SEED

    from evoforge.core import Candidate

    t0, suite = time.perf_counter(), _suite()
    rows = [r for r in read_rows([untimed]).values() if r.get("timing_error") == NOT_TIMED]
    for spec in dict.fromkeys(r["spec"] for r in rows):
        if deadline and time.perf_counter() - t0 > deadline:
            print(f"stopped by --deadline {deadline:g} s before timing {spec}", flush=True)
            break
        capture = out / "captures" / (spec.replace("/", "_") + ".json")
        made = convert(json.loads(capture.read_text()))
        judged = []
        for row in (r for r in rows if r["spec"] == spec):
            source = made[row["rule"]][0]  # the same conversion of the same capture as the judged seed
            row = {k: v for k, v in row.items() if k != "timing_error"}
            row["verdict_from"] = untimed.name
            judged.append((row, source, Candidate.from_source(source, task=row["task"], operator=INDUCTOR_SEED)))
        time_seeds(spec, {}, judged, suite)
        write_rows(out / "coverage.jsonl", judged)
    write_meta(out / "meta_timed.json", suite, timed=f"the NOT_TIMED rows of {untimed.name}")


def run(args: argparse.Namespace) -> None:
    from evoforge.judge.chain import ChainOptions
    from evoforge.judge.evaluator import Evaluator

    from evoforge.task import Task

    device = "cpu" if args.smoke else "cuda"
    specs = list(SMOKE) if args.smoke else task_list(args.levels, args.tasks)
    k, n = (int(x) for x in args.shard.split("/"))
    specs = specs[k::n]
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "coverage.jsonl"
    done = done_specs([rows_path, *(args.done or [])])  # this run's rows, and rows committed before (--done)
    todo = []
    for spec in specs:
        if spec in done:
            continue
        overrides = SMOKE.get(spec, {}) if args.smoke else {}
        task = Task.load(spec, overrides=overrides or None)
        todo.append((spec, task.path, overrides, task.name))
    t0 = time.perf_counter()
    suite = _suite()
    backend = "interpreter" if args.smoke else "cuda"
    evaluator = Evaluator(backend=backend, arch=None if args.smoke else "nvidia-sm90",
                          options=ChainOptions(trials=1 if args.smoke else 3, timing=False), timeout_s=180)
    # Captures side by side on the CPU; each task's verdict (correctness only) as soon as its capture is made;
    # the timing once every capture is done, with nothing else on the GPU. New captures stop at --capture-share
    # of the deadline so that the timing keeps the rest.
    stop_at = t0 + args.deadline * args.capture_share if args.deadline else 0.0
    to_time: list[tuple[str, dict, list]] = []
    captured = 0
    try:
        items = [(s, p, o) for s, p, o, _ in todo]
        names = {s: (o, name) for s, _, o, name in todo}
        for spec, data in capture_iter(items, device, args.out / "captures", args.workers, args.capture_timeout, stop_at):
            if data is None or (args.deadline and time.perf_counter() - t0 > args.deadline * min(1.0, args.capture_share + 0.15)):
                continue  # not captured, or no time left to judge it: a later call does it
            captured += 1
            overrides, name = names[spec]
            judged = verdicts(name, spec, overrides, data, evaluator, json.loads(args.moves) if args.moves else None)
            if needs_timing(judged, data, device):
                to_time.append((spec, overrides, judged))
            else:
                write_rows(rows_path, judged)
        print(f"captured and judged {captured} of {len(todo)} tasks in {time.perf_counter() - t0:.0f} s; "
              f"{len(to_time)} to time", flush=True)
    finally:
        evaluator.close()
    for i, (spec, overrides, judged) in enumerate(to_time):
        if args.deadline and time.perf_counter() - t0 > args.deadline:
            print(f"stopped by --deadline {args.deadline:g} s before timing {spec}: {len(to_time) - i} tasks keep their "
                  "verdicts untimed (a later call with these rows in --done times them)", flush=True)
            for _, _, rest in to_time[i:]:
                for row, _, _ in rest:
                    if row["status"] == "ok":
                        row["timing_error"] = NOT_TIMED
                write_rows(rows_path, rest)
            break
        time_seeds(spec, overrides, judged, suite)
        write_rows(rows_path, judged)
    write_meta(args.out / f"meta_{k}of{n}.json", suite, shard=args.shard)


def write_meta(path: Path, suite: Any, **extra: str) -> None:
    """Where a call's rows came from: date, versions, GPU and driver, the commit, the script."""
    import torch

    on_gpu = torch.cuda.is_available()
    meta = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
            "triton": __import__("triton").__version__,
            "gpu": torch.cuda.get_device_name(0) if on_gpu else "none (CPU smoke)",
            "driver": suite._driver() if on_gpu else "", "commit": _commit(),
            "script": "experiments/benchmarks/kernelbench_coverage.py", **extra}
    path.write_text(json.dumps(meta, indent=1))


def _commit() -> str:
    if os.environ.get("EVOFORGE_COMMIT"):  # a copy of the tree whose git state is not the code's (a device call)
        return os.environ["EVOFORGE_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return os.environ.get("EVOFORGE_COMMIT", "")


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _fmt(row: dict, key: str) -> str:
    return f"{row[key]:.4g}" if isinstance(row.get(key), float) else ""


def summarize(paths: list[Path], out: Path) -> str:
    rows = list(read_rows(paths).values())
    tasks = sorted({r["spec"] for r in rows}, key=lambda s: (s.split("/")[0], int(s.split("/")[1])))
    lines = ["# KernelBench coverage: seeds from torch.compile, no LLM, no search", "",
             f"Rows: {len(rows)} from {', '.join(str(p) for p in paths)} (where a task and rule appear twice, the "
             f"later file's row); tasks: {len(tasks)}.", ""]
    for level in ("L1", "L2"):
        mine = [t for t in tasks if t.startswith(level + "/")]
        if not mine:
            continue
        by = {(r["spec"], r["rule"]): r for r in rows}
        strict_ok = [t for t in mine if by.get((t, "strict"), {}).get("status") == "ok"]
        either_ok = [t for t in mine if strict_ok.count(t) or by.get((t, "vendor"), {}).get("status") == "ok"]
        lines += [f"## {level}: {len(mine)} tasks", "",
                  f"- correct seed under the strict rule: {len(strict_ok)}",
                  f"- correct seed with vendor GEMM/conv allowed (strict where it has one): {len(either_ok)}"]
        for rule in ("strict", "vendor"):
            ok = [by[(t, rule)] for t in mine if by.get((t, rule), {}).get("status") == "ok" and "vs_eager" in by[(t, rule)]]
            if ok:
                lines.append(f"- {rule}: geomean seed speedup over eager {_geo([r['vs_eager'] for r in ok]):.3f}x, "
                             f"over torch.compile {_geo([r['vs_compile'] for r in ok]):.3f}x ({len(ok)} timed); "
                             f"fast_1 vs eager {sum(r['vs_eager'] > 1 for r in ok)}, "
                             f"vs torch.compile {sum(r['vs_compile'] > 1 for r in ok)}")
        for rule in ("strict", "vendor"):
            untimed = sum(by.get((t, rule), {}).get("timing_error") == NOT_TIMED for t in mine)
            if untimed:
                lines.append(f"- {rule}: {untimed} correct seeds not yet timed (a device call's deadline came first)")
        reasons: dict[str, int] = {}
        for t in mine:
            r = by.get((t, "strict"))
            if r and r["status"] != "ok":
                key = r["status"] + ": " + re.sub(r"\d+", "N", (r.get("message") or "")[:90])
                reasons[key] = reasons.get(key, 0) + 1
        lines += ["", "Strict-rule failures by status and message (numbers elided):", ""]
        lines += [f"- {n} x {k}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
        lines.append("")
    lines += ["## Every row", "", "| task | rule | status | seed ms | eager ms | compile ms | vs eager | vs compile | message |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: (r["spec"].split("/")[0], int(r["spec"].split("/")[1]), r["rule"])):
        f = functools.partial(_fmt, r)
        lines.append(f"| {r['task']} | {r['rule']} | {r['status']} | {f('seed_ms')} | {f('eager_ms')} | "
                     f"{f('compile_ms')} | {f('vs_eager')} | {f('vs_compile')} | "
                     f"{(r.get('message') or r.get('timing_error') or '')[:120].replace('|', '/')} |")
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage.md").write_text(text)
    return text


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--capture-one":
        capture_one(sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--warm-one":
        warm_one(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--tasks", nargs="*", help="task specs instead of whole levels (L1/19 ...)")
    ap.add_argument("--shard", default="0/1", help="K/N: every Nth task from the Kth (split over device calls)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--capture-timeout", type=float, default=240.0)
    ap.add_argument("--deadline", type=float, default=0.0, help="no task is started after this many seconds in all")
    ap.add_argument("--capture-share", type=float, default=0.65,
                    help="with --deadline: no capture is started after this share of it (the timing has the rest)")
    ap.add_argument("--done", type=Path, nargs="*", help="coverage rows already made (committed jsonl files): "
                    "their tasks are not run again")
    ap.add_argument("--moves", default="", help='JSON {name: {PARAM: value}}: each correct seed also judged and '
                    'timed with these parameters moved (every key of that name where SPACE offers the value), e.g. '
                    '\'{"split": {"PRECISION": "bf16x3-split"}}\'')
    ap.add_argument("--smoke", action="store_true", help="two small tasks on the CPU (interpreter)")
    ap.add_argument("--time-untimed", type=Path, help="time the correct seeds this jsonl left untimed (their "
                    "captures in OUT/captures; no judging again)")
    ap.add_argument("--summarize", type=Path, nargs="*", help="write OUT/coverage.md from these jsonl files")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.summarize is not None:
        print(summarize(args.summarize, args.out))
        return
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if args.time_untimed:
        time_untimed(args.time_untimed, args.out, args.deadline)
        return
    run(args)


if __name__ == "__main__":
    main()
