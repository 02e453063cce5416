"""Rules as data: schema, scoping by vendor and Triton version, and the prompt text built from them."""

from __future__ import annotations

import pytest
from evoforge.knowledge.validators import VALIDATORS

from evoforge import knowledge
from evoforge.core import UsageError


def test_every_hard_rule_names_an_existing_validator() -> None:
    all_rules = knowledge.rules()
    assert len(all_rules) >= 20
    for rule in all_rules:
        assert rule.stage in knowledge.STAGE_NAMES
        assert rule.prompt and rule.source
        if rule.hard:
            assert rule.validator in VALIDATORS, rule.id
        elif rule.validator:
            assert rule.validator in VALIDATORS, rule.id


def test_the_required_rules_exist_with_their_severity() -> None:
    by_id = {r.id: r for r in knowledge.rules()}
    expected_hard = ["arange-pow2", "num-warps-legal", "shared-memory-budget", "dot-min-k", "dot-operands",
                     "block-ptr-removed", "intel-grf-mode-constexpr", "intel-sub-group-size",
                     "intel-2d-block-stride", "intel-no-hardcoded-32-warps", "swizzle-1d-grid"]
    for rule_id in expected_hard:
        assert by_id[rule_id].hard, rule_id
    for rule_id in ("int64-offsets", "fp32-dot-precision", "block-ptr-deprecated"):
        assert not by_id[rule_id].hard, rule_id


def test_block_ptr_rule_is_scoped_by_triton_version() -> None:
    def ids(version: str) -> set[str]:
        return {r.id for r in knowledge.rules("nvidia-sm90", triton_version=version)}

    assert "block-ptr-removed" not in ids("3.6.0") and "block-ptr-deprecated" in ids("3.6.0")
    assert "block-ptr-removed" in ids("3.7.0") and "block-ptr-deprecated" not in ids("3.7.0")
    assert "block-ptr-removed" in ids("3.7.0.dev20260101") and "block-ptr-removed" in ids("3.8.1+gitabc")
    assert {"block-ptr-removed", "block-ptr-deprecated"} <= {r.id for r in knowledge.rules("nvidia-sm90")}


def test_rules_are_scoped_by_vendor_and_stage() -> None:
    nvidia = {r.id for r in knowledge.rules("nvidia-sm80")}
    intel = {r.id for r in knowledge.rules("intel-xe2")}
    assert "shared-memory-budget" in nvidia and "shared-memory-budget" not in intel
    assert "intel-grf-mode" in intel and "intel-grf-mode" not in nvidia
    assert "sm90-tma-descriptors" not in nvidia and "sm90-tma-descriptors" in {r.id for r in knowledge.rules("h100")}
    assert {r.stage for r in knowledge.rules(stage="block_pointers")} == {"block_pointers"}
    with pytest.raises(UsageError, match="--stage nope"):
        knowledge.rules(stage="nope")


def test_hard_rule_prompt_carries_only_the_hard_rules_in_force() -> None:
    on_37 = knowledge.hard_rule_prompt("nvidia-sm90", triton_version="3.7.0")
    on_36 = knowledge.hard_rule_prompt("nvidia-sm90", triton_version="3.6.0")
    assert "Triton 3.7.0" in on_37 and "[block-ptr-removed]" in on_37 and "[block-ptr-removed]" not in on_36
    assert "[shared-memory-budget]" in on_36 and "232448" in on_36
    assert "[int64-offsets]" not in on_36  # advice
    intel = knowledge.hard_rule_prompt("intel-xe2", triton_version="3.6.0")
    assert "[intel-no-hardcoded-32-warps]" in intel and "[shared-memory-budget]" not in intel


def test_the_register_rule_says_a_tile_grows_with_its_warps() -> None:
    """The search reads which parameters grow together from the rules (one step of its walk): the accumulator
    rule's tile dimensions and warps, on NVIDIA and Intel; only groups whose every name the space has."""
    names = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "SPLIT"]
    assert knowledge.moves_together(names, "nvidia-sm90") == [("BLOCK_M", "num_warps"), ("BLOCK_N", "num_warps")]
    assert knowledge.moves_together(["BLOCK_M", "BLOCK_K", "num_stages"], "nvidia-sm90") == []  # no num_warps
    assert ("BLOCK_M", "num_warps") in knowledge.moves_together(None, "xe2")


def test_a_malformed_moves_together_names_the_rule() -> None:
    from evoforge.knowledge.rulebook import _parse_rule

    raw = {"id": "r1", "title": "t", "severity": "advice", "stage": "autotuning", "prompt": "p",
           "moves_together": [["BLOCK_M"]]}
    with pytest.raises(ValueError, match=r"rules/x.yaml: rule r1: moves_together"):
        _parse_rule(raw, "knowledge/rules/x.yaml")
