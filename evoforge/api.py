"""The Python API: what ``evoforge eval`` and ``evoforge run`` do, from a script or a notebook.

```python
import evoforge

result = evoforge.evaluate("L1/19", "my_relu.py", backend="interpreter", set={"batch_size": 8, "dim": 1000})
campaign = evoforge.run("experiments/quickstart.toml", budget_evals=5)     # blocks until the budget is spent
campaign = await evoforge.run_async(config)                                  # inside a running event loop
campaign.best(), campaign.best_kernels(), campaign.leaderboard()              # what it found, one task or all
```

The same words as the command line and the config file (``set``, ``shapes``, ``correctness_runs``,
``budget_evals``...), the same checks (a mistake is a ``UsageError`` of one line, raised before anything starts)
and the same record: ``run`` returns where it is and opens its Optuna studies. Each result prints as one line
(``KernelResult``, ``CampaignResult``, ``BestKernel``); the rest is one attribute away (``.details``,
``.message``, ``.summary``). The record is one Optuna study per task, named ``<campaign>/<task>``, whose one
objective is named ``speedup`` (``study.set_metric_names``): ``study.trials_dataframe()`` calls its column
``value_speedup`` (the speedup over the PyTorch reference; NaN for a failed trial, whose ``user_attrs_status``
says why). ``evoforge/__init__.py`` exports these names lazily, so importing the engine never loads this module.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoforge.config import (
    RESUME_OVERRIDES,
    CampaignConfig,
    config_from_dict,
    read_toml,
    resolved_config_from_file,
)
from evoforge.core import Candidate, EvalResult, UsageError, check_params
from evoforge.task import (
    Task,
    is_kernelbench_spec,
    parse_shapes,
    read_candidate_file,
    resolve_task_path,
    task_name,
)

if TYPE_CHECKING:
    import optuna
    import pandas as pd

TaskLike = Task | str | Path
KernelLike = Candidate | str | Path
ConfigLike = CampaignConfig | Mapping[str, Any] | str | Path


# ------------------------------------------------------------------------------------------------ results
def _figure(value: Any) -> str:
    """A number as a reader takes it in at a glance: four significant digits."""
    return f"{value:.4g}" if isinstance(value, int | float) and not isinstance(value, bool) else repr(value)


def _one_line(text: str, limit: int = 80) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit and first == text.strip() else first[:limit - 1].rstrip() + "\u2026"


def _short_repr(kind: str, pairs: Sequence[tuple[str, Any]]) -> str:
    """``Kind(name=value, ...)`` of the values that are set: one line, never a dump of a source or a dict."""
    return f"{kind}({', '.join(f'{k}={_figure(v)}' for k, v in pairs if v is not None)})"


@dataclass(frozen=True, repr=False)
class KernelResult(EvalResult):
    """What ``evaluate`` returns: the chain's ``EvalResult`` (every field, ``ok``, ``to_dict()``) with the task and
    the kernel file it judged, printed as one line. The whole message is ``.message``, the chain's details
    (kernels launched at each shape, phase times) are ``.details``, everything is ``.to_dict()``."""

    task: str = ""
    file: str | None = None  # the kernel's file; None for a source text or a Candidate

    def __repr__(self) -> str:
        failed = [("message", _one_line(self.message))] if not self.ok and self.message else []
        return _short_repr(type(self).__name__, [
            ("status", str(self.status)), *failed, ("speedup", self.speedup), ("runtime_ms", self.runtime_ms),
            ("file", self.file), ("task", self.task or None)])


@dataclass(frozen=True, repr=False)
class BestKernel(Mapping[str, Any]):
    """A task's best kernel in a finished campaign, as ``best/<task>.py`` holds it; ``None`` where it found none.

    ``recommendation`` is what to use: ``"kernel"``, ``"reference"`` (no kernel beat the PyTorch reference) or
    ``"torch.compile"`` (the kernel is slower than torch.compile's build of the reference). ``details`` is the
    task's whole line of ``summary.json`` (statuses, tokens, why it stopped early, the export's ``reason``...);
    indexing reads it too (``best["best_speedup"]``, ``best["exported"]["file"]``), as ``best()`` returned before.
    """

    task: str
    speedup: float | None
    runtime_ms: float | None
    vs_compile: float | None
    operator: str | None
    params: dict[str, Any] | None
    file: str | None
    recommendation: str | None
    details: dict[str, Any]

    @classmethod
    def from_summary(cls, task: str, line: Mapping[str, Any]) -> BestKernel:
        exported = line.get("exported") or {}
        return cls(task=task, speedup=line.get("best_speedup"), runtime_ms=line.get("best_runtime_ms"),
                   vs_compile=line.get("vs_compile"), operator=line.get("best_operator"),
                   params=line.get("best_params"), file=exported.get("file"),
                   recommendation=exported.get("recommendation"), details=dict(line))

    def __getitem__(self, key: str) -> Any:
        return self.details[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.details)

    def __len__(self) -> int:
        return len(self.details)

    def __repr__(self) -> str:
        return _short_repr(type(self).__name__, [
            ("task", self.task), ("speedup", self.speedup), ("runtime_ms", self.runtime_ms),
            ("vs_compile", self.vs_compile), ("operator", self.operator), ("file", self.file),
            ("recommendation", self.recommendation)])


#: The leaderboard's columns, in the order ``evoforge run`` prints them, named as ``summary.json`` names them.
LEADERBOARD_COLUMNS = ("task", "evaluations", "ok", "best_speedup", "vs_compile", "best_runtime_ms", "ref_ms",
                       "compile_ms", "best_pct_of_floor", "best_operator", "failures")
_NUMERIC = ("best_speedup", "vs_compile", "best_runtime_ms", "ref_ms", "compile_ms", "best_pct_of_floor")


# ------------------------------------------------------------------------------------------------ evaluate
def _task(task: TaskLike, set: Mapping[str, Any] | None, shapes: str | Sequence[Mapping[str, Any]] | None) -> Task:
    if isinstance(task, Task):
        if set or shapes:
            raise UsageError("task: a Task already carries its constants and shapes; pass the task as a spec "
                             "(\"L1/19\" or a path) to give set= and shapes=, or use Task.load(..., overrides=, "
                             "shapes=)")
        return task
    shape_list = parse_shapes(shapes) if isinstance(shapes, str) else [dict(s) for s in shapes or ()]
    return Task.load(str(task), overrides=dict(set or {}), shapes=shape_list)


def _kernel(kernel: KernelLike, task: Task, params: Mapping[str, Any] | None, language: str | None) -> Candidate:
    if isinstance(kernel, Candidate):
        check_params(kernel.source, params or {}, where="params")
        return dataclasses.replace(kernel.with_params(dict(params or {})), task=task.name)
    if isinstance(kernel, str) and "\n" in kernel:
        source, where = kernel, "params"
    else:
        source, where = read_candidate_file(str(kernel), flag="kernel"), f"params (for {kernel})"
    check_params(source, params or {}, where=where)
    return Candidate.from_source(source, task=task.name, params=dict(params or {}), language=language)


def _kernel_file(kernel: KernelLike) -> str | None:
    is_file = isinstance(kernel, Path) or (isinstance(kernel, str) and "\n" not in kernel)
    return str(kernel) if is_file else None


class Evaluator:
    """Evaluates kernels one after another in one sandboxed evaluation process (its start-up is paid once).

    ```python
    with evoforge.Evaluator(backend="interpreter") as ev:
        for block in (256, 512, 1024):
            print(block, ev.evaluate("L1/19", "my_relu.py", params={"BLOCK": block}).status)
    ```
    """

    def __init__(self, *, backend: str = "auto", arch: str | None = None, correctness_runs: int = 3,
                 timing: bool = True, timeout_s: float = 120.0, knowledge: bool = True, seed: int = 42) -> None:
        from evoforge.backends.registry import available_backend
        from evoforge.judge.evaluator import Evaluator as SandboxedEvaluator
        from evoforge.judge.options import ChainOptions

        if correctness_runs < 1:
            raise UsageError("correctness_runs must be at least 1")
        if timeout_s <= 0:
            raise UsageError("timeout_s must be a positive number of seconds")
        self.backend = available_backend(backend, flag="backend", arch=arch)
        self._evaluator = SandboxedEvaluator(
            backend=self.backend.name, arch=arch or self.backend.arch, timeout_s=timeout_s, knowledge=knowledge,
            options=ChainOptions(trials=correctness_runs, timing=timing, seed=seed))

    def evaluate(self, task: TaskLike, kernel: KernelLike, *, set: Mapping[str, Any] | None = None,
                 shapes: str | Sequence[Mapping[str, Any]] | None = None, params: Mapping[str, Any] | None = None,
                 language: str | None = None) -> KernelResult:
        """One kernel through the verification chain, as ``evoforge eval`` runs it.

        ``task``: a KernelBench spec (``"L1/19"``), a task file or a ``Task``. ``kernel``: a file, a module's
        source text or a ``Candidate``. ``set`` overrides the task's constants (``{"batch_size": 8}``),
        ``shapes`` adds correctness shapes (a list of such dicts, or ``"batch_size=3,dim=777;..."``),
        ``params`` sets the kernel's declared parameters; ``language`` (``"triton"`` or ``"cute"``) defaults to the one
        the source is written in. A failed kernel is a result with a failed
        ``status``; a mistake in the arguments is a ``UsageError`` before anything runs.
        The result prints as one line (``KernelResult``); ``.message`` and ``.details`` hold the rest.
        """
        the_task = _task(task, set, shapes)
        return self._evaluate(the_task, _kernel(kernel, the_task, params, language), _kernel_file(kernel))

    def _evaluate(self, task: Task, candidate: Candidate, file: str | None) -> KernelResult:
        from evoforge.judge.task_inputs import check_task_inputs, size_warning

        warning = size_warning(task, check_task_inputs(task), host=self.backend.device_count() == 0,
                               backend=self.backend.name)
        if warning:
            warnings.warn(warning, stacklevel=3)
        result = self._evaluator.evaluate(task, candidate)
        return KernelResult(**{f.name: getattr(result, f.name) for f in dataclasses.fields(EvalResult)},
                            task=task.name, file=file)

    def close(self) -> None:
        self._evaluator.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def evaluate(task: TaskLike, kernel: KernelLike, *, backend: str = "auto", arch: str | None = None,
             set: Mapping[str, Any] | None = None, shapes: str | Sequence[Mapping[str, Any]] | None = None,
             params: Mapping[str, Any] | None = None, correctness_runs: int = 3, timing: bool = True,
             timeout_s: float = 120.0, knowledge: bool = True, language: str | None = None,
             seed: int = 42) -> KernelResult:
    """Evaluate one kernel (``Evaluator(...).evaluate(...)`` once); see ``Evaluator.evaluate``.

    ```python
    r = evoforge.evaluate("L1/19", "my_relu.py", backend="interpreter", set={"batch_size": 8, "dim": 1000})
    r            # KernelResult(status='ok', speedup=1.31, runtime_ms=0.2166, file='my_relu.py', task='level1/19_ReLU')
    r.status, r.speedup, r.message
    ```
    """
    the_task = _task(task, set, shapes)  # the caller's mistakes first, before an evaluation process starts
    candidate = _kernel(kernel, the_task, params, language)
    with Evaluator(backend=backend, arch=arch, correctness_runs=correctness_runs, timing=timing,
                   timeout_s=timeout_s, knowledge=knowledge, seed=seed) as ev:
        return ev._evaluate(the_task, candidate, _kernel_file(kernel))


# ------------------------------------------------------------------------------------------------ run
@dataclass(frozen=True, repr=False)
class CampaignResult:
    """A finished campaign: its run directory, its summary (``summary.json``) and its Optuna record.

    It prints as one line; ``best()`` and ``best_kernels()`` say what it found, ``leaderboard()`` is the table
    ``evoforge run`` prints, ``study()`` the record, ``summary`` everything. ``CampaignResult.load(RUN_DIR)`` opens a
    campaign that finished in another session.
    """

    run_dir: Path
    summary: dict[str, Any]
    storage: str  # the Optuna storage URL

    @classmethod
    def load(cls, run_dir: str | Path) -> CampaignResult:
        """A finished campaign's result, read back from its run directory (its ``summary.json`` and record)."""
        from evoforge.report import storage_url_of

        run_dir = Path(run_dir)
        if not (run_dir / "summary.json").is_file():
            raise UsageError(f"{run_dir}: no summary.json there (not a finished campaign's run directory; "
                             "`evoforge run --resume` finishes one)")
        config_file = run_dir / "config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else None
        return cls(run_dir=run_dir, summary=json.loads((run_dir / "summary.json").read_text()),
                   storage=storage_url_of(run_dir, config))

    @property
    def name(self) -> str:
        return str(self.summary["campaign"])

    @property
    def tasks(self) -> list[str]:
        return list(self.summary["tasks"])

    def study(self, task: str | None = None) -> optuna.Study:
        """The task's Optuna study: ``trials_dataframe()``, ``best_trial``, the plots.

        Its one objective is named ``speedup``, so ``trials_dataframe()`` calls the column ``value_speedup``: the
        speedup over the PyTorch reference, NaN for a failed trial (state ``FAIL``; ``user_attrs_status`` and
        ``user_attrs_message`` say why).
        """
        import optuna

        return optuna.load_study(study_name=f"{self.name}/{self._task(task)}", storage=self.storage)

    def best(self, task: str | None = None) -> BestKernel:
        """The task's best kernel: ``speedup``, ``runtime_ms``, ``vs_compile``, ``operator``, ``params``, ``file``,
        ``recommendation``; ``details`` (or indexing: ``best["best_speedup"]``) is the task's whole line of the
        summary. ``task``: its name or its spec (``"L1/19"``); left out for a campaign of one task."""
        name = self._task(task)
        return BestKernel.from_summary(name, self.summary["tasks"][name])

    def best_kernels(self) -> dict[str, BestKernel]:
        """Every task's best kernel, by task (tasks that did not start are in ``summary["not_started"]``)."""
        return {name: BestKernel.from_summary(name, line) for name, line in self.summary["tasks"].items()}

    def leaderboard(self) -> pd.DataFrame:
        """The table ``evoforge run`` prints, one row per task, its columns named as ``summary.json`` names
        them (``LEADERBOARD_COLUMNS``): times in ms, speedups as factors, NaN where a figure is missing;
        ``failures`` counts each failed status (``"incorrect 2, timeout 1"``; empty where none failed)."""
        import pandas as pd

        rows = []
        for name, line in self.summary["tasks"].items():
            statuses = line.get("statuses") or {}
            rows.append({"task": name, "evaluations": int(line.get("evaluations") or 0),
                         "ok": int(statuses.get("ok", 0)), **{c: line.get(c) for c in _NUMERIC},
                         "best_operator": line.get("best_operator"),
                         "failures": ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()) if k != "ok")})
        board = pd.DataFrame(rows, columns=list(LEADERBOARD_COLUMNS))
        for column in _NUMERIC:
            board[column] = pd.to_numeric(board[column], errors="coerce").astype(float)
        return board.astype({"evaluations": int, "ok": int})

    def __repr__(self) -> str:
        lines = self.summary.get("tasks") or {}
        stopped = sum(1 for line in lines.values() if line.get("stopped_early"))
        not_started = len(self.summary.get("not_started") or {})
        counts = [("evaluations", sum(int(line.get("evaluations") or 0) for line in lines.values())),
                  ("stopped_early", stopped or None), ("not_started", not_started or None)]
        if len(lines) == 1:
            best = self.best()
            found = [("speedup", best.speedup), ("runtime_ms", best.runtime_ms), ("file", best.file)]
            return _short_repr(type(self).__name__, [("name", self.name), ("task", best.task), *counts, *found])
        correct = sum(1 for line in lines.values() if line.get("best_speedup") is not None)
        return _short_repr(type(self).__name__, [("name", self.name), ("tasks", len(lines)), *counts,
                                                 ("with_a_kernel", correct), ("run_dir", str(self.run_dir))])

    def _task(self, task: str | None) -> str:
        if task is None:
            if len(self.tasks) != 1:
                raise UsageError(f"the campaign has {len(self.tasks)} tasks ({', '.join(self.tasks)}): name one, or "
                                 "take them all with best_kernels() or leaderboard()")
            return self.tasks[0]
        if task not in self.summary["tasks"] and is_kernelbench_spec(task):  # "L1/19" names level1/19_ReLU
            with contextlib.suppress(UsageError):
                task = task_name(resolve_task_path(task))
        if task not in self.summary["tasks"]:
            raise UsageError(f"task {task!r}: not in campaign {self.name} (its tasks: {', '.join(self.tasks)})")
        return task


