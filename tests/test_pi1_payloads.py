"""Model-ready payloads carry the system prompt and tools replayed from the session's system
messages as pi-ai 1.5.2 does (issue 16 point 8): for the model APIs sessiontree builds requests
for (OpenAI Chat, OpenAI Responses, Anthropic Messages; none takes a system message
mid-conversation by default) the replayed system message leads and the others are dropped
(pi-ai's ``collapseSystemMessages``). Checked against pi-ai's own transcript functions on
generated sessions (``tests/pi/pi1_transcript.mjs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec import UNSET

from sessiontree import Session, collapse_system_messages, current_system_message
from sessiontree._json import dumps
from sessiontree.providers import anthropic_request, chat_request, responses_request
from sessiontree.system_prompt import system_message_text
from sessiontree.testing.generate import generate_session
from sessiontree.testing.pi import run_node_script

from .test_conformance_pi1 import pi1_modules

PROBE = Path(__file__).parent / "pi" / "pi1_transcript.mjs"
EXTRA = {"name": "web", "description": "Search the web",
         "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}


def cases(tmp_path: Path) -> list[tuple[dict[str, Any], Any]]:
    """Contexts of generated pi 1.x sessions at every 9th entry, with and without a prompt and
    tools given by the caller."""
    out = []
    for seed in (41, 42):
        path = tmp_path / f"g{seed}.jsonl"
        generate_session(path, 250, seed=seed, branch_every=30, compact_every=80,
                         keep_recent_tokens=1500, pi1=True)
        with Session.open(path) as session:
            for number, entry_id in enumerate(session.ids()):
                if number % 9:
                    continue
                context = session.build_context(entry_id)
                messages = context.to_builtins()["messages"]
                given = {"system": "Caller prompt.", "tools": [EXTRA]} if number % 2 else \
                    {"system": None, "tools": None}
                out.append(({**given, "messages": messages}, context))
    return out


def test_requests_carry_pis_replayed_prompt_and_tools(tmp_path: Path) -> None:
    made = cases(tmp_path)
    answers = run_node_script(PROBE, str(pi1_modules()), payload=[spec for spec, _ in made])
    with_system = 0
    for (spec, context), pi in zip(made, answers):
        messages = spec["messages"]
        # the replay and the collapse themselves
        assert dumps(current_system_message(messages)) == dumps(pi["current"])
        collapsed = collapse_system_messages(messages)
        if not spec["system"] and not spec["tools"]:
            assert dumps(collapsed) == dumps(pi["collapsed"])
        if not any(m.get("role") == "system" for m in messages):
            continue
        with_system += 1
        kwargs = {"system": spec["system"], "tools": spec["tools"] or ()}
        prompt, tools = pi["prompt"] or None, pi["tools"]
        names = [t["name"] for t in tools]
        chat = chat_request(context, **kwargs)
        assert chat["messages"][0] == {"role": "system", "content": prompt} if prompt else \
            chat["messages"][0]["role"] != "system"
        assert sum(m["role"] == "system" for m in chat["messages"]) == (1 if prompt else 0)
        assert [t["function"]["name"] for t in chat.get("tools", [])] == names
        assert [t["function"]["parameters"] for t in chat.get("tools", [])] == \
            [t["parameters"] for t in tools]
        responses = responses_request(context, **kwargs)
        leading = [i for i in responses["input"] if i.get("role") in ("system", "developer")]
        assert [i["content"] for i in leading] == ([prompt] if prompt else [])
        assert [t["name"] for t in responses.get("tools", [])] == names
        anthropic = anthropic_request(context, **kwargs)
        system = anthropic.get("system")
        text = system if isinstance(system, str) else \
            "".join(b["text"] for b in system or [])
        assert (text or None) == prompt
        assert [t["name"] for t in anthropic.get("tools", [])] == names
        assert all(m["role"] in ("user", "assistant") for m in anthropic["messages"])
    assert with_system > 5


def test_prompt_text_is_content_then_sections() -> None:
    head = {"role": "system", "content": "Base.", "sections": {"b": "B", "1": "one", "x": None},
            "timestamp": 0}
    assert system_message_text(head) == "Base.\n\none\n\nB"


def test_to_llm_keeps_system_messages_in_place_or_collapses_them(tmp_path: Path) -> None:
    from sessiontree import SystemMessage, UserMessage

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
