"""Every Store backend passes the same tests (DESIGN.md: one conformance suite, memory is the reference)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessiontree import (
    JsonlStore,
    MemoryStore,
    MessageEntry,
    Session,
    SessionHeader,
    SessionNotFound,
    Store,
    UserMessage,
)
from sessiontree._time import iso_now, uuid7
from sessiontree.messages import now_ms


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend: Store = MemoryStore() if request.param == "memory" else JsonlStore(tmp_path / "sessions")
    assert isinstance(backend, Store)
    yield backend
    backend.close()


def header(cwd: str = "/work") -> SessionHeader:
    return SessionHeader(id=uuid7(), timestamp=iso_now(), cwd=cwd)


def sample_entries(text: str = "héllo 😀") -> list[MessageEntry]:
    source = Session.in_memory()
    later = now_ms() + 60_000  # newer than any header written in this test
    source.append_message(UserMessage(content=text, timestamp=later))
    source.append_message(UserMessage(content="second", timestamp=later + 1))
    return [e for e in source.entries() if isinstance(e, MessageEntry)]


def test_round_trip_keeps_order_ids_and_unicode(store: Store) -> None:
    session_id = store.create(header())
    entries = sample_entries()
    store.append(session_id, entries)
    assert list(store.read(session_id)) == entries


def test_appends_accumulate_in_order(store: Store) -> None:
    session_id = store.create(header())
    first, second = sample_entries()
    store.append(session_id, [first])
    store.append(session_id, [second])
    assert [e.id for e in store.read(session_id)] == [first.id, second.id]


def test_listing_and_deletion(store: Store) -> None:
    a = store.create(header("/a"))
    b = store.create(header("/b"))
    store.append(b, sample_entries())
    listing = {item.id: item for item in store.list_sessions()}
    assert set(listing) == {a, b}
    assert listing[b].entry_count == 2 and listing[b].cwd == "/b"
    assert listing[b].first_message == "héllo 😀"
    assert store.list_sessions()[0].id == b  # newest message first
    store.delete(a)
    assert [item.id for item in store.list_sessions()] == [b]
    with pytest.raises(SessionNotFound):
        list(store.read(a))
    with pytest.raises(SessionNotFound):
        store.delete(a)


def test_concurrent_appends_lose_nothing(store: Store) -> None:
    session_id = store.create(header())
    batches = [sample_entries(f"thread {i}") for i in range(8)]
    # distinct ids per thread: the entries are copies with their own ids
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
