"""Search candidates straight from session-file bytes, as ``grep`` reads them: what a folder's
search does with the bytes its index does not hold yet, so that a first search costs about a
``grep -r`` of the folder and not the building of an index.

A line's entry is decoded only when its bytes may hold the query's words; the rest is read as
bytes (lowercased and searched at C speed). Lines are judged by the same rule as an index's
candidates (:func:`sessiontree._search.holds_words` of :func:`~sessiontree._search.document`),
and only the :data:`~sessiontree._search.CANDIDATES` most recent are kept, so what a scan
finds is what an index holding those lines would have handed over.

Invariants:
* A line is passed over only when its bytes prove that its entry cannot hold every word: for
  words of ASCII letters and digits, no occurrence of one of them (the anchor) in the
  lowercased line between bytes that cannot continue a word (the letter or digit that ends
  an escape, ``\\n`` or ``\\u001b``, does not), or not each of the others in a line that
  holds it. Anything that could spell a letter or digit of a word the bytes do not show (an
  escape of one, :data:`_ALNUM_ESCAPES`; for a word with a ``k``, the Kelvin sign, raw or
  escaped: :data:`_OUTSIDE`) makes the line a maybe: across all the bytes for the anchor, in
  the lines that hold it for the others. A word with other characters is looked for in the
  decoded line, lowercased as search does (:func:`~sessiontree._search.lowered`); a line
  holding an escape or a capital sigma (whose lowercase, final or not, depends on its
  neighbours: in the line's bytes an escape's letter, ``\\n``, may stand beside it where the
  text has none) is a maybe.
* Lines are read whole (a region ends at its last newline); a line that does not decode is
  no candidate, as for an index.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import msgspec

from ._search import _KELVIN, CANDIDATES, SearchDoc, _ms, document, holds_words, lowered

__all__ = ["Found", "Recent", "fast_lines", "maybe_lines"]

_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789")
_OUTSIDE = {ord("k"): _KELVIN}
"""The characters outside ASCII whose lowercase for search
(:func:`~sessiontree._search.lowered`) is an ASCII letter, by that letter: the Kelvin sign
(k). Not the capital I with a dot, which search keeps a letter of its own: ``TAX\u0130`` is
no word ``taxi``."""
_SIGMA = "\u03a3".encode()
"""The one character whose lowercase depends on its neighbours (``str.lower``: a final sigma
after a cased letter that no cased letter follows)."""
_ALNUM_ESCAPES = frozenset(b"\\u%04x" % byte for byte in range(0x80) if chr(byte).isalnum())
"""The escapes that spell an ASCII letter or digit, as lowercased bytes show them
(``\\u0030``-``\\u0039``, ``\\u0041``-``\\u005a``, ``\\u0061``-``\\u007a``): the only ones
an escape needle is (``\\u003c``, ``\\u005f``, ``\\u007b`` ... of tool output are not)."""


class _Spelling(NamedTuple):
    """What may spell a letter or digit of a word where its lowercased bytes do not show it:
    the one definition of what both scans (:func:`fast_lines`, :func:`maybe_lines`) look for
    beside the word."""

    escapes: frozenset[bytes]
    """:data:`_ALNUM_ESCAPES`, and the escape of each character of :data:`_OUTSIDE` that
    lowercases to one of its letters."""
    raw: tuple[bytes, ...]
    """Those characters' UTF-8."""
    outside: tuple[bytes, ...]
    """Those characters, raw and escaped."""
    prefix: bytes
    """What each escape starts with (``\\u00`` without such characters)."""


@functools.lru_cache(maxsize=64)
def _spelling(word: bytes) -> _Spelling:
    chars = [char for letter, char in _OUTSIDE.items() if letter in word]
    escaped = [b"\\u%04x" % ord(char) for char in chars]
    raw = tuple(char.encode() for char in chars)
    escapes = _ALNUM_ESCAPES.union(escaped)
    prefix = b"\\u00"
    while not all(escape.startswith(prefix) for escape in escapes):
        prefix = prefix[:-1]
    return _Spelling(escapes, raw, (*raw, *escaped), prefix)


