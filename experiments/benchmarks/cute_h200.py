"""The CuTe seeds on a CUDA GPU, in one call of at most ~8 minutes (written for the lent H200, 16 CPU cores).

1. Builds, ahead and in parallel (``backends/cute_builds.BuildAhead``, one nvcc per CPU core): the Hopper bf16
   GEMM seed at a list of legal points of its SPACE (``BF16_CONFIGS``, most promising first; the knowledge
   base's hard rules checked on each), the 3xTF32 fp32 GEMM seed, the fp32 CUDA-core GEMM and ReLU seeds.
   Compile time per build is reported. Builds not started by the compile deadline are skipped (said).
2. A sweep on the GPU, in this process: every built bf16 config at 4096^3 and at the KernelBench GEMM shapes
   (L1/1, L1/2 = L1/16-18, L1/6, L1/7, L1/8, L1/9) in bf16, against torch.matmul (cuBLAS), timed
   interleaved with ``triton.testing.do_bench`` (median, L2 flushed); a config whose output is far from
   cuBLAS's is marked wrong and never best.
3. The verdicts, through evoforge's real verification chain (sandboxed candidate process, correctness trials
   and an odd shape, anti-cheat, interleaved timing) on ``cuda``: the best bf16 config per shape (the
   experiments/tasks/matmul_bf16_4096.py task at that shape), the 3xTF32 fp32 GEMM on L1/1 (fp32: judged
   against float64), and the two older seeds.

Writes a markdown report to ``--out`` (default ``$OUT/cute_h200.md`` when $OUT is set). Needs torch, Triton,
nvcc and the CUTLASS/CuTe headers: ``EVOFORGE_CUTLASS_INCLUDE`` names the ``include`` folder (holding ``cute/``
and ``cutlass/``, 26 MB) when the nvidia-cutlass package is not installed; a copy carried as ``.cutlass_include``
at the repository root is found without it. KernelBench (``EVOFORGE_KERNELBENCH``) for the L1/1 and L1/19
verdicts. No optuna or ray. Any failure is a line of the report, never a crash of the script.

  EVOFORGE_CUTLASS_INCLUDE=$PWD/.cutlass_include python experiments/benchmarks/cute_h200.py --out $OUT/cute_h200.md
  python experiments/benchmarks/cute_h200.py --prebuild .cute_prebuilt      # here, no GPU: build only
"""

from __future__ import annotations

import argparse
import datetime
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
BF16 = "cute_gemm_bf16_sm90"
FP32_SPLIT = "cute_gemm_fp32_3xtf32"
PASS_ENV = ("EVOFORGE_CUTE_CACHE", "EVOFORGE_CUTE_PREBUILT", "EVOFORGE_CUTLASS_INCLUDE", "EVOFORGE_KERNELBENCH")

