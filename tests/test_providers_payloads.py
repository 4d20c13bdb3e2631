"""A session's context as request bodies: ``chat_request(context)``, ``responses_request(context)``
and ``anthropic_request(context)`` (``sessiontree.providers``).

Each body is validated against the provider SDK's own request types with unknown keys
forbidden (``tests/sdk_payloads.py``), compared with what pi 0.73.1's own provider code builds
from the same messages (``tests/pi/pi_payloads.mjs``), and checked point by point: tool calls
paired with results (a missing result becomes an error result), images where each API wants
them, compaction and branch summaries as the user texts pi sends, errored replies left out.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pydantic
import pytest

from sessiontree import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    Session,
    SessionContext,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiontree.providers import (
    ToolSpec,
    anthropic_request,
    chat_request,
    prepare_messages,
    responses_request,
)
from sessiontree.providers.openai_responses import short_hash
from sessiontree.testing.pi import run_node_script

from .sdk_payloads import check
from .test_pi_interop import pi_modules  # noqa: F401 - the fixture (pi, installed once)

PROBE = Path(__file__).parent / "pi" / "pi_payloads.mjs"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
CLAUDE = dict(api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5")
GPT5 = dict(api="openai-responses", provider="openai", model="gpt-5")
TOOLS = [ToolSpec(name="read", description="Read a file",
                  parameters={"type": "object", "properties": {"path": {"type": "string"}},
                              "required": ["path"]}),
         {"name": "bash", "description": "Run a command",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                         "required": ["command"]}}]
SYSTEM = "You are a careful coding agent."
TARGETS = {"openai-completions": {"provider": "openai", "model": "gpt-4.1"},
           "openai-responses": {"provider": "openai", "model": "gpt-5"},
           "anthropic-messages": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}


def scenario() -> SessionContext:
    """A context with every kind of message: a compaction summary, a branch summary, images in
    a user message and in a tool result, two parallel tool calls, a reply of another provider
    with a Responses-style id, an errored reply with a call, a bash run, a custom message, and
    a tool call left without a result at the end."""
    s = Session.in_memory()
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    s.append_message(UserMessage.of("An old question"))
    s.append_message(AssistantMessage(content=[TextContent(text="An old answer")], **CLAUDE))
    first_kept = s.append_message(UserMessage.of("Look at this", ImageContent(data=PNG, mime_type="image/png")))
    s.append_message(AssistantMessage(content=[
        ThinkingContent(thinking="Read the file, then look.", thinking_signature="sig-A1"),
        TextContent(text="Reading both."),
        ToolCall(id="toolu_01", name="read", arguments={"path": "a.py"}),
        ToolCall(id="toolu_02", name="screenshot", arguments={}),
    ], stop_reason="toolUse", **CLAUDE))
    s.append_message(ToolResultMessage(tool_call_id="toolu_01", tool_name="read",
                                       content=[TextContent(text="print('é')")]))
    s.append_message(ToolResultMessage(tool_call_id="toolu_02", tool_name="screenshot",
                                       content=[ImageContent(data=PNG, mime_type="image/png")]))
    s.append_message(AssistantMessage(content=[
        ThinkingContent(thinking="list it"),
        ToolCall(id="call_9|fc_abc+/=", name="bash", arguments={"command": "ls"}),
    ], stop_reason="toolUse", **GPT5))
    s.append_message(ToolResultMessage(tool_call_id="call_9|fc_abc+/=", tool_name="bash",
                                       content=[TextContent(text="a.py\nb.py")]))
    compaction = s.append_compaction("Earlier the user asked an old question.", first_kept, 1200)
    s.append_message(UserMessage.of("A side quest"))
    s.append_message(AssistantMessage(content=[TextContent(text="Side answer")], **CLAUDE))
    s.branch_with_summary(compaction, "Tried a side quest; it went nowhere.")
    s.append_message(AssistantMessage(content=[ToolCall(id="toolu_bad", name="read", arguments={})],
                                      stop_reason="error", error_message="overloaded", **CLAUDE))
    s.append_message(ToolResultMessage(tool_call_id="toolu_bad", tool_name="read",
                                       content=[TextContent(text="result of an errored reply")]))
    s.append_message(BashExecutionMessage(command="pytest -q", output="1 failed", exit_code=1))
    s.append_custom_message("reminder", "Remember to run the linter.", True)
    s.append_message(UserMessage(content="Now fix it"))
    s.append_message(AssistantMessage(content=[
        TextContent(text="Fixing."), ToolCall(id="toolu_03", name="edit", arguments={"path": "a.py"}),
    ], stop_reason="toolUse", **CLAUDE))
    return s.build_context()


def bodies(context: SessionContext) -> dict[str, dict[str, Any]]:
    return {
        "openai-completions": chat_request(context, system=SYSTEM, tools=TOOLS, **TARGETS["openai-completions"]),
        "openai-responses": responses_request(context, system=SYSTEM, tools=TOOLS, **TARGETS["openai-responses"]),
        "anthropic-messages": anthropic_request(context, system=SYSTEM, tools=TOOLS, **TARGETS["anthropic-messages"]),
    }


SDK = {"openai-completions": "openai_chat", "openai-responses": "openai_responses",
       "anthropic-messages": "anthropic"}


def test_every_body_validates_against_the_sdk_request_types() -> None:
    for api, body in bodies(scenario()).items():
        check(SDK[api], body)  # type: ignore[arg-type]
        json.dumps(body)  # plain JSON values only


@pytest.mark.parametrize("api, mutate", [
    ("openai-completions", lambda b: b["messages"][1].update(bogus=1)),
    ("openai-completions", lambda b: b["messages"][3]["tool_calls"][0].update(type="tool")),
    ("openai-responses", lambda b: b["input"][-1].update(output=7)),
    ("openai-responses", lambda b: b["input"][2]["content"][1].update(detail="huge")),
    ("anthropic-messages", lambda b: b["messages"][3]["content"][0].update(is_error="no")),
    ("anthropic-messages", lambda b: b["messages"][1].update(role="tool")),
])
def test_the_sdk_check_rejects_what_the_api_would(api: str, mutate: Any) -> None:
    body = copy.deepcopy(bodies(scenario())[api])
    mutate(body)
    with pytest.raises(pydantic.ValidationError):
        check(SDK[api], body)  # type: ignore[arg-type]


def test_bodies_equal_what_pi_itself_builds(pi_modules: Path) -> None:
    context = scenario()
    llm = [msgspec.to_builtins(m) for m in context.to_llm()]
    tools = [{"name": t.name, "description": t.description, "parameters": t.parameters}
             if isinstance(t, ToolSpec) else t for t in TOOLS]
    # pi 0.73.1 sent another model's thinking as text; we leave it out as pi 1.5.2 does
    # (tests/test_pi1_request_bodies.py), so each API is compared on messages without it
    theirs = {key: run_node_script(PROBE, str(pi_modules), payload={
        "messages": own_thinking_only(llm, **TARGETS[api]), "system": SYSTEM, "tools": tools,
        "target": TARGETS})[key]
        for key, api in (("chat", "openai-completions"), ("responses", "openai-responses"),
                         ("anthropic", "anthropic-messages"))}
    ours = bodies(context)
    # One deliberate difference: pi sends the result of a call whose errored reply it left
    # out, which every API refuses; we leave that result out too.
    orphan_chat = {"role": "tool", "content": "result of an errored reply", "tool_call_id": "toolu_bad"}
    orphan_responses = {"type": "function_call_output", "call_id": "toolu_bad",
                        "output": "result of an errored reply"}
    assert ours["openai-completions"]["messages"] == without(theirs["chat"], orphan_chat)
    # (pi's text item ids count messages, the left-out result included: compared without them)
    assert unnumbered(ours["openai-responses"]["input"]) == \
        unnumbered(without(theirs["responses"], orphan_responses))
    anthropic = theirs["anthropic"]["messages"]
    orphan_anthropic = next(m for m in anthropic if "toolu_bad" in json.dumps(m))
    assert orphan_anthropic["content"][0]["tool_use_id"] == "toolu_bad"
    assert ours["anthropic-messages"]["messages"] == without(anthropic, orphan_anthropic)
    assert ours["anthropic-messages"]["system"] == theirs["anthropic"]["system"][0]["text"]
    assert ours["anthropic-messages"]["max_tokens"] == theirs["anthropic"]["max_tokens"]


def own_thinking_only(messages: list[dict[str, Any]], provider: str, model: str) -> list[dict[str, Any]]:
    """The messages without the thinking of replies from another model than the target's."""
    return [{**m, "content": [b for b in m["content"] if b["type"] != "thinking"]}
            if m["role"] == "assistant" and (m["provider"], m["model"]) != (provider, model) else m
            for m in messages]


