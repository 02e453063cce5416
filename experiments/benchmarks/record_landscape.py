"""Record a tuning landscape on a GPU: every config of a template's space, timed and judged for correctness.

A landscape is what `evoforge search-bench` replays on a CPU (backends/replay.py): for every config of the
space, the median time of the whole forward (triton.testing.do_bench, L2 flushed) and a status: ``ok``,
``incorrect`` (it ran, and the verification chain's comparator, backends/compare.py, rejects its output:
dtype-aware allclose, else the float64 criterion with the chain's yardstick: the reference's own distance from
float64 or, for fp32, that of inputs rounded to a 3-pass split's 16 bits), or the exception's
class name (``OutOfResources``, ``CompilationError``...). An incorrect config is timed too, and every row that ran
carries rel_err (Frobenius, against float64) and max_abs_err. These landscapes are the ones where the fastest
configs compute the wrong answer:

- matmul_fp32_split_4096: knowledge/templates/matmul.py (fp32, 4096^3) over SPLIT x PRECISION with plain tf32
  added (PyTorch's fp32 matmul is no TF32: plain TF32 is fast and incorrect, bf16x3 the fastest correct);
- matmul_fp16_acc_4096: knowledge/templates/matmul_fp16.py (fp16, 4096^3) over ACC (fp32, fp16 accumulator);
- matmul_fp16_fp8_4096: the same template over OPERANDS (fp16, fp8 e4m3 operands: an unsafe fast path).
- matmul_fp16_acc_2048: matmul_fp16_acc_4096's space at 2048^3 (fewer output tiles than SMs for the largest
  tiles), recorded after the tuner's design was fixed: a held-out check.

Configs that build the same kernel (a PRECISION the split kernels never read) share one measurement: the row
says ``same_as`` (the config measured). Before anything is timed, worker processes compile every distinct kernel
by running the forward at a small shape with the same divisibility (the same Triton cache key); the measuring
process then loads them from Triton's disk cache, and no other process uses the GPU while it times.

    python experiments/benchmarks/record_landscape.py --out experiments/results/search/landscapes      # GPU
    python experiments/benchmarks/record_landscape.py --smoke --out /tmp/smoke                          # CPU
    python experiments/benchmarks/record_landscape.py matmul_fp16_acc_4096 --max-seconds 150 --out DIR

``--smoke`` runs a few configs per landscape (each categorical value at least once) at tiny sizes on the Triton
interpreter and writes the same files, timed with one wall-clock call (``timing_representative: false``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "knowledge" / "templates"
WARMUP_MS, REP_MS = 10, 40


@dataclass(frozen=True)
class Spec:
    """One landscape: a template, its inputs, the space recorded, and which configs build the same kernel."""

    template: str
    dtype: str
    size: int  # M = N = K
    space: dict[str, list[Any]]
    fixed: dict[str, Any] = field(default_factory=dict)
    same_kernel: Callable[[dict[str, Any]], tuple] | None = None
    note: str = ""
    # Parameters read only on some paths: {param: {other: [values under which it is read]}}. The recorder measures
    # twins once (``same_kernel``); a replay answers a twin from the file (backends/replay.py).
    when: dict[str, dict[str, list[Any]]] = field(default_factory=dict)


def _fp32_kernel(cfg: dict[str, Any]) -> tuple:
    """SPLIT bf16x3 / tf32x3 never read PRECISION (the split kernels issue their own MMAs)."""
    return tuple(sorted({**cfg, "PRECISION": cfg["PRECISION"] if cfg["SPLIT"] == "none" else None}.items(),
                        key=lambda kv: kv[0]))


TILES = {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256]}
SPECS: dict[str, Spec] = {
    "matmul_fp32_split_4096": Spec(
        template="matmul", dtype="float32", size=4096,
        space={**TILES, "BLOCK_K": [32, 64], "num_warps": [4, 8], "num_stages": [2, 3, 4],
               "SPLIT": ["bf16x3", "tf32x3", "none"], "PRECISION": ["tf32", "tf32x3", "ieee"]},
        fixed={"GROUP_M": 8, "B_KMAJOR": True}, same_kernel=_fp32_kernel, when={"PRECISION": {"SPLIT": ["none"]}},
        note="PRECISION is read only when SPLIT is none; plain tf32 is not in the template's SPACE (it fails an "
             "fp32 task), it is recorded here because it is the fast, incorrect neighbour of the correct configs"),
    "matmul_fp16_acc_4096": Spec(
        template="matmul_fp16", dtype="float16", size=4096,
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4, 5],
               "ACC": ["fp32", "fp16"]},
        fixed={"GROUP_M": 8, "OPERANDS": "fp16"}, note="ACC fp16: the MMA accumulates in fp16"),
    "matmul_fp16_fp8_4096": Spec(
        template="matmul_fp16", dtype="float16", size=4096,
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4, 5],
               "OPERANDS": ["fp16", "fp8"]},
        fixed={"GROUP_M": 8, "ACC": "fp32"}, note="OPERANDS fp8: operands rounded to float8 e4m3 before the GEMM"),
    # Held out from the tuner's design: recorded after the tile-with-its-warps step was chosen on the others. At
    # 2048 a 128x256 tile leaves the H200 fewer output tiles (128) than SMs (132): smaller tiles may win here.
    "matmul_fp16_acc_2048": Spec(
        template="matmul_fp16", dtype="float16", size=2048,
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4, 5],
               "ACC": ["fp32", "fp16"]},
        fixed={"GROUP_M": 8, "OPERANDS": "fp16"}, note="ACC fp16: the MMA accumulates in fp16"),
}
SMOKE_SIZE = 128
PRECOMPILE_SIZE = 512  # a multiple of every tile: the same EVEN_K / EVEN_MN and divisibility as the full size


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def configs(spec: Spec) -> list[dict[str, Any]]:
    combos = [dict(zip(spec.space, v, strict=True)) for v in itertools.product(*spec.space.values())]
    random.Random(0).shuffle(combos)  # a run stopped by --max-seconds leaves a uniform sample, not one corner
    return combos


def smoke_configs(spec: Spec) -> list[dict[str, Any]]:
    """Small tiles, and every value of every categorical parameter at least once."""
    small = {k: min(v) if all(isinstance(x, int) for x in v) else v[0] for k, v in spec.space.items()}
    out = [small]
    for name, values in spec.space.items():
        if not all(isinstance(x, int) for x in values):
            out += [{**small, name: v} for v in values[1:]]
    return out


def make_inputs(spec: Spec, size: int, device: str, seed: int = 0):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = getattr(torch, spec.dtype)
    a = torch.randn(size, size, generator=gen).to(dtype).to(device)
    b = torch.randn(size, size, generator=gen).to(dtype).to(device)
    return a, b


def reference(a, b):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default: an fp32 matmul is fp32
    return torch.matmul(a, b)


def float64_references(inputs, round_significand: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The float64 result, and the chain's yardstick for an fp32 output: the float64 result on inputs rounded to
    the 16 significant bits a 3-pass split keeps (backends/chain.py passes both to compare_outputs)."""
    return (reference(*(t.double() for t in inputs)),
            reference(*(t.double() for t in round_significand(list(inputs)))))


