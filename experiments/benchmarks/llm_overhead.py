"""The engine's own time per LLM child: prompt assembly, reply parsing, patching, bookkeeping — not the network.

Bar: under 50 ms per child. Two measurements:

1. end to end through the real openai client against the loopback fake server answering at once: wall time per
   child, the client-measured request time (``Completion.latency_s``: the openai client's request building,
   the loopback HTTP round trip and response parsing), and their difference (the engine);
2. the same operators over an in-process client that returns the reply without any I/O: the engine alone.

Run: ``python experiments/benchmarks/llm_overhead.py [--children 200] [--out experiments/results/llm/overhead.txt]``
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # a script run from anywhere: tests.fakellm lives in the repo, not the package
    sys.path.insert(0, str(REPO))

import openai  # noqa: E402
from evoforge.mutators.base import Failure, MutationContext  # noqa: E402
from evoforge.mutators.llm_client import Completion, OpenAIClient  # noqa: E402
from evoforge.mutators.llm_ops import LLMCrossover, LLMOptimize, LLMRepair, LLMStageRewrite  # noqa: E402
from evoforge.mutators.prompt_builder import PromptBuilder  # noqa: E402

from evoforge.core import Candidate, EvalResult, EvalStatus  # noqa: E402
from tests.fakellm import FakeLLMServer  # noqa: E402

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension followed by a scaled residual add."""

    def __init__(self, scale: float = 0.5):
        super().__init__()
        self.scale = scale

    def forward(self, x, r):
        return torch.softmax(x, dim=-1) * self.scale + r


