"""A real OpenAI-compatible HTTP server on loopback, driven by a script: the LLM of the tests.

It speaks ``POST /v1/chat/completions`` and ``GET /v1/models`` over real sockets, so the code under test goes
through the real ``openai`` client (retries, timeouts, status codes) and nothing is mocked. Each chat request
takes the next step of the script:

- a string: the reply text;
- a callable ``f(messages) -> str | dict``: the reply depends on the prompt (e.g. repair the kernel it was
  sent); a dict it returns is taken as the step below (a scripted model can answer 429 or cut a reply short);
- a dict with one of ``reply``, ``status`` (429, 500, 401, ...; optional ``retry_after`` seconds),
  ``hang`` (seconds to wait before answering, then the reply in ``reply`` or a default), ``garbage`` (a 200
  whose body is not JSON); optional ``usage`` ({prompt_tokens, completion_tokens}), ``model``,
  ``finish_reason`` (``length``: the reply was cut at max_tokens; default ``stop``) and ``dribble_s`` (the
  body goes out in pieces over that many seconds: a slow stream). A request with ``"stream": true`` is answered
  as server-sent events, one chunk per piece, like a real endpoint streams.

When the script runs out, ``default`` answers (a string or callable); without one the server answers 500
with "script exhausted", so a test that sends more requests than it meant to fails loudly.

Every request is recorded (method, path, headers, JSON body) in ``server.requests``.

Standalone, for trying a campaign without any API key::

    python -m tests.fakellm --port 8011 --echo      # replies with the last python block of the prompt
    python -m tests.fakellm --port 8011 --kernels   # answers like a model, with honest Triton kernels
                                                    # (tests/kernelmodel.py): what the llm_loops ablation runs
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = str | Callable[[list[dict[str, Any]]], str] | Mapping[str, Any]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    time_s: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages", []))

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def echo_last_python_block(messages: list[dict[str, Any]]) -> str:
    """Reply with the last python block of the last user message (the parent, unchanged)."""
    text = ""
    for message in messages:
        if message.get("role") == "user":
            text = str(message.get("content", ""))
    blocks = _FENCE.findall(text)
    body = blocks[-1] if blocks else "# nothing to echo\n"
    return f"Here is the kernel.\n\n```python\n{body}```\n"


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class FakeLLMServer:
    """A scripted OpenAI-compatible server on ``127.0.0.1`` (port 0 by default: the OS picks a free one).

    Use as a context manager, or ``start()``/``stop()``. ``url`` is the ``base_url`` to give a client.
    ``api_key``: when set, a request whose bearer token differs gets 401 (like a real provider).
    ``strict_models``: a request for a model not in ``models`` gets 404 ``model_not_found``.
    ``only_under_v1``: as vLLM, Ollama and OpenAI, the API answers only under ``/v1/``; elsewhere 404.
    """

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        default: str | Callable[[list[dict[str, Any]]], Any] | None = None,
        models: Sequence[str] = ("fake-model",),
        api_key: str | None = None,
        strict_models: bool = False,
        only_under_v1: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._script: list[Step] = list(script)
        self.default = default
        self.models = list(models)
        self.api_key = api_key
        self.strict_models = strict_models
        self.only_under_v1 = only_under_v1
        self.requests: list[RecordedRequest] = []
        self.tokens_served = {"prompt_tokens": 0, "completion_tokens": 0}  # what the replies' usage said
        self.in_flight = 0
        self.max_in_flight = 0  # the most chat requests answered at once (a concurrency limit shows here)
        self._lock = threading.Lock()
        self._released = threading.Event()  # set on stop(): hangs end at once
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread: threading.Thread | None = None

    def _routed(self, path: str) -> bool:
        return not self.only_under_v1 or path.startswith("/v1/")

    # -- lifecycle -------------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeLLMServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="fakellm", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script ----------------------------------------------------------------------------------------------
    def push(self, *steps: Step) -> None:
        """Append steps to the script (tests that build it as they go)."""
        with self._lock:
            self._script.extend(steps)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _next_step(self) -> Step | None:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return self.default

    # -- HTTP ------------------------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle + delayed ACK add 40 ms per reply
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

            def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
                body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

            def _send_slowly(self, payload: dict[str, Any], dribble_s: float) -> None:
                """A 200 whose body arrives in pieces over ``dribble_s`` seconds (a slow upstream)."""
                body = json.dumps(payload).encode()
                pieces = [body[i:i + 64] for i in range(0, len(body), 64)]
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for piece in pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                        if server._released.wait(dribble_s / len(pieces)):
                            return
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _stream(self, reply: str, model: str, finish_reason: str, usage: dict[str, Any],
                        dribble_s: float) -> None:
                """Server-sent events as OpenAI-compatible servers stream: a chunk per piece, then [DONE]."""
                base = {"id": f"chatcmpl-fake{len(server.requests)}", "object": "chat.completion.chunk",
                        "created": int(time.time()), "model": model}
                pieces = _pieces(reply, 8)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for i, piece in enumerate(pieces):
                        delta = {"content": piece} if i else {"role": "assistant", "content": piece}
                        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        if dribble_s and server._released.wait(dribble_s / len(pieces)):
                            return
                    last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}],
                            "usage": usage}
                    self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
                    self.wfile.flush()
                    self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _record(self, body: dict[str, Any] | None) -> None:
                with server._lock:
                    server.requests.append(
                        RecordedRequest(
                            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )

            def _authorized(self) -> bool:
                if server.api_key is None:
                    return True
                if self.headers.get("Authorization", "") == f"Bearer {server.api_key}":
                    return True
                self._send(
                    401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
                )
                return False

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._record(None)
                if not self._authorized():
                    return
                if self.path.rstrip("/").endswith("/models") and server._routed(self.path):
                    data = [
                        {"id": m, "object": "model", "created": 0, "owned_by": "fakellm"}
                        for m in server.models
                    ]
                    self._send(200, {"object": "list", "data": data})
                else:
                    self._send(404, _error(f"no route {self.path}", "invalid_request_error", None))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = None
                self._record(body)
                if not self.path.rstrip("/").endswith("/chat/completions") or not server._routed(self.path):
                    self._send(404, _error(f"no route {self.path}", "invalid_request_error", None))
                    return
                if not self._authorized():
                    return
                if body is None:
                    self._send(400, _error("body is not JSON", "invalid_request_error", None))
                    return
                model = str(body.get("model", ""))
                if server.strict_models and model not in server.models:
                    self._send(
                        404,
                        _error(
                            f"The model '{model}' does not exist", "invalid_request_error", "model_not_found"
                        ),
                    )
                    return
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(body, server._next_step())
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, body: dict[str, Any], step: Step | None) -> None:
                messages = list(body.get("messages", []))
                if step is None:
                    self._send(500, _error("fakellm: script exhausted", "server_error", None))
                    return
                if callable(step) and not isinstance(step, Mapping):
                    answer = step(messages)
                    step = answer if isinstance(answer, Mapping) else {"reply": str(answer)}
                if isinstance(step, Mapping):
                    if "hang" in step:
                        server._released.wait(float(step["hang"]))
                    if "status" in step:
                        headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else None
                        message = step.get("message", f"fakellm fault {step['status']}")
                        self._send(int(step["status"]), _error(message, "fake_fault", None), headers)
                        return
                    if step.get("garbage"):
                        self._send(200, b"<html>502 Bad Gateway: upstream sent garbage</html>")
                        return
                    reply = step.get("reply", "")
                    if callable(reply):
                        reply = reply(messages)
                    usage = step.get("usage")
                    model = step.get("model", body.get("model", "fake-model"))
                    finish_reason = str(step.get("finish_reason", "stop"))
                    dribble_s = float(step.get("dribble_s", 0.0))
                else:
                    reply, usage, model = str(step), None, body.get("model", "fake-model")
                    finish_reason, dribble_s = "stop", 0.0
                prompt_text = "".join(str(m.get("content", "")) for m in messages)
                usage = dict(usage or {})
                usage.setdefault("prompt_tokens", _approx_tokens(prompt_text))
                usage.setdefault("completion_tokens", _approx_tokens(str(reply)))
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                with server._lock:
                    server.tokens_served["prompt_tokens"] += usage["prompt_tokens"]
                    server.tokens_served["completion_tokens"] += usage["completion_tokens"]
                if body.get("stream"):
                    self._stream(str(reply), str(model), finish_reason, usage, dribble_s)
                    return
                (self._send_slowly if dribble_s else lambda payload, _: self._send(200, payload))(
                    {
                        "id": f"chatcmpl-fake{len(server.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": str(reply)},
                                "finish_reason": finish_reason,
                            }
                        ],
                        "usage": usage,
                    },
                    dribble_s,
                )

        return Handler


def _error(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port (0: any free port)")
    parser.add_argument("--reply", action="append", default=[], help="a reply, in order (repeatable)")
    parser.add_argument(
        "--echo", action="store_true", help="after the replies, echo the prompt's last python block"
    )
    parser.add_argument(
        "--kernels", action="store_true",
        help="after the replies, answer like a model with Triton kernels (tests/kernelmodel.py)",
    )
    parser.add_argument(
        "--model", action="append", default=[], help="model id served by /v1/models (repeatable)"
    )
    args = parser.parse_args(argv)
    default: Callable[[list[dict[str, Any]]], Any] | None = None
    if args.kernels:
        from tests.kernelmodel import KernelModel

        default = KernelModel()
    elif args.echo or not args.reply:
        default = echo_last_python_block
    server = FakeLLMServer(args.reply, default=default, models=args.model or ["fake-model"], port=args.port)
    with server:
        print(f"fakellm serving {server.url} (Ctrl-C stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
