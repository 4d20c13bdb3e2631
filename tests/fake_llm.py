"""A real HTTP server on 127.0.0.1 that speaks the OpenAI Chat Completions and Responses and the
Anthropic Messages protocols, for testing the summarizer and model adapters without mocks.

It validates each request as the real APIs do (path, authentication and version headers,
content type, and the body against the provider SDK's own request types, unknown keys
forbidden) and answers with the APIs' response shapes, as one JSON answer or, when the request
says ``"stream": true``, as the APIs' server-sent events. Tests script what the next answers
are: text, thinking and tool calls, an error status with the provider's error body and headers,
a delay (for timeouts and cancellation), slow chunks, a stream held open after some events until
the client hangs up (for cancelling a reply mid-stream without racing its end), a connection that
breaks mid-stream, an empty or malformed answer; unscripted requests succeed.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_KEY = "sk-test-openai-0123456789"
ANTHROPIC_KEY = "sk-ant-test-0123456789"
ANTHROPIC_VERSION = "2023-06-01"
HOLD_LIMIT = 120.0  # a held stream is cut after this long, so a client that never hangs up fails


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
        thinking: reasoning to stream before the text (streamed answers).
        tool_calls: ``(name, arguments)`` of tool calls the model makes after the text.
        chunk_delay: seconds between streamed chunks (cut short when the server is released).
        break_after: a stream is cut (the connection closed) after this many events.
        hold_after: a stream stops after this many events and stays open until the client hangs
            up (then ``FakeLLM.hung_up`` is set), the server is released or ``HOLD_LIMIT``
            seconds pass (then the connection is cut); it never finishes.
        usage: ``(input, output, cached input)`` token counts reported.
    """

    status: int = 200
    text: str | None = None
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None
    thinking: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    chunk_delay: float = 0.0
    break_after: int | None = None
    hold_after: int | None = None
    usage: tuple[int, int, int] = (812, 64, 0)


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
        self.hung_up = threading.Event()
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


def _sdk_problem(api: str, body: Any) -> str | None:
    """What the provider SDK's request types reject in ``body`` (stream flags aside), or None."""
    import pydantic

    from .sdk_payloads import check

    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request."
    plain = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    try:
        check(api, plain)  # type: ignore[arg-type]
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        return f"Invalid request: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return None


def _validate_openai(headers: dict[str, str], body: Any, api: str) -> str | None:
    if headers.get("authorization") != f"Bearer {OPENAI_KEY}":
        return "Incorrect API key provided."
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    if api == "openai_chat" and not body.get("messages"):
        return "'messages' is a required property"
    return _sdk_problem(api, body)


def _validate_anthropic(headers: dict[str, str], body: Any,
                        beta: bool = False) -> tuple[int, str, str] | None:
    if headers.get("x-api-key") != ANTHROPIC_KEY:
        return 401, "authentication_error", "invalid x-api-key"
    if headers.get("anthropic-version") != ANTHROPIC_VERSION:
        return 400, "invalid_request_error", "anthropic-version: header is required"
    if not isinstance(body, dict):
        return 400, "invalid_request_error", "invalid JSON body"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or messages[0].get("role") != "user":
        return 400, "invalid_request_error", "messages: first message must use the user role"
    problem = _sdk_problem("anthropic_beta" if beta else "anthropic", body)
    return (400, "invalid_request_error", problem) if problem else None


def _chunks(text: str, size: int = 8) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or []


def _chat_events(body: Any, reply: Reply, text: str) -> list[Any]:
    base = {"id": "chatcmpl-9fake0000000000000000000", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": body["model"], "system_fingerprint": "fp_fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}

    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": c}) for c in _chunks(reply.thinking or "")]
    events += [chunk({"content": c}) for c in _chunks(text)]
    for index, (name, arguments) in enumerate(reply.tool_calls):
        args = json.dumps(arguments)
        events.append(chunk({"tool_calls": [{"index": index, "id": f"call_fake{index}", "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": c}}]})
                   for c in _chunks(args)]
    events.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    prompt, output, cached = reply.usage
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**base, "choices": [], "usage": {
            "prompt_tokens": prompt + cached, "completion_tokens": output,
            "total_tokens": prompt + cached + output,
            "prompt_tokens_details": {"cached_tokens": cached}}})
    events.append("[DONE]")
    return events


