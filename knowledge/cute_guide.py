"""What an LLM is told about writing CuTe (CUDA C++) kernels for a target: ``cute/*.md``, chosen by arch.

The contract of a CuTe candidate, layouts, copies, MMA atoms and pitfalls for every NVIDIA target; Hopper
(compute capability 9.x) adds TMA copies and wgmma. The prompt builder puts it in the system prompt of a CuTe
parent's children.
"""

from __future__ import annotations

from importlib import resources

from evoforge.knowledge.hardware import load_arch, resolve_arch, vendor

from evoforge.core import UsageError

_COMMON = ("contract.md", "layouts.md", "copy_sm80.md", "mma_sm80.md", "pitfalls.md")
_HOPPER = ("copy_sm90.md", "mma_sm90.md")  # inserted before mma_sm80.md: the newest atoms first


def nvcc_target(arch: str) -> str:
    """``nvidia-sm90`` -> ``sm_90a`` (wgmma and TMA multicast exist only for the arch-specific target),
    ``nvidia-sm80`` -> ``sm_80``."""
    key = resolve_arch(arch)
    if vendor(key) != "nvidia":
        raise UsageError(f"--arch {arch}: CuTe/CUDA C++ targets NVIDIA GPUs only (give nvidia-sm80 or nvidia-sm90)")
    major, minor = (int(x) for x in str(load_arch(key)["compute_capability"]).split("."))
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def cute_guide(arch: str = "nvidia-sm90") -> str:
    """CuTe knowledge for one target, as a prompt section (markdown)."""
    target = nvcc_target(arch)
    names = list(_COMMON)
    if target.startswith("sm_9"):
        names[3:3] = list(_HOPPER)
    folder = resources.files("evoforge.knowledge") / "cute"
    parts = [f"# Writing CuTe (CUDA C++) kernels for {resolve_arch(arch)} (nvcc target {target})"]
    parts += [(folder / name).read_text().strip() for name in names]
    return "\n\n".join(parts) + "\n"
