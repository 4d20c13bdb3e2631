"""The core commands: demo, tree, context, ls, migrate, verify, label."""

from __future__ import annotations

import datetime as _dt
import os
import tempfile

import click
import msgspec
from rich.console import Console
from rich.text import Text

from .. import _json
from ..errors import CorruptHeader, SessionTreeError
from ..views import (
    FILTER_MODES,
    FilterMode,
    ViewNode,
    filter_tree,
    fit_prefix,
    flatten,
    prefix_columns,
    shown_leaf,
)
from ._address import ENTRY_HELP, by_label_option, entry_option_value, pick_entry
from ._app import (
    SESSION_MAYBE,
    cli,
    echo_json,
    json_option,
    open_session,
    reports_errors,
    warnings_said,
)
from ._render import render_row

__all__ = ["context", "demo", "label", "ls", "migrate", "repair", "tree", "verify"]

FILE = click.argument("file", type=click.Path(dir_okay=False))
SESSION_ARG = click.argument("file", type=SESSION_MAYBE)


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def print_tree(session: object, console: Console | None = None, *, mode: FilterMode = "all",
               search: str | None = None, max_depth: int | None = None, fold: int = 0,
               ops: bool = False) -> int:
    """Print a session's tree, linear runs in one column, the active path marked; the
    operation tree's bookkeeping only with ``ops``. In a terminal (or with ``COLUMNS`` set) a
    summary fits the width; elsewhere (a pipe, a file) it is whole.

    Returns:
        The number of entries shown.
    """
    from ..session import Session

    assert isinstance(session, Session)
    console = console or _console()
    active = set(session.path_ids())
    leaf = session.leaf_id if ops else shown_leaf(session.path_ids(), session.entry)
    columns = prefix_columns(console.width or 100)
    shown = 0
    view = filter_tree(session.tree(), mode, search, ops=ops)
    for row in flatten(view, active, max_depth=max_depth, fold=fold, leaf_id=leaf):
        shown += 1 if row.node is not None else 0
        room = max(30, (console.width or 100) - 28 - len(fit_prefix(row.prefix, columns))) \
            if console.is_terminal or "COLUMNS" in os.environ else _WHOLE
        console.print(render_row(row, leaf_id=leaf, width=room, columns=columns))
    return shown


_WHOLE = 1 << 30
"""A summary's room when the output is no terminal: all of it."""


def _tree_json(session: object, mode: FilterMode = "all", search: str | None = None,
               ops: bool = False) -> bytes:
    from ..session import Session

    assert isinstance(session, Session)

    def shape(view: ViewNode) -> dict[str, object]:
        n = view.node
        out: dict[str, object] = {"id": n.id, "parentId": n.parent_id, "type": n.type,
                                  "timestamp": n.timestamp}
        if n.role is not None:
            out["role"] = n.role
        if n.label is not None:
            out["label"] = n.label
        out["children"] = []
        return out

    roots = filter_tree(session.tree(), mode, search, ops=ops)
    top = [shape(v) for v in roots]
    stack = list(zip(roots, top))
    while stack:  # iterative: a 100,000-entry chain is as deep as it is long
        view, data = stack.pop()
        kids = data["children"]
        assert isinstance(kids, list)
        for child in view.children:
            shaped = shape(child)
            kids.append(shaped)
            stack.append((child, shaped))
    leaf = session.leaf_id if ops else shown_leaf(session.path_ids(), session.entry)
    payload: dict[str, object] = {"leafId": leaf, "filter": mode, "search": search,
                                  "roots": top}
    import sys

    limit = sys.getrecursionlimit()  # the encoder nests once per level of the tree
    sys.setrecursionlimit(max(limit, 4 * len(session) + 1000))
    try:
        return _json.dumps(payload)
    finally:
        sys.setrecursionlimit(limit)


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@reports_errors
def demo(directory: str | None) -> None:
    """Create a small branched session in DIRECTORY (default: a new temporary folder) and print
    its tree.

    The session has two branches, a label, a branch summary and a compaction, and opens in pi.
    """
    from ..demo import build_demo_session

    folder = directory or tempfile.mkdtemp(prefix="sessiontree-demo-")
    session = build_demo_session(folder)
    with session:
        console = _console()
        console.print(f"[bold]Session[/bold] {session.file}")
        console.print(f"{len(session)} entries, {len(session.leaves())} leaves, branch points: "
                      f"{', '.join(session.branch_points())}\n")
        print_tree(session, console)
        context = session.build_context()
        console.print(f"\nContext from the leaf {session.leaf_id}: {len(context)} messages "
                      f"({', '.join(m.role for m in context.messages)})")
        console.print(f"Try: sessiontree context {session.file}")


