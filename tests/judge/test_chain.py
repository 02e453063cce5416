"""The verification chain against adversarial kernels: each must get its status, the caller survives all."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from evoforge.core import Candidate, EvalStatus
from tests.conftest import FIXTURES, cli_main

EXPECTED = {
    "correct": EvalStatus.OK,
    "missing_tail": EvalStatus.INCORRECT,  # unwritten tail is poisoned with NaN
    "torch_only": EvalStatus.REJECTED,
    "for_show": EvalStatus.REJECTED,  # launches a kernel, but torch.relu computes the answer
    "hang": EvalStatus.TIMEOUT,
    "segfault": EvalStatus.REJECTED,  # ctypes.string_at(0): native code of its own, refused before it runs
    "syntax_error": EvalStatus.COMPILE_ERROR,
    "jit_error": EvalStatus.COMPILE_ERROR,
    "raises": EvalStatus.RUNTIME_ERROR,
    "nan": EvalStatus.INCORRECT,
    "cached": EvalStatus.INCORRECT,  # fresh inputs each trial, one instance: a cached answer is wrong
    "hardwired": EvalStatus.INCORRECT,  # the extra shape catches it
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_adversarial_kernel_gets_its_status(name, relu_task, interpreter_evaluator):
    source = (FIXTURES / "relu" / f"{name}.py").read_text()
    result = interpreter_evaluator.evaluate(relu_task, Candidate.from_source(source, task=relu_task.name),
                                            timeout_s=10 if name == "hang" else None)
    assert result.status is EXPECTED[name], result.message
    if result.status is not EvalStatus.OK:
        assert result.message  # a failure always says why
    assert result.speedup is None or result.ok  # a failure never looks like a score


def test_messages_carry_what_a_repair_needs(relu_task, interpreter_evaluator):
    def message(name, task=relu_task):
        source = (FIXTURES / "relu" / f"{name}.py").read_text()
        return interpreter_evaluator.evaluate(task, Candidate.from_source(source)).message

    assert "line 6" in message("syntax_error")
    assert "index" in message("missing_tail") and "nan" in message("missing_tail")
    assert "(3, 777)" in message("hardwired")
    assert "relu" in message("for_show")
    assert "ctypes.string_at" in message("segfault")
    assert "SIGSEGV" in message("segfault", task=replace(relu_task, allow=("native",)))
    # a conduct violation names where it happened (a staged-arena change once put "None" there)
    thread = interpreter_evaluator.evaluate(relu_task, Candidate.from_source(
        (FIXTURES / "adversarial" / "thread_worker.py").read_text())).message
    assert thread.startswith("forward at the main shape"), thread


def test_evaluator_survives_crash_and_hang_and_then_passes_good_kernel(relu_task, interpreter_evaluator):
    good = Candidate.from_source((FIXTURES / "relu" / "correct.py").read_text())
    native = replace(relu_task, allow=("native",))  # a task that lets the candidate call ctypes can crash it
    for bad in ("segfault", "raises"):
        result = interpreter_evaluator.evaluate(native, Candidate.from_source(
            (FIXTURES / "relu" / f"{bad}.py").read_text()))
        assert result.status is {"segfault": EvalStatus.CRASHED, "raises": EvalStatus.RUNTIME_ERROR}[bad]
        assert interpreter_evaluator.evaluate(relu_task, good).ok


def test_params_reach_the_module(relu_task, interpreter_evaluator):
    source = (FIXTURES / "relu" / "correct.py").read_text()
    ok = interpreter_evaluator.evaluate(relu_task, Candidate.from_source(source, params={"BLOCK": 256}))
    assert ok.ok
    broken = interpreter_evaluator.evaluate(relu_task, Candidate.from_source(source, params={"BLOCK": 1000}))
    assert broken.status is EvalStatus.COMPILE_ERROR  # non-power-of-two arange, caught by the interpreter


def test_cli_eval_json_contract(tmp_path, capsys):
    proc = cli_main(capsys, "eval", "L1/19", str(FIXTURES / "relu" / "correct.py"), "--backend", "interpreter",
                   "--set", "batch_size=4", "--set", "dim=1000", "--shapes", "batch_size=3,dim=777", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("status", "message", "runtime_ms", "ref_ms", "speedup", "max_abs_err", "backend"):
        assert key in out
    assert out["status"] == "ok" and out["backend"] == "interpreter"
    assert out["timing_representative"] is False and out["speedup"] > 0

    proc = cli_main(capsys, "eval", "L1/19", str(FIXTURES / "relu" / "nan.py"), "--backend", "interpreter",
                   "--set", "batch_size=4", "--set", "dim=1000", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout.strip().splitlines()[-1])["status"] == "incorrect"


@pytest.mark.parametrize("args, needle", [
    (["eval", "no/such/task.py", "tests/fixtures/relu/correct.py"], "no/such/task.py"),
    (["eval", "L1/19", "missing_candidate.py"], "missing_candidate.py"),
    (["eval", "L1/19", "tests/fixtures/relu/correct.py", "--set", "batchsize=4"], "batchsize"),
    (["eval", "L1/19", "tests/fixtures/relu/correct.py", "--backend", "tpu"], "--backend"),
    (["eval", "L1/19", "tests/fixtures/relu/correct.py", "--shapes", "oops"], "--shapes"),
])
def test_bad_input_is_one_line_exit_2(args, needle, capsys):
    proc = cli_main(capsys, *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_broken_task_file_names_the_file(tmp_path, capsys):
    bad = tmp_path / "bad_task.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    proc = cli_main(capsys, "eval", str(bad), "tests/fixtures/relu/correct.py")
    assert proc.returncode == 2 and "bad_task.py" in proc.stderr and "get_inputs" in proc.stderr


def test_a_candidate_that_runs_out_of_memory_beside_a_judge_holding_little_is_its_own_fault(
        relu_task, interpreter_evaluator):
    """A candidate's out-of-memory counts as the judge's (and can stop a task whose seed also ran out) only where the
    judge's own copies hold half the device; a candidate that runs out, or says it did, beside a judge holding
    little stays a runtime_error of its own."""
    source = (FIXTURES / "relu" / "raises.py").read_text().replace(
        'raise ValueError("kernel launch configuration is wrong")',
        'raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")')
    result = interpreter_evaluator.evaluate(relu_task, Candidate.from_source(source, task=relu_task.name))
    assert result.status is EvalStatus.RUNTIME_ERROR and "out of memory" in result.message
    assert not result.details.get("judge_out_of_memory") and "the judge ran out" not in result.message
