"""Finding an entry from what a person types: one rule for every command and app.

The forms, tried in this order:

* a full entry id;
* ``leaf``: the session's current leaf as a person sees it: the last conversation entry on its
  path (never the operation tree's bookkeeping written after a reply, :mod:`sessiontree.views`);
* ``@LABEL``: the entry whose current label is LABEL (exact match first, then ignoring case);
* a prefix of an id, at least :data:`MIN_PREFIX` characters long, that only one entry has.

Invariants: nothing here writes or decodes more than the few entries an error message lists;
a reference either resolves to exactly one id or raises (:class:`~sessiontree.errors.AmbiguousEntry`
with the candidates, or :class:`~sessiontree.errors.EntryNotFound` naming the accepted forms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .describe import KIND_NAMES, entry_kind, entry_summary
from .errors import AmbiguousEntry, EntryNotFound
from .views import shown_leaf

if TYPE_CHECKING:
    from .session import Session

__all__ = ["ENTRY_FORMS", "MIN_PREFIX", "find_label", "resolve_entry"]

MIN_PREFIX = 4
"""The shortest id prefix accepted (pi's ids are 8 hex digits)."""

ENTRY_FORMS = (f"an entry id, a unique id prefix of at least {MIN_PREFIX} characters, "
               "@LABEL or 'leaf'")
"""The accepted forms, as error messages and help texts name them."""

_LISTED = 10


def _describe(session: Session, ids: list[str]) -> str:
    shown = []
    for entry_id in ids[:_LISTED]:
        entry = session.entry(entry_id)
        kind = entry_kind(entry)
        label = session.label(entry_id)
        tag = f" [{label}]" if label else ""
        shown.append(f"{entry_id} ({KIND_NAMES.get(kind, kind)}: {entry_summary(entry, 40)}){tag}")
    more = f"; and {len(ids) - _LISTED} more" if len(ids) > _LISTED else ""
    return "; ".join(shown) + more


def find_label(session: Session, label: str) -> str:
    """The entry whose current label is ``label`` (exact first, then ignoring case).

    Raises:
        AmbiguousEntry: several entries carry that label.
        EntryNotFound: none does (the message lists the labels there are).
    """
    labels = session.labels()
    for fold in (False, True):
        found = [target for target, (text, _) in labels.items()
                 if (text.casefold() == label.casefold() if fold else text == label)]
        if len(found) == 1:
            return found[0]
        if found:
            order = {entry_id: n for n, entry_id in enumerate(session.ids())}
            found.sort(key=lambda i: order.get(i, 0))
            raise AmbiguousEntry(f"label {label!r} is on {len(found)} entries: "
                                 f"{_describe(session, found)}; give the entry's id",
                                 candidates=found, path=session.file)
    known = sorted({text for text, _ in labels.values()})
    listed = ", ".join(f"@{text}" for text in known[:20]) if known else "none"
    raise EntryNotFound(f"no entry is labelled {label!r} (labels: {listed})", path=session.file)


def resolve_entry(session: Session, ref: str) -> str:
    """The id of the entry ``ref`` names (see the module docstring for the forms).

    Args:
        session: the session to look in.
        ref: an id, ``leaf``, ``@LABEL`` or a unique id prefix of at least 4 characters.

    Returns:
        The entry's full id.

    Raises:
        AmbiguousEntry: the prefix or label names several entries (``candidates`` lists them).
        EntryNotFound: nothing matches, the session has no leaf, or the prefix is too short;
            the message names the accepted forms.
    """
    text = ref.strip()
    if text in session:
        return text
    if text == "leaf":
        if session.leaf_id is None:
            raise EntryNotFound("the session has no leaf (it has no entries)", path=session.file)
        return shown_leaf(session.path_ids(), session.entry) or session.leaf_id
    if text.startswith("@"):
        if len(text) == 1:
            raise EntryNotFound(f"'@' needs a label after it; expected {ENTRY_FORMS}",
                                path=session.file)
        return find_label(session, text[1:])
    if len(text) < MIN_PREFIX:
        raise EntryNotFound(f"no entry {ref!r}: an id prefix needs at least {MIN_PREFIX} "
                            f"characters; expected {ENTRY_FORMS}", path=session.file)
    found = [entry_id for entry_id in session.ids() if entry_id.startswith(text)]
    if len(found) == 1:
        return found[0]
    if found:
        raise AmbiguousEntry(f"id prefix {ref!r} matches {len(found)} entries: "
                             f"{_describe(session, found)}; give more characters",
                             candidates=found, path=session.file)
    raise EntryNotFound(f"no entry {ref!r} in this session; expected {ENTRY_FORMS}",
                        path=session.file)
