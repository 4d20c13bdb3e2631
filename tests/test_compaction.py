"""Compaction (format-spec.md section 14): pi's own prepareCompaction on generated and hand-written
sessions agrees with ours; the pure functions on small cases; compact() on real files (one
entry or nothing, events, bad input); properties of cut points and kept suffixes.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import (
    AssistantMessage,
    BashExecutionMessage,
    Compaction,
    EntryNotFound,
    ImageContent,
    Session,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessiontree._json import dumps, loads
from sessiontree.compaction import (
    DEFAULT_COMPACTION_SETTINGS,
    TURN_CONTEXT_SEPARATOR,
    AlreadyCompacted,
    CompactionSettings,
    FileOperations,
    NothingToCompact,
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    find_cut_point,
    find_turn_start_index,
    find_valid_cut_points,
    format_file_operations,
    get_last_assistant_usage,
    js_length,
    prepare_compaction,
    serialize_conversation,
    should_compact,
)
from sessiontree.context import entry_message
from sessiontree.entries import FileDetails
from sessiontree.events import (
    BeforeCompactResult,
    CompactEvent,
    CompactPreparation,
    HookFailed,
    OperationCancelled,
)
from sessiontree.summarize import CancelToken, SummaryCancelled, SummaryFailed, SummaryRequest
from sessiontree.testing.generate import generate_session
from sessiontree.testing.pi import ensure_pi, run_node_script

from .backends import Backend, reopen, stored, stored_file

PI_DIR = Path(__file__).parent / "pi"

# -- helpers ------------------------------------------------------------------------------------


def user(text: str) -> UserMessage:
    return UserMessage.of(text)


def reply(text: str, *calls: ToolCall, total: int = 0, stop: str = "stop") -> AssistantMessage:
    content: list[TextContent | ThinkingContent | ToolCall] = [TextContent(text=text)] if text else []
    content.extend(calls)
    return AssistantMessage(content=content, api="anthropic-messages", provider="anthropic",
                            model="claude-sonnet-4-5", usage=Usage(total_tokens=total),
                            stop_reason="toolUse" if calls else stop)  # type: ignore[arg-type]


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def result(call_id: str, text: str, name: str = "bash") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)])


def path_dicts(session: Session, leaf: str | None = None) -> list[dict[str, Any]]:
    ids = session.path_ids(leaf) if leaf is not None else session.path_ids()
    return [loads(session.raw_line(i)) for i in ids]


def js_sha(text: str) -> str:
    """sha256 of a string as node's ``createHash().update(text, "utf8")`` computes it (a lone
    surrogate becomes U+FFFD)."""
    clean = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return hashlib.sha256(clean.encode("utf-8")).hexdigest()


class Fixed:
    """A summarizer that returns a fixed text and records its requests."""

    def __init__(self, text: str = "## Goal\n- fixed summary") -> None:
        self.text = text
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        self.requests.append(request)
        return f"{self.text} ({request.purpose})"


# -- pi itself ----------------------------------------------------------------------------------

GENERATED = [
    # (name, generate_session arguments, keepRecentTokens values)
    ("linear", {"entries": 500, "branch_every": 0, "compact_every": 0, "seed": 11},
     (20000, 4000, 700)),
    ("branched", {"entries": 1500, "branch_every": 90, "compact_every": 0, "seed": 12},
     (20000, 3000)),
    ("compacted", {"entries": 3000, "branch_every": 160, "compact_every": 500, "seed": 13},
     (20000, 6000)),
    ("small-keep", {"entries": 1200, "branch_every": 0, "compact_every": 200, "seed": 14,
                    "keep_recent_tokens": 3000}, (3000, 20000, 1)),
    # pi 1.x entries: system messages, usage entries, context edits, checkpoints
    ("pi1", {"entries": 1200, "branch_every": 60, "compact_every": 200, "seed": 15,
             "keep_recent_tokens": 3000, "pi1": True}, (3000, 20000, 500)),
]


def hand_written(folder: Path) -> Path:
    """Every entry and message kind, astral and lone-surrogate characters, images, a
    compaction whose first kept entry is off the final path, and split turns."""
    s = Session.create(folder, cwd="/home/dev/proj")
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    s.append_thinking_level_change("high")
    q1 = s.append_message(UserMessage(content=[TextContent(text="Fix 😀 tests — ü 中文 \ud800"),
                                               ImageContent(data="iVBORw0KGgo=", mime_type="image/png")]))
    s.append_message(AssistantMessage(content=[
        ThinkingContent(thinking="Let me look 🤔", thinking_signature="sig"),
        TextContent(text="Reading."),
        call("t1", "read", path="src/ü.py"), call("t2", "read", path="src/b.py", offset=1),
        call("t3", "edit", path="src/b.py", edits=[{"oldText": "a😀", "newText": "b"}]),
        call("t4", "bash", command="pytest -q", **{"10": 1, "2": 2})], stop_reason="toolUse",
        usage=Usage(input=10, output=20, cache_read=1000, total_tokens=0)))
    s.append_message(result("t1", "x = 1 😀" * 40, "read"))
    s.append_message(ToolResultMessage(tool_call_id="t2", tool_name="read", content=[
        TextContent(text="image"), ImageContent(data="iVBORw0KGgo=", mime_type="image/png")]))
    s.append_message(result("t3", "ok", "edit"))
    s.append_message(result("t4", "3 passed" * 300))
    s.append_message(reply("Done — fixed.", total=5000))
    s.append_custom_message("reminder", [TextContent(text="keep it small 😀")], display=True)
    s.append_message(BashExecutionMessage(command="git diff", output="diff 😀" * 50, exit_code=1))
    s.append_custom("ext", {"k": 1})
    s.set_label(q1, "start")
    q2 = s.append_message(user("Now write docs " + "d" * 900))
    s.append_message(reply("", call("t5", "write", path="docs/README.md", content="# x" * 300)))
    s.append_message(result("t5", "written", "write"))
    s.append_message(reply("Written docs. " + "e" * 700, total=9000))
    s.append_compaction("## Goal\n- earlier", q2, 9000,
                        details={"readFiles": ["old/read.py"], "modifiedFiles": ["old/mod.py"]})
    s.append_message(user("Third task " + "f" * 300))
    s.append_message(reply("", call("t6", "edit", path="src/c.py", edits=[])))
    s.append_message(result("t6", "edited", "edit"))
    s.append_message(reply("", call("t7", "read", path="src/c.py")))
    s.append_message(result("t7", "g" * 2500, "read"))
    s.append_message(reply("Finished third " + "h" * 200, total=12000))
    # A branch back before the compaction, with a branch summary, then a compaction whose first
    # kept entry is not on the new path.
    s.branch_with_summary(q1, "The user explored a different conversation branch before "
                              "returning here.\nSummary of that exploration:\n\nthird task 😀",
                          details={"readFiles": ["br/r.py"], "modifiedFiles": ["br/m.py"]})
    s.append_message(user("Alternative " + "i" * 500))
    s.append_message(reply("Alt reply", total=3000))
    s.append_message(reply("aborted", stop="aborted"))
    s.append_message(reply("errored", stop="error"))
    s.append_message(user("ok 😀"))
    s.append_message(reply("", call("t9", "bash", command="ls", **{"10": 1, "2": [2, 1.5], "01": 0})))
    s.append_message(result("t9", "😀" * 1100 + "tail"))
    s.append_message(user("final " + "k" * 2400))
    s.append_message(reply("", call("t8", "read", path="zz.py")))
    s.append_message(result("t8", "j" * 1200, "read"))
    path = Path(s.file or "")
    s.close()
    return path


@pytest.fixture(scope="module")
def pi_modules() -> Path:
    return ensure_pi()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("generated")
    files = {}
    for name, arguments, _ in GENERATED:
        out = folder / f"{name}.jsonl"
        generate_session(out, **arguments)
        files[name] = out
    files["hand"] = hand_written(folder)
    return files


def probe_leaves(session: Session) -> list[str]:
    """Every leaf, and every 37th entry of every leaf's path (interior leaves cut elsewhere)."""
    chosen: list[str] = []
    for leaf in session.leaves():
        path = session.path_ids(leaf)
        for entry_id in [*path[5::37], leaf]:
            if entry_id not in chosen:
                chosen.append(entry_id)
    return chosen


