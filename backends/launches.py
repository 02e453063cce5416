"""Kernel launches that do not go through Triton report themselves here (CuTe/CUDA C++ through
``evoforge.backends.cute``): the judge's launch counters (``evoforge.judge.guards.LaunchCounter``) enter
``ACTIVE_COUNTERS`` while a candidate runs, and ``counted_launch`` counts each such launch on every one of them. A leaf
of the device floor, so the CuTe toolchain reports to the judge without importing it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

#: The counters inside ``LaunchCounter.active``, innermost last.
ACTIVE_COUNTERS: list[Any] = []


@contextlib.contextmanager
def counted_launch(language: str = "cute") -> Iterator[None]:
    """Wrap one launch that does not go through Triton: every active counter counts it and notes its stream."""
    for counter in list(ACTIVE_COUNTERS):
        counter.launches += 1
        counter.by_language[language] += 1
        counter.note_stream()
    yield
