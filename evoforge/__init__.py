"""evoforge: evolutionary and Bayesian search for fast, correct GPU kernels.

The vocabulary (``Candidate``, ``EvalResult``, ``EvalStatus``, ``Task``, ``UsageError``) is imported here; the
Python API (``evaluate``, ``run``, ``run_async``, ``Evaluator``, ``CampaignResult``, from ``evoforge.api``) is
loaded the first time one of its names is used. Python runs this file before any module of the package, so at
module level it imports only the vocabulary: importing the engine never loads the face
(docs/architecture.md, tests/test_architecture.py).
"""

from typing import Any

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError
from evoforge.task import Task

__version__ = "0.1.0"

_API = ("CampaignResult", "Evaluator", "evaluate", "run", "run_async")

__all__ = ["Candidate", "EvalResult", "EvalStatus", "Task", "UsageError", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from evoforge import api

        return getattr(api, name)
    raise AttributeError(f"module 'evoforge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
