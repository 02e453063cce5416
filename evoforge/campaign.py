"""The campaign loop: wires tasks, strategies, mutators, the evaluation pool and the Optuna record.

Asynchronous and steady-state: whenever an evaluator is free, the next child is proposed for the task that
has budget left; results are told to the strategy and recorded as they finish. Nothing here evaluates code:
the pool does, in sandboxed processes on Ray actors.

An operator that makes no child (an LLM reply that cannot be used, or that sends the kernel back unchanged) is
recorded too, under its parent's source and marked ``no_child``: it spent a proposal and tokens. It is not the
parent's result: the parent keeps its own (a correct kernel stays correct for the operators and the feedback
delay), and it is no failure the model is shown again.

A strategy steers one proposal through ``Proposal.stage`` and ``Proposal.meta["notes"]`` (both reach the
operator's context) and knows its child again by ``meta["ticket"]``, stamped on the child and recorded; a
strategy with a ``decision(candidate)`` method has what it decided about each child recorded beside its trial.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoforge import confirm, stopping
from evoforge.backends.precheck import precheck
from evoforge.children import ChildMaker, NoChild
from evoforge.config import CampaignConfig, validate_config
from evoforge.core import SEED_OPERATOR, Candidate, EvalResult, EvalStatus, UsageError, json_safe
from evoforge.mutators.base import Mutator
from evoforge.mutators.names import LLM, LLM_GENERATE, PARAMS
from evoforge.mutators.registry import family_of
from evoforge.search.base import REPEAT, Proposal, Store, Strategy
from evoforge.search.cache import ResultCache
from evoforge.search.store import OptunaStore, atomic_write, redact_url
from evoforge.task import Task
from evoforge.task_start import KNOWLEDGE_START
from evoforge.task_state import TaskState

if TYPE_CHECKING:
    from evoforge.search.pool import PoolShare  # ray is imported when the pool starts, not with the campaign

log = logging.getLogger("evoforge.campaign")

#: what an operator wrote in a child's meta that the record keeps as trial attributes (prompt and reply go to
#: artifacts, tokens and model are the store's own)
RECORDED_META = ("no_child", "ticket", "reply_problem", "reply_kind", "finish_reason", "feedback",
                 "repair_attempts", "repaired_status", "repair_error", "stages_done", "build", "inductor_config")


#: The study attribute that holds torch.compile's baseline for the task (the EvalResult as JSON); ``compile_ms`` and
#: ``compile_speedup`` beside it for the dashboard.
BASELINE_ATTR = "compile_baseline"
#: The pool's key of a baseline job (the task's name beside it).
BASELINE_JOB = "torch.compile"


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Campaign:
    """One campaign: ``prepare`` (everything that can fail on the user's input, before anything starts),
    ``restore`` (on ``--resume``), ``start_pool`` (Ray and the evaluators), ``run``, ``finish``, ``close``.
    ``start`` does the first three in order and says whether there is anything left to do.

    ``say`` gets one line at each step a user waits on (Ray's start-up, a resume with nothing to do); the
    default prints to stderr when ``progress`` is on.
    """

    def __init__(self, config: CampaignConfig, *, resume: bool = False, progress: bool = True,
                 say: Callable[[str], None] | None = None, pools: PoolShare | None = None) -> None:
        self.config = config
        self.pools = pools  # lends the evaluation pool (an ablation's campaigns share one); else it is its own
        self.resume = resume
        self.progress = progress
        self.say = say or (_stderr_line if progress else (lambda text: None))
        self.stopped: dict[str, str] = {}  # task -> why it stopped before its budget
        self._submitted: dict[str, float] = {}  # worker tag -> when its evaluation was handed over (epoch s)
        self.run_dir = config.run_dir()
        self.started = time.monotonic()
        self.tasks: dict[str, TaskState] = {}
        self._input_shapes: dict[str, tuple[tuple[int, ...], ...]] = {}  # task -> its inputs' shapes (meta device)
        self._input_bytes: dict[str, int] = {}  # task -> its inputs' bytes at the main shape
        self.not_started: dict[str, str] = {}  # task -> why it has no seed (a campaign of several goes on without it)
        self.starts: Any = None  # TaskStarts: how each task starts (evoforge/task_start.py), made by _load_tasks
        self.mutators: dict[str, Mutator] = {}
        self.store: Store | None = None
        self.pool: Any = None
        self.cache: ResultCache | None = None
        self.builds: Any = None  # BuildAhead: nvcc on CPU threads for CuTe children, while the GPU evaluates
        self.backend: Any = None
        self.llm: Any = None
        self.elapsed_before_s = 0.0
        self._last_save = 0.0  # monotonic time of the last campaign_state.json write
        self._legality: dict[str, Callable[[Any], dict[str, Any] | None]] = {}  # landscape task -> its refusals

    @property
    def maker(self) -> ChildMaker:
        """Makes children of proposals with the campaign's operators as they are now."""
        return ChildMaker(self.mutators, self.config)

    # ---------------------------------------------------------------- set-up
    def _load_tasks(self) -> list[tuple[Task, Candidate]]:
        """Each task with its seed (``evoforge.task_start``); the starts beside it are the set-up's too."""
        from evoforge.task_start import TaskStarts

        self.starts = TaskStarts(config=self.config, backend=self.backend, run_dir=self.run_dir,
                                 generate=LLM_GENERATE in self.mutators)
        pairs = self.starts.load()
        self.not_started = self.starts.not_started
        self._input_shapes, self._input_bytes = self.starts.input_shapes, self.starts.input_bytes
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

    def setup(self) -> None:
        """``prepare`` and ``start_pool``: ready to ``run`` (or ``restore`` first, on a resume)."""
        self.prepare()
        self.start_pool()

    def start(self) -> bool:
        """Prepare, restore a resumed campaign, and start the evaluators if any task has budget left.

        Returns False, with the pool never started (no Ray start-up to wait for), when there is nothing to do:
        a resumed campaign that already has its budget. ``finish`` then gives its summary.
        """
        self.prepare()
        if self.resume:
            restored = self.restore()
            if not self.has_work():
                self.say(f"campaign {self.config.name}: nothing to do, {self._why_done()} ({restored} evaluations "
                         f"recorded in {self.run_dir}); raise --budget-evals or --budget-minutes to go on")
                return False
        self.start_pool()
        return True

    def has_work(self) -> bool:
        return any(self._wants_more(s) for s in self.tasks.values())

    def _why_done(self) -> str:
        if self.out_of_time():
            return f"its time budget ({self.config.budget_minutes:g} minutes) is spent"
        return f"every task has its {self.config.budget_evals} evaluations"

    def prepare(self) -> None:
        """Everything that can fail on what the user gave (config, strategy, backend, operators, tasks and their
        shapes, the record's studies), checked before anything is written that would make a corrected retry
        look like a second campaign: ``config.json`` is written by ``start_pool``, once the evaluators start."""
        from evoforge.backends.base import available_backend
        from evoforge.backends.options import ChainOptions

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
        self._check_languages(pairs, backend)
        operators = [PARAMS, *self.mutators] if PARAMS in cfg.operators else list(self.mutators)
        states = []
        for i, (task, seed) in enumerate(pairs):
            # Operators that can act on the seed's structure (LLM operators can act on any).
            usable = [op for op in operators if op == PARAMS or family_of(op) == LLM
                      or self.mutators[op].applicable(seed, None)]
            if seed.meta.get("reference"):  # nothing to tune or rewrite until a kernel is generated
                usable = [op for op in usable if family_of(op) == LLM]
            states.append(TaskState(task=task, strategy=self._strategy(task, seed, usable, i), seed=seed,
                                    starts=self.starts.knowledge_starts(task, seed)
                                    + self.starts.variant_starts.pop(task.name, [])))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.store = OptunaStore(run_dir=self.run_dir, campaign=cfg.name, storage_url=cfg.storage)
        if not self.resume:
            self._refuse_studies_of_another_run([s.task.name for s in states])
        for state in states:
            self.tasks[state.task.name] = state
            if (landscape := self._landscape_of(state.task)) is not None:
                from evoforge.search.bench import legality

                self._legality[state.task.name] = legality(landscape)
            study = self.store.study(state.task.name)
            if "run_dir" not in study.user_attrs:
                study.set_user_attr("run_dir", str(self.run_dir.resolve()))
            if study.user_attrs.get("language") != state.seed.language:
                study.set_user_attr("language", state.seed.language)
            if study.user_attrs.get(BASELINE_ATTR):  # timed by the run this one resumes
                state.baseline = EvalResult.from_dict(json.loads(study.user_attrs[BASELINE_ATTR]))
        options = ChainOptions(trials=cfg.correctness_runs, seed=cfg.seed + 42, timing_budget_ms=cfg.timing_budget_ms)
        self.cache = ResultCache(Path(cfg.cache_dir) if cfg.cache_dir else self.run_dir / "cache",
                                 backend=backend.name, arch=cfg.arch, options=options.to_dict())
        self._options = options
        if any(s.seed.language == "cute" for s in states):
            from evoforge.backends.cute_builds import BuildAhead

            self.builds = BuildAhead(arch=cfg.arch, workers=cfg.build_workers or None)

    def _backend_options(self) -> dict[str, Any]:
        """What the backend is built with, here and in the pool's actors: on ``--backend replay``, the simulated
        device (each landscape task's file, the delay, the cost model's failures and seed); nothing otherwise."""
        from evoforge.backends.base import simulates
        from evoforge.task_start import landscape_task_name

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
        from evoforge.search.pool import EvalPool, evaluators_that_fit, init_ray, pool_shape

        assert self.backend is not None, "prepare() first"
        cfg = self.config
        per_device = cfg.evaluators_per_device
        if self.backend.device_count() and self._input_bytes:
            biggest = max(self._input_bytes, key=lambda name: self._input_bytes[name])
            device_bytes = int(self.backend.properties.get("total_memory_bytes") or 0)
            per_device = evaluators_that_fit(per_device, self._input_bytes[biggest], device_bytes)
            if per_device < cfg.evaluators_per_device:
                self.say(f"campaign {cfg.name}: task {biggest} has {self._input_bytes[biggest] / 2**30:.1f} GiB of "
                         f"inputs; {cfg.evaluators_per_device} evaluations at once would not fit in the device's "
                         f"{device_bytes / 2**30:.0f} GiB, so {per_device} per device evaluate (evaluators_per_device)")
        workers, num_gpus = pool_shape(self.backend, workers=cfg.workers, per_device=per_device)
        simulated = getattr(self.backend, "simulated", False)
        per_actor = min(cfg.replay.devices_per_actor, workers) if simulated else 1
        actors = -(-workers // per_actor)
        where = f"the Ray cluster at {cfg.ray_address}" if cfg.ray_address else "a local Ray"
        shape = (f"{workers} simulated device(s) on {actors} actor(s)" if simulated else f"{workers} evaluator(s)")
        self.say(f"campaign {cfg.name}: {len(self.tasks)} task(s), {cfg.budget_evals} evaluations each, on "
                 f"{self.backend.name} ({cfg.arch}); starting {shape} in {where}, which takes a "
                 f"while before the first result; recording in {self.run_dir}")
        # This process holds the LLM key: undumpable (no same-user process reads its /proc/<pid>/environ or memory;
        # candidates, even run by root, hold no CAP_SYS_PTRACE), and Ray's daemons and workers start without it.
        from evoforge.backends.containment import protect_secrets

        key_names = (cfg.llm.api_key_env,) if cfg.llm.api_key_env else ()
        protect_secrets(extra=key_names)
        init_ray(cfg.ray_address, num_cpus=None if cfg.ray_address else max(actors, 2), secret_names=key_names)
        # The knowledge base's hard rules were checked here, before the pool (precheck): not again in the actors.
        # The run directory (the record, the cache, the LLM's cache) is out of the candidates' sight where they
        # run contained (backends/containment.py).
        evaluator_kwargs = {"backend": self.backend.name, "arch": cfg.arch, "options": self._options.to_dict(),
                            "timeout_s": cfg.timeout_s, "knowledge": False,
                            "hide_paths": [str(self.run_dir.resolve())]}
        if options := self._backend_options():
            evaluator_kwargs["backend_options"] = options
        if self.pools is not None:
            self.pool = self.pools.lend(size=workers, evaluator_kwargs=evaluator_kwargs, num_gpus=num_gpus,
                                        timeout_s=cfg.timeout_s, slots_per_actor=per_actor)
        else:
            self.pool = EvalPool(size=workers, evaluator_kwargs=evaluator_kwargs, num_gpus=num_gpus,
                                 timeout_s=cfg.timeout_s, slots_per_actor=per_actor)
        self.pool.wait_started()  # where no evaluator can start, one line now, not a campaign of `crashed`
        cfg.write(self.run_dir / "config.json")
        # The time budget is the search's: it starts once the evaluators are there, not during the set-up (torch.compile
        # captures, Ray's start), which took all of a short budget before anything was evaluated.
        self.started = time.monotonic()

    # ---------------------------------------------------------------- resume
    def restore(self) -> int:
        """Rebuild every task's history and strategy from the stored trials; returns how many."""
        assert self.store is not None
        closed = self.store.close_interrupted()
        restored = 0
        for name, state in self.tasks.items():
            for stored in self.store.load(name):
                candidate = stored.candidate
                kept = {k: stored.user_attrs[k] for k in ("no_child", "ticket", "reply_problem")
                        if k in stored.user_attrs}
                if kept:  # a no-child is recorded under its parent's id: its own marks live in the trial
                    candidate = replace(candidate, meta={**candidate.meta, **kept})
                self._absorb(state, candidate, stored.result, record=False)
                restored += 1
            state.proposals = state.evaluations
        state_file = self.run_dir / "campaign_state.json"
        if state_file.exists():
            try:
                self.elapsed_before_s = float(json.loads(state_file.read_text()).get("elapsed_s", 0.0))
            except (OSError, ValueError):
                pass
        if closed:
            log.warning("closed %d trial(s) left RUNNING by an interrupted writer", closed)
        return restored

    # ---------------------------------------------------------------- the loop
    def elapsed_s(self) -> float:
        return self.elapsed_before_s + time.monotonic() - self.started

    def out_of_time(self) -> bool:
        return bool(self.config.budget_minutes) and self.elapsed_s() >= self.config.budget_minutes * 60

    def search_out_of_time(self) -> bool:
        """The search's share of the time budget is spent: the rest is the finalists' re-timings'."""
        share = 1.0 - confirm.RESERVE if self.confirms() else 1.0
        return bool(self.config.budget_minutes) and self.elapsed_s() >= self.config.budget_minutes * 60 * share

    def _wants_more(self, state: TaskState) -> bool:
        return (state.evaluations + state.in_flight < self.config.budget_evals and not self.search_out_of_time()
                and state.task.name not in self.stopped)

    def _outside_legal_space(self, state: TaskState, child: Candidate) -> bool:
        """A parameter move into a config the hardware rules forbid is not a sample of the space at all.

        The knowledge base narrows the space the strategy searches: such a config is told to the strategy as
        ``invalid`` (so it is not proposed again) but is neither evaluated, recorded nor counted in the budget.
        Structure changes (rule and LLM operators) that break a rule are still recorded as ``invalid`` children.
        """
        if not self.config.knowledge or child.operator != PARAMS or state.illegal_skipped >= 10 * max(
                1, self.config.budget_evals):
            return False
        from evoforge import knowledge

        if state.task.name in self._legality:  # a landscape: its rules read the recorded kernel, as search-bench's
            details = self._legality[state.task.name](child.params)
            if details is None:
                return False
            rules = ", ".join(details["refused_by"])
        else:
            legal, violations = knowledge.is_legal(child.params, self.config.arch, source=child.source)
            if legal:
                return False
            rules = ", ".join(sorted({v.rule for v in violations if v.severity == "hard"}))
            details = knowledge.refusal(violations)
        state.illegal_skipped += 1
        state.strategy.tell(child, EvalResult.failure(EvalStatus.INVALID, f"outside the legal space ({rules})",
                                                      backend=self.backend.name, arch=self.config.arch,
                                                      details=details))
        return True

    def _repeats_a_child(self, state: TaskState, child: Candidate) -> bool:
        """A child identical (source and params) to one already evaluated or under way is not evaluated, recorded
        or counted again: two parents' moves often land on the same config (a CuTe campaign at 4096^3 spent 5 of
        its 24 evaluations on repeats). The strategy is told of it all the same (``_tell_repeat``), so it proposes
        something else in its place. Past four times the budget of repeats, with nothing else under way, the task
        stops (saying so, ``_stop``), so a campaign never spins."""
        if child.id in state.submitted or child.id in state.results:
            if child.id in state.results:
                self._tell_repeat(state, child, state.results[child.id])
            else:
                state.repeats_waiting.setdefault(child.id, []).append(child)
            self._count_repeat(state, others_in_flight=state.in_flight - 1)  # in flight: this one, until dropped
            return True
        state.submitted.add(child.id)
        return False

    def _nothing_new(self, state: TaskState, proposal: Proposal, failed: NoChild) -> bool:
        """An operator whose every move from the parent lands on a config evaluated or under way (``NothingNew``)
        made no child and no failure: nothing is recorded or counted, and the strategy is told, as of a repeat."""
        if not failed.meta.get("nothing_new"):
            return False
        parent = (proposal.parents or (state.seed,))[0]
        meta = {k: v for k, v in failed.meta.items() if k != "nothing_new"}
        child = replace(parent, operator=proposal.operator or "?", parents=(parent.id,), stage=proposal.stage,
                        meta={**meta, "no_child": True})
        self._tell_repeat(state, child, replace(failed.result, backend=self.backend.name, arch=self.config.arch))
        self._count_repeat(state, others_in_flight=state.in_flight)
        return True

    def _tell_repeat(self, state: TaskState, child: Candidate, result: EvalResult) -> None:
        """The strategy learns that a proposal came to a config already evaluated: the result of that config,
        marked as a repeat (``search.base.REPEAT``), so it credits no operator and proposes a new config next."""
        state.strategy.tell(child, replace(result, details={**result.details, REPEAT: True}))

    def _count_repeat(self, state: TaskState, *, others_in_flight: int) -> None:
        """A task whose every legal config is evaluated stops at its first repeat after that (``stopping.covered``);
        past four times the budget of repeats, with nothing else under way, any task stops."""
        state.repeats_skipped += 1
        if stopping.covered(state, self.config, list(self.mutators)) or (state.repeats_skipped >= 4 * max(8, self.config.budget_evals)
                                    and others_in_flight <= 0):
            self._stop(state)

    def _absorb(self, state: TaskState, candidate: Candidate, result: EvalResult, *, record: bool = True,
                worker: str = "", started_at: float | None = None) -> None:
        evaluation = state.evaluations
        state.history.append((candidate, result))
        state.statuses[str(result.status)] += 1
        if result.ok and state.first_correct_at is None:
            state.first_correct_at = evaluation
        if not candidate.meta.get("no_child"):  # a no-child is no evaluation of its parent's source
            state.results[candidate.id] = result
            parent_steps = max((state.correct_steps.get(p, 0) for p in candidate.parents), default=0)
            state.correct_steps[candidate.id] = parent_steps + 1 if result.ok else 0
        state.strategy.tell(candidate, result)
        if not candidate.meta.get("no_child"):
            for repeat in state.repeats_waiting.pop(candidate.id, ()):  # told once the one they repeat has its result
                self._tell_repeat(state, repeat, result)
        if result.details.get("judge_out_of_memory"):
            state.judge_out_of_memory += 1
            # Only where the task's own first evaluation (its seed, not a child) did not fit either: a child that
            # hoards the device's memory in its process could otherwise stop its task for every child after it.
            first = state.history[0][1]
            if state.judge_out_of_memory >= stopping.JUDGE_OOM_STOP and first.details.get("judge_out_of_memory"):
                self._stop_out_of_memory(state)
        if record:
            assert self.store is not None
            extra: dict[str, Any] = {"worker": worker, "wall_time_s": round(self.elapsed_s(), 3),
                                     "evaluation": evaluation}
            extra.update({k: json_safe(candidate.meta[k]) for k in RECORDED_META if k in candidate.meta})
            if (vs := state.vs_compile(result)) is not None:
                extra["vs_compile"] = vs
            decide = getattr(state.strategy, "decision", None)
            decision = decide(candidate) if callable(decide) else None
            if decision:
                extra["decision"] = json_safe(decision)
            now = time.time()
            self.store.record(state.task.name, candidate, result, extra_attrs=extra,
                              started_at=now if started_at is None else started_at, finished_at=now)

    def _failed_proposal(self, state: TaskState, proposal: Proposal, failed: NoChild,
                         started_at: float | None = None) -> None:
        """Record an operator that made no child: the parent's source, the operator's name and why."""
        parent = (proposal.parents or (state.seed,))[0]
        child = replace(parent, operator=proposal.operator or "?", parents=(parent.id,), stage=proposal.stage,
                        meta={"no_child": True, **failed.meta})
        self._absorb(state, child, replace(failed.result, backend=self.backend.name, arch=self.config.arch),
                     started_at=started_at)

    def _ready(self, state: TaskState, proposal: Proposal, made: Candidate | NoChild,
               asked_at: float) -> tuple[str, Candidate | None]:
        """What becomes of what an operator made for ``proposal``: ``"told"`` (the strategy learns it, nothing is
        recorded: every move was evaluated, a config outside the legal space, a repeat), ``"recorded"`` (told and in
        the record without the GPU: a failed proposal, the precheck's verdict, a result in the cache), ``"build"``
        (a CuTe child for nvcc first) or ``"evaluate"`` (for a free evaluator), with the child as it goes on."""
        assert self.store is not None and self.cache is not None
        if isinstance(made, NoChild):
            state.in_flight -= 1
            if self._nothing_new(state, proposal, made):
                return "told", None  # its operator's every move was evaluated: the strategy proposes again
            self._failed_proposal(state, proposal, made, started_at=asked_at)
            return "recorded", None
        if self._outside_legal_space(state, made):
            state.in_flight -= 1  # never sampled: the strategy learns it, the record and budget do not
            return "told", None
        if self._repeats_a_child(state, made):
            state.in_flight -= 1  # the same kernel at the same params: its result is known or coming
            return "told", None
        # The child's one static check; its verdict travels with it to the actor and the chain.
        made, early = precheck(made, backend=self.backend.name, arch=self.config.arch,
                               knowledge=self.config.knowledge)
        self.store.save_candidate(made)
        early = early or self.cache.get(state.task.key(), made)
        if early is not None:
            state.in_flight -= 1
            self._absorb(state, made, early)
            return "recorded", made
        if made.language == "cute" and self.builds is not None:
            return "build", made
        return "evaluate", made

    async def run(self) -> dict[str, Any]:
        try:
            return await self._run()
        finally:
            if self.llm is not None:  # its HTTP client belongs to this event loop: closed here, not at exit
                await self.llm.aclose()

    async def _run(self) -> dict[str, Any]:
        assert self.store is not None and self.pool is not None and self.cache is not None
        from evoforge.progress import CampaignProgress

        pending: dict[asyncio.Task[Any], tuple[TaskState, Proposal]] = {}
        proposed_at: dict[asyncio.Task[Any], float] = {}  # when the operator was asked (an LLM call takes a while)
        # CuTe children: building on CPU threads, then built and waiting for a free evaluator. Up to one child per
        # build worker is proposed beyond the free evaluators, so nvcc runs while the GPU evaluates.
        building: list[tuple[TaskState, Candidate, Any, float]] = []
        built: list[tuple[TaskState, Candidate, float]] = []
        ahead = self.builds.workers if self.builds is not None else 0
        names = list(self.tasks)
        turn = 0
        seeds_to_send = [s for s in self.tasks.values() if s.evaluations == 0 and not s.seed_is_reference]
        starts_to_send = list(seeds_to_send)  # a resumed task has had its starts
        baselines = [s for s in self.tasks.values() if s.baseline is None] if self.times_compile() else []
        with CampaignProgress(self, enabled=self.progress) as progress:
            while True:
                # torch.compile's build of each task, timed once on a free evaluator (beside the seed where two are).
                while baselines and self.pool.free() > 0 and not self.out_of_time():
                    self._send_baseline(baselines.pop(0))
                # A task whose search is done: its finalists re-timed (and torch.compile's build again).
                self._send_confirmations()
                # Propose for free evaluators, round robin over tasks with budget left.
                capacity = self.pool.free() + ahead - len(pending) - len(building) - len(built)
                stalled = 0
                exhausted: set[str] = set()
                while capacity > 0 and stalled < len(names):
                    state = self.tasks[names[turn % len(names)]]
                    turn += 1
                    if not self._wants_more(state):
                        stalled += 1
                        continue
                    if state in seeds_to_send:
                        seeds_to_send.remove(state)
                        proposal = Proposal(operator=SEED_OPERATOR, parents=(state.seed,))
                    elif state in starts_to_send and state.starts:
                        # beside the seed, not its children: they need no result of it to be made
                        proposal = Proposal(operator=KNOWLEDGE_START, parents=(state.starts.pop(0),))
                    elif state.evaluations == 0 and state.in_flight and not state.seed_is_reference:
                        stalled += 1  # wait for the seed's result before children
                        continue
                    else:
                        proposals = state.strategy.ask(1)
                        if not proposals:
                            exhausted.add(state.task.name)
                            if not state.in_flight:
                                self._stop(state)
                            stalled += 1
                            continue
                        proposal = proposals[0]
                    stalled = 0
                    state.in_flight += 1
                    fut = asyncio.ensure_future(self.maker.materialize(state, proposal))
                    pending[fut], proposed_at[fut] = (state, proposal), time.time()
                    capacity -= 1
                # Children that are ready go to the pool (or straight to the record).
                told = False  # a strategy told something may have a proposal now that it had none before
                done = [t for t in pending if t.done()]
                for fut in done:
                    state, proposal = pending.pop(fut)
                    asked_at = proposed_at.pop(fut)
                    outcome, made = self._ready(state, proposal, fut.result(), asked_at)
                    if outcome == "build":
                        building.append((state, made, self.builds.submit(made), time.time()))
                    elif outcome == "evaluate":
                        built.append((state, made, time.time()))
                    else:
                        told = True
                        if outcome == "recorded":
                            progress.update()
                # Builds that finished: a compile error is the child's result (no GPU time); a library goes on.
                for item in [b for b in building if b[2].done()]:
                    building.remove(item)
                    state, made, future, since = item
                    outcome = future.result()
                    made = replace(made, meta={**made.meta, "build": outcome.as_meta()})
                    if outcome.failure is not None:
                        state.in_flight -= 1
                        failure = replace(outcome.failure, backend=self.backend.name, arch=self.config.arch)
                        self.cache.put(state.task.key(), made, failure)
                        self._absorb(state, made, failure, started_at=since)
                        told = True
                        progress.update()
                        continue
                    built.append((state, made, since))
                while built and self.pool.free() > 0:
                    state, made, _since = built.pop(0)
                    self._submitted[self.pool.submit(state.task.name, state.task, made,
                                                     self._options.to_dict())] = time.time()
                # Results that finished.
                for task_name, candidate, result, worker in self.pool.poll(timeout_s=0.05):
                    if isinstance(task_name, tuple):  # (BASELINE_JOB, task[, "retime"]) or (CONFIRM_JOB, task, id)
                        self._submitted.pop(worker, None)
                        if task_name[0] == BASELINE_JOB and len(task_name) == 2:
                            self._baseline_timed(self.tasks[task_name[1]], result)
                        else:
                            self._retimed(self.tasks[task_name[1]], task_name, result)
                        continue
                    state = self.tasks[task_name]
                    state.in_flight -= 1
                    if "build" in candidate.meta:  # the nvcc time is the build's, measured ahead
                        result = replace(result, compile_s=candidate.meta["build"]["compile_s"])
                    self.cache.put(state.task.key(), candidate, result)
                    self._absorb(state, candidate, result, worker=worker, started_at=self._submitted.pop(worker, None))
                    told = True
                    progress.update()
                self._save_state()
                idle = not pending and not building and not built and self.pool.in_flight() == 0
                if idle and not any(self._wants_more(s) for s in self.tasks.values()):
                    if not self._confirmations_open():
                        break
                    continue
                wanting = {n for n, s in self.tasks.items() if self._wants_more(s)}
                if idle and wanting and wanting <= exhausted and not told:
                    for name in wanting:  # said even when the last results came in after the strategy ran dry
                        self._stop(self.tasks[name])
                    if not self._confirmations_open():
                        break  # every strategy with budget left is exhausted (a space smaller than the budget)
                    continue
                await asyncio.sleep(0.01 if pending or building else 0)
        return self.finish()

    def times_compile(self) -> bool:
        """Whether this campaign times torch.compile's build of each task: on a device unless told not to; on the
        interpreter (no device: times that say nothing of a GPU) only when told to."""
        setting = self.config.compile_baseline
        return setting == "on" or (setting == "auto" and self.backend.device_count() > 0)

    def _send_baseline(self, state: TaskState) -> None:
        from evoforge.backends.evaluator import baseline_candidate

        options = {**self._options.to_dict(), "baseline": "compile"}
        worker = self.pool.submit((BASELINE_JOB, state.task.name), state.task, baseline_candidate(state.task), options)
        self._submitted[worker] = time.time()

    def _baseline_timed(self, state: TaskState, result: EvalResult) -> None:
        """torch.compile's build of the task, timed: kept in the study (a resume does not time it again), said in one
        line."""
        assert self.store is not None
        state.baseline = result
        study = self.store.study(state.task.name)
        study.set_user_attr(BASELINE_ATTR, json.dumps(json_safe(result.to_dict())))
        if result.ok and result.speedup:
            study.set_user_attr("compile_ms", result.runtime_ms)
            study.set_user_attr("compile_speedup", result.speedup)
            log.warning("task %s: torch.compile's build runs at %.4g ms (%.3gx the reference)%s", state.task.name,
                        result.runtime_ms, result.speedup, "" if result.timing_representative else
                        " on the interpreter (not representative)")
        else:
            log.warning("task %s: torch.compile's build could not be timed: %s", state.task.name, result.message)

    # ---------------------------------------------------------------- the finalists re-timed
    def confirms(self) -> bool:
        """Whether each task's finalists are re-timed before its best is named: on a device unless told not to; on
        the interpreter only when told to (evoforge/confirm.py)."""
        setting = self.config.confirm
        return setting == "on" or (setting == "auto" and self.backend.device_count() > 0)

    def _confirmations_open(self) -> bool:
        """Whether a re-timing is still to make: a task whose search is done gets its finalists now (time left)."""
        assert self.pool is not None
        self._send_confirmations()
        return self.pool.in_flight() > 0 or any(s.confirmation is not None and not s.confirmation.done
                                                for s in self.tasks.values())

    def _send_confirmations(self) -> None:
        """Each task whose search is over (nothing under way, nothing more wanted) gets its finalists once; their
        re-timings go to free evaluators while the budget lasts, the rest are counted as skipped."""
        assert self.pool is not None
        if not self.confirms():
            return
        for state in self.tasks.values():
            if state.confirmation is None and not state.in_flight and not self._wants_more(state):
                chosen = confirm.finalists(state.history, state.seed)
                state.confirmation = confirm.Confirmation(
                    finalists=chosen, to_send=list(chosen),
                    baseline_to_send=bool(chosen) and state.compile_speedup is not None)
        for state in self.tasks.values():
            c = state.confirmation
            if c is None or c.done:
                continue
            if self.out_of_time():
                c.skipped += len(c.to_send) + int(c.baseline_to_send)
                c.to_send, c.baseline_to_send = [], False
                continue
            while self.pool.free() > 0 and c.to_send:
                candidate = c.to_send.pop(0)
                worker = self.pool.submit((confirm.CONFIRM_JOB, state.task.name, candidate.id), state.task,
                                          candidate, self._options.to_dict())
                self._submitted[worker] = time.time()
            if self.pool.free() > 0 and c.baseline_to_send:
                from evoforge.backends.evaluator import baseline_candidate

                c.baseline_to_send = False
                worker = self.pool.submit((BASELINE_JOB, state.task.name, "retime"), state.task,
                                          baseline_candidate(state.task),
                                          {**self._options.to_dict(), "baseline": "compile"})
                self._submitted[worker] = time.time()

    def _retimed(self, state: TaskState, key: tuple[Any, ...], result: EvalResult) -> None:
        """A finalist's re-timing, or torch.compile's build's: kept, and in the task's study."""
        assert self.store is not None and state.confirmation is not None
        c = state.confirmation
        if key[0] == confirm.CONFIRM_JOB:
            c.retimes[key[2]] = result
        else:
            c.baseline_retimes.append(result)
        search = state.search_best()
        best = state.best() if c.done else None
        self.store.study(state.task.name).set_user_attr(confirm.CONFIRM_ATTR, json.dumps(c.summary(
            best[0].id if best else None, search[0].id if search else None)))

    def _stop(self, state: TaskState) -> None:
        """A task whose strategy has nothing left to propose (and nothing in flight to learn from) stops before its
        budget: said once, and in the summary, so a short campaign is not a mystery: what was tried and what going
        on would need."""
        self._stopped(state, stopping.nothing_to_propose(state, self.config, list(self.mutators)))

    def _stop_out_of_memory(self, state: TaskState) -> None:
        """The judge could not hold the task's evaluations in the device's memory: said once, with what going on
        would need."""
        self._stopped(state, stopping.judge_out_of_memory(state, self._input_bytes.get(state.task.name, 0)))

    def _stopped(self, state: TaskState, why: str) -> None:
        name = state.task.name
        if name in self.stopped:
            return
        self.stopped[name] = why
        log.warning("task %s: stopped early: %s", name, why)

    def stop_reason(self, state: TaskState) -> str | None:
        """Why a task ended before its budget, in one line (None: it had its budget)."""
        if state.evaluations >= self.config.budget_evals:
            return None
        if state.task.name in self.stopped:
            return self.stopped[state.task.name]
        if self.search_out_of_time():
            return stopping.out_of_time(state, self.config)
        return None

    def _save_state(self) -> None:
        now = time.monotonic()
        if now - self._last_save < 2.0:
            return
        self._last_save = now
        atomic_write(self.run_dir / "campaign_state.json", json.dumps({"elapsed_s": self.elapsed_s()}))

    # ---------------------------------------------------------------- the end
    def finish(self) -> dict[str, Any]:
        from evoforge.export import export_best
        from evoforge.summary import compile_figures, task_summary

        self._last_save = 0.0
        self._save_state()
        summary = {"campaign": self.config.name, "run_dir": str(self.run_dir), "tasks": {},
                   "elapsed_s": round(self.elapsed_s(), 2), "backend": self.backend.name, "arch": self.config.arch,
                   "not_started": dict(self.not_started)}
        for name, state in self.tasks.items():
            best = state.best()
            seed_result = state.seed_result()
            exported = export_best(self.run_dir, state.task, best, state.seed, seed_result,
                                   compile_speedup=state.compile_speedup)
            figures = compile_figures(state, best[1] if best else None, seed_result,
                                      setting=self.config.compile_baseline, timed_here=self.times_compile())
            summary["tasks"][name] = task_summary(state, exported=exported, stopped_early=self.stop_reason(state),
                                                  compile=figures)
        atomic_write(self.run_dir / "summary.json", json.dumps(summary, indent=2, default=str))
        self._write_notes()
        return summary

    def _write_notes(self) -> None:
        """Each study's note for optuna-dashboard (what it is, how to read it), written by the campaign that
        owns the study: the dashboard only reads. Needs the optional optuna-dashboard package."""
        try:
            from evoforge.dashboard import annotate
            from evoforge.report import open_run

            annotate(open_run(self.run_dir))
        except ImportError:
            return
        except Exception as e:  # a note is a courtesy: it never costs the campaign its summary
            log.warning("could not write the studies' notes for the dashboard (%s: %s)", e.__class__.__name__, e)

    def close(self) -> None:
        if self.builds is not None:
            self.builds.close()
            self.builds = None
        if self.pool is not None:
            if self.pools is not None:
                self.pools.give_back(self.pool)
            else:
                self.pool.shutdown()
            self.pool = None
