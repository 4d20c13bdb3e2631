"""Listing folders of sessions as pi's ``SessionManager.list`` does, its index, and
``Session.continue_recent`` beside pi's ``continueRecent``; all checked against pi itself: pi
1.5.2 row for row and in its order, pi 0.73.1 row for row where the two pis agree (0.73.1 left
rows of one time in the folder's order)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from sessiontree import AssistantMessage, CorruptHeader, Session, UserMessage, list_sessions
from sessiontree.cli import cli
from sessiontree import _helpers
from sessiontree.stores import _jsonl_listing
from sessiontree.stores._jsonl_listing import INDEX_NAME
from sessiontree.stores.memory import MemoryLog
from sessiontree.testing.generate import generate_folder
from sessiontree.testing.pi import PI_1_5, PiUnavailable, ensure_pi, run_node_script

from .test_pi_interop import Pi, pi  # noqa: F401 - the fixture

PROBE = Path(__file__).parent / "pi" / "pi_listing.mjs"
CWDS = ("/home/dev/projects/acme-api", "/home/dev/projects/web")


@pytest.fixture(scope="session")
def pi15() -> Pi:
    """pi 1.5.2, installed on first use; a test using it fails (never skips) without it."""
    try:
        return Pi(ensure_pi(release=PI_1_5))
    except PiUnavailable as error:
        return Pi(f"pi 1.5.2 is required by the listing tests and could not be installed: {error}")


def pi_list(pi: Pi, folder: Path, cwd: str | None = None) -> list[dict[str, Any]]:
    """pi's rows: ``list(cwd, folder)``, or without ``cwd`` the whole folder."""
    return run_node_script(PROBE, str(pi.modules), "list", str(folder),  # type: ignore[no-any-return]
                           *([cwd] if cwd is not None else []))


def by_path(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["path"]: row for row in rows}


def ours(folder: Path, **options: Any) -> list[dict[str, Any]]:
    return [{"path": row.path, "id": row.id, "cwd": row.cwd, "name": row.name,
             "parentSessionPath": row.parent_session, "created": row.created,
             "modified": row.modified_ms, "messageCount": row.message_count,
             "firstMessage": row.first_message}
            for row in list_sessions(folder, **options)]


def as_pi(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our rows with ``created`` as epoch ms, as the probe prints pi's."""
    from sessiontree._time import iso_to_ms

    return [{**row, "created": iso_to_ms(row["created"])} for row in rows]


def odd_files(folder: Path) -> None:
    """Files a real session folder collects, each with its own rule in pi's listing."""
    header = {"type": "session", "version": 3, "timestamp": "2026-01-02T03:04:05.678Z", "cwd": CWDS[0]}

    def write(name: str, *lines: Any, raw: bytes = b"") -> None:
        body = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)
        (folder / name).write_bytes(body + raw)

    def msg(i: str, role: str, content: Any, stamp: Any = 1767323045000, **extra: Any) -> dict[str, Any]:
        message = {"role": role, "content": content, "timestamp": stamp, **extra}
        return {"type": "message", "id": i, "parentId": None, "timestamp": "2026-01-02T03:04:06.000Z",
                "message": message}

    write("garbage.jsonl", raw=b"not json at all\n{\"type\":\"message\"}\n")
    write("empty.jsonl")
    write("header-only.jsonl", {**header, "id": "header-only"})
    write("named-and-broken.jsonl", {**header, "id": "named", "parentSession": "/x/parent.jsonl"},
          msg("a", "user", [{"type": "image", "data": "x", "mimeType": "image/png"}]),
          msg("b", "user", "  "), msg("c", "user", [{"type": "text", "text": "first"},
                                                     {"type": "text", "text": "words"}]),
          {"type": "session_info", "id": "d", "parentId": "c", "timestamp": "2026-01-02T03:04:07.000Z",
           "name": "  Named \u3000"},
          msg("e", "assistant", [{"type": "text", "text": "later"}], stamp=1767400000000),
          msg("f", "toolResult", [{"type": "text", "text": "not counted for time"}], stamp=1799999999999),
          raw=b'{"type":"message","id":"g", "broken\n' + json.dumps(
              msg("h", "user", "lone \ud800 surrogate")).encode() + b"\n")
    write("cleared-name.jsonl", {**header, "id": "cleared"},
          {"type": "session_info", "id": "a", "parentId": None, "timestamp": header["timestamp"], "name": "x"},
          {"type": "session_info", "id": "b", "parentId": "a", "timestamp": header["timestamp"], "name": ""},
          msg("c", "custom", "no content time", stamp=1800000000000),
          {"type": "message", "id": "d", "parentId": "c", "timestamp": "2026-05-02T03:04:06.000Z",
           "message": {"role": "user", "content": "entry time only"}})
    write("garbage-first-line.jsonl", raw=b"{oops\n" + json.dumps({**header, "id": "second-line"}).encode()
          + b"\r\n" + json.dumps(msg("a", "user", "crlf")).encode() + b"\r\n")
    write("no-times.jsonl", {**header, "id": "no-times", "timestamp": "not a time"},
          msg("a", "user", "hi", stamp="soon"))
    os.utime(folder / "no-times.jsonl", ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))


