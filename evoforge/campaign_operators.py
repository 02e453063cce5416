"""Which mutation operators a campaign has, built from its config (no live objects in the config itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoforge.config import CampaignConfig
from evoforge.mutators.base import Mutator


def llm_client_from_config(config: CampaignConfig, *, run_dir: Path) -> Any:
    from evoforge.mutators.llm_client import LLMClient, LLMConfig

    llm = config.llm
    models = {str(m["name"]): float(m.get("weight", 1.0)) for m in llm.models}
    return LLMClient(config=LLMConfig(
        base_url=llm.base_url or None, model=llm.model or next(iter(models), ""), models=models,
        api_key_env=llm.api_key_env, temperature=llm.temperature, max_tokens=llm.max_tokens,
        timeout_s=llm.timeout_s, max_retries=llm.max_retries, max_concurrency=llm.concurrency,
        prices={k: tuple(v) for k, v in llm.prices.items()}, budget_tokens=llm.budget_tokens or None,
        budget_usd=llm.budget_usd or None, cache_dir=llm.cache_dir or str(run_dir / "llm-cache"),
        seed=config.seed))


def build_mutators(config: CampaignConfig, *, arch: str, run_dir: Path) -> tuple[dict[str, Mutator], Any]:
    """Operators named in ``config.operators``: ``params`` (handled by the strategy), ``rule`` (every rule
    operator of the knowledge base), ``llm`` (every LLM operator) or single names such as ``llm-repair``."""
    wanted = set(config.operators)
    out: dict[str, Mutator] = {}
    if wanted & {"rule"} or any(w.startswith("rule:") for w in wanted):
        from evoforge.mutators.rules import rule_mutators

        for m in rule_mutators(arch):
            if "rule" in wanted or m.name in wanted:
                out[m.name] = m
    client = None
    llm_names = {"llm", "llm-stage", "llm-repair", "llm-optimize", "llm-crossover"}
    if wanted & llm_names:
        if not config.llm.enabled:
            from evoforge.core import UsageError

            raise UsageError("operators include LLM operators but no model is set: give --llm-model NAME "
                             "(and --llm-base-url URL), or drop them from operators")
        from evoforge.mutators.llm_ops import (
            LLMCrossover,
            LLMOptimize,
            LLMRepair,
            LLMStageRewrite,
            PromptBuilder,
        )

        client = llm_client_from_config(config, run_dir=run_dir)
        builder = PromptBuilder()
        makers = {
            "llm-stage": lambda: LLMStageRewrite(client=client, builder=builder, seed=config.seed),
            "llm-repair": lambda: LLMRepair(client=client, builder=builder,
                                            max_attempts=config.llm.repair_attempts),
            "llm-optimize": lambda: LLMOptimize(client=client, builder=builder,
                                                feedback_after=config.llm.feedback_after,
                                                delay_feedback=config.llm.delay_feedback),
            "llm-crossover": lambda: LLMCrossover(client=client, builder=builder),
        }
        for name, make in makers.items():
            if "llm" in wanted or name in wanted:
                out[name] = make()
    return out, client
