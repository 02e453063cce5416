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
