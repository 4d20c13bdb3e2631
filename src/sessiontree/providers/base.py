"""The model protocol the agent talks to, and the streaming machinery the HTTP adapters share.

A :class:`Model` takes a :class:`ModelRequest` (context messages, system prompt, tools) and
returns one finished :class:`~sessiontree.messages.AssistantMessage`, delivering
:class:`StreamDelta` values to a callback while the answer streams in. The message it returns
is complete (usage and cost filled from the offline price table, ``stopReason`` mapped to pi's
values); a request that fails raises :class:`~._http.ModelRequestFailed`, a cancelled one
:class:`~._http.ModelRequestCancelled`, and no partial message is ever returned.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from ..messages import (
    AgentMessage,
    AssistantMessage,
    Cost,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownMessage,
    Usage,
)
from ..summarize.base import CancelToken
from ._common import ToolSpec
from ._http import HttpClient

__all__ = [
    "Assembly", "DeltaCallback", "HttpModel", "Model", "ModelRequest", "StreamDelta",
    "parse_arguments", "priced_usage",
]


@dataclass(frozen=True)
class ModelRequest:
    """What to ask a model.

    Attributes:
        messages: the context messages, oldest first (any role; converted per API).
        system: the system prompt, if any.
        tools: the tools the model may call.
        max_tokens: the output budget, if any.
    """

    messages: Sequence[AgentMessage | UnknownMessage]
    system: str | None = None
    tools: Sequence[ToolSpec] = ()
    max_tokens: int | None = None


@dataclass(frozen=True)
class StreamDelta:
    """A piece of an answer as it streams in.

    Attributes:
        kind: ``text``, ``thinking``, or ``tool_call`` (``text`` is then a fragment of the
            call's JSON arguments and ``name`` the tool's name).
        text: the new text.
        index: the content block the piece belongs to.
        name: the tool name of a ``tool_call`` piece.
    """

    kind: Literal["text", "thinking", "tool_call"]
    text: str
    index: int = 0
    name: str = ""


DeltaCallback = Callable[[StreamDelta], None]


@runtime_checkable
class Model(Protocol):
    """A chat model the agent can call (the HTTP adapters, or a test double)."""

    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def api(self) -> str: ...

    async def astream(self, request: ModelRequest, on_delta: DeltaCallback | None = None,
                      cancel: CancelToken | None = None) -> AssistantMessage:
        """Ask the model; deliver deltas to ``on_delta``; return the finished reply.

        Raises:
            ModelRequestFailed: the request failed or the answer could not be read.
            ModelRequestCancelled: ``cancel`` was cancelled.
        """


def priced_usage(provider: str, model: str, *, input: int = 0, output: int = 0,
                 cache_read: int = 0, cache_write: int = 0) -> Usage:
    """pi's usage record for a reply, its cost from sessiontree's offline price table (zero
    when the table does not know the model)."""
    from ..optree.pricing import builtin_prices, cost_of
    from ..optree.model import Usage as OpUsage

    cost = Cost()
    prices = builtin_prices().lookup(provider, model)
    if prices is not None:
        parts = [float(cost_of(OpUsage(input=input), prices)),
                 float(cost_of(OpUsage(output=output), prices)),
                 float(cost_of(OpUsage(cache_read=cache_read), prices)),
                 float(cost_of(OpUsage(cache_write=cache_write), prices))]
        total = cost_of(OpUsage(input=input, output=output, cache_read=cache_read,
                                cache_write=cache_write), prices)
        cost = Cost(input=parts[0], output=parts[1], cache_read=parts[2], cache_write=parts[3],
                    total=float(total))
    return Usage(input=input, output=output, cache_read=cache_read, cache_write=cache_write,
                 total_tokens=input + output + cache_read + cache_write, cost=cost)


@dataclass
class _Block:
    kind: Literal["text", "thinking", "tool_call"]
    text: str = ""
    signature: str | None = None
    redacted: bool = False
    call_id: str = ""
    name: str = ""


@dataclass
class Assembly:
    """A reply being put together from stream events, block by block, in arrival order.

    Adapters open blocks under their own keys (an output index, a content index) and append
    to them; :meth:`message` builds the finished reply.
    """

    on_delta: DeltaCallback | None
    blocks: list[_Block] = field(default_factory=list)
    keys: dict[Any, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop: StopReason = "stop"
    response_id: str | None = None
    response_model: str | None = None
    finished: bool = False
    """Set by the adapter on the stream's final event; a stream that ends without it broke off."""

    def open(self, key: Any, kind: Literal["text", "thinking", "tool_call"], *,
             call_id: str = "", name: str = "") -> _Block:
        self.keys[key] = len(self.blocks)
        block = _Block(kind, call_id=call_id, name=name)
        self.blocks.append(block)
        return block

    def block(self, key: Any, kind: Literal["text", "thinking", "tool_call"]) -> _Block:
        """The block under ``key``, opened when there is none yet."""
        index = self.keys.get(key)
        return self.blocks[index] if index is not None else self.open(key, kind)

    def add(self, key: Any, kind: Literal["text", "thinking", "tool_call"], text: str) -> None:
        """Append streamed text to a block and tell the callback."""
        if not text:
            return
        block = self.block(key, kind)
        block.text += text
        if self.on_delta is not None:
            self.on_delta(StreamDelta(kind, text, self.keys[key], block.name))

    def message(self, api: str, provider: str, model: str) -> AssistantMessage:
        content: list[TextContent | ThinkingContent | ToolCall] = []
        for block in self.blocks:
            if block.kind == "text":
                text = TextContent(text=block.text)
                if block.signature:
                    text.text_signature = block.signature
                content.append(text)
            elif block.kind == "thinking":
                thinking = ThinkingContent(thinking=block.text)
                if block.signature:
                    thinking.thinking_signature = block.signature
                if block.redacted:
                    thinking.redacted = True
                content.append(thinking)
            else:
                content.append(ToolCall(id=block.call_id, name=block.name,
                                        arguments=parse_arguments(block.text)))
        stop = self.stop
        if stop == "stop" and any(isinstance(b, ToolCall) for b in content):
            stop = "toolUse"
        message = AssistantMessage(content=content, api=api, provider=provider, model=model,
                                   usage=priced_usage(provider, model, **self.usage),
                                   stop_reason=stop)
        if self.response_id:
            message.response_id = self.response_id
        if self.response_model and self.response_model != model:
            message.response_model = self.response_model
        return message


