"""How every command names an entry: ``ID`` (a full id, a unique prefix of at least 4
characters, ``@LABEL`` or ``leaf``), or ``--label NAME`` instead of ``ID``.

The rule itself is :func:`sessiontree.addressing.resolve_entry`; this module only adds the
``--label`` option and the usage errors, so that every command says the same thing.
"""

from __future__ import annotations

import click

from ..addressing import ENTRY_FORMS, find_label, resolve_entry
from ..session import Session

__all__ = ["ENTRY_HELP", "by_label_option", "entry_option_value", "pick_entry"]

ENTRY_HELP = f"ID is {ENTRY_FORMS}."
"""One sentence for the help of every command that takes an entry."""

by_label_option = click.option(
    "--label", "by_label", metavar="NAME",
    help="The entry labelled NAME, instead of ID (the same as @NAME).")


def pick_entry(session: Session, ref: str | None, by_label: str | None, *,
               required: bool, hint: str = "") -> str | None:
    """The entry named by the ``ID`` argument or by ``--label NAME``; ``hint`` is added to the
    error when both are given.

    Raises:
        click.UsageError: both or (when ``required``) neither were given.
        EntryNotFound, AmbiguousEntry: the reference names no entry, or several.
    """
    if ref is not None and by_label is not None:
        raise click.UsageError(f"give ID or --label NAME, not both{hint}")
    if by_label is not None:
        return find_label(session, by_label)
    if ref is None:
        if required:
            raise click.UsageError(f"give the entry: ID ({ENTRY_FORMS}) or --label NAME")
        return None
    return resolve_entry(session, ref)


def entry_option_value(session: Session, ref: str | None) -> str | None:
    """An option that takes an entry (``--leaf``, ``--branch``, ``--subtree``), resolved."""
    return None if ref is None else resolve_entry(session, ref)
