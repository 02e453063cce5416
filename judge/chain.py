"""The verification chain, written once over any Backend: static -> load/compile -> correctness -> timing.

This module is the judge. It runs in the evaluation process (judge/worker.py), which the caller can kill, and
holds everything a candidate could want to reach: the task module, the reference, the inputs and expected
outputs, the comparator and the clocks. The candidate runs in a process of its own (judge/runner.py,
started through judge/candidate_process.py): it receives inputs in shared memory the judge lends it and
writes its outputs into buffers the judge gave it, and nothing more. ``evaluate`` in judge/sandbox.py is
the entry point for everyone else.

What the judge checks, and why (README "The verification chain" says it for users):
- correctness at the task's shape on fresh inputs each trial, on signed and scaled inputs (an identity passes
  as ReLU on ``torch.rand`` inputs; a constant passes a softmax whose outputs are all under atol), at the
  task's extra shapes and, when it gives none, at an odd-sized shape derived from it;
- the candidate's own code calls no compute op (views, allocation and copies only) and launches a kernel;
- what the candidate's process reports of its conduct (threads, processes, native code, introspection,
  tampering: judge/runner.py) is a ``rejected`` verdict naming the trick;
- timing in settled blocks against the reference, the candidate's calls each on its own input set (refreshed
  between blocks, so no answer can be reused), outputs of timed calls checked against pristine copies of
  their inputs, the timing stream made to wait for every stream a launch used (work left on a side stream
  shows), the event times cross-checked with the judge's own wall clock, and one more trial after timing;
- a time under the physical floor of the task is ``implausible``, never ``ok``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from evoforge.backends.base import (
    Backend,
    Timing,
    device_turn,
    device_turn_path,
    interleaved_blocks,
    lock_key_of,
    versions,
)
from evoforge.judge.arena import Arena, iter_tensors, nested_bytes, share
from evoforge.judge.candidate_process import CandidateGone, CandidateProcess, arena_mode
from evoforge.judge.compare import compare_outputs, flatten_outputs, round_significand
from evoforge.judge.floor import below_floor, floor_verdict, physical_floor_ms
from evoforge.judge.guards import compute_ops
from evoforge.judge.options import ChainOptions  # noqa: F401  (its home is torch-free; the chain's name kept)
from evoforge.judge.precheck import static_verdict
from evoforge.judge.references import ReferenceDraw, ReferenceMemo, budget_bytes, task_key

from evoforge.core import Candidate, EvalResult, EvalStatus, take_turn_while_benchmarking
from evoforge.task import Task, load_task_module, module_constants_of


def _is_compile_exception(exc: BaseException) -> bool:
    """Whether a candidate's exception is a compile failure (the candidate's process classifies its own)."""
    from evoforge.judge.runner import is_compile_exception

    return is_compile_exception(exc)

STARTUP_TIMEOUT_S = 120.0
_COPY_INPUTS_BELOW = 256 << 20  # the reference gets copies of inputs smaller than this, always  # importing a candidate (its module-level code), on top of a fresh process


#: The share of the device's memory the judge's own copies for a task must hold for a candidate's out-of-memory
#: to count as the judge's (on the H200 an 8 GiB task's judge held 120 of 140 GiB; a small task's, a few).
JUDGE_HOLDS_SHARE = 0.5


class _ArenaUnmappable(RuntimeError):
    """The candidate's process could not map the judge's arena: the judge's failure, never the candidate's."""


class _ChainFailure(Exception):
    def __init__(self, status: EvalStatus, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, list | tuple):
        return type(x)(_clone(i) for i in x)
    return x


def _to_device(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, list | tuple):
        return type(x)(_to_device(i, device) for i in x)
    return x


def _to_double(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.double()
    if isinstance(x, list | tuple):
        return type(x)(_to_double(i) for i in x)
    return x


def _nbytes(x: Any) -> int:
    return sum(t.numel() * t.element_size() for t in flatten_outputs(x) if isinstance(t, torch.Tensor))


def _main_dtype(inputs: Any) -> torch.dtype:
    floats = [t for t in flatten_outputs(inputs) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return floats[0].dtype if floats else torch.float32


def _same(a: Any, b: Any) -> bool:
    """Equal structure and values, NaN equal to NaN (an unchanged input, a repeated answer)."""
    ta, tb = list(iter_tensors(a)), list(iter_tensors(b))
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if not torch.equal(x, y):
            if not (x.is_floating_point() and bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all())):
                return False
    return True


def _fingerprint(values: list[Any]) -> tuple[Any, ...]:
    """A few numbers that tell one output from another without keeping it (its sum, sampled elements)."""
    out: list[Any] = []
    for t in iter_tensors(values):
        flat = t.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // 64)][:64].double().cpu()
        total = float(flat.sum(dtype=torch.float64)) if t.is_floating_point() else float(flat.sum())
        out.append((tuple(t.shape), str(t.dtype), total, tuple(sample.tolist())))
    return tuple(out)


def _finite(value: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in iter_tensors(value) if t.is_floating_point())


# ------------------------------------------------------------------------------------------- input variants

def _sign_mask(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random +-1 per element, symmetric where ``t`` is (a symmetric matrix stays symmetric); zeros stay zeros.
    Drawn on the tensor's device (a KernelBench input can be gigabytes)."""
    mask = torch.randint(0, 2, t.shape, generator=generator, device=t.device, dtype=t.dtype).mul_(2).sub_(1)
    if t.dim() >= 2 and t.shape[-1] == t.shape[-2] and torch.equal(t, t.transpose(-1, -2)):
        upper = torch.triu(mask)
        mask = upper + torch.triu(mask, 1).transpose(-1, -2)
    return mask


def input_variant(inputs: list[Any], kind: str, seed: int) -> list[Any]:
    """The task's inputs moved beyond its own distribution, keeping their structure (zeros, symmetry, dtype):

    ``signed``: each floating-point element's sign flipped at random (an all-positive ``torch.rand`` input gets
    negatives: the identity no longer passes as ReLU, TF32 rounding meets cancellation); ``scaled``: signed, then
    times 8 (a softmax whose outputs sat under atol becomes peaked). Integer inputs are left alone.
    """
    generators: dict[torch.device, torch.Generator] = {}

    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            if x.device not in generators:
                generators[x.device] = torch.Generator(device=x.device).manual_seed(seed)
            y = x * _sign_mask(x, generators[x.device])
            return y.mul_(8) if kind == "scaled" else y
        if isinstance(x, list | tuple):
            return type(x)(move(i) for i in x)
        return x

    return [move(x) for x in inputs]


