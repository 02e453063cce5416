"""Which ``tl.dot`` input precisions a task can afford, by the dtype of its inputs.

On fp32 inputs Triton's default (``tf32``) keeps a 10-bit mantissa: on a 4096^3 matmul that is 0.29 away from
float64 where PyTorch's own fp32 result is 9.5e-4 away (measured on the H200), so a plain-TF32 kernel fails an
fp32 tolerance while ``tf32x3`` (1.9e-4) passes. On 16-bit inputs the setting changes nothing.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evoforge.knowledge.hardware import model_fact, resolve_arch

_ALIASES = {
    "float32": "float32", "fp32": "float32", "float": "float32", "f32": "float32",
    "float16": "float16", "fp16": "float16", "half": "float16", "f16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "fp64": "float64", "double": "float64",
    "int8": "int8", "uint8": "uint8",
    "float8_e4m3fn": "float8", "float8_e5m2": "float8", "fp8": "float8", "float8": "float8",
}
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "float8": 1}

#: Precisions whose error on fp32 inputs stays within a strict fp32 tolerance: the ones the verification chain
#: admits on an fp32 task (``judge/compare.py`` measures against float64 with a 3-pass split's 16 significant
#: bits as its yardstick, so bf16x3 passes; tests/search/test_incorrect_configs.py holds the two to agreeing).
_STRICT_FP32 = ("ieee", "tf32x3", "bf16x3", "bf16x6")


def dtype_name(value: object) -> str | None:
    """``torch.bfloat16``, ``"bf16"``, ``"tl.bfloat16"`` -> ``"bfloat16"``; None when not a dtype."""
    text = str(value).strip().lower().rsplit(".", 1)[-1]
    return _ALIASES.get(text)


def dtype_bytes(value: object) -> int | None:
    name = dtype_name(value)
    return _BYTES.get(name) if name else None


_TORCH_DTYPE = re.compile(r"torch\.(float16|half|bfloat16|float64|double|int8|uint8|float8_e4m3fn|float8_e5m2)\b")


@functools.lru_cache(maxsize=256)
def infer_task_dtype(task_source: str) -> str:
    """The dtype of a KernelBench task's inputs: the first non-fp32 ``torch.<dtype>`` in ``get_inputs`` (or the
    module when that function cannot be found), else float32 (``torch.rand`` and ``torch.randn`` default).

    Kept per source: a rule operator asks it for every move, and parsing the task each time cost a campaign's
    driver 9-77 ms per child (experiments/results/scale/)."""
    text = task_source
    try:
        tree = ast.parse(task_source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
                text = ast.get_source_segment(task_source, node) or task_source
    except SyntaxError:
        pass
    m = _TORCH_DTYPE.search(text)
    return (dtype_name(m.group(1)) or "float32") if m else "float32"


def allowed_input_precisions(arch: str, dtype: str, *, fp32_tolerance: str = "strict") -> list[str]:
    """The ``input_precision`` values worth trying for ``dtype`` inputs on ``arch``.

    Empty for 16-bit and 8-bit inputs (the setting only changes fp32 dots). For fp32, ``strict`` keeps the
    choices the verification chain admits for an fp32 task (``ieee``, ``tf32x3``, ``bf16x3``, ``bf16x6``);
    ``loose`` (a task that accepts TF32 error) adds ``tf32``. Only what the arch's Triton backend accepts is
    returned.
    """
    name = dtype_name(dtype)
    if name != "float32":
        return []
    supported = list(model_fact(resolve_arch(arch), "dot_input_precisions", []))
    wanted = _STRICT_FP32 if fp32_tolerance == "strict" else (*_STRICT_FP32, "tf32")
    return [p for p in supported if p in wanted]


def unsafe_values(space: Mapping[str, Sequence[Any]] | None, dtype: str,
                  arch: str | None = None) -> list[dict[str, Any]]:
    """Parameter values of ``space`` that the rules (``unsafe_values``) say compute another function than a task
    with ``dtype`` inputs asks for: each is a conjunction, {param: value, ...}, every value of it in ``space``
    (every such conjunction when ``space`` is None: a campaign's structures declare their spaces later).

    The search takes them as causes of incorrect results known before anything runs (a config that holds one is
    not proposed until a correct config holding it is seen); the verification chain still judges every result.
    """
    from evoforge.knowledge.rulebook import rules

    name = dtype_name(dtype)
    out: list[dict[str, Any]] = []
    for rule in rules(arch):
        for dtypes, params in rule.unsafe_values:
            if name not in {dtype_name(d) for d in dtypes}:
                continue
            if space is None or all(p in space and v in list(space[p]) for p, v in params):
                entry = dict(params)
                if entry not in out:
                    out.append(entry)
    return out


def search_hints(space: Mapping[str, Sequence[Any]] | None, dtype: str, arch: str | None = None) -> dict[str, Any]:
    """What the rules tell a search of ``space`` (every space when None) for a task with ``dtype`` inputs before
    anything runs, as the default strategy's options: the values they call unsafe (``unsafe``, see
    ``unsafe_values``) and the parameters that grow together (``moves_together``, ``rulebook.moves_together``)."""
    from evoforge.knowledge.rulebook import moves_together

    return {"unsafe": unsafe_values(space, dtype, arch),
            "moves_together": [list(g) for g in moves_together(None if space is None else list(space), arch)]}
