"""Replay of recorded landscapes: every config of a kernel's space, timed once on a real GPU, served from a file.

Like Kernel Tuner's simulation mode, it lets a search strategy be run and scored on a CPU in milliseconds:
``Landscape.evaluate(params)`` answers what the GPU answered when the file was recorded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoforge.backends.base import EvaluationProcess, Timing, register

from evoforge.core import SEED_OPERATOR, Candidate, EvalResult, EvalStatus, UsageError

# Recorded exception class names -> status. A class name is exact data written by the recorder, not a message.
_FAILURE_STATUS = {
    "OutOfResources": EvalStatus.COMPILE_ERROR,
    "CompilationError": EvalStatus.COMPILE_ERROR,
    "CompileTimeAssertionFailure": EvalStatus.COMPILE_ERROR,
    "incorrect": EvalStatus.INCORRECT,
    "timeout": EvalStatus.TIMEOUT,
}

# GPU names in recorded files -> knowledge-base arch keys.
_ARCH_OF_GPU = {
    "H100": "nvidia-sm90", "H200": "nvidia-sm90", "H800": "nvidia-sm90", "GH200": "nvidia-sm90",
    "A100": "nvidia-sm80", "A800": "nvidia-sm80",
    "B580": "intel-xe2", "B70": "intel-xe2", "Max 1550": "intel-xe-hpc",
}

_META_KEYS = ("kernel", "gpu", "triton", "torch", "dtype")


def arch_of_gpu(gpu: str) -> str:
    for model, arch in _ARCH_OF_GPU.items():
        if model.lower() in gpu.lower().split() or gpu.lower().endswith(model.lower()):
            return arch
    return "unknown"


@dataclass(frozen=True)
class Landscape:
    """A whole recorded parameter space: ``space`` (param -> values) and one row per config."""

    path: str
    kernel: str
    gpu: str
    arch: str
    space: dict[str, list[Any]]
    rows: tuple[dict[str, Any], ...]
    baseline_ms: dict[str, float]
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> Landscape:
        """Read a landscape file; a missing or malformed file is a UsageError naming it."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise UsageError(f"{p}: landscape file not found") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"{p}: not a readable landscape JSON file ({exc.__class__.__name__}: {exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("space"), dict) \
                or not isinstance(data.get("rows"), list):
            raise UsageError(f"{p}: not a landscape file (needs a 'space' object and a 'rows' list)")
        space = {str(k): list(v) for k, v in data["space"].items()}
        rows = tuple(r for r in data["rows"] if isinstance(r, dict) and all(k in r for k in space))
        gpu = str(data.get("gpu", ""))
        meta = {k: data[k] for k in data if k not in ("space", "rows", "baseline_ms")}
        return cls(path=str(p), kernel=str(data.get("kernel", p.stem)), gpu=gpu,
                   arch=str(data.get("arch") or arch_of_gpu(gpu)), space=space, rows=rows,
                   baseline_ms={str(k): float(v) for k, v in (data.get("baseline_ms") or {}).items()},
                   meta=meta)

    def __post_init__(self) -> None:
        index = {self._key(r): r for r in self.rows}
        object.__setattr__(self, "_index", index)
        kernels: dict[tuple[str, ...], dict[str, Any]] = {}
        for r in self.rows:
            kernels.setdefault(self._kernel_key(r), r)
        object.__setattr__(self, "_kernels", kernels)

    def _key(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(json.dumps(params.get(k), default=str) for k in self.space)

    def _kernel_key(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The config's key with every parameter its ``when`` conditions leave unread set aside: configs that build
        one kernel (the recorder measured such twins once) share it."""
        when = self.meta.get("when") or {}
        unread = {name for name, cond in when.items()
                  if any(params.get(other) not in values for other, values in cond.items())}
        return tuple(json.dumps(None if k in unread else params.get(k), default=str) for k in self.space)

    def _row(self, params: Mapping[str, Any]) -> dict[str, Any] | None:
        row = self._index.get(self._key(params))  # type: ignore[attr-defined]
        return row if row is not None else self._kernels.get(self._kernel_key(params))  # type: ignore[attr-defined]

    # --- what the file says ------------------------------------------------------------------------------
    @property
    def ref_ms(self) -> float | None:
        """The library reference (cuBLAS, torch...): the first baseline that is not the physical floor."""
        refs = [v for k, v in self.baseline_ms.items() if k != "floor"]
        return refs[0] if refs else None

    @property
    def floor_ms(self) -> float | None:
        return self.baseline_ms.get("floor")

    def ok_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("status") == "ok" and r.get("ms") is not None]

    @property
    def best_ms(self) -> float:
        """The exhaustive best: the fastest correct config in the file."""
        ok = self.ok_rows()
        if not ok:
            raise UsageError(f"{self.path}: no config ran correctly, there is no best to search for")
        return min(float(r["ms"]) for r in ok)

    def params_of(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {k: row[k] for k in self.space}

    def seed_candidate(self) -> Candidate:
        """A candidate whose space is the file's space; its source only declares SPACE and PARAMS."""
        defaults = {k: v[0] for k, v in self.space.items()}
        source = (f"# Replay of {self.kernel} recorded on {self.gpu or 'an unknown GPU'}: "
                  f"timings come from {Path(self.path).name}, nothing runs.\n"
                  f"SPACE = {self.space!r}\nPARAMS = {defaults!r}\n")
        return Candidate.from_source(source, task=self.kernel, operator=SEED_OPERATOR,
                                     meta={"landscape": self.path})

    @property
    def complete(self) -> bool:
        """Whether the file holds every config of its space (a recording cut short holds a sample)."""
        return len(self._index) >= math.prod(len(v) for v in self.space.values())  # type: ignore[attr-defined]

    def holds(self, params: Mapping[str, Any]) -> bool:
        """Whether the file recorded ``params`` (or a config that builds the same kernel, by its ``when``): a config
        it lacks was never measured, its answer is unknown."""
        return self._row(params) is not None

    # --- replay ------------------------------------------------------------------------------------------
    def evaluate(self, params: Mapping[str, Any]) -> EvalResult:
        """What the GPU answered for ``params``; a config that is not in the file is ``invalid``."""
        common = {"backend": "replay", "arch": self.arch, "device_name": self.gpu, "ref_ms": self.ref_ms,
                  "floor_ms": self.floor_ms, "timing_representative": True,
                  "versions": {k: str(self.meta[k]) for k in ("triton", "torch") if k in self.meta}}
        row = self._row(params)
        if row is None:
            shown = {k: params.get(k) for k in self.space}
            return EvalResult.failure(EvalStatus.INVALID, f"config {shown} is not in {Path(self.path).name}",
                                      **common)
        status = str(row.get("status", "ok"))
        if status == "ok" and row.get("ms") is not None:
            ms = float(row["ms"])
            ref = self.ref_ms
            floor = self.floor_ms
            return EvalResult(status=EvalStatus.OK, runtime_ms=ms, speedup=(ref / ms) if ref else None,
                              max_rel_err=row.get("rel_err"), criterion="recorded",
                              pct_of_floor=(100.0 * floor / ms) if floor else None,
                              below_floor=bool(floor and ms < floor), **common)
        if status == "incorrect":
            return EvalResult.failure(EvalStatus.INCORRECT, f"recorded as incorrect (rel_err={row.get('rel_err')})",
                                      max_rel_err=row.get("rel_err"), criterion="recorded", **common)
        kind = _FAILURE_STATUS.get(status, EvalStatus.RUNTIME_ERROR)
        return EvalResult.failure(kind, f"{status}: recorded failure of this config on {self.gpu or 'the GPU'}",
                                  **common)


@register("replay")
class ReplayBackend:
    """A backend that runs nothing: ``evaluate`` looks the candidate's params up in a recorded landscape."""

    name = "replay"

    def __init__(self, *, landscape: str | Path | Landscape | None = None, arch: str | None = None,
                 **_: Any) -> None:
        self._landscape = Landscape.load(landscape) if isinstance(landscape, str | Path) else landscape
        self._arch = arch
        self.lock_key = None  # nothing runs

    @property
    def landscape(self) -> Landscape:
        if self._landscape is None:
            raise UsageError("--backend replay runs no kernel: it serves recorded timings to "
                             "`evoforge search-bench LANDSCAPE.json`; choose another --backend")
        return self._landscape

    def available(self) -> tuple[bool, str]:
        if self._landscape is None:
            return False, ("runs no kernel: it serves timings recorded on a GPU to "
                           "`evoforge search-bench LANDSCAPE.json` (for eval and run, choose another backend)")
        return True, f"replays {Path(self._landscape.path).name} recorded on {self._landscape.gpu}"

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def arch(self) -> str:
        if self._arch:
            return self._arch
        return self._landscape.arch if self._landscape is not None else "unknown"

    @property
    def properties(self) -> dict[str, Any]:
        if self._landscape is None:
            return {"name": "replay (no landscape)"}
        ls = self._landscape
        return {"name": f"replay of {ls.gpu}", "gpu": ls.gpu, "landscape": ls.path, "kernel": ls.kernel,
                "configs": len(ls.rows), **{k: ls.meta[k] for k in ("triton", "torch") if k in ls.meta}}

    def evaluation_process(self) -> EvaluationProcess:
        return EvaluationProcess()

    def device_count(self) -> int:
        return 0  # nothing runs: recorded timings are served on the host

    def synchronize(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def block_timer(self, fn: Callable[[], Any]) -> Any:
        raise NotImplementedError("the replay backend times nothing: it serves recorded timings")

    def time_interleaved(self, fns: dict[str, Callable[[], Any]], *, budget_ms: float = 1000.0) -> dict[str, Timing]:
        raise NotImplementedError("the replay backend times nothing: it serves recorded timings through "
                                  "evaluate(candidate) / Landscape.evaluate(params)")

    def evaluate(self, candidate: Candidate) -> EvalResult:
        return self.landscape.evaluate(candidate.params)
