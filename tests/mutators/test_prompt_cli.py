"""``evoforge prompt``: exactly what an operator would send, for every LLM operator, with one line on a mistake."""

from __future__ import annotations

import json

import pytest
from evoforge.mutators.registry import operator_names

from evoforge import knowledge
from tests.conftest import FIXTURES, REPO, cli_main

RELU = str(FIXTURES / "relu" / "correct.py")
TEMPLATE = str(REPO / "knowledge" / "templates" / "elementwise_relu.py")


def test_crossover_needs_a_second_kernel_and_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    proc = cli_main(capsys, "prompt", "L1/19", RELU, "--operator", "llm-crossover")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "--other" in proc.stderr
    same = cli_main(capsys, "prompt", "L1/19", RELU, "--operator", "llm-crossover", "--other", RELU)
    assert same.returncode == 2 and "Traceback" not in same.stderr and "same source" in same.stderr


def test_crossover_prompt_carries_both_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    proc = cli_main(capsys, "prompt", "L1/19", RELU, "--operator", "llm-crossover", "--other", TEMPLATE, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    user = json.loads(proc.stdout)[-1]["content"]
    assert open(RELU).read() in user and knowledge.template_source("elementwise_relu") in user


@pytest.mark.parametrize("operator", [n for n in operator_names("llm") if n != "llm-crossover"])
def test_every_other_llm_operator_previews(operator: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = [] if operator == "llm-generate" else [RELU]
    proc = cli_main(capsys, "prompt", "L1/19", *args, "--operator", operator, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    messages = json.loads(proc.stdout)
    assert [m["role"] for m in messages] == ["system", "user"] and "ModelNew" in messages[0]["content"]