def test_listing_equals_pis_on_a_generated_folder_with_odd_files(tmp_path: Path, pi: Pi,
                                                                 pi15: Pi) -> None:
    generate_folder(tmp_path, 25, seed=7, min_entries=0, max_entries=400, cwds=CWDS)
    odd_files(tmp_path)
    expected = pi_list(pi15, tmp_path)
    assert len(expected) == 25 + 5
    assert as_pi(ours(tmp_path, index=False)) == expected
    assert as_pi(ours(tmp_path)) == expected  # builds the index
    assert as_pi(ours(tmp_path)) == expected  # served from the index
    assert as_pi(ours(tmp_path, cwd=CWDS[1])) == pi_list(pi15, tmp_path, CWDS[1]) == \
        [row for row in expected if row["cwd"] == CWDS[1]]
    assert by_path(expected) == by_path(pi_list(pi, tmp_path))  # the pis agree on these rows


def ties_and_quirks(folder: Path) -> dict[str, str]:
    """Files on which pi 1.5.2 and pi 0.73.1 list differently; what each shows in 1.5.2."""
    header = {"type": "session", "version": 3, "timestamp": "2026-01-02T03:04:05.678Z", "cwd": "/a/b"}

    def message(content: Any, stamp: Any = "2026-01-02T03:04:06.000Z", **extra: Any) -> dict[str, Any]:
        return {"type": "message", "id": "x", "parentId": None, "timestamp": stamp,
                "message": {"role": "user", "content": content, **extra}}

    def write(name: str, *lines: Any, raw: bytes | None = None) -> None:
        (folder / name).write_bytes(raw if raw is not None else b"".join(
            json.dumps(line).encode() + b"\n" for line in lines))

    for name in ("B-tie", "a-tie", "a_tie", "A-tie", "b.tie", "1tie", "\u00e9-tie", "z-tie", "e-tie"):
        write(f"{name}.jsonl", {**header, "id": name.replace("\u00e9", "e2")})  # one time
    write("bom.jsonl", raw=b"\xef\xbb\xbf" + json.dumps({**header, "id": "bom"}).encode() + b"\n")
    write("lone-cr.jsonl", raw=json.dumps({**header, "id": "lone-cr"}).encode() + b"\n" + json.dumps(
        message("split by a carriage return")).encode().replace(b'"id"', b'\r"id"') + b"\n")
    write("number-time.jsonl", {**header, "id": "number-time"}, message("n", stamp=1780000000000.7))
    write("true-time.jsonl", {**header, "id": "true-time"}, message("t", stamp=True))
    write("null-time.jsonl", {**header, "id": "null-time"}, message("t", stamp=None))
    write("no-message.jsonl", {**header, "id": "no-message"},
          {"type": "message", "id": "x", "parentId": None, "timestamp": header["timestamp"]})
    write("number-name.jsonl", {**header, "id": "number-name"},
          {"type": "session_info", "id": "x", "parentId": None, "name": 5})
    write("null-content.jsonl", {**header, "id": "null-content"}, message(None))
    write("null-block.jsonl", {**header, "id": "null-block"}, message([None]))
    write("odd-texts.jsonl", {**header, "id": "odd-texts"},
          message([{"type": "text", "text": 5}, {"type": "text"}, {"type": "text", "text": [1, None]},
                   "not a block", {"type": "text", "text": "b"}]))
    write("cwd-spelled.jsonl", {**header, "id": "cwd-spelled", "cwd": "/a/./b/"})
    write("no-cwd.jsonl", {**header, "id": "no-cwd", "cwd": ""})
    write("empty-parent.jsonl", {**header, "id": "empty-parent", "parentSession": ""})
    return {"bom": "not listed (a BOM makes the header line not parse)",
            "lone-cr": "two lines, neither an entry", "number-time": "dated by its number",
            "true-time": "dated 1 ms (new Date(true))", "null-time": "dated by its header",
            "no-message": "not listed", "number-name": "not listed", "null-content": "not listed",
            "null-block": "not listed", "odd-texts": "first message '5  1, b'"}


