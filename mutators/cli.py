"""``evoforge llm-check`` (is the endpoint usable?) and ``evoforge prompt`` (exactly what would be sent)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from evoforge.mutators.names import LLM, LLM_CROSSOVER, LLM_GENERATE, LLM_REPAIR, LLM_STAGE

from evoforge.core import Candidate, EvalResult, EvalStatus, UsageError


def cmd_llm_check(args: argparse.Namespace) -> int:
    from evoforge.mutators.llm_client import LLMCheckError, OpenAIClient

    if not args.llm_model:
        raise UsageError("--llm-model is required (the model name the endpoint serves)")
    client = OpenAIClient(base_url=args.llm_base_url, model=args.llm_model, api_key_env=args.llm_api_key_env)

    async def go() -> str:
        try:
            return await client.check(timeout_s=args.timeout)
        except LLMCheckError as err:
            if err.reason == "not_found" and (hint := await _api_under_v1(args)):
                raise UsageError(hint) from None
            raise
        finally:
            await client.aclose()

    print(asyncio.run(go()))
    return 0


async def _api_under_v1(args: argparse.Namespace) -> str | None:
    """A 404 from a base URL without ``/v1`` is most often the path, not the model: vLLM, Ollama, LiteLLM and
    OpenAI serve the API under ``/v1``. Ask there for the model list and say so."""
    from urllib.parse import urlsplit

    from evoforge.mutators.llm_client import OpenAIClient

    base = args.llm_base_url.rstrip("/")
    if not base or urlsplit(base).path.endswith("/v1"):
        return None
    there = OpenAIClient(base_url=f"{base}/v1", model=args.llm_model, api_key_env=args.llm_api_key_env)
    try:
        models = await there.list_models()
    finally:
        await there.aclose()
    if not models:
        return None
    serves = ", ".join(models[:10])
    fix = "" if args.llm_model in models else " and choose --llm-model among them"
    return (f"LLM endpoint {base}: no OpenAI-compatible API at that path (404); it is at {base}/v1, which serves "
            f"{serves}: give --llm-base-url {base}/v1{fix}")


def _read_kernel(path_text: str, flag: str, task: str) -> Candidate:
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"{flag} {path}: file not found")
    return Candidate.from_source(path.read_text(), task=task)


def cmd_prompt(args: argparse.Namespace) -> int:
    from evoforge.mutators.base import MutationContext, MutationError
    from evoforge.mutators.llm_client import LLMConfig, OpenAIClient
    from evoforge.mutators.llm_ops import preview
    from evoforge.mutators.registry import OperatorSettings, build_operators

    from evoforge.task import Task

    task = Task.load(args.task)
    parents: tuple[Candidate, ...] = ()
    if args.candidate:
        parents = (_read_kernel(args.candidate, "CANDIDATE", task.name),)
    elif args.operator != LLM_GENERATE:
        raise UsageError(f"--operator {args.operator} rewrites a kernel: give CANDIDATE (the parent's file)")
    if args.other:
        if args.operator != LLM_CROSSOVER:
            raise UsageError("--other is the second parent of llm-crossover; drop it or give --operator llm-crossover")
        parents = (*parents, _read_kernel(args.other, "--other", task.name))
    elif args.operator == LLM_CROSSOVER:
        raise UsageError("--operator llm-crossover combines two kernels: give the second with --other FILE "
                         "(a kernel of another structure)")
    parent_result = None
    if args.operator == LLM_REPAIR:
        message = Path(args.error_file).read_text() if args.error_file else "(the failed child's error message)"
        parent_result = EvalResult.failure(EvalStatus(args.status), message)
    settings = OperatorSettings(arch=args.arch, llm=LLMConfig(delay_feedback=False),  # show the figures
                                client=OpenAIClient(model="preview"))  # never called: preview only assembles
    options = {LLM_STAGE: {"stage": args.stage}} if args.stage else {}
    operator = build_operators([args.operator], settings, options)[args.operator]
    language = args.language or (parents[0].language if parents else "triton")
    context = MutationContext(task_name=task.name, task_source=task.source, arch=args.arch,
                              parent_result=parent_result, knowledge_enabled=not args.no_kb, language=language)
    try:
        messages = preview(operator, parents, context)
    except MutationError as e:
        raise UsageError(f"--operator {args.operator}: {e}") from None
    if args.json:
        print(json.dumps(messages))
    else:
        for m in messages:
            print(f"===== {m['role']} =====\n{m['content']}\n")
    return 0


def _llm_operator_names() -> list[str]:
    from evoforge.mutators.registry import operator_names

    return operator_names(LLM)


def add_subparser(sub: Any) -> None:
    p = sub.add_parser("llm-check", help="send one tiny request to the LLM endpoint and say what is wrong")
    p.add_argument("--llm-base-url", default="", help="OpenAI-compatible endpoint (default: OpenAI)")
    p.add_argument("--llm-model", default="", help="model name")
    p.add_argument("--llm-api-key-env", default="OPENAI_API_KEY", help="variable holding the API key")
    p.add_argument("--timeout", type=float, default=30.0)
    p.set_defaults(func=cmd_llm_check)

    p = sub.add_parser("prompt", help="show exactly what an LLM operator would send for a kernel")
    p.add_argument("task", help="task file or L1/23")
    p.add_argument("candidate", nargs="?", help="the parent kernel (none for llm-generate)")
    p.add_argument("--operator", default=LLM_STAGE, choices=_llm_operator_names())
    p.add_argument("--stage", default=None, help="stage for llm-stage (default: chosen by analysis)")
    p.add_argument("--arch", default="nvidia-sm90")
    p.add_argument("--other", metavar="FILE", help="llm-crossover: the second parent (another structure)")
    p.add_argument("--error-file", help="llm-repair: the failed child's error message")
    p.add_argument("--status", default="compile_error", help="llm-repair: the failed child's status")
    p.add_argument("--no-kb", action="store_true", help="leave the knowledge base out of the prompt")
    p.add_argument("--language", choices=["triton", "cute"],
                   help="llm-generate: the kernel language to write (default: the candidate's own, else triton)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_prompt)
