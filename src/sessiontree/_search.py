"""Full-text search's one definition, shared by every backend: what text an entry line holds,
how a query is read, which entries match it, how they rank, and the snippet a hit shows.

The backends' indexes (an SQLite FTS5 index beside a folder, FTS5 tables in an SQLite store,
a GIN-indexed word array in PostgreSQL) only narrow the entries down to candidates holding
every word of the query; each candidate's stored line is then read again and judged here.
So every backend gives the same hits in the same order, and an index never decides alone
(a stale one can only cost time, never a wrong hit).

Invariants:
* Words are runs of letters and digits (Unicode categories L* and N*) of the lowercased text
  (:func:`lowered`: a capital I with a dot stays a letter of its own), in an entry's text as
  in a query; ``"quoted words"`` must be adjacent, in order. The FTS5 indexes are given these
  words (:func:`fts_body`), never the text, which FTS5's ``unicode61`` tokenizer splits
  otherwise (it keeps a combining mark inside a word, where these words end).
* An entry matches when it holds every word and every phrase of the query, anywhere in its
  text: message text, thinking, tool calls (name and arguments), tool results, bash commands
  and output, custom messages, branch and compaction summaries, and labels.
* Rank: relevance (how often the query's terms occur, for the entry's length), then recency
  (the entry's time), then the session id and the entry's place in its session.
* The backends take the :data:`CANDIDATES` most recent candidates (by time, then session id,
  then place) before ranking them, so a query matching a huge number of entries stays fast;
  each backend takes the same ones.
* A database's index rows also keep each entry's size and its words' counts, which bound its
  relevance (:func:`bounds`, exact for a query of words alone): :func:`best_first` reads and
  judges the candidates' lines in the order of their bounds and stops when no line left can
  rank among the hits, with the hits :func:`rank` gives for all of them. A stale row (a line
  rewritten without its search rows) can misplace a hit, never make one.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any, Literal, NamedTuple, cast

import msgspec

from ._time import iso_to_ms
from .errors import SessionTreeError

__all__ = [
    "CANDIDATES",
    "Bounded",
    "Candidate",
    "InvalidQuery",
    "Query",
    "ROLES",
    "SearchDoc",
    "SearchHit",
    "best_first",
    "bounds",
    "branch_flags",
    "document",
    "entry_terms",
    "fts_body",
    "fts_counts",
    "fts_query",
    "holds_words",
    "lowered",
    "parse_query",
    "rank",
    "row_counts",
    "row_bounds",
    "score",
    "scores",
    "since_ms",
    "tokens",
]

CANDIDATES = 1_000
"""How many of the most recent entries an index hands over for ranking, at most."""

Role = Literal["user", "assistant", "tool", "custom", "summary", "label"]
ROLES: tuple[str, ...] = ("user", "assistant", "tool", "custom", "summary", "label")

_WORD = re.compile(r"[^\W_]+")
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
_SNIPPET = 160


class InvalidQuery(SessionTreeError, ValueError):
    """A search query with no word to look for."""


def lowered(text: str) -> str:
    """``text`` lowercased for search: ``str.lower``, but a capital I with a dot (U+0130) is
    kept whole, a letter of its own. It is the one character whose lowercase is longer (``i``
    and a combining dot, which ends a word): lowercased so, ``TAX\u0130`` would be the word
    ``taxi``, which the text does not show, and a query for ``TAX\u0130`` would find neither
    it nor ``TAX\u0130S``. Kept, each character's place is the same in the text and its
    lowercase (a term's span in one is its span in the other), and a sigma beside it
    lowercases as beside any capital."""
    if "\u0130" not in text:
        return text.lower()
    low = text.replace("\u0130", "I").lower()  # (a capital as it is: the sigma's neighbour)
    pieces: list[str] = []
    at = 0
    for piece in text.split("\u0130"):
        pieces.append(low[at:at + len(piece)])
        at += len(piece) + 1
    return "\u0130".join(pieces)


def tokens(text: str) -> list[str]:
    """The words of ``text``, lowercased (:func:`lowered`), in order."""
    return _WORD.findall(lowered(text))


def holds_words(text: str, words: Iterable[str]) -> bool:
    """Whether each of ``words`` is one of the words of ``text`` (``set(words) <=
    set(tokens(text))``, without listing every word of a long text): what makes an entry an
    index's candidate (every backend's index finds these, and a scan of bytes too)."""
    low = lowered(text)
    return all(_whole_word(word).search(low) for word in words)


@functools.lru_cache(maxsize=256)
def _whole_word(word: str) -> re.Pattern[str]:
    """The word where it is a whole word: a run of letters and digits no longer than it."""
    return re.compile(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])")


class Query(NamedTuple):
    """A parsed query: its terms, each a word or a phrase (words that must be adjacent)."""

    text: str
    terms: tuple[tuple[str, ...], ...]

    def words(self) -> list[str]:
        """Every distinct word of every term: what an index looks up (each must be there)."""
        return sorted({word for term in self.terms for word in term})


def parse_query(text: str) -> Query:
    """Words and ``"exact phrases"``; a word made of several (``foo.bar``) is a phrase.

    Raises:
        InvalidQuery: no word in it.
    """
    terms: list[tuple[str, ...]] = []
    for index, part in enumerate(text.split('"')):
        if index % 2:  # inside quotes
            phrase = tuple(tokens(part))
            if phrase:
                terms.append(phrase)
        else:
            for chunk in part.split():
                word = tuple(tokens(chunk))
                if word:
                    terms.append(word)
    if not terms:
        raise InvalidQuery(f"nothing to search for in {text!r}: give a word or a \"phrase\"")
    return Query(text, tuple(dict.fromkeys(terms)))


# -- what an entry line holds ------------------------------------------------------------------


class _Block(msgspec.Struct):
    """A content block, only the fields search reads (a thinking signature, an image's data
    are skipped, not copied)."""

    type: Any = None
    text: Any = None
    thinking: Any = None
    name: Any = None
    arguments: Any = None


_Content = str | list[_Block] | None
"""Content as it nearly always is; anything else (a block that is not an object) is decoded
again as :data:`Any`, with the same result."""


class _Message(msgspec.Struct):
    role: Any = None
    content: _Content = None
    command: Any = None
    output: Any = None
    toolName: Any = None  # noqa: N815  (the JSON name)
    summary: Any = None


class _Line(msgspec.Struct):
    type: Any = None
    id: Any = None
    timestamp: Any = None
    message: _Message | None = None
    content: _Content = None
    summary: Any = None
    label: Any = None
    targetId: Any = None  # noqa: N815


class _AnyMessage(_Message):
    content: Any = None


class _AnyLine(_Line):
    message: _AnyMessage | None = None
    content: Any = None


class _Float:
    """A JSON float (a number with a fraction or an exponent) as the line writes it: search
    holds the file's text (``1e5``, ``1.5e-7``), the bytes a scan reads, not Python's
    ``100000.0``, ``1.5e-07``. An integer's digits are its text already (``-0`` is the word
    ``0`` either way)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_decoder = msgspec.json.Decoder(_Line, float_hook=_Float)
