"""What the Redis store promises beyond the shared suites (which run over it too): one session
in one slot, appends that land where their caller saw the leaf or not at all, a listing that
never reads entries, addresses that keep passwords out of sight, prefixes, read-only stores,
and copies through one server and a cluster that give back the same bytes."""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
import redis
from redis.crc import key_slot

from sessiontree import Session, UserMessage
from sessiontree.entries import SessionHeader
from sessiontree.messages import now_ms
from sessiontree.errors import (
    ConcurrentModification,
    DuplicateId,
    InvalidLocation,
    ReadOnlyStore,
    SessionLockedError,
    StoreUnavailable,
)
from sessiontree.stores._address import redacted, take_option
from sessiontree.stores.base import LogBehind
from sessiontree.stores.redis import _TRIES, RedisStore, cluster_seeds
from sessiontree.stores.url import open_store, parse_location
from sessiontree.testing.generate import generate_folder
from sessiontree._json import dumps
from sessiontree._scan import Scanner
from sessiontree._time import iso_now, uuid7

from .backends import beside_script, redis_store_url
from .test_storage_cli import run

KINDS = ["redis", "redis-cluster"]


@pytest.fixture(params=KINDS)
def store_url(request: pytest.FixtureRequest) -> str:
    return redis_store_url(request, request.param)


@pytest.fixture
def store(store_url: str) -> RedisStore:
    with RedisStore.from_url(store_url) as opened:
        yield opened


def test_addresses_parse_and_keep_the_session_id() -> None:
    assert parse_location("redis://h:1/2?prefix=app#s-1")[:3] == (
        "redis", "redis://h:1/2?prefix=app", "s-1")
    assert parse_location("rediss+cluster://u:p@a:1,b:2#x")[:3] == (
        "redis", "rediss+cluster://u:p@a:1,b:2", "x")
    assert cluster_seeds("redis+cluster://u:p%23w@a:1,[::1]:2") == [("a", 1), ("::1", 2)]
    with pytest.raises(InvalidLocation):
        cluster_seeds("redis+cluster://a,b:2")
    with pytest.raises(InvalidLocation, match="prefix"):
        RedisStore.from_url("redis://127.0.0.1:1?prefix=a{b}")
    with pytest.raises(InvalidLocation):
        parse_location("redis://h/0#a/b")


def test_a_parameter_of_ours_is_taken_out_the_same_way_for_every_database() -> None:
    """Redis's ``prefix=`` and PostgreSQL's ``schema=`` (one helper): the first one counts, the
    driver's parameters stay as written, and a shown address has no password."""
    assert take_option("redis://h:1/0?socket_keepalive=on&prefix=a%2Eb&prefix=c#s", "prefix") == \
        ("redis://h:1/0?socket_keepalive=on", "a.b")
    assert take_option("postgresql://u@h/db?application_name=my%20app+x&schema=S", "schema") == \
        ("postgresql://u@h/db?application_name=my%20app+x", "S")
    assert take_option("redis://h", "prefix") == ("redis://h", None)
    assert [redacted(u) for u in ("postgresql://:pw@h/db", "redis://u:pw@h?x=1#y")] == \
        ["postgresql://h/db", "redis://u@h?x=1"]


def test_every_key_of_a_session_is_in_its_slot(store: RedisStore) -> None:
    session = Session.create(cwd="/w", store=store)
    session.append_message(UserMessage.of("one"))
    session.set_name("n")
    keys = store.session_keys(session.id)
    slots = {key_slot(key.encode()) for key in keys}
    assert len(slots) == 1
    prefix_keys = [k.decode() for k in _all_keys(store)]
    assert set(k for k in prefix_keys if session.id in k) <= set(keys)
    assert {*store.keys(session.id), store.search_keys(session.id)[1],  # (post: once long)
            store._recent_key(session.id)} <= set(prefix_keys)
    session.close()


_DECLARED_ONLY = """
local real = redis
local declared = {}
for _, key in ipairs(KEYS) do declared[key] = true end
local function checked(call)
  return function(command, ...)
    local args = {...}
    for i, key in ipairs(args) do
      if (i == 1 or command == 'DEL') and not declared[key] then
        error('undeclared key ' .. tostring(key) .. ' in ' .. command)
      end
    end
    return call(command, ...)
  end
end
local redis = setmetatable({call = checked(real.call), pcall = checked(real.pcall)},
                           {__index = real})
"""
"""Put before a script: any key it reads or writes that is not in its KEYS is an error."""


def test_every_key_a_script_touches_is_declared(store: RedisStore) -> None:
    """Each script names in KEYS every key it reads or writes (a cluster refuses any other,
    and a proxy in front of one server routes by them), on one server too: appends, a
    purge's replaced line, a rebuilt search index and tree index, a migration (a rebuild, and
    a version 2 index marked as this version's), searches and a delete, every script run with a guard that fails on an undeclared key. On one server the
    delete and rebuild scripts took the session out of its words' and cwd's sets by names
    made in the script."""
    for name in dir(store):
        if name.endswith("_script"):
            setattr(store, name, store._client.register_script(
                _DECLARED_ONLY + getattr(store, name).script))
    with Session.create(cwd="/w", store=store) as session:
        first = session.append_message(UserMessage.of("the albatross flies south"))
        for n in range(40):  # (some words' postings move from recent to post)
            session.append_message(UserMessage.of(f"the albatross flies {n}"))
        session.set_label(first, "start")
        session.set_name("birds")
    other = Session.create(cwd="/elsewhere", store=store)
    other.append_message(UserMessage.of("a petrel"))
    other.close()
    store.replace_line(session.id, first, session.raw_line(first).replace(b"south", b"north"))
    store._client.hset(store.keys(session.id)[0], "indexed", 1)  # as an earlier version left it
    store._client.hdel(store.keys(session.id)[0], "tree")
    store._client.hset(store.keys(other.id)[0], "indexed", 2)  # (marked as version 3 holds it)
    store._client.delete(f"{store.prefix}:search")
    assert store.migrate() == 2
    store.reindex_search(other.id)
    assert {hit.session_id for hit in store.search("albatross north")} == {session.id}
    with Session(store.open_log(session.id)) as reopened:
        assert reopened.path_ids()[-1] in reopened.path_ids(reopened.leaf_id)
    store.delete(session.id)
    assert [row.id for row in store.list_sessions()] == [other.id]
    assert not store.search("albatross")
    assert not [key for key in _all_keys(store) if session.id.encode() in key]


def test_a_delete_or_rebuild_whose_words_changed_meanwhile_reads_them_again(
        request: pytest.FixtureRequest) -> None:
    """On one server a delete and a rebuilt search index read the session's words before their
    script (which names their sets): a word another writer brings in between sends the script
    round again, so no set keeps the deleted session or misses the rebuilt one."""
    from .test_search import _redis_word_sets

    url = redis_store_url(request, "redis")
    with RedisStore.from_url(url) as store, RedisStore.from_url(url) as other:
        session = Session.create(cwd="/w", store=store)
        entry = session.append_message(UserMessage.of("the albatross"))
        writer = Session(other.open_log(session.id))
        calls = beside_script(store, "_reindex_script", lambda: len(calls) == 1 and
                              other.replace_line(session.id, entry, writer.raw_line(entry)
                                                 .replace(b"albatross", b"petrel")), before=True)
        store.reindex_search(session.id)
        assert len(calls) == 2
        assert _redis_word_sets(store, session.id) == {"the", "petrel"}
        assert [hit.entry_id for hit in store.search("petrel")] == [entry]
        calls = beside_script(store, "_delete_script", lambda: len(calls) == 1 and
                              writer.append_message(UserMessage.of("a fulmar")), before=True)
        store.delete(session.id)
        assert len(calls) == 2
        assert _redis_word_sets(store, session.id) == set()
        assert not [key for key in _all_keys(store) if session.id.encode() in key]
        writer.close()
        session.close()