def unnumbered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in i.items() if not (i.get("type") == "message" and k == "id")}
            for i in items]


def without(items: list[Any], item: Any) -> list[Any]:
    assert items.count(item) == 1, f"pi's payload should hold {item!r} once"
    return [i for i in items if i != item]


def test_chat_completions_shape() -> None:
    messages = bodies(scenario())["openai-completions"]["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert messages[1]["role"] == "user" and messages[1]["content"][0]["text"].startswith(
        "The conversation history before this point was compacted into the following summary:\n\n"
        "<summary>\nEarlier the user asked an old question.\n</summary>")
    assert messages[2]["content"] == [{"type": "text", "text": "Look at this"},
                                      {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
    # another model's thinking is left out (pi 1.5.2; pi 0.73.1 sent it as text)
    assert messages[3]["content"] == "Reading both."
    assert [c["id"] for c in messages[3]["tool_calls"]] == ["toolu_01", "toolu_02"]
    assert messages[3]["tool_calls"][0]["function"] == {"name": "read", "arguments": '{"path":"a.py"}'}
    assert messages[4] == {"role": "tool", "tool_call_id": "toolu_01", "content": "print('é')"}
    assert messages[5] == {"role": "tool", "tool_call_id": "toolu_02", "content": "(see attached image)"}
    assert messages[6]["role"] == "user" and messages[6]["content"][0]["text"] == "Attached image(s) from tool result:"
    assert messages[7]["tool_calls"][0]["id"] == "call_9"  # the Responses id, before the bar
    assert messages[8] == {"role": "tool", "tool_call_id": "call_9", "content": "a.py\nb.py"}
    assert messages[9]["content"][0]["text"] == (
        "The following is a summary of a branch that this conversation came back from:\n\n"
        "<summary>\nTried a side quest; it went nowhere.</summary>")
    # the errored reply and its result are gone; the bash run and custom message are user texts
    assert "toolu_bad" not in json.dumps(messages)
    assert messages[10]["content"][0]["text"] == "Ran `pytest -q`\n```\n1 failed\n```\n\nCommand exited with code 1"
    assert messages[11]["content"] == [{"type": "text", "text": "Remember to run the linter."}]
    assert messages[12] == {"role": "user", "content": "Now fix it"}
    assert messages[13]["tool_calls"][0]["id"] == "toolu_03"
    assert messages[14] == {"role": "tool", "tool_call_id": "toolu_03", "content": "No result provided"}
    assert len(messages) == 15


def test_responses_shape() -> None:
    body = bodies(scenario())["openai-responses"]
    assert body["store"] is False and body["model"] == "gpt-5"
    items = body["input"]
    kinds = [i.get("type", i.get("role")) for i in items]
    assert kinds == ["system", "user", "user", "message", "function_call", "function_call",
                     "function_call_output", "function_call_output", "function_call",
                     "function_call_output", "user", "user", "user", "user", "message",
                     "function_call", "function_call_output"]
    assert items[2]["content"][1] == {"type": "input_image", "detail": "auto",
                                      "image_url": f"data:image/png;base64,{PNG}"}
    # another model's thinking is left out; a text item without an id of its own gets pi
    # 1.5.2's, msg_pi_<index> (then _<n> for the n-th further text block of the reply)
    assert items[3] == {"type": "message", "role": "assistant", "status": "completed",
                        "id": "msg_pi_2", "content": [{"type": "output_text", "text": "Reading both.",
                                                       "annotations": []}]}
    # the image of a tool result stays inside the function call output
    assert items[7] == {"type": "function_call_output", "call_id": "toolu_02", "output": [
        {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG}"}]}
    # the same model's call keeps its item id; its result pairs by call id
    assert items[8]["call_id"] == "call_9" and items[8]["id"] == "fc_abc+/="
    assert items[9]["call_id"] == "call_9"
    assert items[-1] == {"type": "function_call_output", "call_id": "toolu_03", "output": "No result provided"}
    assert body["tools"][0] == {"type": "function", "name": "read", "description": "Read a file",
                                "parameters": TOOLS[0].parameters, "strict": False}  # type: ignore[union-attr]


def test_anthropic_shape() -> None:
    body = bodies(scenario())["anthropic-messages"]
    assert body["system"] == SYSTEM and body["max_tokens"] == 8192
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "user", "assistant", "user", "assistant",
                                             "user", "user", "user", "user", "user", "assistant", "user"]
    assert messages[1]["content"][1] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": PNG}}
    # the same model's thinking is replayed with its signature
    assert messages[2]["content"][0] == {"type": "thinking", "thinking": "Read the file, then look.",
                                         "signature": "sig-A1"}
    assert messages[2]["content"][2] == {"type": "tool_use", "id": "toolu_01", "name": "read",
                                         "input": {"path": "a.py"}}
    # parallel results in one user message; an image-only result gets the placeholder text first
    assert messages[3]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "print('é')", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_02", "is_error": False, "content": [
            {"type": "text", "text": "(see attached image)"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}]
    # another provider's call id is made acceptable, and its result follows the new id
    assert messages[4]["content"] == [{
        "type": "tool_use", "id": "call_9_fc_abc___", "name": "bash", "input": {"command": "ls"}}]
    assert messages[5]["content"][0]["tool_use_id"] == "call_9_fc_abc___"
    assert messages[-1]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_03",
                                        "content": "No result provided", "is_error": True}]
    assert body["tools"][1] == {"name": "bash", "description": "Run a command", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}


