"""What a torch.compile capture is, shared by its two sides: ``mutators/inductor_capture.py`` makes one (in a
process of its own) and ``mutators/inductor_seed.py`` converts one into a candidate. Here: the ``InductorCapture``
record (JSON), ``NoInductorSeed`` (why there is no seed, in one line), and the constants that say which builds a
capture holds (``INDUCTOR_VARIANTS``, ``GEMM_BUILD``, ``TF32X3_TILES``, ``CONV_AS_GEMM``) and what its output code
says (``VENDOR_CALL``, ``LIBRARY_ONLY``, a vendor GEMM call, the templates' dot). Both modules import this one and
it imports neither, so there is no import circle.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

#: Inductor configurations whose static build of a task gives the search another structure to start from, each
#: with the kernel kinds it can change: tried at capture time where the main shape's default build has a kernel of
#: such a kind, kept where its kernels differ. Measured on the CPU's captures of six tasks of the issue-R sample
#: (tile, one-tile, N-d tiling, tiled, cooperative reductions, aggressive fusion and max-autotune's pointwise
#: configs changed no kernel there); what each is worth is measured where the campaign evaluates it.
#: ``reference-layout``: a build with a convolution in the reference's layout, without Inductor's layout optimisation:
#: cuDNN may compute an fp32 convolution laid out channels-last in TF32 (on the H200 L2/87's default build was 1e3
#: times further from float64 than the reference, rms 2.3e-5 against 2.6e-8, and failed the chain), while on L2/31,
#: 35 and 93 the default build passed and ran 1.4-1.6x faster than the reference's layout: so it is a variant, and
#: the default stays the seed.
#: ``triton-gemm``: a build whose GEMMs (mm, addmm, bmm, baddbmm) are Inductor's max-autotune Triton template with
#: the epilogue fused, where the default build calls cuBLAS (``GEMM_BUILD``), its tiles autotuned for the dot the
#: seed starts with (``TF32X3_TILES``); ``triton-gemm-exact-tiles``: the same with the tiles autotuned for the exact
#: fp32 dot (Inductor's own choice while torch's TF32 flag is off).
GEMM_BUILD: dict[str, Any] = {"max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON"}
#: Not an Inductor option: the GEMM build with its templates' fp32 dot written as three TF32 passes
#: (``input_precision="tf32x3"``, the seed's start on CUDA) while Inductor autotunes them, so that its choice of tiles
#: is the one for that dot on tensor cores. Tuned for the exact fp32 dot (on FMA units) it chose 32x32x128 with 4
#: warps for L1/1's 4096^2 GEMM on the H200 (0.32x torch.compile at three TF32 passes); tuned for one TF32 pass it
#: chose 128x128x32 with 4 warps for L2/12, where three passes ran 2.9 ms against 1.8 ms at 64x128 (L2/29's
#: choice). Where an operand is not fp32 the option does nothing (the dot's precision is the dtype's own).
TF32X3_TILES = "evoforge.tf32x3_tiles"
#: Not an Inductor option: the build's convolutions decomposed into a gather of each output's input window (im2col,
#: a Triton kernel of Inductor's) and a GEMM (Inductor's template, under ``GEMM_BUILD``), so a convolution task has a
#: seed under the strict rule, where Inductor otherwise calls cuDNN. A transposed convolution becomes one plain
#: convolution per output phase first (``_transposed_as_plain``).
CONV_AS_GEMM = "evoforge.conv_as_gemm"
#: How a Triton dot is written in Inductor's GEMM templates, and as three TF32 passes.
_TEMPLATE_DOT = "allow_tf32=ALLOW_TF32"
_TF32X3_DOT = 'input_precision="tf32x3"'
#: The words of the two reasons a build with a vendor GEMM gives (the GEMM build is tried after either).
VENDOR_CALL = "from a vendor library"
LIBRARY_ONLY = "it runs as library calls only"
#: The vendor GEMMs Inductor calls, which a GEMM build replaces by its Triton template.
GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")
#: A call to a vendor GEMM in Inductor's output code.
_EXTERN_GEMM = re.compile(r"\bextern_kernels\.(" + "|".join(GEMM_OPS) + r")\(")


def op_allowed(op: str, allow_ops: tuple[str, ...] | list[str]) -> bool:
    """A library op of Inductor's output code (``addmm``) is one the task allows, by its name or its aten name."""
    return op in allow_ops or f"aten.{op}" in allow_ops


