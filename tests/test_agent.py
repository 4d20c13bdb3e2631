"""AgentSession and AsyncAgentSession against a real HTTP model server on 127.0.0.1
(tests/fake_llm.py, which checks every request body against the provider SDK's types): the
loop with tools, errors returned to the model, the seed-002 extension API and events, entry
point extensions, cancellation with nothing half-written, failed model calls, the operation
tree recorded in the session (sub-agents included), and pi reading what the agent wrote.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import AssistantMessage, CustomMessage, Session, ToolResultMessage, UserMessage
from sessiontree.agent import (
    AgentSession,
    AsyncAgentSession,
    BeforeAgentStartResult,
    ExtensionAPI,
    ExtensionMessage,
    ToolCallDecision,
    ToolContext,
    ToolError,
    ToolResult,
    tool,
)
from sessiontree.cli import cli
from sessiontree.events import ContextResult
from sessiontree.providers import StreamDelta
from sessiontree.summarize import CancelToken

from .fake_llm import FakeLLM, Reply, anthropic_model, chat_model, responses_model
from .installed_extension import install_extension
from .test_pi_interop import assert_same, pi_read, pi_modules  # noqa: F401 - fixture


claude, gpt_chat, gpt_responses = anthropic_model, chat_model, responses_model


FILES = {"a.py": "print('a')\n", "b.py": ""}
calls: list[str] = []


@tool
def read(path: str) -> str:
    """Read a file.

    Args:
        path: the file's path.
    """
    calls.append(path)
    if path not in FILES:
        raise FileNotFoundError(path)
    return FILES[path]


@tool
def add(a: int, b: int = 0) -> ToolResult:
    """Add two numbers."""
    return ToolResult(str(a + b), details={"sum": a + b})


@tool
def refuse(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"refused: {reason}")


def messages(session: Session) -> list[Any]:
    return [e.message for e in session.path() if e.type == "message"]


def test_tool_schema_from_the_signature() -> None:
    assert read.parameters == {"type": "object", "properties": {
        "path": {"type": "string", "description": "the file's path."}}, "required": ["path"]}
    assert read.description == "Read a file."
    assert add.parameters["required"] == ["a"]


@pytest.mark.parametrize("make", [claude, gpt_chat, gpt_responses])
def test_the_loop_runs_tools_and_appends_every_message(server: FakeLLM, make: Any, tmp_path: Path) -> None:
    calls.clear()
    server.then(Reply(text="Reading.", tool_calls=[("read", {"path": "a.py"})], usage=(100, 20, 0)),
                Reply(text="a.py prints a.", usage=(150, 10, 0)))
    session = Session.create(tmp_path, cwd="/proj")
    deltas: list[StreamDelta] = []
    agent = AgentSession(session, make(server), tools=[read], system_prompt="Be brief.")
    result = agent.prompt("What does a.py do?", on_delta=deltas.append)
    assert result.stop == "stop" and result.text == "a.py prints a."
    assert calls == ["a.py"]
    roles = [m.role for m in messages(session)]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    tool_result = messages(session)[2]
    assert tool_result.content[0].text == "print('a')\n" and not tool_result.is_error
    assert [m.role for m in result.messages] == roles
    assert "".join(d.text for d in deltas if d.kind == "text") == "Reading.a.py prints a."
    assert result.totals.input == 250 and result.totals.output == 30 and result.totals.cost > 0
    # the second request carried the reply and its result (the server checked it against the SDK)
    assert "print('a')" in json.dumps(server.requests[1].body)
    # it reopens with the same conversation
    with Session.open(session.file) as again:  # type: ignore[arg-type]
        assert [m.role for m in messages(again)] == roles


def test_tool_errors_go_back_to_the_model(server: FakeLLM) -> None:
    server.then(Reply(text="", tool_calls=[("read", {"path": "missing.py"}), ("read", {}),
                                           ("nope", {}), ("refuse", {"reason": "x"}),
                                           ("add", {"a": "two"}), ("add", {"a": 2, "b": 3})]),
                Reply(text="Done."))
    session = Session.in_memory()
    result = AgentSession(session, claude(server), tools=[read, add, refuse]).prompt("go")
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    texts = [r.content[0].text for r in results]
    assert [r.is_error for r in results] == [True, True, True, True, True, False]
    assert texts[0] == "read failed: FileNotFoundError: missing.py"
    assert "missing required argument 'path'" in texts[1]
    assert texts[2] == "Tool 'nope' not found"
    assert texts[3] == "refused: x"
    assert "argument 'a' must be integer" in texts[4]
    assert texts[5] == "5" and results[5].details == {"sum": 5}
    # every result went back to the model, paired with its call
    second = server.requests[1].body["messages"]
    assert [b["is_error"] for b in second[-1]["content"]] == [True, True, True, True, True, False]


def test_events_and_extension_api(server: FakeLLM) -> None:
    server.then(Reply(text="", tool_calls=[("read", {"path": "secret.txt"}), ("read", {"path": "x"}),
                                           ("add", {"a": 1})]),
                Reply(text="All done."))
    calls.clear()
    seen: list[str] = []

    class Guard:
        name = "guard"

        def setup(self, api: ExtensionAPI) -> None:
            api.on("before_agent_start", self.start)
            api.on("turn_start", lambda e: seen.append(f"turn_start {e.turn}"))
            api.on("turn_end", lambda e: seen.append(f"turn_end {e.turn} {len(e.tool_results)}"))
            api.on("tool_call", self.tool_call)
            api.on("tool_result", self.tool_result)
            api.on("context", self.context)

        def start(self, event: Any) -> BeforeAgentStartResult:
            seen.append(f"start {event.prompt.content[0].text}")
            return BeforeAgentStartResult(
                message=ExtensionMessage("guard.note", "Never read secrets.", details={"v": 1}),
                system_prompt=f"{event.system_prompt} Obey the guard.")

        def tool_call(self, event: Any) -> ToolCallDecision | None:
            if event.call.arguments.get("path") == "secret.txt":
                return ToolCallDecision(block=True, reason="secret files are off limits")
            if event.call.arguments.get("path") == "x":
                return ToolCallDecision(arguments={"path": "b.py"})
            return None

        def tool_result(self, event: Any) -> ToolResultMessage | None:
            if event.call.name == "add":
                return ToolResultMessage.of(event.call, "forty-two")
            return None

        def context(self, event: Any) -> ContextResult:
            # drop the guard's note from what the model sees (the session keeps it)
            return ContextResult(messages=[m for m in event.messages if getattr(m, "custom_type", "") != "guard.note"
                                  or len(seen) < 3])

    session = Session.in_memory()
    agent = AgentSession(session, claude(server), tools=[read, add], system_prompt="Be brief.",
                         extensions=[Guard()])
    result = agent.prompt("Read the secret")
    assert result.stop == "stop"
    assert seen == ["start Read the secret", "turn_start 1", "turn_end 1 3", "turn_start 2", "turn_end 2 0"]
    stored = messages(session)
    assert stored[1].role == "custom" or any(e.type == "custom_message" for e in session.path())
    first, second = (r.body for r in server.requests)
    assert first["system"] == "Be brief. Obey the guard."
    assert "Never read secrets." in json.dumps(first["messages"])
    assert "Never read secrets." not in json.dumps(second["messages"])  # the context handler
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert results[0].is_error and results[0].content[0].text == "secret files are off limits"
    assert calls == ["b.py"]  # the secret was never read; x was rewritten to b.py
    assert results[2].content[0].text == "forty-two"
    notes = [e for e in session.path() if e.type == "custom_message"]
    assert [(n.custom_type, n.details) for n in notes] == [("guard.note", {"v": 1})]


def test_send_message_append_entry_and_commands(server: FakeLLM) -> None:
    server.then(Reply(text="Noted the reminder."), Reply(text="Summary: fine."), Reply(text="Pong."))
    outputs: list[str] = []

    def extension(api: ExtensionAPI) -> None:
        def remind(ctx: Any) -> None:
            api.append_entry("reminder.state", {"args": ctx.args})
            api.send_message({"customType": "reminder", "content": f"Remember: {ctx.args}"},
                             trigger_turn=True)
            ctx.output("reminder sent")

        api.register_command("remind", remind, "Send a reminder to the model")
        api.register_command("summarize", lambda ctx: f"Summarize in {ctx.args or 'one'} line", "Ask for a summary")
        api.register_command("count", lambda ctx: ctx.output(str(len(ctx.session))), "Count entries")

    session = Session.in_memory()
    agent = AgentSession(session, claude(server), extensions=[extension])
    assert sorted(agent.commands) == ["count", "remind", "summarize"]
    assert agent.commands["remind"].description == "Send a reminder to the model"
    run = agent.run_command("/remind the tests", outputs.append)
    assert run is not None and run.text == "Noted the reminder."
    assert outputs == ["reminder sent"]
    state = [e for e in session.path() if e.type == "custom"]
    assert any(e.custom_type == "reminder.state" and e.data == {"args": "the tests"} for e in state)
    assert "Remember: the tests" in json.dumps(server.requests[0].body["messages"])
    assert "reminder.state" not in json.dumps(server.requests[0].body)  # state never reaches the model
    run = agent.run_command("/summarize two", outputs.append)
    assert run is not None and run.text == "Summary: fine."
    assert server.requests[1].body["messages"][-1]["content"][0]["text"] == "Summarize in two line"
    assert agent.run_command("/count", outputs.append) is None and outputs[-1].isdigit()
    with pytest.raises(KeyError):
        agent.run_command("/nope")
    # a direct send_message with a turn
    run = agent.send_message(ExtensionMessage("ping", "ping?"), trigger_turn=True)
    assert run is not None and run.text == "Pong."
    assert len(server.requests) == 3


def test_entry_point_extensions(server: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = install_extension(tmp_path / "site", "demo_ext", (
        "    api.register_command('hello', lambda ctx: ctx.output('hello from demo'), 'Say hello')\n"
        "    api.register_message_renderer('demo.card', lambda m: 'CARD: ' + str(m.content))\n"))
    monkeypatch.syspath_prepend(str(package))
    agent = AgentSession(Session.in_memory(), claude(server), installed_extensions=True)
    assert "hello" in agent.commands and ("demo", sys.modules["demo_ext"]) in agent.extensions
    out: list[str] = []
    agent.run_command("/hello", out.append)
    assert out == ["hello from demo"]
    from sessiontree.renderers import registry

    rendered = registry.render(CustomMessage(custom_type="demo.card", content="x"))
    assert rendered is not None and rendered.text == "CARD: x"


def test_cancel_during_the_stream_writes_nothing_half_done(server: FakeLLM) -> None:
    server.then(Reply(text="word " * 300, chunk_delay=0.05))
    session = Session.in_memory()
    token = CancelToken()
    got: list[StreamDelta] = []

    def on_delta(delta: StreamDelta) -> None:
        got.append(delta)
        if len(got) == 2:
            token.cancel()

    result = AgentSession(session, claude(server)).prompt("talk a lot", on_delta=on_delta, cancel=token)
    assert result.stop == "aborted"
    assert [m.role for m in messages(session)] == ["user"]  # no partial reply
    run = session.optree().runs[result.run_id]  # type: ignore[index]
    assert run.ended_at is not None and not run.success  # type: ignore[attr-defined]


def test_cancel_during_tools_answers_the_calls_not_run(server: FakeLLM) -> None:
    server.then(Reply(text="", tool_calls=[("stop_now", {}), ("read", {"path": "a.py"})]))
    calls.clear()

    @tool
    def stop_now(context: ToolContext) -> str:
        """Cancels the run."""
        context.cancel.cancel()
        return "stopping"

    session = Session.in_memory()
    result = AgentSession(session, claude(server), tools=[stop_now, read]).prompt("go")
    assert result.stop == "aborted" and calls == [] and len(server.requests) == 1
    stored = messages(session)
    assert [m.role for m in stored] == ["user", "assistant", "toolResult", "toolResult"]
    assert stored[3].is_error and stored[3].content[0].text == "Cancelled before it ran"


def test_a_failed_model_call_is_stored_as_pi_does(server: FakeLLM) -> None:
    server.then(Reply(400, error="prompt is too long"))
    session = Session.in_memory()
    result = AgentSession(session, claude(server)).prompt("hi")
    assert result.stop == "error" and "prompt is too long" in (result.error or "")
    reply = messages(session)[-1]
    assert isinstance(reply, AssistantMessage) and reply.stop_reason == "error"
    assert "prompt is too long" in str(reply.error_message)


def test_the_operation_tree_is_recorded(server: FakeLLM, tmp_path: Path) -> None:
    server.then(Reply(text="", tool_calls=[("delegate", {"task": "count files"})], usage=(1000, 100, 0)),
                Reply(text="There are 2 files.", usage=(50, 5, 0)),          # the sub-agent
                Reply(text="The helper says 2 files.", usage=(1200, 20, 0)))

    @tool
    async def delegate(task: str, context: ToolContext) -> str:
        """Hand a task to a helper agent."""
        return await context.run_subagent(task, system_prompt="You count files.")

    session = Session.create(tmp_path, cwd="/proj")
    result = AgentSession(session, claude(server), tools=[delegate]).prompt("How many files?")
    assert result.text == "The helper says 2 files."
    tree = Session.open(session.file).optree()  # type: ignore[arg-type]
    root = tree.runs[result.run_id]  # type: ignore[index]
    assert len(root.turns) == 2
    ops = [op for turn in root.turns for op in turn.ops]
    assert [op.kind for op in ops] == ["llm", "tool", "session", "llm"]
    llm = ops[0]
    assert llm.accounting[0].usage.input == 1000 and llm.accounting[0].cost_usd > 0
    (child,) = tree.children(root)
    assert child.own.tokens_in == 50 and child.own.llm_calls == 1 and child.agent_id == "agent.sub"
    assert root.rollup.tokens_in == 1000 + 50 + 1200 and root.rollup.agents_run == 2
    assert root.own.tools_run == 1 and root.rollup.cost_usd > root.own.cost_usd > 0
    children = [p for p in tmp_path.iterdir() if p.name != Path(session.file).name]  # type: ignore[arg-type]
    assert len([p for p in children if p.suffix == ".jsonl"]) == 1  # the sub-agent's session
    out = CliRunner().invoke(cli, ["ops", str(session.file)])
    assert out.exit_code == 0, out.output
    assert "llm" in out.output and "tool" in out.output and "agent.sub" in out.output


def test_async_twin(server: FakeLLM) -> None:
    server.then(Reply(text="", tool_calls=[("read", {"path": "b.py"})]), Reply(text="b.py is empty."))
    session = Session.in_memory()
    agent = AsyncAgentSession(session, gpt_chat(server), tools=[read])
    result = asyncio.run(agent.prompt("What is in b.py?"))
    assert result.text == "b.py is empty."
    assert [m.role for m in messages(session)] == ["user", "assistant", "toolResult", "assistant"]


def test_pi_reads_what_the_agent_wrote(server: FakeLLM, tmp_path: Path, pi_modules: Path) -> None:
    server.then(Reply(text="Let me read it.", thinking="Read first.", tool_calls=[("read", {"path": "a.py"})]),
                Reply(text="It prints a."))
    session = Session.create(tmp_path, cwd="/proj")
    AgentSession(session, claude(server), tools=[read]).prompt("What does a.py do?")
    (answer,) = pi_read(pi_modules, [Path(session.file)])  # type: ignore[arg-type]
    assert_same(Path(session.file), answer)  # type: ignore[arg-type]




def test_messages_sent_during_a_run_wait_for_the_end_of_the_turn(server: FakeLLM) -> None:
    server.then(Reply(text="", tool_calls=[("read", {"path": "a.py"})]),
                Reply(text="Done, and I saw the warning."))

    def extension(api: ExtensionAPI) -> None:
        def warn(event: Any) -> None:
            api.send_message(ExtensionMessage("lint", "a.py has no tests"), trigger_turn=True)

        api.on("tool_result", warn)

    session = Session.in_memory()
    result = AgentSession(session, claude(server), tools=[read], extensions=[extension]).prompt("Check a.py")
    kinds = [e.type if e.type != "message" else e.message.role for e in session.path()  # type: ignore[attr-defined]
             if e.type in ("message", "custom_message")]
    # written after the tool result (the end of the turn), not in the middle of it
    assert kinds == ["user", "assistant", "toolResult", "custom_message", "assistant"]
    assert "a.py has no tests" in json.dumps(server.requests[1].body["messages"])
    assert result.text == "Done, and I saw the warning."


def test_the_html_operations_panel_has_the_run(server: FakeLLM) -> None:
    from sessiontree.export.html import operations_data

    server.then(Reply(text="", tool_calls=[("read", {"path": "a.py"})]), Reply(text="ok"))
    session = Session.in_memory()
    result = AgentSession(session, claude(server), tools=[read]).prompt("go")
    panel = operations_data(session)
    assert panel is not None and result.run_id in json.dumps(panel)


def test_a_failing_tool_call_handler_still_answers_the_call(server: FakeLLM) -> None:
    server.then(Reply(text="", tool_calls=[("read", {"path": "a.py"})]), Reply(text="Understood."))
    calls.clear()

    def broken(api: ExtensionAPI) -> None:
        api.on("tool_call", lambda event: 1 / 0)

    session = Session.in_memory()
    agent = AgentSession(session, claude(server), tools=[read], extensions=[broken])
    result = agent.prompt("go")
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert answer.is_error and "ZeroDivisionError" in answer.content[0].text
    assert calls == [] and result.text == "Understood."
    agent.session = Session.in_memory()  # attributes of the sync agent are the async one's
    assert agent.agent.session is agent.session
