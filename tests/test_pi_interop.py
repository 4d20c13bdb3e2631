"""Interoperability with pi itself (npm ``@mariozechner/pi-coding-agent`` 0.73.1).

(a) Sessions written through our API load in pi's own ``SessionManager`` with the same leaf, the
    same context from every leaf (compared as parsed JSON and as the exact JSON text), the same
    paths, tree, labels, children and name, and pi leaves their bytes alone.
(b) Sessions pi writes through its own API load here the same way, every line round-trips byte for
    byte, and after we append to them pi still agrees with us.
(c) The same random operation scripts run through both APIs give the same files up to ids and
    times: same entries (key order included), same contexts, same tree.

pi is installed from npm into a cache folder on first use (``sessiontree.testing.pi``); without
node, npm or the registry these tests fail with the reason, they never skip. pi is started once per
batch of files (``tests/pi/pi_probe.mjs``), not once per file.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

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
from sessiontree.testing.generate import generate_session
from sessiontree.testing.pi import (
    PI_0_73,
    PI_1_5,
    PI_VERSION,
    PiUnavailable,
    default_pi_dir,
    ensure_pi,
    pi_dist,
    run_node_script,
)

PROBE = Path(__file__).parent / "pi" / "pi_probe.mjs"
CWD = "/home/dev/proj"


# -- pi ------------------------------------------------------------------------------------------

@functools.cache
def _install() -> Path | str:
    try:
        return ensure_pi()
    except PiUnavailable as error:
        return (f"pi {PI_VERSION} is required by the interoperability tests and could not be "
                f"installed or run: {error}")


class Pi:
    """pi's ``SessionManager`` through ``tests/pi/pi_probe.mjs``, one node process per batch."""

    def __init__(self, installed: Path | str) -> None:
        self._installed = installed

    @property
    def modules(self) -> Path:
        if isinstance(self._installed, str):
            pytest.fail(self._installed, pytrace=False)  # a failure, never a skip
        return self._installed

    def read(self, files: Sequence[Path]) -> list[dict[str, Any]]:
        return pi_read(self.modules, files)

    def write(self, specs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Sessions written by pi's API: ``[{file, ids, leaf, exists}]`` per spec."""
        return run_node_script(PROBE, str(self.modules), "write-ids", payload=list(specs))  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def pi() -> Pi:
    """pi 0.73.1, installed on first use; a test using it fails (never skips) without it."""
    return Pi(_install())


@pytest.fixture(scope="session")
def pi_modules() -> Path:
    """pi's ``node_modules`` folder (imported by other test modules)."""
    return Pi(_install()).modules


def pi_read(modules: Path, files: Sequence[Path]) -> list[dict[str, Any]]:
    return run_node_script(PROBE, str(modules), "read", payload=[str(f) for f in files])  # type: ignore[no-any-return]


# -- comparing -----------------------------------------------------------------------------------

def ours(path: Path) -> dict[str, Any]:
    """What we say about the file, in the probe's shape."""
    with Session.open(path, strict=True) as session:
        leaves = session.leaves()
        contexts = {leaf: session.build_context(leaf) for leaf in leaves}
        labels = session.labels()
        return {
            "leaf": session.leaf_id,
            "context": session.build_context().to_builtins() if session.leaf_id else None,
            "contexts": {leaf: c.to_builtins() for leaf, c in contexts.items()},
            "contextsJson": {leaf: c.to_json() for leaf, c in contexts.items()},
            "branches": {leaf: session.path_ids(leaf) for leaf in leaves},
            "tree": [[n.id, d, n.label] for root in session.tree() for n, d in root.walk()],
            "labels": {target: label for target, (label, _) in labels.items()},
            "labelTimestamps": {target: ts for target, (_, ts) in labels.items() if ts is not None},
            "children": {i: session.children_ids(i) for i in session.ids()},
            "lines": [session.raw_line(i).decode("utf-8") for i in session.ids()],
            "name": session.name,
            "sessionId": session.id,
            "cwd": session.cwd,
        }


def assert_same(path: Path, pi: dict[str, Any]) -> None:
    """pi left the file alone and says exactly what we say about it."""
    assert pi["unchanged"], f"pi rewrote {path}"
    mine = ours(path)
    for key, value in mine.items():
        assert (key, value) == (key, pi[key]), f"{path.name}: {key} differs"


def check_in_pi(pi: Pi, files: Sequence[Path]) -> list[dict[str, Any]]:
    answers = pi.read(files)
    assert len(answers) == len(files)
    for path, answer in zip(files, answers):
        assert_same(path, answer)
    return answers


# -- (a) written by us ---------------------------------------------------------------------------

def reply(text: str, model: str = "claude-sonnet-4-5", *calls: ToolCall) -> AssistantMessage:
    content: list[TextContent | ThinkingContent | ToolCall] = [
        ThinkingContent(thinking=f"thinking about {text}", thinking_signature="sig"), TextContent(text=text)]
    content.extend(calls)
    return AssistantMessage(content=content, api="anthropic-messages", provider="anthropic", model=model,
                            stop_reason="toolUse" if calls else "stop")


def build_ours(folder: Path) -> list[Path]:
    """Sessions written through our API, covering every entry type and leaf move."""
    files = []

    s = Session.create(folder, cwd=CWD)
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

    s = Session.create(folder, cwd=CWD)
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

    # odd text everywhere: lone surrogates of both kinds, separators, controls, JS-order keys
    odd = "\udc00lone low, lone high \ud83d, \u2028\u2029, \x00\x1f, \"quotes\" \\ and 😀"
    s = Session.create(folder, cwd="/home/dév/プロジェクト")
    s.append_thinking_level_change("xhigh")
    q = s.append_message(UserMessage.of(odd))
    s.append_message(AssistantMessage(content=[TextContent(text=odd), ToolCall(
        id="c\ud800", name="edit", arguments={"10": odd, "2": [1.5, -0.0, 1e21, 2**53], "a": None})],
        api="openai-responses", provider="openai", model="gpt-5", stop_reason="toolUse"))
    s.append_message(ToolResultMessage(tool_call_id="c\ud800", tool_name="edit",
                                       content=[TextContent(text=odd)], is_error=True))
    s.append_custom_message("note\ud800", [TextContent(text=odd), ImageContent(data="AAAA", mime_type="image/jpeg")],
                            display=True, details={"\ud800": odd, "0": 0})
    s.append_custom("state", {"text": odd, "1": 1, "0": 0})
    s.set_label(q, odd)
    s.set_name(f"  {odd}  ")
    c = s.append_compaction(odd, q, 7, details={"readFiles": [odd], "modifiedFiles": ["b"]}, from_hook=True)
    s.branch_with_summary(c, odd, details={"readFiles": [], "modifiedFiles": [odd]}, from_hook=True)
    s.checkout(None)                       # the marker as a root: an empty context in both
    files.append(Path(s.file or ""))
    s.close()

    # an agent loop through the of() constructors only: pi reads the same context
    s = Session.create(folder, cwd=CWD)
    s.append_message(UserMessage.of("List the files"))
    ask = AssistantMessage.of("Listing.", thinking="use ls", provider="openai", model="gpt-5",
                              api="openai-responses", tool_calls=[
                                  ToolCall(id="call_1", name="bash", arguments={"command": "ls"})])
    s.append_message(ask)
    for call in ask.tool_calls:
        s.append_message(ToolResultMessage.of(call, "a.py b.py", details={"exitCode": 0}))
    s.append_message(ToolResultMessage.of("call_2", "no such tool", tool_name="grep", is_error=True))
    s.append_message(AssistantMessage.of("Two files.", provider="openai", model="gpt-5"))
    files.append(Path(s.file or ""))
    s.close()

    # only user messages: pi itself would not have written this yet, but reads it
    s = Session.create(folder, cwd=CWD)
    s.append_message(UserMessage.of("one"))
    s.append_message(UserMessage.of("two"))
    s.set_name("\ufeff\x1c JavaScript's trim keeps U+001C and U+0085, drops U+FEFF \x85\u3000")
    files.append(Path(s.file or ""))
    s.close()
    return files


def test_sessions_written_by_us_load_identically_in_pi(tmp_path: Path, pi: Pi) -> None:
    files = build_ours(tmp_path)
    answers = check_in_pi(pi, files)
    assert [m["role"] for m in answers[3]["context"]["messages"]] == [
        "user", "assistant", "toolResult", "toolResult", "assistant"]
    assert answers[4]["name"] == "\x1c JavaScript's trim keeps U+001C and U+0085, drops U+FEFF \x85"
    assert answers[2]["context"] == {"messages": [], "thinkingLevel": "off", "model": None}
    assert any(c["messages"][0]["role"] == "compactionSummary" for c in answers[1]["contexts"].values())


def generate(path: Path, entries: int, **options: int) -> Path:
    generate_session(path, entries, **options)
    return path


def test_generated_sessions_appended_to_by_us_load_identically_in_pi(tmp_path: Path, pi: Pi) -> None:
    files = [
        generate(tmp_path / "gen-1k.jsonl", 1000, branch_every=100, compact_every=300, seed=1),
        generate(tmp_path / "gen-7.jsonl", 1000, branch_every=40, compact_every=150, seed=7),
    ]
    originals = [f.read_bytes() for f in files]
    for path in files:
        with Session.open(path, strict=True) as session:
            leaves = session.leaves()
            session.branch(leaves[0])
            q = session.append_message(UserMessage.of("continue from the first leaf"))
            session.append_message(reply("continuing"))
            session.set_label(leaves[-1], "last leaf")
            session.set_label(q, "mine")
            session.append_compaction("## Goal\ncontinue", q, 4242, details={"readFiles": [], "modifiedFiles": []})
            session.append_message(UserMessage.of("after the compaction \ud800"))
            session.branch_with_summary(leaves[len(leaves) // 2], "went back")
            session.append_custom_message("reminder", "short answers", display=True)
            session.append_message(reply("ok"))
            session.set_name("generated, continued")
            session.checkout(leaves[-1])
    answers = check_in_pi(pi, files)
    for path, original, answer in zip(files, originals, answers):
        assert path.read_bytes().startswith(original)  # appends only: the old bytes stay
        with Session.open(path, strict=True) as session:  # the checkout marker: the target's context
            target = session.entry(answer["leaf"]).parent_id
            assert answer["context"] == session.build_context(target).to_builtins()


def test_pi_appends_to_our_session_and_we_read_it(tmp_path: Path, pi: Pi) -> None:
    files = build_ours(tmp_path)[:2]
    specs = [{"file": str(f), "ops": [["user", "pi continues"], ["assistant", "sure", "openai", "gpt-5"],
                                      ["label", 0, "by pi"], ["name", "pi named it"]]} for f in files]
    written = pi.write(specs)
    assert [Path(w["file"]) for w in written] == files
    check_in_pi(pi, files)
    for path, w in zip(files, written):
        with Session.open(path, strict=True) as session:
            assert session.leaf_id == w["leaf"] == w["ids"][-1]
            assert session.name == "pi named it"


# -- (b) written by pi ---------------------------------------------------------------------------

ODD = "lone \ud800 high, \udfff low, 😀, \u2028, \x07, é"

PI_SPECS: list[list[list[Any]]] = [
    [["model", "anthropic", "claude-sonnet-4-5"], ["thinking", "medium"], ["user", "Run the tests"],
     ["assistant", "Running", "anthropic", "claude-sonnet-4-5"], ["tool", "toolu_1", "2 passed ✓"],
     ["assistant", "All pass", "anthropic", "claude-sonnet-4-5"], ["label", 2, "tests"], ["name", "  Test run  "]],
    [["user", "q1"], ["assistant", "a1", "openai", "gpt-5"], ["user", "q2"], ["assistant", "a2", "openai", "gpt-5"],
     ["compaction", "## Goal\nq1", 2, 999], ["user", "q3"], ["assistant", "a3", "openai", "gpt-5"],
     ["branch", 1], ["branch_summary", 1, "went elsewhere"], ["user", "q4"],
     ["custom_message", "note", "remember", True], ["custom", "state", {"k": [1, 2.5]}],
     ["assistant", "a4", "anthropic", "claude-opus-4-5"], ["reset"], ["user", "second root"],
     ["assistant", "root reply", "openai", "gpt-5"], ["label", 0, "one"], ["label", 0, None]],
    # every message kind as pi's agent stores it, details and fromHook, odd text
    [["message", {"role": "user", "content": ODD, "timestamp": 1767225601000}],
     ["message", {"role": "user", "content": [{"type": "text", "text": "look"},
                                              {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
                  "timestamp": 1767225602000}],
     ["message", {"role": "assistant", "content": [
         {"type": "thinking", "thinking": ODD, "thinkingSignature": "sig"},
         {"type": "text", "text": "editing"},
         {"type": "toolCall", "id": "call_1", "name": "edit", "arguments": {"path": "a.py", "10": 1, "2": 2.5e-7}}],
         "api": "openai-responses", "provider": "openai", "model": "gpt-5",
         "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                   "cost": {"input": 1e-5, "output": 0.1, "cacheRead": 0, "cacheWrite": 0, "total": 0.10001}},
         "stopReason": "toolUse", "timestamp": 1767225603000}],
     ["message", {"role": "toolResult", "toolCallId": "call_1", "toolName": "edit",
                  "content": [{"type": "text", "text": ODD}], "details": {"diff": "-a\n+b"}, "isError": False,
                  "timestamp": 1767225604000}],
     ["message", {"role": "bashExecution", "command": "ls", "output": "a\nb", "exitCode": 0, "cancelled": False,
                  "truncated": False, "timestamp": 1767225605000}],
     ["message", {"role": "assistant", "content": [], "api": "anthropic-messages", "provider": "anthropic",
                  "model": "claude-opus-4-5", "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                                        "totalTokens": 0, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                                                   "cacheWrite": 0, "total": 0}},
                  "stopReason": "aborted", "errorMessage": "Request was aborted", "timestamp": 1767225606000}],
     ["compaction", ODD, 1, 12000, {"readFiles": ["a.py"], "modifiedFiles": ["b.py"]}, False],
     ["custom_message", "hook\ud800", [{"type": "text", "text": ODD}], False, {"0": [], "z": None}],
     ["user", "after"], ["assistant", "fine", "anthropic", "claude-opus-4-5"],
     ["branch_summary", 2, ODD, {"readFiles": [], "modifiedFiles": ["c.py"]}, True],
     ["compaction", "hook summary", 8, 5, {"custom": True}, True],
     ["checkout", 3], ["checkout", None], ["branch_summary", None, "from the root"],
     ["label", 2, ODD], ["name", f" \ufeff{ODD}\u3000 "]],
]


def test_sessions_written_by_pi_load_identically_here(tmp_path: Path, pi: Pi) -> None:
    written = pi.write([{"dir": str(tmp_path / f"pi{i}"), "cwd": CWD, "ops": ops}
                        for i, ops in enumerate(PI_SPECS)])
    files = [Path(w["file"]) for w in written]
    assert all(w["exists"] for w in written)
    check_in_pi(pi, files)
    for path in files:
        lines = path.read_bytes().split(b"\n")[:-1]
        for line in lines:
            assert dumps(loads(line)) == line  # every pi line round-trips byte for byte
        with Session.open(path, strict=True) as session:
            assert [session.raw_line(i) for i in session.ids()] == lines[1:]

    # appending with our API keeps the file pi's: it loads the same in both afterwards
    before = [f.read_bytes() for f in files]
    for path in files:
        with Session.open(path, strict=True) as session:
            session.branch(session.ids()[1])
            session.append_message(UserMessage.of("appended by sessiontree"))
            session.append_message(reply("and answered"))
            session.set_label(session.ids()[0], "ours")
    for path, old, answer in zip(files, before, check_in_pi(pi, files)):
        assert path.read_bytes().startswith(old)
        assert answer["labels"][answer["tree"][0][0]] == "ours"
        assert json.loads(path.read_bytes().split(b"\n")[-3])["message"]["role"] == "assistant"


def test_pi_writes_nothing_before_the_first_assistant_message(tmp_path: Path, pi: Pi) -> None:
    """pi's lazy flush: no file until an assistant message exists, then everything at once."""
    user_only = [["model", "openai", "gpt-5"], ["user", "one"], ["label", 1, "x"], ["user", "two"]]
    lazy, flushed = pi.write([
        {"dir": str(tmp_path / "lazy"), "cwd": CWD, "ops": user_only},
        {"dir": str(tmp_path / "flushed"), "cwd": CWD,
         "ops": [*user_only, ["assistant", "finally", "openai", "gpt-5"], ["user", "three"]]},
    ])
    assert not lazy["exists"] and not Path(lazy["file"]).exists()
    assert flushed["exists"]
    path = Path(flushed["file"])
    with Session.open(path, strict=True) as session:
        assert session.ids() == flushed["ids"]
        assert session.leaf_id == flushed["leaf"]
        assert session.label(flushed["ids"][1]) == "x"
    check_in_pi(pi, [path])


# -- (c) the same scripts through both APIs --------------------------------------------------------

UNDEFINED = {"$undefined": True}  # the probe passes it to pi as undefined


def unset(value: Any) -> Any:
    return msgspec.UNSET if value == UNDEFINED else value


def apply_ours(session: Session, ops: Sequence[Sequence[Any]]) -> list[str]:
    """Run a probe script (see pi_probe.mjs) through our API; the ids appended, in order."""
    ids: list[str] = []

    def ref(r: Any) -> Any:
        return r if r is None or isinstance(r, str) else ids[r]

    def add(entry_id: str | None) -> None:
        if entry_id is not None:
            ids.append(entry_id)

    for kind, *a in ops:
        if kind == "message":
            add(session.append_message(a[0]))
        elif kind == "model":
            add(session.append_model_change(a[0], a[1]))
        elif kind == "thinking":
            add(session.append_thinking_level_change(a[0]))
        elif kind == "label":
            add(session.set_label(ref(a[0]), a[1]))
        elif kind == "name":
            add(session.set_name(a[0]))
        elif kind == "custom":
            add(session.append_custom(a[0], a[1]))
        elif kind == "custom_message":
            content = a[1] if isinstance(a[1], str) else [
                TextContent(text=b["text"]) if b["type"] == "text" else ImageContent(data=b["data"], mime_type=b["mimeType"])
                for b in a[1]]
            add(session.append_custom_message(a[0], content, a[2], *map(unset, a[3:4])))
        elif kind == "branch":
            session.branch(ref(a[0]))
        elif kind == "reset":
            session.reset_leaf()
        elif kind == "branch_summary":
            add(session.branch_with_summary(ref(a[0]), a[1], *map(unset, a[2:4])))
        elif kind == "compaction":
            add(session.append_compaction(a[0], ref(a[1]), a[2], *map(unset, a[3:5])))
        elif kind == "checkout":
            add(session.checkout(ref(a[0])))
        else:
            raise AssertionError(f"unknown op {kind}")
    return ids


SPECIAL = ["\ud800", "\udbff", "\u2028", "\u2029", "\ufeff", "\u3000", "\xa0", "\x1f", "\x85", "\x00", "\n",
           "\t", " ", '"', "\\", "😀", "é", "中"]
TEXT = st.text(st.one_of(st.sampled_from(SPECIAL), st.characters(codec="utf-8")), max_size=12)
KEYS = st.one_of(st.sampled_from(["0", "1", "10", "2", "01", "-1", "1.5", "a", "b", "__proto__", "4294967295"]), TEXT)
NUMBERS = st.one_of(st.integers(-(2**53) + 1, 2**53 - 1),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([0.1, 1e21, 1e-7, 123456789012345680000.0, -0.0, 5e-324]))
EXIT_CODES = st.one_of(st.none(), st.integers(-(2**31), 2**31))  # an int: append_message checks it
JSON = st.recursive(st.one_of(st.none(), st.booleans(), NUMBERS, TEXT),
                    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
                    max_leaves=8)
DETAILS = st.one_of(st.just(UNDEFINED), st.fixed_dictionaries(
    {"readFiles": st.lists(TEXT, max_size=2), "modifiedFiles": st.lists(TEXT, max_size=2)}), JSON)
BLOCKS = st.lists(st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.builds(lambda m: {"type": "image", "data": "AAAA", "mimeType": m}, st.sampled_from(["image/png", "image/webp"]))),
    min_size=1, max_size=2)


def _message(draw: st.DrawFn, clock: int) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "user", "assistant", "assistant", "toolResult", "bashExecution"]))
    if role == "user":
        return {"role": "user", "content": draw(st.one_of(TEXT, BLOCKS)), "timestamp": clock}
    if role == "assistant":
        blocks = draw(st.lists(st.one_of(
            st.builds(lambda t: {"type": "text", "text": t}, TEXT),
            st.builds(lambda t: {"type": "thinking", "thinking": t, "thinkingSignature": "s"}, TEXT),
            st.builds(lambda i, args: {"type": "toolCall", "id": i, "name": "bash", "arguments": args},
                      TEXT, st.dictionaries(KEYS, JSON, max_size=2))), max_size=3))
        provider, model = draw(st.sampled_from([("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-5"),
                                                ("google", "gemini-2.5-pro")]))
        return {"role": "assistant", "content": blocks, "api": "x", "provider": provider, "model": model,
                "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
                          "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0,
                                   "total": 0.30000000000000004}},
                "stopReason": draw(st.sampled_from(["stop", "toolUse", "error", "aborted"])), "timestamp": clock}
    if role == "toolResult":
        return {"role": "toolResult", "toolCallId": draw(TEXT), "toolName": "bash", "content": draw(BLOCKS),
                "isError": draw(st.booleans()), "timestamp": clock}
    return {"role": "bashExecution", "command": draw(TEXT), "output": draw(TEXT), "exitCode": draw(EXIT_CODES),
            "cancelled": False, "truncated": draw(st.booleans()), "timestamp": clock}


