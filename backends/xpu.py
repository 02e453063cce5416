"""Intel GPUs through PyTorch's native XPU device (``torch.xpu``) and the Intel XPU backend for Triton.

Nothing here has run on Intel hardware: no Intel GPU exists on the machines this project is developed on
(docs/intel.md says exactly what is written against which documented API). The module is device-independent
on purpose: it imports nothing Intel-specific at import time, and everything that reads an Intel device goes
through ``torch.xpu`` calls that exist in every torch build (they answer "not available" on others).

Two Intel-specific tunables are exposed to the search, as the Intel backend for Triton takes them at launch:
- ``grf_mode``: general-register-file size per hardware thread. Current backends take ``'default'``, ``'auto'``,
  ``'128'``, ``'256'`` (and ``'512'`` where the hardware has it); older releases took ``'small'``/``'large'``.
- ``sub_group_size``: lanes per sub-group (Triton's "warp"), 16 or 32 on Xe2 and Xe-HPC. The launch option is
  named ``warp_size`` in current backends and ``threads_per_warp`` in older ones.
``launch_options(PARAMS)`` turns a candidate's values into the keyword arguments the installed backend
understands, and into nothing at all on other devices, so one candidate source runs on CUDA and Intel alike.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from evoforge.backends.base import (
    BlockTimer,
    EvaluationProcess,
    EventBlockTimer,
    Timing,
    event_time_interleaved,
)

# Name patterns first: product names are what the driver reports (torch.xpu.get_device_name), e.g.
# "Intel(R) Arc(TM) B580 Graphics", "Intel(R) Data Center GPU Max 1550", "Intel(R) Arc(TM) A770 Graphics".
_NAME_RULES: tuple[tuple[str, str, str], ...] = (
    (r"data center gpu max|\bmax ?1[0-9]{3}\b|\bpvc\b|ponte vecchio", "intel-xe-hpc", "Xe-HPC (Ponte Vecchio)"),
    (r"\bpro b\d{2}\b|\bb\d{3}\b|battlemage|\bbmg\b", "intel-xe2", "Xe2 discrete (Battlemage)"),
    (r"\b1[34]0v\b|lunar lake", "intel-xe2", "Xe2 integrated (Lunar Lake)"),
    (r"\ba\d{3}m?\b|alchemist|\bdg2\b|\bflex \d{2,3}\b", "intel-xe-hpg", "Xe-HPG (Alchemist)"),
)
# Xe-HPC parts have far more vector engines than any Xe2 part: Max 1100 has 448, Max 1550 1024; the largest
# Xe2 part the knowledge base knows (Arc Pro B70, 32 Xe-cores x 8) has 256.
_XE_HPC_MIN_EU = 384


def describe_xpu_arch(properties: Mapping[str, Any]) -> tuple[str, str]:
    """(knowledge-base arch key, why) for an XPU device, from its name, else from its properties.

    ``properties`` holds what ``torch.xpu.get_device_properties`` reports (``name``, ``gpu_eu_count``,
    ``sub_group_sizes``...), any subset of it.
    """
    name = str(properties.get("name") or "")
    lowered = name.lower()
    for pattern, arch, family in _NAME_RULES:
        if re.search(pattern, lowered):
            return arch, f"name {name!r} is {family}"
    sub_groups = [int(s) for s in (properties.get("sub_group_sizes") or [])]
    eu_count = properties.get("gpu_eu_count")
    if 8 in sub_groups:  # SIMD8 sub-groups: Xe-LP/Xe-HPG; Xe2 and Xe-HPC offer only 16 and 32
        return "intel-xe-hpg", f"sub-group sizes {sub_groups} include 8 (Xe-HPG/Xe-LPG, not Xe2 or Xe-HPC)"
    if isinstance(eu_count, int) and eu_count >= _XE_HPC_MIN_EU:
        return "intel-xe-hpc", f"{eu_count} EUs (>= {_XE_HPC_MIN_EU}: only Xe-HPC parts have that many)"
    if isinstance(eu_count, int):
        return "intel-xe2", f"{eu_count} EUs and sub-group sizes {sub_groups or 'unknown'}: taken as Xe2"
    return "intel-xe2", f"unrecognized device {name!r} with no EU count: assumed Xe2 (pass --arch to override)"


def arch_for_xpu_properties(properties: Mapping[str, Any]) -> str:
    """The knowledge-base arch key for an XPU device, by name and properties (see ``describe_xpu_arch``)."""
    return describe_xpu_arch(properties)[0]


def arch_for_xpu_name(name: str) -> str:
    """Map an XPU device name alone to the knowledge-base arch key."""
    return describe_xpu_arch({"name": name})[0]


# ---------------------------------------------------------------------------------------------- launch options

GRF_MODES = ("default", "auto", "128", "256", "512")
_GRF_ALIASES = {"small": "128", "large": "256", "": "default", "none": "default"}
_GRF_OLD_NAMES = {"128": "small", "256": "large"}


def canonical_grf_mode(value: Any) -> str:
    """``'large'``/``256`` -> ``'256'``, ``'small'`` -> ``'128'``; raises ValueError on anything else."""
    text = str(value).strip().lower()
    text = _GRF_ALIASES.get(text, text)
    if text not in GRF_MODES:
        raise ValueError(f"grf_mode {value!r}: choose from {', '.join(GRF_MODES)} (or small/large)")
    return text


def _installed_intel_backend() -> tuple[set[str], bool] | None:
    """(XPUOptions fields, whether make_spv takes the old 'small'/'large' names), or None without the backend."""
    try:
        import inspect

        from triton.backends.intel import compiler  # the Intel XPU backend for Triton, where installed
    except Exception:
        return None
    fields = set(getattr(compiler.XPUOptions, "__dataclass_fields__", {}))
    try:
        spv = inspect.getsource(compiler.XPUBackend.make_spv)
        old_names = "'large'" in spv or '"large"' in spv
    except (OSError, TypeError, AttributeError):
        old_names = False
    return fields, old_names


def _on_xpu() -> bool:
    try:
        from triton.runtime import driver

        return driver.active.get_current_target().backend == "xpu"
    except Exception:
        return False


def launch_options(params: Mapping[str, Any], *, option_fields: Collection[str] | None = None,
                   old_grf_names: bool = False) -> dict[str, Any]:
    """Keyword arguments for a Triton launch carrying a candidate's Intel tunables, or ``{}`` off Intel.

    Reads ``grf_mode`` and ``sub_group_size`` (``warp_size`` and ``threads_per_warp`` are accepted as
    synonyms) from ``params``. ``option_fields`` are the installed Intel backend's ``XPUOptions`` fields, found
    by import when None; on any other device the result is empty, because CUDA's Triton rejects unknown
    launch keywords. Usage in a candidate::

        kernel[grid](x, y, n, BLOCK=PARAMS["BLOCK"], **launch_options(PARAMS))
    """
    if option_fields is None:
        installed = _installed_intel_backend()
        if installed is None or not _on_xpu():
            return {}
        option_fields, old_grf_names = installed
    fields = set(option_fields)
    out: dict[str, Any] = {}
    if params.get("grf_mode") is not None and "grf_mode" in fields:
        mode = canonical_grf_mode(params["grf_mode"])
        out["grf_mode"] = _GRF_OLD_NAMES.get(mode, mode) if old_grf_names else mode
    lanes = next((params[k] for k in ("sub_group_size", "warp_size", "threads_per_warp") if params.get(k)), None)
    if lanes is not None:
        lanes = int(lanes)
        if lanes not in (8, 16, 32):
            raise ValueError(f"sub_group_size {lanes}: Intel sub-groups have 8, 16 or 32 lanes (16/32 on Xe2, Xe-HPC)")
        name = "warp_size" if "warp_size" in fields else "threads_per_warp" if "threads_per_warp" in fields else None
        if name:
            out[name] = lanes
    return out


def tunable_space(arch: str) -> dict[str, list[Any]]:
    """The Intel tunables a candidate can add to its SPACE on ``arch`` (values the hardware supports)."""
    if arch == "intel-xe-hpg":
        return {"grf_mode": ["default", "auto", "256"], "sub_group_size": [8, 16, 32]}
    if arch in ("intel-xe2", "intel-xe-hpc"):
        return {"grf_mode": ["default", "auto", "256"], "sub_group_size": [16, 32]}
    return {}


# ---------------------------------------------------------------------------------------------- backend

_PROPERTY_FIELDS = ("name", "platform_name", "vendor", "driver_version", "version", "total_memory",
                    "max_compute_units", "gpu_eu_count", "gpu_subslice_count", "max_work_group_size",
                    "max_num_sub_groups", "sub_group_sizes", "has_fp16", "has_fp64", "has_atomic64",
                    "has_bfloat16_conversions", "has_subgroup_matrix_multiply_accumulate",
                    "has_subgroup_matrix_multiply_accumulate_tensor_float32", "has_subgroup_2d_block_io",
                    "device_id", "architecture")


class XpuBackend:
    name = "xpu"

    def __init__(self, *, device_index: int = 0, arch: str | None = None, **_: Any) -> None:
        self.device_index = device_index
        self._arch = arch
        self._flush_buffer = None

    @property
    def lock_key(self) -> str:
        """The GPU's identity across processes: its UUID where torch reports one, else the visible index."""
        import torch

        uuid = getattr(torch.xpu.get_device_properties(self.device_index), "uuid", None)
        mask = os.environ.get("ZE_AFFINITY_MASK", "")
        return f"xpu-{uuid}" if uuid else f"xpu-{mask}-{self.device_index}"

    def available(self) -> tuple[bool, str]:
        import torch

        xpu = getattr(torch, "xpu", None)
        if xpu is None:
            return False, f"this torch build ({torch.__version__}) has no torch.xpu module"
        if not getattr(torch._C, "_has_xpu", True):
            return False, (f"torch {torch.__version__} is built without XPU support (install an XPU build of "
                           "torch, e.g. from download.pytorch.org/whl/xpu, on a machine with an Intel GPU)")
        if not xpu.is_available():
            return False, f"torch.xpu.is_available() is False: no Intel GPU or driver found (torch {torch.__version__})"
        return True, f"{xpu.device_count()} XPU device(s): {xpu.get_device_name(self.device_index)}"

    @property
    def device(self) -> str:
        return f"xpu:{self.device_index}"

    def _raw_properties(self) -> dict[str, Any]:
        import torch

        p = torch.xpu.get_device_properties(self.device_index)
        out = {}
        for field in _PROPERTY_FIELDS:
            value = getattr(p, field, None)
            out[field] = list(value) if isinstance(value, list | tuple) else value
        return out

    @property
    def arch(self) -> str:
        if self._arch:
            return self._arch
        return arch_for_xpu_properties(self._raw_properties())

    @property
    def properties(self) -> dict[str, Any]:
        raw = self._raw_properties()
        arch, reason = describe_xpu_arch(raw)
        return {**raw, "total_memory_bytes": raw.get("total_memory"), "arch": self._arch or arch,
                "arch_reason": "given with --arch" if self._arch else reason}

    def evaluation_process(self) -> EvaluationProcess:
        return EvaluationProcess()  # no address-space limit: the driver maps more virtual memory than any limit

    def device_count(self) -> int:
        import torch

        return torch.xpu.device_count() if self.available()[0] else 0

    def synchronize(self) -> None:
        import torch

        torch.xpu.synchronize(self.device_index)

    def flush(self) -> None:
        import torch

        if self._flush_buffer is None:  # larger than any Intel GPU's last-level cache (Max 1550: 408 MB)
            self._flush_buffer = torch.empty(512 * 1024 * 1024 // 4, dtype=torch.int32, device=self.device)
        self._flush_buffer.zero_()

    def block_timer(self, fn: Callable[[], Any]) -> BlockTimer:
        import torch

        return EventBlockTimer(fn, lambda: torch.xpu.Event(enable_timing=True), self.synchronize, self.flush)

    def time_interleaved(self, fns: dict[str, Callable[[], Any]], *, budget_ms: float = 1000.0,
                         max_reps: int = 500, min_reps: int = 10) -> dict[str, Timing]:
        import torch

        return event_time_interleaved(fns, event=lambda: torch.xpu.Event(enable_timing=True),
                                      sync=self.synchronize, flush=self.flush, budget_ms=budget_ms,
                                      max_reps=max_reps, min_reps=min_reps)