@pytest.fixture(scope="module")
def pi_results(generated: dict[str, Path]) -> dict[tuple[str, int], Any]:
    """pi 1.5.2's prepareCompaction on every probed leaf (it cuts on the projected context;
    on the generated sessions it agrees with pi 0.73.1 except where a user message has an
    image, which pi 1.5.2 counts)."""
    from .test_conformance_pi1 import pi1_modules

    pi_modules = pi1_modules()
    specs = []
    keys = []
    keeps = {name: keep for name, _, keep in GENERATED}
    keeps["hand"] = (20000, 900, 500, 100, 1)
    for name, file in generated.items():
        with Session.open(file) as session:
            leaves = probe_leaves(session)
        for keep in keeps[name]:
            specs.append({"file": str(file), "leaves": leaves, "keepRecentTokens": keep})
            keys.append((name, keep))
    out = run_node_script(PI_DIR / "compaction_probe.mjs", str(pi_modules), payload=specs)
    return dict(zip(keys, out))


def ours(session: Session, leaf: str, keep: int, typed: bool = False) -> dict[str, Any] | None:
    path: Any = session.path(leaf) if typed else path_dicts(session, leaf)
    prep = prepare_compaction(path, keep_recent_tokens=keep)
    if prep is None:
        return None
    history = serialize_conversation(prep.messages_to_summarize)
    prefix = serialize_conversation(prep.turn_prefix_messages)
    return {
        "firstKeptEntryId": prep.first_kept_entry_id,
        "tokensBefore": prep.tokens_before,
        "isSplitTurn": prep.is_split_turn,
        "messagesToSummarize": [m.role for m in prep.messages_to_summarize],
        "turnPrefixMessages": [m.role for m in prep.turn_prefix_messages],
        "previousSummary": prep.previous_summary,
        "readFiles": prep.file_details.read_files,
        "modifiedFiles": prep.file_details.modified_files,
        "historySha": js_sha(history),
        "historyLength": js_length(history),
        "prefixSha": js_sha(prefix),
    }


@pytest.mark.parametrize("name", [g[0] for g in GENERATED] + ["hand"])
def test_prepare_compaction_equals_pis(name: str, generated: dict[str, Path],
                                       pi_results: dict[tuple[str, int], Any],
                                       backend: Backend) -> None:
    checked = split = compacted = 0
    with backend.load(generated[name]) as session:
        for (file_name, keep), results in pi_results.items():
            if file_name != name:
                continue
            for leaf, pi in results.items():
                path = path_dicts(session, leaf)
                for entry in path:
                    if entry["type"] == "message" and entry["message"].get("content") is not None:
                        assert estimate_tokens(entry["message"]) == pi["estimates"][entry["id"]], \
                            f"{name} {entry['id']}: token estimate differs"
                mine = ours(session, leaf, keep)
                assert mine == pi["prep"], f"{name} leaf {leaf} keep {keep}: prepareCompaction differs"
                checked += 1
                if mine is not None:
                    split += mine["isSplitTurn"]
                    compacted += mine["previousSummary"] is not None
    assert checked >= 4
    if name in ("compacted", "small-keep", "hand"):
        assert compacted > 0, "no case with a previous compaction on the path"
    if name != "hand":
        assert split > 0, "no split-turn case"


