"""The functions hard rules name as ``validator``: each reads a candidate statically and says what breaks.

A validator returns ``Finding``s (message, line); the rule that names it supplies id and severity, so one
validator can back a hard rule on one Triton version and advice on another. A validator judges only what it can
pin down: an unknown value is never a violation.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from evoforge.knowledge.hardware import load_arch, model_fact, vendor
from evoforge.knowledge.source_model import (
    TILE_NAME,
    UNKNOWN,
    DotCall,
    JitFunction,
    SourceModel,
    Unit,
    dotted,
    dtype_bytes,
    is_pow2,
)

from evoforge.core import per_source


@dataclass(frozen=True)
class Violation:
    """A broken rule: ``severity`` is ``hard`` (the candidate is invalid) or ``advice``; ``line`` in the source."""

    rule: str
    severity: str
    message: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "message": self.message, "line": self.line}


@dataclass(frozen=True)
class Finding:
    message: str
    line: int | None = None


@dataclass
class Check:
    """What a validator may read: the parsed source (None when only parameters are judged), the parameter
    values (the module's PARAMS overridden by the candidate's), the arch and the Triton version."""

    arch: str
    params: dict[str, Any]
    model: SourceModel | None = None
    space: dict[str, list[Any]] = field(default_factory=dict)
    triton_version: str | None = None
    elem_bytes: int | None = None
    source: str = ""  # the module's text (CuTe validators read its CUDA_SRC)
    language: str = "triton"

    @cached_property
    def units(self) -> list[Unit]:
        return self.model.units(self.params) if self.model is not None else []

    @cached_property
    def root_units(self) -> list[Unit]:
        """One unit per launch binding (helpers share their caller's launch options)."""
        return [u for u in self.units if u.fn.name == u.root]

    def fact(self, name: str, default: Any = None) -> Any:
        return model_fact(self.arch, name, default)

    @property
    def vendor(self) -> str:
        return vendor(self.arch)

    def default_num_stages(self) -> int:
        return 3 if self.vendor == "nvidia" else 2  # CUDAOptions / XPUOptions defaults (Triton 3.6)


Validator = Callable[[Check], Iterable[Finding]]
VALIDATORS: dict[str, Validator] = {}


def validator(name: str) -> Callable[[Validator], Validator]:
    def register(fn: Validator) -> Validator:
        VALIDATORS[name] = fn
        return fn

    return register


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple[str, int | None]] = set()
    out = []
    for f in findings:
        if (f.message, f.line) not in seen:
            seen.add((f.message, f.line))
            out.append(f)
    return out


def _kib(n: int) -> str:
    return f"{n / 1024:g} KiB"


# -- language -------------------------------------------------------------------------------------------------
@validator("arange_power_of_two")
def arange_power_of_two(check: Check) -> list[Finding]:
    out = []
    for unit in check.units:
        r = check.model.resolver(unit, check.params)  # type: ignore[union-attr]
        for call, guards in unit.fn.aranges:
            if not check.model.live(guards, unit, check.params):  # type: ignore[union-attr]
                continue
            kw = {k.arg: k.value for k in call.keywords}
            start_expr = call.args[0] if len(call.args) >= 2 else kw.get("start")
            end_expr = call.args[1] if len(call.args) >= 2 else (call.args[0] if call.args else kw.get("end"))
            start = r.value(start_expr) if start_expr is not None else 0
            end = r.value(end_expr)
            if not isinstance(start, int) or not isinstance(end, int):
                continue
            extent = end - start
            if extent <= 0:
                out.append(Finding(f"tl.arange({start}, {end}) is empty: end must be greater than start", call.lineno))
            elif not is_pow2(extent):
                nxt = 1 << (extent - 1).bit_length()
                out.append(Finding(
                    f"tl.arange({start}, {end}) spans {extent}, not a power of two (Triton: \"arange's range must "
                    f"be a power of 2\"); use {nxt} and mask the tail", call.lineno))
    return _dedupe(out)


def _live_dots(check: Check, unit: Unit) -> list[DotCall]:
    assert check.model is not None
    return [d for d in unit.fn.dots if check.model.live(d.guards, unit, check.params)]