def maybe_lines(data: bytes, words: Sequence[str]) -> list[tuple[int, int]]:
    """The (start, end) of each whole line of ``data`` (end at its newline; bytes after the
    last newline are left out) whose entry may hold every word: a superset of those that do,
    in order."""
    if all(word.isascii() for word in words):
        return _ascii_lines(data, [word.encode() for word in words])
    found: list[tuple[int, int]] = []
    start = 0
    end = data.find(b"\n")
    while end >= 0:
        line = data[start:end]
        if b"\\u" in line or _SIGMA in line:
            found.append((start, end))
        else:
            text = lowered(line.decode("utf-8", "replace"))
            if all(word in text for word in words):
                found.append((start, end))
        start = end + 1
        end = data.find(b"\n", start)
    return found


def _anchor(words: Sequence[bytes]) -> bytes:
    """The word looked for across all the bytes (the others only in the lines that hold it):
    the longest, one without a letter that a character outside ASCII may spell (:data:`_OUTSIDE`)
    if there is one."""
    return max(words, key=lambda word: (len(word), not _spelling(word).raw))


def _ascii_lines(data: bytes, words: list[bytes], *,
                 escapes: bool = True) -> list[tuple[int, int]]:
    """:func:`maybe_lines` of ASCII words (``escapes``: unless ``data`` is known to hold
    nothing that may spell a letter of the anchor, so that it need not be searched for)."""
    low = data.lower()
    stop = low.rfind(b"\n")
    lines: dict[int, int] = {}
    anchor = _anchor(words)
    others = [word for word in words if word != anchor]
    # the lines where something may spell a letter or digit of the anchor (_spelling): an
    # escape, looked for as what they all start with (\u00; \u with the Kelvin sign's: a
    # needle of 4 bytes is found half again as fast as one of 2), and a character outside
    # ASCII; the other words are looked for in the lines that hold the anchor
    spelling = _spelling(anchor)
    specials: list[bytes] = []
    if escapes:
        specials.append(spelling.prefix)
        specials += [char for char in spelling.raw  # (its last byte found at memchr's speed)
                     if low.find(char[-1:], 0, stop) >= 0]
    for special in specials:
        at = low.find(special, 0, stop)
        while at >= 0:
            if special[0] == 0x5C and low[at:at + 6] not in spelling.escapes:
                at = low.find(special, at + 2, stop)  # a control character, an accent ...
                continue
            start = low.rfind(b"\n", 0, at) + 1
            end = low.find(b"\n", at)
            lines[start] = end
            at = low.find(special, end, stop)
    others_outside = _spelling(b" ".join(others)).outside
    size = len(anchor)
    find = low.find
    at = find(anchor, 0, stop)
    while at >= 0:  # (a word that most lines hold comes here for each: kept lean)
        end = find(b"\n", at)
        while at >= 0 and (low[at + size] in _WORD_BYTES or
                           (at and low[at - 1] in _WORD_BYTES and not _escaped(low, at))):
            at = find(anchor, at + 1, end)
        if at >= 0:
            start = low.rfind(b"\n", 0, at) + 1
            if start not in lines and (not others or _others(low[start:end], others,
                                                             others_outside)):
                lines[start] = end
        at = find(anchor, end, stop)
    return sorted(lines.items())


