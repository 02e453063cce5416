"""A campaign's set-up, before anything runs (``Campaign.prepare``, ``Campaign.start_pool``): the tasks and their
seeds (``evoforge.task_start``), the operators, each task's strategy with the knowledge base's hints, the backend's
options, the checks on the user's input that must fail before Ray starts, then Ray and the evaluators. A part of
``Campaign`` (``evoforge/campaign.py``), which holds the state these methods read and write."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from evoforge.baseline import BASELINE_ATTR
from evoforge.config import validate_config
from evoforge.core import Candidate, EvalResult, UsageError
from evoforge.mutators.base import Mutator
from evoforge.mutators.names import LLM, LLM_GENERATE, PARAMS
from evoforge.mutators.registry import family_of
from evoforge.search.base import Strategy
from evoforge.search.cache import ResultCache
from evoforge.search.store import OptunaStore, redact_url
from evoforge.task import Task
from evoforge.task_state import TaskState

log = logging.getLogger("evoforge.campaign")


class CampaignSetup:
    """A part of ``Campaign``: see the module's docstring."""

    def _load_tasks(self) -> list[tuple[Task, Candidate]]:
        """Each task with its seed (``evoforge.task_start``); the starts beside it are the set-up's too."""
        from evoforge.task_start import TaskStarts

        self.starts = TaskStarts(config=self.config, backend=self.backend, run_dir=self.run_dir,
                                 generate=LLM_GENERATE in self.mutators)
        pairs = self.starts.load()
        self.not_started = self.starts.not_started
        self._input_shapes, self._input_bytes = self.starts.input_shapes, self.starts.input_bytes
        self._need = self.starts.need_bytes
        return pairs

    def _make_mutators(self, arch: str) -> dict[str, Mutator]:
        """The operators the config names, from the one registry; the LLM client only when a model is set."""
        from evoforge.mutators.llm_client import OpenAIClient
        from evoforge.mutators.registry import OperatorSettings, build_operators

        llm = self.config.llm
        if llm.enabled:
            self.llm = OpenAIClient(config=replace(llm, cache_dir=llm.cache_dir or str(self.run_dir / "llm-cache")),
                                    seed=self.config.seed)
        settings = OperatorSettings(arch=arch, seed=self.config.seed, llm=llm, client=self.llm)
        return build_operators(self.config.operators, settings)

    def _strategy(self, task: Task, seed: Candidate, operators: list[str], index: int) -> Strategy:
        from evoforge.search.strategies import strategy_accepts
        from evoforge.search.strategy_spec import build_strategy, parse_strategy

        options = dict(self.config.strategy_options or {})
        name = parse_strategy(self.config.strategy)[0]
        for key, value in self._knowledge_hints(task).items():
            if key not in options and strategy_accepts(name, key):  # the user's own option wins
                options[key] = value
        return build_strategy(self.config.strategy, seed=self.config.seed * 1000 + index, operators=operators,
                              initial=(seed,), options=options)

    def _knowledge_hints(self, task: Task) -> dict[str, Any]:
        """What the knowledge base tells the search before anything runs (nothing with it off): the parameter
        values its rules say compute another function than the task's dtype asks for (``unsafe``: never proposed
        until a correct config holding one is seen) and the parameters that grow together (``moves_together``:
        one step of the tuner's walk). Unfiltered by the seed's SPACE: a structure an operator writes later
        declares its own, and each structure's tuner keeps what its space holds."""
        from evoforge import knowledge

        if not self.config.knowledge:
            return {}
        if (landscape := self._landscape_of(task)) is not None:  # as search-bench tells it of the same file
            from evoforge.search.bench import knowledge_hints

            return knowledge_hints(landscape)
        return knowledge.search_hints(None, knowledge.infer_task_dtype(task.source), self.config.arch)

    def prepare(self) -> None:
        """Everything that can fail on what the user gave (config, strategy, backend, operators, tasks and their
        shapes, the record's studies), checked before anything is written that would make a corrected retry
        look like a second campaign: ``config.json`` is written by ``start_pool``, once the evaluators start."""
        from evoforge.backends.registry import available_backend
        from evoforge.judge.options import ChainOptions

        cfg = self.config
        if not self.resume and (self.run_dir / "config.json").exists():
            raise UsageError(f"--out {self.run_dir}: already holds a campaign; continue it with "
                             f"`evoforge run --resume {self.run_dir}`, or choose another --out")
        validate_config(cfg, "config")
        backend = available_backend(cfg.backend, arch=cfg.arch or None, **self._backend_options())
        self.backend = backend
        if cfg.backend == "auto":
            cfg.backend = backend.name
        cfg.arch = cfg.arch or backend.arch
        self.mutators = self._make_mutators(cfg.arch)
        pairs = self._load_tasks()
        try:
            self._check_languages(pairs, backend)
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.store = OptunaStore(run_dir=self.run_dir, campaign=cfg.name, storage_url=cfg.storage)
            if not self.resume:  # every task's, those whose capture is still under way too
                self._refuse_studies_of_another_run(list(self.starts.index))
        except BaseException:
            self.starts.close()
            raise
        for task, seed in pairs:
            self._add_task(task, seed)
        options = ChainOptions(trials=cfg.correctness_runs, seed=cfg.seed + 42, timing_budget_ms=cfg.timing_budget_ms,
                               fresh_draws=True)  # a campaign's candidates cannot predict their inputs (judge/references.py)
        self.cache = ResultCache(Path(cfg.cache_dir) if cfg.cache_dir else self.run_dir / "cache",
                                 backend=backend.name, arch=cfg.arch, options=options.to_dict())
        self._options = options
        if any(s.seed.language == "cute" for s in self.tasks.values()):
            from evoforge.backends.cute_builds import BuildAhead

            self.builds = BuildAhead(arch=cfg.arch, workers=cfg.build_workers or None)

    def _add_task(self, task: Task, seed: Candidate) -> TaskState:
        """A task with its seed joins the campaign (at set-up, or when its capture arrives): its strategy with the
        knowledge base's hints, its starts, its study."""
        assert self.store is not None
        operators = [PARAMS, *self.mutators] if PARAMS in self.config.operators else list(self.mutators)
        # Operators that can act on the seed's structure (LLM operators can act on any).
        usable = [op for op in operators if op == PARAMS or family_of(op) == LLM
                  or self.mutators[op].applicable(seed, None)]
        if seed.meta.get("reference"):  # nothing to tune or rewrite until a kernel is generated
            usable = [op for op in usable if family_of(op) == LLM]
        # Beside the seed: the knowledge base's starts for it, then each Inductor variant followed by the knowledge
        # base's starts for that variant (its GEMM template's bf16 split: the vendor rule's seed calls cuBLAS, and the
        # split exists only in the variant's Triton GEMM).
        starts = self.starts.knowledge_starts(task, seed)
        for variant in self.starts.variant_starts.pop(task.name, []):
            starts += [variant, *self.starts.knowledge_starts(task, variant)]
        state = TaskState(task=task, strategy=self._strategy(task, seed, usable, self.starts.index[task.name]),
                          seed=seed, starts=starts)
        self.tasks[task.name] = state
        if (landscape := self._landscape_of(task)) is not None:
            from evoforge.search.bench import legality

            self._legality[task.name] = legality(landscape)
        study = self.store.study(task.name)
        if "run_dir" not in study.user_attrs:
            study.set_user_attr("run_dir", str(self.run_dir.resolve()))
        if study.user_attrs.get("language") != seed.language:
            study.set_user_attr("language", seed.language)
        if study.user_attrs.get(BASELINE_ATTR):  # timed by the run this one resumes
            state.baseline = EvalResult.from_dict(json.loads(study.user_attrs[BASELINE_ATTR]))
        return state

    def _backend_options(self) -> dict[str, Any]:
        """What the backend is built with, here and in the pool's actors: on ``--backend replay``, the simulated
        device (each landscape task's file, the delay, the cost model's failures and seed); nothing otherwise."""
        from evoforge.backends.registry import simulates
        from evoforge.starts.landscape import landscape_task_name

        if not simulates(self.config.backend):
            return {}

        cfg = self.config
        return {"simulate": {"landscapes": {landscape_task_name(t.landscape): t.landscape for t in cfg.tasks
                                            if t.landscape},
                             "delay_s": cfg.replay.delay_s, "failures": dict(cfg.replay.failures),
                             "seed": cfg.seed}}

    def _landscape_of(self, task: Task) -> Any:
        """The landscape that answers ``task`` on --backend replay, or None (a task of its own, or the cost model's)."""
        landscape_of = getattr(self.backend, "landscape_of", None)
        return landscape_of(task.name) if callable(landscape_of) and self.backend.simulated else None

    def _check_languages(self, pairs: list[tuple[Task, Candidate]], backend: Any) -> None:
        """A CuTe task needs a backend that runs CUDA C++ and a toolchain that builds it: one line now, not a
        campaign of failed evaluations."""
        from evoforge.backends.cute import cute_unavailable

        for task, seed in pairs:
            if seed.language == "cute":
                why = cute_unavailable(backend, self.config.arch)
                if why:
                    raise UsageError(f"task {task.name}: a CuTe kernel {why}")

    def _refuse_studies_of_another_run(self, task_names: list[str]) -> None:
        """A new campaign never records into studies that already hold trials: with a shared ``--storage`` and
        the same name, its trials would land in another campaign's studies and its report count them. As
        ``optuna.create_study`` refuses a duplicate name unless told to load it, this refuses unless resumed."""
        assert self.store is not None
        for name in task_names:
            held, attrs = self.store.existing(name)
            if not held:
                continue
            other = attrs.get("run_dir")
            where = (f"the record {self.run_dir / 'optuna.db'}" if not self.config.storage
                     else f"--storage {redact_url(self.config.storage)}")
            raise UsageError(
                f"{where} already holds study {self.store.study_name(name)!r} with {held} trial(s)"
                + (f" (run directory {other})" if other else "")
                + ": give this campaign a name of its own (--name NAME; studies are named <name>/<task>)"
                + (f", or continue that one with `evoforge run --resume {other}`" if other else ""))

    def start_pool(self) -> None:
        """Ray and the evaluation actors; then the resolved config is written (the run directory now holds a
        campaign that ``--resume`` continues)."""
        from evoforge.search.pool import EvalPool, campaign_evaluators_per_device, init_ray, pool_shape

        assert self.backend is not None, "prepare() first"
        cfg = self.config
        device_bytes = int(self.backend.properties.get("total_memory_bytes") or 0) if self.backend.device_count() else 0
        per_device = campaign_evaluators_per_device(cfg.evaluators_per_device, self._need, device_bytes)
        if per_device < cfg.evaluators_per_device:
            biggest = max(self._need, key=lambda name: self._need[name])
            self.say(f"campaign {cfg.name}: an evaluation of task {biggest} holds about "
                     f"{self._need[biggest] / 2**30:.0f} GiB of device memory (its inputs are "
                     f"{self._input_bytes.get(biggest, 0) / 2**30:.1f} GiB); {cfg.evaluators_per_device} at once "
                     f"would not fit in the device's {device_bytes / 2**30:.0f} GiB, so {per_device} per device "
                     "evaluate (evaluators_per_device)")
        workers, num_gpus = pool_shape(self.backend, workers=cfg.workers, per_device=per_device)
        simulated = getattr(self.backend, "simulated", False)
        per_actor = min(cfg.replay.devices_per_actor, workers) if simulated else 1
        actors = -(-workers // per_actor)
        where = f"the Ray cluster at {cfg.ray_address}" if cfg.ray_address else "a local Ray"
        shape = (f"{workers} simulated device(s) on {actors} actor(s)" if simulated else f"{workers} evaluator(s)")
        joining = self.starts.pending() if self.starts is not None else 0
        later = f" (and {joining} joining as torch.compile's captures of them arrive)" if joining else ""
        self.say(f"campaign {cfg.name}: {len(self.tasks)} task(s){later}, {cfg.budget_evals} evaluations each, on "
                 f"{self.backend.name} ({cfg.arch}); starting {shape} in {where}, which takes a "
                 f"while before the first result; recording in {self.run_dir}")
        # This process holds the LLM key: undumpable (no same-user process reads its /proc/<pid>/environ or memory;
        # candidates, even run by root, hold no CAP_SYS_PTRACE), and Ray's daemons and workers start without it.
        from evoforge.judge.containment import protect_secrets

        key_names = (cfg.llm.api_key_env,) if cfg.llm.api_key_env else ()
        protect_secrets(extra=key_names)
        init_ray(cfg.ray_address, num_cpus=None if cfg.ray_address else max(actors, 2), secret_names=key_names)
        # The knowledge base's hard rules were checked here, before the pool (precheck): not again in the actors.
        # The run directory (the record, the cache, the LLM's cache) is out of the candidates' sight where they
        # run contained (judge/containment.py).
        evaluator_kwargs = {"backend": self.backend.name, "arch": cfg.arch, "options": self._options.to_dict(),
                            "timeout_s": cfg.timeout_s, "knowledge": False,
                            "hide_paths": [str(self.run_dir.resolve())]}
        if options := self._backend_options():
            evaluator_kwargs["backend_options"] = options
        memory = {"device_bytes": device_bytes, "devices": self.backend.device_count()} if not simulated else {}
        if self.pools is not None:
            self.pool = self.pools.lend(size=workers, evaluator_kwargs=evaluator_kwargs, num_gpus=num_gpus,
                                        timeout_s=cfg.timeout_s, slots_per_actor=per_actor, **memory)
        else:
            self.pool = EvalPool(size=workers, evaluator_kwargs=evaluator_kwargs, num_gpus=num_gpus,
                                 timeout_s=cfg.timeout_s, slots_per_actor=per_actor, **memory)
        self.pool.wait_started()  # where no evaluator can start, one line now, not a campaign of `crashed`
        cfg.write(self.run_dir / "config.json")
        # The time budget is the search's: it starts once the evaluators are there, not during the set-up (torch.compile
        # captures, Ray's start), which took all of a short budget before anything was evaluated.
        self.started = time.monotonic()
