"""Hard rules applied: to a candidate (``validate``), to one parameter set (``is_legal``), and to a whole search
space (``legal_configs``), so that Optuna never samples a config that cannot fit and no GPU time goes to it.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from evoforge.knowledge.hardware import resolve_arch
from evoforge.knowledge.precision import dtype_bytes
from evoforge.knowledge.rulebook import Rule, installed_triton_version, rules
from evoforge.knowledge.source_model import SourceModel, parse
from evoforge.knowledge.validators import VALIDATORS, Check, Violation

from evoforge.core import Candidate, source_language

# Hard rules whose refusal is a size boundary: a config at least as large (tiles, stages) breaks them too, so a
# search may learn the boundary from the configs they refuse. A refusal by any other rule (an accumulator past
# the register file: more warps fix it; a warp count that is not a power of two) says nothing about size.
SIZE_BOUNDARY_RULES = frozenset({"shared-memory-budget", "slm-budget"})


def refusal(violations: list[Violation]) -> dict[str, Any]:
    """What a refused config's result carries in ``details``: the hard rules it breaks, and whether every one of
    them is a size boundary (``SIZE_BOUNDARY_RULES``), which the default strategy's tuner learns from."""
    hard = sorted({v.rule for v in violations if v.severity == "hard"})
    return {"refused_by": hard, "size_boundary": bool(hard) and set(hard) <= SIZE_BOUNDARY_RULES}


def _rules_in_force(arch: str, triton_version: str | None, *, hard_only: bool,
                    language: str = "triton") -> list[Rule]:
    """The rules of the candidate's language. Versioned rules need a version: the one given, else the installed
    Triton's; with neither they are left out rather than guessed."""
    version = triton_version or installed_triton_version()
    chosen = [r for r in rules(arch, triton_version=version, language=language)
              if r.validator and (r.hard or not hard_only)]
    if version is None:
        chosen = [r for r in chosen if not r.triton]
    return chosen


def _run(check: Check, chosen: list[Rule]) -> list[Violation]:
    cache: dict[str, list[Any]] = {}
    out: list[Violation] = []
    for rule in chosen:
        fn = VALIDATORS.get(rule.validator)
        if fn is None:
            raise LookupError(f"rule {rule.id} names validator {rule.validator!r}, which does not exist")
        if rule.validator not in cache:
            cache[rule.validator] = list(fn(check))
        out += [Violation(rule.id, str(rule.severity), f.message, f.line) for f in cache[rule.validator]]
    out.sort(key=lambda v: (v.severity != "hard", v.line or 0, v.rule))
    return out


def _meta_elem_bytes(meta: dict[str, Any]) -> int | None:
    if isinstance(meta.get("elem_bytes"), int):
        return int(meta["elem_bytes"])
    return dtype_bytes(meta["dtype"]) if meta.get("dtype") else None


def validate(candidate: Candidate | str, arch: str, *, triton_version: str | None = None) -> list[Violation]:
    """Every rule ``candidate`` breaks on ``arch``, hard ones first, read statically from its source and params.

    ``triton_version`` picks the versioned rules (``tl.make_block_ptr`` is hard from 3.7); the installed Triton's
    when None. A source that does not parse yields nothing here: the static check reports it. The dot operands'
    element size comes from the source's casts, else ``candidate.meta["dtype"]`` / ``["elem_bytes"]``, else 2.
    """
    key = resolve_arch(arch)
    if isinstance(candidate, str):
        candidate = Candidate.from_source(candidate)
    try:
        model = parse(candidate.source)
    except (SyntaxError, ValueError):
        return []
    check = Check(
        arch=key,
        params=model.merged_params(candidate.params),
        model=model,
        space=candidate.space or model.space,
        triton_version=triton_version,
        elem_bytes=_meta_elem_bytes(candidate.meta),
        source=candidate.source,
        language=candidate.language,
    )
    return _run(check, _rules_in_force(key, triton_version, hard_only=False, language=candidate.language))


def _check_params(
    params: dict[str, Any],
    key: str,
    model: SourceModel | None,
    chosen: list[Rule],
    elem_bytes: int | None,
    triton_version: str | None,
    source: str = "",
    language: str = "triton",
) -> list[Violation]:
    check = Check(
        arch=key,
        params=model.merged_params(params) if model is not None else dict(params),
        model=model,
        space=model.space if model is not None else {},
        triton_version=triton_version,
        elem_bytes=elem_bytes,
        source=source,
        language=language,
    )
    return _run(check, chosen)


#: is_legal's answers, by everything they depend on: a campaign's driver asks for each of a structure's configs
#: several times (the strategy's walk, the campaign's refusal, the rule operators), 5-7 ms each on a 2-core machine.
_LEGAL: dict[tuple[Any, ...], tuple[bool, tuple[Violation, ...]]] = {}
_LEGAL_MAX = 1 << 16


def is_legal(
    params: dict[str, Any],
    arch: str,
    *,
    source: str | None = None,
    elem_bytes: int | None = None,
    triton_version: str | None = None,
) -> tuple[bool, list[Violation]]:
    """Whether ``params`` break no hard rule of ``arch``, and the hard violations if they do.

    With ``source`` the params are bound into the kernel the way the evaluator injects them (PARAMS updated);
    without it only what the names say is judged (num_warps, grf_mode, BLOCK_M/N/K x num_stages). The answer is a
    function of the arguments (and of the installed Triton where no version is given), kept once computed.
    """
    try:
        memo = (json.dumps(params, sort_keys=True), arch, source, elem_bytes, triton_version)
    except (TypeError, ValueError):
        memo = None
    if memo is not None and memo in _LEGAL:
        legal, found = _LEGAL[memo]
        return legal, list(found)
    legal, violations = _is_legal(params, arch, source=source, elem_bytes=elem_bytes, triton_version=triton_version)
    if memo is not None:
        if len(_LEGAL) >= _LEGAL_MAX:
            _LEGAL.clear()
        _LEGAL[memo] = (legal, tuple(violations))
    return legal, violations


def _is_legal(params: dict[str, Any], arch: str, *, source: str | None, elem_bytes: int | None,
              triton_version: str | None) -> tuple[bool, list[Violation]]:
    key = resolve_arch(arch)
    model = parse(source) if source is not None else None
    language = source_language(source) if source is not None else "triton"
    violations = _check_params(params, key, model,
                               _rules_in_force(key, triton_version, hard_only=True, language=language),
                               elem_bytes, triton_version, source or "", language)
    return not violations, violations


def legal_configs(
    space: dict[str, list[Any]],
    arch: str,
    *,
    source: str | None = None,
    elem_bytes: int | None = None,
    triton_version: str | None = None,
) -> list[dict[str, Any]]:
    """Every config of the product of ``space`` that breaks no hard rule of ``arch``, in product order."""
    key = resolve_arch(arch)
    model = parse(source) if source is not None else None
    language = source_language(source) if source is not None else "triton"
    chosen = _rules_in_force(key, triton_version, hard_only=True, language=language)
    names = list(space)
    out = []
    for values in itertools.product(*(space[n] for n in names)):
        config = dict(zip(names, values, strict=True))
        if not _check_params(config, key, model, chosen, elem_bytes, triton_version, source or "", language):
            out.append(config)
    return out
