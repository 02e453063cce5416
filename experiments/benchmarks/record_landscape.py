"""Record a tuning landscape on a GPU: every config of a template's space, timed and judged for correctness.

A landscape is what `evoforge search-bench` replays on a CPU (backends/replay.py): for every config of the
space, the median time of the whole forward (triton.testing.do_bench, L2 flushed) and a status: ``ok``,
``incorrect`` (it ran, and the verification chain's comparator, judge/compare.py, rejects its output:
dtype-aware allclose, else the float64 criterion with the chain's yardstick: the reference's own distance from
float64 or, for fp32, that of inputs rounded to a 3-pass split's 16 bits), or the exception's
class name (``OutOfResources``, ``CompilationError``...). An incorrect config is timed too, and every row that ran
carries rel_err (Frobenius, against float64) and max_abs_err. These landscapes are the ones where the fastest
configs compute the wrong answer:

- matmul_fp32_split_4096: knowledge/templates/matmul.py (fp32, 4096^3) over SPLIT x PRECISION with plain tf32
  added (PyTorch's fp32 matmul is no TF32: plain TF32 is fast and incorrect, bf16x3 the fastest correct);
- matmul_fp16_acc_4096: knowledge/templates/matmul_fp16.py (fp16, 4096^3) over ACC (fp32, fp16 accumulator);
- matmul_fp16_fp8_4096: the same template over OPERANDS (fp16, fp8 e4m3 operands: an unsafe fast path).
- matmul_fp16_acc_2048: matmul_fp16_acc_4096's space at 2048^3 (fewer output tiles than SMs for the largest
  tiles), recorded after the tuner's design was fixed: a held-out check.

Issue T's landscapes differ in kind: GEMMs at other shapes and dtypes (fp32 with the split/precision choice at
2048^3, at 8192 x 1024 x 4096, tall-skinny, and at an irregular shape with a persistent grid; bf16 where large
tiles leave SMs idle; fp16 with split-K), and reductions at awkward sizes (softmax, LayerNorm, RMSNorm,
cross-entropy over a 50257-word vocabulary, cumsum). Each names its template, its problem (the task's reference
Model and inputs, ``PROBLEMS``) and its shapes; half of them are held out from the search's design
(experiments/results/search/landscapes/holdout_2026-12-03.json).

Configs that build the same kernel (a parameter the spec's ``when`` leaves unread: PRECISION under a split, BLOCK
of a one-pass softmax) share one measurement: the row says ``same_as`` (the config measured). Before anything is timed, worker processes compile every distinct kernel
by running the forward at a small shape with the same divisibility (the same Triton cache key); the measuring
process then loads them from Triton's disk cache, and no other process uses the GPU while it times.

    python experiments/benchmarks/record_landscape.py --out experiments/results/search/landscapes      # GPU
    python experiments/benchmarks/record_landscape.py --smoke --out /tmp/smoke                          # CPU
    python experiments/benchmarks/record_landscape.py matmul_fp16_acc_4096 --max-seconds 150 --out DIR

A task's landscape (``TASK_SPECS``: the second round of issue T, split before recording in
holdout_2026-12-07.json) is a start evoforge builds from torch.compile's capture of a KernelBench task: an Inductor
seed's multi-kernel space, an Inductor GEMM template's precision, the ``triton-conv`` kernel's tiles and precision.
The capture is made on the recording GPU by the campaign's own set-up (``InductorStarts``, in a process of its own:
this one imports evoforge only for the task's Model and inputs), the build's source is written to
``sources/NAME.py`` beside the landscape, and each config is judged against the task's own Model at its own sizes.
A CuTe template's space is not recorded here: every config is an nvcc build of CUTLASS (tens of seconds each), and
its loader is evoforge's CuTe backend.

    python3 -P experiments/benchmarks/record_landscape.py conv_l2_1_64_channels --max-seconds 240 --out DIR   # GPU

``--smoke`` runs a few configs per landscape (each value of a string or boolean parameter or of a ``switches``
integer at least once) at tiny sizes on the Triton interpreter and writes the same files, timed with one wall-clock call (``timing_representative: false``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "knowledge" / "templates"
WARMUP_MS, REP_MS = 10, 40


def cube(size: int) -> dict[str, int]:
    return {"M": size, "N": size, "K": size}


SMOKE_SIZE = 128
PRECOMPILE_SIZE = 512  # a multiple of every tile: the same EVEN_K / EVEN_MN and divisibility as the full size


@dataclass(frozen=True)
class Problem:
    """What a template computes: the task's reference Model (an nn.Module, so that the chain's float64 copy of it
    can be made), its inputs at a shape, and the arguments ModelNew takes, as the task's get_init_inputs gives them."""

    reference: str  # named in the file's correctness line
    model: Callable[[dict[str, int]], Any]
    inputs: Callable[[dict[str, int], Any, Any], list[Any]]  # (shape, torch dtype, CPU generator) -> tensors
    init_args: Callable[[dict[str, int]], tuple] = lambda shape: ()


@dataclass(frozen=True)
class Spec:
    """One landscape: a template, its problem and shapes, the space recorded, and which parameters a config leaves
    unread (``when``: configs that differ only there build one kernel and are measured once)."""

    template: str
    dtype: str
    shape: dict[str, int]
    space: dict[str, list[Any]]
    fixed: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    # Parameters read only on some paths: {param: {other: [values under which it is read]}}. The recorder measures
    # twins once; a replay answers a twin from the file (backends/replay.py).
    when: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    problem: str = "matmul"
    # --smoke's shape, on the interpreter; the shape worker processes compile at, with the full shape's
    # divisibility and constexprs (the same Triton cache key), so the measuring process finds every kernel built.
    smoke: dict[str, int] = field(default_factory=lambda: cube(SMOKE_SIZE))
    precompile: dict[str, int] = field(default_factory=lambda: cube(PRECOMPILE_SIZE))
    # Integer parameters that choose a code path (LOOPED, PERSISTENT, SPLIT_K): --smoke runs each of their values,
    # as it runs each value of a string or boolean choice.
    switches: tuple[str, ...] = ()


