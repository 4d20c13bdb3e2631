"""``redact`` (a context edit, as pi 1.5.2's ``appendContextEdit`` writes and checks it) and
``--purge`` (the stored content replaced in place) on every backend, checked against pi 1.5.2:
the context it builds is the redacted one, the same before and after the purge, and no stored
byte keeps the secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import EntryNotFound, InvalidEntry, Session, UserMessage, list_sessions
from sessiontree._json import dumps, loads
from sessiontree.cli import cli
from sessiontree.redact import PurgeError, context_edit, purge, redact
from sessiontree.search import search_sessions
from sessiontree.testing.pi import run_node_script

from .backends import Backend, reopen, stored_lines
from .navhelpers import reply, user
from .test_listing import PROBE, pi15  # noqa: F401 - the fixture
from .test_pi_interop import Pi

SECRET = "hunter2-0f9e8d"


def conversation(session: Session) -> dict[str, str]:
    ids = {"ask": session.append_message(UserMessage.of(f"my password is {SECRET}, log in"))}
    ids["answer"] = session.append_message(reply(f"Logged in with {SECRET}."))
    ids["model"] = session.append_model_change("p", "m2")
    ids["next"] = session.append_message(user("thanks"))
    ids["custom"] = session.append_custom_message("note", f"a note with {SECRET}")
    return ids


def pi_contexts(pi: Pi, *files: Path) -> list[list[dict[str, Any]]]:
    return run_node_script(PROBE, str(pi.modules), "context", *map(str, files))  # type: ignore[no-any-return]


def as_file(session: Session, path: Path) -> Path:
    """The session's lines as a file pi can open (a database session exported)."""
    header = json.dumps({"type": "session", "version": 3, "id": session.id,
                         "timestamp": session.header.timestamp, "cwd": session.cwd})
    path.write_bytes(b"".join(line + b"\n" for line in [header.encode(), *stored_lines(session)]))
    return path


def test_redact_appends_pi_1_5s_context_edit(backend: Backend, tmp_path: Path, pi15: Pi) -> None:
    session = backend.create()
    ids = conversation(session)
    edits = [redact(session, ids["ask"]), context_edit(session, ids["answer"], "(reply hidden)"),
             redact(session, ids["custom"], None)]
    lines = [loads(line) for line in stored_lines(session)[-3:]]
    assert [list(line) for line in lines] == [["type", "id", "parentId", "timestamp", "targetId",
                                               "replacement"]] * 3
    assert [line["id"] for line in lines] == edits and session.leaf_id == edits[-1]
    assert [line["replacement"] for line in lines] == [
        {"content": "[redacted]"}, {"content": [{"type": "text", "text": "(reply hidden)"}]}, None]
    # what pi 1.5.2 makes of it: the secret is gone from the context, the note left out
    (context,) = pi_contexts(pi15, as_file(session, tmp_path / "pi.jsonl"))
    assert SECRET not in json.dumps(context) and len(context) == 3
    assert context[0]["content"] == "[redacted]"
    # checked as pi checks an edit
    with pytest.raises(InvalidEntry, match="editable"):
        redact(session, ids["model"])
    with pytest.raises(EntryNotFound):
        redact(session, "nope1234")
    session.branch(ids["answer"])  # (a branch without the custom message)
    session.append_message(user("another way"))
    with pytest.raises(InvalidEntry, match="current branch"):
        redact(session, ids["custom"])
    with pytest.raises(InvalidEntry, match="text or a list"):
        context_edit(session, ids["ask"], {"content": 1})  # type: ignore[arg-type]


def search(word: str, store: str | Path) -> list[Any]:
    return search_sessions(str(store), word)