_any_decoder = msgspec.json.Decoder(_AnyLine, float_hook=_Float)
_ROLE_OF_MESSAGE: dict[object, Role] = {
    "user": "user", "assistant": "assistant", "toolResult": "tool", "bashExecution": "tool",
    "custom": "custom", "branchSummary": "summary", "compactionSummary": "summary"}


class SearchDoc(NamedTuple):
    """What search sees of one entry."""

    entry_id: str
    role: Role
    timestamp: str | None
    ms: int
    """The entry's time (epoch ms; 0 without one): recency."""
    text: str


def _leaves(value: Any, out: list[str]) -> None:
    """A tool call's arguments as the texts they hold (strings, numbers as written), in order."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, _Float):
        out.append(value.text)
    elif isinstance(value, dict):
        for item in value.values():
            _leaves(item, out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif isinstance(value, int) and not isinstance(value, bool):
        out.append(str(value))


def _parts(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, _Block):
            kind, text, thinking = block.type, block.text, block.thinking
            name, arguments = block.name, block.arguments
        elif isinstance(block, dict):
            kind, text, thinking = block.get("type"), block.get("text"), block.get("thinking")
            name, arguments = block.get("name"), block.get("arguments")
        else:
            continue
        for value in (text, thinking):
            if isinstance(value, str):
                out.append(value)
        if kind == "toolCall":
            if isinstance(name, str):
                out.append(name)
            _leaves(arguments, out)


def document(line: bytes) -> SearchDoc | None:
    """The searchable text of an entry line, ``None`` for a line with none (a header, a
    model change, a line that does not parse)."""
    try:
        try:
            entry: _Line = _decoder.decode(line)
        except msgspec.ValidationError:  # content of another shape
            entry = _any_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not isinstance(entry.id, str):
        return None
    kind = entry.type
    out: list[str] = []
    role: Role
    if kind == "message" and entry.message is not None:
        message = entry.message
        found = _ROLE_OF_MESSAGE.get(message.role) if isinstance(message.role, str) else None
        if found is None:
            return None
        role = found
        if isinstance(message.toolName, str):
            out.append(message.toolName)
        for field in (message.command, message.output, message.summary):
            if isinstance(field, str):
                out.append(field)
        _parts(message.content, out)
    elif kind in ("branch_summary", "compaction"):
        role = "summary"
        if isinstance(entry.summary, str):
            out.append(entry.summary)
    elif kind == "custom_message":
        role = "custom"
        _parts(entry.content, out)
    elif kind == "label":
        role = "label"
        if isinstance(entry.label, str):
            out.append(entry.label)
    else:
        return None
    text = "\n".join(part for part in out if part)
    if not text:
        return None
    stamp = entry.timestamp if isinstance(entry.timestamp, str) else None
    return SearchDoc(entry.id, role, stamp, _ms(stamp), text)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS = _dt.timedelta(milliseconds=1)


def _ms(stamp: str | None) -> int:
    """Epoch ms of an entry's time (0 without one): pi's own form parsed at C speed, any
    other as :func:`sessiontree._time.iso_to_ms` reads it."""
    if stamp is None:
        return 0
    if len(stamp) == 24 and stamp[23] == "Z" and stamp[10] == "T":
        try:
            moment = _dt.datetime.fromisoformat(stamp[:23] + "+00:00")
            return (moment - _EPOCH) // _MS
        except ValueError:
            pass
    return iso_to_ms(stamp) or 0


def since_ms(since: _dt.datetime | _dt.date | None) -> int:
    """A ``since`` argument as epoch ms (a naive time is local; a date is its midnight)."""
    if since is None:
        return 0
    if not isinstance(since, _dt.datetime):
        since = _dt.datetime(since.year, since.month, since.day)
    return int(since.timestamp() * 1000)


# -- matching, ranking, snippets ---------------------------------------------------------------


class Candidate(NamedTuple):
    """An entry an index found: where it is and its stored line (judged again here)."""

    session_id: str
    session: str
    """Where the session is: its file, or ``<store URL>#<id>``."""
    cwd: str
    place: int
    """Its place in the session (a byte offset or a line number: only the order counts)."""
    line: bytes
    size: int | None = None
    """The size of its text (:func:`score`'s) when an index row holds it for this very
    line (its file unchanged since it was indexed): not counted again (``None``: counted).
    For a query of words alone the row's bound is then the relevance itself, and only the
    spans its snippet shows are looked for (:meth:`_Matcher.shown`)."""