def reference(a, b):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default: an fp32 matmul is fp32
    return torch.matmul(a, b)


def _matmul_model(shape: dict[str, int]):
    import torch

    class Matmul(torch.nn.Module):
        def forward(self, a, b):
            return reference(a, b)

    return Matmul()


def _matmul_inputs(shape: dict[str, int], dtype, gen) -> list[Any]:
    import torch

    a = torch.randn(shape["M"], shape["K"], generator=gen).to(dtype)
    b = torch.randn(shape["K"], shape["N"], generator=gen).to(dtype)
    return [a, b]


def _function_model(fn: Callable[..., Any]):
    import torch

    class Reference(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)

    return Reference()


def _layernorm_model(shape: dict[str, int]):
    import torch

    torch.manual_seed(0)  # as the chain seeds before it builds the Model and ModelNew (default init: w = 1, b = 0)
    return torch.nn.LayerNorm((shape["dim1"], shape["dim2"]))


def _rms(x, eps: float = 1e-5):
    import torch

    return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + eps)  # KernelBench level1/36_RMSNorm_


def _rand(*dims: str) -> Callable[[dict[str, int], Any, Any], list[Any]]:
    """KernelBench's inputs for these tasks: torch.rand of the shape's ``dims``."""
    def inputs(shape: dict[str, int], dtype, gen) -> list[Any]:
        import torch

        return [torch.rand(*(shape[d] for d in dims), generator=gen).to(dtype)]
    return inputs


def _cross_entropy_inputs(shape: dict[str, int], dtype, gen) -> list[Any]:
    import torch

    logits = torch.rand(shape["batch"], shape["classes"], generator=gen).to(dtype)
    return [logits, torch.randint(0, shape["classes"], (shape["batch"],), generator=gen)]


def _torch(name: str) -> Callable[..., Any]:
    """A torch function looked up when called (torch is imported after TRITON_INTERPRET is set)."""
    def call(*args):
        import torch

        return {"softmax": lambda x: torch.softmax(x, dim=1), "cumsum": lambda x: torch.cumsum(x, dim=1),
                "cross_entropy": torch.nn.functional.cross_entropy, "rmsnorm": _rms}[name](*args)
    return call


PROBLEMS: dict[str, Problem] = {
    "matmul": Problem("torch.matmul", _matmul_model, _matmul_inputs),
    "softmax": Problem("torch.softmax(x, dim=1)", lambda shape: _function_model(_torch("softmax")),
                       _rand("rows", "cols")),
    "layernorm": Problem("torch.nn.LayerNorm over (dim1, dim2)", _layernorm_model, _rand("batch", "dim1", "dim2"),
                         init_args=lambda shape: ((shape["dim1"], shape["dim2"]),)),
    "rmsnorm": Problem("KernelBench 36_RMSNorm_'s x / sqrt(mean(x^2, dim=1) + 1e-5)",
                       lambda shape: _function_model(_torch("rmsnorm")),
                       _rand("batch", "features", "dim1", "dim2"), init_args=lambda shape: (shape["features"],)),
    "cross_entropy": Problem("torch.nn.functional.cross_entropy", lambda shape: _function_model(
        _torch("cross_entropy")), _cross_entropy_inputs),
    "cumsum": Problem("torch.cumsum(x, dim=1)", lambda shape: _function_model(_torch("cumsum")),
                      _rand("rows", "cols"), init_args=lambda shape: (1,)),
}


TILES = {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256]}
FP32_SPLIT = {**TILES, "BLOCK_K": [32, 64], "num_warps": [4, 8], "num_stages": [3],
              "SPLIT": ["bf16x3", "tf32x3", "none"], "PRECISION": ["tf32", "tf32x3", "ieee"]}
FP32_NOTE = ("PRECISION is read only when SPLIT is none; plain tf32 is not in the template's SPACE (it fails an fp32 "
             "task), it is recorded here because it is the fast, incorrect neighbour of the correct configs")
