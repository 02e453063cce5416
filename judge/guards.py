"""Runtime anti-cheat: count kernel launches and watch which ATen ops the candidate's code calls.

Both run inside the candidate's process (judge/runner.py), around ``forward``, and undo themselves when they
exit. They report to the judge; a candidate that defeats them in its own process still has to pass the judge's
own checks of its outputs and times.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from evoforge.backends.launches import ACTIVE_COUNTERS, counted_launch  # noqa: F401  (counted_launch: its home)
from torch.utils._python_dispatch import TorchDispatchMode

_TORCH_DIR = os.path.dirname(torch.__file__)
_AUTOTUNER = os.path.join("triton", "runtime", "autotuner.py")

# Views, allocation, copies and metadata: fine in any forward.
SAFE_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like new_ones
full full_like new_full fill_ fill zero_ view _unsafe_view reshape as_strided t transpose permute expand
expand_as contiguous clone copy_ _copy_from _copy_from_and_resize _to_copy to detach alias lift_fresh
slice select unsqueeze squeeze flatten unflatten unbind split split_with_sizes chunk narrow resize_ set_
_reshape_alias view_as movedim numpy_T _local_scalar_dense item is_same_size stride size sym_size
sym_stride sym_numel numel dim is_contiguous arange scalar_tensor _has_compatible_shallow_copy_type
lift_fresh_copy _to_dense record_stream cat stack diagonal unfold select_scatter slice_scatter
randint
""".split())
# ``randint``: a draw from torch's generator, as Inductor's code draws the seed of its kernels' random numbers
# (dropout: ``aten.randint.low_out`` into a one-element seed buffer), so torch.manual_seed governs them; no compute.

# Compute a kernel must do itself whatever the reference uses: never allowed in a candidate's forward.
HEAVY_OPS = frozenset("""
mm bmm addmm addbmm baddbmm matmul linear dot vdot mv addmv einsum convolution _convolution conv1d conv2d
conv3d conv_transpose1d conv_transpose2d conv_transpose3d cudnn_convolution _softmax softmax _log_softmax
log_softmax native_layer_norm layer_norm native_batch_norm _native_batch_norm_legit
_native_batch_norm_legit_no_training native_group_norm group_norm rms_norm _fused_rms_norm cumsum cumprod
_scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention
_scaled_dot_product_cudnn_attention scaled_dot_product_attention max_pool2d_with_indices
max_pool3d_with_indices avg_pool2d avg_pool3d nll_loss_forward cross_entropy_loss
""".split())


class OpRecorder(TorchDispatchMode):
    """Counts the ATen ops the candidate's own code calls, by name.

    An op counts when the innermost frame outside torch that led to it is the candidate's (``forward``, a grid
    callable, a heuristic, a function it hands to a library), or when the candidate's code is on the stack and
    no Triton autotuner is (the autotuner benchmarks configs with torch ops of its own). Kernel-launch plumbing
    of Triton itself does not count. ``candidate_file=None`` counts every op (the reference's inventory).
    """

    def __init__(self, *, candidate_file: str | None = None) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.candidate_file = candidate_file

    def _attributed(self) -> bool:
        if self.candidate_file is None:
            return True
        frame = sys._getframe(2)
        innermost = None
        candidate_on_stack = autotuner = False
        while frame is not None:
            filename = frame.f_code.co_filename
            if innermost is None and not filename.startswith(_TORCH_DIR) and filename != __file__:
                innermost = filename
            candidate_on_stack |= filename == self.candidate_file
            autotuner |= filename.endswith(_AUTOTUNER)
            frame = frame.f_back
        if innermost == self.candidate_file:
            return True
        return candidate_on_stack and not autotuner

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if self._attributed():
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


class LaunchCounter:
    """Counts kernel launches: Triton's by patching the launch entry points of the JIT and the interpreter,
    CuTe's through ``backends.launches.counted_launch``, which the CuTe loader wraps around every call into a compiled library.
    On a GPU it also notes the stream each launch went to, so the timed stream can be made to wait for them."""

    def __init__(self, *, candidate_file: str | None = None) -> None:
        self.launches = 0
        self.by_language: Counter[str] = Counter()
        self.kernels: Counter[str] = Counter()  # launches by kernel name (which path of a candidate ran where)
        self.recorder: OpRecorder | None = None
        self.streams: list[Any] = []
        self.candidate_file = candidate_file

    def note_stream(self) -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            stream = torch.cuda.current_stream()
            if stream not in self.streams:
                self.streams.append(stream)

    @contextlib.contextmanager
    def active(self) -> Iterator[LaunchCounter]:
        patched = []
        for cls in _launch_classes():
            original = cls.run

            def run(fn_self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
                self.launches += 1
                self.by_language["triton"] += 1
                self.kernels[str(getattr(fn_self, "__name__", "?"))] += 1
                self.note_stream()
                return __original(fn_self, *args, **kwargs)

            cls.run = run
            patched.append((cls, original))
        ACTIVE_COUNTERS.append(self)
        try:
            yield self
        finally:
            for cls, original in patched:
                cls.run = original
            ACTIVE_COUNTERS.remove(self)


def _launch_classes() -> list[type]:
    classes: list[type] = []
    try:
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


def forbidden_ops(reference_ops: set[str], allow: tuple[str, ...] = ()) -> frozenset[str]:
    """Ops a candidate may not call: the reference's compute ops and every heavy op, minus what the task allows.

    Kept for reading a reference's inventory; the chain itself holds a candidate to ``compute_ops``: no compute
    op at all, whether the reference uses it or not (a fused ``gelu`` beside a kernel for show computes what a
    reference composes of ``tanh``, ``mul`` and ``add``).
    """
    return frozenset((set(reference_ops) - SAFE_OPS) | HEAVY_OPS) - set(allow)


def compute_ops(ops: set[str], allow: tuple[str, ...] = ()) -> list[str]:
    """The compute ops among those a candidate's code called: everything but views, allocation and copies,
    minus the ops the task allows."""
    return sorted(set(ops) - SAFE_OPS - set(allow))
