"""Seeds from torch.compile: Inductor's generated Triton for a task, turned into a standalone candidate module.

Two steps, apart on purpose:

- ``capture`` (run in a process of its own, ``python -m evoforge.mutators.inductor_seed``) compiles the task's
  reference with Inductor and writes what it made as JSON: the output code, which graph input is which (a forward
  argument, a size of one, a parameter of the model), the launch configs Inductor's heuristics chose for each
  kernel and the Inductor helpers the kernels call. On a GPU it is Inductor's own code for that device; on the CPU
  Inductor is asked for Triton (``cpu_backend = "triton"``) under a stand-in driver, which yields the same
  kernel forms so that the conversion runs in CI on the Triton interpreter.
- ``seed_from_capture`` (pure) turns a capture into a candidate: plain ``@triton.jit`` kernels launched from
  ``ModelNew.forward`` with explicit grids, each kernel's block sizes and warps read from ``PARAMS`` with a
  ``SPACE`` around Inductor's choice. Parameters are made by the task's own ``Model.__init__`` (its forward
  removed), so their names and shapes follow the init inputs at every shape and the reference's state loads.

What a seed may call is the chain's rule: all of the reference's compute in the candidate's kernels, unless the
task allows named ops (``allow_ops``). Where Inductor calls a vendor library (a GEMM or a convolution kept in
cuBLAS/cuDNN) or makes no Triton at all, there is no seed and ``NoInductorSeed`` says why in one line.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any

from evoforge.knowledge.starts import SPLIT_PRECISION, SPLIT_TILE
from evoforge.mutators.lift import value_range

from evoforge.core import take_turn_while_benchmarking

#: The operator an Inductor seed carries in the record.
INDUCTOR_SEED = "inductor-seed"
#: The operator of the seed's main-shape path built under another Inductor configuration (``INDUCTOR_VARIANTS``),
#: evaluated beside the seed.
INDUCTOR_VARIANT = "inductor-variant"

#: Inductor's extern kernels and the torch call each is: kept only where the task allows the op.
EXTERN_OPS = {"mm": "torch.mm", "bmm": "torch.bmm", "addmm": "torch.addmm", "baddbmm": "torch.baddbmm",
              "convolution": "torch.convolution", "_int_mm": "torch._int_mm"}
_DROPPED_CALLS = {"assert_size_stride", "assert_alignment", "get_raw_stream", "torch.cuda.set_device",
                  "torch.xpu.set_device"}
#: Ops of Inductor's code that draw the seed its kernels' random numbers start from (dropout's
#: ``aten.randint.low_out`` into a one-element buffer): no compute, and allowed under every rule, as the chain's
#: guard allows them (``backends/guards.py`` SAFE_OPS).
_SEED_DRAWS = frozenset({"randint"})
_ALLOCATORS = re.compile(r"^empty_strided(_cpu|_cuda|_xpu)?$")
_GRIDS = ("Grid1D", "Grid2D", "Grid3D", "Grid2DWithYZOverflow")
_BLOCKS = {"x": "XBLOCK", "y": "YBLOCK", "z": "ZBLOCK"}


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
#: A call to cuDNN's convolution in Inductor's output code.
_EXTERN_CONV = re.compile(r"\b(extern_kernels\.convolution|aten\.convolution\.default)\(")
#: How a Triton dot is written in Inductor's GEMM templates, and as three TF32 passes.
_TEMPLATE_DOT = "allow_tf32=ALLOW_TF32"
_TF32X3_DOT = 'input_precision="tf32x3"'
#: Inductor's option whose threshold (K over M and N) turns its GEMM template off in favour of decompose-K, and
#: a value no GEMM reaches.
_DECOMPOSE_K = "triton.decompose_k_threshold"
_NO_DECOMPOSE_K = 1 << 40
#: The words of the two reasons a build with a vendor GEMM gives (the GEMM build is tried after either).
VENDOR_CALL = "from a vendor library"
LIBRARY_ONLY = "it runs as library calls only"
#: A call to a vendor GEMM in Inductor's output code.
_EXTERN_GEMM = re.compile(r"\bextern_kernels\.(mm|addmm|bmm|baddbmm)\(")
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


# ------------------------------------------------------------------------------------------------ conversion
@dataclass
class _Kernel:
    name: str
    source: str  # the jit function, without decorators
    params: list[str]
    constexprs: set[str]
    body_constants: dict[str, int]  # NAME: tl.constexpr = <int> in the body
    grid_type: str
    kind: str  # pointwise, reduction, persistent_reduction, template, ...
    no_x_dim: bool
    helpers: set[str]
    local_jit: str = ""  # @triton.jit functions its module defines beside it (a scan's combine fn), renamed for it
    # A GEMM template's (``triton_tem_*``, Inductor's max-autotune Triton matmul with its epilogue fused) tunable
    # form, where its sizes are constants and its tiling is the mm/bmm template's: M, N, K, the tile constants, the
    # operands' dtype. None for any other kernel (a template not recognised launches on the grid it was given).
    template: dict[str, Any] | None = None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dict_entry(node: ast.expr | None, key: str) -> ast.expr | None:
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    return None


def _kernel(name: str, source: str) -> _Kernel:
    tree = ast.parse(source)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is None:
        raise NoInductorSeed(f"Inductor's kernel {name} has no function of that name")
    heuristic = next((d for d in fn.decorator_list if isinstance(d, ast.Call)
                      and isinstance(d.func, ast.Attribute) and isinstance(d.func.value, ast.Name)
                      and d.func.value.id == "triton_heuristics"), None)
    kind = heuristic.func.attr if heuristic is not None else "jit"  # type: ignore[union-attr]
    meta = _keyword(heuristic, "inductor_meta") if heuristic is not None else None
    grid_node = _dict_entry(meta, "grid_type")
    grid_type = grid_node.value if isinstance(grid_node, ast.Constant) else ""
    no_x = _dict_entry(meta, "no_x_dim")
    lines = source.splitlines(keepends=True)
    text = textwrap.dedent("".join(lines[fn.lineno - 1:fn.end_lineno]))
    constexprs = {a.arg for a in fn.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    body_constants = {}
    for node in fn.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
            body_constants[node.target.id] = node.value.value
    helpers = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
               and n.value.id == "triton_helpers"}
    # Other jit functions of the kernel's module (a scan's combine function, ``_triton_helper_fn_add0``): the
    # kernel calls them by name. Each kernel's module names them alike, so they are renamed after the kernel.
    local = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name != name
             and any(_dotted(d) == "triton.jit" for d in n.decorator_list)]
    local_text = []
    for helper in local:
        local_text.append("@triton.jit\n" + textwrap.dedent("".join(lines[helper.lineno - 1:helper.end_lineno])))
    body = text.replace("triton_helpers.", "")
    for helper in local:
        renamed = f"{name}{helper.name}" if helper.name.startswith("_") else f"{name}_{helper.name}"
        local_text = [re.sub(rf"\b{helper.name}\b", renamed, t) for t in local_text]
        body = re.sub(rf"\b{helper.name}\b", renamed, body)
    signature = _dict_entry(_keyword(heuristic, "triton_meta") if heuristic is not None else None, "signature")
    template = _gemm_template(fn, body_constants, signature) if kind == "template" else None
    return _Kernel(name=name, source=body, params=[a.arg for a in fn.args.args],
                   constexprs=constexprs, body_constants=body_constants, grid_type=grid_type, kind=kind,
                   no_x_dim=isinstance(no_x, ast.Constant) and bool(no_x.value), helpers=helpers,
                   local_jit="\n\n".join(t.strip() + "\n" for t in local_text), template=template)


#: A GEMM template's tile constants the search moves (the template's body defines them as constexprs).
_TILES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")
#: The fp32 operands' dot precisions a GEMM template may take: exact fp32 (Inductor's choice while
#: ``torch.backends.cuda.matmul.allow_tf32`` is off) and three TF32 passes, whose error is of fp32's order (the
#: chain's float64 criterion judges it); one TF32 pass is left out (about 1e-3 relative: the chain rejects it).
PRECISIONS = ("ieee", "tf32x3")
#: On CUDA, besides: Triton's bf16 splits of fp32 (three products of a two-part split; six of a three-part one), on
#: bf16 tensor cores at twice TF32's rate. bf16x3's error is about 1e-5 relative, bf16x6's fp32's own; the chain
#: judges each (the interpreter has neither, so a CPU capture's space leaves them out).
CUDA_PRECISIONS = (*PRECISIONS, "bf16x3", "bf16x6")
#: Not a Triton precision: the template's fp32 operands split once, before the GEMM, into bf16 hi and lo parts
#: (``_bf16_parts``: x = hi + lo to 16 significant bits), whose three products (lo*hi + hi*lo + hi*hi, into a fresh
#: accumulator that joins the running sum once per K step) run on bf16 tensor cores from shared memory. Triton's own
#: bf16x3/tf32x3 split each tile in registers inside the K loop, every program again: on the H200 the same split
#: done once ran L1/1's 4096^2 GEMM in 0.79 ms against 1.69 ms for the in-loop tf32x3 (knowledge/templates/matmul.py).
#: The parts are bf16 tensors on a GPU and fp32 ones holding bf16 values on the interpreter (whose bf16 products are
#: not a GPU's), so the same kernel computes the same products on both. The name lives with the knowledge base's
#: start rule for it (``knowledge.starts.split_starts``).
_DOT_PRECISION = re.compile(r"input_precision=['\"](tf32x3)['\"]")
#: The template's lines the split path doubles: each assignment to an operand's pointer (``A = arg_A``, the bmm
#: template's ``A = A + (...)`` and ``A += BLOCK_K * stride_ak``) and each load of an operand tile (``a = tl.load(A +
#: (xindex))``, masked or not), a twin for the lo part beside each; and the dot it replaces by three products (after
#: ``_tunable_template`` wrote the precision as PRECISION; the bmm template's has no out_dtype).
_OPERAND_LINE = re.compile(r"^([ \t]*)((?:A|B) \+?= .*|(?:a|b) = tl\.load\((?:A|B)\b.*)$", re.MULTILINE)
_PRECISION_DOT = re.compile(r"^([ \t]*)acc \+= tl\.dot\(a, b, input_precision=PRECISION(?:, out_dtype=ACC_TYPE)?\)[ \t]*$",
                            re.MULTILINE)


def _gemm_template(fn: ast.FunctionDef, constants: dict[str, int], signature: ast.expr | None
                   ) -> dict[str, Any] | None:
    """The tunable form of Inductor's mm/bmm template kernel: its M, N and K written as integers (a static build),
    its program id over output tiles in GROUP_M-swizzled order (``grid_m = (M + BLOCK_M - 1) // BLOCK_M``), the
    tile constants in its body; else None."""
    text = ast.unparse(fn)
    if not all(t in constants for t in _TILES) or "grid_m = (M + BLOCK_M - 1) // BLOCK_M" not in text:
        return None
    sizes = {}
    for node in fn.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("M", "N", "K")):
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
                return None  # sizes read at run time (a shape-generic build): launched as Inductor wrote it
            sizes[node.targets[0].id] = node.value.value
    if set(sizes) != {"M", "N", "K"}:
        return None
    dtypes = set()
    if isinstance(signature, ast.Dict):
        dtypes = {v.value for k, v in zip(signature.keys, signature.values, strict=True)
                  if isinstance(k, ast.Constant) and k.value in ("arg_A", "arg_B") and isinstance(v, ast.Constant)}
    precision = None
    if dtypes == {"*fp32"} and _DOT_PRECISION.search(text):  # built with TF32X3_TILES
        precision = "tf32x3"
    elif dtypes == {"*fp32"} and "ALLOW_TF32" in constants and _TEMPLATE_DOT in text:
        precision = "tf32" if constants["ALLOW_TF32"] else "ieee"
    loads = [m[2] for m in _OPERAND_LINE.finditer(text) if "tl.load" in m[2]]
    presplit = bool(precision and any(x.startswith("a =") for x in loads) and any(x.startswith("b =") for x in loads)
                    and len(re.findall(r"\btl\.dot\(", text)) == 1 and "acc += tl.dot(a, b, " in text
                    and re.search(r"\bA = arg_A\b", text) and re.search(r"\bB = arg_B\b", text))
    return {**sizes, "tiles": {t: constants[t] for t in _TILES}, "even_k": bool(constants.get("EVEN_K", 0)),
            "precision": precision, "precisions": [*PRECISIONS, *([SPLIT_PRECISION] if presplit else [])],
            "presplit": presplit, "split_k": _split_k_output(fn, signature)}


#: The mm template's K loop, and a store of the accumulator as it is (no epilogue fused after the GEMM).
_K_LOOP = re.compile(r"^([ \t]*)for k_idx in range\(0, tl\.cdiv\(K, BLOCK_K\)\):[ \t]*$", re.MULTILINE)
_PLAIN_STORE = re.compile(r"^([ \t]*)tl\.store\((out_ptr\d+) \+ (.*), acc, mask\)[ \t]*$", re.MULTILINE)
#: The split-K values offered (each split at least one BLOCK_K of 16), and the most a start takes.
_SPLITS = (1, 2, 4, 8, 16, 32, 64)


def _split_k_output(fn: ast.FunctionDef, signature: ast.expr | None) -> str | None:
    """The output pointer of an mm template that can split K over programs (``SPLIT_K``): one program axis (not a
    bmm's batch axis), its K loop Inductor's, one store, of the fp32 accumulator unchanged into an fp32 output,
    so partial sums may be added atomically; else None (an epilogue fused after the GEMM needs the whole sum)."""
    text = ast.unparse(fn)
    stores = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and _dotted(n.func) == "tl.store"]
    if ("tl.program_id(1)" in text or "tl.program_id(2)" in text or len(stores) != 1 or len(stores[0].args) != 3
            or ast.unparse(stores[0].args[1]) != "acc" or "for k_idx in range(0, tl.cdiv(K, BLOCK_K))" not in text):
        return None
    target = stores[0].args[0]
    out = target.left.id if isinstance(target, ast.BinOp) and isinstance(target.left, ast.Name) else None
    types = ({k.value: v.value for k, v in zip(signature.keys, signature.values, strict=True)
              if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)} if isinstance(signature, ast.Dict) else {})
    return out if out and types.get(out) == "*fp32" else None


def _split_k_start(info: dict[str, Any], sm_count: int) -> int:
    """SPLIT_K's start: 1, or where the output tiles alone would leave the GPU's multiprocessors idle (L1/6: 256 x
    256 out of K = 524288, 32 tiles for 132 SMs) the fewest splits that give every multiprocessor a program, while
    each split keeps at least eight BLOCK_K steps."""
    tiles = -(-info["M"] // info["tiles"]["BLOCK_M"]) * -(-info["N"] // info["tiles"]["BLOCK_N"])
    k_steps = -(-info["K"] // info["tiles"]["BLOCK_K"])
    split = 1
    while sm_count and tiles * split < sm_count and k_steps // (split * 2) >= 8 and split < _SPLITS[-1]:
        split *= 2
    return split


def _tunable_template(kernel: _Kernel) -> str:
    """The template kernel's source with its tiles (and fp32 dot precision) as constexpr parameters."""
    info = kernel.template
    assert info is not None
    names = [*_TILES, *(["PRECISION"] if info["precision"] else [])]
    source = kernel.source
    drop = (*_TILES, "ALLOW_TF32") if info["precision"] else _TILES
    for name in drop:
        source = re.sub(rf"^[ \t]*{name}\s*:\s*tl\.constexpr\s*=\s*[^\n]*\n", "", source, count=1, flags=re.MULTILINE)
    if info["precision"]:
        source = _DOT_PRECISION.sub("input_precision=PRECISION", source.replace(_TEMPLATE_DOT, "input_precision=PRECISION"))
    if info.get("presplit") and _PRECISION_DOT.search(source):
        # PRECISION "bf16x3-split": A and B arrive as their bf16 hi parts, their lo parts as two more arguments (the
        # launch splits them: ``_bf16_parts``); any other PRECISION compiles Inductor's dot alone.
        split = f"PRECISION == {SPLIT_PRECISION!r}"

        def twin(m: re.Match[str]) -> str:
            lo = re.sub(r"\b(A|B|a|b)\b", r"\1_LO", m[2]).replace("a_LO", "a_lo").replace("b_LO", "b_lo")
            lo = re.sub(r"\barg_(A|B)\b", r"arg_\1_lo", lo)
            return f"{m[0]}\n{m[1]}if {split}:\n{m[1]}    {lo}"

        source = _OPERAND_LINE.sub(twin, source)
        source = _PRECISION_DOT.sub(lambda m: (
            f"{m[1]}if {split}:\n"
            f"{m[1]}    part = tl.dot(a_lo, b, out_dtype=tl.float32)\n"
            f"{m[1]}    part = tl.dot(a, b_lo, part, out_dtype=tl.float32)\n"
            f"{m[1]}    acc += tl.dot(a, b, part, out_dtype=tl.float32)\n"
            f"{m[1]}else:\n{m[1]}    {m[0].strip()}"), source, count=1)
        source = re.sub(rf"^def {kernel.name}\((.*?)\):", lambda m: f"def {kernel.name}({m.group(1)}, arg_A_lo, arg_B_lo):",
                        source, count=1, flags=re.MULTILINE | re.DOTALL)
    else:
        info["presplit"] = False
        if SPLIT_PRECISION in info["precisions"]:
            info["precisions"].remove(SPLIT_PRECISION)
    if info.get("split_k") and _K_LOOP.search(source) and _PLAIN_STORE.search(source):
        # K split over the grid's second axis in whole BLOCK_K steps (EVEN_K's unmasked loads stay in bounds); each
        # split adds its partial sum into the output, which the launch zeroes first. SPLIT_K = 1 is Inductor's kernel.
        names.append("SPLIT_K")
        source = _K_LOOP.sub(lambda m: (
            f"{m[1]}k_lo = 0\n{m[1]}k_hi = tl.cdiv(K, BLOCK_K)\n{m[1]}if SPLIT_K > 1:\n"
            f"{m[1]}    k_per_split = tl.cdiv(k_hi, SPLIT_K)\n"
            f"{m[1]}    k_lo = tl.program_id(1) * k_per_split\n"
            f"{m[1]}    k_hi = tl.minimum(k_lo + k_per_split, k_hi)\n"
            f"{m[1]}for k_idx in range(k_lo, k_hi):"), source, count=1)
        source = _PLAIN_STORE.sub(lambda m: (
            f"{m[1]}if SPLIT_K == 1:\n{m[1]}    tl.store({m[2]} + {m[3]}, acc, mask)\n{m[1]}else:\n"
            f"{m[1]}    tl.atomic_add({m[2]} + {m[3]}, acc, mask, sem=\"relaxed\")"), source, count=1)
    else:
        info["split_k"] = None
    extra = ", ".join(f"{n}: tl.constexpr" for n in names)
    return re.sub(rf"^def {kernel.name}\((.*?)\):", lambda m: f"def {kernel.name}({m.group(1)}, {extra}):", source,
                  count=1, flags=re.MULTILINE | re.DOTALL)


def _kernels_and_call(code: str) -> tuple[dict[str, _Kernel], ast.FunctionDef]:
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise NoInductorSeed(f"Inductor's output code does not parse (line {e.lineno})") from None
    kernels: dict[str, _Kernel] = {}
    call: ast.FunctionDef | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            call = node
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        func = node.value.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "async_compile"):
            continue
        if func.attr != "triton":
            raise NoInductorSeed(f"Inductor made a {func.attr} kernel for this task, not a Triton one")
        args = node.value.args
        if len(args) < 2 or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args[:2]):
            raise NoInductorSeed("Inductor's output code holds a Triton kernel in a form not recognised")
        name, source = args[0].value, args[1].value  # type: ignore[union-attr]
        kernels[name] = _kernel(name, source)
    if call is None:
        raise NoInductorSeed("Inductor's output code has no call() function")
    return kernels, call


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _source_expr(source: str, forward_args: list[str]) -> str:
    """Dynamo's name of a graph input (``L['self']._modules['fc']._parameters['weight']``) as an expression of
    ModelNew.forward (``self.fc.weight``)."""
    expr = re.sub(r"\._(?:modules|parameters|buffers)\['(\w+)'\]", r".\1", source)
    expr = re.sub(r"^L\['self'\]", "self", expr)
    expr = re.sub(r"L\['(\w+)'\]", r"\1", expr)
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise NoInductorSeed(f"a graph input comes from {source}, which the seed cannot name") from None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    if not names <= {"self", *forward_args}:
        raise NoInductorSeed(f"a graph input comes from {source} (outside the model and its arguments)")
    return expr