# --- compile ahead (worker processes) --------------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _worker_init(template: str, spec_name: str, device: str, size: int) -> None:
    _WORKER["module"] = load_module(TEMPLATES / f"{template}.py", f"precompile_{template}")
    _WORKER["inputs"] = make_inputs(SPECS[spec_name], size, device)
    _WORKER["cuda"] = device == "cuda"


def _worker_compile(cfg: dict[str, Any]) -> str:
    """Run the forward once at the small shape: compiles (and loads) the kernels into Triton's disk cache."""
    import torch

    module = _WORKER["module"]
    module.PARAMS.update(cfg)
    try:
        module.ModelNew()(*_WORKER["inputs"])
        if _WORKER["cuda"]:
            torch.cuda.synchronize()
        return "ok"
    except Exception as exc:  # recorded by the measuring process, which meets the same error
        return type(exc).__name__


# --- measure -------------------------------------------------------------------------------------------------
def measure(module: ModuleType, cfg: dict[str, Any], inputs, expected, references, compare, *, smoke: bool) -> dict:
    """``references``: float64 results on the inputs and on the inputs rounded as a 3-pass split rounds them."""
    import torch

    ref64, rounded64 = references

    module.PARAMS.update(cfg)
    model = module.ModelNew()
    try:
        out = model(*inputs)
        if not smoke:
            torch.cuda.synchronize()
    except Exception as exc:
        return {"ms": None, "status": type(exc).__name__, "message": str(exc).strip().splitlines()[-1][:300]
                if str(exc).strip() else ""}
    verdict = compare(out, expected, reference64=lambda: ref64, rounded64=lambda: rounded64)
    diff = out.double() - ref64
    row = {"status": "ok" if verdict.ok else "incorrect", "criterion": verdict.criterion,
           "rel_err": float(diff.norm() / ref64.norm()), "max_abs_err": float(diff.abs().max()),
           "ref_max_abs_err": float((expected.double() - ref64).abs().max())}
    try:
        if smoke:
            t0 = time.perf_counter()
            model(*inputs)
            row["ms"] = (time.perf_counter() - t0) * 1e3
        else:
            from triton.testing import do_bench

            row["ms"] = float(do_bench(lambda: model(*inputs), warmup=WARMUP_MS, rep=REP_MS, return_mode="median"))
    except Exception as exc:
        row.update(ms=None, status=type(exc).__name__, message=str(exc).strip()[:300])
    return row


