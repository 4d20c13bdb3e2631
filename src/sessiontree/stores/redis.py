"""Sessions in Redis or Redis Cluster (redis-py; extra ``[redis]``): :class:`RedisStore`.

Keys, with ``P`` the store's key prefix (one per application; ``sessiontree`` by default) and
``{ID}`` the session id as the hash tag, so that every key of a session is in one slot:

* ``P:{ID}:meta``, a hash: the header line and the listing's fields (cwd, created, parent,
  name, first message, message and entry counts, latest activity, modified time, token and
  cost totals: ``_USAGE_FIELDS``, kept by the append script; a session stored before them has
  them counted and kept at its first listing by a writable store; ``incarnation``, a random
  token the script that stores the session sets, and ``replaced``, how many lines
  :meth:`RedisStore.replace_line` rewrote: what a rebuild of an index checks, :data:`_STAMP`);
* ``P:{ID}:lines``, a list: the entry lines, exact bytes, in append order;
* ``P:{ID}:ids``, a hash: entry id to its position in the list (from 1);
* ``P:{ID}:post`` and ``P:{ID}:recent`` (hashes) and ``P:{ID}:docs`` (a string): the search
  index, each word's postings (the latest in ``recent``, moved to ``post`` in runs of at most
  ``_RECENT_BYTES``) and each entry's time, role and size
  (:mod:`sessiontree.stores._redis_search`), written by the append script (the meta hash's
  ``indexed`` field, ``3``, marks a session that has it; ``2`` had each word's postings in
  ``post`` alone, which each append rewrote whole: this version's index without ``recent``,
  marked ``3`` by the first append or replaced line, or by :meth:`RedisStore.migrate`; ``1``
  the sorted set ``P:{ID}:words``, a member per word and entry, until
  :meth:`RedisStore.migrate` builds the index again);
* ``P:{ID}:tree`` and ``P:{ID}:labels``, hashes: the tree index (position to parent position,
  segment, depth and the path's last compaction, thinking level change and model source
  depths; entry id to its current label), written by the append script (a label entry's
  targets' labels by :meth:`RedisStore.replace_line`'s too); the meta hash's
  ``tree`` field marks a session that has it, which then opens as a :class:`RedisTreeLog`
  (head, paths and entries read as asked for), else as a :class:`RedisLog` (every line read:
  sessions stored before it, until :meth:`RedisStore.migrate`);
* ``P:sessions`` and ``P:cwd:<sha1 of the cwd>``, sorted sets: session ids by modified time,
  what a listing reads instead of the entries;
* ``P:w:<word>``, sets of session ids, ``P:searched``, session ids by their latest entry's
  time, and ``P:search``, the search index's version: what a search starts from.

Invariants:
* An append is one script, one round trip, and takes no lock (optimistic, as a compare and
  set): the writer sends how many lines it has read, and the script refuses the batch if the
  session holds more, returning those lines; the writer reads them in and plans again
  (:class:`~sessiontree.stores.base.LogBehind`), so a plan always sees every stored line, as
  under a lock, and a writer that dies mid-append holds nobody up. (Earlier versions took a
  ``P:{ID}:lock`` key with a lease; it expires by itself and delete removes it.)
* The append script checks that the session is the one the caller saw (same header line), that
  every id is new and every parent stored (or earlier in the batch), and only then pushes the
  lines and updates the counts, so an append lands whole under the leaf its caller saw or not at
  all. Sending the same batch again (a retry after a lost reply) finds its lines stored where
  the writer expected them and writes nothing (found anywhere else: ``DuplicateId``).
* On one server the append script updates the listing's sorted sets too. On a cluster they live
  in other slots: ``ZADD XX GT`` to them is sent beside the script (one round trip, not
  atomic with it) when the append's time is more than ``_LISTING_LAG_MS`` past the last one
  the store sent for the session, so a session's place lags its time by at most that (the
  script alone: back-to-back appends are one command on one node), and a ``limit``ed
  listing also reads the sessions within that of its last one and orders them by their rows.
  A writer that dies before a ``ZADD`` leaves the session's place in the order stale until
  the next append that sends one, a refused append may have raised it to the time of the
  messages it did not store; a listing reads each row from the session's hash, so names and
  counts are never stale, and skips ids without one.
  The words' sets and ``P:searched`` are written the same way (in the script on one server,
  as are a purge's, a rebuild's and a delete's, with the listing's, in theirs; beside it on a
  cluster, the sets of the words this store has not put the session in yet, and
  the latest time when more than ``_LISTING_LAG_MS`` past the one it last sent): a writer that
  dies before them leaves its new words unfound in that session until
  :meth:`RedisStore.reindex_search`; a set naming a session that does not hold the word (a
  refused append, a writer on a cluster that died after a delete's script) costs a look at
  that session,
  never a hit: a search judges the session's own postings, then its lines.
* Every script names in ``KEYS`` each key it reads or writes, on one server too (a cluster
  refuses any other, and a proxy in front of one server routes by them): a delete and a
  rebuilt search index read the session's words (and cwd) first, and their scripts check that
  they are still the session's, else are run again with what is read then.
* ``durable=True`` sends ``WAIT`` on the script's connection: an append returns once a replica
  holds it (waiting at most half the store's ``timeout``), else raises :class:`~sessiontree.errors.StoreUnavailable` (retrying is safe).
* Passwords never appear in :attr:`RedisStore.url`, errors or logs.
"""

from __future__ import annotations

import functools
import bisect
import hashlib
import io
import math
import re
import secrets
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from itertools import islice
from typing import Any
from urllib.parse import unquote, urlsplit

import msgspec

try:
    import redis
    from redis import exceptions as rx
    from redis.backoff import ExponentialBackoff
    from redis.cluster import ClusterNode, RedisCluster
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    from ..errors import MissingExtra

    raise MissingExtra("RedisStore requires the 'redis' extra: pip install "
                       "'sessiontree[redis]'") from exc

from .. import _json
from .._columns import Columns
from .._listing import ListingLine, ListingStats, cost_steps, listing_line, listing_row
from .._scan import FileRecord, Record, Scanner
from .._search import (
    CANDIDATES,
    Bounded,
    Candidate,
    SearchHit,
    best_first,
    bounds,
    parse_query,
    since_ms,
)
from .._time import iso_to_ms
from .._treelog import StoredEntries, TreeLog, current_branch
from ..entries import SessionHeader
from ..errors import (
    ConcurrentModification,
    DuplicateId,
    InvalidEntry,
    InvalidLocation,
    ReadOnlyStore,
    SessionLockedError,
    SessionNotFound,
    SessionTreeError,
    StoreUnavailable,
    UnsupportedVersion,
)
from ..usage import UsageTotals
from ._address import redacted, take_option
from . import _redis_search as _rs
from ._path import ChunkedPath
from .base import (
    LoadResult,
    LogBehind,
    LogHead,
    SessionListing,
    check_replacement,
    check_session_id,
)

__all__ = ["MigrationWarning", "RedisLog", "RedisStore", "RedisTreeLog", "cluster_seeds"]

SCHEMES = ("redis://", "rediss://", "redis+cluster://", "rediss+cluster://")
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")

_USAGE_FIELDS = ("usage_input", "usage_output", "usage_cache_read", "usage_cache_write",
                 "usage_cost")
"""The session's token and cost totals in its hash, as a listing counts them (the token counts
kept by HINCRBY, exact 64-bit integers; the cost as ``%.17g``, which gives the very double back).
Absent: not kept (a session stored before them, or a token total beyond 64 bits): a listing
counts the session's lines, and a writable store then keeps what it counted (:data:`_KEEP_USAGE`)."""

_SEARCH_VERSION = b"3"
"""The search index's version (``P:search``; a session's ``indexed`` field): postings per
word and session, the latest in ``recent`` (version 1 kept a sorted-set member per word and
entry; version 2 kept each word's postings in one field, which each append rewrote whole)."""

_SEARCHABLE = (b"2", _SEARCH_VERSION)
"""The store marks (``P:search``) of a store that searches: version 2's postings are this
version's with no recent part (:data:`_INDEXED_LUA` marks its sessions as this version)."""



def _newer(version: bytes | None) -> bool:
    """Whether a search index version (the store's mark, a session's ``indexed``) is one a
    later sessiontree wrote: this code would misread it, and overwrite it with its own."""
    return version is not None and version.isdigit() and int(version) > int(_SEARCH_VERSION)


def _newer_index(version: bytes, where: str, kept: str) -> UnsupportedVersion:
    """The error for a search index of a newer version (``kept``: what was left as it is)."""
    return UnsupportedVersion(f"search index version {version.decode()}, newer than this "
                              f"sessiontree knows ({_SEARCH_VERSION.decode()}); upgrade "
                              f"sessiontree. {kept}", path=where)


def _refuse_newer(reply: Any, where: str) -> None:
    """Raise :func:`_newer_index` for a script's reply ``{'newer', version}``: it found the
    session's search index a later sessiontree's, and wrote nothing."""
    if isinstance(reply, list) and reply and reply[0] == b"newer":
        raise _newer_index(reply[1], where, "Nothing was written")


_RECENT_BYTES = 1024
"""How long a word's recent postings grow (bytes) before an append moves them to the end of its
postings: an append copies at most this much of a word it brings, and a word's postings once
every so many appends bringing it, not each time."""

_SEARCH_LUA = (f"local SEARCH_VERSION = '{_SEARCH_VERSION.decode()}'\n"
               f"local RECENT_BYTES = {_RECENT_BYTES}\n" + """
local function newer(version)  -- a later sessiontree's index (as _newer): never overwritten
  return version and string.match(version, '^%d+$') ~= nil
    and tonumber(version) > tonumber(SEARCH_VERSION)
end
""")
"""The search index's version, :data:`_RECENT_BYTES` and :func:`_newer` for the scripts that
write the index."""

# Whether the session has this version's search index (to write it as such), ``version`` its
# ``indexed`` field (each caller has read it already, to refuse a newer one). A session of
# version 2 (each word's postings in post alone) holds this version's with no recent part: it
# is marked as this version, unless its docs lack a record of one of its n lines (an append of
# 4fcba23, which skipped version 2 sessions, left them out: :meth:`RedisStore.migrate` builds
# that session's index again).
_INDEXED_LUA = _SEARCH_LUA + f"""
local function current_index(meta, docs, n, version)
  if version == '2' and redis.call('STRLEN', docs) == n * {_rs.DOC.size} then
    redis.call('HSET', meta, 'indexed', SEARCH_VERSION)
    return true
  end
  return version == SEARCH_VERSION
end
"""

# The usage functions of the scripts. A usage spec is the batch's token counts (input, output,
# cache read, cache write: integers, as text) then the cost each entry adds, in order
# (:func:`sessiontree._listing.cost_steps`), space-separated: the costs are added one by one,
# as a listing adds them, so the total is the same double.
_USAGE_LUA = """
local USAGE = {%s}
local function start_usage(meta)
  redis.call('HSET', meta, USAGE[1], 0, USAGE[2], 0, USAGE[3], 0, USAGE[4], 0, USAGE[5], '0')
end
local function add_usage(meta, spec)
  if redis.call('HEXISTS', meta, USAGE[5]) == 0 then return end
  local parts = {}
  for part in string.gmatch(spec, '%%S+') do parts[#parts + 1] = part end
  for i = 1, 4 do
    if parts[i] ~= '0' then
      local done = redis.pcall('HINCRBY', meta, USAGE[i], parts[i])
      if type(done) == 'table' and done.err then  -- beyond 64 bits: not kept
        redis.call('HDEL', meta, unpack(USAGE))
        return
      end
    end
  end
  if #parts > 4 then
    local cost = tonumber(redis.call('HGET', meta, USAGE[5]))
    for i = 5, #parts do cost = cost + tonumber(parts[i]) end
    redis.call('HSET', meta, USAGE[5], string.format('%%.17g', cost))
  end
end
""" % ", ".join(f"'{field}'" for field in _USAGE_FIELDS)

# The tree index, shared by the append and the migration scripts: entry ``p`` (its position,
# from 1) gets ``tree[p] = "parent position, segment, depth, last compaction, thinking level
# change and model source depths"`` (0: none). A segment is a run of consecutive positions each
# the child of the one before; it is named by its first position, so the path to an entry is
# a few ranges of the lines list, one per segment, found by hopping from segment to segment.
# ``kind``: 'c' compaction, 't' thinking level change, 'm' model source, '' other. A label
# entry sets (value: '[label, timestamp]' JSON) or clears ('' ) ``labels[target]``.
_INDEX_ENTRY = """
local function index_entry(ids, tree, labels, p, parent, kind, target, value)
  local ppos, seg, depth, lc, lt, lm = 0, p, 1, 0, 0, 0
  if parent ~= '' then
    local at = redis.call('HGET', ids, parent)
    if at then
      ppos = tonumber(at)
      local f = {}
      for v in string.gmatch(redis.call('HGET', tree, ppos), '%d+') do f[#f + 1] = tonumber(v) end
      if ppos == p - 1 then seg = f[2] end
      depth, lc, lt, lm = f[3] + 1, f[4], f[5], f[6]
    end
  end
  if kind == 'c' then lc = depth elseif kind == 't' then lt = depth elseif kind == 'm' then lm = depth end
  redis.call('HSET', tree, p, ppos .. ' ' .. seg .. ' ' .. depth .. ' ' .. lc .. ' ' .. lt .. ' ' .. lm)
  if target ~= '' then
    if value ~= '' then redis.call('HSET', labels, target, value) else redis.call('HDEL', labels, target) end
  end
end
"""

