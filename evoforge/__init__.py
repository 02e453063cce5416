"""evoforge: evolutionary and Bayesian search for fast, correct GPU kernels.

The vocabulary (``Candidate``, ``EvalResult``, ``EvalStatus``, ``Task``, ``UsageError``) is imported here; the
Python API (``evaluate``, ``run``, ``run_async``, ``Evaluator``, ``CampaignResult``, ``KernelResult``, ``BestKernel``, from ``evoforge.api``) is
loaded the first time one of its names is used. Python runs this file before any module of the package, so at
module level it imports only the vocabulary: importing the engine never loads the face
(docs/architecture.md, tests/test_architecture.py).
"""

from typing import Any


def _refuse_a_partial_package() -> None:
    """A checkout's top-level ``evoforge/`` holds only part of the package (pyproject.toml maps ``backends/``,
    ``search/``, ``mutators/`` and ``knowledge/`` into it at installation). Run from a checkout's root, Python finds
    that folder first (``python -c`` and ``python -m`` put the current directory first on ``sys.path``) and the
    installed package is shadowed: every import of its other parts would fail, far from the cause. One line says
    it instead, and ``python -m evoforge...`` or the ``evoforge`` command exits 2 with it, as for a usage error."""
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "backends")) or importlib.util.find_spec("evoforge.backends") is not None:
        return  # installed whole, or an editable install maps the other parts in
    why = (f"{here} is only part of the evoforge package (a checkout's evoforge/ folder, found on sys.path before "
           "the installed one: `python -m` and `python -c` look in the current directory first): run from another "
           "folder, or install this checkout with `pip install -e .`")
    command = getattr(sys, "argv", [""])[:1]
    if command == ["-m"] or os.path.basename(command[0] if command else "") == "evoforge":
        print(f"evoforge: error: {why}", file=sys.stderr)  # `python -m evoforge.cli`, or the `evoforge` script
        raise SystemExit(2)
    raise ImportError(why, name=__name__)


_refuse_a_partial_package()

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError  # noqa: E402
from evoforge.task import Task  # noqa: E402

__version__ = "0.1.0"

_API = ("BestKernel", "CampaignResult", "Evaluator", "KernelResult", "evaluate", "run", "run_async")

__all__ = ["Candidate", "EvalResult", "EvalStatus", "Task", "UsageError", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from evoforge import api

        return getattr(api, name)
    raise AttributeError(f"module 'evoforge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
