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
@click.argument("file", type=SESSION)
@click.option("--summarizer", "summarizer_spec", metavar="SPEC", default=None,
              envvar="SESSIONTREE_SUMMARIZER", show_envvar=True,
              help="Who writes branch summaries when you choose to summarize: 'offline' "
                   "(default, no model), 'openai:MODEL' or 'anthropic:MODEL'.")
@click.option("--filter", "mode", type=click.Choice(FILTER_MODES), default="default",
              show_default=True, help="The filter to start with (ctrl+o cycles).")
@reports_errors
def browse(file: str, summarizer_spec: str | None, mode: FilterMode) -> None:
    """Browse FILE's tree interactively: the active path first and highlighted, filters
    (ctrl+o), search (/), labels (shift+L), a preview with the context size, and Enter to go
    to an entry (asking whether to summarize the branch you leave). Keys: see the README.
    """
    try:
        from .tui import BrowseApp
    except ImportError as exc:
        raise MissingExtra("browse needs the 'tui' extra: pip install 'sessiontree[tui]' "
                           f"({exc})") from None
    summarizer = None
    if summarizer_spec and summarizer_spec != "offline":
        from ..summarize import summarizer_from_spec

        summarizer = summarizer_from_spec(summarizer_spec)
    from ..stores.url import is_url

    if not is_url(file):
        BrowseApp(file, summarizer=summarizer, summarizer_name=_summarizer_name(summarizer_spec),
                  mode=mode).run()
        return
    # a stored session is opened here (one row), so that a missing one or an unreachable
    # database is reported before the browser starts; its tree loads in the browser's worker
    session = open_session(file)
    try:
        BrowseApp(file, summarizer=summarizer, summarizer_name=_summarizer_name(summarizer_spec),
                  mode=mode, opener=lambda _: session).run()
    finally:
        session.close()
