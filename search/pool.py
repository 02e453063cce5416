"""The evaluation pool: one Ray actor per device, results consumed as they finish.

Each actor owns a sandboxed evaluation process (judge/sandbox.py), so a hung or crashed candidate costs
only that process. An actor that dies itself (killed from outside, out of memory) is replaced and its
candidate recorded as ``crashed``; one that does not answer well past the timeout is killed and replaced.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import ray
from evoforge.backends.base import Backend
from evoforge.judge.options import ChainOptions
from evoforge.judge.sandbox import TURN_WAIT_FACTOR

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError, last_error_line
from evoforge.task import Task

_NEUTRAL: list[str] = []  # the folder Ray is started from, once per process
log = logging.getLogger("evoforge.pool")


def _neutral_folder() -> str:
    """An empty folder of this process's own, for Ray to start from: Ray puts the driver's current folder first on
    every worker's ``sys.path`` (and starts its local daemons and workers there), so started from a checkout's
    root, the checkout's partial ``evoforge/`` shadowed the installed package in every evaluation actor ("No
    module named 'evoforge.backends'", every candidate ``crashed``). Removed at exit, after Ray's own shutdown."""
    if not _NEUTRAL:
        import atexit
        import shutil
        import tempfile

        _NEUTRAL.append(tempfile.mkdtemp(prefix="evoforge-ray-"))
        atexit.register(shutil.rmtree, _NEUTRAL[0], True)  # before ray.init: runs after Ray's shutdown
    return _NEUTRAL[0]


def _ray_init(**kwargs: Any) -> None:
    """``ray.init`` from ``_neutral_folder``; this process's own folder is back afterwards."""
    here = os.getcwd()
    os.chdir(_neutral_folder())
    try:
        ray.init(**kwargs)
    finally:
        os.chdir(here)


def init_ray(address: str = "", *, num_cpus: int | None = None, secret_names: tuple[str, ...] = ()) -> None:
    """Join a cluster when given an address; else start Ray embedded, with token auth off for that start only.

    The embedded start is ``address="local"``: always a new instance of its own, never one found through
    ``RAY_ADDRESS`` or ``/tmp/ray/ray_current_cluster`` (a cluster left by an earlier, killed run would
    otherwise be joined, or fail the start). Joining is what ``--ray-address`` is for.

    The embedded Ray starts without this process's credentials (named like one, or in ``secret_names``): its
    daemons and the workers they start, the evaluation actors among them, never hold the LLM key.
    """
    if ray.is_initialized():
        return
    if address:
        _ray_init(address=address, log_to_driver=False)
        return
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    # Started from a worker thread (the Python API under a running event loop), Ray warns that it set no SIGTERM
    # handler: true, and nothing for the user to act on.
    worker_log = logging.getLogger("ray._private.worker")
    level = worker_log.level
    if threading.current_thread() is not threading.main_thread():
        worker_log.setLevel(logging.ERROR)
    from evoforge.judge.containment import without_secrets

    try:
        with without_secrets(extra=secret_names):
            # Put back inside: its name holds "AUTH", so the credential scrub takes it out with the secrets.
            os.environ["RAY_AUTH_MODE"] = "disabled"
            _ray_init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                      configure_logging=False)
    finally:
        worker_log.setLevel(level)
        if previous is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous


def pool_shape(backend: Backend, *, workers: int = 0, per_device: int = 2) -> tuple[int, float]:
    """(actors, GPUs per actor) for a pool on ``backend``.

    On a device backend, ``per_device`` actors share each device: they take turns to measure (``device_turn``),
    so one compiles while another runs. A host backend (the interpreter) gets CPU actors, 2 unless ``workers``
    says how many.
    """
    devices = backend.device_count()
    if not devices:
        return workers or 2, 0.0
    return workers or devices * per_device, 1.0 / per_device


