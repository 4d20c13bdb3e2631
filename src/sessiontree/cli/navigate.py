"""Commands that move around a session or copy parts of it: checkout, pop, cherry-pick, fork.

Every command writes only what pi can read (format-spec.md 17 g, h, i): a checkout marker, a
branch summary, a copied entry, or a new session file; the file stays loadable by pi.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from .. import _json
from ._address import ENTRY_HELP, by_label_option, pick_entry
from ._app import SESSION, cli, echo_json, json_option, open_session, reports_errors
from ._progress import copying

if TYPE_CHECKING:
    from ..navigation import NavigationResult
    from ..summarize.base import Summarizer

__all__ = ["checkout", "cherry_pick", "fork", "pop"]

FILE = click.argument("file", type=SESSION)
summarizer_option = click.option(
    "--summarizer", "summarizer_spec", metavar="SPEC", default=None,
    help="Who writes the summary: 'offline' (default, no model), 'openai:MODEL' or "
         "'anthropic:MODEL' (keys from the environment).")
instructions_option = click.option("--instructions", metavar="TEXT",
                                   help="Extra instructions for the summary.")


def _summarizer(spec: str | None) -> Summarizer | None:
    if not spec:
        return None
    from ..summarize import summarizer_from_spec

    return summarizer_from_spec(spec)


def _result_json(result: NavigationResult) -> dict[str, Any]:
    return {
        "moved": result.moved, "oldLeafId": result.old_leaf_id, "leafId": result.leaf_id,
        "positionId": result.position_id, "targetId": result.target_id,
        "editorText": result.editor_text,
        "summaryId": result.summary_entry.id if result.summary_entry is not None else None,
        "fromHook": result.from_hook, "summarizedIds": list(result.summarized_ids),
        "markerId": result.marker_id, "labelId": result.label_id,
        "nothingToSummarize": result.nothing_to_summarize,
    }


def _report(result: NavigationResult, as_json: bool) -> None:
    """The new leaf first (the summary, label or marker entry when one was written), then
    what was written under which entry."""
    if as_json:
        echo_json(_json.dumps(_result_json(result)))
        return
    if not result.moved:
        click.echo(f"{result.leaf_id} is already the leaf; nothing to do")
        return
    position = result.position_id or "the root (before the first entry)"
    click.echo(f"leaf: {result.leaf_id or '(before the first entry)'} "
               f"(was {result.old_leaf_id or 'none'})")
    summary = result.summary_entry
    if summary is not None:
        count = len(result.summarized_ids)
        what = (f"the branch summary {summary.id} of {count} abandoned "
                f"entr{'y' if count == 1 else 'ies'}{' (from a hook)' if result.from_hook else ''}")
        if result.leaf_id == summary.id:
            click.echo(f"  the leaf is {what}, written under {position}")
        else:
            click.echo(f"  the leaf is the label entry of {what}, written under {position}")
    elif result.marker_id is not None:
        click.echo(f"  the leaf is a checkout marker under {position} (the move survives a "
                   "reload, in pi too)")
    elif result.label_id is not None:
        click.echo(f"  the leaf is the label entry (labelling {result.target_id}), written "
                   f"under {position}")
    if result.nothing_to_summarize:
        click.echo("  no summary: the branch you left holds no message to summarize")
    if result.editor_text:
        click.echo("text of the chosen message (to edit and send again):")
        click.echo(result.editor_text)


@cli.command(epilog=ENTRY_HELP)
@FILE
@click.argument("entry_id", metavar="ID", required=False)
@by_label_option
@click.option("--summarize", is_flag=True,
              help="Leave a summary of the abandoned branch at the new position.")
@click.option("--set-label", "set_label", metavar="TEXT",
              help="Label the summary (with --summarize) or the target entry.")
@instructions_option
@summarizer_option
@json_option
@reports_errors
def checkout(file: str, entry_id: str | None, by_label: str | None, summarize: bool,
             set_label: str | None, instructions: str | None, summarizer_spec: str | None,
             as_json: bool) -> None:
    """Move the leaf of FILE to entry ID, as pi's /tree does, and make the move persist.

    A user or custom message as ID moves to its parent and prints its text (to edit and send
    again); any other entry becomes the leaf. Without --summarize a small checkout marker
    (or the label entry) keeps the move across reloads, in pi too.
    """
    with open_session(file) as session:
        target = pick_entry(session, entry_id, by_label, required=True,
                            hint=" (--set-label TEXT labels the entry you move to)")
        assert target is not None
        result = session.navigate_tree(target, summarize=summarize, instructions=instructions,
                                       label=set_label, summarizer=_summarizer(summarizer_spec))
        _report(result, as_json)


@cli.command(epilog=ENTRY_HELP)
@FILE
@click.argument("entry_id", metavar="[ID]", required=False)
@by_label_option
@instructions_option
@summarizer_option
@json_option
@reports_errors
def pop(file: str, entry_id: str | None, by_label: str | None, instructions: str | None,
        summarizer_spec: str | None, as_json: bool) -> None:
    """Go back to before the last user message (or to entry ID, earlier on the current path)
    and leave a summary of what was popped; the conversation continues from the summary."""
    with open_session(file) as session:
        target = pick_entry(session, entry_id, by_label, required=False)
        result = session.pop(target, summarizer=_summarizer(summarizer_spec),
                             instructions=instructions)
        _report(result, as_json)


@cli.command("cherry-pick", epilog=ENTRY_HELP)
@FILE
@click.argument("entry_id", metavar="ID", required=False)
@by_label_option
@json_option
@reports_errors
def cherry_pick(file: str, entry_id: str | None, by_label: str | None, as_json: bool) -> None:
    """Copy entry ID's message onto the leaf of FILE (from any branch)."""
    with open_session(file) as session:
        source = pick_entry(session, entry_id, by_label, required=True)
        assert source is not None
        new_id = session.cherry_pick(source)
        if as_json:
            echo_json(_json.dumps({"id": new_id, "sourceId": source, "parentId":
                                   session.entry(new_id).parent_id}))
        else:
            click.echo(f"{source} copied as {new_id} (the new leaf)")