def fast_lines(words: Sequence[str]) -> Callable[[bytes], list[tuple[int, int]]] | None:
    """:func:`maybe_lines` for these words, the same lines, with each chunk first searched in
    one pass for the anchor in any case and in another for anything that may spell one of its
    letters although the bytes do not show it (an escape of :data:`_ALNUM_ESCAPES`, and for an
    anchor with a ``k`` the Kelvin sign, raw or ``\\u212a``: :data:`_OUTSIDE`): a chunk with
    neither holds no line, and one without the second needs no search for escapes. Each pass
    is Hyperscan's (the optional extra ``sessiontree[fast]``, several GB/s), where CPython
    takes three passes of about 10 instructions a byte in all (lowercase, the escapes, the
    anchor), so most chunks of a rare word are passed over at about ``grep``'s speed. None
    without the extra, with ``SESSIONTREE_HYPERSCAN=0`` (as without it, in helper processes
    too: they inherit the environment), or for words not all ASCII (every line judged as
    :func:`maybe_lines` does). Hyperscan failing (``hyperscan.error``: a CPU it does not
    support, ...) costs only time: a warning, and the chunks left are scanned as without it."""
    if not all(word.isascii() for word in words):
        return None
    if os.environ.get("SESSIONTREE_HYPERSCAN") == "0":
        return None
    try:
        import hyperscan
    except ImportError:
        return None
    encoded = [word.encode() for word in words]
    anchor = _anchor(encoded)
    spelling = [*sorted(_spelling(anchor).escapes), *_spelling(anchor).raw]
    stopped = hyperscan.ScanTerminated

    def finder(needles: list[bytes]) -> Callable[[bytes], bool]:
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(expressions=needles, ids=list(range(len(needles))),
                         elements=len(needles), flags=hyperscan.HS_FLAG_CASELESS, literal=True)

        def holds(data: bytes) -> bool:
            try:
                database.scan(data, match_event_handler=_stop)
            except stopped:  # (at the first one found)
                return True
            return False

        return holds

    try:
        holds_anchor, may_spell = finder([anchor]), finder(spelling)
    except hyperscan.error as error:
        _failed(error)
        return None
    failed = False

    def lines(data: bytes) -> list[tuple[int, int]]:
        nonlocal failed
        if not failed:
            try:
                spelled = may_spell(data)
                if not spelled and not holds_anchor(data):
                    return []
                return _ascii_lines(data, encoded, escapes=spelled)
            except hyperscan.error as error:  # (ScanTerminated is caught in holds)
                _failed(error)
                failed = True
        return _ascii_lines(data, encoded)

    return lines


def _stop(*_: object) -> bool:
    return True


def _failed(error: Exception) -> None:
    warnings.warn(f"Hyperscan failed ({error}): scanning without it (exact, slower)",
                  RuntimeWarning, stacklevel=3)


def _whole(low: bytes, at: int, size: int) -> bool:
    """Whether the bytes around ``low[at:at + size]`` may end a word there."""
    after = at + size
    if after < len(low) and low[after] in _WORD_BYTES:
        return False
    return not at or low[at - 1] not in _WORD_BYTES or _escaped(low, at)


def _escaped(low: bytes, at: int) -> bool:
    """Whether the letter or digit before ``at`` may end an escape (``\\n``, ``\\u001b``):
    then no word goes on there."""
    return (at >= 2 and low[at - 2] == 0x5C) or low[max(at - 6, 0):at - 4] == b"\\u"


def _others(line: bytes, words: list[bytes], outside: tuple[bytes, ...]) -> bool:
    """Whether a lowercased line that holds the anchor may hold each of ``words`` too (a line
    with an escape that spells a letter is known already; ``outside``: the characters outside
    ASCII, raw or escaped, that may spell a letter of theirs)."""
    return any(char in line for char in outside) or all(_holds(line, word) for word in words)


def _holds(line: bytes, word: bytes) -> bool:
    at = line.find(word)
    while at >= 0:
        if _whole(line, at, len(word)):
            return True
        at = line.find(word, at + 1)
    return False


class _Stamp(msgspec.Struct):
    timestamp: Any = None


_stamp = msgspec.json.Decoder(_Stamp)
_PLAIN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)
"""A time as pi writes it: for two of these (after 1970), the string order is the time's."""


class Found(NamedTuple):
    """A line that holds every word, with where it is."""

    key: tuple[int, str, int]
    """Its recency order: (-ms, session id, place)."""
    session: str
    cwd: str
    line: bytes
    doc: SearchDoc


class _Kept(NamedTuple):
    """A line that may hold every word, known by its time alone (its bytes read back once
    judged)."""

    key: tuple[int, str, int]
    session: str
    cwd: str
    length: int


KEPT_PER_CANDIDATE = 32
"""Lines kept by their time alone, per candidate, before the best of them are judged (so that
there is a least recent to pass lines over by): about 250 bytes each."""