def _tile(unit: Unit, check: Check, dim: str) -> Any:
    name = unit.fn.tile_params().get(dim)
    return unit.value(name) if name else UNKNOWN


def _operand_bytes(unit: Unit, dot: DotCall, check: Check) -> int | None:
    assert check.model is not None
    sizes = {dtype_bytes(check.model.operand_dtype(x, unit)) for x in (dot.a, dot.b)}
    sizes.discard(None)
    return sizes.pop() if len(sizes) == 1 else None


@validator("dot_min_k")
def dot_min_k(check: Check) -> list[Finding]:
    out = []
    for unit in check.units:
        for dot in _live_dots(check, unit):
            k = _tile(unit, check, "K")
            if not isinstance(k, int):
                continue
            need = 32 if _operand_bytes(unit, dot, check) == 1 else 16
            if k < need:
                out.append(Finding(f"tl.dot with K = {k}: Triton needs K >= {need} for these operands "
                                   f"(min_dot_size of the NVIDIA backend)", dot.line))
    return _dedupe(out)


@validator("dot_min_mn")
def dot_min_mn(check: Check) -> list[Finding]:
    out = []
    for unit in check.units:
        for dot in _live_dots(check, unit):
            for dim in ("M", "N"):
                v = _tile(unit, check, dim)
                if isinstance(v, int) and v < 16:
                    out.append(Finding(f"tl.dot with {dim} = {v}: below 16 the tensor-core tile is padded "
                                       "(older Triton rejects it outright)", dot.line))
    return _dedupe(out)


@validator("dot_operand_dtypes")
def dot_operand_dtypes(check: Check) -> list[Finding]:
    allowed = check.fact("dot_input_precisions", [])
    out = []
    for unit in check.units:
        r = check.model.resolver(unit, check.params)  # type: ignore[union-attr]
        for dot in _live_dots(check, unit):
            a, b = (check.model.operand_dtype(x, unit) for x in (dot.a, dot.b))  # type: ignore[union-attr]
            if a and b and a != b:
                out.append(Finding(f"tl.dot operands must share a dtype: a is {a}, b is {b}", dot.line))
            out_dtype = dot.keywords.get("out_dtype")
            if out_dtype is not None and dotted(out_dtype).endswith("bfloat16"):
                out.append(Finding("tl.dot(out_dtype=tl.bfloat16) is rejected by Triton: accumulate in float32 "
                                   "and cast with .to(tl.bfloat16)", dot.line))
            if "input_precision" in dot.keywords and "allow_tf32" in dot.keywords:
                out.append(Finding("tl.dot takes input_precision or allow_tf32, not both", dot.line))
            prec = r.value(dot.keywords["input_precision"]) if "input_precision" in dot.keywords else UNKNOWN
            if isinstance(prec, str) and allowed and prec.lower() not in allowed:
                out.append(Finding(f"input_precision={prec!r} is not accepted on {check.arch} "
                                   f"(allowed: {', '.join(allowed)})", dot.line))
    return _dedupe(out)


@validator("uses_block_ptr")
def uses_block_ptr(check: Check) -> list[Finding]:
    if check.model is None:
        return []
    out = []
    for fn in check.model.functions.values():
        for call in fn.block_ptr_calls:
            name = dotted(call.func).rsplit(".", 1)[-1]
            out.append(Finding(f"tl.{name}: block pointers are removed in Triton 3.7; use "
                               "tl.make_tensor_descriptor(base, shape, strides, block_shape) and desc.load([...]) "
                               "with explicit offsets instead of tl.advance", call.lineno))
    return out


