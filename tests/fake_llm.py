"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions and Anthropic messages
protocols, for testing the summarizer adapters without mocks.

It validates each request as the real APIs do (path, authentication and version headers,
content type, body shape) and answers with the APIs' response shapes. Tests script what the
next answers are: an error status with the provider's error body and headers, a delay (for
timeouts and cancellation), an empty or malformed answer; unscripted requests succeed.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_KEY = "sk-test-openai-0123456789"
ANTHROPIC_KEY = "sk-ant-test-0123456789"
ANTHROPIC_VERSION = "2023-06-01"


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        status: the HTTP status.
        text: the summary text of a successful answer (``None``: derived from the prompt).
        error: the error message of an error answer.
        headers: extra response headers (``Retry-After``...).
        delay: seconds to wait before answering (cut short when the server is released).
        raw: a raw body to send instead of JSON.
    """

    status: int = 200
    text: str | None = None
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None


@dataclass
class Seen:
    """A request as the server received it."""

    path: str
    headers: dict[str, str]
    body: Any


class FakeLLM:
    """The server's state: scripted replies, received requests, events for synchronisation."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.received = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def then(self, *replies: Reply) -> FakeLLM:
        self.script.extend(replies)
        return self

    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def next_reply(self) -> Reply:
        with self.lock:
            return self.script.popleft() if self.script else Reply()


def _prompt_user_text(body: Any, anthropic: bool) -> str:
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content if b.get("type") == "text")
    return ""


def _default_summary(prompt: str) -> str:
    """A plausible summary that quotes the transcript's first user line (so tests can see the
    transcript reached the server)."""
    first = next((line[len("[User]: "):] for line in prompt.splitlines() if line.startswith("[User]: ")),
                 "(no user message)")
    return f"## Goal\n- {first}\n\n## Progress\n### Done\n- [x] summarized by the fake model"


def _validate_openai(headers: dict[str, str], body: Any) -> str | None:
    if headers.get("authorization") != f"Bearer {OPENAI_KEY}":
        return "Incorrect API key provided."
    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request."
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' is a required property"
    for message in messages:
        if message.get("role") not in ("system", "developer", "user", "assistant") or \
                not isinstance(message.get("content"), (str, list)):
            return f"Invalid message: {message!r}"
    budget = body.get("max_tokens", body.get("max_completion_tokens"))
    if not isinstance(budget, int) or budget < 1:
        return "max_tokens must be a positive integer"
    return None


def _validate_anthropic(headers: dict[str, str], body: Any) -> tuple[int, str, str] | None:
    if headers.get("x-api-key") != ANTHROPIC_KEY:
        return 401, "authentication_error", "invalid x-api-key"
    if headers.get("anthropic-version") != ANTHROPIC_VERSION:
        return 400, "invalid_request_error", "anthropic-version: header is required"
    if not isinstance(body, dict):
        return 400, "invalid_request_error", "invalid JSON body"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return 400, "invalid_request_error", "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return 400, "invalid_request_error", "max_tokens: Field required"
    if "system" in body and not isinstance(body["system"], (str, list)):
        return 400, "invalid_request_error", "system: Input should be a valid string"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or messages[0].get("role") != "user":
        return 400, "invalid_request_error", "messages: first message must use the user role"
    return None


def _handler(state: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fake-llm/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None,
                  raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json" if raw is None else "text/plain")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            state.requests.append(Seen(self.path, headers, body))
            state.received.set()
            reply = state.next_reply()
            if reply.delay:
                state.release.wait(reply.delay)
            try:
                if self.path == "/v1/chat/completions":
                    self._openai(headers, body, reply)
                elif self.path == "/v1/messages":
                    self._anthropic(headers, body, reply)
                else:
                    self._send(404, {"error": {"message": f"Unknown path {self.path}",
                                               "type": "invalid_request_error"}})
            finally:
                state.finished.set()

        def _openai(self, headers: dict[str, str], body: Any, reply: Reply) -> None:
            if headers.get("content-type", "").split(";")[0] != "application/json":
                self._send(415, {"error": {"message": "Unsupported content type",
                                           "type": "invalid_request_error"}})
                return
            problem = _validate_openai(headers, body)
            if problem is not None:
                status = 401 if "API key" in problem else 400
                self._send(status, {"error": {"message": problem, "type": "invalid_request_error",
                                              "param": None, "code": None}})
                return
            if reply.raw is not None:
                self._send(reply.status, None, reply.headers, reply.raw)
                return
            if reply.status != 200:
                kind = "rate_limit_exceeded" if reply.status == 429 else "server_error"
                self._send(reply.status, {"error": {"message": reply.error or kind, "type": kind,
                                                    "param": None, "code": kind}}, reply.headers)
                return
            text = reply.text if reply.text is not None else \
                _default_summary(_prompt_user_text(body, anthropic=False))
            self._send(200, {
                "id": "chatcmpl-9fake0000000000000000000",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                                                     "refusal": None},
                             "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876},
                "system_fingerprint": "fp_fake",
            }, reply.headers)

        def _anthropic(self, headers: dict[str, str], body: Any, reply: Reply) -> None:
            problem = _validate_anthropic(headers, body)
            if problem is not None:
                status, kind, message = problem
                self._send(status, {"type": "error", "error": {"type": kind, "message": message}})
                return
            if reply.raw is not None:
                self._send(reply.status, None, reply.headers, reply.raw)
                return
            if reply.status != 200:
                kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(reply.status, "api_error")
                self._send(reply.status, {"type": "error", "error": {
                    "type": kind, "message": reply.error or kind}}, reply.headers)
                return
            text = reply.text if reply.text is not None else \
                _default_summary(_prompt_user_text(body, anthropic=True))
            content = [{"type": "text", "text": text}] if text else []
            self._send(200, {
                "id": "msg_01FakeFakeFakeFakeFakeFake",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 812, "output_tokens": 64,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            }, reply.headers)

    return Handler
