"""Configs the knowledge base's shape rules start beside a task's seed (``knowledge/starts.py``): stream-K or split-K
where a GEMM has fewer output tiles than SMs, a K tile within K, an fp32 GEMM's operands split into bf16 parts, a
convolution kernel's operands rounded to TF32 as cuDNN's are; each evaluated right after the seed as operator
``knowledge-start``."""

from __future__ import annotations

import logging
from typing import Any

from evoforge.core import Candidate, declared_space
from evoforge.task import Task

log = logging.getLogger("evoforge.campaign")

#: The operator of a config the knowledge base's shape rules start from beside the seed.
KNOWLEDGE_START = "knowledge-start"


def knowledge_starts(task: Task, seed: Candidate, input_shapes: tuple[tuple[int, ...], ...], arch: Any, *,
                     cuda: bool = False) -> list[Candidate]:
    """The shape rules' starts for ``task`` beside ``seed`` (its inputs' shapes at the main shape ``input_shapes``,
    the knowledge base's hardware ``arch``; ``cuda``: the campaign's device is a CUDA GPU, where cuDNN computes the
    reference's convolutions); none for a seed without a SPACE or the reference as an LLM's start."""
    from evoforge.knowledge.starts import shape_starts, split_starts, tf32_round_starts

    if seed.meta.get("reference"):
        return []
    declared, defaults = declared_space(seed.source)
    space = seed.space or declared
    if not space:
        return []
    params = {**defaults, **seed.params}
    # judged as the route judges every child of the seed (the source's own operand sizes, evoforge/route.py): the
    # task's dtype is not its kernels' (the matmul template's fp32 GEMM runs on bf16 parts), and a start the route
    # would take as a child must not be refused here
    starts = shape_starts(space, params, input_shapes, arch, source=seed.source)
    starts += split_starts(space, params, arch, source=seed.source)
    starts += tf32_round_starts(space, params, arch, cudnn=cuda, source=seed.source)
    for start in starts:
        log.warning("task %s: the knowledge base starts a config beside the seed: %s", task.name, start.why)
    return [seed.with_params(start.change, operator=KNOWLEDGE_START, parents=(seed.id,),
                             meta={**seed.meta, "move": start.why}) for start in starts]