SPECS: dict[str, Spec] = {
    "matmul_fp32_split_4096": Spec(
        template="matmul", dtype="float32", shape=cube(4096),
        space={**TILES, "BLOCK_K": [32, 64], "num_warps": [4, 8], "num_stages": [2, 3, 4],
               "SPLIT": ["bf16x3", "tf32x3", "none"], "PRECISION": ["tf32", "tf32x3", "ieee"]},
        fixed={"GROUP_M": 8, "B_KMAJOR": True}, when={"PRECISION": {"SPLIT": ["none"]}}, note=FP32_NOTE),
    "matmul_fp16_acc_4096": Spec(
        template="matmul_fp16", dtype="float16", shape=cube(4096),
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4, 5],
               "ACC": ["fp32", "fp16"]},
        fixed={"GROUP_M": 8, "OPERANDS": "fp16"}, note="ACC fp16: the MMA accumulates in fp16"),
    "matmul_fp16_fp8_4096": Spec(
        template="matmul_fp16", dtype="float16", shape=cube(4096),
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4, 5],
               "OPERANDS": ["fp16", "fp8"]},
        fixed={"GROUP_M": 8, "ACC": "fp32"}, note="OPERANDS fp8: operands rounded to float8 e4m3 before the GEMM"),
    # Held out from the tuner's design: recorded after the tile-with-its-warps step was chosen on the others. At
    # 2048 a 128x256 tile leaves the H200 fewer output tiles (128) than SMs (132): smaller tiles may win here.
    "matmul_fp16_acc_2048": Spec(
        template="matmul_fp16", dtype="float16", shape=cube(2048),
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [2, 3, 4, 5],
               "ACC": ["fp32", "fp16"]},
        fixed={"GROUP_M": 8, "OPERANDS": "fp16"}, note="ACC fp16: the MMA accumulates in fp16"),
    # --- issue T: twelve landscapes that differ in kind (half held out: holdout_2026-12-03.json) ---------------
    "matmul_fp32_split_2048": Spec(
        template="matmul", dtype="float32", shape=cube(2048), space=FP32_SPLIT,
        fixed={"GROUP_M": 8, "B_KMAJOR": True}, when={"PRECISION": {"SPLIT": ["none"]}},
        note=FP32_NOTE + "; 3 stages only (the 4096 landscape's best), to record in about 90 s"),
    "matmul_fp32_split_8192x1024x4096": Spec(
        template="matmul", dtype="float32", shape={"M": 8192, "N": 1024, "K": 4096}, space=FP32_SPLIT,
        fixed={"GROUP_M": 8, "B_KMAJOR": True}, when={"PRECISION": {"SPLIT": ["none"]}},
        smoke={"M": 256, "N": 64, "K": 128},
        note=FP32_NOTE + "; a wide, short output: 8 column tiles of 128"),
    "matmul_fp32_tall_skinny_16384x32": Spec(
        template="matmul_tall_skinny", dtype="float32", shape={"M": 16384, "N": 16384, "K": 32},
        space={**TILES, "num_warps": [4, 8], "TMA_STORE": [False, True],
               "SPLIT": ["bf16x3", "tf32x3", "none"], "PRECISION": ["tf32", "tf32x3", "ieee"]},
        fixed={"BLOCK_K": 32, "GROUP_M": 8, "num_stages": 2, "B_KMAJOR": True},
        when={"PRECISION": {"SPLIT": ["none"]}}, smoke={"M": 128, "N": 128, "K": 32},
        precompile={"M": 512, "N": 512, "K": 32},
        note="C = A @ B with K = 32: a 1 GiB fp32 output written from 4 MiB of inputs, one K step (BLOCK_K = K); "
             + FP32_NOTE),
    "matmul_grouped_fp32_4099x2963x1471": Spec(
        template="matmul_grouped", dtype="float32", shape={"M": 4099, "N": 2963, "K": 1471},
        space={"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "BLOCK_K": [32, 64], "GROUP_M": [1, 8],
               "PERSISTENT": [0, 1], "INPUT_PRECISION": ["tf32", "tf32x3", "ieee"], "num_warps": [4, 8]},
        fixed={"num_stages": 3}, smoke={"M": 67, "N": 45, "K": 37}, precompile={"M": 515, "N": 371, "K": 179},
        switches=("PERSISTENT",),
        note="odd M, N and K: every tile masked, no 16-byte aligned rows; INPUT_PRECISION tf32 is not in the "
             "template's SPACE (it fails an fp32 task), recorded as the fast, incorrect neighbour"),
    "matmul_bf16_1536x1536x8192": Spec(
        template="matmul_bf16", dtype="bfloat16", shape={"M": 1536, "N": 1536, "K": 8192},
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [3, 4, 5],
               "TMA": [True, False]},
        fixed={"GROUP_M": 8, "SUBTILE": False},
        note="few output tiles for 132 SMs: 36 of 256 x 256, 72 of 128 x 256, 144 of 128 x 128 (1.09 waves); TMA: "
             "the persistent tensor-descriptor kernel, else the pointer kernel"),
    "matmul_fp16_splitk_1024x1024x16384": Spec(
        template="matmul_fp16", dtype="float16", shape={"M": 1024, "N": 1024, "K": 16384},
        space={**TILES, "BLOCK_K": [32, 64, 128], "num_warps": [4, 8], "num_stages": [3, 4],
               "SPLIT_K": [1, 2, 4, 8]},
        fixed={"GROUP_M": 8, "ACC": "fp32", "OPERANDS": "fp16"}, switches=("SPLIT_K",),
        smoke={"M": 64, "N": 64, "K": 512},
        note="64 output tiles of 128 x 128 for 132 SMs and a long K: SPLIT_K slices K over a second grid axis "
             "into an fp32 workspace summed by a second kernel"),
    "softmax_rows_fp16_16384x3000": Spec(
        template="softmax_rows", problem="softmax", dtype="float16", shape={"rows": 16384, "cols": 3000},
        space={"BLOCK": [256, 512, 1024, 2048, 4096], "LOOPED": [0, 1], "num_warps": [1, 2, 4, 8, 16],
               "num_stages": [1, 2, 3]},
        when={"BLOCK": {"LOOPED": [1]}}, switches=("LOOPED",),
        smoke={"rows": 4, "cols": 3000}, precompile={"rows": 64, "cols": 3000},
        note="3000 columns: a 4096-wide row tile is 27% masked; BLOCK is read only by the looped form"),
    "softmax_fp32_1024x100000": Spec(
        template="softmax", problem="softmax", dtype="float32", shape={"rows": 1024, "cols": 100000},
        space={"BLOCK": [1024, 2048, 4096, 8192, 16384, 32768], "num_warps": [4, 8, 16, 32],
               "REVERSE": [True, False]},
        fixed={"ONE_PASS_MAX": 16384}, smoke={"rows": 2, "cols": 10000}, precompile={"rows": 16, "cols": 100000},
        note="rows of 100000 (400 KB): the looped online form at every config (ONE_PASS_MAX is unread: fixed)"),
    "layernorm_fp32_64x1000x1000": Spec(
        template="layernorm", problem="layernorm", dtype="float32", shape={"batch": 64, "dim1": 1000, "dim2": 1000},
        space={"BLOCK": [1024, 2048, 4096, 8192], "ITERS": [1, 2, 4, 8, 16], "num_warps": [4, 8, 16],
               "REVERSE": [True, False]},
        smoke={"batch": 2, "dim1": 3, "dim2": 1000}, precompile={"batch": 16, "dim1": 1000, "dim2": 1000},
        note="64 rows of 10^6: chunks of BLOCK x ITERS never divide a row; inputs torch.rand as KernelBench's"),
    "rmsnorm_fp32_32x100x300x300": Spec(
        template="rmsnorm", problem="rmsnorm", dtype="float32",
        shape={"batch": 32, "features": 100, "dim1": 300, "dim2": 300},
        space={"BLOCK_S": [32, 64, 128, 256, 512], "BLOCK_F": [16, 32, 64, 128], "num_warps": [2, 4, 8, 16]},
        switches=("BLOCK_F",), smoke={"batch": 2, "features": 100, "dim1": 5, "dim2": 7},
        precompile={"batch": 16, "features": 100, "dim1": 300, "dim2": 300},
        note="100 features (one pass only at BLOCK_F 128, else two loops with a masked tail chunk) over 90000 "
             "positions; inputs torch.rand as KernelBench's"),
    "cross_entropy_fp32_4096x50257": Spec(
        template="cross_entropy", problem="cross_entropy", dtype="float32", shape={"batch": 4096, "classes": 50257},
        space={"ROWS": [1, 2, 4, 8], "BLOCK_C": [1024, 2048, 4096, 8192], "num_warps": [4, 8, 16]},
        switches=("ROWS",), smoke={"batch": 8, "classes": 5000}, precompile={"batch": 256, "classes": 50257},
        note="GPT-2's vocabulary (50257, odd: no aligned rows); logits torch.rand as KernelBench's"),
    "cumsum_fp32_8192x30000": Spec(
        template="cumsum", problem="cumsum", dtype="float32", shape={"rows": 8192, "cols": 30000},
        space={"BLOCK": [512, 1024, 2048, 4096, 8192], "ROWS": [1, 2, 4], "num_warps": [2, 4, 8, 16]},
        switches=("ROWS",), smoke={"rows": 5, "cols": 3000}, precompile={"rows": 64, "cols": 30000},
        note="rows of 30000 along dim 1: the last tile of every row is partly masked; inputs torch.rand as "
             "KernelBench's"),
}



