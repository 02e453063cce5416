"""The judge's comparison of a candidate's output with the reference's: the same verdicts and messages chunk by
chunk as over the whole output, in a bounded share of memory (an 8 GiB output ran the judge out of memory)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from evoforge.judge import compare
from evoforge.judge.compare import compare_outputs


def _cases() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    e = torch.randn(6, 37)
    late = e.clone()
    late[5, 30] += 1.0  # one element off, in the last chunk
    spread = e + 1e-3 * torch.randn(6, 37)  # many off, the largest somewhere
    nonfinite = e.clone()
    nonfinite[4, 2] = float("nan")
    nonfinite[5, 1] = float("inf")
    tiny = torch.full((6, 37), 1e-7)  # every element within atol, the error half the norm
    return {"equal": (e.clone(), e), "late": (late, e), "spread": (spread, e), "nonfinite": (nonfinite, e),
            "tiny": (tiny * 1.5, tiny), "both nan": (torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))}


@pytest.mark.parametrize("name", list(_cases()))
def test_chunk_by_chunk_the_verdict_and_message_are_those_over_the_whole(name, monkeypatch):
    got, expected = _cases()[name]
    whole = compare_outputs(got, expected)
    monkeypatch.setattr(compare, "COMPARE_CHUNK", 5)  # 45 chunks of a 222-element output
    chunked = compare_outputs(got, expected)
    assert (chunked.ok, chunked.criterion, chunked.message) == (whole.ok, whole.criterion, whole.message)
    assert chunked.max_abs_err == pytest.approx(whole.max_abs_err)
    if name == "late":
        assert not chunked.ok and "1 of 222 elements" in chunked.message and "index (5, 30)" in chunked.message
    if name == "nonfinite":
        assert chunked.criterion == "nonfinite" and "2 of 222" in chunked.message and "(4, 2)" in chunked.message
    if name == "tiny":
        assert not chunked.ok and "of its norm" in chunked.message


def test_the_comparison_of_a_big_output_holds_a_bounded_share_of_memory():
    """Two 256 MiB outputs compared: the temporaries are a few chunks, where over the whole output they were
    several copies of it (differences, masks, the relative error)."""
    code = """
import resource, torch
from evoforge.judge.compare import compare_outputs
torch.manual_seed(0)
e = torch.randn(1 << 26)
g = e + 1e-6 * torch.randn(1 << 26)
torch.empty(1 << 26).fill_(0.0)  # the allocator's first big blocks, outside the measurement
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert compare_outputs(g, e).ok
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    grew_mib = int(proc.stdout.strip().splitlines()[-1])
    assert grew_mib < 600, f"the comparison of two 256 MiB outputs grew the process by {grew_mib} MiB"
