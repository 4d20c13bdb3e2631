"""Shared by the navigation, stacking, fork, events and CLI tests: small summarizers and
sessions built through the public API (no mocks: real files or the memory log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessiontree import (
    AssistantMessage,
    Session,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiontree.messages import message_text
from sessiontree.summarize import CancelToken, SummaryFailed, SummaryRequest
from sessiontree.testing.generate import generate_session


class ListSummarizer:
    """Deterministic: the roles and texts of the messages, one per line; records its requests."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        self.requests.append(request)
        if cancel is not None:
            cancel.raise_if_cancelled()
        return "\n".join(f"{getattr(m, 'role', '?')}: {message_text(m, separator=' ')}"
                         for m in request.messages)


class FailingSummarizer:
    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        raise RuntimeError("the model is down")


class TypedFailingSummarizer:
    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        raise SummaryFailed("quota exceeded")


class EmptySummarizer:
    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        return "  \n"


class CancellingSummarizer:
    """Cancels the token while working (like a user pressing Escape), then honours it."""

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        assert cancel is not None
        cancel.cancel()
        cancel.raise_if_cancelled()
        return "never"


class IgnoringCancelSummarizer:
    """Cancels the token but returns text anyway: the caller must still write nothing."""

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        assert cancel is not None
        cancel.cancel()
        return "text that must not be written"


def user(text: str) -> UserMessage:
    return UserMessage.of(text)


def reply(text: str, *calls: ToolCall) -> AssistantMessage:
    content: list[Any] = [TextContent(text=text), *calls]
    return AssistantMessage(content=content, api="anthropic-messages", provider="anthropic",
                            model="claude-sonnet-4-5", stop_reason="toolUse" if calls else "stop")


def tool_result(call_id: str, name: str, text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)])


def branched(session: Session) -> dict[str, str]:
    """q1 a1 q2 a2(read, edit) r q3 a3, and a branch q2b a2b under a1. Returns ids by name."""
    ids: dict[str, str] = {}
    ids["q1"] = session.append_message(user("q1: build a CLI"))
    ids["a1"] = session.append_message(reply("a1: I'll create it"))
    ids["q2"] = session.append_message(user("q2: add a --verbose flag"))
    ids["a2"] = session.append_message(reply(
        "a2: reading and editing",
        ToolCall(id="c1", name="read", arguments={"path": "src/cli.js"}),
        ToolCall(id="c2", name="edit", arguments={"path": "src/flags.js", "oldText": "a",
                                                  "newText": "b"})))
    ids["r"] = session.append_message(tool_result("c1", "read", "file contents"))
    ids["q3"] = session.append_message(user("q3: actually use Python"))
    ids["a3"] = session.append_message(reply("a3: converting to Python"))
    session.branch(ids["a1"])
    ids["q2b"] = session.append_message(user("q2b: use Rust instead"))
    ids["a2b"] = session.append_message(reply("a2b: creating a Rust CLI"))
    return ids


def generate(out: Path, entries: int = 300, seed: int = 7, branch_every: int = 40,
             compact_every: int = 150) -> Path:
    """A realistic pi file from the repository's generator."""
    generate_session(out, entries, seed=seed, branch_every=branch_every,
                     compact_every=compact_every)
    return out