def kernel_key(spec: Spec, cfg: dict[str, Any]) -> tuple:
    return spec.same_kernel(cfg) if spec.same_kernel else tuple(sorted(cfg.items()))


def precompile(spec: Spec, name: str, todo: list[dict[str, Any]], *, workers: int, seconds: float, device: str,
               size: int) -> None:
    """Compile every distinct kernel in worker processes before anything is timed (they run it at a small shape,
    so they use the GPU: never while a measurement runs). What is not done in ``seconds`` compiles when measured."""
    import multiprocessing
    from concurrent.futures import wait

    keys: dict[tuple, dict[str, Any]] = {}
    for cfg in todo:
        keys.setdefault(kernel_key(spec, cfg), {**spec.fixed, **cfg})
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                             initargs=(spec.template, name, device, size)) as pool:
        futures = [pool.submit(_worker_compile, cfg) for cfg in keys.values()]
        wait(futures, timeout=seconds)
        for f in futures:
            f.cancel()


def device_alive() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


def record(name: str, *, out_dir: Path, smoke: bool, max_seconds: float, workers: int) -> Path:
    spec = SPECS[name]
    device = "cpu" if smoke else "cuda"
    comparator = load_module(REPO / "backends" / "compare.py", "evoforge_compare")
    compare = comparator.compare_outputs
    module = load_module(TEMPLATES / f"{spec.template}.py", f"landscape_{spec.template}")
    module.PARAMS.update(spec.fixed)
    size = SMOKE_SIZE if smoke else spec.size
    inputs = make_inputs(spec, size, device)
    expected = reference(*inputs)
    references = float64_references(inputs, comparator.round_significand)
    baseline = None
    if not smoke:
        from triton.testing import do_bench

        baseline = float(do_bench(lambda: reference(*inputs), warmup=25, rep=100, return_mode="median"))
    todo = smoke_configs(spec) if smoke else configs(spec)
    t0 = time.monotonic()
    if workers > 0:
        precompile(spec, name, todo, workers=workers, seconds=0.6 * max_seconds, device=device,
                   size=size if smoke else PRECOMPILE_SIZE)
    rows: list[dict[str, Any]] = []
    measured: dict[tuple, dict[str, Any]] = {}
    stopped = ""
    path = out_dir / f"{name}.json"
    for n, cfg in enumerate(todo):
        if n and n % 50 == 0:
            write(path, spec, smoke=smoke, size=size, baseline=baseline, rows=rows,
                  seconds=time.monotonic() - t0, stopped=f"in progress: {n} of {len(todo)} configs")
        if time.monotonic() - t0 > max_seconds:
            stopped = f"stopped by --max-seconds {max_seconds:g} after {len(rows)} of {len(todo)} configs"
            break
        key = kernel_key(spec, cfg)
        if key in measured:
            first = measured[key]
            rows.append({**cfg, **{k: v for k, v in first.items() if k not in cfg},
                         "same_as": {k: first[k] for k in cfg}})
            continue
        row = {**cfg, **measure(module, cfg, inputs, expected, references, compare, smoke=smoke)}
        rows.append(row)
        measured[key] = row
        if not smoke and row["ms"] is None and not device_alive():
            stopped = f"the device failed after config {cfg} ({row['status']}); recording stopped"
            break
    return write(path, spec, smoke=smoke, size=size, baseline=baseline, rows=rows, seconds=time.monotonic() - t0,
                 stopped=stopped or ("" if len(rows) == len(todo) else "incomplete"))


