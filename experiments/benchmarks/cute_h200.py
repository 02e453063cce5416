"""The CuTe seeds through the verification chain on a CUDA GPU (written for the lent H200).

For each template (ReLU on KernelBench L1/19, fp32 GEMM on L1/1): compile-only first (nvcc time, or the trimmed
error), then the full chain in the sandbox on ``cuda``: correctness at the KernelBench shape and at an odd
shape that exercises every predicated edge, anti-cheat (the launches must come through the CuTe loader), and
interleaved timing against the reference (PyTorch's relu; torch.matmul, which is cuBLAS). Writes
experiments/results/cute/h200.txt with the GPU, driver, torch, nvcc, CUTLASS and the date. Any failure is a
line in that file, never a crash of the script.

  python experiments/benchmarks/cute_h200.py                       # on the GPU machine, nvcc there
  python experiments/benchmarks/cute_h200.py --prebuild .cute_prebuilt --arch nvidia-sm90   # here, no GPU
  EVOFORGE_CUTE_PREBUILT=.cute_prebuilt python experiments/benchmarks/cute_h200.py           # GPU, no nvcc
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "knowledge" / "templates"
# (template, task, extra correctness shapes, what the throughput column counts, --quick main shape)
CASES = [
    ("cute_elementwise_relu", "L1/19", "batch_size=3,dim=777", "bytes", {"batch_size": 256}),
    ("cute_gemm", "L1/1", "N=1001", "flops", {"N": 2048}),
]
PASS_ENV = ("EVOFORGE_CUTE_CACHE", "EVOFORGE_CUTE_PREBUILT", "EVOFORGE_CUTLASS_INCLUDE", "EVOFORGE_KERNELBENCH")


def _run(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"unavailable ({e.__class__.__name__})"


def environment() -> list[str]:
    lines = [f"date: {datetime.datetime.now().isoformat(timespec='seconds')}", f"host: {platform.node()}",
             f"python: {platform.python_version()}"]
    try:
        import torch

        lines.append(f"torch: {torch.__version__} (cuda {torch.version.cuda})")
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            lines.append(f"gpu: {p.name}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB, "
                         f"capability {p.major}.{p.minor}")
        else:
            lines.append("gpu: none (torch.cuda.is_available() is False)")
    except Exception as e:
        lines.append(f"torch: import failed ({e})")
    lines.append("driver: " + _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]))
    try:
        import triton

        lines.append(f"triton: {triton.__version__}")
    except Exception:
        lines.append("triton: absent")
    from evoforge.backends import cute

    try:
        lines.append(f"nvcc: {cute.nvcc_path()} ({cute.nvcc_version()})")
    except Exception as e:
        lines.append(f"nvcc: ABSENT ({e})")
    try:
        lines.append(f"cute headers: {cute.cutlass_include_dir()} (nvidia-cutlass {cute._cutlass_version()})")
    except Exception as e:
        lines.append(f"cute headers: ABSENT ({e})")
    lines.append(f"EVOFORGE_CUTE_PREBUILT: {os.environ.get('EVOFORGE_CUTE_PREBUILT') or '(not set)'}")
    return lines


def param_sets(source: str, sweep: bool) -> list[dict[str, Any]]:
    from evoforge.core import declared_space

    space, defaults = declared_space(source)
    if not sweep or not space:
        return [defaults]
    keys = sorted(space)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(space[k] for k in keys))]


def prebuild(out_dir: Path, arch: str, sweep: bool) -> int:
    """Build every case's library here (no GPU needed) into ``out_dir``, named as ``load`` looks them up."""
    from evoforge.backends import cute

    from evoforge.core import declared_space

    failures = 0
    for template, *_ in CASES:
        source = (TEMPLATES / f"{template}.py").read_text()
        cuda_src, _ = cute.cuda_source_of(source)
        for params in param_sets(source, sweep):
            merged = {**declared_space(source)[1], **params}
            try:
                path = cute.prebuild(cuda_src, out_dir, arch=arch, params=merged)
                print(f"{template} {merged}: {path}")
            except Exception as e:
                failures += 1
                print(f"{template} {merged}: FAILED {e}")
    return 1 if failures else 0


def throughput(kind: str, task: Any, runtime_ms: float | None) -> str:
    """GB/s (ReLU: read + write) or TFLOP/s (GEMM: 2 N^3) at the main shape."""
    if not runtime_ms:
        return ""
    try:
        from evoforge.task import load_task_module

        module = load_task_module(task)
        if kind == "flops":
            n = int(module.N)
            return f"{2 * n**3 / (runtime_ms * 1e-3) / 1e12:.1f} TFLOP/s"
        elements = int(module.batch_size) * int(module.dim)
        return f"{2 * 4 * elements / (runtime_ms * 1e-3) / 1e9:.0f} GB/s"
    except Exception:
        return ""


