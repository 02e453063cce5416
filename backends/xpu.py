"""Intel GPUs through PyTorch's native XPU device (``torch.xpu``) and Triton's Intel backend.

Written against the documented ``torch.xpu`` API (device properties, events, synchronize); no Intel GPU exists
on the machines this project is developed on, so this path has not run on Intel hardware (see README).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from evoforge.backends.base import Timing, register


def arch_for_xpu_name(name: str) -> str:
    """Map an XPU device name to the knowledge-base arch key."""
    lowered = name.lower()
    if "max" in lowered or "pvc" in lowered or "ponte vecchio" in lowered:
        return "intel-xe-hpc"
    return "intel-xe2"  # Arc B-series (Battlemage) and Lunar Lake iGPUs are Xe2


@register("xpu")
class XpuBackend:
    name = "xpu"

    def __init__(self, *, device_index: int = 0, arch: str | None = None, **_: Any) -> None:
        self.device_index = device_index
        self._arch = arch
        self._flush_buffer = None

    def available(self) -> tuple[bool, str]:
        import torch

        xpu = getattr(torch, "xpu", None)
        if xpu is None:
            return False, f"this torch build ({torch.__version__}) has no torch.xpu module"
        if not xpu.is_available():
            return False, f"torch.xpu.is_available() is False (no Intel GPU, or torch {torch.__version__} built without XPU)"
        return True, f"{xpu.device_count()} XPU device(s): {xpu.get_device_name(self.device_index)}"

    @property
    def device(self) -> str:
        return f"xpu:{self.device_index}"

    @property
    def arch(self) -> str:
        if self._arch:
            return self._arch
        import torch

        return arch_for_xpu_name(torch.xpu.get_device_name(self.device_index))

    @property
    def properties(self) -> dict[str, Any]:
        import torch

        p = torch.xpu.get_device_properties(self.device_index)
        return {"name": p.name, "total_memory_bytes": p.total_memory,
                "max_compute_units": getattr(p, "max_compute_units", None),
                "sub_group_sizes": list(getattr(p, "sub_group_sizes", []) or [])}

    def child_env(self) -> dict[str, str]:
        return {}

    def synchronize(self) -> None:
        import torch

        torch.xpu.synchronize(self.device_index)

    def _flush(self) -> None:
        import torch

        if self._flush_buffer is None:
            self._flush_buffer = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=self.device)
        self._flush_buffer.zero_()

    def time_interleaved(self, fns: dict[str, Callable[[], Any]], *, budget_ms: float = 1000.0,
                         max_reps: int = 500, min_reps: int = 10) -> dict[str, Timing]:
        import torch

        for fn in fns.values():
            fn()
        self.synchronize()
        start, end = torch.xpu.Event(enable_timing=True), torch.xpu.Event(enable_timing=True)
        start.record()
        for fn in fns.values():
            self._flush()
            fn()
        end.record()
        self.synchronize()
        reps = int(min(max_reps, max(min_reps, budget_ms / max(start.elapsed_time(end), 1e-3))))
        events = {k: [(torch.xpu.Event(enable_timing=True), torch.xpu.Event(enable_timing=True))
                      for _ in range(reps)] for k in fns}
        for i in range(reps):
            for key, fn in fns.items():
                self._flush()
                s, e = events[key][i]
                s.record()
                fn()
                e.record()
        self.synchronize()
        out = {}
        for key, pairs in events.items():
            samples = [s.elapsed_time(e) for s, e in pairs]
            out[key] = Timing(median_ms=statistics.median(samples), min_ms=min(samples), samples=len(samples),
                              representative=True, samples_ms=tuple(samples))
        return out
