"""A plain kernel made tunable: launch constants lifted into SPACE/PARAMS (pure, no evaluation)."""

from __future__ import annotations

from evoforge.knowledge.source_model import parse
from evoforge.mutators.lift import lift_launch_constants, value_range

from evoforge.core import declared_space
from tests.conftest import FIXTURES

PLAIN = (FIXTURES / "relu" / "plain_constants.py").read_text()


def test_literal_tile_and_warps_become_params_with_the_written_defaults():
    lifted = lift_launch_constants(PLAIN, arch="sm90")
    assert lifted is not None
    space, params = declared_space(lifted.source)
    assert params == {"BLOCK": 1024, "num_warps": 4}
    assert space["BLOCK"] == [256, 512, 1024, 2048, 4096]
    assert 4 in space["num_warps"] and all(w & (w - 1) == 0 for w in space["num_warps"])
    # The launch and the grid read the same entry, so a retuned BLOCK still covers the input.
    assert 'BLOCK=PARAMS["BLOCK"]' in lifted.source and 'triton.cdiv(n, PARAMS["BLOCK"])' in lifted.source
    assert "1024" not in lifted.source.split("class ModelNew")[1]
    # The knowledge base's source model sees the lifted values bound to the launch.
    (unit,) = parse(lifted.source).units({"BLOCK": 2048, "num_warps": 8})
    assert unit.value("BLOCK") == 2048 and unit.option("num_warps") == 8


def test_hard_rules_narrow_the_lifted_range():
    """A matmul written with 128x128x64 tiles, 3 stages: tiles whose stages overflow shared memory are never
    offered (the knowledge base's rules for the target), the written ones always are."""
    import re

    from tests.knowledge.kernels import MATMUL

    source = re.sub(r"SPACE = .*?\n(?=PARAMS)", "", MATMUL, flags=re.S)
    source = re.sub(r"PARAMS = \{.*?\}\n", "", source, flags=re.S)
    for key, value in {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3}.items():
        source = source.replace(f'PARAMS["{key}"]', str(value))
    wide = lift_launch_constants(source)
    lifted = lift_launch_constants(source, arch="nvidia-sm90")
    assert wide is not None and lifted is not None
    assert lifted.params == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3}
    assert 512 in wide.space["BLOCK_M"] and 512 not in lifted.space["BLOCK_M"]
    assert 256 in wide.space["BLOCK_K"] and 256 not in lifted.space["BLOCK_K"]
    assert 128 in lifted.space["BLOCK_M"] and 64 in lifted.space["BLOCK_K"]


def test_nothing_to_lift_is_none():
    assert lift_launch_constants((FIXTURES / "leaky" / "plain_computed.py").read_text()) is None
    assert lift_launch_constants((FIXTURES / "relu" / "correct.py").read_text()) is None  # declares a SPACE


def test_flags_and_odd_constants_are_not_tuned():
    source = PLAIN.replace("BLOCK=1024, num_warps=4", "BLOCK=1000, num_warps=4")
    lifted = lift_launch_constants(source)
    assert lifted is not None and set(lifted.params) == {"num_warps"}  # 1000 is no tile size to halve
    assert value_range("GROUP_M", 8) == [1, 4, 8, 16]


def test_the_lifted_kernel_passes_the_chain_at_a_retuned_block(interpreter_evaluator, relu_task):
    """The grid follows the lifted tile: at BLOCK=256 the kernel still covers the input (odd shape included)."""
    from evoforge.core import Candidate

    lifted = lift_launch_constants(PLAIN, arch="nvidia-sm90")
    assert lifted is not None
    child = Candidate.from_source(lifted.source, task=relu_task.name).with_params({"BLOCK": 256, "num_warps": 2})
    result = interpreter_evaluator.evaluate(relu_task, child)
    assert result.ok, result.message
