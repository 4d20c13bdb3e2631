"""The store conformance suite: what every :class:`~sessiontree.stores.base.Store` must do.

Use it from a test module that provides a ``store`` fixture (a fresh, empty store per test)::

    from sessiontree.testing.conformance import *  # noqa: F403  (collects the tests)

    @pytest.fixture
    def store(tmp_path): ...

Every test here runs against :class:`~sessiontree.MemoryStore` (the reference),
:class:`~sessiontree.JsonlStore`, :class:`~sessiontree.stores.sqlite.SqliteStore` and
:class:`~sessiontree.stores.postgres.PostgresStore` in this repository's own suite. Stores
that open sessions (:func:`~sessiontree.stores.base.has_logs`) are also checked through the
:class:`~sessiontree.Session` API; stores with ``export_lines``/``import_lines`` for exact bytes.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from .._time import iso_now, uuid7
from ..entries import AnyEntry, MessageEntry, SessionHeader
from ..errors import InvalidLocation, SessionNotFound
from ..messages import UserMessage, now_ms
from ..session import Session
from ..stores.base import Store, has_logs

__all__ = [
    "sample_entries",
    "test_a_session_opens_with_the_same_context_and_leaf",
    "test_appends_accumulate_in_order",
    "test_concurrent_appends_lose_nothing",
    "test_context_fills_missing_content_as_pi",
    "test_exact_lines_round_trip",
    "test_invalid_session_ids_are_refused",
    "test_listing_and_deletion",
    "test_missing_sessions_are_typed_errors",
    "test_round_trip_keeps_order_ids_and_unicode",
    "test_store_is_a_context_manager_and_a_store",
]


def _header(cwd: str = "/work") -> SessionHeader:
    return SessionHeader(id=uuid7(), timestamp=iso_now(), cwd=cwd)


def sample_entries(text: str = "héllo 😀 \u2028 \"quoted\"") -> list[MessageEntry]:
    """Two user messages (a chain), newer than any header made before the call."""
    source = Session.in_memory()
    later = now_ms() + 60_000
    source.append_message(UserMessage(content=text, timestamp=later))
    source.append_message(UserMessage(content="second", timestamp=later + 1))
    return [e for e in source.entries() if isinstance(e, MessageEntry)]


def test_store_is_a_context_manager_and_a_store(store: Any) -> None:
    assert isinstance(store, Store)
    with store as entered:
        assert entered is store


def test_round_trip_keeps_order_ids_and_unicode(store: Store) -> None:
    session_id = store.create(_header())
    entries = sample_entries()
    store.append(session_id, entries)
    assert list(store.read(session_id)) == entries


def test_appends_accumulate_in_order(store: Store) -> None:
    session_id = store.create(_header())
    first, second = sample_entries()
    store.append(session_id, [first])
    store.append(session_id, [second])
    assert [e.id for e in store.read(session_id)] == [first.id, second.id]


def test_listing_and_deletion(store: Store) -> None:
    a = store.create(_header("/a"))
    b = store.create(_header("/b"))
    store.append(b, sample_entries())
    listing = {item.id: item for item in store.list_sessions()}
    assert set(listing) == {a, b}
    assert listing[b].entry_count == 2 and listing[b].cwd == "/b"
    assert listing[b].message_count == 2
    assert listing[b].first_message.startswith("héllo 😀")
    assert listing[a].entry_count == 0 and listing[a].first_message == "(no messages)"
    assert store.list_sessions()[0].id == b  # newest message first
    store.delete(a)
    assert [item.id for item in store.list_sessions()] == [b]
    with pytest.raises(SessionNotFound):
        list(store.read(a))
    with pytest.raises(SessionNotFound):
        store.delete(a)


def test_missing_sessions_are_typed_errors(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        list(store.read("0000-no-such-session"))
    with pytest.raises(SessionNotFound):
        store.append("0000-no-such-session", sample_entries())


def test_invalid_session_ids_are_refused(store: Store) -> None:
    if not has_logs(store):
        pytest.skip("the store does not open sessions")
    for bad in ("../escape", "a/b", "", ".hidden", "x" * 200, "a\x00b"):
        with pytest.raises(InvalidLocation):
            store.open_log(bad)
        with pytest.raises(InvalidLocation):
            store.new_log(SessionHeader(id=bad, timestamp=iso_now(), cwd="/w"))


def test_concurrent_appends_lose_nothing(store: Store) -> None:
    session_id = store.create(_header())
    batches = [sample_entries(f"thread {i}") for i in range(8)]
    errors: list[BaseException] = []

    def run(batch: list[MessageEntry]) -> None:
        try:
            store.append(session_id, batch)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = [e.id for e in store.read(session_id)]
    assert sorted(stored) == sorted(e.id for batch in batches for e in batch)


def test_a_session_opens_with_the_same_context_and_leaf(store: Store) -> None:
    if not has_logs(store):
        pytest.skip("the store does not open sessions")
    header = _header("/proj")
    session = Session(store.new_log(header), header=header)
    first = session.append_message(UserMessage.of("question"))
    session.append_message(UserMessage.of("first answer"))
    session.branch(first)
    session.append_message(UserMessage.of("second answer"))
    session.set_label(first, "start")
    session.set_name("  named  ")
    expected = session.build_context().to_json()
    again = Session(store.open_log(header.id))
    try:
        assert again.leaf_id == session.leaf_id and len(again) == len(session) == 5
        assert again.build_context().to_json() == expected
        assert again.label(first) == "start" and again.name == "named"
        assert again.path_ids() == session.path_ids()
        assert sorted(again.leaves()) == sorted(session.leaves())
        assert again.branch_points() == [first]
        entries: list[AnyEntry] = list(again.entries())
        assert [e.id for e in entries] == again.ids() == session.ids()
        listing = again.listing()
        assert (listing.id, listing.name, listing.entry_count) == (header.id, "named", 5)
    finally:
        again.close()
        session.close()


def test_exact_lines_round_trip(store: Any) -> None:
    if not hasattr(store, "import_lines"):
        pytest.skip("the store does not copy exact lines")
    header = _header()
    source = Session.in_memory(cwd="/w")
    source.append_message(UserMessage.of("a\u2028b \\ \"c\" 😀"))
    source.append_entry({"type": "future_kind", "zeta": 1, "alpha": [1.5, 2e-07, None]})
    header_line = b'{"type":"session","version":3,"id":"' + header.id.encode() + \
        b'","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","extra":{"k":1}}'
    lines = [source.raw_line(i) for i in source.ids()]
    assert store.import_lines(header_line, lines) == header.id
    head, body = store.export_lines(header.id)
    assert head == header_line
    assert list(body) == lines


def test_context_fills_missing_content_as_pi(store: Any) -> None:
    """A stored message whose ``content`` is null, missing or null again under a duplicate key
    (the last one wins, as in pi's ``JSON.parse``) gets pi's empty content in the context;
    others keep their bytes, however the backend learns which is which."""
    opens = has_logs(store)  # not a narrowing of ``store``: it copies lines too
    if not hasattr(store, "import_lines") or not opens:
        pytest.skip("the store does not copy exact lines or open sessions")
    from .._json import loads
    from ..context import build_context

    header = _header()
    messages = [b'{"role":"user","content":"x","content":null,"timestamp":1}',
                b'{"role":"assistant","timestamp":2}',
                b'{"role":"toolResult","content":null,"content":[],"timestamp":3}',
                b'{"role":"user","details":{"content":null},"content":[],"timestamp":4}',
                b'{"role":"user","content":null,"timestamp":5}']
    lines = [b'{"type":"message","id":"m%d","parentId":%s,"timestamp":"2025-01-01T00:00:0%d.000Z",'
             b'"message":%s}' % (i, b"null" if i == 0 else b'"m%d"' % (i - 1), i, message)
             for i, message in enumerate(messages)]
    header_line = b'{"type":"session","version":3,"id":"' + header.id.encode() + \
        b'","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}'
    store.import_lines(header_line, lines)
    expected = build_context([loads(line) for line in lines]).to_builtins()["messages"]
    assert [m.get("content") for m in expected] == [[], [], [], [], []]
    with Session(store.open_log(header.id)) as session:
        assert session.build_context("m4").to_builtins()["messages"] == expected
