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
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from evoforge import confirm, stopping
from evoforge.baseline import BASELINE_JOB, BaselineAndFinalists
from evoforge.campaign_setup import CampaignSetup
from evoforge.children import ChildMaker
from evoforge.config import CampaignConfig
from evoforge.core import SEED_OPERATOR, Candidate
from evoforge.mutators.base import Mutator
from evoforge.route import ChildRoute
from evoforge.search.base import Proposal, Store
from evoforge.search.cache import ResultCache
from evoforge.search.durable import atomic_write
from evoforge.starts.knowledge import KNOWLEDGE_START
from evoforge.task_state import TaskState

if TYPE_CHECKING:
    from evoforge.search.pool import PoolShare  # ray is imported when the pool starts, not with the campaign

log = logging.getLogger("evoforge.campaign")


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Campaign(CampaignSetup, ChildRoute, BaselineAndFinalists):
    """One campaign: ``prepare`` (everything that can fail on the user's input, before anything starts),
    ``restore`` (on ``--resume``), ``start_pool`` (Ray and the evaluators), ``run``, ``finish``, ``close``.
    ``start`` does the first three in order and says whether there is anything left to do.

    ``say`` gets one line at each step a user waits on (Ray's start-up, a resume with nothing to do); the
    default prints to stderr when ``progress`` is on.

    Its parts, one file each, share this object's state: ``CampaignSetup`` (``evoforge/campaign_setup.py``: the
    tasks, operators, strategies and pool before anything runs), ``ChildRoute`` (``evoforge/route.py``: what
    becomes of a made child, from the legality check to the record) and ``BaselineAndFinalists``
    (``evoforge/baseline.py``: torch.compile's build timed, a task's finalists re-timed). This file keeps the
    loop, resume, stopping and the end.
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
        self._rechecks = 0  # finalists' re-checks sent: each draws its own inputs (confirm.recheck_options)
        self._walls: list[float] = []  # the wall seconds of the latest evaluations (the re-timings' reserve)
        self._search_over = False  # the search's share of the time budget is spent: it stays spent
        self._reserve_s = 0.0  # what the search left of the budget for the re-timings, once it ended
        self.run_dir = config.run_dir()
        self.started = time.monotonic()
        self.tasks: dict[str, TaskState] = {}
        self._input_shapes: dict[str, tuple[tuple[int, ...], ...]] = {}  # task -> its inputs' shapes (meta device)
        self._input_bytes: dict[str, int] = {}  # task -> its inputs' bytes at the main shape
        self._need: dict[str, int] = {}  # task -> the device memory one evaluation holds (search.pool)
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

    # ---------------------------------------------------------------- set-up (the rest: evoforge/campaign_setup.py)
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
            self._restore_confirmations()
            if not self.has_work() and not self.starts.pending():
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

    # ---------------------------------------------------------------- resume
    def restore(self) -> int:
        """Rebuild every task's history and strategy from the stored trials; returns how many."""
        assert self.store is not None
        closed = self.store.close_interrupted()
        restored = sum(self._restore_task(state) for state in self.tasks.values())
        state_file = self.run_dir / "campaign_state.json"
        if state_file.exists():
            try:
                self.elapsed_before_s = float(json.loads(state_file.read_text()).get("elapsed_s", 0.0))
            except (OSError, ValueError):
                pass
        if closed:
            log.warning("closed %d trial(s) left RUNNING by an interrupted writer", closed)
        return restored

    def _restore_task(self, state: TaskState) -> int:
        """One task's stored trials told to its history and strategy; returns how many."""
        assert self.store is not None
        restored = 0
        marks = ("no_child", "ticket", "reply_problem")  # what a child carries in its trial, not in its file
        for stored in self.store.load(state.task.name, user_keys=marks):  # a trial's other attributes are not read
            candidate = stored.candidate
            kept = {k: stored.user_attrs[k] for k in marks if k in stored.user_attrs}
            if kept:  # a no-child is recorded under its parent's id: its own marks live in the trial
                candidate = replace(candidate, meta={**candidate.meta, **kept})
            self._absorb(state, candidate, stored.result, record=False)
            restored += 1
        state.proposals = state.evaluations
        return restored

    def _arrivals(self) -> list[TaskState]:
        """Tasks whose torch.compile capture arrived since the last call, joined to the campaign (on a resume with
        what their studies hold). The time budget starts once the last has arrived: until then the evaluators
        work on the tasks that are there, and the search's budget is still whole."""
        if self.starts is None or not self.starts.pending():
            return []
        joined = [self._add_task(task, seed) for task, seed in self.starts.arrived()]
        for state in joined:
            if self.resume:
                self._restore_task(state)
                self._restore_confirmation(state)
            log.warning("task %s: its seed arrived; it joins the campaign (%d task(s) still capturing)",
                        state.task.name, self.starts.pending())
        self.not_started.update(self.starts.not_started)
        if not self.starts.pending():
            self.started = time.monotonic()  # the set-up is over: the search's time budget starts now
        return joined

    # ---------------------------------------------------------------- the loop
    def elapsed_s(self) -> float:
        if self.starts is not None and self.starts.pending():  # the set-up is not over: the budget has not started
            return self.elapsed_before_s
        return self.elapsed_before_s + time.monotonic() - self.started

    def out_of_time(self, share: float = 1.0) -> bool:
        """``share`` of the time budget is spent (none is: no time budget)."""
        return bool(self.config.budget_minutes) and self.elapsed_s() >= self.config.budget_minutes * 60 * share

    def search_out_of_time(self) -> bool:
        """The search's share of the time budget is spent: the rest is the finalists' re-timings'
        (``confirm.reserve_s``: sized by this campaign's own evaluations). Once spent it stays spent, though the
        reserve shrinks as tasks are re-timed: a task re-timed does not search on."""
        if self._search_over or not self.config.budget_minutes:
            return self._search_over
        budget_s = self.config.budget_minutes * 60
        reserve = 0.0
        if self.confirms():
            waiting = sum(1 for s in self.tasks.values() if s.confirmation is None)
            reserve = confirm.reserve_s(budget_s, waiting, statistics.median(self._walls) if self._walls else None,
                                        self.pool.size if self.pool is not None else 1)
        if self.elapsed_s() >= budget_s - reserve:
            self._search_over, self._reserve_s = True, reserve
        return self._search_over

    def _wants_more(self, state: TaskState) -> bool:
        return (state.evaluations + state.in_flight < self.config.budget_evals and not self.search_out_of_time()
                and state.task.name not in self.stopped)

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
                # The captures running now hold device memory: the pool's admission counts it.
                if self.starts is not None:
                    self.pool.set_outside(self.starts.capture_holds(), owner=self.config.name)
                # Tasks whose capture arrived: their seed, starts and torch.compile's build join the round robin.
                for state in self._arrivals():
                    names.append(state.task.name)
                    if state.evaluations == 0 and not state.seed_is_reference:
                        seeds_to_send.append(state)
                        starts_to_send.append(state)
                    if self.times_compile() and state.baseline is None:
                        baselines.append(state)
                    progress.update()
                # torch.compile's build of each task, timed once on a free evaluator, once every task's seed (and the
                # starts beside it) has gone out: the search waits for a seed's result, not for the baseline (which
                # compiles the reference). A seed being made or waiting for an evaluator has not gone out.
                seeds_waiting = (any(self._wants_more(s) for s in seeds_to_send)
                                 or any(s.evaluations == 0 for s, _ in pending.values())
                                 or any(s.evaluations == 0 for s, _, _ in built))
                while baselines and not seeds_waiting and self.pool.free() > 0 and not self.out_of_time():
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
                    self._proposed(state)
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
                        failure = replace(outcome.failure, backend=self.backend.name, arch=self.config.arch)
                        self._evaluated(state, made, failure, started_at=since)
                        told = True
                        progress.update()
                        continue
                    built.append((state, made, since))
                while built and self.pool.free() > 0:
                    state, made, _since = built.pop(0)
                    self._submitted[self.pool.submit(state.task.name, state.task, made, self._options.to_dict(),
                                                     need_bytes=self._need_bytes(state.task.name))] = time.time()
                # Results that finished.
                for task_name, candidate, result, worker in self.pool.poll(timeout_s=0.05):
                    if isinstance(task_name, tuple):  # (BASELINE_JOB, task[, "retime"]) or (CONFIRM_JOB, task, id)
                        self._evaluation_wall(self._submitted.pop(worker, None))
                        if task_name[0] == BASELINE_JOB and len(task_name) == 2:
                            self._baseline_timed(self.tasks[task_name[1]], result)
                        else:
                            self._retimed(self.tasks[task_name[1]], task_name, result)
                        continue
                    state = self.tasks[task_name]
                    if "build" in candidate.meta:  # the nvcc time is the build's, measured ahead
                        result = replace(result, compile_s=candidate.meta["build"]["compile_s"])
                    started_at = self._submitted.pop(worker, None)
                    self._evaluation_wall(started_at)
                    self._evaluated(state, candidate, result, worker=worker, started_at=started_at)
                    told = True
                    progress.update()
                self._save_state()
                idle = not pending and not building and not built and self.pool.in_flight() == 0
                joining = self.starts is not None and self.starts.pending() > 0  # tasks still to arrive: not the end
                if idle and not any(self._wants_more(s) for s in self.tasks.values()):
                    if not self._confirmations_open() and not joining:
                        break
                    await asyncio.sleep(0.1 if joining else 0)
                    continue
                wanting = {n for n, s in self.tasks.items() if self._wants_more(s)}
                if idle and wanting and wanting <= exhausted and not told:
                    for name in wanting:  # said even when the last results came in after the strategy ran dry
                        self._stop(self.tasks[name])
                    if not self._confirmations_open() and not joining:
                        break  # every strategy with budget left is exhausted (a space smaller than the budget)
                    await asyncio.sleep(0.1 if joining else 0)
                    continue
                await asyncio.sleep(0.01 if pending or building else 0)
        return self.finish()

    # ---------------------------------------------------------------- stopping (the rules: evoforge/stopping.py)
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
            why = stopping.out_of_time(state, self.config)
            return why + (f" (its last {self._reserve_s:.3g} s went to re-timing the finalists: --confirm)"
                          if self.confirms() else "")
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
            from evoforge.report import SHOWN_COLUMNS, open_run

            annotate(open_run(self.run_dir, columns=SHOWN_COLUMNS))  # what the notes show, not every attribute
        except ImportError:
            return
        except Exception as e:  # a note is a courtesy: it never costs the campaign its summary
            log.warning("could not write the studies' notes for the dashboard (%s: %s)", e.__class__.__name__, e)

    def close(self) -> None:
        if self.starts is not None:
            self.starts.close()
        if self.builds is not None:
            self.builds.close()
            self.builds = None
        if self.pool is not None:
            if self.pools is not None:
                self.pool.set_outside({}, owner=self.config.name)  # its captures are over: a pool lent on holds none
                self.pools.give_back(self.pool)
            else:
                self.pool.shutdown()
            self.pool = None
