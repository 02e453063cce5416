"""Captures of torch.compile: Inductor's generated Triton for a task, recorded as JSON in a process of its own.

The first of the two steps of an Inductor seed (the second, ``seed_from_capture``, is ``mutators/inductor_seed.py``):

- ``capture`` (run in a process of its own, ``python -m evoforge.mutators.inductor_capture``) compiles the task's
  reference with Inductor and writes what it made as JSON (an ``InductorCapture``, ``mutators/inductor_common.py``):
  the output code, which graph input is which (a forward argument, a size of one, a parameter of the model), the
  launch configs Inductor's heuristics chose for each kernel and the Inductor helpers the kernels call. On a GPU it
  is Inductor's own code for that device; on the CPU Inductor is asked for Triton (``cpu_backend = "triton"``)
  under a stand-in driver, which yields the same kernel forms so that the conversion runs in CI on the Triton
  interpreter.
- ``seed_from_capture`` (pure, ``mutators/inductor_seed.py``) turns a capture into a candidate.

Where Inductor's code for a task cannot be a seed, ``NoInductorSeed`` says why in one line (``main`` writes it as
``{"no_seed": reason}``).
"""

from __future__ import annotations

import ast
import contextlib
import gc
import json
import re
import sys
import time
from dataclasses import asdict
from typing import Any

from evoforge.mutators.inductor_common import (
    _EXTERN_GEMM,
    _TEMPLATE_DOT,
    _TF32X3_DOT,
    CONV_AS_GEMM,
    GEMM_BUILD,
    GEMM_OPS,
    INDUCTOR_VARIANTS,
    TF32X3_TILES,
    InductorCapture,
    NoInductorSeed,
    op_allowed,
)
from evoforge.mutators.inductor_seed import _dotted, _helper_closure, _kernels_and_call

from evoforge.core import take_turn_while_benchmarking

#: A call to cuDNN's convolution in Inductor's output code.
_EXTERN_CONV = re.compile(r"\b(extern_kernels\.convolution|aten\.convolution\.default)\(")
#: Inductor's option whose threshold (K over M and N) turns its GEMM template off in favour of decompose-K, and
#: a value no GEMM reaches.
_DECOMPOSE_K = "triton.decompose_k_threshold"
_NO_DECOMPOSE_K = 1 << 40
#: For the GEMM build's shape-generic compile: Inductor's template offered with one config, so nothing is autotuned.
#: Those kernels run only at the shapes that are not the main one (the chain's odd and extra shapes, for
#: correctness); the main shape's path is its own static build, autotuned. Autotuning the generic build too timed
#: every template config once more in the device's turn: on the H100 the captures of 14 GEMM tasks under the strict
#: rule had not all finished after 960 s (2026-12-05; that log was not kept); on the H200 with one autotuning fewer
#: they took 298 s (experiments/results/kernelbench/README.md, S part 2, 2026-12-06).
_ONE_GEMM_CONFIG = {"test_configs.max_mm_configs": 1}


# ------------------------------------------------------------------------------------------------ capture
def _stand_in_driver() -> None:
    """Let Inductor write Triton on a machine with no GPU: its code generation asks the active Triton driver for a
    target (to hash the backend) and nothing else; the kernels themselves run on the interpreter."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase
    from triton.runtime.driver import driver

    class StandIn(DriverBase):
        @classmethod
        def is_active(cls) -> bool:
            return True

        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self) -> Any:
            return torch.device("cpu")

        def get_benchmarker(self) -> Any:
            raise NotImplementedError

        def get_device_interface(self) -> Any:
            raise NotImplementedError

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise NotImplementedError

    driver.set_active(StandIn())


def _helper_sources() -> dict[str, str]:
    """Every @triton.jit function of Inductor's triton_helpers, by name (the seed embeds those its kernels call)."""
    import inspect

    from torch._inductor.runtime import triton_helpers

    text = inspect.getsource(triton_helpers)
    tree = ast.parse(text)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            seg = "".join(text.splitlines(keepends=True)[node.decorator_list[0].lineno - 1:node.end_lineno])
            out[node.name] = re.sub(r"^@triton\.jit\b", "@triton.jit", seg)
    return out


def _model_source(task_path: str) -> str:
    """The task's Model class renamed TaskModel, its forward removed (read from the task file)."""
    from pathlib import Path

    tree = ast.parse(Path(task_path).read_text())
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if cls is None:
        raise NoInductorSeed(f"task {task_path} defines no class Model")
    cls.body = [n for n in cls.body if not (isinstance(n, ast.FunctionDef) and n.name == "forward")] or [ast.Pass()]
    cls.name = "TaskModel"
    return ast.unparse(cls).replace("super(Model, self)", "super()")