def test_a_rebuild_of_the_search_index_is_not_overtaken_by_a_replaced_line(
        store: RedisStore, store_url: str) -> None:
    """A line replaced (a purge) between a rebuild's read of the lines and its script sends
    the script round again: the index is built from the new line, not the one read. The
    script checked only the number of lines, and built the index of the line as it was (its
    words' counts here; its purged words too)."""
    from sessiontree.stores import _redis_search as _rs

    session = Session.create(cwd="/w", store=store)
    entry = session.append_message(UserMessage.of("albatross albatross south"))
    with RedisStore.from_url(store_url) as other:
        calls = beside_script(store, "_reindex_script", lambda: len(calls) == 1 and
                              other.replace_line(session.id, entry, session.raw_line(entry)
                                                 .replace(b"albatross albatross", b"albatross")),
                              before=True)
        store.reindex_search(session.id)
    assert len(calls) == 2
    post, recent = store.search_keys(session.id)[0], store._recent_key(session.id)
    postings = (store._client.hget(post, "albatross") or b"") + \
        (store._client.hget(recent, "albatross") or b"")
    assert _rs.decode(postings) == {1: 1}
    session.close()


def _all_keys(store: RedisStore) -> list[bytes]:
    if store.cluster:
        found: list[bytes] = []
        for node in store._client.get_primaries():
            found += store._client.get_redis_connection(node).keys(f"{store.prefix}:*")
        return found
    return list(store._client.keys(f"{store.prefix}:*"))


