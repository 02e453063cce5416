"""A task no file or template serves starts from torch.compile's Triton (``inductor-seed``): the reference captured in
a process of its own on the campaign's device (``mutators/inductor_capture.py``), the captures of a campaign's tasks
side by side, each written under the run's ``seeds/`` (a resumed campaign finds it there; a failure is written as its
reason, and a resume tries again). The capture's other builds (Inductor configurations, the ``triton-conv`` kernel in
place of cuDNN's) become the task's variants, evaluated right after the seed. Where Inductor's code cannot be a
candidate, one ``UsageError`` line says why and what to give instead."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evoforge.core import Candidate, UsageError
from evoforge.search.durable import atomic_write
from evoforge.task import Task

log = logging.getLogger("evoforge.campaign")


#: The variant that is torch.compile's own build under the strict rule where the convolution kernel's build is the
#: seed (its convolutions as window gathers and GEMMs).
STRICT_BUILD = "strict-build"


class InductorStarts:
    """torch.compile's captures of a campaign's tasks (``begin``, ``close``) and the seeds and variants made from them
    (``seed``). ``backend``: the campaign's (its device, and the device turn the captures' autotuning holds);
    ``timeout_s``: an evaluation's, of which a capture gets at least 600 s."""

    def __init__(self, *, run_dir: Path, backend: Any, timeout_s: float) -> None:
        self.run_dir = run_dir
        self.backend = backend
        self.timeout_s = timeout_s
        self._pool: ThreadPoolExecutor | None = None  # the threads that wait on the capture processes
        self._processes: set[subprocess.Popen[str]] = set()  # capture processes running now (killed by ``close``)
        self.running: set[str] = set()  # the tasks whose capture process runs now (their device memory is held)
        self._closed = False

    def begin(self, tasks: list[Task]) -> list[Future[None]]:
        """Start the captures of ``tasks`` side by side (each a process compiling on the CPU: a benchmark's hundred
        tasks one after another took the better part of an hour to start); a future per task, in order."""
        side_by_side = max(1, min(len(tasks), (os.cpu_count() or 2) // 2, 8))
        self._pool = ThreadPoolExecutor(side_by_side, thread_name_prefix="evoforge-capture")
        return [self._pool.submit(self.capture, task, side_by_side) for task in tasks]

    def done(self) -> None:
        """Every capture has finished: the threads go."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def close(self) -> None:
        """Captures still under way are stopped (their processes killed: a resume captures them again)."""
        self._closed = True
        for proc in list(self._processes):
            proc.kill()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def captured(self, task: Task) -> Path:
        return self.run_dir / "seeds" / f"{task.name.replace('/', '_')}.inductor.json"

    def capture(self, task: Task, side_by_side: int = 1) -> None:
        """torch.compile's Triton for the task, captured in a process of its own on the campaign's device, written
        where ``seed`` reads it; a failure is written as its reason."""
        from evoforge.backends.base import device_turn_path, lock_key_of
        from evoforge.core import last_error_line
        from evoforge.mutators.inductor_capture import capture_env

        captured = self.captured(task)
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
        self.running.add(task.name)
        try:
            _, stderr = proc.communicate(timeout=max(600.0, self.timeout_s))
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
            self.running.discard(task.name)
        atomic_write(captured.with_suffix(".failed"), reason)  # not the capture: a resume tries again

    def seed(self, task: Task) -> tuple[Candidate, list[Candidate]]:
        """The task's seed from its capture and its variants (the ``triton-conv`` build first), each written beside
        the capture; a ``UsageError`` line where Inductor's code cannot be a candidate."""
        from evoforge.mutators.conv_kernel import TRITON_CONV
        from evoforge.mutators.inductor_seed import (
            INDUCTOR_SEED,
            INDUCTOR_VARIANT,
            InductorCapture,
            NoInductorSeed,
            seed_from_capture,
        )

        captured = self.captured(task)
        folder, stem = captured.parent, captured.name.removesuffix(".inductor.json")
        if not captured.exists():
            failed = captured.with_suffix(".failed")
            raise no_seed(task, failed.read_text() if failed.exists() else "torch.compile was not captured")
        text = captured.read_text()
        data = json.loads(text)
        if "no_seed" in data:
            raise no_seed(task, data["no_seed"])
        capture = InductorCapture.from_json(text)
        try:
            source, why = seed_from_capture(capture, allow_ops=task.allow_ops), ""
        except NoInductorSeed as e:
            source, why = None, str(e)
        conv_build = triton_conv_build(capture, tuple(task.allow_ops), source)
        strict_build = None  # torch.compile's own strict build, where the kernel's takes the seed's place
        if source is None:
            if conv_build is None:
                raise no_seed(task, why)
            source, conv_build = conv_build, None  # the one start there is (a task that is one convolution): the seed
        elif conv_build is not None and "convolution" not in task.allow_ops:
            # Under the strict rule the kernel's build is the seed and Inductor's own (each convolution a window gather
            # and a GEMM, its windows written to memory) the first variant: on the H100's convolution sample
            # (2026-12-07, 0.35 minutes a task; conv_start_order_2026-12-07_h100.md) the kernel was the faster of the
            # two in 9 of the 10 tasks where both ran, and in 9 others Inductor's build, evaluated first, failed (the
            # judge out of device memory, or the build's own buffers) while the kernel waited behind it.
            source, strict_build = conv_build, source
            conv_build = None
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
        if strict_build is not None:
            variant_file = folder / f"{stem}.{STRICT_BUILD}.py"
            atomic_write(variant_file, strict_build)
            variants.insert(0, Candidate.from_source(strict_build, task=task.name, operator=INDUCTOR_VARIANT, meta={
                "seed_file": str(variant_file), "compute_rule": rule, "inductor_config": STRICT_BUILD}))
        seed = Candidate.from_source(source, task=task.name, operator=INDUCTOR_SEED,
                                     meta={"seed_file": str(seed_file), "compute_rule": rule})
        return seed, variants


def no_seed(task: Task, reason: str) -> UsageError:
    """No template, and no Inductor seed: the campaign cannot start this task; one line says why and what to give
    instead."""
    return UsageError(f"task {task.name}: no seed kernel: no shipped template serves this task and "
                      f"torch.compile's code cannot be one ({reason}); give --seed-kernel FILE (or seed_kernel "
                      "in its [[tasks]] entry), or add llm-generate to --operators with an LLM endpoint")


def triton_conv_build(capture: Any, allow_ops: tuple[str, ...], seed: str | None) -> str | None:
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
    return with_triton_conv(base, start_precision=precision, generic=strict,
                            weight_shapes=model_shapes(capture)) if base else None


def model_shapes(capture: Any) -> dict[str, tuple[int, ...]]:
    """The shapes of the tensors the main shape's build read, by their expression in the seed (``self.conv.weight``),
    from the capture's guards; empty where the capture has none."""
    from evoforge.mutators.inductor_common import NoInductorSeed
    from evoforge.mutators.inductor_seed import source_expr

    main = capture.main_capture() or capture
    shapes: dict[str, tuple[int, ...]] = {}
    for guard in main.guards:
        try:
            shapes[source_expr(guard["source"], main.forward_args)] = tuple(guard["shape"])
        except (NoInductorSeed, KeyError, TypeError):
            continue
    return shapes
