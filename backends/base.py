"""The device protocol the verification chain is written over, the device's turn and the timing loops every backend
shares. The registry of backends by name is ``backends/registry.py``."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evoforge.core import device_turn_holder

# Where the evaluation processes of one machine meet to take turns on a device (a fixed path: each sandboxed
# process has a TMPDIR of its own).
DEVICE_LOCK_DIR = "/tmp/evoforge-device-locks"


def versions() -> dict[str, str]:
    """The versions every result records: Python, torch, Triton where installed, CUDA where torch was built with it."""
    import platform

    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    if torch.version.cuda:
        out["cuda"] = torch.version.cuda
    return out


@dataclass(frozen=True)
class Timing:
    """Times of one function, in milliseconds. ``representative`` is False where times say nothing about a GPU."""

    median_ms: float
    min_ms: float
    samples: int
    representative: bool = True
    samples_ms: tuple[float, ...] = field(default=(), repr=False)

    @classmethod
    def from_samples(cls, samples_ms: list[float], *, representative: bool = True) -> Timing:
        return cls(median_ms=statistics.median(samples_ms), min_ms=min(samples_ms), samples=len(samples_ms),
                   representative=representative, samples_ms=tuple(samples_ms))


@dataclass(frozen=True)
class EvaluationProcess:
    """What a backend's sandboxed evaluation process needs, set before it imports Triton.

    ``env``: variables the device needs (``TRITON_INTERPRET=1`` for the interpreter). ``memory_limit_bytes``: an
    address-space limit for the process, or None where the device forbids one (a GPU driver maps far more
    virtual memory than any useful limit).
    """

    env: dict[str, str] = field(default_factory=dict)
    memory_limit_bytes: int | None = None


@runtime_checkable
class Backend(Protocol):
    """A device the chain can run and time kernels on.

    ``arch`` is the knowledge-base key of the target (``nvidia-sm90``, ``intel-xe2``...). Nothing here assumes
    CUDA: the chain only calls these members.
    """

    name: str

    lock_key: str | None
    """The physical device's identity, the same in every process that uses it. Evaluations sharing a device
    take turns for their measuring phase (correctness and timing) while the others load and compile; None: no
    turns (the interpreter, whose times are not representative anyway)."""

    def available(self) -> tuple[bool, str]: ...

    @property
    def device(self) -> str: ...

    @property
    def arch(self) -> str: ...

    @property
    def properties(self) -> dict[str, Any]: ...

    def evaluation_process(self) -> EvaluationProcess:
        """How the sandboxed evaluation process of this device is set up (environment, memory limit)."""
        ...

    def device_count(self) -> int:
        """Devices of this kind the process sees; 0 for a backend that runs on the host (interpreter, replay)."""
        ...

    def synchronize(self) -> None: ...

    def flush(self) -> None:
        """Evict the device's last-level cache (a large write), so each timed call starts cold."""
        ...

    def block_timer(self, fn: Callable[[], Any]) -> BlockTimer:
        """A timer of ``fn`` in this process, for ``interleaved_blocks``."""
        ...

    def time_interleaved(self, fns: dict[str, Callable[[], Any]], *, budget_ms: float = 1000.0) -> dict[str, Timing]:
        """Time several functions in one process, interleaved, so drift hits all of them alike."""
        ...


def lock_key_of(backend: Any) -> str | None:
    """The backend's ``lock_key``, or None (no turns) where it has none or cannot name its device: a device that
    cannot name itself takes no turns rather than failing every candidate."""
    try:
        return getattr(backend, "lock_key", None)
    except Exception:  # noqa: BLE001
        return None


