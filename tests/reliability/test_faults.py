"""Kernels that crash, hang, exhaust memory, write out of bounds or attack the result pipe.

Each fault gets a status that says what happened (never a score), the caller survives it, and the next
correct kernel still evaluates ``ok`` in the same evaluator: what a campaign needs to keep going for hours.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from evoforge.judge.evaluator import Evaluator

from evoforge.core import Candidate, EvalStatus
from tests.reliability.conftest import candidate, evaluator_kwargs, good, wait_for_file, wait_gone

C, RT, INC = EvalStatus.CRASHED, EvalStatus.RUNTIME_ERROR, EvalStatus.INCORRECT

# fault kernel -> (statuses it may end with, words its message must carry)
FAULTS = {
    "segfault": ({C}, "SIGSEGV"),
    "abort": ({C}, "SIGABRT"),
    "exit": ({C}, "exited with code 3"),
    "hang": ({EvalStatus.TIMEOUT}, "no result after"),
    # The address-space limit turns host OOM into a failed allocation (or an abort), not the OOM killer.
    "host_oom": ({C, RT}, "allocate"),
    # The interpreter stores through raw pointers: unmapped memory faults; nearby heap may or may not.
    "oob_write_far": ({C, INC}, ""),
    "oob_write_near": ({C, INC, RT}, ""),
    "garble_protocol": ({C}, "channel to the judge"),
    "forge_result": ({C}, "channel to the judge"),  # a forged "ok" with speedup 1000 must not be believed
    "close_protocol": ({C}, "exited"),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_is_contained_and_next_kernel_passes(name, relu_small, fault_evaluator):
    allowed, words = FAULTS[name]
    assert fault_evaluator.evaluate(relu_small, good()).ok  # a live process, with its own directory
    home = Path(fault_evaluator.sandbox._home.name)
    # Every fault but the hang ends by itself: a limit far beyond its time, so that a busy machine's slow process start
    # is not read as a hang (host_oom read "timeout: no result after 5.92 s" in a full suite on 2 busy cores).
    result = fault_evaluator.evaluate(relu_small, candidate(name), timeout_s=None if name == "hang" else 300.0)
    assert result.status in allowed, f"{name}: {result.status}: {result.message[:500]}"
    assert words in result.message, result.message[:500]
    if name in ("segfault", "abort"):  # a crash names what the judge was doing, at which shape (issue 18)
        assert "(while running at the main shape, correctness run 1 of" in result.message, result.message[:500]
    assert result.speedup is None and result.runtime_ms is None  # a failure never looks like a score
    # the candidate's process was killed (or ended): its working directory went with it, the judge's stays
    assert home.exists() and not list(home.glob("evoforge-eval-*/*/candidate-*"))
    after = fault_evaluator.evaluate(relu_small, good())
    assert after.status is EvalStatus.OK, f"after {name}: {after.status}: {after.message[:500]}"


def test_printing_from_a_kernel_does_not_break_the_protocol(relu_small, fault_evaluator):
    """print, sys.stdout, sys.__stdout__, os.write(1) and a child's stdout all land in stderr, not the pipe."""
    before = fault_evaluator.sandbox.restarts
    result = fault_evaluator.evaluate(relu_small, candidate("prints"))
    assert result.status is EvalStatus.OK, result.message
    assert result.speedup is None or result.speedup < 1000  # the printed forged result was not read
    assert fault_evaluator.evaluate(relu_small, good()).ok
    assert fault_evaluator.sandbox.restarts == before  # nothing made the process suspect


def test_a_hung_kernel_takes_its_own_child_processes_down(relu_small, tmp_path, capfd, monkeypatch):
    """Uncontained (the PIDs the candidate writes must be this machine's, and its file must reach the test), and
    the user is told so in one line."""
    from evoforge.judge import sandbox

    monkeypatch.setattr(sandbox, "_SAID", set())
    pidfile = tmp_path / "pids"
    evaluator = Evaluator(**evaluator_kwargs(containment="none"))
    try:
        result = evaluator.evaluate(relu_small, candidate("orphan_hang", PIDFILE=str(pidfile)))
        said = [line for line in capfd.readouterr().err.splitlines() if "not contained" in line]
        assert said == ["evoforge: candidates are not contained (EVOFORGE_CONTAINMENT=none): they see the file "
                        "system, the network and the processes of the user running evoforge"], said
        assert result.status is EvalStatus.TIMEOUT
        worker_pid, grandchild_pid = map(int, wait_for_file(pidfile).split())
        assert wait_gone([worker_pid, grandchild_pid]) == []
        assert evaluator.evaluate(relu_small, good()).ok
    finally:
        evaluator.close()