def _campaign_config(config: ConfigLike | None, resume: str | Path | None,
                     settings: Mapping[str, Any]) -> CampaignConfig:
    """One validated config from what the caller gave, keyword settings over the config's ``[campaign]``."""
    if resume is not None:
        if config is not None:
            raise UsageError("resume: a resumed campaign takes its config from its run directory; drop config")
        run_dir = Path(resume)
        if not (run_dir / "config.json").is_file():
            raise UsageError(f"resume {run_dir}: no config.json there (not a run directory)")
        fixed = sorted(set(settings) - set(RESUME_OVERRIDES))
        if fixed:
            raise UsageError(f"resume {run_dir}: {', '.join(fixed)} cannot change on a resume (a resumed campaign "
                             f"may change {', '.join(RESUME_OVERRIDES)})")
        base = resolved_config_from_file(run_dir / "config.json")
        base.out = str(run_dir)
        data, source, base_dir = _as_dict(base), f"resume {run_dir}", None
    elif isinstance(config, CampaignConfig):
        data, source, base_dir = _as_dict(config), "config", None
    elif isinstance(config, Mapping):
        data, source, base_dir = {k: v for k, v in config.items()}, "config", None
    elif isinstance(config, str | Path):
        data, source, base_dir = read_toml(config), f"config {config}", Path(config).parent
    elif config is None:
        data, source, base_dir = {}, "evoforge.run", None
    else:
        raise UsageError(f"config: expected a TOML file, a dict or a CampaignConfig, got {type(config).__name__}")
    data = dict(data)
    campaign = dict(data.get("campaign", {}))
    for key, value in settings.items():
        if key == "tasks":
            data["tasks"] = list(value)
        elif key == "llm":
            data["llm"] = {**dict(data.get("llm", {})), **dict(value)}
        else:
            campaign[key] = value
    data["campaign"] = campaign
    return config_from_dict(data, source=source, base_dir=base_dir)


