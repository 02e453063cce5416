"""The result cache: a duplicate child costs nothing.

Keyed, like Triton's autotuner disk cache, on everything that changes a result: the source, the parameter
values, the task (its file, constant overrides, extra shapes, allowed ops), the backend and arch, the chain's
options, and the torch and Triton versions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from evoforge.search.durable import atomic_write

from evoforge.core import Candidate, EvalResult, EvalStatus, json_safe

# Failures that depend on the machine's state rather than the candidate are never cached.
_UNCACHEABLE = {EvalStatus.TIMEOUT, EvalStatus.CRASHED}


def software_versions() -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__}
    try:
        from importlib.metadata import version

        out["triton"] = version("triton")
    except Exception:
        pass
    return out


class ResultCache:
    def __init__(self, directory: Path, *, backend: str, arch: str, options: dict[str, Any]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._context = {"backend": backend, "arch": arch, "options": options, "versions": software_versions()}
        self.hits = 0

    def key(self, task_key: dict[str, Any], candidate: Candidate) -> str:
        payload = {"task": task_key, "source": candidate.source, "params": candidate.params,
                   "language": candidate.language, **self._context}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def get(self, task_key: dict[str, Any], candidate: Candidate) -> EvalResult | None:
        path = self.directory / f"{self.key(task_key, candidate)}.json"
        try:
            result = EvalResult.from_dict(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError, KeyError, ValueError):
            return None
        self.hits += 1
        return replace(result, cached=True)

    def put(self, task_key: dict[str, Any], candidate: Candidate, result: EvalResult) -> None:
        if result.status in _UNCACHEABLE or result.cached:
            return
        path = self.directory / f"{self.key(task_key, candidate)}.json"
        # Not fsynced: an entry a power cut loses costs one evaluation again; a kill -9 loses none (the rename).
        atomic_write(path, json.dumps(json_safe(result.to_dict())), durable=False)
