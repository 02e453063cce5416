"""Seed kernels shipped with the knowledge base (``templates/*.py``), one per op family, and their index.

Each declares ``SPACE``/``PARAMS`` and marks its structural switches (GROUP_M, PERSISTENT, LOOPED,
INPUT_PRECISION) as SPACE entries, the convention the rule operators in ``evoforge.mutators.rules`` act on.
``templates/index.yaml`` says which template serves which task; ``template_entry_for`` is its one reader.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from evoforge.knowledge.yaml_io import safe_load

from evoforge.core import UsageError
from evoforge.task import Task


def template_names() -> list[str]:
    folder = resources.files("evoforge.knowledge") / "templates"
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".py") and not p.name.startswith("_"))


def template_source(name: str) -> str:
    """The source of template ``name`` (``matmul_grouped``, ``softmax_rows`` ...)."""
    if name not in template_names():
        raise UsageError(f"template {name}: unknown (choose from {', '.join(template_names())})")
    return (resources.files("evoforge.knowledge") / "templates" / f"{name}.py").read_text()


def _templates_dir() -> Path:
    return Path(str(resources.files("evoforge.knowledge") / "templates"))


@cache
def _index() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(file name, manifest entry) pairs of ``templates/index.yaml``, in file order."""
    index = _templates_dir() / "index.yaml"
    if not index.exists():
        return ()
    data = safe_load(index.read_text()) or {}
    entries = data.get("templates", data) if isinstance(data, dict) else data
    items = entries.items() if isinstance(entries, dict) else ((e.get("file"), e) for e in entries)
    return tuple((str((entry or {}).get("file") or name), dict(entry or {})) for name, entry in items)


def template_entry_for(task: Task, language: str = "triton") -> tuple[Path, dict[str, Any]] | None:
    """The shipped template in ``language`` that serves a task (the first entry whose ``tasks`` names it and
    whose ``language``, Triton when unsaid, is the one asked for) and its entry."""
    for file_name, entry in _index():
        if entry.get("language", "triton") != language:
            continue
        tasks = entry.get("tasks", [])
        if task.name in tasks or Path(task.path).stem in [Path(t).name for t in tasks]:
            return _templates_dir() / file_name, entry
    return None


def find_template_for(task: Task, language: str = "triton") -> Path | None:
    found = template_entry_for(task, language)
    return found[0] if found else None


def template_floor_passes(task: Task, language: str = "triton") -> float | None:
    """The template's ``floor_passes`` for this task (a number, or one per task name), if it gives one."""
    found = template_entry_for(task, language)
    if not found:
        return None
    passes = found[1].get("floor_passes")
    if isinstance(passes, dict):
        passes = passes.get(task.name)
    return float(passes) if passes is not None else None


def template_allow(task: Task, language: str = "triton") -> tuple[str, ...]:
    """What the template entry that serves this task says the task admits (``allow``: ``fewer_flops`` where the
    task's function has an algebraic rewrite the judge's compute floor would call impossible); () where none."""
    found = template_entry_for(task, language)
    return tuple(found[1].get("allow") or ()) if found else ()
