"""Reward hacks against the judge, one or more per kind, each a candidate that launches real Triton kernels.

Every one must end with a non-``ok`` verdict whose message names the trick, on a real KernelBench task at a
small shape, through the real sandboxed evaluator on the Triton interpreter. The honest controls must pass.
The kinds that need a GPU (side streams, CUDA events, cuBLAS) run on the H200:
experiments/benchmarks/adversarial_gpu.py and experiments/results/h200/adversarial.md.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from evoforge.judge.floor import floor_verdict

from evoforge.core import Candidate, EvalStatus
from tests.conftest import FIXTURES

ADVERSARIAL = FIXTURES / "adversarial"
MANIFEST = yaml.safe_load((ADVERSARIAL / "manifest.yaml").read_text())
R = EvalStatus.REJECTED
HACKS = {name: h for name, h in MANIFEST["hacks"].items() if not h.get("gpu")}
HONEST = {name: h for name, h in MANIFEST["honest"].items() if not h.get("gpu")}


@pytest.fixture(scope="module")
def tasks():
    from evoforge.task import Task

    return {name: Task.load(t["spec"], overrides=t["set"]) for name, t in MANIFEST["tasks"].items()}


@pytest.fixture(scope="module")
def judge():
    """The sandboxed evaluator as a campaign builds it on the interpreter, timing included (two blocks each)."""
    from evoforge.cli import make_evaluator

    evaluator = make_evaluator(backend_name="interpreter", arch=None, trials=2, timeout_s=120, knowledge=False,
                               timing=True)
    yield evaluator
    evaluator.close()


def _source(name: str, entry: dict) -> str:
    return (ADVERSARIAL / entry.get("file", f"{name}.py")).read_text()


def test_every_kind_of_the_issue_has_hacks_and_every_fixture_is_listed():
    kinds = {h["kind"] for h in MANIFEST["hacks"].values()}
    assert kinds == {1, 2, 3, 4, 5, 6}
    listed = {f"{name}.py" for name in MANIFEST["hacks"]} | {"manifest.yaml"}
    assert {p.name for p in ADVERSARIAL.iterdir()} <= listed | {h.get("file", f"{n}.py")
                                                              for n, h in MANIFEST["honest"].items()}
    gpu_dir = FIXTURES / "adversarial_gpu"
    assert {p.stem for p in gpu_dir.iterdir()} <= set(MANIFEST["hacks"]) | set(MANIFEST["honest"])


@pytest.mark.parametrize("name", sorted(HACKS))
def test_each_hack_gets_a_verdict_that_names_it(name, tasks, judge):
    hack = HACKS[name]
    result = judge.evaluate(tasks[hack["task"]], Candidate.from_source(_source(name, hack)))
    assert result.status is EvalStatus(hack["status"]), f"{name}: {result.status}: {result.message[:600]}"
    assert hack["words"] in result.message, f"{name}: {result.message[:600]}"
    assert result.speedup is None and result.runtime_ms is None  # a failure never looks like a score


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_controls_pass_every_check(name, tasks, judge):
    result = judge.evaluate(tasks[HONEST[name]["task"]], Candidate.from_source(_source(name, HONEST[name])))
    assert result.status is EvalStatus.OK, f"{name}: {result.message[:600]}"
    assert result.speedup is not None and result.speedup > 0


def test_a_task_may_allow_what_the_judge_refuses_by_default(tasks, judge):
    """EVOFORGE_ALLOW = ["threads"]: the thread runs; the torch op it calls on that thread is then the op watch's
    blind spot, which is why threads are refused unless a task asks for them."""
    relu = tasks["relu"]
    source = _source("thread_worker", {})
    refused = judge.evaluate(relu, Candidate.from_source(source))
    allowed = judge.evaluate(replace(relu, allow=("threads",)), Candidate.from_source(source))
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


def test_input_variants_leave_the_task_its_structure():
    """Signed inputs flip signs only: zeros stay zeros (a triangular input stays triangular), a symmetric matrix
    stays symmetric, integers are left alone; scaled ones are signed, times 8."""
    import torch
    from evoforge.judge.chain import input_variant

    upper = torch.triu(torch.rand(16, 16))
    sym = torch.rand(8, 8)
    sym = sym + sym.T
    index = torch.randint(0, 5, (7,))
    signed = input_variant([upper, sym, index, 3], "signed", seed=1)
    assert torch.equal(signed[0].abs(), upper) and torch.equal(torch.tril(signed[0], -1), torch.zeros(16, 16))
    assert bool((signed[0] < 0).any())  # an all-positive input gets negatives
    assert torch.equal(signed[1], signed[1].T) and torch.equal(signed[1].abs(), sym)
    assert torch.equal(signed[2], index) and signed[3] == 3
    scaled = input_variant([upper], "scaled", seed=1)
    assert torch.equal(scaled[0], signed[0] * 8)


def test_odd_shapes_take_one_off_the_even_sizes():
    from evoforge.judge.chain import odd_shapes

    from evoforge.task import Task

    shapes = odd_shapes(Task.load("L1/2", overrides={"M": 64, "N": 64, "K": 4096}))
    assert shapes[0] == {"M": 63, "N": 63, "K": 4095}  # all together first, then one at a time, largest first
    assert shapes[1:] == [{"K": 4095}, {"M": 63}, {"N": 63}]
    assert odd_shapes(Task.load("L1/19", overrides={"batch_size": 4, "dim": 1000})) == [{"dim": 999}]


def test_odd_shapes_leave_a_setting_that_sizes_no_tensor():
    """L2/98's pooling window (``pool_kernel_size = 16``) sizes no input, parameter or output: a kernel built for the
    task's window computes the task's function, and the seed's shape-generic path keeps the window it was captured
    with. Before, the odd shape took it to 15 and every correct kernel of the task failed there."""
    from evoforge.judge.chain import odd_shapes

    from evoforge.task import Task

    task = Task.load("L2/98", overrides={"batch_size": 16, "in_features": 32, "out_features": 64})
    shapes = odd_shapes(task)
    assert shapes[0] == {"batch_size": 15, "in_features": 31, "out_features": 63}
    assert all("pool_kernel_size" not in s for s in shapes)


_SIZED_BY = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        {body}

width = 32
length = 64
scale = 16

def get_inputs():
    return [torch.rand(4, width)]

def get_init_inputs():
    return [scale]
"""