def _layer_norm_sized_by_weight(self: Any, x: Any) -> Any:
    """nn.LayerNorm.forward with its normalized shape read off its weight rather than off ``normalized_shape``.

    The two are equal; but dynamo takes a module's tuple of ints as a constant, so the kernels Inductor writes
    for ``LayerNorm((features, dim1, dim2))`` carry the row length as a literal and the seed computes the wrong
    function at the chain's odd init sizes (features 63). Read off the weight, whose sizes stay symbolic, the
    row length is an argument. Without a weight (``elementwise_affine=False``) nothing symbolic holds the shape
    and the literal stays: the chain then says so."""
    import torch.nn.functional as F

    shape = self.weight.shape if self.weight is not None else self.normalized_shape
    return F.layer_norm(x, shape, self.weight, self.bias, self.eps)


def _instance_norm_unchecked(self: Any, x: Any) -> Any:
    """nn.InstanceNorm*d.forward without comparing the input's channel count to ``num_features``.

    The comparison only warns or raises (it never changes the result); but dynamo guards on it, so the channel
    count was specialised and the seed's kernels carried it as a literal (on the H200: L1/34 incorrect at the
    chain's odd size, 64 channels where it had 63). Without it the count stays symbolic, and a count that differs
    from ``num_features`` (a warning, which a single-graph capture cannot trace) no longer fails the capture."""
    self._check_input_dim(x)
    if x.dim() == self._get_no_batch_dim():
        return self._handle_no_batch_input(x)
    return self._apply_instance_norm(x)


def _max_pool1d_as_2d(self: Any, x: Any) -> Any:
    """nn.MaxPool1d.forward as a 2-D pooling of height one (the same function).

    ``torch.max_pool1d`` is ATen C++ that reads the input's length as a plain integer, so dynamo specialised it and
    the seed's output length was the captured one (on the H200: L1/41 one element too long at the chain's odd
    length; L2/55's pooled width fixed to its ``out_features``). ``max_pool2d`` keeps it symbolic. With
    ``return_indices`` the module's own forward runs."""
    import torch.nn.functional as F
    from torch.nn.modules.utils import _single

    if self.return_indices:  # what the module's own forward does
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, ceil_mode=self.ceil_mode,
                            return_indices=True)
    stride = _single(self.stride if self.stride is not None else self.kernel_size)
    out = F.max_pool2d(x.unsqueeze(-2), (1, *_single(self.kernel_size)), (1, *stride), (0, *_single(self.padding)),
                       (1, *_single(self.dilation)), self.ceil_mode)
    return out.squeeze(-2)


def _innermost(e: BaseException) -> BaseException:
    while (e.__cause__ or e.__context__) is not None:
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return e


def _out_of_memory_under(e: BaseException) -> BaseException | None:
    """The device's out-of-memory error among ``e`` and its causes, if one is there."""
    import torch

    seen: set[int] = set()
    link: BaseException | None = e
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, torch.OutOfMemoryError) or "CUDA out of memory" in str(link):
            return link
        link = link.__cause__ or link.__context__
    return None


def raised_in(e: BaseException, path_end: str) -> bool:
    """Whether the innermost error under ``e`` (its causes followed down) was raised in a file whose path ends
    with ``path_end``."""
    import traceback

    frames = traceback.extract_tb(_innermost(e).__traceback__)
    return bool(frames) and frames[-1].filename.replace("\\", "/").endswith(path_end)


def compile_failure(e: BaseException) -> str:
    """One line on why torch.compile failed: the error's type and first line, and, where the innermost error says
    nothing of itself (an Inductor ``AssertionError`` with no text read "InductorError: AssertionError: " and named
    neither the check nor the file), where that error was raised and the line that raised it."""
    import traceback

    first = (str(e).strip().splitlines() or [""])[0][:300].rstrip(": ")
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    inner = _innermost(e)
    frames = traceback.extract_tb(inner.__traceback__)
    if str(inner).strip() or not frames:
        return text
    where = frames[-1]
    text += f"; {type(inner).__name__} raised at {where.filename.split('site-packages/', 1)[-1]}:{where.lineno}"
    return text + f" in {where.name}" + (f": {where.line.strip()[:120]}" if where.line else "")


#: The environment variable that names the device's turn (``backends.base.device_turn_path``'s lock file) to a
#: capture: there Inductor's benchmarking (the autotuning of launch configs and GEMM tiles) holds it while it times.
DEVICE_TURN_ENV = "EVOFORGE_DEVICE_TURN"


def capture_env(side_by_side: int, turn: str | None = None) -> dict[str, str]:
    """The environment of a capture process that runs beside ``side_by_side - 1`` others. Inductor compiles a
    graph's kernels in a pool of as many processes as the machine has cores, each importing torch; fourteen
    captures side by side would start two hundred of them on sixteen cores. Side by side, the captures share the
    cores between their pools instead. A ``TORCHINDUCTOR_COMPILE_THREADS`` the user set is kept.

    ``turn``: the device's lock file, which the capture's benchmarking then holds (``DEVICE_TURN_ENV``): compiling
    goes on side by side, timing does not, so that each autotuning times its choices on a device nothing else is
    timing on (as the evaluators take turns). It costs set-up time where captures autotune GEMMs: on the H200 a
    max-autotune GEMM choice timed for 25 s, and the set-up of a campaign of eight tasks took about 370 s against
    about 105 s for ten before (experiments/results/kernelbench/README.md, issue R, afternoon)."""
    import os

    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 1) // max(1, side_by_side))))
    if turn:
        env[DEVICE_TURN_ENV] = turn
    return env


