"""What every result is held to: torch.compile's default build of each task, timed once as candidates are
(``--compile-baseline``), and, once a task's search is done, its finalists re-timed beside that build again
(``--confirm``, ``evoforge/confirm.py``). A part of ``Campaign`` (``evoforge/campaign.py``), which holds the state
these methods read and write."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from evoforge import confirm
from evoforge.core import EvalResult, json_safe
from evoforge.task_state import TaskState

log = logging.getLogger("evoforge.campaign")

#: The study attribute that holds torch.compile's baseline for the task (the EvalResult as JSON); ``compile_ms`` and
#: ``compile_speedup`` beside it for the dashboard.
BASELINE_ATTR = "compile_baseline"
#: The pool's key of a baseline job (the task's name beside it).
BASELINE_JOB = "torch.compile"
#: the evaluations whose median wall time sizes the re-timings' reserve: the latest ones (the device's pace now)
WALLS = 50


class BaselineAndFinalists:
    """A part of ``Campaign``: see the module's docstring."""

    def times_compile(self) -> bool:
        """Whether this campaign times torch.compile's build of each task: on a device unless told not to; on the
        interpreter (no device: times that say nothing of a GPU) only when told to."""
        setting = self.config.compile_baseline
        return setting == "on" or (setting == "auto" and self.backend.device_count() > 0)

    def _need_bytes(self, task_name: str) -> int:
        """The device memory one evaluation of the task holds (the judge's copies beside the candidate's): the pool
        starts it once its device has that to spare (search/pool.py)."""
        return int(self._need.get(task_name, 0))

    def _send_baseline(self, state: TaskState) -> None:
        from evoforge.judge.evaluator import baseline_candidate

        options = {**self._options.to_dict(), "baseline": "compile"}
        worker = self.pool.submit((BASELINE_JOB, state.task.name), state.task, baseline_candidate(state.task), options,
                                  need_bytes=self._need_bytes(state.task.name))
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
        """Each task whose search is over (nothing under way, nothing more wanted) gets its finalists once. Their
        re-timings go to free evaluators in ``confirm.next_retimings``' order."""
        assert self.pool is not None
        if not self.confirms():
            return
        for state in self.tasks.values():
            if state.confirmation is None and not state.in_flight and not self._wants_more(state):
                chosen = confirm.finalists(state.history, state.seed)
                state.confirmation = confirm.Confirmation(
                    finalists=chosen, to_send=list(chosen),
                    baseline_to_send=bool(chosen) and state.compile_speedup is not None)
        open_ = [(n, s.confirmation) for n, s in self.tasks.items()
                 if s.confirmation is not None and not s.confirmation.done]
        for name, candidate in confirm.next_retimings(open_, self.pool.free(), self.out_of_time()):
            state = self.tasks[name]
            if candidate is None:
                from evoforge.judge.evaluator import baseline_candidate

                worker = self.pool.submit((BASELINE_JOB, name, "retime"), state.task, baseline_candidate(state.task),
                                          {**self._options.to_dict(), "baseline": "compile"},
                                          need_bytes=self._need_bytes(name))
            else:
                worker = self.pool.submit((confirm.CONFIRM_JOB, name, candidate.id), state.task, candidate,
                                          confirm.recheck_options(self._options.to_dict(), self._rechecks),
                                          need_bytes=self._need_bytes(name))
                self._rechecks += 1
            self._submitted[worker] = time.time()

    def _evaluation_wall(self, started_at: float | None) -> None:
        """An evaluation's wall time, from its hand-over to its result: the latest ``WALLS`` size the re-timings'
        reserve (``Campaign.search_out_of_time``)."""
        if started_at is not None:
            self._walls = [*self._walls[-(WALLS - 1):], time.time() - started_at]

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
        self.store.study(state.task.name).set_user_attr(confirm.CONFIRM_ATTR, c.to_attr(
            best[0].id if best else None, search[0].id if search else None))

    def _restore_confirmations(self) -> None:
        """On a resume: a task with nothing left to search keeps the re-timings its study holds (its export is
        the same again); a task that searches on is re-timed when that search is done."""
        for state in self.tasks.values():
            self._restore_confirmation(state)

    def _restore_confirmation(self, state: TaskState) -> None:
        assert self.store is not None
        text = self.store.study(state.task.name).user_attrs.get(confirm.CONFIRM_ATTR)
        if text and not self._wants_more(state):
            state.confirmation = confirm.Confirmation.from_attr(text, state.history)