# Legal points of the bf16 seed's SPACE, most promising first (what a CUTLASS developer tries first on Hopper:
# 128x256 and 256x128 cooperative tiles with 2-CTA clusters, pingpong for smaller tiles, stream-K for shapes
# with few tiles and a long K). Unset keys take the seed's PARAMS.
BF16_CONFIGS: list[dict[str, Any]] = [
    {},  # the seed's PARAMS: 128x256x64 cooperative, cluster 2x1, auto stages, persistent
    # the best of the run of 2026-12-01 08:29 (h200_2026-12-01_0829.md): 4096^3 90.4% and L1/2 95.5% with
    # {CLUSTER_M 1, SWIZZLE 2}; L1/9 94.6% with {CLUSTER_M 1}; L1/7 105% with 64x256 pingpong
    {"CLUSTER_M": 1, "SWIZZLE": 2},
    {"CLUSTER_M": 1},
    {"CLUSTER_M": 1, "CLUSTER_N": 2},
    {"CLUSTER_M": 1, "CLUSTER_N": 2, "SWIZZLE": 4},
    {"CLUSTER_M": 1, "CLUSTER_N": 2, "SWIZZLE": 8, "RASTER": "along_n"},
    {"SWIZZLE": 4, "RASTER": "along_m"},
    # the tile walk around the 4096^3 best
    {"CLUSTER_M": 1, "SWIZZLE": 2, "RASTER": "along_n"},
    {"CLUSTER_M": 1, "SWIZZLE": 2, "RASTER": "along_m"},
    {"CLUSTER_M": 1, "SWIZZLE": 2, "STAGES": 4},
    {"CLUSTER_M": 1, "CLUSTER_N": 2, "SWIZZLE": 2},
    {"SWIZZLE": 2},
    {"CLUSTER_M": 1, "SWIZZLE": 4},
    {"CLUSTER_M": 1, "SWIZZLE": 8},
    # K of 32 and 64 (L1/9, L1/7): a 32-deep K tile wastes no MMA on zero fill
    {"CLUSTER_M": 1, "TILE_K": 32},
    {"CLUSTER_M": 1, "SWIZZLE": 2, "TILE_K": 32},
    # L1/9 writes a 2 GiB C from K 32: pingpong hides one tile's epilogue behind the other's math
    {"TILE_M": 64, "SCHEDULE": "pingpong", "TILE_K": 32},
    {"TILE_M": 64, "SCHEDULE": "pingpong", "CLUSTER_M": 1, "TILE_K": 32},
    # L1/6 (256x256 output, K 524288: four 128x128 tiles for 132 SMs): stream-K's heuristic, then split-K
    {"TILE_N": 128, "TILES": "streamk", "CLUSTER_M": 1},
    {"TILE_N": 128, "TILES": "streamk", "CLUSTER_M": 1, "REDUCTION": "nondeterministic"},
    {"TILE_N": 128, "TILES": "streamk", "CLUSTER_M": 1, "SPLITS": 16},
    {"TILE_N": 128, "TILES": "streamk", "CLUSTER_M": 1, "SPLITS": 32},
    {"TILE_N": 128, "TILES": "streamk", "CLUSTER_M": 1, "SPLITS": 32, "REDUCTION": "nondeterministic"},
    {"TILE_N": 64, "TILES": "streamk", "CLUSTER_M": 1, "SPLITS": 16, "REDUCTION": "nondeterministic"},
    {"TILE_N": 128, "TILE_K": 128, "TILES": "streamk", "CLUSTER_M": 1, "SPLITS": 32, "REDUCTION": "nondeterministic"},
    {"TILES": "streamk"},
    {"STAGES": 4},
    {"TILE_M": 256, "TILE_N": 128},
    {"TILE_M": 256, "TILE_N": 128, "CLUSTER_M": 1, "CLUSTER_N": 2},
    {"TILE_M": 64, "SCHEDULE": "pingpong"},
    {"TILE_N": 128, "SCHEDULE": "pingpong"},
]
# (label, KernelBench task it stands for, M, N, K): the GEMM shapes of level 1, in bf16.
SHAPES = [
    ("4096^3 (bf16 task; L1/1's shape)", "matmul_bf16_4096 / L1/1", 4096, 4096, 4096),
    ("L1/2 standard (= L1/16, 17, 18)", "L1/2", 2048, 4096, 8192),
    ("L1/6 large K", "L1/6", 256, 256, 524288),
    ("L1/7 small K", "L1/7", 32768, 32768, 64),
    ("L1/8 irregular", "L1/8", 8205, 5921, 2949),
    ("L1/9 tall-skinny", "L1/9", 32768, 32768, 32),
]


def _run(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"unavailable ({e.__class__.__name__})"


def environment() -> list[str]:
    lines = [f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}", f"- host: {platform.node()}",
             f"- python: {platform.python_version()}, CPU cores: {os.cpu_count()}"]
    try:
        import torch

        lines.append(f"- torch: {torch.__version__} (cuda {torch.version.cuda})")
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            lines.append(f"- gpu: {p.name}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB, "
                         f"capability {p.major}.{p.minor}")
        else:
            lines.append("- gpu: none (torch.cuda.is_available() is False)")
    except Exception as e:
        lines.append(f"- torch: import failed ({e})")
    lines.append("- driver: " + _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]))
    from evoforge.backends import cute

    try:
        lines.append(f"- nvcc: {cute.nvcc_path()} ({cute.nvcc_version()})")
    except Exception as e:
        lines.append(f"- nvcc: ABSENT ({e})")
    try:
        lines.append(f"- cute headers: {cute.cutlass_include_dir()} (nvidia-cutlass {cute.cutlass_version()})")
    except Exception as e:
        lines.append(f"- cute headers: ABSENT ({e})")
    lines.append(f"- build cache: {cute.default_cache_dir()}")
    return lines


