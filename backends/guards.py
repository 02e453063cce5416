"""Runtime anti-cheat: count kernel launches and watch which ATen ops ``forward`` calls.

Both run inside the evaluation process only (it is ours to patch; nothing leaks to the caller) and undo
themselves when they exit.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

# Views, allocation, copies and metadata: fine in any forward.
SAFE_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like new_ones
full full_like new_full fill_ fill zero_ view _unsafe_view reshape as_strided t transpose permute expand
expand_as contiguous clone copy_ _copy_from _copy_from_and_resize _to_copy to detach alias lift_fresh
slice select unsqueeze squeeze flatten unflatten unbind split split_with_sizes chunk narrow resize_ set_
_reshape_alias view_as movedim numpy_T _local_scalar_dense item is_same_size stride size sym_size
sym_stride sym_numel numel dim is_contiguous arange scalar_tensor _has_compatible_shallow_copy_type
lift_fresh_copy _to_dense record_stream cat stack diagonal unfold select_scatter slice_scatter
""".split())

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
    """Counts ATen ops by name, except while ``paused`` (inside a kernel launch, whose plumbing is not compute)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.paused = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if not self.paused:
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


# Counters inside ``LaunchCounter.active``: launches that do not go through Triton (CuTe/CUDA C++ through
# ``evoforge.backends.cute``) report themselves here through ``counted_launch``.
_ACTIVE_COUNTERS: list[LaunchCounter] = []


class LaunchCounter:
    """Counts kernel launches: Triton's by patching the launch entry points of the JIT and the interpreter,
    CuTe's through ``counted_launch``, which the CuTe loader wraps around every call into a compiled library."""

    def __init__(self) -> None:
        self.launches = 0
        self.by_language: Counter[str] = Counter()
        self.recorder: OpRecorder | None = None

    @contextlib.contextmanager
    def active(self) -> Iterator[LaunchCounter]:
        patched = []
        for cls in _launch_classes():
            original = cls.run

            def run(fn_self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
                self.launches += 1
                self.by_language["triton"] += 1
                if self.recorder is not None:
                    self.recorder.paused += 1
                try:
                    return __original(fn_self, *args, **kwargs)
                finally:
                    if self.recorder is not None:
                        self.recorder.paused -= 1

            cls.run = run
            patched.append((cls, original))
        _ACTIVE_COUNTERS.append(self)
        try:
            yield self
        finally:
            for cls, original in patched:
                cls.run = original
            _ACTIVE_COUNTERS.remove(self)


@contextlib.contextmanager
def counted_launch(language: str = "cute") -> Iterator[None]:
    """Wrap one launch that does not go through Triton: every active counter counts it, and the ATen ops its
    plumbing may call (none for a ctypes call) are not held against the candidate."""
    counters = list(_ACTIVE_COUNTERS)
    for counter in counters:
        counter.launches += 1
        counter.by_language[language] += 1
        if counter.recorder is not None:
            counter.recorder.paused += 1
    try:
        yield
    finally:
        for counter in counters:
            if counter.recorder is not None:
                counter.recorder.paused -= 1


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
    """Ops a candidate may not call: the reference's compute ops and every heavy op, minus what the task allows."""
    return frozenset((set(reference_ops) - SAFE_OPS) | HEAVY_OPS) - set(allow)