@dataclass(frozen=True)
class TaskSpec:
    """A landscape of a start the campaign builds from torch.compile's capture of a KernelBench task (an Inductor
    seed's multi-kernel space, or the ``triton-conv`` kernel's tiles and precision): the capture is made on the
    recording device by evoforge's own set-up (``InductorStarts``, in a process of its own), the build's source is
    written beside the landscape (``sources/NAME.py``), and each config is judged against the task's own reference
    (its Model and get_inputs, seeded as the chain seeds them). ``space`` names the build's SPACE keys to vary, each
    by its full name or by the one key that ends in ``_NAME`` (the rest keep the build's PARAMS); ``build``
    ``triton-conv`` is the variant of that name, or the seed where the seed is that kernel (a strict task with no
    other start); ``sizes`` the task's overrides (none: its own sizes); ``smoke_capture``: a committed capture at
    ``smoke_sizes`` that ``--smoke`` uses instead of capturing on the CPU (minutes)."""

    task: str
    build: str  # "seed", or the name of an Inductor variant ("triton-conv")
    dtype: str
    space: dict[str, list[Any]]
    sizes: dict[str, int] = field(default_factory=dict)
    smoke_sizes: dict[str, int] = field(default_factory=dict)
    smoke_capture: str = ""
    allow_ops: tuple[str, ...] = ()  # the strict rule unless named
    note: str = ""
    when: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    switches: tuple[str, ...] = ()
    fixed: dict[str, Any] = field(default_factory=dict)
    problem: str = "task"

    @property
    def template(self) -> str:
        return f"{self.task} {self.build}"


CONV_TILES = {"conv0_BLOCK_M": [64, 128, 256], "conv0_BLOCK_N": [32, 64, 128], "conv0_BLOCK_K": [16, 32],
              "conv0_num_warps": [4, 8], "conv0_num_stages": [2, 3, 4]}
