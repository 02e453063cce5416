"""A CuTe campaign's prompts speak CuTe: every LLM operator, built and driven the way the campaign builds and
drives it, against the scripted model on loopback; and CuTe's hard rules from the knowledge base.

No Ray, no GPU and no nvcc: the campaign's own operator set-up and proposal path (``Campaign._make``) run,
and the evaluations that would follow do not.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from evoforge.mutators.llm_client import LLMConfig

from evoforge import knowledge
from evoforge.config import CampaignConfig, TaskConfig
from evoforge.core import Candidate, EvalResult, EvalStatus
from tests.conftest import REPO
from tests.fakellm import FakeLLMServer
from tests.mutators.conftest import KEY_ENV

TEMPLATES = REPO / "knowledge" / "templates"
GEMM = (TEMPLATES / "cute_gemm.py").read_text()
BF16 = (TEMPLATES / "cute_gemm_bf16_sm90.py").read_text()
LLM_OPERATORS = ["llm-stage", "llm-optimize", "llm-repair", "llm-crossover", "llm-generate"]


def _cute_replies():
    """A scripted model that answers every request with a new CuTe module (the GEMM with a mark of its own)."""
    counter = itertools.count()

    def reply(messages):
        return f"Here it is.\n\n```python\n{GEMM}\n# variant {next(counter)}\n```\n"

    return reply


def _campaign(tmp_path, server, task: TaskConfig):
    from evoforge.backends.registry import available_backend

    from evoforge.campaign import Campaign
    from evoforge.task_state import TaskState

    config = CampaignConfig(name="cute-llm", out=str(tmp_path / "run"), tasks=[task], backend="interpreter",
                            arch="nvidia-sm90", operators=list(LLM_OPERATORS),
                            llm=LLMConfig(base_url=server.url, model="fake-model", api_key_env=KEY_ENV,
                                          timeout_s=5.0, max_retries=0, cache_dir=str(tmp_path / "llm-cache")))
    campaign = Campaign(config, progress=False)
    campaign.backend = available_backend("interpreter")
    campaign.mutators = campaign._make_mutators(config.arch)
    (the_task, seed), = campaign._load_tasks()
    state = TaskState(task=the_task, strategy=None, seed=seed)
    campaign.tasks[the_task.name] = state
    return campaign, state


def _assert_cute_system(content: str) -> None:
    assert "You write CuTe C++ kernels" in content and "You write Triton kernels" not in content
    assert "Hard rules for CuTe (CUDA C++) kernels on nvidia-sm90" in content
    assert "[cute-sm90-gemm-config]" in content and "[cute-no-torch-headers]" in content
    assert "[dot-min-k]" not in content and "tl.dot" not in content.split("# Writing CuTe")[0]  # no Triton rule
    assert "Writing CuTe (CUDA C++) kernels for nvidia-sm90 (nvcc target sm_90a)" in content
    assert "wgmma" in content and "TMA" in content


def test_every_llm_operator_of_a_cute_campaign_prompts_in_cute(tmp_path, monkeypatch):
    from evoforge.search.base import Proposal

    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeLLMServer(models=("fake-model",), default=_cute_replies()) as server:
        campaign, state = _campaign(tmp_path, server, TaskConfig(spec="L1/1", language="cute"))
        seed = state.seed
        assert seed.language == "cute"
        ok = EvalResult(EvalStatus.OK, runtime_ms=1.0, ref_ms=0.5, speedup=0.5)
        broken = Candidate.from_source(seed.source.replace("clear(tCrC);", "clear(tCrC) oops;"), task=seed.task)
        other = Candidate.from_source(BF16, task=seed.task)
        state.results[seed.id] = ok
        state.results[other.id] = ok
        state.results[broken.id] = EvalResult.failure(
            EvalStatus.COMPILE_ERROR, "CUDA_SRC.cu(80): error: expected a \";\"\n(line N of CUDA_SRC.cu is line N+15 "
            "of the candidate module)")
        state.history += [(seed, ok), (other, ok)]
        proposals = {"llm-stage": Proposal("llm-stage", parents=(seed,), stage="device_specific"),
                     "llm-optimize": Proposal("llm-optimize", parents=(seed,)),
                     "llm-repair": Proposal("llm-repair", parents=(broken,)),
                     "llm-crossover": Proposal("llm-crossover", parents=(seed, other)),
                     "llm-generate": Proposal("llm-generate", parents=())}
        children = {}
        for name in LLM_OPERATORS:
            before = len(server.chat_requests)
            children[name] = asyncio.run(campaign.maker.make(state, proposals[name]))
            asked = server.chat_requests[before:]
            assert asked, f"{name} sent no request"
            for request in asked:
                system = next(m["content"] for m in request.messages if m["role"] == "system")
                _assert_cute_system(system)
        for name, child in children.items():
            assert isinstance(child, Candidate), f"{name}: {child}"
            assert child.language == "cute" and child.operator == name
        stage_prompt = server.chat_requests[0].messages[-1]["content"]
        assert "Hopper - TMA + wgmma in a warp-specialised pipeline" in stage_prompt  # the stage's CuTe guidance
        assert "[cute-tma-wgmma-on-hopper]" in stage_prompt  # and CuTe's advice, not Triton's
        assert "tl.make_tensor_descriptor" not in stage_prompt
        repair = [r for r in server.chat_requests if "expected a" in r.messages[-1]["content"]]
        assert repair and "line N+15 of the candidate module" in repair[0].messages[-1]["content"]


def test_generating_a_cute_kernel_from_the_reference_asks_for_cute(tmp_path, monkeypatch):
    from evoforge.search.base import Proposal

    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeLLMServer(models=("fake-model",), default=_cute_replies()) as server:
        # no CuTe template serves softmax: the reference is the start, and the first kernel is generated
        campaign, state = _campaign(tmp_path, server, TaskConfig(spec="L1/23", language="cute"))
        assert state.seed_is_reference and state.seed.language == "cute"
        child = asyncio.run(campaign.maker.make(state, Proposal("llm-generate", parents=())))
        assert isinstance(child, Candidate) and child.language == "cute"
        system, user = server.chat_requests[-1].messages
        _assert_cute_system(system["content"])
        assert "CuTe C++" in user["content"]


def test_cute_hard_rules_are_cute_only():
    cute_text = knowledge.hard_rule_prompt("nvidia-sm90", language="cute")
    assert "cute-sm90-gemm-config" in cute_text and "dot-min-k" not in cute_text
    triton_text = knowledge.hard_rule_prompt("nvidia-sm90", triton_version="3.6.0")
    assert "cute-" not in triton_text and "dot-min-k" in triton_text
    on_ampere = knowledge.hard_rule_prompt("nvidia-sm80", language="cute")
    assert "cute-sm90-gemm-config" not in on_ampere and "cute-hopper-features-need-sm90" in on_ampere


@pytest.fixture(scope="module")
def hopper_gemm_space() -> tuple[int, int]:
    """(legal configurations, all configurations) of the bf16 GEMM seed's SPACE on the H200: the same for every case
    below, so enumerated once (seconds each time)."""
    seed = Candidate.from_source(BF16)
    # the tile walk (SWIZZLE, RASTER) is legal everywhere: left out, the enumeration stays small
    space = {k: v for k, v in seed.space.items() if k not in ("SWIZZLE", "RASTER")}
    legal_points = knowledge.legal_configs(space, "nvidia-sm90", source=BF16)
    total = 1
    for values in space.values():
        total *= len(values)
    return len(legal_points), total


@pytest.mark.parametrize(("params", "needle"), [
    ({"TILE_M": 64, "SCHEDULE": "cooperative"}, "multiple of 128"),
    ({"TILE_M": 256, "TILE_N": 256, "SCHEDULE": "cooperative"}, "256 fp32 accumulators"),
    ({"TILE_M": 128, "TILE_N": 256, "TILE_K": 128, "STAGES": 5}, "lower STAGES or the tile"),
    ({"TILES": "persistent", "SPLITS": 8}, "act only with TILES streamk"),  # the same kernel: a build wasted
    ({"TILES": "persistent", "REDUCTION": "nondeterministic"}, "act only with TILES streamk"),
])
def test_the_hopper_gemm_space_loses_what_cannot_build_or_spills(params, needle, hopper_gemm_space):
    seed = Candidate.from_source(BF16)
    assert [v for v in knowledge.validate(seed, "nvidia-sm90") if v.severity == "hard"] == []  # the default
    legal, violations = knowledge.is_legal({**seed.params, **params}, "nvidia-sm90", source=BF16)
    assert not legal and any(needle in v.message for v in violations), violations
    legal_points, total = hopper_gemm_space
    assert 0 < legal_points < total


def test_hopper_atoms_on_ampere_are_invalid_and_triton_rules_leave_cute_alone():
    seed = Candidate.from_source(BF16)
    on_ampere = [v.rule for v in knowledge.validate(seed, "nvidia-sm80") if v.severity == "hard"]
    assert on_ampere == ["cute-hopper-features-need-sm90"]
    relu = Candidate.from_source((TEMPLATES / "cute_elementwise_relu.py").read_text())
    assert [v for v in knowledge.validate(relu, "nvidia-sm80") if v.severity == "hard"] == []
    with_torch = Candidate.from_source(GEMM.replace("#include <cstdint>", "#include <torch/extension.h>"))
    assert [v.rule for v in knowledge.validate(with_torch, "nvidia-sm90") if v.severity == "hard"] == [
        "cute-no-torch-headers"]