class _CallRewrite(ast.NodeTransformer):
    """call()'s body as ModelNew.forward's: launches with explicit grids, plain torch allocation, extern kernels
    kept only where the task allows them."""

    def __init__(self, kernels: dict[str, _Kernel], keys: dict[str, dict[str, str]], allow_ops: tuple[str, ...],
                 values: dict[str, Any] | None = None):
        self.kernels = kernels
        self.keys = keys
        self.allow_ops = allow_ops
        self.values = values  # launch values written as literals (a path the search does not tune); else PARAMS
        self.vendor: list[str] = []
        self.splits = 0  # launches whose operands the split path may split (``_bf16_parts``)

    def _value(self, key: str) -> str:
        return repr(self.values[key]) if self.values is not None else f'PARAMS["{key}"]'

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        if isinstance(node.value, ast.Call):
            name = _dotted(node.value.func)
            if name in _DROPPED_CALLS or name == "args.clear":
                return None
            if name.endswith(".run") and name[:-4] in self.kernels:
                return self._launch(name[:-4], node.value)
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
        if isinstance(node.value, ast.Call) and _dotted(node.value.func) in _DROPPED_CALLS:
            return None
        return self.generic_visit(node)

    def visit_With(self, node: ast.With) -> Any:
        if all("DeviceGuard" in _dotted(item.context_expr.func) for item in node.items
               if isinstance(item.context_expr, ast.Call)):
            out: list[ast.stmt] = []
            for stmt in node.body:
                done = self.visit(stmt)
                out.extend(done if isinstance(done, list) else [done] if done is not None else [])
            return out
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = _dotted(node.func)
        if _ALLOCATORS.match(name):
            node.func = ast.parse("torch.empty_strided", mode="eval").body
            if len(node.args) > 2:
                node.keywords.append(ast.keyword("dtype", node.args.pop(2)))
            node.keywords.append(ast.keyword("device", ast.Name("device_")))
        elif name == "reinterpret_tensor":
            node.func = ast.parse("torch.as_strided", mode="eval").body
        elif name.startswith(("extern_kernels.", "aten.", "torch.ops.aten.")):
            op = name.split(".")[1] if name.startswith(("extern_kernels.", "aten.")) else name.split(".")[3]
            if op in _SEED_DRAWS:  # the seed of the kernels' own random numbers, from torch's generator
                if name.startswith("aten."):
                    node.func = ast.parse("torch.ops." + name, mode="eval").body
            elif op not in self.allow_ops and f"aten.{op}" not in self.allow_ops:
                self.vendor.append(op)
            elif name.startswith("extern_kernels.") and op in EXTERN_OPS:
                node.func = ast.parse(EXTERN_OPS[op], mode="eval").body
            elif name.startswith("aten."):
                node.func = ast.parse("torch.ops." + name, mode="eval").body
        return node

    def _launch(self, name: str, call: ast.Call) -> ast.Expr:
        kernel = self.kernels[name]
        if kernel.grid_type == "FixedGrid":
            return self._fixed_launch(name, call)
        args = list(call.args)
        bound = dict(zip(kernel.params, args, strict=False))
        keys = self.keys[name]
        dims = []
        axes = {"Grid1D": "x", "Grid2D": "xy", "Grid3D": "xyz", "Grid2DWithYZOverflow": "xy"}[kernel.grid_type]
        for axis in axes:
            numel = bound.get(f"{axis}numel")
            if numel is None:
                raise NoInductorSeed(f"kernel {name} launches without its {axis}numel argument")
            block = _BLOCKS[axis]
            size = self._value(keys[block]) if block in keys else str(kernel.body_constants.get(block, 1))
            dims.append(f"triton.cdiv({ast.unparse(numel)}, {size})")
        if kernel.grid_type == "Grid2DWithYZOverflow":
            grid = f"yz_overflow_grid({dims[0]}, {dims[1]})"
        else:
            grid = "(" + ", ".join(dims) + ",)"
        return self._launch_with(name, grid, args, keys)

    def _fixed_launch(self, name: str, call: ast.Call) -> ast.Expr:
        """A template kernel: Inductor passes its grid after the kernel's arguments. A tunable GEMM template's grid
        is its output tiles (a bmm's batch on the second axis, as given); any other keeps the grid it was given."""
        kernel = self.kernels[name]
        n = len(kernel.params)
        args, grid_args = list(call.args[:n]), list(call.args[n:n + 3])
        if len(grid_args) != 3:
            raise NoInductorSeed(f"kernel {name} launches without its grid")
        keys = self.keys[name]
        grid = [ast.unparse(g) for g in grid_args]
        if kernel.template is not None:
            info = kernel.template
            grid[0] = (f"triton.cdiv({info['M']}, {self._value(keys['BLOCK_M'])}) * "
                       f"triton.cdiv({info['N']}, {self._value(keys['BLOCK_N'])})")
            if info.get("split_k") and "SPLIT_K" in keys:
                split = self._value(keys["SPLIT_K"])
                grid[1] = split
                at = kernel.params.index(info["split_k"])
                out = ast.unparse(args[at])
                args[at] = ast.parse(f"({out}.zero_() if {split} > 1 else {out})", mode="eval").body
            if info.get("presplit") and "PRECISION" in keys:
                # The operands split into bf16 hi and lo parts where PRECISION is the split path; else passed as
                # they are (the lo arguments then unread).
                self.splits += 1
                on = f"{self._value(keys['PRECISION'])} == {SPLIT_PRECISION!r}"
                before = []
                for operand in ("A", "B"):
                    at = kernel.params.index(f"arg_{operand}")
                    hi, lo = f"_{operand.lower()}{self.splits}", f"_{operand.lower()}{self.splits}_lo"
                    before.append(ast.parse(f"{hi}, {lo} = _bf16_parts({ast.unparse(args[at])}, {on})").body[0])
                    args[at] = ast.Name(hi)
                args += [ast.Name(f"_a{self.splits}_lo"), ast.Name(f"_b{self.splits}_lo")]
                return [*before, self._launch_with(name, f"({', '.join(grid)},)", args, keys)]  # type: ignore[return-value]
        return self._launch_with(name, f"({', '.join(grid)},)", args, keys)

    def _launch_with(self, name: str, grid: str, args: list[ast.expr], keys: dict[str, str]) -> ast.Expr:
        """``name[grid](*args, key=PARAMS[...] ...)``: the launch as the seed writes it."""
        launch = ast.parse(f"{name}[{grid}]()", mode="eval").body
        assert isinstance(launch, ast.Call)
        launch.args = args
        for key, param in keys.items():
            launch.keywords.append(ast.keyword(key, ast.parse(self._value(param), mode="eval").body))
        return ast.Expr(launch)


