"""The static check runs once per child: its verdict travels with the candidate (meta ``static_check``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from evoforge.judge import precheck as precheck_module
from evoforge.judge.evaluator import Evaluator
from evoforge.judge.precheck import STATIC_CHECK, precheck, static_stamp, static_verdict

from evoforge.core import Candidate, EvalStatus
from tests.conftest import FIXTURES

CORRECT = (FIXTURES / "relu" / "correct.py").read_text()


@pytest.fixture
def static_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = precheck_module.static_check

    def counted(source: str, *, language: str = "triton"):
        calls.append(source)
        return real(source, language=language)

    monkeypatch.setattr(precheck_module, "static_check", counted)
    return calls


def test_the_campaign_precheck_stamps_the_child_and_the_actor_reads_the_stamp(static_calls: list[str]) -> None:
    child = Candidate.from_source(CORRECT, task="relu", operator="rule:retune")
    checked, failure = precheck(child, backend="interpreter", arch="nvidia-sm90", knowledge=True)
    assert failure is None and checked.id == child.id
    assert checked.meta[STATIC_CHECK] == {"passed": True, "source": child.structure_id, "language": "triton"}
    shipped = Candidate.from_dict(checked.to_dict())  # what a Ray actor receives
    evaluator = Evaluator(backend="interpreter", knowledge=False)  # the actor's evaluator; no process started
    try:
        assert evaluator.precheck(shipped) is None
    finally:
        evaluator.close()
    assert static_verdict(shipped) is None
    assert len(static_calls) == 1  # the campaign's, and only that one


def test_a_stamp_made_for_another_source_is_not_trusted(static_calls: list[str]) -> None:
    checked, _ = precheck(Candidate.from_source(CORRECT), backend="interpreter", arch="nvidia-sm90")
    changed = replace(checked, source="class ModelNew:\n    pass\n")  # the stamp no longer names this source
    failure = static_verdict(changed)
    assert failure is not None and failure.status is EvalStatus.REJECTED
    cute = replace(checked, language="cute")
    assert static_verdict(cute) is not None and len(static_calls) == 3


def test_a_failing_child_is_not_stamped() -> None:
    broken = Candidate.from_source("def f(:\n")
    checked, failure = precheck(broken, backend="interpreter", arch="nvidia-sm90")
    assert failure is not None and failure.status is EvalStatus.COMPILE_ERROR and failure.backend == "interpreter"
    assert STATIC_CHECK not in checked.meta and static_stamp(broken)["source"] == broken.structure_id
