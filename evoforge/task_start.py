"""How each task of a campaign starts: its seed (a file, the template that serves it, torch.compile's Triton, or the
reference for an LLM to write from) and the candidates evaluated right after it (the knowledge base's shape starts,
the Inductor variants). Seeds from a file or a template are ready at set-up; torch.compile's captures run side by
side in processes of their own, and the campaign starts its evaluators as soon as one task has a seed: the others
join as their captures arrive (``arrived``), so the device evaluates while the rest of the set-up compiles. What
cannot start is said in one line (``not_started`` in a campaign of several tasks, a ``UsageError`` for a campaign
of one, or where no task can start)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from evoforge.config import CampaignConfig
from evoforge.core import SEED_OPERATOR, Candidate, UsageError, source_language
from evoforge.search.durable import atomic_write
from evoforge.task import Task, read_candidate_file

log = logging.getLogger("evoforge.campaign")

#: The operator of a config the knowledge base's shape rules start from beside the seed (knowledge/starts.py).
KNOWLEDGE_START = "knowledge-start"


def landscape_task_name(path: str) -> str:
    """The task a landscape file makes: its file's stem (``matmul_bf16_4096``)."""
    return Path(path).stem


class TaskStarts:
    """The tasks of one campaign config, each with its seed (``load``) and what to evaluate beside it
    (``knowledge_starts``, ``variant_starts``); the inputs' shapes and bytes at the main shape (``input_shapes``,
    ``input_bytes``: the search's starts and the pool's evaluators per device read them). ``generate``: an LLM
    operator writes the first kernel where no file or template serves a task."""

    def __init__(self, *, config: CampaignConfig, backend: Any, run_dir: Path, generate: bool) -> None:
        self.config = config
        self.backend = backend
        self.run_dir = run_dir
        self.generate = generate
        self.not_started: dict[str, str] = {}  # task -> why it has no seed (a campaign of several goes on without it)
        self.variant_starts: dict[str, list[Candidate]] = {}  # task -> its Inductor variants, sent after the seed
        self.input_shapes: dict[str, tuple[tuple[int, ...], ...]] = {}  # task -> its inputs' shapes (meta device)
        self.input_bytes: dict[str, int] = {}  # task -> its inputs' bytes at the main shape
        self.index: dict[str, int] = {}  # task -> its place in the config (its strategy's seed), whenever it arrives
        self._capturing: list[tuple[Task, Any]] = []  # tasks whose torch.compile capture is under way, with its future
        self._captures: Any = None  # the threads that wait on the capture processes
        self._processes: set[Any] = set()  # capture processes running now (killed by ``close``)
        self._closed = False
        self._single = False  # the campaign has one task: its failure to start is the campaign's (raised)

    def load(self) -> list[tuple[Task, Candidate]]:
        from evoforge.knowledge import find_template_for, template_floor_passes

        if not self.config.tasks:
            raise UsageError("no tasks: give --task T or [[tasks]] in the config")
        out = []
        for tc in self.config.tasks:
            if tc.landscape:  # a recorded kernel, answered from its file on --backend replay
                out.append(self._landscape_task(tc.landscape))
                self.index[out[-1][0].name] = len(self.index)
                continue
            language = tc.language or None  # None: the seed's own
            task = Task.load(tc.spec, overrides=tc.set, shapes=tc.shapes, allow_ops=tc.allow_ops,
                             floor_passes=tc.floor_passes)
            if tc.floor_passes is None and (passes := template_floor_passes(task, language or "triton")) is not None:
                task = replace(task, floor_passes=passes)
            self._check_inputs(task)
            self.index[task.name] = len(self.index)
            seed_path = Path(tc.seed_kernel) if tc.seed_kernel else find_template_for(task, language or "triton")
            if seed_path is None and self.generate:
                # The first kernel is written from the reference: the reference is the lineage's start (never
                # evaluated as a candidate).
                out.append((task, Candidate(source=task.source, task=task.name, operator="reference",
                                            language=language or "triton", meta={"reference": True})))
                continue
            if seed_path is None and language == "cute":
                raise UsageError(f"task {task.name}: language cute: no shipped CuTe template serves this task; give "
                                 "--seed-kernel FILE (a CuTe module with CUDA_SRC), or add llm-generate to "
                                 "--operators with an LLM endpoint")
            if seed_path is None:
                out.append((task, None))  # from torch.compile: captured below, all such tasks at once
                continue
            source = read_candidate_file(str(seed_path), flag="--seed-kernel")
            try:
                compile(source, str(seed_path), "exec")
            except SyntaxError as e:
                raise UsageError(f"--seed-kernel {seed_path}: not valid Python (line {e.lineno}: {e.msg})") from None
            if "ModelNew" not in source:
                raise UsageError(f"--seed-kernel {seed_path}: defines no ModelNew (a candidate module must)")
            own = source_language(source)
            if language and own != language:
                raise UsageError(f"--seed-kernel {seed_path}: a {own} kernel, but task {task.name} asks for "
                                 f"language {language} (a CuTe seed keeps CUDA C++ in CUDA_SRC and loads it with "
                                 "evoforge.backends.cute.load; drop the language to take the seed's)")
            out.append((task, self._seed_candidate(task, source, {"seed_file": str(seed_path)}, own)))
        return self._inductor_seeds(out)

    def _landscape_task(self, path: str) -> tuple[Task, Candidate]:
        """A task whose evaluations a recorded landscape answers: named by the file's stem, its seed the file's space
        (``Landscape.seed_candidate``); nothing of it is run, so it has no inputs to draw."""
        from evoforge.backends.replay import Landscape

        landscape = Landscape.load(path)
        task = Task(path=str(Path(path).absolute()), name=landscape_task_name(path))
        self.input_shapes[task.name], self.input_bytes[task.name] = (), 0
        return task, landscape.seed_candidate(task=task.name)

    def _inductor_seeds(self, pairs: list[tuple[Task, Candidate | None]]) -> list[tuple[Task, Candidate]]:
        """Every task no template serves gets its seed from torch.compile, the captures run side by side (each a
        process compiling on the CPU: a benchmark's hundred tasks one after another took the better part of an
        hour to start). Returns the tasks ready now; where none is, waits for the first capture that gives a seed,
        so that a campaign no task of which can start says so before Ray starts. The others arrive while the
        campaign runs (``arrived``). In a campaign of several tasks, one that cannot start this way is left out with
        one line (``summary["not_started"]``) and the others run; alone, or with every task so, it stops the
        campaign."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        waiting = [task for task, seed in pairs if seed is None]
        self._single = len(pairs) == 1
        if waiting:
            side_by_side = max(1, min(len(waiting), (os.cpu_count() or 2) // 2, 8))
            self._captures = ThreadPoolExecutor(side_by_side, thread_name_prefix="evoforge-capture")
            self._capturing = [(task, self._captures.submit(self._capture_inductor, task, side_by_side))
                               for task in waiting]
        out = [(task, seed) for task, seed in pairs if seed is not None]
        while not out and self._capturing:
            from concurrent.futures import FIRST_COMPLETED, wait

            wait([future for _, future in self._capturing], return_when=FIRST_COMPLETED)
            out = self.arrived()
        if not out:
            self.close()
            raise UsageError(f"no task of this campaign can start: {next(iter(self.not_started.values()))} (and "
                             f"{len(self.not_started) - 1} more, each logged above)")
        return out

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
        if not self._capturing and self._captures is not None:
            self._captures.shutdown(wait=False)
            self._captures = None
        return out

    def close(self) -> None:
        """Captures still under way are stopped (their processes killed: a resume captures them again)."""
        self._closed = True
        for proc in list(self._processes):
            proc.kill()
        if self._captures is not None:
            self._captures.shutdown(wait=True, cancel_futures=True)
            self._captures = None
        self._capturing = []

    def _check_inputs(self, task: Task) -> None:
        """Shapes the task cannot draw inputs at are the user's mistake (one line, now); inputs far too big for
        the backend get a warning before minutes pass with nothing recorded."""
        from evoforge.judge.task_inputs import check_task_inputs, size_warning

        size = check_task_inputs(task)
        self.input_shapes[task.name] = size.shapes if size is not None else ()
        self.input_bytes[task.name] = size.nbytes if size is not None else 0
        warning = size_warning(task, size, host=self.backend.device_count() == 0, backend=self.backend.name)
        if warning:
            log.warning(warning)

    def knowledge_starts(self, task: Task, seed: Candidate) -> list[Candidate]:
        """Configs the knowledge base's shape rules say to try beside the seed for this task's problem (stream-K
        or split-K where a GEMM has fewer output tiles than SMs, a K tile within K, an fp32 GEMM's operands split
        into bf16 parts), each evaluated right after the seed as operator ``knowledge-start``; none with the knowledge base off or a seed without a SPACE."""
        from evoforge.core import declared_space
        from evoforge.knowledge.starts import shape_starts, split_starts

        if not self.config.knowledge or seed.meta.get("reference"):
            return []
        declared, defaults = declared_space(seed.source)
        space = seed.space or declared
        if not space:
            return []
        params = {**defaults, **seed.params}
        # judged as the route judges every child of the seed (the source's own operand sizes, evoforge/route.py):
        # the task's dtype is not its kernels' (the matmul template's fp32 GEMM runs on bf16 parts), and a start the
        # route would take as a child must not be refused here
        starts = shape_starts(space, params, self.input_shapes.get(task.name, ()), self.config.arch,
                              source=seed.source)
        starts += split_starts(space, params, self.config.arch, source=seed.source)
        for start in starts:
            log.warning("task %s: the knowledge base starts a config beside the seed: %s", task.name, start.why)
        return [seed.with_params(start.change, operator=KNOWLEDGE_START, parents=(seed.id,),
                                 meta={**seed.meta, "move": start.why}) for start in starts]

    def _captured(self, task: Task) -> Path:
        return self.run_dir / "seeds" / f"{task.name.replace('/', '_')}.inductor.json"

    def _capture_inductor(self, task: Task, side_by_side: int = 1) -> None:
        """torch.compile's Triton for the task, captured in a process of its own on the campaign's device, written
        where ``_inductor_seed`` reads it (a resumed campaign finds it there); a failure is written as its reason."""
        import subprocess
        import sys

        from evoforge.backends.base import device_turn_path, lock_key_of
        from evoforge.core import last_error_line
        from evoforge.mutators.inductor_capture import capture_env

        captured = self._captured(task)
        if captured.exists():
            return
        captured.parent.mkdir(parents=True, exist_ok=True)
        device = str(self.backend.device).split(":")[0]
        # The capture's autotuning times kernels: it holds the device's turn while it does, as evaluations do.
        key = lock_key_of(self.backend)
        turn = device_turn_path(key) if key else None
        if self._closed:
            return
        log.warning("task %s: no template serves it; capturing torch.compile's Triton on %s", task.name, device)
        # -P: the installed evoforge, whatever the current folder (a checkout's partial evoforge/ would shadow it)
        proc = subprocess.Popen([sys.executable, "-P", "-m", "evoforge.mutators.inductor_capture", task.path, device,
                                 str(captured), json.dumps(task.overrides), json.dumps(list(task.allow_ops))],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=capture_env(side_by_side, turn))
        self._processes.add(proc)
        try:
            _, stderr = proc.communicate(timeout=max(600.0, self.config.timeout_s))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            reason = "torch.compile did not finish within 600 s"
        else:
            if proc.returncode == 0 and captured.exists():
                return
            if self._closed:  # stopped by ``close``: nothing is written, a resume captures it
                return
            tail = last_error_line(stderr) or "no output"
            reason = f"capturing torch.compile's code failed ({tail})"
        finally:
            self._processes.discard(proc)
        atomic_write(captured.with_suffix(".failed"), reason)  # not the capture: a resume tries again

    def _inductor_seed(self, task: Task) -> Candidate:
        """A task no template serves starts from torch.compile's Triton (``inductor-seed``), captured by
        ``_capture_inductor``; where Inductor's code cannot be a candidate, one line says why."""
        from evoforge.mutators.conv_kernel import TRITON_CONV
        from evoforge.mutators.inductor_seed import (
            INDUCTOR_SEED,
            INDUCTOR_VARIANT,
            InductorCapture,
            NoInductorSeed,
            seed_from_capture,
        )

        captured = self._captured(task)
        folder, stem = captured.parent, captured.name.removesuffix(".inductor.json")
        if not captured.exists():
            failed = captured.with_suffix(".failed")
            return self._no_seed(task, failed.read_text() if failed.exists() else "torch.compile was not captured")
        text = captured.read_text()
        data = json.loads(text)
        if "no_seed" in data:
            return self._no_seed(task, data["no_seed"])
        capture = InductorCapture.from_json(text)
        try:
            source, why = seed_from_capture(capture, allow_ops=task.allow_ops), ""
        except NoInductorSeed as e:
            source, why = None, str(e)
        conv_build = _triton_conv_build(capture, tuple(task.allow_ops), source)
        if source is None:
            if conv_build is None:
                return self._no_seed(task, why)
            source, conv_build = conv_build, None  # the one start there is (a task that is one convolution): the seed
        seed_file = folder / f"{stem}.py"
        atomic_write(seed_file, source)
        rule = "vendor ops allowed: " + ", ".join(task.allow_ops) if task.allow_ops else "strict"
        variants = []
        for variant in capture.variants:  # the main shape's build under other Inductor configurations
            try:
                made = seed_from_capture(capture, allow_ops=task.allow_ops, variant=variant["name"])
            except NoInductorSeed:
                continue
            variant_file = folder / f"{stem}.{variant['name']}.py"
            atomic_write(variant_file, made)
            variants.append(Candidate.from_source(made, task=task.name, operator=INDUCTOR_VARIANT, meta={
                "seed_file": str(variant_file), "compute_rule": rule, "inductor_config": variant["name"]}))
        if conv_build is not None:
            # First of the variants: a campaign of minutes makes two or three evaluations a task, and on the H200 the
            # kernel beat the reference-layout build wherever either mattered (L2/82, L2/87: the seed fails the chain,
            # 0.94x/0.92x torch.compile against 0.74x/0.69x; L2/27: 1.32x, the seed 1.00x), while on 64-channel tasks
            # both run slower than the seed, which stays the incumbent (experiments/results/kernelbench/README.md).
            variant_file = folder / f"{stem}.{TRITON_CONV}.py"
            atomic_write(variant_file, conv_build)
            variants.insert(0, Candidate.from_source(conv_build, task=task.name, operator=INDUCTOR_VARIANT, meta={
                "seed_file": str(variant_file), "compute_rule": rule, "inductor_config": TRITON_CONV}))
        self.variant_starts[task.name] = variants
        return Candidate.from_source(source, task=task.name, operator=INDUCTOR_SEED,
                                     meta={"seed_file": str(seed_file), "compute_rule": rule})

    def _no_seed(self, task: Task, reason: str) -> Candidate:
        """No template, and no Inductor seed: the campaign cannot start this task; one line says why and what to
        give instead."""
        raise UsageError(f"task {task.name}: no seed kernel: no shipped template serves this task and "
                         f"torch.compile's code cannot be one ({reason}); give --seed-kernel FILE (or seed_kernel "
                         "in its [[tasks]] entry), or add llm-generate to --operators with an LLM endpoint")

    def _seed_candidate(self, task: Task, source: str, meta: dict[str, Any],
                        language: str | None = None) -> Candidate:
        """The seed as given, or, when a Triton seed declares no SPACE, with its launch constants lifted into one
        (``lifted-seed``): a plain kernel still gives parameter moves and the rule operators something to tune.
        Its language is the task's, else the one its source is written in."""
        from evoforge.mutators.lift import LIFTED_SEED, describe_lift, lift_launch_constants

        language = language or source_language(source)
        lifted = None if language == "cute" else lift_launch_constants(
            source, arch=self.config.arch if self.config.knowledge else None)
        if lifted is None:
            return Candidate.from_source(source, task=task.name, operator=SEED_OPERATOR, language=language, meta=meta)
        log.warning("task %s: the seed declares no SPACE; lifted its launch constants into one (%s)", task.name,
                    lifted.describe())
        return Candidate.from_source(lifted.source, task=task.name, operator=LIFTED_SEED,
                                     meta={**meta, **describe_lift(lifted)})


