"""Taking text out of what the model sees: a ``context_edit`` (pi 1.5.2's append-only,
branch-local edit of an earlier entry's model content), and a purge that also replaces the
stored bytes.

Invariants:
* :func:`redact` never rewrites history: it appends one ``context_edit`` at the leaf, checked as
  pi 1.5.2's ``appendContextEdit`` checks it (the target exists, is on the current branch and
  gives editable content: a user, assistant or tool result message, or a custom message; a
  text for an assistant or a tool result is stored as one text block).
* :func:`purge` changes one stored line and nothing else: the target's content becomes the
  content its latest edit on the current branch gives it (empty when the edit omits it), so
  the context from the leaf is the same before and after; its id, parent and every other
  field keep their values, every other line keeps its bytes. A file is replaced atomically
  under the writer's lock with no backup copy (and the folder's listing and search indexes,
  which may hold its text, are dropped); a database changes the line and the session's listing
  row in one transaction, then scrubs what it can of the old bytes
  (:meth:`~sessiontree.stores._sql.SqlStore.replace_line`); Redis does the same in one script
  on the session's slot (:meth:`~sessiontree.stores.redis.RedisStore.replace_line`).
"""

from __future__ import annotations

import os
from typing import Any

from . import _fs, _json
from .context import context_edit as check_edit
from .errors import InvalidEntry, SessionTreeError
from .session import Session

__all__ = ["REDACTED", "PurgeError", "context_edit", "purge", "redact"]

REDACTED = "[redacted]"
"""What :func:`redact` puts in place of the content unless told otherwise."""


class PurgeError(SessionTreeError):
    """Nothing to purge with: the entry has no edit on the current branch, or the session has
    no stored lines (an in-memory session)."""


def context_edit(session: Session, target_id: str, content: str | list[Any] | None) -> str:
    """Append a ``context_edit`` of ``target_id`` at the leaf: ``content`` replaces its model
    content from here on (on this branch), ``None`` omits it from the context.

    Returns:
        The edit's entry id (the new leaf).

    Raises:
        EntryNotFound: no such entry.
        InvalidEntry: the target is not on the current branch or gives no editable content,
            or ``content`` is neither text nor a list of content blocks.
    """
    if content is not None and not isinstance(content, (str, list)):
        raise InvalidEntry("a context edit's content is text or a list of content blocks")
    return session.append_context_edit(target_id, content)


def redact(session: Session, target_id: str, text: str | None = REDACTED) -> str:
    """Take an entry's content out of what the model sees from here on, without rewriting
    history: its content becomes ``text`` (``None``: the entry is left out of the context).
    See :func:`purge` to remove the stored bytes too.

    Returns:
        The ``context_edit`` entry's id.

    Raises:
        EntryNotFound, InvalidEntry: as :func:`context_edit`.
    """
    return context_edit(session, target_id, text)


def _latest_edit(session: Session, target_id: str) -> dict[str, Any]:
    """The latest ``context_edit`` of ``target_id`` on the path to the leaf."""
    leaf = session.leaf_id
    for entry_id in reversed(session.path_ids(leaf) if leaf is not None else []):
        if session.entry(entry_id).type == "context_edit":
            data = _json.loads(session.raw_line(entry_id))
            if isinstance(data, dict) and data.get("targetId") == target_id:
                return data
    raise PurgeError(f"entry {target_id} has no context edit on the current branch: redact it "
                     "first, so that the model's context does not change", path=session.file)


def _purged_line(line: bytes, replacement: Any) -> bytes:
    """The stored line with its content replaced by the edit's (emptied when it omits)."""
    data = _json.loads(line)
    assert isinstance(data, dict)
    holder = data["message"] if data.get("type") == "message" else data
    if isinstance(replacement, dict):
        holder["content"] = replacement["content"]
    else:
        holder["content"] = "" if isinstance(holder.get("content"), str) else []
    return _json.dumps(data)


def purge(location: str | os.PathLike[str], target_id: str, *,
          lock_timeout: float = 10.0) -> None:
    """Replace the stored content of ``target_id`` with what its latest edit on the current
    branch gives it, in place: a session file (rewritten atomically, no backup) or a stored
    session's address (``sqlite:///x.db#ID``, ``postgresql://...#ID``, ``redis://...#ID``; one
    transaction or script). The session must not be open for writing elsewhere (a file's
    writer holds its lock).

    Raises:
        PurgeError: no edit of the entry on the current branch.
        EntryNotFound, InvalidEntry: as :func:`context_edit`.
        SessionLockedError: another process kept writing the file past ``lock_timeout``.
    """
    from .stores.url import is_url, open_store, parse_location

    with Session.open(location, warn=False) as session:
        entry = session.entry(target_id)  # EntryNotFound, then pi's checks of a context edit
        check_edit(target_id, None, entry_type=entry.type, role=session.role(target_id),
                   on_branch=target_id in session.path_ids(), path=session.file)
        old = session.raw_line(target_id)
        new = _purged_line(old, _latest_edit(session, target_id).get("replacement"))
        session_id = session.id
    if is_url(location):
        with open_store(location) as store:
            replace = getattr(store, "replace_line", None)
            if replace is None:
                raise PurgeError(f"{type(store).__name__} cannot replace a stored line",
                                 path=str(location))
            replace(parse_location(location).session_id or session_id, target_id, new)
        return
    _purge_file(os.fspath(location), target_id, old, new, lock_timeout)


def _purge_file(path: str, target_id: str, old: bytes, new: bytes, lock_timeout: float) -> None:
    from .stores._jsonl_listing import INDEX_NAME
    from .stores._jsonl_search import CACHE_DIR
    from .stores._jsonl_search import INDEX_NAME as SEARCH_INDEX

    fd = os.open(path, os.O_RDONLY)
    try:
        _fs.lock(fd, path, lock_timeout)
        with open(path, "rb") as stream:
            lines = stream.read().split(b"\n")
        found = [i for i, line in enumerate(lines) if line.rstrip(b"\r") == old]
        if len(found) != 1:
            raise PurgeError(f"entry {target_id}'s line changed while purging; nothing was "
                             "written", path=path)
        ending = lines[found[0]][len(old):]  # a CRLF file keeps its CR
        lines[found[0]] = new + ending
        _fs.atomic_write(path, b"\n".join(lines))
    finally:
        os.close(fd)  # and with it the lock
    folder = os.path.dirname(os.path.abspath(path))
    caches = [os.path.join(folder, INDEX_NAME)]  # the listing's: it may hold the first message
    for where in (folder, os.path.dirname(folder)):  # the search index: of the folder or root
        search = os.path.join(where, CACHE_DIR, SEARCH_INDEX)
        caches += [search, search + "-wal", search + "-shm", search + "-journal"]
    for cache in caches:  # caches, never sources: rebuilt when next listed or searched
        try:
            os.unlink(cache)
        except FileNotFoundError:
            pass
