"""Whole request bodies (messages or input, tools, system, every other key) built by
``chat_request``, ``responses_request`` and ``anthropic_request`` equal the ones pi-ai 1.5.2's
own providers build (``stream`` of ``api/openai-completions.js``, ``api/openai-responses.js``,
``api/anthropic-messages.js``, captured at ``onPayload``: ``tests/pi/pi1_payloads.mjs``) from
the same context of generated pi 1.x sessions, with and without a prompt and tools given by
the caller (issue 16 point 8). The system prompt and tools replayed from the session's system
messages (``current_system_message``) and their collapse into one leading system message
(``collapse_system_messages``) are compared with pi-ai's ``getCurrentSystemMessage`` and
``collapseSystemMessages`` on the same contexts.

Deliberate differences, each undone on pi-ai's body before the comparison (``as_ours``):

* transport: pi-ai adds ``stream: true`` (for Chat also ``stream_options`` and ``store: false``),
  which our builders leave to the caller;
* Anthropic ``max_tokens`` is the model's maximum in pi-ai, which our builders do not know (the
  test passes the same value);
* tools: our Chat and Responses tools say ``strict: false`` (pi-ai 1.5.2 leaves ``strict`` out
  for OpenAI, where the Responses API would default to strict schemas); pi-ai's Anthropic tools
  add ``eager_input_streaming: true`` (a streaming option);
* the Anthropic system prompt is one string with us and one text block in pi-ai (the same
  prompt; pi-ai uses blocks to attach cache control);
* a tool result whose call pi-ai left out with its errored reply: pi-ai sends it and every API
  refuses the request; we leave it out. The Responses fallback item ids (``msg_pi_N``) and
  tool search call ids (a hash of ``N``) count it in pi-ai, so after such a result they are
  compared without those ids.

Every context is compared for every API: none is skipped (the generator writes OpenAI Responses
thinking signatures as pi-ai does, the reasoning item JSON-encoded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from sessiontree import (
    AssistantMessage,
    Session,
    SessionContext,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    collapse_system_messages,
    current_system_message,
)
from sessiontree._json import dumps
from sessiontree.providers import anthropic_request, chat_request, responses_request
from sessiontree.system_prompt import system_message_text
from sessiontree.testing.generate import generate_session
from sessiontree.testing.pi import run_node_script

from .test_conformance_pi1 import pi1_modules

PROBE = Path(__file__).parent / "pi" / "pi1_payloads.mjs"
TARGETS = {"openai-completions": {"provider": "openai", "model": "gpt-4.1"},
           "openai-responses": {"provider": "openai", "model": "gpt-5"},
           "anthropic-messages": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}
MAX_TOKENS = 24576  # the probe model's maxTokens
TRANSPORT = {"chat": {"stream", "stream_options", "store"}, "responses": {"stream"},
             "anthropic": {"stream"}}
EXTRA = {"name": "web", "description": "Search the web",
         "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}


SHAPES = [  # (seed, entries, branch_every, compact_every, keep_recent_tokens, every)
    (41, 200, 30, 70, 1500, 7), (42, 200, 30, 70, 1500, 7)]
UNCOMPACTED = [  # system message updates and tool removals pile up in the context
    (43, 400, 60, 0, 20_000, 19), (44, 400, 60, 0, 20_000, 19)]


def cases(tmp_path: Path, shapes: list[tuple[int, int, int, int, int, int]] = SHAPES,
          ) -> list[tuple[dict[str, Any], SessionContext]]:
    """Contexts of generated pi 1.x sessions at every ``every``-th entry, every other one with
    a prompt and a tool given by the caller."""
    out = []
    for seed, entries, branch_every, compact_every, keep, every in shapes:
        path = tmp_path / f"g{seed}.jsonl"
        generate_session(path, entries, seed=seed, branch_every=branch_every,
                         compact_every=compact_every, keep_recent_tokens=keep, pi1=True)
        with Session.open(path) as session:
            for number, entry_id in enumerate(session.ids()):
                if number % every:
                    continue
                context = session.build_context(entry_id)
                given = {"system": "Caller prompt.", "tools": [EXTRA]} if number % 2 else \
                    {"system": None, "tools": None}
                messages = [msgspec.to_builtins(m) for m in context.to_llm()]
                out.append(({**given, "messages": messages}, context))
    return out


def ours(spec: dict[str, Any], context: SessionContext) -> dict[str, dict[str, Any]]:
    kwargs: dict[str, Any] = {"system": spec["system"], "tools": spec["tools"] or ()}
    return {
        "chat": chat_request(context, **kwargs, **TARGETS["openai-completions"]),
        "responses": responses_request(context, **kwargs, **TARGETS["openai-responses"]),
        "anthropic": anthropic_request(context, **kwargs, max_tokens=MAX_TOKENS,
                                       **TARGETS["anthropic-messages"]),
    }


def test_whole_bodies_equal_pi_ais(tmp_path: Path) -> None:
    made = cases(tmp_path)
    answers = run_node_script(PROBE, str(pi1_modules()), payload={
        "target": TARGETS, "cases": [spec for spec, _ in made]})
    with_system = reasoning = 0
    compared = dict.fromkeys(TRANSPORT, 0)
    for (spec, context), pi in zip(made, answers, strict=True):
        with_system += any(m["role"] == "system" for m in spec["messages"])
        assert dumps(current_system_message(spec["messages"])) == dumps(pi["current"])
        if not spec["system"] and not spec["tools"]:  # (pi-ai's collapse adds the caller's)
            assert dumps(collapse_system_messages(spec["messages"])) == dumps(pi["collapsed"])
        for api, body in ours(spec, context).items():
            theirs = as_ours(api, pi[api])
            if theirs.pop("orphans") and api == "responses":
                body = {**body, "input": unnumbered(body["input"])}
                theirs["input"] = unnumbered(theirs["input"])
            assert body == theirs, (api, spec["system"])
            compared[api] += 1
        reasoning += any(i.get("type") == "reasoning" for i in pi["responses"]["input"])
    assert compared == dict.fromkeys(TRANSPORT, len(made)) and len(made) == 58
    assert with_system > 10 and reasoning > 10


def as_ours(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """pi-ai's body with the deliberate differences (module documentation) undone; ``orphans``
    says how many tool results without their call were taken out."""
    out = {k: v for k, v in body.items() if k not in TRANSPORT[api]}
    calls: set[str] = set()
    kept: list[dict[str, Any]] = []
    orphans = 0
    for item in out["input" if api == "responses" else "messages"]:
        calls.update(call_ids(api, item))
        results = result_ids(api, item)
        if not results:
            kept.append(item)
            continue
        orphans += sum(r not in calls for r in results)
        if api != "anthropic":
            kept.extend([item] if results[0] in calls else [])
            continue
        content = [b for b in item["content"]
                   if b.get("type") != "tool_result" or b["tool_use_id"] in calls]
        kept.extend([{**item, "content": content}] if content else [])
    out["input" if api == "responses" else "messages"] = kept
    out["orphans"] = orphans
    if api == "anthropic":
        if "system" in out:
            assert [b["type"] for b in out["system"]] == ["text"]
            out["system"] = out["system"][0]["text"]
        defined = [b["tool"]["definition"] for m in out["messages"] if m["role"] == "system"
                   for b in m["content"] if b["type"] == "tool_addition"]
        for tool in [*out.get("tools", []), *defined]:
            if not tool.get("defer_loading"):  # pi-ai's deferred placeholder has none
                assert tool.pop("eager_input_streaming") is True
    else:
        for tool in out.get("tools", []):
            (tool["function"] if api == "chat" else tool)["strict"] = False
        for item in out.get("input", []):  # tools declared in place
            if item.get("type") in ("additional_tools", "tool_search_output"):
                for tool in item["tools"]:
                    tool["strict"] = False
    return out


def call_ids(api: str, item: dict[str, Any]) -> list[str]:
    if api == "chat":
        return [c["id"] for c in item.get("tool_calls") or []]
    if api == "responses":
        return [item["call_id"]] if item.get("type") == "function_call" else []
    content = item["content"] if item["role"] == "assistant" else []
    return [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def result_ids(api: str, item: dict[str, Any]) -> list[str]:
    """The call ids of a tool result item: one for Chat and Responses, each ``tool_result``
    block of an Anthropic user message (pi-ai puts consecutive results in one)."""
    if api == "chat":
        return [item["tool_call_id"]] if item.get("role") == "tool" else []
    if api == "responses":
        return [item["call_id"]] if item.get("type") == "function_call_output" else []
    content = item["content"]
    if item["role"] != "user" or not isinstance(content, list):
        return []
    return [str(b["tool_use_id"]) for b in content if b.get("type") == "tool_result"]


def unnumbered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items without what counts the messages before them: fallback message ids
    (``msg_pi_N``) and tool search call ids (a hash of ``system:N``)."""
    numbered = {"message": "id", "tool_search_call": "call_id", "tool_search_output": "call_id"}
    return [{k: v for k, v in i.items() if k != numbered.get(i.get("type", ""))} for i in items]


