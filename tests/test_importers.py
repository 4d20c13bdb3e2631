"""Importers: Claude Code, ChatGPT, Open WebUI and Responses items become sessions pi opens.

The fixtures in ``tests/importers/`` were written for these tests from each format's public
documentation and the source code that writes or reads it (see ``tests/importers/README.md``).
Every imported file is checked by pi 0.73.1 itself: same leaf, contexts, tree, labels and name.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import (
    CorruptHeader,
    DuplicateId,
    JsonlStore,
    MalformedSource,
    MemoryStore,
    Session,
    SessionHeader,
    SessionListing,
)
from sessiontree.cli import cli
from sessiontree.importers import import_file
from sessiontree.importers._build import iso_from_seconds
from sessiontree.importers.responses import entry_items
from sessiontree.stores.base import Store, has_lines

from .test_pi_interop import assert_same, pi_modules, pi_read  # noqa: F401  (fixture)

DATA = Path(__file__).parent / "importers"


def imported(tmp_path: Path, format: str, name: str) -> list[Path]:
    result = import_file(format, DATA / name, tmp_path)
    assert [s.status for s in result.sessions] == ["imported"] * len(result.sessions)
    return [Path(s.location or "") for s in result.sessions]


def check_with_pi(modules: Path, files: Sequence[Path]) -> None:
    for path, answer in zip(files, pi_read(modules, files)):
        assert_same(path, answer)


def by_source(session: Session) -> dict[str, dict[str, Any]]:
    """Entries (as stored) by their source id; a chain's later parts under ``<id>#<part>``."""
    out = {}
    for entry_id in session.ids():
        data = json.loads(session.raw_line(entry_id))
        source = data.get("source")
        if isinstance(source, dict):
            key = source["id"] + (f"#{source['part']}" if "part" in source else "")
            out[key] = data
    return out


def texts(context: Any) -> list[tuple[str, str]]:
    out = []
    for message in context.to_builtins()["messages"]:
        content = message.get("content", message.get("summary"))
        if isinstance(content, list):
            content = " | ".join(str(b.get("text") or b.get("thinking") or b.get("name") or
                                     b.get("type")) for b in content)
        out.append((message["role"], content))
    return out


U = "00000000-0000-4000-8000-{:012d}".format


# -- Claude Code ---------------------------------------------------------------------------------