def evaluate_cases(args: argparse.Namespace) -> list[str]:
    import torch
    from evoforge.backends import cute
    from evoforge.backends.chain import ChainOptions
    from evoforge.backends.evaluator import Evaluator

    from evoforge.core import Candidate
    from evoforge.task import Task, parse_shapes

    lines: list[str] = []
    have_gpu = torch.cuda.is_available()
    try:
        cute.nvcc_path()
        have_nvcc = True
    except Exception:
        have_nvcc = False
        lines.append("nvcc is absent here: libraries must come prebuilt (run this script with --prebuild DIR on a "
                     "machine with nvcc, carry DIR, set EVOFORGE_CUTE_PREBUILT=DIR)")
    arch = args.arch or "nvidia-sm90"
    if have_gpu and not args.arch:
        major, minor = torch.cuda.get_device_capability(0)
        arch = f"nvidia-sm{major}{minor}"
    evaluator = None
    if have_gpu:
        child_env = {k: os.environ[k] for k in PASS_ENV if os.environ.get(k)}
        evaluator = Evaluator(backend="cuda", arch=arch, timeout_s=args.timeout, child_env=child_env,
                              options=ChainOptions(trials=args.trials, timing_budget_ms=args.timing_budget_ms))
    else:
        lines.append("no CUDA device: compile-only results below; correctness and timing NOT run")
    try:
        for template, task_spec, shapes, kind, quick in CASES:
            source = (TEMPLATES / f"{template}.py").read_text()
            for params in param_sets(source, args.sweep):
                label = f"{template} on {task_spec} {params}"
                try:
                    task = Task.load(task_spec, overrides=quick if args.quick else {}, shapes=parse_shapes(shapes))
                    candidate = Candidate.from_source(source, task=task.name, params=params, language="cute")
                    if have_nvcc:
                        t0 = time.perf_counter()
                        c = cute.compile_only(candidate, arch)
                        lines.append(f"{label}: compile-only {c.status} in {time.perf_counter() - t0:.1f} s"
                                     + ("" if c.ok else f"\n    {c.message}".replace("\n", "\n    ")))
                    if evaluator is None:
                        continue
                    r = evaluator.evaluate(task, candidate)
                    if r.ok:
                        speed = (f"candidate {r.runtime_ms:.4g} ms, reference {r.ref_ms:.4g} ms, speedup "
                                 f"{r.speedup:.3g}x, {throughput(kind, task, r.runtime_ms)}"
                                 if r.runtime_ms is not None else "not timed")
                        floor = f", {r.pct_of_floor:.0f}% of floor" if r.pct_of_floor is not None else ""
                        lines.append(f"{label}: chain ok (correct by {r.criterion}, max abs err "
                                     f"{r.max_abs_err:.3g}, also at {shapes}); {speed}{floor}"
                                     + (f"; {r.message}" if r.message else ""))
                    else:
                        lines.append(f"{label}: chain {r.status}\n    " + r.message.replace("\n", "\n    "))
                except Exception as e:  # recorded, never fatal: the other cases still run
                    lines.append(f"{label}: SCRIPT ERROR {e.__class__.__name__}: {e}\n    "
                                 + traceback.format_exc(limit=3).replace("\n", "\n    "))
                print(lines[-1], flush=True)
    finally:
        if evaluator is not None:
            evaluator.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "experiments" / "results" / "cute" / "h200.txt"))
    parser.add_argument("--arch", default=None, help="knowledge-base arch (default: the GPU's)")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=480.0, help="seconds per evaluation (compile included)")
    parser.add_argument("--timing-budget-ms", type=float, default=1000.0)
    parser.add_argument("--sweep", action="store_true", help="every point of each template's SPACE")
    parser.add_argument("--quick", action="store_true", help="smaller main shapes (ReLU 256 rows, GEMM N=2048)")
    parser.add_argument("--prebuild", default=None, metavar="DIR",
                        help="only build the libraries into DIR (no GPU needed) and exit")
    args = parser.parse_args(argv)
    if args.prebuild:
        return prebuild(Path(args.prebuild), args.arch or "nvidia-sm90", args.sweep)
    started = time.perf_counter()
    out = Path(args.out)
    lines = ["# CuTe templates through the evoforge verification chain", ""]
    try:
        lines += environment()
    except Exception as e:
        lines.append(f"environment: could not be read ({e})")
    lines.append("")
    try:
        lines += evaluate_cases(args)
    except Exception as e:
        lines.append(f"SCRIPT ERROR {e.__class__.__name__}: {e}")
        lines.append(traceback.format_exc())
    lines.append("")
    lines.append(f"total {time.perf_counter() - started:.0f} s; command: {' '.join(sys.argv)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
