"""The nine optimization stages (``stages.yaml``) and the static signs in a kernel that call for each.

A stage rewrite costs an LLM call and a GPU evaluation, so the campaign runs the stages a kernel shows a need
for: ``analyze`` reads the source (no GPU, no LLM) and names them in the order they are usually worth running.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from evoforge.knowledge.hardware import resolve_arch, vendor
from evoforge.knowledge.source_model import SourceModel, dotted, parse
from evoforge.knowledge.validators import VALIDATORS, Check
from evoforge.knowledge.yaml_io import safe_load


@dataclass(frozen=True)
class Stage:
    name: str
    purpose: str
    guidance: tuple[str, ...]
    signs: tuple[tuple[str, str], ...]  # (id, what was seen)
    cute_guidance: tuple[str, ...] = ()  # what the stage means for a CuTe (CUDA C++) kernel

    def guidance_for(self, language: str = "triton") -> tuple[str, ...]:
        """The guidance for a kernel in ``language`` (CuTe's where the stage has some)."""
        return self.cute_guidance if language == "cute" and self.cute_guidance else self.guidance

    @property
    def triggers(self) -> tuple[str, ...]:
        """The signs as text, the shape prompt builders read."""
        return tuple(text for _, text in self.signs)


@cache
def _load() -> tuple[Stage, ...]:
    text = (resources.files("evoforge.knowledge") / "stages.yaml").read_text()
    out = []
    for raw in safe_load(text)["stages"]:
        out.append(Stage(
            name=raw["name"],
            purpose=" ".join(str(raw["purpose"]).split()),
            guidance=tuple(" ".join(str(g).split()) for g in raw.get("guidance", ())),
            signs=tuple((s["id"], s["text"]) for s in raw.get("signs", ())),
            cute_guidance=tuple(" ".join(str(g).split()) for g in raw.get("cute_guidance", ())),
        ))
    return tuple(out)


def stages() -> list[Stage]:
    """The nine stages in their usual order, each with purpose, guidance and the signs that call for it."""
    return list(_load())


#: The stage names, in order: read from stages.yaml, the one place they are written.
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in _load())


# -- sign detectors ---------------------------------------------------------------------------------------------
_TORCH_COMPUTE = frozenset({
    "matmul", "mm", "bmm", "addmm", "einsum", "softmax", "log_softmax", "sigmoid", "relu", "gelu", "silu", "tanh",
    "exp", "log", "sum", "mean", "amax", "amin", "max", "min", "var", "std", "conv1d", "conv2d", "conv3d",
    "linear", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "dropout", "cumsum",
    "norm", "sqrt", "rsqrt", "pow", "mul", "add", "sub", "div", "where", "clamp", "hardtanh", "leaky_relu", "elu",
    "selu", "softplus", "mish", "logsumexp", "argmax", "argmin", "topk", "sort", "scaled_dot_product_attention",
})
_TORCH_PREFIXES = ("torch.", "F.", "torch.nn.functional.", "nn.functional.")

Detector = Callable[[SourceModel, str | None], bool]
_DETECTORS: dict[str, Detector] = {}


def _sign(name: str) -> Callable[[Detector], Detector]:
    def register(fn: Detector) -> Detector:
        _DETECTORS[name] = fn
        return fn

    return register


def _forward_functions(model: SourceModel) -> list[ast.FunctionDef]:
    for node in model.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return [n for n in node.body if isinstance(n, ast.FunctionDef)]
    return list(model.python_functions.values())


def _calls_torch_compute(model: SourceModel) -> bool:
    for fn in _forward_functions(model):
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                return True
            if isinstance(node, ast.Call):
                name = dotted(node.func)
                if name.startswith(_TORCH_PREFIXES) and name.rsplit(".", 1)[-1] in _TORCH_COMPUTE:
                    return True
    return False


def _check(model: SourceModel, arch: str | None) -> Check:
    key = resolve_arch(arch) if arch else "nvidia-sm90"
    return Check(arch=key, params=model.merged_params(None), model=model, space=model.space)


@_sign("launch_in_python_loop")
def _launch_in_loop(model: SourceModel, arch: str | None) -> bool:
    launches = {id(launch.node) for launch in model.launches}
    for fn in model.python_functions.values():
        for node in ast.walk(fn):
            if isinstance(node, ast.For | ast.While) and any(id(n) in launches for n in ast.walk(node)):
                return True
    return False


@_sign("multi_pass_reduction")
def _multi_pass(model: SourceModel, arch: str | None) -> bool:
    for fn in model.functions.values():
        passes = [s for s in fn.node.body if isinstance(s, ast.For)
                  and any(isinstance(n, ast.Call) and dotted(n.func).endswith(".load") for n in ast.walk(s))]
        if len(passes) >= 3:
            return True
    return False


@_sign("no_kernel")
def _no_kernel(model: SourceModel, arch: str | None) -> bool:
    return not model.functions


@_sign("torch_compute_in_forward")
def _torch_compute(model: SourceModel, arch: str | None) -> bool:
    return _calls_torch_compute(model)


@_sign("fp32_dot_default")
def _fp32_dot(model: SourceModel, arch: str | None) -> bool:
    return bool(list(VALIDATORS["fp32_dot_precision"](_check(model, arch))))


@_sign("float64_in_kernel")
def _float64(model: SourceModel, arch: str | None) -> bool:
    return any("float64" in fn.text for fn in model.functions.values())


