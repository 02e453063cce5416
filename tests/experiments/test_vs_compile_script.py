"""The vs-torch.compile benchmark's summary (the GPU run is experiments/benchmarks/kernelbench_vs_compile.py on the
H200): a task re-run with ``--only`` is counted once, from its later row."""

from __future__ import annotations

import json

from tests.experiments.test_benchmarks import _load


def _script():
    return _load("kernelbench_vs_compile.py")


def _row(spec: str, best: float) -> dict:
    return {"spec": spec, "task": spec, "rule": "strict", "allow_ops": [], "best_correct": True, "seed_correct": True,
            "best_vs_compile": best, "seed_vs_compile": best, "best_ms": 1.0, "compile_ms": best}


def test_a_task_re_run_is_counted_once_from_its_later_row(tmp_path):
    first, again = tmp_path / "part1.jsonl", tmp_path / "rerun.jsonl"
    first.write_text("\n".join(json.dumps(_row(s, v)) for s, v in (("L2/87", 0.6), ("L1/12", 1.2))) + "\n")
    again.write_text(json.dumps(_row("L2/87", 1.4)) + "\n")
    text = _script().summarize([first, again], None, tmp_path / "out")
    assert "correct 2 of 2" in text and "worst 1.200x" in text and "below 0.9x: 0" in text
    assert "re-run, the later row kept: L2/87" in text
    assert text.count("| L2/87 |") == 1