class Recent:
    """The :data:`CANDIDATES` most recent lines holding every word (and a role, a time), from
    any number of regions. A scan keeps only the time and place of a line that may hold the
    words; the most recent of them are judged (their bytes read back with ``read(session,
    place, length)``, ``None`` if they cannot be) at the end, or whenever too many are kept:
    of a word most lines hold, about as many lines are decoded as there are candidates, not
    every one more recent than those found so far. A line older than all candidates once
    there are enough is not even kept."""

    def __init__(self, words: Sequence[str], *, role: str | None, since: int,
                 read: Callable[[str, int, int], bytes | None]) -> None:
        self.words = list(words)
        self._lines: Callable[[bytes], list[tuple[int, int]]] | None = None
        """How a chunk's lines that may hold every word are found (at the first scan)."""
        self.role = role
        self.since = since
        self._read = read
        self.found: list[Found] = []
        """The most recent candidates judged so far, most recent first (at most
        :data:`CANDIDATES`)."""
        self._kept: list[_Kept] = []
        self._worst: tuple[int, str, int] | None = None
        self._worst_stamp: str | None = None
        """The least recent candidate's time, when pi wrote it: a line whose time, laid out
        the same way, sorts before it is older (or has no valid time: 0), so it is passed
        over without parsing its time."""

    def scan(self, data: bytes, base: int, session_id: str, session: str, cwd: str) -> None:
        """Look at the whole lines of ``data`` (a last line without its newline is left out),
        the bytes of ``session`` from offset ``base`` (a line's place is its offset)."""
        if self._lines is None:
            words = self.words
            self._lines = fast_lines(words) or (lambda data: maybe_lines(data, words))
        kept, worst, since = self._kept, self._worst, self.since
        worst_stamp, decode, plain = self._worst_stamp, _stamp.decode, _PLAIN.fullmatch
        view = memoryview(data)  # (each line decoded where it is, not copied)
        for start, end in self._lines(data):  # (once a line for a common word)
            if data[start] != 0x7B:  # {
                continue
            try:
                stamp = decode(view[start:end]).timestamp
            except (msgspec.DecodeError, UnicodeDecodeError):
                continue
            if worst_stamp is not None and stamp.__class__ is str and stamp < worst_stamp \
                    and plain(stamp):
                continue
            ms = _ms(stamp if stamp.__class__ is str else None)
            if ms < since:
                continue
            key = (-ms, session_id, base + start)
            if worst is None or key < worst:
                kept.append(_Kept(key, session, cwd, end - start))
        if len(kept) >= KEPT_PER_CANDIDATE * CANDIDATES:
            self._judge()

    def best(self) -> list[Found]:
        """The most recent ones, best first."""
        self._judge()
        return self.found

    def _judge(self) -> None:
        """Judge the kept lines, most recent first, while one may still be a candidate: one
        is not once :data:`CANDIDATES` judged lines are more recent."""
        self._kept.sort(key=lambda item: item.key)
        old = self.found
        new: list[Found] = []
        before = 0  # (how many of the old candidates are more recent than this line)
        for key, session, cwd, length in self._kept:
            while before < len(old) and old[before].key < key:
                before += 1
            if before + len(new) >= CANDIDATES:
                break
            line = self._read(session, key[2], length)
            if line is None:
                continue  # (gone, or not the line it was)
            doc = document(line)
            if doc is None or doc.ms != -key[0] or \
                    (self.role is not None and doc.role != self.role) or \
                    not holds_words(doc.text, self.words):
                continue  # (a time that is not the one kept: the file changed since)
            new.append(Found(key, session, cwd, line, doc))
        self._kept.clear()
        self.found = sorted(old + new, key=lambda item: item.key)[:CANDIDATES]
        if len(self.found) == CANDIDATES:
            last = self.found[-1]
            self._worst = last.key
            stamp = last.doc.timestamp
            self._worst_stamp = stamp if stamp is not None and last.doc.ms > 0 and \
                _PLAIN.fullmatch(stamp) else None