#: The split path's operand split (``SPLIT_PRECISION``), in the seed where a GEMM template may take it.
_BF16_PARTS = '''

@triton.jit
def _bf16_split_kernel(x_ptr, hi_ptr, lo_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # hi: x rounded to nearest-even at bf16's 8 significant bits by integer arithmetic on the fp32 bits (bit-exact
    # whatever the backend's conversion mode); lo = x - hi is exact in fp32, then rounded to bf16.
    bits = x.to(tl.int32, bitcast=True)
    hi = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
    lo = (x - hi).to(tl.bfloat16).to(tl.float32)
    tl.store(hi_ptr + offs, hi.to(hi_ptr.dtype.element_ty), mask=mask)
    tl.store(lo_ptr + offs, lo.to(lo_ptr.dtype.element_ty), mask=mask)


def _bf16_parts(x, split):
    """x's bf16 hi and lo parts (x = hi + lo to 16 significant bits) with x's sizes and strides, for a GEMM
    template's three bf16 products; x itself twice where ``split`` is off. The parts cover the storage x spans (a
    view's gaps are split too, and never read). On the interpreter they are fp32 tensors holding the bf16 values."""
    if not split:
        return x, x
    span = 1 + sum((size - 1) * stride for size, stride in zip(x.shape, x.stride()) if size > 0)
    dtype = torch.float32 if os.environ.get("TRITON_INTERPRET", "0") == "1" else torch.bfloat16
    hi = torch.empty(span, dtype=dtype, device=x.device)
    lo = torch.empty(span, dtype=dtype, device=x.device)
    _bf16_split_kernel[(triton.cdiv(span, 2048),)](x, hi, lo, span, BLOCK=2048, num_warps=8)
    return torch.as_strided(hi, x.shape, x.stride()), torch.as_strided(lo, x.shape, x.stride())
'''


