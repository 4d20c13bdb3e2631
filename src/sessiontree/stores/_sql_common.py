"""What the SQLite and PostgreSQL stores share, with no I/O: the schema and its migrations,
every statement, and the mapping between rows, envelopes and listings.

Schema (both databases; ``session_id`` leads every key, so on Citus it is the distribution
column and every statement but the listing is routed to one shard):

* ``sessiontree_sessions``: one row per session: the header line's exact bytes, the fields a
  listing shows (cwd, name, first user message, counts, latest activity, token and cost
  totals) and ``last_seq``; updated in the transaction that appends (and in a line's
  replacement, which counts the session again).
* ``sessiontree_entries``: one row per entry, keyed ``(session_id, id)``: its exact line bytes,
  its envelope (type, parent id, timestamp, role, label fields), its append order ``seq``
  (1, 2, ...; the entry's line number in the JSONL form is ``seq + 1``) and its ``segment``.
* ``sessiontree_migrations``: the schema versions applied.

Segments make the root-to-leaf path an indexed query that does not walk entry by entry. An
entry appended under the newest entry of a segment (its tail) joins that segment; any other
entry starts a new segment (``segment`` = its own ``seq``). A segment is therefore a chain,
and the path to an entry is: the entries of its segment up to it, then the same for the
segment holding the parent of the segment's first entry, and so on; a recursive query over
segments (one step per branch point on the path, not per entry), each step an index range scan.

Each entry also stores its ``depth`` (1 for a root) and the depths of the last compaction,
thinking level change and model source (model change or assistant message) on its path, so a
context is built from the leaf's row and the path's suffix, never reading the whole path
(measured: the README's Storage section).

Statements use ``:name`` parameters; :func:`dialect` renders them for the driver. Every value is
a bound parameter: no statement is built from data.

Text columns hold what the database's text can: a lone surrogate (JSON may escape one, pi
writes them; UTF-8 has no form for it) and, in PostgreSQL, NUL (``\u0000``, which its text
refuses) are stored as U+FFFD in the envelope and listing columns, as JavaScript's UTF-8 encoders
write a lone surrogate; the line keeps its exact bytes, and a session reads the envelope as the
columns hold it, just appended or read back. An id or parent id holding one cannot be a key and
is refused (:meth:`Dialect.key`); a lookup of such an id finds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, TypeVar

import msgspec

from .. import _json
from .._listing import ListingStats, listed_usage, listing_line, listing_row
from .._search import document, entry_terms, fts_body, fts_counts
from .._scan import Record, _Role, envelope
from .._time import iso_to_ms
from ..errors import ConcurrentModification, InvalidEntry, UnsupportedVersion
from ..usage import UsageTotals
from .base import SessionListing, check_session_id

__all__ = [
    "ENTRY_COLUMNS",
    "Dialect",
    "NewRow",
    "Flow",
    "ParentInfo",
    "Step",
    "ROOT",
    "SessionState",
    "check_schema",
    "check_session_id",
    "dialect",
    "counted_listing",
    "envelope_columns",
    "listing_from_row",
    "lock_flow",
    "migrate_flow",
    "insert_search_flow",
    "plan_rows",
    "record_from_row",
    "reindex_flow",
    "search_flow",
    "search_rows",
    "search_row_id",
    "write_flow",
]

Driver = Literal["sqlite", "postgres"]
_T = TypeVar("_T")

_UNSTORABLE = {"sqlite": re.compile("[\ud800-\udfff]"),
               "postgres": re.compile("[\x00\ud800-\udfff]")}
"""What each database's text cannot hold: lone surrogates (UTF-8 has no form for them), and NUL
in PostgreSQL."""


# -- the schema --------------------------------------------------------------------------------

_MIGRATIONS: list[str | dict[str, str]] = [
    # v1: sessions, entries with segments, and the indexes every query uses
    """
    CREATE TABLE sessiontree_sessions (
        session_id TEXT NOT NULL PRIMARY KEY,
        header {blob} NOT NULL,
        cwd TEXT NOT NULL,
        created TEXT NOT NULL,
        parent_session TEXT,
        name TEXT,
        first_message TEXT NOT NULL DEFAULT '',
        message_count BIGINT NOT NULL DEFAULT 0,
        entry_count BIGINT NOT NULL DEFAULT 0,
        last_seq BIGINT NOT NULL DEFAULT 0,
        modified_ms BIGINT NOT NULL
    );
    CREATE INDEX sessiontree_sessions_recent ON sessiontree_sessions (modified_ms DESC, session_id);
    CREATE INDEX sessiontree_sessions_cwd ON sessiontree_sessions (cwd, modified_ms DESC);
    CREATE TABLE sessiontree_entries (
        session_id TEXT NOT NULL,
        id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        segment BIGINT NOT NULL,
        parent_id TEXT,
        type TEXT NOT NULL,
        timestamp TEXT,
        role TEXT,
        custom_type TEXT,
        target_id TEXT,
        label TEXT,
        name TEXT,
        line {blob} NOT NULL,
        PRIMARY KEY (session_id, id)
    );
    CREATE UNIQUE INDEX sessiontree_entries_seq ON sessiontree_entries (session_id, seq);
    CREATE INDEX sessiontree_entries_segment ON sessiontree_entries (session_id, segment, seq);
    CREATE INDEX sessiontree_entries_labels ON sessiontree_entries (session_id, target_id, seq)
        WHERE type = 'label';
    """,
    # v2: each entry's depth and the depths of the last compaction, thinking level change and
    # model source on its path (NULL for rows stored before: their paths are read whole)
    """
    ALTER TABLE sessiontree_entries ADD COLUMN depth BIGINT;
    ALTER TABLE sessiontree_entries ADD COLUMN last_compaction BIGINT;
    ALTER TABLE sessiontree_entries ADD COLUMN last_thinking BIGINT;
    ALTER TABLE sessiontree_entries ADD COLUMN last_model BIGINT;
    CREATE INDEX sessiontree_entries_depth ON sessiontree_entries (session_id, segment, depth);
    """,
    # v3: the latest user or assistant message time as pi's listing counts it (NULL: none yet,
    # or a row written before: then it is taken from modified_ms when that is not the header's)
    """
    ALTER TABLE sessiontree_sessions ADD COLUMN activity_ms BIGINT;
    """,
    # v4: full-text search (sessiontree._search): each entry with text gets a row, written in
    # the append's transaction; the rows of entries stored before are built by the migration
    {"sqlite": """
    CREATE TABLE sessiontree_search_keys (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        role TEXT NOT NULL,
        ms BIGINT NOT NULL,
        UNIQUE (session_id, seq)
    );
    CREATE VIRTUAL TABLE sessiontree_search USING fts5(body, detail=none,
        tokenize='unicode61 remove_diacritics 0');
    """, "postgres": """
    CREATE TABLE sessiontree_search (
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        role TEXT NOT NULL,
        ms BIGINT NOT NULL,
        words TEXT[] NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX sessiontree_search_words ON sessiontree_search USING GIN (words);
    """},
    # v5: the session's token and cost totals as pi counts them (sessiontree.usage), kept in
    # the append's transaction; NULL: not kept (a total beyond the columns), counted from the
    # lines when listed. The migration counts the sessions stored before.
    """
    ALTER TABLE sessiontree_sessions ADD COLUMN usage_input BIGINT;
    ALTER TABLE sessiontree_sessions ADD COLUMN usage_output BIGINT;
    ALTER TABLE sessiontree_sessions ADD COLUMN usage_cache_read BIGINT;
    ALTER TABLE sessiontree_sessions ADD COLUMN usage_cache_write BIGINT;
    ALTER TABLE sessiontree_sessions ADD COLUMN usage_cost DOUBLE PRECISION;
    UPDATE sessiontree_sessions SET usage_input = 0, usage_output = 0, usage_cache_read = 0,
        usage_cache_write = 0, usage_cost = 0 WHERE last_seq = 0;
    """,
    # v6: search ranks in the database (sessiontree._search.best_first): each row keeps the
    # entry's size and its words' counts (JSON, the words held more than once); SQLite's row
    # ids follow the entries' times (so FTS5 hands the most recent matches first), PostgreSQL
    # walks an index by time. The rows are built again from the lines (migrate_flow).
    {"sqlite": """
    DROP TABLE sessiontree_search;
    DROP TABLE sessiontree_search_keys;
    CREATE TABLE sessiontree_search_keys (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        role TEXT NOT NULL,
        ms BIGINT NOT NULL,
        size BIGINT NOT NULL,
        counts TEXT,
        UNIQUE (session_id, seq)
    );
    CREATE VIRTUAL TABLE sessiontree_search USING fts5(body, detail=none,
        tokenize='unicode61 remove_diacritics 0');
    """, "postgres": """
    DELETE FROM sessiontree_search;
    ALTER TABLE sessiontree_search ADD COLUMN size BIGINT NOT NULL;
    ALTER TABLE sessiontree_search ADD COLUMN counts JSONB;
    CREATE INDEX sessiontree_search_recent ON sessiontree_search
        (ms DESC, session_id COLLATE "C", seq);
    """},
    # v7: SQLite's FTS5 rows hold the entry's words as sessiontree._search splits them
    # (fts_body), not its text, which FTS5 split otherwise (a combining mark joined words): the
    # rows are built again. PostgreSQL's rows held those words already.
    {"sqlite": """
    DELETE FROM sessiontree_search;
    DELETE FROM sessiontree_search_keys;
    """, "postgres": ""},
    # v8: a capital I with a dot is a letter of the words (sessiontree._search.lowered), no
    # longer an "i" ending one: the rows of the entries whose lines hold one, which a search
    # for the word as written missed, are built again (migrate_flow: _DOTTED_VERSION); no
    # other entry's words changed.
    "",
]
"""Schema versions, in order: a migration's position (from 1) is its version (a script, or one
per driver). Never edit one that shipped; append a new one."""

_SEARCH_VERSION = 6
"""The migration that gave the search tables their present form (4 made them); a read-only
store of an older schema does not search."""
_SEARCH_REBUILT = {"sqlite": 7, "postgres": _SEARCH_VERSION}
"""The last migration of each driver's search rows: after it, the rows of the entries
already stored are built (once, however many search migrations ran)."""
_DOTTED_VERSION = 8
"""The migration after which the search rows of the entries holding a capital I with a dot
are built again (their lines found by the database: :data:`_DOTTED`)."""
USAGE_VERSION = 5
"""The migration that adds the usage columns (after it, the totals of the sessions already
stored are counted); a read-only store on an older schema counts them from the lines."""

CREATE_MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS sessiontree_migrations (v INTEGER PRIMARY KEY)"
SELECT_VERSION = "SELECT COALESCE(MAX(v), 0) FROM sessiontree_migrations"
INSERT_VERSION = "INSERT INTO sessiontree_migrations (v) VALUES (:v)"

ENTRY_COLUMNS = "seq, segment, id, parent_id, type, timestamp, role, custom_type, target_id, label, name"
_ENVELOPE_COLUMNS = ENTRY_COLUMNS.split(", ")[4:]
"""The columns an entry's envelope fills beside its ids (:func:`envelope_columns`)."""
_AGGREGATES = "depth, last_compaction, last_thinking, last_model"
_ENVELOPE = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS.split(", "))
_USAGE_COLUMNS = "usage_input, usage_output, usage_cache_read, usage_cache_write, usage_cost"
_SESSION_COLUMNS = ("session_id, header, cwd, created, parent_session, name, first_message, "
                    f"message_count, entry_count, last_seq, modified_ms, activity_ms, {_USAGE_COLUMNS}")

