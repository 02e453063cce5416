"""The ``LLMClient`` contract (mutators/base.py), one suite for every client.

``OpenAIClient`` runs against a real OpenAI-compatible server on loopback (tests/fakellm.py), ``ScriptedLLM``
in-process (tests/scriptedllm.py): a new client (another SDK, a local model) is correct by passing it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from evoforge.mutators.base import Completion, LLMClient, LLMError
from evoforge.mutators.llm_client import OpenAIClient

from tests.fakellm import FakeLLMServer
from tests.mutators.conftest import run
from tests.scriptedllm import ScriptedLLM

HELLO = [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": "Say hello."}]


@dataclass
class Scripted:
    """A client and the way to script what its endpoint answers next (FakeLLMServer's steps)."""

    client: LLMClient
    push: Callable[..., None]
    sent: Callable[[], list[dict[str, Any]]]  # the requests' bodies as the endpoint saw them


def _openai() -> Iterator[Scripted]:
    with FakeLLMServer(models=("fake-model", "other-model")) as server:
        client = OpenAIClient(base_url=server.url, model="fake-model", api_key_env="EVOFORGE_NO_SUCH_KEY",
                              timeout_s=5.0, max_retries=0)
        yield Scripted(client, server.push, lambda: [dict(r.body or {}) for r in server.chat_requests])


def _scripted() -> Iterator[Scripted]:
    client = ScriptedLLM(model="fake-model")
    yield Scripted(client, client.push, lambda: [{"messages": r["messages"], "model": r["model"] or "fake-model",
                                                  **r["opts"]} for r in client.requests])


CLIENTS = {"openai": _openai, "scripted": _scripted}


@pytest.fixture(params=sorted(CLIENTS))
def llm(request: pytest.FixtureRequest) -> Iterator[Scripted]:
    yield from CLIENTS[request.param]()


def test_is_an_llm_client(llm: Scripted) -> None:
    assert isinstance(llm.client, LLMClient)


def test_a_reply_is_a_completion_with_its_cost(llm: Scripted) -> None:
    llm.push({"reply": "hello", "usage": {"prompt_tokens": 11, "completion_tokens": 2}})
    done = run(llm.client.complete(HELLO))
    assert isinstance(done, Completion) and done.text == "hello"
    assert (done.prompt_tokens, done.completion_tokens, done.total_tokens) == (11, 2, 13)
    assert done.cost_usd >= 0 and done.latency_s >= 0 and isinstance(done.cached, bool) and done.model
    assert llm.sent()[0]["messages"] == HELLO


def test_the_model_asked_for_is_the_model_asked(llm: Scripted) -> None:
    llm.push("a")
    assert run(llm.client.complete(HELLO, model="other-model")).model == "other-model"
    assert llm.sent()[0]["model"] == "other-model"


def test_options_reach_the_endpoint_but_the_cache_salt_does_not(llm: Scripted) -> None:
    llm.push("a", "b")
    first = run(llm.client.complete(HELLO, temperature=0.0, max_tokens=16, cache_salt="x", top_p=0.5))
    second = run(llm.client.complete(HELLO, temperature=0.0, max_tokens=16, cache_salt="y", top_p=0.5))
    assert (first.text, second.text) == ("a", "b")  # two salts: two answers, not one cached twice
    assert all(body.get("top_p") == 0.5 and "cache_salt" not in body for body in llm.sent())


def test_a_failing_endpoint_is_an_llm_error_not_a_reply(llm: Scripted) -> None:
    llm.push({"status": 401})
    with pytest.raises(LLMError) as err:
        run(llm.client.complete(HELLO))
    assert err.value.reason == "auth" and err.value.status_code == 401
    llm.push({"status": 500})
    with pytest.raises(LLMError):
        run(llm.client.complete(HELLO))


def test_calls_in_flight_together_each_get_their_own_reply(llm: Scripted) -> None:
    def echo(messages: list[dict[str, Any]]) -> str:
        return "re: " + str(messages[-1]["content"])

    llm.push(echo, echo, echo)

    async def three() -> list[Completion]:
        asks = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
        return list(await asyncio.gather(*(llm.client.complete(m) for m in asks)))

    assert sorted(c.text for c in run(three())) == ["re: q0", "re: q1", "re: q2"]
