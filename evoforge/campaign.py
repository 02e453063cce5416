"""The campaign loop: wires tasks, strategies, mutators, the evaluation pool and the Optuna record.

Asynchronous and steady-state: whenever an evaluator is free, the next child is proposed for the task that
has budget left; results are told to the strategy and recorded as they finish. Nothing here evaluates code:
the pool does, in sandboxed processes on Ray actors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evoforge.backends.precheck import precheck
from evoforge.config import CampaignConfig
from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError
from evoforge.mutators.base import Failure, LLMError, MutationContext, MutationError, Mutator
from evoforge.mutators.registry import PARAMS, family_of
from evoforge.search.base import Proposal, Store, Strategy
from evoforge.search.cache import ResultCache
from evoforge.search.store import OptunaStore, atomic_write
from evoforge.task import Task, read_candidate_file

log = logging.getLogger("evoforge.campaign")


@dataclass(frozen=True)
class _Failed:
    """An operator that produced no child, and what it spent trying (prompt, reply, tokens)."""

    result: EvalResult
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class TaskState:
    """What the campaign knows about one task: every evaluated child, in order."""

    task: Task
    strategy: Strategy
    seed: Candidate
    history: list[tuple[Candidate, EvalResult]] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    correct_steps: dict[str, int] = field(default_factory=dict)  # candidate id -> correct steps in its lineage
    in_flight: int = 0
    first_correct_at: int | None = None
    illegal_skipped: int = 0  # parameter proposals outside the knowledge base's legal space

    @property
    def evaluations(self) -> int:
        return len(self.history)

    def best(self) -> tuple[Candidate, EvalResult] | None:
        ok = [(c, r) for c, r in self.history if r.ok and r.speedup is not None and not r.below_floor]
        return max(ok, key=lambda cr: cr[1].speedup) if ok else None

    def top(self, k: int = 4) -> tuple[tuple[Candidate, EvalResult], ...]:
        ok = sorted(((c, r) for c, r in self.history if r.ok and r.speedup is not None),
                    key=lambda cr: -cr[1].speedup)
        seen, out = set(), []
        for c, r in ok:  # diverse: one per structure
            if c.structure_id not in seen:
                seen.add(c.structure_id)
                out.append((c, r))
            if len(out) == k:
                break
        return tuple(out)


class Campaign:
    def __init__(self, config: CampaignConfig, *, resume: bool = False, progress: bool = True) -> None:
        self.config = config
        self.resume = resume
        self.progress = progress
        self.run_dir = config.run_dir()
        self.started = time.monotonic()
        self.tasks: dict[str, TaskState] = {}
        self.mutators: dict[str, Mutator] = {}
        self.store: Store | None = None
        self.pool: Any = None
        self.cache: ResultCache | None = None
        self.backend: Any = None
        self.llm: Any = None
        self.elapsed_before_s = 0.0
        self._last_save = 0.0  # monotonic time of the last campaign_state.json write

    # ---------------------------------------------------------------- set-up
    def _load_tasks(self) -> list[tuple[Task, Candidate]]:
        from evoforge.knowledge import find_template_for, template_floor_passes

        if not self.config.tasks:
            raise UsageError("no tasks: give --task T or [[tasks]] in the config")
        out = []
        for tc in self.config.tasks:
            task = Task.load(tc.spec, overrides=tc.set, shapes=tc.shapes, allow_ops=tc.allow_ops,
                             floor_passes=tc.floor_passes)
            if tc.floor_passes is None and (passes := template_floor_passes(task)) is not None:
                task = replace(task, floor_passes=passes)
            seed_path = Path(tc.seed_kernel) if tc.seed_kernel else find_template_for(task)
            if seed_path is None:
                raise UsageError(f"task {task.name}: no seed kernel (give --seed-kernel FILE or seed_kernel = "
                                 "\"...\" in its [[tasks]] entry; no shipped template serves this task)")
            source = read_candidate_file(str(seed_path), flag="--seed-kernel")
            try:
                compile(source, str(seed_path), "exec")
            except SyntaxError as e:
                raise UsageError(f"--seed-kernel {seed_path}: not valid Python (line {e.lineno}: {e.msg})") from None
            if "ModelNew" not in source:
                raise UsageError(f"--seed-kernel {seed_path}: defines no ModelNew (a candidate module must)")
            out.append((task, Candidate.from_source(source, task=task.name, operator="seed",
                                                    meta={"seed_file": str(seed_path)})))
        return out

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

    def _strategy(self, seed: Candidate, operators: list[str], index: int) -> Strategy:
        from evoforge.search.strategies import get_strategy

        return get_strategy(self.config.strategy, seed=self.config.seed * 1000 + index, operators=operators,
                            initial=(seed,))

    def setup(self) -> None:
        from evoforge.backends.base import available_backend
        from evoforge.backends.chain import ChainOptions
        from evoforge.search.pool import EvalPool, init_ray, pool_shape

        cfg = self.config
        if not self.resume and (self.run_dir / "config.json").exists():
            raise UsageError(f"--out {self.run_dir}: already holds a campaign; continue it with "
                             f"`evoforge run --resume {self.run_dir}`, or choose another --out")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        backend = available_backend(cfg.backend, arch=cfg.arch or None)
        self.backend = backend
        if cfg.backend == "auto":
            cfg.backend = backend.name
        cfg.arch = cfg.arch or backend.arch
        # Before the config is written: a retry after an operator that cannot be built is not told the run
        # directory already holds a campaign.
        self.mutators = self._make_mutators(cfg.arch)
        pairs = self._load_tasks()
        self.store = OptunaStore(run_dir=self.run_dir, campaign=cfg.name, storage_url=cfg.storage)
        cfg.write(self.run_dir / "config.json")
        options = ChainOptions(trials=cfg.trials, seed=cfg.seed + 42, timing_budget_ms=cfg.timing_budget_ms)
        self.cache = ResultCache(Path(cfg.cache_dir) if cfg.cache_dir else self.run_dir / "cache",
                                 backend=backend.name, arch=cfg.arch, options=options.to_dict())
        operators = [PARAMS, *self.mutators] if PARAMS in cfg.operators else list(self.mutators)
        for i, (task, seed) in enumerate(pairs):
            # Operators that can act on the seed's structure (LLM operators can act on any).
            usable = [op for op in operators if op == PARAMS or family_of(op) == "llm"
                      or self.mutators[op].applicable(seed, None)]
            self.tasks[task.name] = TaskState(task=task, strategy=self._strategy(seed, usable, i), seed=seed)
            self.store.study(task.name)
        workers, num_gpus = pool_shape(backend, workers=cfg.workers, per_device=cfg.evaluators_per_device)
        init_ray(cfg.ray_address, num_cpus=None if cfg.ray_address else max(workers, 2))
        # The knowledge base's hard rules were checked here, before the pool (precheck): not again in the actors.
        # The run directory (the record, the cache, the LLM's cache) is out of the candidates' sight where they
        # run contained (backends/containment.py).
        evaluator_kwargs = {"backend": backend.name, "arch": cfg.arch, "options": options.to_dict(),
                            "timeout_s": cfg.timeout_s, "knowledge": False,
                            "hide_paths": [str(self.run_dir.resolve())]}
        self.pool = EvalPool(size=workers, evaluator_kwargs=evaluator_kwargs, num_gpus=num_gpus,
                             timeout_s=cfg.timeout_s)

    # ---------------------------------------------------------------- resume
    def restore(self) -> int:
        """Rebuild every task's history and strategy from the stored trials; returns how many."""
        assert self.store is not None
        closed = self.store.close_interrupted()
        restored = 0
        for name, state in self.tasks.items():
            for stored in self.store.load(name):
                self._absorb(state, stored.candidate, stored.result, record=False)
                restored += 1
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

    def _wants_more(self, state: TaskState) -> bool:
        return state.evaluations + state.in_flight < self.config.budget_evals and not self.out_of_time()

    def _context(self, state: TaskState, parent: Candidate | None) -> MutationContext:
        parent_result = None
        if parent is not None:
            for c, r in reversed(state.history):
                if c.id == parent.id:
                    parent_result = r
                    break
        failures = tuple(Failure(c, r) for c, r in state.history[-20:] if not r.ok)[-4:]
        return MutationContext(task_name=state.task.name, task_source=state.task.source, arch=self.config.arch,
                               top=state.top(), failures=failures, parent_result=parent_result,
                               lineage_correct_steps=state.correct_steps.get(parent.id, 0) if parent else 0,
                               knowledge_enabled=self.config.knowledge, seed=self.config.seed + state.evaluations)

    async def _materialize(self, state: TaskState, proposal: Proposal) -> Candidate | _Failed:
        """Turn a proposal into a child, or into an ``invalid`` result saying why no child could be made."""
        from evoforge.mutators.llm_client import scrub_secrets

        parents = proposal.parents or (state.seed,)
        parent = parents[0]
        if proposal.params is not None:
            return parent.with_params(proposal.params, operator=proposal.operator or PARAMS,
                                      parents=(parent.id,), stage=proposal.stage, meta={})
        if proposal.operator == "seed":
            return parent
        mutator = self.mutators.get(proposal.operator)
        if mutator is None:
            return _Failed(EvalResult.failure(EvalStatus.INVALID,
                                              f"no operator named {proposal.operator!r} in this campaign"))
        context = self._context(state, parent)
        if not mutator.applicable(parent, context.parent_result):
            # Nothing for this operator to act on (no GROUP_M to toggle...): spend the slot on one that has.
            child = await self._fallback(parent, context)
            if child is None:
                return _Failed(EvalResult.failure(EvalStatus.INVALID, f"{proposal.operator}: not applicable to "
                                                  "this parent and no other operator applies"))
            return replace(child, task=state.task.name)
        try:
            child = await mutator.propose(tuple(parents), context)
        except MutationError as e:
            return _Failed(EvalResult.failure(EvalStatus.INVALID, f"{proposal.operator}: {e}"),
                           dict(getattr(e, "meta", {}) or {}))
        except LLMError as e:
            # The endpoint failed, not the child: fall back to an operator that needs no LLM.
            log.warning("%s unavailable (%s); falling back to a non-LLM operator", proposal.operator,
                        scrub_secrets(str(e))[:200])
            child = await self._fallback(parent, context)
            if child is None:
                return _Failed(EvalResult.failure(EvalStatus.INVALID, scrub_secrets(
                    f"{proposal.operator}: the LLM is unavailable ({e}) and no other operator applies")[:1000]))
        return replace(child, task=state.task.name)

    async def _fallback(self, parent: Candidate, context: MutationContext) -> Candidate | None:
        for name, mutator in self.mutators.items():
            if family_of(name) == "llm" or not mutator.applicable(parent, context.parent_result):
                continue
            try:
                return await mutator.propose((parent,), context)
            except MutationError:
                continue
        if parent.space:
            import random

            rng = random.Random(context.seed)
            key = rng.choice(sorted(parent.space))
            return parent.with_params({key: rng.choice(parent.space[key])}, operator=PARAMS,
                                      parents=(parent.id,), meta={"fallback": True})
        return None

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

        legal, violations = knowledge.is_legal(child.params, self.config.arch, source=child.source)
        if legal:
            return False
        rules = ", ".join(sorted({v.rule for v in violations if v.severity == "hard"}))
        state.illegal_skipped += 1
        state.strategy.tell(child, EvalResult.failure(EvalStatus.INVALID, f"outside the legal space ({rules})",
                                                      backend=self.backend.name, arch=self.config.arch))
        return True

    def _absorb(self, state: TaskState, candidate: Candidate, result: EvalResult, *, record: bool = True,
                worker: str = "") -> None:
        if record:
            assert self.store is not None
            extra = {"worker": worker, "wall_time_s": round(self.elapsed_s(), 3), "evaluation": state.evaluations}
            self.store.record(state.task.name, candidate, result, extra_attrs=extra)
        state.history.append((candidate, result))
        state.statuses[str(result.status)] += 1
        if result.ok and state.first_correct_at is None:
            state.first_correct_at = state.evaluations
        parent_steps = max((state.correct_steps.get(p, 0) for p in candidate.parents), default=0)
        state.correct_steps[candidate.id] = parent_steps + 1 if result.ok else 0
        state.strategy.tell(candidate, result)

    def _failed_proposal(self, state: TaskState, proposal: Proposal, failed: _Failed) -> None:
        """Record an operator that made no child: the parent's source, the operator's name and why."""
        parent = (proposal.parents or (state.seed,))[0]
        child = replace(parent, operator=proposal.operator or "?", parents=(parent.id,), stage=proposal.stage,
                        meta={"no_child": True, **failed.meta})
        self._absorb(state, child, replace(failed.result, backend=self.backend.name, arch=self.config.arch))

    async def run(self) -> dict[str, Any]:
        assert self.store is not None and self.pool is not None and self.cache is not None
        from evoforge.progress import CampaignProgress

        pending: dict[asyncio.Task[Any], tuple[TaskState, Proposal]] = {}
        names = list(self.tasks)
        turn = 0
        seeds_to_send = [s for s in self.tasks.values() if s.evaluations == 0]
        with CampaignProgress(self, enabled=self.progress) as progress:
            while True:
                # Propose for free evaluators, round robin over tasks with budget left.
                capacity = self.pool.free() - len(pending)
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
                        proposal = Proposal(operator="seed", parents=(state.seed,))
                    elif state.evaluations == 0 and state.in_flight:
                        stalled += 1  # wait for the seed's result before children
                        continue
                    else:
                        proposals = state.strategy.ask(1)
                        if not proposals:
                            exhausted.add(state.task.name)
                            stalled += 1
                            continue
                        proposal = proposals[0]
                    stalled = 0
                    state.in_flight += 1
                    pending[asyncio.ensure_future(self._materialize(state, proposal))] = (state, proposal)
                    capacity -= 1
                # Children that are ready go to the pool (or straight to the record).
                done = [t for t in pending if t.done()]
                for fut in done:
                    state, proposal = pending.pop(fut)
                    made = fut.result()
                    if isinstance(made, _Failed):
                        state.in_flight -= 1
                        self._failed_proposal(state, proposal, made)
                        progress.update()
                        continue
                    if self._outside_legal_space(state, made):
                        state.in_flight -= 1  # never sampled: the strategy learns it, the record and budget do not
                        continue
                    # The child's one static check; its verdict travels with it to the actor and the chain.
                    made, early = precheck(made, backend=self.backend.name, arch=self.config.arch,
                                           knowledge=self.config.knowledge)
                    self.store.save_candidate(made)
                    early = early or self.cache.get(state.task.key(), made)
                    if early is not None:
                        state.in_flight -= 1
                        self._absorb(state, made, early)
                        progress.update()
                        continue
                    self.pool.submit(state.task.name, state.task, made)
                # Results that finished.
                for task_name, candidate, result, worker in self.pool.poll(timeout_s=0.05):
                    state = self.tasks[task_name]
                    state.in_flight -= 1
                    self.cache.put(state.task.key(), candidate, result)
                    self._absorb(state, candidate, result, worker=worker)
                    progress.update()
                self._save_state()
                if not pending and self.pool.in_flight() == 0 and not any(
                        self._wants_more(s) for s in self.tasks.values()):
                    break
                wanting = {n for n, s in self.tasks.items() if self._wants_more(s)}
                if not pending and self.pool.in_flight() == 0 and wanting and wanting <= exhausted:
                    break  # every strategy with budget left is exhausted (a space smaller than the budget)
                await asyncio.sleep(0.01 if pending else 0)
        return self.finish()

    def _save_state(self) -> None:
        now = time.monotonic()
        if now - self._last_save < 2.0:
            return
        self._last_save = now
        atomic_write(self.run_dir / "campaign_state.json", json.dumps({"elapsed_s": self.elapsed_s()}))

    # ---------------------------------------------------------------- the end
    def finish(self) -> dict[str, Any]:
        from evoforge.export import export_best

        self._last_save = 0.0
        self._save_state()
        summary = {"campaign": self.config.name, "run_dir": str(self.run_dir), "tasks": {},
                   "elapsed_s": round(self.elapsed_s(), 2), "backend": self.backend.name, "arch": self.config.arch}
        for name, state in self.tasks.items():
            best = state.best()
            seed_result = next((r for c, r in state.history if c.id == state.seed.id), None)
            exported = export_best(self.run_dir, state.task, best, state.seed, seed_result)
            summary["tasks"][name] = {
                "evaluations": state.evaluations, "statuses": dict(state.statuses),
                "first_correct_at": state.first_correct_at,
                "illegal_skipped": state.illegal_skipped,
                "best_speedup": best[1].speedup if best else None,
                "best_runtime_ms": best[1].runtime_ms if best else None,
                "ref_ms": best[1].ref_ms if best else None,
                "best_pct_of_floor": best[1].pct_of_floor if best else None,
                "best_operator": best[0].operator if best else None,
                "best_params": best[0].params if best else None,
                "timing_representative": best[1].timing_representative if best else None,
                "exported": exported,
                "tokens": sum(int(c.meta.get("prompt_tokens", 0)) + int(c.meta.get("completion_tokens", 0))
                              for c, _ in state.history),
            }
        atomic_write(self.run_dir / "summary.json", json.dumps(summary, indent=2, default=str))
        return summary

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None