@cli.command()
@SESSION_ARG
@click.option("--filter", "mode", type=click.Choice(FILTER_MODES), default="all", show_default=True,
              help="What to show (as the browser's ctrl+o): default hides labels, custom and "
                   "settings entries; no-tools also tool results; user-only; labeled-only; all.")
@click.option("--search", metavar="TEXT",
              help="Only entries whose text holds every word of TEXT (case-insensitive).")
@click.option("--max-depth", type=click.IntRange(min=0), metavar="N",
              help="Draw branches up to N levels of indentation; deeper ones show a count.")
@click.option("--fold", type=click.IntRange(min=0), default=40, show_default=True, metavar="N",
              help="Fold linear runs longer than N entries into their ends and one '… K more "
                   "entries …' line (0: never).")
@click.option("--ops", is_flag=True,
              help="Also show the operation tree's bookkeeping entries (sessiontree.op*, "
                   "written by chat and the agent; 'sessiontree ops' shows their tree).")
@json_option
@reports_errors
def tree(file: str, mode: FilterMode, search: str | None, max_depth: int | None, fold: int,
         ops: bool, as_json: bool) -> None:
    """Print the session's tree: linear runs in one column, branches indented (box drawing),
    labels in brackets, the path to the leaf marked •, the leaf ● (the last conversation
    entry: the operation tree's bookkeeping is hidden unless --ops). Summaries fit the
    terminal's width (or COLUMNS), and are whole when the output is not a terminal.

    A filter or search hides entries but keeps what is below them: it hangs under the nearest
    shown ancestor. With --json: the (filtered) tree as nested objects; --max-depth and --fold
    only change the drawing.
    """
    with open_session(file) as session:
        if as_json:
            echo_json(_tree_json(session, mode, search, ops))
            return
        console = _console()
        shown = print_tree(session, console, mode=mode, search=search, max_depth=max_depth,
                           fold=fold, ops=ops)
        if shown == 0:
            click.echo(f"no entry matches (filter {mode}"
                       f"{', search ' + repr(search) if search else ''})", err=True)


@cli.command(epilog=ENTRY_HELP)
@SESSION_ARG
@click.option("--leaf", "leaf_id", metavar="ID", help="Build from this entry (default: the leaf).")
@json_option
@reports_errors
def context(file: str, leaf_id: str | None, as_json: bool) -> None:
    """Print the messages a model would get from the leaf (pi's buildSessionContext).

    With --json the output is exactly pi's JSON: {"messages", "thinkingLevel", "model"}.
    """
    from ..describe import one_line
    from ..messages import message_text

    with open_session(file) as session:
        start = entry_option_value(session, leaf_id)
        result = session.build_context(start) if start else session.build_context()
        if as_json:
            echo_json(result.to_json_bytes())
            return
        console = _console()
        model = result.model
        model_text = f"{model.provider}/{model.model_id}" if model is not None else "none"
        console.print(f"[dim]{len(result)} messages · thinking {result.thinking_level} · "
                      f"model {model_text}[/dim]")
        for message in result.messages:
            role = getattr(message, "role", None) or type(message).__name__
            console.print(f"[bold]{role}[/bold]: {one_line(message_text(message, separator=' '), 200)}")


_TIME_MARKS = {"message": " ", "created": "*", "file": "~"}
_TIME_LEGEND = {"created": "* no user or assistant message yet: the time the session was created",
                "file": "~ no message and no header time: the file's modification time"}


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--cwd", "cwd", metavar="PATH",
              help="Only the sessions of this working directory (without DIRECTORY: pi's "
                   "folder for it).")
@click.option("--all", "-a", "every", is_flag=True,
              help="Every project: DIRECTORY (default: pi's sessions root) and each of its "
                   "project folders, as pi's session selector lists all.")