def test_chat_keeps_system_messages_in_place_as_pi_ai(tmp_path: Path) -> None:
    """For a model that takes system messages mid-conversation (pi-ai's
    ``compat.supportsMidConvoSystemMessages``), ``chat_request(system_in_place=True)`` equals
    the body of pi-ai's ``openai-completions`` provider for such a model."""
    made = cases(tmp_path, SHAPES + UNCOMPACTED)
    answers = run_node_script(PROBE, str(pi1_modules()), payload={
        "target": TARGETS, "cases": [{**spec, "midConvo": True} for spec, _ in made]})
    updates = 0
    for (spec, context), pi in zip(made, answers, strict=True):
        kwargs: dict[str, Any] = {"system": spec["system"], "tools": spec["tools"] or ()}
        body = chat_request(context, system_in_place=True, **kwargs,
                            **TARGETS["openai-completions"])
        theirs = as_ours("chat", pi["chat"])
        theirs.pop("orphans")
        assert body == theirs, spec["system"]
        updates += sum(m["role"] == "system" for m in body["messages"][1:])
    assert len(made) == 102 and updates > 10


def test_a_system_message_among_tool_results_follows_them_as_in_pi_ai() -> None:
    session = Session.in_memory()
    session.append_system_message("Base.", sections={"a": "A"}, tools_added=[EXTRA])
    session.append_message(UserMessage.of("look it up"))
    session.append_message(AssistantMessage.of(tool_calls=[ToolCall(id="c1", name="web",
                                                                    arguments={"q": "x"})]))
    session.append_system_message(sections={"a": None, "b": "B"}, tools_removed=["web"])
    session.append_message(ToolResultMessage.of("c1", "found", tool_name="web"))
    session.append_message(AssistantMessage.of("done"))
    context = session.build_context()
    spec = {"system": None, "tools": None,
            "messages": [msgspec.to_builtins(m) for m in context.to_llm()], "midConvo": True}
    [pi] = run_node_script(PROBE, str(pi1_modules()), payload={"target": TARGETS, "cases": [spec]})
    body = chat_request(context, system_in_place=True, **TARGETS["openai-completions"])
    theirs = as_ours("chat", pi["chat"])
    theirs.pop("orphans")
    assert body == theirs
    assert [m["role"] for m in body["messages"]] == \
        ["system", "user", "assistant", "tool", "system", "assistant"]
    assert body["messages"][4]["content"] == \
        'Removed system prompt section "a".\n\nUpdated system prompt section "b":\n\nB'
    assert "tools" not in body  # the only tool was removed