def _responses_events(body: Any, reply: Reply, text: str) -> list[Any]:
    response = {"id": "resp_fake0001", "object": "response", "model": body["model"],
                "status": "in_progress", "output": []}
    events: list[Any] = [{"type": "response.created", "response": response}]
    index = 0
    if reply.thinking:
        item = {"type": "reasoning", "id": "rs_fake0001", "summary": [], "encrypted_content": "ENC"}
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events += [{"type": "response.reasoning_summary_text.delta", "output_index": index,
                    "summary_index": 0, "delta": c} for c in _chunks(reply.thinking)]
        done = {**item, "summary": [{"type": "summary_text", "text": reply.thinking}]}
        events.append({"type": "response.output_item.done", "output_index": index, "item": done})
        index += 1
    if text:
        item = {"type": "message", "id": "msg_fake0001", "role": "assistant", "status": "in_progress",
                "content": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events += [{"type": "response.output_text.delta", "output_index": index, "content_index": 0,
                    "item_id": "msg_fake0001", "delta": c} for c in _chunks(text)]
        done = {**item, "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        events.append({"type": "response.output_item.done", "output_index": index, "item": done})
        index += 1
    for n, (name, arguments) in enumerate(reply.tool_calls):
        item = {"type": "function_call", "id": f"fc_fake{n}", "call_id": f"call_fake{n}", "name": name,
                "arguments": "", "status": "in_progress"}
        args = json.dumps(arguments)
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events += [{"type": "response.function_call_arguments.delta", "output_index": index,
                    "item_id": item["id"], "delta": c} for c in _chunks(args)]
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": {**item, "arguments": args, "status": "completed"}})
        index += 1
    prompt, output, cached = reply.usage
    events.append({"type": "response.completed", "response": {
        **response, "status": "completed", "usage": {
            "input_tokens": prompt + cached, "output_tokens": output,
            "total_tokens": prompt + cached + output,
            "input_tokens_details": {"cached_tokens": cached}}}})
    return events


def _message_id() -> str:
    """A new message id for each answer, as the API gives (clients merge what shares one)."""
    return f"msg_01Fake{next(_ANSWERS):018d}"


def _tool_use_id(message_id: str, n: int) -> str:
    """The id of an answer's ``n``-th tool call, unique across answers as the API's are."""
    return f"toolu_fake{message_id[-6:]}{n}"


_ANSWERS = itertools.count(1)


def _anthropic_events(body: Any, reply: Reply, text: str) -> list[Any]:
    prompt, output, cached = reply.usage
    message_id = _message_id()
    events: list[Any] = [{"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant",
        "model": body["model"], "content": [], "stop_reason": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1, "cache_read_input_tokens": cached,
                  "cache_creation_input_tokens": 0}}}]
    index = 0
    if reply.thinking:
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "thinking", "thinking": ""}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "thinking_delta", "thinking": c}} for c in _chunks(reply.thinking)]
        events.append({"type": "content_block_delta", "index": index,
                       "delta": {"type": "signature_delta", "signature": "SIGfake"}})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    if text:
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": c}} for c in _chunks(text)]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for n, (name, arguments) in enumerate(reply.tool_calls):
        events.append({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": _tool_use_id(message_id, n), "name": name, "input": {}}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": c}}
                   for c in _chunks(json.dumps(arguments))]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append({"type": "message_delta", "delta": {
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": output}})
    events.append({"type": "message_stop"})
    return events


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

        def _stream(self, events: list[Any], reply: Reply, named: bool) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.close_connection = True
            for number, event in enumerate(events):
                if reply.break_after is not None and number >= reply.break_after:
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                if reply.hold_after is not None and number >= reply.hold_after:
                    self._hold()
                    return
                if reply.chunk_delay and number:
                    if state.release.wait(reply.chunk_delay):
                        return
                if event == "[DONE]":
                    frame = "data: [DONE]\n\n"
                elif named:
                    frame = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                else:
                    frame = f"data: {json.dumps(event)}\n\n"
                try:
                    self.wfile.write(frame.encode())
                    self.wfile.flush()
                except OSError:
                    return

        def _hold(self) -> None:
            """Keep the stream open, sending nothing, until the client closes its end."""
            deadline = time.monotonic() + HOLD_LIMIT
            while not state.release.is_set() and time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable:
                    try:
                        closed = not self.connection.recv(1, socket.MSG_PEEK)
                    except OSError:
                        closed = True
                    if closed:
                        state.hung_up.set()
                        return
                    state.release.wait(0.05)  # the client sent more: not a hang-up

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
                    self._openai(headers, body, reply, "openai_chat")
                elif self.path == "/v1/responses":
                    self._openai(headers, body, reply, "openai_responses")
                elif self.path in ("/v1/messages", "/v1/messages?beta=true"):
                    self._anthropic(headers, body, reply, beta=self.path.endswith("beta=true"))
                else:
                    self._send(404, {"error": {"message": f"Unknown path {self.path}",
                                               "type": "invalid_request_error"}})
            finally:
                state.finished.set()

        def _openai(self, headers: dict[str, str], body: Any, reply: Reply, api: str) -> None:
            if headers.get("content-type", "").split(";")[0] != "application/json":
                self._send(415, {"error": {"message": "Unsupported content type",
                                           "type": "invalid_request_error"}})
                return
            problem = _validate_openai(headers, body, api)
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
            if body.get("stream"):
                events = (_chat_events if api == "openai_chat" else _responses_events)(body, reply, text)
                self._stream(events, reply, named=api == "openai_responses")
                return
            message: dict[str, Any] = {"role": "assistant", "content": text or None,
                                       "refusal": None}
            if reply.tool_calls:
                message["tool_calls"] = [
                    {"id": f"call_fake{index}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(arguments)}}
                    for index, (name, arguments) in enumerate(reply.tool_calls)]
            prompt, output, cached = reply.usage
            self._send(200, {
                "id": "chatcmpl-9fake0000000000000000000",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
                "usage": {"prompt_tokens": prompt + cached, "completion_tokens": output,
                          "total_tokens": prompt + cached + output,
                          "prompt_tokens_details": {"cached_tokens": cached}},
                "system_fingerprint": "fp_fake",
            }, reply.headers)

        def _anthropic(self, headers: dict[str, str], body: Any, reply: Reply, *,
                       beta: bool = False) -> None:
            problem = _validate_anthropic(headers, body, beta)
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
            if body.get("stream"):
                self._stream(_anthropic_events(body, reply, text), reply, named=True)
                return
            content = [{"type": "text", "text": text}] if text else []
            self._send(200, {
                "id": _message_id(),
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


def chat_model(server: FakeLLM, **options: Any) -> Any:
    """An :class:`~sessiontree.providers.OpenAIChatModel` (gpt-4.1) talking to ``server``."""
    from sessiontree.providers import OpenAIChatModel

    options.setdefault("backoff", 0.0)
    return OpenAIChatModel("gpt-4.1", api_key=OPENAI_KEY, base_url=f"{server.url}/v1", **options)


def responses_model(server: FakeLLM, **options: Any) -> Any:
    """An :class:`~sessiontree.providers.OpenAIResponsesModel` (gpt-5) talking to ``server``."""
    from sessiontree.providers import OpenAIResponsesModel

    options.setdefault("backoff", 0.0)
    return OpenAIResponsesModel("gpt-5", api_key=OPENAI_KEY, base_url=f"{server.url}/v1", **options)


def anthropic_model(server: FakeLLM, **options: Any) -> Any:
    """An :class:`~sessiontree.providers.AnthropicModel` (claude-sonnet-4-5) talking to ``server``."""
    from sessiontree.providers import AnthropicModel

    options.setdefault("backoff", 0.0)
    return AnthropicModel("claude-sonnet-4-5", api_key=ANTHROPIC_KEY, base_url=server.url, **options)
