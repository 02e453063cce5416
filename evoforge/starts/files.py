"""A seed kernel from a file: the user's (``--seed-kernel``, ``seed_kernel`` in a ``[[tasks]]`` entry) or the shipped
template that serves the task. The file must be Python defining ``ModelNew`` in the task's language; a Triton seed
that declares no SPACE gets its launch constants lifted into one (``lifted-seed``), so that a plain kernel still
gives parameter moves and the rule operators something to tune."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from evoforge.core import SEED_OPERATOR, Candidate, UsageError, source_language
from evoforge.task import Task, read_candidate_file

log = logging.getLogger("evoforge.campaign")


def file_start(task: Task, seed_path: Path, language: str | None, *, arch: str | None) -> Candidate:
    """The seed in ``seed_path`` for ``task``; ``language`` the task's (None: the seed's own), ``arch`` the knowledge
    base's hardware for the lift's rules (None: knowledge base off). Bad input is one ``UsageError`` line naming the
    file and the fix."""
    source = read_candidate_file(str(seed_path), flag="--seed-kernel")
    try:
        compile(source, str(seed_path), "exec")
    except SyntaxError as e:
        raise UsageError(f"--seed-kernel {seed_path}: not valid Python (line {e.lineno}: {e.msg})") from None
    if "ModelNew" not in source:
        raise UsageError(f"--seed-kernel {seed_path}: defines no ModelNew (a candidate module must)")
    own = source_language(source)
    if language and own != language:
        raise UsageError(f"--seed-kernel {seed_path}: a {own} kernel, but task {task.name} asks for "
                         f"language {language} (a CuTe seed keeps CUDA C++ in CUDA_SRC and loads it with "
                         "evoforge.backends.cute.load; drop the language to take the seed's)")
    return seed_candidate(task, source, {"seed_file": str(seed_path)}, own, arch=arch)


def seed_candidate(task: Task, source: str, meta: dict[str, Any], language: str | None = None, *,
                   arch: str | None) -> Candidate:
    """The seed as given, or, when a Triton seed declares no SPACE, with its launch constants lifted into one
    (``lifted-seed``). Its language is the task's, else the one its source is written in."""
    from evoforge.mutators.lift import LIFTED_SEED, describe_lift, lift_launch_constants

    language = language or source_language(source)
    lifted = None if language == "cute" else lift_launch_constants(source, arch=arch)
    if lifted is None:
        return Candidate.from_source(source, task=task.name, operator=SEED_OPERATOR, language=language, meta=meta)
    log.warning("task %s: the seed declares no SPACE; lifted its launch constants into one (%s)", task.name,
                lifted.describe())
    return Candidate.from_source(lifted.source, task=task.name, operator=LIFTED_SEED,
                                 meta={**meta, **describe_lift(lifted)})