def _as_dict(config: CampaignConfig) -> dict[str, Any]:
    """The TOML structure of a config: its sections (``config.SECTIONS``) beside ``[campaign]``."""
    from evoforge.config import SECTIONS

    d = config.to_dict()
    return {"campaign": {k: v for k, v in d.items() if k not in SECTIONS}, **{k: d[k] for k in SECTIONS if k in d}}


_STARTER: concurrent.futures.ThreadPoolExecutor | None = None


def _starter() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that starts Ray (and the evaluators), kept for the life of the process.

    Ray ties the processes it starts (its GCS, its raylet) to the thread that started them (Linux's
    PR_SET_PDEATHSIG follows the parent thread): started from a thread that ends, as ``asyncio.to_thread``'s
    or a notebook's ``run`` worker does, Ray dies with it and the next campaign of the session finds it dead.
    """
    global _STARTER
    if _STARTER is None:
        _STARTER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="evoforge-ray")
    return _STARTER


class _QuietOptuna:
    """Optuna's log held at WARNING while campaigns run, as ``evoforge run`` holds it, then given back as it was.

    Optuna logs each study it creates at INFO on its own stderr handler; a campaign records through Optuna, so
    ``progress=False`` would still print. Campaigns of one process may overlap (``run_async``): the first to start
    saves the caller's verbosity, the last to end restores it. A caller's quieter setting (ERROR) is kept.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._saved: int | None = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        import optuna

        with self._lock:
            if self._running == 0:
                self._saved = optuna.logging.get_verbosity()
            self._running += 1
            optuna.logging.set_verbosity(max(self._saved or 0, optuna.logging.WARNING))
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0 and self._saved is not None:
                    optuna.logging.set_verbosity(self._saved)


