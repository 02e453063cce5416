"""The coverage script's pure parts on committed captures: both compute rules from one capture, and the summary a
reader gets (the GPU run itself is experiments/benchmarks/kernelbench_coverage.py on the H200)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("kernelbench_coverage",
                                                  REPO / "experiments" / "benchmarks" / "kernelbench_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_capture_with_a_vendor_gemm_gives_a_vendor_seed_and_a_strict_reason():
    cov = _script()
    data = json.loads((FIXTURES / "inductor" / "level2_76_Gemm_Add_ReLU.cpu.json").read_text())
    made = cov.convert({**data, "capture_s": 1.0, "torch_compile_s": 2.0})  # the script's extra keys are ignored
    assert isinstance(made["strict"], str) and "addmm" in made["strict"]
    source, ops = made["vendor"]
    assert ops == ("addmm",) and "torch.addmm(" in source
    relu = json.loads((FIXTURES / "inductor" / "level1_19_ReLU.cpu.json").read_text())
    made = cov.convert(relu)
    assert made["vendor"] == "same as strict" and made["strict"][1] == ()
    assert cov.convert({"no_seed": "torch.compile failed"}) == {"strict": "torch.compile failed",
                                                               "vendor": "torch.compile failed"}


def test_the_summary_counts_each_rule_and_groups_the_reasons(tmp_path):
    cov = _script()
    rows = [
        {"task": "level1/19_ReLU", "spec": "L1/19", "rule": "strict", "status": "ok", "vs_eager": 1.0,
         "vs_compile": 0.5, "seed_ms": 2.0, "eager_ms": 2.0, "compile_ms": 1.0},
        {"task": "level2/76_Gemm", "spec": "L2/76", "rule": "strict", "status": "no_seed",
         "message": "Inductor calls mm from a vendor library"},
        {"task": "level2/76_Gemm", "spec": "L2/76", "rule": "vendor", "status": "ok", "vs_eager": 2.0,
         "vs_compile": 2.0, "seed_ms": 1.0, "eager_ms": 2.0, "compile_ms": 2.0},
        {"task": "level2/12_Gemm", "spec": "L2/12", "rule": "strict", "status": "no_seed",
         "message": "Inductor calls mm from a vendor library"},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = cov.summarize([path], tmp_path)
    assert (tmp_path / "coverage.md").read_text() == text
    level2 = text.split("## L2")[1].split("## Every row")[0]
    assert "correct seed under the strict rule: 0" in level2
    assert "with vendor GEMM/conv allowed (strict where it has one): 1" in level2
    assert "2 x no_seed: Inductor calls mm from a vendor library" in level2
    assert "over torch.compile 0.500x" in text.split("## L1")[1]


def test_a_recheck_replaces_the_earlier_row_of_its_task_and_rule(tmp_path):
    cov = _script()
    first = tmp_path / "shard.jsonl"
    first.write_text(json.dumps({"task": "level1/20_LeakyReLU", "spec": "L1/20", "rule": "strict",
                                 "status": "runtime_error", "message": "self.negative_slope missing"}) + "\n")
    again = tmp_path / "recheck.jsonl"
    again.write_text(json.dumps({"task": "level1/20_LeakyReLU", "spec": "L1/20", "rule": "strict", "status": "ok",
                                 "vs_eager": 1.0, "vs_compile": 1.0, "seed_ms": 3.0, "eager_ms": 3.0,
                                 "compile_ms": 3.0}) + "\n")
    text = cov.summarize([first, again], tmp_path)
    assert "correct seed under the strict rule: 1" in text
    assert "runtime_error" not in text and text.count("| level1/20_LeakyReLU |") == 1


def test_tasks_the_calls_time_does_not_reach_are_left_for_a_later_call_not_recorded_as_failures(tmp_path):
    """A device call's deadline that comes before a task's capture leaves the task uncaptured (a later call does
    it), where a capture cut by the call's own time limit would have read as the task's failure."""
    import time

    cov = _script()
    items = [("L1/19", str(REPO / "tests"), {}), ("L2/76", str(REPO / "tests"), {})]
    got = dict(cov.capture_iter(items, "cpu", tmp_path / "captures", 2, 60.0, stop_at=time.perf_counter() - 1))
    assert got == {"L1/19": None, "L2/76": None}
    assert not list((tmp_path / "captures").iterdir())  # nothing started, nothing written


def test_tasks_with_committed_rows_are_not_run_again(tmp_path):
    """``--done`` names rows made before (the committed shards, the search's seeds): a call spends no device time
    on their tasks."""
    import os
    import subprocess
    import sys

    done = tmp_path / "earlier.jsonl"
    done.write_text("".join(json.dumps({"task": t, "spec": s, "rule": "strict", "status": "ok"}) + "\n"
                            for t, s in (("level1/19_ReLU", "L1/19"), ("level2/76_Gemm", "L2/76"))))
    proc = subprocess.run([sys.executable, str(REPO / "experiments" / "benchmarks" / "kernelbench_coverage.py"),
                           "--smoke", "--done", str(done), "--out", str(tmp_path / "out")], cwd=REPO, text=True,
                          capture_output=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "captured and judged 0 of 0 tasks" in proc.stdout
    assert not (tmp_path / "out" / "captures").exists() or not list((tmp_path / "out" / "captures").iterdir())


def test_a_correct_seed_left_untimed_counts_as_correct_and_is_timed_by_a_later_call(tmp_path):
    """A call whose deadline comes before a judged task's timing writes its verdict (correct, not timed): the
    summary counts the seed as correct but not among the timed, and ``--done`` does not skip the task, so a
    later call times it and its row replaces the untimed one."""
    cov = _script()
    untimed = tmp_path / "call1.jsonl"
    untimed.write_text("".join(json.dumps(r) + "\n" for r in [
        {"task": "level1/23_Softmax", "spec": "L1/23", "rule": "strict", "status": "ok",
         "timing_error": cov.NOT_TIMED},
        {"task": "level1/8_Gemm", "spec": "L1/8", "rule": "strict", "status": "no_seed", "message": "mm"}]))
    assert cov.done_specs([untimed]) == {"L1/8"}
    text = cov.summarize([untimed], tmp_path)
    assert "correct seed under the strict rule: 1" in text
    assert "strict: 1 correct seeds not yet timed" in text and "timed);" not in text
    timed = tmp_path / "call2.jsonl"
    timed.write_text(json.dumps({"task": "level1/23_Softmax", "spec": "L1/23", "rule": "strict", "status": "ok",
                                 "vs_eager": 2.0, "vs_compile": 1.0, "seed_ms": 1.0, "eager_ms": 2.0,
                                 "compile_ms": 1.0}) + "\n")
    assert cov.done_specs([untimed, timed]) == {"L1/8", "L1/23"}
    text = cov.summarize([untimed, timed], tmp_path)
    assert "not yet timed" not in text and "(1 timed)" in text