def capture(task_path: str, *, overrides: dict[str, Any] | None = None, device: str = "cuda",
            main_shape: bool = True, variants: bool = True, allow_ops: tuple[str, ...] = ()) -> InductorCapture:
    """torch.compile the task's reference with Inductor and record what it made (see the module docstring).

    Two compiles: one with sizes symbolic (``dynamic=True``, no duck sizing, parameters not forced static), so the
    seed holds at the chain's odd shapes too; and, with ``main_shape``, torch.compile's default static build at the
    task's main shape (``capture.main``), whose kernels carry its sizes and layout choices as constants. The graph
    runs without autograd, as the chain runs a candidate."""
    import inspect
    import os

    if device == "cpu":  # before Triton is imported: its @triton.jit functions are the interpreter's from the start
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import torch._inductor.config as inductor_config

    if os.environ.get(DEVICE_TURN_ENV):
        take_turn_while_benchmarking(os.environ[DEVICE_TURN_ENV])

    if device == "cpu":
        inductor_config.cpu_backend = "triton"
        _stand_in_driver()
    from evoforge.task import exec_module_file

    module = exec_module_file(task_path, "evoforge_inductor_task", overrides)
    torch.manual_seed(0)
    init_inputs = module.get_init_inputs()
    model = module.Model(*init_inputs).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    code, sources, _examples, out, _ = _compile(model, inputs, dynamic=True)
    flat = out if isinstance(out, tuple | list) else [out]
    forward_args = [p for p in inspect.signature(model.forward).parameters]
    tensors = [name for name, x in zip(forward_args, inputs, strict=False) if isinstance(x, torch.Tensor)]
    # State the seed must rebuild: parameters, buffers, or a plain attribute its graph reads (LeakyReLU's
    # ``self.negative_slope``, RMSNorm's ``self.eps``: without the task's Model they raised AttributeError).
    has_state = bool(list(model.parameters()) or list(model.buffers())
                     or any(source.startswith("L['self']") for source in sources))
    helpers = _helper_sources()

    def made(output_code: str, graph_inputs: list[str], chosen: dict[str, Any] | None = None) -> InductorCapture:
        kernels, _ = _kernels_and_call(output_code)
        needed = _helper_closure({h for k in kernels.values() for h in k.helpers}, helpers)
        return InductorCapture(output_code=output_code, graph_inputs=graph_inputs, forward_args=forward_args,
                               n_outputs=len(flat), single_output=not isinstance(out, tuple | list),
                               model_source=_model_source(task_path) if has_state else "",
                               device_arg=tensors[0] if tensors else "", configs=_launch_configs(output_code, chosen),
                               helpers={n: helpers[n] for n in sorted(needed) if n in helpers}, device=device,
                               torch_version=torch.__version__, task=str(task_path),
                               sm_count=(torch.cuda.get_device_properties(0).multi_processor_count
                                         if device.startswith("cuda") else 0))

    result = made(code, sources)
    if main_shape:
        plain = _json_plain(init_inputs)
        values = {name: x for name, x in zip(forward_args, inputs, strict=False) if not isinstance(x, torch.Tensor)}
        if plain is None or _json_plain(list(values.values())) is None:
            result.main_failure = "the init inputs or forward arguments are not plain values a guard can compare"
        else:
            torch._dynamo.reset()
            main_config: dict[str, Any] = {}
            try:
                code, sources, examples, _, chosen = _compile(model, inputs, dynamic=False, config=main_config,
                                                              run=device != "cpu")
                main = made(code, sources, chosen)
            except NoInductorSeed as e:
                result.main_failure = str(e)
            else:
                main.init_inputs = plain
                main.forward_values = values
                main.guards = [({"source": s, "shape": list(x.shape), "stride": list(x.stride()), "dtype": str(x.dtype)}
                                if isinstance(x, torch.Tensor) else {"source": s})
                               for s, x in zip(sources, examples, strict=True)]
                result.main = asdict(main)
                if variants:
                    result.variants = _variants(model, inputs, main, made, base=main_config, run=device != "cpu",
                                                allow_ops=allow_ops)
    # A convolution the task allows cuDNN for keeps it where the default build has kernels of its own around it:
    # the build that replaces it then serves the strict rule only. A task that is one convolution has no seed else.
    conv = bool(_EXTERN_CONV.search(result.output_code)) and (
        "convolution" not in allow_ops or not _kernels_and_call(result.output_code)[0])
    if _EXTERN_GEMM.search(result.output_code) or conv:
        # The build the strict rule starts from: GEMMs in Inductor's template; convolutions, too, as GEMMs.
        build = {**GEMM_BUILD, TF32X3_TILES: True, **({CONV_AS_GEMM: True} if conv else {})}
        torch._dynamo.reset()
        try:
            code, sources, _examples, _, _ = _compile(model, inputs, dynamic=True, config={**build, **_ONE_GEMM_CONFIG})
        except NoInductorSeed as e:
            result.gemm_failure = str(e)
        else:
            gemm = made(code, sources)
            gemm.main = next((v["main"] for v in result.variants if v["name"] == "triton-gemm"), result.main)
            if conv and result.main:  # the main shape's static build of the same (no variant holds it)
                torch._dynamo.reset()
                try:
                    code, sources, _examples, _, chosen = _compile(model, inputs, dynamic=False, config=build,
                                                                   run=device != "cpu")
                except NoInductorSeed:
                    gemm.main = None
                else:
                    main = made(code, sources, chosen)
                    for key in ("guards", "init_inputs", "forward_values"):
                        setattr(main, key, result.main[key])
                    gemm.main = asdict(main)
            result.gemm = asdict(gemm)
    return result


