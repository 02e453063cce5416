"""The LLM client (``mutators.base.LLMClient``) over any OpenAI-compatible server: ``OpenAIClient``.

Why it wraps ``openai.AsyncOpenAI`` rather than exposing it: a campaign runs for hours against a remote
service, so the engine owns what keeps it going and what makes it reproducible. Retries (exponential backoff
with jitter, on 429/5xx/timeouts/connection errors) are ours, with the openai client's own retries off, so
their number and spacing are known and tested. A circuit breaker stops a dead endpoint from costing every child
its full retry schedule: while open, ``complete`` fails at once with ``LLMUnavailable`` and the campaign goes on
with non-LLM operators. Budgets in tokens and USD stop spending. A disk cache keyed on everything that changes
a reply makes a re-run free and identical.

The API key is read from an environment variable (``OPENAI_API_KEY`` unless configured) when the HTTP client
is made, handed to the openai client and nothing else: it is in no repr, log line, error message or cache file
(every text we surface or write passes through ``scrub_secrets``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import random
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from evoforge.mutators.base import Completion, LLMBudgetExceeded, LLMError, LLMUnavailable, Message

from evoforge.core import UsageError

log = logging.getLogger("evoforge.mutators.llm")

_RETRYABLE = frozenset({"timeout", "unreachable", "rate_limited", "server_error", "bad_response"})

#: options of ``complete`` that change the cache key but are never sent to the server.
_LOCAL_OPTIONS = ("cache_salt",)


# -- errors ----------------------------------------------------------------------------------------------------
class LLMCheckError(LLMError, UsageError):
    """``evoforge llm-check`` failed: a one-line cause and fix, printed by the CLI like any usage error."""


# -- config ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


@dataclass
class LLMConfig:
    """The ``[llm]`` table of a campaign TOML: what the client and the LLM operators are built from. Plain values.

    ``models``: a weighted ensemble ``{model: weight}``; each call without an explicit model draws one with the
    client's seeded ``random.Random``. Empty: always ``model``. ``prices``: ``{model: [input, output]}`` USD per
    million tokens (or a ``ModelPrice`` / a table with those two keys); a model not listed costs 0.
    ``budget_tokens``/``budget_usd``: 0 is unlimited; checked before each uncached call, so the call that crosses
    a budget completes and the next one is refused. ``cache_dir``: empty, no response cache (a campaign puts it
    in ``RUN_DIR/llm-cache``). ``temperature``: unset, each operator samples at its own (a repair at 0.2, a
    rewrite at 0.7, an optimization or a generation at 0.8); a number, every operator at that one;
    ``temperatures`` sets it per operator name (``{"llm-repair" = 0.0}``), over both. The last three fields are
    the operators' (``llm-repair``, ``llm-optimize``, ``llm-crossover``).
    """

    base_url: str = ""  # empty: the OpenAI API
    model: str = ""
    models: dict[str, float] = field(default_factory=dict)
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key, never the key itself
    temperature: float | None = None  # None: each operator's own
    temperatures: dict[str, float] = field(default_factory=dict)  # per operator name, over temperature
    max_tokens: int = 4096
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    concurrency: int = 4  # requests in flight at once
    breaker_threshold: int = 5
    breaker_cooldown_s: float = 60.0
    prices: dict[str, Any] = field(default_factory=dict)
    budget_tokens: int = 0
    budget_usd: float = 0.0
    cache_dir: str = ""
    delay_feedback: bool = True  # performance figures enter prompts only once a lineage's structure settled
    feedback_after: int = 2
    repair_attempts: int = 3

    def __post_init__(self) -> None:
        temps = [*([] if self.temperature is None else [self.temperature]), *self.temperatures.values()]
        if any(not isinstance(t, int | float) or isinstance(t, bool) or not 0 <= t <= 2 for t in temps):
            raise UsageError(f"llm temperature must be a number from 0 to 2, got {self.temperature!r} "
                             f"(temperatures {dict(self.temperatures)})")
        if any(w < 0 for w in self.models.values()) or (self.models and sum(self.models.values()) <= 0):
            raise UsageError(f"llm models: weights must be >= 0 with a positive sum, got {dict(self.models)}")
        if self.concurrency < 1:
            raise UsageError(f"llm concurrency must be >= 1, got {self.concurrency}")
        if self.max_retries < 0:
            raise UsageError(f"llm max_retries must be >= 0, got {self.max_retries}")

    def temperature_of(self, operator: str) -> float | None:
        """The temperature ``operator`` samples at; None leaves it to the operator's own default."""
        return self.temperatures.get(operator, self.temperature)

    @property
    def enabled(self) -> bool:
        """A model is named: the LLM operators can run."""
        return bool(self.model or self.models)

    def price(self, model: str) -> ModelPrice:
        p = self.prices.get(model)
        if p is None:
            return ModelPrice()
        if isinstance(p, ModelPrice):
            return p
        if isinstance(p, Mapping):
            return ModelPrice(float(p.get("input_per_mtok", 0.0)), float(p.get("output_per_mtok", 0.0)))
        inp, out = p
        return ModelPrice(float(inp), float(out))


