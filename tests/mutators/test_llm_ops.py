"""The LLM operators end to end: prompt → real openai client → loopback server → reply → child (or reason)."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from evoforge.knowledge import STAGE_NAMES, Stage
from evoforge.mutators.base import Failure, MutationContext, MutationError, Mutator
from evoforge.mutators.llm_client import LLMError, OpenAIClient
from evoforge.mutators.llm_ops import (
    LLMCrossover,
    LLMGenerate,
    LLMOptimize,
    LLMRepair,
    LLMReplyError,
    LLMStageRewrite,
    parse_stage_names,
    preview,
)
from evoforge.mutators.prompt_builder import PromptBuilder

from evoforge import knowledge
from evoforge.core import Candidate, EvalResult, EvalStatus
from tests.fakellm import FakeLLMServer
from tests.mutators.conftest import run

REFERENCE = """import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y

def get_inputs():
    return [torch.randn(4097), torch.randn(4097)]

def get_init_inputs():
    return []
"""

BROKEN = """import torch
import triton
import triton.language as tl

SPACE = {"BLOCK": [256, 512, 1024]}
PARAMS = {"BLOCK": 256}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=msk)
    y = tl.load(y_ptr + offs, mask=msk)
    tl.store(out_ptr + offs, x + y, mask=msk)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, PARAMS["BLOCK"]),)](x, y, out, n, BLOCK=PARAMS["BLOCK"])
        return out
