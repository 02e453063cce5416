"""The LLM client against a real OpenAI-compatible server on loopback, through the real openai client."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from evoforge.mutators.llm_client import (
    LLMBudgetExceeded,
    LLMCheckError,
    LLMConfig,
    LLMError,
    LLMUnavailable,
    OpenAIClient,
    _connection_cause,
    scrub_secrets,
)

from evoforge.core import UsageError
from tests.fakellm import FakeLLMServer
from tests.mutators.conftest import KEY_ENV, SECRET, run

HELLO = [{"role": "user", "content": "hello"}]


def test_completion_reports_text_tokens_and_cost(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    fake_llm.push({"reply": "hi there", "usage": {"prompt_tokens": 1000, "completion_tokens": 500}})
    client = make_client(prices={"fake-model": (2.0, 8.0)})
    done = run(client.complete(HELLO, temperature=0.3, max_tokens=64, top_p=0.9))
    assert done.text == "hi there"
    assert (done.prompt_tokens, done.completion_tokens) == (1000, 500)
    assert done.cost_usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    assert not done.cached and done.latency_s > 0
    body = fake_llm.chat_requests[0].body
    assert body is not None
    assert (body["model"], body["temperature"], body["max_tokens"], body["top_p"]) == (
        "fake-model",
        0.3,
        64,
        0.9,
    )
    assert client.usage.tokens == 1500 and client.usage.calls == 1


def test_the_key_is_sent_but_in_no_repr_cache_file_or_error(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient], tmp_path: Any
) -> None:
    fake_llm.push("reply one")
    cache_dir = tmp_path / "cache"
    client = make_client(cache_dir=str(cache_dir))
    run(client.complete(HELLO))
    assert fake_llm.chat_requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(client) and SECRET not in repr(client.config)
    files = list(cache_dir.rglob("*.json"))
    assert len(files) == 1
    assert SECRET not in files[0].read_text()
    # even a prompt that quotes the key is scrubbed before it reaches the disk
    fake_llm.push("reply two")
    run(client.complete([{"role": "user", "content": f"my key is {SECRET}"}]))
    assert all(SECRET not in f.read_text() for f in cache_dir.rglob("*.json"))


def test_401_names_the_env_var_and_never_the_key(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    fake_llm.push({"status": 401, "message": f"Incorrect API key provided: {SECRET}"})
    client = make_client()
    with pytest.raises(LLMError) as info:
        run(client.complete(HELLO))
    err = info.value
    assert err.reason == "auth" and err.status_code == 401
    assert f"${KEY_ENV}" in str(err)
    assert SECRET not in str(err) and SECRET[:12] not in str(err)
    assert err.__cause__ is None and err.__suppress_context__  # the openai error (which echoes it) is dropped
    assert len(fake_llm.chat_requests) == 1  # a bad key is not retried


def test_401_when_the_variable_is_unset_says_so(
    fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVOFORGE_UNSET_KEY", raising=False)
    fake_llm.api_key = "sk-required"
    client = OpenAIClient(base_url=fake_llm.url, model="fake-model", api_key_env="EVOFORGE_UNSET_KEY")
    with pytest.raises(LLMCheckError, match=r"\$EVOFORGE_UNSET_KEY is not set"):
        run(client.check())


def test_429_and_500_bursts_are_retried_with_growing_backoff(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    fake_llm.push({"status": 429}, {"status": 500}, {"status": 503}, "finally")
    delays: list[float] = []

    async def record_sleep(s: float) -> None:
        delays.append(s)

    client = OpenAIClient(config=make_client().config, sleep=record_sleep, backoff_s=1.0, backoff_max_s=100.0)
    assert run(client.complete(HELLO)).text == "finally"
    assert len(fake_llm.chat_requests) == 4
    assert len(delays) == 3
    for attempt, delay in enumerate(delays):  # exponential, jittered within [1/2, 1] of the step
        assert 0.5 * 2**attempt <= delay <= 2**attempt


def test_retry_after_is_honoured(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.push({"status": 429, "retry_after": 0.04}, "ok")
    delays: list[float] = []

    async def record_sleep(s: float) -> None:
        delays.append(s)

    client = OpenAIClient(config=make_client().config, sleep=record_sleep, backoff_s=0.001)
    assert run(client.complete(HELLO)).text == "ok"
    assert delays == [pytest.approx(0.04)]


def test_retries_give_up_with_a_clear_error(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient], caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.push(*[{"status": 500, "message": f"upstream rejected key {SECRET}"}] * 3)
    client = make_client(max_retries=2)
    with (
        caplog.at_level("DEBUG", logger="evoforge"),
        pytest.raises(LLMError, match=r"server error \(500\)") as info,
    ):
        run(client.complete(HELLO))
    assert info.value.reason == "server_error"
    assert "retry 2" in caplog.text
    assert SECRET not in caplog.text and SECRET not in str(info.value)
    assert len(fake_llm.chat_requests) == 3
    assert client.usage.failed_calls == 1


def test_garbage_body_is_retried(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.push({"garbage": True}, "clean")
    assert run(make_client().complete(HELLO)).text == "clean"
    fake_llm.push({"garbage": True})
    with pytest.raises(LLMError, match="not valid JSON"):
        run(make_client(max_retries=0).complete(HELLO))


def test_a_hang_past_the_timeout_is_retried(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    fake_llm.push({"hang": 10}, "after the hang")
    t0 = time.monotonic()
    # a timeout of a second, not a fraction: on a busy 2-core machine a retry's request must still reach the
    # server before it runs out; under 9 s in all is still short of the 10 s hang
    assert run(make_client(timeout_s=1.0).complete(HELLO)).text == "after the hang"
    assert time.monotonic() - t0 < 9


def test_hangs_until_retries_run_out_fail_cleanly(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    fake_llm.push({"hang": 10}, {"hang": 10})
    t0 = time.monotonic()
    # at 0.2 s the retry's request could time out before the server had read it (one request seen, CI 2026-12-02)
    with pytest.raises(LLMError, match=r"did not answer within 1 s \(timeout\)") as info:
        run(make_client(timeout_s=1.0, max_retries=1).complete(HELLO))
    assert info.value.reason == "timeout"
    assert time.monotonic() - t0 < 9  # two timeouts and a backoff, not the 20 s of two hangs
    assert len(fake_llm.chat_requests) == 2


def test_circuit_breaker_opens_fails_fast_and_closes(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    now = [0.0]
    client = OpenAIClient(
        config=make_client().config,
        clock=lambda: now[0],
        max_retries=0,
        breaker_threshold=2,
        breaker_cooldown_s=30,
    )
    fake_llm.push({"status": 500}, {"status": 500})
    for _ in range(2):
        with pytest.raises(LLMError):
            run(client.complete(HELLO))
    assert client.breaker.state == "open"
    with pytest.raises(LLMUnavailable, match="circuit breaker open, next try in 30 s"):
        run(client.complete(HELLO))
    assert len(fake_llm.chat_requests) == 2  # nothing sent while open
    now[0] = 31.0
    assert client.breaker.state == "half_open"
    fake_llm.push({"status": 500})  # the trial call fails: open again
    with pytest.raises(LLMError):
        run(client.complete(HELLO))
    assert client.breaker.state == "open"
    now[0] = 62.0
    fake_llm.push("back")
    assert run(client.complete(HELLO)).text == "back"
    assert client.breaker.state == "closed"


def test_token_budget_stops_calls(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.push({"reply": "a", "usage": {"prompt_tokens": 40, "completion_tokens": 20}}, "never sent")
    client = make_client(budget_tokens=50)
    run(client.complete(HELLO))
    with pytest.raises(LLMBudgetExceeded, match="60 of 50 tokens"):
        run(client.complete([{"role": "user", "content": "again"}]))
    assert len(fake_llm.chat_requests) == 1


def test_usd_budget_stops_calls(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.push({"reply": "a", "usage": {"prompt_tokens": 100_000, "completion_tokens": 10_000}})
    client = make_client(
        budget_usd=1.0, prices={"fake-model": {"input_per_mtok": 10.0, "output_per_mtok": 30.0}}
    )
    assert run(client.complete(HELLO)).cost_usd == pytest.approx(1.3)
    with pytest.raises(LLMBudgetExceeded, match=r"\$1.3000 of \$1.0000"):
        run(client.complete([{"role": "user", "content": "again"}]))
    assert len(fake_llm.chat_requests) == 1


def test_cache_hit_on_rerun_costs_nothing(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient], tmp_path: Any
) -> None:
    fake_llm.push({"reply": "first", "usage": {"prompt_tokens": 30, "completion_tokens": 30}})
    cache = str(tmp_path / "llm-cache")
    first = run(
        make_client(cache_dir=cache, budget_tokens=50).complete(HELLO, temperature=0.5, cache_salt="p1")
    )
    rerun_client = make_client(cache_dir=cache, budget_tokens=50)
    again = run(rerun_client.complete(HELLO, temperature=0.5, cache_salt="p1"))
    assert again.text == first.text == "first"
    assert again.cached and again.cost_usd == 0 and again.latency_s == 0
    assert len(fake_llm.chat_requests) == 1  # the server saw no second request
    assert rerun_client.usage.tokens == 0 and rerun_client.usage.cached_calls == 1
    # anything that changes a reply changes the key: temperature, salt
    fake_llm.push("other temperature", "other salt")
    assert run(rerun_client.complete(HELLO, temperature=0.9, cache_salt="p1")).text == "other temperature"
    assert run(rerun_client.complete(HELLO, temperature=0.5, cache_salt="p2")).text == "other salt"
    assert all("cache_salt" not in (r.body or {}) for r in fake_llm.chat_requests)


def test_cache_serves_while_the_endpoint_is_down(
    make_client: Callable[..., OpenAIClient], tmp_path: Any
) -> None:
    cache = str(tmp_path / "c")
    with FakeLLMServer(["cached answer"]) as server:
        run(make_client(base_url=server.url, cache_dir=cache).complete(HELLO))
    assert run(make_client(base_url=server.url, cache_dir=cache).complete(HELLO)).text == "cached answer"


def test_ensemble_weights_are_respected_and_seeded() -> None:
    client = OpenAIClient(models={"big": 3.0, "small": 1.0, "off": 0.0}, seed=7)
    picks = Counter(client.pick_model() for _ in range(4000))
    assert picks["off"] == 0
    assert 0.72 < picks["big"] / 4000 < 0.78
    again = OpenAIClient(models={"big": 3.0, "small": 1.0, "off": 0.0}, seed=7)
    first = OpenAIClient(models={"big": 3.0, "small": 1.0, "off": 0.0}, seed=7)
    assert [again.pick_model() for _ in range(50)] == [first.pick_model() for _ in range(50)]


def test_ensemble_models_reach_the_server(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    fake_llm.default = "ok"
    client = make_client(models={"fake-model": 1.0, "fake-large": 1.0})

    async def many() -> None:
        for i in range(40):
            await client.complete([{"role": "user", "content": f"q{i}"}])

    run(many())
    seen = Counter(r.model for r in fake_llm.chat_requests)
    assert set(seen) == {"fake-model", "fake-large"} and min(seen.values()) >= 8
    assert run(client.complete(HELLO, model="fake-large")).model == "fake-large"


def test_concurrency_limit(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.default = None
    fake_llm.push(*[{"hang": 0.15, "reply": f"r{i}"} for i in range(6)])
    client = make_client(concurrency=2)

    async def burst() -> list[str]:
        done = await asyncio.gather(
            *(client.complete([{"role": "user", "content": f"{i}"}]) for i in range(6))
        )
        return [d.text for d in done]

    assert sorted(run(burst())) == [f"r{i}" for i in range(6)]
    assert fake_llm.max_in_flight == 2


def test_the_client_survives_successive_event_loops(
    fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]
) -> None:
    fake_llm.push("one", "two")
    client = make_client()
    assert run(client.complete(HELLO)).text == "one"
    assert run(client.complete([{"role": "user", "content": "x"}])).text == "two"


# -- llm-check -------------------------------------------------------------------------------------------------
def test_check_ok(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.push("OK")
    line = run(make_client().check())
    assert line.startswith("LLM ok: fake-model at http://127.0.0.1") and "\n" not in line


def test_check_unreachable_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIClient(base_url=f"http://127.0.0.1:{port}/v1", model="m")
    with pytest.raises(LLMCheckError) as info:
        run(client.check())
    message = str(info.value)
    assert (
        "unreachable (connection refused)" in message and "--llm-base-url" in message and "\n" not in message
    )
    assert isinstance(info.value, UsageError)


def test_dns_failure_is_named() -> None:
    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except OSError as inner:
            raise RuntimeError("Connection error.") from inner
    except RuntimeError as outer:
        assert _connection_cause(outer) == "host name not found (DNS)"


def test_check_unknown_model_lists_the_served_ones(api_key: str) -> None:
    with FakeLLMServer(models=("llama-3-70b", "qwen-coder"), strict_models=True) as server:
        client = OpenAIClient(base_url=server.url, model="gpt-nope", api_key_env=KEY_ENV)
        with pytest.raises(
            LLMCheckError, match=r"model 'gpt-nope' not found \(404\); it serves: llama-3-70b, qwen-coder"
        ):
            run(client.check())


def test_check_of_a_base_url_without_v1_names_the_path_not_the_model(
    api_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18: a base URL without ``/v1`` got "model not found" although the model was served; the path was wrong."""
    from evoforge.cli import main

    with FakeLLMServer(models=("fake-model",), only_under_v1=True) as server:
        base = f"http://127.0.0.1:{server.port}"
        code = main(["llm-check", "--llm-base-url", base, "--llm-model", "fake-model", "--llm-api-key-env", KEY_ENV])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert f"give --llm-base-url {base}/v1" in lines[0] and "fake-model" in lines[0]
    assert "choose --llm-model" not in lines[0]  # the model was right all along