@json_option
@reports_errors
def ls(directory: str | None, cwd: str | None, every: bool, as_json: bool) -> None:
    """List the sessions in DIRECTORY, newest first (default: pi's folder for the current
    working directory): the time of the last message, the entry count, the name (or the first
    user message) and the file. DIRECTORY may be a store URL (sqlite:///x.db,
    postgresql://...): its sessions table is read, no entry is scanned. A folder with no
    session of its own but project folders (pi's sessions root) is listed as with --all.

    An empty or (for the default folder) missing folder prints "no sessions in DIR" and exits 0.
    A listing index in the folder makes the next listing fast.
    """
    from .._listing import ListingWarning
    from ..describe import one_line
    from ..stores.jsonl import default_session_dir, default_sessions_root, list_sessions
    from ..stores.url import is_url, open_store

    wanted = os.path.abspath(cwd) if cwd is not None else None
    default = str(default_sessions_root()) if every else \
        str(default_session_dir(wanted or os.getcwd()))
    folder = directory or default
    if is_url(folder):
        with open_store(folder, read_only=True) as store:
            listings = store.list_sessions(cwd=wanted)  # by the cwd index, newest first
    elif directory or os.path.isdir(folder):
        with warnings_said(ListingWarning):  # a FIFO or a device named *.jsonl: left out
            listings = list_sessions(folder, cwd=wanted, all=every)
            if not listings and not every:  # pi's sessions root: its projects
                listings = list_sessions(folder, cwd=wanted, all=True)
    else:
        listings = []
    if as_json:
        echo_json(_json.dumps(listings))  # (a token total beyond 64 bits is written too)
        return
    console = _console()
    if not listings:
        console.print(Text(f"no sessions in {folder}"))
        return
    console.print(Text(f"{'LAST MESSAGE':<17}  {'ENTRIES':>7}  NAME OR FIRST MESSAGE", style="dim"))
    for item in listings:
        when = _dt.datetime.fromtimestamp(item.modified_ms / 1000).strftime("%Y-%m-%d %H:%M")
        row = Text(f"{when}{_TIME_MARKS[item.modified_from]}  {item.entry_count:>7}  ")
        row.append(one_line(item.name or item.first_message, 60), style="bold")
        console.print(row)
        console.print(Text(f"{'':<17}  {'':>7}  {item.path}", style="dim"))
    for source in dict.fromkeys(item.modified_from for item in listings):
        if source in _TIME_LEGEND:
            console.print(Text(_TIME_LEGEND[source], style="dim"))


def _file_only(file: str, command: str, why: str) -> None:
    """Refuse a database URL for a command that rewrites a file, saying why."""
    from ..stores.url import is_url

    if is_url(file):
        raise click.UsageError(f"{command} works on session files, not on {file}: {why}")


@cli.command()
@FILE
@reports_errors
def migrate(file: str) -> None:
    """Bring an old session file (version 1, 2 or the draft format) to version 3, in place;
    also a header whose version is odd (3.5, "2"), as pi reads it. The original is kept
    beside it as FILE.v<N>.bak; the rewrite is atomic.

    Given an SQLite or PostgreSQL store's URL, run the schema migrations it lacks now, which
    the first writable open would run (SQLite's migration 7 takes minutes on a large store,
    while other processes opening it wait); a current store is left as it is, and one newer
    than this sessiontree refused. Given a Redis store (redis://...[#ID]), give the sessions
    stored before the tree index one, so they open by their paths instead of reading every line.
    """
    from ..migrate import migrate_file
    from ..stores.url import is_url, parse_location

    if is_url(file):
        (_index_redis_trees if parse_location(file).kind == "redis" else _migrate_schema)(file)
        return
    result = migrate_file(file)
    if result.backup is None:
        click.echo(f"{file}: already version {result.from_version}; nothing to do")
    else:
        stated = result.from_version if result.odd_version is None else \
            f"{result.odd_version} (read as pi reads it: {result.from_version})"
        click.echo(f"{file}: migrated from version {stated} to 3; original kept in "
                   f"{result.backup}")
        if result.skipped:
            click.echo(f"warning: lines {', '.join(map(str, result.skipped))} did not parse and "
                       "are only in the backup", err=True)