@st.composite
def scripts(draw: st.DrawFn) -> list[list[Any]]:
    """A random, valid op script: refs name earlier entries, compactions keep an entry of the path."""
    parent: list[int | None] = []
    leaf: int | None = None
    ops: list[list[Any]] = []
    clock = 1767225600000

    def appended() -> None:
        nonlocal leaf
        parent.append(leaf)
        leaf = len(parent) - 1

    def path() -> list[int]:
        out, node = [], leaf
        while node is not None:
            out.append(node)
            node = parent[node]
        return out

    kinds = ["message"] * 6 + ["model", "thinking", "label", "name", "custom", "custom_message", "branch",
                               "reset", "branch_summary", "compaction", "checkout"]
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(kinds))
        clock += 1000
        some = st.integers(0, len(parent) - 1) if parent else st.nothing()
        if kind in ("label", "branch") and not parent or kind == "compaction" and leaf is None:
            kind = "message"
        if kind == "message":
            ops.append(["message", _message(draw, clock)])
        elif kind == "model":
            ops.append(["model", draw(st.sampled_from(["openai", "anthropic"])), draw(TEXT)])
        elif kind == "thinking":
            ops.append(["thinking", draw(st.sampled_from(["off", "minimal", "low", "medium", "high", "xhigh"]))])
        elif kind == "label":
            ops.append(["label", draw(some), draw(st.one_of(st.none(), TEXT.filter(bool)))])
        elif kind == "name":
            ops.append(["name", draw(TEXT)])
        elif kind == "custom":
            ops.append(["custom", draw(TEXT), draw(JSON)])
        elif kind == "custom_message":
            ops.append(["custom_message", draw(TEXT), draw(st.one_of(TEXT, BLOCKS)), draw(st.booleans()),
                        draw(st.one_of(st.just(UNDEFINED), JSON))])
        elif kind == "branch":
            ops.append(["branch", draw(some)])
            leaf = ops[-1][1]
            continue
        elif kind == "reset":
            ops.append(["reset"])
            leaf = None
            continue
        elif kind == "branch_summary":
            target = draw(st.one_of(st.none(), some))
            ops.append(["branch_summary", target, draw(TEXT), draw(DETAILS), draw(st.booleans())])
            leaf = target
        elif kind == "compaction":
            ops.append(["compaction", draw(TEXT), draw(st.sampled_from(path())), draw(st.integers(0, 2**31)),
                        draw(DETAILS), draw(st.booleans())])
        elif kind == "checkout":
            target = draw(st.one_of(st.none(), some))
            ops.append(["checkout", target])
            if target is not None and target == len(parent) - 1:
                leaf = target
                continue
            leaf = target
        appended()
    if not any(op[0] == "message" and op[1]["role"] == "assistant" for op in ops):
        # pi writes nothing before an assistant message (its lazy flush)
        ops.append(["message", {"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                                "usage": {"input": 0, "output": 0}, "stopReason": "stop", "timestamp": clock}])
    return ops


def _normalized(path: Path, ids: list[str]) -> dict[str, Any]:
    """A file's entries and our view of it with ids replaced by their script index and entry
    times (and the message times taken from them) left out."""
    index = {entry_id: i for i, entry_id in enumerate(ids)}

    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return index.get(value, value)
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {index.get(k, k): norm(v) for k, v in value.items()}
        return value

    lines = path.read_text("utf-8").split("\n")[:-1]  # (str.splitlines also splits at U+2028)
    header = json.loads(lines[0])
    entries = []
    for line in lines[1:]:
        entry = json.loads(line)
        entry.pop("timestamp")
        for key in ("id", "parentId", "targetId", "firstKeptEntryId", "fromId"):
            if key in entry:
                entry[key] = index.get(entry[key], entry[key])
        if entry.get("customType") == "sessiontree.checkout":
            entry["data"] = norm(entry["data"])
        entries.append(entry)
    view = ours(path)
    for context in view["contexts"].values():
        for message in context["messages"]:
            if message["role"] in ("compactionSummary", "branchSummary", "custom"):
                message.pop("timestamp")
    return {
        "header": [(k, v) for k, v in header.items() if k not in ("id", "timestamp")],
        "entries": json.dumps(entries),  # key order counts
        "leaf": norm(view["leaf"]),
        "contexts": norm(view["contexts"]),
        "tree": norm(view["tree"]),
        "labels": norm(view["labels"]),
        "name": view["name"],
    }


@settings(max_examples=15, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(batch=st.lists(scripts(), min_size=6, max_size=6))
def test_random_scripts_give_the_same_files_through_both_apis(batch: list[list[list[Any]]], pi: Pi,
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("scripts")
    mine, our_ids = [], []
    for i, ops in enumerate(batch):
        with Session.create(folder / f"ours{i}", cwd=CWD) as session:
            our_ids.append(apply_ours(session, ops))
            mine.append(Path(session.file or ""))
    theirs = pi.write([{"dir": str(folder / f"pi{i}"), "cwd": CWD, "ops": ops} for i, ops in enumerate(batch)])
    pi_files = [Path(w["file"]) for w in theirs]
    check_in_pi(pi, mine + pi_files)  # each file: pi and we agree on everything
    for ours_file, ids, written, ops in zip(mine, our_ids, theirs, batch):
        assert len(ids) == len(written["ids"])
        for line in Path(written["file"]).read_bytes().split(b"\n")[:-1]:
            assert dumps(loads(line)) == line
        assert _normalized(ours_file, ids) == _normalized(Path(written["file"]), written["ids"]), ops


def test_a_missing_pi_fails_instead_of_skipping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without npm or node the install raises with the reason (the fixture turns it into a failure);
    SESSIONTREE_PI_DIR says where pi is (or goes)."""
    monkeypatch.setenv("SESSIONTREE_PI_DIR", str(tmp_path / "elsewhere"))
    assert default_pi_dir() == tmp_path / "elsewhere"
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PiUnavailable, match="node"):
        ensure_pi(tmp_path / "nowhere")
    unavailable = Pi("pi 0.73.1 is required by the interoperability tests and could not be installed: x")
    with pytest.raises(pytest.fail.Exception, match="could not be installed"):
        unavailable.read([])
    assert default_pi_dir(PI_1_5) == tmp_path / "elsewhere-1.5.2"
    with pytest.raises(PiUnavailable, match="node"):
        ensure_pi(tmp_path / "nowhere", release=PI_1_5)


def test_both_pis_install_and_pi_1_5_loads_its_session_manager() -> None:
    """Both releases install side by side from npm; pi 1.5.2's install replaces the dependency the
    registry does not serve with the generated empty package, and its session manager loads."""
    modules = {release: ensure_pi(release=release) for release in (PI_0_73, PI_1_5)}
    assert modules[PI_0_73] != modules[PI_1_5]
    stub = json.loads((modules[PI_1_5] / "marked-cjk-friendly" / "package.json").read_text("utf-8"))
    assert stub["version"] == "0.0.0"
    script = ("const m = await import(process.argv[1]);"
              "console.log(JSON.stringify([m.CURRENT_SESSION_VERSION, typeof m.buildSessionProjection,"
              " typeof m.SessionManager.list]));")
    for release, projection in ((PI_0_73, "undefined"), (PI_1_5, "function")):
        manager = (pi_dist(modules[release], release) / "core" / "session-manager.js").as_uri()
        done = subprocess.run(["node", "--input-type=module", "-e", script, manager],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout) == [3, projection, "function"], release


def test_the_benchmark_runs_beside_pi_with_equal_digests(pi: Pi) -> None:
    """benchmarks/run.py on the 1k file: both pis and we built the same contexts (cold, from
    the index, after foreign lines, the agent loop's last), tree and path (no timing is checked
    here)."""
    pi.modules  # noqa: B018 (fails the test when pi is unavailable)
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"
    done = subprocess.run([sys.executable, str(script), "--suites", "core", "--sizes", "1k",
                           "--repeat", "2"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "All digests equal pi's." in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1k |")]
    assert len(rows) == 24 and sum("digest = pi's" in row for row in rows) == 9
    assert "pi 1.5.2" in done.stdout and "pi 0.73.1" in done.stdout
