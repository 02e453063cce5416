"""The verification chain, written once over any Backend: static -> load/compile -> correctness -> timing.

This module runs untrusted code. It is meant to be called inside the evaluation process (backends/worker.py),
which the caller can kill; ``evaluate`` in backends/sandbox.py is the entry point for everyone else.
"""

from __future__ import annotations

import contextlib
import copy
import platform
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from evoforge.backends.base import Backend, device_turn
from evoforge.backends.compare import compare_outputs, flatten_outputs
from evoforge.backends.guards import LaunchCounter, OpRecorder, forbidden_ops
from evoforge.backends.static import static_check

from evoforge.core import Candidate, EvalResult, EvalStatus
from evoforge.task import Task, exec_module_file, load_task_module


@dataclass(frozen=True)
class ChainOptions:
    trials: int = 3  # correctness trials at the main shape, fresh inputs each; extra shapes get one each
    seed: int = 42
    timing: bool = True
    timing_budget_ms: float = 1000.0
    anticheat: bool = True
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype name -> (atol, rtol)

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "seed": self.seed, "timing": self.timing,
                "timing_budget_ms": self.timing_budget_ms, "anticheat": self.anticheat,
                "tolerances": {k: list(v) for k, v in self.tolerances.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChainOptions:
        d = dict(d)
        d["tolerances"] = {k: tuple(v) for k, v in d.get("tolerances", {}).items()}
        return cls(**d)


class _ChainFailure(Exception):
    def __init__(self, status: EvalStatus, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.details = details


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    if torch.version.cuda:
        out["cuda"] = torch.version.cuda
    return out


def _short_traceback(exc: BaseException, source_file: str | None, limit_chars: int = 4000) -> str:
    """The part of a traceback a repair prompt needs: frames in the candidate, then the error itself."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if source_file and f.filename == source_file]
    lines = [f"  line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in own[-3:]]
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if len(text) > limit_chars:  # compiler errors can be long: keep the head (the fault) and the tail
        text = text[: limit_chars // 2] + "\n...\n" + text[-limit_chars // 2:]
    return "\n".join([*lines, text]) if lines else text


def _is_compile_exception(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"CompilationError", "OutOfResources", "PTXASError", "CompileTimeAssertionFailure",
                         "UnsupportedLanguageConstruct", "InterpreterError", "CuteCompileError"})


def _to_device(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, list | tuple):
        return type(x)(_to_device(i, device) for i in x)
    return x


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, list | tuple):
        return type(x)(_clone(i) for i in x)
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


@contextlib.contextmanager
def _poisoned_allocations() -> Iterator[None]:
    """New memory from torch.empty & co. is filled with NaN (ints: max value), so unwritten outputs fail."""
    import torch.utils.deterministic as det

    was_det, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield
    finally:
        det.fill_uninitialized_memory = was_fill
        torch.use_deterministic_algorithms(was_det, warn_only=was_warn)


@contextlib.contextmanager
def _interpreter_autotune_first_config(enabled: bool) -> Iterator[None]:
    """Multi-config ``triton.autotune`` needs a GPU to benchmark; on the interpreter the first config is used."""
    if not enabled:
        yield
        return
    from triton.runtime.autotuner import Autotuner

    original = Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(self.configs) > 1:
            self.configs = self.configs[:1]
        return original(self, *args, **kwargs)

    Autotuner.run = run
    try:
        yield
    finally:
        Autotuner.run = original


class _Loaded:
    """The task and candidate modules at one shape, with one reference and one candidate instance."""

    def __init__(self, task: Task, candidate_module: Any, shape: dict[str, Any], device: str, seed: int) -> None:
        self.task_module = load_task_module(task, shape)
        self.device = device
        init_inputs = list(self.task_module.get_init_inputs())
        torch.manual_seed(seed)
        self.ref = self.task_module.Model(*init_inputs).to(device)  # train mode, as KernelBench runs it
        try:
            torch.manual_seed(seed)
            self.new = candidate_module.ModelNew(*init_inputs)
            self._align_weights()
            self.new = self.new.to(device)
        except Exception as e:
            raise _ChainFailure(EvalStatus.RUNTIME_ERROR, "ModelNew(*get_init_inputs()) raised: "
                                + _short_traceback(e, getattr(candidate_module, "__file__", None))) from e
        self._ref64: Any = None

    def _align_weights(self) -> None:
        """Same seed gives same weights when creation order matches; copy them when names and shapes agree."""
        ref_state, new_state = self.ref.state_dict(), self.new.state_dict()
        if ref_state and set(ref_state) == set(new_state) and all(
                ref_state[k].shape == new_state[k].shape for k in ref_state):
            self.new.load_state_dict({k: v.detach().cpu() for k, v in ref_state.items()})

    def draw_inputs(self, seed: int) -> list[Any]:
        """Drawn on the device they are used on: KernelBench's ``get_inputs`` builds tensors with the default
        device, so under ``torch.device`` a 6 GB ``randn`` takes milliseconds on the GPU instead of seconds on
        the host (measured on the H200: the host draw left the GPU idle most of an evaluation)."""
        torch.manual_seed(seed)
        with torch.device(self.device):
            inputs = list(self.task_module.get_inputs())
        return _to_device(inputs, self.device)

    def reference64(self, inputs: list[Any]) -> Any:
        if self._ref64 is None:
            self._ref64 = copy.deepcopy(self.ref).double()
        with torch.no_grad():
            return self._ref64(*_to_double(_clone(inputs)))


class VerificationChain:
    """One candidate through every check; ``run`` never raises for anything the candidate does."""

    def __init__(self, backend: Backend, options: ChainOptions, workdir: Path,
                 notify: Callable[[str], None] | None = None) -> None:
        self.backend = backend
        self.options = options
        self.workdir = workdir
        self.notify = notify or (lambda event: None)  # progress for the caller's clock: "turn-wait", "turn"

    def run(self, task: Task, candidate: Candidate) -> EvalResult:
        started = time.perf_counter()
        base = {"backend": self.backend.name, "arch": self.backend.arch, "versions": versions()}
        failure = static_check(candidate.source, language=candidate.language)
        if failure is not None:
            return EvalResult.from_dict({**failure.to_dict(), **base, "eval_s": time.perf_counter() - started})
        source_file = str(self.workdir / f"candidate_{candidate.id}.py")
        try:
            result = self._run(task, candidate, source_file)
        except _ChainFailure as f:
            result = EvalResult.failure(f.status, str(f), details=f.details)
        except Exception as e:  # anything the candidate raised that the steps did not classify
            status = EvalStatus.COMPILE_ERROR if _is_compile_exception(e) else EvalStatus.RUNTIME_ERROR
            result = EvalResult.failure(status, _short_traceback(e, source_file))
        d = result.to_dict()
        d.update({k: v for k, v in base.items() if not d.get(k)})
        d["eval_s"] = time.perf_counter() - started
        return EvalResult.from_dict(d)

    @contextlib.contextmanager
    def _turn(self) -> Iterator[dict[str, float]]:
        """The device's turn, telling the caller when the wait starts and ends (it stops the timeout's clock)."""
        try:
            key = getattr(self.backend, "lock_key", None)
        except Exception:  # a device that cannot name itself takes no turns rather than failing every candidate
            key = None
        if key is not None:
            self.notify("turn-wait")
        with device_turn(key) as info:
            if key is not None:
                self.notify("turn")
            yield info

    def _load_candidate(self, candidate: Candidate, source_file: str) -> Any:
        Path(source_file).write_text(candidate.source)
        try:
            module = exec_module_file(source_file, f"evoforge_candidate_{candidate.id}")
        except Exception as e:
            raise _ChainFailure(EvalStatus.COMPILE_ERROR, "importing the candidate failed: "
                                + _short_traceback(e, source_file), stage="load") from e
        params = getattr(module, "PARAMS", None)
        if candidate.params:
            if not isinstance(params, dict):
                raise _ChainFailure(EvalStatus.COMPILE_ERROR,
                                    "the candidate has tunable params but its module defines no PARAMS dict")
            params.update(candidate.params)
        return module

    def _forward(self, model: Any, inputs: list[Any], source_file: str, what: str) -> Any:
        try:
            with torch.no_grad():
                out = model(*inputs)
            self.backend.synchronize()
            return out
        except Exception as e:
            status = EvalStatus.COMPILE_ERROR if _is_compile_exception(e) else EvalStatus.RUNTIME_ERROR
            raise _ChainFailure(status, f"{what}: " + _short_traceback(e, source_file)) from e

    def _run(self, task: Task, candidate: Candidate, source_file: str) -> EvalResult:
        opts = self.options
        device = self.backend.device
        interpreted = self.backend.name == "interpreter"
        language = "CuTe" if candidate.language == "cute" else "Triton"
        compile_s = None
        turn: dict[str, float] | None = None
        with _interpreter_autotune_first_config(interpreted), contextlib.ExitStack() as stack:
            t0 = time.perf_counter()
            module = self._load_candidate(candidate, source_file)
            shapes = [{}, *task.shapes]
            worst = (0.0, 0.0)
            criteria: set[str] = set()
            main: _Loaded | None = None
            flops = 0
            for shape_index, shape in enumerate(shapes):
                loaded = _Loaded(task, module, shape, device, opts.seed)
                if shape_index == 0:
                    main = loaded
                trials = opts.trials if shape_index == 0 else 1
                for trial in range(trials):
                    inputs = loaded.draw_inputs(opts.seed + 1000 * shape_index + trial + 1)
                    reference_ops = OpRecorder()
                    from torch.utils.flop_counter import FlopCounterMode

                    counter = FlopCounterMode(display=False) if (shape_index == 0 and trial == 0) else None
                    with torch.no_grad(), reference_ops, (counter or contextlib.nullcontext()):
                        expected = loaded.ref(*_clone(inputs))
                    if counter is not None:
                        flops = counter.get_total_flops()
                    launches = LaunchCounter()
                    recorder = OpRecorder()
                    launches.recorder = recorder
                    with _poisoned_allocations(), launches.active(), recorder:
                        got = self._forward(loaded.new, _clone(inputs), source_file,
                                            f"forward raised (shape {shape or 'main'}, trial {trial + 1})")
                    if compile_s is None:
                        compile_s = time.perf_counter() - t0
                        # Loaded and compiled: the rest measures, so it waits for the device's turn while
                        # other evaluations of this device compile (or wait) meanwhile.
                        turn = stack.enter_context(self._turn())
                    where = f"shape {shape}" if shape else "the main shape"
                    cmp = compare_outputs(got, expected, reference64=lambda ld=loaded, i=inputs: ld.reference64(i),
                                          tolerances={getattr(torch, k): v for k, v in opts.tolerances.items()})
                    if not cmp.ok:
                        raise _ChainFailure(EvalStatus.INCORRECT,
                                            f"wrong output at {where}, trial {trial + 1} of {trials}: {cmp.message}",
                                            max_abs_err=cmp.max_abs_err, criterion=cmp.criterion)
                    if opts.anticheat:
                        if launches.launches == 0:
                            raise _ChainFailure(EvalStatus.REJECTED,
                                                f"forward launched no {language} kernel at {where} "
                                                f"(trial {trial + 1}): "
                                                "the answer must come from a kernel")
                        cheats = sorted(set(recorder.ops) & forbidden_ops(set(reference_ops.ops), task.allow_ops))
                        if cheats:
                            raise _ChainFailure(EvalStatus.REJECTED,
                                                f"forward calls PyTorch compute op(s) {', '.join(cheats)} that the "
                                                "kernel must do itself (views, allocation and copies are fine; a task "
                                                "may allow ops with EVOFORGE_ALLOW_OPS)")
                    criteria.add(cmp.criterion)
                    worst = (max(worst[0], cmp.max_abs_err), max(worst[1], cmp.max_rel_err))
            assert main is not None
            criterion = "float64" if "float64" in criteria else "allclose"
            result: dict[str, Any] = {"status": EvalStatus.OK, "max_abs_err": worst[0], "max_rel_err": worst[1],
                                      "criterion": criterion, "compile_s": compile_s}
            if opts.timing:
                result.update(self._time(main, task, flops, source_file))
            if turn is not None:
                result["details"] = {"turn_wait_s": turn["wait_s"], "turn": [turn["start"], time.time()]}
        return EvalResult.from_dict({**result, "status": str(result["status"])})

    def _time(self, loaded: _Loaded, task: Task, flops: int, source_file: str) -> dict[str, Any]:
        inputs = loaded.draw_inputs(self.options.seed + 999_999)
        ref_inputs, new_inputs = _clone(inputs), _clone(inputs)
        with torch.no_grad():
            out = loaded.ref(*ref_inputs)

            def run_candidate() -> Any:
                return loaded.new(*new_inputs)

            try:
                timings = self.backend.time_interleaved({"ref": lambda: loaded.ref(*ref_inputs),
                                                         "candidate": run_candidate},
                                                        budget_ms=self.options.timing_budget_ms)
            except Exception as e:
                raise _ChainFailure(EvalStatus.RUNTIME_ERROR, "while timing: " + _short_traceback(e, source_file)) from e
        ref_ms, cand_ms = timings["ref"].median_ms, timings["candidate"].median_ms
        representative = timings["candidate"].representative
        result: dict[str, Any] = {"runtime_ms": cand_ms, "ref_ms": ref_ms,
                                  "speedup": ref_ms / cand_ms if cand_ms > 0 else None,
                                  "timing_representative": representative,
                                  "device_name": str(self.backend.properties.get("name", ""))}
        floors = physical_floor_ms(self.backend.arch, bytes_moved=_nbytes(inputs) + _nbytes(out), flops=flops,
                                   dtype=_main_dtype(inputs), passes=task.floor_passes)
        if floors and representative:
            floor_ms, memory_floor_ms = floors
            result["floor_ms"] = floor_ms
            result["pct_of_floor"] = 100.0 * floor_ms / cand_ms
            if cand_ms < 0.97 * memory_floor_ms:
                result["below_floor"] = True
                result["message"] = (f"measured {cand_ms:.4g} ms is below the memory floor {memory_floor_ms:.4g} "
                                     "ms (every input read and output written once): impossible, so the timing "
                                     "or the kernel is suspect")
        elif not representative:
            result["message"] = "timed on the Triton interpreter: times are not representative of a GPU"
        return result


_DTYPE_PEAK = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


def physical_floor_ms(arch: str, *, bytes_moved: int, flops: int, dtype: torch.dtype,
                      passes: float = 1.0) -> tuple[float, float] | None:
    """(floor, memory floor) in ms: no correct kernel runs faster than either.

    The floor is max(bytes x passes / bandwidth, FLOPs / peak); the memory floor counts each input read
    and each output written once, the one bound no algorithm escapes. For float32 the fastest exact-enough
    arithmetic is three 16-bit tensor-core products per step (or 3xTF32), so its peak is the larger of the
    fp32 rate and a third of the bf16 or tf32 rate. The compute term counts the reference's FLOPs: a kernel
    that finds a cheaper algorithm may beat it, so only the memory floor decides ``below_floor``.
    """
    try:
        from evoforge import knowledge

        ceil = knowledge.ceilings(arch)
    except Exception:
        return None
    bandwidth = ceil.get("bandwidth_gbs")
    if not bandwidth:
        return None
    memory_ms = bytes_moved / (bandwidth * 1e9) * 1e3
    peaks = ceil.get("peak_tflops") or {}
    name = _DTYPE_PEAK.get(dtype, "fp32")
    peak = peaks.get(name)
    if name == "fp32":
        peak = max([p for p in (peaks.get("fp32"), (peaks.get("tf32") or 0) / 3, (peaks.get("bf16") or 0) / 3) if p]
                   or [0]) or None
    compute_ms = flops / (peak * 1e12) * 1e3 if peak and flops else 0.0
    return max(memory_ms * passes, compute_ms), memory_ms