_SET_USAGE = ", ".join(f"{c} = :{c}" for c in _USAGE_COLUMNS.split(", "))

_SESSION_READS = ("head", "lock", "list", "list_cwd")
"""The statements that read the sessions table's columns (a read-only store reads them)."""

_CHAIN = """
        WITH RECURSIVE chain (segment, upto, depth, hops) AS (
            SELECT segment, seq, depth, 0 FROM sessiontree_entries
            WHERE session_id = :sid AND id = :id
            UNION ALL
            SELECT p.segment, p.seq, p.depth, c.hops + 1
            FROM chain c
            JOIN sessiontree_entries f ON f.session_id = :sid AND f.seq = c.segment
            JOIN sessiontree_entries p ON p.session_id = :sid AND p.id = f.parent_id
            WHERE c.hops < :limit
        )"""
"""The segments on the path to entry ``:id``, from the leaf's (``hops`` 0) back to the root's:
each with the seq and depth of its last entry on the path (``upto``, ``depth``)."""

_STATEMENTS = {
    "head": f"SELECT {_SESSION_COLUMNS} FROM sessiontree_sessions WHERE session_id = :sid",
    "lock": f"SELECT {_SESSION_COLUMNS} FROM sessiontree_sessions WHERE session_id = :sid{{lock}}",
    "by_seq": f"SELECT {ENTRY_COLUMNS} FROM sessiontree_entries WHERE session_id = :sid AND seq = :seq",
    "by_id": f"SELECT {ENTRY_COLUMNS} FROM sessiontree_entries WHERE session_id = :sid AND id = :id",
    "after": f"SELECT {ENTRY_COLUMNS} FROM sessiontree_entries WHERE session_id = :sid AND seq > :seq "
             "ORDER BY seq",
    "after_lines": f"SELECT {ENTRY_COLUMNS}, line FROM sessiontree_entries "
                   "WHERE session_id = :sid AND seq > :seq ORDER BY seq LIMIT :limit",
    "all_lines": "SELECT line FROM sessiontree_entries WHERE session_id = :sid AND seq > :seq "
                 "ORDER BY seq LIMIT :limit",
    "path": f"""{_CHAIN}
        SELECT {_ENVELOPE} FROM chain c
        JOIN sessiontree_entries e ON e.session_id = :sid AND e.segment = c.segment
            AND e.seq <= c.upto
        ORDER BY c.hops DESC, e.seq""",
    # whether :entry is on the path to the session's last entry (its leaf), in one round
    # trip: a search asks it for each hit it shows
    "on_current_path": f"""{_CHAIN.replace("AND id = :id", "AND seq = (SELECT max(seq) FROM "
                                           "sessiontree_entries WHERE session_id = :sid)")}
        SELECT 1 FROM chain c
        JOIN sessiontree_entries e ON e.session_id = :sid AND e.segment = c.segment
            AND e.seq <= c.upto
        WHERE e.id = :entry LIMIT 1""",
    "label": "SELECT label, timestamp FROM sessiontree_entries WHERE session_id = :sid "
             "AND type = 'label' AND target_id = :id ORDER BY seq DESC LIMIT 1",
    "parent": f"""
        SELECT p.seq, p.segment, NOT EXISTS (
            SELECT 1 FROM sessiontree_entries x
            WHERE x.session_id = :sid AND x.segment = p.segment AND x.seq > p.seq),
            {", ".join(f"p.{c}" for c in _AGGREGATES.split(", "))}
        FROM sessiontree_entries p WHERE p.session_id = :sid AND p.id = :id""",
    "insert_entry": f"INSERT INTO sessiontree_entries ({ENTRY_COLUMNS}, {_AGGREGATES}, session_id, "
                    "line) VALUES (:seq, :segment, :id, :parent_id, :type, :timestamp, :role, "
                    ":custom_type, :target_id, :label, :name, :depth, :last_compaction, "
                    ":last_thinking, :last_model, :sid, :line)",
    "leaf": f"SELECT {_AGGREGATES} FROM sessiontree_entries WHERE session_id = :sid AND id = :id",
    "chain": f"""{_CHAIN}
        SELECT c.segment, f.depth, c.depth FROM chain c
        JOIN sessiontree_entries f ON f.session_id = :sid AND f.seq = c.segment
        ORDER BY c.hops DESC""",
    "span": f"SELECT {ENTRY_COLUMNS} FROM sessiontree_entries WHERE session_id = :sid "
            "AND segment = :segment AND depth BETWEEN :low AND :high ORDER BY depth",
    "insert_session": f"INSERT INTO sessiontree_sessions ({_SESSION_COLUMNS}) VALUES (:sid, :header, "
                      ":cwd, :created, :parent_session, :name, :first_message, :message_count, "
                      ":entry_count, :last_seq, :modified_ms, :activity_ms, :usage_input, :usage_output, "
                      ":usage_cache_read, :usage_cache_write, :usage_cost)",
    "update_session": "UPDATE sessiontree_sessions SET name = :name, first_message = :first_message, "
                      "message_count = :message_count, entry_count = :entry_count, "
                      "last_seq = :last_seq, modified_ms = :modified_ms, activity_ms = :activity_ms, "
                      f"{_SET_USAGE} WHERE session_id = :sid",
    "set_usage": f"UPDATE sessiontree_sessions SET {_SET_USAGE} WHERE session_id = :sid",
    "list": f"SELECT {_SESSION_COLUMNS} FROM sessiontree_sessions "
            "ORDER BY modified_ms DESC, session_id LIMIT :limit",
    "list_cwd": f"SELECT {_SESSION_COLUMNS} FROM sessiontree_sessions WHERE cwd = :cwd "
                "ORDER BY modified_ms DESC, session_id LIMIT :limit",
    "older_than": "SELECT session_id FROM sessiontree_sessions WHERE modified_ms < :ms "
                  "ORDER BY modified_ms, session_id",
    "ids": "SELECT session_id FROM sessiontree_sessions ORDER BY session_id",
    "delete_entries": "DELETE FROM sessiontree_entries WHERE session_id = :sid",
    "delete_session": "DELETE FROM sessiontree_sessions WHERE session_id = :sid",
    "entry_line": "SELECT line FROM sessiontree_entries WHERE session_id = :sid AND id = :id",
    # the line and every envelope column read from it (type and role do not change: see
    # base.check_replacement), so a label entry's label and target follow its line
    "replace_line": "UPDATE sessiontree_entries SET line = :line, "
                    f"{', '.join(f'{c} = :{c}' for c in _ENVELOPE_COLUMNS)} "
                    "WHERE session_id = :sid AND id = :id",
    "notify": "SELECT pg_notify('sessiontree', :sid)",
}