def _source(template: str) -> str:
    return (TEMPLATES / f"{template}.py").read_text()


def builds_wanted(arch: str) -> list[tuple[str, dict[str, Any]]]:
    """(template, full params) in build order; bf16 points the knowledge base calls illegal are left out."""
    from evoforge import knowledge
    from evoforge.core import declared_space

    out: list[tuple[str, dict[str, Any]]] = []
    defaults = declared_space(_source(BF16))[1]
    for change in BF16_CONFIGS:
        params = {**defaults, **change}
        legal, violations = knowledge.is_legal(params, arch, source=_source(BF16))
        if legal:
            out.append((BF16, params))
        else:
            print(f"skipped illegal {params}: {[v.rule for v in violations]}", flush=True)
    fp32 = declared_space(_source(FP32_SPLIT))[1]
    out.insert(1, (FP32_SPLIT, fp32))  # early: its verdict is one of the figures asked for
    out.append((FP32_SPLIT, {**fp32, "BM": 64}))
    for template in ("cute_gemm", "cute_elementwise_relu"):
        out.append((template, declared_space(_source(template))[1]))
    return out


def build_phase(arch: str, workers: int, start_deadline: float, wait_deadline: float,
                lines: list[str]) -> dict[tuple[str, str], Any]:
    """Build everything in parallel; returns {(template, params json): BuildOutcome} of the finished builds."""
    import json

    from evoforge.backends.cute_builds import BuildAhead

    from evoforge.core import Candidate

    ahead = BuildAhead(arch=arch, workers=workers)
    wanted = builds_wanted(arch)
    futures = {}
    started = time.monotonic()
    for template, params in wanted:
        futures[(template, json.dumps(params, sort_keys=True))] = ahead.submit(
            Candidate.from_source(_source(template), task="t", params=params))
    lines.append(f"{len(wanted)} builds submitted to {ahead.workers} nvcc workers (sm target {ahead.target})")
    done: dict[tuple[str, str], Any] = {}
    while time.monotonic() < wait_deadline and len(done) < len(futures):
        for key, f in futures.items():
            if key not in done and f.done() and not f.cancelled():
                done[key] = f.result()
                o = done[key]
                print(f"built {key[0]} {key[1]}: {o.how} {o.compile_s:.1f} s"
                      + (f" FAILED {o.failure.message[:200]}" if o.failure else ""), flush=True)
        if time.monotonic() > start_deadline:
            for f in futures.values():
                f.cancel()  # the ones not started yet
            if all(f.done() for f in futures.values()):
                break
        time.sleep(0.5)
    ahead.close()  # builds still running are killed: the GPU phases do not share the CPU with nvcc
    skipped = [k for k in futures if k not in done]
    lines.append(f"build phase: {time.monotonic() - started:.0f} s wall, {len(done)} finished, {len(skipped)} "
                 "not finished by the deadline (skipped)")
    lines.append("")
    lines.append("| template | params | build | compile s | result |")
    lines.append("| --- | --- | --- | ---: | --- |")
    for (template, params), o in sorted(done.items(), key=lambda kv: kv[0][0]):
        status = "ok" if o.failure is None else "compile_error: " + o.failure.message.splitlines()[0][:120]
        lines.append(f"| {template} | `{params}` | {o.how} | {o.compile_s:.1f} | {status} |")
    for template, params in skipped:
        lines.append(f"| {template} | `{params}` | skipped | | not built before the deadline |")
    return done


