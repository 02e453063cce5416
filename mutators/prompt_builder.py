"""The prompts the LLM operators send (``mutators/llm_ops.py``), built from files in ``prompts/``
(``string.Template``: ``$name``) by ``PromptBuilder`` from the task's reference, the parent and the knowledge base: the
stages (names, purposes, guidance), the hardware facts, the hard rules and, for a CuTe parent, the CuTe guide (with
``context.knowledge_enabled`` False only the stage names and purposes remain), inspirations (``context.top``) and
feedback (``performance_line``)."""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from evoforge.mutators.base import Message, MutationContext

from evoforge import knowledge as kb
from evoforge.core import Candidate, EvalResult

log = logging.getLogger("evoforge.mutators.llm")

PROMPTS_DIR = Path(__file__).with_name("prompts")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, Sequence):
        return "\n".join(f"- {str(v).strip()}" for v in value)
    return str(value).strip()


# -- prompts -----------------------------------------------------------------------------------------------------
@cache
def _template(path: Path) -> string.Template:
    return string.Template(path.read_text())


def _nl(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _section(title: str, body: str) -> str:
    body = body.strip("\n")
    return f"\n## {title}\n\n{body}\n" if body.strip() else ""


def clip(text: str, limit: int) -> str:
    """Keep the head and the tail (a compile log's cause is often at the end)."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-tail:]}"


def _fmt(value: float | None, pattern: str) -> str | None:
    return None if value is None else pattern.format(value)


def performance_line(result: EvalResult | None) -> str:
    if result is None or not result.ok:
        return ""
    parts = [
        _fmt(result.runtime_ms, "runtime {:.4g} ms"),
        _fmt(result.ref_ms, "PyTorch reference {:.4g} ms"),
        _fmt(result.speedup, "speedup {:.3g}x"),
        _fmt(result.pct_of_floor, "{:.0f}% of the hardware floor"),
    ]
    if result.floor_ms is not None:
        parts.append(f"floor {result.floor_ms:.4g} ms")
    return ", ".join(p for p in parts if p)


class PromptBuilder:
    """Fills the prompt files from the knowledge base, the one source of the stages, the hard rules, the hardware
    facts and the CuTe guide. ``knowledge`` stands in for ``evoforge.knowledge`` (a test's double with the same
    functions). Limits keep prompts within a model's context."""

    def __init__(
        self,
        *,
        knowledge: Any = None,
        prompts_dir: str | Path | None = None,
        triton_version: str | None = None,
        max_inspirations: int = 2,
        max_failures: int = 3,
        max_error_chars: int = 6000,
        max_failure_chars: int = 400,
    ) -> None:
        self.knowledge = kb if knowledge is None else knowledge
        self.triton_version = triton_version
        self.prompts_dir = Path(prompts_dir) if prompts_dir else PROMPTS_DIR
        self.max_inspirations = max_inspirations
        self.max_failures = max_failures
        self.max_error_chars = max_error_chars
        self.max_failure_chars = max_failure_chars

    # -- the knowledge base ----------------------------------------------------------------------------------------
    def _ask(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """A knowledge-base answer; a gap (an arch it does not know, a file it cannot read) leaves that part of
        the prompt empty instead of stopping the mutation."""
        try:
            return getattr(self.knowledge, function)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001  (logged; the prompt goes out without that part)
            log.warning("knowledge.%s failed (%s: %s); prompt part left empty", function, type(exc).__name__, exc)
            return None

    def stages(self) -> dict[str, Any]:
        """The stages by name, in order (``knowledge.Stage``: purpose, guidance, triggers)."""
        return {stage.name: stage for stage in self._ask("stages") or ()}

    def stage_names(self) -> list[str]:
        return list(self.stages())

    def stage_purpose(self, stage: str) -> str:
        info = self.stages().get(stage)
        return _text(info.purpose) if info is not None else ""

    def stage_guidance(self, stage: str, language: str = "triton") -> str:
        info = self.stages().get(stage)
        if info is None:
            return ""
        guidance = info.guidance_for(language) if hasattr(info, "guidance_for") else info.guidance
        return _text(guidance)

    def stage_triggers(self, stage: str) -> tuple[str, ...]:
        info = self.stages().get(stage)
        return tuple(info.triggers) if info is not None else ()

    def found_issues(self, source: str, arch: str | None = None) -> list[str]:
        """The stages the static analysis flags for ``source`` on ``arch`` (a sign such as an Intel dot kernel
        without a GRF mode exists only for its target)."""
        found = self._ask("analyze", source, arch or None)
        return [str(x) for x in found] if isinstance(found, Sequence) and not isinstance(found, str) else []

    def advice(self, context: MutationContext, stages: Sequence[str], language: str = "triton") -> str:
        """The knowledge base's advice rules (told, not enforced) for ``stages`` on the target and the kernel
        ``language``, as a section."""
        if not context.knowledge_enabled or not stages:
            return ""
        lines: list[str] = []
        for stage in dict.fromkeys(stages):
            for rule in self._ask("rules", context.arch or None, stage, self.triton_version, language) or ():
                if not getattr(rule, "hard", True):
                    lines.append(f"- [{rule.id}] {_text(rule.prompt)}")
        return _section("Advice from the knowledge base", "\n".join(lines))

    def notes(self, context: MutationContext) -> str:
        """Findings the strategy wants the model told: what became of earlier attempts at this step."""
        body = "\n".join(f"- {_text(n)}" for n in context.notes if _text(n))
        return _section("Earlier attempts at this step", body)

    # -- pieces --------------------------------------------------------------------------------------------------
    def render(self, name: str, **values: Any) -> str:
        """Fill ``prompts/<name>.md``; a placeholder without a value is an error (a template and its builder
        must agree)."""
        return _template(self.prompts_dir / f"{name}.md").substitute(**values)

    def system(self, parent: Candidate, context: MutationContext) -> str:
        rules = guide = ""
        if context.knowledge_enabled:
            rules = _text(self._ask("hard_rule_prompt", context.arch, triton_version=self.triton_version,
                                    language=parent.language))
            if parent.language == "cute":
                guide = _text(self._ask("cute_guide", context.arch))
        return (
            self.render(
                "system",
                language="CuTe C++" if parent.language == "cute" else "Triton",
                rules=_section(f"Hard rules of the target ({context.arch})", rules),
                guide=f"\n{guide}\n" if guide else "",
            ).strip()
            + "\n"
        )

    def hardware(self, context: MutationContext) -> str:
        lines = [f"Target: {context.arch}"] if context.arch else []
        if context.knowledge_enabled:
            summary = _text(self._ask("hardware_summary", context.arch))
            if summary:
                lines.append(summary)
            lines += [f"- {k}: {v}" for k, v in context.hardware.items()]
        return _section("Target hardware", "\n".join(lines))

    def params(self, parent: Candidate) -> str:
        if not parent.params and not parent.space:
            return ""
        body = f"PARAMS = {json.dumps(parent.params, sort_keys=True, default=str)}\n"
        if parent.space:
            body += f"SPACE = {json.dumps(parent.space, sort_keys=True, default=str)}\n"
        return _section("Parameter values of the current kernel (the evaluator injects PARAMS)", body)

    def analysis(self, parent: Candidate, context: MutationContext) -> str:
        if not context.knowledge_enabled:
            return ""
        found = self.found_issues(parent.source, context.arch)
        return _section("Static analysis found", "\n".join(f"- {f}" for f in found))

    def inspirations(
        self,
        parent: Candidate,
        context: MutationContext,
        *,
        with_performance: bool,
        exclude: Sequence[str] = (),
    ) -> str:
        """Top kernels of other structures (best first, then the most different), each with its figures when
        performance feedback is on."""
        seen = {parent.structure_id, *exclude}
        chosen: list[tuple[Candidate, EvalResult]] = []
        for cand, result in context.top:
            if cand.structure_id in seen or not result.ok:
                continue
            seen.add(cand.structure_id)
            chosen.append((cand, result))
            if len(chosen) >= self.max_inspirations:
                break
        parts = []
        for i, (cand, result) in enumerate(chosen, 1):
            note = performance_line(result) if with_performance else "correct"
            label = f" ({cand.stage})" if cand.stage else ""
            parts.append(f"### Kernel {i}{label}: {note}\n\n```python\n{_nl(cand.source)}```")
        return _section("Other correct kernels, for inspiration", "\n\n".join(parts))

    def failures(self, context: MutationContext) -> str:
        items = []
        for failure in context.failures[: self.max_failures]:
            message = clip(failure.result.message.strip(), self.max_failure_chars).replace("\n", "\n  ")
            what = failure.candidate.stage or failure.candidate.operator
            items.append(f"- {what}: {failure.result.status}: {message}")
        return _section("Recent attempts that failed (avoid repeating them)", "\n".join(items))

    def _messages(self, parent: Candidate, context: MutationContext, user: str) -> list[Message]:
        return [
            {"role": "system", "content": self.system(parent, context)},
            {"role": "user", "content": user},
        ]

    # -- one prompt per operator ---------------------------------------------------------------------------------
    def stage_rewrite(self, parent: Candidate, context: MutationContext, stage: str) -> list[Message]:
        user = self.render(
            "stage_rewrite",
            task_name=context.task_name,
            stage=stage,
            stage_purpose=self.stage_purpose(stage),  # what the stage is: told even with the knowledge base off
            stage_guidance=_section("Guidance for this stage", self.stage_guidance(stage, parent.language))
            if context.knowledge_enabled
            else "",
            reference=_nl(context.task_source),
            parent=_nl(parent.source),
            parent_note="",
            params=self.params(parent),
            hardware=self.hardware(context),
            analysis=self.analysis(parent, context),
            advice=self.advice(context, [stage], parent.language),
            inspirations=self.inspirations(parent, context, with_performance=False),
            failures=self.failures(context),
            notes=self.notes(context),
        )
        return self._messages(parent, context, user)

    def analyze(self, parent: Candidate, context: MutationContext, stages: Sequence[str]) -> list[Message]:
        listing = "\n".join(f"- {s}: {self.stage_purpose(s)}" for s in stages)
        user = self.render(
            "analyze",
            task_name=context.task_name,
            reference=_nl(context.task_source),
            parent=_nl(parent.source),
            hardware=self.hardware(context),
            analysis=self.analysis(parent, context),
            stage_list=listing + "\n",
        )
        return self._messages(parent, context, user)

    def repair(self, parent: Candidate, context: MutationContext) -> list[Message]:
        result = context.parent_result
        error = result.message.strip() if result is not None and result.message.strip() else "(no message)"
        status = str(result.status) if result is not None else "unknown"
        previous = ""
        attempts = int(parent.meta.get("repair_attempts", 0))
        if attempts:
            previous = _section(
                "Earlier repairs",
                f"This kernel is already the result of {attempts} repair attempt(s) that did not pass; "
                "the error above is the one left now.",
            )
        user = self.render(
            "repair",
            task_name=context.task_name,
            status=status,
            error=_nl(clip(error, self.max_error_chars)),
            parent=_nl(parent.source),
            reference=_nl(context.task_source),
            hardware=self.hardware(context),
            previous=previous,
            notes=self.notes(context),
        )
        return self._messages(parent, context, user)

    def optimize(self, parent: Candidate, context: MutationContext, *, feedback: bool) -> list[Message]:
        perf = performance_line(context.parent_result) if feedback else ""
        guidance = ""
        flagged: list[str] = []
        if context.knowledge_enabled:
            flagged = self.found_issues(parent.source, context.arch)
            guidance = "\n".join(f"- {f}" for f in flagged)
        user = self.render(
            "optimize",
            task_name=context.task_name,
            reference=_nl(context.task_source),
            parent=_nl(parent.source),
            params=self.params(parent),
            feedback=_section("Measured performance of the current kernel", perf),
            hardware=self.hardware(context),
            guidance=_section("Static analysis found", guidance),
            advice=self.advice(context, flagged, parent.language),
            inspirations=self.inspirations(parent, context, with_performance=feedback),
            failures=self.failures(context),
            notes=self.notes(context),
        )
        return self._messages(parent, context, user)

    def crossover(
        self,
        a: Candidate,
        b: Candidate,
        context: MutationContext,
        results: tuple[EvalResult | None, EvalResult | None] = (None, None),
        *,
        feedback: bool = True,
    ) -> list[Message]:
        notes = [performance_line(r) if feedback else "" for r in results]
        user = self.render(
            "crossover",
            task_name=context.task_name,
            reference=_nl(context.task_source),
            parent_a=_nl(a.source),
            parent_b=_nl(b.source),
            note_a=f"{notes[0]}\n" if notes[0] else "",
            note_b=f"{notes[1]}\n" if notes[1] else "",
            hardware=self.hardware(context),
        )
        return self._messages(a, context, user)


    def generate(self, context: MutationContext, *, language: str = "triton") -> list[Message]:
        """A first kernel from the reference alone: the system prompt holds the convention and the hard rules."""
        stub = Candidate(source="", task=context.task_name, language=language)
        advice = self.advice(context, self.stage_names(), language) if context.knowledge_enabled else ""
        user = self.render(
            "generate",
            task_name=context.task_name,
            language="CuTe C++" if language == "cute" else "Triton",
            reference=_nl(context.task_source),
            hardware=self.hardware(context),
            advice=advice,
            notes=self.notes(context),
        )
        return self._messages(stub, context, user)


# -- operators -----------------------------------------------------------------------------------------------------


__all__ = ["PROMPTS_DIR", "PromptBuilder", "clip", "performance_line"]