@validator("descriptor_last_stride")
def descriptor_last_stride(check: Check) -> list[Finding]:
    out = []
    for unit in check.units:
        r = check.model.resolver(unit, check.params)  # type: ignore[union-attr]
        for call in unit.fn.descriptors:
            kw = {k.arg: k.value for k in call.keywords}
            strides = kw.get("strides", call.args[2] if len(call.args) > 2 else None)
            if not isinstance(strides, ast.Tuple | ast.List) or not strides.elts:
                continue
            values = [r.value(e) for e in strides.elts]
            last = values[-1]
            if isinstance(last, int) and last != 1:
                why = f"last stride {last}"
            elif last is UNKNOWN and 1 in values[:-1]:
                why = f"stride 1 on dimension {values.index(1)} and a runtime last stride"
            else:
                continue
            out.append(Finding(f"tensor descriptor with {why}: the last dimension must be contiguous (stride 1) "
                               "for TMA / 2D block loads; describe the memory as laid out and transpose the "
                               "loaded tile (.T)", call.lineno))
    return _dedupe(out)


@validator("int64_offsets")
def int64_offsets(check: Check) -> list[Finding]:
    if check.model is None:
        return []
    out = []
    for fn in check.model.functions.values():
        if "int64" in fn.text:
            continue
        finding = _int32_product(fn)
        if finding:
            out.append(finding)
    return out