def odd_shapes(task: Task) -> list[dict[str, Any]]:
    """Candidates for an odd-sized correctness shape: every even integer constant of 16 or more that sizes a tensor
    (an input's, a parameter's or buffer's, or the output's), one less (all together first, then one at a time,
    largest first). A kernel that assumes the shape divides its tiles without masking fails there; the chain keeps
    the first one the reference runs at. A constant that sizes no tensor is the model's own setting, not a shape
    (L2/98's ``pool_kernel_size = 16``: the pooling window; a kernel built for the task's window computes the task's
    function), and is left as it is: see ``_sizes_a_tensor``."""
    constants = {**module_constants_of(task), **task.overrides}
    sizes = {k: v for k, v in constants.items()
             if isinstance(v, int) and not isinstance(v, bool) and v >= 16 and v % 2 == 0 and k.isidentifier()
             and not k.startswith("EVOFORGE_")}
    if sizes:
        sizes = {k: v for k, v in sizes.items() if k in _tensor_sizes(task, tuple(sorted(sizes.items())))}
    if not sizes:
        return []
    together = {k: v - 1 for k, v in sizes.items()}
    one_by_one = [{k: v - 1} for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])]
    return [together, *one_by_one] if len(sizes) > 1 else [together]


#: ``_tensor_sizes``' answers by task file and constants: each evaluation's chain asks, the answer never changes.
_TENSOR_SIZES: dict[tuple[str, str], frozenset[str]] = {}


def _tensor_sizes(task: Task, candidates: tuple[tuple[str, int], ...]) -> frozenset[str]:
    """Which of the ``candidates`` constants size a tensor of the task (``_sizes_a_tensor``)."""
    key = (task.path, repr(sorted(task.overrides.items())) + repr(candidates))
    if key not in _TENSOR_SIZES:
        base = _tensor_shapes(task, {})
        _TENSOR_SIZES[key] = frozenset(k for k, v in candidates if _sizes_a_tensor(task, base, k, v))
    return _TENSOR_SIZES[key]


def _tensor_shapes(task: Task, shape: dict[str, Any]) -> tuple[Any, ...] | None:
    """The shapes of the task's inputs, its reference's parameters and buffers, and its output at ``shape``, found
    on the meta device (no memory, no arithmetic); None where the reference does not run there (a data-dependent
    op, a size tied to another)."""
    try:
        module = load_task_module(task, shape)
        with torch.device("meta"), torch.no_grad():
            inputs = list(module.get_inputs())
            model = module.Model(*module.get_init_inputs())
            out = model(*inputs)
        state = [tuple(t.shape) for t in [*model.parameters(), *model.buffers()]]
        return (tuple(tuple(t.shape) for t in iter_tensors(inputs)), tuple(state),
                tuple(tuple(t.shape) for t in iter_tensors(out)))
    except Exception:  # noqa: BLE001  (the task's own code on the meta device: anything may refuse it)
        return None


def _sizes_a_tensor(task: Task, base: tuple[Any, ...] | None, name: str, value: int) -> bool:
    """Whether one less of constant ``name`` changes the shape of an input, a parameter or buffer, or the output.
    Where that cannot be told on the meta device (either run refused), it counts as a size: the check stays as
    strict as it was."""
    if base is None:
        return True
    moved = _tensor_shapes(task, {name: value - 1})
    return moved is None or moved != base


class _Loaded:
    """The task module at one shape, with the reference instance (the judge's, never lent)."""

    def __init__(self, task: Task, shape: dict[str, Any], device: str, seed: int) -> None:
        self.task_module = load_task_module(task, shape)
        self.shape = dict(shape)
        self.device = device
        self.init_inputs = list(self.task_module.get_init_inputs())
        torch.manual_seed(seed)
        self.ref = self.task_module.Model(*self.init_inputs).to(device)  # train mode, as KernelBench runs it
        self._ref64: Any = None
        self.mutates_inputs: bool | None = None  # learnt on its first call (``reference``)
        self.flops: int | None = None  # the reference's FLOPs at this shape, counted once (they do not depend on a draw)
        # The buffers as initialised (a BatchNorm's running statistics move with every call in train mode): put
        # back before the instance serves another candidate, which is built from its state (``restore``).
        self._buffers = {name: b.detach().clone() for name, b in self.ref.named_buffers()}

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.ref.state_dict().values())

    def restore(self) -> None:
        """The instance as first built, for the next candidate (parameters are not written by a forward under
        ``no_grad``; buffers can be)."""
        with torch.no_grad():
            for name, b in self.ref.named_buffers():
                b.copy_(self._buffers[name])

    def draw_inputs(self, seed: int) -> list[Any]:
        """Drawn on the device they are used on: KernelBench's ``get_inputs`` builds tensors with the default
        device, so under ``torch.device`` a 6 GB ``randn`` takes milliseconds on the GPU instead of seconds on
        the host (measured on the H200: the host draw left the GPU idle most of an evaluation)."""
        torch.manual_seed(seed)
        with torch.device(self.device):
            inputs = list(self.task_module.get_inputs())
        return _to_device(inputs, self.device)

    def reference(self, inputs: list[Any]) -> Any:
        """The reference's output, the inputs left as they were. Small inputs are copied for it; big ones (a
        KernelBench input can be gigabytes) only if its first call on a copy showed it writes to them."""
        with torch.no_grad():
            if self.mutates_inputs is None or nested_bytes(inputs) < _COPY_INPUTS_BELOW:
                copies = _clone(inputs)
                out = self.ref(*copies)
                if self.mutates_inputs is None:
                    self.mutates_inputs = not _same(copies, inputs)
                return out
            return self.ref(*(_clone(inputs) if self.mutates_inputs else inputs))

    def reference64(self, inputs: list[Any]) -> Any:
        if self._ref64 is None:
            self._ref64 = copy.deepcopy(self.ref).double()
        with torch.no_grad():
            return self._ref64(*_to_double(_clone(inputs)))


class _Budget:
    """The candidate process's time: ``timeout_s`` in all, the waits for the device's turn not counted."""

    def __init__(self, timeout_s: float) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s

    def extend(self, seconds: float) -> None:
        self.deadline += seconds

    def left(self) -> float:
        return max(self.deadline - time.monotonic(), 1e-3)


def _poison(t: torch.Tensor) -> None:
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


def _correctness_order(n_shapes: int, opts: ChainOptions) -> list[tuple[int, int, str]]:
    """(shape index, trial, variant) in the order the chain runs them: the main shape's first run, then every other
    shape's one run, then the main shape's remaining runs and its signed and scaled inputs. The first call at each
    shape is where the candidate compiles (Triton specialises on sizes): made before the device's turn is taken,
    they leave the turn to measuring, not to compiling (issue Y)."""
    main = [(0, t, "") for t in range(opts.trials)]
    if opts.variants:
        main += [(0, opts.trials, "signed"), (0, opts.trials + 1, "scaled")]
    return main[:1] + [(i, 0, "") for i in range(1, n_shapes)] + main[1:]


