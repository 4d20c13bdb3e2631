"""``sessiontree chat`` end to end against the fake model server on 127.0.0.1: in a
pseudo-terminal (prompt_toolkit input, streamed Markdown, the status line, multi-line input,
Ctrl+C cancelling a slow reply, /tree with the browser) and with piped input (tools, every
built-in command, extension commands and renderers, errors, --continue)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from click.testing import CliRunner

from sessiontree import Session
from sessiontree.cli import cli
from sessiontree.describe import is_bookkeeping

from .chatterm import REPO, Terminal
from .fake_llm import ANTHROPIC_KEY, OPENAI_KEY, FakeLLM, Reply
from .test_pi_interop import assert_same, pi_modules, pi_read  # noqa: F401  (fixture)

MODEL = ["-m", "anthropic:claude-sonnet-4-5"]


def environment(server: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": server.url,
            "OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": f"{server.url}/v1",
            "HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}


def roles(path: Path) -> list[str]:
    with Session.open(path) as session:
        return [e.message.role for e in session.path() if e.type == "message"]  # type: ignore[attr-defined]


def test_chat_in_a_terminal(server: FakeLLM, tmp_path: Path) -> None:
    server.then(Reply(text="# Plan\n\nSome **bold** words:\n\n- first item\n- second item\n",
                      usage=(1000, 50, 0)),
                Reply(text="Got both lines."),
                Reply(text="word " * 500, hold_after=20))  # streams a little, then waits
    file = tmp_path / "chat.jsonl"
    term = Terminal(["chat", str(file), *MODEL], environment(server, tmp_path))
    try:
        term.expect("›")
        term.type("Make a plan")
        screen = term.expect("second item")
        reply = screen[screen.rfind("Plan"):]
        assert "Some bold words" in reply and "**" not in reply  # rendered, not raw Markdown
        status = term.expect(r"\$0\.\d{4}")
        assert "claude-sonnet-4-5" in status and "1,000" in status
        term.expect("›")
        term.send("first line\x1b\r")        # Alt+Enter: a new line, not sent yet
        term.type("second line")
        term.expect("Got both lines")
        sent = server.requests[1].body["messages"][-1]["content"]
        assert sent == [{"type": "text", "text": "first line\nsecond line"}]
        term.expect("›")
        term.send("\x1b[A")                   # Up: the last prompt from the history
        term.expect("second line")
        term.send("\x03")                     # Ctrl+C at the prompt: a fresh, empty one
        term.expect("›")
        term.type("Talk for a long time")
        term.expect("word word word")         # the reply is streaming, and cannot end by itself
        term.send("\x03")                     # Ctrl+C: cancel the reply
        term.expect("cancelled")
        assert server.hung_up.wait(10)        # the cancelled request's connection was closed
        term.expect("›")
        term.send("\x04")                     # Ctrl+D: leave
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.close()
    # the cancelled reply left nothing half-written: the last message is the prompt
    assert roles(file) == ["user", "assistant", "user", "assistant", "user"]


def test_tree_navigates_with_the_summary_prompt(server: FakeLLM, tmp_path: Path) -> None:
    file = tmp_path / "chat.jsonl"
    server.then(Reply(text="Answer one."), Reply(text="Answer two."), Reply(text="Answer three."))
    term = Terminal(["chat", str(file), *MODEL], environment(server, tmp_path))
    try:
        term.expect("›")
        term.type("Question one")
        term.expect("Answer one")
        term.expect("›")
        term.type("Question two")
        term.expect("Answer two")
        term.expect("›")                      # the chat holds the file's writer lock now
        term.type("/tree")
        term.expect("Question two")           # the browser, on the leaf: the last answer
        term.pause(0.5)                       # (never the bookkeeping written after it)
        term.send("\x1b[A")                   # up: the second question
        term.pause(0.3)
        term.send("\r")                       # go there...
        term.expect("(?i)summar")             # ...asked whether to summarize the branch left
        term.send("y")                        # and back in the chat at once, told where
        term.expect(r"the next message goes after \w+ \(summary: ")
        term.expect("Question two")           # offered as the next prompt, to edit
        term.send("\x15")                     # clear it and ask something else
        term.type("Question two, rephrased")
        term.expect("Answer three")
        term.expect("›")
        term.send("\x04")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.close()
    with Session.open(file) as session:
        path = session.path()
        kinds = [e.type for e in path]
        assert "branch_summary" in kinds
        old = [e for e in session.entries() if e.type == "message"  # type: ignore[attr-defined]
               and e.message.role == "user" and e.message.content[0].text == "Question two"]  # type: ignore[attr-defined]
        assert len(old) == 1 and old[0].id not in {e.id for e in path}  # kept, on another branch
        texts = [e.message.content[0].text for e in path  # type: ignore[attr-defined]
                 if e.type == "message" and e.message.role == "user"]  # type: ignore[attr-defined]
        assert texts == ["Question one", "Question two, rephrased"]


def run_piped(server: FakeLLM, tmp_path: Path, lines: list[str], *args: str
              ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **environment(server, tmp_path), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "sessiontree", "chat", *args], input="\n".join(lines) + "\n",
                          text=True, capture_output=True, env=env, cwd=REPO, check=False, timeout=120)


def test_piped_chat_with_tools_commands_and_renderers(server: FakeLLM, tmp_path: Path) -> None:
    server.then(Reply(text="Let me read it.", tool_calls=[("read", {"path": "a.py"})]),
                Reply(text="It prints a."),
                Reply(text="Noted your note."),
                Reply(500, error="overloaded"), Reply(500, error="overloaded"),
                Reply(500, error="overloaded"), Reply(500, error="overloaded"),
                Reply(text="Hello from GPT."))
    file = tmp_path / "s.jsonl"
    export = tmp_path / "page.html"
    done = run_piped(server, tmp_path, [
        "What does a.py do?", "/hello tests", "/note run the linter", "/name Piped chat",
        "/label checkpoint", "/help", "This one fails", "/model openai:gpt-4.1", "Hi GPT",
        f"/export {export}", "/compact keep it short", "/nope", "/fork", "/quit"],
        str(file), *MODEL, "-e", "tests.chat_extension")
    out = done.stdout
    assert done.returncode == 1 and "1 turn(s) failed" in done.stderr  # the failed turn
    assert "→ read" in out and "← read: print('a')" in out and "It prints a." in out
    assert "hello, tests" in out
    assert "[chat.note]" in out and "NOTE run the linter" in out and "**NOTE**" not in out
    assert "/hello" in out and "Say hello (tests.chat_extension)" in out and "/tree" in out
    assert "stopped (error)" in out and "overloaded" in out
    assert "Hello from GPT." in out and "openai:gpt-4.1" in out
    assert "unknown command /nope" in out
    assert "forked into" in out and "nothing to compact" in out  # too short to compact
    assert "/compact failed" not in out  # (a no-op is no failure)
    assert export.exists() and "NOTE" in export.read_text("utf-8")
    with Session.open(file) as session:
        assert session.name == "Piped chat"
        assert "checkpoint" in [label for label, _ in session.labels().values()]
        kinds = [e.type for e in session.path()]
        assert "model_change" in kinds and "custom_message" in kinds
        replies = [e.message for e in session.path() if e.type == "message"  # type: ignore[attr-defined]
                   and e.message.role == "assistant"]  # type: ignore[attr-defined]
        assert replies[-1].provider == "openai" and replies[-2].stop_reason == "error"
        assert session.optree().runs  # the runs' operation trees are in the file
    forks = [p for p in tmp_path.glob("*.jsonl") if p != file]
    assert len(forks) == 1
    assert json.loads(forks[0].read_text("utf-8").splitlines()[0])["parentSession"] == str(file)


def test_continue_and_a_new_session(server: FakeLLM, tmp_path: Path) -> None:
    server.then(Reply(text="First."), Reply(text="Second."))
    folder = tmp_path / "sessions"
    first = run_piped(server, tmp_path, ["Hello"], "--dir", str(folder), *MODEL)
    assert first.returncode == 0 and "First." in first.stdout
    (created,) = list(folder.glob("*.jsonl"))
    again = run_piped(server, tmp_path, ["Again"], "--continue", "--dir", str(folder))
    assert again.returncode == 0, again.stderr  # the model comes from the session
    assert "Second." in again.stdout and list(folder.glob("*.jsonl")) == [created]
    assert roles(created) == ["user", "assistant", "user", "assistant"]
    nomodel = run_piped(server, tmp_path, ["x"], str(tmp_path / "empty.jsonl"))
    assert nomodel.returncode == 2 and "--model" in nomodel.stderr


def test_a_chat_costs_one_bookkeeping_entry_per_turn_and_labels_the_reply(
        server: FakeLLM, tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    """Issue 20 points 1 and 2: three prompts (four model calls) hold four operation-tree
    entries; /label, the leaf shown and the tree's default views are the conversation's; pi
    reads the file with the same context; the banner names the model as asked."""
    server.then(Reply(text="Let me read it.", tool_calls=[("read", {"path": "a.py"})]),
                Reply(text="It prints a."), Reply(text="Two."), Reply(text="Three."))
    file = tmp_path / "s.jsonl"
    done = run_piped(server, tmp_path, ["What does a.py do?", "Second", "Third",
                                        "/label good answer"], str(file), *MODEL)
    assert done.returncode == 0, done.stderr
    assert f"sessiontree chat · {MODEL[1]} · " in done.stdout
    with Session.open(file) as session:
        entries = [session.entry(i) for i in session.ids()]
        ops = [e for e in entries if is_bookkeeping(e)]
        messages = [e for e in entries if e.type == "message"]
        assert len(messages) == 8 and len(ops) == 4 and len(entries) == 8 + 4 + 1  # + label
        reply = messages[-1]
        label = entries[-1]  # the bookkeeping is written after the reply...
        assert label.type == "label" and label.parent_id == ops[-1].id
        assert list(session.labels()) == [reply.id]  # ...but the label is the reply's
        assert session.build_context().to_builtins() == \
            session.build_context(reply.id).to_builtins()
        tree = session.optree()
        assert tree.problems == [] and len(tree.runs) == 3
        assert sorted(len(run.turns) for run in tree.runs.values()) == [1, 1, 2]
        assert not any(run.unfinished for run in tree.runs.values())
    assert "label of " + reply.id in done.stdout and f"leaf {reply.id}" in done.stdout
    assert not list(tmp_path.glob("*.blobs"))  # no journal left behind
    shown = CliRunner().invoke(cli, ["tree", str(file)]).output.splitlines()
    assert not any("sessiontree.op" in line for line in shown) and len(shown) == 8 + 1
    assert reply.id in shown[-2] and "[good answer]" in shown[-2]
    assert label.id in shown[-1] and "●" in shown[-1]
    every = CliRunner().invoke(cli, ["tree", "--ops", str(file)]).output
    assert every.count("sessiontree.op.batch") == 4 and len(every.splitlines()) == 8 + 4 + 1
    assert_same(file, pi_read(pi_modules, [file])[0])  # pi: the same tree, leaf and context


def test_the_model_is_named_as_it_was_asked_for() -> None:
    """Issue 20 point 2: the banner and status line name openai-responses:gpt-5 so, not as
    openai:gpt-5 (which is the Chat Completions API)."""
    from sessiontree.providers import model_from_spec, model_spec

    for spec in ("openai-responses:gpt-5", "openai:gpt-4.1", "anthropic:claude-sonnet-4-5"):
        assert model_spec(model_from_spec(spec, api_key="k")) == spec
    assert model_spec(model_from_spec("openai-chat:gpt-4.1", api_key="k")) == "openai:gpt-4.1"


def test_fork_of_a_path_without_a_conversation_says_when_its_file_is_written(
        server: FakeLLM, tmp_path: Path) -> None:
    """pi 1.5.2 writes such a fork's file with its first message: /fork says so, and the file
    is there once a message came."""
    server.then(Reply(text="Hello from the fork."))
    with Session.create(tmp_path / "sessions") as session:
        session.append_model_change("anthropic", "claude-sonnet-4-5")
        assert session.file is not None
        file = Path(session.file)
    done = run_piped(server, tmp_path, ["/fork", "Hi", "/quit"], str(file), *MODEL)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if "forked into" in line)
    assert line.endswith("(written with the next message)")
    fork = Path(line.removeprefix("forked into ").removesuffix(" (written with the next message)"))
    assert fork != file and fork.exists()  # the message wrote it
    with Session.open(fork) as forked:
        assert [e.type for e in forked.path()].count("message") == 2  # "Hi" and the reply