def test_typed_paths_give_the_same_preparation(generated: dict[str, Path],
                                               backend: Backend) -> None:
    with backend.load(generated["hand"]) as session:
        for leaf in probe_leaves(session):
            for keep in (20000, 300, 1):
                assert ours(session, leaf, keep, typed=True) == ours(session, leaf, keep)


def test_compacted_generated_files_load_in_pi_with_the_same_context(
        pi_modules: Path, generated: dict[str, Path], tmp_path: Path, backend: Backend) -> None:
    from .test_pi_interop import PROBE

    files, sessions = [], []
    for name in ("linear", "compacted", "hand"):
        with backend.load(generated[name]) as session:
            if session.path_ids()[-1] and session.entry(session.path_ids()[-1]).type == "compaction":
                session.append_message(user("one more"))
            # (hand: the last 300 tokens are one tool result with no cut point after it, where
            # pi keeps everything; 400 reaches back to a user message)
            entry = session.compact(keep_recent_tokens=400 if name == "hand" else 2000)
            assert entry is not None
            files.append(stored_file(session, tmp_path / f"{name}.jsonl"))
        sessions.append(session)
    results = run_node_script(PROBE, str(pi_modules), "read", payload=[str(f) for f in files])
    for stored_session, pi in zip(sessions, results):
        with reopen(stored_session) as session:
            assert pi["unchanged"]
            assert pi["leaf"] == session.leaf_id
            assert pi["context"] == session.build_context().to_builtins()
            assert pi["context"]["messages"][0]["role"] == "compactionSummary"


# -- token estimates ----------------------------------------------------------------------------


