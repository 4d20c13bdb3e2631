"""Messages are checked at the edge: a wrong shape raises ``InvalidMessage`` naming the field and
writes nothing; the ``of()`` constructors cover an agent loop without raw dicts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sessiontree import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    InvalidEntry,
    InvalidMessage,
    Session,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    convert_to_llm,
    validate_message,
)
from sessiontree._codec import message_line
from sessiontree._json import dumps, loads, type_facts
from sessiontree.messages import stored_message


@pytest.mark.parametrize(("make", "field"), [
    (lambda: UserMessage.of(123), "content[0].text"),
    (lambda: UserMessage.of("look", "not an image"), "content[1]"),
    (lambda: AssistantMessage.of(tool_calls=[ToolCall(id="c1", name="ls", arguments="-la")]),
     "content[0].arguments"),
    (lambda: AssistantMessage.of("hi", model=7), "model"),
    (lambda: ToolResultMessage.of("c1", "out"), "toolName"),
    (lambda: ToolResultMessage.of(ToolCall(id="c1", name="ls", arguments={}), 42), "content"),
])
def test_of_constructors_refuse_wrong_types_naming_the_field(make: Any, field: str) -> None:
    with pytest.raises(InvalidMessage) as caught:
        make()
    assert caught.value.field == field
    assert isinstance(caught.value, InvalidEntry)  # one family: callers catching InvalidEntry still do
    assert ".of()" in str(caught.value)


@pytest.mark.parametrize(("message", "field"), [
    ({"role": "user", "content": 123}, "content"),
    ({"role": "user", "content": [{"type": "text", "text": None}]}, "content[0].text"),
    ({"role": "user", "content": [{"type": "txt", "text": "typo"}]}, "content[0].type"),
    ({"role": "user", "content": "hi", "timestamp": "yesterday"}, "timestamp"),
    ({"role": "assistant", "content": [{"type": "toolCall", "id": "c", "name": "ls"}]},
     "content[0].arguments"),
    ({"role": "assistant", "content": [], "stopReason": "done"}, "stopReason"),
    ({"role": "toolResult", "toolName": "ls", "content": []}, "toolCallId"),
    ({"role": "toolResult", "toolCallId": "c", "toolName": "ls", "content": "out"}, "content"),
    ({"role": "custom", "content": "x"}, "customType"),
])
def test_malformed_dict_messages_raise_and_write_nothing(tmp_path: Path, message: dict[str, Any],
                                                         field: str) -> None:
    with Session.create(tmp_path) as session:
        first = session.append_message(UserMessage.of("q"))
        size = os.path.getsize(session.file or "")
        with pytest.raises(InvalidMessage) as caught:
            session.append_message(message)
        assert caught.value.field == field
        assert f"invalid {message['role']} message" in str(caught.value)
        assert (session.leaf_id, os.path.getsize(session.file or "")) == (first, size)
        assert len(session) == 1


def test_typed_messages_built_by_hand_are_checked_before_writing(tmp_path: Path) -> None:
    with Session.create(tmp_path) as session:
        with pytest.raises(InvalidMessage) as caught:
            session.append_message(UserMessage(content=[TextContent(text=5)]))  # type: ignore[arg-type]
        assert caught.value.field == "content[0].text"
        with pytest.raises(InvalidMessage) as caught:
            session.append_custom_message("note", ["plain strings are not blocks"])  # type: ignore[list-item]
        assert caught.value.field == "content[0]"
        assert len(session) == 0 and not os.path.exists(session.file or "")


@pytest.mark.parametrize("message", [
    UserMessage.of("plain \u2028 \x00 \"quoted\" é"),
    UserMessage(content="a lone \ud800 surrogate", timestamp=5),
    BashExecutionMessage(command="ls", output="", exit_code=None),
    AssistantMessage.of("x", usage=Usage(input=3, cost=Cost(input=1.0, output=1e21, total=9e-6))),
    AssistantMessage.of("nan", usage=Usage(cost=Cost(total=float("nan")))),  # JSON writes null
    AssistantMessage.of(tool_calls=[ToolCall(id="c1", name="f", arguments={"b": 1, "10": 2.0,
                                                                          "0": [1e-7]})]),
    ToolResultMessage.of("c1", "out", tool_name="f", details={"2": {"1": 0.5}, "n": 2**70}),
])
def test_typed_messages_are_written_as_json_stringify_writes_them(tmp_path: Path,
                                                                   message: Any) -> None:
    """The line of an appended message is the general writer's for the whole entry, whichever
    shortcut its class allows (its encoding as it is, or only its numbers and keys looked at)."""
    with Session.create(tmp_path) as session:
        entry = session.append_message(message)
        line = session.raw_line(entry)
        stored = loads(line)
    assert line == dumps({"type": "message", "id": entry, "parentId": None,
                          "timestamp": stored["timestamp"], "message": message})


@pytest.mark.parametrize(("entry_id", "parent_id", "timestamp"), [
    ("abcdef12", "abcdef11", "2026-11-26T11:00:00.000Z"), ("abcdef12", None, "t"),
    ('a"b', "c\\d", "x\u2028y"), ("é", "\ud800", "\x00"), ("x", 'y"', "z"), ("", "", ""),
])
def test_a_message_line_is_the_whole_entry_json_stringify_writes(
        entry_id: str, parent_id: str | None, timestamp: str) -> None:
    """Ids and times of other programs' files (quotes, escapes, lone surrogates) too."""
    message = UserMessage(content="hi", timestamp=1)
    assert message_line(entry_id, parent_id, timestamp, stored_message(message)[0]) == dumps(
        {"type": "message", "id": entry_id, "parentId": parent_id, "timestamp": timestamp,
         "message": message})