#: A judge's device memory per byte of a task's inputs, for one evaluation: the judge's input sets for timing, the
#: reference's outputs and its float64 copies, and the candidate process's own copy (a staged arena). On the H200
#: one evaluation of L1/39 (6.4 GB of inputs) held 47 GiB in the judge's process and more in the candidate's, and
#: the evaluations beside it ran out of memory (experiments/results/kernelbench/README.md): 12 leaves room.
JUDGE_BYTES_PER_INPUT_BYTE = 12
#: The same per byte of the reference's forward at its peak (``judge.task_inputs.forward_peak_bytes``), which counts
#: what the inputs miss: a transposed convolution's outputs and intermediates, many times its inputs. On an H100
#: (2026-12-07, the convolution sample's part 4) judges ran out of memory already holding 6.2-9.2x their task's
#: peak (L2/25, L2/100, L2/2, L1/71), with the candidate's process beside them: 10.
JUDGE_BYTES_PER_PEAK_BYTE = 10


def judge_need_bytes(input_bytes: int, peak_bytes: int = 0) -> int:
    """The device memory one evaluation of a task holds, from its inputs' bytes and its forward's peak (0: not
    known)."""
    return max(JUDGE_BYTES_PER_INPUT_BYTE * max(input_bytes, 0), JUDGE_BYTES_PER_PEAK_BYTE * max(peak_bytes, 0))


def evaluators_that_fit(per_device: int, need_bytes: int, device_bytes: int) -> int:
    """How many of ``per_device`` evaluators one device holds at once for a task whose evaluation holds
    ``need_bytes`` (``judge_need_bytes``; at least one: a task too big for one evaluation is the judge's to refuse,
    with the device's own message). Evaluators sharing a device that cannot hold all their evaluations fail each
    other's candidates with ``OutOfMemoryError``, which the record would blame on the candidates."""
    if per_device <= 1 or need_bytes <= 0 or device_bytes <= 0:
        return max(per_device, 1)
    fits = int(0.9 * device_bytes // need_bytes)
    return max(1, min(per_device, fits))


def campaign_evaluators_per_device(per_device: int, need_bytes: dict[str, int], device_bytes: int) -> int:
    """The evaluators a campaign starts on each device: as many as its largest task's evaluations fit at once.

    Not fewer only while that task is evaluated: an evaluator that is not evaluating still holds device memory (its
    arena, grown to the largest task it served, and its reference memo), which the pool's admission (``admitted``)
    does not see. On an H100 (2026-12-07, experiments/results/h200/utilization/) a campaign that started two
    evaluators beside a task of 6 GiB of inputs got ``runtime_error`` for the seeds of its three 6 GiB tasks,
    where one evaluator a device evaluated them all."""
    fits = [evaluators_that_fit(per_device, b, device_bytes) for b in need_bytes.values()]
    return min(fits, default=max(per_device, 1))


@ray.remote
class EvalActor:
    """Evaluates one candidate at a time on the device Ray gave it."""

    def __init__(self, evaluator_kwargs: dict[str, Any]) -> None:
        from evoforge.judge.evaluator import Evaluator

        kwargs = dict(evaluator_kwargs)
        kwargs["options"] = ChainOptions.from_dict(kwargs.get("options", {}))
        self.evaluator = Evaluator(**kwargs)

    def evaluate(self, task: dict[str, Any], candidate: dict[str, Any],
                 options: dict[str, Any] | None = None) -> dict[str, Any]:
        chosen = ChainOptions.from_dict(options) if options is not None else None
        result = self.evaluator.evaluate(Task.from_dict(task), Candidate.from_dict(candidate), options=chosen)
        return result.to_dict()

    def start(self) -> dict[str, str]:
        """Start the evaluation process now (``EvalPool.wait_started``); how its candidates are contained."""
        return self.evaluator.start()

    def pid(self) -> int:
        return os.getpid()

    def gpu(self) -> int:
        """The device Ray gave this actor (0 where it gave none): the pool accounts device memory per device."""
        ids = ray.get_gpu_ids()
        return int(ids[0]) if ids else 0

    def shutdown(self) -> None:
        self.evaluator.close()


def out_of_memory(result: EvalResult) -> bool:
    """The evaluation ran out of device memory: the judge's own copies, or the candidate's process (PyTorch's
    ``OutOfMemoryError``, a driver's "out of memory")."""
    if result.details.get("judge_out_of_memory"):
        return True
    if result.status not in (EvalStatus.RUNTIME_ERROR, EvalStatus.CRASHED):
        return False
    text = (result.message or "").lower()
    return "outofmemoryerror" in text or "out of memory" in text


def admitted(waiting: list[tuple[int, int]], running: dict[int, list[int]], device_bytes: int) -> list[int]:
    """Which of the held-back evaluations ``waiting`` ((device, bytes needed), oldest first) start now, beside the
    bytes ``running`` on each device: one fits where its device's evaluations and it hold at most 90% of
    ``device_bytes``, and any fits a device running nothing (one evaluation too big for the device is the judge's to
    refuse, with the device's own message). A device whose oldest held-back evaluation does not fit starts nothing
    newer: small evaluations arriving all the time would otherwise pass a large one over for ever. Without
    ``device_bytes`` every one starts."""
    if not device_bytes:
        return list(range(len(waiting)))
    held = {d: list(b) for d, b in running.items()}
    blocked: set[int] = set()
    out = []
    for i, (device, need) in enumerate(waiting):
        if device in blocked:
            continue
        if held.get(device) and sum(held[device]) + need > 0.9 * device_bytes:
            blocked.add(device)
            continue
        held.setdefault(device, []).append(need)
        out.append(i)
    return out


@dataclass
class _Slot:
    actor: Any
    busy: Any = None  # ObjectRef of the evaluation in flight
    job: tuple[Any, Task, Candidate] | None = None
    started: float = 0.0
    restarts: int = 0
    tag: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    group: int = 0  # the actor process this slot's evaluations go to (several slots may share one)
    need_bytes: int = 0  # the device memory the judge's evaluation in this slot holds (``EvalPool.device_bytes``)
    waiting: tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None] | None = None  # held back for memory
    submitted: float = 0.0
    held_back: bool = False  # not started when submitted: its device lacked the memory then
    device: int | None = None
    request: tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None] | None = None  # what was submitted
    beside: bool = False  # something else held its device while it ran (another evaluation, a capture)
    alone: str = ""  # a re-run alone after running out of memory beside something: the first run's message