class VerificationChain:
    """One candidate through every check; ``run`` never raises for anything the candidate does."""

    def __init__(self, backend: Backend, options: ChainOptions, workdir: Path,
                 notify: Callable[[str], None] | None = None) -> None:
        self.backend = backend
        self.options = options
        self.workdir = workdir
        self.notify = notify or (lambda event: None)  # progress for the caller's clock: "turn-wait", "turn"
        self._arena: Arena | None = None
        self.arena_fallback = ""  # why an exported arena gave way to a staged one (results say so)
        self._flush_ms: float | None = None
        self.representative = backend.name != "interpreter"  # times that say something about a GPU
        self._answers: dict[str, list[Any]] = {}  # per shape, the last trial's expected outputs
        self.references = ReferenceMemo(budget=budget_bytes(str(backend.device)))  # across this process's candidates
        self._task_key = ""

    @property
    def arena(self) -> Arena:
        if self._arena is None:
            mode = "staged" if self.arena_fallback else arena_mode(self.backend.device)
            self._arena = Arena(device=self.backend.device, directory=self.workdir / "arena", mode=mode)
        return self._arena

    def trim(self) -> None:
        """Between evaluations: an arena grown past the reference memo's budget goes back to the device. An
        evaluator waiting for its next candidate would otherwise hold the largest task's inputs, receive buffers and
        timing sets (tens of GiB at KernelBench's 6 GiB tasks), which no other process on the device knows of; the
        next evaluation makes a new one (one allocation)."""
        if self._arena is not None and self._arena.capacity > self.references.budget:
            self._arena.close()
            self._arena = None

    def run(self, task: Task, candidate: Candidate) -> EvalResult:
        started = time.perf_counter()
        base = {"backend": self.backend.name, "arch": self.backend.arch, "versions": versions()}
        if self.options.baseline == "compile":
            return self._compiled_reference(task, started, base)
        failure = static_verdict(candidate)  # once per child: a stamped candidate is not checked again
        if failure is not None:
            return EvalResult.from_dict({**failure.to_dict(), **base, "eval_s": time.perf_counter() - started})
        process: CandidateProcess | None = None
        self._answers = {}
        self._task_key = task_key(task)
        self._draws: dict[str, list[int]] = {}
        hits, misses = self.references.hits, self.references.misses
        self._phases: dict[str, float] = {}
        self._where = "loading the candidate"  # what it was doing, for a crash's message (issue M)
        try:
            budget = _Budget(self.options.timeout_s)
            process = self._start(task, candidate, budget)
            self._phases["start_s"] = time.perf_counter() - started
            result = self._run(task, candidate, process, budget)
        except _ChainFailure as f:
            message, details = str(f), dict(f.details)
            held = self._judge_holds_the_device(message)
            if held:  # the candidate ran out because the judge's copies for this task take the device
                message, details["judge_out_of_memory"] = f"{message} ({held})", True
            result = EvalResult.failure(f.status, message, details=details)
        except CandidateGone as g:
            result = EvalResult.failure(g.status, f"{g} (while {self._where})")
        except Exception as e:  # the judge's own side failed (the reference, the device): start it afresh
            import traceback

            text = "".join(traceback.format_exception_only(type(e), e)).strip()
            details: dict[str, Any] = {"judge_error": True}
            if isinstance(e, torch.OutOfMemoryError):  # the judge's own copies: the task's size, not the candidate
                self.references.clear()
                details["judge_out_of_memory"] = True
                text = (f"the judge ran out of device memory (its inputs, the reference's outputs and the comparison "
                        f"for this task, beside the candidate's process) while {self._where}: {text}")
            result = EvalResult.failure(EvalStatus.RUNTIME_ERROR, f"the judge failed while evaluating: {text}",
                                        details=details)
        finally:
            if process is not None:
                process.close()
        d = result.to_dict()
        d.update({k: v for k, v in base.items() if not d.get(k)})
        d["eval_s"] = time.perf_counter() - started
        d["details"] = {**d.get("details", {}), "phases_s": {k: round(v, 4) for k, v in self._phases.items()},
                        "draws": self._draws,  # the main shape's input seeds, in the order run (a verdict's replay)
                        "reference_memo": {"hits": self.references.hits - hits,
                                           "misses": self.references.misses - misses,
                                           "held_mib": round(self.references.held / 2**20, 1)}}
        if self._arena is not None and self._arena.mode != "shared":
            # staged: inputs and outputs crossed through a file; exported: shared through a descriptor (judge/vmm.py)
            d["details"]["arena"] = self._arena.mode
            if self.arena_fallback:
                d["details"]["arena_fallback"] = self.arena_fallback
        return EvalResult.from_dict(d)

    def _compiled_reference(self, task: Task, started: float, base: dict[str, Any]) -> EvalResult:
        """torch.compile's default build of the reference (static: compiled for the main shape, as a user's one
        line compiles it), checked against the reference and timed against it as candidates are (settled blocks,
        the cache flushed before every call, the device's turn held): the baseline every kernel is held to. It is
        the task's own code, so it runs here in the judge; no candidate process is started."""
        device = self.backend.device
        loaded = _Loaded(task, {}, device, self.options.seed)
        inputs = loaded.draw_inputs(self.options.seed + 1)
        expected = flatten_outputs(loaded.reference(inputs))
        budget = _Budget(self.options.timeout_s)
        self._benchmarks_take_turns()
        torch._dynamo.reset()
        compiled = torch.compile(loaded.ref)
        try:
            t0 = time.perf_counter()
            with torch.no_grad():
                got = flatten_outputs(compiled(*_clone(inputs)))
            self.backend.synchronize()
            compile_s = time.perf_counter() - t0
            cmp = compare_outputs(got, expected, reference64=lambda: flatten_outputs(loaded.reference64(inputs)),
                                  rounded64=lambda: flatten_outputs(loaded.reference64(round_significand(inputs))),
                                  tolerances={getattr(torch, k): v for k, v in self.options.tolerances.items()})
            got = None
            representative = self.representative
            with self._turn(budget), torch.no_grad():
                timings = interleaved_blocks(
                    {"ref": self.backend.block_timer(lambda: loaded.ref(*inputs)),
                     "compiled": self.backend.block_timer(lambda: compiled(*inputs))},
                    budget_ms=self.options.timing_budget_ms,
                    **({"max_reps": 8, "min_reps": 2} if not representative else {}))
        except Exception as e:  # torch.compile failing on the task is the baseline's verdict, said in one line
            first = (str(e).strip().splitlines() or [""])[0][:300]
            return EvalResult.failure(EvalStatus.RUNTIME_ERROR, f"torch.compile failed on the reference: "
                                      f"{type(e).__name__}: {first}", eval_s=time.perf_counter() - started,
                                      details={"baseline": "torch.compile"}, **base)
        finally:
            compiled = None
            torch._dynamo.reset()
        ref_ms, compiled_ms = timings["ref"].median_ms, timings["compiled"].median_ms
        return EvalResult.from_dict({
            **base, "status": str(EvalStatus.OK), "runtime_ms": compiled_ms, "ref_ms": ref_ms,
            "speedup": ref_ms / compiled_ms if compiled_ms > 0 else None, "compile_s": compile_s,
            "timing_representative": timings["compiled"].representative, "max_abs_err": cmp.max_abs_err,
            "criterion": cmp.criterion, "eval_s": time.perf_counter() - started,
            "device_name": str(self.backend.properties.get("name", "")),
            "message": "" if cmp.ok else f"torch.compile's own result fails the chain's comparison: {cmp.message}",
            "details": {"baseline": "torch.compile", "correct": cmp.ok}})

    def _benchmarks_take_turns(self) -> None:
        """Inductor's autotuning in this process (the baseline's compile: its launch configs and GEMM tiles are
        chosen by timing them) holds the device's turn, so that a candidate timed at once on the device does not
        choose them for it."""
        key = lock_key_of(self.backend)
        if key is not None:
            take_turn_while_benchmarking(device_turn_path(key))

    def _judge_holds_the_device(self, message: str) -> str:
        """Where the candidate's process ran out of device memory while the judge's own copies for this task
        (inputs, the reference's outputs, the arena) held at least half of the device: one line saying so, else
        "". A candidate that runs out beside a judge that holds little (or says so on purpose) is its own fault."""
        if "OutOfMemoryError" not in message and "out of memory" not in message:
            return ""
        device = str(self.backend.device)
        if not device.startswith("cuda"):
            return ""
        try:
            held = torch.cuda.memory_reserved(device)
            total = torch.cuda.get_device_properties(device).total_memory
        except Exception:  # noqa: BLE001  (no figure: no claim)
            return ""
        if held < JUDGE_HOLDS_SHARE * total:
            return ""
        return (f"the judge ran out of device memory for it: its own copies for this task held {held / 2**30:.0f} "
                f"GiB of the device's {total / 2**30:.0f} GiB")

    # ------------------------------------------------------------------------------ the candidate's process
    def _memo_key(self, shape: dict[str, Any], *draw: Any) -> tuple[Any, ...]:
        """What the reference's answers at ``shape`` depend on (judge/references.py), and the draw's own seeds."""
        return (self._task_key, json.dumps(shape, sort_keys=True), str(self.backend.device), self.options.seed, *draw)

    def _loaded(self, task: Task, shape: dict[str, Any]) -> _Loaded:
        """The task loaded at ``shape``, kept across candidates while it fits the reference memo."""
        key = self._memo_key(shape)
        loaded = self.references.model(key)
        if loaded is None:
            loaded = _Loaded(task, shape, self.backend.device, self.options.seed)
            self.references.keep_model(key, loaded, loaded.nbytes)
        else:
            loaded.restore()
        return loaded

    def _start(self, task: Task, candidate: Candidate, budget: _Budget) -> CandidateProcess:
        workdir = self.workdir / f"candidate-{candidate.id}-{secrets.token_hex(4)}"
        spec = {"source": candidate.source, "source_file": str(workdir / "candidate.py"), "params": candidate.params,
                "language": candidate.language, "device": self.backend.device, "backend": self.backend.name,
                "backend_options": {"arch": self.backend.arch}, "allow": list(task.allow),
                "interpreted": self.backend.name == "interpreter", "arena": self.arena.handle()}
        process = CandidateProcess(spec=spec, workdir=workdir, startup_timeout_s=min(budget.left(), STARTUP_TIMEOUT_S),
                                   arena_fd=self.arena.fd)
        process.arena_generation = self.arena.generation
        exported = self.arena.mode == "exported"
        try:
            self._judge(process.ready, what="importing the candidate")
        except _ArenaUnmappable:
            process.close()
            if not exported:
                raise
            return self._start(task, candidate, budget)  # once more, through the staged arena _judge put in place
        return process

    def _judge(self, reply: dict[str, Any], *, what: str) -> dict[str, Any]:
        """Turn what the candidate's process reports into a verdict: its conduct first (it names the trick), then
        an error its code raised."""
        violations = reply.get("violations") or []
        if violations:
            kinds = sorted({v.get("kind", "?") for v in violations})
            lines = "; ".join(dict.fromkeys(str(v.get("message", "")) for v in violations))
            raise _ChainFailure(EvalStatus.REJECTED, f"{what}: {lines}", violations=kinds)
        error = reply.get("error")
        if error and error.get("kind") == "arena":
            if self._arena is not None and self._arena.mode == "exported":
                # The descriptor did not map in the candidate's process (a driver or namespace that refuses it):
                # this judge stages its arena from now on (``arena``), as where the driver cannot export at all.
                self._arena.close()
                self._arena = None
                self.arena_fallback = str(error.get("message", ""))
            raise _ArenaUnmappable(str(error.get("message", "")))
        if error:
            status = {"compile_error": EvalStatus.COMPILE_ERROR, "rejected": EvalStatus.REJECTED}.get(
                error.get("kind"), EvalStatus.RUNTIME_ERROR)
            raise _ChainFailure(status, str(error.get("message", "")))
        return reply

    def _request(self, process: CandidateProcess, budget: _Budget, op: str, stage: str,
                 **payload: Any) -> dict[str, Any]:
        if process.arena_generation != self.arena.generation:  # the arena grew since the process mapped it
            payload["arena"] = self.arena.handle()
            process.arena_generation = self.arena.generation
        staged = self.arena.stage(payload)
        if staged is not None:
            payload["stage"] = staged
        reply = process.request(op, budget.left(), arena_fd=self.arena.fd, **payload)
        self.arena.unstage(staged)
        return self._judge(reply, what=stage)

    @contextlib.contextmanager
    def _turn(self, budget: _Budget) -> Iterator[dict[str, float]]:
        """The device's turn, telling the caller when the wait starts and ends (it stops the timeout's clock)."""
        key = lock_key_of(self.backend)
        if key is not None:
            self.notify("turn-wait")
        with device_turn(key) as info:
            budget.extend(info["wait_s"])
            if key is not None:
                self.notify("turn")
            yield info

    # ------------------------------------------------------------------------------ correctness
    def _shapes(self, task: Task) -> list[tuple[dict[str, Any], str]]:
        shapes = [({}, "main"), *((s, "extra") for s in task.shapes)]
        if not task.shapes and self.options.odd_shape:
            known = self.references.odd_shapes(self._task_key)
            if known is None:  # chosen once per task in this process: it runs the reference at candidate sizes
                known = []
                for candidate_shape in odd_shapes(task):
                    try:
                        loaded = _Loaded(task, candidate_shape, self.backend.device, self.options.seed)
                        out = loaded.reference(loaded.draw_inputs(self.options.seed))
                    except Exception:  # the reference does not run there (a size tied to another): try the next
                        continue
                    if _finite(out):
                        known = [candidate_shape]
                        break
                self.references.keep_odd_shapes(self._task_key, known)
            shapes += [(shape, "odd") for shape in known]
        return shapes

    def _expected(self, loaded: _Loaded, inputs: list[Any], draw: tuple[Any, ...], *,
                  count_flops: bool = False) -> tuple[tuple[Any, ...], ReferenceDraw]:
        """The reference's answer to ``draw`` (made into ``inputs``): kept from an earlier candidate where the memo
        has it (judge/references.py), else computed on the judge's own copy (and its FLOPs counted if asked)."""
        started = time.perf_counter()
        memo_key = self._memo_key(loaded.shape, *draw)
        known = self.references.get(memo_key)
        count = count_flops and loaded.flops is None
        if known is None or count:
            counter = None
            if count:
                from torch.utils.flop_counter import FlopCounterMode

                counter = FlopCounterMode(display=False)
            with counter or contextlib.nullcontext():
                expected = loaded.reference(inputs)
            if counter is not None:
                loaded.flops = counter.get_total_flops()
            known = known or self.references.keep(memo_key, expected, mutates_inputs=bool(loaded.mutates_inputs))
        loaded.mutates_inputs = known.mutates_inputs  # what its first call showed, in whichever candidate's turn
        self._phases["reference_s"] = self._phases.get("reference_s", 0.0) + time.perf_counter() - started
        return memo_key, known

    def _expected64(self, loaded: _Loaded, inputs: list[Any], memo_key: tuple[Any, ...],
                    known: ReferenceDraw) -> tuple[Callable[[], Any], Callable[[], Any]]:
        """The comparison's lazy float64 yardsticks for a draw (the reference in float64, and on inputs rounded to
        the split's bits), each computed once per draw in this process."""
        def reference64() -> Any:
            return self.references.lazy(memo_key, known, "reference64",
                                        lambda: flatten_outputs(loaded.reference64(inputs)))

        def rounded64() -> Any:
            return self.references.lazy(memo_key, known, "rounded64",
                                        lambda: flatten_outputs(loaded.reference64(round_significand(inputs))))

        return reference64, rounded64

    def _trial(self, process: CandidateProcess, budget: _Budget, loaded: _Loaded, key: str, inputs: list[Any],
               where: str, *, draw: tuple[Any, ...], watch: bool,
               flops: list[int] | None = None, only_if_finite: bool = False) -> dict[str, Any] | None:
        """One correctness trial: the reference on the judge's own copy (or its answer to the same ``draw`` kept from
        an earlier candidate: judge/references.py), the candidate on a lent copy."""
        memo_key, known = self._expected(loaded, inputs, draw, count_flops=flops is not None)
        expected = known.expected
        reference_mutates = known.mutates_inputs
        if flops is not None:
            flops.append(int(loaded.flops or 0))
        if only_if_finite and not _finite(expected):
            return None
        expected_flat = flatten_outputs(expected)
        arena = self.arena
        arena.reset()
        need = nested_bytes(inputs) + nested_bytes(expected_flat)
        if self.options.timing:  # room for the timing phase too, now: a mapping replaced later lingers
            pool, checked = _pool_plan(nested_bytes(inputs), nested_bytes(expected_flat), self.representative)
            need = max(need, (pool + 1) * nested_bytes(inputs) + checked * nested_bytes(expected_flat))
        arena.reserve(need)
        lent, input_desc = share(arena, inputs)
        receive, receive_desc = [], []
        for value in expected_flat:
            if isinstance(value, torch.Tensor):
                buffer, desc = arena.empty(tuple(value.shape), value.dtype)
                _poison(buffer)
                receive.append(buffer)
                receive_desc.append(desc)
            else:
                receive.append(value)
                receive_desc.append(None)
        self.backend.synchronize()
        reply = self._request(process, budget, "call", f"forward at {where}", key=key, inputs=input_desc,
                              receive=receive_desc, watch=watch, what=f"forward raised ({where})")
        if not reply.get("copied"):
            raise _ChainFailure(EvalStatus.INCORRECT, f"wrong output at {where}: "
                                + _structure_mismatch(reply.get("outputs") or [], expected_flat))
        got = [value if desc is None else buffer for value, buffer, desc in
               zip(expected_flat, receive, receive_desc, strict=True)]
        for i, desc in enumerate(receive_desc):  # non-tensor outputs come back as values
            if desc is None:
                got[i] = (reply.get("outputs") or [{}] * len(receive_desc))[i].get("value")
        reference64, rounded64 = self._expected64(loaded, inputs, memo_key, known)
        cmp = compare_outputs(got, expected_flat, reference64=reference64, rounded64=rounded64,
                              tolerances={getattr(torch, k): v for k, v in self.options.tolerances.items()})
        earlier = self._answers.get(key)
        self._answers[key] = _fingerprint(expected_flat)
        if not cmp.ok:
            hint = ""
            if earlier is not None and _fingerprint(got) == earlier:
                hint = (" — it returned exactly the answer to an earlier call on other inputs (a cached result, "
                        "keyed on something that repeats such as the input's address)")
            raise _ChainFailure(EvalStatus.INCORRECT, f"wrong output at {where}: {cmp.message}{hint}",
                                max_abs_err=cmp.max_abs_err, criterion=cmp.criterion)
        if not reference_mutates and not _same(list(lent), inputs):
            changed = next(i for i, (a, b) in enumerate(zip(iter_tensors(list(lent)), iter_tensors(inputs),
                                                            strict=True)) if not _same(a, b))
            raise _ChainFailure(EvalStatus.REJECTED, f"forward modified its input tensor {changed} in place at "
                                f"{where} (the reference leaves its inputs as they were: a caller's tensors are "
                                "not the kernel's to overwrite)")
        return {"reply": reply, "cmp": cmp}

    def _anticheat(self, task: Task, reply: dict[str, Any], where: str, language: str) -> None:
        if not self.options.anticheat:
            return
        if int(reply.get("launches", 0)) == 0:
            raise _ChainFailure(EvalStatus.REJECTED, f"forward launched no {language} kernel at {where}: "
                                "the answer must come from a kernel")
        cheats = compute_ops(set(reply.get("ops") or {}), task.allow_ops)
        if cheats:
            raise _ChainFailure(EvalStatus.REJECTED,
                                f"forward calls PyTorch compute op(s) {', '.join(cheats)} that the kernel must do "
                                "itself (views, allocation and copies are fine; a task may allow ops with "
                                "EVOFORGE_ALLOW_OPS)")

    def _run(self, task: Task, candidate: Candidate, process: CandidateProcess, budget: _Budget) -> EvalResult:
        opts = self.options
        language = "CuTe" if candidate.language == "cute" else "Triton"
        t0 = time.perf_counter()
        compile_s = None
        turn: dict[str, float] | None = None
        worst = (0.0, 0.0)
        criteria: set[str] = set()
        main: _Loaded | None = None
        flops: list[int] = []
        ran: dict[str, set[str]] = {}  # per shape, the kernels the candidate launched there (a path per shape)
        shapes = self._shapes(task)
        order = _correctness_order(len(shapes), opts)
        main_draws = [opts.seed + trial + 1 for shape_index, trial, _ in order if shape_index == 0]
        if opts.timing:  # the run after timing, only where it is run: a fresh draw's picks come from draws that ran
            main_draws.append(opts.seed + 3_000_000)
        if opts.fresh_draws:
            # the pool is the seed's: a re-check (its own seed, evoforge/confirm.py) meets no draw the search met
            main_draws = self.references.draw_seeds((self._task_key, f"{{}} seed {opts.seed}"), main_draws)
        self._draws = {"main": main_draws}
        with contextlib.ExitStack() as stack:
            loaded_at: dict[int, _Loaded] = {}
            main_step = 0
            for shape_index, trial, variant in order:
                shape, kind = shapes[shape_index]
                key = str(shape_index)
                if shape_index not in loaded_at:
                    self._where = f"building ModelNew at {f'shape {shape}' if shape else 'the main shape'}"
                    loaded_at = {i: v for i, v in loaded_at.items() if i == 0}  # an earlier odd/extra shape is done
                    loaded_at[shape_index] = self._loaded(task, shape)
                    self._build(process, budget, loaded_at[shape_index], key)
                loaded = loaded_at[shape_index]
                if shape_index == 0:
                    main = loaded
                if turn is None and compile_s is not None and shape_index == 0 and (trial, variant) != (0, ""):
                    # Every shape's first call made (the candidate's compiles: Triton specialises on sizes, so an
                    # odd shape compiles again): the rest of the checks run with the device's turn held, while
                    # other evaluations of this device compile (or wait) meanwhile.
                    turn = stack.enter_context(self._turn(budget))
                if shape_index == 0:
                    draw_seed, main_step = main_draws[main_step], main_step + 1
                else:
                    draw_seed = opts.seed + 1000 * shape_index + trial + 1
                inputs = loaded.draw_inputs(draw_seed)
                if variant:
                    inputs = input_variant(inputs, variant, opts.seed + trial)
                where = (f"shape {shape} ({'odd size, derived from the task' if kind == 'odd' else 'extra'})"
                         if shape else "the main shape")
                plan_size = opts.trials + (2 if opts.variants else 0) if shape_index == 0 else 1
                where += f", {variant} inputs" if variant else f", correctness run {trial + 1} of {plan_size}"
                self._where = f"running at {where}"
                outcome = self._trial(process, budget, loaded, key, inputs, where, watch=True,
                                      draw=(draw_seed, variant, opts.seed + trial if variant else None),
                                      flops=flops if (shape_index == 0 and trial == 0 and not variant) else None,
                                      only_if_finite=bool(variant))
                if outcome is None:
                    continue  # the reference itself is not finite there: not the candidate's to match
                if compile_s is None:
                    compile_s = time.perf_counter() - t0  # loaded, compiled and run once at the main shape
                self._anticheat(task, outcome["reply"], where, language)
                label = "main" if not shape else (f"odd {shape}" if kind == "odd" else f"extra {shape}")
                ran.setdefault(label, set()).update(str(k) for k in outcome["reply"].get("kernels") or {})
                cmp = outcome["cmp"]
                criteria.add(cmp.criterion)
                worst = (max(worst[0], cmp.max_abs_err), max(worst[1], cmp.max_rel_err))
                inputs = outcome = None  # not held through the next draw or the timing (gigabytes at KernelBench's sizes)
            if turn is None and compile_s is not None and opts.timing:
                turn = stack.enter_context(self._turn(budget))
            assert main is not None
            self._phases["correctness_s"] = time.perf_counter() - t0
            criterion = "float64" if "float64" in criteria else "allclose"
            result: dict[str, Any] = {"status": EvalStatus.OK, "max_abs_err": worst[0], "max_rel_err": worst[1],
                                      "criterion": criterion, "compile_s": compile_s}
            if opts.timing:
                self._where = "being timed at the main shape"
                t1 = time.perf_counter()
                result.update(self._time(process, budget, main, task, flops[0] if flops else 0))
                after = main.draw_inputs(main_draws[-1])
                self._trial(process, budget, main, "0", after, "the main shape, fresh inputs after timing",
                            draw=(main_draws[-1], "", None), watch=False)
                self._phases["timing_s"] = time.perf_counter() - t1
            result["details"] = {"kernels": {label: sorted(names) for label, names in ran.items()}}
            if turn is not None:
                result["details"].update({"turn_wait_s": turn["wait_s"], "turn": [turn["start"], time.time()]})
        return EvalResult.from_dict({**result, "status": str(result["status"])})

    def _build(self, process: CandidateProcess, budget: _Budget, loaded: _Loaded, key: str) -> None:
        state = loaded.ref.state_dict()
        arena = self.arena
        arena.reset()
        arena.reserve(nested_bytes(list(state.values())))
        state_desc = {name: share(arena, tensor.detach())[1] for name, tensor in state.items()}
        self.backend.synchronize()
        self._request(process, budget, "build", "ModelNew(*get_init_inputs())", key=key,
                      init_inputs=loaded.init_inputs, state=state_desc, seed=self.options.seed)

    # ------------------------------------------------------------------------------ timing
    def _time(self, process: CandidateProcess, budget: _Budget, loaded: _Loaded, task: Task,
              flops: int) -> dict[str, Any]:
        timer = _CandidateTimer(self, process, budget, loaded)
        ref_inputs = timer.settle
        out_bytes = timer.out_nbytes  # the reference's answer on the settle set is kept (judge/references.py)
        with torch.no_grad():
            def run_reference() -> Any:
                return loaded.ref(*ref_inputs)

            timings = interleaved_blocks({"ref": self.backend.block_timer(run_reference), "candidate": timer},
                                         budget_ms=self.options.timing_budget_ms,
                                         **({"max_reps": 8, "min_reps": 2} if not timer.representative else {}))
        believed = timer.check()
        if believed is not None:
            timings["candidate"] = Timing.from_samples(believed, representative=timings["candidate"].representative)
        ref_ms, cand_ms = timings["ref"].median_ms, timings["candidate"].median_ms
        representative = timings["candidate"].representative
        result: dict[str, Any] = {"runtime_ms": cand_ms, "ref_ms": ref_ms,
                                  "speedup": ref_ms / cand_ms if cand_ms > 0 else None,
                                  "timing_representative": representative,
                                  "device_name": str(self.backend.properties.get("name", ""))}
        floors = physical_floor_ms(self.backend.arch, bytes_moved=_nbytes(ref_inputs) + out_bytes, flops=flops,
                                   dtype=_main_dtype(ref_inputs), passes=task.floor_passes)
        bounds = physical_floor_ms(self.backend.arch, bytes_moved=_nbytes(ref_inputs) + out_bytes, flops=flops,
                                   dtype=_main_dtype(ref_inputs), passes=task.floor_passes, measured=False)
        if floors and bounds and representative:
            floor_ms = floors[0]
            result["floor_ms"] = floor_ms
            result["pct_of_floor"] = 100.0 * floor_ms / cand_ms
            status, message = floor_verdict(cand_ms, memory_floor_ms=bounds[1], compute_floor_ms=bounds[2],
                                            flops=flops, allow=task.allow)
            if status is not None:
                raise _ChainFailure(status, message, measured_ms=cand_ms)
            result["below_floor"] = below_floor(cand_ms, compute_floor_ms=bounds[2], allow=task.allow)
        elif not representative:
            result["message"] = "timed on the Triton interpreter: times are not representative of a GPU"
        return result

    def flush_ms(self) -> float:
        """One flush of the device's cache, timed by the judge (the wall-clock cross-check subtracts it)."""
        if self._flush_ms is None:
            timer = self.backend.block_timer(self.backend.flush)
            timer.per_call_ms()
            self._flush_ms = sorted(timer.block(10))[5] if timer.representative else 0.0
        return self._flush_ms


