"""``evoforge llm-check`` (is the endpoint usable?) and ``evoforge prompt`` (exactly what would be sent)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError


def cmd_llm_check(args: argparse.Namespace) -> int:
    from evoforge.mutators.llm_client import OpenAIClient

    if not args.llm_model:
        raise UsageError("--llm-model is required (the model name the endpoint serves)")
    client = OpenAIClient(base_url=args.llm_base_url, model=args.llm_model, api_key_env=args.llm_api_key_env)

    async def go() -> str:
        try:
            return await client.check(timeout_s=args.timeout)
        finally:
            await client.aclose()

    print(asyncio.run(go()))
    return 0


def cmd_prompt(args: argparse.Namespace) -> int:
    from evoforge.mutators.base import MutationContext
    from evoforge.mutators.llm_client import LLMConfig, OpenAIClient
    from evoforge.mutators.llm_ops import preview
    from evoforge.mutators.registry import OperatorSettings, build_operators

    from evoforge.task import Task

    task = Task.load(args.task)
    path = Path(args.candidate)
    if not path.is_file():
        raise UsageError(f"CANDIDATE {path}: file not found")
    parent = Candidate.from_source(path.read_text(), task=task.name)
    parent_result = None
    if args.operator == "llm-repair":
        message = Path(args.error_file).read_text() if args.error_file else "(the failed child's error message)"
        parent_result = EvalResult.failure(EvalStatus(args.status), message)
    settings = OperatorSettings(arch=args.arch, llm=LLMConfig(delay_feedback=False),  # show the figures
                                client=OpenAIClient(model="preview"))  # never called: preview only assembles
    options = {"llm-stage": {"stage": args.stage}} if args.stage else {}
    operator = build_operators([args.operator], settings, options)[args.operator]
    context = MutationContext(task_name=task.name, task_source=task.source, arch=args.arch,
                              parent_result=parent_result, knowledge_enabled=not args.no_kb)
    parents = (parent, parent) if args.operator == "llm-crossover" else (parent,)
    messages = preview(operator, parents, context)
    if args.json:
        print(json.dumps(messages))
    else:
        for m in messages:
            print(f"===== {m['role']} =====\n{m['content']}\n")
    return 0


def _llm_operator_names() -> list[str]:
    from evoforge.mutators.registry import operator_names

    return operator_names("llm")


def add_subparser(sub: Any) -> None:
    p = sub.add_parser("llm-check", help="send one tiny request to the LLM endpoint and say what is wrong")
    p.add_argument("--llm-base-url", default="", help="OpenAI-compatible endpoint (default: OpenAI)")
    p.add_argument("--llm-model", default="", help="model name")
    p.add_argument("--llm-api-key-env", default="OPENAI_API_KEY", help="variable holding the API key")
    p.add_argument("--timeout", type=float, default=30.0)
    p.set_defaults(func=cmd_llm_check)

    p = sub.add_parser("prompt", help="show exactly what an LLM operator would send for a kernel")
    p.add_argument("task", help="task file or L1/23")
    p.add_argument("candidate", help="the parent kernel")
    p.add_argument("--operator", default="llm-stage", choices=_llm_operator_names())
    p.add_argument("--stage", default=None, help="stage for llm-stage (default: chosen by analysis)")
    p.add_argument("--arch", default="nvidia-sm90")
    p.add_argument("--error-file", help="llm-repair: the failed child's error message")
    p.add_argument("--status", default="compile_error", help="llm-repair: the failed child's status")
    p.add_argument("--no-kb", action="store_true", help="leave the knowledge base out of the prompt")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_prompt)