def test_prompt_text_is_content_then_sections() -> None:
    head = {"role": "system", "content": "Base.", "sections": {"b": "B", "1": "one", "x": None},
            "timestamp": 0}
    assert system_message_text(head) == "Base.\n\none\n\nB"


def test_to_llm_keeps_system_messages_in_place_or_collapses_them() -> None:
    session = Session.in_memory()
    session.append_system_message("Base.", sections={"a": "A"}, tools_added=[EXTRA])
    session.append_message(UserMessage.of("hi"))
    session.append_system_message(sections={"a": None, "b": "B"}, tools_removed=["web"])
    session.append_message(UserMessage.of("again"))
    context = session.build_context()
    assert [m.role for m in context.to_llm()] == ["system", "user", "system", "user"]
    collapsed = context.to_llm(collapse=True)
    assert [m.role for m in collapsed] == ["system", "user", "user"]
    head = collapsed[0]
    assert isinstance(head, SystemMessage)
    assert head.content == "Base." and head.sections == {"b": "B"} and head.tools_added is UNSET


IN_PLACE = {  # form -> (API, our keyword arguments, pi-ai's model compat flags)
    "responses": ("responses", {}, {}),
    "responses additional_tools": ("responses", {"additional_tools": True},
                                   {"supportsAdditionalTools": True}),
    "responses tool_search": ("responses", {"tool_search": True}, {"supportsToolSearch": True}),
    "anthropic": ("anthropic", {}, {}),
    "anthropic tool_changes": ("anthropic", {"tool_changes": True},
                               {"supportsMidConvoToolChanges": True}),
}


