"""Rules as data (``rules/*.yaml``): who they hold for, how hard they are, what an LLM is told.

A rule is scoped by vendor, arch and Triton version because Triton moves (``tl.make_block_ptr`` is gone in
3.7) and hardware differs (32 warps is fine on an H100, a hard-coded 32 is not on an Arc GPU). A hard rule
names the validator that enforces it, so the three places a rule constrains (validator, Optuna space, prompt)
read one definition.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from typing import Any

from evoforge.knowledge.hardware import resolve_arch, vendor
from evoforge.knowledge.stages import STAGE_NAMES
from evoforge.knowledge.yaml_io import safe_load
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


class Severity(enum.StrEnum):
    """``hard``: breaking it makes a candidate ``invalid`` before it compiles. ``advice``: told, not enforced."""

    HARD = "hard"
    ADVICE = "advice"


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    severity: Severity
    stage: str
    prompt: str
    vendors: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()
    triton: str = ""
    languages: tuple[str, ...] = ("triton",)  # the kernel languages the rule is written for (scope.language)
    validator: str = ""
    source: str = ""
    # Parameter values that make a kernel compute another function than a task of these input dtypes asks for:
    # ((dtypes, ((param, value), ...)), ...); a config holding every pair of one entry is likely incorrect.
    unsafe_values: tuple[tuple[tuple[str, ...], tuple[tuple[str, Any], ...]], ...] = ()
    # Parameters whose values grow together to keep what the rule bounds (a tile dimension and the warps that
    # hold its accumulator): the tuner counts growing each of a group by one step as a single move.
    moves_together: tuple[tuple[str, ...], ...] = ()

    @property
    def hard(self) -> bool:
        return self.severity is Severity.HARD

    def holds_for_arch(self, arch: str | None) -> bool:
        if arch is None:
            return True
        key = resolve_arch(arch)
        if self.archs and key not in self.archs:
            return False
        return not self.vendors or vendor(key) in self.vendors

    def holds_for_triton(self, version: str | None) -> bool:
        """An unversioned rule always holds; a versioned one holds when ``version`` is in its range
        (pre-releases and local builds count: ``3.7.0+git...`` is 3.7). ``None`` means "any version"."""
        if not self.triton or version is None:
            return True
        try:
            parsed = Version(version)
        except InvalidVersion:
            return True
        release = Version(".".join(str(p) for p in parsed.release))
        return SpecifierSet(self.triton).contains(release, prereleases=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": str(self.severity),
            "stage": self.stage,
            "scope": {"vendor": list(self.vendors), "arch": list(self.archs), "triton": self.triton,
                      "language": list(self.languages)},
            "prompt": self.prompt,
            "validator": self.validator,
            "source": self.source,
            **({"unsafe_values": [{"dtypes": list(d), "params": dict(p)} for d, p in self.unsafe_values]}
               if self.unsafe_values else {}),
            **({"moves_together": [list(g) for g in self.moves_together]} if self.moves_together else {}),
        }


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def _parse_unsafe(raw: Any, where: str) -> tuple[tuple[tuple[str, ...], tuple[tuple[str, Any], ...]], ...]:
    if raw is None:
        return ()
    out = []
    for entry in raw if isinstance(raw, list) else [raw]:
        if not isinstance(entry, dict) or not entry.get("dtypes") or not isinstance(entry.get("params"), dict) \
                or not entry["params"]:
            raise ValueError(f"{where}: each unsafe_values entry needs 'dtypes' and a non-empty 'params' mapping")
        out.append((_as_tuple(entry["dtypes"]), tuple(sorted(entry["params"].items()))))
    return tuple(out)


def _parse_together(raw: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(
            isinstance(g, list) and len(g) >= 2 and all(isinstance(n, str) for n in g) for g in raw):
        raise ValueError(f"{where}: moves_together is a list of parameter-name lists of two or more, "
                         "e.g. [[BLOCK_M, num_warps]]")
    return tuple(tuple(g) for g in raw)


def _parse_rule(raw: dict[str, Any], where: str) -> Rule:
    for key in ("id", "title", "severity", "stage", "prompt"):
        if not raw.get(key):
            raise ValueError(f"{where}: rule {raw.get('id', '?')} lacks {key!r}")
    scope = raw.get("scope") or {}
    rule = Rule(
        id=str(raw["id"]),
        title=str(raw["title"]).strip(),
        severity=Severity(raw["severity"]),
        stage=str(raw["stage"]),
        prompt=" ".join(str(raw["prompt"]).split()),
        vendors=_as_tuple(scope.get("vendor")),
        archs=_as_tuple(scope.get("arch")),
        triton=str(scope.get("triton") or ""),
        languages=_as_tuple(scope.get("language")) or ("triton",),
        validator=str(raw.get("validator") or ""),
        source=str(raw.get("source") or ""),
        unsafe_values=_parse_unsafe(raw.get("unsafe_values"), f"{where}: rule {raw['id']}"),
        moves_together=_parse_together(raw.get("moves_together"), f"{where}: rule {raw['id']}"),
    )
    if rule.stage not in STAGE_NAMES:
        raise ValueError(f"{where}: rule {rule.id}: stage {rule.stage!r} is not one of {', '.join(STAGE_NAMES)}")
    if rule.hard and not rule.validator:
        raise ValueError(f"{where}: hard rule {rule.id} names no validator")
    if rule.triton:
        try:
            SpecifierSet(rule.triton)
        except InvalidSpecifier as e:
            raise ValueError(f"{where}: rule {rule.id}: bad Triton range {rule.triton!r} ({e})") from None
    return rule


@cache
def all_rules() -> tuple[Rule, ...]:
    folder = resources.files("evoforge.knowledge") / "rules"
    rules: list[Rule] = []
    seen: set[str] = set()
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".yaml"):
            continue
        for raw in safe_load(entry.read_text()).get("rules", []):
            rule = _parse_rule(raw, f"knowledge/rules/{entry.name}")
            if rule.id in seen:
                raise ValueError(f"knowledge/rules/{entry.name}: rule id {rule.id} is defined twice")
            seen.add(rule.id)
            rules.append(rule)
    return tuple(rules)


def installed_triton_version() -> str | None:
    """The Triton this process would compile with, read without importing it (importing Triton is slow)."""
    for dist in ("triton", "pytorch-triton-xpu", "triton-xpu", "pytorch-triton"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def rules(arch: str | None = None, stage: str | None = None, triton_version: str | None = None,
          language: str | None = "triton") -> list[Rule]:
    """The rules that hold for ``arch`` (all archs when None), ``stage``, ``triton_version`` (any version
    when None) and the kernel ``language`` (a rule without ``scope.language`` is Triton's; None: every language)."""
    if stage is not None and stage not in STAGE_NAMES:
        from evoforge.core import UsageError

        raise UsageError(f"--stage {stage}: unknown (choose from {', '.join(STAGE_NAMES)})")
    return [
        r
        for r in all_rules()
        if r.holds_for_arch(arch) and (stage is None or r.stage == stage) and r.holds_for_triton(triton_version)
        and (language is None or language in r.languages)
    ]


def moves_together(names: Iterable[str] | None = None, arch: str | None = None) -> list[tuple[str, ...]]:
    """Groups of parameters the rules of ``arch`` (all archs when None) say grow together (``moves_together``),
    those whose every name is in ``names`` (every group when None); the search counts such a joint move as one
    step."""
    have = None if names is None else set(names)
    out: list[tuple[str, ...]] = []
    for rule in rules(arch):
        for group in rule.moves_together:
            if (have is None or have.issuperset(group)) and group not in out:
                out.append(group)
    return out


def hard_rule_prompt(arch: str, triton_version: str | None = None, language: str = "triton") -> str:
    """The hard rules of ``arch`` for kernels in ``language`` as prompt text. The installed Triton decides
    versioned rules when no version is given, since that is the compiler the child will meet."""
    key = resolve_arch(arch)
    if language == "cute":
        chosen = [r for r in rules(key, language="cute") if r.hard]
        lines = [f"Hard rules for CuTe (CUDA C++) kernels on {key} (a kernel that breaks one is rejected before "
                 "it compiles):"]
        return "\n".join(lines + [f"- [{r.id}] {r.prompt}" for r in chosen])
    version = triton_version or installed_triton_version()
    chosen = [r for r in rules(key, triton_version=version) if r.hard]
    header = f"Hard rules for {key}" + (f" with Triton {version}" if version else "")
    lines = [header + " (a kernel that breaks one is rejected before it compiles):"]
    lines += [f"- [{r.id}] {r.prompt}" for r in chosen]
    return "\n".join(lines)