# KEYS: meta, lines, ids, post, docs, tree, labels, recent, then on one server the listing's sorted
# sets and the search's (searched, then each word's set, in the order of the words below: the
# session joins those of the words new to it) and the store's search version mark, which a new
# session's script reads (on a cluster they are in other slots: updated beside the script, the
# mark read before it by RedisStore._mark_search_version). ARGV: mode (create | first | append | import | more: an import's
# later chunk, parents not checked), header line, cwd, created, parent, created ms, message
# count, first message, activity, name set (0/1), name, the number of lines the writer has
# read ('': no check), whether a new session's tree can be indexed (1/0: an import whose
# parents do not all come before their children), n, then n times: id, parent id ('' for
# none), line, kind, label target, label value (see _INDEX_ENTRY); then the batch's usage
# (_usage_spec), its search records, its latest time ('': none), how many listing keys, and
# m then m times a word and its postings (stores/_redis_search.py), then the incarnation token
# of a session this stores ('' for an append: see _STAMP), then the line the session's last
# must be for ``more`` ('' for no check: a completion refused, 'changed', if another took its
# place).
_APPEND = _INDEXED_LUA + _USAGE_LUA + _INDEX_ENTRY + """
local meta, lines, ids, post, docs, tree, labels, recent = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
  KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local mode, header, seen = ARGV[1], ARGV[2], ARGV[12]
local n = tonumber(ARGV[14])
local tail = 15 + 6 * n
local listings = tonumber(ARGV[tail + 3])
local sid = string.match(meta, '{([^}]*)}')
local stored = redis.call('HGET', meta, 'header')
if mode == 'append' or mode == 'more' then
  if not stored then return {'gone'} end
  if stored ~= header then return {'recreated'} end
elseif stored and mode == 'first' and stored ~= header then
  return {'behind', stored, redis.call('LRANGE', lines, 0, -1)}  -- another writer created it
elseif stored and mode ~= 'first' then
  return {'exists'}
end
local indexed = SEARCH_VERSION  -- (a session made here is marked so below)
if stored then  -- a later sessiontree's index would miss the lines: refused
  indexed = redis.call('HGET', meta, 'indexed')
  if newer(indexed) then return {'newer', indexed} end
elseif #KEYS > 8 + listings then  -- one server: a new session of a store a later one marked
  local marked = redis.call('GET', KEYS[#KEYS])
  if newer(marked) then return {'marked', marked} end
end
local function listed(modified)
  for i = 9, 8 + listings do redis.call('ZADD', KEYS[i], 'GT', modified, sid) end
end
local batch = {}
local again = 0
local first_again = nil
for i = 0, n - 1 do
  local id, parent, line = ARGV[15 + 6 * i], ARGV[16 + 6 * i], ARGV[17 + 6 * i]
  local at = redis.call('HGET', ids, id)
  if batch[id] then return {'dup', id} end
  if at then
    if redis.call('LINDEX', lines, tonumber(at) - 1) ~= line then return {'dup', id} end
    again = again + 1
    first_again = first_again or tonumber(at)
  elseif mode ~= 'import' and mode ~= 'more' and parent ~= '' and not batch[parent]
      and redis.call('HEXISTS', ids, parent) == 0 then
    return {'orphan', id, parent}
  end
  batch[id] = true
end
if again > 0 then
  if again < n then return {'dup', ARGV[15]} end
  local modified = tonumber(redis.call('HGET', meta, 'modified'))
  listed(modified)
  return {'ok', first_again, modified, 1, 1}
end
local first = redis.call('LLEN', lines) + 1
if seen ~= '' and first - 1 ~= tonumber(seen) then
  return {'behind', stored or false, redis.call('LRANGE', lines, tonumber(seen), -1)}
end
if mode == 'more' and ARGV[#ARGV] ~= '' and redis.call('LINDEX', lines, -1) ~= ARGV[#ARGV] then
  return {'changed'}
end
if not stored then
  redis.call('HSET', meta, 'header', header, 'cwd', ARGV[3], 'created', ARGV[4],
             'parent', ARGV[5], 'created_ms', ARGV[6], 'messages', 0, 'entries', 0,
             'first', '', 'name', '', 'activity', '', 'modified', tonumber(ARGV[6]) or 0,
             'indexed', SEARCH_VERSION, 'incarnation', ARGV[#ARGV - 1])
  if ARGV[13] == '1' then redis.call('HSET', meta, 'tree', 1) end
end
local indexing = redis.call('HGET', meta, 'tree') == '1'
for i = 0, n - 1 do
  local at = 15 + 6 * i
  redis.call('RPUSH', lines, ARGV[at + 2])
  redis.call('HSET', ids, ARGV[at], first + i)
  if indexing then
    index_entry(ids, tree, labels, first + i, ARGV[at + 1], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5])
  end
end
local fresh = {}  -- the words new to the session
if current_index(meta, docs, first - 1, indexed) then
  redis.call('APPEND', docs, ARGV[tail + 1])
  local words = tonumber(ARGV[tail + 4])
  local sets = #KEYS > 8 + listings  -- one server: the search's keys across sessions too
  for j = 0, words - 1 do
    local word, add = ARGV[tail + 5 + 2 * j], ARGV[tail + 6 + 2 * j]
    local old = redis.call('HGET', recent, word)
    if not old and redis.call('HEXISTS', post, word) == 0 then
      fresh[#fresh + 1] = word
      if sets then redis.call('SADD', KEYS[10 + listings + j], sid) end
    end
    old = (old or '') .. add
    if #old > RECENT_BYTES then  -- moved to the end of the word's postings
      redis.call('HSET', post, word, (redis.call('HGET', post, word) or '') .. old)
      redis.call('HDEL', recent, word)
    else
      redis.call('HSET', recent, word, old)
    end
  end
  if sets and ARGV[tail + 2] ~= '' then
    redis.call('ZADD', KEYS[9 + listings], 'GT', ARGV[tail + 2], sid)
  end
end
redis.call('HINCRBY', meta, 'entries', n)
redis.call('HINCRBY', meta, 'messages', tonumber(ARGV[7]))
if ARGV[8] ~= '' and redis.call('HGET', meta, 'first') == '' then
  redis.call('HSET', meta, 'first', ARGV[8])
end
local activity = redis.call('HGET', meta, 'activity')
if ARGV[9] ~= '' and (activity == '' or tonumber(ARGV[9]) > tonumber(activity)) then
  activity = ARGV[9]
  redis.call('HSET', meta, 'activity', activity)
end
if ARGV[10] == '1' then redis.call('HSET', meta, 'name', ARGV[11]) end
local old = tonumber(redis.call('HGET', meta, 'modified'))
local modified = tonumber(redis.call('HGET', meta, 'created_ms')) or 0
if activity ~= '' and tonumber(activity) > 0 then modified = math.floor(tonumber(activity)) end
redis.call('HSET', meta, 'modified', modified)
local changed = 0
if modified ~= old or not stored then changed = 1 end
if not stored then start_usage(meta) end
add_usage(meta, ARGV[tail])
listed(modified)
return {'ok', first, modified, changed, 0, fresh}
"""

# What a rebuild of a session's index (search or tree) read the session as, before its lines:
# its incarnation (a token the script storing it set: a session deleted and stored again has
# another, even with the same header and as many lines) and how many lines replace_line
# rewrote, space-separated (as RedisStore._stamp reads them): a rebuild whose script finds
# another, or another number of lines, is overtaken and reads the lines again.
_STAMP = """
local function stamp(meta)
  local f = redis.call('HMGET', meta, 'incarnation', 'replaced')
  return (f[1] or '') .. ' ' .. (f[2] or '')
end
"""

# KEYS: meta, lines, ids, tree, labels. ARGV: n, then for each stored line in order: parent id,
# kind, label target, label value, then the session's _STAMP read before the lines. Builds
# the tree index of a session stored before it had one, if it is still the session read with
# n lines; returns 'ok', 'gone', 'changed' or {'newer', version} (a later sessiontree's search
# index, whose tree index may be another: nothing written).
_INDEX_TREE = _SEARCH_LUA + _INDEX_ENTRY + _STAMP + """
if not redis.call('HGET', KEYS[1], 'header') then return 'gone' end
local indexed = redis.call('HGET', KEYS[1], 'indexed')
if newer(indexed) then return {'newer', indexed} end
local n = tonumber(ARGV[1])
if redis.call('LLEN', KEYS[2]) ~= n or stamp(KEYS[1]) ~= ARGV[#ARGV] then return 'changed' end
redis.call('DEL', KEYS[4], KEYS[5])
for p = 1, n do
  local at = 2 + 4 * (p - 1)
  index_entry(KEYS[3], KEYS[4], KEYS[5], p, ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
end
redis.call('HSET', KEYS[1], 'tree', 1)
return 'ok'
"""

# KEYS: meta, lines. A session's header line, entry count, name, whether it has a tree index
# ('1') and last line; {} when there is no session.
_HEAD = """
local m = redis.call('HMGET', KEYS[1], 'header', 'entries', 'name', 'tree')
if not m[1] then return {} end
return {m[1], m[2] or '0', m[3] or '', m[4] or '', redis.call('LINDEX', KEYS[2], -1) or ''}
"""

# KEYS: ids, lines. ARGV: an entry id. {position, line}, or false for no such entry.
_RECORD = """
local at = redis.call('HGET', KEYS[1], ARGV[1])
if not at then return false end
return {at, redis.call('LINDEX', KEYS[2], tonumber(at) - 1)}
"""

# KEYS: meta, ids, tree. ARGV: an entry id. The path to the entry as segments, from its own
# back to the root's: {last compaction, thinking and model depths, depth, then for each
# segment: its first position and the position where the path leaves it}; {} when there is
# no such entry or the session has no tree index.
_TREE_FIELDS = """
local function fields(p)
  local f = {}
  for v in string.gmatch(redis.call('HGET', KEYS[3], p), '%d+') do f[#f + 1] = tonumber(v) end
  return f
end
"""
_PATH = _TREE_FIELDS + """
local at = redis.call('HGET', KEYS[2], ARGV[1])
if not at or redis.call('HGET', KEYS[1], 'tree') ~= '1' then return {} end
local p = tonumber(at)
local f = fields(p)
local out = {f[4], f[5], f[6], f[3]}
while true do
  out[#out + 1] = f[2]
  out[#out + 1] = p
  local parent = fields(f[2])[1]
  if parent == 0 then return out end
  p = parent
  f = fields(p)
end
"""

# KEYS: meta, lines, tree. ARGV: positions. Whether each is on the path from the root to the
# session's last entry (the leaf it resumes at), 1 or 0, walked segment by segment; false when
# the session has no tree index.
_ON_PATH = _TREE_FIELDS + """
if redis.call('HGET', KEYS[1], 'tree') ~= '1' then return false end
local out = {}
for i = 1, #ARGV do out[i] = 0 end
local p = redis.call('LLEN', KEYS[2])
while p > 0 do
  local first = fields(p)[2]
  for i = 1, #ARGV do
    local at = tonumber(ARGV[i])
    if at >= first and at <= p then out[i] = 1 end
  end
  p = fields(first)[1]
end
return out
"""

# KEYS: every key of the session (meta first, its search postings fourth and their recent
# part sixth), then on one server the sorted sets of all sessions, of the session's cwd and of
# the searched ones, and the set of each word of ARGV (on a cluster these are in other slots).
# ARGV: on one server the session's cwd and its words, as the caller read them (a script
# names every key it touches, so the caller reads them first; the script checks that they are
# still the session's). Returns {'ok', the session's cwd, the words whose sets the caller must
# still take it out of (all on a cluster, none on one server)}, 'changed' (one server: the cwd
# or the words are not those read: read them again), false when there is no session, or
# {'newer', version} (a later sessiontree's index, whose keys this code may not all know:
# nothing deleted).
_DELETE = _SEARCH_LUA + """
local cwd = redis.call('HGET', KEYS[1], 'cwd')
if not cwd then return false end
local indexed = redis.call('HGET', KEYS[1], 'indexed')
if newer(indexed) then return {'newer', indexed} end
local words, held = {}, {}
for _, hash in ipairs({KEYS[4], KEYS[6]}) do
  for _, word in ipairs(redis.call('HKEYS', hash)) do
    if not held[word] then held[word] = true; words[#words + 1] = word end
  end
end
if #ARGV == 0 then
  redis.call('DEL', unpack(KEYS))
  return {'ok', cwd, words}
end
if cwd ~= ARGV[1] or #words ~= #ARGV - 1 then return 'changed' end
for i = 2, #ARGV do
  if not held[ARGV[i]] then return 'changed' end
end
local sid = string.match(KEYS[1], '{([^}]*)}')
local n = #KEYS - #ARGV - 2  -- the session's own keys
redis.call('DEL', unpack(KEYS, 1, n))
for i = n + 1, n + 3 do redis.call('ZREM', KEYS[i], sid) end
for i = n + 4, #KEYS do redis.call('SREM', KEYS[i], sid) end
return {'ok', cwd, {}}
"""

# KEYS: meta, lines, ids, post, docs, recent, labels, then on one server the searched sessions'
# sorted set and the set of each word below, in order (on a cluster they are in other slots:
# the caller writes them after). ARGV: entry id, its line as read, the new line, the listing's
# first message as read, the new one, the number of lines read, the usage spec of them all (the
# line replaced), the new line's search record, its time ('': no text), the session's _STAMP
# read before the lines, k, then k times a label target and its label value from the lines
# read with the new one (see _INDEX_ENTRY: the targets of a label entry's old and new line),
# then for each word of the old or the new line: the word, its postings and their recent part
# as read ('': none) and the postings they become ('': none; all in ``post``). Replaces
# the line in place if it is still the one read, and its search postings if they are still the
# ones read (on one server the session leaves the sets of the words it no longer holds and
# joins the others'), its targets' labels (a session with a tree index) if the session still
# holds the lines read (a line since, or another replaced, may label them), and keeps the
# totals counted again (if no line came since: else they are left to the next listing to
# count); returns 'ok', 'gone' (no session), 'missing' (no such entry), 'changed' (the line
# changed), 'moved' (postings or lines changed: read them again) or {'newer', version} (a later
# sessiontree's index, which would keep the old line's words).
_REPLACE = _INDEXED_LUA + _USAGE_LUA + _STAMP + """
if not redis.call('HGET', KEYS[1], 'header') then return 'gone' end
local version = redis.call('HGET', KEYS[1], 'indexed')
if newer(version) then return {'newer', version} end
local at = redis.call('HGET', KEYS[3], ARGV[1])
if not at then return 'missing' end
at = tonumber(at)
if redis.call('LINDEX', KEYS[2], at - 1) ~= ARGV[2] then return 'changed' end
local labelled = tonumber(ARGV[11])
if labelled > 0 and (redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[6])
    or stamp(KEYS[1]) ~= ARGV[10]) then
  return 'moved'
end
local edits = 12 + 2 * labelled
local indexed = current_index(KEYS[1], KEYS[5], redis.call('LLEN', KEYS[2]), version)
if indexed then
  for i = edits, #ARGV, 4 do
    if (redis.call('HGET', KEYS[4], ARGV[i]) or '') ~= ARGV[i + 1]
        or (redis.call('HGET', KEYS[6], ARGV[i]) or '') ~= ARGV[i + 2] then
      return 'moved'
    end
  end
  local sid = string.match(KEYS[1], '{([^}]*)}')
  local sets = #KEYS > 7  -- one server
  for i = edits, #ARGV, 4 do
    local set = KEYS[9 + (i - edits) / 4]
    redis.call('HDEL', KEYS[6], ARGV[i])
    if ARGV[i + 3] == '' then
      redis.call('HDEL', KEYS[4], ARGV[i])
      if sets then redis.call('SREM', set, sid) end
    else
      redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 3])
      if sets then redis.call('SADD', set, sid) end
    end
  end
  if sets and ARGV[9] ~= '' then redis.call('ZADD', KEYS[8], 'GT', ARGV[9], sid) end
  redis.call('SETRANGE', KEYS[5], (at - 1) * string.len(ARGV[8]), ARGV[8])
end
if labelled > 0 and redis.call('HGET', KEYS[1], 'tree') == '1' then
  for i = 12, edits - 1, 2 do
    if ARGV[i + 1] ~= '' then
      redis.call('HSET', KEYS[7], ARGV[i], ARGV[i + 1])
    else
      redis.call('HDEL', KEYS[7], ARGV[i])
    end
  end
end
redis.call('LSET', KEYS[2], at - 1, ARGV[3])
redis.call('HINCRBY', KEYS[1], 'replaced', 1)
if redis.call('HGET', KEYS[1], 'first') == ARGV[4] then redis.call('HSET', KEYS[1], 'first', ARGV[5]) end
redis.call('HDEL', KEYS[1], unpack(USAGE))
if redis.call('LLEN', KEYS[2]) == tonumber(ARGV[6]) then
  start_usage(KEYS[1])
  add_usage(KEYS[1], ARGV[7])
end
return 'ok'
"""