def _triton_conv_build(capture: Any, allow_ops: tuple[str, ...], seed: str | None) -> str | None:
    """torch.compile's build of the task with its main path's convolutions (1-D, 2-D or 3-D; strided, padded,
    dilated, grouped or transposed) in a Triton kernel of the seed's own instead of cuDNN's
    (``mutators/conv_kernel.py``: bf16 parts on tensor cores, exact where cuDNN's fast path is TF32): the vendor
    rule's ``seed`` so rewritten; under the strict rule (cuDNN not allowed), or where there is no seed (a task that is
    one convolution: Inductor writes no kernel), the build with cuDNN's calls, rewritten (under the strict rule every
    convolution of both paths). None where there is no such build. The chain judges it as it judges the seed."""
    from evoforge.mutators.conv_kernel import with_triton_conv
    from evoforge.mutators.inductor_seed import NoInductorSeed, seed_from_capture

    strict = "convolution" not in allow_ops
    base = seed
    if strict or base is None:
        try:
            base = seed_from_capture(capture, allow_ops=(*allow_ops, "convolution"), library_ok=True)
        except NoInductorSeed:
            return None
    precision = "bf16x3" if capture.device.startswith("cuda") else "ieee"  # the interpreter's dot: exact fp32 only
    return with_triton_conv(base, start_precision=precision, generic=strict) if base else None