# the matches with the highest row ids, below :below (FTS5 reads them first and
# stops): the most recent, but for matches of the oldest one's time (whose ids can
# be lower), asked for next (SqlStore.search)
_SQLITE_SEARCH = """
            SELECT k.session_id, k.seq, k.ms, s.cwd, k.size, {counts}, f.rowid
            FROM sessiontree_search f
            JOIN sessiontree_search_keys k ON k.id = f.rowid
            JOIN sessiontree_sessions s ON s.session_id = k.session_id
            WHERE sessiontree_search MATCH :match AND f.rowid >= :floor AND f.rowid < :below
                AND k.ms >= :since AND (:role IS NULL OR k.role = :role)
                AND (:cwd IS NULL OR s.cwd = :cwd)
            ORDER BY f.rowid DESC LIMIT :limit"""

_SEARCH = {
    "sqlite": {
        # the row id: the next of the ids of the entry's time (search_row_id), or past them
        # all when they are taken: never below its time's first
        "insert_search": """
            INSERT INTO sessiontree_search_keys (id, session_id, seq, role, ms, size, counts)
            SELECT CASE WHEN m IS NULL THEN :first WHEN m < :last THEN m + 1 END,
                :sid, :seq, :role, :ms, :size, :counts
            FROM (SELECT max(id) AS m FROM sessiontree_search_keys
                  WHERE id BETWEEN :first AND :last)""",
        "insert_search_body": "INSERT INTO sessiontree_search (rowid, body) SELECT id, :body "
                              "FROM sessiontree_search_keys WHERE session_id = :sid "
                              "AND seq = :seq",
        "delete_search": "DELETE FROM sessiontree_search WHERE rowid IN (SELECT id FROM "
                         "sessiontree_search_keys WHERE session_id = :sid)",
        "delete_search_keys": "DELETE FROM sessiontree_search_keys WHERE session_id = :sid",
        "delete_entry_search": "DELETE FROM sessiontree_search WHERE rowid IN (SELECT id FROM "
                               "sessiontree_search_keys WHERE session_id = :sid AND seq = :seq)",
        "delete_entry_search_keys": "DELETE FROM sessiontree_search_keys "
                                    "WHERE session_id = :sid AND seq = :seq",
        "search": _SQLITE_SEARCH.format(counts=fts_counts("k.counts", 2)),
        "search_word": _SQLITE_SEARCH.format(counts=fts_counts("k.counts", 1)),
        "search_lines": "SELECT session_id, seq, line FROM sessiontree_entries "
                        "WHERE (session_id, seq) IN (SELECT s.value, q.value "
                        "FROM json_each(:sids) s JOIN json_each(:seqs) q ON q.key = s.key)",
    },
    "postgres": {
        "insert_search": "INSERT INTO sessiontree_search (session_id, seq, role, ms, words, "
                         "size, counts) VALUES (:sid, :seq, :role, :ms, :words, :size, "
                         "CAST(:counts AS JSONB))",
        "delete_search": "DELETE FROM sessiontree_search WHERE session_id = :sid",
        "delete_search_keys": "DELETE FROM sessiontree_search WHERE session_id = :sid",
        "delete_entry_search": "DELETE FROM sessiontree_search "
                               "WHERE session_id = :sid AND seq = :seq",
        # on Citus every table is distributed by session_id and joined on it, so the query
        # runs on each shard as it is and only the most recent rows come back (a word most
        # entries hold walks the index by time; a rare one is looked up in the GIN index)
        "search": """
            SELECT f.session_id, f.seq, f.ms, s.cwd, f.size, ARRAY(
                SELECT coalesce((f.counts ->> w)::int, 1)
                FROM unnest(CAST(:words AS TEXT[])) WITH ORDINALITY AS q(w, n) ORDER BY n)
            FROM sessiontree_search f
            JOIN sessiontree_sessions s ON s.session_id = f.session_id
            WHERE f.words @> CAST(:words AS TEXT[]) AND f.ms >= :since
                AND (CAST(:role AS TEXT) IS NULL OR f.role = :role)
                AND (CAST(:cwd AS TEXT) IS NULL OR s.cwd = :cwd)
            ORDER BY f.ms DESC, f.session_id COLLATE "C", f.seq LIMIT :limit""",
        # (the sessions named as such too, so that Citus asks only their shards)
        "search_lines": "SELECT session_id, seq, line FROM sessiontree_entries "
                        "WHERE session_id = ANY(CAST(:sids AS TEXT[])) AND (session_id, seq) IN "
                        "(SELECT * FROM unnest(CAST(:sids AS TEXT[]), CAST(:seqs AS BIGINT[])))",
        # the planner's statistics of the search rows: without them a word most entries hold
        # is taken for a rare one (its GIN matches all fetched and sorted, not the index by
        # time walked until enough match: 1.3 s against 9 ms at 10,000 sessions)
        "analyze_search": "ANALYZE sessiontree_search, sessiontree_sessions",
    },
}
"""The search statements: an FTS5 table (and its keys) in SQLite, a GIN-indexed array of the
entry's words in PostgreSQL (one tokenizer, :mod:`sessiontree._search`'s, for every backend);
each row with the entry's time, role, size and word counts, so the database hands over the
most recent candidates and what bounds their relevance, and only the best lines are read."""
_BACKFILL = ("SELECT session_id, seq, line FROM sessiontree_entries WHERE (session_id, seq) > "
             "(:sid, :seq){dotted} ORDER BY session_id, seq LIMIT :limit")