def _load_template(template: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"evoforge_h200_{template}", TEMPLATES / f"{template}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sweep_phase(built: dict[tuple[str, str], Any], deadline: float, lines: list[str]) -> dict[str, dict[str, Any]]:
    """Every built bf16 config at every shape, against cuBLAS; returns the best config per shape label."""
    import json

    import torch
    from triton.testing import do_bench

    module = _load_template(BF16)
    configs = [json.loads(p) for (t, p), o in built.items() if t == BF16 and o.failure is None]
    best: dict[str, dict[str, Any]] = {}
    lines.append(f"{len(configs)} bf16 configs built; times are do_bench medians (ms), L2 flushed; % = cuBLAS "
                 "time / config time")
    for label, _task, m, n, k in SHAPES:
        if time.monotonic() > deadline:
            lines.append(f"- {label}: skipped (time budget)")
            continue
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = torch.matmul(a, b)
        scale = ref.float().abs().max().item() or 1.0
        cublas_ms = do_bench(lambda a=a, b=b: torch.matmul(a, b), warmup=10, rep=60, return_mode="median")
        flops = 2.0 * m * n * k
        rows = []
        for params in configs:
            if time.monotonic() > deadline:
                break
            module.PARAMS.clear()
            module.PARAMS.update(params)
            model = module.ModelNew()
            try:
                out = model(a, b)
                torch.cuda.synchronize()
                err = (out.float() - ref.float()).abs().max().item() / scale
                ms = do_bench(lambda model=model, a=a, b=b: model(a, b), warmup=10, rep=60, return_mode="median")
            except Exception as e:
                rows.append((params, None, None, f"{e.__class__.__name__}: {str(e)[:100]}"))
                continue
            rows.append((params, ms, err, "" if err < 2e-2 else "WRONG (far from cuBLAS)"))
        ok = [r for r in rows if r[1] is not None and not r[3]]
        lines.append("")
        lines.append(f"### {label}: M={m} N={n} K={k}; cuBLAS {cublas_ms:.4f} ms "
                     f"({flops / cublas_ms / 1e9:.0f} TFLOP/s)")
        lines.append("")
        lines.append("| config (changes from the seed's PARAMS) | ms | TFLOP/s | % of cuBLAS | max err / max abs | note |")
        lines.append("| --- | ---: | ---: | ---: | ---: | --- |")
        defaults = _default_params()
        for params, ms, err, note in sorted(rows, key=lambda r: r[1] if r[1] is not None else 1e9):
            change = {kk: v for kk, v in params.items() if defaults.get(kk) != v} or "seed PARAMS"
            if ms is None:
                lines.append(f"| `{change}` | | | | | {note} |")
            else:
                lines.append(f"| `{change}` | {ms:.4f} | {flops / ms / 1e9:.0f} | {100 * cublas_ms / ms:.1f} | "
                             f"{err:.2e} | {note} |")
        if ok:
            top = min(ok, key=lambda r: r[1])
            best[label] = {"params": top[0], "ms": top[1], "cublas_ms": cublas_ms, "m": m, "n": n, "k": k}
            lines.append(f"\nbest: {100 * cublas_ms / top[1]:.1f}% of cuBLAS")
        a = b = ref = out = None
        torch.cuda.empty_cache()
    return best


def _default_params() -> dict[str, Any]:
    from evoforge.core import declared_space

    return declared_space(_source(BF16))[1]


def chain_phase(best: dict[str, dict[str, Any]], built: dict[tuple[str, str], Any], arch: str,
                args: argparse.Namespace, deadline: float, lines: list[str]) -> None:
    """The real verification chain (sandboxed, correctness at an odd shape too, anti-cheat, timing)."""
    import json

    from evoforge.judge.chain import ChainOptions
    from evoforge.judge.evaluator import Evaluator

    from evoforge.core import Candidate
    from evoforge.task import Task

    child_env = {k: os.environ[k] for k in PASS_ENV if os.environ.get(k)}
    evaluator = Evaluator(backend="cuda", arch=arch, timeout_s=args.timeout, child_env=child_env,
                          options=ChainOptions(trials=args.trials, timing_budget_ms=args.timing_budget_ms))
    bf16_task = str(REPO / "experiments" / "tasks" / "matmul_bf16_4096.py")
    cases: list[tuple[str, str, dict[str, Any], list[dict[str, Any]], str, dict[str, Any]]] = []
    fp32 = [json.loads(p) for (t, p), o in built.items() if t == FP32_SPLIT and o.failure is None]
    if fp32:
        cases.append((f"{FP32_SPLIT} on L1/1 (fp32, N=4096)", "L1/1", {}, [{"N": 1001}], FP32_SPLIT, fp32[0]))
    for label, info in best.items():
        cases.append((f"{BF16} best config on {label}", bf16_task, {"M": info["m"], "N": info["n"], "K": info["k"]},
                      [{"M": 77, "N": 45, "K": 96}], BF16, info["params"]))
    for template, spec, shapes in (("cute_gemm", "L1/1", [{"N": 1001}]),
                                   ("cute_elementwise_relu", "L1/19", [{"batch_size": 3, "dim": 777}])):
        params = next((json.loads(p) for (t, p), o in built.items() if t == template and o.failure is None), None)
        if params is not None:
            cases.append((f"{template} on {spec}", spec, {}, shapes, template, params))
    lines.append("| case | params | status | criterion, max abs err | candidate ms | reference ms | speedup | "
                 "compile s |")
    lines.append("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    try:
        for label, spec, overrides, shapes, template, params in cases:
            if time.monotonic() > deadline:
                lines.append(f"| {label} | `{params}` | skipped (time budget) | | | | | |")
                continue
            try:
                task = Task.load(spec, overrides=overrides, shapes=shapes)
                candidate = Candidate.from_source(_source(template), task=task.name, params=params)
                r = evaluator.evaluate(task, candidate)
                o = built.get((template, json.dumps(params, sort_keys=True)))
                compile_s = f"{o.compile_s:.1f}" if o is not None else ""
                if r.ok:
                    lines.append(f"| {label} | `{params}` | ok | {r.criterion}, {_g(r.max_abs_err, '.3g')} | "
                                 f"{_g(r.runtime_ms, '.4f')} | {_g(r.ref_ms, '.4f')} | {_g(r.speedup, '.3f')}x | "
                                 f"{compile_s} |" + (f" {r.message.replace(chr(10), ' ')[:200]}" if r.message else ""))
                else:
                    first = (r.message or "").strip().replace("\n", " ")[:300]
                    lines.append(f"| {label} | `{params}` | {r.status}: {first} | | | | | {compile_s} |")
            except Exception as e:
                lines.append(f"| {label} | `{params}` | SCRIPT ERROR {e.__class__.__name__}: {str(e)[:200]} | | | | | |")
            print(lines[-1], flush=True)
    finally:
        evaluator.close()


def campaign_phase(minutes: float, out_dir: Path, lines: list[str]) -> None:
    """``evoforge run`` with the bf16 CuTe seed on cuda (needs optuna and ray: the carried wheels), its builds
    served by the cache the build phase filled; the summary's figures go into the report."""
    import importlib.util
    import json

    missing = [m for m in ("optuna", "ray") if importlib.util.find_spec(m) is None]
    if missing:
        lines.append(f"skipped: {', '.join(missing)} not installed here (carry their wheels to run it)")
        return
    task = str(REPO / "experiments" / "tasks" / "matmul_bf16_4096.py")
    command = [sys.executable, "-m", "evoforge.cli", "run", "--task", task, "--language", "cute", "--backend", "cuda",
               "--budget-evals", "40", "--budget-minutes", f"{minutes:g}", "--name", "cute-h200", "--quiet",
               "--out", str(out_dir)]
    lines.append(f"command: `{' '.join(command[1:])}`")
    started = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=minutes * 60 + 180,
                              env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    except subprocess.TimeoutExpired:
        lines.append(f"the campaign ran past {minutes * 60 + 180:.0f} s and was killed")
        return
    lines.append(f"exit {proc.returncode} after {time.monotonic() - started:.0f} s")
    summary_file = out_dir / "summary.json"
    if not summary_file.is_file():
        lines.append("no summary.json; stderr tail:\n```\n" + proc.stderr[-2000:] + "\n```")
        return
    for name, t in json.loads(summary_file.read_text())["tasks"].items():
        lines.append(f"- {name} ({t.get('language')}): {t['evaluations']} evaluations, statuses {t['statuses']}, "
                     f"best speedup over cuBLAS {t['best_speedup']}, best params {t['best_params']}, nvcc "
                     f"{t.get('compile_s')} s in all")


def _g(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def prebuild(out_dir: Path, arch: str) -> int:
    """Build every library of this script here (no GPU needed) into ``out_dir``, named as ``load`` finds them."""
    from evoforge.backends import cute

    failures = 0
    for template, params in builds_wanted(arch):
        try:
            path = cute.prebuild(cute.cuda_source_of(_source(template))[0], out_dir, arch=arch, params=params)
            print(f"{template} {params}: {path}", flush=True)
        except Exception as e:
            failures += 1
            print(f"{template} {params}: FAILED {e}", flush=True)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    carried = REPO / ".cutlass_include"  # the headers carried to a machine without the nvidia-cutlass package
    if not os.environ.get("EVOFORGE_CUTLASS_INCLUDE") and (carried / "cute" / "tensor.hpp").is_file():
        os.environ["EVOFORGE_CUTLASS_INCLUDE"] = str(carried)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_out = (Path(os.environ["OUT"]) / "cute_h200.md" if os.environ.get("OUT")
                   else REPO / "experiments" / "results" / "cute" / "h200.md")
    parser.add_argument("--out", default=str(default_out))
    parser.add_argument("--arch", default="nvidia-sm90", help="knowledge-base arch (default nvidia-sm90)")
    parser.add_argument("--budget-s", type=float, default=470.0, help="wall-clock budget of the whole script")
    parser.add_argument("--workers", type=int, default=0, help="nvcc workers (default: one per CPU core, up to 16)")
    parser.add_argument("--trials", type=int, default=2, help="correctness runs per chain verdict")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per chain evaluation")
    parser.add_argument("--timing-budget-ms", type=float, default=600.0)
    parser.add_argument("--prebuild", default=None, metavar="DIR", help="only build the libraries into DIR and exit")
    parser.add_argument("--campaign-minutes", type=float, default=0.0,
                        help="then run `evoforge run` with the bf16 seed for this long (needs optuna and ray; "
                             "0: no campaign). Not counted in --budget-s")
    args = parser.parse_args(argv)
    if args.prebuild:
        return prebuild(Path(args.prebuild), args.arch)
    t0 = time.monotonic()
    budget = args.budget_s
    out = Path(args.out)
    lines = ["# CuTe seeds on the GPU: builds, a bf16 sweep against cuBLAS, chain verdicts", ""]
    try:
        lines += environment()
    except Exception as e:
        lines.append(f"environment: could not be read ({e})")

    def write() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines + ["", f"total {time.monotonic() - t0:.0f} s; command: "
                                          f"{' '.join(sys.argv)}"]) + "\n")

    built: dict[tuple[str, str], Any] = {}
    best: dict[str, dict[str, Any]] = {}
    for title, phase in (
        ("## 1. Builds (nvcc, in parallel, ahead of the GPU)",
         lambda: built.update(build_phase(args.arch, args.workers or 0, t0 + 0.50 * budget, t0 + 0.62 * budget,
                                          lines))),
        ("## 2. bf16 sweep against cuBLAS (torch.matmul)", lambda: best.update(sweep_phase(built, t0 + 0.78 * budget,
                                                                                           lines))),
        ("## 3. Verdicts of the verification chain (cuda backend, sandboxed)",
         lambda: chain_phase(best, built, args.arch, args, t0 + 0.97 * budget, lines)),
    ):
        lines.extend(["", title, ""])
        try:
            phase()
        except Exception as e:
            lines.append(f"SCRIPT ERROR {e.__class__.__name__}: {e}")
            lines.append("```\n" + traceback.format_exc() + "```")
        write()
        print(f"{title}: done at {time.monotonic() - t0:.0f} s", flush=True)
    if args.campaign_minutes > 0:
        lines.extend(["", f"## 4. A campaign with the bf16 CuTe seed ({args.campaign_minutes:g} min)", ""])
        try:
            campaign_phase(args.campaign_minutes, out.parent / "cute_campaign", lines)
        except Exception as e:
            lines.append(f"SCRIPT ERROR {e.__class__.__name__}: {e}")
        write()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