def secret_bytes(backend: Backend, session: Session) -> list[str]:
    """Where the secret is still stored: files of the folder (sessions, indexes), the SQLite
    database and its log, PostgreSQL's rows."""
    if backend.kind == "postgres":
        with backend.store._reading() as conn:  # noqa: SLF001 - the rows themselves
            rows = conn.execute("SELECT id FROM sessiontree_entries WHERE session_id = %s AND "
                                "position(%s::bytea in line) > 0", (session.id, SECRET.encode()))
            found = [f"entry {row[0]}" for row in rows.fetchall()]
            rows = conn.execute("SELECT session_id FROM sessiontree_sessions WHERE session_id = %s "
                                "AND first_message LIKE %s", (session.id, f"%{SECRET}%"))
            found += [f"listing {row[0]}" for row in rows.fetchall()]
            rows = conn.execute("SELECT seq FROM sessiontree_search WHERE session_id = %s AND "
                                "array_to_string(words, ' ') LIKE %s", (session.id, "%hunter2%"))
            return found + [f"search row {row[0]}" for row in rows.fetchall()]
    if backend.kind.startswith("redis"):
        store = backend.store
        meta, lines, _ = store.keys(session.id)
        found = [f"line {n}" for n, line in enumerate(store._client.lrange(lines, 0, -1))
                 if SECRET.encode() in line]
        found += [f"listing {key!r}" for key, value in store._client.hgetall(meta).items()
                  if SECRET.encode() in value]
        found += [f"search word {word!r}" for word in
                  store._client.hkeys(store.search_keys(session.id)[0]) if word == b"hunter2"]
        return found + [f"search set {key!r}" for key in [store.word_key("hunter2")]
                        if store._client.sismember(key, session.id)]
    return [str(path) for path in backend.tmp_path.rglob("*")
            if path.is_file() and SECRET.encode() in path.read_bytes()]


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres", "redis", "redis-cluster"],
                         indirect=True)
def test_purge_replaces_the_stored_content_in_place(backend: Backend, tmp_path: Path,
                                                    pi15: Pi) -> None:
    session = backend.create()
    ids = conversation(session)
    if session.file is not None:
        list_sessions(Path(session.file).parent)  # an index holding the first user message
        assert search(SECRET.split("-")[0], Path(session.file).parent)  # a search index too
    else:
        assert session.url is not None and search(SECRET.split("-")[0], session.url.split("#")[0])
    assert secret_bytes(backend, session)
    redact(session, ids["ask"])
    redact(session, ids["answer"], "(hidden)")
    redact(session, ids["custom"], None)
    before = stored_lines(session)
    tree = [(n.id, d) for root in session.tree() for n, d in root.walk()]
    context = session.build_context().to_builtins()
    assert SECRET not in str(context["messages"])  # the edits apply
    pi_before = pi_contexts(pi15, as_file(session, tmp_path / "before.jsonl"))
    assert pi_before == [context["messages"]]  # ours is pi's
    location = session.file or session.url
    assert location is not None
    session.close()
    for target in ("ask", "answer", "custom"):
        purge(location, ids[target])
    with reopen(session) as purged:
        after = stored_lines(purged)
        assert [(n.id, d) for root in purged.tree() for n, d in root.walk()] == tree
        changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        assert len(after) == len(before) and changed == [0, 1, 4]
        for old, new in zip(before, after):  # the same entries, the same keys in the same order
            old_value, new_value = loads(old), loads(new)
            assert list(old_value) == list(new_value) and old_value["id"] == new_value["id"]
        assert loads(after[0])["message"]["content"] == "[redacted]"
        assert loads(after[1])["message"]["content"] == [{"type": "text", "text": "(hidden)"}]
        assert loads(after[4])["content"] == ""
        assert purged.build_context().to_builtins() == context
        if purged.file is not None:
            (row,) = list_sessions(Path(purged.file).parent)
            assert row.first_message == "[redacted]"
        else:
            assert purged.listing().first_message == "[redacted]"
        assert pi_contexts(pi15, as_file(purged, tmp_path / "after.jsonl")) == pi_before
        (tmp_path / "before.jsonl").unlink()
        (tmp_path / "after.jsonl").unlink()
        assert secret_bytes(backend, purged) == []
        where = str(Path(purged.file).parent) if purged.file else (purged.url or "").split("#")[0]
        assert [hit for hit in search(SECRET.split("-")[0], where) if hit.session_id == purged.id] == []


