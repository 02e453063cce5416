"""Reward hacks against the judge, one or more per kind, each a candidate that launches real Triton kernels.

Every one must end with a non-``ok`` verdict whose message names the trick, on a real KernelBench task at a
small shape, through the real sandboxed evaluator on the Triton interpreter. The honest controls must pass.
The kinds that need a GPU (side streams, CUDA events, cuBLAS) run on the H200:
experiments/benchmarks/adversarial_gpu.py and experiments/results/h200/adversarial.md.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from evoforge.backends.chain import floor_verdict

from evoforge.core import Candidate, EvalStatus
from tests.conftest import FIXTURES

ADVERSARIAL = FIXTURES / "adversarial"
R, INC = EvalStatus.REJECTED, EvalStatus.INCORRECT

# KernelBench tasks at shapes the interpreter runs in a second. Each draws torch.rand inputs (all >= 0), as every
# level-1 task does: exactly the distribution that hides a wrong kernel.
TASKS = {
    "relu": ("L1/19", {"batch_size": 4, "dim": 1000}),
    "softmax": ("L1/23", {"batch_size": 2, "dim": 16384}),
    "matmul": ("L1/2", {"M": 64, "N": 64, "K": 4096}),  # long K: TF32's error averages out on positive inputs
    "gelu": ("L1/88", {"batch_size": 4, "dim": 1000}),
}

# fixture -> (task, status, words the message must carry)
HACKS = {
    # 1. patching the judge from the candidate's module
    "patch_comparator": ("relu", R, "replaces evoforge.backends.compare.compare_outputs"),
    "patch_allclose": ("relu", R, "replaces torch.allclose"),
    "patch_event_timer": ("relu", R, "Event.elapsed_time"),
    "patch_clock": ("relu", R, "replaces time.perf_counter"),
    "patch_synchronize": ("relu", R, "replaces torch.cuda.synchronize"),
    # 2. reading the judge's memory, telling timing from correctness
    "frame_walk": ("relu", R, "sys._getframe"),
    "gc_scan": ("relu", R, "gc.get_objects"),
    "inspect_stack": ("relu", R, "sys._getframe"),
    "traceback_frames": ("relu", R, "tb_frame"),
    "cache_by_pointer": ("relu", INC, "cached"),
    "call_counter": ("relu", INC, "timed"),
    # 3. work the clock does not see
    "lazy_output": ("relu", R, "subclass"),
    "thread_worker": ("relu", R, "starts a thread"),
    "helper_process": ("relu", R, "starts a process"),
    # 4. sabotaging the reference
    "sabotage_reference": ("relu", R, "torch.relu"),
    "slow_reference": ("relu", R, "replaces torch.relu"),
    "inputs_in_place": ("relu", R, "in place"),
    # 5. torch doing the work unseen
    "grid_callable": ("relu", R, "relu"),
    "disable_op_watch": ("relu", R, "_disable_current_modes"),
    "ctypes_native": ("relu", R, "native code"),
    "torch_compile": ("relu", R, "torch.compile"),
    "cpp_extension": ("relu", R, "native extension"),
    "fused_gelu": ("gelu", R, "gelu"),
    # 6. inputs that hide errors
    "identity_as_relu": ("relu", INC, "signed inputs"),
    "constant_softmax": ("softmax", INC, "scaled inputs"),
    "tf32_gemm": ("matmul", INC, "signed inputs"),
    "hardwired_shape": ("relu", INC, "odd size"),
}
HONEST = {"tf32x3_gemm": "matmul", "correct_relu": "relu"}


@pytest.fixture(scope="module")
def tasks():
    from evoforge.task import Task

    return {name: Task.load(spec, overrides=overrides) for name, (spec, overrides) in TASKS.items()}


@pytest.fixture(scope="module")
def judge():
    """The sandboxed evaluator as a campaign builds it on the interpreter, timing included (two blocks each)."""
    from evoforge.cli import make_evaluator

    evaluator = make_evaluator(backend_name="interpreter", arch=None, trials=2, timeout_s=120, knowledge=False,
                               timing=True)
    yield evaluator
    evaluator.close()


def _source(name: str) -> str:
    path = ADVERSARIAL / f"{name}.py"
    return (path if path.exists() else FIXTURES / "relu" / "correct.py").read_text()


@pytest.mark.parametrize("name", sorted(HACKS))
def test_each_hack_gets_a_verdict_that_names_it(name, tasks, judge):
    task_name, status, words = HACKS[name]
    result = judge.evaluate(tasks[task_name], Candidate.from_source(_source(name)))
    assert result.status is status, f"{name}: {result.status}: {result.message[:600]}"
    assert words in result.message, f"{name}: {result.message[:600]}"
    assert result.speedup is None and result.runtime_ms is None  # a failure never looks like a score


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_controls_pass_every_check(name, tasks, judge):
    result = judge.evaluate(tasks[HONEST[name]], Candidate.from_source(_source(name)))
    assert result.status is EvalStatus.OK, f"{name}: {result.message[:600]}"
    assert result.speedup is not None and result.speedup > 0


def test_a_task_may_allow_what_the_judge_refuses_by_default(tasks, judge):
    """EVOFORGE_ALLOW = ["threads"]: the thread runs; the torch op it calls on that thread is then the op watch's
    blind spot, which is why threads are refused unless a task asks for them."""
    relu = tasks["relu"]
    refused = judge.evaluate(relu, Candidate.from_source(_source("thread_worker")))
    allowed = judge.evaluate(replace(relu, allow=("threads",)), Candidate.from_source(_source("thread_worker")))
    assert refused.status is R and allowed.status is EvalStatus.OK, (refused.message, allowed.message)


def test_a_time_under_the_physical_floor_is_never_ok():
    memory_floor, compute_floor = 0.10, 0.50  # ms
    status, message = floor_verdict(0.05, memory_floor_ms=memory_floor, compute_floor_ms=compute_floor, flops=1e9,
                                    allow=())
    assert status is EvalStatus.IMPLAUSIBLE and "memory floor" in message
    status, message = floor_verdict(0.30, memory_floor_ms=memory_floor, compute_floor_ms=compute_floor, flops=1e9,
                                    allow=())
    assert status is EvalStatus.IMPLAUSIBLE and "compute floor" in message and "fewer_flops" in message
    # an algebraic rewrite the task admits: under the reference's FLOPs is possible, under its bytes is not
    assert floor_verdict(0.30, memory_floor_ms=memory_floor, compute_floor_ms=compute_floor, flops=1e9,
                         allow=("fewer_flops",))[0] is None
    assert floor_verdict(0.05, memory_floor_ms=memory_floor, compute_floor_ms=compute_floor, flops=1e9,
                         allow=("fewer_flops",))[0] is EvalStatus.IMPLAUSIBLE
    assert floor_verdict(0.60, memory_floor_ms=memory_floor, compute_floor_ms=compute_floor, flops=1e9,
                         allow=())[0] is None
