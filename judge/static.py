"""Static checks: what can be decided from the source alone, before any untrusted code runs."""

from __future__ import annotations

import ast
from typing import Any

from evoforge.core import Candidate, EvalResult, EvalStatus


def _has_model_new(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in node.targets):
            return True
    return False


def _module_string(tree: ast.Module, name: str) -> tuple[bool, str | None]:
    """(assigned at module level, its value when it is a plain string literal)."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = node.value
            return True, value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
    return False, None


def _imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _cute_fault(tree: ast.Module) -> str | None:
    """Why a ``cute`` candidate cannot be evaluated, or None.

    The contract (backends/cute.py): CUDA C++ using CuTe in a module-level ``CUDA_SRC``, compiled and launched
    through ``evoforge.backends.cute.load``, which counts every launch for the anti-cheat. Other ways to run
    native code (torch's cpp_extension, ctypes or cffi on a library of one's own) would launch uncounted kernels.
    """
    assigned, cuda_src = _module_string(tree, "CUDA_SRC")
    if not assigned:
        return ("the module defines no CUDA_SRC: a CuTe candidate keeps its CUDA C++ in a module-level string "
                "CUDA_SRC and loads it with evoforge.backends.cute.load(CUDA_SRC, params=PARAMS)")
    imported = _imported_modules(tree)
    banned = sorted(m for m in imported if m.split(".")[0] in ("ctypes", "cffi") or "cpp_extension" in m)
    if banned:
        return (f"the module imports {', '.join(banned)}: CuTe candidates compile and launch only through "
                "evoforge.backends.cute.load (its launches are the ones the anti-cheat counts)")
    if not any(m == "evoforge.backends.cute" or m.startswith("evoforge.backends.cute.") for m in imported):
        return "the module does not import evoforge.backends.cute: nothing would compile or launch CUDA_SRC"
    if cuda_src is not None:
        if "__global__" not in cuda_src:
            return "CUDA_SRC defines no __global__ kernel"
        if "<cute/" not in cuda_src and "cute::" not in cuda_src:
            return "CUDA_SRC does not use CuTe (#include <cute/tensor.hpp>): the language of this candidate is CuTe"
        if 'extern "C"' not in cuda_src:
            return 'CUDA_SRC has no extern "C" launch function for Python to call'
    return None


def _uses_kernel_language(source: str, tree: ast.Module, language: str) -> bool:
    if language == "cute":
        return _cute_fault(tree) is None
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("jit", "autotune", "heuristics"):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "triton":
                return True
    return False


def _forward_fallbacks(tree: ast.Module) -> list[int]:
    """Lines of try/except inside ModelNew whose handler computes something (a fallback to PyTorch)."""
    lines = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ModelNew"):
        for node in ast.walk(cls):
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    body_is_raise_only = all(isinstance(s, ast.Raise | ast.Pass) for s in handler.body)
                    if not body_is_raise_only:
                        lines.append(handler.lineno)
    return lines


def static_check(source: str, *, language: str = "triton") -> EvalResult | None:
    """Return a failure, or None when the source may go on to compile."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        text = (e.text or "").rstrip()
        return EvalResult.failure(EvalStatus.COMPILE_ERROR,
                                  f"SyntaxError at line {e.lineno}: {e.msg}" + (f"\n    {text}" if text else ""),
                                  details={"stage": "static", "line": e.lineno})
    if not _has_model_new(tree):
        return EvalResult.failure(EvalStatus.COMPILE_ERROR,
                                  "the module defines no ModelNew class (KernelBench convention: class ModelNew(nn.Module))",
                                  details={"stage": "static"})
    if language == "cute":
        fault = _cute_fault(tree)
        if fault is not None:
            return EvalResult.failure(EvalStatus.REJECTED, fault, details={"stage": "static"})
    elif not _uses_kernel_language(source, tree, language):
        return EvalResult.failure(EvalStatus.REJECTED, "the module defines no @triton.jit kernel: nothing to evaluate",
                                  details={"stage": "static"})
    fallbacks = _forward_fallbacks(tree)
    if fallbacks:
        return EvalResult.failure(
            EvalStatus.REJECTED,
            f"try/except in ModelNew at line {fallbacks[0]}: a fallback path could compute the answer without the kernel",
            details={"stage": "static", "line": fallbacks[0]})
    return None


def compile_only(candidate: Candidate, arch: str | None = "nvidia-sm90", *, opt: str = "-O3",
                 timeout_s: float = 600.0) -> EvalResult:
    """Compile a CuTe candidate without running it: ``ok`` ("compiled only; not run") or ``compile_error``.

    Runs no candidate code: CUDA_SRC is read from the module's source, the tunables from ``candidate.params``.
    Toolchain problems (no nvcc, no headers) raise ``CuteToolchainError``: they are not the candidate's fault.
    """
    import time

    from evoforge.backends.base import versions
    from evoforge.backends.cute import (
        CuteCompileError,
        build_candidate,
        cuda_source_of,
        cutlass_version,
        nvcc_arch,
        nvcc_version,
    )

    started = time.perf_counter()
    arch = arch or "nvidia-sm90"
    target = nvcc_arch(arch)
    base: dict[str, Any] = {"backend": "compile-only", "arch": arch, "versions": versions()}
    failure = static_check(candidate.source, language="cute")
    if failure is not None:
        return EvalResult.from_dict({**failure.to_dict(), **base, "eval_s": time.perf_counter() - started})
    try:
        info = build_candidate(candidate, arch, opt=opt, timeout_s=timeout_s)
    except CuteCompileError as e:
        return EvalResult.failure(EvalStatus.COMPILE_ERROR, str(e), **base, eval_s=time.perf_counter() - started,
                                  details={"stage": "compile", "nvcc_arch": target,
                                           "raw_log_chars": len(e.raw_log)})
    first_line = cuda_source_of(candidate.source)[1]
    base["versions"] = {**base["versions"], "nvcc": nvcc_version() if not info.prebuilt else "prebuilt",
                        "cutlass": cutlass_version()}
    how = "prebuilt" if info.prebuilt else "cached" if info.cached else f"{info.seconds:.1f} s"
    return EvalResult(status=EvalStatus.OK, message=f"compiled only; not run (nvcc {target}, {how})",
                      compile_s=info.seconds, cached=info.cached, timing_representative=False,
                      eval_s=time.perf_counter() - started,
                      details={"stage": "compile", "nvcc_arch": target, "library": str(info.path),
                               "source_key": info.source_key, "cuda_src_line": first_line}, **base)