#: In the order a campaign evaluates them, the GEMM builds first: a task's GEMM is most of its time, and on the H200
#: the ``triton-gemm`` variant ran 1.58-1.63x torch.compile on six level-2 GEMM tasks where it was evaluated, while a
#: campaign of 3.5 minutes for ten tasks made three evaluations each: on L2/55 and L2/84 the reduction variants
#: took them and the GEMM build was never timed (experiments/results/kernelbench/README.md).
INDUCTOR_VARIANTS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "triton-gemm": ({**GEMM_BUILD, TF32X3_TILES: True}, ("extern_gemm",)),
    "triton-gemm-exact-tiles": (GEMM_BUILD, ("extern_gemm",)),
    "unsplit-reductions": ({"split_reductions": False}, ("reduction", "persistent_reduction")),
    "looped-reductions": ({"triton.persistent_reductions": False}, ("persistent_reduction",)),
    "reference-layout": ({"layout_optimization": False}, ("convolution",)),
}


class NoInductorSeed(Exception):
    """Inductor's code for a task cannot be a candidate; the message is the one-line reason."""


@dataclass
class InductorCapture:
    """What ``capture`` records of one torch.compile of a task (JSON-able; committed as test fixtures)."""

    output_code: str
    graph_inputs: list[str]  # each call() argument's source in dynamo's terms: L['x'], L['x'].size()[0], ...
    forward_args: list[str]  # the reference forward's parameter names, in order
    n_outputs: int  # tensors the reference's forward returns
    single_output: bool  # the forward returns one tensor (not a tuple)
    model_source: str  # the task's Model class, forward removed; "" when the model holds no state
    device_arg: str = ""  # the first forward argument that is a tensor (allocations go to its device)
    configs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # kernel -> Inductor's launch configs
    helpers: dict[str, str] = field(default_factory=dict)  # Inductor helper name -> its @triton.jit source
    device: str = ""
    torch_version: str = ""
    task: str = ""
    sm_count: int = 0  # the capturing GPU's multiprocessors (0: unknown, a CPU): where a GEMM's tiles fill it
    # The main shape's own compile (torch.compile's default, static: sizes, strides and layout choices as
    # constants), a capture of the same form as a dict; None where there is none (``main_failure`` says why).
    main: dict[str, Any] | None = None
    main_failure: str = ""
    # Of a main-shape capture: what its kernels were compiled for. ``guards``: each tensor the graph reads, by
    # dynamo's source, with its size, stride and dtype; ``init_inputs``: the model's init inputs (plain values);
    # ``forward_values``: the forward's non-tensor arguments.
    guards: list[dict[str, Any]] = field(default_factory=list)
    init_inputs: list[Any] | None = None
    forward_values: dict[str, Any] = field(default_factory=dict)
    # Other structures for the main shape: the static build under another Inductor configuration, where its kernels
    # differ from the default's; each {"name": ..., "config": {inductor option: value}, "main": a capture dict}.
    variants: list[dict[str, Any]] = field(default_factory=list)
    # Where the default build calls a vendor GEMM: the task compiled again with every GEMM in Inductor's Triton
    # template (``GEMM_BUILD``), shape-generic with its own ``main``, a capture of the same form as a dict: the seed
    # where the task does not allow the vendor call. None where there is none (``gemm_failure`` says why).
    gemm: dict[str, Any] | None = None
    gemm_failure: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> InductorCapture:
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def main_capture(self, variant: str = "") -> InductorCapture | None:
        """The main shape's static capture (of the Inductor configuration ``variant``; "" the default one)."""
        data = self.main
        if variant:
            data = next((v["main"] for v in self.variants if v["name"] == variant), None)
            if data is None:
                raise NoInductorSeed(f"the capture holds no Inductor variant {variant!r}")
        if not data:
            return None
        return InductorCapture(**{k: v for k, v in data.items() if k in InductorCapture.__dataclass_fields__})
