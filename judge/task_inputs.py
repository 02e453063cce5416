"""What a task's inputs are before any of them exists: drawn on PyTorch's ``meta`` device, which records shapes
and dtypes and allocates nothing, so a 6 GB KernelBench input is sized in milliseconds on any machine.

Three uses, all before an evaluation starts: a shape the user set that the task cannot draw inputs at (a size of
the wrong kind, a negative one) is the user's mistake, said in one line, not a failed kernel; inputs too big
for the device the evaluation runs on (gigabytes on the CPU interpreter) get a warning that says how to shrink
them, before minutes pass in silence; and the reference's forward, run on the meta device too, gives the peak of
the bytes it holds at once (``peak_bytes``), which the pool sizes an evaluation's device memory by: a transposed
convolution's outputs are many times its inputs (KernelBench L2/100: 0.2 GiB in, 3.4 GiB buffers in its forward).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

from evoforge.core import UsageError
from evoforge.task import Task, load_task_module

log = logging.getLogger("evoforge.inputs")

# Above this, inputs on a host backend (the interpreter runs every kernel instance in Python and NumPy) make one
# evaluation take minutes rather than seconds.
HOST_INPUT_WARN_BYTES = 256 * 2**20


@dataclass(frozen=True)
class InputSize:
    """The main shape's inputs: total bytes and elements, and the shapes (for the message)."""

    nbytes: int
    numel: int
    shapes: tuple[tuple[int, ...], ...]
    peak_bytes: int = 0  # the reference's forward at this shape, at its peak: parameters, inputs and the tensors it
    #                      holds at once (0: not known, its forward does not run on the meta device)


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _draw(task: Task, shape: dict[str, Any]) -> InputSize:
    import torch

    module = load_task_module(task, shape)
    with torch.device("meta"):
        list(module.get_init_inputs())
        tensors = _tensors(list(module.get_inputs()))
    return InputSize(nbytes=sum(t.numel() * t.element_size() for t in tensors),
                     numel=sum(t.numel() for t in tensors), shapes=tuple(tuple(t.shape) for t in tensors))


def forward_peak_bytes(task: Task) -> int:
    """The most bytes the reference's forward holds at once at the task's main shape (its parameters, inputs, intermediates and
    outputs), from a run on the meta device: every tensor an operator makes counts from its making until Python lets
    it go (views and in-place results are their base's bytes). 0 where the forward cannot run there (a ``.item()``,
    an operator with no meta kernel): nothing is known."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    state = {"live": 0, "peak": 0}

    def gone(nbytes: int) -> None:
        state["live"] -= nbytes

    def made(t: Any) -> None:
        nbytes = t.untyped_storage().nbytes()
        state["live"] += nbytes
        state["peak"] = max(state["peak"], state["live"])
        weakref.finalize(t, gone, nbytes)

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if not (func.is_view or func._schema.is_mutable):
                for t in _tensors(out):
                    made(t)
            return out

    try:
        module = load_task_module(task, {})
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
        for t in [*_tensors(inputs), *model.parameters(), *model.buffers()]:
            made(t)
        with torch.no_grad(), Count():
            out = model(*inputs)
        del out
    except Exception:  # noqa: BLE001  (not sizeable this way: the pool goes by the inputs alone)
        return 0
    return int(state["peak"])


def check_task_inputs(task: Task, *, peak: bool = False) -> InputSize | None:
    """Draw the task's inputs on the meta device at its main shape and at every extra shape; with ``peak``, run the
    reference's forward there too (``forward_peak_bytes``: only a campaign on a backend with device memory to share
    reads it, and its meta kernels' first call imports torch._dynamo, 2-3 s on two cores).

    Raises a one-line ``UsageError`` naming the shape when inputs cannot be drawn there although the task's own
    constants draw fine (so the constants set are at fault). Returns the main shape's input size, or None when
    the task cannot be sized this way at all (it draws on a device of its own, say): then nothing is known and
    the evaluation finds out.
    """
    try:
        _draw(Task(path=task.path, name=task.name), {})
    except Exception:
        return None  # not sizeable on the meta device even as the task file stands: leave it to the judge
    size: InputSize | None = None
    for shape in [{}, *task.shapes]:
        where = (f"at --set {_show(task.overrides)}" if not shape else f"at the extra shape {_show(shape)}")
        try:
            drawn = _draw(task, shape)
        except Exception as e:
            reason = " ".join(f"{e.__class__.__name__}: {e}".split())[:300]
            raise UsageError(f"task {task.name}: cannot draw its inputs {where} ({reason}); check the values given "
                             "to --set / --shapes (or the config's set / shapes)") from None
        if not shape:
            size = drawn
    if size is not None and peak:
        size = replace(size, peak_bytes=forward_peak_bytes(task))
    return size


def _show(values: dict[str, Any]) -> str:
    return ",".join(f"{k}={v!r}" for k, v in values.items()) or "(the task's own constants)"


def size_warning(task: Task, size: InputSize | None, *, host: bool, backend: str) -> str | None:
    """A one-line warning when inputs this large will make each evaluation very slow on ``backend``."""
    if size is None or not host or size.nbytes <= HOST_INPUT_WARN_BYTES:
        return None
    shapes = ", ".join("x".join(map(str, s)) or "scalar" for s in size.shapes[:3])
    return (f"task {task.name}: its inputs are {_human(size.nbytes)} ({shapes}); on {backend} (the CPU) one "
            f"evaluation may take many minutes and record nothing meanwhile: shrink them with --set (e.g. "
            f"{_hint(task)}), or use a GPU backend")


def _hint(task: Task) -> str:
    from evoforge.task import module_constants_of

    sizes = {k: v for k, v in {**module_constants_of(task), **task.overrides}.items()
             if isinstance(v, int) and not isinstance(v, bool) and v > 64 and not k.startswith("EVOFORGE_")}
    if not sizes:
        return "batch_size=8"
    return " ".join(f"{k}={max(8, 2 ** int(math.log2(v) // 2))}" for k, v in sorted(sizes.items())[:2])


def _human(nbytes: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if nbytes < 1000 or unit == "TB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{nbytes} B"
        nbytes /= 1000  # type: ignore[assignment]
    raise AssertionError("unreachable")
