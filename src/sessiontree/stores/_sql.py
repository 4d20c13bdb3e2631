"""The database stores' shared engine: :class:`SqlStore` (the :class:`~.base.Store` methods,
listing, deletion, pruning, copying lines) and :class:`SqlLog` (one session, an
:class:`~.base.IndexedLog`), over a driver-specific :meth:`SqlStore._transaction`.

Invariants:
* Every statement is one of :mod:`._sql_common`'s, with bound parameters.
* An append runs in one transaction that first locks the session's row (``FOR UPDATE`` in
  PostgreSQL, ``BEGIN IMMEDIATE`` in SQLite), so appenders to one session serialize; it inserts
  the entries and updates the session's row (counts, name, listing fields) before committing.
  The append lands under the parent its line names (the caller's leaf) or raises: the session
  was deleted or re-created meanwhile (:class:`~sessiontree.errors.ConcurrentModification`), or
  an id is taken (:class:`~sessiontree.errors.DuplicateId`); nothing is written then.
* A store opened read-only refuses every write with
  :class:`~sessiontree.errors.ReadOnlyStore` before touching the database.
* Lines are stored and returned as their exact bytes.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime
from typing import Any, TypeVar

from .. import _json
from .._listing import ListingStats, listed_usage
from .._scan import FileRecord, Record
from .._search import (
    CANDIDATES,
    Bounded,
    Candidate,
    SearchHit,
    best_first,
    fts_query,
    parse_query,
    row_bounds,
    since_ms,
)
from .._treelog import StoredEntries
from ..entries import SessionHeader
from ..errors import (
    ConcurrentModification,
    DuplicateId,
    InvalidLocation,
    ReadOnlyStore,
    SessionNotFound,
)
from ._sql_common import (
    Dialect,
    Flow,
    SessionState,
    Step,
    check_schema,
    check_session_id,
    counted_listing,
    envelope_columns,
    envelopes,
    insert_search_flow,
    listing_from_row,
    lock_flow,
    migrate_flow,
    plan_rows,
    record_from_row,
    reindex_flow,
    search_row_id,
    search_rows,
    write_flow,
)
from ._path import ChunkedPath
from .base import LoadResult, LogHead, SessionListing, check_replacement

__all__ = ["LazyPath", "SqlLog", "SqlStore", "drive", "run_step"]

T = TypeVar("T")


def run_step(conn: Any, d: Dialect, step: Step) -> Any:
    """Run one :class:`Step` on a DB-API connection (sqlite3 or psycopg)."""
    sql = d[step.name]
    if step.fetch == "many":
        conn.cursor().executemany(sql, step.params)
        return None
    cursor = conn.execute(sql, step.params) if step.params is not None else conn.execute(sql)
    if step.fetch == "one":
        return cursor.fetchone()
    if step.fetch == "all":
        return cursor.fetchall()
    return None


def drive(flow: Flow[T], conn: Any, d: Dialect) -> T:
    """Run a transaction's steps (see :mod:`._sql_common`) on a connection; its result."""
    result: Any = None
    try:
        while True:
            result = run_step(conn, d, flow.send(result))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]

_READ_AHEAD = 512
_CACHE_LIMIT = 8192