def test_purge_needs_an_edit_and_the_command_does_both(tmp_path: Path, pi15: Pi) -> None:
    with Session.create(tmp_path, cwd="/w") as session:
        ids = conversation(session)
        path = session.file
    assert path is not None
    with pytest.raises(PurgeError, match="no context edit"):
        purge(path, ids["ask"])
    before = pi_contexts(pi15, Path(path))
    assert SECRET in json.dumps(before)
    done = CliRunner().invoke(cli, ["redact", path, ids["ask"][:6], "--with", "(pasted by mistake)",
                                    "--purge"])
    assert done.exit_code == 0, done.output
    assert "stored content replaced" in done.output
    (context,) = pi_contexts(pi15, Path(path))
    assert context[0]["content"] == "(pasted by mistake)"
    assert SECRET.encode() not in Path(path).read_bytes().split(b"\n")[1]
    done = CliRunner().invoke(cli, ["redact", path, ids["next"], "--with", "x", "--omit"])
    assert done.exit_code == 2 and "not both" in done.output


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis", "redis-cluster"],
                         indirect=True)
def test_a_replaced_label_line_moves_the_stored_label_with_it(backend: Backend) -> None:
    """A store's label lookup (the SQL label column, Redis's labels hash) follows a replaced
    ``label`` entry's line: a new text, a new target (both targets), a label cleared, and an
    earlier label entry, which the later one still overrides. Each time the lookup agrees with
    the labels read from the lines. A line that is not an entry, or that changes the entry's
    id, parent or type, is refused (InvalidEntry), nothing written. The lookup kept the label
    the line had when it was appended."""
    session = backend.create()
    a = session.append_message(user("first"))
    b = session.append_message(user("second"))
    earlier, later, other = (session.set_label(a, "one"), session.set_label(a, "two"),
                             session.set_label(b, "bee"))
    store, sid = backend.store, session.id
    session.close()

    def relabel(entry: str, **fields: Any) -> None:
        with reopen(session) as now:
            value = loads(now.raw_line(entry))
        value.update(fields)
        store.replace_line(sid, entry, dumps({k: v for k, v in value.items() if v is not None}))

    def labels() -> dict[str, str | None]:
        with reopen(session) as now:
            stored = {e: now._log.label(e) for e in (a, b)}  # the store's lookup
            held = {e: now.labels().get(e) for e in (a, b)}  # the tree's, from the records
            lines = [loads(line) for line in stored_lines(now)]
        last = {e: [x for x in lines if x["type"] == "label" and x["targetId"] == e][-1:]
                for e in (a, b)}
        assert stored == held == {e: (x[0]["label"], x[0]["timestamp"]) if x and x[0].get("label")
                                  else None for e, x in last.items()}
        return {e: found[0] if found else None for e, found in stored.items()}

    assert labels() == {a: "two", b: "bee"}
    relabel(later, label="deux", timestamp="2031-01-01T00:00:00.000Z")
    assert labels() == {a: "deux", b: "bee"}
    relabel(earlier, label="un")  # overridden by the later one still
    assert labels() == {a: "deux", b: "bee"}
    relabel(other, targetId=a, label="moved")  # the last label entry of a now, none for b
    assert labels() == {a: "moved", b: None}
    relabel(other, label=None)  # clears a's label
    assert labels() == {a: None, b: None}
    relabel(other, targetId=b, label="back")
    assert labels() == {a: "deux", b: "back"}
    with reopen(session) as now:
        before = stored_lines(now)
        line = now.raw_line(later)
    for bad in (b"not json", line.replace(later.encode(), b"zzzzzzzz"),
                line.replace(b'"type":"label"', b'"type":"custom"'),
                line.replace(f'"parentId":"{earlier}"'.encode(), f'"parentId":"{a}"'.encode())):
        assert bad != line
        with pytest.raises(InvalidEntry):
            store.replace_line(sid, later, bad)
    with reopen(session) as now:
        assert stored_lines(now) == before
    assert labels() == {a: "deux", b: "back"}
