"""What the database backends share about their addresses: a parameter of ours taken out of a
URL before the rest goes to the driver (PostgreSQL's ``schema=``, Redis's ``prefix=``), and a URL
fit to show (no password).

Invariants:
* The parameters left for the driver stay as written: the driver decodes them itself, and
  re-encoding would change them (``%20`` written back as ``+`` reaches libpq as ``+``).
* A password never leaves :func:`redacted`; the user name stays.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["redacted", "take_option"]


def take_option(url: str, name: str) -> tuple[str, str | None]:
    """``(url without any name=... parameter nor fragment, the first one's value decoded)``;
    ``None`` when the URL has none."""
    parts = urlsplit(url)
    kept: list[str] = []
    value = None
    for item in parts.query.split("&") if parts.query else ():
        key, _, raw = item.partition("=")
        if unquote(key) != name:
            kept.append(item)
        elif value is None:
            value = unquote(raw)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "&".join(kept), "")), value


def redacted(url: str) -> str:
    """``url`` without its password and fragment (the user name is kept)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, hosts = netloc.rsplit("@", 1)
        name = user.split(":", 1)[0]
        netloc = f"{name}@{hosts}" if name else hosts
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