CONV_PRECISIONS = ["bf16x3", "tf32x3", "tf32-round", "ieee"]
CONV_SPACE = {**CONV_TILES, "conv0_PRECISION": CONV_PRECISIONS}
TASK_SPECS: dict[str, TaskSpec] = {
    # --- issue T, second round (split before any is recorded: holdout_2026-12-07.json) -------------------------
    "conv_l2_87_triton_conv": TaskSpec(
        task="L2/87", build="triton-conv", dtype="float32",
        space=CONV_SPACE,
        smoke_sizes={"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 16, "width": 16},
        smoke_capture="tests/fixtures/inductor/level2_87_Conv2d_Subtract_Subtract_Mish.main.cpu.json",
        note="Conv2d 3 -> 16 channels, 3x3, then Inductor's fused epilogue: under the strict rule the seed is the "
             "implicit-GEMM kernel (three input channels: the element-wise K gather); PRECISION's tf32-round is "
             "cuDNN's own arithmetic where the reference runs in TF32"),
    "conv_l1_75_transposed_grouped": TaskSpec(
        task="L1/75", build="triton-conv", dtype="float32",
        space=CONV_SPACE,
        smoke_sizes={"batch_size": 2, "in_channels": 8, "out_channels": 12, "height": 6, "width": 7},
        smoke_capture="tests/fixtures/inductor/level1_75_conv_transposed_2D_grouped.main.cpu.json",
        note="ConvTranspose2d, stride (2, 3), padding (1, 2), dilation (2, 1), 4 groups: the kernel split by output "
             "phase, a GEMM per group and phase"),
    "conv_l2_1_64_channels": TaskSpec(
        task="L2/1", build="triton-conv", dtype="float32", allow_ops=("convolution",),
        space=CONV_SPACE,
        note="Conv2d with 64 output channels beside torch.compile's fused ReLU and bias (cuDNN allowed: the kernel is "
             "a variant of the seed): K = 3 x 3 x in_channels, a precision whose cost depends on the tile"),
    "conv_l1_84_depthwise": TaskSpec(
        task="L1/84", build="triton-conv", dtype="float32",
        # Split as the implicit GEMM's tiles (one output channel a group, a tile's N mostly masked); before anything
        # was recorded, a depthwise convolution's start became the direct stencil, whose SPACE this is.
        space={"conv0_BLOCK": [128, 256, 512, 1024, 2048, 4096, 8192], "conv0_num_warps": [1, 2, 4, 8, 16]},
        smoke_sizes={"batch_size": 2, "in_channels": 8, "out_channels": 8, "height_in": 9, "width_in": 12},
        smoke_capture="tests/fixtures/inductor/level1_84_conv_depthwise_2D_asymmetric_input_square_kernel.main.cpu.json",
        note="depthwise (groups = channels), 4 GiB of input: the direct stencil (a program a block of one sample's "
             "outputs by up to 32 channels, in the channels-last layout torch.compile's build gives it), its block "
             "and warps"),
    "inductor_l1_40_layernorm": TaskSpec(
        task="L1/40", build="seed", dtype="float32",
        space={"XBLOCK": [1, 2, 4, 8], "R0_BLOCK": [512, 1024, 2048, 4096], "num_warps": [2, 4, 8, 16],
               "num_stages": [1, 2]},
        smoke_sizes={"batch_size": 2, "features": 4, "dim1": 8, "dim2": 8},
        smoke_capture="tests/fixtures/inductor/level1_40_LayerNorm.cpu.json",
        note="torch.compile's LayerNorm over (features, dim1, dim2): its looped reduction's row and reduction blocks"),
    "inductor_l2_76_gemm_add_relu": TaskSpec(
        task="L2/76", build="triton-gemm", dtype="float32", allow_ops=("addmm", "mm"),
        space={"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "BLOCK_K": [32, 64], "GROUP_M": [1, 8],
               "num_warps": [4, 8], "num_stages": [3, 4], "PRECISION": ["tf32x3", "bf16x3-split", "ieee"]},
        smoke_sizes={"batch_size": 8, "in_features": 32, "out_features": 16, "bias_shape": [16]},
        smoke_capture="tests/fixtures/inductor/level2_76_Gemm_Add_ReLU.gemm.cpu.json",
        note="Inductor's Triton GEMM template (cuBLAS allowed: the variant whose GEMM is a template) with the fused "
             "bias and ReLU, its fp32 dot as three TF32 passes, bf16 parts or exact"),
}


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def configs(spec: Spec) -> list[dict[str, Any]]:
    combos = [dict(zip(spec.space, v, strict=True)) for v in itertools.product(*spec.space.values())]
    random.Random(0).shuffle(combos)  # a run stopped by --max-seconds leaves a uniform sample, not one corner
    return combos


def smoke_configs(spec: Spec) -> list[dict[str, Any]]:
    """Small tiles, and every value of every choice at least once: string and boolean parameters, and the integer
    ``switches``."""
    def choice(name: str, values: list[Any]) -> bool:
        return name in spec.switches or not all(isinstance(x, int) and not isinstance(x, bool) for x in values)

    small = {k: v[0] if choice(k, v) and k not in spec.switches else min(v) for k, v in spec.space.items()}
    out = [small]
    for name, values in spec.space.items():
        if choice(name, values):
            out += [{**small, name: v} for v in values if v != small[name]]
    return out


def make_inputs(spec: Spec, shape: dict[str, int], device: str, seed: int = 0) -> list[Any]:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [t.to(device) for t in PROBLEMS[spec.problem].inputs(shape, getattr(torch, spec.dtype), gen)]


def _to_double(inputs: list[Any]) -> list[Any]:
    return [t.double() if t.is_floating_point() else t for t in inputs]


def float64_references(inputs, round_significand: Callable[[Any], Any], model=None) -> tuple[Any, Any]:
    """The float64 result, and the chain's yardstick for an fp32 output: the float64 result on inputs rounded to
    the 16 significant bits a 3-pass split keeps (judge/chain.py passes both to compare_outputs, and computes
    them as here: a float64 copy of the reference Model on float64 inputs). ``model``: the reference (matmul's
    by default)."""
    import copy

    import torch

    model64 = copy.deepcopy(model).double() if model is not None else reference
    with torch.no_grad():
        return model64(*_to_double(list(inputs))), model64(*_to_double(round_significand(list(inputs))))


# --- compile ahead (worker processes) --------------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _worker_init(template: str, spec_name: str, device: str, shape: dict[str, int]) -> None:
    if spec_name in TASK_SPECS:  # ``template``: the build's source file
        problem = task_problem(TASK_SPECS[spec_name], shape, device)
        _WORKER.update(module=load_module(Path(template), f"precompile_{spec_name}"), inputs=problem.inputs,
                       init_args=problem.init_args, seed=TASK_SEED, cuda=device == "cuda")
        return
    spec = SPECS[spec_name]
    _WORKER["module"] = load_module(TEMPLATES / f"{template}.py", f"precompile_{template}")
    _WORKER["inputs"] = make_inputs(spec, shape, device)
    _WORKER["init_args"] = PROBLEMS[spec.problem].init_args(shape)
    _WORKER["cuda"] = device == "cuda"


def _worker_compile(cfg: dict[str, Any]) -> str:
    """Run the forward once at the small shape: compiles (and loads) the kernels into Triton's disk cache."""
    import torch

    module = _WORKER["module"]
    module.PARAMS.update(cfg)
    try:
        if _WORKER.get("seed") is not None:
            torch.manual_seed(_WORKER["seed"])
        with torch.no_grad():
            module.ModelNew(*_WORKER["init_args"]).to(_WORKER["inputs"][0].device)(*_WORKER["inputs"])
        if _WORKER["cuda"]:
            torch.cuda.synchronize()
        return "ok"
    except Exception as exc:  # recorded by the measuring process, which meets the same error
        return type(exc).__name__


# --- measure -------------------------------------------------------------------------------------------------
def measure(module: ModuleType, cfg: dict[str, Any], inputs, expected, references, compare, *, smoke: bool,
            init_args: tuple = (), seed: int | None = None) -> dict:
    """``references``: float64 results on the inputs and on the inputs rounded as a 3-pass split rounds them;
    ``init_args``: ModelNew's (the task's get_init_inputs); ``seed``: torch's seed before ModelNew is built (a
    task's, whose parameters its Model drew after the same seed)."""
    import torch

    ref64, rounded64 = references

    module.PARAMS.update(cfg)
    if seed is not None:  # a task's ModelNew holds the task's parameters: built as the chain builds both
        torch.manual_seed(seed)
    model = module.ModelNew(*init_args).to(inputs[0].device)
    try:
        with torch.no_grad():
            out = model(*inputs)
        if not smoke:
            torch.cuda.synchronize()
    except Exception as exc:
        return {"ms": None, "status": type(exc).__name__, "message": str(exc).strip().splitlines()[-1][:300]
                if str(exc).strip() else ""}
    verdict = compare(out, expected, reference64=lambda: ref64, rounded64=lambda: rounded64)
    diff = out.double() - ref64
    row = {"status": "ok" if verdict.ok else "incorrect", "criterion": verdict.criterion,
           "rel_err": float(diff.norm() / ref64.norm()), "max_abs_err": float(diff.abs().max()),
           "ref_max_abs_err": float((expected.double() - ref64).abs().max())}
    try:
        if smoke:
            t0 = time.perf_counter()
            model(*inputs)
            row["ms"] = (time.perf_counter() - t0) * 1e3
        else:
            from triton.testing import do_bench

            row["ms"] = float(do_bench(lambda: model(*inputs), warmup=WARMUP_MS, rep=REP_MS, return_mode="median"))
    except Exception as exc:
        row.update(ms=None, status=type(exc).__name__, message=str(exc).strip()[:300])
    return row


def kernel_key(spec: Spec, cfg: dict[str, Any]) -> tuple:
    """Configs that build one kernel share a key: a parameter the spec's ``when`` leaves unread counts as None
    (backends/replay.py matches twins the same way)."""
    unread = {name for name, cond in spec.when.items()
              if any(cfg.get(other) not in values for other, values in cond.items())}
    return tuple(sorted((k, None if k in unread else v) for k, v in cfg.items()))


def precompile(spec: Spec | TaskSpec, name: str, todo: list[dict[str, Any]], *, workers: int, seconds: float,
               device: str, shape: dict[str, int], source: Path | None = None) -> None:
    """Compile every distinct kernel in worker processes before anything is timed (they run it at a small shape,
    so they use the GPU: never while a measurement runs). What is not done in ``seconds`` compiles when measured."""
    import multiprocessing
    from concurrent.futures import wait

    keys: dict[tuple, dict[str, Any]] = {}
    for cfg in todo:
        keys.setdefault(kernel_key(spec, cfg), {**spec.fixed, **cfg})
    template = str(source) if source is not None else spec.template
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                             initargs=(template, name, device, shape)) as pool:
        futures = [pool.submit(_worker_compile, cfg) for cfg in keys.values()]
        wait(futures, timeout=seconds)
        for f in futures:
            f.cancel()