def _kernel_bodies(code: str) -> list[str]:
    """A build's kernels and its call() as text that differs only where they do (kernel names and launch heuristics
    dropped): a layout choice may show in the call's allocations and library calls alone."""
    kernels, call = _kernels_and_call(code)
    return sorted(re.sub(r"\btriton_\w+?_\d+\b", "K", text)
                  for text in [*(k.source for k in kernels.values()), ast.unparse(call)])


def _variants(model: Any, inputs: list[Any], main: InductorCapture, made: Any, *, base: dict[str, Any],
              run: bool, allow_ops: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The main shape's static build under each ``INDUCTOR_VARIANTS`` configuration that can change one of its
    kernels, kept where the kernels differ from the default build's (and from each other's). Where the default
    build calls a vendor library the task does not allow (``allow_ops``), only the GEMM builds are made: any other
    configuration still calls it, so it is no start under the task's rule (such a variant became the GEMM build's
    shape-generic path alone, the ~0.6x-of-static form of issue R), and each one compiled, its reductions
    benchmarked, cost set-up time for nothing."""
    import torch

    kinds = {k.kind for k in _kernels_and_call(main.output_code)[0].values()}
    if re.search(r"\bconvolution\b", main.output_code):  # a kind of its own: a variant may change its layout
        kinds.add("convolution")
    if _EXTERN_GEMM.search(main.output_code):
        kinds.add("extern_gemm")
    vendor = set(_EXTERN_GEMM.findall(main.output_code)) | ({"convolution"} if _EXTERN_CONV.search(main.output_code)
                                                             else set())
    disallowed = {op for op in vendor if not op_allowed(op, allow_ops)}
    seen = [_kernel_bodies(main.output_code)]
    out = []
    for name, (config, changes) in INDUCTOR_VARIANTS.items():
        if not kinds & set(changes):
            continue
        if disallowed and not (config.get("max_autotune_gemm") and disallowed <= set(GEMM_OPS)):
            continue
        torch._dynamo.reset()
        try:
            code, sources, _examples, _, chosen = _compile(model, inputs, dynamic=False, config={**base, **config},
                                                           run=run)
        except NoInductorSeed:
            continue
        bodies = _kernel_bodies(code)
        if bodies in seen:
            continue
        seen.append(bodies)
        variant = made(code, sources, chosen)
        variant.guards, variant.init_inputs, variant.forward_values = main.guards, main.init_inputs, main.forward_values
        out.append({"name": name, "config": config, "main": asdict(variant)})
    return out


def _json_plain(value: Any) -> Any:
    """``value`` as JSON keeps it (tuples as lists), or None where it holds anything else (a tensor)."""
    if isinstance(value, list | tuple):
        items = [_json_plain(v) for v in value]
        return None if any(i is None and v is not None for i, v in zip(items, value, strict=True)) else items
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return None


#: A compile that ran out of device memory is made again once memory is given back: a campaign's evaluations run
#: beside its captures (on an H100, L1/84's static build failed at 3.2 GiB free while two evaluators held 51 GiB, and
#: the task started with no seed). A capture process waits ``OOM_WAIT_S`` between tries and at most
#: ``OOM_PATIENCE_S`` in all, over every compile it makes (its own time limit is 600 s).
OOM_WAIT_S = 10.0
OOM_PATIENCE_S = 240.0
_oom_waited = [0.0]  # this process's seconds waited so far


def out_of_device_memory(reason: str) -> bool:
    """Whether a compile's failure (``compile_failure``'s line) is the device's memory running out."""
    return "OutOfMemoryError" in reason or "CUDA out of memory" in reason


def when_memory_allows(compile_once: Any, *, wait_s: float | None = None, patience_s: float | None = None) -> Any:
    """``compile_once()``, made again while it fails for want of device memory, until this process has waited
    ``patience_s`` (``OOM_PATIENCE_S``) in all; the last failure is raised past that. Between tries the process's
    cached blocks go back to the device and dynamo forgets the failed compile."""
    wait = OOM_WAIT_S if wait_s is None else wait_s
    patience = OOM_PATIENCE_S if patience_s is None else patience_s
    while True:
        try:
            return compile_once()
        except NoInductorSeed as e:
            if not out_of_device_memory(str(e)) or _oom_waited[0] + wait > patience:
                raise
            print(f"evoforge capture: {e}; trying again in {wait:g} s", file=sys.stderr, flush=True)
            import torch

            torch._dynamo.reset()
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            time.sleep(wait)
            _oom_waited[0] += wait