def _branch_paths(node: ast.AST, path: tuple[tuple[int, bool], ...] = ()) -> dict[int, tuple[tuple[int, bool], ...]]:
    """id(call) -> the (if statement, arm) pairs it sits under, to tell alternative launches from sequential ones."""
    out: dict[int, tuple[tuple[int, bool], ...]] = {}
    if isinstance(node, ast.Call):
        out[id(node)] = path
    if isinstance(node, ast.If | ast.IfExp):
        out.update(_branch_paths(node.test, path))
        body = node.body if isinstance(node.body, list) else [node.body]
        orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
        for arm, stmts in ((True, body), (False, orelse)):
            for stmt in stmts:
                out.update(_branch_paths(stmt, (*path, (id(node), arm))))
        return out
    for child in ast.iter_child_nodes(node):
        out.update(_branch_paths(child, path))
    return out


def _exclusive(a: tuple[tuple[int, bool], ...], b: tuple[tuple[int, bool], ...]) -> bool:
    arms = dict(a)
    return any(node in arms and arms[node] != arm for node, arm in b)


@_sign("several_launches")
def _several_launches(model: SourceModel, arch: str | None) -> bool:
    """Two launch sites that can both run in one forward (not the two arms of an if)."""
    if len(model.launches) < 2:
        return False
    paths = _branch_paths(model.tree)
    sites = [paths.get(id(launch.node), ()) for launch in model.launches]
    return any(not _exclusive(a, b) for i, a in enumerate(sites) for b in sites[i + 1:])


@_sign("kernel_plus_torch")
def _kernel_plus_torch(model: SourceModel, arch: str | None) -> bool:
    return bool(model.launches) and _calls_torch_compute(model)


def _derived_from(fn_locals: dict[str, list[ast.expr | None]], seed: Callable[[ast.AST], bool]) -> set[str]:
    names: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, exprs in fn_locals.items():
            if name not in names and any(
                e is not None and any(seed(n) or isinstance(n, ast.Name) and n.id in names for n in ast.walk(e))
                for e in exprs
            ):
                names.add(name)
                changed = True
    return names


@_sign("scalar_loads_in_loop")
def _scalar_loads(model: SourceModel, arch: str | None) -> bool:
    def is_arange(n: ast.AST) -> bool:
        return isinstance(n, ast.Call) and dotted(n.func).endswith("arange")

    for fn in model.functions.values():
        vector = _derived_from(fn.locals, is_arange)
        for loop in (n for n in ast.walk(fn.node) if isinstance(n, ast.For | ast.While)):
            for call in ast.walk(loop):
                if not (isinstance(call, ast.Call) and dotted(call.func) in ("tl.load", "triton.language.load")):
                    continue  # descriptor loads (desc.load) fetch whole tiles
                if call.args and not any(
                    is_arange(n) or isinstance(n, ast.Name) and n.id in vector for n in ast.walk(call.args[0])
                ):
                    return True
    return False


@_sign("no_grouped_ordering")
def _no_grouping(model: SourceModel, arch: str | None) -> bool:
    return bool(list(VALIDATORS["grouped_ordering"](_check(model, arch))))


@_sign("int32_offsets")
def _int32(model: SourceModel, arch: str | None) -> bool:
    return bool(list(VALIDATORS["int64_offsets"](_check(model, arch))))


@_sign("block_ptr_used")
def _block_ptr(model: SourceModel, arch: str | None) -> bool:
    return any(fn.block_ptr_calls for fn in model.functions.values())


@_sign("pointer_dot_operands")
def _pointer_dots(model: SourceModel, arch: str | None) -> bool:
    return any(fn.dots and not fn.uses_descriptors for fn in model.functions.values())


@_sign("one_program_per_tile")
def _one_program_per_tile(model: SourceModel, arch: str | None) -> bool:
    tiled = any(d.in_loop for fn in model.functions.values() for d in fn.dots)
    return tiled and not any(fn.uses_num_programs for fn in model.functions.values())


@_sign("default_launch_options")
def _default_options(model: SourceModel, arch: str | None) -> bool:
    for launch in model.launches:
        fn = model.functions[launch.kernel]
        if fn.autotune_configs is not None:
            continue
        given = {k.arg for k in launch.node.keywords}
        if not given & {"num_warps", "num_stages"}:
            return True
    return False


@_sign("intel_without_grf_mode")
def _intel_grf(model: SourceModel, arch: str | None) -> bool:
    if not arch or vendor(resolve_arch(arch)) != "intel":
        return False
    return any(fn.dots for fn in model.functions.values()) and "grf_mode" not in model.source


@_sign("no_space")
def _no_space(model: SourceModel, arch: str | None) -> bool:
    return bool(model.functions) and not model.space


@_sign("literal_constexprs")
def _literal_constexprs(model: SourceModel, arch: str | None) -> bool:
    for launch in model.launches:
        fn = model.functions[launch.kernel]
        for kw in launch.node.keywords:
            if (kw.arg in fn.constexprs and kw.arg not in model.space and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, int) and not isinstance(kw.value.value, bool)):
                return True
    return False


@_sign("space_not_read")
def _space_not_read(model: SourceModel, arch: str | None) -> bool:
    for key in model.space:
        if not re.search(r"""PARAMS(?:\[|\.get\()\s*["']""" + re.escape(key) + r"""["']""", model.source):
            return True
    return False


def analyze_signs(source: str, arch: str | None = None) -> dict[str, list[str]]:
    """Stage name -> the signs seen in ``source`` that call for it (stages with none are left out). The
    detectors read Triton: a CuTe module shows none."""
    from evoforge.core import source_language

    if source_language(source) == "cute":
        return {}
    try:
        model = parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, list[str]] = {}
    for stage in _load():
        seen = [text for sign_id, text in stage.signs if _DETECTORS[sign_id](model, arch)]
        if seen:
            found[stage.name] = seen
    return found


def analyze(source: str, arch: str | None = None) -> list[str]:
    """The stages worth running on ``source``, in their usual order (static signs only; an empty list for a
    source that does not parse, which needs a repair rather than a stage)."""
    return list(analyze_signs(source, arch))