@cli.command(epilog=ENTRY_HELP)
@FILE
@click.argument("entry_id", metavar="[ID]", required=False)
@by_label_option
@click.option("-o", "--output", type=click.Path(), metavar="OUT",
              help="The new file, or a folder for it (default: beside FILE, named as pi names "
                   "session files).")
@click.option("--cwd", metavar="DIR", help="The working directory of the new session "
              "(default: FILE's).")
@json_option
@reports_errors
def fork(file: str, entry_id: str | None, by_label: str | None, output: str | None,
         cwd: str | None, as_json: bool) -> None:
    """Start a new session from FILE: the path from the root to entry ID (pi's /fork), or every
    branch when ID is not given (pi's --fork). FILE is not changed. A session in a database
    forks into the same database (its address is printed) unless -o names a file. As pi
    1.5.2's /fork, a path without a user or assistant message is not written (a warning says
    so; --json: "file" is null)."""
    from ..fork import fork_from

    with open_session(file) as session, copying(len(session)):
        entry_id = pick_entry(session, entry_id, by_label, required=False)
        new = fork_from(session, entry_id, cwd=cwd, path=output)
        with new:
            written = new.file is None or os.path.exists(new.file)
            if not written:
                click.echo(f"warning: the path to {entry_id} has no user or assistant message, "
                           "so the fork is not written (pi 1.5.2 writes a fork's file at its "
                           "first message); nothing was written", err=True)
            if as_json:
                parent = new.header.parent_session
                echo_json(_json.dumps({"file": new.file if written else None,
                                       "url": new.url if written else None, "id": new.id,
                                       "leafId": new.leaf_id, "entries": len(new),
                                       "parentSession": parent if isinstance(parent, str)
                                       else None}))
            elif written:
                click.echo(new.url)  # the file, or the fork's address in the source's database
