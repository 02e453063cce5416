"""Tensor-core GEMM timing on the H200: how much do the measuring method and the clocks move the numbers?

For the fp32 (level1/1) and bf16 (4096^3) GEMM seeds and for the two structures of the bf16 template
(knowledge/templates/matmul_bf16.py: the grouped-tile pointer kernel at its best configurations, and the
persistent kernel with TMA tensor descriptors; gemm_clocks.json was recorded with a copy of the latter in this
script, since moved into the template unchanged), each kernel and its
cuBLAS reference is timed four ways in one process, with the SM clock and board power sampled by
`nvidia-smi -lms 20` during each measurement:
  - do_bench at Triton's defaults (warm-up 25 ms, 100 ms of repeats, median, L2 flushed);
  - do_bench sustained (warm-up 100 ms, 500 ms), the way the H200 suite re-times;
  - the chain's method (backends.base.event_time_interleaved: call-by-call alternation when gemm_clocks.json
    was recorded, alternating settled blocks since: that recording is why);
  - a 2 s sustained run alone and interleaved, reported per 100 ms window (median time, clock, power): whether
    a kernel slows as the board reaches its power limit, and whether interleaving hides that.

  python experiments/benchmarks/gemm_clocks.py --out experiments/results/h200/gemm_clocks.json
  TRITON_INTERPRET=1 python experiments/benchmarks/gemm_clocks.py --smoke   # CPU: the kernels' correctness only
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton

from evoforge.task import Task, exec_module_file, load_task_module

ROOT = Path(__file__).resolve().parents[2]


POINTER_CONFIGS = [  # matmul_bf16.py's pointer kernel: its default, a campaign's best, the landscape's best
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3, TMA=False),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, TMA=False),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=5, TMA=False),
]
TMA_CONFIGS = [  # matmul_bf16.py's persistent TMA kernel (TMA=True)
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3, SUBTILE=True),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, SUBTILE=True),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=5),
]


class ClockSampler:
    """`nvidia-smi -lms 20` of one GPU in the background: (host time, SM MHz, watts, deg C) samples."""

    def __init__(self, uuid: str | None) -> None:
        self.uuid, self.samples, self.proc = uuid, [], None

    def __enter__(self) -> ClockSampler:
        cmd = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader,nounits",
               "-lms=20"] + (["-i", self.uuid] if self.uuid else [])
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return self
        threading.Thread(target=self._read, daemon=True).start()
        time.sleep(0.5)
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                mhz, watts, temp = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.perf_counter(), mhz, watts, temp))

    def window(self, t0: float, t1: float) -> dict[str, float | None]:
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if not inside:
            return {"sm_mhz": None, "watts": None, "temp_c": None}
        return {"sm_mhz": statistics.mean(s[1] for s in inside), "watts": statistics.mean(s[2] for s in inside),
                "temp_c": max(s[3] for s in inside)}

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def measured(clocks: ClockSampler, fn: Callable[[], Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    value = fn()
    return {"value": value, **clocks.window(t0, time.perf_counter())}


def sustained(fns: dict[str, Callable[[], Any]], seconds: float, clocks: ClockSampler, flush: Callable[[], None],
              window_s: float = 0.1) -> list[dict[str, Any]]:
    """Back-to-back runs (L2 flushed before each; several kernels alternate) for ``seconds``: per window, the
    median time of each kernel and the clock and power in that window."""
    rows, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        samples: dict[str, list[float]] = {k: [] for k in fns}
        while time.perf_counter() - t0 < window_s:
            pairs = []
            for _ in range(8):
                for key, fn in fns.items():
                    flush()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    fn()
                    e.record()
                    pairs.append((key, s, e))
            torch.cuda.synchronize()
            for key, s, e in pairs:
                samples[key].append(s.elapsed_time(e))
        rows.append({"t_s": round(t0 - (end - seconds), 3), **{k: statistics.median(v) for k, v in samples.items()},
                     **clocks.window(t0, time.perf_counter())})
    return rows


def summarize(rows: list[dict], keys: list[str]) -> dict[str, Any]:
    first, last = rows[: max(1, len(rows) // 10)], rows[-max(1, len(rows) // 10):]
    out = {}
    for k in keys:
        out[k] = {"first_ms": statistics.median(r[k] for r in first), "last_ms": statistics.median(r[k] for r in last)}
    for field in ("sm_mhz", "watts"):
        vals_f = [r[field] for r in first if r[field] is not None]
        vals_l = [r[field] for r in last if r[field] is not None]
        out[field] = {"first": statistics.mean(vals_f) if vals_f else None,
                      "last": statistics.mean(vals_l) if vals_l else None}
    return out


def template(name: str, params: dict) -> Callable:
    module = exec_module_file(str(ROOT / "knowledge" / "templates" / name), f"probe_{name}_{len(params)}")
    module.PARAMS.update(params)
    return module.matmul if hasattr(module, "matmul") else module.ModelNew().forward


def bench_pair(label: str, ref: Callable, cand: Callable, clocks: ClockSampler, backend: Any,
               drift_s: float) -> dict[str, Any]:
    import triton.testing

    row: dict[str, Any] = {"case": label}
    for name, fn in (("ref", ref), ("cand", cand)):
        for warmup, rep in ((25, 100), (100, 500)):
            row[f"{name}_do_bench_{warmup}_{rep}"] = measured(clocks, lambda fn=fn, w=warmup, r=rep: (
                triton.testing.do_bench(fn, warmup=w, rep=r, return_mode="median")))
    inter = measured(clocks, lambda: backend.time_interleaved({"ref": ref, "cand": cand}))
    timings = inter.pop("value")
    row["interleaved"] = {"ref": timings["ref"].median_ms, "cand": timings["cand"].median_ms, **inter}
    for k in ("do_bench_25_100", "do_bench_100_500"):
        row[f"speedup_{k}"] = row[f"ref_{k}"]["value"] / row[f"cand_{k}"]["value"]
    row["speedup_interleaved"] = row["interleaved"]["ref"] / row["interleaved"]["cand"]
    if drift_s:
        time.sleep(2)
        alone_ref = sustained({"ref": ref}, drift_s, clocks, backend._flush)
        time.sleep(2)
        alone_cand = sustained({"cand": cand}, drift_s, clocks, backend._flush)
        time.sleep(2)
        both = sustained({"ref": ref, "cand": cand}, drift_s, clocks, backend._flush)
        row["sustained"] = {"ref_alone": summarize(alone_ref, ["ref"]), "cand_alone": summarize(alone_cand, ["cand"]),
                            "interleaved": summarize(both, ["ref", "cand"])}
        row["windows"] = {"ref_alone": alone_ref, "cand_alone": alone_cand, "interleaved": both}
    print(json.dumps({k: v for k, v in row.items() if k != "windows"}, default=str), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="experiments/results/h200/gemm_clocks.json")
    parser.add_argument("--drift-s", type=float, default=2.0)
    parser.add_argument("--smoke", action="store_true", help="interpreter: check the kernels' results only")
    parser.add_argument("--repeat", type=int, default=0,
                        help="only the bf16 template (TMA and pointer kernels) against cuBLAS, N rounds of the "
                             "suite's mirrored do_bench and the chain's block timing: the spread between rounds")
    parser.add_argument("--contexts", type=int, default=0,
                        help="N rounds before, while and after a sandboxed chain evaluation holds the GPU too")
    args = parser.parse_args()
    if args.smoke:
        return smoke()
    if args.repeat:
        return repeat(args.repeat, args.out)
    if args.contexts:
        return contexts(args.contexts, args.out)
    from evoforge.backends.cuda import CudaBackend

    backend = CudaBackend()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    gpu_id = visible if visible.isdigit() else (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    rows: list[dict] = []
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
            "driver": _smi("driver_version"), "power_limit_w": _smi("power.limit"),
            "date": datetime.date.today().isoformat(), "script": "experiments/benchmarks/gemm_clocks.py"}
    with ClockSampler(gpu_id) as clocks, torch.no_grad():
        torch.manual_seed(0)
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        expect = a @ b

        def check(out: torch.Tensor) -> float:
            return float((out.float() - expect.float()).norm() / expect.float().norm())

        cublas = lambda: a @ b  # noqa: E731
        for i, cfg in enumerate(POINTER_CONFIGS):
            fn = template("matmul_bf16.py", cfg)
            row = bench_pair(f"bf16 template {cfg}", cublas, lambda fn=fn: fn(a, b), clocks, backend,
                             args.drift_s if i == 1 else 0)
            row["rel_err"] = check(fn(a, b))
            rows.append(row)
            _save(args.out, meta, rows)
        for i, cfg in enumerate(TMA_CONFIGS):
            try:
                fn = lambda f=template("matmul_bf16.py", {"TMA": True, "SUBTILE": False, **cfg}): f(a, b)  # noqa: E731
                err = check(fn())
            except Exception as exc:  # out of shared memory and the like: recorded, not fatal
                rows.append({"case": f"bf16 tma persistent {cfg}", "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            row = bench_pair(f"bf16 tma persistent {cfg}", cublas, fn, clocks, backend, args.drift_s if i == 1 else 0)
            row["rel_err"] = err
            rows.append(row)
            _save(args.out, meta, rows)
        # fp32 level1/1 seed against torch.matmul fp32 (the chain's case with the largest disagreement)
        task = Task.load("L1/1")
        tm = load_task_module(task)
        torch.manual_seed(1)
        x, y = (t.cuda() for t in tm.get_inputs())
        ref_model = tm.Model(*tm.get_init_inputs()).cuda()
        fn = template("matmul.py", {})
        rows.append(bench_pair("fp32 L1/1 template default", lambda: ref_model(x, y), lambda: fn(x, y), clocks,
                               backend, args.drift_s))
        _save(args.out, meta, rows)


def bf16_fns() -> dict[str, Callable[[], Any]]:
    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    tma, pointer = template("matmul_bf16.py", {}), template("matmul_bf16.py", {"TMA": False, "num_stages": 4})
    return {"cublas": lambda: a @ b, "tma": lambda: tma(a, b), "pointer": lambda: pointer(a, b)}


def rounds_of(fns: dict[str, Callable[[], Any]], rounds: int, label: str = "") -> list[dict[str, Any]]:
    """Rounds of the suite's mirrored do_bench and the chain's block timing of the same functions."""
    import triton.testing
    from evoforge.backends.base import mirrored_times
    from evoforge.backends.cuda import CudaBackend

    backend = CudaBackend()
    bench = lambda f: triton.testing.do_bench(f, warmup=50, rep=300, return_mode="median")  # noqa: E731
    rows = []
    with torch.no_grad():
        for f in fns.values():
            f()
        for r in range(rounds):
            keys = list(fns)
            mirrored = mirrored_times(fns, bench)
            blocks = backend.time_interleaved(fns)
            row = {"label": label, "round": r, **{f"mirrored_{k}_ms": v for k, v in mirrored.items()},
                   **{f"blocks_{k}_ms": t.median_ms for k, t in blocks.items()},
                   **{f"mirrored_{k}_pct_cublas": 100 * mirrored["cublas"] / mirrored[k] for k in keys[1:]},
                   **{f"blocks_{k}_pct_cublas": 100 * blocks["cublas"].median_ms / blocks[k].median_ms
                      for k in keys[1:]},
                   "clocks_power": _smi("clocks.sm,power.draw")}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def _meta(script: str) -> dict[str, Any]:
    return {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
            "driver": _smi("driver_version"), "date": datetime.date.today().isoformat(), "script": script}


def repeat(rounds: int, out: str) -> None:
    """How far apart two honest measurements of the same bf16 kernels land when the board sits at its power cap."""
    _save(out, _meta("experiments/benchmarks/gemm_clocks.py --repeat"), rounds_of(bf16_fns(), rounds))


def contexts(rounds: int, out: str) -> None:
    """The chain's bf16 speedup in its sandboxed process, and this process's measurements before, during and
    after that process holds a CUDA context of its own on the same GPU."""
    from evoforge.judge.chain import ChainOptions
    from evoforge.judge.evaluator import Evaluator
    from evoforge.knowledge import find_template_for

    from evoforge.core import Candidate

    fns = bf16_fns()
    rows = rounds_of(fns, rounds, "alone")
    task = Task.load(str(ROOT / "experiments" / "tasks" / "matmul_bf16_4096.py"))
    evaluator = Evaluator(backend="cuda", arch="nvidia-sm90", options=ChainOptions(trials=3), timeout_s=300)
    chain = []
    for _ in range(2):
        result = evaluator.evaluate(task, Candidate.from_source(find_template_for(task).read_text(), task=task.name))
        chain.append({"status": str(result.status), "speedup": result.speedup, "runtime_ms": result.runtime_ms,
                      "ref_ms": result.ref_ms})
        print(json.dumps(chain[-1]), flush=True)
    rows += rounds_of(fns, rounds, "evaluator process alive")
    evaluator.close()
    rows += rounds_of(fns, rounds, "evaluator closed")
    _save(out, {**_meta("experiments/benchmarks/gemm_clocks.py --contexts"), "chain": chain}, rows)


def smoke() -> None:
    """The kernels this script times, on the interpreter at small shapes: both paths of matmul_bf16.py."""
    torch.manual_seed(0)
    for m, n, k in [(256, 256, 128), (192, 320, 96)]:
        a = torch.randn(m, k, dtype=torch.bfloat16)
        b = torch.randn(k, n, dtype=torch.bfloat16)
        ref = a.float() @ b.float()
        for params in ({"TMA": True, "SUBTILE": False}, {"TMA": True, "SUBTILE": True}, {"TMA": False}):
            fn = template("matmul_bf16.py", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 2,
                                             "num_warps": 4, "num_stages": 3, **params})
            err = float((fn(a, b).float() - ref).norm() / ref.norm())
            print(json.dumps({"shape": [m, n, k], **params, "rel_err": err}))
            assert err < 1e-2, err


def _save(out: str, meta: dict, rows: list[dict]) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))


def _smi(field: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip().split("\n")[0]
    except Exception:
        return ""


if __name__ == "__main__":
    main()
