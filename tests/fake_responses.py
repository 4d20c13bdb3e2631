"""A real HTTP server on 127.0.0.1 speaking the OpenAI Responses API (``POST /v1/responses``),
for running the OpenAI Agents SDK against it without mocks.

It checks what the real API checks first (path, bearer key, JSON body with ``model`` and an
``input`` array whose items have a known shape) and answers with the API's response object.
Tests script the output items of each next answer and read back every request's ``input``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-test-agents-0123456789"

_ITEM_TYPES = {"message", "function_call", "function_call_output", "reasoning", "web_search_call",
               "item_reference"}


def _bad_item(item: Any) -> str | None:
    if not isinstance(item, dict):
        return "input items must be objects"
    kind = item.get("type", "message")
    if kind not in _ITEM_TYPES:
        return f"Invalid value: '{kind}'."
    if kind == "message" and item.get("role") not in ("user", "assistant", "system", "developer"):
        return f"Invalid value: '{item.get('role')}'. Supported values are: 'user', 'assistant'..."
    if kind == "function_call_output" and not isinstance(item.get("call_id"), str):
        return "Missing required parameter: 'input[].call_id'."
    return None


class FakeResponses:
    """Scripted answers (lists of output items), and the request bodies received."""

    def __init__(self) -> None:
        self.script: deque[list[dict[str, Any]]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       kwargs={"poll_interval": 0.05})
        self.count = 0

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def then(self, *outputs: list[dict[str, Any]]) -> FakeResponses:
        self.script.extend(outputs)
        return self

    def start(self) -> FakeResponses:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(body)
            self.count += 1
            output = self.script.popleft() if self.script else [text("(unscripted)")]
            number = self.count
        return {"id": f"resp_{number:04d}", "object": "response", "created_at": 1731000000 + number,
                "status": "completed", "error": None, "incomplete_details": None,
                "instructions": body.get("instructions"), "max_output_tokens": None,
                "model": body["model"], "output": output, "parallel_tool_calls": True,
                "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
                "store": False, "temperature": 1.0, "text": {"format": {"type": "text"}},
                "tool_choice": "auto", "tools": body.get("tools", []), "top_p": 1.0,
                "truncation": "disabled", "metadata": {},
                "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 60}}


def text(content: str, item_id: str = "msg_x") -> dict[str, Any]:
    """An assistant output message item."""
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": content, "annotations": []}]}


def call(name: str, arguments: dict[str, Any], call_id: str, item_id: str) -> dict[str, Any]:
    """A function call output item."""
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
            "arguments": json.dumps(arguments), "status": "completed"}


def reasoning(summary: str, item_id: str) -> dict[str, Any]:
    """A reasoning output item with an encrypted payload only the API could read."""
    return {"type": "reasoning", "id": item_id, "encrypted_content": f"gAAAA-{item_id}-opaque",
            "summary": [{"type": "summary_text", "text": summary}]}


def _handler(state: FakeResponses) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "invalid_request_error",
                                          "param": None, "code": None}})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            if self.path != "/v1/responses":
                return self._error(404, f"Unknown request URL: POST {self.path}")
            if self.headers.get("authorization") != f"Bearer {API_KEY}":
                return self._error(401, "Incorrect API key provided.")
            try:
                body = json.loads(raw)
            except ValueError:
                return self._error(400, "We could not parse the JSON body of your request.")
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                return self._error(400, "Missing required parameter: 'model'.")
            items = body.get("input")
            if not isinstance(items, list):
                return self._error(400, "Invalid type for 'input': expected an array.")
            for item in items:
                problem = _bad_item(item)
                if problem is not None:
                    return self._error(400, problem)
            if body.get("stream"):
                return self._error(400, "this fake server does not stream")
            self._send(200, state.answer(body))
            return None

    return Handler
