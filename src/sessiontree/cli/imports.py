"""The ``import`` command: other tools' conversations as sessions (:mod:`sessiontree.importers`)."""

from __future__ import annotations

import click

from .. import _json
from ._app import cli, echo_json, json_option, reports_errors

__all__ = ["import_command"]

_FORMATS = ("claude-code", "chatgpt", "open-webui", "responses")


@cli.command("import")
@click.option("--from", "format", type=click.Choice(_FORMATS), required=True,
              help="The source's format.")
@click.argument("src", type=click.Path(dir_okay=False))
@click.option("--to", "store", metavar="STORE",
              help="Where the sessions go: a folder of session files, sqlite:///FILE.db or "
                   "postgresql://... (default: pi's folder for each session's working "
                   "directory).")
@click.option("--cwd", help="Working directory recorded for sources that have none "
                            "(default: the current one).")
@click.option("--again", is_flag=True,
              help="Import conversations imported before once more, as new sessions.")
@json_option
@reports_errors
def import_command(format: str, src: str, store: str | None, cwd: str | None, again: bool,
                   as_json: bool) -> None:
    """Import SRC (a Claude Code session .jsonl, ChatGPT's conversations.json, an Open WebUI
    chat export, or a JSON array of OpenAI Responses / Agents SDK input items) as sessions,
    every branch of the source kept and its current message as the leaf.

    Prints what was imported, what could not be mapped to pi's entries (kept as custom
    entries and counted), and what had been imported before (skipped unless --again). A
    malformed or truncated SRC is reported with its line and column or JSON path, and nothing
    is written.
    """
    from ..importers import import_file

    result = import_file(format, src, store, cwd=cwd, again=again)
    if as_json:
        echo_json(_json.dumps({"format": result.format, "source": result.source, "sessions": [
            {"sourceId": s.source_id, "title": s.title, "sessionId": s.session_id,
             "location": s.location, "status": s.status, "changed": s.changed,
             "counts": s.counts, "unmapped": s.unmapped, "branches": s.branches,
             "leafId": s.leaf_id, "notes": list(s.notes)} for s in result.sessions],
            "notes": list(result.notes)}))
        return
    click.echo(result.summary())