def test_estimate_tokens_per_role() -> None:
    assert estimate_tokens(user("abcde")) == 2
    assert estimate_tokens(UserMessage(content="abcd")) == 1
    # an image counts 4800 characters (in user messages too since pi 1.5.2)
    image = ImageContent(data="AAAA", mime_type="image/png")
    assert estimate_tokens(UserMessage(content=[TextContent(text="ab"), image])) == 1201
    tool = ToolResultMessage(tool_call_id="x", tool_name="read", content=[TextContent(text="ab"), image])
    assert estimate_tokens(tool) == 1201
    assert estimate_tokens({"role": "custom", "customType": "r", "content": "abcdefgh"}) == 2
    # assistant: text + thinking + name + JSON.stringify(arguments)
    message = AssistantMessage(content=[TextContent(text="abc"), ThinkingContent(thinking="de"),
                                        ToolCall(id="1", name="bash", arguments={"command": "ls"})])
    assert estimate_tokens(message) == -(-(3 + 2 + 4 + len('{"command":"ls"}')) // 4)
    assert estimate_tokens(BashExecutionMessage(command="ls", output="abcdef")) == 2
    assert estimate_tokens({"role": "compactionSummary", "summary": "x" * 9}) == 3
    assert estimate_tokens({"role": "branchSummary", "summary": ""}) == 0
    assert estimate_tokens({"role": "mystery", "content": "x" * 100}) == 0


def test_estimates_count_utf16_code_units_like_javascript() -> None:
    assert js_length("😀") == 2 and js_length("ü") == 1 and js_length("\ud800") == 1
    assert estimate_tokens(user("😀😀")) == 1       # 4 code units
    assert estimate_tokens(user("😀😀😀")) == 2     # 6 code units
    # integer-like keys first, as JSON.stringify orders them; floats in JavaScript form
    message = {"role": "assistant", "content": [
        {"type": "toolCall", "id": "1", "name": "x", "arguments": {"b": 1.0, "10": "😀", "2": True}}]}
    text = '{"2":true,"10":"😀","b":1}'
    assert dumps({"b": 1.0, "10": "😀", "2": True}).decode() == text
    assert estimate_tokens(message) == -(-(1 + js_length(text)) // 4)


def test_context_tokens_from_usage() -> None:
    assert calculate_context_tokens(Usage(input=1, output=2, cache_read=3, cache_write=4)) == 10
    assert calculate_context_tokens({"totalTokens": 99, "input": 1}) == 99
    messages = [user("a" * 40), reply("b", total=500), user("c" * 40),
                reply("aborted", total=9999, stop="aborted"), reply("x", total=7777, stop="error")]
    estimate = estimate_context_tokens(messages)
    assert estimate.usage_tokens == 500 and estimate.last_usage_index == 1
    assert estimate.trailing_tokens == 10 + 2 + 1
    assert estimate.tokens == 513
    no_usage = estimate_context_tokens([user("a" * 40), {"role": "assistant", "content": [],
                                                          "stopReason": "stop"}])
    assert no_usage.tokens == 10 and no_usage.last_usage_index is None
    entries = [{"type": "message", "message": dumps_message(m)} for m in messages]
    assert get_last_assistant_usage(entries)["totalTokens"] == 500  # type: ignore[index]
    assert get_last_assistant_usage([]) is None


def dumps_message(message: Any) -> dict[str, Any]:
    return loads(dumps(message))  # type: ignore[no-any-return]


def test_should_compact() -> None:
    assert should_compact(200_000 - 16384 + 1, 200_000)
    assert not should_compact(200_000 - 16384, 200_000)
    assert not should_compact(10**9, 200_000, CompactionSettings(enabled=False))
    assert should_compact(101, 200, CompactionSettings(reserve_tokens=100))


def test_session_should_compact_ignores_usage_from_before_a_compaction(backend: Backend) -> None:
    s = backend.create(cwd="/p")
    s.append_message(user("hello " * 50))
    s.append_message(reply("big context", total=150_000))
    assert s.should_compact(160_000)
    assert not s.should_compact(200_000)
    entry = s.compact(keep_recent_tokens=1)
    assert entry is not None
    # The kept reply's usage (150k) measured the old context; it no longer counts.
    assert not s.should_compact(160_000)
    s.append_message(user("next"))
    later = reply("small again", total=2_000)
    later.timestamp += 60_000  # certainly after the compaction entry's millisecond
    s.append_message(later)
    assert not s.should_compact(160_000)
    assert s.should_compact(18_000)
    s.close()


# -- cut points ---------------------------------------------------------------------------------


def entries_of(*kinds: str) -> list[dict[str, Any]]:
    """Entries from short codes: u (user 400 chars), a (assistant 400), c (assistant with a tool
    call), t (tool result 400), b (bash), m (custom_message), s (branch_summary), x (settings),
    k (compaction)."""
    out: list[dict[str, Any]] = []
    for i, kind in enumerate(kinds):
        base = {"id": f"e{i}", "parentId": f"e{i - 1}" if i else None, "timestamp": "2026-01-01T00:00:00.000Z"}
        if kind == "u":
            out.append({**base, "type": "message", "message": dumps_message(user("u" * 400))})
        elif kind == "a":
            out.append({**base, "type": "message", "message": dumps_message(reply("a" * 400))})
        elif kind == "c":
            out.append({**base, "type": "message", "message": dumps_message(
                reply("", call(f"c{i}", "read", path=f"f{i}.py")))})
        elif kind == "t":
            out.append({**base, "type": "message", "message": dumps_message(result(f"c{i - 1}", "t" * 400))})
        elif kind == "b":
            out.append({**base, "type": "message", "message": dumps_message(
                BashExecutionMessage(command="ls", output="o" * 396, exit_code=0))})
        elif kind == "m":
            out.append({**base, "type": "custom_message", "customType": "r", "content": "m" * 400,
                        "display": True})
        elif kind == "s":
            out.append({**base, "type": "branch_summary", "fromId": "root", "summary": "s" * 400})
        elif kind == "x":
            out.append({**base, "type": "thinking_level_change", "thinkingLevel": "low"})
        elif kind == "k":
            out.append({**base, "type": "compaction", "summary": "k", "firstKeptEntryId": "e0",
                        "tokensBefore": 1})
    return out


def test_valid_cut_points_never_tool_results() -> None:
    entries = entries_of("x", "u", "c", "t", "a", "b", "m", "s", "k", "t")
    assert find_valid_cut_points(entries, 0, len(entries)) == [1, 2, 4, 5, 6, 7]
    assert find_valid_cut_points(entries, 3, 5) == [4]


def test_turn_start() -> None:
    entries = entries_of("u", "c", "t", "a", "m", "c", "t")
    assert find_turn_start_index(entries, 3, 0) == 0
    assert find_turn_start_index(entries, 6, 0) == 4
    assert find_turn_start_index(entries, 3, 1) == -1


def test_cut_point_keeps_about_the_budget_and_splits_turns() -> None:
    entries = entries_of("u", "a", "u", "c", "t", "c", "t", "a")
    # each message is 100 tokens (the tool calls less); keeping 100 cuts at the last reply
    cut = find_cut_point(entries, 0, len(entries), 100)
    assert cut.first_kept_entry_index == 7 and cut.is_split_turn and cut.turn_start_index == 2
    # keeping 200: the walk reaches the tool result at 6 -> the next cut point is 7
    assert find_cut_point(entries, 0, len(entries), 200).first_kept_entry_index == 7
    # keeping 250: it reaches index 4 (a tool result) -> cut at the call 5, split turn
    cut = find_cut_point(entries, 0, len(entries), 250)
    assert cut.first_kept_entry_index == 5 and cut.is_split_turn
    # a budget never reached keeps everything from the first cut point
    cut = find_cut_point(entries, 0, len(entries), 10**6)
    assert (cut.first_kept_entry_index, cut.is_split_turn) == (0, False)
    # cutting at a user message is never a split turn
    cut = find_cut_point(entries_of("u", "a", "u", "a"), 0, 4, 150)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (2, -1, False)


def test_cut_moves_back_over_settings_entries() -> None:
    entries = entries_of("u", "a", "x", "x", "u", "a")
    assert find_cut_point(entries, 0, len(entries), 150).first_kept_entry_index == 2
    # ... but not past the range start or a compaction
    entries = entries_of("u", "k", "x", "u", "a")
    assert find_cut_point(entries, 0, len(entries), 150).first_kept_entry_index == 2
    assert find_cut_point(entries, 3, len(entries), 150).first_kept_entry_index == 3


def test_no_cut_point() -> None:
    entries = entries_of("x", "t", "t")
    cut = find_cut_point(entries, 0, 3, 10)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (0, -1, False)


# -- preparation --------------------------------------------------------------------------------


def test_prepare_uses_the_previous_compactions_boundary() -> None:
    entries = entries_of("u", "a", "u", "a", "k", "u", "a", "u", "a")
    entries[4]["firstKeptEntryId"] = "e2"
    entries[4]["summary"] = "previous"
    entries[4]["details"] = {"readFiles": ["r.py", "m.py"], "modifiedFiles": ["m.py"]}
    prep = prepare_compaction(entries, keep_recent_tokens=150)
    assert prep is not None
    assert prep.boundary_start == 2 and prep.previous_summary == "previous"
    assert prep.first_kept_entry_id == "e7" and not prep.is_split_turn
    # the messages kept by the previous compaction are summarized again (pi#2608)
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant", "user", "assistant"]
    assert prep.file_details == FileDetails(read_files=["r.py"], modified_files=["m.py"])
    # a previous first kept entry that is not on the path: start after the compaction
    entries[4]["firstKeptEntryId"] = "elsewhere"
    prep = prepare_compaction(entries, keep_recent_tokens=150)
    assert prep is not None and prep.boundary_start == 5
    # a hook's compaction does not lend its file lists
    entries[4]["fromHook"] = True
    prep = prepare_compaction(entries, keep_recent_tokens=150)
    assert prep is not None and prep.file_details == FileDetails()


def test_prepare_none_cases() -> None:
    assert prepare_compaction([]) is None
    assert prepare_compaction(entries_of("u", "a", "k")) is None


def test_prepare_split_turn_messages() -> None:
    entries = entries_of("u", "a", "u", "c", "t", "c", "t", "a")
    prep = prepare_compaction(entries, keep_recent_tokens=100)
    assert prep is not None and prep.is_split_turn
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]
    assert [m.role for m in prep.turn_prefix_messages] == ["user", "assistant", "toolResult",
                                                           "assistant", "toolResult"]
    assert prep.file_details.read_files == ["f3.py", "f5.py"]


def test_file_operations_sort_as_javascript() -> None:
    ops = FileOperations()
    ops.add_message(dumps_message(reply("", call("1", "read", path="b"), call("2", "read", path="\U0001f600"),
                                        call("3", "read", path="\uff01"), call("4", "edit", path="a"),
                                        call("5", "write", path="b"), call("6", "read", path=""),
                                        call("7", "grep", path="g"))))
    details = ops.lists()
    # JavaScript compares UTF-16 code units: U+1F600 (D83D ...) sorts before U+FF01
    assert details.read_files == ["\U0001f600", "\uff01"]
    assert details.modified_files == ["a", "b"]
    assert format_file_operations(details) == (
        "\n\n<read-files>\n\U0001f600\n\uff01\n</read-files>\n\n<modified-files>\na\nb\n</modified-files>")
    assert format_file_operations(FileDetails()) == ""


def test_serialize_conversation_orders_and_cuts_as_javascript() -> None:
    text = serialize_conversation([
        AssistantMessage(content=[call("1", "x", b=1, **{"10": 1, "2": 2, "01": 3})]),
        result("1", "😀" * 1001)])
    assert '[Assistant tool calls]: x(2=2, 10=1, b=1, 01=3)' in text
    # 2000 code units: 1000 emoji, then the note counts the 2 units left
    assert "[Tool result]: " + "😀" * 1000 + "\n\n[... 2 more characters truncated]" in text


def test_serialize_conversation() -> None:
    text = serialize_conversation([
        user("hi"),
        AssistantMessage(content=[ThinkingContent(thinking="hmm"), TextContent(text="ok"),
                                  call("1", "bash", command="ls", n=2)]),
        result("1", "x" * 2005),
        BashExecutionMessage(command="pwd", output="/p", exit_code=0),
        {"role": "branchSummary", "summary": "branch", "fromId": "a", "timestamp": 0},
    ])
    # (pi 1.5.2 leaves the thinking out; pi 0.73.1 sent "[Assistant thinking]: hmm")
    assert text.split("\n\n")[:3] == ["[User]: hi", "[Assistant]: ok",
                                      '[Assistant tool calls]: bash(command="ls", n=2)']
    assert "[Tool result]: " + "x" * 2000 + "\n\n[... 5 more characters truncated]" in text
    assert "[User]: Ran `pwd`\n```\n/p\n```" in text
    assert "[User]: The following is a summary of a branch" in text


# -- compact() on files -------------------------------------------------------------------------


def long_session(backend: Backend, turns: int = 6) -> Session:
    s = backend.create(cwd="/home/dev/proj")
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    for i in range(turns):
        s.append_message(user(f"Task {i}: update module_{i}.py so that it " + "works " * 60))
        s.append_message(reply("", call(f"r{i}", "read", path=f"module_{i}.py")))
        s.append_message(result(f"r{i}", "content " * 80, "read"))
        s.append_message(reply("", call(f"e{i}", "edit", path=f"module_{i}.py", edits=[])))
        s.append_message(result(f"e{i}", "ok", "edit"))
        s.append_message(reply(f"Updated module_{i}.py. " + "done " * 40, total=1000 * (i + 1)))
    return s


def test_compact_appends_one_entry_and_keeps_the_suffix(backend: Backend) -> None:
    s = long_session(backend)
    leaf = s.leaf_id
    before = s.build_context().to_builtins()["messages"]
    prep = s.prepare_compaction(keep_recent_tokens=600)
    assert prep is not None
    lines = stored(s).count(b"\n")
    entry = s.compact(keep_recent_tokens=600)
    assert isinstance(entry, Compaction)
    assert stored(s).count(b"\n") == lines + 1
    assert entry.parent_id == leaf and s.leaf_id == entry.id
    assert entry.first_kept_entry_id == prep.first_kept_entry_id
    assert entry.tokens_before == prep.tokens_before == 6000 + 0
    assert entry.from_hook is False
    assert entry.details == {"readFiles": [], "modifiedFiles": prep.file_details.modified_files}
    assert entry.summary.endswith(format_file_operations(prep.file_details))
    after = s.build_context().to_builtins()["messages"]
    assert after[0]["role"] == "compactionSummary" and after[0]["summary"] == entry.summary
    kept = len(before) - (len(prep.messages_to_summarize) + len(prep.turn_prefix_messages))
    assert after[1:] == before[-kept:]
    # the offline summary names the goals and the files
    assert "Task 0: update module_0.py" in entry.summary and "module_0.py" in entry.summary
    s.close()
    with reopen(s) as reopened:
        assert reopened.build_context().to_builtins()["messages"] == after


def test_split_turn_summary_layout(backend: Backend) -> None:
    s = backend.create(cwd="/p")
    s.append_message(user("First " + "a" * 400))
    s.append_message(reply("first answer " + "b" * 400))
    s.append_message(user("Second, long turn"))
    for i in range(6):
        s.append_message(reply("", call(f"c{i}", "read", path=f"f{i}.py")))
        s.append_message(result(f"c{i}", "r" * 800, "read"))
    s.append_message(reply("finished"))
    summarizer = Fixed()
    prep = s.prepare_compaction(keep_recent_tokens=450)
    assert prep is not None and prep.is_split_turn
    entry = s.compact(summarizer, keep_recent_tokens=450)
    assert entry is not None
    history, prefix = entry.summary.split(TURN_CONTEXT_SEPARATOR)
    assert history == "## Goal\n- fixed summary (compaction)"
    assert prefix.startswith("## Goal\n- fixed summary (turn_prefix)\n\n<read-files>\nf0.py")
    requests = {r.purpose: r for r in summarizer.requests}
    assert requests["compaction"].max_tokens == int(0.8 * 16384)
    assert requests["turn_prefix"].max_tokens == int(0.5 * 16384)
    assert [m.role for m in requests["compaction"].messages] == ["user", "assistant"]
    assert requests["turn_prefix"].messages[0].role == "user"
    s.close()


def test_split_turn_without_prior_history(backend: Backend) -> None:
    s = backend.create(cwd="/p")
    s.append_message(user("One long turn"))
    for i in range(5):
        s.append_message(reply("", call(f"c{i}", "bash", command="make")))
        s.append_message(result(f"c{i}", "r" * 800))
    s.append_message(reply("done"))
    entry = s.compact(Fixed(), keep_recent_tokens=300)
    assert entry is not None
    assert entry.summary.startswith("No prior history." + TURN_CONTEXT_SEPARATOR)
    s.close()


def test_second_compaction_updates_the_previous_summary(backend: Backend) -> None:
    s = long_session(backend)
    first = s.compact(keep_recent_tokens=600)
    assert first is not None
    for i in range(6, 9):
        s.append_message(user(f"Task {i}: more " + "w " * 200))
        s.append_message(reply(f"Did task {i} " + "x " * 200, total=20_000))
    summarizer = Fixed()
    second = s.compact(summarizer, keep_recent_tokens=300)
    assert second is not None
    (request,) = [r for r in summarizer.requests if r.purpose == "compaction"]
    assert request.previous_summary == first.summary
    assert request.max_tokens == int(0.8 * 16384)
    # the previous compaction's file lists carry over
    assert "<modified-files>\nmodule_0.py" in second.summary
    s.close()


def test_reserve_tokens_sets_the_budget(backend: Backend) -> None:
    s = long_session(backend)
    summarizer = Fixed()
    s.compact(summarizer, keep_recent_tokens=600, reserve_tokens=1000)
    assert summarizer.requests[0].max_tokens == 800
    s.close()


# -- bad input: typed errors, nothing written, leaf unchanged ------------------------------------


def assert_unchanged(s: Session, before: bytes, leaf: str | None) -> None:
    assert stored(s) == before
    assert s.leaf_id == leaf


class Raising:
    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        raise RuntimeError("model exploded")


class Empty:
    def __init__(self, value: Any = "   ") -> None:
        self.value = value

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> Any:
        return self.value


def test_nothing_to_compact(backend: Backend) -> None:
    s = Session.in_memory()
    with pytest.raises(NothingToCompact, match="empty"):
        s.compact()
    s = backend.create(cwd="/p")
    s.append_message(user("short"))
    s.append_message(reply("short"))
    before, leaf = stored(s), s.leaf_id
    with pytest.raises(NothingToCompact, match="keeps the whole path"):
        s.compact()
    assert_unchanged(s, before, leaf)
    s.close()


def test_already_compacted(backend: Backend) -> None:
    s = long_session(backend)
    assert s.compact(keep_recent_tokens=600) is not None
    before, leaf = stored(s), s.leaf_id
    with pytest.raises(AlreadyCompacted):
        s.compact(keep_recent_tokens=600)
    assert s.prepare_compaction() is None
    assert_unchanged(s, before, leaf)
    s.close()


@pytest.mark.parametrize("summarizer, match", [
    (Raising(), "RuntimeError: model exploded"),
    (Empty(), "empty summary"),
    (Empty(None), "empty summary"),
])
def test_failing_summarizer_writes_nothing(backend: Backend, summarizer: Any, match: str) -> None:
    s = long_session(backend)
    before, leaf = stored(s), s.leaf_id
    with pytest.raises(SummaryFailed, match=match):
        s.compact(summarizer, keep_recent_tokens=600)
    assert_unchanged(s, before, leaf)
    s.close()


def test_cancelled_compaction_writes_nothing(backend: Backend) -> None:
    s = long_session(backend)
    before, leaf = stored(s), s.leaf_id
    token = CancelToken()
    token.cancel()
    with pytest.raises(SummaryCancelled):
        s.compact(keep_recent_tokens=600, cancel=token)

    class CancelsMidway:
        def __init__(self, token: CancelToken) -> None:
            self.token = token

        def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
            self.token.cancel()
            return "text"

    token = CancelToken()
    with pytest.raises(SummaryCancelled):
        s.compact(CancelsMidway(token), keep_recent_tokens=600, cancel=token)
    assert_unchanged(s, before, leaf)
    s.close()


# -- events -------------------------------------------------------------------------------------


def test_before_compact_gets_the_preparation_and_previous_compactions(backend: Backend) -> None:
    s = long_session(backend)
    first = s.compact(keep_recent_tokens=600)
    for i in range(3):
        s.append_message(user(f"more {i} " + "m" * 500))
        s.append_message(reply("ok " + "n" * 500))
    second = s.compact(keep_recent_tokens=300)
    for i in range(3):
        s.append_message(user(f"again {i} " + "m" * 500))
        s.append_message(reply("ok " + "n" * 500))
    seen: list[CompactPreparation] = []
    s.events.on("session_before_compact", lambda p: seen.append(p))
    expected = s.prepare_compaction(keep_recent_tokens=300)
    assert expected is not None
    entry = s.compact(keep_recent_tokens=300, instructions="focus on tests")
    assert entry is not None and first is not None and second is not None
    (payload,) = seen
    assert payload.first_kept_entry_id == expected.first_kept_entry_id
    assert payload.tokens_before == expected.tokens_before
    assert payload.previous_summary == second.summary
    assert [c.id for c in payload.previous_compactions] == [second.id, first.id]
    assert payload.instructions == "focus on tests" and payload.session is s
    assert len(payload.messages_to_summarize) == len(expected.messages_to_summarize)
    assert payload.file_details == expected.file_details
    s.close()


def test_before_compact_cancel_writes_nothing(backend: Backend) -> None:
    s = long_session(backend)
    before, leaf = stored(s), s.leaf_id
    after: list[CompactEvent] = []
    s.events.on("session_compact", after.append)
    def refuse(p: CompactPreparation) -> BeforeCompactResult:
        return BeforeCompactResult(cancel=True)

    off = s.events.on("session_before_compact", refuse)
    with pytest.raises(OperationCancelled, match="refuse") as info:
        s.compact(keep_recent_tokens=600)
    assert info.value.event == "session_before_compact"
    off()
    off = s.events.on("session_before_compact", lambda p: p.cancel.cancel())
    with pytest.raises(SummaryCancelled):
        s.compact(keep_recent_tokens=600)
    off()
    assert_unchanged(s, before, leaf)
    assert after == []
    s.close()


def test_before_compact_may_supply_the_compaction(backend: Backend) -> None:
    s = long_session(backend)
    prep = s.prepare_compaction(keep_recent_tokens=600)
    assert prep is not None
    after: list[CompactEvent] = []
    s.events.on("session_compact", after.append)

    async def supply(p: CompactPreparation) -> BeforeCompactResult:  # async handlers work too
        await asyncio.sleep(0)
        return BeforeCompactResult(summary="hook summary", details={"artifact": 1})

    s.events.on("session_before_compact", supply)
    summarizer = Fixed()
    entry = s.compact(summarizer, keep_recent_tokens=600)
    assert entry is not None and summarizer.requests == []
    assert entry.summary == "hook summary" and entry.from_hook is True
    assert entry.details == {"artifact": 1}
    assert entry.first_kept_entry_id == prep.first_kept_entry_id
    assert entry.tokens_before == prep.tokens_before
    (event,) = after
    assert event.compaction == entry and event.from_hook and event.session is s
    s.close()


def test_hook_supplying_a_bad_first_kept_entry_writes_nothing(backend: Backend) -> None:
    s = long_session(backend)
    before, leaf = stored(s), s.leaf_id
    s.events.on("session_before_compact",
                lambda p: BeforeCompactResult(summary="x", first_kept_entry_id="nope"))
    with pytest.raises(EntryNotFound):
        s.compact(keep_recent_tokens=600)
    assert_unchanged(s, before, leaf)
    s.close()


def test_raising_handler_is_named_and_cancels_only_that_compaction(backend: Backend) -> None:
    s = long_session(backend)
    before, leaf = stored(s), s.leaf_id

    def broken_hook(p: CompactPreparation) -> None:
        raise ValueError("bad hook")

    off = s.events.on("session_before_compact", broken_hook)
    with pytest.raises(HookFailed, match="broken_hook") as caught:
        s.compact(keep_recent_tokens=600)
    assert caught.value.handler.endswith("broken_hook")
    assert_unchanged(s, before, leaf)
    off()
    assert s.compact(keep_recent_tokens=600) is not None
    s.close()


# -- properties ---------------------------------------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 900)),
    st.tuples(st.just("reply"), st.integers(1, 900)),
    st.tuples(st.just("tools"), st.lists(st.integers(1, 1500), min_size=1, max_size=3)),
    st.tuples(st.just("bash"), st.integers(0, 600)),
    st.tuples(st.just("custom_message"), st.integers(1, 300)),
    st.tuples(st.just("setting"), st.just(0)),
    st.tuples(st.just("compact"), st.integers(0, 3000)),
)


