"""A task no file or template serves, with an LLM operator that writes kernels (``llm-generate``): the reference is
the lineage's start, never evaluated as a candidate; the operator writes the first kernel from it."""

from __future__ import annotations

from evoforge.core import Candidate
from evoforge.task import Task

#: The operator of the reference as a lineage's start.
REFERENCE_START = "reference"


def reference_start(task: Task, language: str | None) -> Candidate:
    """The reference as the start an LLM writes the task's first kernel from."""
    return Candidate(source=task.source, task=task.name, operator=REFERENCE_START, language=language or "triton",
                     meta={"reference": True})
