"""Replay of recorded landscapes: every config of a kernel's space, timed once on a real GPU, served from a file.

Like Kernel Tuner's simulation mode, it lets a search strategy be run and scored on a CPU in milliseconds:
``Landscape.evaluate(params)`` answers what the GPU answered when the file was recorded.

It is also a simulated device for whole campaigns (``evoforge run --backend replay``): built with ``simulate``
(``ReplayBackend.for_campaign``), each evaluation the pool's actor is given is answered by ``answer(task,
candidate)``: from the task's landscape where it has one, else from a seeded cost model (``CostModel``) over the
candidate's params, after the configured delay (the simulated device is busy that long) and with the configured
mix of failures. Everything but the GPU is the real engine: the actors, the strategies, the operators, the
knowledge base, the cache and the record.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evoforge.backends.base import EvaluationProcess, Timing

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


_LOADED: dict[tuple[str, int, int], tuple[Landscape, bool]] = {}  # (file, mtime, size) -> (read, names its kernel)


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
        """Read a landscape file; a missing or malformed file is a UsageError naming it.

        A file already read by this process (the same contents under any link to it: scale_bench's hundred tasks
        share seven files) is not parsed and indexed again: 200 loads were a fifth of a 10k-trial resume's start.
        """
        p = Path(path)
        try:
            stat = p.stat()
            key = (str(p.resolve()), stat.st_mtime_ns, stat.st_size)
        except OSError:
            key = None
        if key is not None and key in _LOADED:
            loaded, named = _LOADED[key]
            return loaded if loaded.path == str(p) else loaded._under(p, named)
        landscape = cls._read(p)
        if key is not None:
            _LOADED[key] = (landscape, "kernel" in landscape.meta)
        return landscape

    def _under(self, p: Path, named: bool) -> Landscape:
        """This landscape as read from ``p`` (a link to its file): its indexes shared, its path and (where the
        file names none) its kernel the link's."""
        other = copy.copy(self)
        object.__setattr__(other, "path", str(p))
        if not named:
            object.__setattr__(other, "kernel", p.stem)
        return other

    @classmethod
    def _read(cls, p: Path) -> Landscape:
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

    def seed_candidate(self, task: str = "") -> Candidate:
        """A candidate whose space is the file's space: its source declares SPACE and PARAMS beside a stand-in for
        the recorded kernel (``task``: the campaign task it seeds; the file's kernel by default)."""
        defaults = {k: v[0] for k, v in self.space.items()}
        name = Path(self.path).name
        # A module the static check accepts (a campaign on --backend replay checks every child as it would on a
        # GPU): it stands for the recorded kernel and is never imported.
        source = (f"# Replay of {self.kernel} recorded on {self.gpu or 'an unknown GPU'}: "
                  f"timings come from {name}, nothing runs.\n"
                  "import triton\n\n"
                  f"SPACE = {self.space!r}\nPARAMS = {defaults!r}\n\n\n"
                  "@triton.jit\ndef recorded_kernel():  # stands for the kernel the file recorded\n    pass\n\n\n"
                  f"class ModelNew:\n    \"\"\"Stands for the recorded kernel: its times come from {name}.\"\"\"\n")
        return Candidate.from_source(source, task=task or self.kernel, operator=SEED_OPERATOR,
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


#: The statuses a simulated device may answer instead of a time (``ok`` is what is left of the probability).
SIMULATED_FAILURES = (EvalStatus.COMPILE_ERROR, EvalStatus.RUNTIME_ERROR, EvalStatus.INCORRECT, EvalStatus.TIMEOUT,
                      EvalStatus.CRASHED)


def _unit(*parts: Any) -> float:
    """A number in [0, 1) that only ``parts`` decide (the same in every process: no ``hash()`` salt)."""
    digest = hashlib.blake2b(json.dumps(parts, sort_keys=True, default=str).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2 ** 64


@dataclass(frozen=True)
class CostModel:
    """A seeded stand-in for a GPU, for tasks without a recorded landscape: each config's time is a product of one
    factor per (parameter, value) and one per config, and its fate (a time, or one of ``failures``, drawn with the
    probabilities given) is fixed by the seed, the task and the config, so a repeat, a resume and the cache agree.
    The reference takes ``ref_ms``; configs run between about 0.5x and 2x of it."""

    seed: int = 0
    failures: Mapping[str, float] = field(default_factory=dict)
    ref_ms: float = 1.0

    def evaluate(self, task: str, params: Mapping[str, Any]) -> EvalResult:
        common = {"backend": "replay", "ref_ms": self.ref_ms, "timing_representative": False,
                  "criterion": "cost model"}
        fate = _unit(self.seed, task, dict(params), "fate")
        for status in SIMULATED_FAILURES:
            p = float(self.failures.get(str(status), 0.0))
            if fate < p:
                return EvalResult.failure(status, f"{status}: drawn by the replay backend's cost model (seed "
                                          f"{self.seed}, probability {p:g})", **common)
            fate -= p
        factor = 1.0
        for key in sorted(params):
            factor *= 0.75 + 0.5 * _unit(self.seed, task, key, params[key])
        factor *= 0.8 + 0.4 * _unit(self.seed, task, dict(params), "config")
        ms = self.ref_ms * factor
        return EvalResult(status=EvalStatus.OK, runtime_ms=ms, speedup=self.ref_ms / ms, **common)


def check_simulation(simulate: Mapping[str, Any], *, where: str = "[replay]") -> None:
    """A simulation's settings, checked before anything starts: one line naming the setting and the fix."""
    delay = simulate.get("delay_s", 0.0)
    if not isinstance(delay, int | float) or delay < 0:
        raise UsageError(f"{where} delay_s = {delay!r}: give the seconds each simulated evaluation takes (>= 0)")
    failures = simulate.get("failures") or {}
    known = [str(s) for s in SIMULATED_FAILURES]
    for status, p in failures.items():
        if status not in known:
            raise UsageError(f"{where} failures: unknown status {status!r} (choose from {', '.join(known)})")
        if not isinstance(p, int | float) or not 0 <= p <= 1:
            raise UsageError(f"{where} failures: {status} = {p!r} is not a probability (between 0 and 1)")
    if sum(float(p) for p in failures.values()) > 1:
        raise UsageError(f"{where} failures: the probabilities add up to more than 1")


class ReplayBackend:
    """A backend that runs nothing: ``evaluate`` looks the candidate's params up in a recorded landscape.

    Built with ``simulate`` (``for_campaign``), it is a simulated device for a campaign: ``answer(task, candidate)``
    serves each task from its landscape (``simulate["landscapes"]``: task name -> file), else from a ``CostModel``,
    after ``simulate["delay_s"]`` seconds. The Evaluator calls ``answer`` instead of starting a sandbox: nothing is
    imported, compiled or run.
    """

    name = "replay"
    SIMULATES = True  # backends.registry.simulates: a campaign on it is answered by ``answer``, not run

    def __init__(self, *, landscape: str | Path | Landscape | None = None, arch: str | None = None,
                 simulate: Mapping[str, Any] | None = None, **_: Any) -> None:
        self._landscape = Landscape.load(landscape) if isinstance(landscape, str | Path) else landscape
        self._arch = arch
        self.lock_key = None  # nothing runs
        self.simulate = dict(simulate) if simulate is not None else None
        self._landscapes: dict[str, Landscape] = {}
        if self.simulate is not None:
            check_simulation(self.simulate)
            self._model = CostModel(seed=int(self.simulate.get("seed", 0)),
                                    failures=dict(self.simulate.get("failures") or {}))

    @classmethod
    def for_campaign(cls, *, landscapes: Mapping[str, str], delay_s: float = 0.0,
                     failures: Mapping[str, float] | None = None, seed: int = 0,
                     arch: str | None = None) -> ReplayBackend:
        """A simulated device for a campaign (its options are plain values: they travel to the pool's actors)."""
        return cls(arch=arch, simulate={"landscapes": dict(landscapes), "delay_s": float(delay_s),
                                        "failures": dict(failures or {}), "seed": seed})

    @property
    def simulated(self) -> bool:
        """Whether this backend answers a campaign's evaluations itself (``answer``), with no evaluation process."""
        return self.simulate is not None

    @property
    def landscape(self) -> Landscape:
        if self._landscape is None:
            raise UsageError("--backend replay runs no kernel: it serves recorded timings to "
                             "`evoforge search-bench LANDSCAPE.json` and to campaigns (`evoforge run --backend replay "
                             "--landscape FILE`); choose another --backend")
        return self._landscape

    def landscape_of(self, task_name: str) -> Landscape | None:
        """The landscape that answers ``task_name`` in a simulation (loaded once per process), or None."""
        path = (self.simulate or {}).get("landscapes", {}).get(task_name)
        if not path:
            return None
        if path not in self._landscapes:
            self._landscapes[path] = Landscape.load(path)
        return self._landscapes[path]

    def available(self) -> tuple[bool, str]:
        if self.simulate is not None:
            return True, "simulates a device from recorded landscapes and a seeded cost model"
        if self._landscape is None:
            return False, ("runs no kernel: it serves timings recorded on a GPU to "
                           "`evoforge search-bench LANDSCAPE.json` and to `evoforge run --backend replay` (for eval, "
                           "choose another backend)")
        return True, f"replays {Path(self._landscape.path).name} recorded on {self._landscape.gpu}"

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def arch(self) -> str:
        if self._arch:
            return self._arch
        if self._landscape is not None:
            return self._landscape.arch
        if self.simulate is not None:
            # a campaign of recorded H200 landscapes is one of sm90; a cost model alone stands for an H200 too
            archs = {self.landscape_of(task).arch for task in self.simulate.get("landscapes", {})}
            return archs.pop() if len(archs) == 1 else "nvidia-sm90"
        return "unknown"

    @property
    def properties(self) -> dict[str, Any]:
        if self.simulate is not None:
            return {"name": "replay (simulated device)", "delay_s": self.simulate.get("delay_s", 0.0),
                    "landscapes": len(self.simulate.get("landscapes", {}))}
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

    def answer(self, task_name: str, candidate: Candidate) -> EvalResult:
        """A simulated evaluation: the task's landscape (else the cost model) answers for ``candidate.params``, after
        the configured delay, the time a device would have been busy."""
        assert self.simulate is not None, "answer() is a simulation's (ReplayBackend.for_campaign)"
        started = time.perf_counter()
        delay = float(self.simulate.get("delay_s", 0.0))
        if delay:
            time.sleep(delay)
        landscape = self.landscape_of(task_name)
        result = (landscape.evaluate(candidate.params) if landscape is not None
                  else self._model.evaluate(task_name, candidate.params))
        return replace(result, eval_s=round(time.perf_counter() - started, 6))