def build(steps: list[tuple[str, Any]]) -> Session:
    s = Session.in_memory(cwd="/p")
    n = 0
    for kind, size in steps:
        n += 1
        if kind == "user":
            s.append_message(user("u" * size))
        elif kind == "reply":
            s.append_message(reply("a" * size))
        elif kind == "tools":
            ids = [f"c{n}_{i}" for i in range(len(size))]
            s.append_message(reply("", *[call(i, "read", path=f"{i}.py") for i in ids]))
            for call_id, length in zip(ids, size):
                s.append_message(result(call_id, "r" * length, "read"))
        elif kind == "bash":
            s.append_message(BashExecutionMessage(command="ls", output="o" * size, exit_code=0))
        elif kind == "custom_message":
            s.append_custom_message("note", "c" * size)
        elif kind == "setting":
            s.append_thinking_level_change("low")
        elif kind == "compact":
            try:
                s.compact(keep_recent_tokens=size)
            except NothingToCompact:
                pass
    return s


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=1, max_size=25), st.integers(0, 4000))
def test_cut_never_separates_a_tool_result_from_its_call(steps: list[tuple[str, Any]], keep: int) -> None:
    s = build(steps)
    path = path_dicts(s) if s.leaf_id else []
    prep = prepare_compaction(path, keep_recent_tokens=keep)
    if prep is None:
        return
    kept = path[prep.first_kept_entry_index:]
    assert not (kept[0]["type"] == "message" and kept[0]["message"]["role"] == "toolResult")
    calls = {b["id"] for e in kept if e["type"] == "message" and e["message"]["role"] == "assistant"
             for b in e["message"]["content"] if b["type"] == "toolCall"}
    for e in kept:
        if e["type"] == "message" and e["message"]["role"] == "toolResult":
            assert e["message"]["toolCallId"] in calls


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=1, max_size=25), st.integers(0, 4000))
def test_compaction_then_context_keeps_the_suffix(steps: list[tuple[str, Any]], keep: int) -> None:
    s = build(steps)
    if s.leaf_id is None:
        return
    before = s.build_context().to_builtins()["messages"]
    prep = s.prepare_compaction(keep_recent_tokens=keep)
    try:
        entry = s.compact(keep_recent_tokens=keep)
    except NothingToCompact:
        assert prep is None or prep.is_empty
        return
    assert entry is not None and prep is not None
    after = s.build_context().to_builtins()["messages"]
    assert after[0] == {"role": "compactionSummary", "summary": entry.summary,
                        "tokensBefore": entry.tokens_before, "timestamp": after[0]["timestamp"]}
    # the kept suffix: every message of the path from the first kept entry on, unchanged
    path = path_dicts(s)[:-1]
    suffix = [entry_message(e) for e in path[prep.first_kept_entry_index:]
              if e["type"] in ("message", "custom_message")
              or (e["type"] == "branch_summary" and e.get("summary"))]
    assert after[1:] == suffix
    # ... and it is the tail of the context before compacting
    assert suffix == before[len(before) - len(suffix):]
    budget = int(0.8 * DEFAULT_COMPACTION_SETTINGS.reserve_tokens) * 4
    assert js_length(entry.summary.split("\n\n<read-files>")[0].split("\n\n<modified-files>")[0]) \
        <= budget