# Timing checks of the candidate's blocks (on a GPU, where times are representative).
_JOIN_SLACK = 1.10  # the timed stream waiting for every stream a launch used may add at most 10%...
_JOIN_SLACK_MS = 0.010  # ...plus 10 us a call (two events recorded back to back)
_WALL_FACTOR = 3.0  # the judge's wall clock over a block may exceed the events' account at most 3x...
_WALL_SLACK_MS = 5.0  # ...plus 5 ms, beyond a request's own round trip (measured: the slowest of three pings)
_CHECKED_OUTPUTS = 3  # timed calls whose outputs the judge checks, per block (the last one among them)
_MAX_POOL = 64  # input sets the candidate's timed calls rotate through (none is used twice in a block)


def _pool_plan(set_bytes: int, out_bytes: int, representative: bool) -> tuple[int, int]:
    """(input sets the timed calls rotate through, timed outputs checked per block) for a task's sizes: sets up to
    4 GiB of inputs and outputs on a GPU (64 MiB on the interpreter); big outputs get the last call checked."""
    budget_bytes = (4 << 30) if representative else (64 << 20)
    pool = int(max(1, min(_MAX_POOL if representative else 10, budget_bytes // max(set_bytes + out_bytes, 1))))
    return pool, (_CHECKED_OUTPUTS if out_bytes < (256 << 20) else 1)


class _CandidateTimer:
    """The candidate's side of ``interleaved_blocks``: each block runs in the candidate's process, on input sets
    the judge draws afresh for it, and the judge checks what came back before it believes the times."""

    def __init__(self, chain: VerificationChain, process: CandidateProcess, budget: _Budget, loaded: _Loaded) -> None:
        self.chain = chain
        self.process = process
        self.budget = budget
        self.loaded = loaded
        self.representative = chain.representative
        self._rng = random.Random(chain.options.seed)
        self._draws = 0
        self._problems: list[tuple[EvalStatus, str]] = []
        self._unexplained: list[str] = []  # blocks the judge's wall clock does not believe
        self._blocks_times: list[tuple[list[float], bool]] = []  # each block's times, and whether the clock agreed
        backend = chain.backend
        settle = loaded.draw_inputs(chain.options.seed + 1_999_999)
        self.settle = settle  # the judge's own copy (the reference is timed on it); the candidate gets a lent one
        out = flatten_outputs(chain._expected(loaded, settle, (chain.options.seed + 1_999_999, "", None))[1].expected)
        self._out_bytes = nested_bytes(out)
        self.out_nbytes = _nbytes(out)  # the physical floor's count (elements times their size, as the inputs')
        set_bytes = nested_bytes(settle)
        self.pool_size, self._checked = _pool_plan(set_bytes, self._out_bytes, self.representative)
        arena = chain.arena
        arena.reset()
        arena.reserve(set_bytes * (self.pool_size + 1) + self._out_bytes * self._checked)
        _, self._settle_desc = share(arena, settle)
        self._pool: list[tuple[Any, Any]] = []  # (lent copy, descriptor)
        self._pristine: list[list[Any]] = []
        self._pristine_seeds: list[int] = []
        for _ in range(self.pool_size):
            inputs = self._draw()
            lent, desc = share(arena, inputs)
            self._pool.append((lent, desc))
            self._pristine.append(inputs)
            self._pristine_seeds.append(self._seed())
        self._receive = []
        for _ in range(self._checked):
            buffers = []
            for value in out:
                buffers.append(arena.empty(tuple(value.shape), value.dtype) if isinstance(value, torch.Tensor)
                               else None)
            self._receive.append(buffers)
        del out
        backend.synchronize()
        self._blocks = 0
        # What a request costs without any work (the channel, the reply, the process's own checks after each
        # request; with a staged arena, copying a block's inputs across): the wall-clock cross-check below looks
        # past it. The ping names the block's inputs, so a staged arena copies exactly what a block's request does.
        round_trips = []
        for _ in range(3):
            started = time.perf_counter()
            chain._request(process, budget, "ping", "timing (round trip)", settle=self._settle_desc,
                           pool=[desc for _, desc in self._pool])
            round_trips.append((time.perf_counter() - started) * 1e3)
        self._round_trip_ms = max(round_trips)

    def _draw(self) -> list[Any]:
        self._draws += 1
        return self.loaded.draw_inputs(self._seed())

    def _seed(self) -> int:
        """The seed of the latest draw: the same sequence every evaluation, so the reference's answers to the sets
        whose outputs are checked are kept across candidates (judge/references.py)."""
        return self.chain.options.seed + 2_000_000 + self._draws

    def per_call_ms(self) -> float:
        reply = self.chain._request(self.process, self.budget, "estimate", "timing (warm-up)", key="0",
                                    settle=self._settle_desc, calls=3 if self.representative else 1)
        return float(reply["per_call_ms"])

    def _refresh(self) -> None:
        """New contents for every pool set between blocks: an answer kept from an earlier block is wrong now."""
        for i, (lent, _) in enumerate(self._pool):
            inputs = self._draw()
            for dst, src in zip(iter_tensors(lent), iter_tensors(inputs), strict=True):
                dst.copy_(src)
            self._pristine[i] = inputs
            self._pristine_seeds[i] = self._seed()
        self.chain.backend.synchronize()

    def block(self, reps: int) -> list[float]:
        # The device settles for as long as planned; the interpreter has nothing to settle: every call is timed.
        settle_reps, reps = (reps if self.representative else 0), min(reps, self.pool_size)
        if self._blocks:
            self._refresh()
        self._blocks += 1
        started = time.perf_counter()
        reply = self.chain._request(self.process, self.budget, "time", "timing", key="0", settle=self._settle_desc,
                                    pool=[desc for _, desc in self._pool], reps=reps, settle_reps=settle_reps)
        wall_ms = (time.perf_counter() - started) * 1e3
        times = [float(t) for t in reply.get("times_ms", [])]
        joined = [float(t) for t in reply.get("joined_ms", [])]
        if len(times) != reps or len(joined) != reps or not all(t >= 0 for t in times):
            raise _ChainFailure(EvalStatus.REJECTED, f"timing: the candidate's process returned {len(times)} times "
                                f"for {reps} timed calls")
        self._verify_outputs(reps)
        if self.representative:
            hidden = sum(joined) - sum(times)
            if hidden > (_JOIN_SLACK - 1) * sum(times) + reps * _JOIN_SLACK_MS:
                self._problems.append((EvalStatus.REJECTED, (
                    f"forward leaves work on another CUDA stream that the result does not wait for: the timed stream "
                    f"waiting for every stream its launches used took {sum(joined):.4g} ms over {reps} calls, "
                    f"{sum(times):.4g} ms without (work the clock does not see)")))
            calls = 2 * max(settle_reps, reps)  # the settling half and the timed half, every call flushed first
            explained = calls * (sum(times) / reps + self.chain.flush_ms())
            if wall_ms - self._round_trip_ms > _WALL_FACTOR * explained + _WALL_SLACK_MS:
                self._unexplained.append(
                    f"the judge's wall clock saw {wall_ms:.4g} ms for a block whose device events account for "
                    f"{explained:.4g} ms (calls and cache flushes; a request's own round trip is "
                    f"{self._round_trip_ms:.3g} ms): the event times do not add up (patched timing, or work the "
                    "timed stream does not see)")
                self._blocks_times.append((times, False))
                return times
        self._blocks_times.append((times, True))
        return times

    def _verify_outputs(self, reps: int) -> None:
        """Outputs of a few timed calls, chosen after the block (the last among them), against the reference
        on pristine copies of their inputs: a timing-only shortcut computes something else."""
        indices = sorted({reps - 1, *self._rng.sample(range(reps), min(reps, self._checked) - 1)})
        receive = self._receive[:len(indices)]
        descs = []
        for buffers in receive:
            row = []
            for item in buffers:
                if item is None:
                    row.append(None)
                else:
                    _poison(item[0])
                    row.append(item[1])
            descs.append(row)
        self.chain.backend.synchronize()
        reply = self.chain._request(self.process, self.budget, "fetch", "timing (outputs)", indices=indices,
                                    receive=descs)
        for n, (index, copied) in enumerate(zip(indices, reply.get("copied", []), strict=True)):
            pristine = self._pristine[index % self.pool_size]
            draw = (self._pristine_seeds[index % self.pool_size], "", None)
            memo_key, known = self.chain._expected(self.loaded, pristine, draw)
            expected = flatten_outputs(known.expected)
            if not copied:
                raise _ChainFailure(EvalStatus.INCORRECT, f"timed call {index + 1} of a timing block returned "
                                    "outputs of another structure than the correctness trials did")
            got = [item if item is None else item[0] for item in receive[n]]
            got = [e if g is None else g for g, e in zip(got, expected, strict=True)]
            cmp = compare_outputs(got, expected, reference64=None,
                                  tolerances={getattr(torch, k): v for k, v in self.chain.options.tolerances.items()})
            if not cmp.ok:
                reference64, rounded64 = self.chain._expected64(self.loaded, pristine, memo_key, known)
                cmp64 = compare_outputs(got, expected, reference64=reference64, rounded64=rounded64)
                if not cmp64.ok:
                    raise _ChainFailure(EvalStatus.INCORRECT, f"a timed run's output is wrong (call {index + 1} "
                                        f"of timing block {self._blocks}): {cmp.message} — the timed runs must "
                                        "compute what the correctness trials did, on every input (an answer kept "
                                        "from an earlier call, or a shortcut taken only when timed)")
        self.chain._request(self.process, self.budget, "drop", "timing (outputs)")

    def check(self) -> list[float] | None:
        """Raise what the blocks showed; else the times to believe, where the wall clock disbelieved some blocks
        (None: all of them). See ``believed_times``."""
        if self._problems:
            status, message = self._problems[0]
            raise _ChainFailure(status, message)
        return believed_times(self._blocks_times, self._unexplained)


def believed_times(blocks: list[tuple[list[float], bool]], unexplained: list[str]) -> list[float] | None:
    """A block whose device events do not account for the judge's wall clock is not believed. Patched timing or
    work the timed stream does not see shows in every block, so only a candidate none of whose blocks is believed
    is rejected; a host stalled by its other work (16 compiles beside the evaluation) stretches one block's wall
    clock, and that block's times are dropped rather than the candidate (on the H200, a correct KernelBench seed
    was rejected so). A candidate that fakes some blocks gains nothing: those are the blocks dropped.
    Returns the believed blocks' times, or None when every block was believed."""
    if not unexplained:
        return None
    kept = [t for times, agreed in blocks for t in times if agreed]
    if not kept:
        raise _ChainFailure(EvalStatus.REJECTED, unexplained[0] + f" (in every one of its {len(blocks)} timed blocks)")
    return kept


def _structure_mismatch(outputs: list[dict[str, Any]], expected: list[Any]) -> str:
    """Why the candidate's outputs did not fit the judge's receive buffers, in compare_outputs' words."""
    if len(outputs) != len(expected):
        return f"forward returned {len(outputs)} output(s); the reference returns {len(expected)}"
    for i, (got, exp) in enumerate(zip(outputs, expected, strict=True)):
        if not isinstance(exp, torch.Tensor):
            continue
        if not got.get("tensor"):
            return f"output {i} is {got.get('type', type(got.get('value')).__name__)}, expected a tensor"
        if tuple(got.get("shape", ())) != tuple(exp.shape):
            return f"output {i} has shape {tuple(got.get('shape', ()))}, expected {tuple(exp.shape)}"
        if got.get("dtype") != str(exp.dtype).removeprefix("torch."):
            return f"output {i} has dtype torch.{got.get('dtype')}, expected {exp.dtype}"
    return "its outputs could not be copied back"