def test_evaluation_processes_leave_no_temporary_directories(relu_small, monkeypatch, tmp_path):
    """Every evaluation process gets a fresh directory under TMPDIR; close removes the last one too.

    What is measured is directories, not time: the timeout is generous (a crash and a healthy kernel both return
    as soon as they are done), so a busy machine cannot turn the healthy kernel into a ``timeout``."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    evaluator = Evaluator(**evaluator_kwargs(timeout_s=300))
    try:
        assert evaluator.evaluate(relu_small, candidate("segfault")).status is EvalStatus.CRASHED
        assert evaluator.evaluate(relu_small, good()).ok
        assert len(list(tmp_path.glob("evoforge-sandbox-*"))) == 1  # only the live process's
    finally:
        evaluator.close()
    assert list(tmp_path.iterdir()) == []


def test_a_result_pipe_flooded_without_newline_is_a_crash_not_a_hang_of_the_caller(relu_small, fault_evaluator):
    source = candidate("garble_protocol").source.replace(
        'os.write(fd, b"garbage, not a result\\n")', 'os.write(fd, b"x" * (20 << 20))')
    assert "20 << 20" in source
    result = fault_evaluator.evaluate(relu_small, Candidate.from_source(source))
    assert result.status is EvalStatus.CRASHED
    assert fault_evaluator.evaluate(relu_small, good()).ok


# ---------------------------------------------------------------- on a GPU only

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs on the GPU machine)")


@pytest.fixture(scope="module")
def cuda_evaluator():
    from evoforge.cli import make_evaluator

    evaluator = make_evaluator(backend_name="cuda", arch=None, trials=2, timeout_s=60, knowledge=False, timing=False)
    yield evaluator
    evaluator.close()


@cuda
def test_broken_cuda_context_is_contained(relu_small, cuda_evaluator):
    """An illegal address poisons the CUDA context of the process: the next kernel must get a fresh one."""
    result = cuda_evaluator.evaluate(relu_small, candidate("cuda_illegal_address"))
    assert result.status in {RT, C}, result.message
    assert "illegal" in result.message.lower() or result.status is C, result.message
    after = cuda_evaluator.evaluate(relu_small, good())
    assert after.status is EvalStatus.OK, after.message


@cuda
def test_device_oom_is_a_runtime_error_and_memory_comes_back(relu_small, cuda_evaluator):
    result = cuda_evaluator.evaluate(relu_small, candidate("device_oom"))
    assert result.status in {RT, C}, result.message
    assert "out of memory" in result.message.lower() or result.status is C, result.message
    after = cuda_evaluator.evaluate(relu_small, good())
    assert after.status is EvalStatus.OK, after.message


@pytest.mark.parametrize("containment", ["none", "bwrap"])
def test_a_candidate_process_that_dies_before_loading_says_why(tmp_path, containment):
    """A candidate's process that dies before its own log opens (here that log cannot be opened: a folder stands in
    its place) wrote its traceback where the judge never read it: its candidate was `crashed` with "exited with
    code 1 (importing the candidate)" and no cause. Now the judge quotes its last error line."""
    import os
    import shutil
    import subprocess
    import sys

    if containment == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    script = ("import sys\n"
              "from pathlib import Path\n"
              "from evoforge.judge.candidate_process import CandidateGone, CandidateProcess\n"
              "work = Path(sys.argv[1]) / 'candidate'\n"
              "(work / 'output.log').mkdir(parents=True)\n"
              "try:\n"
              "    CandidateProcess(spec={}, workdir=work, startup_timeout_s=120)\n"
              "except CandidateGone as gone:\n"
              "    print('GONE', gone.status.value, str(gone).splitlines()[0])\n")
    # A judge of its own (its forkserver, and the contained Python's wrapper, in a private TMPDIR).
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path),
                                             "EVOFORGE_CONTAINMENT": containment})
    said = [line for line in proc.stdout.splitlines() if line.startswith("GONE")]
    assert said, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert said[0].startswith("GONE crashed the candidate's process exited with code 1 (importing the candidate): "
                              "IsADirectoryError: "), said[0]
    assert "output.log" in said[0]
