"""The staged arena (judge/arena.py): how a contained GPU candidate gets its inputs and returns its outputs when
its process cannot open the judge's CUDA IPC handle. The protocol is the same on every device, so it runs here on
the CPU (EVOFORGE_ARENA=staged); the H200 run is experiments/results/isolation/."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from evoforge.judge.arena import Arena, ArenaView, share

from evoforge.core import Candidate, EvalStatus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_each_side_keeps_its_own_copy_and_only_a_request_boundary_moves_bytes(tmp_path):
    judge = Arena(device="cpu", directory=tmp_path, initial_bytes=1 << 20, staged=True)
    lent, desc = share(judge, torch.arange(8, dtype=torch.float32))
    other, other_desc = share(judge, torch.ones(4))  # a region this request does not name
    receive, receive_desc = judge.empty((8,), torch.float32)
    view = ArenaView()
    view.attach(judge.handle())
    stage = judge.stage({"inputs": desc, "receive": [receive_desc]})
    assert stage["in"] == stage["out"] and len(stage["in"]) == 2  # the inputs and the receive buffer, not `other`
    view.pull(stage)
    theirs = view.build(desc)
    assert torch.equal(theirs, lent)
    assert view.build(other_desc).sum().item() == 0  # unnamed regions never reach the candidate's side
    theirs.mul_(-1)  # the candidate's process writes into its copy...
    view.tensor(receive_desc).fill_(7)
    assert torch.equal(lent, torch.arange(8, dtype=torch.float32))  # ...which the judge does not share
    lent.add_(100)  # nor does the candidate see the judge's later writes until the next request
    assert theirs[1].item() == -1
    view.push(stage)
    judge.unstage(stage)
    assert torch.equal(lent, -torch.arange(8, dtype=torch.float32))  # after the reply the judge reads it back
    assert receive.sum().item() == 56
    # A timing request's inputs are not read back: what the candidate does to them stays on its side.
    stage = judge.stage({"settle": desc})
    assert stage["out"] == []


def test_a_shared_arena_is_one_memory(tmp_path):
    judge = Arena(device="cpu", directory=tmp_path, initial_bytes=1 << 20)
    lent, desc = share(judge, torch.ones(4))
    view = ArenaView()
    view.attach(judge.handle())
    assert judge.stage({"inputs": desc}) is None  # nothing to stage
    view.build(desc).zero_()
    assert lent.sum().item() == 0


@pytest.fixture(scope="module")
def staged_evaluator():
    from evoforge.judge.chain import ChainOptions
    from evoforge.judge.evaluator import Evaluator

    evaluator = Evaluator(backend="interpreter", options=ChainOptions(trials=2, timing=False, seed=42), timeout_s=60,
                          knowledge=False, child_env={"EVOFORGE_ARENA": "staged"})
    yield evaluator
    evaluator.close()


@pytest.mark.parametrize(("name", "status", "words"), [
    ("relu/correct", EvalStatus.OK, None),
    ("adversarial/inputs_in_place", EvalStatus.REJECTED, "in place"),  # the judge reads its inputs back
    ("adversarial/identity_as_relu", EvalStatus.INCORRECT, None),
])
def test_the_chain_judges_through_a_staged_arena_as_through_a_shared_one(name, status, words, relu_task,
                                                                          staged_evaluator):
    source = (FIXTURES / f"{name}.py").read_text()
    result = staged_evaluator.evaluate(relu_task, Candidate.from_source(source, task=relu_task.name))
    assert result.details.get("arena") == "staged", result.details
    assert result.status == status, result.message
    if words:
        assert words in result.message
