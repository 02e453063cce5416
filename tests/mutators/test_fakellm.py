"""The test LLM itself: a standalone server a campaign can be pointed at, and a script that fails loudly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from evoforge.mutators.llm_client import LLMError, OpenAIClient

from tests.fakellm import FakeLLMServer, echo_last_python_block
from tests.mutators.conftest import run

REPO = Path(__file__).resolve().parents[2]


def test_standalone_echo_server_answers_a_real_client() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakellm", "--echo", "--model", "m1"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split()[2]
        assert url.startswith("http://127.0.0.1:")
        client = OpenAIClient(base_url=url, model="m1", api_key_env="EVOFORGE_NO_SUCH_VAR")
        prompt = [{"role": "user", "content": "fix this:\n```python\nclass ModelNew:\n    pass\n```\n"}]
        assert "```python\nclass ModelNew:\n    pass\n```" in run(client.complete(prompt)).text
        assert run(client.list_models()) == ["m1"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_an_exhausted_script_fails_loudly() -> None:
    with FakeLLMServer(["only one"]) as server:
        client = OpenAIClient(base_url=server.url, model="fake-model", max_retries=0)
        assert run(client.complete([{"role": "user", "content": "a"}])).text == "only one"
        with pytest.raises(LLMError, match="script exhausted"):
            run(client.complete([{"role": "user", "content": "b"}]))
        assert server.remaining == 0 and len(server.chat_requests) == 2


def test_echo_without_code_says_so() -> None:
    assert "nothing to echo" in echo_last_python_block([{"role": "user", "content": "hi"}])
