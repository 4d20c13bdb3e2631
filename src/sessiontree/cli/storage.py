"""Commands about where sessions are kept: copy, delete, prune, tail."""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time

import click
import msgspec

from .. import _json
from ..stores.base import SessionListing
from ._app import SESSION, cli, echo_json, json_option, reports_errors, warnings_said

__all__ = ["copy", "delete", "prune", "tail"]


@cli.command()
@click.argument("source", metavar="SRC")
@click.argument("destination", metavar="DST")
@click.option("--processes", type=click.IntRange(min=1), default=None, metavar="N",
              help="Copy a whole store with up to N processes (as many as CPUs are free), "
                   "each writing its share of the sessions with its own connection (default: "
                   "SESSIONTREE_PROCESSES, else 4, as the other commands; into SQLite, one "
                   "writer at a time, one).")
@json_option
@reports_errors
def copy(source: str, destination: str, processes: int | None, as_json: bool) -> None:
    """Copy one session (a .jsonl file or URL#SESSION_ID) or a whole store (a folder, pi's
    sessions root with its project folders, sqlite:///x.db, postgresql://...) into the store
    DST, every line byte for byte. Into a folder, sessions land in pi's layout: a database's
    in one --<cwd>-- folder per project, a folder's in the project folder they came from.

    Each session is written whole or not at all; sessions already in DST with the same bytes
    are skipped, so an interrupted copy is finished by running it again. A file or session
    that cannot be copied is named on stderr with the reason, the others are copied, and the
    exit status is 1. Whatever N, the sessions copied, skipped and named are the same.
    """
    from ..errors import CopyIncomplete
    from ..transfer import CopyResult, copy_sessions

    try:
        result = copy_sessions(source, destination, processes=processes)
    except CopyIncomplete as exc:
        assert isinstance(exc.result, CopyResult)
        result = exc.result
    if as_json:
        echo_json(_json.dumps(msgspec.to_builtins(result)))
    else:
        for failure in result.failed:
            click.echo(f"not copied: {failure.source}: {failure.reason}", err=True)
        summary = (f"copied {len(result.copied)} session(s) to {destination}"
                   + (f"; {len(result.skipped)} already there" if result.skipped else ""))
        if not result.failed:
            click.echo(summary)
            return
        click.echo(f"{summary}; {len(result.failed)} not copied", err=True)
    if result.failed:
        sys.exit(1)


def _remove(location: str) -> str:
    """Delete one session; returns what was removed."""
    from ..stores.url import is_url, open_store, parse_location

    if not is_url(location):
        from ..stores.jsonl import delete_session_file

        delete_session_file(location)
        return location
    where = parse_location(location)
    assert where.session_id is not None
    with open_store(location) as store:
        store.delete(where.session_id)
    return location


@cli.command()
@click.argument("file", type=SESSION)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@reports_errors
def delete(file: str, yes: bool) -> None:
    """Delete a session: its file, or its rows in a database (URL#SESSION_ID)."""
    if not yes:
        click.confirm(f"Delete {file}?", abort=True)
    click.echo(f"deleted {_remove(file)}")


@cli.command()
@click.argument("store", required=False)
@click.option("--older-than", "days", type=click.FloatRange(min=0), required=True, metavar="DAYS",
              help="Delete the sessions whose last activity (the newest message, or the newest "
                   "entry appended) is older than DAYS days.")
@click.option("--dry-run", is_flag=True, help="Only list what would be deleted.")
@json_option
@reports_errors
def prune(store: str | None, days: float, dry_run: bool, as_json: bool) -> None:
    """Delete the sessions of STORE (a folder, sqlite:///x.db or postgresql://...; default:
    pi's folder for the current working directory) whose last activity is older than DAYS:
    the later of the newest message's time (what ls shows) and the time the newest entry was
    appended, so a session edited a minute ago (a cherry-picked old message, a label) stays.
    """
    from .._listing import ListingWarning
    from ..stores.jsonl import JsonlStore, default_session_dir
    from ..stores.url import is_url, open_store

    target = store or str(default_session_dir(os.getcwd()))
    cutoff = int((time.time() - days * 86400) * 1000)
    with open_store(target, read_only=dry_run) as opened, warnings_said(ListingWarning):
        old = [item for item in opened.list_sessions() if item.modified_ms < cutoff
               and _appended_ms(opened, item) < cutoff]
        if not dry_run:
            for item in old:  # a folder's rows by path: two files may carry one id
                if isinstance(opened, JsonlStore):
                    opened.delete_listed(item)
                else:
                    opened.delete(str(item.id))  # (a database's ids are strings)
    rows = [{"id": item.id, "path": item.path, "modified_ms": item.modified_ms} for item in old]
    if as_json:
        echo_json(_json.dumps({"dryRun": dry_run, "deleted": rows}))
        return
    verb = "would delete" if dry_run else "deleted"
    for item in old:
        when = _dt.datetime.fromtimestamp(item.modified_ms / 1000).strftime("%Y-%m-%d %H:%M")
        click.echo(f"{verb} {when}  {item.path}")
    click.echo(f"{verb} {len(old)} session(s) older than {days:g} day(s) in "
               f"{target if is_url(target) else os.path.abspath(target)}")


def _appended_ms(store: object, item: SessionListing) -> int:
    """When the newest entry of a listed session was appended (its envelope ``timestamp``, which
    a copy such as a cherry-pick sets anew while its message keeps its own time); 0 for none."""
    from .._time import iso_to_ms
    from .._treelog import TreeLog
    from ..errors import SessionTreeError
    from ..stores.jsonl import JsonlStore, open_file

    try:
        log = open_file(item.path, read_only=True, migrate=False, warn=False) \
            if isinstance(store, JsonlStore) else store.open_log(item.id)  # type: ignore[attr-defined]
        with TreeLog(log, warn=False) as session:
            ids = session.ids()
            stamp = getattr(session.entry(ids[-1]), "timestamp", None) if ids else None
    except SessionTreeError:  # (an old format version: its listing's time is all there is)
        return 0
    return iso_to_ms(stamp) or 0


@cli.command()
@click.argument("file", type=SESSION)
@click.option("-n", "--lines", "count", type=click.IntRange(min=0), default=10, show_default=True,
              help="Print the last N entries first.")
@click.option("--follow/--no-follow", "-f", default=True, show_default=True,
              help="Keep printing entries as they are appended (Ctrl+C stops).")
@click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Stop after SECONDS without a new entry.")
@json_option
@reports_errors
def tail(file: str, count: int, follow: bool, timeout: float | None, as_json: bool) -> None:
    """Print a session's last entries, then each new one as it lands (any backend; PostgreSQL
    is woken by NOTIFY, files and SQLite are polled). Only whole lines are ever read.

    With --json each entry is printed as its stored line.
    """
    from ._app import open_session

    with open_session(file) as session:
        ids = session.ids()[-count:] if count else []
        for entry_id in ids:
            _print_entry(session.raw_line(entry_id), as_json)
        if not follow:
            return
        try:
            for line in session.follow_lines(idle_timeout=timeout):
                _print_entry(line, as_json)
        except KeyboardInterrupt:
            return


def _print_entry(line: bytes, as_json: bool) -> None:
    from ..describe import KIND_NAMES, entry_kind, entry_summary
    from .._codec import decode_line

    if as_json:
        echo_json(line)
        return
    entry = decode_line(line)
    kind = entry_kind(entry)  # named as tree and browse name it
    click.echo(f"{entry.id}  {KIND_NAMES.get(kind, kind):<14} {entry_summary(entry, 100)}",
               nl=True)
    sys.stdout.flush()
