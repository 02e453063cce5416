"""The README's "Python API" examples, run as a user pastes them: in order, in one namespace, in a fresh directory
holding ``my_relu.py``; a block with a top-level ``await`` runs as a notebook cell does, on a running event loop.

One campaign (three evaluations) and its resume (one more) share one local Ray, shut down at the end: the resume
failed while Ray was started from a thread that ended with the first campaign.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO


def python_api_examples(readme: Path = REPO / "README.md") -> list[str]:
    text = readme.read_text()
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_has_python_api_examples():
    import evoforge

    assert {"evaluate", "Evaluator", "run", "run_async", "CampaignResult"} <= set(evoforge.__all__)
    blocks = python_api_examples()
    joined = "\n".join(blocks)
    assert len(blocks) >= 4
    for name in ("evoforge.evaluate(", "evoforge.Evaluator(", "evoforge.run(", "evoforge.run_async("):
        assert name in joined, name


@pytest.mark.slow
def test_the_readme_python_api_examples_run(tmp_path, monkeypatch, capsys):
    import ray

    shutil.copy(FIXTURES / "relu" / "correct.py", tmp_path / "my_relu.py")
    monkeypatch.chdir(tmp_path)
    if ray.is_initialized():  # left by an earlier test's campaign in this process: a user's session starts its own
        ray.shutdown()
    namespace: dict[str, object] = {"__name__": "__readme__"}
    printed: list[list[str]] = []
    try:
        for i, block in enumerate(python_api_examples()):
            code = compile(block, f"README.md (Python API, example {i + 1})", "exec",
                           flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            outcome = eval(code, namespace)  # noqa: S307 - the README's own examples
            if asyncio.iscoroutine(outcome):  # a notebook cell: top-level await on a running loop
                asyncio.run(outcome)
            printed.append(capsys.readouterr().out.strip().splitlines())
    finally:
        if ray.is_initialized():
            ray.shutdown()
    evaluate, loop, run, record, resumed = printed
    assert evaluate[0].startswith("ok "), evaluate
    assert loop == ["256 ok", "1024 ok"]
    speedup, exported = run[0].split()
    assert float(speedup) > 0 and Path(exported).is_file()
    assert record == ["3"]  # the record read with Optuna alone: its objective column is value_speedup
    assert resumed == ["4"]
    assert (tmp_path / "runs" / "relu" / "optuna.db").is_file()


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
