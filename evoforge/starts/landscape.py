"""A task whose evaluations a recorded landscape answers (``--backend replay``): named by the file's stem, its seed
the file's space (``Landscape.seed_candidate``); nothing of it is run, so it has no inputs to draw."""

from __future__ import annotations

from pathlib import Path

from evoforge.core import Candidate
from evoforge.task import Task


def landscape_task_name(path: str) -> str:
    """The task a landscape file makes: its file's stem (``matmul_bf16_4096``)."""
    return Path(path).stem


def landscape_start(path: str) -> tuple[Task, Candidate]:
    """The task the landscape at ``path`` makes, and its seed."""
    from evoforge.backends.replay import Landscape

    landscape = Landscape.load(path)
    task = Task(path=str(Path(path).absolute()), name=landscape_task_name(path))
    return task, landscape.seed_candidate(task=task.name)