def _int32_product(fn: JitFunction) -> Finding | None:
    """A program-id-derived index times a runtime value (a stride, a size): int32 wraps past 2**31."""
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, exprs in fn.locals.items():
            if name in derived:
                continue
            for e in exprs:
                if e is not None and _mentions_pid(e, derived):
                    derived.add(name)
                    changed = True
                    break
    runtime = {p for p in fn.params if p not in fn.constexprs}
    for node in ast.walk(fn.node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            sides = (node.left, node.right)
            for idx, other in ((s, sides[1 - i]) for i, s in enumerate(sides)):
                if _mentions_pid(idx, derived) and any(
                    isinstance(n, ast.Name) and n.id in runtime for n in ast.walk(other)
                ):
                    text = ast.unparse(node)
                    return Finding(f"{text} is computed in int32 and wraps once the offset passes 2**31 "
                                   "elements; cast the index with .to(tl.int64) where tensors can be that large",
                                   node.lineno)
    return None


def _mentions_pid(expr: ast.AST, derived: set[str]) -> bool:
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and dotted(n.func).endswith("program_id"):
            return True
        if isinstance(n, ast.Name) and n.id in derived:
            return True
    return False


# -- launch parameters ----------------------------------------------------------------------------------------
def _launch_values(check: Check, name: str) -> list[tuple[Any, int | None, Unit | None]]:
    """Each value ``name`` (a launch option) takes: per root unit, or from the params when no source is given."""
    if check.model is None:
        return [(check.params[name], None, None)] if name in check.params else []
    return [(u.option(name), u.option_lines.get(name, u.line), u) for u in check.root_units
            if u.option(name) is not UNKNOWN]


def _grf_registers(check: Check, mode: Any) -> int | None:
    table = check.fact("grf_registers", {}) or {}
    return table.get(str(mode)) if isinstance(mode, str) else None


@validator("num_warps_legal")
def num_warps_legal(check: Check) -> list[Finding]:
    legal = list(check.fact("num_warps", []))
    out = []
    for value, line, _unit in _launch_values(check, "num_warps"):
        if value is UNKNOWN or value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value not in legal:
            why = "not a power of two" if isinstance(value, int) and not is_pow2(value) else "out of range"
            out.append(Finding(f"num_warps={value!r} is {why}: on {check.arch} it must be one of {legal}", line))
    return _dedupe(out)


@validator("shared_memory_budget")
def shared_memory_budget(check: Check) -> list[Finding]:
    budget = check.fact("shared_memory_per_block_bytes") or check.fact("slm_per_work_group_bytes")
    if not budget:
        return []
    mode = check.fact("pipeline_buffers", "num_stages")
    out = []
    for tile, stages, elem, in_loop, line, (n_a, n_b), pieces in _matmul_tiles(check):
        bm, bn, bk = tile
        if in_loop:
            buffers = max(1, stages - 1) if mode == "num_stages_minus_one" else max(1, stages)
        else:
            buffers = 1
        # A tile stored through a tensor descriptor (TMA) is staged in shared memory first: the output tile,
        # or one piece of it when the epilogue stores it in pieces (H200, Triton 3.6: with this term the rule
        # separates the compiled and the out-of-resources persistent-TMA configs of a 64-config sweep exactly).
        epilogue = bm * bn * elem // pieces if pieces else 0
        need = (n_a * bm * bk + n_b * bk * bn) * elem * buffers + epilogue
        if need > budget:
            what = "shared memory" if check.vendor == "nvidia" else "SLM (estimate: used when dot operands are staged through it)"
            tiles = ("(BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N)" if (n_a, n_b) == (1, 1) else
                     f"({n_a} x BLOCK_M*BLOCK_K + {n_b} x BLOCK_K*BLOCK_N, one per distinct dot operand)")
            staged = (f" + the epilogue's BLOCK_M*BLOCK_N{f' / {pieces}' if pieces > 1 else ''} x {elem} stored "
                      "through a tensor descriptor" if pieces else "")
            out.append(Finding(
                f"a {bm}x{bn}x{bk} tile of {elem}-byte elements x {buffers} pipeline buffers "
                f"(num_stages={stages}) needs {tiles} x {elem} x {buffers}{staged} = {need} "
                f"bytes ({_kib(need)}) of {what}; {check.arch} has {budget} ({_kib(budget)}) per block: lower "
                "num_stages or the tile", line))
    return _dedupe(out)


@validator("accumulator_registers")
def accumulator_registers(check: Check) -> list[Finding]:
    limit = check.fact("max_registers_per_thread")
    if not limit:
        return []
    warp = check.fact("warp_size", 32)
    out = []
    for (bm, bn), warps, acc_bytes, line in _accumulators(check):
        regs = bm * bn * acc_bytes // (4 * warp * warps)
        if regs > limit:
            out.append(Finding(
                f"a {bm}x{bn} accumulator of {acc_bytes}-byte elements over {warps} warps takes {regs} registers per "
                f"thread for the accumulator alone; {check.arch} gives a thread at most {limit}: it spills to local "
                "memory (3.4-22x slower than the best config on the H200 GEMM recordings); use more warps or a "
                "smaller BLOCK_M x BLOCK_N", line))
    return _dedupe(out)


def _accumulator_tile(check: Check, unit: Unit) -> tuple[int, int, int, list[DotCall]] | None:
    """BLOCK_M, BLOCK_N and num_warps of ``unit``'s tl.dot accumulator, and its live dots; None without a live dot
    or with a size the params do not settle."""
    dots = _live_dots(check, unit)
    if not dots:
        return None
    bm, bn = _tile(unit, check, "M"), _tile(unit, check, "N")
    warps = unit.option("num_warps", 4)
    if not all(isinstance(v, int) and v > 0 for v in (bm, bn, warps)):
        return None
    return bm, bn, warps, dots


def _accumulators(check: Check) -> list[tuple[tuple[int, int], int, int, int | None]]:
    """(BLOCK_M, BLOCK_N), num_warps, accumulator element bytes and line of each kernel's tl.dot accumulation:
    fp32 (4 bytes), or 2 where every live dot asks for an fp16/bf16 ``out_dtype``; without a source, from the
    params' tile names, fp32."""
    found = []
    if check.model is None:
        tiles = _param_tiles(check.params)
        warps = check.params.get("num_warps", 4)
        if tiles and isinstance(warps, int) and warps > 0:
            found.append(((tiles[0], tiles[1]), warps, 4, None))
        return found
    for unit in check.units:
        tile = _accumulator_tile(check, unit)
        if tile is None:
            continue
        bm, bn, warps, dots = tile
        half = all("out_dtype" in d.keywords and dotted(d.keywords["out_dtype"]).split(".")[-1]
                   in ("float16", "bfloat16") for d in dots)
        found.append(((bm, bn), warps, 2 if half else 4, dots[0].line))
    return found


def _matmul_tiles(check: Check) -> list[tuple[tuple[int, int, int], int, int, bool, int | None, tuple[int, int], int]]:
    """(BLOCK_M, BLOCK_N, BLOCK_K), num_stages, element bytes, whether the dot is pipelined, line, how many
    distinct A and B tiles the pipelined dots read (a split-precision GEMM, hi*hi + hi*lo + lo*hi, reads two
    of each: each is its own multi-buffered copy in shared memory), and in how many pieces the kernel stores
    its output tile through tensor descriptors (0: no descriptor store)."""
    found = []
    if check.model is None:
        tiles = _param_tiles(check.params)
        stages = check.params.get("num_stages", check.default_num_stages())
        if tiles and isinstance(stages, int):
            found.append((tiles, stages, check.elem_bytes or 2, True, None, (1, 1), 0))
        return found
    for unit in check.units:
        dots = _live_dots(check, unit)
        if not dots:
            continue
        tile = tuple(_tile(unit, check, d) for d in ("M", "N", "K"))
        if not all(isinstance(v, int) and v > 0 for v in tile):
            continue
        stages = unit.option("num_stages", check.default_num_stages())
        if not isinstance(stages, int):
            continue
        elem = check.elem_bytes
        if elem is None:
            sizes = {_operand_bytes(unit, d, check) for d in dots} - {None}
            elem = max(sizes) if sizes else 2
        in_loop = any(d.in_loop for d in dots)
        line = unit.line if unit.fn.name == unit.root else dots[0].line
        looped = [d for d in dots if d.in_loop] or dots
        operands = (len({ast.dump(d.a) for d in looped}), len({ast.dump(d.b) for d in looped}))
        pieces = sum(1 for node, guards in unit.fn.descriptor_stores if check.model.live(guards, unit, check.params))
        found.append((tile, stages, max(elem, 1), in_loop, line, operands, pieces))  # type: ignore[arg-type]
    return found


def _param_tiles(params: dict[str, Any]) -> tuple[int, int, int] | None:
    dims: dict[str, int] = {}
    for key, value in params.items():
        m = TILE_NAME.match(key)
        if m and isinstance(value, int):
            dims.setdefault(m.group(1).upper(), value)
    if all(d in dims for d in "MNK"):
        return dims["M"], dims["N"], dims["K"]
    return None


@validator("swizzle_grid_1d")
def swizzle_grid_1d(check: Check) -> list[Finding]:
    out = []
    for root in check.root_units:
        family = [u for u in check.units if u.launch is root.launch and u.root == root.root]
        group = next((u.fn.group_param() for u in family if u.fn.group_param()), None)
        axes = set().union(*(u.fn.program_id_axes for u in family))
        if group is None or not axes or not axes <= {0} or root.grid_dims is None or root.grid_dims < 2:
            continue
        out.append(Finding(
            f"{root.fn.name} orders tiles with {group} from tl.program_id(0) alone but is launched on a "
            f"{root.grid_dims}-D grid: grouped (swizzled) tile ordering needs a 1-D grid of "
            "cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs", root.launch.line if root.launch else root.line))
    return _dedupe(out)


# -- Intel ----------------------------------------------------------------------------------------------------
@validator("hardcoded_32_warps")
def hardcoded_32_warps(check: Check) -> list[Finding]:
    tunable = len(check.space.get("num_warps", [])) > 1
    out = []
    for value, line, unit in _launch_values(check, "num_warps"):
        if value != 32 or unit is None:
            continue
        if unit.origin == "config":
            continue  # one choice among autotune configs is tuning, not hard-coding
        if "num_warps" in unit.hardcoded_options or not tunable:
            out.append(Finding("num_warps=32 is hard-coded: on Intel GPUs 32 sub-groups per work-group raises "
                               "register pressure and halves occupancy for most shapes; put num_warps in SPACE "
                               "(e.g. [4, 8, 16, 32]) and let the tuner pick", line))
    return _dedupe(out)


@validator("grf_mode_legal")
def grf_mode_legal(check: Check) -> list[Finding]:
    modes = check.fact("grf_modes", [])
    cap = check.fact("max_num_warps_large_grf", 32)
    out = []
    for value, line, unit in _launch_values(check, "grf_mode"):
        if value is None:
            continue
        if not isinstance(value, str):
            out.append(Finding(f"grf_mode={value!r} must be a string (e.g. '256'): the XPU backend compares "
                               "strings and rejects anything else", line))
            continue
        if value not in modes:
            out.append(Finding(f"grf_mode={value!r} is unknown on {check.arch} (one of {modes})", line))
            continue
        warps = unit.option("num_warps", 4) if unit is not None else check.params.get("num_warps", 4)
        if (_grf_registers(check, value) or 0) >= 256 and isinstance(warps, int) and warps > cap:
            out.append(Finding(f"grf_mode={value!r} with num_warps={warps}: 256 registers per thread halve the "
                               f"work-group, so at most {cap} warps", line))
    return _dedupe(out)


@validator("grf_mode_declared")
def grf_mode_declared(check: Check) -> list[Finding]:
    if check.model is None:
        return []
    out = []
    passes_grf = False
    for fn in check.model.functions.values():
        configs = fn.autotune_configs or ()
        tuned = any("grf_mode" in ast.unparse(c.args[0]) for c in configs if c.args)
        passes_grf |= tuned
        if tuned and "grf_mode" not in fn.params:
            out.append(Finding(f"{fn.name}: autotune configs set grf_mode, so the kernel must declare "
                               "grf_mode: tl.constexpr (the autotuner passes it as an argument)", fn.line))
        elif "grf_mode" in fn.params and "grf_mode" not in fn.constexprs:
            out.append(Finding(f"{fn.name}: declare grf_mode as tl.constexpr (it selects a compile mode, not "
                               "a runtime value)", fn.line))
    passes_grf |= any(any(k.arg == "grf_mode" for k in launch.node.keywords) for launch in check.model.launches)
    if "grf_mode" in check.space and len(check.space["grf_mode"]) > 1 and not passes_grf:
        out.append(Finding("SPACE tunes grf_mode but no launch passes grf_mode=PARAMS['grf_mode']: the tuned "
                           "value never reaches the compiler", check.model.constant_lines.get("SPACE")))
    return out


@validator("sub_group_size")
def sub_group_size(check: Check) -> list[Finding]:
    sizes = list(check.fact("sub_group_sizes", []))
    out = []
    for key in ("warp_size", "threads_per_warp"):
        for value, line, _unit in _launch_values(check, key):
            if value is not None and value not in sizes:
                out.append(Finding(f"{key}={value!r}: sub-groups on {check.arch} are {sizes} lanes wide", line))
    return _dedupe(out)


@validator("grf_pressure")
def grf_pressure(check: Check) -> list[Finding]:
    reg_bytes = check.fact("grf_register_bytes", 64)
    out = []
    for unit in check.units:
        tile = _accumulator_tile(check, unit)
        if tile is None:
            continue
        bm, bn, warps, dots = tile
        mode = unit.option("grf_mode", "default")
        regs = 256 if mode == "auto" else _grf_registers(check, mode) or 128  # auto: the backend enlarges on spills
        per_thread = bm * bn * 4 // warps  # fp32 accumulator spread over the work-group's threads
        if per_thread > regs * reg_bytes // 2:
            out.append(Finding(f"a {bm}x{bn} fp32 accumulator over {warps} warps is {per_thread} bytes per thread, "
                               f"over half of the {regs}-register GRF ({regs * reg_bytes} bytes): expect spills; "
                               "use grf_mode '256', more warps or a smaller tile", dots[0].line))
    return _dedupe(out)


@validator("tensor_descriptors_for_dot")
def tensor_descriptors_for_dot(check: Check) -> list[Finding]:
    if check.model is None:
        return []
    return [Finding(f"{fn.name} feeds tl.dot from pointer loads: tensor descriptors (tl.make_tensor_descriptor) "
                    "give 2D block loads and DPAS, often 2x faster", fn.dots[0].line)
            for fn in check.model.functions.values() if fn.dots and not fn.uses_descriptors]


# -- advice on structure --------------------------------------------------------------------------------------
@validator("fp32_dot_precision")
def fp32_dot_precision(check: Check) -> list[Finding]:
    if check.elem_bytes is not None and check.elem_bytes != 4:
        return []
    out = []
    for unit in check.units:
        r = check.model.resolver(unit, check.params)  # type: ignore[union-attr]
        # 16-bit dtypes named anywhere (the host casting inputs, the kernel casting tiles) suggest 16-bit operands
        low_precision_text = any(t in check.model.source for t in ("float16", "bfloat16", "float8"))  # type: ignore[union-attr]
        dots = _live_dots(check, unit)
        if any("input_precision" in d.keywords or "allow_tf32" in d.keywords for d in dots) and any(
            "input_precision" not in d.keywords and "allow_tf32" not in d.keywords for d in dots
        ):
            continue  # the fp32 path chose its precision; the bare dot serves 16-bit operands
        for dot in dots:
            size = _operand_bytes(unit, dot, check)
            if (size is not None and size != 4) or (size is None and low_precision_text and check.elem_bytes is None):
                continue
            prec = r.value(dot.keywords["input_precision"]) if "input_precision" in dot.keywords else None
            tf32 = r.value(dot.keywords["allow_tf32"]) if "allow_tf32" in dot.keywords else None
            if prec is UNKNOWN or tf32 is UNKNOWN:
                continue
            if prec in (None, "tf32") and tf32 in (None, True):  # bf16x3 passes the chain's fp32 criterion
                out.append(Finding("tl.dot on fp32 operands runs as TF32 by default (10-bit mantissa, about 1e-3 "
                                   "relative error): it fails an fp32 tolerance; pass input_precision='tf32x3' "
                                   "(or 'ieee') unless the task accepts TF32 error", dot.line))
    return _dedupe(out)


@validator("grouped_ordering")
def grouped_ordering(check: Check) -> list[Finding]:
    out = []
    for root in check.root_units:
        family = [u for u in check.units if u.launch is root.launch and u.root == root.root]
        if not any(d.in_loop for u in family for d in u.fn.dots):
            continue
        if any(u.fn.group_param() for u in family) or root.grid_dims not in (1, None):
            continue
        out.append(Finding(f"{root.fn.name} walks output tiles in row-major order: consecutive programs re-read "
                           "the same B columns from DRAM; a GROUP_M constexpr (grouped ordering) keeps them in L2",
                           root.launch.line if root.launch else root.line))
    return _dedupe(out)


# -- CuTe (CUDA C++ in CUDA_SRC) ---------------------------------------------------------------------------------
def _cuda_src(check: Check) -> str:
    """The candidate's CUDA_SRC text ('' when there is none or it is not a plain literal)."""
    if check.language != "cute" or not check.source:
        return ""
    return _cuda_src_of(check.source)


@per_source(16 << 20)
def _cuda_src_of(source: str) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CUDA_SRC" for t in node.targets):
            value = node.value
            return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else ""
    return ""


_TORCH_HEADERS = re.compile(r"#\s*include\s*[<\"](torch/|ATen/|c10/|pybind11/)[^>\"]*[>\"]")
_HOPPER_ONLY = re.compile(r"\b(SM90_\w+|GMMA::\w+|wgmma\w*|cutlass::arch::Sm90|KernelTmaWarpSpecialized\w*|"
                          r"TmaWarpSpecialized\w*|make_tma_copy|make_tma_atom|setmaxnreg)\b")


@validator("cute_no_torch_headers")
def cute_no_torch_headers(check: Check) -> list[Finding]:
    src = _cuda_src(check)
    found = sorted({m.group(0) for m in _TORCH_HEADERS.finditer(src)})
    if not found:
        return []
    return [Finding(f"CUDA_SRC includes {', '.join(found)}: a CuTe candidate is built by plain nvcc with the CUTLASS "
                    "headers only (no torch C++ extension); take raw pointers and sizes in an extern \"C\" function")]


@validator("cute_arch_features")
def cute_arch_features(check: Check) -> list[Finding]:
    src = _cuda_src(check)
    capability = str(load_arch(check.arch).get("compute_capability", "") if src else "")
    if not src or not capability or check.vendor != "nvidia":
        return []
    try:
        major = int(capability.split(".")[0])
    except ValueError:
        return []
    if major >= 9:
        return []
    used = sorted({m.group(0) for m in _HOPPER_ONLY.finditer(src)})
    if not used:
        return []
    return [Finding(f"CUDA_SRC uses Hopper-only (sm_90a) features ({', '.join(used[:4])}) but {check.arch} is "
                    f"compute capability {capability}: use SM80 atoms (cp.async copies, SM80 mma.sync) there")]


def _int_param(params: dict[str, Any], name: str) -> int | None:
    value = params.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@validator("cute_sm90_gemm_config")
def cute_sm90_gemm_config(check: Check) -> list[Finding]:
    """The warp-specialised Hopper GEMM's tile, schedule, stages and cluster (TILE_M/N/K, SCHEDULE, STAGES,
    CLUSTER_M/N): the configurations that cannot build, or spill their accumulators, are never compiled."""
    if check.language != "cute":
        return []
    p = check.params
    tm, tn, tk = _int_param(p, "TILE_M"), _int_param(p, "TILE_N"), _int_param(p, "TILE_K")
    schedule = p.get("SCHEDULE")
    if None in (tm, tn, tk) or schedule not in ("cooperative", "pingpong"):
        return []
    out: list[Finding] = []
    if schedule == "cooperative" and tm % 128:
        out.append(Finding(f"SCHEDULE cooperative splits a tile's rows over two consumer warpgroups of 64: TILE_M "
                           f"must be a multiple of 128, not {tm} (use pingpong for 64-row tiles)"))
    if tm % 64 or tn % 16 or tn > 256 or tk % 16:
        out.append(Finding(f"a {tm}x{tn}x{tk} tile does not split into wgmma instructions (M a multiple of 64, "
                           "N a multiple of 16 up to 256 per instruction, K a multiple of 16)"))
    consumers = 2 if schedule == "cooperative" else 1
    accumulators = tm * tn // (128 * consumers)  # fp32 registers per consumer thread
    if accumulators > 128:
        out.append(Finding(f"a {tm}x{tn} tile with SCHEDULE {schedule} holds {accumulators} fp32 accumulators per "
                           "consumer thread (at most 128 leave room for operands and addresses in the 240 registers "
                           "a consumer warpgroup gets): it spills; take a smaller tile or the cooperative schedule"))
    elem = check.elem_bytes or 2
    budget = check.fact("shared_memory_per_block_bytes") or 0
    stages = _int_param(p, "STAGES") or 0
    per_stage = (tm + tn) * tk * elem
    epilogue = 2 * min(tm, 128) * 32 * elem  # the TMA epilogue's two staged subtiles (EpilogueTileAuto)
    buffers = stages if stages > 0 else 2  # 0: the builder fills what is left, which must hold at least 2
    need = buffers * per_stage + epilogue
    if budget and need > budget:
        out.append(Finding(f"{buffers} pipeline stages of a {tm}x{tn}x{tk} tile need {buffers} x (TILE_M + TILE_N) x "
                           f"TILE_K x {elem} + the epilogue's {epilogue} = {need} bytes ({_kib(need)}) of shared "
                           f"memory; {check.arch} has {budget} ({_kib(budget)}) per block: lower STAGES or the tile"))
    if p.get("TILES") == "streamk" and schedule != "cooperative":
        out.append(Finding("TILES streamk needs SCHEDULE cooperative (the pingpong kernel deals whole tiles only)"))
    splits = _int_param(p, "SPLITS") or 1
    if p.get("TILES") != "streamk" and (splits > 1 or p.get("REDUCTION", "deterministic") != "deterministic"):
        out.append(Finding(f"SPLITS {splits} / REDUCTION {p.get('REDUCTION', 'deterministic')} act only with TILES "
                           "streamk (the persistent scheduler deals whole tiles): the same kernel, a build wasted"))
    cm, cn = _int_param(p, "CLUSTER_M") or 1, _int_param(p, "CLUSTER_N") or 1
    if cm * cn > 8:
        out.append(Finding(f"a {cm}x{cn} cluster has {cm * cn} CTAs; 8 is the portable maximum"))
    return out