# KEYS: the store's search version mark. Marks the store with this code's version unless a
# later version marked it meanwhile; returns the mark it leaves.
_MARK_SEARCH = _SEARCH_LUA + """
local marked = redis.call('GET', KEYS[1])
if newer(marked) then return marked end
redis.call('SET', KEYS[1], SEARCH_VERSION)
return SEARCH_VERSION
"""

# KEYS: meta, lines. ARGV: the header line read, the number of lines read, their usage spec.
# Keeps the totals a listing counted for a session that has none kept, if it is still the
# session read and no line came since.
_KEEP_USAGE = _USAGE_LUA + """
if redis.call('HEXISTS', KEYS[1], USAGE[5]) == 1 or redis.call('HGET', KEYS[1], 'header') ~= ARGV[1]
    or redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[2]) then
  return 0
end
start_usage(KEYS[1])
add_usage(KEYS[1], ARGV[3])
return 1
"""

# KEYS: meta, lines, post, docs, the search index of version 1 (a sorted set of 'word
# position'), recent, then on one server the searched sessions' sorted set and the set of each
# word of ARGV, in order (on a cluster they are in other slots: the caller writes them after).
# ARGV: n, the search records of the session's n lines, their latest time ('': none with
# text), m, the session's _STAMP read before the lines, then m times a
# word and its postings, then on one server the words the session held as the caller read
# them and no longer holds (a script names every key it touches: the script checks that the
# session holds no other). Builds the session's search index again from its lines if it still
# is the session read with those n (none came, none was replaced and it was not deleted and
# stored again: same stamp; on one server the session leaves the sets of the words it no longer holds and joins the
# others'); returns {'ok', the words it held before (none on one server)}, {'gone'} or
# {'changed'} (lines came or were replaced, or on one server words the caller did not read) or
# {'newer', version} (a later sessiontree's index: nothing written).
_REINDEX = _SEARCH_LUA + _STAMP + """
if not redis.call('HGET', KEYS[1], 'header') then return {'gone'} end
local indexed = redis.call('HGET', KEYS[1], 'indexed')
if newer(indexed) then return {'newer', indexed} end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[1])
    or stamp(KEYS[1]) ~= ARGV[5] then
  return {'changed'}
end
local m = tonumber(ARGV[4])
local old = redis.call('HKEYS', KEYS[3])
for _, word in ipairs(redis.call('HKEYS', KEYS[6])) do old[#old + 1] = word end
local sets = #KEYS > 6  -- one server
if sets then
  local named = {}
  for i = 6, 5 + 2 * m, 2 do named[ARGV[i]] = true end  -- the new words
  for i = 6 + 2 * m, #ARGV do named[ARGV[i]] = true end  -- the words the caller read
  for _, word in ipairs(old) do
    if not named[word] then return {'changed'} end
  end
end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('SET', KEYS[4], ARGV[2])
for i = 6, 5 + 2 * m, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'indexed', SEARCH_VERSION)
if not sets then return {'ok', old} end
local sid = string.match(KEYS[1], '{([^}]*)}')
for j = 8, 7 + m do redis.call('SADD', KEYS[j], sid) end
for j = 8 + m, #KEYS do redis.call('SREM', KEYS[j], sid) end
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[7], 'GT', ARGV[3], sid) end
return {'ok', {}}
"""

# KEYS: meta, docs, lines. Marks a session of search index version 2 as this version (see
# _INDEXED_LUA); 1 if it has this version's index now, else 0 (its index must be built again),
# {'newer', version} for a later sessiontree's index (nothing written).
_UPGRADE = _INDEXED_LUA + """
local indexed = redis.call('HGET', KEYS[1], 'indexed')
if newer(indexed) then return {'newer', indexed} end
return current_index(KEYS[1], KEYS[2], redis.call('LLEN', KEYS[3]), indexed) and 1 or 0
"""

_LISTING_LAG_MS = 1000
"""On a cluster, how far (in ms) a session's place in the listing's order may lag its modified
time: an append sends the listing's ``ZADD``s only when its time is more than this past the
last one its store sent for the session, so that back-to-back appends are one script on one
node; a ``limit``ed listing reads the sessions within this of its last row too (:data:`_NEWEST`)
and orders them by their rows, so it lists the same sessions as an exact order would."""

# KEYS: a listing's sorted set. ARGV: how many, the lag (ms). The ids of the newest n by score,
# and the ids after them whose score is within the lag of the n-th's, newest first.
_NEWEST = """
local n = tonumber(ARGV[1])
local top = redis.call('ZREVRANGE', KEYS[1], 0, n - 1, 'WITHSCORES')
if #top < 2 * n then
  local ids = {}
  for i = 1, #top, 2 do ids[#ids + 1] = top[i] end
  return ids
end
return redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf',
                  string.format('%.17g', tonumber(top[#top]) - tonumber(ARGV[2])))
"""

class MigrationWarning(UserWarning):
    """Sessions :meth:`RedisStore.migrate` passed over because they were deleted while it ran
    (nothing of them is left to migrate); every other session was migrated."""


_TRIES = 8
"""How often a purge, or a rebuild of a session's search or tree index, reads the session and
runs its script when appends keep coming in between (each try reads every line again), before
it gives up (:func:`_kept_changing`)."""

_PAGE = 32
"""Sessions a search visits first (then as many as seem to hold the candidates missing)."""

_LISTING_FIELDS = ("header", "cwd", "created", "parent", "name", "first", "messages", "entries",
                   "activity", "modified", *_USAGE_FIELDS)


def cluster_seeds(url: str) -> list[tuple[str, int]]:
    """The seed nodes a ``redis+cluster://host:port,host:port`` URL names.

    Raises:
        InvalidLocation: a node without a port, or none at all.
    """
    hosts = urlsplit(url).netloc.rsplit("@", 1)[-1]
    seeds = []
    for node in filter(None, hosts.split(",")):
        host, _, port = node.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidLocation(f"a cluster node is host:port, not {node!r}", path=redacted(url))
        seeds.append((host.strip("[]"), int(port)))
    if not seeds:
        raise InvalidLocation("a cluster URL names at least one node (host:port)",
                              path=redacted(url))
    return seeds


def _split_prefix(url: str, prefix: str | None) -> tuple[str, str]:
    """``(url without our prefix=..., prefix)``; an explicit ``prefix`` wins.

    Raises:
        InvalidLocation: a prefix that could hold a hash tag or is not plain.
    """
    rest, found = take_option(url, "prefix")
    chosen = prefix if prefix is not None else found if found is not None else "sessiontree"
    if not _PREFIX.fullmatch(chosen):
        raise InvalidLocation(f"not a plain key prefix: {chosen!r} (letters, digits, '.', '_', "
                              "':' and '-', at most 64; no braces, which would be a hash tag)",
                              path=redacted(url))
    return rest, chosen


_STAMP_FIELDS = ("incarnation", "replaced")
"""The meta hash's fields that say which session a rebuild read (see ``_STAMP``)."""


def _stamp(fields: Sequence[bytes | None]) -> bytes:
    """A session's stamp as ``_STAMP`` makes it, from its :data:`_STAMP_FIELDS` as read."""
    return b" ".join(field or b"" for field in fields)


def _kept_changing(what: str, where: str) -> ConcurrentModification:
    """The error of a write that appends overtook :data:`_TRIES` times."""
    return ConcurrentModification(f"the session kept changing while {what} ({_TRIES} tries, "
                                  "each overtaken by an append); nothing was written, try again",
                                  path=where)


def _error(exc: Exception, url: str, *, writing: bool) -> SessionTreeError | None:
    """The sessiontree error for a redis-py error (``None``: not one we translate)."""
    reason = " ".join(str(exc).split())
    if isinstance(exc, rx.NoPermissionError) or (  # in a script: a plain error
            isinstance(exc, rx.ResponseError) and "user executing the script can't" in reason):
        if writing:
            return ReadOnlyStore(f"the server refused a write: {reason}", path=url)
        return StoreUnavailable(f"the server refused: {reason}", path=url)
    if isinstance(exc, rx.AuthenticationError):
        return StoreUnavailable(f"the server refused the credentials: {reason}", path=url)
    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, rx.ClusterError, rx.TryAgainError,
                        rx.ReadOnlyError, rx.RedisClusterException)):
        return StoreUnavailable(f"the Redis server cannot be used: {reason or type(exc).__name__}"
                                "; retry when it is back (an append retried is stored once)",
                                path=url)
    if isinstance(exc, rx.ResponseError) and reason.startswith("LOADING"):
        return StoreUnavailable(f"the Redis server is loading its data: {reason}", path=url)
    return None