def _compile(model: Any, inputs: list[Any], *, dynamic: bool, config: dict[str, Any] | None = None,
             run: bool = False) -> tuple[str, list[str], list[Any], Any, dict[str, dict[str, Any]]]:
    """``_compile_once``, made again where the device ran out of memory (``when_memory_allows``)."""
    return when_memory_allows(lambda: _compile_once(model, inputs, dynamic=dynamic, config=config, run=run))


def _compile_once(model: Any, inputs: list[Any], *, dynamic: bool, config: dict[str, Any] | None = None,
                  run: bool = False) -> tuple[str, list[str], list[Any], Any, dict[str, dict[str, Any]]]:
    """One torch.compile of the model with Inductor: its output code, each graph input's source, the example
    inputs the graph was compiled for, the output, and the launch config Inductor's autotuning chose for each kernel.
    ``dynamic``: sizes symbolic, with the capture's adjustments that keep them so; else torch.compile's default
    static build. ``run``: the compiled code runs once, as torch.compile's first call does, and so benchmarks the
    configs of each kernel that has several (a reduction's) and keeps the fastest (on a device only)."""
    import torch
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config
    import torch._inductor.kernel.conv  # noqa: F401  (registers Inductor's convolution lowering, replaced below)
    import torch._inductor.utils as inductor_utils
    import torch.fx.experimental._config as fx_config
    from torch._inductor import lowering as inductor_lowering
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering
    from torch.nn.modules.instancenorm import _InstanceNorm

    codes: list[str] = []
    graphs: list[list[str]] = []
    examples: list[list[Any]] = []
    original = GraphLowering.save_output_code

    def save(code: str) -> None:
        codes.append(code)

    conv_as_gemm = bool((config or {}).get(CONV_AS_GEMM))

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        before = len(codes)
        if conv_as_gemm:
            from torch._inductor.decomposition import select_decomp_table

            table = {**select_decomp_table(), torch.ops.aten.convolution.default: _conv_as_gemm}
            compiled = compile_fx(gm, example_inputs, decompositions=table)
        else:
            compiled = compile_fx(gm, example_inputs)
        if len(codes) > before:  # a graph dynamo gave up on (and traced again, e.g. with a float specialised)
            graphs.append([n.meta["grapharg"].source.name for n in gm.graph.nodes if n.op == "placeholder"])
            examples.append(list(example_inputs))
        # The seed is what Inductor wrote; running it is the chain's business, but for its autotuning's choice.
        return compiled if run else gm.forward

    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    GraphLowering.save_output_code = staticmethod(save)  # type: ignore[method-assign]
    symbolic = {}
    if dynamic:
        # A module's parameters (and sizes read off it) stay symbolic too: a weight made from an init input
        # (nn.Linear(in_features, ...)) must follow the chain's odd init sizes, not be written in as literals.
        symbolic = {"force_parameter_static_shapes": False, "force_nn_module_property_static_shapes": False}
        # A convolution is a vendor call in the seed (its kernels fuse what surrounds it), so Inductor's own
        # lowering of it is not wanted here: that lowering guards the weight's sizes to constants
        # (``guard_int_seq``), and every kernel after the convolution was written for the captured channel count
        # (on the H200, 10 of 25 level-2 tasks failed the chain's odd sizes). As a plain fallback the sizes stay
        # symbolic. The static build keeps Inductor's lowering (its layout choices are the point of it).
        lowerings = inductor_lowering.lowerings
        conv = torch.ops.aten.convolution.default
        patch_lowering = (lowerings, conv, lowerings[conv])
        lowerings[conv] = inductor_lowering.fallback_handler(conv, add_to_fallback_set=False)
        patch(torch.nn.LayerNorm, "forward", _layer_norm_sized_by_weight)
        patch(torch.nn.MaxPool1d, "forward", _max_pool1d_as_2d)
    # Both builds: where a task's channel count differs from ``num_features`` the module's own check warns, and
    # ``warnings.warn`` is a function dynamo skips, so a single-graph capture failed (L2/28, whose InstanceNorm2d
    # normalises a (batch, 1, 1, features) view: the static build failed and its GEMM build with it, leaving only
    # the shape-generic seed, 0.68x torch.compile on the H100).
    patch(_InstanceNorm, "forward", _instance_norm_unchecked)
    try:
        # The graph cache's key does not see the lowering replaced above: a cached graph would bring it back.
        # Inductor's memory-coalescing tiling analysis is, by its own note, not for dynamic shapes, yet runs on them:
        # on a convolution followed by a reduction over its channels its pointwise/reduction split asserts
        # (tiling_utils.get_pw_red_splits; L2/25, 36, 58 and 92 on the H200). Such a failure is compiled once more
        # with the analysis off; every other task compiles as before.
        # A GEMM build for a GEMM whose K dwarfs M and N: Inductor offers only its decompose-K choice (a subgraph
        # of its own, a second output code) and no template, or on a CPU no choice at all (L1/4, L1/6). Such a
        # build is made once more with the template offered (decompose-K off).
        extra: dict[str, Any] = {}
        for _ in range(3):  # each retry adds one option; a third failure raises
            options = {"fx_graph_cache": False, **(config or {}), **extra}
            tf32x3 = bool(options.pop(TF32X3_TILES, False)) and _fp32_only(model, inputs)
            options.pop(CONV_AS_GEMM, None)
            if not hasattr(getattr(inductor_config, "test_configs", None), "max_mm_configs"):
                for key in _ONE_GEMM_CONFIG:  # a torch without the option: autotuned as before
                    options.pop(key, None)
            gemm_build = bool(options.get("max_autotune_gemm"))
            if gemm_build and not torch.cuda.is_available():
                # Inductor benchmarks a template with its epilogue fused by loading the pair as a module, which
                # the CPU's Triton (the interpreter) cannot: the fusion is taken as Inductor's heuristics decide.
                options["benchmark_epilogue_fusion"] = False
            retry: dict[str, Any] = {}
            # Inductor caches its decompose-K test by the sizes alone, not the threshold: cleared for each attempt.
            getattr(getattr(inductor_utils, "use_decompose_k_choice", None), "cache_clear", lambda: None)()
            try:
                with (torch.no_grad(), inductor_config.patch(options), dynamo_config.patch(symbolic),
                      fx_config.patch({"use_duck_shape": not dynamic}), _tf32x3_dots(tf32x3)):
                    out = torch.compile(model, backend=backend, dynamic=dynamic, fullgraph=True)(*inputs)
            except Exception as e:  # noqa: BLE001  (any failure of torch.compile is a reason, not a traceback)
                if raised_in(e, "_inductor/tiling_utils.py") and "triton.coalesce_tiling_analysis" not in extra:
                    retry = {"triton.coalesce_tiling_analysis": False}
                elif gemm_build and _DECOMPOSE_K not in extra:
                    retry = {_DECOMPOSE_K: _NO_DECOMPOSE_K}
                else:
                    oom = _out_of_memory_under(e)  # named whatever wraps it (BackendCompilerFailed's first line)
                    reason = compile_failure(oom if oom is not None else e)
                    raise NoInductorSeed(f"torch.compile failed on this task ({reason})") from None
            else:
                if not (gemm_build and len(codes) > 1 and _DECOMPOSE_K not in extra):
                    break
                retry = {_DECOMPOSE_K: _NO_DECOMPOSE_K}
            extra.update(retry)
            codes.clear()
            graphs.clear()
            examples.clear()
            torch._dynamo.reset()
    finally:
        GraphLowering.save_output_code = original  # type: ignore[method-assign]
        if dynamic:
            lowerings, conv, lowering = patch_lowering
            lowerings[conv] = lowering
        for owner, name, value in reversed(patched):
            setattr(owner, name, value)
    if len(codes) != 1 or len(graphs) != 1:
        raise NoInductorSeed(f"torch.compile made {len(graphs)} graphs ({len(codes)} output codes) of this task where "
                             "the seed needs one")
    return codes[0], graphs[0], examples[0], out, _autotuned(codes[0]) if run else {}


