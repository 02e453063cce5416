"""Fixtures of the LLM tests: a real OpenAI-compatible server on loopback and clients pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
from evoforge.mutators.llm_client import OpenAIClient

from tests.fakellm import FakeLLMServer

KEY_ENV = "EVOFORGE_TEST_LLM_KEY"
SECRET = "sk-evoforgeTEST-0123456789abcdefSECRET"


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A started server with an empty script: tests ``push`` the steps they need."""
    with FakeLLMServer(models=("fake-model", "fake-large")) as server:
        yield server


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


@pytest.fixture
def make_client(fake_llm: FakeLLMServer, api_key: str, tmp_path: Any) -> Callable[..., OpenAIClient]:
    """Clients with fast retries (10 ms steps) and a short timeout, reading the key from ``KEY_ENV``."""

    def make(**overrides: Any) -> OpenAIClient:
        settings: dict[str, Any] = {
            "base_url": fake_llm.url,
            "model": "fake-model",
            "api_key_env": KEY_ENV,
            "timeout_s": 2.0,
            "max_retries": 3,
            "backoff_s": 0.01,
            "backoff_max_s": 0.05,
        }
        settings.update(overrides)
        return OpenAIClient(**settings)

    return make