class SearchHit(msgspec.Struct, frozen=True):
    """One entry that matched."""

    session_id: str
    session: str
    """Where the session is: its file, or ``<store URL>#<id>`` (what ``Session.open`` takes)."""
    cwd: str
    entry_id: str
    role: str
    """``user``, ``assistant``, ``tool`` (tool results, bash), ``custom``, ``summary``, ``label``."""
    timestamp: str | None
    on_current_branch: bool
    """Whether the entry is on the path from the root to the session's leaf (where it resumes)."""
    snippet: str
    """Text around the first match, on one line."""
    marks: list[tuple[int, int]]
    """Where the query's terms are in ``snippet`` (start, end)."""
    score: float
    """Relevance: higher is better."""


def _patterns(query: Query) -> list[re.Pattern[str]]:
    """One pattern per term, for lowercased text: its words separated by anything but letters
    and digits (whether they are whole words is checked at each match, which is faster than
    asking the pattern)."""
    return [re.compile(r"[\W_]+".join(map(re.escape, term))) for term in query.terms]


def _spans(doc_text: str, patterns: list[re.Pattern[str]], *, prefix: bool = False
           ) -> list[tuple[int, int]] | None:
    """The character spans of every occurrence of every term; ``None`` when one is missing.
    ``prefix``: ``doc_text`` is the start of a longer text, whose letter after its end is
    unseen: a span that ends there is left out."""
    low = lowered(doc_text)  # (of its length: a span in it is the span in the text)
    spans: list[tuple[int, int]] = []
    padded = f" {low} "  # (a letter before or after a match: low[a - 1], low[b] in one test)
    limit = len(low) if prefix else len(low) + 1
    for pattern in patterns:
        found = [(a, b) for a, b in (m.span() for m in pattern.finditer(low))
                 if b < limit and not padded[a].isalnum() and not padded[b + 1].isalnum()]
        if not found:
            return None
        spans.extend(found)
    spans.sort()
    return spans