def _conv_as_gemm(x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
                  output_padding: Any, groups: int) -> Any:
    """``aten.convolution`` (1-D, 2-D or 3-D; strided, padded, dilated, grouped) as a window gather and a GEMM per
    group: each output position's input window unfolded (``Tensor.unfold`` per spatial dimension, a dilation taken
    as a stride over the window), then windows x weights. A transposed convolution is first made plain ones, one
    per output phase (``_transposed_as_plain``)."""
    import torch

    if transposed:
        return _transposed_as_plain(x, weight, bias, stride, padding, dilation, output_padding, groups)
    dims = x.dim() - 2
    kernel = list(weight.shape[2:])
    pads = [p for i in reversed(range(dims)) for p in (padding[i], padding[i])]
    windows = torch.nn.functional.pad(x, pads) if any(pads) else x
    for i in range(dims):
        span = dilation[i] * (kernel[i] - 1) + 1
        windows = windows.unfold(2 + i, span, stride[i])
        if dilation[i] > 1:
            windows = windows[..., ::dilation[i]]
    n, c = x.shape[0], x.shape[1]
    out_sizes = list(windows.shape[2:2 + dims])
    positions = 1
    for size in out_sizes:
        positions *= size
    window = c // groups
    for k in kernel:
        window *= k
    # (N, C, O..., K...) -> (groups, N * positions, C/groups * K...)
    cols = windows.permute(0, *range(2, 2 + dims), 1, *range(2 + dims, 2 + 2 * dims))
    cols = cols.reshape(n * positions, groups, window).permute(1, 0, 2)
    out_channels = weight.shape[0]
    w = weight.reshape(groups, out_channels // groups, window).permute(0, 2, 1)
    out = torch.bmm(cols, w) if groups > 1 else torch.mm(cols[0], w[0]).unsqueeze(0)
    # (groups, N * positions, Cout/groups) -> (N, Cout, O...)
    out = out.permute(1, 0, 2).reshape(n, *out_sizes, out_channels)
    out = out.permute(0, dims + 1, *range(1, dims + 1))
    if bias is not None:
        out = out + bias.reshape(1, out_channels, *([1] * dims))
    return out.contiguous()


def _transposed_as_plain(x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
                         output_padding: Any, groups: int) -> Any:
    """A transposed convolution as plain ones, one per output phase (sub-pixel decomposition by stride): the outputs
    ``q * s + r`` of a residue ``r`` (per spatial dimension) take only the taps ``k`` with ``k * d = r + p (mod s)``,
    from consecutive inputs, so each phase is a stride-1 convolution of the input (shifted, padded or cropped) by
    those taps in reverse order, at dilation ``d / gcd(d, s)``; the phases' outputs are interleaved. No multiply-add
    meets an inserted zero (the gather form, zeros between the inputs, did ``stride ** dims`` times the work and
    memory: 8x for a stride-2 3-D convolution); no cuDNN call."""
    import itertools

    import torch

    dims = x.dim() - 2
    kernel = list(weight.shape[2:])
    sizes = list(x.shape[2:])
    s_ = [int(v) for v in stride]
    p_ = [int(v) for v in padding]
    d_ = [int(v) for v in dilation]
    out_sizes = [(sizes[i] - 1) * s_[i] - 2 * p_[i] + d_[i] * (kernel[i] - 1) + int(output_padding[i]) + 1
                 for i in range(dims)]
    c_in, per_group = weight.shape[0], weight.shape[1]
    c_out = groups * per_group
    # the plain convolution's weights: in and out channels swapped within each group
    plain = weight.reshape(groups, c_in // groups, per_group, *kernel).transpose(1, 2).reshape(
        c_out, c_in // groups, *kernel)
    full = [-(-out_sizes[i] // s_[i]) for i in range(dims)]  # outputs per phase, the last phases' padded
    phases = [[_phase(r, s_[i], p_[i], d_[i], kernel[i], full[i]) for r in range(s_[i])]
              for i in range(dims)]
    outs = []
    for residues in itertools.product(*(range(v) for v in s_)):
        phase = [phases[i][r] for i, r in enumerate(residues)]
        if any(ph is None for ph in phase):  # no tap reaches these outputs: zeros (and the bias)
            outs.append(x.new_zeros(x.shape[0], c_out, *full))
            continue
        pads, w = [], plain
        for i in reversed(range(dims)):
            taps, lo, needed, _ = phase[i]
            pads += [-lo, needed - (sizes[i] - lo)]  # shift by lo, then exactly the inputs the phase reads
        for i in range(dims):  # the phase's taps, last first: every (s / gcd(d, s))-th of the flipped kernel
            taps = phase[i][0]
            every = taps[0] - taps[1] if len(taps) > 1 else 1
            w = w.flip(2 + i)[(slice(None),) * (2 + i) + (slice(kernel[i] - 1 - taps[0], None, every),)]
            w = w.narrow(2 + i, 0, len(taps))
        xs = torch.nn.functional.pad(x, pads) if any(pads) else x
        y = _conv_as_gemm(xs, w, None, [1] * dims, [0] * dims, [phase[i][3] for i in range(dims)], False,
                          [0] * dims, groups)
        grow = [v for i in reversed(range(dims)) for v in (0, full[i] - y.shape[2 + i])]
        outs.append(torch.nn.functional.pad(y, grow) if any(grow) else y)
    # (phases, N, C, m...) -> (N, C, m_1, s_1, m_2, s_2, ...) -> (N, C, m_1 * s_1, ...), cut to the output's size
    stacked = torch.stack(outs, 0).reshape(*s_, x.shape[0], c_out, *full)
    order = [dims, dims + 1] + [i for j in range(dims) for i in (dims + 2 + j, j)]
    out = stacked.permute(*order).reshape(x.shape[0], c_out, *[full[i] * s_[i] for i in range(dims)])
    for i in range(dims):
        out = out.narrow(2 + i, 0, out_sizes[i])
    if bias is not None:
        out = out + bias.reshape(1, c_out, *([1] * dims))
    return out.contiguous()


def _phase(r: int, s: int, p: int, d: int, k: int, m: int) -> tuple[list[int], int, int, int] | None:
    """One dimension's phase ``r`` of a transposed convolution: (the taps it reads, in the order of the inputs they
    meet; the offset of the first input from the output's index; the inputs its ``m`` outputs read; the dilation), or
    None where no tap reaches it. Output ``q * s + r`` adds ``x[q + (r + p - k * d) / s] * w[k]`` over the taps ``k``
    whose offset is whole."""
    import math

    g = math.gcd(d, s)
    taps = [t for t in range(k) if (r + p - t * d) % s == 0]
    if not taps:
        return None
    taps.reverse()  # the offsets (r + p - t * d) / s grow as t falls: the input order
    lo = (r + p - taps[0] * d) // s
    step = d // g
    return taps, lo, m + (len(taps) - 1) * step, step


def _fp32_only(model: Any, inputs: list[Any]) -> bool:
    """Every tensor the model takes or holds is fp32 (the GEMMs' operands are, whatever their order)."""
    import torch

    tensors = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
    return bool(tensors) and all(x.dtype == torch.float32 for x in tensors)


class _RenderedAs:
    """A template's jinja template whose rendered kernels write their dot as ``dot`` (three TF32 passes unless told:
    a GEMM template's; experiments/benchmarks/conv_algos.py renders the convolution template in each precision)."""

    def __init__(self, inner: Any, dot: str = _TF32X3_DOT) -> None:
        self.inner, self.dot = inner, dot

    def render(self, *args: Any, **kwargs: Any) -> str:
        return self.inner.render(*args, **kwargs).replace(_TEMPLATE_DOT, self.dot)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def _tf32x3_dots(on: bool) -> Any:
    """For the block, Inductor's GEMM templates (those whose dot reads ``ALLOW_TF32``) render it as three TF32 passes,
    and torch's fp32 matmul is in TF32 (so Inductor offers its tensor-core tile configs): its autotuning times
    the kernels the seed starts from. Then both as before. The flag is set through ``allow_tf32``: torch reads that
    and ``fp32_precision`` alike after it, while a value set through ``fp32_precision`` makes a later read of
    ``allow_tf32`` raise (a mix of its two APIs)."""
    import torch
    import torch._inductor.kernel.bmm
    import torch._inductor.kernel.mm  # noqa: F401  (their templates are made at import)
    from torch._inductor.select_algorithm import TritonTemplate

    if not on:
        yield
        return
    templates = [t for t in TritonTemplate.all_templates.values() if not isinstance(t.template, _RenderedAs)]
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    try:
        for template in templates:
            template.template = _RenderedAs(template.template)
        matmul.allow_tf32 = True
        yield
    finally:
        matmul.allow_tf32 = before
        for template in templates:
            template.template = template.template.inner


def _autotuned(code: str) -> dict[str, dict[str, Any]]:
    """The config each kernel of a build that ran kept after its autotuning (a kernel with one launcher left), read
    off the loaded output module's kernels; {} where it cannot be found."""
    from torch._inductor.codecache import PyCodeCache

    names = list(_kernels_and_call(code)[0])
    modules = [*PyCodeCache.modules, *getattr(PyCodeCache, "modules_no_attr", {}).values()]
    for module in reversed(modules):
        if names and all(hasattr(module, n) for n in names):
            out = {}
            for name in names:
                launchers = getattr(getattr(module, name), "launchers", None) or []
                config = getattr(launchers[0], "config", None) if len(launchers) == 1 else None
                if config is not None:
                    out[name] = {"kwargs": dict(config.kwargs), "num_warps": config.num_warps,
                                 "num_stages": config.num_stages}
            return out
    return {}


def _kernel_configs(kernel: Any) -> list[Any]:
    """An Inductor kernel's configs: its heuristics' list, or, once it was precompiled (loaded from Inductor's
    caches, or compiled in parallel workers: ``configs`` is then None), those of its compile results."""
    configs = getattr(kernel, "configs", None)
    if configs:
        return list(configs)
    for holder in ("compile_results", "launchers"):
        found = [r.config for r in getattr(kernel, holder, None) or [] if getattr(r, "config", None) is not None]
        if found:
            return found
    return []


def _launch_configs(code: str, chosen: dict[str, dict[str, Any]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Inductor's launch configs of each kernel: its heuristics run on the kernel's decorator, as at run time; the
    one its autotuning ``chosen`` first (the seed's default)."""
    from torch._inductor.codecache import PyCodeCache

    out: dict[str, list[dict[str, Any]]] = {}
    tree = ast.parse(code)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and _dotted(node.value.func) == "async_compile.triton"):
            name, source = node.value.args[0].value, node.value.args[1].value  # type: ignore[attr-defined]
            kernel = getattr(PyCodeCache.load(source), name)
            configs = [{"kwargs": dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages}
                       for c in _kernel_configs(kernel)]
            best = (chosen or {}).get(name)
            out[name] = [best, *(c for c in configs if c != best)] if best else configs
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m evoforge.mutators.inductor_capture TASK_FILE DEVICE OUT.json [OVERRIDES_JSON [ALLOW_OPS_JSON]]``:
    one capture, written as JSON; where there is none, ``{"no_seed": reason}``."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    task_path, device, out_path = args[:3]
    overrides = json.loads(args[3]) if len(args) > 3 else {}
    allow_ops = tuple(json.loads(args[4])) if len(args) > 4 else ()
    try:
        text = capture(task_path, overrides=overrides, device=device, allow_ops=allow_ops).to_json()
    except NoInductorSeed as e:
        text = json.dumps({"no_seed": str(e)})
    with open(out_path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
