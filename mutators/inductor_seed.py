"""Seeds from torch.compile: Inductor's generated Triton for a task, turned into a standalone candidate module.

Two steps, apart on purpose; this module is the second:

- ``capture`` (``mutators/inductor_capture.py``, run in a process of its own: ``python -m
  evoforge.mutators.inductor_capture``) compiles the task's reference with Inductor and writes what it made as JSON
  (an ``InductorCapture``, ``mutators/inductor_common.py``).
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
import json
import re
import textwrap
from dataclasses import asdict, dataclass
from typing import Any

from evoforge.knowledge.starts import SPLIT_PRECISION, SPLIT_TILE
from evoforge.mutators.inductor_common import (
    _EXTERN_GEMM,
    _TEMPLATE_DOT,
    LIBRARY_ONLY,
    VENDOR_CALL,
    InductorCapture,
    NoInductorSeed,
    op_allowed,
)
from evoforge.mutators.lift import value_range

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
#: guard allows them (``judge/guards.py`` SAFE_OPS).
_SEED_DRAWS = frozenset({"randint"})
_ALLOCATORS = re.compile(r"^empty_strided(_cpu|_cuda|_xpu)?$")
_GRIDS = ("Grid1D", "Grid2D", "Grid3D", "Grid2DWithYZOverflow")
_BLOCKS = {"x": "XBLOCK", "y": "YBLOCK", "z": "ZBLOCK"}


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


def source_expr(source: str, forward_args: list[str]) -> str:
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
            elif not op_allowed(op, self.allow_ops):
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


def _convert(capture: InductorCapture, allow_ops: tuple[str, ...], *, tuned: bool, suffix: str = "",
             library_ok: bool = False) -> _Path:
    """One capture's kernels and forward body; ``tuned``: launch values read from PARAMS, else written as
    literals (Inductor's choice); ``library_ok``: a build of library calls alone (allowed ones) is a path too."""
    kernels, call = _kernels_and_call(_rename_kernels(capture.output_code, suffix) if suffix else capture.output_code)
    if not kernels and not library_ok:
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
                expr = source_expr(source, capture.forward_args)
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
        expr = source_expr(guard["source"], forward_args)
        if "shape" not in guard:
            continue
        test = (f"{expr}.shape == {tuple(guard['shape'])!r} and {expr}.stride() == {tuple(guard['stride'])!r} "
                f"and {expr}.dtype == {guard['dtype']}")
        (once if expr.startswith("self.") else per_call).append(test)
    for name, value in main.forward_values.items():
        per_call.append(f"{name} == {value!r}")
    return " and ".join(per_call) or "True", " and ".join(once) or "True"


def seed_from_capture(capture: InductorCapture, *, allow_ops: tuple[str, ...] | list[str] = (),
                      variant: str = "", library_ok: bool = False) -> str:
    """The candidate module made of one capture (see ``_seed``); where the default build calls a vendor GEMM the
    task does not allow, the build with its GEMMs in Inductor's Triton template (``capture.gemm``) instead.
    ``library_ok``: a default build of allowed library calls alone (a task that is one convolution) is the module
    as it is, for a rewrite that puts kernels of its own in their place (``mutators/conv_kernel.py``)."""
    try:
        return _seed(capture, allow_ops=allow_ops, variant=variant, library_ok=library_ok)
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


def _seed(capture: InductorCapture, *, allow_ops: tuple[str, ...] | list[str] = (), variant: str = "",
          library_ok: bool = False) -> str:
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
            main_path = _convert(main, allow, tuned=True, suffix="_main", library_ok=library_ok)
        except NoInductorSeed:
            main_path = None  # the generic path alone (its own reason, if any, is raised below)
    generic = _convert(capture, allow, tuned=main_path is None, library_ok=library_ok)
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