def test_defaults_come_from_the_context_and_lone_surrogates_are_removed() -> None:
    s = Session.in_memory()
    s.append_model_change("openai", "gpt-4.1-mini")
    s.append_message(UserMessage(content="broken \ud83d pair"))
    context = s.build_context()
    chat = chat_request(context)
    assert chat == {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "broken  pair"}]}
    assert anthropic_request(context, model="claude-haiku-4-5", max_tokens=100)["max_tokens"] == 100
    check("openai_chat", chat)
    empty = Session.in_memory().build_context()
    assert responses_request(empty) == {"input": [], "store": False}


def test_prepare_messages_never_changes_its_input() -> None:
    context = scenario()
    before = [msgspec.to_builtins(m) for m in context.messages]
    prepare_messages(context.messages, api="anthropic-messages", provider="anthropic",
                     model="claude-sonnet-4-5", normalize_id=lambda i, _m: i.replace("|", "_"))
    assert [msgspec.to_builtins(m) for m in context.messages] == before


def test_short_hash_is_pis() -> None:
    # values printed by pi-ai's utils/hash.js shortHash
    assert short_hash("abc") == "y0biex7f9bbh"
    assert short_hash("héllo😀") == "1olj6nu1frhbfw"
    assert short_hash("") == "k4n83c7h0j2b"