def test_listing_follows_pi_1_5_where_the_pis_differ(tmp_path: Path, pi: Pi, pi15: Pi) -> None:
    """Ties in time go by file name as pi 1.5.2 orders them (localeCompare, descending), lines
    end where node's readline ends them, entry times convert as JavaScript's Date does, and
    files pi's summary throws on are not listed."""
    quirks = ties_and_quirks(tmp_path)
    expected = pi_list(pi15, tmp_path)
    assert as_pi(ours(tmp_path, index=False)) == expected
    assert as_pi(ours(tmp_path)) == expected == as_pi(ours(tmp_path))  # the index, both ways
    for cwd in ("/a/b", "/a/b/", "/a/../a/b"):
        assert as_pi(ours(tmp_path, cwd=cwd)) == pi_list(pi15, tmp_path, cwd)
    rows = {Path(row["path"]).stem: row for row in expected}
    names = [Path(row["path"]).stem for row in expected]
    ties = [n for n in names if n.endswith("tie")]
    assert ties == ["z-tie", "\u00e9-tie", "e-tie", "b.tie", "B-tie", "A-tie", "a-tie", "a_tie", "1tie"]
    assert {"bom", "no-message", "number-name", "null-content", "null-block"}.isdisjoint(rows)
    assert rows["number-time"]["modified"] == 1780000000000 and rows["true-time"]["modified"] == 1
    assert rows["odd-texts"]["firstMessage"] == "5  1, b"
    assert rows["lone-cr"]["messageCount"] == 0 and rows["empty-parent"]["parentSessionPath"] == ""
    old = by_path(pi_list(pi, tmp_path))  # where pi 0.73.1 differs, as the README says
    differ = {Path(path).stem for path in set(old) | set(by_path(expected))
              if old.get(path) != by_path(expected).get(path)}
    assert differ == {"bom", "lone-cr", "number-time", "true-time"}
    assert set(quirks) >= differ


def lines_only_a_file_reading_catches(folder: Path) -> None:
    """Lines pi skips that would look like entries if lines were not read one by one."""
    header = {"type": "session", "version": 3, "id": "split-lines", "cwd": CWDS[0],
              "timestamp": "2026-01-02T03:04:05.678Z"}

    def message(i: str, text: str, stamp: int) -> bytes:
        return json.dumps({"type": "message", "id": i, "parentId": None,
                           "timestamp": "2026-01-02T03:04:06.000Z",
                           "message": {"role": "user", "content": text, "timestamp": stamp}}
                          ).encode()

    whole = message("w", "whole", 1767323045001)
    (folder / "split-lines.jsonl").write_bytes(b"\n".join([
        json.dumps(header).encode(),
        whole,
        message("p", "pi's prefix, cut", 1799999999999)[:-30],  # a canonical prefix, malformed
        whole[:40], whole[40:],  # one object over two lines
        message("x", "two on a line", 1799999999998) + b" " + message("y", "2", 1799999999997),
        message("z", "two with a comma", 1799999999996) + b"," + whole,
        b'{"type":"message","id":"q","parentId":null,"message":{"role":"user","content":[1',
        b'2]}}',  # an array over two lines
    ]) + b"\n")