def _launch_keys(kernels: dict[str, _Kernel], configs: dict[str, list[dict[str, Any]]]
                 ) -> tuple[dict[str, dict[str, str]], dict[str, Any], dict[str, list[Any]]]:
    """For each kernel, its tunable launch arguments and the PARAMS key each reads; PARAMS and SPACE."""
    keys: dict[str, dict[str, str]] = {}
    params: dict[str, Any] = {}
    space: dict[str, list[Any]] = {}
    several = len(kernels) > 1
    for i, (name, kernel) in enumerate(kernels.items()):
        found = configs.get(name) or []
        if not found:
            raise NoInductorSeed(f"the capture holds no launch config for kernel {name}")
        chosen = found[0]
        keys[name] = {}
        values = {**chosen.get("kwargs", {}), "num_warps": chosen.get("num_warps", 4),
                  "num_stages": chosen.get("num_stages", 1)}
        if kernel.template is not None:
            for arg, value in _template_values(kernel, values).items():
                key = f"k{i}_{arg}" if several else arg
                keys[name][arg] = key
                params[key] = value[0]
                space[key] = value[1]
            continue
        for arg, value in values.items():
            if arg not in ("num_warps", "num_stages") and arg not in kernel.constexprs:
                continue
            key = f"k{i}_{arg}" if several else arg
            keys[name][arg] = key
            params[key] = value
            fixed = arg == "XBLOCK" and kernel.no_x_dim
            seen = {c.get("kwargs", {}).get(arg, c.get(arg)) for c in found} - {None}
            space[key] = [value] if fixed else sorted(set(value_range(arg, int(value))) | seen)
    return keys, params, space