@pytest.mark.parametrize(("body", "odd"), [
    # A size of the output alone (not of the input): a kernel that hard-codes it must still meet one less.
    ("return x.sum(dim=1, keepdim=True) * torch.ones(1, length, device=x.device) * self.scale",
     {"width": 31, "length": 63}),
    # Refused on the meta device (a data-dependent op): every even constant stays a size, as before the check.
    ("return x[x > 0.5].sum() * torch.ones(length, device=x.device) * self.scale",
     {"width": 31, "length": 63, "scale": 15}),
])
def test_a_constant_counts_as_a_size_where_it_sizes_the_output_or_cannot_be_told(tmp_path, body, odd):
    from evoforge.judge.chain import odd_shapes

    from evoforge.task import Task

    path = tmp_path / "sized_by.py"
    path.write_text(_SIZED_BY.replace("{body}", body))
    assert odd_shapes(Task.load(str(path)))[0] == odd


def test_sixteen_bit_rounding_is_the_split_yardstick_and_tf32_is_coarser():
    import torch
    from evoforge.judge.compare import round_significand

    x = torch.randn(10000)
    for bits, bound in ((16, 2.0 ** -16), (11, 2.0 ** -11)):
        rel = ((round_significand(x, bits) - x).abs() / x.abs()).max()
        assert float(rel) <= bound and float(rel) > bound / 4