_DOTTED = {"sqlite": " AND (instr(line, :raw) > 0 OR instr(line, :escaped) > 0)",
           "postgres": " AND (position(:raw IN line) > 0 OR position(:escaped IN line) > 0)"}
"""Of the lines :data:`_BACKFILL` gives, only those holding a capital I with a dot, raw
(``raw``: its UTF-8) or escaped (``escaped``: JSON's ``\\u0130``): :data:`_NEEDLES`."""
_NEEDLES = {"raw": "\u0130".encode(), "escaped": b"\\u0130"}

_LINES = {
    "sqlite": "SELECT seq, line FROM sessiontree_entries WHERE session_id = :sid "
              "AND seq IN (SELECT value FROM json_each(:seqs))",
    "postgres": "SELECT seq, line FROM sessiontree_entries WHERE session_id = :sid AND seq = ANY(:seqs)",
}

_PARAM = re.compile(r"(?<![:\w]):([a-z_]+)")


@dataclass(frozen=True)
class Dialect:
    """Every statement rendered for one driver (``?``-style names for sqlite3, ``%(name)s`` for
    psycopg); ``migrations`` is the list of schema scripts, each a list of statements."""

    driver: Driver
    statements: Mapping[str, str]
    migrations: Sequence[Sequence[str]]

    def text(self, value: str | None) -> str | None:
        """``value`` for a text column: what the database's text cannot hold becomes U+FFFD."""
        if value is None or (value.isascii() and "\x00" not in value):
            return value
        return _UNSTORABLE[self.driver].sub("\ufffd", value)

    def holds(self, value: str) -> bool:
        """Whether a text column holds ``value`` as it is (so it can be a key, or be found)."""
        return (value.isascii() and "\x00" not in value) or \
            _UNSTORABLE[self.driver].search(value) is None

    def key(self, value: str | None, entry_id: str | None) -> str | None:
        """An id or parent id for a key column.

        Raises:
            InvalidEntry: it holds what a text column cannot (see :meth:`text`).
        """
        if value is not None and not self.holds(value):
            raise InvalidEntry(f"an id holding a lone surrogate or NUL cannot be stored in "
                               f"{self.driver}: {value!r}", entry_id=entry_id)
        return value

    def reading(self, version: int) -> Dialect:
        """This dialect for reading a database of schema ``version`` that is not migrated (a
        store opened read-only): the usage columns it lacks read as NULL (not kept: the
        listing counts the lines); the search statements are left out before the search
        tables had their present form (a search says so)."""
        if version >= _SEARCH_VERSION:
            return self
        nulls = ", ".join(["NULL"] * len(_USAGE_COLUMNS.split(", ")))
        return replace(self, statements={
            name: sql.replace(_USAGE_COLUMNS, nulls)
            if name in _SESSION_READS and version < USAGE_VERSION else sql
            for name, sql in self.statements.items() if name not in _SEARCH[self.driver]})

    def __getitem__(self, name: str) -> str:
        if name.startswith("migration "):  # "migration N.I": statement I of migration N
            number, index = name.split(" ")[1].split(".")
            return self.migrations[int(number) - 1][int(index)]
        return self.statements[name]


