"""The device-event timing method, on a simulated power-capped device (its clock is the simulation's).

A GPU at its power cap slows a kernel that draws more than the cap; alternating such a kernel call by call with
one that draws little averages the two draws, and the hungry kernel is timed faster than it runs on its own.
The method must time each kernel at the speed it sets for itself.
"""

from __future__ import annotations

import itertools

import pytest
from evoforge.backends.base import event_time_interleaved


class PowerCappedDevice:
    """Kernels with a power draw; the board's power is a moving average over recent calls; above the cap every
    kernel runs 10% slower. Time is simulated: ``now`` advances by each call's duration."""

    def __init__(self, cap: float = 0.6) -> None:
        self.now, self.power, self.cap, self.calls = 0.0, 0.0, cap, []

    def kernel(self, name: str, base_ms: float, draw: float):
        def run() -> None:
            self.power = 0.8 * self.power + 0.2 * draw
            self.now += base_ms * (1.1 if self.power > self.cap else 1.0)
            self.calls.append(name)
        return run

    def event(self):
        device = self

        class Event:
            def record(self) -> None:
                self.t = device.now

            def elapsed_time(self, other: Event) -> float:
                return other.t - self.t

        return Event()


def test_each_kernel_timed_at_the_speed_it_sets_for_itself():
    device = PowerCappedDevice()
    fns = {"ref": device.kernel("ref", 1.0, draw=0.0), "candidate": device.kernel("candidate", 1.0, draw=1.0)}
    timings = event_time_interleaved(fns, event=device.event, sync=lambda: None, flush=lambda: None, budget_ms=400)
    assert timings["ref"].median_ms == pytest.approx(1.0)
    # Alone the candidate runs above the cap; alternated call by call with the reference it would not (1.0).
    assert timings["candidate"].median_ms == pytest.approx(1.1)


def test_blocks_alternate_so_a_drift_cancels():
    device = PowerCappedDevice(cap=10.0)  # never capped
    fns = {"a": device.kernel("a", 1.0, 0.0), "b": device.kernel("b", 1.0, 0.0)}
    timings = event_time_interleaved(fns, event=device.event, sync=lambda: None, flush=lambda: None, budget_ms=400)
    blocks = [(name, len(list(run))) for name, run in itertools.groupby(device.calls[8:])]  # after warm-up, estimates
    assert [name for name, _ in blocks] == ["a", "b", "a"]  # A B B A: the two B blocks run back to back
    assert blocks[1][1] == 2 * blocks[0][1] == 2 * blocks[2][1]
    assert timings["a"].samples == timings["b"].samples >= 10


def test_a_block_the_wall_clock_disbelieves_is_dropped_and_a_candidate_none_of_whose_blocks_is_believed_rejected():
    """The judge's wall clock over a timed block checks the device events (patched timing, or work the timed
    stream does not see). A host stalled by its other work stretched one block's wall clock on the H200 and a
    correct KernelBench seed was rejected; now the block is dropped, and only a candidate that fails the check in
    every block is rejected. A cheat that fakes one block gains nothing: that block is the one dropped."""
    from evoforge.judge.chain import _ChainFailure, believed_times

    from evoforge.core import EvalStatus

    honest, faked = [2.0, 2.1, 2.0], [0.1, 0.1, 0.1]
    assert believed_times([(honest, True), (honest, True)], []) is None  # every block believed: nothing changes
    why = "the judge's wall clock saw 900 ms for a block whose device events account for 12 ms"
    assert believed_times([(honest, False), (honest, True)], [why]) == honest  # a stalled block, dropped
    assert believed_times([(faked, False), (honest, True)], [why]) == honest  # a faked block gains nothing
    with pytest.raises(_ChainFailure) as failure:
        believed_times([(faked, False), (faked, False)], [why, why])
    assert failure.value.status == EvalStatus.REJECTED and "in every one of its 2 timed blocks" in str(failure.value)
