"""The ``compact`` command: summarize a session's history before the cut point into one
``compaction`` entry, exactly as pi lays it out (format-spec.md section 14).

The file gains one line and stays loadable by pi; when there is nothing to compact, or the
summarizer fails, nothing is written.
"""

from __future__ import annotations

from typing import Any

import click

from .. import _json
from ._app import SESSION, cli, echo_json, json_option, open_session, reports_errors

__all__ = ["compact"]


def _preparation_json(prep: Any) -> dict[str, Any]:
    return {
        "firstKeptEntryId": prep.first_kept_entry_id,
        "tokensBefore": prep.tokens_before,
        "isSplitTurn": prep.is_split_turn,
        "messagesToSummarize": len(prep.messages_to_summarize),
        "turnPrefixMessages": len(prep.turn_prefix_messages),
        "previousSummary": prep.previous_summary is not None,
        "readFiles": prep.file_details.read_files,
        "modifiedFiles": prep.file_details.modified_files,
    }


@cli.command()
@click.argument("file", type=SESSION)
@click.option("--keep-recent-tokens", type=click.IntRange(min=0), default=20000, show_default=True,
              metavar="N", help="About how many tokens of the newest messages to keep verbatim.")
@click.option("--reserve-tokens", type=click.IntRange(min=1), default=16384, show_default=True,
              metavar="N", help="pi's reserve; the summary's budget is 0.8 × N tokens.")
@click.option("--summarizer", "--model", "summarizer_spec", metavar="SPEC", default=None,
              envvar="SESSIONTREE_SUMMARIZER",
              help="Who writes the summary: 'offline' (default, no model), 'openai:MODEL' or "
                   "'anthropic:MODEL' (key and base URL from OPENAI_API_KEY/OPENAI_BASE_URL or "
                   "ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL).")
@click.option("--instructions", metavar="TEXT", help="Extra focus for the summary.")
@click.option("--dry-run", is_flag=True, help="Show what would be compacted; write nothing.")
@json_option
@reports_errors
def compact(file: str, keep_recent_tokens: int, reserve_tokens: int, summarizer_spec: str | None,
            instructions: str | None, dry_run: bool, as_json: bool) -> None:
    """Compact the session at its leaf: summarize the history before the cut point into one
    compaction entry (pi's format; the file stays loadable by pi).

    When there is nothing to compact (the path is empty, already ends in a compaction, or
    --keep-recent-tokens keeps all of it) it says so and exits 0; nothing is written then, nor
    when the summarizer fails (exit 1).

    --json prints one shape: {"compacted": true|false, "reason": why not or null, "entry": the
    compaction entry written or null, "plan": what --dry-run would summarize or null}.
    """
    from ..compaction import CompactionSettings, NothingToCompact, plan_compaction
    from ..summarize import summarizer_from_spec

    settings = CompactionSettings(keep_recent_tokens=keep_recent_tokens,
                                  reserve_tokens=reserve_tokens)
    with open_session(file) as session:
        try:
            if dry_run:
                prep = plan_compaction(session, settings)
            else:
                entry = session.compact(summarizer_from_spec(summarizer_spec), settings=settings,
                                        instructions=instructions)
        except NothingToCompact as nothing:
            # not a failure: the session is as compact as these settings make it
            if as_json:
                echo_json(_result(False, reason=nothing.reason))
            else:
                click.echo(f"{file}: {nothing.reason}; nothing was written")
            return
        if dry_run:
            if as_json:
                echo_json(_result(False, plan=_json.dumps(_preparation_json(prep))))
                return
            click.echo(f"would summarize {len(prep.messages_to_summarize)} messages"
                       + (f" and a turn prefix of {len(prep.turn_prefix_messages)}"
                          if prep.is_split_turn else "")
                       + f"; keep from {prep.first_kept_entry_id}; ~{prep.tokens_before} tokens "
                       "before")
            return
        if as_json:
            echo_json(_result(True, entry=session.raw_line(entry.id)))
            return
        click.echo(f"{file}: compaction {entry.id} written at the leaf; the context now starts "
                   f"with its summary, then keeps from {entry.first_kept_entry_id} "
                   f"(~{entry.tokens_before} tokens before)")


def _result(compacted: bool, *, reason: str | None = None, entry: bytes | None = None,
            plan: bytes | None = None) -> bytes:
    """``--json``'s one shape; ``entry`` and ``plan`` are JSON already (the entry's own line)."""
    return (b'{"compacted":' + (b"true" if compacted else b"false") + b',"reason":'
            + _json.dumps(reason) + b',"entry":' + (entry or b"null") + b',"plan":'
            + (plan or b"null") + b"}")