def device_alive() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


def record(name: str, *, out_dir: Path, smoke: bool, max_seconds: float, workers: int) -> Path:
    import torch

    spec = SPECS[name]
    device = "cpu" if smoke else "cuda"
    comparator = load_module(REPO / "judge" / "compare.py", "evoforge_compare")
    compare = comparator.compare_outputs
    module = load_module(TEMPLATES / f"{spec.template}.py", f"landscape_{spec.template}")
    module.PARAMS.update(spec.fixed)
    problem = PROBLEMS[spec.problem]
    shape = spec.smoke if smoke else spec.shape
    inputs = make_inputs(spec, shape, device)
    model = problem.model(shape).to(device)
    init_args = problem.init_args(shape)
    with torch.no_grad():
        expected = model(*inputs)
    references = float64_references(inputs, comparator.round_significand, model)
    baseline = None if smoke else reference_ms(model, inputs)
    todo = smoke_configs(spec) if smoke else configs(spec)
    t0 = time.monotonic()
    if workers > 0:
        precompile(spec, name, todo, workers=workers, seconds=0.6 * max_seconds, device=device,
                   shape=shape if smoke else spec.precompile)
    return record_rows(out_dir / f"{name}.json", spec, todo, t0=t0, max_seconds=max_seconds, smoke=smoke,
                       shape=shape, baseline=baseline,
                       measure_one=lambda cfg: measure(module, cfg, inputs, expected, references, compare, smoke=smoke,
                                                       init_args=init_args))


def reference_ms(model: Any, inputs: list[Any]) -> float:
    """The reference's own time, as the configs are timed (its median, L2 flushed)."""
    import torch
    from triton.testing import do_bench

    with torch.no_grad():
        return float(do_bench(lambda: model(*inputs), warmup=25, rep=100, return_mode="median"))


def record_rows(path: Path, spec: Spec | TaskSpec, todo: list[dict[str, Any]], *, t0: float, max_seconds: float,
                smoke: bool, shape: dict[str, Any], baseline: float | None,
                measure_one: Callable[[dict[str, Any]], dict[str, Any]], kernel: str = "") -> Path:
    """Every config of ``todo`` measured (configs that build one kernel once), the file written every 50 configs and
    at the end; stopped by ``max_seconds`` (counted from ``t0``) or by a device that no longer answers."""
    rows: list[dict[str, Any]] = []
    measured: dict[tuple, dict[str, Any]] = {}
    stopped = ""
    for n, cfg in enumerate(todo):
        if n and n % 50 == 0:
            write(path, spec, smoke=smoke, shape=shape, baseline=baseline, rows=rows, kernel=kernel,
                  seconds=time.monotonic() - t0, stopped=f"in progress: {n} of {len(todo)} configs")
        if time.monotonic() - t0 > max_seconds:
            stopped = f"stopped by --max-seconds {max_seconds:g} after {len(rows)} of {len(todo)} configs"
            break
        key = kernel_key(spec, cfg)
        if key in measured:
            first = measured[key]
            rows.append({**cfg, **{k: v for k, v in first.items() if k not in cfg},
                         "same_as": {k: first[k] for k in cfg}})
            continue
        row = {**cfg, **measure_one(cfg)}
        rows.append(row)
        measured[key] = row
        if not smoke and row["ms"] is None and not device_alive():
            stopped = f"the device failed after config {cfg} ({row['status']}); recording stopped"
            break
    return write(path, spec, smoke=smoke, shape=shape, baseline=baseline, rows=rows, seconds=time.monotonic() - t0,
                 stopped=stopped or ("" if len(rows) == len(todo) else "incomplete"), kernel=kernel)

