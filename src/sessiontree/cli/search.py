"""The search command: entries by their words, across every session and branch of a store."""

from __future__ import annotations

import datetime as _dt
import os

import click
import msgspec
from rich.text import Text

from .. import _json
from ._app import cli, echo_json, json_option, reports_errors

__all__ = ["search"]

_ROLES = ("user", "assistant", "tool", "custom", "summary", "label")


@cli.command()
@click.argument("query")
@click.argument("store", required=False)
@click.option("--cwd", "cwd", metavar="PATH", help="Only the sessions of this working directory.")
@click.option("--role", type=click.Choice(_ROLES), help="Only entries of this role (tool: tool "
              "results and bash output).")
@click.option("--since", type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"]),
              metavar="DATE", help="Only entries from DATE on (local time).")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=20, show_default=True,
              help="At most this many hits.")
@click.option("--index", "build_index", is_flag=True,
              help="First build a folder's whole search index (it can take minutes on a large "
                   "folder; every later search is then fast).")
@json_option
@reports_errors
def search(query: str, store: str | None, cwd: str | None, role: str | None,
           since: _dt.datetime | None, limit: int, build_index: bool, as_json: bool) -> None:
    """Find the entries holding every word and "exact phrase" of QUERY in every session and on
    every branch of STORE (a folder, pi's sessions root with all its projects, sqlite:///x.db,
    postgresql://...; default: pi's sessions root), best first: relevance, then recency.

    Message text, thinking, tool calls and results, summaries and labels are searched. Each
    hit shows its time, role, session and entry ('*': on the session's current branch), and
    the text around the match. A folder keeps its index in .sessiontree-cache (only what
    changed since the last search is read); a search indexes appends and a few new files and
    reads the rest of the files as grep would (same hits), so searches of a large folder take
    a few greps each until --index builds its index. Databases keep theirs as they are
    written.
    """
    from ..search import search_sessions

    wanted = os.path.abspath(cwd) if cwd is not None else None
    hits = search_sessions(store, query, cwd=wanted, role=role, since=since, limit=limit,
                           build_index=build_index)
    if as_json:
        echo_json(_json.dumps(msgspec.to_builtins(hits)))
        return
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    if not hits:
        console.print(Text(f"no entry holds {query}"))
        return
    for hit in hits:
        mark = "*" if hit.on_current_branch else " "
        head = Text(f"{(hit.timestamp or '')[:16].replace('T', ' '):<16} {mark} "
                    f"{hit.role:<9} ")
        head.append(f"{hit.session}  {hit.entry_id}", style="dim")
        console.print(head)
        line = Text("    " + hit.snippet)
        for start, end in hit.marks:
            line.stylize("bold reverse", start + 4, end + 4)
        console.print(line)