class RedisStore(StoredEntries):
    """Sessions in Redis (one server) or Redis Cluster. Open with :meth:`from_url`.

    Addresses: ``redis://[user[:password]@]host[:port][/db]`` (``rediss://`` for TLS) and
    ``redis+cluster://[user[:password]@]host:port[,host:port...]`` (``rediss+cluster://``)
    naming seed nodes of a cluster; ``?prefix=NAME`` sets the key prefix, other parameters go
    to redis-py (one server only); ``#ID`` names a session.
    """

    def __init__(self, url: str, *, prefix: str | None = None, read_only: bool = False,
                 durable: bool = False, replicas: int = 1, timeout: float = 5.0,
                 lock_timeout: float = 10.0) -> None:
        """Connect and check that the server answers.

        Args:
            url: the address (see the class docstring).
            prefix: the key prefix (default: the URL's ``prefix=``, else ``sessiontree``).
            read_only: refuse every write.
            durable: every append waits until ``replicas`` replicas hold it (``WAIT``).
            replicas: how many replicas a durable append waits for.
            timeout: seconds for a connection and a reply; a durable append's ``WAIT`` waits
                half of it.
            lock_timeout: seconds an append keeps trying while other writers of the session
                append first (:class:`~sessiontree.errors.SessionLockedError` after).

        Raises:
            InvalidLocation: not a Redis address, or a bad prefix.
            StoreUnavailable: the server cannot be reached or refuses the credentials.
        """
        if not url.startswith(SCHEMES):
            raise InvalidLocation(f"not a Redis address (one of {', '.join(SCHEMES)})",
                                  path=redacted(url))
        base, self.prefix = _split_prefix(url, prefix)
        self._public = redacted(base)
        self.read_only = read_only
        self.durable = durable
        self.replicas = replicas
        self._timeout = timeout
        self.lock_timeout = lock_timeout
        self._listed: dict[str, int] = {}  # cluster: session id -> time of the last ZADDs sent
        self.cluster = "+cluster://" in base
        options: dict[str, Any] = {"socket_timeout": timeout,
                                   "socket_connect_timeout": timeout}
        try:
            if self.cluster:
                parts = urlsplit(base)
                if parts.path.strip("/"):
                    raise InvalidLocation("a cluster has no database number (no /db)",
                                          path=self._public)
                self._client: Any = RedisCluster(
                    startup_nodes=[ClusterNode(h, p)  # type: ignore[no-untyped-call]
                                   for h, p in cluster_seeds(base)],
                    username=unquote(parts.username) if parts.username else None,
                    password=unquote(parts.password) if parts.password else None,
                    ssl=base.startswith("rediss"), require_full_coverage=False,
                    retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2), **options)
            else:
                self._client = redis.Redis.from_url(base, **options)
            self._client.ping()
        except ValueError as exc:
            raise InvalidLocation(f"not a Redis address: {exc}", path=self._public) from None
        except rx.RedisError as exc:
            error = _error(exc, self.url, writing=False)
            if error is None:
                raise
            raise error from None
        except rx.RedisClusterException as exc:
            raise StoreUnavailable(f"the Redis cluster cannot be used: {exc}",
                                   path=self.url) from None
        self._append_script = self._client.register_script(_APPEND)
        self._delete_script = self._client.register_script(_DELETE)
        self._replace_script = self._client.register_script(_REPLACE)
        self._reindex_script = self._client.register_script(_REINDEX)
        self._upgrade_script = self._client.register_script(_UPGRADE)
        self._keep_usage_script = self._client.register_script(_KEEP_USAGE)
        self._mark_search_script = self._client.register_script(_MARK_SEARCH)
        self._index_tree_script = self._client.register_script(_INDEX_TREE)
        self._path_script = self._client.register_script(_PATH)
        self._head_script = self._client.register_script(_HEAD)
        self._record_script = self._client.register_script(_RECORD)
        self._newest_script = self._client.register_script(_NEWEST)
        self._on_path_script = self._client.register_script(_ON_PATH)
        self._search_ready: bool | None = None
        """Whether every session has this version's search index: ``None`` not known yet;
        ``False``: the store holds sessions stored before it (until :meth:`migrate`, which marks
        it: no create of this store needs to ask again, a search does)."""
        self._searched: dict[str, tuple[int | None, set[str]]] = {}  # cluster: see _search_due

    @classmethod
    def from_url(cls, url: str, *, prefix: str | None = None, read_only: bool = False,
                 durable: bool = False, replicas: int = 1, timeout: float = 5.0,
                 lock_timeout: float = 10.0) -> RedisStore:
        """The store at ``url``; use it as a context manager. See :meth:`__init__`."""
        return cls(url, prefix=prefix, read_only=read_only, durable=durable,
                   replicas=replicas, timeout=timeout, lock_timeout=lock_timeout)

    @property
    def url(self) -> str:
        """The store's address, without its password, with its prefix."""
        separator = "&" if urlsplit(self._public).query else "?"
        return f"{self._public}{separator}prefix={self.prefix}"

    def session_url(self, session_id: str) -> str:
        return f"{self.url}#{session_id}"

    # -- keys and commands ------------------------------------------------------------------

    def keys(self, session_id: str) -> tuple[str, str, str]:
        """The session's meta, lines and ids keys (one slot: the id is their hash tag)."""
        tag = f"{self.prefix}:{{{session_id}}}"
        return f"{tag}:meta", f"{tag}:lines", f"{tag}:ids"

    def search_keys(self, session_id: str) -> tuple[str, str]:
        """The session's search index, in its slot: its words' postings (a hash) and its
        entries' search records (a string; both :mod:`sessiontree.stores._redis_search`)."""
        tag = f"{self.prefix}:{{{session_id}}}"
        return f"{tag}:post", f"{tag}:docs"

    def word_key(self, word: str) -> bytes:
        """The set of the ids of the sessions holding ``word`` (a word is letters and digits:
        never a hash tag)."""
        return f"{self.prefix}:w:".encode() + _text(word)

    def tree_keys(self, session_id: str) -> tuple[str, str]:
        """The session's tree index (see ``_INDEX_ENTRY``): a hash of position to parent
        position, segment, depth and the path's last compaction, thinking level change and
        model source; and a hash of entry id to its current label (``[label, timestamp]``)."""
        tag = f"{self.prefix}:{{{session_id}}}"
        return f"{tag}:tree", f"{tag}:labels"

    def session_keys(self, session_id: str) -> list[str]:
        """Every key a session may have (all in its slot), what deleting it removes: the
        ``words`` and ``lock`` keys are ones earlier versions wrote (a search index of a member
        per word and entry: :meth:`_legacy_words_key`; a lock taken while appending)."""
        return [*self.keys(session_id), *self.search_keys(session_id),
                self._recent_key(session_id), self._legacy_words_key(session_id),
                *self.tree_keys(session_id),
                f"{self.prefix}:{{{session_id}}}:lock"]

    def _recent_key(self, session_id: str) -> str:
        """The session's recent postings (a hash, in its slot): each word's postings appended
        since they were last moved to ``post`` (a word's postings are its ``post`` value then
        this one)."""
        return f"{self.prefix}:{{{session_id}}}:recent"

    def _legacy_words_key(self, session_id: str) -> str:
        """The search index of version 1 (a sorted set of 'word position'), in the session's
        slot: what :meth:`reindex_search` replaces."""
        return f"{self.prefix}:{{{session_id}}}:words"

    @property
    def _searched_key(self) -> str:
        """Session ids by the time of their latest entry with text (see ``_redis_search``)."""
        return f"{self.prefix}:searched"

    @property
    def _search_version_key(self) -> str:
        """Set (to ``2``) when every session of the store has the search index of this version:
        by the first session stored in an empty store, and by :meth:`migrate`."""
        return f"{self.prefix}:search"

    @property
    def _cwd_prefix(self) -> str:
        """The name of a cwd's sorted set without the SHA-1 of the cwd (see :meth:`_index_keys`)."""
        return f"{self.prefix}:cwd:"

    def _index_keys(self, cwd: str | None) -> list[str]:
        keys = [f"{self.prefix}:sessions"]
        if cwd is not None:
            digest = hashlib.sha1(cwd.encode("utf-8", "surrogatepass")).hexdigest()
            keys.append(f"{self._cwd_prefix}{digest}")
        return keys

    @contextmanager
    def _errors(self, *, writing: bool = False) -> Iterator[None]:
        try:
            yield
        except (rx.RedisError, rx.RedisClusterException) as exc:
            error = _error(exc, self.url, writing=writing)
            if error is None:
                raise
            raise error from None

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStore("the store was opened read-only; nothing was written",
                                path=self.url)

    def _run_append(self, session_id: str, args: list[Any], cwd: str, found: _rs.Batch,
                    incarnation: str, tail: bytes, listed: int | None = None
                    ) -> tuple[list[Any], bool]:
        """The append script on the session's slot (``WAIT`` after it when durable), and
        whether the listing's sorted sets need no update now: on one server the script does
        it, and adds the session to its words' sets; on a cluster these are in other slots: the
        writes to the search's keys this store has not sent yet (:meth:`_search_due`) and, when
        ``listed`` (the batch's modified time) is given and more than :data:`_LISTING_LAG_MS`
        past what this store last sent for the session (:meth:`_listing_due`), ``ZADD XX GT``
        to the listing's sets, are sent beside the script when the append is not durable,
        every node written to before any reply is read (one round trip; the script alone when
        none is due); else (or if the script's node did not run it) the script alone,
        redirections followed, and the search's writes after it."""
        keys: list[Any] = [*self.keys(session_id), *self.search_keys(session_id),
                           *self.tree_keys(session_id), self._recent_key(session_id)]
        words = [item for word, postings in found.postings.items()
                 for item in (_text(word), postings)]
        with self._errors(writing=True):
            if not self.cluster:
                listing = self._index_keys(cwd)
                search: list[Any] = [self._searched_key, *map(self.word_key, found.postings),
                                     self._search_version_key]
                return self._pipelined(self._client, [*keys, *listing, *search], [
                    *args, len(listing), len(found.postings), *words, incarnation, tail]), True
            args = [*args, 0, len(found.postings), *words, incarnation, tail]
            words_due, latest = self._search_due(session_id, found)
            beside = self._search_writes(session_id, words_due, latest)
            if not self.durable:
                sends = [(keys[0], ("EVALSHA", self._append_script.sha, len(keys), *keys, *args)),
                         *beside]
                due = listed is not None and self._listing_due(session_id, listed)
                if due:
                    sends += [(key, ("ZADD", key, "XX", "GT", listed, session_id))
                              for key in self._index_keys(cwd)]
                replies = self._side_by_side(sends)
                if not isinstance(replies[0], Exception):
                    self._send([write for write, reply in zip(beside, replies[1:])
                                if isinstance(reply, Exception)]  # (moved meanwhile)
                               + self._search_late(session_id, replies[0], words_due))
                    self._search_sent(session_id, words_due, latest)
                    done = not any(isinstance(r, Exception) for r in replies[1 + len(beside):])
                    if due and done:
                        assert listed is not None
                        self._listing_sent(session_id, listed)
                    return replies[0], listed is not None and done
            reply = self._redirected(session_id, keys, args)
            if reply[0] == b"ok":
                self._send(beside + self._search_late(session_id, reply, words_due))
                self._search_sent(session_id, words_due, latest)
            return reply, False

    def _listing_due(self, session_id: str, modified: int) -> bool:
        """Whether the listing's sorted sets must hear of ``modified`` now (a cluster): it is
        more than :data:`_LISTING_LAG_MS` past the last time this store sent them for the
        session (the sets hold at least that: ``GT`` never lowers a score)."""
        last = self._listed.get(session_id)
        return last is None or modified - last > _LISTING_LAG_MS

    def _listing_sent(self, session_id: str, modified: int) -> None:
        """Remember that the sorted sets took ``modified`` for the session (forgetting every
        session now and then: one forgotten is only sent again)."""
        if len(self._listed) >= 65536:
            self._listed.clear()
        self._listed[session_id] = max(modified, self._listed.get(session_id, modified))

    def _search_writes(self, session_id: str, words: Iterable[str],
                       latest: int | None) -> list[tuple[str | bytes, tuple[Any, ...]]]:
        """The writes to the search's keys across sessions: the session in these words' sets,
        its latest time raised to ``latest`` (``None``: not)."""
        writes: list[tuple[str | bytes, tuple[Any, ...]]] = [
            (key, ("SADD", key, session_id)) for key in map(self.word_key, words)]
        if latest is not None:
            writes.append((self._searched_key, ("ZADD", self._searched_key, "GT", latest,
                                                session_id)))
        return writes

    def _search_due(self, session_id: str, found: _rs.Batch) -> tuple[list[str], int | None]:
        """What an append on a cluster sends to the search's keys beside its script: the
        session into the sets of its words this store has not put it in, and its latest time
        when more than :data:`_LISTING_LAG_MS` past the last this store sent (a search visits
        the sessions within that of its last candidate too), so that most appends to a session
        write to its node alone."""
        last, known = self._searched.get(session_id, (None, set()))
        latest = found.latest if found.latest is not None and (
            last is None or found.latest - last > _LISTING_LAG_MS) else None
        return [word for word in found.postings if word not in known], latest

    def _search_late(self, session_id: str, reply: list[Any],
                     due: Sequence[str]) -> list[tuple[str | bytes, tuple[Any, ...]]]:
        """The sets of the words the script found new to the session that were not sent
        beside it (a store that put the session in them before a purge took it out)."""
        if reply[0] != b"ok" or len(reply) < 6:
            return []
        sent = set(due)
        return self._search_writes(session_id, [
            word for word in (w.decode("utf-8", "surrogatepass") for w in reply[5])
            if word not in sent], None)

    def _search_sent(self, session_id: str, words: Iterable[str], latest: int | None) -> None:
        """Remember what :meth:`_search_due` sent, its ``words`` and ``latest`` (``None``: no
        time), once it is stored (forgetting every session now and then: a session's words are
        kept, and a long one holds thousands, so for 256 sessions at most; one forgotten only
        has its words sent again)."""
        last, known = self._searched.get(session_id, (None, set()))
        if len(self._searched) >= 256 and session_id not in self._searched:
            self._searched.clear()
        self._searched[session_id] = (last if latest is None else latest, known.union(words))

    def _send(self, writes: Sequence[tuple[str | bytes, tuple[Any, ...]]]) -> None:
        """Commands on keys of any slots, pipelined (redirections followed)."""
        if writes:
            with self._errors(writing=True):
                pipe = self._client.pipeline(transaction=False)
                for _, command in writes:
                    pipe.execute_command(*command)
                pipe.execute()

    def _side_by_side(self, sends: Sequence[tuple[str | bytes, tuple[Any, ...]]]) -> list[Any]:
        """Commands, each to the node holding its key's slot, one connection per node: all
        written before any reply is read; the replies in order (a redis error in place of its
        reply)."""
        taken: dict[str, tuple[Any, Any, list[int]]] = {}
        replies: list[Any] = [None] * len(sends)
        try:
            for at, (key, _) in enumerate(sends):
                node = self._client.get_node_from_key(key)
                if node.name not in taken:
                    pool = self._client.get_redis_connection(node).connection_pool
                    taken[node.name] = (pool, pool.get_connection(), [])
                taken[node.name][2].append(at)
            for _, connection, ats in taken.values():
                connection.send_packed_command(connection.pack_commands(
                    [sends[at][1] for at in ats]))
            for _, connection, ats in taken.values():
                for at in ats:
                    try:
                        replies[at] = connection.read_response()
                    except rx.ResponseError as exc:  # MOVED, ASK, NOSCRIPT...: the caller decides
                        replies[at] = exc
        except BaseException:
            for _, connection, _ in taken.values():
                connection.disconnect()  # a reply may be left unread on it
            raise
        finally:
            for pool, connection, _ in taken.values():
                pool.release(connection)
        return replies

    def _redirected(self, session_id: str, keys: list[str], args: list[Any]) -> list[Any]:
        """The append script on the connection of the node holding the session's slot,
        following ``MOVED``, ``ASK`` and ``TRYAGAIN`` itself (a durable append's ``WAIT`` must
        go on the script's connection)."""
        node = self._client.get_node_from_key(keys[0])
        asking = False
        for attempt in range(10):
            try:
                return self._pipelined(self._client.get_redis_connection(node), keys, args,
                                       asking=asking)
            except rx.MovedError:
                self._client.nodes_manager.initialize()
                node, asking = self._client.get_node_from_key(keys[0]), False
            except rx.AskError as exc:
                node = self._client.get_node(host=exc.host, port=exc.port)
                if node is None:
                    self._client.nodes_manager.initialize()
                    node = self._client.get_node_from_key(keys[0])
                asking = node is not None
            except rx.TryAgainError:  # a slot half moved: its keys are in two places
                time.sleep(0.02 * (attempt + 1))
                node, asking = self._client.get_node_from_key(keys[0]), False
            except (rx.ConnectionError, rx.TimeoutError, rx.ClusterDownError):
                try:
                    self._client.nodes_manager.initialize()  # learn the failover
                except (rx.RedisError, rx.RedisClusterException):
                    pass
                raise
        raise StoreUnavailable("the cluster kept redirecting the append; retry",
                               path=self.session_url(session_id))

    def _pipelined(self, client: Any, keys: list[str], args: list[Any], *,
                   asking: bool = False) -> list[Any]:
        """One connection: ``ASKING`` if asked, the script, and ``WAIT`` when durable."""
        if not self.durable and not asking:
            return self._append_script(keys=keys, args=args, client=client)  # type: ignore[no-any-return]
        pipe = client.pipeline(transaction=False)
        if asking:
            pipe.execute_command("ASKING")
        self._append_script(keys=keys, args=args, client=pipe)
        if self.durable:
            pipe.execute_command("WAIT", self.replicas, int(self._timeout * 500))
        replies = pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        result = replies[1 if asking else 0]
        if self.durable and replies[-1] < self.replicas and result[0] == b"ok":
            raise StoreUnavailable(
                f"the append is on the master but {replies[-1]} of {self.replicas} replica(s) "
                f"confirmed it within {self._timeout / 2:g}s; retry it (it is stored once)",
                path=self.url)
        return result  # type: ignore[no-any-return]

    def _appended(self, session_id: str, mode: str, header_line: bytes,
                  lines: Sequence[bytes], records: Sequence[Record],
                  seen: int | None = None, *, regular: bool = True, last: bytes = b"") -> int:
        """Run an append (or a create, or an import and its later chunks: ``more``) and update
        the listing's order.

        Args:
            seen: how many entry lines the writer has read: the append is refused
                (:class:`_Behind`) if the session holds more (``None``: no check).
            regular: an import whose parents all come before their children (it gets a tree
                index).
            last: for ``more``, the line the session's last must still be (``b""``: not
                checked); another there: ``ConcurrentModification``, nothing written.

        Returns:
            The first line's position in the session's list (from 1; where they were already
            when this is a retry).
        """
        cwd, created, parent, created_ms = _header_fields(header_line)
        if mode in ("create", "first", "import"):
            self._mark_search_version()
            self._searched.pop(session_id, None)
            if self.cluster:
                self._index(cwd, session_id, created_ms or 0)  # first: never an unlisted session
                self._listing_sent(session_id, created_ms or 0)
        stats = ListingStats()
        parsed = [line for line in map(listing_line, lines) if line is not None]
        stats.add(parsed)
        named = any(line.type == "session_info" for line in parsed)
        args: list[Any] = [
            mode, header_line, _text(cwd), _text(created), _text(parent),
            "" if created_ms is None else created_ms, stats.messages, _text(stats.first),
            "" if stats.activity is None else repr(stats.activity), int(named),
            _text(stats.name or ""), "" if seen is None else seen,
            int(regular), len(lines)]
        for record, line in zip(records, lines):
            args += [_text(record.id), _text(record.parent_id or ""), line, *_tree_fields(record)]
        found = _rs.batch(lines, (seen or 0) + 1)  # (the script refuses other positions)
        args += [_usage_spec(stats, parsed), found.docs,
                 "" if found.latest is None else found.latest]
        incarnation = secrets.token_hex(8) if mode in ("create", "first", "import") else ""
        listed = None  # an append's new place in the listing's order, sent beside the script
        if mode == "append" and stats.activity is not None and stats.activity > 0:
            listed = math.floor(stats.activity)
        reply, indexed = self._run_append(session_id, args, cwd, found, incarnation, last,
                                          listed)
        where = self.session_url(session_id)
        _refuse_newer(reply, where)
        status = reply[0].decode()
        if status == "marked":
            raise _newer_index(reply[1], self.url, "Nothing was written")
        if status == "behind":
            raise _Behind(reply[1] or None, reply[2])
        if status == "gone":
            raise ConcurrentModification("the session was deleted meanwhile; nothing was "
                                         "written", path=where)
        if status == "changed":
            raise ConcurrentModification(f"line {seen} of the session is another meanwhile; "
                                         "nothing was written", path=where)
        if status == "recreated":
            raise ConcurrentModification("the session was deleted and created again meanwhile;"
                                         " nothing was written", path=where)
        if status == "exists":
            raise DuplicateId(f"session {session_id} is already in this store", path=where)
        if status == "dup":
            entry = reply[1].decode()
            raise DuplicateId(f"id {entry} is already in the session", path=where,
                              entry_id=entry)
        if status == "orphan":
            entry, parent_id = reply[1].decode(), reply[2].decode()
            raise InvalidEntry(f"parent {parent_id} of {entry} is not in the session; nothing "
                               "was written", path=where, entry_id=entry)
        first, modified, changed = int(reply[1]), int(reply[2]), bool(reply[3])
        if reply[4] and seen is not None and first - 1 != seen:
            # stored already, but not where this writer expects its lines: not its own retry
            raise DuplicateId(f"id {records[0].id} is already in the session (an earlier try "
                              "stored this batch)", path=where, entry_id=records[0].id)
        if changed and not indexed and self._listing_due(session_id, modified):
            self._index(cwd, session_id, modified)  # a cluster's (one server's script did it)
            self._listing_sent(session_id, modified)
        return first

    def _mark_search_version(self) -> None:
        """Mark the store as one whose sessions all have this version's search index when it
        has no session yet, whatever an earlier version marked it (a store holding sessions
        without is marked by :meth:`migrate`); refuse a store a later version marked (this
        code would store sessions without its index). Once the mark is known, on one server
        the append script checks it for each new session (no round trip); on a cluster, where
        it is in another slot, it is read for each new session, before anything is written
        (a mark set between that read and the script is not seen)."""
        if self._search_ready is not None and not self.cluster:
            return
        key = self._search_version_key
        version, listed = self._query(lambda pipe: (pipe.get(key),
                                                    pipe.exists(self._index_keys(None)[0])))
        if _newer(version):
            raise _newer_index(version, self.url, "Nothing was written")
        if version != _SEARCH_VERSION and not listed:
            with self._errors(writing=True):  # (in a script: a later version's mark set
                version = self._mark_search_script(  # since the read is not overwritten)
                    keys=[key], client=self._client)
            if _newer(version):
                raise _newer_index(version, self.url, "Nothing was written")
        self._search_ready = version in _SEARCHABLE

    def _index(self, cwd: str, session_id: str, modified: int) -> None:
        """Raise the session's place in the listing's order to ``modified`` (never lower)."""
        with self._errors(writing=True):
            pipe = self._client.pipeline(transaction=False)
            for key in self._index_keys(cwd):
                pipe.zadd(key, {session_id: modified}, gt=True)
            pipe.execute()

    def _query(self, build: Callable[[Any], object]) -> list[Any]:
        """Commands built on a pipeline (no transaction), their replies."""
        with self._errors():
            pipe = self._client.pipeline(transaction=False)
            build(pipe)
            return pipe.execute()  # type: ignore[no-any-return]

    # -- the Store protocol ----------------------------------------------------------------------

    def create(self, header: SessionHeader) -> str:
        """Register a new session (its header); returns its id.

        Raises:
            DuplicateId: a session with this id exists.
        """
        self._writable()
        session_id = check_session_id(header.id)
        self._appended(session_id, "create", _json.dumps(header), [], [])
        return session_id

    def list_sessions(self, *, cwd: str | None = None, limit: int | None = None
                      ) -> list[SessionListing]:
        """Sessions newest first, from the listing's sorted set and each session's hash
        (never from entries): one ``ZREVRANGE`` (a script on a cluster, with ``limit``: see
        :data:`_NEWEST`) and one ``HMGET`` per session, pipelined.

        Args:
            cwd: only the sessions of this working directory.
            limit: at most this many.
        """
        if limit is not None and limit <= 0:
            return []
        key = self._index_keys(cwd)[-1]
        with self._errors():
            if limit is None or not self.cluster:
                found = self._client.zrevrange(key, 0, -1 if limit is None else limit - 1)
            else:  # the places may lag: the sessions just after the last one too
                found = self._newest_script(keys=[key], args=[limit, _LISTING_LAG_MS],
                                            client=self._client)
        ids = [sid.decode() for sid in found]
        rows = self._query(lambda pipe: [pipe.hmget(self.keys(sid)[0], _LISTING_FIELDS)
                                         for sid in ids])
        present = sorted(((self._listing(sid, row), sid, row[0]) for sid, row in zip(ids, rows)
                          if row[0] is not None),
                         key=lambda item: item[0].modified_ms, reverse=True)[:limit]
        listings = [listing for listing, _, _ in present]
        uncounted = [at for at, row in enumerate(listings) if row.usage is None]
        if uncounted:  # totals not kept: counted from the lines (and kept from now on)
            counted = self._count_usage([present[at][1:] for at in uncounted])
            for at, usage in zip(uncounted, counted):
                listings[at] = msgspec.structs.replace(listings[at], usage=usage)
        return listings

    def _count_usage(self, sessions: Sequence[tuple[str, bytes | None]]) -> list[UsageTotals]:
        """The totals of sessions (id, header line read) that keep none, counted from their
        lines; a writable store keeps each where it can (:data:`_KEEP_USAGE`: the same
        session, no line since)."""
        found = self._query(lambda pipe: [pipe.lrange(self.keys(sid)[1], 0, -1)
                                          for sid, _ in sessions])
        totals = []
        for (session_id, header), lines in zip(sessions, found):
            stats = ListingStats()
            parsed = [line for line in map(listing_line, lines) if line is not None]
            stats.add(parsed)
            assert stats.usage is not None
            totals.append(stats.usage)
            if not self.read_only:
                meta, lines_key, _ = self.keys(session_id)
                with self._errors(writing=True):
                    self._keep_usage_script(keys=[meta, lines_key], args=[
                        header, len(lines), _usage_spec(stats, parsed)], client=self._client)
        return totals

    def _listing(self, session_id: str, row: Sequence[bytes | None]) -> SessionListing:
        values = [None if v is None else v.decode("utf-8", "surrogatepass") for v in row]
        _, cwd, created, parent, name, first, messages, entries, activity, _, *usage = values
        stats = ListingStats(int(messages or 0), first or "",
                             float(activity) if activity else None, name or None)
        stats.usage = _kept_usage(usage)
        fields = {"id": session_id, "cwd": cwd, "timestamp": created,
                  "parentSession": parent or None}
        listing = listing_row(fields, stats, self.session_url(session_id), None,
                              int(entries or 0))
        if listing.modified_from == "file":  # no file: a header without a time, no message
            return msgspec.structs.replace(listing, modified_from="created")
        return listing

    def delete(self, session_id: str) -> None:
        """Remove a session and its entries, its listing rows and its place in its words' sets:
        one script on one server; on a cluster, where those are in other slots, one script on
        its slot, then the rest.

        Raises:
            SessionNotFound: no such session.
            ConcurrentModification: on one server, the session's words or cwd changed between
                the read of them and the script each time (other writers bringing new words,
                :data:`_TRIES` tries); nothing was deleted, try again.
            UnsupportedVersion: a later sessiontree wrote the session's search index (checked
                by the script: it may have keys this code does not know); nothing was deleted.
        """
        self._writable()
        check_session_id(session_id)
        keys: list[Any] = self.session_keys(session_id)
        for _ in range(_TRIES):  # (one server: again when its words changed meanwhile)
            call = self._delete_call(keys)
            with self._errors(writing=True):
                found = self._delete_script(**call, client=self._client) if call else None
            if found != b"changed":
                break
        else:
            raise _kept_changing("it was deleted", self.session_url(session_id))
        if found is None:
            raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
        _refuse_newer(found, self.session_url(session_id))
        self._listed.pop(session_id, None)
        self._searched.pop(session_id, None)
        if self.cluster:
            _, cwd, words = found
            self._send([(key, ("ZREM", key, session_id)) for key in [
                *self._index_keys(cwd.decode("utf-8", "surrogatepass")), self._searched_key]]
                + [(key, ("SREM", key, session_id)) for key in (
                    self.word_key(word.decode("utf-8", "surrogatepass")) for word in words)])

    def _delete_call(self, keys: list[Any]) -> dict[str, list[Any]] | None:
        """The delete script's keys and arguments for a session's ``keys``: on one server, its
        cwd and words read first (``None``: no session), and the listing's sets, the searched
        sessions' and the words' sets added, so that the script names every key it touches
        (see ``_DELETE``); on a cluster, where those are in other slots, the session's keys
        alone."""
        if self.cluster:
            return {"keys": keys, "args": []}
        cwd, posted, recent = self._query(lambda pipe: (
            pipe.hget(keys[0], "cwd"), pipe.hkeys(keys[3]), pipe.hkeys(keys[5])))
        if cwd is None:
            return None
        words = sorted(set(posted) | set(recent))
        return {"keys": [*keys, *self._index_keys(cwd.decode("utf-8", "surrogatepass")),
                         self._searched_key, *(self.word_key(word.decode("utf-8", "surrogatepass"))
                                               for word in words)],
                "args": [cwd, *words]}

    def close(self) -> None:
        """Close the connections (idempotent)."""
        self._client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- more than the protocol ------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        """Every listed session id that has a session, sorted."""
        with self._errors():
            ids = sorted(sid.decode() for sid in self._client.zrange(self._index_keys(None)[0],
                                                                     0, -1))
        found = self._query(lambda pipe: [pipe.exists(self.keys(sid)[0]) for sid in ids])
        return [sid for sid, there in zip(ids, found) if there]

    def open_log(self, session_id: str) -> RedisLog | RedisTreeLog:
        """The log of a stored session: with a tree index, one script reads its head (header,
        counts, name, last line); without (stored by an earlier version, see :meth:`migrate`),
        every line is read.

        Raises:
            SessionNotFound: no such session.
        """
        meta, lines, _ = self.keys(check_session_id(session_id))
        with self._errors():
            head = self._head_script(keys=[meta, lines], client=self._client)
        if not head:
            raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
        header_line, entries, name, tree, last = head
        if tree != b"1":
            log = RedisLog(self, session_id)
            if log.header_line is None:  # deleted in between
                raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
            return log
        header = _json.loads(header_line)
        count = int(entries or 0)
        return RedisTreeLog(self, session_id, header_line, LogHead(
            header if isinstance(header, dict) else None, count,
            _record_at(last, count) if count else None,
            name.decode("utf-8", "surrogatepass") if name else None))

    def new_log(self, header: SessionHeader) -> RedisTreeLog:
        """The log of a new session, stored (with its tree index) at its first append."""
        return RedisTreeLog(self, check_session_id(header.id), None, LogHead(None, 0, None, None))

    def export_lines(self, session_id: str) -> tuple[bytes, Iterator[bytes]]:
        """A session's header line and its entry lines in append order, as stored.

        Raises:
            SessionNotFound: no such session.
        """
        meta, lines, _ = self.keys(check_session_id(session_id))
        header, stored = self._query(lambda pipe: (pipe.hget(meta, "header"),
                                                   pipe.lrange(lines, 0, -1)))
        if header is None:
            raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
        return header, iter(stored)

    def migrate(self) -> int:
        """Give every session stored before the tree index one (:meth:`index_tree`), so that
        opening it reads its head and paths, not every line, and every session stored before
        this version's search index its own (:meth:`reindex_search`; a session of version 2
        is only marked as this version, in one script), then mark the store as
        searchable; returns how many sessions changed. Sessions that cannot have a tree index
        (orphans, parents named before they came: imported damaged files) keep being read
        whole.

        Raises:
            ConcurrentModification: appends kept coming to some sessions while their indexes
                were built (:data:`_TRIES`): they were skipped, the others migrated, and the
                store is not marked until a later run skips none.
            UnsupportedVersion: the store, or a session, has a search index of a newer
                version than this code's (a later sessiontree's): nothing is written to it.

        Warns:
            MigrationWarning: sessions deleted while it ran, passed over (named).
        """
        self._writable()
        with self._errors():
            marked = self._client.get(self._search_version_key)
        if _newer(marked):
            raise _newer_index(marked, self.url, "Nothing was migrated")
        done = 0
        skipped: list[str] = []
        gone: list[str] = []
        for session_id in self.session_ids():
            meta = self.keys(session_id)[0]
            with self._errors():
                tree, indexed = self._client.hmget(meta, ("tree", "indexed"))
            if _newer(indexed):
                raise _newer_index(indexed, self.session_url(session_id),
                                   f"It was left as it is ({done} session(s) before it migrated)")
            try:
                changed = tree != b"1" and self.index_tree(session_id)
                if indexed != _SEARCH_VERSION:
                    if not (indexed == b"2" and self._upgraded(session_id)):
                        self.reindex_search(session_id)
                    changed = True
            except ConcurrentModification:
                skipped.append(session_id)
                continue
            except SessionNotFound:  # deleted meanwhile: nothing of it left to migrate
                gone.append(session_id)
                continue
            done += changed
        if gone:
            warnings.warn(MigrationWarning(
                f"{self.url}: {len(gone)} session(s) deleted while the store was migrated, "
                f"passed over: {', '.join(gone)}"), stacklevel=2)
        if skipped:
            raise ConcurrentModification(
                f"{done} session(s) migrated; {len(skipped)} skipped, appends kept coming while "
                f"their indexes were built ({', '.join(skipped)}): run `sessiontree migrate "
                "URL` again (the store is marked as migrated once none is skipped)",
                path=self.url)
        with self._errors(writing=True):  # (a later version's mark set meanwhile is kept)
            version = self._mark_search_script(keys=[self._search_version_key],
                                               client=self._client)
        if _newer(version):
            raise _newer_index(version, self.url, "A later sessiontree marked the store "
                               "while it was migrated: its mark was kept")
        self._search_ready = True
        return done

    def _upgraded(self, session_id: str) -> bool:
        """Mark a session of search index version 2 as this version, which it holds (no
        recent part), in one script; ``False`` when its index lacks some lines (rebuild it)."""
        meta, lines_key, _ = self.keys(session_id)
        with self._errors(writing=True):
            reply = self._upgrade_script(keys=[meta, self.search_keys(session_id)[1], lines_key],
                                         client=self._client)
        _refuse_newer(reply, self.session_url(session_id))
        return bool(reply)

    def index_tree(self, session_id: str) -> bool:
        """Build the tree index of one session stored before it had one, in one script on its
        slot (retried if an append came in between, or the session was deleted and stored
        again); ``False`` when the session cannot have
        one (see :meth:`migrate`).

        Raises:
            SessionNotFound: no such session.
            ConcurrentModification: appends kept coming while it was built (:data:`_TRIES`).
            UnsupportedVersion: a later sessiontree wrote the session's search index (checked
                by the script: its tree index may be another); nothing was written.
        """
        self._writable()
        meta, lines_key, ids = self.keys(check_session_id(session_id))
        for _ in range(_TRIES):
            header, stamp, lines = self._query(lambda pipe: (
                pipe.hget(meta, "header"), pipe.hmget(meta, _STAMP_FIELDS),
                pipe.lrange(lines_key, 0, -1)))
            if header is None:
                raise SessionNotFound(f"no session {session_id} in this store",
                                      path=self.url)
            records = _envelopes(lines)
            if not _regular(records):
                return False
            args: list[Any] = [len(lines)]
            for record in records:
                args += [_text(record.parent_id or ""), *_tree_fields(record)]
            args.append(_stamp(stamp))
            with self._errors(writing=True):
                reply = self._index_tree_script(
                    keys=[meta, lines_key, ids, *self.tree_keys(session_id)], args=args,
                    client=self._client)
            _refuse_newer(reply, self.session_url(session_id))
            status = reply.decode()
            if status == "gone":
                raise SessionNotFound(f"no session {session_id} in this store",
                                      path=self.url)
            if status == "ok":
                return True
        raise _kept_changing("its tree index was built", self.session_url(session_id))

    def import_lines(self, header_line: bytes, lines: Sequence[bytes]) -> str:
        """Store a whole session (header and entry lines, exact bytes): one script per
        ``_IMPORT_CHUNK`` lines (a script blocks its server while it runs: a 100,000-entry
        session in one would hold it for a minute), each checking that the session holds what
        the ones before stored; if one fails, the part stored is deleted again, and if that
        fails too, the delete's error says so (a writer that dies in between leaves it: delete
        it and import again).

        Entries may name a parent that is not there (an orphan, as files may hold); ids must
        be unique.

        Raises:
            DuplicateId: the session or an entry id exists already.
            InvalidEntry: a line that is not an entry, or a bad header.
            ConcurrentModification, StoreUnavailable: a later script failed and the part
                stored could not be deleted: the error names the session left partly stored
                (the import's own error its ``__cause__``; an interrupt is raised as itself,
                with a note saying so).
        """
        self._writable()
        header = _json.loads(header_line)
        session_id = check_session_id(header.get("id") if isinstance(header, dict) else None)
        records = _envelopes(lines)
        regular = _regular(records)
        self._appended(session_id, "import", header_line, lines[:_IMPORT_CHUNK],
                       records[:_IMPORT_CHUNK], regular=regular)
        try:
            for start in range(_IMPORT_CHUNK, len(lines), _IMPORT_CHUNK):
                end = start + _IMPORT_CHUNK
                self._appended(session_id, "more", header_line, lines[start:end],
                               records[start:end], start, regular=regular)
        except BaseException as exc:
            self._undo_import(session_id, exc)
            raise
        return session_id

    def complete_import(self, header_line: bytes, lines: Sequence[bytes], held: int) -> bool:
        """Store ``lines[held:]`` into a session that holds ``header_line`` and
        ``lines[:held]`` (an import cut between two scripts, its writer killed), one script
        per ``_IMPORT_CHUNK`` lines, each appending only if the session still holds exactly
        the lines before its own, the last of them the same (a compare and append: a live
        agent's append in between is never overwritten); nothing is deleted.

        Returns:
            ``False`` if a script found the session changed (another writer appended, or
            deleted it): it wrote nothing (what earlier scripts appended, the source's next
            lines, stays).
        """
        self._writable()
        header = _json.loads(header_line)
        session_id = check_session_id(header.get("id") if isinstance(header, dict) else None)
        records = _envelopes(lines)
        regular = _regular(records)
        try:
            for start in range(held, len(lines), _IMPORT_CHUNK):
                end = start + _IMPORT_CHUNK
                self._appended(session_id, "more", header_line, lines[start:end],
                               records[start:end], start, regular=regular,
                               last=lines[start - 1] if start else b"")
        except (_Behind, ConcurrentModification, DuplicateId):
            return False
        return True

    def _undo_import(self, session_id: str, failure: BaseException) -> None:
        """Delete what a failed import stored. A delete that fails leaves the session partly
        stored: its error is raised naming the session, ``failure`` its cause; an interrupt
        (``KeyboardInterrupt``: no ``Exception``) stays itself, with that note, so a Ctrl-C is
        never taken for a failed write. A partial session is never left silently."""
        try:
            self.delete(session_id)
        except SessionNotFound:
            pass  # (another writer deleted it)
        except SessionTreeError as exc:
            why = failure.reason if isinstance(failure, SessionTreeError) else repr(failure)
            error = type(exc)(f"the import failed ({why}) and the part of it stored could "
                              f"not be deleted ({exc.reason}): session {session_id} is left "
                              "partly stored; delete it and import it again",
                              path=self.session_url(session_id))
            if not isinstance(failure, Exception):
                failure.add_note(str(error))
                return  # (import_lines raises it again)
            raise error from failure

    def replace_line(self, session_id: str, entry_id: str, line: bytes) -> None:
        """Replace the stored line of one entry (same id, parent, type and role: the tree is
        unchanged), its search postings and record, the listing's first message and, for a
        label entry, the labels of its old and new target (as the lines leave them), in one
        script on the session's slot, if the line is still the one read (what a purge calls),
        where the session also leaves the sets of the words it no longer holds and joins its
        new words' on one server (on a cluster, where they are in other slots, after the
        script: a writer that dies in between leaves them to :meth:`reindex_search`).

        Raises:
            SessionNotFound: no such session or entry.
            InvalidEntry: ``line`` is not an entry, or changes its id, parent, type or role
                (:func:`~.base.check_replacement`); nothing was written.
            ConcurrentModification: the line changed meanwhile, or appends changed the
                postings (a label entry's: the lines) each time it read them
                (:data:`_TRIES`); nothing was written.
        """
        self._writable()
        check_session_id(session_id)
        self._searched.pop(session_id, None)
        meta, lines_key, ids = self.keys(session_id)
        post, docs = self.search_keys(session_id)
        recent = self._recent_key(session_id)
        where = self.session_url(session_id)
        for _ in range(_TRIES):  # again when an append changed the postings read
            first, position, stamp = self._query(lambda pipe: (
                pipe.hget(meta, "first"), pipe.hget(ids, entry_id),
                pipe.hmget(meta, _STAMP_FIELDS)))
            if first is None or position is None:
                raise SessionNotFound(f"no entry {entry_id} in session {session_id}", path=where)
            at = int(position)
            with self._errors():
                lines = self._client.lrange(lines_key, 0, -1)
            old = lines[at - 1]
            new = check_replacement(entry_id, old, line, where)
            lines[at - 1] = line
            labels = _labels(lines, {_tree_fields(record)[1] for record in (
                _envelopes([old])[0], new)} - {b""})
            stats = ListingStats()
            parsed = [found for found in map(listing_line, lines) if found is not None]
            stats.add(parsed)
            record, counts = _rs.terms(line)
            words = sorted(_rs.terms(old)[1].keys() | counts.keys())
            values, later = self._query(lambda pipe: (
                pipe.hmget(post, words), pipe.hmget(recent, words))) if words else ([], [])
            edits: list[bytes] = []
            for word, value, tail in zip(words, values, later):
                postings = _rs.decode((value or b"") + (tail or b""))
                postings.pop(at, None)
                if word in counts:
                    postings[at] = counts[word]
                edits += [_text(word), value or b"", tail or b"", _rs.encode(postings)]
            latest = _rs.batch([line], at).latest
            keys: list[Any] = [meta, lines_key, ids, post, docs, recent,
                               self.tree_keys(session_id)[1]]
            if not self.cluster:
                keys += [self._searched_key, *map(self.word_key, words)]
            with self._errors(writing=True):
                reply = self._replace_script(
                    keys=keys,
                    args=[_text(entry_id), old, line, first, _text(stats.first), len(lines),
                          _usage_spec(stats, parsed), record, "" if latest is None else latest,
                          _stamp(stamp), len(labels),
                          *(item for pair in labels.items() for item in pair), *edits],
                    client=self._client)
            _refuse_newer(reply, where)
            status = reply.decode()
            if status in ("gone", "missing"):
                raise SessionNotFound(f"no entry {entry_id} in session {session_id}", path=where)
            if status == "changed":
                raise ConcurrentModification(f"entry {entry_id}'s line changed meanwhile; "
                                             "nothing was written", path=where,
                                             entry_id=entry_id)
            if status == "ok":
                break
        else:
            raise _kept_changing(f"entry {entry_id}'s line was replaced", where)
        if self.cluster:
            gone = [word for word, _, _, postings in zip(*[iter(edits)] * 4) if not postings]
            self._send([(key, ("SREM", key, session_id)) for key in map(self.word_key, (
                word.decode("utf-8", "surrogatepass") for word in gone))] + self._search_writes(
                session_id, counts, latest))

    def reindex_search(self, session_id: str) -> None:
        """Build the search index of a session again from its lines, in one script on its
        slot (again if an append came in between), which on one server also puts the session
        in its words' sets and takes it out of the sets of words it no longer holds (on a
        cluster, where they are in other slots, after it): what a session stored before this
        version's index needs (:meth:`migrate` does it for every one), and what repairs a
        session on a cluster whose writer died between its script and the writes to the words'
        sets.

        Raises:
            SessionNotFound: no such session.
            ConcurrentModification: appends kept coming while it was built (:data:`_TRIES`).
            UnsupportedVersion: a later sessiontree wrote the session's search index (a newer
                version, checked by the script): nothing was written.
        """
        self._writable()
        check_session_id(session_id)
        self._searched.pop(session_id, None)
        meta, lines_key, _ = self.keys(session_id)
        post, docs = self.search_keys(session_id)
        recent = self._recent_key(session_id)
        keys = [meta, lines_key, post, docs, self._legacy_words_key(session_id), recent]
        for _ in range(_TRIES):
            # the stamp before the lines (a line replaced after them, or the session deleted
            # and stored again, shows); on one server the words held too: the script names
            # their sets
            stamp, lines, *held = self._query(lambda pipe: (
                pipe.hmget(meta, _STAMP_FIELDS), pipe.lrange(lines_key, 0, -1),
                *(() if self.cluster else (pipe.hkeys(post), pipe.hkeys(recent)))))
            found = _rs.batch(lines, 1)
            dropped = sorted({word.decode("utf-8", "surrogatepass") for words in held
                              for word in words} - found.postings.keys())
            sets = [] if self.cluster else [self._searched_key, *map(
                self.word_key, [*found.postings, *dropped])]
            with self._errors(writing=True):
                reply = self._reindex_script(keys=[*keys, *sets], args=[
                    len(lines), found.docs, "" if found.latest is None else found.latest,
                    len(found.postings), _stamp(stamp),
                    *(item for word, postings in found.postings.items()
                      for item in (_text(word), postings)),
                    *map(_text, dropped)],
                    client=self._client)
            if reply[0] == b"gone":
                raise SessionNotFound(f"no session {session_id} in this store",
                                      path=self.session_url(session_id))
            _refuse_newer(reply, self.session_url(session_id))
            if reply[0] == b"ok":
                break
        else:
            raise _kept_changing("its search index was built", self.session_url(session_id))
        if self.cluster:
            before = {word.decode("utf-8", "surrogatepass") for word in reply[1]}
            self._send([(key, ("SREM", key, session_id)) for key in map(
                self.word_key, sorted(before - found.postings.keys()))]
                + self._search_writes(session_id, found.postings, found.latest))

    def search(self, query: str, *, cwd: str | None = None, role: str | None = None,
               since: datetime | date | None = None, limit: int = 20) -> list[SearchHit]:
        """Entries of every session, on every branch, holding every word and "phrase" of
        ``query``, best first (:mod:`sessiontree._search`; arguments as
        :meth:`JsonlStore.search <sessiontree.stores.jsonl.JsonlStore.search>`).

        The sessions holding every word are their sets' intersection (one ``SMEMBERS`` per
        word); they are visited most recent first (by ``P:searched``), a page at a time, each
        on its own slot (its postings of the words, then the records of the entries holding
        them all), until the :data:`~sessiontree._search.CANDIDATES` most recent candidates
        are found and no session left can have a later entry (a cluster's ``P:searched`` may
        lag by :data:`_LISTING_LAG_MS`). The candidates' lines are read and
        judged best bound first (:func:`~sessiontree._search.best_first`): the sets only
        narrow, the session's own keys decide, and its lines are judged again. With ``cwd``,
        only the sessions in the cwd's listing (a sorted set, asked with the same
        ``ZMSCORE`` round trip as ``P:searched``) are visited.

        Raises:
            InvalidQuery: no word in ``query``.
            InvalidLocation: the store holds sessions stored before the search index of
                version 2 (:meth:`migrate` builds this version's; version 2's is this one
                without the recent postings).
            UnsupportedVersion: a later sessiontree marked the store with a newer version.
        """
        parsed = parse_query(query)
        after = since_ms(since)
        words = parsed.words()
        asking = not self._search_ready  # (until it is known to be marked)
        members = self._query(lambda pipe: [
            *(pipe.smembers(self.word_key(word)) for word in words),
            *((pipe.get(self._search_version_key), pipe.exists(self._index_keys(None)[0]))
              if asking else ())])
        if asking:
            version, listed = members[-2:]
            del members[-2:]
            if _newer(version):
                raise _newer_index(version, self.url, "Nothing was searched")
            if version in _SEARCHABLE:
                self._search_ready = True
            elif listed:
                raise InvalidLocation("this store's sessions were stored before this version's "
                                      "search index: run `sessiontree migrate URL` "
                                      "(RedisStore.migrate()) once to build it", path=self.url)
        holding = sorted(set.intersection(*map(set, members)))
        if not holding:
            return []
        scores = self._query(lambda pipe: [  # with cwd, the cwd's listing too: its sessions
            pipe.zmscore(key, holding)          # are in it from their creation on
            for key in [self._searched_key, *self._index_keys(cwd)[1:]]])
        latest, in_cwd = scores[0], scores[1] if cwd is not None else holding
        order = sorted((-math.inf if ms is None else -ms, sid.decode())  # None: not known, first
                       for sid, ms, there in zip(holding, latest, in_cwd) if there is not None
                       and (ms is None or ms + _LISTING_LAG_MS >= after))  # (a cluster's may lag)
        found: list[tuple[int, str, int, str, float]] = []  # -ms, id, position, cwd, bound
        highest = bounds(parsed)
        at, step = 0, _PAGE
        while at < len(order):
            if len(found) >= CANDIDATES:  # the sessions that can still have a later entry
                found.sort()              # (their time may lag by _LISTING_LAG_MS)
                del found[CANDIDATES:]
                left = bisect.bisect_right(order, (found[-1][0] + _LISTING_LAG_MS, "\U0010ffff"),
                                           lo=at) - at
                if not left:
                    break
                step = min(left, max(_PAGE, at // 2))  # (each page may raise the bar)
            page = [sid for _, sid in order[at:at + step]]
            at += len(page)
            found += self._candidates(page, words, highest, cwd=cwd, role=role, after=after)
            # as many sessions again as seem to hold the candidates still missing
            step = min(32 * _PAGE, max(_PAGE, math.ceil(
                1.25 * at * (CANDIDATES - len(found)) / max(1, len(found)))))
        found.sort()
        rows = [Bounded(sid, self.session_url(sid), session_cwd, position, -negative, bound)
                for negative, sid, position, session_cwd, bound in found[:CANDIDATES]]

        def read(batch: Sequence[Bounded]) -> list[Candidate]:
            lines = self._query(lambda pipe: [pipe.lindex(self.keys(row.session_id)[1],
                                                          row.place - 1) for row in batch])
            return [Candidate(row.session_id, row.session, row.cwd, row.place, line)
                    for row, line in zip(batch, lines) if line is not None]

        return best_first(rows, parsed, read, role=role, since=after, limit=limit,
                          on_branch=self._on_branch)

    def _on_branch(self, pairs: Sequence[tuple[Candidate, str]]) -> list[bool]:
        """Whether each hit is on its session's current branch: one script per session
        (``_ON_PATH``, its tree index walked from the leaf), pipelined (``EVALSHA``; a
        cluster's pipeline cannot load a script: where a node lacks it, it is loaded on every
        node and the pipeline sent again, with the script's text (``EVAL``) if a node lost it
        again meanwhile: flushed, or failed over); a session without a tree index is opened and
        its path read."""
        places: dict[str, list[int]] = {}
        for candidate, _ in pairs:
            places.setdefault(candidate.session_id, []).append(candidate.place)
        script = self._on_path_script

        def build(pipe: Any, whole: bool = False) -> list[Any]:
            how = ("EVAL", script.script) if whole else ("EVALSHA", script.sha)
            return [pipe.execute_command(*how, 3, *self.keys(sid)[:2],
                                         self.tree_keys(sid)[0], *at)  # (a cluster's pipeline
                    for sid, at in places.items()]                     # refuses evalsha())

        try:
            replies = self._query(build)
        except rx.NoScriptError:
            with self._errors():
                script.sha = self._client.script_load(script.script)
            try:
                replies = self._query(build)
            except rx.NoScriptError:
                replies = self._query(lambda pipe: build(pipe, whole=True))
        found: dict[tuple[str, int], bool] = {}
        for (sid, at), flags in zip(places.items(), replies):
            if flags is None:
                branch = current_branch(TreeLog(self.open_log(sid), warn=False))
                flags = [entry_id in branch for candidate, entry_id in pairs
                         if candidate.session_id == sid]
            found.update(((sid, place), bool(flag)) for place, flag in zip(at, flags))
        return [found[candidate.session_id, candidate.place] for candidate, _ in pairs]

    def _candidates(self, page: Sequence[str], words: Sequence[str],
                    highest: Callable[[Sequence[int], int], float], *, cwd: str | None,
                    role: str | None, after: int) -> list[tuple[int, str, int, str, float]]:
        """The entries of these sessions holding every word (in their postings; of the role,
        not before ``after``, of sessions in ``cwd``), as ``(-time, id, position, cwd,
        bound)``: their postings in one pipelined read (the recent ones first: an append
        moving them to ``post`` in between makes some read twice, none missed), their records
        in another."""
        replies = self._query(lambda pipe: [
            command for sid in page for command in (
                pipe.hget(self.keys(sid)[0], "cwd"),
                pipe.hmget(self._recent_key(sid), words),
                pipe.hmget(self.search_keys(sid)[0], words))])
        held: list[tuple[str, str, list[int], list[dict[int, int]]]] = []
        for sid, session_cwd, later, values in zip(page, replies[::3], replies[1::3],
                                                   replies[2::3]):
            if session_cwd is None or (cwd is not None and session_cwd != _text(cwd)):
                continue  # deleted meanwhile, or another cwd
            postings = [_rs.decode((value or b"") + (tail or b""))
                        for value, tail in zip(values, later)]
            positions = sorted(set.intersection(*(set(p) for p in postings)))
            if positions:
                held.append((sid, session_cwd.decode("utf-8", "surrogatepass"), positions,
                             postings))
        size = _rs.DOC.size
        records = self._query(lambda pipe: [
            pipe.getrange(self.search_keys(sid)[1], (positions[0] - 1) * size,
                          positions[-1] * size - 1) for sid, _, positions, _ in held])
        code = None if role is None else _rs.ROLE_CODE.get(role, -1)
        out = []
        for (sid, session_cwd, positions, postings), data in zip(held, records):
            docs = _rs.records(data)  # (fewer when the session was rebuilt meanwhile)
            for position in positions:
                at = position - positions[0]
                if at >= len(docs):
                    break
                ms, kind, length = docs[at]
                if ms >= after and (code is None or kind == code):
                    out.append((-ms, sid, position, session_cwd,
                                highest([p[position] for p in postings], length)))
        return out

    def follow(self, session_id: str, after: int, *, poll: float = 0.2,
               stop: Callable[[], bool] = lambda: False) -> Iterator[bytes]:
        """The lines appended after the first ``after``, as they land, until ``stop()`` is
        true when nothing new came (polled every ``poll`` seconds)."""
        key = self.keys(session_id)[1]
        while True:
            with self._errors():
                fresh = self._client.lrange(key, after, after + 999)
            after += len(fresh)
            yield from fresh
            if not fresh:
                if stop():
                    return
                time.sleep(poll)


class _Behind(Exception):
    """The append script refused a batch: the session holds lines its writer has not read
    (they come with it, and the header when the writer had not seen the session stored)."""

    def __init__(self, header: bytes | None, lines: list[bytes]) -> None:
        super().__init__("other writers appended first")
        self.header = header
        self.lines = lines


def _regular(records: Sequence[Record]) -> bool:
    """Whether every parent comes before its child (what the tree index can hold: no orphan,
    no parent named before it came)."""
    seen: set[str] = set()
    for record in records:
        if record.parent_id is not None and record.parent_id not in seen:
            return False
        seen.add(record.id)
    return True


def _tree_fields(record: Record) -> tuple[str, bytes, bytes]:
    """An entry's kind, label target and label value for the tree index (``_INDEX_ENTRY``)."""
    kind = record.type
    code = ("c" if kind == "compaction" else "t" if kind == "thinking_level_change" else
            "m" if kind == "model_change" or (kind == "message" and record.role == "assistant")
            else "")
    if kind != "label" or record.target_id is None:
        return code, b"", b""
    value = _json.dumps([record.label, record.timestamp]) if record.label else b""
    return code, _text(record.target_id), value


def _labels(lines: Sequence[bytes], targets: set[bytes]) -> dict[bytes, bytes]:
    """The label value (:func:`_tree_fields`: ``b""`` for none) of each of ``targets`` that
    ``lines`` leave it: the last label entry's for it."""
    if not targets:
        return {}
    found = dict.fromkeys(sorted(targets), b"")
    for record in _envelopes(lines):
        _, target, value = _tree_fields(record)
        if target in found:
            found[target] = value
    return found


@functools.lru_cache(maxsize=256)
def _header_fields(header_line: bytes) -> tuple[str, str, str, int | None]:
    """A session header's cwd, creation time, parent session and creation time in ms ('' and
    ``None`` where missing), kept for the next append of the session, which sends the same
    line (parsing the time took longer than the rest of an append's own arguments).

    Raises:
        InvalidEntry: not a session header.
    """
    header = _json.loads(header_line)
    if not isinstance(header, dict) or header.get("type") != "session":
        raise InvalidEntry("the header line is not a session header")
    created = _field(header, "timestamp")
    return (_field(header, "cwd"), created, _field(header, "parentSession"),
            iso_to_ms(created) if created else None)


def _field(header: Mapping[str, Any], key: str) -> str:
    """A header's text field ('' when missing or not a string)."""
    value = header.get(key)
    return value if isinstance(value, str) else ""


def _kept_usage(values: Sequence[str | None]) -> UsageTotals | None:
    """The totals a session's hash keeps (``_USAGE_FIELDS``' values); ``None`` for none."""
    tokens_in, tokens_out, cache_read, cache_write, cost = values
    if tokens_in is None or tokens_out is None or cache_read is None or cache_write is None \
            or cost is None:
        return None
    return UsageTotals(input=int(tokens_in), output=int(tokens_out), cache_read=int(cache_read),
                       cache_write=int(cache_write), cost=float(cost))


def _usage_spec(stats: ListingStats, lines: Sequence[ListingLine]) -> bytes:
    """The usage spec the scripts take (see ``_USAGE_LUA``) of ``lines``, counted in
    ``stats``: their token counts, then each one's cost, in order."""
    usage = stats.usage
    assert usage is not None
    parts = [usage.input, usage.output, usage.cache_read, usage.cache_write,
             *cost_steps(lines)]
    return " ".join(map(repr, parts)).encode()


def _text(value: str) -> bytes:
    """A text as the hashes keep it: UTF-8, lone surrogates kept (JSON lines may hold them)."""
    return value.encode("utf-8", "surrogatepass")


def _envelopes(lines: Sequence[bytes]) -> list[Record]:
    """The envelopes of entry lines to store.

    Raises:
        InvalidEntry: a line that is not an entry.
    """
    scanner = Scanner(None)
    try:
        return [scanner.entry_record(line, 0) for line in lines]
    except ValueError as exc:
        raise InvalidEntry(str(exc)) from None


class _Appends:
    """What both Redis logs share: the address, and appending as one script that refuses the
    batch when others appended since the log looked (optimistic, no lock: :meth:`write`).
    A log says how many entry lines it has seen, reads in lines others stored (``_fresh``) and
    keeps what it wrote (``_kept``)."""

    store: RedisStore
    session_id: str
    header_line: bytes | None
    _pending: LoadResult | None  # what a refused append brought, not handed over yet
    _since: float  # when the append being retried began

    @property
    def location(self) -> None:
        return None

    @property
    def url(self) -> str:
        return self.store.session_url(self.session_id)

    @property
    def seen(self) -> int:
        """How many entry lines this log has read or written."""
        raise NotImplementedError

    def _fresh(self, header: bytes | None, lines: Sequence[bytes]) -> LoadResult | None:
        raise NotImplementedError

    def _kept(self, records: Sequence[FileRecord], lines: Sequence[bytes]) -> None:
        raise NotImplementedError

    def refresh(self) -> LoadResult | None:
        """The lines other writers appended since this log last looked (no lock taken)."""
        if self._pending is not None:  # read by a refused append, not handed over yet
            fresh, self._pending = self._pending, None
            return fresh
        meta, lines, _ = self.store.keys(self.session_id)
        header, fresh = self.store._query(lambda pipe: (
            pipe.hget(meta, "header"), pipe.lrange(lines, self.seen, -1)))
        if self.header_line is not None and header != self.header_line:
            return None  # deleted or re-created: the next append says so
        return self._fresh(header, fresh)

    def begin_append(self) -> LoadResult | None:
        """Nothing to wait for: an append takes no lock (the append script refuses a batch
        when others appended since this log looked, see :meth:`write`); hands over the lines
        such a refusal brought."""
        self.store._writable()
        fresh, self._pending = self._pending, None
        if fresh is None:
            self._since = time.monotonic()
        return fresh

    def write(self, lines: Sequence[bytes], header_line: bytes | None,
              envelopes: Sequence[FileRecord | None] | None = None) -> list[FileRecord]:
        """Append in one script (one round trip), if no other writer appended since this log
        last looked (the records are made from the lines as stored: ``envelopes`` are not
        needed).

        Raises:
            LogBehind: others appended first; nothing was written, their lines are read and
                the next :meth:`begin_append` hands them over.
            SessionLockedError: others kept appending first for the store's ``lock_timeout``.
        """
        mode = "append"
        if self.header_line is None:
            if header_line is None:
                raise ValueError("the log has no header and none was given")
            mode = "first"
        head = self.header_line or header_line
        assert head is not None
        scratch = Scanner(None)
        records = [scratch.entry_record(line, 0) for line in lines]
        seen = self.seen
        try:
            first = self.store._appended(self.session_id, mode, head, lines, records, seen)
        except _Behind as behind:
            if self.header_line is not None and behind.header not in (None, self.header_line):
                raise ConcurrentModification("the session was deleted or created again since it "
                                             "was read", path=self.url) from None
            self._pending = self._fresh(behind.header, behind.lines)
            if time.monotonic() - self._since > self.store.lock_timeout:
                raise SessionLockedError(f"other writers kept appending first for "
                                         f"{self.store.lock_timeout:g}s", path=self.url) from None
            raise LogBehind(self.url) from None
        if self.header_line is None:
            self.header_line = head
        if first - 1 != seen:
            raise ConcurrentModification(f"the entries landed at line {first + 1}, not after the "
                                         f"{seen} this writer read", path=self.url)
        self._kept(records, lines)
        return records

    def end_append(self) -> None:
        """Nothing: an append holds no lock."""

    def follow(self, *, poll: float, stop: Callable[[], bool]) -> Iterator[bytes]:
        """Lines appended after the last one this log has read, as they land."""
        return self.store.follow(self.session_id, self.seen, poll=poll, stop=stop)


def _load_lines(header_line: bytes, lines: Sequence[bytes]) -> tuple[LoadResult, int]:
    """Every envelope of a session's lines, scanned as its JSONL form (the file scanner's batch
    decoding), and that form's size."""
    records = Columns()
    scanner = Scanner(None, records)
    text = b"\n".join([header_line, *lines]) + b"\n"
    scanner.scan(io.BytesIO(text))
    scanner.finish()
    scanner.records = []
    return LoadResult(scanner.header, scanner.header_line, records, scanner.problems), len(text)


class RedisLog(_Appends):
    """A session stored before the tree index (or that cannot have one: an import with
    orphans): its lines read with one ``LRANGE`` and kept, later lines fetched as other writers
    append them (:meth:`RedisStore.migrate` gives it the index)."""

    def __init__(self, store: RedisStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.entry_lines: list[bytes] = []
        self._size = 0  # bytes of the JSONL form so far (the records' offsets)
        self._pending = None
        self._since = 0.0
        meta, lines, _ = self.store.keys(self.session_id)
        header, fresh = self.store._query(lambda pipe: (pipe.hget(meta, "header"),
                                                        pipe.lrange(lines, 0, -1)))
        self.header_line = header
        self.entry_lines = list(fresh) if header is not None else []

    @property
    def seen(self) -> int:
        return len(self.entry_lines)

    @property
    def lines(self) -> list[bytes]:
        """The header line and the entry lines read so far (what a listing of this log reads)."""
        return ([self.header_line] if self.header_line is not None else []) + self.entry_lines

    def load(self) -> LoadResult:
        if self.header_line is None:
            return LoadResult(None, 1, [], [])
        loaded, self._size = _load_lines(self.header_line, self.entry_lines)
        return loaded

    def read(self, record: Record) -> bytes:
        return self.entry_lines[record.line - 2]

    def read_many(self, records: Sequence[Record]) -> list[bytes]:
        return [self.entry_lines[r.line - 2] for r in records]

    def _fresh(self, header: bytes | None, lines: Sequence[bytes]) -> LoadResult | None:
        """What other writers stored: ``lines`` after the ones read so far (all of them when
        the session was created by another writer meanwhile)."""
        if self.header_line is None:
            if header is None:
                return None
            self.header_line, self.entry_lines = header, list(lines)
            return self.load()
        if not lines:
            return None
        scanner = Scanner(None)
        scanner.start_after_header(_json.loads(self.header_line), 1)
        scanner.lineno = len(self.entry_lines) + 1
        for line in lines:
            scanner.feed(memoryview(line), self._size, True)
            self._size += len(line) + 1
            self.entry_lines.append(line)
        records: list[Record] = list(scanner.records)  # type: ignore[arg-type]  # a plain list
        return LoadResult(None, 1, records, list(scanner.problems))

    def _kept(self, records: Sequence[FileRecord], lines: Sequence[bytes]) -> None:
        if not self.entry_lines and not self._size and self.header_line is not None:
            self._size = len(self.header_line) + 1
        for record, line in zip(records, lines):
            record.line = len(self.entry_lines) + 2
            record.offset = self._size
            self._size += len(line) + 1
            self.entry_lines.append(line)

    def close(self) -> None:
        self._pending = None


_IMPORT_CHUNK = 500
"""Lines an import stores per script."""
_CHUNK = 256
"""Path positions read together (lines of about a kilobyte: a quarter of a megabyte a read)."""
_TAIL_CHUNKS = 16
"""Chunks from the last compaction on (at most, counted back from the leaf) read with the first
one asked for there: a context reads them all, in one round trip rather than one each."""
_CACHE_LIMIT = 8192
"""Lines a tree log keeps before it forgets them all."""


def _record_at(line: bytes, position: int) -> FileRecord:
    """The envelope of the stored line at ``position`` (from 1; its JSONL line is one more)."""
    record = Scanner(None).entry_record(line, 0)
    record.line = position + 1
    return record


class RedisTreeLog(_Appends):
    """A session with a tree index (``tree_keys``): opening reads its head (one script); a
    path is one script (segment to segment from the leaf back) and a pipelined ``LRANGE`` per
    chunk of it, an entry or a label one command; every line is read only when something needs
    the whole tree (:class:`~sessiontree._index.LazyIndex`)."""

    def __init__(self, store: RedisStore, session_id: str, header_line: bytes | None,
                 head: LogHead) -> None:
        self.store = store
        self.session_id = session_id
        self.header_line = header_line
        self._head = head
        self._count = head.entry_count
        self._lines: dict[int, bytes] = {}  # position -> line, at most _CACHE_LIMIT
        self._pending = None
        self._since = 0.0
        self._last_path: tuple[str, _RedisPath] | None = None

    @property
    def seen(self) -> int:
        return self._count

    def head(self) -> LogHead:
        return self._head

    def listing(self) -> SessionListing:
        meta = self.store.keys(self.session_id)[0]
        with self.store._errors():
            row = self.store._client.hmget(meta, _LISTING_FIELDS)
        if row[0] is None:
            raise SessionNotFound(f"no session {self.session_id} in this store", path=self.url)
        return self.store._listing(self.session_id, row)

    def _cache(self, position: int, line: bytes) -> None:
        if len(self._lines) >= _CACHE_LIMIT:
            self._lines.clear()
        self._lines[position] = line

    def _cache_run(self, position: int, lines: Sequence[bytes]) -> None:
        """Keep consecutive lines from ``position`` (a path's chunk)."""
        if len(self._lines) + len(lines) > _CACHE_LIMIT:
            self._lines.clear()
        self._lines.update(zip(range(position, position + len(lines)), lines))

    def load(self) -> LoadResult:
        if self.header_line is None:
            return LoadResult(None, 1, [], [])
        lines = self.store._client.lrange(self.store.keys(self.session_id)[1], 0, -1)
        self._count = max(self._count, len(lines))
        return _load_lines(self.header_line, lines)[0]

    def record(self, entry_id: str) -> Record | None:
        _, lines, ids = self.store.keys(self.session_id)
        with self.store._errors():
            found = self.store._record_script(keys=[ids, lines], args=[_text(entry_id)],
                                              client=self.store._client)
        if not found:
            return None
        position, line = int(found[0]), found[1]
        self._cache(position, line)
        return _record_at(line, position)

    def path(self, leaf_id: str) -> Sequence[Record]:
        last = self._last_path
        if last is not None and last[0] == leaf_id:
            return last[1]
        meta, _, ids = self.store.keys(self.session_id)
        with self.store._errors():
            found = self.store._path_script(keys=[meta, ids, self.store.tree_keys(
                self.session_id)[0]], args=[_text(leaf_id)], client=self.store._client)
        if not found:
            return []
        compaction, thinking, model, depth = (int(v) for v in found[:4])
        segments: list[tuple[int, int, int]] = []  # first position, first depth, last depth
        for at in range(4, len(found), 2):
            start, leaves = int(found[at]), int(found[at + 1])
            segments.append((start, depth - (leaves - start), depth))
            depth -= leaves - start + 1
        segments.reverse()
        path = _RedisPath(self, segments, (thinking - 1, model - 1, compaction - 1))
        self._last_path = (leaf_id, path)
        return path

    def label(self, entry_id: str) -> tuple[str, str | None] | None:
        with self.store._errors():
            value = self.store._client.hget(self.store.tree_keys(self.session_id)[1],
                                            _text(entry_id))
        if value is None:
            return None
        label, timestamp = _json.loads(value)
        return label, timestamp

    def _ranges(self, runs: Sequence[tuple[int, int]]) -> list[list[bytes]]:
        """The lines of each run of positions ``(first, last)``, one pipelined read."""
        key = self.store.keys(self.session_id)[1]
        return self.store._query(lambda pipe: [pipe.lrange(key, first - 1, last - 1)
                                               for first, last in runs])

    def read(self, record: Record) -> bytes:
        position = record.line - 1
        line = self._lines.get(position)
        if line is None:
            (lines,) = self._ranges([(position, position + 31)])  # and the next ones
            for offset, found in enumerate(lines):
                self._cache(position + offset, found)
            if not lines:
                raise ConcurrentModification(f"entry line {position + 1} is no longer stored "
                                             "(the session was deleted)", path=self.url)
            line = lines[0]
        return line

    def read_many(self, records: Sequence[Record]) -> list[bytes]:
        """The lines of many records, the ones not read yet fetched together (a pipelined
        ``LRANGE`` per run of consecutive positions)."""
        cached = self._lines
        try:
            return [cached[r.line - 1] for r in records]  # a path's chunks read them all
        except KeyError:
            pass
        wanted = sorted({r.line - 1 for r in records if r.line - 1 not in self._lines})
        if len(self._lines) + len(wanted) > _CACHE_LIMIT:
            self._lines.clear()
            wanted = sorted({r.line - 1 for r in records})
        runs: list[tuple[int, int]] = []
        for position in wanted:
            if runs and runs[-1][1] == position - 1:
                runs[-1] = (runs[-1][0], position)
            else:
                runs.append((position, position))
        found: dict[int, bytes] = {}
        for (first, _), lines in zip(runs, self._ranges(runs)):
            for offset, line in enumerate(lines):
                found[first + offset] = line
        self._lines.update(found)
        return [found.get(r.line - 1) or self.read(r) for r in records]

    def _fresh(self, header: bytes | None, lines: Sequence[bytes]) -> LoadResult | None:
        """What other writers stored: ``lines`` after the ones seen so far."""
        decoded: Any = None
        if self.header_line is None:
            if header is None:
                return None
            self.header_line = header
            decoded = _json.loads(header)
        if not lines and decoded is None:
            return None
        records = [_record_at(line, self._count + 1 + i) for i, line in enumerate(lines)]
        for record, line in zip(records, lines):
            self._cache(record.line - 1, line)
        self._count += len(lines)
        self._last_path = None
        return LoadResult(decoded if isinstance(decoded, dict) else None, 1, records, [])

    def _kept(self, records: Sequence[FileRecord], lines: Sequence[bytes]) -> None:
        for record, line in zip(records, lines):
            self._count += 1
            record.line = self._count + 1
            self._cache(self._count, line)

    def close(self) -> None:
        self._pending = None
        self._lines.clear()
        self._last_path = None


class _RedisPath(ChunkedPath):
    """A root-to-leaf path of a session with a tree index, read in chunks as they are asked
    for. ``segments`` are ``(first position, first depth, last depth)`` from the root's; the
    entry of depth ``d`` in a segment is at position ``first + d - first depth``."""

    chunk = _CHUNK

    def __init__(self, log: RedisTreeLog, segments: list[tuple[int, int, int]],
                 last: tuple[int, int, int]) -> None:
        super().__init__(segments, last)
        self._log = log

    def _wanted(self, number: int) -> Sequence[int]:
        """A context reads on to the leaf: from the last compaction's chunk, the rest of the
        path comes along in the same read."""
        last = (self._length - 1) // self.chunk
        first = max(self._last[2], 0) // self.chunk
        if number < first:
            return [number]
        return sorted({number, *range(max(first, last - _TAIL_CHUNKS + 1), last + 1)}
                      - self._chunks.keys())

    def _fetch(self, numbers: Sequence[int]) -> None:
        """Read these chunks: one pipelined read, one scanner decoding their envelopes."""
        runs: list[tuple[int, int]] = []
        spans: list[tuple[int, int, int]] = []  # chunk, its runs, its length
        for number in numbers:
            low, high = self._span(number)
            runs.extend((start + max(low, first) - first, start + min(high, last) - first)
                        for start, first, last in self._segments if last >= low and first <= high)
            spans.append((number, len(runs), high - low + 1))
        read = iter(zip(runs, self._log._ranges(runs)))
        scanner = Scanner(None)
        done = 0
        for number, ends, length in spans:
            found: list[Record] = []
            for (position, _), lines in islice(read, ends - done):
                self._log._cache_run(position, lines)
                found.extend(scanner.entry_records(lines, position + 1))
            done = ends
            if len(found) != length:
                raise ConcurrentModification(f"the path changed while it was read ({len(found)} "
                                             f"of {length} entries)", path=self._log.url)
            self._chunks[number] = found

    def __iter__(self) -> Iterator[Record]:
        """Root to leaf, a pipelined read per 32 chunks (not a round trip per chunk)."""
        step = 32 * self.chunk
        for start in range(0, self._length, step):
            yield from self[start:start + step]