"""
ERROR = 'NameError("Cannot access global variable msk from within @jit\'ed function")\n  at add_kernel:4'
CORRECT = BROKEN.replace(
    "    x = tl.load(x_ptr + offs, mask=msk)", "    msk = offs < n\n    x = tl.load(x_ptr + offs, mask=msk)"
)
FASTER = CORRECT.replace('PARAMS = {"BLOCK": 256}', 'PARAMS = {"BLOCK": 1024}').replace(
    '"BLOCK": [256, 512, 1024]', '"BLOCK": [256, 512, 1024, 2048]'
)

RULE = "HARD RULE: BLOCK * num_warps must fit the register file."
HARDWARE = "H200: 132 SMs, 4.8 TB/s HBM3e"
FUSION_GUIDE = "Fuse the elementwise epilogue into the producer kernel."
ADVICE = "Keep the epilogue in registers: store once."


def fake_knowledge(analysis: list[str] | None = None) -> types.SimpleNamespace:
    """A stand-in for ``evoforge.knowledge`` with the functions the prompt builder reads, and known answers."""
    return types.SimpleNamespace(
        hard_rule_prompt=lambda arch, triton_version=None, language="triton": f"- {RULE} ({arch})",
        hardware_summary=lambda arch: HARDWARE,
        stages=lambda: [
            Stage("fusion", "Fuse kernels.", (FUSION_GUIDE,), (("unfused", "unfused_epilogue"),)),
            Stage("memory_access", "Coalesce.", ("Vectorize loads.",), ()),
        ],
        analyze=lambda source, arch=None: list(analysis or []),
        rules=lambda arch=None, stage=None, triton_version=None, language="triton": [
            types.SimpleNamespace(id="fuse-advice", hard=False, prompt=ADVICE, stage="fusion"),
            types.SimpleNamespace(id="fuse-hard", hard=True, prompt="told in the system prompt", stage="fusion"),
        ] if stage == "fusion" else [],
        cute_guide=lambda arch: f"CuTe guide for {arch}",
    )


def context(**changes: Any) -> MutationContext:
    base: dict[str, Any] = {"task_name": "add", "task_source": REFERENCE, "arch": "sm90", "seed": 1}
    base.update(changes)
    return MutationContext(**base)


def ok(runtime_ms: float = 0.02, speedup: float = 1.5) -> EvalResult:
    return EvalResult(
        EvalStatus.OK, runtime_ms=runtime_ms, ref_ms=runtime_ms * speedup, speedup=speedup, pct_of_floor=41.0
    )


def module(source: str) -> str:
    return f"Done.\n\n```python\n{source}```\n"


def user_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m["content"]) for m in messages if m["role"] == "user")


@pytest.fixture
def client(make_client: Callable[..., OpenAIClient]) -> OpenAIClient:
    return make_client()


@pytest.fixture
def builder() -> PromptBuilder:
    return PromptBuilder(knowledge=fake_knowledge())


# -- the shared contract ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [LLMStageRewrite, LLMRepair, LLMOptimize, LLMCrossover, LLMGenerate])
def test_every_operator_is_a_mutator_named_llm(cls: type, client: OpenAIClient) -> None:
    op = cls(client=client)
    assert isinstance(op, Mutator)
    assert op.name.startswith("llm-") and op.name == cls.name  # one name per operator, its registry key


# -- repair ------------------------------------------------------------------------------------------------------
def repair_by_reading_the_prompt(messages: list[dict[str, Any]]) -> str:
    """A model that reads the error it was sent and patches the kernel it was sent."""
    text = user_text(messages)
    assert "Cannot access global variable msk" in text
    assert "    x = tl.load(x_ptr + offs, mask=msk)\n" in text
    return (
        "`msk` is never defined.\n\n"
        "<<<<<<< SEARCH\n"
        "    x = tl.load(x_ptr + offs, mask=msk)\n"
        "=======\n"
        "    msk = offs < n\n"
        "    x = tl.load(x_ptr + offs, mask=msk)\n"
        ">>>>>>> REPLACE\n"
    )


def test_repair_patches_the_broken_kernel(
    fake_llm: FakeLLMServer, client: OpenAIClient, builder: PromptBuilder
) -> None:
    fake_llm.push(repair_by_reading_the_prompt)
    parent = Candidate.from_source(BROKEN, task="add")
    failed = EvalResult.failure(EvalStatus.COMPILE_ERROR, ERROR)
    op = LLMRepair(client=client, builder=builder)
    assert op.applicable(parent, failed)
    child = run(op.propose((parent,), context(parent_result=failed)))
    assert child.source == CORRECT
    assert child.parents == (parent.id,) and child.operator == "llm-repair" and child.task == "add"
    assert child.meta["repair_attempts"] == 1 and child.meta["reply_kind"] == "patches"
    assert child.meta["prompt"] == fake_llm.chat_requests[0].messages
    assert child.meta["reply"].startswith("`msk` is never defined.")
    assert child.meta["prompt_tokens"] > 0 and child.meta["model"] == "fake-model"
    assert child.params == {"BLOCK": 256} and child.space == {"BLOCK": [256, 512, 1024]}
    assert fake_llm.chat_requests[0].body["temperature"] == 0.2  # type: ignore[index]


def test_repair_prompt_carries_the_exact_error_and_asks_for_that_fault_only(
    client: OpenAIClient, builder: PromptBuilder
) -> None:
    parent = Candidate.from_source(BROKEN)
    messages = preview(
        LLMRepair(client=client, builder=builder),
        parent,
        context(parent_result=EvalResult.failure(EvalStatus.COMPILE_ERROR, ERROR)),
    )
    text = user_text(messages)
    assert ERROR in text and "`compile_error`" in text
    assert "Fix exactly this fault" in text and "<<<<<<< SEARCH" in text
    assert RULE in messages[0]["content"]


def test_repair_attempts_are_limited_per_lineage(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    op = LLMRepair(client=client, max_attempts=2)
    failed = EvalResult.failure(EvalStatus.INCORRECT, "max_abs_err 3.1 at shape (4097,)")
    tired = Candidate.from_source(BROKEN, meta={"repair_attempts": 2})
    assert not op.applicable(tired, failed)
    with pytest.raises(MutationError, match="already had 2 repair attempts"):
        run(op.propose((tired,), context(parent_result=failed)))
    assert fake_llm.chat_requests == []
    once = Candidate.from_source(BROKEN, meta={"repair_attempts": 1})
    fake_llm.push(module(CORRECT))
    child = run(op.propose((once,), context(parent_result=failed)))
    assert child.meta["repair_attempts"] == 2
    assert "1 repair attempt(s)" in user_text(child.meta["prompt"])
    assert not op.applicable(Candidate.from_source(CORRECT), ok())


def test_a_patch_that_does_not_apply_is_an_invalid_child_with_the_reason(
    fake_llm: FakeLLMServer, client: OpenAIClient
) -> None:
    fake_llm.push("<<<<<<< SEARCH\n    z = tl.load(z_ptr)\n=======\n    z = 0\n>>>>>>> REPLACE\n")
    failed = EvalResult.failure(EvalStatus.COMPILE_ERROR, ERROR)
    with pytest.raises(
        LLMReplyError, match=r"llm-repair: SEARCH/REPLACE block 1 of 1: SEARCH text not found"
    ) as info:
        run(LLMRepair(client=client).propose((Candidate.from_source(BROKEN),), context(parent_result=failed)))
    assert isinstance(info.value, MutationError)
    assert info.value.meta["reply"].startswith("<<<<<<< SEARCH") and info.value.meta["completion_tokens"] > 0


def test_garbage_reply_is_a_mutation_error_with_the_reason(
    fake_llm: FakeLLMServer, client: OpenAIClient
) -> None:
    fake_llm.push("As an AI model I think the kernel is fine!!! }{ ~~~")
    with pytest.raises(MutationError, match="no python code block and no SEARCH/REPLACE block"):
        run(
            LLMOptimize(client=client).propose((Candidate.from_source(CORRECT),), context(parent_result=ok()))
        )


def test_an_unchanged_kernel_is_refused(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    fake_llm.push(module(CORRECT))
    with pytest.raises(LLMReplyError, match="unchanged"):
        run(
            LLMOptimize(client=client).propose((Candidate.from_source(CORRECT),), context(parent_result=ok()))
        )


def test_an_endpoint_failure_is_not_a_mutation_error(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    fake_llm.push({"status": 401})
    with pytest.raises(LLMError) as info:
        run(LLMOptimize(client=client).propose((Candidate.from_source(CORRECT),), context()))
    assert not isinstance(info.value, MutationError)  # no invalid child: the campaign falls back instead


# -- optimize with delayed feedback ------------------------------------------------------------------------------
def test_performance_feedback_is_delayed_until_the_lineage_settles(client: OpenAIClient) -> None:
    parent = Candidate.from_source(CORRECT)
    op = LLMOptimize(client=client, feedback_after=2)
    early = user_text(preview(op, parent, context(parent_result=ok(), lineage_correct_steps=1)))
    late = user_text(preview(op, parent, context(parent_result=ok(), lineage_correct_steps=2)))
    assert "speedup" not in early and "runtime" not in early
    assert "runtime 0.02 ms, PyTorch reference 0.03 ms, speedup 1.5x, 41% of the hardware floor" in late
    eager = LLMOptimize(client=client, feedback_after=2, delay_feedback=False)
    assert "speedup 1.5x" in user_text(
        preview(eager, parent, context(parent_result=ok(), lineage_correct_steps=0))
    )


def test_optimize_returns_the_new_module(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    fake_llm.push(module(FASTER))
    parent = Candidate.from_source(CORRECT, task="add")
    child = run(
        LLMOptimize(client=client).propose((parent,), context(parent_result=ok(), lineage_correct_steps=5))
    )
    assert child.source == FASTER and child.params == {"BLOCK": 1024} and 2048 in child.space["BLOCK"]
    assert child.meta["feedback"] is True and child.stage == "optimize"


def test_inspirations_and_failures_enter_the_prompt(client: OpenAIClient) -> None:
    other = Candidate.from_source(FASTER, stage="fusion")
    failed = Candidate.from_source(BROKEN, stage="memory_access")
    ctx = context(
        parent_result=ok(),
        top=((other, ok(0.01, 3.0)), (Candidate.from_source(CORRECT), ok())),
        failures=(Failure(failed, EvalResult.failure(EvalStatus.INCORRECT, "max_abs_err 2.0 at (4097,)")),),
        lineage_correct_steps=0,
    )
    text = user_text(preview(LLMOptimize(client=client), Candidate.from_source(CORRECT), ctx))
    assert "### Kernel 1 (fusion): correct" in text and '"BLOCK": [256, 512, 1024, 2048]' in text
    # reference, parent, one inspiration (the parent itself is not repeated)
    assert text.count("```python\n") == 3
    assert "memory_access: incorrect: max_abs_err 2.0" in text


# -- stage rewrites ----------------------------------------------------------------------------------------------
def test_stage_rewrite_carries_rules_hardware_and_stage_guidance(
    fake_llm: FakeLLMServer, client: OpenAIClient
) -> None:
    builder = PromptBuilder(knowledge=fake_knowledge(analysis=["unfused_epilogue"]))
    op = LLMStageRewrite(client=client, builder=builder)
    fake_llm.push(module(FASTER))
    parent = Candidate.from_source(CORRECT, meta={"stages_done": ["algorithmic"]})
    child = run(op.propose((parent,), context(parent_result=ok())))
    assert child.stage == "fusion"  # analyze flagged an issue that fusion lists as its trigger
    assert child.meta["stages_done"] == ["algorithmic", "fusion"]
    messages = fake_llm.chat_requests[0].messages
    assert RULE in messages[0]["content"] and "(sm90)" in messages[0]["content"]
    text = user_text(messages)
    assert FUSION_GUIDE in text and HARDWARE in text and 'optimization stage "fusion"' in text
    assert "- unfused_epilogue" in text


def test_knowledge_off_leaves_rules_and_guidance_out(client: OpenAIClient) -> None:
    builder = PromptBuilder(knowledge=fake_knowledge())
    op = LLMStageRewrite(client=client, builder=builder, stage="fusion")
    messages = preview(op, Candidate.from_source(CORRECT), context(knowledge_enabled=False))
    everything = "".join(m["content"] for m in messages)
    assert RULE not in everything and HARDWARE not in everything and FUSION_GUIDE not in everything
    assert "Fuse kernels." in everything  # what the stage is, from the knowledge base, is still said
    assert op.name == "llm-stage"


def test_a_knowledge_base_gap_leaves_that_part_of_the_prompt_empty(client: OpenAIClient) -> None:
    op = LLMStageRewrite(client=client, builder=PromptBuilder(), seed=3)  # the real knowledge base
    messages = preview(op, Candidate.from_source(CORRECT), context(arch="xe9"))  # an arch it does not know
    assert "Hard rules" not in messages[0]["content"] and "optimization stage" in messages[1]["content"]
    assert "Target: xe9" in messages[1]["content"]


def test_stages_and_their_purposes_come_from_the_knowledge_base(client: OpenAIClient) -> None:
    builder = PromptBuilder()
    assert builder.stage_names() == list(STAGE_NAMES)
    fusion = next(s for s in knowledge.stages() if s.name == "fusion")
    op = LLMStageRewrite(client=client, builder=builder, stage="fusion")
    text = user_text(preview(op, Candidate.from_source(CORRECT), context(arch="nvidia-sm90")))
    assert fusion.purpose in text and fusion.guidance[0] in text


def test_a_cute_parent_is_told_how_to_write_cute(client: OpenAIClient) -> None:
    op = LLMOptimize(client=client, builder=PromptBuilder())
    cute = Candidate.from_source(CORRECT, language="cute")
    system = preview(op, cute, context(arch="nvidia-sm90"))[0]["content"]
    assert "CuTe C++" in system and "nvcc target sm_90a" in system and "wgmma" in system
    triton = preview(op, Candidate.from_source(CORRECT), context(arch="nvidia-sm90"))[0]["content"]
    assert "Writing CuTe" not in triton
    off = preview(op, cute, context(arch="nvidia-sm90", knowledge_enabled=False))[0]["content"]
    assert "Writing CuTe" not in off


def test_stage_choice_by_an_llm_analysis_call(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    op = LLMStageRewrite(client=client, builder=PromptBuilder(knowledge=fake_knowledge()), select="llm")
    fake_llm.push(
        {"reply": "Memory access\nfusion", "usage": {"prompt_tokens": 100, "completion_tokens": 5}},
        {"reply": module(FASTER), "usage": {"prompt_tokens": 300, "completion_tokens": 200}},
    )
    parent = Candidate.from_source(CORRECT)
    first = preview(op, parent, context())
    assert "which optimization stages are worth running" in user_text(first)
    child = run(op.propose((parent,), context()))
    assert child.stage == "memory_access"
    assert (child.meta["prompt_tokens"], child.meta["completion_tokens"]) == (400, 205)
    assert fake_llm.chat_requests[0].messages == first
    assert 'stage "memory_access"' in user_text(fake_llm.chat_requests[1].messages)


def test_stage_pick_is_seeded_and_skips_stages_done(client: OpenAIClient) -> None:
    op = LLMStageRewrite(client=client, builder=PromptBuilder(), seed=5)
    parent = Candidate.from_source(CORRECT, meta={"stages_done": [s for s in STAGE_NAMES if s != "autotuning"]})
    assert op.worth_running(parent, context(knowledge_enabled=False)) == ["autotuning"]
    fresh = Candidate.from_source(CORRECT)
    off = context(knowledge_enabled=False)  # no analysis: every stage is worth running
    picks = {op.pick(fresh, context(seed=s), op.worth_running(fresh, off)) for s in range(40)}
    assert len(picks) > 3 and picks <= set(STAGE_NAMES)
    stages = list(STAGE_NAMES)
    assert op.pick(fresh, context(seed=9), stages) == op.pick(fresh, context(seed=9), stages)


def test_stage_names_in_a_reply() -> None:
    assert parse_stage_names("1. Dtype fix\n2. persistent-kernel\nnot a stage", list(STAGE_NAMES)) == [
        "dtype_fix",
        "persistent_kernel",
    ]


# -- crossover ---------------------------------------------------------------------------------------------------
def test_crossover_of_two_correct_parents(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    a = Candidate.from_source(CORRECT, task="add")
    b = Candidate.from_source(FASTER, task="add")
    merged = FASTER.replace("BLOCK: tl.constexpr", "BLOCK: tl.constexpr, EVEN: tl.constexpr = False")
    fake_llm.push(module(merged))
    ctx = context(top=((b, ok(0.01, 3.0)), (a, ok())), parent_result=ok(), lineage_correct_steps=2)
    child = run(LLMCrossover(client=client).propose((a, b), ctx))
    assert child.parents == (a.id, b.id) and child.source == merged and child.stage == "crossover"
    text = user_text(fake_llm.chat_requests[0].messages)
    assert CORRECT in text and FASTER in text and "speedup 3x" in text


def test_crossover_takes_its_second_parent_from_top(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    a = Candidate.from_source(CORRECT)
    b = Candidate.from_source(FASTER)
    op = LLMCrossover(client=client)
    assert FASTER in user_text(preview(op, a, context(top=((a, ok()), (b, ok())))))
    with pytest.raises(MutationError, match="needs a second correct kernel"):
        preview(op, a, context(top=((a, ok()),)))
    with pytest.raises(MutationError, match="is not correct"):
        preview(op, (a, b), context(top=((b, EvalResult.failure(EvalStatus.INCORRECT, "x")),)))


# -- what the [llm] table and the knowledge base reach (each failed before issue K) -------------------------------
def test_the_llm_table_temperature_reaches_every_operator() -> None:
    """``[llm] temperature`` is what the endpoint is asked for; ``temperatures`` sets one operator's. Unset, each
    operator keeps its own (a repair samples cooler than a rewrite)."""
    from evoforge.mutators.llm_client import LLMConfig
    from evoforge.mutators.registry import OperatorSettings, build_operators

    from tests.scriptedllm import ScriptedLLM

    names = ["llm-stage", "llm-repair", "llm-optimize", "llm-crossover"]
    parent = Candidate.from_source(CORRECT, task="add")
    failed = EvalResult.failure(EvalStatus.COMPILE_ERROR, ERROR)

    def asked(llm: LLMConfig) -> dict[str, float | None]:
        client = ScriptedLLM(default=module(FASTER.replace("# ", "#") + "# rewritten\n"))
        ops = build_operators(names, OperatorSettings(arch="nvidia-sm90", llm=llm, client=client))
        other = Candidate.from_source(FASTER, task="add")
        for name, op in ops.items():
            result = failed if name == "llm-repair" else ok()
            run(op.propose((parent, other) if name == "llm-crossover" else (parent,), context(parent_result=result)))
        return {name: r["temperature"] for name, r in zip(names, client.requests, strict=True)}

    assert asked(LLMConfig(temperature=0.1)) == dict.fromkeys(names, 0.1)
    assert asked(LLMConfig(temperature=0.1, temperatures={"llm-repair": 0.0}))["llm-repair"] == 0.0
    own = asked(LLMConfig())
    assert own["llm-repair"] < own["llm-stage"] <= own["llm-optimize"]


def test_advice_rules_reach_the_stage_and_optimize_prompts() -> None:
    """Advice rules (told, never enforced) of the stage at hand are in its prompt; with the knowledge base off,
    none are. The real knowledge base: memory_access on an H200 carries its int64 and grouping advice."""
    parent = Candidate.from_source(knowledge.template_source("matmul"), task="mm")
    ctx = context(arch="nvidia-sm90", parent_result=ok())
    real = PromptBuilder()
    text = user_text(real.stage_rewrite(parent, ctx, "memory_access"))
    advice = [r for r in knowledge.rules("nvidia-sm90", stage="memory_access") if not r.hard]
    assert advice and all(f"[{r.id}]" in text for r in advice)
    assert "[swizzle-1d-grid]" not in text  # a hard rule is the system prompt's, not advice
    flagged = knowledge.analyze(parent.source, "nvidia-sm90")
    optimize = user_text(real.optimize(parent, ctx, feedback=False))
    for stage in flagged:
        for rule in (r for r in knowledge.rules("nvidia-sm90", stage=stage) if not r.hard):
            assert f"[{rule.id}]" in optimize
    assert "[int64-offsets]" not in user_text(real.stage_rewrite(parent, replace(ctx, knowledge_enabled=False),
                                                                 "memory_access"))
    fake = user_text(PromptBuilder(knowledge=fake_knowledge()).stage_rewrite(parent, ctx, "fusion"))
    assert ADVICE in fake and "told in the system prompt" not in fake


def test_the_stage_analysis_knows_the_target_arch() -> None:
    """An Intel dot kernel without a GRF mode calls for device_specific on Intel (and on no NVIDIA target): the
    stage pick and the analysis the model reads both see the sign."""
    source = knowledge.template_source("matmul")
    assert "grf_mode" not in source
    parent = Candidate.from_source(source, task="mm")
    sign = next(text for s in knowledge.stages() if s.name == "device_specific" for i, text in s.signs
                if i == "intel_without_grf_mode")
    op = LLMStageRewrite(client=None, stages=["device_specific", "algorithmic"])  # type: ignore[arg-type]
    intel = context(arch="intel-xe2", parent_result=ok())
    nvidia = context(arch="nvidia-sm90", parent_result=ok())
    assert op.worth_running(parent, intel) == ["device_specific"]
    assert "device_specific" not in PromptBuilder().found_issues(source)  # no arch: no device sign
    shown = user_text(PromptBuilder().stage_rewrite(parent, intel, "memory_access"))
    assert "## Static analysis found" in shown and "- device_specific" in shown
    assert "- device_specific" not in user_text(PromptBuilder().stage_rewrite(parent, nvidia, "memory_access"))
    assert sign  # the sign's text is the knowledge base's


def test_crossover_figures_wait_for_the_feedback_delay() -> None:
    from evoforge.mutators.llm_client import LLMConfig
    from evoforge.mutators.registry import OperatorSettings, build_operators

    from tests.scriptedllm import ScriptedLLM

    a = Candidate.from_source(CORRECT, task="add")
    b = Candidate.from_source(FASTER, task="add")
    top = ((b, ok(0.01, 3.0)), (a, ok(0.02, 1.5)))

    def crossover(llm: LLMConfig):
        settings = OperatorSettings(arch="nvidia-sm90", llm=llm, client=ScriptedLLM())
        return build_operators(["llm-crossover"], settings)["llm-crossover"]

    op = crossover(LLMConfig(feedback_after=2))
    early = user_text(preview(op, (a, b), context(top=top, parent_result=ok(), lineage_correct_steps=1)))
    late = user_text(preview(op, (a, b), context(top=top, parent_result=ok(), lineage_correct_steps=2)))
    assert "speedup" not in early and "runtime" not in early
    assert "speedup 3x" in late and "speedup 1.5x" in late
    eager = crossover(LLMConfig(delay_feedback=False))
    assert "speedup 3x" in user_text(preview(eager, (a, b), context(top=top, lineage_correct_steps=0)))


def test_a_strategy_names_the_stage_and_tells_the_model_what_became_of_earlier_attempts(
        client: OpenAIClient) -> None:
    op = LLMStageRewrite(client=client, builder=PromptBuilder(knowledge=fake_knowledge()))
    parent = Candidate.from_source(CORRECT, task="add")
    note = "A rewrite for this stage was correct but 1.2x slower (0.024 ms against 0.020 ms)."
    text = user_text(preview(op, parent, context(stage="memory_access", notes=(note,), parent_result=ok())))
    assert 'optimization stage "memory_access"' in text and note in text


def test_generate_writes_a_root_kernel_from_the_reference_alone(fake_llm: FakeLLMServer,
                                                                client: OpenAIClient) -> None:
    fake_llm.push(module(CORRECT))
    op = LLMGenerate(client=client)
    child = run(op.propose((), context()))
    assert child.source == CORRECT and child.parents == () and child.operator == "llm-generate"
    assert child.stage == "generate" and child.params == {"BLOCK": 256}
    system, user = fake_llm.chat_requests[0].messages
    assert "ModelNew" in system["content"] and "SPACE" in system["content"] and "Hard rules" in system["content"]
    assert REFERENCE in user["content"] and "write a first kernel" in user["content"]
    assert fake_llm.chat_requests[0].body["temperature"] == 0.8


def test_a_truncated_or_refused_reply_says_so(fake_llm: FakeLLMServer, client: OpenAIClient) -> None:
    parent = Candidate.from_source(CORRECT, task="add")
    half = CORRECT[: len(CORRECT) // 2]
    fake_llm.push({"reply": f"Here it is.\n\n```python\n{half}", "finish_reason": "length"},
                  "I'm sorry, but I can't help with that request.")
    op = LLMOptimize(client=client)
    with pytest.raises(LLMReplyError, match="cut at max_tokens") as cut:
        run(op.propose((parent,), context(parent_result=ok())))
    assert cut.value.meta["reply_problem"] == "truncated" and cut.value.meta["finish_reason"] == "length"
    with pytest.raises(LLMReplyError, match="I'm sorry, but I can't help") as refused:
        run(op.propose((parent,), context(parent_result=ok())))
    assert refused.value.meta["reply_problem"] == "unreadable"
