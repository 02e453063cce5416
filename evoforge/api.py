"""The Python API: what ``evoforge eval`` and ``evoforge run`` do, from a script or a notebook.

```python
import evoforge

result = evoforge.evaluate("L1/19", "my_relu.py", backend="interpreter", set={"batch_size": 8, "dim": 1000})
campaign = evoforge.run("experiments/quickstart.toml", budget_evals=5)     # blocks until the budget is spent
campaign = await evoforge.run_async(config)                                  # inside a running event loop
```

The same words as the command line and the config file (``set``, ``shapes``, ``correctness_runs``,
``budget_evals``...), the same checks (a mistake is a ``UsageError`` of one line, raised before anything starts)
and the same record: ``run`` returns where it is and opens its Optuna studies. ``evoforge/__init__.py`` exports
these names lazily, so importing the engine never loads this module.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoforge.config import (
    RESUME_OVERRIDES,
    CampaignConfig,
    config_from_dict,
    read_toml,
    resolved_config_from_file,
)
from evoforge.core import Candidate, EvalResult, UsageError, check_params
from evoforge.task import Task, parse_shapes, read_candidate_file

TaskLike = Task | str | Path
KernelLike = Candidate | str | Path
ConfigLike = CampaignConfig | Mapping[str, Any] | str | Path


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
        from evoforge.backends.base import available_backend
        from evoforge.backends.evaluator import Evaluator as SandboxedEvaluator
        from evoforge.backends.options import ChainOptions

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
                 language: str | None = None) -> EvalResult:
        """One kernel through the verification chain, as ``evoforge eval`` runs it.

        ``task``: a KernelBench spec (``"L1/19"``), a task file or a ``Task``. ``kernel``: a file, a module's
        source text or a ``Candidate``. ``set`` overrides the task's constants (``{"batch_size": 8}``),
        ``shapes`` adds correctness shapes (a list of such dicts, or ``"batch_size=3,dim=777;..."``),
        ``params`` sets the kernel's declared parameters; ``language`` (``"triton"`` or ``"cute"``) defaults to the one
        the source is written in. A failed kernel is a result with a failed
        ``status``; a mistake in the arguments is a ``UsageError`` before anything runs.
        """
        from evoforge.backends.task_inputs import check_task_inputs, size_warning

        the_task = _task(task, set, shapes)
        candidate = _kernel(kernel, the_task, params, language)
        warning = size_warning(the_task, check_task_inputs(the_task), host=self.backend.device_count() == 0,
                               backend=self.backend.name)
        if warning:
            warnings.warn(warning, stacklevel=2)
        return self._evaluator.evaluate(the_task, candidate)

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
             seed: int = 42) -> EvalResult:
    """Evaluate one kernel (``Evaluator(...).evaluate(...)`` once); see ``Evaluator.evaluate``.

    ```python
    r = evoforge.evaluate("L1/19", "my_relu.py", backend="interpreter", set={"batch_size": 8, "dim": 1000})
    r.status, r.speedup, r.message
    ```
    """
    the_task = _task(task, set, shapes)  # the caller's mistakes first, before an evaluation process starts
    candidate = _kernel(kernel, the_task, params, language)
    with Evaluator(backend=backend, arch=arch, correctness_runs=correctness_runs, timing=timing,
                   timeout_s=timeout_s, knowledge=knowledge, seed=seed) as ev:
        return ev.evaluate(the_task, candidate)


# ------------------------------------------------------------------------------------------------ run
@dataclass(frozen=True)
class CampaignResult:
    """A finished campaign: its run directory, its summary (``summary.json``) and its Optuna record."""

    run_dir: Path
    summary: dict[str, Any]
    storage: str  # the Optuna storage URL

    @property
    def name(self) -> str:
        return str(self.summary["campaign"])

    @property
    def tasks(self) -> list[str]:
        return list(self.summary["tasks"])

    def study(self, task: str | None = None) -> Any:
        """The task's Optuna study (``optuna.Study``): ``trials_dataframe()``, ``best_trial``, the plots."""
        import optuna

        name = task or self._only_task()
        return optuna.load_study(study_name=f"{self.name}/{name}", storage=self.storage)

    def best(self, task: str | None = None) -> dict[str, Any]:
        """The task's line of the summary: ``best_speedup``, ``best_params``, ``exported`` (the best kernel)."""
        return dict(self.summary["tasks"][task or self._only_task()])

    def _only_task(self) -> str:
        if len(self.tasks) != 1:
            raise UsageError(f"the campaign has {len(self.tasks)} tasks ({', '.join(self.tasks)}): name one")
        return self.tasks[0]


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
    d = config.to_dict()
    return {"campaign": {k: v for k, v in d.items() if k not in ("tasks", "llm")}, "tasks": d["tasks"],
            "llm": d["llm"]}


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


async def run_async(config: ConfigLike | None = None, *, resume: str | Path | None = None, progress: bool = True,
                    **settings: Any) -> CampaignResult:
    """``run`` for a running event loop (a notebook cell, an async application): ``await evoforge.run_async(...)``.

    The blocking start (Ray, the evaluators) runs in a thread of its own that outlives the call (``_starter``), the
    campaign's loop on the caller's loop; one Ray serves every campaign of the process.
    """
    from evoforge.campaign import Campaign

    cfg = _campaign_config(config, resume, settings)
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
    already running (Jupyter): the campaign then runs on a loop of its own in a worker thread.
    """
    coroutine = run_async(config, resume=resume, progress=progress, **settings)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="evoforge-run") as pool:
        return pool.submit(asyncio.run, coroutine).result()
