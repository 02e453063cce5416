"""LLM mutation operators and the prompts they send.

Five operators, each a ``Mutator`` (``propose(parents, context) -> Candidate``):

- ``LLMGenerate``: a first kernel written from the task's reference alone (CuTeGen's generate step), told the
  target's hardware facts, its hard rules and the module convention (``ModelNew``, ``SPACE``/``PARAMS``); each
  proposal is an independent sample, and a failure goes to the repair loop like any other child.
- ``LLMStageRewrite``: one of the nine Xe-Forge stages (algorithmic ... autotuning) applied to a kernel; which
  stage is worth running comes from ``knowledge.analyze`` or an LLM analysis call.
- ``LLMRepair``: CuTeGen's debug step: the failed parent's exact error goes back with the instruction to patch
  that fault only, as SEARCH/REPLACE blocks; at most ``max_attempts`` repairs in a row per lineage.
- ``LLMOptimize``: make a correct kernel faster; performance figures enter the prompt only once the lineage
  has been correct for ``feedback_after`` steps (CuTeGen's delayed feedback: numbers shown too early pull the
  model into re-tuning a structure that is not settled yet).
- ``LLMCrossover``: two correct parents, one kernel keeping the strength of each; their figures are held back
  like an optimization's.

The ``[llm]`` table's ``temperature`` (or ``temperatures``, per operator) overrides each operator's own.

A reply that cannot be read or applied raises ``LLMReplyError`` (a ``MutationError``): the campaign records an
``invalid`` child with that reason, and the error carries the prompt, the reply, the tokens spent and
``meta["reply_problem"]`` (``unchanged``: the model sent the kernel back, which the stage prompt asks for when
the stage does not apply; ``truncated``: cut at ``max_tokens``; ``unreadable``: no module or patch in it;
``patch``: a SEARCH/REPLACE block that does not apply). An
endpoint that fails (``LLMError``: unreachable, breaker open, budget spent) is not the child's fault and is not
turned into a MutationError: the campaign falls back to non-LLM operators.

Prompts are files in ``prompts/`` (``string.Template``: ``$name``), filled by ``PromptBuilder``
(``mutators/prompt_builder.py``) from the task's reference, the parent, and the knowledge base: the stages (names, purposes, guidance), the hardware facts, the
hard rules and, for a CuTe parent, the CuTe guide (with ``context.knowledge_enabled`` False only the stage names
and purposes remain), inspirations (``context.top``) and feedback. ``preview(operator, parent, context)`` shows
what would be sent. Each operator's ``name`` is its key in ``mutators/registry.py``.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evoforge.mutators.base import Completion, LLMClient, Message, MutationContext, MutationError
from evoforge.mutators.names import (
    CROSSOVER_STEP,
    GENERATE_STEP,
    LLM,
    LLM_CROSSOVER,
    LLM_GENERATE,
    LLM_OPTIMIZE,
    LLM_REPAIR,
    LLM_STAGE,
    OPTIMIZE_STEP,
    REPAIR_STEP,
)
from evoforge.mutators.patch import PatchError, Reply, ReplyError, parse_reply
from evoforge.mutators.prompt_builder import PromptBuilder, clip

from evoforge.core import Candidate, EvalResult, EvalStatus

log = logging.getLogger("evoforge.mutators.llm")

class LLMReplyError(MutationError):
    """The reply could not become a child. ``meta`` holds the prompt, the raw reply and the tokens spent, for
    the record of the ``invalid`` child."""

    def __init__(self, message: str, *, meta: Mapping[str, Any], problem: str = "unreadable") -> None:
        super().__init__(message)
        self.meta = {**meta, "reply_problem": problem}
        self.problem = problem


def _call_meta(
    messages: list[Message], completion: Completion, *, prior: Completion | None = None
) -> dict[str, Any]:
    calls = [c for c in (prior, completion) if c is not None]
    return {
        "model": completion.model,
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "cost_usd": sum(c.cost_usd for c in calls),
        "cached": all(c.cached for c in calls),
        "llm_latency_s": sum(c.latency_s for c in calls),
        "finish_reason": completion.finish_reason,
        "prompt": messages,
        "reply": completion.text,
    }


class _LLMOperator:
    """Shared plumbing: ask the client, parse the reply, build the child or raise ``LLMReplyError``."""

    name = LLM  # the family; each operator below names itself
    default_temperature: float | None = None

    def __init__(
        self,
        *,
        client: LLMClient,
        builder: PromptBuilder | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> None:
        self.client = client
        self.builder = builder or PromptBuilder()
        self.temperature = self.default_temperature if temperature is None else temperature
        self.max_tokens = max_tokens
        self.model = model

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, temperature={self.temperature!r})"

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool:
        return True

    def messages(self, parents: tuple[Candidate, ...], context: MutationContext) -> list[Message]:
        """The messages of the first request ``propose`` would send (no network)."""
        raise NotImplementedError

    async def _ask(
        self, messages: list[Message], context: MutationContext, *, purpose: str = ""
    ) -> Completion:
        return await self.client.complete(
            messages,
            model=self.model,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            cache_salt=f"{self.name}{purpose}/{context.seed}",
        )

    def _child(
        self,
        parents: Sequence[Candidate],
        messages: list[Message],
        completion: Completion,
        *,
        stage: str,
        prior: Completion | None = None,
        extra_meta: Mapping[str, Any] | None = None,
        lineage: bool = True,
        language: str | None = None,
    ) -> Candidate:
        """The child: in its first parent's language (``language``, the task's, when it has none)."""
        meta = {**_call_meta(messages, completion, prior=prior), **(extra_meta or {})}
        base = parents[0].source if parents else ""
        try:
            reply: Reply = parse_reply(completion.text)
            source = reply.resolve(base)
        except ReplyError as exc:
            problem = "patch" if isinstance(exc, PatchError) else "unreadable"
            why = f"{self.name}: {exc}"
            if completion.finish_reason == "length":
                problem = "truncated"
                why += f" (the reply was cut at max_tokens = {self.max_tokens or 'the [llm] max_tokens'}: raise it)"
            elif problem == "unreadable":
                why += f"; the reply began: {_quote(completion.text)}"
            raise LLMReplyError(why, meta=meta, problem=problem) from None
        meta["reply_kind"] = reply.kind
        if any(source.strip() == p.source.strip() for p in parents):
            raise LLMReplyError(f"{self.name}: the reply leaves the kernel unchanged", meta=meta, problem="unchanged")
        return Candidate.from_source(
            source,
            task=parents[0].task if parents else "",
            parents=tuple(p.id for p in parents) if lineage else (),
            operator=self.name,
            stage=stage,
            language=language or (parents[0].language if parents else None),
            meta=meta,
        )


class LLMStageRewrite(_LLMOperator):
    """Apply one optimization stage. ``stage`` fixes it (the child's ``stage`` says which ran; the operator keeps its
    one name); otherwise each proposal picks among ``stages`` (default: all nine) those worth running:
    ``select="analyze"`` asks ``knowledge.analyze`` (no extra call), ``select="llm"`` asks the model first
    (one short extra call). Stages already applied in the lineage (``meta["stages_done"]``) come last."""

    name = LLM_STAGE
    default_temperature = 0.7

    def __init__(
        self,
        *,
        client: LLMClient,
        stage: str | None = None,
        stages: Sequence[str] | None = None,
        select: str = "analyze",
        builder: PromptBuilder | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(
            client=client, builder=builder, temperature=temperature, max_tokens=max_tokens, model=model
        )
        if select not in ("analyze", "llm"):
            raise ValueError(f"LLMStageRewrite select must be 'analyze' or 'llm', got {select!r}")
        self.stage = stage
        self.stages = tuple(stages) if stages else None
        self.select = select
        self.seed = seed

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool:
        return parent_result is None or parent_result.ok

    def _allowed(self, context: MutationContext) -> list[str]:
        if self.stage:
            return [self.stage]
        if context.stage:  # the strategy asked for this one (the stages pipeline)
            return [context.stage]
        known = self.builder.stage_names()
        return [s for s in self.stages if s in known] if self.stages else known

    def worth_running(
        self, parent: Candidate, context: MutationContext, found: Sequence[str] = ()
    ) -> list[str]:
        """Stages flagged by the analysis (names or issues a stage lists as triggers), not yet done first."""
        allowed = self._allowed(context)
        if self.stage or context.stage:
            return allowed
        if not found and context.knowledge_enabled:
            found = self.builder.found_issues(parent.source, context.arch)
        triggers = {s: self.builder.stage_triggers(s) for s in allowed}
        flagged: list[str] = []
        for item in found:
            for s in allowed:
                hit = item.strip().lower() == s or item in triggers[s]
                if hit and s not in flagged:
                    flagged.append(s)
        done = set(parent.meta.get("stages_done", ()))
        fresh = [s for s in flagged if s not in done]
        return fresh or [s for s in allowed if s not in done] or flagged or allowed

    def pick(self, parent: Candidate, context: MutationContext, options: Sequence[str]) -> str:
        rng = random.Random(f"{self.seed}/{context.seed}/{parent.id}")
        return options[0] if len(options) == 1 else rng.choice(list(options))

    def messages(self, parents: tuple[Candidate, ...], context: MutationContext) -> list[Message]:
        parent = parents[0]
        if self.select == "llm" and not (self.stage or context.stage):
            return self.builder.analyze(parent, context, self._allowed(context))
        return self.builder.stage_rewrite(
            parent, context, self.pick(parent, context, self.worth_running(parent, context))
        )

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate:
        parent = parents[0]
        prior: Completion | None = None
        if self.select == "llm" and not (self.stage or context.stage):
            allowed = self._allowed(context)
            analysis = self.builder.analyze(parent, context, allowed)
            prior = await self.client.complete(
                analysis, model=self.model, temperature=0.0, max_tokens=200, cache_salt=f"{self.name}/analyze"
            )
            named = parse_stage_names(prior.text, allowed)
            done = set(parent.meta.get("stages_done", ()))
            options = [s for s in named if s not in done] or self.worth_running(parent, context)
            stage = options[0]
        else:
            stage = self.pick(parent, context, self.worth_running(parent, context))
        messages = self.builder.stage_rewrite(parent, context, stage)
        completion = await self._ask(messages, context)
        done = [*parent.meta.get("stages_done", ()), stage]
        return self._child(
            (parent,), messages, completion, stage=stage, prior=prior, extra_meta={"stages_done": done}
        )


def parse_stage_names(text: str, allowed: Sequence[str]) -> list[str]:
    """Stage names in the order the reply gives them (``dtype fix`` and ``dtype-fix`` read as ``dtype_fix``)."""
    found: list[tuple[int, str]] = []
    norm = re.sub(r"[\s\-]+", "_", text.lower())
    for stage in allowed:
        m = re.search(rf"(?<![a-z]){re.escape(stage)}(?![a-z])", norm)
        if m:
            found.append((m.start(), stage))
    return [s for _, s in sorted(found)]


class LLMRepair(_LLMOperator):
    """Send the failed parent's exact error back and ask for a patch of that fault only (SEARCH/REPLACE
    blocks; a whole module is accepted too). A lineage gets at most ``max_attempts`` repairs in a row, counted
    in ``meta["repair_attempts"]`` (a child of any other operator starts again at 0)."""

    name = LLM_REPAIR
    default_temperature = 0.2

    def __init__(
        self,
        *,
        client: LLMClient,
        max_attempts: int = 3,
        builder: PromptBuilder | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(
            client=client, builder=builder, temperature=temperature, max_tokens=max_tokens, model=model
        )
        self.max_attempts = max_attempts

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool:
        return (
            parent_result is not None
            and parent_result.status.is_failure
            and int(parent.meta.get("repair_attempts", 0)) < self.max_attempts
        )

    def messages(self, parents: tuple[Candidate, ...], context: MutationContext) -> list[Message]:
        return self.builder.repair(parents[0], context)

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate:
        parent = parents[0]
        result = context.parent_result
        if result is None or result.status is EvalStatus.OK:
            raise MutationError(f"{self.name}: the parent has no failure to repair")
        attempts = int(parent.meta.get("repair_attempts", 0))
        if attempts >= self.max_attempts:
            raise MutationError(
                f"{self.name}: lineage already had {attempts} repair attempts (max {self.max_attempts})"
            )
        messages = self.messages(parents, context)
        completion = await self._ask(messages, context)
        return self._child(
            (parent,),
            messages,
            completion,
            stage=REPAIR_STEP,
            extra_meta={"repair_attempts": attempts + 1, "repaired_status": str(result.status),
                        "repair_error": clip(result.message.strip(), 1000)},
        )


class _DelayedFeedback(_LLMOperator):
    """An operator whose prompt carries performance figures only once the parent's lineage has settled:
    ``feedback_after`` correct steps (``delay_feedback=False`` shows them always)."""

    def __init__(
        self,
        *,
        client: LLMClient,
        feedback_after: int = 2,
        delay_feedback: bool = True,
        builder: PromptBuilder | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(
            client=client, builder=builder, temperature=temperature, max_tokens=max_tokens, model=model
        )
        self.feedback_after = feedback_after
        self.delay_feedback = delay_feedback

    def shows_feedback(self, context: MutationContext) -> bool:
        return not self.delay_feedback or context.lineage_correct_steps >= self.feedback_after


class LLMOptimize(_DelayedFeedback):
    """Make a correct kernel faster. Performance figures (runtime, speedup, % of floor, and those of the
    inspirations) are shown only once ``context.lineage_correct_steps >= feedback_after``;
    ``delay_feedback=False`` shows them always."""

    name = LLM_OPTIMIZE
    default_temperature = 0.8

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool:
        return parent_result is None or parent_result.ok

    def messages(self, parents: tuple[Candidate, ...], context: MutationContext) -> list[Message]:
        return self.builder.optimize(parents[0], context, feedback=self.shows_feedback(context))

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate:
        messages = self.messages(parents, context)
        completion = await self._ask(messages, context)
        return self._child(
            (parents[0],),
            messages,
            completion,
            stage=OPTIMIZE_STEP,
            extra_meta={"feedback": self.shows_feedback(context)},
        )


class LLMCrossover(_DelayedFeedback):
    """Two correct parents → one kernel keeping the strength of each. Given one parent, the second is the best
    kernel of another structure in ``context.top``."""

    name = LLM_CROSSOVER
    default_temperature = 0.7

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool:
        return parent_result is None or parent_result.ok

    def _pair(
        self, parents: tuple[Candidate, ...], context: MutationContext
    ) -> tuple[Candidate, Candidate, tuple[EvalResult | None, EvalResult | None]]:
        if not parents:
            raise MutationError(f"{self.name}: no parent given")
        results = {c.id: r for c, r in context.top}
        a = parents[0]
        if len(parents) >= 2:
            b = parents[1]
        else:
            others = [c for c, r in context.top if r.ok and c.structure_id != a.structure_id]
            if not others:
                raise MutationError(
                    f"{self.name}: needs a second correct kernel of another structure; none in top"
                )
            b = others[0]
        if a.structure_id == b.structure_id:
            raise MutationError(f"{self.name}: both parents have the same source; nothing to combine")
        pair = (results.get(a.id) or context.parent_result, results.get(b.id))
        for p, r in zip((a, b), pair, strict=True):
            if r is not None and not r.ok:
                raise MutationError(f"{self.name}: parent {p.id} is not correct ({r.status})")
        return a, b, pair

    def messages(self, parents: tuple[Candidate, ...], context: MutationContext) -> list[Message]:
        a, b, results = self._pair(parents, context)
        return self.builder.crossover(a, b, context, results, feedback=self.shows_feedback(context))

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate:
        messages = self.messages(parents, context)
        completion = await self._ask(messages, context)
        return self._child(self._pair(parents, context)[:2], messages, completion, stage=CROSSOVER_STEP,
                           extra_meta={"feedback": self.shows_feedback(context)})


class LLMGenerate(_LLMOperator):
    """Write a first kernel from the task's reference (CuTeGen's generate step; the seed of a task no template
    serves). Each proposal is an independent sample: the cache salt holds the context's seed, so several
    generations for one task are several requests. The child is a root of the lineage (it descends from no
    kernel: ``parents`` is empty); a parent given is only what the reply must differ from. The kernel language
    asked for is the task's (``context.language``; ``cute``: the system prompt then carries the CuTe guide and
    CuTe's hard rules), unless the operator was built for one (``language``)."""

    name = LLM_GENERATE
    default_temperature = 0.8

    def __init__(
        self,
        *,
        client: LLMClient,
        language: str | None = None,
        builder: PromptBuilder | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(
            client=client, builder=builder, temperature=temperature, max_tokens=max_tokens, model=model
        )
        self.language = language

    def applicable(self, parent: Candidate, parent_result: EvalResult | None) -> bool:
        return True  # it reads the reference, not the parent

    def messages(self, parents: tuple[Candidate, ...], context: MutationContext) -> list[Message]:
        return self.builder.generate(context, language=self.language or context.language)

    async def propose(self, parents: tuple[Candidate, ...], context: MutationContext) -> Candidate:
        messages = self.messages(parents, context)
        completion = await self._ask(messages, context)
        return self._child(parents, messages, completion, stage=GENERATE_STEP, lineage=False,
                           extra_meta={"generated": True}, language=self.language or context.language)


def _quote(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat if len(flat) <= limit else flat[:limit] + "...")


def preview(
    operator: _LLMOperator, parent: Candidate | tuple[Candidate, ...], context: MutationContext
) -> list[Message]:
    """The messages the operator's first request would carry for this parent and context; nothing is sent."""
    parents = parent if isinstance(parent, tuple) else (parent,)
    return operator.messages(parents, context)


__all__ = [
    "LLMCrossover",
    "LLMGenerate",
    "LLMOptimize",
    "LLMRepair",
    "LLMReplyError",
    "LLMStageRewrite",
    "parse_stage_names",
    "preview",
]
