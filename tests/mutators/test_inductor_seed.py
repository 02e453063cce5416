"""Seeds from torch.compile: Inductor's captured Triton turned into a candidate (pure), and one through the chain.

The captures in tests/fixtures/inductor/ were made on the CPU (``python -m evoforge.mutators.inductor_seed TASK
cpu OUT.json OVERRIDES``: Inductor asked for Triton under a stand-in driver, torch 2.13); a GPU capture has the
same form, with Inductor's configs for that device.
"""

from __future__ import annotations

import json

import pytest
from evoforge.backends.static import static_check
from evoforge.mutators.inductor_seed import InductorCapture, NoInductorSeed, seed_from_capture

from evoforge.core import Candidate, declared_space
from tests.conftest import FIXTURES

CAPTURES = FIXTURES / "inductor"


def _capture(name: str) -> InductorCapture:
    return InductorCapture.from_json((CAPTURES / name).read_text())


def test_relu_capture_becomes_a_tunable_standalone_candidate():
    source = seed_from_capture(_capture("level1_19_ReLU.cpu.json"))
    assert static_check(source) is None
    space, params = declared_space(source)
    # Inductor's choice is the default; its other config and powers of two around it are in the SPACE.
    assert params["XBLOCK"] == 256 and {64, 128, 256, 512, 1024} <= set(space["XBLOCK"])
    assert params["num_warps"] == 4 and len(space["num_warps"]) > 1
    # Standalone: nothing of torch's compiler is imported (the candidate's process refuses torch._inductor).
    assert "_inductor" not in source and "async_compile" not in source and "assert_size_stride" not in source
    # Sizes come from the input, so the seed holds at other shapes; the grid divides by the tuned block.
    assert "x.size()[0]" in source and "PARAMS['XBLOCK']" in source.split("class ModelNew")[1]


def test_vendor_calls_need_the_task_to_allow_them():
    capture = _capture("level2_76_Gemm_Add_ReLU.cpu.json")
    with pytest.raises(NoInductorSeed) as e:
        seed_from_capture(capture)
    message = str(e.value)
    assert "\n" not in message and 'allow_ops = ["addmm"]' in message  # the op the chain's op watch names
    source = seed_from_capture(capture, allow_ops=("addmm",))
    assert "torch.addmm(" in source and "extern_kernels" not in source and static_check(source) is None
    # The reference's Model makes the parameters: the chain loads the reference's state into the same names.
    assert "class TaskModel" in source and "def forward(self, x)" in source


def test_launches_the_conversion_cannot_grid_are_one_line():
    data = json.loads((CAPTURES / "level1_19_ReLU.cpu.json").read_text())
    data["output_code"] = data["output_code"].replace("'grid_type': 'Grid1D'", "'grid_type': 'FixedGrid'")
    with pytest.raises(NoInductorSeed, match="FixedGrid grid"):
        seed_from_capture(InductorCapture(**data))
    data["output_code"] = data["output_code"].replace("async_compile.triton(", "async_compile.cpp_pybinding(")
    with pytest.raises(NoInductorSeed, match="cpp_pybinding kernel for this task, not a Triton one"):
        seed_from_capture(InductorCapture(**data))


def test_the_relu_seed_passes_the_chain_at_a_retuned_block(interpreter_evaluator, relu_task):
    """Through the real chain (odd shape included) with a block size Inductor did not choose."""
    source = seed_from_capture(_capture("level1_19_ReLU.cpu.json"))
    seed = Candidate.from_source(source, task=relu_task.name, operator="inductor-seed")
    result = interpreter_evaluator.evaluate(relu_task, seed.with_params({"XBLOCK": 64, "num_warps": 2}))
    assert result.ok, result.message