def write(path: Path, spec: Spec, *, smoke: bool, size: int, baseline: float | None, rows: list[dict[str, Any]],
          seconds: float, stopped: str) -> Path:
    """The landscape file; written every few configs as well, so a run killed from outside leaves what it measured
    (``complete: false``)."""
    import torch
    import triton

    data = {
        "kernel": f"knowledge/templates/{spec.template}.py", "dtype": f"torch.{spec.dtype}",
        "M": size, "N": size, "K": size,
        "gpu": "CPU (Triton interpreter, smoke run)" if smoke else torch.cuda.get_device_name(),
        "triton": triton.__version__, "torch": torch.__version__,
        "baseline_ms": {"torch": baseline} if baseline is not None else {},
        "space": spec.space, **({"when": spec.when} if spec.when else {}), "fixed_params": spec.fixed,
        "note": spec.note,
        "recorded": {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                     "script": "experiments/benchmarks/record_landscape.py", "commit": _commit(),
                     "python": platform.python_version(), "host": platform.node(),
                     "timing": "wall clock of one call (interpreter)" if smoke else
                     f"triton.testing.do_bench(warmup={WARMUP_MS}, rep={REP_MS}, return_mode='median'), L2 flushed",
                     "timing_representative": not smoke,
                     "correctness": "backends/compare.py compare_outputs, as the verification chain calls it: "
                                    "allclose with the dtype's tolerance against torch.matmul, else within the "
                                    "float64 criterion (rms at most 2x, max at most 8x the larger of the "
                                    "reference's own distance and a 16-bit-input split's)",
                     "seconds": round(seconds, 1), "complete": not stopped,
                     **({"stopped": stopped} if stopped else {})},
        "rows": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.part")
    tmp.write_text(json.dumps(data, indent=0) + "\n")
    tmp.replace(path)
    return path


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def summary(path: Path) -> str:
    data = json.loads(path.read_text())
    rows = data["rows"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    ok = [r for r in rows if r["status"] == "ok" and r.get("ms") is not None]
    line = f"{path.name}: {len(rows)} configs, {counts}, {data['recorded']['seconds']} s"
    if ok:
        best = min(ok, key=lambda r: r["ms"])
        fast_wrong = sum(r["status"] == "incorrect" and r.get("ms") is not None and r["ms"] < best["ms"]
                         for r in rows)
        line += (f"; best correct {best['ms']:.4f} ms {({k: best[k] for k in data['space']})}; "
                 f"{fast_wrong} incorrect configs faster than it")
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(SPECS), help=f"landscapes to record (default: all of {list(SPECS)})")
    ap.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "search" / "landscapes")
    ap.add_argument("--smoke", action="store_true", help="a few configs at tiny sizes on the Triton interpreter")
    ap.add_argument("--max-seconds", type=float, default=200.0, help="per landscape; the file says if it stopped")
    ap.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)),
                    help="processes compiling ahead (0: compile in the measuring process)")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in SPECS]
    if unknown:
        print(f"unknown landscape(s) {unknown}: choose from {list(SPECS)}", file=sys.stderr)
        return 2
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    else:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA device: record on a GPU, or run --smoke here", file=sys.stderr)
            return 2
    failed = 0
    for name in args.names:
        try:
            path = record(name, out_dir=args.out, smoke=args.smoke, max_seconds=args.max_seconds,
                          workers=args.workers)
            print(summary(path), flush=True)
        except Exception:
            failed += 1
            print(f"{name}: recording failed\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
