"""An in-process ``LLMClient`` driven by a script: the LLM of tests that need no HTTP server.

It takes the same steps as ``tests.fakellm.FakeLLMServer`` (a reply string; ``f(messages) -> str``; a dict with
``reply``, ``usage``, ``model``, or ``status`` for a failure) and answers ``complete`` with them in order, so a
test can run against either and the LLM client conformance suite holds both to the one contract.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evoforge.mutators.base import Completion, LLMError, Message

Step = str | Callable[[list[Message]], str] | Mapping[str, Any]

_REASONS = {401: "auth", 403: "auth", 404: "not_found", 429: "rate_limited"}


class ScriptedLLM:
    def __init__(self, *steps: Step, model: str = "scripted", default: Step | None = None) -> None:
        self.model = model
        self.default = default
        self._steps: list[Step] = list(steps)
        self.requests: list[dict[str, Any]] = []

    def push(self, *steps: Step) -> None:
        self._steps.extend(steps)

    async def complete(self, messages: Sequence[Message], *, model: str | None = None,
                       temperature: float | None = None, max_tokens: int | None = None,
                       **opts: Any) -> Completion:
        sent = [dict(m) for m in messages]
        endpoint_opts = {k: v for k, v in opts.items() if k != "cache_salt"}  # the salt only keys a cache
        self.requests.append({"messages": sent, "model": model, "temperature": temperature, "opts": endpoint_opts})
        step = self._steps.pop(0) if self._steps else self.default
        if step is None:
            raise LLMError("scripted LLM: script exhausted", reason="server_error", status_code=500)
        usage: Mapping[str, Any] = {}
        served = model or self.model
        if isinstance(step, Mapping):
            if "status" in step:
                code = int(step["status"])
                raise LLMError(f"scripted LLM: fault {code}", status_code=code,
                               reason=_REASONS.get(code, "server_error" if code >= 500 else "bad_request"))
            usage, served = step.get("usage", {}), step.get("model", served)
            step = step.get("reply", "")
        text = step(sent) if callable(step) else str(step)
        prompt = sum(len(str(m.get("content", ""))) for m in sent) // 4
        return Completion(text=text, model=str(served),
                          prompt_tokens=int(usage.get("prompt_tokens", prompt)),
                          completion_tokens=int(usage.get("completion_tokens", len(text) // 4)),
                          cost_usd=0.0, cached=False, latency_s=0.0)