def _render(sql: str, driver: Driver) -> str:
    return sql if driver == "sqlite" else _PARAM.sub(r"%(\1)s", sql)


def dialect(driver: Driver) -> Dialect:
    """The statements and migrations for ``sqlite`` (stdlib sqlite3) or ``postgres`` (psycopg)."""
    blob = "BLOB" if driver == "sqlite" else "BYTEA"
    lock = "" if driver == "sqlite" else " FOR UPDATE"  # SQLite locks with BEGIN IMMEDIATE
    texts = {**_STATEMENTS, **_SEARCH[driver], "backfill": _BACKFILL.format(dotted=""),
             "backfill_dotted": _BACKFILL.format(dotted=_DOTTED[driver]),
             "session_lines": "SELECT seq, line FROM sessiontree_entries WHERE session_id = :sid "
                              "ORDER BY seq",
             "lines": _LINES[driver], "lock": _STATEMENTS["lock"].format(lock=lock),
             "create_migrations": CREATE_MIGRATIONS_TABLE, "version": SELECT_VERSION,
             "insert_version": INSERT_VERSION}
    scripts = [script if isinstance(script, str) else script[driver] for script in _MIGRATIONS]
    migrations = [[s.strip() for s in script.format(blob=blob).split(";") if s.strip()]
                  for script in scripts]
    return Dialect(driver, {k: _render(v, driver) for k, v in texts.items()},
                   [[_render(s, driver) for s in m] for m in migrations])


# -- rows ------------------------------------------------------------------------------------


def record_from_row(row: Sequence[Any]) -> Record:
    """An envelope from the first columns of a row selected as :data:`ENTRY_COLUMNS`."""
    seq, _segment, entry_id, parent, kind, timestamp, role, custom, target, label, name = row[:11]
    return Record(type=kind, id=entry_id, parent_id=parent, timestamp=timestamp,
                  message=_Role(role) if role is not None else None, custom_type=custom,
                  target_id=target, label=label, name=name, line=seq + 1)


