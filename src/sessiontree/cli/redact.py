"""The ``redact`` command: take an entry's content out of what the model sees (a context edit),
and with ``--purge`` out of the stored session too."""

from __future__ import annotations

import click

from ._address import ENTRY_HELP, by_label_option, pick_entry
from ._app import SESSION_MAYBE, cli, open_session, reports_errors

__all__ = ["redact"]


@cli.command(epilog=ENTRY_HELP)
@click.argument("file", type=SESSION_MAYBE)
@click.argument("entry_id", metavar="ID", required=False)
@by_label_option
@click.option("--with", "text", metavar="TEXT",
              help="The content the model sees instead (default: [redacted]).")
@click.option("--omit", is_flag=True, help="Leave the entry out of the model's context instead.")
@click.option("--purge", is_flag=True,
              help="Also replace the stored content in place (no copy of the old bytes kept).")
@reports_errors
def redact(file: str, entry_id: str | None, by_label: str | None, text: str | None, omit: bool,
           purge: bool) -> None:
    """Take the content of entry ID (a user, assistant or tool result message, or a custom
    message on the current branch) out of what the model sees from here on: appends a
    context_edit (pi 1.5.2's), history is not rewritten. --purge also replaces the stored
    content with the same text, in place: the file rewritten atomically, a database in one
    transaction; ids and tree unchanged, the context from the leaf the same."""
    from ..redact import REDACTED, context_edit
    from ..redact import purge as purge_entry

    if omit and text is not None:
        raise click.UsageError("give --with TEXT or --omit, not both")
    with open_session(file) as session:
        target = pick_entry(session, entry_id, by_label, required=True)
        assert target is not None
        edit = context_edit(session, target, None if omit else REDACTED if text is None else text)
    click.echo(f"{target}: {'omitted from' if omit else 'redacted in'} the model's context "
               f"(context_edit {edit})")
    if purge:
        purge_entry(file, target)
        click.echo(f"{target}: stored content replaced")