_KELVIN = "\u212a"
"""The one character outside ASCII whose lowercase is an ASCII letter or digit (``k``)."""
_PIECES = bytes(0x20 if byte in b" \t\n\r\x0b\x0c" else 0x21 if 0x1C <= byte <= 0x1F else 0x78
                for byte in range(256))
"""UTF-8 bytes as ``" "`` (what ``bytes.split`` splits at), ``"!"`` (what ``str.split``
splits at too) and ``"x"``."""
_ASCII = bytes(range(0x80))
_ODD_SPACES = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
"""The characters outside ASCII that ``str.split`` splits at."""


def _pieces(text: str, data: bytes) -> int:
    """``len(text.split())`` (``data``: its UTF-8) without making the pieces: where it holds
    no whitespace but ASCII's, the starts of runs counted in one ``translate`` of the bytes."""
    marks = data.translate(_PIECES)
    if b"!" in marks or (len(data) != len(text) and _ODD_SPACES.search(
            data.translate(None, _ASCII).decode("utf-8", "surrogatepass"))):
        return len(text.split())
    return marks.count(b" x") + marks.startswith(b"x")


def _lowered_alnum(data: bytes, start: int, end: int) -> bool:
    """Whether the character of UTF-8 ``data[start:end]``, lowercased (:func:`lowered`), is a
    letter or digit."""
    return lowered(data[start:end].decode("utf-8", "surrogatepass")).isalnum()