def parse_arguments(text: str) -> dict[str, Any]:
    """Streamed tool call arguments as an object; text that is not a JSON object is kept under
    ``"_invalid_json"`` so the tool runner can report it to the model."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"_invalid_json": text}
    return value if isinstance(value, dict) else {"_invalid_json": text}


class HttpModel(HttpClient):
    """The shared part of the HTTP model adapters: a subclass sets :attr:`api`, :attr:`path`
    and :meth:`build` (the request, from :mod:`sessiontree.providers`' conversions) and
    implements :meth:`read` (stream events into an :class:`Assembly`). Constructor
    arguments: :class:`~sessiontree.providers._http.HttpClient`, plus ``max_tokens`` (the
    default output budget) and ``provider`` (the provider recorded on replies, for a
    compatible server; the price table looks models up under it)."""

    api: ClassVar[str] = ""
    path: ClassVar[str] = ""

    def __init__(self, model: str, *, max_tokens: int | None = None, provider: str | None = None,
                 **options: Any) -> None:
        super().__init__(model, **options)
        self.max_tokens = max_tokens
        if provider:
            self.provider = provider  # type: ignore[misc]

    build: Callable[..., dict[str, Any]]
    """The API's request builder (``staticmethod(chat_request)``...)."""

    stream_fields: ClassVar[dict[str, Any]] = {"stream": True}
    """What makes the request a stream."""

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The streaming request body."""
        body = self.build(request.messages, model=self.model, provider=self.provider,
                          system=request.system, tools=request.tools,
                          max_tokens=request.max_tokens)
        body.update(self.stream_fields)
        return body

    async def read(self, events: AsyncIterator[tuple[str | None, Any]], into: Assembly) -> None:
        """Fold the stream's events into ``into``.

        Raises:
            ModelRequestFailed: the stream reported an error.
        """
        raise NotImplementedError

    async def astream(self, request: ModelRequest, on_delta: DeltaCallback | None = None,
                      cancel: CancelToken | None = None) -> AssistantMessage:
        """See :class:`Model`."""
        if request.max_tokens is None and self.max_tokens is not None:
            request = ModelRequest(request.messages, request.system, request.tools, self.max_tokens)
        body = self.body(request)
        if self.temperature is not None:
            body["temperature"] = self.temperature
        assembly = Assembly(on_delta)

        async def run() -> AssistantMessage:
            await self.read(self.stream_events(self.path, body), assembly)
            if not assembly.finished:
                raise self.failed(f"the {self.provider} stream ended before the answer was "
                                  f"complete (no final event)")
            return assembly.message(self.api, self.provider, self.model)

        return await self.cancellable(run(), cancel, f"the {self.provider} request")

    def stream(self, request: ModelRequest, on_delta: DeltaCallback | None = None,
               cancel: CancelToken | None = None) -> AssistantMessage:
        """:meth:`astream` for sync code (in a private event loop)."""
        from ..events import _run_coroutine

        return _run_coroutine(self.astream(request, on_delta, cancel))  # type: ignore[no-any-return]

    def error_in(self, data: Any) -> None:
        """Raise :attr:`failed` for an error event."""
        raise self.failed(f"{self.provider} model {self.model} reported an error: "
                          f"{self.error_message(data) or json.dumps(data)[:300]}")