@dataclass
class SessionState:
    """A session's row, as read under its lock and as the append will leave it."""

    session_id: str
    header: bytes
    cwd: str
    created: str
    parent_session: str | None
    stats: ListingStats
    """The listing's counts (pi's rules, :mod:`sessiontree._listing`), the name included."""
    entry_count: int
    last_seq: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> SessionState:
        (sid, header, cwd, created, parent, name, first, messages, entries, last_seq,
         modified, activity, *usage) = row
        if activity is None and messages and modified != iso_to_ms(created):
            activity = modified  # a row written before schema version 3
        stats = ListingStats(messages, first, activity, name)
        stats.usage = _usage_from_columns(usage)
        return cls(sid, bytes(header), cwd, created, parent, stats, entries, last_seq)

    @classmethod
    def new(cls, header_line: bytes, d: Dialect) -> SessionState:
        """The state of a session whose header line is being stored now (its texts as the
        columns of ``d`` hold them)."""
        header = _json.loads(header_line)
        if not isinstance(header, dict) or header.get("type") != "session":
            raise InvalidEntry("the header line is not a session header")
        sid = check_session_id(header.get("id"))

        def text(key: str) -> str | None:
            value = header.get(key)
            return d.text(value) if isinstance(value, str) else None

        return cls(sid, header_line, text("cwd") or "", text("timestamp") or "",
                   text("parentSession") or None, ListingStats(), 0, 0)

    @property
    def name(self) -> str | None:
        return self.stats.name

    def params(self, d: Dialect) -> dict[str, Any]:
        """The parameters of ``insert_session`` and ``update_session``."""
        modified, _ = self.stats.modified(self.created, None)
        activity = self.stats.activity
        return {"sid": self.session_id, "header": self.header, "cwd": self.cwd,
                "created": self.created, "parent_session": self.parent_session,
                "name": d.text(self.name), "first_message": d.text(self.stats.first),
                "message_count": self.stats.messages,
                "entry_count": self.entry_count, "last_seq": self.last_seq,
                "modified_ms": modified, "activity_ms": int(activity) if activity is not None
                else None, **_usage_columns(self.stats.usage)}


_BIGINT = range(-2**63, 2**63)


def _usage_columns(usage: UsageTotals | None) -> dict[str, Any]:
    """The usage columns' parameters: the totals, or all NULL where the columns cannot hold
    them (a token total beyond BIGINT, a NaN cost, which SQLite stores as NULL: only
    nonsensical counts get there) or they are not known."""
    names = _USAGE_COLUMNS.split(", ")
    if usage is None:
        return dict.fromkeys(names)
    counts = (usage.input, usage.output, usage.cache_read, usage.cache_write)
    if not all(count in _BIGINT for count in counts) or usage.cost != usage.cost:
        return dict.fromkeys(names)
    return dict(zip(names, (*counts, usage.cost)))


def _usage_from_columns(values: Sequence[Any]) -> UsageTotals | None:
    """The totals the usage columns hold; ``None`` when they are not kept (NULL)."""
    if len(values) != 5 or None in values:
        return None
    tokens_in, tokens_out, cache_read, cache_write, cost = values
    return UsageTotals(input=int(tokens_in), output=int(tokens_out), cache_read=int(cache_read),
                       cache_write=int(cache_write), cost=float(cost))


def counted_listing(listing: SessionListing, line_rows: Iterable[Sequence[Any]]
                    ) -> SessionListing:
    """A listing whose row did not keep the totals, with them counted from the session's
    lines (rows as ``all_lines`` selects them)."""
    return msgspec.structs.replace(listing, usage=listed_usage(
        bytes(row[0]) for row in line_rows))


def listing_from_row(row: Sequence[Any], url: str) -> SessionListing:
    """A listing from a row selected as the sessions table's columns (pi's rules, the same
    code as a folder's listing: :func:`sessiontree._listing.listing_row`); its ``usage`` is
    ``None`` when the row does not keep the totals (NULL usage columns: the caller counts
    the session's lines, :func:`listed_usage`)."""
    state = SessionState.from_row(row)
    header = {"id": state.session_id, "cwd": state.cwd, "timestamp": state.created,
              "parentSession": state.parent_session}
    listing = listing_row(header, state.stats, url, None, state.entry_count)
    if listing.modified_from == "file":  # no file: a header without a time, no message
        return msgspec.structs.replace(listing, modified_from="created")
    return listing


# -- appends -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParentInfo:
    """Where a stored parent is: its seq and segment, whether it is its segment's tail, and its
    depth and path aggregates (``None`` for rows stored before schema version 2)."""

    seq: int
    segment: int
    is_tail: bool
    depth: int | None = None
    last_compaction: int | None = None
    last_thinking: int | None = None
    last_model: int | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ParentInfo:
        return cls(row[0], row[1], bool(row[2]), *row[3:7])

    def child(self, rec: Record) -> ParentInfo:
        """What a child entry ``rec`` of this one has (its seq and segment left unset)."""
        if self.depth is None:
            return ParentInfo(0, 0, False)
        depth = self.depth + 1
        kind = rec.type
        model = kind == "model_change" or (kind == "message" and rec.role == "assistant")
        return ParentInfo(0, 0, False, depth,
                          depth if kind == "compaction" else self.last_compaction,
                          depth if kind == "thinking_level_change" else self.last_thinking,
                          depth if model else self.last_model)


ROOT = ParentInfo(0, 0, False, 0, 0, 0, 0)
"""The parent of a root: a child of it has depth 1."""


@dataclass(frozen=True)
class NewRow:
    """One entry about to be inserted, and its envelope as the session will index it."""

    params: dict[str, Any]
    record: Record


def envelopes(lines: Sequence[bytes]) -> list[Record]:
    """The envelopes of lines to append.

    Raises:
        InvalidEntry: a line that is not an entry.
    """
    out = []
    for line in lines:
        rec = envelope(line)
        if rec is None:
            raise InvalidEntry(f"not an entry line: {line[:80]!r}")
        out.append(rec)
    return out


_COUNTED = frozenset(("message", "session_info", "usage", "compaction", "branch_summary"))
"""The entry types a listing counts (:class:`~sessiontree._listing.ListingStats`)."""