#: torch's seed before a task's Model and ModelNew are built and before its inputs are drawn.
TASK_SEED = 0

_BUILD = r"""
import json, sys
from pathlib import Path
from evoforge.backends.registry import get_backend
from evoforge.starts.inductor import InductorStarts
from evoforge.task import Task
spec, sizes, allow_ops, device, run_dir, build, out = sys.argv[1:]
task = Task.load(spec, overrides=json.loads(sizes), allow_ops=json.loads(allow_ops))
starts = InductorStarts(run_dir=Path(run_dir), backend=get_backend("interpreter" if device == "cpu" else device),
                        timeout_s=600)
starts.capture(task)
seed, variants = starts.seed(task)
chosen = seed if build == "seed" else next((v for v in variants if v.meta.get("inductor_config") == build), None)
if chosen is None and build == "triton-conv" and "_evoforge_conv(" in seed.source:
    chosen = seed  # a strict task whose seed is the kernel
if chosen is None:
    sys.exit(f"{spec}: no start {build!r} (its variants: {[v.meta.get('inductor_config') for v in variants]})")
Path(out).write_text(chosen.source)
print(json.dumps({"space": chosen.space, "params": chosen.params}))
"""


def build_source(spec: TaskSpec, name: str, out_dir: Path, *, smoke: bool) -> tuple[Path, dict[str, list[Any]]]:
    """The start the spec names, built by evoforge's own set-up from a capture made on the recording device (on
    ``--smoke``, the spec's committed capture): its source at ``out_dir/sources/NAME.py``, and its SPACE."""
    import tempfile

    sizes = spec.smoke_sizes if smoke else spec.sizes
    run_dir = Path(tempfile.mkdtemp(prefix=f"landscape-{name}-"))
    if smoke:
        if not spec.smoke_capture:
            raise SystemExit(f"{name}: no committed capture for --smoke (smoke_capture)")
        task_file = Path(_task_path(spec.task))
        stem = f"level{task_file.parent.name.removeprefix('level')}_{task_file.stem}"
        (run_dir / "seeds").mkdir()
        (run_dir / "seeds" / f"{stem}.inductor.json").write_text((REPO / spec.smoke_capture).read_text())
    out = out_dir / "sources" / f"{name}.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-P", "-c", _BUILD, spec.task, json.dumps(sizes),
                           json.dumps(list(spec.allow_ops)), "cpu" if smoke else "cuda", str(run_dir), spec.build,
                           str(out)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{name}: building {spec.task}'s {spec.build} failed: "
                           f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    return out, json.loads(proc.stdout.strip().splitlines()[-1])["space"]


def _task_path(spec: str) -> str:
    from evoforge.task import resolve_task_path

    return str(resolve_task_path(spec))