def test_check_timeout(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.push({"hang": 10})
    with pytest.raises(LLMCheckError, match=r"did not answer within 0.2 s \(timeout\)"):
        run(make_client().check(timeout_s=0.2))


def test_check_bad_key(fake_llm: FakeLLMServer, make_client: Callable[..., OpenAIClient]) -> None:
    fake_llm.api_key = "sk-the-right-one-000000"
    with pytest.raises(LLMCheckError) as info:
        run(make_client().check())
    assert f"rejected the API key in ${KEY_ENV} (401)" in str(info.value)
    assert SECRET not in str(info.value)


# -- plain pieces --------------------------------------------------------------------------------------------------
def test_scrub_removes_keys_and_bearer_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "plainvalue-0123456789")
    text = (
        f"key {SECRET} header Authorization: Bearer abc.def, sk-proj-ABCDEFGHIJKLMNOP, plainvalue-0123456789"
    )
    clean = scrub_secrets(text, [SECRET])
    assert SECRET not in clean and "abc.def" not in clean and "ABCDEFGHIJKLMNOP" not in clean
    assert "plainvalue" not in clean


def test_bad_config_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="weights"):
        LLMConfig(models={"a": -1.0})
    with pytest.raises(UsageError, match="concurrency"):
        OpenAIClient(concurrency=0)


def test_config_round_trips_as_plain_json() -> None:
    config = LLMConfig(base_url="http://x/v1", models={"a": 1.0}, prices={"a": [1.0, 2.0]})
    assert OpenAIClient(config=config).config.price("a").output_per_mtok == 2.0
    json.dumps(config.__dict__)