def test_a_key_that_is_no_string_is_refused_where_keys_are_strings(tmp_path: Path) -> None:
    """JSON cannot tell ``{1: x}`` from ``{"1": x}``: such a class is checked by its builtins."""
    with Session.create(tmp_path) as session:
        with pytest.raises(InvalidMessage, match=r"`key` in `\$\.content\[0\]\.arguments`"):
            session.append_message(AssistantMessage(
                content=[ToolCall(id="c1", name="f", arguments={1: "x"})]))  # type: ignore[dict-item]
        assert len(session) == 0


def test_untyped_details_keep_number_keys_as_text_and_refuse_others(tmp_path: Path) -> None:
    """A field typed ``Any`` takes what JSON holds: an integer key becomes its text, ordered as
    JavaScript orders an object's keys; a key no JSON holds as JavaScript would write it (a
    tuple, a float: msgspec writes 1.0 as "1.0") is an :class:`InvalidMessage` (not a bare
    ``TypeError``), and nothing is written."""
    with Session.create(tmp_path) as session:
        entry = session.append_message(ToolResultMessage.of(
            "c1", "out", tool_name="f", details={"b": 2, 7: [1.0], 1: "x"}))
        assert b'"details":{"1":"x","7":[1],"b":2}' in session.raw_line(entry)
        for bad in ({(1, 2): "x"}, {1: "x", 2.5: None}):
            with pytest.raises(InvalidMessage, match="keys"):
                session.append_message(ToolResultMessage.of("c2", "out", tool_name="f",
                                                            details=bad))
        assert len(session) == 1


@pytest.mark.parametrize("value", [{1, 2}, b"raw", {"k": [frozenset()]}])
def test_untyped_message_fields_refuse_values_json_cannot_hold(tmp_path: Path,
                                                               value: object) -> None:
    """A set or bytes in a message's untyped field (or a dict message) is an
    :class:`InvalidMessage`, nothing written: msgspec wrote a set as an array and bytes as
    base64 text, which read back as other values."""
    with Session.create(tmp_path) as session:
        for message in (ToolResultMessage.of("c1", "out", tool_name="f", details=value),
                        CustomMessage(custom_type="ext", content="x", details=value),
                        {"role": "user", "content": "x", "extra": value},
                        {"role": "someExtension", "data": value}):
            with pytest.raises(InvalidMessage, match="which JSON cannot hold"):
                session.append_message(message)  # type: ignore[arg-type]
        assert len(session) == 0


