"""NVIDIA GPUs through torch.cuda and Triton: event timing with the L2 flushed between runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evoforge.backends.base import (
    BlockTimer,
    EvaluationProcess,
    EventBlockTimer,
    Timing,
    event_time_interleaved,
)

_ARCH_BY_CAPABILITY = {(8, 0): "nvidia-sm80", (8, 6): "nvidia-sm80", (8, 9): "nvidia-sm89", (9, 0): "nvidia-sm90"}


def arch_for_capability(major: int, minor: int) -> str:
    if (major, minor) in _ARCH_BY_CAPABILITY:
        return _ARCH_BY_CAPABILITY[(major, minor)]
    return f"nvidia-sm{major}{minor}"


class CudaBackend:
    name = "cuda"

    def __init__(self, *, device_index: int = 0, arch: str | None = None, **_: Any) -> None:
        self.device_index = device_index
        self._arch = arch
        self._flush_buffer = None

    @property
    def lock_key(self) -> str:
        """The GPU's UUID: the same whatever CUDA_VISIBLE_DEVICES numbering a process sees."""
        import torch

        return f"cuda-{torch.cuda.get_device_properties(self.device_index).uuid}"

    def available(self) -> tuple[bool, str]:
        import torch

        if not torch.cuda.is_available():
            return False, "torch.cuda.is_available() is False (no NVIDIA GPU or a CPU build of torch)"
        return True, f"{torch.cuda.device_count()} CUDA device(s): {torch.cuda.get_device_name(self.device_index)}"

    @property
    def device(self) -> str:
        return f"cuda:{self.device_index}"

    @property
    def arch(self) -> str:
        if self._arch:
            return self._arch
        import torch

        return arch_for_capability(*torch.cuda.get_device_capability(self.device_index))

    @property
    def properties(self) -> dict[str, Any]:
        import torch

        p = torch.cuda.get_device_properties(self.device_index)
        return {"name": p.name, "sm_count": p.multi_processor_count, "total_memory_bytes": p.total_memory,
                "capability": f"{p.major}.{p.minor}", "l2_bytes": getattr(p, "L2_cache_size", None)}

    def evaluation_process(self) -> EvaluationProcess:
        return EvaluationProcess()  # no address-space limit: the driver maps more virtual memory than any limit

    def device_count(self) -> int:
        import torch

        return torch.cuda.device_count() if self.available()[0] else 0

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize(self.device_index)

    def flush(self) -> None:
        import torch

        if self._flush_buffer is None:  # larger than any L2 (H200: 60 MB)
            self._flush_buffer = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=self.device)
        self._flush_buffer.zero_()

    def block_timer(self, fn: Callable[[], Any]) -> BlockTimer:
        import torch

        return EventBlockTimer(fn, lambda: torch.cuda.Event(enable_timing=True), self.synchronize, self.flush)

    def time_interleaved(self, fns: dict[str, Callable[[], Any]], *, budget_ms: float = 1000.0,
                         max_reps: int = 500, min_reps: int = 10) -> dict[str, Timing]:
        import torch

        return event_time_interleaved(fns, event=lambda: torch.cuda.Event(enable_timing=True),
                                      sync=self.synchronize, flush=self.flush, budget_ms=budget_ms,
                                      max_reps=max_reps, min_reps=min_reps)