def odd_headers(folder: Path) -> None:
    """Headers both pis list as they are: an ``id`` that is not a string (such a file opens in
    neither pi nor sessiontree, but is listed), a ``timestamp`` that is not a string (``new
    Date()`` reads it), a ``parentSession`` that is not a string, a ``cwd`` that is not one."""
    header = {"type": "session", "version": 3, "timestamp": "2026-01-02T03:04:05.678Z", "cwd": CWDS[0]}
    said = {"type": "message", "id": "m", "parentId": None, "timestamp": "2026-01-02T03:04:06.000Z",
            "message": {"role": "user", "content": "hello", "timestamp": 1767323046000}}

    def write(name: str, *, alone: bool = False, **fields: Any) -> None:
        first = {k: v for k, v in {**header, "id": name, **fields}.items() if v is not _GONE}
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(line) + "\n"
                                                      for line in [first] + [said] * (not alone)))

    for name, value in (("int", 5), ("float", 5.5), ("null", None), ("true", True),
                        ("false", False), ("list", [1, "x"]), ("object", {"a": 1}), ("big", 1e21),
                        ("missing", _GONE)):
        write(f"id-{name}", id=value)
    for name, value in (("int", 1767323045000), ("float", 1767323045000.9), ("null", None),
                        ("true", True), ("huge", 1e300), ("list", []),
                        ("iso-list", ["2026-01-02T03:04:05.678Z"]), ("object", {}),
                        ("missing", _GONE)):
        write(f"time-{name}", timestamp=value)
        write(f"time-{name}-alone", timestamp=value, alone=True)  # dated by the file's time
    os.utime(folder / "time-null-alone.jsonl", ns=(1_700_000_000_123_456_789, 1_700_000_000_999_600_000))
    for name, value in (("int", 5), ("null", None), ("object", {"a": 1}), ("true", True),
                        ("list", ["x"])):
        write(f"parent-{name}", parentSession=value)
    write("cwd-int", cwd=5)


_GONE = object()
"""A header field left out."""


def test_headers_pi_lists_as_they_are(tmp_path: Path, pi: Pi, pi15: Pi) -> None:
    """Issue 16 point 6: a header whose id is not a string is listed with that id, as both pis
    list it; so are other header fields of odd types, each as pi 1.5.2's row shows it."""
    odd_headers(tmp_path)
    expected = pi_list(pi15, tmp_path)
    assert len(expected) == len(list(tmp_path.glob("*.jsonl")))  # pi lists every one of them
    assert as_pi(ours(tmp_path, index=False)) == expected
    assert as_pi(ours(tmp_path)) == expected == as_pi(ours(tmp_path))  # the index, both ways
    assert as_pi(ours(tmp_path, cwd=CWDS[0])) == pi_list(pi15, tmp_path, CWDS[0])
    assert by_path(pi_list(pi, tmp_path)) == by_path(expected)  # pi 0.73.1 lists them alike
    rows = {Path(row["path"]).stem: row for row in expected}
    assert [rows[f"id-{n}"]["id"] for n in ("int", "null", "list", "object", "missing")] == \
        [5, None, [1, "x"], {"a": 1}, None]
    assert rows["time-int"]["created"] == 1767323045000 and rows["time-null"]["created"] == 0
    assert rows["time-iso-list"]["created"] == 1767323045678 and rows["time-huge"]["created"] is None
    assert rows["time-null-alone"]["modified"] == 1_700_000_001_000  # node rounds a file's time
    assert rows["parent-object"]["parentSessionPath"] == {"a": 1} and rows["cwd-int"]["cwd"] == ""
    shown = json.loads(CliRunner().invoke(cli, ["ls", str(tmp_path), "--json"]).output)
    assert [(row["id"], row["parent_session"]) for row in shown] == \
        [(row["id"], row["parentSessionPath"]) for row in expected]
    table = CliRunner().invoke(cli, ["ls", str(tmp_path)]).output
    assert table.count("hello") == sum(row["firstMessage"] == "hello" for row in expected)
    with pytest.raises(CorruptHeader):  # listed, but it opens in neither pi nor here
        Session.open(tmp_path / "id-int.jsonl")


def test_listing_reads_each_line_on_its_own_as_pi_does(tmp_path: Path, pi: Pi) -> None:
    lines_only_a_file_reading_catches(tmp_path)
    expected = pi_list(pi, tmp_path)
    assert [row["messageCount"] for row in expected] == [1]  # pi skips all but one line
    assert as_pi(ours(tmp_path, index=False)) == expected