def _migrate_schema(url: str) -> None:
    """``migrate`` of an SQLite or PostgreSQL store: its version read without writing, then
    the migrations it lacks run by a writable open (nothing is created where no store is)."""
    from ..errors import ReadOnlyStore
    from ..stores._sql import SqlStore
    from ..stores.url import open_store, parse_location

    where = parse_location(url)
    if where.session_id is not None:
        raise click.UsageError(f"{url}: the schema is the whole store's; give the store's URL, "
                               f"without #{where.session_id}")
    if where.mode == "ro":
        raise ReadOnlyStore("a migration writes, and mode=ro opens the store read-only; "
                            "nothing was migrated", path=url)
    with open_store(url, read_only=True) as store:  # a newer schema is refused here
        assert isinstance(store, SqlStore)
        before, current = store.schema_version(), len(store.dialect.migrations)
    if before == current:
        click.echo(f"{store.url}: schema version {before}, the current one; nothing to do")
        return
    click.echo(f"{store.url}: migrating the schema from version {before} to {current} "
               "(other processes opening the store wait meanwhile)", err=True)
    with open_store(url) as store:
        assert isinstance(store, SqlStore)
        click.echo(f"{store.url}: schema migrated from version {before} to "
                   f"{store.schema_version()}")


def _index_redis_trees(url: str) -> None:
    """``migrate`` of a Redis store: the tree and search indexes for the sessions stored
    without them."""
    from ..stores.redis import MigrationWarning, RedisStore
    from ..stores.url import open_store, parse_location

    session_id = parse_location(url).session_id
    with open_store(url.partition("#")[0]) as store, warnings_said(MigrationWarning):
        assert isinstance(store, RedisStore)
        if session_id is None:
            click.echo(f"{store.url}: {store.migrate()} session(s) given the tree index or "
                       "this version's search index")
        elif store.index_tree(session_id):
            click.echo(f"{store.session_url(session_id)}: given the tree index")
        else:
            click.echo(f"{store.session_url(session_id)}: cannot have the tree index (orphans, "
                       "or parents named before they came): it keeps being read whole")


@cli.command()
@FILE
@json_option
def verify(file: str, as_json: bool) -> None:
    """Check a session file: one line per problem (corrupt, torn, orphan, cycle, duplicate id,
    bad header); exit 1 if there is any."""
    from ..session import Session

    problems: list[dict[str, object]] = []
    try:
        with Session.open(file, warn=False, migrate=False) as session:
            problems = [msgspec.to_builtins(p) for p in session.problems]
    except CorruptHeader as exc:
        problems = [{"line": exc.lineno, "kind": "bad_header", "reason": exc.reason}]
    except SessionTreeError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json(_json.dumps({"file": file, "problems": problems}))
    else:
        for p in problems:
            click.echo(f"{file} line {p['line']}: {p['kind']}: {p['reason']}")
        if not problems:
            click.echo(f"{file}: ok")
    if problems:
        raise SystemExit(1)


@cli.command(epilog=ENTRY_HELP)
@SESSION_ARG
@click.argument("entry_id", metavar="ID", required=False)
@click.argument("text", required=False)
@by_label_option
@click.option("--clear", is_flag=True, help="Remove the entry's label.")
@reports_errors
def label(file: str, entry_id: str | None, text: str | None, by_label: str | None,
          clear: bool) -> None:
    """Set (or with --clear remove) the label of entry ID to TEXT.

    With --label NAME the entry is the one labelled NAME and the only argument is TEXT
    (relabel: sessiontree label FILE --label old new).
    """
    if by_label is not None and text is None:
        entry_id, text = None, entry_id  # one argument after --label: it is the new TEXT
    if clear == (text is not None):
        raise click.UsageError("give either TEXT or --clear")
    with open_session(file) as session:
        target = pick_entry(session, entry_id, by_label, required=True)
        assert target is not None
        session.set_label(target, None if clear else text)
        click.echo(f"{target}: label {'cleared' if clear else repr(text)}")


@cli.command()
@FILE
@json_option
@reports_errors
def repair(file: str, as_json: bool) -> None:
    """Fix what verify finds, keeping a backup: drop corrupt and torn lines and superseded
    duplicates, and cut parent cycles (pi hangs on them). Orphans are left as roots.

    Files only: a database checks every entry as it is stored, so it holds no corrupt or torn
    line and no duplicate id (verify URL#ID reports what it does hold).
    """
    from ..repair import repair_file

    _file_only(file, "repair", "a database checks every entry as it is stored, so it holds no "
                               "corrupt or torn line and no duplicate id; 'sessiontree verify' "
                               "reports what it does hold")

    result = repair_file(file)
    if as_json:
        echo_json(_json.dumps(msgspec.to_builtins(result)))
    elif result.backup is None:
        click.echo(f"{file}: nothing to repair")
    else:
        click.echo(f"{file}: removed lines {result.removed_lines or 'none'}; cycles cut at "
                   f"{result.rerooted or 'none'}; original kept in {result.backup}")