def _template_values(kernel: _Kernel, launch: dict[str, Any]) -> dict[str, tuple[Any, list[Any]]]:
    """A GEMM template's launch values, each (Inductor's choice, the values the search may take): the tiles (dot
    operands of at least 16 a side; where Inductor wrote the K loop unmasked, BLOCK_K divides K), warps, stages
    and, for fp32 operands, the dot's precision."""
    info = kernel.template
    assert info is not None
    out: dict[str, tuple[Any, list[Any]]] = {}
    # Where the operands can be split into bf16 parts, the split's own tile is offered too (its start rule,
    # knowledge.starts.split_starts, asks for it whatever tiles Inductor chose for its dot).
    split_tile = SPLIT_TILE if info.get("presplit") and SPLIT_PRECISION in info["precisions"] else {}
    for tile, value in info["tiles"].items():
        values = [v for v in {*value_range(tile, int(value)), *([split_tile[tile]] if tile in split_tile else [])}
                  if tile == "GROUP_M" or 16 <= v <= 256]
        if tile == "BLOCK_K" and info["even_k"]:
            values = [v for v in values if info["K"] % v == 0]
        out[tile] = (value, sorted(set(values) | {value}))
    for arg in ("num_warps", "num_stages"):
        out[arg] = (launch[arg], sorted({*value_range(arg, int(launch[arg])),
                                         *([split_tile[arg]] if arg in split_tile else [])}))
    if info["precision"]:
        out["PRECISION"] = (info["precision"], list(info["precisions"]))
    if info.get("split_k"):
        out["SPLIT_K"] = (info["split_k_start"], [s for s in _SPLITS if s == 1 or info["K"] // s >= 16])
    return out


_HEADER = '''"""Seed from torch.compile for {task}: Inductor's Triton (torch {torch}, {device}) as plain kernels.

Made by evoforge ({operator}); each kernel's block sizes and warps are PARAMS entries, Inductor's choice the default.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language import math as tl_math
from triton.language.extra import libdevice
'''

# The Triton interpreter has no libdevice on the CPU: the same functions from tl.math where the seed runs there.
_SHIM = {
    "exp": "return tl.exp(x)", "exp2": "return tl.exp2(x)", "log": "return tl.log(x)", "log2": "return tl.log2(x)",
    "sqrt": "return tl.sqrt(x)", "rsqrt": "return tl.rsqrt(x)", "sin": "return tl.sin(x)",
    "cos": "return tl.cos(x)", "floor": "return tl.floor(x)", "ceil": "return tl.ceil(x)", "erf": "return tl.erf(x)",
    "fabs": "return tl.abs(x)", "abs": "return tl.abs(x)",
    "tanh": "e = tl.exp(-2.0 * tl.abs(x))\n    t = (1.0 - e) / (1.0 + e)\n    return tl.where(x < 0, -t, t)",
    "log1p": "return tl.log(1.0 + x)", "expm1": "return tl.exp(x) - 1.0",
    "isnan": "return x != x", "isinf": "return tl.abs(x) == float('inf')",
    "signbit": "return (x < 0) | ((x == 0) & (1.0 / x < 0))", "trunc": "return tl.where(x < 0, tl.ceil(x), tl.floor(x))",
    "nearbyint": "return tl.floor(x + 0.5)", "pow": None,
}


def _libdevice_shim(used: set[str]) -> str:
    names = sorted(n for n in used if _SHIM.get(n))
    if not names:
        return ""
    defs = "".join(f"\n    @triton.jit\n    def _interpreted_{n}(x):\n        " + _SHIM[n].replace("\n", "\n    ")
                   + "\n" for n in names)
    members = "".join(f"\n        {n} = _interpreted_{n}" for n in names)
    pow_ = ("\n    @triton.jit\n    def _interpreted_pow(x, y):\n        return tl.exp(y * tl.log(x))\n"
            if "pow" in used else "")
    if pow_:
        members += "\n        pow = _interpreted_pow"
    return ('\n\nif os.environ.get("TRITON_INTERPRET", "0") == "1":  # the interpreter has no libdevice on the CPU\n'
            + defs + pow_ + "\n    class libdevice:  # noqa: N801  (tl.math in libdevice's names)" + members + "\n")


_YZ = '''

def yz_overflow_grid(x_grid, y_grid, max_y=65535):
    """Inductor's Grid2DWithYZOverflow: a y grid past the device's limit spills into z."""
    div = triton.cdiv(y_grid, max_y)
    return (x_grid, 0 if div == 0 else triton.cdiv(y_grid, div), div)
'''


@dataclass
class _Path:
    """One capture converted: its kernels, the forward's body, and the launch values (PARAMS/SPACE when tuned)."""

    kernels: dict[str, _Kernel]
    body: list[str]  # the forward's statements, unindented
    params: dict[str, Any]
    space: dict[str, list[Any]]
    helpers: set[str]


def _rename_kernels(code: str, suffix: str) -> str:
    """Inductor names a graph's kernels alike in every compile (``triton_poi_fused_relu_0``): one path's kernels
    renamed so that two paths' kernels live in one module."""
    names = re.findall(r"^(\w+) = async_compile\.triton\(", code, flags=re.MULTILINE)
    for name in sorted(set(names), key=len, reverse=True):
        code = re.sub(rf"\b{name}\b", f"{name}{suffix}", code)
    return code


def _convert(capture: InductorCapture, allow_ops: tuple[str, ...], *, tuned: bool, suffix: str = "") -> _Path:
    """One capture's kernels and forward body; ``tuned``: launch values read from PARAMS, else written as
    literals (Inductor's choice)."""
    kernels, call = _kernels_and_call(_rename_kernels(capture.output_code, suffix) if suffix else capture.output_code)
    if not kernels:
        raise NoInductorSeed(f"Inductor made no Triton kernel for this task ({LIBRARY_ONLY})")
    for kernel in kernels.values():
        if kernel.grid_type == "FixedGrid" and kernel.kind == "template":
            if kernel.template is not None:
                kernel.source = _tunable_template(kernel)
                if kernel.template["split_k"]:
                    kernel.template["split_k_start"] = _split_k_start(kernel.template, capture.sm_count)
                if kernel.template["precision"] == "tf32":  # autotuned with TF32 on: the tiles, not the precision
                    kernel.template["precision"] = "ieee"
                if capture.device.startswith("cuda"):
                    kernel.template["precisions"] = [*CUDA_PRECISIONS, *(
                        [SPLIT_PRECISION] if kernel.template["presplit"] else [])]
                    if kernel.template["precision"] == "ieee":
                        # Inductor's fp32 dot is exact because torch's TF32 flag is off, and so runs without tensor
                        # cores; three TF32 passes keep fp32's accuracy on them (the chain checks it): the start.
                        kernel.template["precision"] = "tf32x3"
            continue
        if kernel.grid_type not in _GRIDS:
            raise NoInductorSeed(f"Inductor launches kernel {kernel.name} ({kernel.kind}) on a "
                                 f"{kernel.grid_type or 'custom'} grid, which the seed conversion does not handle")
    configs = {f"{name}{suffix}": found for name, found in capture.configs.items()}
    keys, params, space = _launch_keys(kernels, configs)
    rewrite = _CallRewrite(kernels, keys, tuple(allow_ops), values=None if tuned else params)
    body = [rewrite.visit(stmt) for stmt in call.body]
    if rewrite.vendor:
        ops = sorted(set(rewrite.vendor))
        raise NoInductorSeed(
            f"Inductor calls {', '.join(ops)} {VENDOR_CALL} for this task; the seed's kernels must compute "
            f"it all unless the task allows it (allow_ops = {json.dumps(ops)} in its [[tasks]] entry, or "
            f"--allow-ops {','.join(ops)})")
    flat: list[ast.stmt] = []
    for stmt in body:
        if stmt is None:
            continue
        flat.extend(s for s in (stmt if isinstance(stmt, list) else [stmt]) if s is not None)
    lines = []
    for stmt in flat:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id == "args":
            targets = stmt.targets[0]
            names = [e.id for e in targets.elts] if isinstance(targets, ast.Tuple) else []  # type: ignore[attr-defined]
            if len(names) != len(capture.graph_inputs):
                raise NoInductorSeed(f"Inductor's call() takes {len(names)} inputs where the graph has "
                                     f"{len(capture.graph_inputs)}")
            code = ast.unparse(call)
            for local, source in zip(names, capture.graph_inputs, strict=True):
                expr = _source_expr(source, capture.forward_args)
                if re.search(rf"\b{local}\.item\(\)", code):  # a float of the module Inductor took as a 0-d tensor
                    expr = f"torch.as_tensor({expr})"
                lines.append(f"{local} = {expr}")
            continue
        if isinstance(stmt, ast.Return) and capture.single_output:
            value = stmt.value
            if isinstance(value, ast.Tuple) and len(value.elts) == 1:
                stmt = ast.Return(value.elts[0])
        lines.append(ast.unparse(stmt))
    device = (f"device_ = {capture.device_arg}.device" if capture.device_arg
              else "device_ = next(self.parameters()).device")
    helper_names = _helper_closure({h for k in kernels.values() for h in k.helpers}, capture.helpers)
    missing = sorted(h for h in helper_names if h not in capture.helpers)
    if missing:
        raise NoInductorSeed(f"the kernels call Inductor helpers the capture does not hold: {', '.join(missing)}")
    return _Path(kernels=kernels, body=[device, *lines], params=params if tuned else {},
                 space=space if tuned else {}, helpers=helper_names)


def _main_guard(main: InductorCapture, forward_args: list[str]) -> tuple[str, str]:
    """The test that a call is at the shape the main path was compiled for, as torch.compile guards its static
    build: every tensor the graph reads has the captured size, stride and dtype, and every non-tensor argument the
    captured value. Returns (the forward's per-call test, the parameters' test, run once: their sizes are fixed when
    the model is made)."""
    per_call, once = [], []
    for guard in main.guards:
        expr = _source_expr(guard["source"], forward_args)
        if "shape" not in guard:
            continue
        test = (f"{expr}.shape == {tuple(guard['shape'])!r} and {expr}.stride() == {tuple(guard['stride'])!r} "
                f"and {expr}.dtype == {guard['dtype']}")
        (once if expr.startswith("self.") else per_call).append(test)
    for name, value in main.forward_values.items():
        per_call.append(f"{name} == {value!r}")
    return " and ".join(per_call) or "True", " and ".join(once) or "True"


def seed_from_capture(capture: InductorCapture, *, allow_ops: tuple[str, ...] | list[str] = (),
                      variant: str = "") -> str:
    """The candidate module made of one capture (see ``_seed``); where the default build calls a vendor GEMM the
    task does not allow, the build with its GEMMs in Inductor's Triton template (``capture.gemm``) instead."""
    try:
        return _seed(capture, allow_ops=allow_ops, variant=variant)
    except NoInductorSeed as e:
        if not capture.gemm or not any(m in str(e) for m in (VENDOR_CALL, LIBRARY_ONLY)):
            raise
        gemm = InductorCapture(**{k: v for k, v in capture.gemm.items() if k in InductorCapture.__dataclass_fields__})
        if variant:
            # A GEMM build's variant (its tiles autotuned otherwise) under the strict rule: that main path with the
            # GEMM build's generic one. The plain GEMM build is the seed itself there, not a variant of it.
            main = capture.main_capture(variant)
            if variant == "triton-gemm" or main is None or not _EXTERN_GEMM.search(capture.output_code):
                raise
            gemm.main = asdict(main)
        try:
            return _seed(gemm, allow_ops=allow_ops)
        except NoInductorSeed as again:
            raise NoInductorSeed(f"{e}; with its GEMMs in Inductor's Triton template: {again}") from None


def _seed(capture: InductorCapture, *, allow_ops: tuple[str, ...] | list[str] = (), variant: str = "") -> str:
    """The candidate module made of one capture; ``NoInductorSeed`` with the reason where there is none.

    With a main-shape capture (``capture.main``) the module has two paths, as torch.compile keeps a build per
    shape: the main shape's kernels, compiled with sizes, strides and layout as constants, and tuned (its launch
    values are PARAMS/SPACE: the main shape is the one timed); and the shape-generic kernels, Inductor's launch
    choices written in, for every other shape (the chain's odd and extra shapes). ``ModelNew.forward`` takes the
    first where the call matches what it was compiled for. A main capture that cannot be converted leaves the
    generic path alone, tuned, as a seed without one. ``variant``: the main path of another Inductor configuration
    (``capture.variants``; a variant that cannot be converted is ``NoInductorSeed``)."""
    allow = tuple(allow_ops)
    main = capture.main_capture(variant)
    if variant and main is not None:
        _convert(main, allow, tuned=True, suffix="_main")  # raises where the variant cannot be a path
    main_path: _Path | None = None
    if main is not None and main.init_inputs is not None:
        try:
            main_path = _convert(main, allow, tuned=True, suffix="_main")
        except NoInductorSeed:
            main_path = None  # the generic path alone (its own reason, if any, is raised below)
    generic = _convert(capture, allow, tuned=main_path is None)
    timed = main_path or generic
    paths = [p for p in (main_path, generic) if p is not None]
    kernels = {name: k for p in paths for name, k in p.kernels.items()}
    helper_names = set().union(*(p.helpers for p in paths))
    if capture.model_source:
        init = ("    def __init__(self, *args, **kwargs):\n        super().__init__()\n"
                "        # The task's Model makes the parameters (its forward removed): same names, shapes and init.\n"
                "        made = TaskModel(*args, **kwargs)\n"
                "        for name, child in made.named_children():\n            setattr(self, name, child)\n"
                "        for name, p in made.named_parameters(recurse=False):\n"
                "            self.register_parameter(name, p)\n"
                "        for name, b in made.named_buffers(recurse=False):\n            self.register_buffer(name, b)\n"
                "        for name, value in vars(made).items():  # plain attributes the forward reads (a multiplier)\n"
                "            if not name.startswith('_') and name != 'training':\n"
                "                setattr(self, name, value)\n")
    else:
        init = "    def __init__(self, *args, **kwargs):\n        super().__init__()\n"
    signature = ", ".join(["self", *capture.forward_args])
    arguments = ", ".join(capture.forward_args)

    def method(name: str, body: list[str]) -> str:
        return "\n".join([f"    def {name}({signature}):", *("        " + line for stmt in body
                                                                 for line in stmt.splitlines())])

    if main_path is not None:
        assert main is not None
        per_call, once = _main_guard(main, capture.forward_args)
        init += ("        # The main shape's kernels serve a model made with the main shape's init inputs (a guard, as\n"
                 "        # torch.compile's static build has one per shape); every other model, the generic ones.\n"
                 "        self._main_shape = _plain(args) == MAIN_SHAPE_INIT and not kwargs\n"
                 "        self._main_state = None  # its parameters' sizes, strides and dtypes, checked at the first call\n")
        forward = "\n".join([
            f"    def forward({signature}):",
            "        if self._main_shape and self._main_state is None:",
            f"            self._main_state = {once if once == 'True' else f'bool({once})'}",
            f"        if self._main_shape and self._main_state and {per_call}:",
            f"            return self.forward_main_shape({arguments})",
            f"        return self.forward_any_shape({arguments})",
            "",
            method("forward_main_shape", main_path.body),
            "",
            method("forward_any_shape", generic.body)])
    else:
        forward = method("forward", generic.body)
    parts = [_HEADER.format(task=capture.task or "the task", torch=capture.torch_version or "?",
                            device=capture.device or "?", operator=INDUCTOR_SEED),
             "\nimport torch.nn.functional as F  # noqa: F401  (the task's Model may use it)\n" if capture.model_source
             else "",
             f"\nSPACE = {timed.space!r}\nPARAMS = {timed.params!r}\n"]
    if main_path is not None:
        assert main is not None
        parts.append(_MAIN_SHAPE.format(init=_plain(main.init_inputs)))
    if any(k.grid_type == "Grid2DWithYZOverflow" for k in kernels.values()):
        parts.append(_YZ)
    if any(k.template and k.template.get("presplit") for k in kernels.values()):
        parts.append(_BF16_PARTS)
    used = {m for k in kernels.values() for m in re.findall(r"\blibdevice\.(\w+)", k.source)}
    used |= {m for n in helper_names for m in re.findall(r"\blibdevice\.(\w+)", capture.helpers.get(n, ""))}
    parts.append(_libdevice_shim(used))
    helpers = {**(main.helpers if main_path is not None and main is not None else {}), **capture.helpers}
    if any(re.search(r"(?<![\w.])math\.", helpers[n]) for n in helper_names):
        parts.append("from triton.language import math\n")
    for name in sorted(helper_names):
        parts.append("\n\n" + helpers[name].strip() + "\n")
    for kernel in kernels.values():
        if kernel.local_jit:
            parts.append("\n\n" + kernel.local_jit.strip() + "\n")
        parts.append("\n\n@triton.jit\n" + kernel.source.strip() + "\n")
    if capture.model_source:
        parts.append("\n\n" + capture.model_source.strip() + "\n")
    parts.append("\n\nclass ModelNew(nn.Module):\n" + init + "\n" + forward + "\n")
    source = "".join(parts)
    try:
        ast.parse(source)
    except SyntaxError as e:
        raise NoInductorSeed(f"the converted seed does not parse (line {e.lineno}: {e.msg})") from None
    return source


_MAIN_SHAPE = '''
# The task's main shape (the one timed): its init inputs. forward_main_shape's kernels were compiled for it.
MAIN_SHAPE_INIT = {init!r}


def _plain(value):
    """Init inputs as JSON would keep them (tuples as lists), to compare with MAIN_SHAPE_INIT."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
'''


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _helper_closure(names: set[str], helpers: dict[str, str]) -> set[str]:
    """The helpers named and every helper their sources call, by name."""
    out: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in out:
            continue
        out.add(name)
        if name in helpers:
            words = set(re.findall(r"\b(\w+)\b", helpers[name]))
            stack.extend(w for w in words if w in helpers and w not in out)
    return out


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
    chain's odd size, 64 channels where it had 63). Without it the count stays symbolic."""
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
                    result.variants = _variants(model, inputs, main, made, base=main_config, run=device != "cpu")
    # A convolution the task allows cuDNN for keeps it where the default build has kernels of its own around it:
    # the build that replaces it then serves the strict rule only. A task that is one convolution has no seed else.
    conv = bool(_EXTERN_CONV.search(result.output_code)) and (
        "convolution" not in allow_ops or not _kernels_and_call(result.output_code)[0])
    if _EXTERN_GEMM.search(result.output_code) or conv:
        # The build the strict rule starts from: GEMMs in Inductor's template; convolutions, too, as GEMMs.
        build = {**GEMM_BUILD, TF32X3_TILES: True, **({CONV_AS_GEMM: True} if conv else {})}
        torch._dynamo.reset()
        try:
            code, sources, _examples, _, _ = _compile(model, inputs, dynamic=True, config=build)
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
              run: bool) -> list[dict[str, Any]]:
    """The main shape's static build under each ``INDUCTOR_VARIANTS`` configuration that can change one of its
    kernels, kept where the kernels differ from the default build's (and from each other's)."""
    import torch

    kinds = {k.kind for k in _kernels_and_call(main.output_code)[0].values()}
    if re.search(r"\bconvolution\b", main.output_code):  # a kind of its own: a variant may change its layout
        kinds.add("convolution")
    if _EXTERN_GEMM.search(main.output_code):
        kinds.add("extern_gemm")
    seen = [_kernel_bodies(main.output_code)]
    out = []
    for name, (config, changes) in INDUCTOR_VARIANTS.items():
        if not kinds & set(changes):
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


def _compile(model: Any, inputs: list[Any], *, dynamic: bool, config: dict[str, Any] | None = None,
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
        patch(_InstanceNorm, "forward", _instance_norm_unchecked)
        patch(torch.nn.MaxPool1d, "forward", _max_pool1d_as_2d)
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
                    raise NoInductorSeed(f"torch.compile failed on this task ({compile_failure(e)})") from None
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
    """``python -m evoforge.mutators.inductor_seed TASK_FILE DEVICE OUT.json [OVERRIDES_JSON [ALLOW_OPS_JSON]]``: one
    capture, written as JSON; where there is none, ``{"no_seed": reason}``."""
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