class EvalPool:
    """A fixed set of evaluation slots on actors; ``submit`` to a free one, ``poll`` for finished results.

    A slot is one evaluation at a time: one device. ``slots_per_actor`` > 1 lets one actor process serve several
    slots at once (a threaded actor), for simulated devices (the replay backend), whose evaluations are a wait and
    a look-up: 128 simulated devices need not be 128 Python processes. An actor that dies or hangs is replaced for
    every slot it served."""

    def __init__(self, *, size: int, evaluator_kwargs: dict[str, Any], num_gpus: float = 0.0,
                 timeout_s: float = 120.0, grace_s: float = 120.0, slots_per_actor: int = 1,
                 device_bytes: int = 0, devices: int = 1) -> None:
        self.evaluator_kwargs = evaluator_kwargs
        # Each device's memory (0: not accounted). An evaluation submitted with ``need_bytes`` starts once its
        # device holds it beside the evaluations running there (always, on a device running nothing), in the order
        # submitted on that device: a large task's evaluations run alone, a small task's beside each other, instead
        # of every task evaluated as if it were the largest (``evaluators_that_fit``).
        self.device_bytes = device_bytes
        self.devices = max(1, devices)
        self.num_gpus = num_gpus
        self.slots_per_actor = max(1, slots_per_actor)
        self.timeout_s = timeout_s
        self.grace_s = grace_s  # startup of a fresh evaluation process (imports) on top of the timeout
        if 0 < num_gpus < 1:  # actors share a GPU: an evaluation may also wait its turn (the sandbox's bound)
            self.grace_s += TURN_WAIT_FACTOR * timeout_s
        # Device memory held outside the pool's evaluations (a campaign's torch.compile captures): owner ->
        # {name: (device, bytes)}, counted by the admission as running evaluations are (``set_outside``).
        self._outside: dict[str, dict[str, tuple[int, int]]] = {}
        self.reruns_alone = 0  # evaluations run again alone after running out of memory beside something
        per = self.slots_per_actor
        self._actors = [self._new_actor() for _ in range(-(-size // per))]
        self.slots = [_Slot(actor=self._actors[i // per], tag=f"worker-{i}", group=i // per) for i in range(size)]

    def wait_started(self, timeout_s: float = 300.0) -> None:
        """Until one actor's evaluation process has started (its first candidate process loaded the runner), the
        others starting meanwhile: where none can (evoforge's own modules out of reach of the actors, the judge or
        a candidate's process), ``UsageError`` says why in one line, at start-up, not a campaign of ``crashed``.
        Any other failure, or no answer within ``timeout_s``, is left to the evaluations (each actor is replaced)."""
        pending = [actor.start.remote() for actor in self._actors]
        deadline = time.monotonic() + timeout_s
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=max(deadline - time.monotonic(), 0.0))
            if not ready:
                return
            try:
                ray.get(ready[0])
                return
            except ray.exceptions.RayActorError as e:  # the actor itself cannot be made (its class not importable)
                raise UsageError(f"the evaluation actors cannot start: {last_error_line(str(e))}") from None
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                if isinstance(cause, UsageError):
                    raise UsageError(str(cause)) from None

    def _new_actor(self) -> Any:
        options: dict[str, Any] = {"num_cpus": 1}
        if self.slots_per_actor > 1:
            options["max_concurrency"] = self.slots_per_actor
        if self.num_gpus:
            options["num_gpus"] = self.num_gpus
        return EvalActor.options(**options).remote(self.evaluator_kwargs)

    @property
    def size(self) -> int:
        return len(self.slots)

    def free(self) -> int:
        """Slots with nothing in flight and nothing held back for memory."""
        return sum(1 for s in self.slots if s.job is None and s.busy is None)

    def in_flight(self) -> int:
        return self.size - self.free()

    def submit(self, key: Any, task: Task, candidate: Candidate, options: dict[str, Any] | None = None, *,
               need_bytes: int = 0) -> str:
        """Hand ``candidate`` to a free actor; ``options`` (a ``ChainOptions`` dict) replace the pool's own for this
        evaluation (a pool lent to several campaigns evaluates each with its own). With ``device_bytes`` set, it
        starts once its device has ``need_bytes`` to spare (``poll`` starts it), else at once."""
        slot = next(s for s in self.slots if s.job is None and s.busy is None)
        slot.job = (key, task, candidate)
        slot.need_bytes = max(0, int(need_bytes)) if self.device_bytes else 0
        slot.submitted = time.monotonic()
        slot.request = slot.waiting = (task.to_dict(), candidate.to_dict(), options)
        slot.beside, slot.alone = False, ""
        self._start_waiting()
        slot.held_back = slot.waiting is not None
        return slot.tag

    def set_outside(self, holds: dict[str, int], *, owner: str = "", device: int = 0) -> None:
        """Device memory that processes outside the pool hold now on ``device`` (name -> bytes; a campaign's
        torch.compile captures, each a process of its own on the device), replacing what ``owner`` said before: the
        admission counts it as it counts running evaluations, and an evaluation running while some is held ran
        beside it. ``{}`` when they are done."""
        held = {name: (device, int(b)) for name, b in holds.items() if b > 0}
        if not self.device_bytes or held == self._outside.get(owner, {}):
            return  # nothing changed (the campaign says it at every turn of its loop)
        self._outside[owner] = held
        if held:
            self._mark_beside()
        self._start_waiting()

    def _held_outside(self) -> list[tuple[int, int]]:
        return [held for holds in self._outside.values() for held in holds.values()]

    def _mark_beside(self) -> None:
        """Every running evaluation that shares its device with another, or with memory held outside the pool, ran
        beside something: where it runs out of memory, that is not its own doing (``poll`` runs it again alone)."""
        on: dict[int, list[_Slot]] = {}
        for s in self.slots:
            if s.busy is not None:
                on.setdefault(self._device(s), []).append(s)
        outside = {device for device, _ in self._held_outside()}
        for device, slots in on.items():
            if len(slots) > 1 or device in outside:
                for s in slots:
                    s.beside = True

    def _device(self, slot: _Slot) -> int:
        if self.devices <= 1:
            return 0
        if slot.device is None:
            try:
                slot.device = int(ray.get(slot.actor.gpu.remote(), timeout=120))
            except Exception:  # noqa: BLE001  (an actor that cannot say: its group's place in the pool's order)
                slot.device = slot.group % self.devices
        return slot.device

    def _start_waiting(self) -> None:
        """Start the held-back evaluations whose device has room now (``admitted``)."""
        held_back = sorted((s for s in self.slots if s.waiting is not None), key=lambda s: s.submitted)
        if not held_back:
            return
        device_of = (lambda s: self._device(s)) if self.device_bytes else (lambda s: 0)
        running: dict[int, list[int]] = {}
        for s in self.slots:
            if s.busy is not None:
                running.setdefault(device_of(s), []).append(s.need_bytes)
        for device, nbytes in self._held_outside():
            running.setdefault(device, []).append(nbytes)
        chosen = admitted([(device_of(s), s.need_bytes) for s in held_back], running, self.device_bytes)
        for slot in (held_back[i] for i in chosen):
            assert slot.waiting is not None
            task, candidate, options = slot.waiting
            slot.waiting = None
            slot.busy = slot.actor.evaluate.remote(task, candidate, options)
            slot.started = time.monotonic()
        if chosen and self.device_bytes:
            self._mark_beside()

    def _rerun_alone(self, slot: _Slot, result: EvalResult) -> bool:
        """An evaluation that ran out of device memory beside another (or beside a capture) is run again, once, with
        its device to itself: the record would otherwise blame the candidate, or stop the task, for what its
        neighbours held (an H100 campaign of six convolution tasks lost three tasks' searches so, 2026-12-07). One
        that runs out alone too is its own (a candidate that hoards memory gets one more run, not a loop)."""
        if not self.device_bytes or not slot.beside or slot.alone or slot.request is None:
            return False
        if not out_of_memory(result):
            return False
        slot.alone = result.message[:500] or "out of memory"
        slot.need_bytes = max(slot.need_bytes, self.device_bytes)  # admitted where its device runs nothing
        slot.waiting, slot.busy, slot.beside = slot.request, None, False
        slot.submitted, slot.held_back = time.monotonic(), True
        self.reruns_alone += 1
        log.info("an evaluation ran out of device memory beside others; running it again alone: %s",
                 slot.alone[:200])
        return True

    def _replace_actor(self, slot: _Slot) -> None:
        """A fresh actor for the slot's group; a slot whose actor another slot of the group replaced already takes
        the new one (its own evaluation died with the old)."""
        if slot.actor is self._actors[slot.group]:
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:
                pass
            self._actors[slot.group] = self._new_actor()
        slot.actor = self._actors[slot.group]
        slot.restarts += 1
        slot.device = None  # the new actor's device is Ray's to choose again

    def poll(self, timeout_s: float = 0.1) -> list[tuple[Any, Candidate, EvalResult, str]]:
        """Finished evaluations as (key, candidate, result, worker tag); waits at most ``timeout_s``."""
        refs = [s.busy for s in self.slots if s.busy is not None]
        if not refs:
            self._start_waiting()
            return []
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        ready_set = set(ready)
        out = []
        now = time.monotonic()
        for slot in self.slots:
            if slot.busy is None:
                continue
            assert slot.job is not None
            key, _task, candidate = slot.job
            if slot.busy in ready_set:
                try:
                    result = EvalResult.from_dict(ray.get(slot.busy))
                except ray.exceptions.RayActorError as e:  # Ray's text leads with a preamble: its cause is last
                    result = EvalResult.failure(EvalStatus.CRASHED,
                                                f"the evaluation actor died: {last_error_line(str(e))}")
                    self._replace_actor(slot)
                except ray.exceptions.RayTaskError as e:
                    result = EvalResult.failure(EvalStatus.CRASHED,
                                                f"the evaluation actor failed: {last_error_line(str(e))}")
            elif now - slot.started > self.timeout_s + self.grace_s:
                result = EvalResult.failure(EvalStatus.TIMEOUT, f"no answer from the evaluation actor after "
                                            f"{now - slot.started:.0f} s; the actor was killed and replaced")
                self._replace_actor(slot)
            else:
                continue
            if self._rerun_alone(slot, result):
                continue
            if slot.held_back:  # held back for the device's memory: said with the result, not hidden in its time
                result = replace(result, details={**result.details,
                                                  "memory_wait_s": round(slot.started - slot.submitted, 3)})
            if slot.alone:  # its first run's failure, beside others, is said with the result
                result = replace(result, details={**result.details, "rerun_alone": slot.alone})
            out.append((key, candidate, result, slot.tag))
            slot.busy, slot.job, slot.need_bytes, slot.request, slot.alone = None, None, 0, None, ""
        self._start_waiting()
        return out

    def shutdown(self) -> None:
        for actor in self._actors:
            try:
                ray.get(actor.shutdown.remote(), timeout=10)
            except Exception:
                pass
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass


def _within(path: str, folder: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(folder)]) == os.path.abspath(folder)


class PoolShare:
    """Evaluation pools lent to campaigns that run one after another (an ablation's variants and seeds).

    A pool's actors and their evaluation processes (torch, Triton and a forkserver imported in each) take seconds
    to start, more than a short campaign's evaluations: a dozen campaigns of an ablation start them once. One pool
    per set-up (size, devices, backend, arch, timeout); each evaluation carries its campaign's chain options. The
    candidates are kept out of ``hide_paths`` (the ablation's directory, which holds every run's), and out of any
    folder a campaign hides that lies outside them (that campaign then gets a pool of its own).
    """

    def __init__(self, *, hide_paths: list[str]) -> None:
        self.hide_paths = [os.path.abspath(p) for p in hide_paths]
        self._pools: dict[str, EvalPool] = {}

    def lend(self, *, size: int, evaluator_kwargs: dict[str, Any], num_gpus: float = 0.0,
             timeout_s: float = 120.0, slots_per_actor: int = 1, device_bytes: int = 0, devices: int = 1) -> EvalPool:
        kwargs = {k: v for k, v in evaluator_kwargs.items() if k != "options"}
        own = [p for p in kwargs.get("hide_paths", []) if not any(_within(p, h) for h in self.hide_paths)]
        kwargs["hide_paths"] = self.hide_paths + own
        key = json.dumps([size, num_gpus, timeout_s, slots_per_actor, kwargs], sort_keys=True, default=str)
        if key not in self._pools:
            self._pools[key] = EvalPool(size=size, evaluator_kwargs=kwargs, num_gpus=num_gpus, timeout_s=timeout_s,
                                        slots_per_actor=slots_per_actor)
        pool = self._pools[key]
        pool.device_bytes, pool.devices = device_bytes, max(1, devices)  # this campaign's tasks' accounting
        return pool

    def give_back(self, pool: EvalPool) -> None:
        """A pool comes back after its campaign; one with evaluations still in flight (the campaign stopped
        early) is shut down, so the next campaign never receives the last one's results."""
        if pool.in_flight():
            pool.shutdown()
            self._pools = {k: p for k, p in self._pools.items() if p is not pool}

    def shutdown(self) -> None:
        for pool in self._pools.values():
            pool.shutdown()
        self._pools.clear()