def test_sessions_spread_over_the_masters(request: pytest.FixtureRequest) -> None:
    with RedisStore.from_url(redis_store_url(request, "redis-cluster")) as store:
        counts: dict[str, int] = {}
        for _ in range(300):
            session_id = store.create(SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/w"))
            node = store._client.get_node_from_key(store.keys(session_id)[0])
            counts[node.name] = counts.get(node.name, 0) + 1
        assert len(counts) == 3 and min(counts.values()) > 50


def test_an_append_lands_under_the_leaf_its_caller_saw(store: RedisStore) -> None:
    writer = Session.create(cwd="/w", store=store)
    root = writer.append_message(UserMessage.of("root"))
    other = Session(store.open_log(writer.id))
    theirs = other.append_message(UserMessage.of("theirs"))
    mine = writer.append_message(UserMessage.of("mine"))  # under root: the leaf it saw
    again = Session(store.open_log(writer.id))
    assert again.entry(mine).parent_id == root and again.entry(theirs).parent_id == root
    assert theirs in writer and len(writer) == len(again) == 3
    assert [e.id for e in store.read(writer.id)] == [root, theirs, mine]
    for s in (writer, other, again):
        s.close()


def test_deleted_or_recreated_sessions_refuse_the_append(store: RedisStore) -> None:
    header = SessionHeader(id=uuid7(), timestamp="2025-01-01T00:00:00.000Z", cwd="/w")
    store.create(header)
    writer = Session(store.open_log(header.id))
    writer.append_message(UserMessage.of("kept"))
    store.delete(header.id)
    with pytest.raises(ConcurrentModification, match="deleted"):
        writer.append_message(UserMessage.of("lost?"))
    store.create(SessionHeader(id=header.id, timestamp="2025-02-02T00:00:00.000Z", cwd="/w"))
    with pytest.raises(ConcurrentModification, match="created again"):
        writer.append_message(UserMessage.of("lost?"))
    assert list(store.read(header.id)) == []
    with pytest.raises(DuplicateId):
        store.create(header)
    writer.close()


def test_ids_never_repeat_and_a_retried_batch_is_stored_once(store: RedisStore) -> None:
    session_id = store.create(SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/w"))
    entry = {"type": "message", "id": "aaaa0001", "parentId": None,
             "timestamp": "2025-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": "hi", "timestamp": 1}}
    log = store.open_log(session_id)
    raw = dumps(entry)
    record = Scanner(None).entry_record(raw, 0)
    assert store._appended(session_id, "append", log.header_line, [raw], [record]) == 1
    # the same batch again (a retry after a lost reply): stored once
    assert store._appended(session_id, "append", log.header_line, [raw], [record]) == 1
    changed = dumps({**entry, "message": {"role": "user", "content": "other"}})
    with pytest.raises(DuplicateId, match="aaaa0001"):
        store._appended(session_id, "append", log.header_line, [changed],
                        [Scanner(None).entry_record(changed, 0)])
    assert [e.id for e in store.read(session_id)] == ["aaaa0001"]


def test_eight_writers_on_one_session_lose_nothing(store: RedisStore) -> None:
    first = Session.create(cwd="/w", store=store)
    first.append_message(UserMessage.of("start"))
    made: list[str] = []
    lock = threading.Lock()

    def write(k: int) -> None:
        with Session(store.open_log(first.id)) as mine:
            for i in range(25):
                entry = mine.append_message(UserMessage.of(f"w{k} {i}"))
                with lock:
                    made.append(entry)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = [e.id for e in store.read(first.id)]
    assert len(stored) == len(set(stored)) == 201 and set(made) <= set(stored)
    listing = store.list_sessions()[0]
    assert (listing.entry_count, listing.message_count) == (201, 201)
    first.close()


def test_the_listing_reads_no_entry(store: RedisStore) -> None:
    sessions = []
    for k, cwd in enumerate(["/a", "/b", "/a"]):
        s = Session.create(cwd=cwd, store=store)
        s.append_message(UserMessage.of(f"first {k}"))
        s.append_message(UserMessage.of(f"second {k}"))
        s.set_name(f"name {k}")
        sessions.append(s)
    for s in sessions:  # the entries go: a listing that read them would change
        store._client.delete(*store.keys(s.id)[1:3])
    rows = store.list_sessions()
    assert [r.id for r in rows] == [s.id for s in reversed(sessions)]
    assert [(r.name, r.first_message, r.message_count, r.entry_count) for r in rows] == [
        (f"name {k}", f"first {k}", 2, 3) for k in (2, 1, 0)]
    assert [r.id for r in store.list_sessions(cwd="/a")] == [sessions[2].id, sessions[0].id]
    assert [r.id for r in store.list_sessions(limit=1)] == [sessions[2].id]
    for s in sessions:
        s.close()


def said(text: str, ms: int) -> UserMessage:
    """A user message of a given time (what a session's place in the listing follows)."""
    return msgspec.structs.replace(UserMessage.of(text), timestamp=ms)


def test_a_writer_that_dies_before_the_listing_leaves_a_stale_order(store_url: str) -> None:
    with RedisStore.from_url(store_url) as store:
        start = now_ms()
        old = Session.create(cwd="/w", store=store)
        old.append_message(said("old", start))
        new = Session.create(cwd="/w", store=store)
        new.append_message(said("new", start + 10_000))
        index = f"{store.prefix}:sessions"
        score = store._client.zscore(index, old.id)
        old.append_message(said("latest", start + 20_000))
        store._client.zadd(index, {old.id: score})  # as if the writer died before the listing
        rows = store.list_sessions()
        assert rows[0].id == old.id and rows[0].message_count == 2  # every row is read whole
        assert [r.id for r in store.list_sessions(limit=1)] == [new.id]  # the order is stale
        old.close()
        new.close()
    with Session.open(f"{store_url}#{old.id}") as again:  # the next writer's append puts it right
        again.append_message(said("again", start + 20_001))
    with RedisStore.from_url(store_url) as reader:
        assert [r.id for r in reader.list_sessions(limit=1)] == [old.id]


def test_back_to_back_appends_on_a_cluster_are_one_script_and_the_listing_stays_exact(
        request: pytest.FixtureRequest) -> None:
    with RedisStore.from_url(redis_store_url(request, "redis-cluster")) as store:
        start = now_ms() + 10_000  # after the sessions' creation, which places them
        first, second = (Session.create(cwd="/l", store=store) for _ in range(2))
        first.append_message(said("first", start))
        second.append_message(said("second", start + 300))
        for i in range(20):  # within the lag of its last place: no ZADD
            first.append_message(said(f"first {i}", start + 400 + i))
        keys = [f"{store.prefix}:sessions", store._index_keys("/l")[-1]]
        assert [store._client.zscore(key, first.id) for key in keys] == [start, start]
        assert [r.id for r in store.list_sessions(limit=1)] == [first.id]  # yet in order
        assert [r.id for r in store.list_sessions(cwd="/l", limit=1)] == [first.id]
        assert [r.id for r in store.list_sessions(limit=2)] == [first.id, second.id]
        first.append_message(said("later", start + 1_500))  # past the lag: placed again
        assert [store._client.zscore(key, first.id) for key in keys] == [start + 1_500] * 2
        first.close()
        second.close()


def test_prefixes_keep_applications_apart(store_url: str) -> None:
    base = store_url.partition("?")[0]
    with RedisStore.from_url(base, prefix=f"a{uuid.uuid4().hex[:8]}") as one, \
            RedisStore.from_url(base, prefix=f"b{uuid.uuid4().hex[:8]}") as two:
        session = Session.create(cwd="/w", store=one)
        session.append_message(UserMessage.of("one's"))
        assert one.session_ids() == [session.id] and two.session_ids() == []
        assert two.list_sessions() == []
        session.close()


def test_a_read_only_store_refuses_every_write(store_url: str) -> None:
    with RedisStore.from_url(store_url) as store:
        session = Session.create(cwd="/w", store=store)
        session.append_message(UserMessage.of("kept"))
        session.close()
    with open_store(store_url, read_only=True) as store:
        reader = Session(store.open_log(session.id))
        assert len(reader) == 1
        for write in (lambda: reader.append_message(UserMessage.of("no")),
                      lambda: store.delete(session.id),
                      lambda: store.create(SessionHeader(id=uuid7(), timestamp=iso_now(),
                                                         cwd="/w")),
                      lambda: store.import_lines(b'{"type":"session","id":"x1"}', [])):
            with pytest.raises(ReadOnlyStore):
                write()
        assert store.session_ids() == [session.id] and len(list(store.read(session.id))) == 1


def test_passwords_never_show(tmp_path: Path,
                              caplog: pytest.LogCaptureFixture) -> None:
    from .servers import RedisServer

    secret = "s3cr3t-pa55"
    server = RedisServer(tmp_path, extra=["--requirepass", secret])
    try:
        caplog.set_level(logging.DEBUG)
        url = f"redis://default:{secret}@127.0.0.1:{server.port}/0?prefix=p"
        with RedisStore.from_url(url) as store:
            session = Session.create(cwd="/w", store=store)
            session.append_message(UserMessage.of("hi"))
            assert secret not in store.url and secret not in (session.url or "")
            assert store.url.startswith(f"redis://default@127.0.0.1:{server.port}/0")
            session.close()
        with pytest.raises(StoreUnavailable) as refused:
            RedisStore.from_url(url.replace(secret, "wrong-" + secret))
        assert secret not in str(refused.value) and "credentials" in str(refused.value)
        admin = redis.Redis(port=server.port, password=secret)
        admin.execute_command("ACL", "SETUSER", "reader", "on", f">{secret}", "~*", "+@read",
                              "+ping", "+evalsha", "+eval", "+script")
        admin.close()
        reader_url = f"redis://reader:{secret}@127.0.0.1:{server.port}/0?prefix=p"
        with RedisStore.from_url(reader_url) as store:  # the server refuses its writes
            assert store.session_ids() == [session.id]
            with pytest.raises(ReadOnlyStore, match="refused a write") as refused_write:
                Session(store.open_log(session.id)).append_message(UserMessage.of("no"))
            assert secret not in str(refused_write.value)
        server.kill()
        with pytest.raises(StoreUnavailable) as down:
            RedisStore.from_url(url, timeout=1)
        assert secret not in str(down.value)
        assert secret not in caplog.text
        assert secret not in redacted(f"rediss+cluster://u:{secret}@a:1,b:2")
    finally:
        server.stop()


def test_durable_appends_wait_for_a_replica(request: pytest.FixtureRequest) -> None:
    with RedisStore.from_url(redis_store_url(request, "redis-cluster"), durable=True) as store:
        session = Session.create(cwd="/w", store=store)
        session.append_message(UserMessage.of("on two machines"))
        session.close()
    # one server has no replica: a durable append says so, and stays retryable
    with RedisStore.from_url(redis_store_url(request, "redis"), durable=True,
                             timeout=0.2) as alone:
        session = Session.create(cwd="/w", store=alone)
        with pytest.raises(StoreUnavailable, match="replica"):
            session.append_message(UserMessage.of("on one"))
        session.close()


def test_copy_through_one_server_and_a_cluster_gives_back_the_same_files(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    made = generate_folder(tmp_path / "pi", 4, seed=9, min_entries=20, max_entries=300)
    single, cluster = redis_store_url(request, "redis"), redis_store_url(request, "redis-cluster")
    code, out, err = run("copy", str(tmp_path / "pi"), single)
    assert code == 0 and "copied 4 session(s)" in out, err
    assert run("copy", single, cluster)[0] == 0
    back = tmp_path / "back"
    assert run("copy", cluster, str(back))[0] == 0
    for session in made:
        original = Path(session.path)
        [returned] = back.rglob(original.name)  # the folder layout is the store's choice
        assert returned.read_bytes() == original.read_bytes()
    code, out, _ = run("copy", str(tmp_path / "pi"), cluster)
    assert code == 0 and "copied 0 session(s)" in out and "4 already there" in out


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    from .servers import RedisServer, ServerFailed

    with pytest.raises(ServerFailed, match="no-such-directive"):
        RedisServer(tmp_path, extra=["--no-such-directive", "1"])


def test_an_overtaken_append_is_refused_and_a_dead_writer_blocks_nobody(store: RedisStore) -> None:
    session = Session.create(cwd="/w", store=store)
    root = session.append_message(UserMessage.of("root"))
    holder = store.open_log(session.id)
    assert holder.begin_append() is None  # takes nothing: a writer dying here blocks nobody
    other = Session(store.open_log(session.id))
    kept = other.append_message(UserMessage.of("not held up"))
    line = dumps({"type": "message", "id": "late0001", "parentId": root,
                  "timestamp": iso_now(), "message": {"role": "user", "content": "late"}})
    with pytest.raises(LogBehind):  # overtaken: nothing written, the new line read in
        holder.write([line], None)
    fresh = holder.begin_append()
    assert fresh is not None and [r.id for r in fresh.records] == [kept]
    assert [e.id for e in store.read(session.id)] == [root, kept]
    holder.write([line], None)  # now it has read everything: stored
    assert [e.id for e in store.read(session.id)] == [root, kept, "late0001"]
    session.close()
    other.close()


def test_an_append_overtaken_for_lock_timeout_gives_up(store_url: str) -> None:
    with RedisStore.from_url(store_url, lock_timeout=0.0) as store:
        session = Session.create(cwd="/w", store=store)
        session.append_message(UserMessage.of("root"))
        other = Session(store.open_log(session.id))
        other.append_message(UserMessage.of("first"))
        with pytest.raises(SessionLockedError, match="kept appending first"):
            session.append_message(UserMessage.of("gives up at once"))
        assert len(Session(store.open_log(session.id))) == 2
        session.close()
        other.close()


def test_append_at_last_is_a_compare_and_append_across_handles(store: RedisStore) -> None:
    first = Session.create(cwd="/w", store=store)
    first.append_message(UserMessage.of("start"))
    second = Session(store.open_log(first.id))
    later = first.append_message(UserMessage.of("from the first handle"))
    seen: list[str | None] = []

    def plan(leaf: str | None) -> tuple[str | None, list[dict[str, object]]]:
        seen.append(leaf)
        return leaf, [{"type": "custom", "customType": "pop", "data": {}}]

    (made,) = second.append_at_last(plan)
    # planned again once the append found the first handle's entry: only that plan written
    assert seen[-1] == later and second.entry(made).parent_id == later
    first.close()
    second.close()


def test_rediss_speaks_tls_and_refuses_an_unknown_server(tmp_path: Path) -> None:
    from .servers import RedisServer

    server = RedisServer(tmp_path, tls=True)
    try:
        url = f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={server.ca}&prefix=tls"
        with RedisStore.from_url(url) as store:
            session = Session.create(cwd="/w", store=store)
            session.append_message(UserMessage.of("over TLS"))
            session.close()
        with open_store(url, read_only=True) as store:
            assert [e.id for e in store.read(session.id)] == [session.leaf_id]
        with pytest.raises(StoreUnavailable):  # a certificate no CA we trust signed
            RedisStore.from_url(f"rediss://127.0.0.1:{server.port}/0", timeout=2)
        with pytest.raises(StoreUnavailable):  # plain text to a TLS port
            RedisStore.from_url(f"redis://127.0.0.1:{server.port}/0", timeout=1)
    finally:
        server.stop()


def _as_stored_before_the_tree_index(store: RedisStore, session_id: str) -> None:
    """Make a session look as the previous version stored it: no tree index, its lock key."""
    meta = store.keys(session_id)[0]
    store._client.hdel(meta, "tree")
    store._client.delete(*store.tree_keys(session_id))
    store._client.set(store.session_keys(session_id)[-1], "token", px=60_000)


def test_a_purge_or_a_rebuild_overtaken_by_every_append_gives_up(
        request: pytest.FixtureRequest) -> None:
    """A purge and the rebuilds of a session's search and tree index read the session, then
    run a script that refuses if an append came in between; appends before every script make
    each give up after a bounded number of tries with ``ConcurrentModification`` (nothing
    written: retrying is safe), not read every line again and again."""
    url = redis_store_url(request, "redis")
    with RedisStore.from_url(url) as store, RedisStore.from_url(url) as other:
        session = Session.create(cwd="/w", store=store)
        entry = session.append_message(UserMessage.of("the albatross flies"))
        writer = Session(other.open_log(session.id))

        def again() -> None:
            writer.append_message(UserMessage.of("another albatross"))

        line = session.raw_line(entry)
        for name, call in [
                ("_replace_script", lambda: store.replace_line(
                    session.id, entry, line.replace(b"albatross", b"petrel"))),
                ("_reindex_script", lambda: store.reindex_search(session.id)),
                ("_index_tree_script", lambda: store.index_tree(session.id))]:
            if name == "_index_tree_script":
                _as_stored_before_the_tree_index(store, session.id)
            calls = beside_script(store, name, again, before=True)
            with pytest.raises(ConcurrentModification, match="kept changing"):
                call()
            assert len(calls) == _TRIES, name
        assert store.export_lines(session.id)[1].__next__() == line
        assert store.search("petrel") == []
        assert store._client.hget(store.keys(session.id)[0], "tree") is None
        writer.close()
        session.close()


def _calls(store: RedisStore, command: str) -> int:
    """How often the store's server ran ``command`` since its statistics were reset (commands
    a script runs count too)."""
    return int(store._client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_store_asks_for_the_search_version_until_it_knows_it(
        request: pytest.FixtureRequest) -> None:
    """A store asks whether every session has this version's search index (a ``GET``) until
    it knows: once it is marked, neither creates nor searches ask again (on one server each new
    session's append script reads the mark itself: a ``GET`` in the script, no round trip); in
    a store holding sessions stored before it, creates ask once (only ``migrate`` marks it)
    and searches ask each time (another process may migrate it) until they find it
    migrated."""
    url = redis_store_url(request, "redis")
    with RedisStore.from_url(url) as store:
        store._client.config_resetstat()
        for _ in range(3):
            with Session.create(cwd="/w", store=store) as session:
                session.append_message(UserMessage.of("the albatross"))
        assert len(store.search("albatross")) == len(store.search("albatross")) == 3
        assert _calls(store, "get") == 2 + 3  # (the read, the marking script's, the appends')
    with RedisStore.from_url(url) as store:
        store._client.delete(f"{store.prefix}:search")  # as a store before the index left it
        store._client.config_resetstat()
        for _ in range(3):
            store.create(SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/w"))
        assert _calls(store, "get") == 1 + 3
        for _ in range(2):
            with pytest.raises(InvalidLocation, match="migrate"):
                store.search("albatross")
        assert _calls(store, "get") == 6
        store.migrate()  # (which reads the mark, and marks it in a script that reads it
        assert len(store.search("albatross")) == len(store.search("albatross")) == 3
        assert _calls(store, "get") == 8  # again: a newer one is refused, or kept)


def test_the_first_session_of_an_empty_store_marks_its_search_version(
        request: pytest.FixtureRequest) -> None:
    """An empty store an earlier version marked (``2``, or one this code does not search) is
    marked with this version by its first session, so every process searches it."""
    url = redis_store_url(request, "redis")
    for earlier in (b"2", b"1"):
        with RedisStore.from_url(url) as store, RedisStore.from_url(url) as other:
            for session_id in store.session_ids():
                store.delete(session_id)
            store._client.set(f"{store.prefix}:search", earlier)
            with Session.create(cwd="/w", store=store) as session:
                entry = session.append_message(UserMessage.of("the albatross"))
            assert store._client.get(f"{store.prefix}:search") == b"3"
            assert [hit.entry_id for hit in other.search("albatross")] == [entry]


def test_migrate_carries_on_past_a_session_that_keeps_changing(
        request: pytest.FixtureRequest) -> None:
    """A session whose search index cannot be built for appends coming each time is skipped:
    ``migrate`` migrates the others, says which it skipped and to run it again, and leaves the
    store unmarked; the run after marks it."""
    url = redis_store_url(request, "redis")
    with RedisStore.from_url(url) as store, RedisStore.from_url(url) as other:
        sessions = [Session.create(cwd="/w", store=store) for _ in range(3)]
        for session in sessions:
            session.append_message(UserMessage.of("the albatross"))
            store._client.hset(store.keys(session.id)[0], "indexed", 1)
            session.close()
        store._client.delete(f"{store.prefix}:search")
        busy = sessions[1].id
        writer = Session(other.open_log(busy))
        beside_script(store, "_reindex_script",
                      lambda: writer.append_message(UserMessage.of("another albatross")),
                      before=True)
        with pytest.raises(ConcurrentModification, match=f"2 session.*skipped.*{busy}.*again"):
            store.migrate()
        assert [store._client.hget(store.keys(s.id)[0], "indexed") for s in sessions] == [
            b"3", b"1", b"3"]
        assert store._client.get(f"{store.prefix}:search") is None
        writer.close()
    with RedisStore.from_url(url) as store:
        assert store.migrate() == 1
        assert store._client.get(f"{store.prefix}:search") == b"3"
        assert {hit.session_id for hit in store.search("albatross")} == {s.id for s in sessions}


def test_migrate_carries_on_past_a_session_deleted_meanwhile(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session deleted while ``migrate`` runs (before its search index or its tree index is
    built) is passed over and named in a MigrationWarning (the command prints it); the
    others are migrated and the store is marked. migrate raised SessionNotFound and stopped."""
    from sessiontree.stores.redis import MigrationWarning

    def unmigrated(sessions: list[Session]) -> None:  # as sessions stored before the indexes
        for session in sessions:
            store._client.hset(store.keys(session.id)[0], "indexed", 1)
            store._client.hdel(store.keys(session.id)[0], "tree")
        store._client.delete(f"{store.prefix}:search")

    with RedisStore.from_url(store_url) as store, RedisStore.from_url(store_url) as other:
        sessions = [Session.create(cwd="/w", store=store) for _ in range(4)]
        for session in sessions:
            session.append_message(UserMessage.of("the albatross"))
            session.close()
        unmigrated(sessions)
        gone = sessions[1].id
        calls = beside_script(store, "_reindex_script",
                              lambda: len(calls) == 2 and other.delete(gone), before=True)
        with pytest.warns(MigrationWarning, match=f"1 session.*deleted.*passed over: {gone}$"):
            assert store.migrate() == 3
        assert store._client.get(f"{store.prefix}:search") == b"3"
        kept = [session.id for session in sessions if session.id != gone]
        assert {hit.session_id for hit in store.search("albatross")} == set(kept)

        unmigrated([sessions[0], sessions[2]])
        index_tree = RedisStore.index_tree

        def deleted_first(self: RedisStore, session_id: str) -> bool:
            if session_id == kept[1]:
                other.delete(session_id)
            return index_tree(self, session_id)

        monkeypatch.setattr(RedisStore, "index_tree", deleted_first)
        code, out, err = run("migrate", store_url)
        assert code == 0 and ": 1 session(s) given the tree index" in out
        assert f"warning: {store.url}: 1 session(s) deleted while the store was migrated, " \
            f"passed over: {kept[1]}\n" in err
        assert store._client.get(f"{store.prefix}:search") == b"3"
        assert {hit.session_id for hit in store.search("albatross")} == {kept[0], kept[2]}


def test_a_search_index_of_a_newer_version_is_neither_migrated_nor_searched(
        store: RedisStore, store_url: str) -> None:
    """A store a later sessiontree marked with a newer search index version, or a session it
    indexed so, is refused by ``migrate`` (and the command) and by a search
    (UnsupportedVersion naming the store or session and both versions) and left as it is;
    migrate rebuilt such sessions as version 3 and marked the store 3, and a search said the
    store was older and to migrate it."""
    from sessiontree import UnsupportedVersion

    with Session.create(cwd="/w", store=store) as session:
        session.append_message(UserMessage.of("the albatross"))
    meta = store.keys(session.id)[0]
    mark = f"{store.prefix}:search"
    store._client.set(mark, 4)
    store._client.hset(meta, "indexed", 4)
    before = store._client.hgetall(meta)
    said = "search index version 4, newer than this sessiontree knows (3)"
    with RedisStore.from_url(store_url) as fresh:
        with pytest.raises(UnsupportedVersion, match=re.escape(f"{store.url}: {said}")):
            fresh.migrate()
        with pytest.raises(UnsupportedVersion, match=re.escape(f"{store.url}: {said}")):
            fresh.search("albatross")
    code, out, err = run("migrate", store_url)
    assert code == 1 and not out and f"{store.url}: {said}" in err
    store._client.delete(mark)  # (a later version migrating it: the session marked first)
    with pytest.raises(UnsupportedVersion,
                       match=re.escape(f"{store.session_url(session.id)}: {said}")):
        store.migrate()
    assert store._client.get(mark) is None and store._client.hgetall(meta) == before


def test_an_append_puts_the_session_in_the_sets_of_its_new_words_alone(
        request: pytest.FixtureRequest) -> None:
    """On one server the append script adds the session to the sets of the words new to it,
    not to those of every word of the entry."""
    url = redis_store_url(request, "redis")
    with RedisStore.from_url(url) as store, Session.create(cwd="/w", store=store) as session:
        session.append_message(UserMessage.of("the albatross flies over the sea"))
        store._client.config_resetstat()
        session.append_message(UserMessage.of("over the sea the albatross flies"))
        assert _calls(store, "sadd") == 0
        session.append_message(UserMessage.of("the petrel flies over the sea"))
        assert _calls(store, "sadd") == 1
        assert [h.entry_id for h in store.search("petrel")] == [session.leaf_id]


def _contexts(session: Session, leaves: list[str]) -> list[object]:
    return [session.build_context(leaf).to_builtins() for leaf in leaves]


def test_a_session_opens_by_its_tree_index_and_builds_the_files_contexts(
        store: RedisStore, tmp_path: Path) -> None:
    from sessiontree.stores.redis import RedisTreeLog
    from sessiontree.testing.generate import generate_session

    made = generate_session(tmp_path / "s.jsonl", 1500, seed=5, branch_every=150,
                            compact_every=400)
    with Session.open(made.path) as original:
        lines = Path(made.path).read_bytes().splitlines()
        session_id = store.import_lines(lines[0], lines[1:])
        leaves = list(original.leaves())
        labelled = [e.id for e in original.entries() if original.label(e.id)]
        log = store.open_log(session_id)
        assert isinstance(log, RedisTreeLog)  # nothing but the head read on open
        with Session(log) as stored:
            assert stored.leaf_id == original.leaf_id and stored.name == original.name
            assert _contexts(stored, leaves) == _contexts(original, leaves)
            assert [stored.label(i) for i in labelled] == [original.label(i) for i in labelled]
            assert [stored.path_ids(leaf) for leaf in leaves] == \
                [original.path_ids(leaf) for leaf in leaves]
            # an append and a branch keep the index: the context is the one a file gives
            stored.checkout(leaves[0])
            added = stored.append_message(UserMessage.of("on the first branch"))
            stored.set_label(added, "here")
        original.checkout(leaves[0])
        original.append_message(UserMessage.of("on the first branch"))
        with Session(store.open_log(session_id)) as again:
            assert again.label(added) == "here"
            assert [m["content"] for m in again.build_context(added).to_builtins()["messages"]] \
                == [m["content"] for m in original.build_context().to_builtins()["messages"]]


def test_a_path_read_in_small_chunks_gives_the_files_slices_and_contexts(
        store: RedisStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 16 positions and a tail of 2 of them: a path of hundreds of entries crosses
    many chunk edges, some read with the tail, some one at a time, some by a slice."""
    from sessiontree.stores import redis as redis_store
    from sessiontree.testing.generate import generate_session

    monkeypatch.setattr(redis_store._RedisPath, "chunk", 16)
    monkeypatch.setattr(redis_store, "_TAIL_CHUNKS", 2)
    made = generate_session(tmp_path / "s.jsonl", 900, seed=7, branch_every=120,
                            compact_every=250)
    lines = Path(made.path).read_bytes().splitlines()
    session_id = store.import_lines(lines[0], lines[1:])
    with Session.open(made.path) as original, Session(store.open_log(session_id)) as stored:
        leaves = list(original.leaves())
        assert _contexts(stored, leaves) == _contexts(original, leaves)
        deepest = max(leaves, key=lambda leaf: len(original.path_ids(leaf)))
        ids = original.path_ids(deepest)
        assert len(ids) > 200
        for slicing in (slice(15, 17), slice(100, 180), slice(-40, None), slice(None, None, 7),
                        slice(50, 20), slice(None)):
            path = store.open_log(session_id).path(deepest)  # nothing read yet
            assert [r.id for r in path[slicing]] == ids[slicing]
            assert [path[i].id for i in (0, 16, -1)] == [ids[0], ids[16], ids[-1]]


def test_sessions_stored_before_the_tree_index_keep_working_and_migrate(
        store: RedisStore) -> None:
    from sessiontree.stores.redis import RedisLog, RedisTreeLog

    session = Session.create(cwd="/w", store=store)
    root = session.append_message(UserMessage.of("root"))
    session.append_message(UserMessage.of("first"))
    session.checkout(root)
    session.append_message(UserMessage.of("second"))
    session.set_label(root, "start")
    session.close()
    _as_stored_before_the_tree_index(store, session.id)
    log = store.open_log(session.id)
    assert isinstance(log, RedisLog)  # read whole, as before
    with Session(log) as old:
        kept = old.append_message(UserMessage.of("appended by this version"))
        assert old.label(root) == "start"
        leaves = list(old.leaves())
        expected = _contexts(old, leaves)
    assert store._client.hget(store.keys(session.id)[0], "tree") is None  # still no index
    assert store.migrate() >= 1
    log = store.open_log(session.id)
    assert isinstance(log, RedisTreeLog)
    with Session(log) as migrated:
        assert migrated.leaf_id == kept and migrated.label(root) == "start"
        assert list(migrated.leaves()) == leaves and _contexts(migrated, leaves) == expected
    assert not store.index_tree(session.id) or store.open_log(session.id)  # idempotent
    store.delete(session.id)
    assert not [k for k in _all_keys(store) if session.id.encode() in k]  # the lock key too


def test_the_migrate_command_gives_old_sessions_the_tree_index(
        store: RedisStore, store_url: str) -> None:
    from click.testing import CliRunner

    from sessiontree.cli import cli
    from sessiontree.stores.redis import RedisLog, RedisTreeLog

    ids = []
    for text in ("one", "two"):
        with Session.create(cwd="/w", store=store) as session:
            session.append_message(UserMessage.of(text))
            ids.append(session.id)
        _as_stored_before_the_tree_index(store, session.id)
    assert all(isinstance(store.open_log(i), RedisLog) for i in ids)
    done = CliRunner().invoke(cli, ["migrate", f"{store_url}#{ids[0]}"])
    assert done.exit_code == 0 and "given the tree index" in done.output, done.output
    assert [type(store.open_log(i)) for i in ids] == [RedisTreeLog, RedisLog]
    done = CliRunner().invoke(cli, ["migrate", store_url])
    assert done.exit_code == 0 and "session(s) given the tree index or" in done.output, done.output
    assert all(isinstance(store.open_log(i), RedisTreeLog) for i in ids)
    with Session(store.open_log(ids[1])) as migrated:
        assert [m.content[0].text for m in migrated.build_context().messages] == ["two"]
    for session_id in ids:
        store.delete(session_id)


def test_an_import_with_orphans_is_read_whole(store: RedisStore) -> None:
    from sessiontree.stores.redis import RedisLog

    header = dumps({"type": "session", "version": 3, "id": uuid7(), "timestamp": iso_now(),
                    "cwd": "/w"})
    lines = [dumps({"type": "message", "id": "kid00001", "parentId": "gone0001",
                    "timestamp": iso_now(), "message": {"role": "user", "content": "orphan"}})]
    session_id = store.import_lines(header, lines)
    assert isinstance(store.open_log(session_id), RedisLog)
    assert not store.index_tree(session_id)
    with Session(store.open_log(session_id), warn=False) as session:
        assert session.ids() == ["kid00001"] and [p.kind for p in session.problems] == ["orphan"]


def _failing_late() -> tuple[bytes, list[bytes], str]:
    """A session whose import fails in its third script (an id the first one stored): its
    header, lines and id."""
    session_id = uuid7()
    header = dumps({"type": "session", "version": 3, "id": session_id, "timestamp": iso_now(),
                    "cwd": "/w"})
    lines, parent = [], None
    for n in range(1200):  # three scripts; the last one meets an id the first stored
        entry_id = "dup00000" if n == 1100 else f"e{n:07d}"
        lines.append(dumps({"type": "message", "id": entry_id, "parentId": parent,
                            "timestamp": iso_now(),
                            "message": {"role": "user", "content": f"m {n}"}}))
        parent = entry_id
    lines[3] = lines[3].replace(b'"e0000003"', b'"dup00000"')
    lines[4] = lines[4].replace(b'"e0000003"', b'"dup00000"')
    return header, lines, session_id


def test_an_import_failing_in_a_later_chunk_leaves_nothing(store: RedisStore) -> None:
    header, lines, session_id = _failing_late()
    with pytest.raises(DuplicateId):
        store.import_lines(header, lines)
    assert not [k for k in _all_keys(store) if session_id.encode() in k]  # the first chunks deleted


@contextlib.contextmanager
def _new_words(other: RedisStore, session_id: str) -> Iterator[Callable[[], None]]:
    """A call that appends a message with a word new to the session (through ``other``, another
    writer), so that a delete's script finds the session's words changed; the session is
    deleted after."""
    writers: list[Session] = []
    words = itertools.count()

    def a_new_word() -> None:
        if not writers:
            writers.append(Session(other.open_log(session_id)))
        writers[0].append_message(UserMessage.of(f"fulmar{next(words)}"))

    try:
        yield a_new_word
    finally:
        for writer in writers:
            writer.close()
        other.delete(session_id)


def test_an_import_that_cannot_delete_its_part_says_so(request: pytest.FixtureRequest) -> None:
    """When the delete of a failed import's stored part fails too (here on one server: another
    writer brings a new word before each of the delete's scripts, :data:`_TRIES` times), the
    import raises the delete's error naming the session left partly stored, the import's own
    error its cause. The delete's error was swallowed: the import's DuplicateId alone, the
    part left silently."""
    url = redis_store_url(request, "redis")
    header, lines, session_id = _failing_late()
    with RedisStore.from_url(url) as store, RedisStore.from_url(url) as other, \
            _new_words(other, session_id) as a_new_word:
        calls = beside_script(store, "_delete_script", a_new_word, before=True)
        with pytest.raises(ConcurrentModification, match=re.escape(
                f"{store.session_url(session_id)}: the import failed (") + ".*dup00000.*"
                + re.escape("could not be deleted") + ".*kept changing.*" +
                re.escape(f"session {session_id} is left partly stored")) as raised:
            store.import_lines(header, lines)
        assert isinstance(raised.value.__cause__, DuplicateId) and len(calls) == _TRIES
        assert session_id in store.session_ids()


def test_an_interrupted_import_that_cannot_delete_its_part_stays_an_interrupt(
        request: pytest.FixtureRequest) -> None:
    """A Ctrl-C (KeyboardInterrupt) in an import whose clean-up delete fails too is raised as
    itself, with a note naming the session left partly stored: it was turned into the delete's
    ConcurrentModification (the interrupt its cause), which a caller catching sessiontree's
    errors would take for a failed write and go on."""
    url = redis_store_url(request, "redis")
    header, lines, session_id = _failing_late()
    with RedisStore.from_url(url) as store, RedisStore.from_url(url) as other, \
            _new_words(other, session_id) as a_new_word:
        def interrupted() -> None:
            if len(imports) == 2:  # (the first two scripts stored their lines)
                raise KeyboardInterrupt

        imports = beside_script(store, "_append_script", interrupted)
        deletes = beside_script(store, "_delete_script", a_new_word, before=True)
        with pytest.raises(KeyboardInterrupt) as raised:
            store.import_lines(header, lines)
        assert len(deletes) == _TRIES
        assert any(f"session {session_id} is left partly stored" in note
                   for note in getattr(raised.value, "__notes__", []))
        assert session_id in store.session_ids()


def test_a_rebuild_refuses_a_session_a_later_version_indexed(store: RedisStore) -> None:
    """``reindex_search`` of a session whose search index a later sessiontree wrote (its
    ``indexed`` newer than this code's), and a ``migrate`` whose session is indexed so between
    its read of ``indexed`` and its script (a rebuild, or the mark of a version-2 index), raise
    UnsupportedVersion naming the session and both versions, and write nothing: the scripts
    check ``indexed`` themselves. reindex_search rebuilt it as version 3 (migrate alone
    checked, before its script)."""
    from sessiontree import UnsupportedVersion

    with Session.create(cwd="/w", store=store) as session:
        session.append_message(UserMessage.of("the albatross"))
    meta = store.keys(session.id)[0]
    said = re.escape(f"{store.session_url(session.id)}: search index version 4, newer than "
                     "this sessiontree knows (3)")

    def written() -> list[object]:
        return [store._client.hgetall(meta), store._client.hgetall(store.search_keys(
            session.id)[0]), store._client.get(store.search_keys(session.id)[1]),
            store._client.hgetall(store._recent_key(session.id))]

    store._client.hset(meta, "indexed", 4)
    before = written()
    with pytest.raises(UnsupportedVersion, match=said):
        store.reindex_search(session.id)
    assert written() == before
    for earlier, script in ((b"1", "_reindex_script"), (b"2", "_upgrade_script")):
        store._client.hset(meta, "indexed", earlier)
        store._client.delete(f"{store.prefix}:search")
        calls = beside_script(store, script, lambda: store._client.hset(meta, "indexed", 4),
                              before=True)
        with pytest.raises(UnsupportedVersion, match=said):
            store.migrate()
        assert len(calls) == 1 and written() == before, script
        assert store._client.get(f"{store.prefix}:search") is None


def test_a_rebuild_sees_its_session_deleted_and_imported_again(store: RedisStore) -> None:
    """A session deleted and imported again between a rebuild's read of its lines and its
    script, with as many lines (the same header, other words and parents), sends the rebuild
    round again: the search index and the tree index are built from the lines stored now.
    Both scripts compared the number of lines (and the count of replaced lines, which a
    new session starts again) and built the indexes of the lines as read."""
    from sessiontree.stores import _redis_search as _rs

    header = dumps({"type": "session", "version": 3, "id": uuid7(), "timestamp": iso_now(),
                    "cwd": "/w"})

    def lines(word: str, branched: bool) -> list[bytes]:
        return [dumps({"type": "message", "id": f"e{n:07d}", "timestamp": iso_now(),
                       "parentId": None if n == 0 else "e0000000" if branched else f"e{n - 1:07d}",
                       "message": {"role": "user", "content": f"{word} {n}"}}) for n in range(3)]

    session_id = store.import_lines(header, lines("albatross", False))

    def imported_again() -> None:
        store.delete(session_id)
        store.import_lines(header, lines("petrel", True))

    calls = beside_script(store, "_reindex_script", lambda: len(calls) == 1 and imported_again(),
                          before=True)
    store.reindex_search(session_id)
    assert len(calls) == 2
    post, recent = store.search_keys(session_id)[0], store._recent_key(session_id)
    held = {word: _rs.decode((store._client.hget(post, word) or b"") +
                             (store._client.hget(recent, word) or b""))
            for word in {*store._client.hkeys(post), *store._client.hkeys(recent)}}
    assert held == {b"petrel": {1: 1, 2: 1, 3: 1}, b"0": {1: 1}, b"1": {2: 1}, b"2": {3: 1}}

    store.delete(session_id)
    store.import_lines(header, lines("albatross", False))
    _as_stored_before_the_tree_index(store, session_id)
    calls = beside_script(store, "_index_tree_script",
                          lambda: len(calls) == 1 and imported_again(), before=True)
    assert store.index_tree(session_id)
    assert len(calls) == 2
    with Session(store.open_log(session_id)) as session:
        assert session.path_ids("e0000002") == ["e0000000", "e0000002"]


def test_a_newer_mark_set_while_a_store_marks_its_own_is_kept(store_url: str) -> None:
    """An empty store is marked with this code's search index version at its first write; a
    later sessiontree's mark set between this code's read of the mark and its own is kept, and
    the write refused (the mark is set in a script that checks it). A plain SET overwrote it."""
    from sessiontree import UnsupportedVersion

    with RedisStore.from_url(store_url) as store:
        mark = f"{store.prefix}:search"
        calls = beside_script(store, "_mark_search_script",
                              lambda: store._client.set(mark, 4), before=True)
        header = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/w")
        with pytest.raises(UnsupportedVersion, match="search index version 4"):
            store.create(header)
        assert calls and store._client.get(mark) == b"4"
        assert store.list_sessions() == []


def test_a_newer_mark_set_while_a_store_is_migrated_is_kept(store_url: str) -> None:
    """A migration marks the store as migrated at its end in the script that keeps a later
    sessiontree's mark set meanwhile (and says so): a plain SET downgraded it."""
    from sessiontree import UnsupportedVersion

    with RedisStore.from_url(store_url) as store:
        Session.create(cwd="/w", store=store).append_message(UserMessage.of("the petrel"))
        mark = f"{store.prefix}:search"
        calls = beside_script(store, "_mark_search_script",
                              lambda: store._client.set(mark, 4), before=True)
        with pytest.raises(UnsupportedVersion, match="search index version 4.*mark was kept"):
            store.migrate()
        assert calls and store._client.get(mark) == b"4"


def test_a_newer_search_index_takes_no_append_purge_or_new_session(
        store: RedisStore, store_url: str) -> None:
    """A session a later sessiontree indexed (``indexed`` newer than this code's) refuses an
    append and a replaced line (the append and replace scripts check it), and a store it
    marked newer refuses a new session, created or imported: UnsupportedVersion naming the
    session or store and both versions, nothing written. They went ahead and left the newer
    index without the new lines (or with a purged line's words)."""
    from sessiontree import UnsupportedVersion

    session = Session.create(cwd="/w", store=store)
    entry = session.append_message(UserMessage.of("the albatross"))
    meta = store.keys(session.id)[0]
    store._client.hset(meta, "indexed", 4)
    keys = store.session_keys(session.id)

    def contents() -> list[object]:
        read = {b"hash": store._client.hgetall, b"list": lambda key: store._client.lrange(
            key, 0, -1), b"string": store._client.get, b"none": lambda key: None}
        return [read[store._client.type(key)](key) for key in keys]

    before = contents()
    said = "search index version 4, newer than this sessiontree knows (3)"
    with pytest.raises(UnsupportedVersion,
                       match=re.escape(f"{store.session_url(session.id)}: {said}")):
        session.append_message(UserMessage.of("a petrel"))
    with pytest.raises(UnsupportedVersion,
                       match=re.escape(f"{store.session_url(session.id)}: {said}")):
        store.replace_line(session.id, entry, session.raw_line(entry).replace(b"the", b"an"))
    assert contents() == before
    session.close()

    mark = f"{store.prefix}:search"
    store._client.set(mark, 4)
    header = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/w")
    with RedisStore.from_url(store_url) as fresh:
        for write in (lambda: fresh.create(header), lambda: fresh.import_lines(dumps(header), [])):
            with pytest.raises(UnsupportedVersion, match=re.escape(f"{fresh.url}: {said}")):
                write()
    assert store._client.get(mark) == b"4"
    assert [row.id for row in store.list_sessions()] == [session.id]


def test_a_replaced_label_line_keeps_a_label_written_meanwhile(store: RedisStore,
                                                               store_url: str) -> None:
    """A label entry's line replaced while another writer labels the same entry (an append
    between the replacement's read and its script) or replaces another label line of it goes
    round again: the labels hash ends as the lines leave it. The script set the label the
    lines it read gave, over the later one."""
    with Session.create(cwd="/w", store=store) as session:
        target = session.append_message(UserMessage.of("the albatross"))
        first = session.set_label(target, "one")
        session.set_label(target, "two")
    labels = store.tree_keys(session.id)[1]
    script = store._replace_script
    added: list[str] = []
    with RedisStore.from_url(store_url) as other, Session(other.open_log(session.id)) as writer:
        for meanwhile, label in (
                (lambda: added.append(writer.set_label(target, "three")), "three"),
                (lambda: other.replace_line(session.id, added[0], writer.raw_line(
                    added[0]).replace(b'"three"', b'"trois"')), "trois")):
            calls = beside_script(store, "_replace_script",
                                  lambda: len(calls) == 1 and meanwhile(), before=True)
            with Session(store.open_log(session.id)) as now:
                line = now.raw_line(first)
            store.replace_line(session.id, first, line.replace(b'"one"', b'"un"'))
            store._replace_script = script
            assert len(calls) == 2
            with Session(store.open_log(session.id)) as now:  # (the last label line's label:
                assert _json_label(store._client.hget(labels, target)) == \
                    now.labels()[target][0] == label  # the lines read before gave "three")


def _json_label(value: bytes | None) -> str | None:
    """The label a labels hash value holds (``[label, timestamp]``)."""
    return None if value is None else msgspec.json.decode(value)[0]


def test_a_delete_or_a_tree_rebuild_refuses_a_session_a_later_version_indexed(
        store: RedisStore) -> None:
    """A session whose search index a later sessiontree wrote (``indexed`` newer than this
    code's) is neither deleted nor given a tree index (``index_tree``, which ``migrate`` runs
    for a session whose ``tree`` mark is not this version's): UnsupportedVersion naming the
    session and both versions, every key left as it was (the scripts check ``indexed``, as
    the append, purge and rebuild scripts do). The delete removed the keys this code knows,
    leaving any other of the later version's; the rebuild overwrote its tree index."""
    from sessiontree import UnsupportedVersion

    with Session.create(cwd="/w", store=store) as session:
        session.append_message(UserMessage.of("the albatross"))
    meta, tree = store.keys(session.id)[0], store.tree_keys(session.id)[0]
    store._client.hset(meta, mapping={"indexed": 4, "tree": 2})
    store._client.hset(tree, "1", "a later version's tree index")
    keys = [*store.session_keys(session.id), *store._index_keys("/w"), store._searched_key,
            store.word_key("albatross")]

    def contents() -> list[object]:
        read = {b"hash": store._client.hgetall, b"list": lambda key: store._client.lrange(
            key, 0, -1), b"string": store._client.get, b"none": lambda key: None,
            b"set": store._client.smembers, b"zset": lambda key: store._client.zrange(
                key, 0, -1, withscores=True)}
        return [read[store._client.type(key)](key) for key in keys]

    before = contents()
    said = re.escape(f"{store.session_url(session.id)}: search index version 4, newer than "
                     "this sessiontree knows (3)")
    for write in (lambda: store.delete(session.id), lambda: store.index_tree(session.id)):
        with pytest.raises(UnsupportedVersion, match=said):
            write()
        assert contents() == before
    assert [row.id for row in store.list_sessions()] == [session.id]


def test_a_store_that_saw_its_version_refuses_a_new_session_once_a_later_one_marked_it(
        store: RedisStore) -> None:
    """A store object that knows the store's search version (its first session marked it)
    refuses a new session, created, stored by its first append or imported, once a later
    sessiontree marked the store newer: UnsupportedVersion naming the store and both versions,
    nothing written, the mark kept (on one server the append script reads the mark; on a
    cluster, where it is in another slot, each new session reads it first). The store kept the
    version it saw first and wrote the sessions as that version's."""
    from sessiontree import UnsupportedVersion

    with Session.create(cwd="/w", store=store) as first:
        first.append_message(UserMessage.of("the albatross"))
    mark = f"{store.prefix}:search"
    store._client.set(mark, 4)
    said = re.escape(f"{store.url}: search index version 4, newer than this sessiontree "
                     "knows (3)")

    def header() -> SessionHeader:
        return SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/w")

    def first_append() -> None:
        with Session.create(cwd="/w", store=store) as session:
            session.append_message(UserMessage.of("a petrel"))

    for write in (lambda: store.create(header()), first_append,
                  lambda: store.import_lines(dumps(header()), [])):
        with pytest.raises(UnsupportedVersion, match=said):
            write()
    assert store._client.get(mark) == b"4"
    assert store.session_ids() == [first.id]
    assert [key for key in _all_keys(store) if b"{" in key and first.id.encode() not in key] == []
