"""The knowledge base: hardware specs and rules as data, stage guidance, seed templates, and the validators
that enforce hard rules in three places (before compile, in the Optuna space, in the LLM prompt).

Public API::

    arch_names() -> list[str]
    load_arch(arch) -> dict
    ceilings(arch, *, device=None) -> {"bandwidth_gbs", "peak_tflops": {fp32, tf32, bf16, fp16}, ...}
    hardware_summary(arch) -> str
    rules(arch=None, stage=None, triton_version=None) -> list[Rule]
    hard_rule_prompt(arch, triton_version=None, language="triton") -> str
    stages() -> list[Stage];  STAGE_NAMES;  analyze(source, arch=None) -> list[str]
    cute_guide(arch) -> str  (what a prompt says about writing CuTe for arch)
    validate(candidate, arch, *, triton_version=None) -> list[Violation]
    is_legal(params, arch, *, source=None, ...) -> (bool, list[Violation])
    legal_configs(space, arch, *, source=None, elem_bytes=None, ...) -> list[dict]
    allowed_input_precisions(arch, dtype) -> list[str]
    unsafe_values(space, dtype, arch=None) -> list[dict]   (values the rules say compute the wrong function)
    moves_together(names=None, arch=None) -> list[tuple]   (parameters the rules say grow together)
    search_hints(space, dtype, arch=None) -> dict           (both, as the default strategy's options)
    template_names() / template_source(name)
    find_template_for(task) / template_entry_for(task) / template_floor_passes(task) / template_allow(task)

An unknown arch raises ``evoforge.core.UsageError`` naming the known ones.
"""

from evoforge.knowledge.cute_guide import cute_guide
from evoforge.knowledge.hardware import arch_names, ceilings, hardware_summary, load_arch, resolve_arch
from evoforge.knowledge.legality import SIZE_BOUNDARY_RULES, is_legal, legal_configs, refusal, validate
from evoforge.knowledge.precision import (
    allowed_input_precisions,
    infer_task_dtype,
    search_hints,
    unsafe_values,
)
from evoforge.knowledge.rulebook import Rule, Severity, hard_rule_prompt, moves_together, rules
from evoforge.knowledge.seed_templates import (
    find_template_for,
    template_allow,
    template_entry_for,
    template_floor_passes,
    template_names,
    template_source,
)
from evoforge.knowledge.stages import STAGE_NAMES, Stage, analyze, analyze_signs, stages
from evoforge.knowledge.validators import Violation

__all__ = [
    "STAGE_NAMES",
    "Rule",
    "Severity",
    "Stage",
    "Violation",
    "allowed_input_precisions",
    "analyze",
    "analyze_signs",
    "arch_names",
    "ceilings",
    "cute_guide",
    "hard_rule_prompt",
    "hardware_summary",
    "infer_task_dtype",
    "is_legal",
    "refusal",
    "SIZE_BOUNDARY_RULES",
    "legal_configs",
    "load_arch",
    "moves_together",
    "resolve_arch",
    "rules",
    "search_hints",
    "stages",
    "find_template_for",
    "template_entry_for",
    "template_allow",
    "template_floor_passes",
    "template_names",
    "template_source",
    "unsafe_values",
    "validate",
]
