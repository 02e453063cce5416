"""evoforge: evolutionary and Bayesian search for fast, correct GPU kernels."""

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError
from evoforge.task import Task

__all__ = ["Candidate", "EvalResult", "EvalStatus", "Task", "UsageError"]
__version__ = "0.1.0"