class _Matcher:
    """Finds a query's terms in an entry's text: :func:`_spans`, or for a query of single
    ASCII words the same spans found in the text's UTF-8 lowercased as bytes (``str.lower``
    and ``str.split`` of a long text holding a letter outside ASCII were most of judging a
    word most entries hold: 11 of 19 ms for 20 lines of 624,000 characters)."""

    def __init__(self, query: Query) -> None:
        self.patterns = _patterns(query)
        self.words: list[re.Pattern[bytes]] | None = None
        if all(len(term) == 1 and term[0].isascii() for term in query.terms):
            # (the letter before checked behind the word: a pattern that starts with the
            # word is searched for as a whole, ten times as fast)
            self.words = [re.compile(b"%s(?<![a-z0-9]%s)(?![a-z0-9])" % (word, word))
                          for word in (re.escape(term[0].encode()) for term in query.terms)]

    def judge(self, text: str, size: int | None = None
              ) -> tuple[float, list[tuple[int, int]]] | None:
        """The text's relevance and the spans of the terms (all of them, or at least those
        its snippet shows); ``None``: a term is missing. ``size``: the text's (:func:`score`),
        when an index holds it (counting it was half of judging a long text: a tool output
        of 31,000 characters)."""
        if self.words is None or _KELVIN in text:
            spans = _spans(text, self.patterns)
            return None if spans is None else (
                score(len(spans), len(text.split()) if size is None else size), spans)
        data = text.encode("utf-8", "surrogatepass")
        low = data.lower()  # (ASCII letters only: the only ones these words hold)
        ascii_only = len(data) == len(text)
        found: list[tuple[int, int]] = []
        for pattern in self.words:
            spans = [m.span() for m in pattern.finditer(low)]
            if not ascii_only:  # a letter outside ASCII before or after it is not seen above
                spans = [(a, b) for a, b in spans if not (
                    a and data[a - 1] >= 0x80 and _lowered_alnum(data, _char_start(data, a), a)
                ) and not (b < len(data) and data[b] >= 0x80 and _lowered_alnum(
                    data, b, _char_end(data, b)))]
            if not spans:
                return None
            found.extend(spans)
        found.sort()
        relevance = score(len(found), _pieces(text, data) if size is None else size)
        return relevance, found if ascii_only else _char_spans(data, found)

    def shown(self, text: str) -> list[tuple[int, int]] | None:
        """The spans of the terms in what a snippet at the first shows (:func:`_snippet`),
        for a query of ASCII words when the relevance is known (an index row's, exact): the
        text lowercased and searched from its start, a longer prefix each time, until every
        term and the snippet after the first span are in it (a word most entries hold is
        nearly always near the start of a long tool output). Every term is looked for, not
        the index trusted for it: FTS5 finds words these do not (it folds a long s to an s,
        and splits a word at some letters). A span that ends where a prefix ends is left for
        a longer prefix (the letter after it unseen). ``None``: a term is not in the text.
        For a matcher of ASCII words (``words``) only."""
        end = 4 * _SNIPPET
        while True:
            whole = end >= len(text)
            spans = _spans(text[:end], self.patterns, prefix=not whole)
            if spans is not None and (
                    whole or end > max(0, spans[0][0] - _SNIPPET // 3) + _SNIPPET):
                return spans
            if whole:
                return None
            end *= 4


def _char_start(data: bytes, end: int) -> int:
    """Where the UTF-8 character that ends at ``end`` starts."""
    start = end - 1
    while start > 0 and 0x80 <= data[start] < 0xC0:
        start -= 1
    return start


def _char_end(data: bytes, start: int) -> int:
    """Where the UTF-8 character that starts at ``start`` ends."""
    end = start + 1
    while end < len(data) and 0x80 <= data[end] < 0xC0:
        end += 1
    return end


def _char_spans(data: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte spans of UTF-8 ``data`` (sorted) as character spans, up to the last a snippet at
    the first can show."""
    out: list[tuple[int, int]] = []
    at = chars = 0
    for a, b in spans:
        chars += len(data[at:a].decode("utf-8", "surrogatepass"))
        if out and chars >= out[0][0] + _SNIPPET:
            break
        out.append((chars, chars + b - a))  # (the words are ASCII: a byte a character)
        at = a
    return out


def _snippet(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    first = spans[0][0]
    start = max(0, first - _SNIPPET // 3)
    end = min(len(text), start + _SNIPPET)
    pieces: list[str] = ["…" if start else ""]
    at = start
    for a, b in spans:
        if a >= end:  # (sorted: none after it is shown)
            break
        if a < at or b > end:
            continue
        pieces += [text[at:a], _MARK_OPEN, text[a:b], _MARK_CLOSE]
        at = b
    pieces += [text[at:end], "…" if end < len(text) else ""]
    flat = " ".join("".join(pieces).split())
    marks: list[tuple[int, int]] = []
    out: list[str] = []
    size = 0
    opened = 0
    for char in flat:
        if char == _MARK_OPEN:
            opened = size
        elif char == _MARK_CLOSE:
            marks.append((opened, size))
        else:
            out.append(char)
            size += 1
    return "".join(out), marks


def score(spans: int, size: int) -> float:
    """Relevance: how often the query's terms occur (``spans``), for the entry's length
    (``size``: its whitespace-separated pieces), one formula for a hit and for a bound."""
    return scores((spans,), (size,))[0]


def scores(spans: Iterable[int], sizes: Iterable[int]) -> list[float]:
    """:func:`score` of many entries at once (no Python call per entry: bounding a thousand
    index rows one call each was a tenth of a warm search)."""
    log = math.log
    return [round(n / (1.0 + log(1 + size)), 9) for n, size in zip(spans, sizes)]


_CHUNKS = bytes(c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 or c >= 128
                else 32 for c in range(256))
"""UTF-8 bytes to chunks split by spaces: ASCII letters lowercased, ASCII digits and every byte
of a non-ASCII character kept, anything else (ASCII, and never in a word) a space."""


def entry_terms(text: str) -> tuple[int, dict[str, int]]:
    """What an index keeps of an entry's text to bound its relevance without reading it
    (:func:`best_first`): its size (as :func:`score` counts it) and how often each word
    occurs (``{word: count}``, every distinct word: those of :func:`tokens`).

    The words are counted in chunks of the UTF-8 bytes split at ASCII characters that are no
    letter or digit (what every index of a bulk import does for each entry: three times
    faster than the regular expression over the whole text); an ASCII chunk is a word, a
    chunk holding another character is split by :func:`tokens`. No word spans such a
    character, which lowercases to itself; a capital sigma lowercases by its neighbours
    (final or not), so a text holding one, or a lone surrogate, is read whole."""
    size = len(text.split())
    if "\u03a3" in text:
        return size, Counter(tokens(text))
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return size, Counter(tokens(text))
    found = Counter(data.translate(_CHUNKS).split())  # (C speed)
    counts = {chunk.decode(): count for chunk, count in found.items()}
    if not data.isascii():
        split = [(chunk, count) for chunk, count in found.items() if not chunk.isascii()]
        for chunk, _ in split:  # (every one out first: a word of one may be another's text)
            del counts[chunk.decode()]
        for chunk, count in split:
            for word in tokens(chunk.decode()):
                counts[word] = counts.get(word, 0) + count
    return size, counts


def fts_body(counts: Iterable[str]) -> str:
    """What an FTS5 index is given for an entry: its distinct words (the keys of
    :func:`entry_terms`'s counts), so FTS5 finds the words this module finds and no others
    (its own tokenizer splits no word of theirs: they hold letters and digits only)."""
    return " ".join(counts)


def fts_query(words: Sequence[str]) -> dict[str, str]:
    """The parameters of an SQLite FTS5 index's search for ``words`` (:meth:`Query.words`,
    which hold no quote): ``match``, every word; ``paths`` and ``path``, where a row's JSON
    counts keep each word and the first (see :func:`fts_counts`)."""
    return {"match": " AND ".join(f'"{word}"' for word in words),
            "paths": msgspec.json.encode([f'$."{word}"' for word in words]).decode(),
            "path": f'$."{words[0]}"'}


def fts_counts(column: str, words: int) -> str:
    """SQL: how often an FTS5 index row holds the query's words, from its ``column`` of JSON
    counts (the words held more than once; a word not there is held once): for one word the
    count, read directly (a quarter less of the query's time than through ``json_each``), for
    several ``"2,1"`` (:func:`row_counts` reads both)."""
    if words == 1:
        return f"coalesce(json_extract({column}, :path), 1)"
    return f"(SELECT group_concat(coalesce(json_extract({column}, value), 1)) " \
           f"FROM json_each(:paths))"


def row_counts(counts: list[int] | int | str) -> list[int]:
    """How often an entry holds each of a query's words as an index row gives them (for
    :func:`bounds`): PostgreSQL's array, SQLite's one count for a query of one word, or
    ``"2,1"`` for several."""
    if isinstance(counts, list):
        return counts
    return [counts] if isinstance(counts, int) else [int(n) for n in counts.split(",")]


def bounds(query: Query) -> Callable[[Sequence[int], int], float]:
    """The highest relevance an entry can have, from how often it holds each of
    ``query.words()`` (in that order) and its size: a word occurs as often as it is counted,
    a phrase at most as often as its rarest word (for a query of words alone it is the
    relevance itself: the index counts the words the matcher finds, :func:`lowered`'s)."""
    at = {word: index for index, word in enumerate(query.words())}
    terms = [[at[word] for word in term] for term in query.terms]
    if all(len(term) == 1 for term in terms):
        return lambda counts, size: score(sum(counts), size)  # each word one term
    return lambda counts, size: score(sum(min(counts[i] for i in term) for term in terms), size)


def row_bounds(query: Query, counts: Sequence[list[int] | int | str], sizes: Sequence[int]
               ) -> list[float]:
    """:func:`bounds` of many index rows at once (``counts`` as :func:`row_counts` reads
    them): for a query of one word, SQLite's one count a row is the relevance's spans, bound
    without a call per row."""
    if len(query.terms) == 1 and len(query.terms[0]) == 1 \
            and set(map(type, counts)) <= {int}:
        return scores(cast("Sequence[int]", counts), sizes)  # (ints: checked)
    highest = bounds(query)
    return [highest(row_counts(count), size) for count, size in zip(counts, sizes)]


_Scored = tuple[float, int, str, int, Candidate, SearchDoc, list[tuple[int, int]]]


def _judged(candidate: Candidate, matcher: _Matcher, role: str | None, since: int,
            known: float | None = None) -> _Scored | None:
    """A candidate's rank key (best first) with what its hit shows; ``None``: no match.
    ``known``: its relevance, exact, from its index row (then only its snippet's spans are
    looked for, :meth:`_Matcher.shown`)."""
    doc = document(candidate.line)
    if doc is None or (role is not None and doc.role != role) or doc.ms < since:
        return None
    if known is not None:
        shown = matcher.shown(doc.text)
        if shown is None:
            return None
        relevance, spans = known, shown
    else:
        judged = matcher.judge(doc.text, candidate.size)
        if judged is None:
            return None
        relevance, spans = judged
    return (-relevance, -doc.ms, candidate.session_id, candidate.place, candidate, doc, spans)


OnBranch = Callable[[Sequence[tuple[Candidate, str]]], list[bool]]
"""Whether each ``(candidate, entry id)`` is on its session's current branch, asked once
for all the hits shown (a database answers them in one round trip)."""


def _hits(scored: list[_Scored], limit: int, on_branch: OnBranch) -> list[SearchHit]:
    scored.sort(key=lambda item: item[:4])
    best = scored[:limit]
    flags = on_branch([(item[4], item[5].entry_id) for item in best]) if best else []
    hits: list[SearchHit] = []
    for (negative, _, _, _, candidate, doc, spans), current in zip(best, flags):
        snippet, marks = _snippet(doc.text, spans)
        hits.append(SearchHit(candidate.session_id, candidate.session, candidate.cwd,
                              doc.entry_id, doc.role, doc.timestamp, current, snippet, marks,
                              -negative))
    return hits


def rank(candidates: Iterable[Candidate], query: Query, *, role: str | None, since: int,
         limit: int, branch: Callable[[Candidate], Container[str]]) -> list[SearchHit]:
    """The best ``limit`` hits among the candidates that truly match.

    Args:
        candidates: what an index found (judged again here from their lines).
        query: the parsed query.
        role: only this role.
        since: only entries at or after this epoch ms.
        limit: at most this many hits.
        branch: the ids on a candidate's session's current branch, or an object that answers
            ``in`` for them (asked once per session that has a hit).
    """
    matcher = _Matcher(query)
    scored = [item for item in (_judged(candidate, matcher, role, since)
                                for candidate in candidates) if item is not None]
    return _hits(scored, limit, branch_flags(branch))


def branch_flags(branch: Callable[[Candidate], Container[str]]) -> OnBranch:
    """An :data:`OnBranch` from ``branch`` (the ids on a candidate's session's current
    branch), asked once per session."""
    branches: dict[str, Container[str]] = {}

    def on_branch(pairs: Sequence[tuple[Candidate, str]]) -> list[bool]:
        for candidate, _ in pairs:
            if candidate.session not in branches:
                branches[candidate.session] = branch(candidate)
        return [entry_id in branches[candidate.session] for candidate, entry_id in pairs]

    return on_branch


class Bounded(NamedTuple):
    """A candidate as an index row tells it, before its line is read: where it is, its time
    and the highest relevance it can have (:func:`bounds`)."""

    session_id: str
    session: str
    cwd: str
    place: int
    ms: int
    bound: float


_PLACE = operator.itemgetter(0, 3)
_BOUND_TIME = operator.itemgetter(5, 4)
"""A :class:`Bounded`'s (session id, place) and (bound, time)."""


def best_first(rows: Iterable[Bounded], query: Query, read: Callable[[Sequence[Bounded]],
               Iterable[Candidate]], *, role: str | None, since: int, limit: int,
               on_branch: OnBranch) -> list[SearchHit]:
    """The hits :func:`rank` gives for the same candidates, reading and judging only the
    lines that can be among them: the candidates are taken by their bounds, best first, a
    batch of lines at a time (``read``), until the ``limit``-th hit ranks before the best
    bound left (so a word that most entries hold reads about ``limit`` lines, not
    :data:`CANDIDATES`)."""
    order = sorted(rows, key=_PLACE)  # (two stable sorts by C keys: no tuple made a row)
    order.sort(key=_BOUND_TIME, reverse=True)
    matcher = _Matcher(query)
    exact = matcher.words is not None  # (ASCII words alone: the bound is the relevance)
    scored: list[_Scored] = []
    at, step = 0, max(limit, 1)
    while at < len(order) and limit > 0:
        if len(scored) >= limit:
            scored.sort(key=lambda item: item[:4])
            del scored[limit:]
            left = order[at]
            if scored[-1][:4] < (-left.bound, -left.ms, left.session_id, left.place):
                break
        batch = order[at:at + step]
        at, step = at + len(batch), step * 2
        known = {(row.session, row.place): row.bound for row in batch} if exact else {}
        for candidate in read(batch):
            judged = _judged(candidate, matcher, role, since, None if candidate.size is None
                             else known.get((candidate.session, candidate.place)))
            if judged is not None:
                scored.append(judged)
    return _hits(scored, limit, on_branch)


def recent_first(candidates: Sequence[Candidate], ms: Sequence[int]) -> list[Candidate]:
    """The :data:`CANDIDATES` most recent candidates (for stores without an index)."""
    order = sorted(range(len(candidates)),
                   key=lambda i: (-ms[i], candidates[i].session_id, candidates[i].place))
    return [candidates[i] for i in order[:CANDIDATES]]