def test_listing_with_helper_processes_equals_pis(tmp_path: Path, pi: Pi, monkeypatch: Any) -> None:
    """Files read by helper processes (and by this one when a helper fails) give pi's rows."""
    generate_folder(tmp_path, 12, seed=11, min_entries=0, max_entries=200, cwds=CWDS)
    odd_files(tmp_path)
    lines_only_a_file_reading_catches(tmp_path)
    expected = pi_list(pi, tmp_path)
    assert as_pi(ours(tmp_path, index=False)) == expected
    monkeypatch.setattr(_jsonl_listing, "PARALLEL_FILES", 1)
    monkeypatch.setattr(_helpers, "processes", lambda requested=None: 3)
    assert as_pi(ours(tmp_path, index=False)) == expected
    monkeypatch.setattr(_helpers, "_RUN", "import sys; sys.exit(2)")
    with pytest.warns(RuntimeWarning, match=r"helper process .* failed \(exit status 2"):
        assert as_pi(ours(tmp_path, index=False)) == expected


def one_rule_session(folder: Path) -> Path:
    """A session whose row needs each of pi's listing rules (every line a valid entry, so
    that every store can hold it)."""
    header = {"type": "session", "version": 3, "id": "one-rule", "cwd": CWDS[1],
              "timestamp": "2026-01-02T03:04:05.678Z"}
    entries: list[dict[str, Any]] = []

    def add(kind: str, **fields: Any) -> None:
        entries.append({"type": kind, "id": f"e{len(entries)}",
                        "parentId": entries[-1]["id"] if entries else None,
                        "timestamp": f"2026-01-02T03:05:{len(entries):02d}.000Z", **fields})

    add("message", message={"role": "user", "content": [{"type": "image", "data": "x",
                                                           "mimeType": "image/png"}],
                            "timestamp": 1767323100000})  # no text: not the first message
    add("message", message={"role": "user", "timestamp": 1899999999999})  # no content key
    add("message", message={"role": "toolResult", "toolCallId": "t", "toolName": "x",
                            "content": [{"type": "text", "text": "late"}], "isError": False,
                            "timestamp": 1899999999998})  # not a user or assistant message
    add("message", message={"role": 7, "content": "odd role", "timestamp": 1899999999997})
    add("session_info", name="  Named \u3000")
    add("message", message={"role": "user", "content": [{"type": "text", "text": "first"},
                                                          {"type": "text", "text": "words"}],
                            "timestamp": "not a number"})  # the entry's time counts
    add("message", message={"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                            "timestamp": 1767323200000})
    add("custom", customType="x", data={"name": "not a name"})
    path = folder / "one-rule.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in [header, *entries]), "utf-8")
    return path


def test_every_store_lists_a_session_by_pis_rules(tmp_path: Path, pi: Pi,
                                                  fresh_postgres_url: str) -> None:
    """One rule set: the folder listing, Session.listing() (file and memory), and the
    SQLite and PostgreSQL sessions tables all give pi's row for the same session."""
    from sessiontree.transfer import copy_sessions

    folder = tmp_path / "folder"
    folder.mkdir()
    path = one_rule_session(folder)
    (expected,) = pi_list(pi, folder)
    assert (expected["name"], expected["messageCount"], expected["firstMessage"]) == \
        ("Named", 6, "first words")

    def as_row(listing: Any) -> dict[str, Any]:
        return {"id": listing.id, "name": listing.name, "messageCount": listing.message_count,
                "firstMessage": listing.first_message, "modified": listing.modified_ms,
                "from": listing.modified_from, "entries": listing.entry_count}

    want = {"id": expected["id"], "name": expected["name"],
            "messageCount": expected["messageCount"], "firstMessage": expected["firstMessage"],
            "modified": expected["modified"], "from": "message", "entries": 8}
    (folder_row,) = list_sessions(folder, index=False)
    with Session.open(path) as session:
        file_row = session.listing()
        memory = Session(MemoryLog(path.read_bytes().splitlines()), warn=False)
        memory_row = memory.listing()
    rows = {"folder": as_row(folder_row), "file": as_row(file_row), "memory": as_row(memory_row)}
    for url in (f"sqlite:///{tmp_path / 'store.db'}", fresh_postgres_url):
        copy_sessions(str(path), url)
        store_url = url.split("?")[0] if url.startswith("sqlite") else url
        with Session.open(f"{store_url}#one-rule") as stored:
            rows[url] = as_row(stored.listing())
    assert rows == {where: want for where in rows}


def test_a_session_without_messages_is_dated_by_its_header_everywhere(
        tmp_path: Path, fresh_postgres_url: str) -> None:
    from sessiontree.transfer import copy_sessions

    with Session.create(tmp_path, cwd="/x") as session:
        session.set_name("only a name")
        path = session.file
        created = session.header.timestamp
    assert path is not None
    for url in (f"sqlite:///{tmp_path / 'store.db'}", fresh_postgres_url):
        copy_sessions(path, url)
    listings = [list_sessions(tmp_path, index=False)[0], Session.open(path).listing(),
                Session.open(f"sqlite:///{tmp_path / 'store.db'}#{session.id}").listing(),
                Session.open(f"{fresh_postgres_url}#{session.id}").listing()]
    from sessiontree._time import iso_to_ms

    assert {(r.modified_ms, r.modified_from, r.name, r.message_count) for r in listings} == \
        {(iso_to_ms(created), "created", "only a name", 0)}


def test_a_message_time_beyond_javascripts_dates_is_no_time_everywhere(
        tmp_path: Path, fresh_postgres_url: str) -> None:
    """A numeric message time beyond what a JavaScript Date holds (1e300, -1e300, 1e309, which
    JSON reads as infinity) once raised OverflowError in ``ls`` of the folder and in copies to
    SQLite, and NumericValueOutOfRange in PostgreSQL; the valid message time counts alone."""
    from sessiontree.transfer import copy_sessions

    folder = tmp_path / "odd"
    folder.mkdir()
    lines = [b'{"type":"session","version":3,"id":"odd-times","timestamp":'
             b'"2025-01-01T00:00:00.000Z","cwd":"/c"}']
    for i, stamp in enumerate([b"1e300", b"1700000000000", b"-1e300", b"1e309"]):
        lines.append(b'{"type":"message","id":"m%d","parentId":%s,"timestamp":"2025-01-01T00:00:0'
                     b'%d.000Z","message":{"role":"user","content":"x","timestamp":%s}}'
                     % (i, b"null" if i == 0 else b'"m%d"' % (i - 1), i, stamp))
    path = folder / "2025-01-01T00-00-00-000Z_odd-times.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    code = CliRunner().invoke(cli, ["ls", str(folder)], catch_exceptions=False).exit_code
    rows = [list_sessions(folder)[0], Session.open(path).listing()]
    for url in (f"sqlite:///{tmp_path / 'store.db'}", fresh_postgres_url):
        copy_sessions(str(path), url)
        rows.append(Session.open(f"{url}#odd-times").listing())
    assert code == 0
    assert {(row.modified_ms, row.modified_from) for row in rows} == {(1700000000000, "message")}


def test_the_index_is_a_cache_checked_against_every_file(tmp_path: Path) -> None:
    made = generate_folder(tmp_path, 6, seed=3, min_entries=5, max_entries=60)
    first = list_sessions(tmp_path)
    index = tmp_path / INDEX_NAME
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(f".{INDEX_NAME}")] == []

    # an unchanged file (same size, mtime and inode) is not read again
    target = Path(made[0].path)
    data, st = target.read_bytes(), target.stat()
    row = next(r for r in first if r.path == str(target))
    target.write_bytes(data.replace(row.id.encode(), b"x" * len(row.id), 1))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert any(r.id == row.id for r in list_sessions(tmp_path))  # the row came from the index
    assert any(r.id == "x" * len(row.id) for r in list_sessions(tmp_path, index=False))
    target.write_bytes(data)

    # a file that changed is read again
    with Session.open(Path(made[1].path)) as session:
        session.append_message(UserMessage.of("one more"))
        session.append_message(AssistantMessage.of("noted"))
    again = {r.path: r for r in list_sessions(tmp_path)}
    before = {r.path: r for r in first}
    assert again[made[1].path].message_count == before[made[1].path].message_count + 2

    # a removed file leaves the listing; a new one joins it
    os.unlink(made[2].path)
    generate_folder(tmp_path / "more", 1, seed=9)
    new = next((tmp_path / "more").iterdir())
    os.replace(new, tmp_path / new.name)
    paths = {r.path for r in list_sessions(tmp_path)}
    assert made[2].path not in paths and str(tmp_path / new.name) in paths

    # a corrupt or foreign index is rebuilt silently
    for junk in (b"\x00garbage", msgspec.msgpack.encode({"version": 99, "files": {}}), b""):
        index.write_bytes(junk)
        assert {r.path for r in list_sessions(tmp_path)} == paths
        assert msgspec.msgpack.decode(index.read_bytes())["version"] == _jsonl_listing._INDEX_VERSION


def test_a_session_file_whose_name_is_not_utf8_is_listed(tmp_path: Path,
                                                         monkeypatch: Any) -> None:
    """A ``*.jsonl`` name that is not UTF-8 (``os.listdir`` gives its bytes as surrogates) is
    listed as under any other name, with the index, without, by helper processes too, and
    resumed, named as ``os.listdir`` names it; the index (MessagePack's text is UTF-8) keeps
    the other rows. Listing raised UnicodeEncodeError."""
    made = generate_folder(tmp_path, 3, seed=7, min_entries=5, max_entries=20)
    odd = os.path.join(tmp_path, os.fsdecode(b"caf\xe9 \xff.jsonl"))
    expected = [msgspec.structs.replace(row, path=odd) if row.path == made[0].path else row
                for row in list_sessions(tmp_path, index=False)]
    newest = max(Path(item.path).stat().st_mtime_ns for item in made[1:]) + 10**9
    os.rename(made[0].path, odd)
    assert list_sessions(tmp_path) == expected
    assert list_sessions(tmp_path) == expected  # (the other rows from the index)
    kept = msgspec.msgpack.decode((tmp_path / INDEX_NAME).read_bytes())["files"]
    assert sorted(kept) == sorted(os.path.basename(item.path) for item in made[1:])
    monkeypatch.setattr(_jsonl_listing, "PARALLEL_FILES", 1)
    monkeypatch.setattr(_helpers, "processes", lambda requested=None: 2)
    assert list_sessions(tmp_path, index=False) == expected
    os.utime(odd, ns=(newest, newest))
    assert _jsonl_listing.most_recent_session(tmp_path) == odd


def test_a_folder_that_cannot_be_written_is_listed_without_an_index(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes anywhere: make the index path a folder instead
        generate_folder(tmp_path, 3, seed=5, min_entries=5, max_entries=20)
        (tmp_path / INDEX_NAME).mkdir()
        assert len(list_sessions(tmp_path)) == 3
        assert (tmp_path / INDEX_NAME).is_dir()
        return
    generate_folder(tmp_path, 3, seed=5, min_entries=5, max_entries=20)  # pragma: no cover
    tmp_path.chmod(0o500)  # pragma: no cover
    try:  # pragma: no cover
        assert len(list_sessions(tmp_path)) == 3
    finally:  # pragma: no cover
        tmp_path.chmod(0o700)


def test_continue_recent_resumes_what_pi_resumes(tmp_path: Path, pi: Pi, pi15: Pi) -> None:
    cwd = "/home/dev/projects/acme-api"
    made = generate_folder(tmp_path, 5, seed=11, min_entries=5, max_entries=30, cwds=[cwd])
    for i, item in enumerate(made):  # modification times decide, not names or headers
        stamp = 1_700_000_000_000_000_000 + (i * 7) % 5 * 1_000_000_000
        os.utime(item.path, ns=(stamp, stamp))
    newest = max(made, key=lambda item: os.stat(item.path).st_mtime_ns)
    long_header = tmp_path / "zz-long-header.jsonl"  # newest, but its header passes 512 bytes
    long_header.write_text(json.dumps({"type": "session", "version": 3, "id": "long", "cwd": "/" + "x" * 600,
                                       "timestamp": "2026-01-02T03:04:05.678Z"}) + "\n")
    (tmp_path / "zz-not-a-session.jsonl").write_text('{"type":"message"}\n')
    old = run_node_script(PROBE, str(pi.modules), "recent", str(tmp_path), cwd)
    assert old["mostRecent"] == old["continued"] == newest.path  # 0.73.1: 512 bytes, no cwd
    probe = run_node_script(PROBE, str(pi15.modules), "recent", str(tmp_path), cwd)
    # pi 1.5.2 finds the long header (it reads up to a MiB) but resumes sessions of cwd only
    assert (probe["mostRecent"], probe["continued"]) == (str(long_header), newest.path)
    assert _jsonl_listing.most_recent_session(tmp_path) == str(long_header)
    with Session.continue_recent(cwd, directory=tmp_path) as session:
        assert session.file == newest.path and len(session) == newest.entries

    empty = tmp_path / "empty"
    with Session.continue_recent(cwd, directory=empty) as session:
        assert session.file is not None and Path(session.file).parent == empty
        assert not empty.exists()  # nothing written before the first append
    root = tmp_path / "root"
    with Session.continue_recent(cwd, root=root) as session:
        session.append_message(UserMessage.of("start"))
    with Session.continue_recent(cwd, root=root) as session:
        assert len(session) == 1  # the session just written is the most recent one


def test_ls_lists_a_folder_and_the_sessions_of_a_cwd(tmp_path: Path, monkeypatch: Any) -> None:
    generate_folder(tmp_path / "flat", 6, seed=2, min_entries=5, max_entries=30, cwds=CWDS)
    runner = CliRunner()
    everything = json.loads(runner.invoke(cli, ["ls", str(tmp_path / "flat"), "--json"]).output)
    assert len(everything) == 6
    web = json.loads(runner.invoke(cli, ["ls", str(tmp_path / "flat"), "--cwd", CWDS[1],
                                         "--json"]).output)
    assert [row["id"] for row in web] == [row["id"] for row in everything if row["cwd"] == CWDS[1]]

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    project = tmp_path / "project"
    project.mkdir()
    with Session.create(cwd=str(project)) as session:
        session.append_message(UserMessage.of("in the project"))
    rows = json.loads(runner.invoke(cli, ["ls", "--cwd", str(project), "--json"]).output)
    assert [row["first_message"] for row in rows] == ["in the project"]


def test_helper_processes_start_only_when_asked(tmp_path: Path, monkeypatch: Any) -> None:
    """The library reads the files itself unless the call or SESSIONTREE_PROCESSES asks for
    helpers; the command asks (and SESSIONTREE_PROCESSES=1 still keeps it to one process). A
    helper here only leaves a mark (its answer is empty, so the files are read by the caller)."""
    folder = tmp_path / "sessions"
    generate_folder(folder, 6, seed=5, min_entries=0, max_entries=20, cwds=CWDS)
    marks = tmp_path / "marks"
    monkeypatch.setattr(_jsonl_listing, "PARALLEL_FILES", 1)
    monkeypatch.setattr(_helpers, "_busy", lambda: 0)  # as on an idle machine
    monkeypatch.setattr(_helpers, "_RUN", f"open({str(marks)!r}, 'a').write('x')")
    monkeypatch.delenv("SESSIONTREE_PROCESSES", raising=False)
    expected = ours(folder, index=False)

    def started(**options: Any) -> bool:
        marks.unlink(missing_ok=True)
        assert ours(folder, index=False, **options) == expected
        return marks.exists()

    def command_started() -> bool:
        marks.unlink(missing_ok=True)
        (folder / INDEX_NAME).unlink(missing_ok=True)  # (every file is read)
        done = CliRunner().invoke(cli, ["ls", str(folder), "--json"])
        assert done.exit_code == 0, done.output
        return marks.exists()

    free = len(os.sched_getaffinity(0)) >= 2
    assert not started()  # a library call: one process
    assert started(processes=2) == free
    monkeypatch.setenv("SESSIONTREE_PROCESSES", "2")
    assert started() == free
    monkeypatch.setenv("SESSIONTREE_PROCESSES", "1")
    assert not started()
    assert not command_started()
    monkeypatch.delenv("SESSIONTREE_PROCESSES")
    assert command_started() == free
    assert _helpers.default_processes == 1  # the command's request ended with it
