"""Timestamps and ids in the forms pi writes them."""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
import uuid
from collections.abc import Container

__all__ = ["file_stamp", "iso_now", "iso_to_ms", "ms_to_iso", "new_entry_id", "uuid7"]

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})\Z"
)


_second: tuple[int, str] = (-1 << 63, "")  # the first millisecond of the second formatted
# last, and its text (a millisecond within it is found by one subtraction: a divmod of the time
# cost a third of the call); at first one no 64-bit clock of milliseconds is within
# "000Z" to "999Z": an append's timestamp without formatting; made by the first call, not at
# import (the 1,000 formats cost about 3 million instructions, most of a millisecond).
_MILLIS: list[str] = []


def iso_now() -> str:
    """Now, as ``new Date().toISOString()``: ``YYYY-MM-DDTHH:mm:ss.sssZ``."""
    global _second
    now = time.time_ns() // 1_000_000
    start, text = _second
    if not 0 <= now - start < 1000:
        if not _MILLIS:  # (one extend by a whole list: a thread sees none or all of it)
            _MILLIS.extend([f"{n:03d}Z" for n in range(1000)])
        start = now - now % 1000
        whole = _dt.datetime.fromtimestamp(start // 1000, tz=_dt.timezone.utc)
        text = whole.strftime("%Y-%m-%dT%H:%M:%S.")
        _second = (start, text)
    return text + _MILLIS[now - start]


def iso_to_ms(text: object) -> int | None:
    """Epoch milliseconds of an ISO timestamp ending in ``Z`` or a numeric offset; else ``None``.

    This is ``new Date(text).getTime()`` for the forms pi writes; other strings give ``None``
    (JavaScript's parse of other forms is implementation-defined, format-spec.md section 11).
    """
    if not isinstance(text, str):
        return None
    m = _ISO.match(text)
    if m is None:
        return None
    year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
    second = int(m.group(6) or 0)
    frac = (m.group(7) or "0")[:3].ljust(3, "0")
    try:
        moment = _dt.datetime(year, month, day, hour, minute, second, tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    ms = (moment - _EPOCH) // _dt.timedelta(milliseconds=1) + int(frac)
    zone = m.group(8)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        ms -= sign * (int(zone[1:3]) * 60 + int(zone[4:6])) * 60_000
    return ms


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def ms_to_iso(ms: int) -> str | None:
    """``new Date(ms).toISOString()`` for the years 1 to 9999 (``None`` outside them: JavaScript
    writes those years in an extended form this module does not read)."""
    try:
        moment = _EPOCH + _dt.timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
            f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z")


def file_stamp(iso: str) -> str:
    """The timestamp part of a session file name: every ``:`` and ``.`` replaced by ``-``."""
    return iso.replace(":", "-").replace(".", "-")


_drawn: list[str] = []
"""Ids drawn ahead, 256 from one ``getrandom`` call (a system call per append cost about as
much as encoding the line). ``list.pop`` is atomic, so two threads never take the same one;
a forked child draws its own (the parent's are dropped in it)."""
os.register_at_fork(after_in_child=_drawn.clear)


def draw_ids() -> list[str]:
    """256 random ids of pi's form (8 lowercase hex digits), from one ``getrandom`` call; the
    caller checks them against the ids in use."""
    digits = os.urandom(1024).hex()
    return [digits[at:at + 8] for at in range(0, 2048, 8)]


def _draw_ahead() -> None:
    _drawn.extend(draw_ids())


class Either:
    """``x in Either(a, b)``: in either container (the ids in use, or ids a caller holds
    meanwhile: refused, or drawn for the same append)."""

    __slots__ = ("first", "second")

    def __init__(self, first: Container[str], second: Container[str]) -> None:
        self.first, self.second = first, second

    def __contains__(self, item: object) -> bool:
        return item in self.first or item in self.second


def new_entry_id(taken: object) -> str:
    """A new entry id as pi draws it: 8 lowercase hex digits, redrawn while it collides.

    Args:
        taken: any container supporting ``in`` with the ids already used.
    """
    for _ in range(100):
        try:
            candidate = _drawn.pop()
        except IndexError:
            _draw_ahead()
            continue
        if candidate not in taken:  # type: ignore[operator]
            return candidate
    return str(uuid.uuid4())


class _Uuid7:
    """Session ids as pi 1.5.2 draws them (pi-ai's ``uuidv7``): a UUID version 7 whose 48-bit
    millisecond time never goes back within the process, followed by a 41-bit sequence that
    starts at a random 40-bit value and grows by one per id, then random bits; so the ids of
    one process sort in the order they were made, even within a millisecond."""

    def __init__(self) -> None:
        import _thread  # threading's Lock itself, without loading threading at import

        self._lock = _thread.allocate_lock()
        self._last_ms = -1
        self._sequence: int | None = None

    def __call__(self) -> str:
        with self._lock:
            self._last_ms = ms = max(time.time_ns() // 1_000_000, self._last_ms)
            if self._sequence is None:
                self._sequence = int.from_bytes(os.urandom(5), "big")
            elif self._sequence == (1 << 41) - 1:
                raise RuntimeError("UUIDv7 sequence exhausted")
            else:
                self._sequence += 1
            sequence = self._sequence
        value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76
        value |= (sequence >> 29) << 64  # its top 12 bits after the version
        value |= 0b10 << 62 | (sequence & ((1 << 29) - 1)) << 33  # the rest after the variant
        value |= int.from_bytes(os.urandom(5), "big") >> 7  # 33 random bits
        return str(uuid.UUID(int=value))


uuid7 = _Uuid7()
"""A new session id: a UUID version 7, time-ordered and increasing within the process, as pi
1.5.2 makes them (pi 0.73.1's were time-ordered to the millisecond only)."""
