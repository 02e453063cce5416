"""How each task of a campaign starts: ``TaskStarts`` tries the ways of ``evoforge.starts`` in order, one module each
(a recorded landscape; a seed file or the template that serves the task; the reference for an LLM to write from;
torch.compile's Triton) and adds what is evaluated right after the seed (the knowledge base's shape starts, the
Inductor variants). Seeds from a file or a template are ready at set-up; torch.compile's captures run side by side in
processes of their own, and the campaign starts its evaluators as soon as one task has a seed: the others join as
their captures arrive (``arrived``), so the device evaluates while the rest of the set-up compiles. What cannot start
is said in one line (``not_started`` in a campaign of several tasks, a ``UsageError`` for a campaign of one, or where
no task can start)."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from evoforge.config import CampaignConfig
from evoforge.core import Candidate, UsageError
from evoforge.starts.files import file_start
from evoforge.starts.generate import reference_start
from evoforge.starts.inductor import InductorStarts
from evoforge.starts.knowledge import knowledge_starts
from evoforge.starts.landscape import landscape_start
from evoforge.task import Task

log = logging.getLogger("evoforge.campaign")


class TaskStarts:
    """The tasks of one campaign config, each with its seed (``load``, ``arrived``) and what to evaluate beside it
    (``knowledge_starts``, ``variant_starts``); the inputs' shapes and bytes at the main shape (``input_shapes``,
    ``input_bytes``: the search's starts and the pool's evaluators per device read them). ``generate``: an LLM
    operator writes the first kernel where no file or template serves a task."""

    def __init__(self, *, config: CampaignConfig, backend: Any, run_dir: Path, generate: bool) -> None:
        self.config = config
        self.generate = generate
        self.not_started: dict[str, str] = {}  # task -> why it has no seed (a campaign of several goes on without it)
        self.variant_starts: dict[str, list[Candidate]] = {}  # task -> its Inductor variants, sent after the seed
        self.input_shapes: dict[str, tuple[tuple[int, ...], ...]] = {}  # task -> its inputs' shapes (meta device)
        self.input_bytes: dict[str, int] = {}  # task -> its inputs' bytes at the main shape
        self.need_bytes: dict[str, int] = {}  # task -> the device memory one evaluation holds (search.pool)
        self.index: dict[str, int] = {}  # task -> its place in the config (its strategy's seed), whenever it arrives
        self.backend = backend
        self.inductor = InductorStarts(run_dir=run_dir, backend=backend, timeout_s=config.timeout_s)
        self._capturing: list[tuple[Task, Future[None]]] = []  # tasks whose capture is under way, with its future
        self._single = False  # the campaign has one task: its failure to start is the campaign's (raised)

    def load(self) -> list[tuple[Task, Candidate]]:
        """The tasks that can start now, each with its seed; the captures of the others begin (``arrived``)."""
        from evoforge.knowledge import find_template_for, template_allow, template_floor_passes

        if not self.config.tasks:
            raise UsageError("no tasks: give --task T or [[tasks]] in the config")
        pairs: list[tuple[Task, Candidate | None]] = []
        for tc in self.config.tasks:
            if tc.landscape:  # a recorded kernel, answered from its file on --backend replay
                task, seed = landscape_start(tc.landscape)
                self.input_shapes[task.name], self.input_bytes[task.name] = (), 0  # nothing of it is run
                self.index[task.name] = len(self.index)
                pairs.append((task, seed))
                continue
            language = tc.language or None  # None: the seed's own
            task = Task.load(tc.spec, overrides=tc.set, shapes=tc.shapes, allow_ops=tc.allow_ops,
                             floor_passes=tc.floor_passes)
            if tc.floor_passes is None and (passes := template_floor_passes(task, language or "triton")) is not None:
                task = replace(task, floor_passes=passes)
            admits = [a for a in template_allow(task, language or "triton") if a not in task.allow]
            if admits:  # a fact of the task the knowledge base records (an algebraic rewrite), as floor_passes is
                task = replace(task, allow=(*task.allow, *admits))
                log.warning("task %s: the knowledge base's template entry for it admits %s (EVOFORGE_ALLOW)",
                            task.name, ", ".join(admits))
            self._check_inputs(task)
            self.index[task.name] = len(self.index)
            seed_path = Path(tc.seed_kernel) if tc.seed_kernel else find_template_for(task, language or "triton")
            if seed_path is not None:
                pairs.append((task, file_start(task, seed_path, language,
                                               arch=self.config.arch if self.config.knowledge else None)))
            elif self.generate:
                pairs.append((task, reference_start(task, language)))
            elif language == "cute":
                raise UsageError(f"task {task.name}: language cute: no shipped CuTe template serves this task; give "
                                 "--seed-kernel FILE (a CuTe module with CUDA_SRC), or add llm-generate to "
                                 "--operators with an LLM endpoint")
            else:
                pairs.append((task, None))  # from torch.compile: captured below, all such tasks at once
        return self._begin_captures(pairs)

    def _begin_captures(self, pairs: list[tuple[Task, Candidate | None]]) -> list[tuple[Task, Candidate]]:
        """Every task no way above serves gets its seed from torch.compile, the captures side by side. Returns the
        tasks ready now; where none is, waits for the first capture that gives a seed, so that a campaign no task of
        which can start says so before Ray starts. The others arrive while the campaign runs (``arrived``). In a
        campaign of several tasks, one that cannot start this way is left out with one line
        (``summary["not_started"]``) and the others run; alone, or with every task so, it stops the campaign."""
        from concurrent.futures import FIRST_COMPLETED, wait

        waiting = [task for task, seed in pairs if seed is None]
        self._single = len(pairs) == 1
        if waiting:
            self._capturing = list(zip(waiting, self.inductor.begin(waiting), strict=True))
        out = [(task, seed) for task, seed in pairs if seed is not None]
        while not out and self._capturing:
            wait([future for _, future in self._capturing], return_when=FIRST_COMPLETED)
            out = self.arrived()
        if not out:
            self.close()
            raise UsageError(f"no task of this campaign can start: {next(iter(self.not_started.values()))} (and "
                             f"{len(self.not_started) - 1} more, each logged above)")
        return out

    def capture_holds(self) -> dict[str, int]:
        """The device memory the captures running now hold (task -> bytes; the pool counts it, ``set_outside``):
        a capture runs the task's reference and torch.compile's build of it, and autotunes, on the device. On an
        H100 (2026-12-07) captures of convolution tasks held 1-12 GiB each, 2-4x their forward's peak: a third of
        an evaluation's need (``search.pool.JUDGE_BYTES_PER_PEAK_BYTE``)."""
        return {name: self.need_bytes.get(name, 0) // 3 for name in self.inductor.running}

    def pending(self) -> int:
        """How many tasks' captures are still under way."""
        return len(self._capturing)

    def arrived(self) -> list[tuple[Task, Candidate]]:
        """The tasks whose capture has finished since the last call, each with its seed (its variants in
        ``variant_starts``), in the config's order; one that cannot start is in ``not_started`` with its line (a
        campaign of one task raises it)."""
        done = [(task, future) for task, future in self._capturing if future.done()]
        if not done:
            return []
        self._capturing = [item for item in self._capturing if not item[1].done()]
        out = []
        for task, future in sorted(done, key=lambda item: self.index[item[0].name]):
            future.result()  # a capture's own failure is written as its reason; anything else is a bug: raised
            try:
                out.append((task, self._inductor_seed(task)))
            except UsageError as e:
                if self._single:
                    raise
                self.not_started[task.name] = str(e)
                log.warning("%s; the campaign goes on without it", e)
        if not self._capturing:
            self.inductor.done()
        return out

    def close(self) -> None:
        """Captures still under way are stopped (their processes killed: a resume captures them again)."""
        self.inductor.close()
        self._capturing = []

    def _inductor_seed(self, task: Task) -> Candidate:
        """The task's seed from torch.compile's capture; its variants go to ``variant_starts``."""
        seed, self.variant_starts[task.name] = self.inductor.seed(task)
        return seed

    def _check_inputs(self, task: Task) -> None:
        """Shapes the task cannot draw inputs at are the user's mistake (one line, now); inputs far too big for
        the backend get a warning before minutes pass with nothing recorded."""
        from evoforge.judge.task_inputs import check_task_inputs, size_warning
        from evoforge.search.pool import judge_need_bytes

        size = check_task_inputs(task, peak=self.backend.device_count() > 0)  # the pool shares device memory only
        self.input_shapes[task.name] = size.shapes if size is not None else ()
        self.input_bytes[task.name] = size.nbytes if size is not None else 0
        self.need_bytes[task.name] = judge_need_bytes(size.nbytes, size.peak_bytes) if size is not None else 0
        warning = size_warning(task, size, host=self.backend.device_count() == 0, backend=self.backend.name)
        if warning:
            log.warning(warning)

    def knowledge_starts(self, task: Task, seed: Candidate) -> list[Candidate]:
        """The knowledge base's shape starts beside the seed (``evoforge.starts.knowledge``); none with it off."""
        if not self.config.knowledge:
            return []
        cuda = str(getattr(self.backend, "device", "")).startswith("cuda")
        return knowledge_starts(task, seed, self.input_shapes.get(task.name, ()), self.config.arch, cuda=cuda)