def device_turn_path(key: str, lock_dir: str = DEVICE_LOCK_DIR) -> str:
    """The lock file of the device ``key`` names (its folder made): what ``device_turn`` holds, and what a process
    that cannot import the backends (a capture: ``mutators.inductor_capture.DEVICE_TURN_ENV``) is told to hold."""
    os.makedirs(lock_dir, mode=0o777, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    return os.path.join(lock_dir, f"{safe}.lock")


@contextlib.contextmanager
def device_turn(key: str | None, lock_dir: str = DEVICE_LOCK_DIR) -> Iterator[dict[str, float]]:
    """Hold the device's turn: an exclusive ``flock`` on ``lock_dir/<key>.lock``, waiting for it if needed.

    Yields ``{"wait_s", "start"}`` (seconds waited; wall-clock time the turn began). The kernel drops the lock
    when the holder exits or dies, so a killed evaluation never blocks the device. ``key=None`` is a no-op.
    """
    info = {"wait_s": 0.0, "start": time.time()}
    if key is None:
        yield info
        return
    t0 = time.perf_counter()
    with device_turn_holder(device_turn_path(key, lock_dir))():
        info.update(wait_s=time.perf_counter() - t0, start=time.time())
        yield info


class BlockTimer(Protocol):
    """One function timed in blocks: ``block(reps)`` runs ``reps`` untimed calls (the device settles on this
    function alone), then ``reps`` timed ones, and returns their times in ms. The chain times the reference with
    a local one and the candidate through its process (judge/chain.py)."""

    representative: bool

    def per_call_ms(self) -> float:
        """An estimate of one call (flush included), after a warm-up call that compiles and loads."""
        ...

    def block(self, reps: int) -> list[float]: ...


@dataclass
class EventBlockTimer:
    """Device events (CUDA, XPU) around each timed call, the L2 flushed before every call, one sync per block."""

    fn: Callable[[], Any]
    event: Callable[[], Any]
    sync: Callable[[], None]
    flush: Callable[[], None]
    representative: bool = True

    def per_call_ms(self) -> float:
        self.fn()  # warm-up: compilation, module load and first touch stay out of the numbers
        self.sync()
        start, end = self.event(), self.event()
        start.record()
        for _ in range(3):
            self.flush()
            self.fn()
        end.record()
        self.sync()
        return max(start.elapsed_time(end) / 3, 1e-3)

    def block(self, reps: int) -> list[float]:
        for _ in range(reps):
            self.flush()
            self.fn()
        pairs = []
        for _ in range(reps):
            self.flush()
            s, e = self.event(), self.event()
            s.record()
            self.fn()
            e.record()
            pairs.append((s, e))
        self.sync()
        return [s.elapsed_time(e) for s, e in pairs]


@dataclass
class HostBlockTimer:
    """Wall-clock timing for devices without events (the interpreter): each call synchronised."""

    fn: Callable[[], Any]
    sync: Callable[[], None]
    flush: Callable[[], None]
    representative: bool = False

    def per_call_ms(self) -> float:
        self.fn()
        self.sync()
        start = time.perf_counter()
        self.flush()
        self.fn()
        self.sync()
        return max((time.perf_counter() - start) * 1e3, 1e-3)

    def block(self, reps: int) -> list[float]:
        for _ in range(reps if self.representative else 0):  # nothing settles on the interpreter: no untimed half
            self.flush()
            self.fn()
        self.sync()
        times = []
        for _ in range(reps):
            self.flush()
            self.sync()
            t0 = time.perf_counter()
            self.fn()
            self.sync()
            times.append((time.perf_counter() - t0) * 1e3)
        return times


def interleaved_blocks(timers: dict[str, BlockTimer], *, budget_ms: float, max_reps: int = 500, min_reps: int = 10,
                       rounds: int = 2) -> dict[str, Timing]:
    """Time several functions in alternating blocks, A B B A (``rounds`` blocks each), within ``budget_ms``.

    Each block's first half settles the device and is not timed, its second half is; blocks alternate so a
    drift that is linear in time cancels. Why blocks and not call-by-call alternation: a GPU at its power cap sets
    its clocks from the board's power averaged over tens of milliseconds. Alternating single calls averages the
    two kernels' power, so a candidate that draws more than the cap is timed at the clocks the reference's lower
    draw bought it. On an H200 a 3xTF32 GEMM measured 6% faster beside fp32 cuBLAS than alone
    (experiments/results/h200/gemm_clocks.md); in its own block each kernel is timed at the clocks it sets for
    itself, as `triton.testing.do_bench` times it.
    """
    per_call_ms = {key: timer.per_call_ms() for key, timer in timers.items()}
    block_ms = budget_ms / (rounds * len(timers))
    samples: dict[str, list[float]] = {k: [] for k in timers}
    keys = list(timers)
    for r in range(rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:
            reps = max(1, int(min(max_reps / rounds, max(min_reps / rounds, block_ms / 2 / per_call_ms[key]))))
            samples[key].extend(timers[key].block(reps))
    return {k: Timing.from_samples(v, representative=timers[k].representative) for k, v in samples.items()}


def host_time_interleaved(fns: dict[str, Callable[[], Any]], *, sync: Callable[[], None], flush: Callable[[], None],
                          budget_ms: float, representative: bool, max_reps: int = 200,
                          min_reps: int = 5) -> dict[str, Timing]:
    """Wall-clock interleaved timing for devices without events (the interpreter)."""
    timers: dict[str, BlockTimer] = {k: HostBlockTimer(fn, sync, flush, representative) for k, fn in fns.items()}
    return interleaved_blocks(timers, budget_ms=budget_ms, max_reps=max_reps, min_reps=min_reps)


def event_time_interleaved(fns: dict[str, Callable[[], Any]], *, event: Callable[[], Any],
                           sync: Callable[[], None], flush: Callable[[], None], budget_ms: float,
                           max_reps: int = 500, min_reps: int = 10, rounds: int = 2) -> dict[str, Timing]:
    """Device-event timing (CUDA, XPU) of functions of one process in alternating settled blocks
    (``interleaved_blocks``); ``event`` makes a timing event (``torch.cuda.Event(enable_timing=True)``...)."""
    timers: dict[str, BlockTimer] = {k: EventBlockTimer(fn, event, sync, flush) for k, fn in fns.items()}
    return interleaved_blocks(timers, budget_ms=budget_ms, max_reps=max_reps, min_reps=min_reps, rounds=rounds)


def warm_in_turn(fns: dict[str, Callable[[], Any]], *, seconds: float, sync: Callable[[], None]) -> None:
    """Run every function in turn for ``seconds``: a GPU at its power cap reaches its steady state, so the next
    measurement does not catch the boost clocks of an idle board (experiments/results/h200/gemm_clocks.md)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for fn in fns.values():
            fn()
        sync()


def mirrored_times(fns: dict[str, Callable[[], Any]], time_one: Callable[[Callable[[], Any]], float]) -> dict[str, float]:
    """Each function timed twice by ``time_one``, in order and then in reverse (A B C C B A), the two averaged:
    every function gets the same history on average, where a fixed order would favour the first."""
    keys = list(fns)
    times: dict[str, list[float]] = {k: [] for k in keys}
    for key in keys + keys[::-1]:
        times[key].append(time_one(fns[key]))
    return {k: sum(v) / len(v) for k, v in times.items()}

