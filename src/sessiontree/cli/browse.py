"""``sessiontree browse``: the interactive tree browser (Textual, the ``tui`` extra).

The command only checks its arguments and the extra; the app is :mod:`sessiontree.cli.tui`,
imported when the command runs, so ``sessiontree --help`` never imports Textual.
"""

from __future__ import annotations

import click

from ..errors import MissingExtra
from ..views import FILTER_MODES, FilterMode
from ._app import SESSION, cli, open_session, reports_errors

__all__ = ["browse"]


def _summarizer_name(spec: str | None) -> str:
    return "offline summarizer" if not spec or spec == "offline" else spec


@cli.command()
@click.argument("location", metavar="[FILE|STORE]", required=False)
@click.option("--summarizer", "summarizer_spec", metavar="SPEC", default=None,
              envvar="SESSIONTREE_SUMMARIZER", show_envvar=True,
              help="Who writes branch summaries when you choose to summarize: 'offline' "
                   "(default, no model), 'openai:MODEL' or 'anthropic:MODEL'.")
@click.option("--filter", "mode", type=click.Choice(FILTER_MODES), default="default",
              show_default=True, help="The filter to start with (ctrl+o cycles).")
@click.option("--search", "query", metavar="QUERY", default=None,
              help="Start in the search of every session of the store (shift+S): words and "
                   "\"exact phrases\"; Enter on a hit opens its session at that entry.")
@reports_errors
def browse(location: str | None, summarizer_spec: str | None, mode: FilterMode,
           query: str | None) -> None:
    """Browse a session's tree interactively: the active path first and highlighted, filters
    (ctrl+o), search (/), labels (shift+L), a preview with the context size, and Enter to go
    to an entry (asking whether to summarize the branch you leave). Keys: see the README.

    FILE is a session (a .jsonl file or URL#SESSION_ID). STORE (a folder, pi's sessions root,
    sqlite:///x.db, postgresql://...; default with --search: pi's sessions root) starts in the
    search of every session (shift+S opens it from a session too): pick a hit and its session
    opens at that entry, ready to go on from there or branch.
    """
    import os

    from ..stores.url import is_url, parse_location

    session_given = location is not None and (
        (is_url(location) and parse_location(location).session_id is not None)
        or (not is_url(location) and not os.path.isdir(location)))
    if location is None and query is None:
        raise click.UsageError("name a session FILE, a STORE, or --search QUERY")
    if session_given and location is not None:
        SESSION.convert(location, None, click.get_current_context())
    try:
        from .tui import BrowseApp
    except ImportError as exc:
        raise MissingExtra("browse needs the 'tui' extra: pip install 'sessiontree[tui]' "
                           f"({exc})") from None
    summarizer = None
    if summarizer_spec and summarizer_spec != "offline":
        from ..summarize import summarizer_from_spec

        summarizer = summarizer_from_spec(summarizer_spec)
    options = {"summarizer": summarizer, "summarizer_name": _summarizer_name(summarizer_spec),
               "mode": mode, "search": query}
    if not session_given:
        from ..stores.jsonl import default_sessions_root

        store = location if location is not None else str(default_sessions_root())
        BrowseApp(None, store=store, **options).run()  # type: ignore[arg-type]
        return
    assert location is not None
    if not is_url(location):
        BrowseApp(location, **options).run()  # type: ignore[arg-type]
        return
    # a stored session is opened here (one row), so that a missing one or an unreachable
    # database is reported before the browser starts; its tree loads in the browser's worker
    session = open_session(location)
    try:
        BrowseApp(location, opener=lambda _: session, **options).run()  # type: ignore[arg-type]
    finally:
        session.close()