@dataclass
class Usage:
    """What this client has spent (cached replies add nothing)."""

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# -- secrets ---------------------------------------------------------------------------------------------------
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6})[A-Za-z0-9_\-]+")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',]+")


_SECRET_VAR = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


def scrub_secrets(text: str, secrets: Sequence[str] = (), *, env: bool = True) -> str:
    """Remove API keys from a text: the given secrets, with ``env`` the values of environment variables named
    like a key (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``), bearer tokens, and anything shaped like
    ``sk-...``. The cache passes ``env=False``: only the configured key, so no cached reply is altered by
    chance."""
    env_values = [v for k, v in os.environ.items() if _SECRET_VAR.search(k) and len(v) >= 8] if env else []
    for secret in sorted({*secrets, *env_values}, key=len, reverse=True):
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _BEARER.sub(r"\1***", text)
    return _KEYLIKE.sub(r"\1***", text)


# -- circuit breaker -------------------------------------------------------------------------------------------
class CircuitBreaker:
    """Closed → (``threshold`` consecutive failed calls) → open for ``cooldown_s`` → half-open: one trial call;
    its success closes the breaker, its failure opens it again."""

    def __init__(
        self, *, threshold: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = max(1, threshold)
        self.cooldown_s = cooldown_s
        self._clock = clock
        self.failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at < self.cooldown_s:
            return "open"
        return "half_open"

    def retry_in_s(self) -> float:
        if self._opened_at is None:
            return 0.0
        return max(0.0, self.cooldown_s - (self._clock() - self._opened_at))

    def allow(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        if state == "half_open" and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def success(self) -> None:
        self.failures = 0
        self._opened_at = None
        self._trial_in_flight = False

    def failure(self) -> None:
        self.failures += 1
        self._trial_in_flight = False
        if self._opened_at is not None or self.failures >= self.threshold:
            self._opened_at = self._clock()

    def release(self) -> None:
        """A call that ended without telling anything about the endpoint (e.g. cancelled)."""
        self._trial_in_flight = False


# -- cache -----------------------------------------------------------------------------------------------------
class ResponseCache:
    """One JSON file per request under ``root/<2 hex>/<key>.json``; written atomically (rename)."""

    def __init__(self, root: str | Path, *, secrets: Callable[[], Sequence[str]] = tuple) -> None:
        self.root = Path(root)
        self._secrets = secrets

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        blob = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = scrub_secrets(
            json.dumps(record, indent=1, sort_keys=True, default=str), self._secrets(), env=False
        )
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)


# -- the client ------------------------------------------------------------------------------------------------
#: sent when the key's variable is unset: local servers (vLLM, Ollama) take anything; the openai client wants one
_NO_KEY = "evoforge-no-key-set"


class OpenAIClient:
    """The ``LLMClient`` over any OpenAI-compatible server: ``complete(messages, *, model=None, temperature=None,
    max_tokens=None, **opts) -> Completion``.

    Construct with an ``LLMConfig`` and/or its fields as keywords: ``OpenAIClient(base_url=..., model=...)``;
    ``seed`` draws the ensemble's models and the retry jitter.
    ``opts`` go to ``chat.completions.create`` (``top_p``, ``seed``, ``stop``...) and into the cache key;
    ``cache_salt`` only enters the cache key (two proposals from the same prompt that should differ).
    ``clock``/``sleep``/``http_client`` are for tests and embedding; they are not configuration.
    """

    def __init__(
        self,
        *,
        config: LLMConfig | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
        **overrides: Any,
    ) -> None:
        self.config = replace(config or LLMConfig(), **overrides)
        self._clock = clock
        self._sleep = sleep
        self._rng = random.Random(seed)
        self.breaker = CircuitBreaker(
            threshold=self.config.breaker_threshold, cooldown_s=self.config.breaker_cooldown_s, clock=clock
        )
        self.usage = Usage()
        self.cache = (
            ResponseCache(self.config.cache_dir, secrets=self._secrets) if self.config.cache_dir else None
        )
        self._openai: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None

    def __repr__(self) -> str:
        c = self.config
        return (
            f"OpenAIClient(base_url={c.base_url!r}, model={c.model!r}, models={dict(c.models)!r}, "
            f"api_key_env={c.api_key_env!r}, breaker={self.breaker.state!r})"
        )

    # -- plumbing ----------------------------------------------------------------------------------------------
    def _secrets(self) -> tuple[str, ...]:
        key = os.environ.get(self.config.api_key_env, "")
        return (key,) if key else ()

    def _scrub(self, text: str) -> str:
        return scrub_secrets(text, self._secrets())

    @property
    def key_is_set(self) -> bool:
        return bool(os.environ.get(self.config.api_key_env))

    @property
    def endpoint(self) -> str:
        return self.config.base_url or "the OpenAI API"

    def _bind(self) -> tuple[Any, asyncio.Semaphore]:
        """The openai client and the semaphore belong to one event loop; a new loop (another asyncio.run)
        gets new ones."""
        loop = asyncio.get_running_loop()
        if self._openai is None or self._loop is not loop:
            import openai

            self._openai = openai.AsyncOpenAI(
                api_key=os.environ.get(self.config.api_key_env) or _NO_KEY,
                base_url=self.config.base_url or None,
                timeout=self.config.timeout_s,
                max_retries=0,
            )
            self._semaphore = asyncio.Semaphore(self.config.concurrency)
            self._loop = loop
        assert self._semaphore is not None
        return self._openai, self._semaphore

    async def aclose(self) -> None:
        if self._openai is not None:
            try:
                await self._openai.close()
            except RuntimeError:  # its loop is gone
                pass
            self._openai = None

    def pick_model(self) -> str:
        """Draw a model of the ensemble by weight (or the one configured model)."""
        models = {m: w for m, w in self.config.models.items() if w > 0}
        if not models:
            return self.config.model
        names = list(models)
        return self._rng.choices(names, weights=[models[n] for n in names], k=1)[0]

    def budget_left(self) -> tuple[float, float]:
        """(tokens, usd) left; ``inf`` where unlimited."""
        c = self.config
        tokens = c.budget_tokens - self.usage.tokens if c.budget_tokens else math.inf
        usd = c.budget_usd - self.usage.cost_usd if c.budget_usd else math.inf
        return tokens, usd

    def _check_budget(self) -> None:
        tokens, usd = self.budget_left()
        if tokens <= 0:
            raise LLMBudgetExceeded(
                f"LLM token budget spent ({self.usage.tokens} of {self.config.budget_tokens} tokens)",
                reason="budget",
            )
        if usd <= 0:
            raise LLMBudgetExceeded(
                f"LLM budget spent (${self.usage.cost_usd:.4f} of ${self.config.budget_usd:.4f})",
                reason="budget",
            )

    # -- the call ----------------------------------------------------------------------------------------------
    async def complete(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **opts: Any,
    ) -> Completion:
        model = model or self.pick_model()
        temperature = self.config.temperature if temperature is None else temperature  # None: the server's own
        max_tokens = self.config.max_tokens if max_tokens is None else max_tokens
        messages = [dict(m) for m in messages]
        request = {  # the endpoint is not part of it: the same model behind another URL gives the same reply
            "model": model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "opts": opts,
        }
        key = ResponseCache.key(request) if self.cache else ""
        if self.cache:
            hit = self.cache.get(key)
            if hit is not None and "text" in hit:
                self.usage.cached_calls += 1
                return Completion(
                    text=hit["text"],
                    model=hit.get("model", model),
                    prompt_tokens=int(hit.get("prompt_tokens", 0)),
                    completion_tokens=int(hit.get("completion_tokens", 0)),
                    cost_usd=0.0,
                    cached=True,
                    latency_s=0.0,
                    finish_reason=str(hit.get("finish_reason", "")),
                )
        self._check_budget()
        send = {k: v for k, v in opts.items() if k not in _LOCAL_OPTIONS}
        completion = await self._call_with_retries(model, messages, temperature, max_tokens, send)
        if self.cache:
            self.cache.put(key, {"request": request, **asdict(completion), "cached": False})
        return completion

    async def _call_with_retries(
        self, model: str, messages: list[Message], temperature: float | None, max_tokens: int,
        opts: dict[str, Any]
    ) -> Completion:
        client, semaphore = self._bind()
        if not self.breaker.allow():
            raise LLMUnavailable(
                f"LLM endpoint {self.endpoint} is failing ({self.breaker.failures} failed calls in a row); "
                f"circuit breaker open, next try in {self.breaker.retry_in_s():.0f} s",
                reason="unavailable",
            )
        attempt = 0
        try:
            while True:
                try:
                    async with semaphore:
                        completion = await self._call_once(
                            client, model, messages, temperature, max_tokens, opts
                        )
                except LLMError as err:
                    if err.reason not in _RETRYABLE or attempt >= self.config.max_retries:
                        raise
                    delay = self._backoff_s(attempt, err.retry_after_s)
                    log.info("LLM call failed (%s); retry %d in %.2f s", err, attempt + 1, delay)
                    attempt += 1
                    await self._sleep(delay)
                    continue
                self.breaker.success()
                return completion
        except LLMError as err:
            self.usage.failed_calls += 1
            if err.reason == "bad_request":  # our request was wrong (e.g. too long), not the endpoint
                self.breaker.release()
            else:
                self.breaker.failure()
            raise
        except BaseException:
            self.breaker.release()
            raise

    def _backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Exponential with jitter (uniform in [1/2, 1] of the step), or the server's Retry-After, capped."""
        c = self.config
        step = min(c.backoff_max_s, c.backoff_s * 2**attempt)
        delay = step * (0.5 + 0.5 * self._rng.random())
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, c.backoff_max_s))
        return delay

    async def _call_once(
        self,
        client: Any,
        model: str,
        messages: list[Message],
        temperature: float | None,
        max_tokens: int,
        opts: dict[str, Any],
        *,
        timeout_s: float | None = None,
    ) -> Completion:
        t0 = time.perf_counter()
        try:
            kwargs: dict[str, Any] = dict(opts)
            if timeout_s is not None:
                kwargs["timeout"] = timeout_s
            if temperature is not None:  # unset: the server's default, not a null it may refuse
                kwargs["temperature"] = temperature
            response = await client.chat.completions.create(
                model=model, messages=messages, max_tokens=max_tokens, **kwargs
            )
        except Exception as exc:  # translated to one LLMError; the original (which may echo a key) is dropped
            raise self._translate(exc, model) from None
        latency_s = time.perf_counter() - t0
        try:
            choice = response.choices[0]
            # A refusal (structured-output APIs put it beside an empty content) is the reply's text.
            text = choice.message.content or getattr(choice.message, "refusal", None) or ""
            finish_reason = str(getattr(choice, "finish_reason", "") or "")
        except (AttributeError, IndexError, TypeError):
            raise LLMError(
                f"LLM endpoint {self.endpoint} sent a response without choices", reason="bad_response"
            ) from None
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        served = getattr(response, "model", None) or model
        cost = self.config.price(model).cost_usd(prompt_tokens, completion_tokens)
        self.usage.calls += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += completion_tokens
        self.usage.cost_usd += cost
        return Completion(
            text=text,
            model=str(served),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            cached=False,
            latency_s=latency_s,
            finish_reason=finish_reason,
        )

    def _translate(self, exc: BaseException, model: str) -> LLMError:
        """One LLMError per openai/transport failure, classified by exception type and status code."""
        import openai

        where = self.endpoint
        env = self.config.api_key_env
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(
                f"LLM endpoint {where} did not answer within {self.config.timeout_s:g} s (timeout)",
                reason="timeout",
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = _connection_cause(exc)
            return LLMError(f"LLM endpoint {where} unreachable ({cause})", reason="unreachable")
        if isinstance(exc, ValueError | openai.APIResponseValidationError):  # a body that is not JSON
            return LLMError(
                f"LLM endpoint {where} sent a response that is not valid JSON", reason="bad_response"
            )
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            detail = self._scrub(_error_detail(exc))
            if code == 401:
                if self.key_is_set:
                    msg = f"LLM endpoint {where} rejected the API key in ${env} (401): set a valid key in ${env}"
                else:
                    msg = f"LLM endpoint {where} needs an API key (401): ${env} is not set"
                return LLMError(msg, reason="auth", status_code=code)
            if code == 403:
                return LLMError(
                    f"LLM endpoint {where} refused the request (403, key in ${env}): {detail}",
                    reason="auth",
                    status_code=code,
                )
            if code == 404:
                return LLMError(
                    f"LLM endpoint {where}: model {model!r} not found (404): {detail}",
                    reason="not_found",
                    status_code=code,
                )
            if code == 429:
                return LLMError(
                    f"LLM endpoint {where} rate limited (429): {detail}",
                    reason="rate_limited",
                    status_code=code,
                    retry_after_s=_retry_after_s(exc),
                )
            if code >= 500 or code == 408:
                return LLMError(
                    f"LLM endpoint {where} server error ({code}): {detail}",
                    reason="server_error",
                    status_code=code,
                )
            return LLMError(
                f"LLM endpoint {where} rejected the request ({code}): {detail}",
                reason="bad_request",
                status_code=code,
            )
        return LLMError(
            f"LLM call to {where} failed: {type(exc).__name__}: {self._scrub(str(exc))}",
            reason="bad_response",
        )

    # -- llm-check ---------------------------------------------------------------------------------------------
    async def check(self, *, timeout_s: float = 30.0) -> str:
        """One tiny request, no retries, no cache. Returns one line on success; raises ``LLMCheckError`` with one
        line naming the cause and the fix otherwise."""
        model = self.pick_model()
        client, _ = self._bind()
        messages = [{"role": "user", "content": "Reply with the single word OK."}]
        try:
            reply = await self._call_once(client, model, messages, 0.0, 8, {}, timeout_s=timeout_s)
        except LLMError as err:
            message = str(err)
            if err.reason == "timeout":
                message = f"LLM endpoint {self.endpoint} did not answer within {timeout_s:g} s (timeout)"
            if err.reason == "unreachable":
                message += ": start the server or fix base_url (--llm-base-url)"
            if err.reason == "not_found":
                available = await self.list_models()
                message = f"LLM endpoint {self.endpoint}: model {model!r} not found (404)"
                if available:
                    message += f"; it serves: {', '.join(available[:20])}"
                message += " (set --llm-model)"
            raise LLMCheckError(message, reason=err.reason, status_code=err.status_code) from None
        return (
            f"LLM ok: {reply.model} at {self.endpoint} answered in {reply.latency_s:.2f} s "
            f"({reply.prompt_tokens}+{reply.completion_tokens} tokens)"
        )

    async def list_models(self) -> list[str]:
        """Model ids from ``/v1/models``, or [] where the server does not offer the list."""
        client, _ = self._bind()
        try:
            page = await client.models.list(timeout=10.0)
            return sorted([m.id async for m in page])
        except Exception:  # optional endpoint: any failure means "no list"
            return []


def _connection_cause(exc: BaseException) -> str:
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, socket.gaierror):
            return "host name not found (DNS)"
        if isinstance(node, ConnectionRefusedError):
            return "connection refused"
        if isinstance(node, ConnectionResetError):
            return "connection reset"
        node = node.__cause__ or node.__context__
    return "cannot connect"


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str):
            return inner[:300]
    return str(getattr(exc, "message", "") or exc)[:300]


def _retry_after_s(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