def plan_rows(state: SessionState, lines: Sequence[bytes], records: Sequence[Record],
              parents: Mapping[str, ParentInfo], d: Dialect, *, orphans: bool = False
              ) -> list[NewRow]:
    """The rows for ``lines`` appended to ``state`` (updated in place: counts, name, listing),
    each with its envelope as the row holds it.

    Args:
        state: the session as read under its lock.
        lines: the entry lines, in order.
        records: their envelopes.
        parents: what the database says of each parent not among ``lines``.
        d: the database's dialect (what its text columns hold).
        orphans: allow a parent that is nowhere (copying a file whose entry lost its parent);
            otherwise that raises.

    Raises:
        InvalidEntry: a parent that is not in the session (without ``orphans``); an id the
            database cannot hold.
    """
    rows: list[NewRow] = []
    tails: dict[int, int] = {}  # segment -> seq of its newest entry, for segments touched here
    placed: dict[str, tuple[int, int, ParentInfo]] = {}  # id -> seq, segment, aggregates
    later = {rec.id for rec in records}
    exact = True  # False once a parent comes later in the lines: depths are then not stored
    for line, rec in zip(lines, records):
        seq = state.last_seq + 1
        segment = seq
        parent = rec.parent_id
        above = ROOT
        if parent is not None:
            if parent in placed:
                p_seq, p_segment, above = placed[parent]
                if tails.get(p_segment) == p_seq:
                    segment = p_segment
            elif parent in parents:
                above = parents[parent]
                if above.is_tail and above.segment not in tails:
                    segment = above.segment
            elif not orphans:
                raise InvalidEntry(f"parent {parent} of {rec.id} is not in the session",
                                   entry_id=rec.id)
            elif parent in later:
                exact = False
        later.discard(rec.id)
        mine = above.child(rec) if exact else ParentInfo(0, 0, False)
        tails[segment] = seq
        placed[rec.id] = (seq, segment, mine)
        state.last_seq = seq
        state.entry_count += 1
        if rec.type in _COUNTED:
            counted = listing_line(line)
            if counted is not None:
                state.stats.add((counted,))
        rec.line = seq + 1
        columns = envelope_columns(rec, d)
        row = {
            "sid": state.session_id, "seq": seq, "segment": segment,
            "id": d.key(rec.id, rec.id), "parent_id": d.key(rec.parent_id, rec.id), **columns,
            "line": line, "depth": mine.depth, "last_compaction": mine.last_compaction,
            "last_thinking": mine.last_thinking, "last_model": mine.last_model}
        held = tuple(columns.values())
        rows.append(NewRow(row, rec if held == _envelope_values(rec) else record_from_row(
            (seq, segment, rec.id, rec.parent_id, *held))))
    return rows


def _envelope_values(rec: Record) -> tuple[str | None, ...]:
    """An entry's envelope fields, in the order of :data:`_ENVELOPE_COLUMNS`."""
    return (rec.type, rec.timestamp, rec.role, rec.custom_type, rec.target_id, rec.label,
            rec.name)


def envelope_columns(rec: Record, d: Dialect) -> dict[str, str | None]:
    """An entry's envelope columns (type, time, role, custom type, label target, label, name)
    as the database's text holds them (:meth:`Dialect.text`)."""
    return dict(zip(_ENVELOPE_COLUMNS, map(d.text, _envelope_values(rec))))


# -- the transactions, as steps a sync or an async driver runs -----------------------------------


class Step(NamedTuple):
    """One statement for a driver to run: ``fetch`` is ``one`` (a row or None), ``all`` (rows),
    ``none``, or ``many`` (``params`` is a list: executemany)."""

    name: str
    params: Any
    fetch: Literal["one", "all", "none", "many"]


Flow = Generator[Step, Any, _T]


def check_schema(version: int, d: Dialect, url: str) -> int:
    """``version``, a database's schema version, if this code knows it: a newer schema may
    hold what these statements would misread or break, so the store does not open.

    Raises:
        UnsupportedVersion: a version past the last migration this code has.
    """
    if version > len(d.migrations):
        raise UnsupportedVersion(f"schema version {version}, newer than this sessiontree knows "
                                 f"({len(d.migrations)}); upgrade sessiontree. Nothing was "
                                 "read or written", path=url)
    return version


def migrate_flow(d: Dialect, url: str) -> Flow[int]:
    """Apply the migrations the database lacks, in the open transaction; the version reached.

    Raises:
        UnsupportedVersion: the database's schema is newer than this code (see
            :func:`check_schema`); the transaction is rolled back, nothing written.
    """
    yield Step("create_migrations", None, "none")
    row = yield Step("version", None, "one")
    version = check_schema(int(row[0]), d, url)
    for number, script in enumerate(d.migrations[version:], start=version + 1):
        for index in range(len(script)):
            yield Step(f"migration {number}.{index}", None, "none")
        if number == _SEARCH_REBUILT[d.driver]:
            yield from _backfill_search(d)
            if "analyze_search" in d.statements:
                yield Step("analyze_search", None, "none")
        elif number == USAGE_VERSION:
            yield from _backfill_usage()
        elif number == _DOTTED_VERSION and version >= _SEARCH_REBUILT[d.driver]:
            yield from _backfill_search(d, dotted=True)  # (else rebuilt above, as it is now)
        yield Step("insert_version", {"v": number}, "none")
    return len(d.migrations)


def search_flow(session_id: str, lines: Sequence[tuple[int, bytes]], d: Dialect) -> Flow[None]:
    """Insert the search rows of entry lines (``(seq, line)``) just stored."""
    yield from insert_search_flow(search_rows(session_id, lines, d), d)


def search_rows(session_id: str, lines: Sequence[tuple[int, bytes]], d: Dialect
                ) -> list[dict[str, Any]]:
    """The search rows of entry lines (``(seq, line)``): their words counted, which a caller
    that knows the lines before its transaction does outside it (an SQLite writer holds the
    database's one write lock meanwhile)."""
    params = []
    for seq, line in lines:
        doc = document(line)
        if doc is None:
            continue
        size, counts = entry_terms(doc.text)
        repeated = {word: count for word, count in counts.items() if count > 1}
        row: dict[str, Any] = {"sid": session_id, "seq": seq, "role": doc.role, "ms": doc.ms,
                               "size": size,
                               # (no JS key order to keep: read by key; words hold no
                               # surrogate, so msgspec writes them)
                               "counts": msgspec.json.encode(repeated).decode() if repeated
                               else None}
        if d.driver == "postgres":
            row["words"] = sorted(counts)
        else:
            row["body"] = fts_body(counts)
            row["first"] = search_row_id(doc.ms)
            row["last"] = row["first"] + (1 << _COUNTER_BITS) - 1
        params.append(row)
    return params