# -- async --------------------------------------------------------------------------------------


def test_acompact_awaits_hooks_in_the_running_loop(backend: Backend) -> None:
    s = long_session(backend)
    prep = s.prepare_compaction(keep_recent_tokens=600)
    assert prep is not None
    loops: list[Any] = []

    async def before(p: CompactPreparation) -> None:
        loops.append(asyncio.get_running_loop())

    async def after(e: CompactEvent) -> None:
        loops.append(asyncio.get_running_loop())

    s.events.on("session_before_compact", before)
    s.events.on("session_compact", after)

    async def main() -> tuple[Any, Compaction | None]:
        return asyncio.get_running_loop(), await s.acompact(keep_recent_tokens=600)

    loop, entry = asyncio.run(main())
    assert loops == [loop, loop]
    assert entry is not None and s.leaf_id == entry.id
    from sessiontree.compaction import generate_compaction

    assert entry.summary == generate_compaction(prep).summary
    s.close()


def test_acompact_split_turn_and_failures(backend: Backend) -> None:
    s = backend.create(cwd="/p")
    s.append_message(user("First " + "a" * 400))
    s.append_message(reply("first answer " + "b" * 400))
    s.append_message(user("Second, long turn"))
    for i in range(6):
        s.append_message(reply("", call(f"c{i}", "read", path=f"f{i}.py")))
        s.append_message(result(f"c{i}", "r" * 800, "read"))
    before, leaf = stored(s), s.leaf_id
    with pytest.raises(SummaryFailed, match="model exploded"):
        asyncio.run(s.acompact(Raising(), keep_recent_tokens=450))
    assert_unchanged(s, before, leaf)
    s.events.on("session_before_compact", lambda p: BeforeCompactResult(cancel=True))
    with pytest.raises(OperationCancelled):
        asyncio.run(s.acompact(keep_recent_tokens=450))
    assert_unchanged(s, before, leaf)
    s.events = type(s.events)()
    summarizer = Fixed()
    entry = asyncio.run(s.acompact(summarizer, keep_recent_tokens=450))
    assert entry is not None
    assert sorted(r.purpose for r in summarizer.requests) == ["compaction", "turn_prefix"]
    assert TURN_CONTEXT_SEPARATOR in entry.summary
    s.close()