batch_size = 4096
dim = 4093


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.5]
'''

KERNEL = """import torch
import torch.nn as nn
import triton
import triton.language as tl

SPACE = {"BLOCK": [1024, 2048, 4096, 8192], "num_warps": [4, 8, 16], "num_stages": [1, 2, 3]}
PARAMS = {"BLOCK": 4096, "num_warps": 8, "num_stages": 2}


@triton.jit
def softmax_residual_kernel(x_ptr, r_ptr, out_ptr, n_cols, x_stride, r_stride, out_stride, scale,
                            BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    r = tl.load(r_ptr + row * r_stride + cols, mask=mask, other=0.0).to(tl.float32)
    y = num / den * scale + r
    tl.store(out_ptr + row * out_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float = 0.5):
        super().__init__()
        self.scale = scale

    def forward(self, x, r):
        x = x.contiguous()
        r = r.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = max(PARAMS["BLOCK"], triton.next_power_of_2(n_cols))
        softmax_residual_kernel[(n_rows,)](
            x, r, out, n_cols, x.stride(0), r.stride(0), out.stride(0), self.scale,
            BLOCK=block, num_warps=PARAMS["num_warps"], num_stages=PARAMS["num_stages"],
        )
        return out
"""

BROKEN = KERNEL.replace("    mask = cols < n_cols\n", "")
ERROR = (
    "triton.compiler.errors.CompilationError: at 6:60:\n"
    '    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)\n'
    "                                                            ^\n"
    "NameError('mask is not defined')\n" * 8
)
PATCH_REPLY = (
    "`mask` is used but never defined.\n\n"
    "<<<<<<< SEARCH\n    cols = tl.arange(0, BLOCK)\n=======\n    cols = tl.arange(0, BLOCK)\n"
    "    mask = cols < n_cols\n>>>>>>> REPLACE\n"
)
FASTER = KERNEL.replace('"num_warps": [4, 8, 16]', '"num_warps": [4, 8, 16, 32]')
MODULE_REPLY = "Wider warp range for large rows.\n\n```python\n" + FASTER + "```\n"
OTHER = KERNEL.replace("num = tl.exp(x)", "num = tl.exp2(x * 1.4426950408889634)")


def ok(ms: float, speedup: float) -> EvalResult:
    return EvalResult(EvalStatus.OK, runtime_ms=ms, ref_ms=ms * speedup, speedup=speedup, pct_of_floor=55.0)


def contexts() -> dict[str, MutationContext]:
    top = tuple(
        (Candidate.from_source(KERNEL.replace("4096", str(b))), ok(0.4, 2.0)) for b in (1024, 2048, 8192)
    )
    failures = tuple(
        Failure(Candidate.from_source(BROKEN), EvalResult.failure(EvalStatus.COMPILE_ERROR, ERROR))
        for _ in range(3)
    )
    base = dict(task_name="softmax_residual", task_source=REFERENCE, arch="sm90", top=top, failures=failures)
    return {
        "ok": MutationContext(**base, parent_result=ok(0.5, 1.6), lineage_correct_steps=3),
        "failed": MutationContext(**base, parent_result=EvalResult.failure(EvalStatus.COMPILE_ERROR, ERROR)),
    }


class InstantClient:
    """The OpenAIClient's interface with the reply handed back in-process: the engine alone, no I/O."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    async def complete(self, messages: Any, **kwargs: Any) -> Completion:
        return Completion(self.reply, "instant", 1000, 500, 0.0, False, 0.0)


def cases(client_for: Any, builder: PromptBuilder) -> list[tuple[str, Any, tuple[Candidate, ...], str, str]]:
    parent, broken, other = (
        Candidate.from_source(KERNEL),
        Candidate.from_source(BROKEN),
        Candidate.from_source(OTHER),
    )
    return [
        (
            "repair (patch)",
            LLMRepair(client=client_for(PATCH_REPLY), builder=builder),
            (broken,),
            "failed",
            PATCH_REPLY,
        ),
        (
            "optimize (module)",
            LLMOptimize(client=client_for(MODULE_REPLY), builder=builder),
            (parent,),
            "ok",
            MODULE_REPLY,
        ),
        (
            "stage rewrite (module)",
            LLMStageRewrite(client=client_for(MODULE_REPLY), builder=builder),
            (parent,),
            "ok",
            MODULE_REPLY,
        ),
        (
            "crossover (module)",
            LLMCrossover(client=client_for(MODULE_REPLY), builder=builder),
            (parent, other),
            "ok",
            MODULE_REPLY,
        ),
    ]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(n: int, out: list[str]) -> float:
    ctx = contexts()
    builder = PromptBuilder()
    worst = 0.0

    out.append("## engine alone (in-process client, no I/O), per child")
    out.append(f"{'operator':<24}{'median ms':>10}{'p95 ms':>10}{'prompt chars':>14}")
    for name, op, parents, ctx_key, _ in cases(InstantClient, builder):
        times = []
        child = None
        for i in range(n):
            c = MutationContext(**{**ctx[ctx_key].__dict__, "seed": i})
            t0 = time.perf_counter()
            child = await op.propose(parents, c)
            times.append((time.perf_counter() - t0) * 1e3)
        assert child is not None
        chars = sum(len(m["content"]) for m in child.meta["prompt"])
        worst = max(worst, pct(times, 0.95))
        out.append(f"{name:<24}{statistics.median(times):>10.3f}{pct(times, 0.95):>10.3f}{chars:>14}")

    out.append("")
    out.append(
        "## through the openai client and the loopback server (zero-latency replies, disk cache on: every call a"
        " miss that is written), per child"
    )
    out.append(f"{'operator':<24}{'wall ms':>10}{'request ms':>12}{'engine ms':>11}{'engine p95':>12}")
    with FakeLLMServer() as server, tempfile.TemporaryDirectory() as cache_dir:
        clients: dict[str, OpenAIClient] = {}

        def client_for(reply: str) -> OpenAIClient:
            clients[reply] = OpenAIClient(
                base_url=server.url, model="fake-model", max_retries=0, cache_dir=cache_dir
            )
            return clients[reply]

        for name, op, parents, ctx_key, reply in cases(client_for, builder):
            server.default = reply
            walls, requests, engine = [], [], []
            for i in range(n + 5):
                c = MutationContext(**{**ctx[ctx_key].__dict__, "seed": i})
                t0 = time.perf_counter()
                child = await op.propose(parents, c)
                wall = (time.perf_counter() - t0) * 1e3
                if i < 5:  # warm-up: connection set-up, first imports
                    continue
                request = child.meta["llm_latency_s"] * 1e3
                walls.append(wall)
                requests.append(request)
                engine.append(wall - request)
            worst = max(worst, pct(engine, 0.95))
            out.append(
                f"{name:<24}{statistics.median(walls):>10.3f}{statistics.median(requests):>12.3f}"
                f"{statistics.median(engine):>11.3f}{pct(engine, 0.95):>12.3f}"
            )
        for client in clients.values():
            await client.aclose()
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=200, help="children per operator")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    lines = [
        "# LLM operator overhead (experiments/benchmarks/llm_overhead.py)",
        f"date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"machine: {platform.node() or '?'} {platform.machine()} {platform.processor() or ''} "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        f"python {platform.python_version()}, openai {openai.__version__}",
        f"children per operator: {args.children}; bar: engine < 50 ms per child",
        "",
    ]
    worst = asyncio.run(measure(args.children, lines))
    lines += ["", f"worst engine p95: {worst:.3f} ms -> {'PASS' if worst < 50 else 'FAIL'} (bar 50 ms)"]
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)


if __name__ == "__main__":
    main()