def insert_search_flow(params: list[dict[str, Any]], d: Dialect) -> Flow[None]:
    """Insert search rows (:func:`search_rows`)."""
    if params:
        yield Step("insert_search", params, "many")
        if d.driver == "sqlite":
            yield Step("insert_search_body", params, "many")


_MS_LIMIT, _COUNTER_BITS = 1 << 42, 20


def search_row_id(ms: int) -> int:
    """The lowest row id an SQLite search row of an entry at time ``ms`` gets (ids follow
    times: ``ms`` above a 20-bit counter, ``ms`` held within 2**42, year 2109)."""
    return max(-_MS_LIMIT, min(ms, _MS_LIMIT - 1)) << _COUNTER_BITS


def reindex_flow(session_id: str, d: Dialect) -> Flow[None]:
    """Build a session's search rows again from its stored lines (after a line was rewritten,
    such as a purge: what it no longer holds is no longer found)."""
    yield Step("delete_search", {"sid": session_id}, "none")
    yield Step("delete_search_keys", {"sid": session_id}, "none")
    rows = yield Step("session_lines", {"sid": session_id}, "all")
    yield from search_flow(session_id, [(seq, bytes(line)) for seq, line in rows], d)


def _backfill_search(d: Dialect, *, dotted: bool = False) -> Flow[None]:
    """The search rows of every entry stored before the search migration, a batch at a time
    (``dotted``: of the entries whose lines hold a capital I with a dot, their rows before
    deleted)."""
    after: tuple[str, int] = ("", -1)
    while True:
        rows = yield Step("backfill_dotted" if dotted else "backfill",
                          {"sid": after[0], "seq": after[1], "limit": 2000,
                           **(_NEEDLES if dotted else {})}, "all")
        if dotted and rows:
            keys = [{"sid": session_id, "seq": seq} for session_id, seq, _ in rows]
            yield Step("delete_entry_search", keys, "many")
            if d.driver == "sqlite":
                yield Step("delete_entry_search_keys", keys, "many")
        by_session: dict[str, list[tuple[int, bytes]]] = {}
        for session_id, seq, line in rows:
            by_session.setdefault(session_id, []).append((seq, bytes(line)))
        for session_id, lines in by_session.items():
            yield from search_flow(session_id, lines, d)
        if len(rows) < 2000:
            return
        after = (rows[-1][0], rows[-1][1])


def _backfill_usage() -> Flow[None]:
    """The usage columns of every session stored before the usage migration (those without
    entries were set by it), counted from its lines in stored order, a batch at a time."""
    after: tuple[str, int] = ("", -1)
    counting: tuple[str, ListingStats] | None = None
    while True:
        rows = yield Step("backfill", {"sid": after[0], "seq": after[1], "limit": 2000}, "all")
        done = []
        for session_id, _seq, line in rows:
            if counting is None or counting[0] != session_id:
                if counting is not None:
                    done.append(counting)
                counting = (session_id, ListingStats())
            listed_usage((bytes(line),), counting[1])
        if len(rows) < 2000 and counting is not None:
            done.append(counting)
        if done:
            yield Step("set_usage", [{"sid": sid, **_usage_columns(stats.usage)}
                                     for sid, stats in done], "many")
        if len(rows) < 2000:
            return
        after = (rows[-1][0], rows[-1][1])


def lock_flow(session_id: str, seen_created: str | None, seen_seq: int, where: str, *,
              catch_up: bool = True) -> Flow[tuple[SessionState | None, list[Record] | None]]:
    """Lock the session's row; the state, and (with ``catch_up``) the entries stored after
    ``seen_seq`` (all of them for a session not seen yet), or ``(None, None)`` for a session
    not stored yet.

    Raises:
        ConcurrentModification: the session seen was deleted or deleted and created again.
    """
    row = yield Step("lock", {"sid": session_id}, "one")
    if row is None:
        if seen_created is not None:
            raise ConcurrentModification(f"session {session_id} was deleted", path=where)
        return None, None
    state = SessionState.from_row(row)
    if seen_created is not None and state.created != seen_created:
        raise ConcurrentModification(f"session {session_id} was deleted and created again",
                                      path=where)
    fresh = None
    if catch_up and (seen_created is None or state.last_seq > seen_seq):
        rows = yield Step("after", {"sid": session_id, "seq": seen_seq}, "all")
        fresh = [record_from_row(r) for r in rows]
    return state, fresh


def write_flow(state: SessionState | None, session_id: str, lines: Sequence[bytes],
               header_line: bytes | None, d: Dialect, *, notify: bool
               ) -> Flow[tuple[SessionState, list[NewRow]]]:
    """Insert ``lines`` (and the session's row, for a session not stored yet) in the open,
    locked transaction; the session's state after, and the rows inserted."""
    new_session = state is None
    if state is None:
        if header_line is None:
            raise ValueError("the log has no header and none was given")
        state = SessionState.new(header_line, d)
        if state.session_id != session_id:
            raise ValueError("the header's id is not this log's session id")
    records = envelopes(lines)
    parents: dict[str, ParentInfo] = {}
    batch = {rec.id for rec in records}
    for rec in records:
        parent = rec.parent_id
        if parent is not None and parent not in batch and parent not in parents:
            found = yield Step("parent", {"sid": session_id, "id": d.key(parent, rec.id)}, "one")
            if found is not None:
                parents[parent] = ParentInfo.from_row(found)
    rows = plan_rows(state, lines, records, parents, d)
    if new_session:
        yield Step("insert_session", state.params(d), "none")
    if rows:
        yield Step("insert_entry", [row.params for row in rows], "many")
        yield from search_flow(state.session_id, [(r.params["seq"], r.params["line"])
                                                  for r in rows], d)
    yield Step("update_session", state.params(d), "none")
    if notify:
        yield Step("notify", {"sid": session_id}, "none")
    return state, rows