def test_exact_types_hold_nothing_json_stringify_writes_otherwise() -> None:
    assert type_facts(UserMessage).exact and type_facts(BashExecutionMessage).exact
    assert type_facts(list[str]).exact and type_facts(int | None).exact
    for kind in (AssistantMessage, ToolResultMessage, float, dict[str, int], list[Any], Any):
        assert not type_facts(kind).exact


def test_keyed_types_can_hold_a_dict_of_typed_keys() -> None:
    """Only their builtins' check can refuse ``{1: x}`` (its JSON is ``{"1": x}``)."""
    assert type_facts(AssistantMessage).keyed and type_facts(list[dict[str, int]]).keyed
    assert type_facts(dict[Any, dict[str, int]]).keyed
    for kind in (UserMessage, ToolResultMessage, dict[Any, int], list[Any], Any, float):
        assert not type_facts(kind).keyed


class _MySummary(BranchSummaryMessage):
    """A subclass of a summary message: refused as its base is."""


def test_typed_summary_messages_are_refused_subclasses_too(tmp_path: Path) -> None:
    with Session.create(tmp_path) as session:
        session.append_message(UserMessage.of("first"))  # (the class answers are remembered)
        for summary in (BranchSummaryMessage(summary="s", from_id="a"),
                        CompactionSummaryMessage(summary="s", tokens_before=1),
                        _MySummary(summary="s", from_id="a")):
            for _ in range(2):
                with pytest.raises(InvalidEntry, match="synthesized from entries"):
                    session.append_message(summary)
        assert len(session) == 1


def test_valid_dicts_are_still_written_as_given(tmp_path: Path) -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "hi", "cacheHint": 1}],
               "extra": True}
    with Session.create(tmp_path) as session:
        entry = session.append_message(message)
        stored = loads(session.raw_line(entry))["message"]
    assert stored["content"] == message["content"] and stored["extra"] is True
    assert isinstance(stored["timestamp"], int)
    # a role this library does not know stays the caller's business (pi's apps add roles)
    assert validate_message({"role": "user", "content": "x"}).role == "user"
    with pytest.raises(InvalidMessage) as caught:
        validate_message({"role": "robot", "content": "x"})
    assert caught.value.field == "role"


def test_an_agent_loop_needs_no_raw_dicts(tmp_path: Path) -> None:
    image = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
    calls = [ToolCall(id="call_1", name="read", arguments={"path": "a.py"}),
             ToolCall(id="call_2", name="bash", arguments={"command": "pytest"})]
    with Session.create(tmp_path) as session:
        session.append_message(UserMessage.of("Why does the test fail?", image))
        ask = AssistantMessage.of("Let me look.", tool_calls=calls, thinking="read first",
                                  provider="openai", model="gpt-5", api="openai-responses",
                                  usage=Usage(input=10, output=5, total_tokens=15))
        session.append_message(ask)
        for call in ask.tool_calls:
            failed = call.name == "bash"
            session.append_message(ToolResultMessage.of(
                call, "1 failed" if failed else "def f(): ...", is_error=failed,
                details={"exit": 1} if failed else None))
        session.append_message(ToolResultMessage.of("call_3", [TextContent(text="late")],
                                                    tool_name="read"))
        session.append_message(AssistantMessage.of("f() returns None.", model="gpt-5"))
        messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "toolResult",
                                          "toolResult", "assistant"]
    assert [b.type for b in messages[1].content] == ["thinking", "text", "toolCall", "toolCall"]
    assert (messages[1].stop_reason, messages[5].stop_reason) == ("toolUse", "stop")
    results = messages[2:5]
    assert [(r.tool_call_id, r.tool_name, r.is_error) for r in results] == [
        ("call_1", "read", False), ("call_2", "bash", True), ("call_3", "read", False)]
    assert results[1].details == {"exit": 1}
    assert AssistantMessage.of("plain").tool_calls == []
    assert len(convert_to_llm(messages)) == 6