def test_claude_code_keeps_branches_sidechains_compaction_and_the_leaf(
        tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    (file,) = imported(tmp_path, "claude-code", "claude-code-session.jsonl")
    check_with_pi(pi_modules, [file])
    with Session.open(file, strict=True) as session:
        entries = by_source(session)
        assert session.header.cwd == "/home/dev/app"
        assert session.header.timestamp == "2025-11-20T10:00:00.000Z"
        assert session.name == "Fix failing add test"
        # the leaf: the compaction's summary, then what followed it, as Claude Code resumes
        assert texts(session.build_context()) == [
            ("compactionSummary", "This session is being continued from a previous "
                                  "conversation. Summary: the test expected 4 and was fixed."),
            ("user", "Now run lint"), ("assistant", "Lint is clean.")]
        compaction = entries[U(15)]
        assert compaction["type"] == "compaction" and compaction["tokensBefore"] == 156910
        assert compaction["parentId"] == entries[U(14)]["id"]  # logicalParentUuid
        assert compaction["firstKeptEntryId"] == compaction["id"]  # nothing before is kept
        # one reply written as four records is one message; its blocks and metadata kept
        reply = entries[U(3)]
        assert [b["type"] for b in reply["message"]["content"]] == [
            "thinking", "text", "toolCall", "toolCall"]
        assert reply["message"]["content"][0]["thinkingSignature"] == "EqQBsig"
        assert reply["message"]["stopReason"] == "toolUse"
        assert reply["message"]["model"] == "claude-sonnet-4-5-20250929"
        assert reply["message"]["responseId"] == "msg_01AAAAAAAAAAAAAAAAAAAAAAAA"
        assert reply["message"]["usage"]["cacheRead"] == 2000
        assert reply["source"]["merged"] == [U(4), U(5), U(6)]
        assert reply["source"]["gitBranch"] == "main"
        # results hung from different blocks of the reply are one chain, not two branches
        bash, read = entries[U(7)], entries[U(8)]
        assert bash["parentId"] == reply["id"] and read["parentId"] == bash["id"]
        assert bash["message"]["toolName"] == "Bash" and bash["message"]["isError"] is True
        assert bash["message"]["details"]["stdout"] == "1 failed"
        assert read["message"]["toolName"] == "Read" and read["message"]["isError"] is False
        # a rewind is a branch; a sidechain is its own root; timestamps are the source's
        assert set(session.children_ids(entries[U(2)]["id"])) == {reply["id"], entries[U(10)]["id"]}
        assert entries[U(11)]["parentId"] is None and entries[U(11)]["source"]["isSidechain"]
        assert entries[U(2)]["timestamp"] == "2025-11-20T10:00:01.000Z"
        assert entries[U(13)]["message"]["content"][1] == {
            "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        meta = entries[U(1)]
        assert meta["type"] == "custom_message" and meta["display"] is False
        assert session.label(entries[U(10)]["id"]) == "Ask which test"
        assert session.label(entries[U(19)]["id"]) == "Fix failing add test"
        kinds = [e.custom_type for e in session.custom_entries("claude-code.")]
        assert kinds == ["claude-code.system", "claude-code.file-history-snapshot",
                         "claude-code.queue-operation"]
        (record,) = session.custom_entries("sessiontree.import")
        assert record.data["unmapped"] == {
            "claude-code block server_tool_use": 1, "claude-code.file-history-snapshot": 1,
            "claude-code.queue-operation": 1, "claude-code.system": 1}
        assert entries[U(14)]["source"]["blocks"][0]["type"] == "server_tool_use"


# -- ChatGPT -------------------------------------------------------------------------------------

def test_chatgpt_every_conversation_every_branch_current_node_as_leaf(
        tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    files = imported(tmp_path, "chatgpt", "chatgpt-conversations.json")
    assert len(files) == 2
    check_with_pi(pi_modules, files)
    with Session.open(files[0], strict=True) as session:
        entries = by_source(session)
        assert session.name == "Resize images in Python"
        assert session.header.timestamp == "2024-11-07T17:20:00.500Z"
        assert texts(session.build_context()) == [
            ("user", "How do I resize an image?"),
            ("assistant", "Use Pillow: Image.resize((w, h))."),
            ("user", "[image: file-service://file-AbC123] | Make this one 50% smaller"),
            ("assistant", "Halve both sides with Pillow."),
            ("assistant", "python"),
            ("toolResult", "(640, 480)"),
            ("assistant", "It is 640x480; resize to (320, 240)."),
        ]
        assert [entries[k]["message"]["model"] for k in ("a1", "a1b", "th", "a2")] == [
            "gpt-4o", "gpt-4o-mini", "o3", "o3"]
        assert set(session.children_ids(entries["u1"]["id"])) == {entries["a1"]["id"],
                                                                  entries["a1b"]["id"]}
        assert len(session.leaves()) == 2
        call = entries["code"]["message"]["content"][0]
        assert call["name"] == "python" and call["arguments"]["input"].startswith("from PIL")
        assert entries["out"]["message"]["toolCallId"] == call["id"]
        assert entries["sys"]["type"] == "custom" and entries["sys"]["customType"] == "chatgpt.system"
        assert entries["u2"]["source"]["parts"][0]["asset_pointer"] == "file-service://file-AbC123"
        assert entries["a1"]["timestamp"] == "2024-11-07T17:20:05.000Z"
        assert entries["a1"]["message"]["timestamp"] == 1731000005000
        assert "root" not in entries  # ChatGPT's empty root message is no entry
    with Session.open(files[1], strict=True) as session:
        assert session.name == "Haiku"
        assert [c.custom_type for c in session.custom_entries("chatgpt.")] == [
            "chatgpt.user_editable_context"]


# -- Open WebUI ----------------------------------------------------------------------------------

def test_open_webui_siblings_stay_branches_and_current_id_is_the_leaf(
        tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    (file,) = imported(tmp_path, "open-webui", "open-webui-export.json")
    check_with_pi(pi_modules, [file])
    with Session.open(file, strict=True) as session:
        entries = by_source(session)
        assert session.name == "Session trees 101"
        assert texts(session.build_context()) == [
            ("user", "What is a session tree? | image | [file: notes.pdf]"),
            ("assistant", "It stores conversations with branches.")]
        assert len(session.children_ids(entries["q1"]["id"])) == 3  # three answers, three branches
        assert entries["r2"]["message"]["model"] == "qwen2.5:7b"
        assert entries["r1"]["message"]["usage"]["input"] == 20
        assert entries["r1"]["message"]["usage"]["output"] == 14
        assert entries["r3"]["message"]["stopReason"] == "error"
        assert entries["r3"]["message"]["errorMessage"] == "Ollama: model not loaded"
        assert entries["r4"]["source"]["sources"][0]["source"]["name"] == "docs"
        assert entries["q2"]["timestamp"] == "2024-11-10T00:55:00.000Z"


# -- Responses items -----------------------------------------------------------------------------

def test_responses_items_come_back_exactly_and_pi_reads_them(
        tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    (file,) = imported(tmp_path, "responses", "responses-items.json")
    check_with_pi(pi_modules, [file])
    items = json.loads((DATA / "responses-items.json").read_text())
    with Session.open(file, strict=True) as session:
        back = [item for entry_id in session.path_ids()
                for item in entry_items(json.loads(session.raw_line(entry_id)))]
        assert back == items
        roles = [m["role"] for m in session.build_context().to_builtins()["messages"]]
        assert roles == ["user", "assistant", "assistant", "toolResult", "assistant", "user",
                         "custom", "assistant"]
        (call,) = [e for e in session.path() if getattr(e, "type", "") == "message"
                   and e.message.role == "assistant"  # type: ignore[union-attr]
                   and e.message.content[0].type == "toolCall"]  # type: ignore[union-attr]
        assert call.message.content[0].id == "call_1|fc_001"  # type: ignore[union-attr]


# -- re-import, bad input, atomicity, the command -----------------------------------------------

def test_importing_the_same_source_again_is_detected(tmp_path: Path) -> None:
    source = tmp_path / "conversations.json"
    shutil.copyfile(DATA / "chatgpt-conversations.json", source)
    out = tmp_path / "out"
    first = import_file("chatgpt", source, out)
    assert len(first.imported) == 2
    again = import_file("chatgpt", source, out)
    assert [(s.status, s.changed) for s in again.sessions] == [("skipped", False)] * 2
    assert [s.session_id for s in again.sessions] == [s.session_id for s in first.sessions]
    data = json.loads(source.read_text())
    data[1]["mapping"]["h"]["message"]["content"]["parts"] = ["A different haiku"]
    source.write_text(json.dumps(data))
    changed = import_file("chatgpt", source, out)
    assert [(s.status, s.changed) for s in changed.sessions] == [("skipped", False),
                                                                ("skipped", True)]
    assert "source changed since" in changed.summary()
    assert len(list(out.glob("*.jsonl"))) == 2
    forced = import_file("chatgpt", source, out, again=True)
    assert len(forced.imported) == 2
    assert not {s.session_id for s in forced.sessions} & {s.session_id for s in first.sessions}
    assert len(list(out.glob("*.jsonl"))) == 4


@pytest.mark.parametrize("format,name,cut", [
    ("chatgpt", "chatgpt-conversations.json", 0.5),
    ("open-webui", "open-webui-export.json", 0.7),
    ("responses", "responses-items.json", 0.9),
    ("claude-code", "claude-code-session.jsonl", 0.6),
])
def test_a_truncated_source_names_file_and_position_and_writes_nothing(
        tmp_path: Path, format: str, name: str, cut: float) -> None:
    text = (DATA / name).read_text()
    source = tmp_path / name
    source.write_text(text[:int(len(text) * cut)])
    out = tmp_path / "out"
    with pytest.raises(MalformedSource) as caught:
        import_file(format, source, out)
    error = caught.value
    assert error.path == str(source) and error.lineno is not None and error.column is not None
    assert str(error).startswith(f"{source} line {error.lineno}, column {error.column}: ")
    if format == "claude-code":
        assert error.lineno == text[:int(len(text) * cut)].count("\n") + 1  # the torn last line
    assert not out.exists() or not any(out.iterdir())


def test_a_source_of_the_wrong_shape_names_the_json_path(tmp_path: Path) -> None:
    data = json.loads((DATA / "open-webui-export.json").read_text())
    data[0]["chat"]["history"]["messages"]["q2"]["content"] = ["not", "a", "string"]
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(data))
    with pytest.raises(MalformedSource) as caught:
        import_file("open-webui", source, tmp_path / "out")
    assert caught.value.position == "$[0].chat.history.messages.q2.content"
    lines = (DATA / "claude-code-session.jsonl").read_text().split("\n")
    lines[4] = '{"type": "user", "uuid": 7}'
    broken = tmp_path / "session.jsonl"
    broken.write_text("\n".join(lines))
    with pytest.raises(MalformedSource) as bad_line:
        import_file("claude-code", broken, tmp_path / "out")
    assert bad_line.value.lineno == 5 and "uuid" in str(bad_line.value)
    assert not (tmp_path / "out").exists()


class _AppendOnlyStore:
    """A store with only the six methods of the Store protocol (no whole-session writes),
    over a real MemoryStore, whose disk fills up on the second append."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.appends = 0

    def create(self, header: SessionHeader) -> str:
        return self.inner.create(header)

    def append(self, session_id: str, entries: Sequence[Any | Mapping[str, Any]]) -> None:
        self.appends += 1
        if self.appends == 2:
            raise OSError(28, "No space left on device")
        self.inner.append(session_id, entries)

    def read(self, session_id: str) -> Iterator[Any]:
        return self.inner.read(session_id)

    def list_sessions(self) -> list[SessionListing]:
        return self.inner.list_sessions()

    def delete(self, session_id: str) -> None:
        self.inner.delete(session_id)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> _AppendOnlyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def test_a_failed_write_leaves_no_half_written_session(tmp_path: Path) -> None:
    store = _AppendOnlyStore()
    assert isinstance(store, Store) and not has_lines(store)
    with pytest.raises(OSError):
        import_file("chatgpt", DATA / "chatgpt-conversations.json", store)
    listed = store.list_sessions()
    assert len(listed) == 1  # the first conversation, complete; the second not at all
    assert listed[0].name == "Resize images in Python" and listed[0].entry_count == 14  # 12 nodes, name, import record
    result = import_file("chatgpt", DATA / "chatgpt-conversations.json", store)
    assert [s.status for s in result.sessions] == ["skipped", "imported"]


def test_an_import_never_overwrites_a_session_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (first, _) = import_file("chatgpt", DATA / "chatgpt-conversations.json", out).imported
    path = Path(first.location or "")
    header, *lines = path.read_bytes().splitlines()
    path.write_bytes(b"not a session any more\n")
    with pytest.raises(CorruptHeader):  # the same session id: the file is looked at, not replaced
        import_file("chatgpt", DATA / "chatgpt-conversations.json", out)
    assert path.read_bytes() == b"not a session any more\n"
    with pytest.raises(DuplicateId):  # the last step, if the name was taken meanwhile
        JsonlStore(out).import_lines(header, lines)
    assert path.read_bytes() == b"not a session any more\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_imports_into_a_database_store_keep_every_field_and_are_matched_again(
        tmp_path: Path, kind: str, request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path}/chats.db" if kind == "sqlite" else \
        request.getfixturevalue("fresh_postgres_url")
    runner = CliRunner()
    done = runner.invoke(cli, ["import", "--from", "chatgpt",
                               str(DATA / "chatgpt-conversations.json"), "--to", url, "--json"])
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout)["sessions"]
    assert [row["status"] for row in rows] == ["imported", "imported"]
    files = imported(tmp_path / "files", "chatgpt", "chatgpt-conversations.json")
    for row, path in zip(rows, files):
        assert row["location"].endswith(f"#{row['sessionId']}")
        with Session.open(row["location"]) as stored, Session.open(path) as on_disk:
            ours = [json.loads(stored.raw_line(i)) for i in stored.ids()]
            theirs = [json.loads(on_disk.raw_line(i)) for i in on_disk.ids()]
            assert [list(e) for e in ours] == [list(e) for e in theirs]  # every field, in order
            assert [e.get("source") for e in ours] == [e.get("source") for e in theirs]
            assert texts(stored.build_context()) == texts(on_disk.build_context())
    again = runner.invoke(cli, ["import", "--from", "chatgpt",
                                str(DATA / "chatgpt-conversations.json"), "--to", url, "--json"])
    assert [row["status"] for row in json.loads(again.stdout)["sessions"]] == ["skipped"] * 2
    bad = runner.invoke(cli, ["import", "--from", "chatgpt",
                              str(DATA / "chatgpt-conversations.json"), "--to", "sqlite://x"])
    assert bad.exit_code == 1 and "sqlite:///" in bad.stderr


def test_the_import_command_prints_the_summary_and_reports_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "sessions"
    done = runner.invoke(cli, ["import", "--from", "claude-code",
                               str(DATA / "claude-code-session.jsonl"), "--to", str(out)])
    assert done.exit_code == 0, done.output
    assert "1 imported, 0 already imported" in done.stdout
    assert "kept unmapped: claude-code block server_tool_use 1" in done.stdout
    (file,) = out.glob("*.jsonl")
    assert f"{file} 'Fix failing add test': " in done.stdout
    again = runner.invoke(cli, ["import", "--from", "claude-code",
                                str(DATA / "claude-code-session.jsonl"), "--to", str(out),
                                "--json"])
    assert again.exit_code == 0
    (row,) = json.loads(again.stdout)["sessions"]
    assert row["status"] == "skipped" and row["changed"] is False
    bad = tmp_path / "bad.json"
    bad.write_text('[{"mapping": ')
    failed = runner.invoke(cli, ["import", "--from", "chatgpt", str(bad), "--to", str(out)])
    assert failed.exit_code == 1
    assert failed.stderr.strip() == (f"Error: {bad} line 1, column 14: the file ends in the "
                                     "middle of a JSON value (truncated?)")


# -- Nothing dropped, nothing invented, every failure typed (issue 23 points 8 and 10) ----------

def _chatgpt(mapping: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    """A one-conversation ``conversations.json`` over ``mapping`` (node id -> message or None)."""
    nodes, parent = {}, None
    for key, message in mapping.items():
        nodes[key] = {"id": key, "message": message and {"id": key, **message},
                      "parent": parent, "children": []}
        parent = key
    return [{"title": "t", "create_time": 1731000000.0, "conversation_id": "c-1",
             "current_node": parent, "mapping": nodes, **fields}]


def _said(role: str, content: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"author": {"role": role}, "create_time": 1731000001.0, "content": content,
            "recipient": "all", **fields}


def test_chatgpt_keeps_what_a_content_holds_beside_its_text(tmp_path: Path) -> None:
    quote = {"content_type": "tether_quote", "url": "https://example.org/a", "domain":
             "example.org", "title": "A page", "text": "the quoted words", "tether_id": None}
    source = tmp_path / "conversations.json"
    source.write_text(json.dumps(_chatgpt({
        "u1": _said("user", {"content_type": "text", "parts": "one part, not a list"}),
        "u2": _said("user", {"content_type": "multimodal_text",
                             "parts": {"content_type": "image_asset_pointer",
                                       "asset_pointer": "file-service://f-1"}}),
        "a1": _said("assistant", {"content_type": "text", "parts": ["search"]},
                    recipient="browser"),
        "t1": _said("tool", quote, author={"role": "tool", "name": "browser"}),
        "a2": _said("assistant", {"content_type": "thoughts", "thoughts": [
            {"summary": "Weighing it", "content": None}]}),
    })))
    (row,) = import_file("chatgpt", source, tmp_path / "out").imported
    with Session.open(row.location or "") as session:
        entries = by_source(session)
    assert entries["u1"]["message"]["content"] == [{"type": "text",
                                                    "text": "one part, not a list"}]
    assert entries["u2"]["message"]["content"] == [{"type": "text",
                                                    "text": "[image: file-service://f-1]"}]
    assert entries["u2"]["source"]["parts"][0]["asset_pointer"] == "file-service://f-1"
    result = entries["t1"]
    assert result["message"]["role"] == "toolResult"
    assert result["message"]["content"] == [{"type": "text", "text": "the quoted words"}]
    assert result["source"]["content"] == {"url": "https://example.org/a",
                                           "domain": "example.org", "title": "A page",
                                           "tether_id": None}
    assert entries["a2"]["message"]["content"][0]["thinking"] == "Weighing it"


def test_chatgpt_parts_of_no_known_shape_are_an_error_naming_them(tmp_path: Path) -> None:
    source = tmp_path / "conversations.json"
    source.write_text(json.dumps(_chatgpt({"u1": _said("user", {"content_type": "text",
                                                                "parts": 42})})))
    with pytest.raises(MalformedSource) as caught:
        import_file("chatgpt", source, tmp_path / "out")
    assert caught.value.position == "$[0].mapping.u1.message.content.parts"
    assert not (tmp_path / "out").exists()


def test_responses_null_fields_are_empty_never_the_text_none(tmp_path: Path) -> None:
    items = [{"type": "function_call", "call_id": None, "name": None, "arguments": "{}"},
             {"type": "function_call_output", "call_id": None, "output": "done"},
             {"type": "message", "role": "assistant", "content": [
                 {"type": "output_text", "text": None}, {"type": "refusal", "refusal": "no"}]},
             {"type": "reasoning", "summary": [{"type": "summary_text", "text": None}]}]
    source = tmp_path / "items.json"
    source.write_text(json.dumps(items))
    (row,) = import_file("responses", source, tmp_path / "out").imported
    lines = Path(row.location or "").read_text().splitlines()
    assert all('"None"' not in line for line in lines)
    with Session.open(row.location or "") as session:
        stored = [json.loads(session.raw_line(i)) for i in session.ids()[:4]]
        assert [entry["message"]["content"] for entry in stored] == [
            [{"type": "toolCall", "id": "", "name": "", "arguments": {}}],
            [{"type": "text", "text": "done"}],
            [{"type": "text", "text": "no"}],
            [{"type": "thinking", "thinking": "", "thinkingSignature": json.dumps(
                items[3], separators=(",", ":"))}]]
        assert [entry_items(entry) for entry in stored] == [[item] for item in items]


@pytest.mark.parametrize("format", ["chatgpt", "open-webui", "responses", "claude-code"])
def test_bytes_that_are_not_utf8_are_said_in_the_summary(tmp_path: Path, format: str) -> None:
    name = {"chatgpt": "chatgpt-conversations.json", "open-webui": "open-webui-export.json",
            "responses": "responses-items.json", "claude-code": "claude-code-session.jsonl"}
    text = (DATA / name[format]).read_bytes()
    at = text.index(b'"', text.index(b"\n", text.index(b"\n") + 1)) + 1  # in line 2 or 3's string
    source = tmp_path / name[format]
    source.write_bytes(text[:at] + b"\xff\xfe" + text[at:])
    result = import_file(format, source, tmp_path / "out")
    line = text.count(b"\n", 0, at) + 1
    column = at - text.rfind(b"\n", 0, at)
    assert result.notes == (f"{source}: not valid UTF-8: 2 invalid byte sequence(s) read as "
                            f"U+FFFD, the first at line {line}, byte {column}",)
    assert f"note: {result.notes[0]}" in result.summary().splitlines()[1]
    clean = import_file(format, DATA / name[format], tmp_path / "clean")
    assert clean.notes == () and "note:" not in clean.summary().splitlines()[1]
    printed = CliRunner().invoke(cli, ["import", "--from", format, str(source), "--to",
                                       str(tmp_path / "cli"), "--json"])
    assert json.loads(printed.output)["notes"] == list(result.notes)


@pytest.mark.parametrize("format,wrap", [
    ("chatgpt", '[{"mapping": {}, "deep": %s}]'),
    ("open-webui", '[{"id": "c", "chat": {"history": {"messages": {}}}, "deep": %s}]'),
    ("responses", '[{"role": "user", "content": "hi", "deep": %s}]'),
    ("claude-code", '{"type": "x", "deep": %s}\n{"type": "user"}\n'),
])
def test_json_nested_too_deep_is_an_error_naming_where(tmp_path: Path, format: str,
                                                       wrap: str) -> None:
    depth = 50_000
    text = wrap % ('["[{", ' + "[" * depth + '{"a": "]"}' + "]" * depth + "]")
    source = tmp_path / "deep.json"
    source.write_text(text)
    with pytest.raises(MalformedSource) as caught:
        import_file(format, source, tmp_path / "out")
    error = caught.value
    deepest = text.index('{"a"')  # the bracket in the strings does not count
    assert error.path == str(source) and error.lineno == text.count("\n", 0, deepest) + 1
    assert error.column == deepest - text.rfind("\n", 0, deepest)
    levels = depth + (3 if format == "claude-code" else 4)
    assert error.reason == f"JSON nested {levels} levels deep, deeper than can be read"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e300", "-1e13",
                                   "253402300800000"])
def test_a_time_that_is_no_time_is_an_error_naming_it(tmp_path: Path, value: str) -> None:
    chatgpt = json.dumps(_chatgpt({"u1": _said("user", {"content_type": "text",
                                                        "parts": ["hi"]}, create_time=0)}))
    webui = json.dumps([{"id": "c", "created_at": 1731200000, "chat": {"history": {
        "currentId": "q", "messages": {"q": {"id": "q", "parentId": None, "role": "user",
                                             "content": "hi", "timestamp": 0}}}}}])
    cases = [
        ("chatgpt", chatgpt.replace('"create_time": 0', f'"create_time": {value}'),
         "$[0].mapping.u1.message.create_time"),
        ("chatgpt", chatgpt.replace('"create_time": 1731000000.0', f'"create_time": {value}'),
         "$[0].create_time"),
        ("open-webui", webui.replace('"timestamp": 0', f'"timestamp": {value}'),
         "$[0].chat.history.messages.q.timestamp"),
        ("open-webui", webui.replace('"created_at": 1731200000', f'"created_at": {value}'),
         "$[0].created_at"),
    ]
    for format, text, position in cases:
        source = tmp_path / "source.json"
        source.write_text(text)
        with pytest.raises(MalformedSource) as caught:
            import_file(format, source, tmp_path / "out")
        assert caught.value.path == str(source) and caught.value.position == position
        assert caught.value.reason.startswith(f"{json.loads(value)!r} is not a time")
        assert not (tmp_path / "out").exists()


def test_the_summary_counts_every_entry_written_as_ls_does(tmp_path: Path) -> None:
    """Issue 20 point 7: the summary's count per session is the count ``ls`` shows."""
    result = import_file("chatgpt", DATA / "chatgpt-conversations.json", tmp_path)
    for row in result.imported:
        with Session.open(row.location or "") as session:
            assert row.entries == len(session) == session.listing().entry_count
            assert f": {row.entries} entries ({sum(row.counts.values())} mapped)" in \
                result.summary()
            assert row.entries > sum(row.counts.values())  # name, customs, the import record


@pytest.mark.parametrize("asked,given", [
    ("chatgpt", "claude-code-session.jsonl"), ("claude-code", "chatgpt-conversations.json"),
    ("open-webui", "chatgpt-conversations.json"), ("chatgpt", "open-webui-export.json"),
    ("open-webui", "responses-items.json"),
])
def test_a_file_of_another_format_names_the_format_it_looks_like(
        tmp_path: Path, asked: str, given: str) -> None:
    looks = {"claude-code-session.jsonl": "claude-code", "chatgpt-conversations.json": "chatgpt",
             "open-webui-export.json": "open-webui", "responses-items.json": "responses"}[given]
    with pytest.raises(MalformedSource) as caught:
        import_file(asked, DATA / given, tmp_path / "out")
    assert f"--from {asked} expects " in str(caught.value)
    assert str(caught.value).endswith(f": --from {looks}?)")
    printed = CliRunner().invoke(cli, ["import", "--from", asked, str(DATA / given), "--to",
                                       str(tmp_path / "out")])
    assert printed.exit_code == 1 and f"--from {looks}?" in printed.output


def test_an_open_webui_chat_without_created_at_starts_at_its_first_message(
        tmp_path: Path) -> None:
    data = json.loads((DATA / "open-webui-export.json").read_text())
    data = [data[0]]
    data[0].pop("created_at", None)
    data[0]["chat"].pop("timestamp", None)
    first = min(m["timestamp"] for m in data[0]["chat"]["history"]["messages"].values()
                if isinstance(m.get("timestamp"), (int, float)))
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(data))
    (row,) = import_file("open-webui", source, tmp_path / "out").imported
    assert not Path(row.location or "").name.startswith("1970")
    with Session.open(row.location or "") as session:
        assert session.header.timestamp.startswith(iso_from_seconds(first)[:19])
    for message in data[0]["chat"]["history"]["messages"].values():
        message.pop("timestamp", None)
    source.write_text(json.dumps(data))
    (row,) = import_file("open-webui", source, tmp_path / "none", again=True).imported
    assert Path(row.location or "").name.startswith(time.strftime("%Y-", time.gmtime()))
