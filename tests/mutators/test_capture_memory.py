"""A capture that meets a device short of memory waits for it instead of leaving the task without a seed.

A campaign's evaluations run beside its captures; on an H100 the static build of L1/84 (4 GiB of input) ran out of
memory while two evaluators held 51 GiB, its capture recorded no main shape, and the task had no seed under the strict
rule. Here the task's own operator raises CUDA's out-of-memory error on its first call (what the device does while
another process holds its memory) and then has room, inside a real torch.compile in the capture's own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from evoforge.mutators.inductor_capture import when_memory_allows
from evoforge.mutators.inductor_common import NoInductorSeed

_TASK = textwrap.dedent('''
    import torch
    import torch.nn as nn

    _calls = [0]


    @torch.library.custom_op("evoforge_test::scarce_memory", mutates_args=())
    def scarce_memory(x: torch.Tensor) -> torch.Tensor:
        _calls[0] += 1
        if _calls[0] == 1:  # another process holds the device's memory at the first call
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
                                         "capacity of 79.18 GiB of which 3.18 GiB is free.")
        return x * 2


    @scarce_memory.register_fake
    def _(x):
        return torch.empty_like(x)


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(scarce_memory(x)) + 1


    def get_inputs():
        return [torch.randn(4, 8)]


    def get_init_inputs():
        return []
''')


def test_a_capture_that_runs_out_of_device_memory_waits_and_compiles_again(tmp_path):
    task = tmp_path / "scarce.py"
    task.write_text(_TASK)
    out = tmp_path / "capture.json"
    proc = subprocess.run([sys.executable, "-P", "-m", "evoforge.mutators.inductor_capture", str(task), "cpu",
                           str(out), "{}", "[]"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    captured = json.loads(out.read_text())
    assert "no_seed" not in captured, captured.get("no_seed")  # before: "torch.compile failed ... OutOfMemoryError"
    assert captured["output_code"]
    assert "out of memory" in proc.stderr and "trying again" in proc.stderr  # the wait is said, not silent


def test_the_wait_ends_and_other_failures_are_not_waited_for():
    tries: list[str] = []

    def short_of_memory():
        tries.append("oom")
        raise NoInductorSeed("torch.compile failed on this task (OutOfMemoryError: CUDA out of memory. Tried to "
                             "allocate 4.00 GiB)")

    with pytest.raises(NoInductorSeed, match="OutOfMemoryError"):
        when_memory_allows(short_of_memory, wait_s=0.01, patience_s=0.035)
    assert 2 <= len(tries) <= 5  # tried again while patience lasted, then the memory failure itself is the reason

    def wrong():
        tries.append("other")
        raise NoInductorSeed("torch.compile failed on this task (Unsupported: a graph break)")

    tries.clear()
    with pytest.raises(NoInductorSeed, match="graph break"):
        when_memory_allows(wrong, wait_s=5.0, patience_s=60.0)
    assert tries == ["other"]  # a failure of another kind is not retried
