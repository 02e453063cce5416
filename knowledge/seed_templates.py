"""Seed kernels shipped with the knowledge base (``templates/*.py``), one per op family.

Each declares ``SPACE``/``PARAMS`` and marks its structural switches (GROUP_M, PERSISTENT, LOOPED,
INPUT_PRECISION) as SPACE entries, the convention the rule operators in ``evoforge.mutators.rules`` act on.
"""

from __future__ import annotations

from importlib import resources

from evoforge.core import UsageError


def template_names() -> list[str]:
    folder = resources.files("evoforge.knowledge") / "templates"
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".py") and not p.name.startswith("_"))


def template_source(name: str) -> str:
    """The source of template ``name`` (``matmul_grouped``, ``softmax_rows`` ...)."""
    if name not in template_names():
        raise UsageError(f"template {name}: unknown (choose from {', '.join(template_names())})")
    return (resources.files("evoforge.knowledge") / "templates" / f"{name}.py").read_text()