class SqlStore(StoredEntries, ABC):
    """Sessions in a database; subclasses supply the connection and the dialect."""

    dialect: Dialect
    read_only: bool = False
    durable: bool = True

    # -- what a driver supplies -------------------------------------------------------------

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """A connection inside a write transaction: committed on a clean exit, rolled back on
        an exception; errors translated (:meth:`_errors`)."""

    @abstractmethod
    def _reading(self) -> AbstractContextManager[Any]:
        """A connection for reads (each statement sees committed data)."""

    @abstractmethod
    def _errors(self) -> AbstractContextManager[None]:
        """Translate the driver's exceptions into sessiontree's."""

    @property
    @abstractmethod
    def url(self) -> str:
        """The store's address (without a session id)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def _wait_for_change(self, session_id: str, timeout: float) -> None:
        """Block until ``session_id`` may have new entries, or ``timeout`` seconds pass."""
        time.sleep(timeout)

    # -- helpers -------------------------------------------------------------------------------

    def _start(self, connect: Callable[[], object]) -> None:
        """Connect, then set the schema up unless read-only; everything closed on failure."""
        try:
            with self._errors():
                connect()
            if not self.read_only:
                self.setup()
            else:  # not migrated: read as its version is
                self.dialect = self.dialect.reading(self._read_version())
        except BaseException:
            self.close()
            raise

    @abstractmethod
    def setup(self) -> int:
        """Apply the schema migrations the database lacks (idempotent); the version."""

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStore("the store was opened read-only; nothing was written",
                                path=self.url)

    def session_url(self, session_id: str) -> str:
        """The address of one session of this store (``<store url>#<id>``)."""
        return f"{self.url}#{session_id}"

    def _query(self, name: str, params: dict[str, Any]) -> list[Any]:
        with self._errors(), self._reading() as conn:
            return list(conn.execute(self.dialect[name], params).fetchall())

    def _query_many(self, name: str, params: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """One statement run for each of ``params``, the rows of each (a driver that can
        sends them all in one round trip)."""
        with self._errors(), self._reading() as conn:
            return [list(conn.execute(self.dialect[name], one).fetchall()) for one in params]

    def _drive(self, flow: Flow[T], conn: Any, *, last: bool = False) -> T:
        """Run a transaction's steps on a connection of :meth:`_transaction`; its result.
        ``last``: nothing else runs in this transaction (a driver may commit with it; the
        transaction's exit then only releases what is left)."""
        return drive(flow, conn, self.dialect)

    def _migrate(self, conn: Any) -> int:
        """Apply the migrations this database lacks in the open transaction; the version."""
        return self._drive(migrate_flow(self.dialect, self.url), conn)

    def _read_version(self) -> int:
        """The schema version of a database this store does not migrate; the current one when
        it holds no tables yet (its reads say so).

        Raises:
            UnsupportedVersion: a schema newer than this code (:func:`._sql_common.check_schema`).
        """
        try:
            version = self.schema_version()
        except SessionNotFound:
            return len(self.dialect.migrations)
        return check_schema(version, self.dialect, self.url)

    def schema_version(self) -> int:
        """The schema version of the database (0 before :meth:`setup`)."""
        with self._errors(), self._reading() as conn:
            conn.execute(self.dialect["create_migrations"]) if not self.read_only else None
            return int(conn.execute(self.dialect["version"]).fetchone()[0])

    # -- the Store protocol --------------------------------------------------------------------

    def create(self, header: SessionHeader) -> str:
        """Register a new session (its header row); returns its id.

        Raises:
            InvalidLocation: the id is not a valid session id.
            DuplicateId: a session with this id exists.
        """
        self._writable()
        state = SessionState.new(_json.dumps(header), self.dialect)
        with self._transaction() as conn:
            conn.execute(self.dialect["insert_session"], state.params(self.dialect))
        return state.session_id

    def list_sessions(self, *, cwd: str | None = None, limit: int | None = None
                      ) -> list[SessionListing]:
        """Sessions newest first (by latest message), from the sessions table.

        Args:
            cwd: only the sessions of this working directory.
            limit: at most this many.
        """
        params: dict[str, Any] = {"limit": limit if limit is not None else 2**62}
        if cwd is not None:
            params["cwd"] = self.dialect.text(cwd)  # as the column holds it
        rows = self._query("list" if cwd is None else "list_cwd", params)
        return [self._listing(row) for row in rows]

    def _listing(self, row: Sequence[Any]) -> SessionListing:
        """A session's listing row; totals its row does not keep (see
        :func:`._sql_common.listing_from_row`) are counted from its lines."""
        listing = listing_from_row(row, self.session_url(row[0]))
        if listing.usage is not None:
            return listing
        return counted_listing(listing, self._query("all_lines", {"sid": row[0], "seq": 0,
                                                                  "limit": 2**62}))

    def delete(self, session_id: str) -> None:
        """Remove a session and its entries, in one transaction.

        Raises:
            SessionNotFound: no such session.
        """
        self._writable()
        check_session_id(session_id)
        params = {"sid": session_id}
        with self._transaction() as conn:
            if conn.execute(self.dialect["lock"], params).fetchone() is None:
                raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
            for name in ("delete_search", "delete_search_keys", "delete_entries",
                         "delete_session"):
                conn.execute(self.dialect[name], params)

    def replace_line(self, session_id: str, entry_id: str, line: bytes) -> None:
        """Replace the stored line of one entry (same id, parent, type and role: the tree is
        unchanged), with its envelope columns (a label entry's label and target: the label
        lookup follows), recount the session's listing row and build its search rows again,
        in one transaction; then :meth:`_scrub`, so that the database keeps no copy of the old
        line where it can help it.

        Raises:
            SessionNotFound: no such session or entry.
            InvalidEntry: ``line`` is not an entry, or changes its id, parent, type or role
                (:func:`~.base.check_replacement`); nothing was written.
        """
        self._writable()
        check_session_id(session_id)
        d = self.dialect
        params = {"sid": session_id}
        with self._transaction() as conn:
            row = conn.execute(d["lock"], params).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
            key = {**params, "id": d.key(entry_id, entry_id)}
            old = conn.execute(d["entry_line"], key).fetchone()
            if old is None:
                raise SessionNotFound(f"no entry {entry_id} in session {session_id}",
                                      path=self.url)
            record = check_replacement(entry_id, bytes(old[0]), line,
                                       self.session_url(session_id))
            conn.execute(d["replace_line"], {**key, **envelope_columns(record, d), "line": line})
            state = SessionState.from_row(row)
            state.stats = ListingStats()
            listed_usage((bytes(found) for (found,) in conn.execute(
                d["all_lines"], {**params, "seq": 0, "limit": 2**62}).fetchall()), state.stats)
            conn.execute(d["update_session"], state.params(d))
            self._drive(reindex_flow(session_id, d), conn)  # no search row keeps the old text
        self._scrub()

    def _scrub(self) -> None:
        """After a line was replaced: what the database needs so that the old bytes are not
        kept (free pages, old row versions); nothing by default."""

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- more than the protocol ------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        """Every stored session id, sorted."""
        return [row[0] for row in self._query("ids", {})]

    def older_than(self, cutoff_ms: int) -> list[str]:
        """Ids of the sessions whose latest activity is before ``cutoff_ms`` (epoch ms)."""
        return [row[0] for row in self._query("older_than", {"ms": cutoff_ms})]

    def open_log(self, session_id: str) -> SqlLog:
        """The log of a stored session.

        Raises:
            SessionNotFound: no such session.
        """
        log = SqlLog(self, check_session_id(session_id))
        if log.head().header is None:
            raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
        return log

    def new_log(self, header: SessionHeader) -> SqlLog:
        """The log of a new session, stored at its first append."""
        return SqlLog(self, check_session_id(header.id))

    def export_lines(self, session_id: str) -> tuple[bytes, Iterator[bytes]]:
        """A session's header line and its entry lines in append order, as stored.

        Raises:
            SessionNotFound: no such session.
        """
        rows = self._query("head", {"sid": check_session_id(session_id)})
        if not rows:
            raise SessionNotFound(f"no session {session_id} in this store", path=self.url)

        def lines() -> Iterator[bytes]:
            after = 0
            while True:
                batch = self._query("all_lines", {"sid": session_id, "seq": after,
                                                  "limit": 2000})
                for (line,) in batch:
                    yield bytes(line)
                if len(batch) < 2000:
                    return
                after += len(batch)

        return bytes(rows[0][1]), lines()

    def import_lines(self, header_line: bytes, lines: Sequence[bytes]) -> str:
        """Store a whole session (header and entry lines, exact bytes) in one transaction.

        Entries may name a parent that is not there (an orphan, as files may hold); ids must
        be unique.

        Returns:
            The session id.

        Raises:
            DuplicateId: the session or an entry id exists already.
            InvalidEntry: a line that is not an entry, or a bad header.
        """
        self._writable()
        d = self.dialect
        state = SessionState.new(header_line, d)
        records = envelopes(lines)
        # the rows are worked out before the transaction: nothing in them depends on the
        # database (a new session), and an SQLite writer holds the one write lock meanwhile
        first = state.params(d)
        rows = plan_rows(state, lines, records, {}, d, orphans=True)
        found = search_rows(state.session_id, [(row.params["seq"], row.params["line"])
                                               for row in rows], d)
        with self._transaction() as conn:
            conn.execute(d["insert_session"], first)
            for start in range(0, len(rows), 1000):
                conn.cursor().executemany(self.dialect["insert_entry"],
                                          [row.params for row in rows[start:start + 1000]])
            self._drive(insert_search_flow(found, d), conn)
            conn.execute(d["update_session"], state.params(d))
        return state.session_id

    def search(self, query: str, *, cwd: str | None = None, role: str | None = None,
               since: datetime | date | None = None, limit: int = 20) -> list[SearchHit]:
        """Entries of every session, on every branch, holding every word and "phrase" of
        ``query``, best first (:mod:`sessiontree._search`; arguments as
        :meth:`JsonlStore.search <sessiontree.stores.jsonl.JsonlStore.search>`). The index
        is kept in the append's transaction.

        Raises:
            InvalidQuery: no word in ``query``.
        """
        parsed = parse_query(query)
        after = since_ms(since)
        d = self.dialect
        if "search" not in d.statements:
            raise InvalidLocation("this database's search index is older than this version "
                                  f"of sessiontree: run `sessiontree migrate {self.url}` (or "
                                  "open the store once without read_only, which migrates it)",
                                  path=self.url)
        words = parsed.words()
        params: dict[str, Any] = {"since": after, "role": role, "limit": CANDIDATES,
                                  "cwd": d.text(cwd) if cwd is not None else None}
        if d.driver == "postgres":
            found = self._query("search", {**params, "words": words})
        else:
            params.update(fts_query(words), floor=search_row_id(-(2**62)), below=2**63 - 1)
            statement = "search" if len(words) > 1 else "search_word"
            found = self._query(statement, params)
            if len(found) == CANDIDATES:
                # a row's id is never below its time's first (search_row_id): the matches at
                # least as recent as the oldest found that were not found are below the
                # lowest id found and not below the first id of the oldest's time
                oldest = min(row[2] for row in found)
                found += self._query(statement, {
                    **params, "since": max(after, oldest), "floor": search_row_id(oldest),
                    "below": min(row[6] for row in found), "limit": -1})
                found = sorted(found, key=lambda row: (-row[2], row[0], row[1]))[:CANDIDATES]
        at = f"{self.url}#"  # (session_url's, the address worked out once)
        highest = row_bounds(parsed, [row[5] for row in found], [row[4] for row in found])
        rows = [Bounded(sid, at + sid, session_cwd, seq, ms, bound)
                for (sid, seq, ms, session_cwd, *_), bound in zip(found, highest)]

        def read(batch: Sequence[Bounded]) -> list[Candidate]:
            lines = {(sid, seq): bytes(line) for sid, seq, line in self._query("search_lines", {
                "sids": self._array([row.session_id for row in batch]),
                "seqs": self._array([row.place for row in batch])})}
            return [Candidate(row.session_id, row.session, row.cwd, row.place,
                              lines[row.session_id, row.place])
                    for row in batch if (row.session_id, row.place) in lines]

        def on_branch(pairs: Sequence[tuple[Candidate, str]]) -> list[bool]:
            found = self._query_many("on_current_path", [
                {"sid": candidate.session_id, "entry": entry_id, "limit": 2**62}
                for candidate, entry_id in pairs])
            return [bool(rows) for rows in found]

        return best_first(rows, parsed, read, role=role, since=after, limit=limit,
                          on_branch=on_branch)

    def analyze(self) -> None:
        """Bring the database's query planner statistics up to date with the search rows:
        what a copy of many sessions calls when done (PostgreSQL's autovacuum does it later,
        when it runs), so that the first searches are planned for how common each word is;
        nothing to do in SQLite."""
        if "analyze_search" in self.dialect.statements and not self.read_only:
            with self._errors(), self._transaction() as conn:
                conn.execute(self.dialect["analyze_search"])

    def _array(self, values: list[Any]) -> Any:
        """A list for a statement: an array for psycopg, JSON text for SQLite's ``json_each``."""
        return values if self.dialect.driver == "postgres" else json.dumps(values)

    def reindex_search(self, session_id: str) -> None:
        """Build a session's search rows again from its stored lines, in one transaction: what
        a rewrite of its lines (a purge) calls, so that removed text is no longer found."""
        self._writable()
        check_session_id(session_id)
        with self._transaction() as conn:
            self._drive(reindex_flow(session_id, self.dialect), conn)

    def follow(self, session_id: str, after_seq: int, *, poll: float = 0.2,
               stop: Callable[[], bool] = lambda: False) -> Iterator[bytes]:
        """Yield the line of every entry appended after ``after_seq``, as they land, until
        ``stop()`` is true (checked whenever nothing new came)."""
        while True:
            rows = self._query("after_lines", {"sid": session_id, "seq": after_seq,
                                               "limit": 1000})
            for row in rows:
                after_seq = row[0]
                yield bytes(row[11])
            if not rows:
                if stop():
                    return
                self._wait_for_change(session_id, poll)


class SqlLog:
    """One stored session, read by indexed queries and appended to in transactions."""

    def __init__(self, store: SqlStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self._created: str | None = None  # the header time we saw: tells a re-created session
        self._last_seq = 0
        self._count = 0
        self._state: SessionState | None = None
        self._tx: AbstractContextManager[Any] | None = None
        self._conn: Any = None
        self._appending = threading.Lock()
        """Held from :meth:`begin_append` to :meth:`end_append`: one transaction at a time per
        log, whatever threads share it."""
        self._lines: dict[int, bytes] = {}
        self._order: dict[int, int] = {}  # seq -> position in _sequence, for reading ahead
        self._sequence: Sequence[Record] = ()

    @property
    def location(self) -> None:
        return None

    @property
    def url(self) -> str:
        return self.store.session_url(self.session_id)

    @property
    def seen_seq(self) -> int:
        """The append order (``seq``) of the last entry this log has seen: following starts
        after it."""
        return self._last_seq

    def _params(self, **extra: Any) -> dict[str, Any]:
        return {"sid": self.session_id, **extra}

    # -- reading ---------------------------------------------------------------------------------

    def head(self) -> LogHead:
        rows = self.store._query("head", self._params())
        if not rows:
            return LogHead(None, 0, None, None)
        state = SessionState.from_row(rows[0])
        self._created = state.created
        self._last_seq = state.last_seq
        self._count = state.entry_count
        last = None
        if state.last_seq:
            found = self.store._query("by_seq", self._params(seq=state.last_seq))
            last = record_from_row(found[0]) if found else None
        header = _json.loads(state.header)
        return LogHead(header if isinstance(header, dict) else None, state.entry_count, last,
                       state.name)

    def listing(self) -> SessionListing:
        rows = self.store._query("head", self._params())
        if not rows:
            raise SessionNotFound(f"no session {self.session_id} in this store", path=self.url)
        return self.store._listing(rows[0])

    def _remember(self, records: Sequence[Record]) -> None:
        self._sequence = records
        self._order = {rec.line: i for i, rec in enumerate(records)}

    def load(self) -> LoadResult:
        rows = self.store._query("after", self._params(seq=0))
        records = [record_from_row(row) for row in rows]
        self._remember(records)
        head = self.store._query("head", self._params())
        header = _json.loads(head[0][1]) if head else None
        if records:
            self._last_seq = max(self._last_seq, records[-1].line - 1)
        return LoadResult(header if isinstance(header, dict) else None, 1, records, [])

    def record(self, entry_id: str) -> Record | None:
        if not self.store.dialect.holds(entry_id):
            return None  # not an id the database can hold (Dialect.key)
        rows = self.store._query("by_id", self._params(id=entry_id))
        return record_from_row(rows[0]) if rows else None

    def path(self, leaf_id: str) -> Sequence[Record]:
        """The path to ``leaf_id``: a :class:`LazyPath` that reads chunks from the leaf back as
        they are asked for; rows stored before schema version 2 (no depths) are read whole."""
        if not self.store.dialect.holds(leaf_id):
            return []
        leaf = self.store._query("leaf", self._params(id=leaf_id))
        if not leaf:
            return []
        depth, last_compaction, last_thinking, last_model = leaf[0]
        limit = self._count + 1
        if depth is not None:
            segments = self.store._query("chain", self._params(id=leaf_id, limit=limit))
            if all(first is not None for _, first, _ in segments) and segments[0][1] == 1:
                return LazyPath(self, [(seg, first, last) for seg, first, last in segments],
                                (last_thinking - 1, last_model - 1, last_compaction - 1))
        rows = self.store._query("path", self._params(id=leaf_id, limit=limit))
        records = [record_from_row(row) for row in rows]
        self._remember(records)
        return records

    def label(self, entry_id: str) -> tuple[str, str | None] | None:
        if not self.store.dialect.holds(entry_id):
            return None
        rows = self.store._query("label", self._params(id=entry_id))
        if not rows or not rows[0][0]:
            return None
        return rows[0][0], rows[0][1]

    def read(self, record: Record) -> bytes:
        seq = record.line - 1
        line = self._lines.get(seq)
        if line is None:
            self._fetch(seq)
            line = self._lines[seq]
        return line

    def read_many(self, records: Sequence[Record]) -> list[bytes]:
        """The lines of many records, the ones not read yet fetched together."""
        missing = [r.line - 1 for r in records if r.line - 1 not in self._lines]
        if len(self._lines) + len(missing) > _CACHE_LIMIT:
            self._lines.clear()
            missing = [r.line - 1 for r in records]
        for start in range(0, len(missing), 1000):
            self._fetch_lines(missing[start:start + 1000])
        return [self.read(r) for r in records]

    def _fetch_lines(self, seqs: list[int]) -> None:
        wanted: Any = seqs if self.store.dialect.driver == "postgres" else json.dumps(seqs)
        for found_seq, line in self.store._query("lines", self._params(seqs=wanted)):
            self._lines[found_seq] = bytes(line)

    def _fetch(self, seq: int) -> None:
        """Read ``seq``'s line and the next ones of the last path or load (read-ahead)."""
        position = self._order.get(seq + 1)
        if position is None:
            wanted = [seq]
        else:
            window = self._sequence[max(0, position - 8):position + _READ_AHEAD]
            wanted = [rec.line - 1 for rec in window if rec.line - 1 not in self._lines]
        if len(self._lines) + len(wanted) > _CACHE_LIMIT:
            self._lines.clear()
        self._fetch_lines(wanted)
        if seq not in self._lines:
            raise ConcurrentModification(f"entry line {seq + 1} is no longer stored (the session "
                                         "was deleted)", path=self.url)

    def refresh(self) -> LoadResult | None:
        """What other writers stored since this log last looked, lines included (no lock)."""
        header: Any = None
        if self._created is None:  # not stored when this log was made: maybe stored since
            rows = self.store._query("head", self._params())
            if not rows:
                return None
            state = SessionState.from_row(rows[0])
            self._created = state.created
            header = _json.loads(state.header)
        records: list[Record] = []
        while True:
            rows = self.store._query("after_lines", self._params(seq=self._last_seq,
                                                                 limit=1000))
            for row in rows:
                records.append(record_from_row(row))
                self._lines[row[0]] = bytes(row[-1])
                self._last_seq = row[0]
            if len(rows) < 1000:
                break
        if not records and header is None:
            return None
        self._count += len(records)
        return LoadResult(header if isinstance(header, dict) else None, 1, records, [])

    # -- appending -------------------------------------------------------------------------------

    def begin_append(self) -> LoadResult | None:
        self.store._writable()
        self._appending.acquire()
        try:
            self._tx = self.store._transaction()
            self._conn = self._tx.__enter__()
        except BaseException:
            self._tx = None
            self._appending.release()
            raise
        try:
            return self._catch_up()
        except BaseException as exc:
            self._abort(exc)
            self._appending.release()
            raise

    def _catch_up(self) -> LoadResult | None:
        with self.store._errors():
            self._state, fresh = self.store._drive(
                lock_flow(self.session_id, self._created, self._last_seq, self.url), self._conn)
        if self._state is None:
            return None
        header = _json.loads(self._state.header) if self._created is None else None
        self._created = self._state.created
        self._last_seq = self._state.last_seq
        if fresh is None:
            return None
        return LoadResult(header if isinstance(header, dict) else None, 1, fresh, [])

    def write(self, lines: Sequence[bytes], header_line: bytes | None,
              envelopes: Sequence[FileRecord | None] | None = None) -> list[Record]:
        """Store the lines in one transaction (the records are made from the stored lines:
        ``envelopes`` are not needed)."""
        assert self._conn is not None, "write() outside begin_append()"
        d = self.store.dialect
        try:
            with self.store._errors():
                state, rows = self.store._drive(write_flow(self._state, self.session_id, lines,
                                                           header_line, d,
                                                           notify=d.driver == "postgres"),
                                                self._conn, last=True)
        except DuplicateId:
            if self._state is not None:
                raise
            # a new session another writer stored first (its row did not exist to be locked):
            # this transaction cannot go on; appending again reads that session in
            raise ConcurrentModification(f"session {self.session_id} was created by another "
                                         "writer meanwhile; nothing was written",
                                         path=self.url) from None
        self._commit()
        self._created = state.created
        self._last_seq = state.last_seq
        self._count = state.entry_count
        for row in rows:
            self._lines[row.record.line - 1] = row.params["line"]
        return [row.record for row in rows]

    def _commit(self) -> None:
        tx, self._tx, self._conn = self._tx, None, None
        if tx is None:
            raise RuntimeError("write() outside begin_append()")
        tx.__exit__(None, None, None)

    def _abort(self, exc: BaseException | None) -> None:
        tx, self._tx, self._conn = self._tx, None, None
        if tx is not None:
            tx.__exit__(type(exc) if exc else RuntimeError, exc or RuntimeError("aborted"), None)

    def end_append(self) -> None:
        if not self._appending.locked():
            return
        try:
            if self._tx is not None:  # write() did not commit: roll back
                self._abort(None)
        finally:
            self._appending.release()

    def close(self) -> None:
        self.end_append()
        self._lines.clear()

    # -- following -------------------------------------------------------------------------------

    def follow(self, *, poll: float, stop: Callable[[], bool]) -> Iterator[bytes]:
        """Lines appended after the last one this log has seen, as they land."""
        return self.store.follow(self.session_id, self._last_seq, poll=poll, stop=stop)


class LazyPath(ChunkedPath):
    """A root-to-leaf path of a database session, read in chunks as they are asked for;
    ``segments`` are ``(segment, first depth, last depth)``."""

    def __init__(self, log: SqlLog, segments: list[tuple[int, int, int]],
                 last: tuple[int, int, int]) -> None:
        super().__init__(segments, last)
        self._log = log

    def _fetch(self, numbers: Sequence[int]) -> None:
        """A query per segment a chunk spans."""
        for number in numbers:
            low, high = self._span(number)
            found: list[Record] = []
            for segment, first, last in self._segments:
                if last < low or first > high:
                    continue
                rows = self._log.store._query("span", self._log._params(
                    segment=segment, low=max(low, first), high=min(high, last)))
                found.extend(record_from_row(row) for row in rows)
            if len(found) != high - low + 1:
                raise ConcurrentModification(f"the path changed while it was read ({len(found)} "
                                             f"of {high - low + 1} entries)", path=self._log.url)
            self._chunks[number] = found
            self._log._remember(found)
