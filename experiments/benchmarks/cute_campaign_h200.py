"""CuTe campaigns end to end on a CUDA GPU (written for the lent H200, 16 CPU cores), through the real CLI.

1. **Seeded**: ``evoforge run`` on the bf16 4096^3 GEMM task (``experiments/tasks/matmul_bf16_4096.py``, whose
   reference is ``torch.matmul``: cuBLAS) from the Hopper CuTe seed (``knowledge/templates/
   cute_gemm_bf16_sm90.py``), the default strategy tuning its SPACE, nvcc builds running ahead on the CPU cores
   (``--build-workers``) while the GPU evaluates. Its best speedup is its % of cuBLAS.
2. **Generated**: ``evoforge run --language cute --strategy cutegen`` on KernelBench L1/21 (Sigmoid), no seed, an
   OpenAI-compatible endpoint on loopback (``tests/fakellm.py``; nothing outside the GPU machine can be reached)
   that answers like a model would: a first CuTe kernel with a compile error (an undeclared function), its
   repair, two optimization steps that retune its launch constants, then the same kernel again. CuTeGen's loop: generate, test, debug with
   the trimmed nvcc error, optimize.

For each: the campaign's summary, and from its Optuna record every trial's operator, status, speedup, nvcc time
and evaluation time, plus the GPU's share of the wall clock (evaluation seconds over the campaign's elapsed time:
how busy the compile-ahead kept the evaluators). Writes ``--out`` (markdown) and the run directories beside it.

    source experiments/benchmarks/gpu_env.sh; tar xzf .carry/cutlass.tgz -C /tmp
    EVOFORGE_CUTLASS_INCLUDE=/tmp/include EVOFORGE_BWRAP=$PWD/.carry/bwrap/bwrap \\
        python3 experiments/benchmarks/cute_campaign_h200.py --out $OUT/cute_campaign.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "knowledge" / "templates"


def sigmoid_kernel(broken: bool, params: dict[str, int] | None = None) -> str:
    """A CuTe Sigmoid as a model would write it from the ReLU it was shown (``broken``: calls an undeclared
    ``fast_sigmoid``, the kind of fault the repair loop gets with nvcc's trimmed error; ``params``: the launch
    constants an optimization step changed)."""
    source = (TEMPLATES / "cute_elementwise_relu.py").read_text()
    source = source.replace("relu", "sigmoid").replace("ReLU", "Sigmoid").replace("L1/19", "L1/21")
    op = "fast_sigmoid(v)" if broken else "1.f / (1.f + expf(-v))"
    source = source.replace("v < 0.f ? 0.f : v;      // keeps NaN, as torch.sigmoid does", f"{op};")
    source = source.replace("v < 0.f ? 0.f : v;", f"{op};")
    assert source.count(op) == 2, "the ReLU template changed: update the Sigmoid stand-in"
    if params:
        source = source.replace('PARAMS = {"THREADS": 256, "VEC": 4}', f"PARAMS = {params!r}".replace("'", '"'))
    return f"Here is the kernel.\n\n```python\n{source}```\n"


def run_cli(args: list[str], env: dict[str, str], log: Path, timeout: float) -> tuple[int, float, dict[str, Any]]:
    start = time.time()
    cmd = [sys.executable, "-P", "-c", "from evoforge.cli import main; main()", *args, "--json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=str(REPO))
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    log.write_text(f"$ {' '.join(cmd)}\nrc {rc}\n--- stdout\n{out}\n--- stderr\n{err}\n")
    summary: dict[str, Any] = {}
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                summary = json.loads(line)
                break
            except json.JSONDecodeError:
                pass
    return rc, time.time() - start, summary


def trials(run_dir: Path) -> list[dict[str, Any]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = []
    storage = f"sqlite:///{run_dir / 'optuna.db'}"
    for s in optuna.get_all_study_summaries(storage):
        for t in optuna.load_study(study_name=s.study_name, storage=storage).get_trials(deepcopy=False):
            a = t.user_attrs
            rows.append({"n": t.number, "operator": a.get("operator"), "status": a.get("status"),
                         "speedup": a.get("speedup"), "compile_s": a.get("compile_s"), "eval_s": a.get("eval_s"),
                         "params": a.get("params"), "message": (a.get("message") or "")[:160]})
    return rows


def section(title: str, rc: int, wall: float, summary: dict[str, Any], rows: list[dict[str, Any]], log: Path) -> str:
    lines = [f"## {title}", "", f"exit {rc}, {wall:.0f} s wall (the CLI, Ray start included); log `{log.name}`", ""]
    for name, t in (summary.get("tasks") or {}).items():
        lines.append(f"- task `{name}`: language {t.get('language')}, {t.get('evaluations')} evaluations "
                     f"{t.get('statuses')}, best speedup {t.get('best_speedup')} by {t.get('best_operator')} "
                     f"at {t.get('best_params')}, first correct at evaluation {t.get('first_correct_at')}, "
                     f"LLM calls {t.get('llm_calls')}, nvcc {t.get('compile_s')} s in all, stopped: "
                     f"{t.get('stopped_early')}")
    elapsed = float(summary.get("elapsed_s") or 0.0)
    built = [float(r["compile_s"]) for r in rows if r.get("compile_s")]
    evals = sum(float(r["eval_s"] or 0.0) for r in rows)
    if built:
        built.sort()
        lines.append(f"- nvcc per built candidate: {len(built)} builds, median {built[len(built) // 2]:.1f} s, "
                     f"max {built[-1]:.1f} s, {sum(built):.0f} s in all")
    if elapsed:
        lines.append(f"- evaluation seconds {evals:.0f} over the campaign's {elapsed:.0f} s "
                     f"({evals / elapsed:.2f} evaluator-seconds per second of campaign)")
    lines += ["", "| trial | operator | status | speedup | nvcc s | eval s | params | message |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        msg = re.sub(r"\s+", " ", r["message"]).replace("|", "/")
        lines.append(f"| {r['n']} | {r['operator']} | {r['status']} | {r['speedup']} | {r['compile_s']} | "
                     f"{r['eval_s']} | `{r['params']}` | {msg} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "cute_campaign.md"))
    parser.add_argument("--budget", type=int, default=24, help="evaluations of the seeded campaign")
    parser.add_argument("--generate-budget", type=int, default=6)
    parser.add_argument("--only", choices=["seeded", "generated"])
    parser.add_argument("--shape", default="4096x4096x4096",
                        help="MxNxK of the seeded campaign's bf16 GEMM (L1/6's is 256x256x524288)")
    parser.add_argument("--timeout", type=float, default=420, help="seconds the seeded campaign may take")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    workers = str(min(16, os.cpu_count() or 1))
    parts = []
    if args.only in (None, "seeded"):
        m, n, k = (int(x) for x in args.shape.lower().split("x"))
        default_shape = (m, n, k) == (4096, 4096, 4096)
        suffix = "" if default_shape else f"_{m}x{n}x{k}"
        run_dir = out.parent / f"cute_seeded{suffix}"
        log = out.parent / f"cute_seeded{suffix}.log"
        shape_args = [] if default_shape else ["--set", f"M={m}", "--set", f"N={n}", "--set", f"K={k}"]
        rc, wall, summary = run_cli(
            ["run", "--task", str(REPO / "experiments" / "tasks" / "matmul_bf16_4096.py"), *shape_args,
             "--seed-kernel", str(TEMPLATES / "cute_gemm_bf16_sm90.py"), "--backend", "cuda",
             "--build-workers", workers, "--budget-evals", str(args.budget), "--name", "cute-seeded",
             "--out", str(run_dir), "--quiet"], env, log, timeout=args.timeout)
        rows = trials(run_dir) if (run_dir / "optuna.db").exists() else []
        parts.append(section(f"Seeded: the Hopper bf16 GEMM at {m}x{n}x{k} against cuBLAS", rc, wall, summary,
                             rows, log))
    if args.only in (None, "generated"):
        sys.path.insert(0, str(REPO))
        from tests.fakellm import FakeLLMServer

        run_dir = out.parent / "cute_generated"
        log = out.parent / "cute_generated.log"
        # generation (broken), its repair, two optimization steps that retune the launch; then the kernel again
        script = [sigmoid_kernel(broken=True), sigmoid_kernel(broken=False),
                  sigmoid_kernel(broken=False, params={"THREADS": 512, "VEC": 4}),
                  sigmoid_kernel(broken=False, params={"THREADS": 128, "VEC": 8})]
        with FakeLLMServer(script, default=sigmoid_kernel(broken=False), models=["stand-in"]) as server:
            rc, wall, summary = run_cli(
                ["run", "--task", "L1/21", "--set", "batch_size=256", "--language", "cute", "--strategy", "cutegen",
                 "--strategy-option", "samples=1", "--strategy-option", "debug_attempts=2",
                 "--strategy-option", "steps=2", "--llm-base-url", server.url, "--llm-model", "stand-in",
                 "--backend", "cuda", "--build-workers", workers, "--budget-evals", str(args.generate_budget),
                 "--name", "cute-generated", "--out", str(run_dir), "--quiet"],
                dict(env, OPENAI_API_KEY="loopback"), log, timeout=300)
            requests = len(server.chat_requests)
        rows = trials(run_dir) if (run_dir / "optuna.db").exists() else []
        parts.append(section(f"Generated: `--language cute --strategy cutegen` on L1/21 (Sigmoid), {requests} "
                             "requests to the loopback endpoint", rc, wall, summary, rows, log))
    import torch

    head = [f"# CuTe campaigns end to end ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC)", "",
            f"`experiments/benchmarks/cute_campaign_h200.py`; {torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}, "
            f"Python {platform.python_version()}, torch {torch.__version__}, evoforge "
            f"{os.environ.get('EVOFORGE_COMMIT', '?')}, {workers} nvcc workers, containment "
            f"{'bwrap (carried)' if os.environ.get('EVOFORGE_BWRAP') else 'as found'}.", ""]
    out.write_text("\n".join(head) + "\n" + "\n".join(parts))
    print(out.read_text())


if __name__ == "__main__":
    main()