def resolve_space(name: str, wanted: dict[str, list[Any]], space: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The spec's keys as the build's SPACE names them: a key by its full name, or by the one SPACE key that ends in
    ``_KEY`` (a multi-kernel build's ``k0_XBLOCK``); a key that names none, or several, stops the recording."""
    out: dict[str, list[Any]] = {}
    found_of = {key: [key] if key in space else [k for k in space if k.endswith("_" + key)] for key in wanted}
    # A key several kernels share (``num_warps``) is that of the kernel whose keys the others found alone (the
    # GEMM template's ``k1_`` where only it has a ``BLOCK_M``).
    kernels = {found[0][:-len(key)] for key, found in found_of.items() if len(found) == 1 and found[0] != key}
    for key, values in wanted.items():
        found = found_of[key]
        if len(found) > 1 and kernels:
            found = [k for k in found if k[:-len(key)] in kernels]
        if len(found) != 1:
            raise SystemExit(f"{name}: the build's SPACE has {'no' if not found else 'several'} {key!r} "
                             f"({found or sorted(space)}): name its key in full")
        out[found[0]] = values
    return out


@dataclass(frozen=True)
class TaskProblem:
    model: Any
    inputs: list[Any]
    init_args: tuple


def task_problem(spec: TaskSpec, sizes: dict[str, int], device: str) -> TaskProblem:
    """The task's reference Model and inputs at ``sizes`` on ``device``, seeded as the chain seeds them."""
    import torch

    from evoforge.task import Task, load_task_module

    task = Task.load(spec.task, overrides=sizes, allow_ops=list(spec.allow_ops))
    module = load_task_module(task)
    init_args = tuple(module.get_init_inputs())
    torch.manual_seed(TASK_SEED)
    model = module.Model(*init_args).to(device)
    torch.manual_seed(TASK_SEED)
    with torch.device(device):
        inputs = [x.to(device) if hasattr(x, "to") else x for x in module.get_inputs()]
    return TaskProblem(model=model, inputs=inputs, init_args=init_args)


def record_task(name: str, *, out_dir: Path, smoke: bool, max_seconds: float, workers: int) -> Path:
    """A TaskSpec's landscape: the start built from the task's capture, every config of the spec's space judged
    against the task's reference and timed as ``record`` times a template's."""
    import dataclasses

    import torch

    spec = TASK_SPECS[name]
    device = "cpu" if smoke else "cuda"
    source, space = build_source(spec, name, out_dir, smoke=smoke)
    spec = dataclasses.replace(spec, space=resolve_space(name, spec.space, space))
    comparator = load_module(REPO / "judge" / "compare.py", "evoforge_compare")
    module = load_module(source, f"landscape_{name}")
    module.PARAMS.update(spec.fixed)
    sizes = spec.smoke_sizes if smoke else spec.sizes
    problem = task_problem(spec, sizes, device)
    with torch.no_grad():
        expected = problem.model(*problem.inputs)
    references = float64_references(problem.inputs, comparator.round_significand, problem.model)
    baseline = None if smoke else reference_ms(problem.model, problem.inputs)
    todo = smoke_configs(spec) if smoke else configs(spec)
    t0 = time.monotonic()
    if workers > 0:  # at the task's own sizes: its main path's kernels are built for them
        precompile(spec, name, todo, workers=workers, seconds=0.6 * max_seconds, device=device, shape=sizes,
                   source=source)
    kernel = str(source.resolve().relative_to(REPO)) if source.resolve().is_relative_to(REPO) else str(source)
    return record_rows(out_dir / f"{name}.json", spec, todo, t0=t0, max_seconds=max_seconds, smoke=smoke,
                       shape=sizes, baseline=baseline, kernel=kernel,
                       measure_one=lambda cfg: measure(module, cfg, problem.inputs, expected, references,
                                                       comparator.compare_outputs, smoke=smoke,
                                                       init_args=problem.init_args, seed=TASK_SEED))


def write(path: Path, spec: Spec | TaskSpec, *, smoke: bool, shape: dict[str, int], baseline: float | None,
          rows: list[dict[str, Any]], seconds: float, stopped: str, kernel: str = "") -> Path:
    """The landscape file; written every few configs as well, so a run killed from outside leaves what it measured
    (``complete: false``)."""
    import torch
    import triton

    data = {
        "kernel": kernel or f"knowledge/templates/{spec.template}.py", "dtype": f"torch.{spec.dtype}",
        **({"task": spec.task, "build": spec.build} if isinstance(spec, TaskSpec) else {}),
        # A GEMM's M, N, K at the top level (as the first recordings have them); another problem's under "shape"
        # (its names would meet the file's own, "rows").
        **(shape if spec.problem == "matmul" else {"shape": shape}),
        "gpu": "CPU (Triton interpreter, smoke run)" if smoke else torch.cuda.get_device_name(),
        "triton": triton.__version__, "torch": torch.__version__,
        "baseline_ms": {"torch": baseline} if baseline is not None else {},
        "space": spec.space, **({"when": spec.when} if spec.when else {}), "fixed_params": spec.fixed,
        "note": spec.note,
        "recorded": {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                     "script": "experiments/benchmarks/record_landscape.py", "commit": _commit(),
                     "python": platform.python_version(), "host": platform.node(),
                     "timing": "wall clock of one call (interpreter)" if smoke else
                     f"triton.testing.do_bench(warmup={WARMUP_MS}, rep={REP_MS}, return_mode='median'), L2 flushed",
                     "timing_representative": not smoke,
                     "correctness": "judge/compare.py compare_outputs, as the verification chain calls it: "
                                    f"allclose with the dtype's tolerance against {_reference_name(spec)}, else within the "
                                    "float64 criterion (rms at most 2x, max at most 8x the larger of the "
                                    "reference's own distance and a 16-bit-input split's)",
                     "seconds": round(seconds, 1), "complete": not stopped,
                     **({"stopped": stopped} if stopped else {})},
        "rows": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.part")
    tmp.write_text(json.dumps(data, indent=0) + "\n")
    tmp.replace(path)
    return path



def _reference_name(spec: Spec | TaskSpec) -> str:
    return f"{spec.task}'s Model" if isinstance(spec, TaskSpec) else PROBLEMS[spec.problem].reference

def _commit() -> str:
    if os.environ.get("EVOFORGE_COMMIT"):  # a copy of the tree whose git state is not the code's (a device call)
        return os.environ["EVOFORGE_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def summary(path: Path) -> str:
    data = json.loads(path.read_text())
    rows = data["rows"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    ok = [r for r in rows if r["status"] == "ok" and r.get("ms") is not None]
    line = f"{path.name}: {len(rows)} configs, {counts}, {data['recorded']['seconds']} s"
    if ok:
        best = min(ok, key=lambda r: r["ms"])
        fast_wrong = sum(r["status"] == "incorrect" and r.get("ms") is not None and r["ms"] < best["ms"]
                         for r in rows)
        line += (f"; best correct {best['ms']:.4f} ms {({k: best[k] for k in data['space']})}; "
                 f"{fast_wrong} incorrect configs faster than it")
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(SPECS),
                    help=f"landscapes to record (default: the templates' {list(SPECS)}; a task's: {list(TASK_SPECS)})")
    ap.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "search" / "landscapes")
    ap.add_argument("--smoke", action="store_true", help="a few configs at tiny sizes on the Triton interpreter")
    ap.add_argument("--max-seconds", type=float, default=200.0, help="per landscape; the file says if it stopped")
    ap.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)),
                    help="processes compiling ahead (0: compile in the measuring process)")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in SPECS and n not in TASK_SPECS]
    if unknown:
        print(f"unknown landscape(s) {unknown}: choose from {list(SPECS) + list(TASK_SPECS)}", file=sys.stderr)
        return 2
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    else:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA device: record on a GPU, or run --smoke here", file=sys.stderr)
            return 2
    failed = 0
    for name in args.names:
        try:
            path = (record_task if name in TASK_SPECS else record)(
                name, out_dir=args.out, smoke=args.smoke, max_seconds=args.max_seconds, workers=args.workers)
            print(summary(path), flush=True)
        except Exception:
            failed += 1
            print(f"{name}: recording failed\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
