"""Interoperability with pi itself: files we write load in pi's SessionManager with the same
leaf, contexts, tree, labels and name, and files pi writes load here the same way.

pi 0.73.1 is installed from npm into a cache folder on first run (sessiontree.testing.pi).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sessiontree import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    Session,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiontree._json import dumps, loads
from sessiontree.testing.pi import ensure_pi, run_node_script

from .conftest import BENCH

PROBE = Path(__file__).parent / "pi" / "pi_probe.mjs"


@pytest.fixture(scope="session")
def pi_modules() -> Path:
    return ensure_pi()


def pi_read(modules: Path, files: list[Path]) -> list[dict[str, Any]]:
    return run_node_script(PROBE, str(modules), "read", payload=[str(f) for f in files])  # type: ignore[no-any-return]


def ours(path: Path) -> dict[str, Any]:
    with Session.open(path, strict=True) as session:
        tree = [[n.id, d, n.label] for root in session.tree() for n, d in root.walk()]
        return {
            "leaf": session.leaf_id,
            "context": session.build_context().to_builtins() if session.leaf_id else None,
            "contexts": {leaf: session.build_context(leaf).to_builtins() for leaf in session.leaves()},
            "tree": tree,
            "labels": {target: label for target, (label, _) in session.labels().items()},
            "name": session.name,
        }


def assert_same(path: Path, pi: dict[str, Any]) -> None:
    mine = ours(path)
    assert pi["unchanged"], f"pi rewrote {path}"
    for key in ("leaf", "context", "contexts", "tree", "labels", "name"):
        assert mine[key] == pi[key], f"{path.name}: {key} differs"


def reply(text: str, model: str = "claude-sonnet-4-5", *calls: ToolCall) -> AssistantMessage:
    content: list[TextContent | ThinkingContent | ToolCall] = [
        ThinkingContent(thinking=f"thinking about {text}", thinking_signature="sig"), TextContent(text=text)]
    content.extend(calls)
    return AssistantMessage(content=content, api="anthropic-messages", provider="anthropic", model=model,
                            stop_reason="toolUse" if calls else "stop")


def build_ours(folder: Path) -> list[Path]:
    """Sessions written through our API, covering every entry type and leaf move."""
    files = []

    s = Session.create(folder, cwd="/home/dev/proj")
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    s.append_thinking_level_change("high")
    q1 = s.append_message(UserMessage.of("Fix the failing test — ü, 中文, 😀, \u2028 and \ud800 too"))
    s.append_message(reply("Running it", "claude-sonnet-4-5", ToolCall(id="t1", name="bash", arguments={"command": "pytest"})))
    s.append_message(ToolResultMessage(tool_call_id="t1", tool_name="bash",
                                       content=[TextContent(text="1 failed"), ImageContent(data="iVBORw0KGgo=", mime_type="image/png")]))
    a1 = s.append_message(reply("Fixed.", "claude-opus-4-5"))
    s.set_label(q1, "start")
    s.branch(q1)
    s.append_message(reply("Another way", "claude-haiku-4-5"))
    s.append_custom_message("reminder", "stay focused", display=False, details={"n": 1})
    s.append_custom("ext-state", {"counter": 3, "f": 0.5})
    s.branch_with_summary(a1, "The user explored a different conversation branch before returning here.\n"
                              "Summary of that exploration:\n\nTried another way.")
    s.append_message(BashExecutionMessage(command="ls", output="a b", exit_code=0))
    s.append_message(UserMessage(content="plain string content"))
    s.set_label(q1, "renamed")
    s.set_name("Interop session")
    files.append(Path(s.file or ""))
    s.close()

    s = Session.create(folder, cwd="/home/dev/proj")
    first = s.append_message(UserMessage.of("q1"))
    s.append_message(reply("a1"))
    kept = s.append_message(UserMessage.of("q2"))
    s.append_message(reply("a2"))
    s.append_compaction("## Goal\nq1 answered", kept, 12345, details={"readFiles": [], "modifiedFiles": []})
    s.append_message(UserMessage.of("q3"))
    s.append_message(reply("a3"))
    s.checkout(first)                      # persisted leaf move (a marker pi also follows)
    s.append_message(reply("a1 again"))
    s.reset_leaf()                         # a second root
    s.append_message(UserMessage.of("new root"))
    s.branch_with_summary(None, "summary at the root")
    s.set_label(first, "first")
    s.set_label(first, None)
    s.checkout(kept)
    files.append(Path(s.file or ""))
    s.close()
    return files


def test_sessions_written_by_us_load_identically_in_pi(tmp_path: Path, pi_modules: Path) -> None:
    files = build_ours(tmp_path)
    for path, pi in zip(files, pi_read(pi_modules, files)):
        assert_same(path, pi)


def test_generated_sessions_appended_to_by_us_load_identically_in_pi(tmp_path: Path, pi_modules: Path) -> None:
    files = []
    for seed in (7, 8):
        path = tmp_path / f"gen-{seed}.jsonl"
        subprocess.run([sys.executable, str(BENCH / "gen_pi_session.py"), "--entries", "800",
                        "--branch-every", "50", "--compact-every", "200", "--seed", str(seed), str(path)],
                       check=True, capture_output=True)
        with Session.open(path) as session:
            leaves = session.leaves()
            session.branch(leaves[0])
            session.append_message(UserMessage.of("continue from the first leaf"))
            session.append_message(reply("continuing"))
            session.set_label(leaves[-1], "last leaf")
        files.append(path)
    for path, pi in zip(files, pi_read(pi_modules, files)):
        assert_same(path, pi)


PI_SPECS = [
    [["model", "anthropic", "claude-sonnet-4-5"], ["thinking", "medium"], ["user", "Run the tests"],
     ["assistant", "Running", "anthropic", "claude-sonnet-4-5"], ["tool", "toolu_1", "2 passed ✓"],
     ["assistant", "All pass", "anthropic", "claude-sonnet-4-5"], ["label", 2, "tests"], ["name", "  Test run  "]],
    [["user", "q1"], ["assistant", "a1", "openai", "gpt-5"], ["user", "q2"], ["assistant", "a2", "openai", "gpt-5"],
     ["compaction", "## Goal\nq1", 2, 999], ["user", "q3"], ["assistant", "a3", "openai", "gpt-5"],
     ["branch", 1], ["branch_summary", 1, "went elsewhere"], ["user", "q4"],
     ["custom_message", "note", "remember", True], ["custom", "state", {"k": [1, 2.5]}],
     ["assistant", "a4", "anthropic", "claude-opus-4-5"], ["reset"], ["user", "second root"],
     ["assistant", "root reply", "openai", "gpt-5"], ["label", 0, "one"], ["label", 0, None]],
]


def test_sessions_written_by_pi_load_identically_here(tmp_path: Path, pi_modules: Path) -> None:
    specs = [{"dir": str(tmp_path / f"pi{i}"), "cwd": "/home/dev/proj", "ops": ops}
             for i, ops in enumerate(PI_SPECS)]
    files = [Path(f) for f in run_node_script(PROBE, str(pi_modules), "write", payload=specs)]
    for path, pi in zip(files, pi_read(pi_modules, files)):
        assert_same(path, pi)
        for line in path.read_bytes().splitlines():
            assert dumps(loads(line)) == line  # every pi line round-trips byte for byte

    # appending with our API keeps the file pi's: it loads the same in both afterwards
    for path in files:
        with Session.open(path) as session:
            session.branch(session.ids()[1])
            session.append_message(UserMessage.of("appended by sessiontree"))
            session.append_message(reply("and answered"))
    for path, pi in zip(files, pi_read(pi_modules, files)):
        assert_same(path, pi)
        assert json.loads(path.read_text("utf-8").splitlines()[-1])["message"]["role"] == "assistant"