def test_responses_and_anthropic_keep_system_messages_in_place_as_pi_ai(tmp_path: Path) -> None:
    """For a model that takes system messages mid-conversation (``system_in_place=True``),
    ``responses_request`` and ``anthropic_request`` equal the bodies of pi-ai's
    ``openai-responses`` and ``anthropic-messages`` providers for such a model, in every form
    of tool declaration pi-ai has: Responses tools at the top (the default), in
    ``additional_tools`` items (``compat.supportsAdditionalTools``) or loaded by client tool
    search (``compat.supportsToolSearch``); Anthropic tools at the top (the default) or
    changed in place (``compat.supportsMidConvoToolChanges``)."""
    made = cases(tmp_path, SHAPES + UNCOMPACTED)
    specs = [{**spec, "midConvo": True, "compat": compat}
             for _, _, compat in IN_PLACE.values() for spec, _ in made]
    answers = iter(run_node_script(PROBE, str(pi1_modules()),
                                   payload={"target": TARGETS, "cases": specs}))
    seen: dict[str, int] = {}
    for form, (api, options, _) in IN_PLACE.items():
        compared = 0
        for spec, context in made:
            pi = next(answers)[api]
            body = in_place(api, spec, context, options)
            theirs = as_ours(api, pi)
            if theirs.pop("orphans") and api == "responses":
                body = {**body, "input": unnumbered(body["input"])}
                theirs["input"] = unnumbered(theirs["input"])
            assert body == theirs, (form, spec["system"])
            compared += 1
            for kind in in_place_kinds(api, body):
                seen[f"{form}: {kind}"] = seen.get(f"{form}: {kind}", 0) + 1
        assert compared == len(made) == 102
    # the cases exercise what tells the forms apart: updates in place, tools declared in place,
    # removals and incremental updates announced, tools loaded by search
    for form in IN_PLACE:
        assert seen[f"{form}: update"] > 20, form
    assert seen["responses additional_tools: additional_tools"] > 20
    assert seen["responses additional_tools: no longer available"] > 5
    assert seen["responses additional_tools: incremental tools update"] > 5
    assert seen["responses additional_tools: Still unavailable"] > 5
    assert seen["responses tool_search: tool_search_call"] > 20
    assert seen["anthropic tool_changes: tool_addition"] > 20
    assert seen["anthropic tool_changes: tool_removal"] > 5
    assert seen["anthropic tool_changes: betas"] > 20


def in_place(api: str, spec: dict[str, Any], context: SessionContext,
             options: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"system": spec["system"], "tools": spec["tools"] or (),
                              "system_in_place": True, **options}
    if api == "responses":
        return responses_request(context, **kwargs, **TARGETS["openai-responses"])
    return anthropic_request(context, **kwargs, max_tokens=MAX_TOKENS,
                             **TARGETS["anthropic-messages"])


def in_place_kinds(api: str, body: dict[str, Any]) -> list[str]:
    """What a body holds that the in-place forms differ in: system updates, tool declarations
    in place and their notices."""
    kinds = ["betas"] if "betas" in body else []
    if api == "anthropic":
        for message in body["messages"]:
            if message["role"] == "system":
                kinds += ["update", *(b["type"] for b in message["content"] if b["type"] != "text")]
        return kinds
    for number, item in enumerate(body["input"]):
        if item.get("role") == "system":
            kinds += ["update" if number else "prompt"] + [
                k for k in ("no longer available", "incremental tools update", "Still unavailable")
                if k in item["content"]]
        elif item.get("type") in ("additional_tools", "tool_search_call"):
            kinds.append(item["type"])
    return kinds