_quiet_optuna = _QuietOptuna()


async def run_async(config: ConfigLike | None = None, *, resume: str | Path | None = None, progress: bool = True,
                    **settings: Any) -> CampaignResult:
    """``run`` for a running event loop (a notebook cell, an async application): ``await evoforge.run_async(...)``.

    The blocking start (Ray, the evaluators) runs in a thread of its own that outlives the call (``_starter``), the
    campaign's loop on the caller's loop; one Ray serves every campaign of the process.
    """
    from evoforge.campaign import Campaign

    cfg = _campaign_config(config, resume, settings)
    with _quiet_optuna():
        campaign = Campaign(cfg, resume=resume is not None, progress=progress)
        try:
            started = await asyncio.get_running_loop().run_in_executor(_starter(), campaign.start)
            summary = await campaign.run() if started else campaign.finish()
        finally:
            await asyncio.to_thread(campaign.close)
    from evoforge.report import storage_url_of

    return CampaignResult(run_dir=campaign.run_dir, summary=summary,
                          storage=storage_url_of(campaign.run_dir, cfg.to_dict()))


def run(config: ConfigLike | None = None, *, resume: str | Path | None = None, progress: bool = True,
        **settings: Any) -> CampaignResult:
    """Run a campaign to its budget, as ``evoforge run`` does, and return it.

    ``config``: a campaign TOML file, the same structure as a dict (``{"campaign": {...}, "tasks": [...],
    "llm": {...}}``) or a ``CampaignConfig``; keyword ``settings`` override its ``[campaign]`` keys
    (``budget_evals=20, out="runs/x"``; ``tasks=[...]`` replaces its tasks). ``resume=RUN_DIR`` continues a
    campaign (``budget_evals`` and the other ``RESUME_OVERRIDES`` may change). Works where an event loop is
    already running (Jupyter): the campaign then runs on a loop of its own in a worker thread. Optuna's log is held
    at WARNING for the call, as ``evoforge run`` holds it: with ``progress=False`` nothing is printed.
    """
    coroutine = run_async(config, resume=resume, progress=progress, **settings)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="evoforge-run") as pool:
        return pool.submit(asyncio.run, coroutine).result()
