"""The CPU Triton interpreter (``TRITON_INTERPRET=1``): exact semantics, times that mean nothing for a GPU."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any

from evoforge.backends.base import (
    BlockTimer,
    EvaluationProcess,
    HostBlockTimer,
    Timing,
    host_time_interleaved,
)

#: Address space of an interpreter evaluation process: a runaway candidate fails with a MemoryError in its own
#: process instead of pushing the host into swap or the OOM killer (a KernelBench input plus the float64
#: reference fits with room to spare).
MEMORY_LIMIT_BYTES = 16 * 1024**3


class InterpreterBackend:
    name = "interpreter"

    def __init__(self, *, arch: str | None = None, lock_key: str | None = None,
                 memory_limit_bytes: int | None = MEMORY_LIMIT_BYTES, **_: Any) -> None:
        # The interpreter runs anywhere; the rules it is held to are those of the GPU it stands in for.
        self._arch = arch or "nvidia-sm90"
        # No turns by default (its times mean nothing); a key makes its evaluations take turns like a GPU's.
        self.lock_key = lock_key
        self.memory_limit_bytes = memory_limit_bytes

    def available(self) -> tuple[bool, str]:
        return True, "runs Triton kernels on the CPU with TRITON_INTERPRET=1"

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def arch(self) -> str:
        return self._arch

    @property
    def properties(self) -> dict[str, Any]:
        return {"name": f"Triton interpreter on {platform.processor() or platform.machine()}",
                "cpu_count": os.cpu_count()}

    def evaluation_process(self) -> EvaluationProcess:
        return EvaluationProcess(env={"TRITON_INTERPRET": "1"}, memory_limit_bytes=self.memory_limit_bytes)

    def device_count(self) -> int:
        return 0  # runs on the host's CPUs

    def synchronize(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def block_timer(self, fn: Callable[[], Any]) -> BlockTimer:
        return HostBlockTimer(fn, self.synchronize, self.flush)

    def time_interleaved(self, fns: dict[str, Callable[[], Any]], *, budget_ms: float = 300.0) -> dict[str, Timing]:
        return host_time_interleaved(fns, sync=self.synchronize, flush=lambda: None, budget_ms=budget_ms,
                                     representative=False, max_reps=20, min_reps=3)
