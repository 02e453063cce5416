"""Static checks: what can be decided from the source alone, before any untrusted code runs."""

from __future__ import annotations

import ast

from evoforge.core import EvalResult, EvalStatus


def _has_model_new(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in node.targets):
            return True
    return False


def _uses_kernel_language(source: str, tree: ast.Module, language: str) -> bool:
    if language == "cute":
        return "load_inline" in source or "cpp_extension" in source or "__global__" in source
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
    if not _uses_kernel_language(source, tree, language):
        what = "CuTe/CUDA extension" if language == "cute" else "@triton.jit kernel"
        return EvalResult.failure(EvalStatus.REJECTED, f"the module defines no {what}: nothing to evaluate",
                                  details={"stage": "static"})
    fallbacks = _forward_fallbacks(tree)
    if fallbacks:
        return EvalResult.failure(
            EvalStatus.REJECTED,
            f"try/except in ModelNew at line {fallbacks[0]}: a fallback path could compute the answer without the kernel",
            details={"stage": "static", "line": fallbacks[0]})
    return None
