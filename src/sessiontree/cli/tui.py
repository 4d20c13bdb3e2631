"""``sessiontree browse``: a Textual browser for a session tree (the ``tui`` extra).

The tree is drawn as ``sessiontree tree`` draws it (linear runs in one column, branches
indented, the active path first and marked); filters, search, label editing and navigation
work as in pi's tree selector. Key table: :data:`KEYS` (also in the README).

Invariants:
* The tree widget renders only the lines on screen (Textual's line API): a 100,000-entry
  session costs one row object per shown entry, and payloads are decoded for the rows drawn,
  the preview and searches only.
* Opening, rebuilding rows after a filter or search, the preview's context size and
  navigation run in worker threads, so the interface never waits on them; a newer request
  cancels an older one of the same kind. A folder's search index (for shift+S) is brought up
  to date in one at startup, so the first search does not scan the whole folder; quitting
  stops it at the end of its transaction under way (a second, or the 8 MiB piece of a file
  being indexed), what it indexed kept.
* Everything written goes through :class:`~sessiontree.Session` (``set_label``,
  ``navigate_tree``), so the file stays one pi can open.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Region, Size
from textual.message import Message
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Footer, Input, Label, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from .._tree import TreeNode
from ..describe import KIND_NAMES, entry_kind, entry_summary, one_line
from ..usage import UsageTotals, session_usage
from ..views import (
    FilterMode,
    Row,
    filter_tree,
    fit_prefix,
    flatten,
    next_mode,
    node_text,
    prefix_columns,
    search_terms,
    shown_leaf,
)
from ._render import KIND_STYLE, render_row

if TYPE_CHECKING:
    from .._search import SearchHit
    from ..navigation import NavigationResult
    from ..projection import ProjectedEntry
    from ..session import Session
    from ..summarize.base import Summarizer

__all__ = ["KEYS", "BrowseApp", "ConfirmNavigate", "EditLabel", "GlobalSearch", "TreeView",
           "store_of"]

KEYS: list[tuple[str, str]] = [
    ("↑ ↓ PgUp PgDn Home End", "move the selection"),
    ("Enter", "go to the selected entry (asks whether to summarize the branch you leave)"),
    ("ctrl+← / alt+←", "collapse the branch that starts here (⊟), or go up to the start of "
                       "the branch (pi's fold keys)"),
    ("ctrl+→ / alt+→", "expand a collapsed branch (⊞), or go down to the next branch"),
    ("ctrl+o / shift+ctrl+o", "next / previous filter: default, no-tools, user-only, "
                              "labeled-only, all (also f / F)"),
    ("/", "search (every word must match; Enter keeps it and closes the box, / reopens it, "
          "Esc clears it)"),
    ("shift+L", "edit the selected entry's label (empty clears it)"),
    ("shift+S", "search every session of the store (words and \"phrases\", every branch); "
                "Enter on a hit opens its session at that entry"),
    ("l", "jump to the session's leaf"),
    ("q, ctrl+c", "quit"),
]
"""The browser's keys, as documented in the README."""


class TreeView(ScrollView, can_focus=True):
    """The session tree as rows, drawn a screen at a time."""

    DEFAULT_CSS = """
    TreeView { background: $surface; }
    TreeView:focus { background-tint: $foreground 3%; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("ctrl+left,alt+left", "fold", "Fold", show=False),
        Binding("ctrl+right,alt+right", "unfold", "Unfold", show=False),
    ]

    SELECTED = Style(color="#ffffff", bgcolor="#1d4f91", bold=True, dim=False)
    """The selected row: white on blue (contrast 8.1:1, WCAG AA needs 4.5:1), every other
    colour of the row overridden so that nothing on it is dim or low-contrast."""
    SELECTED_UNFOCUSED = Style(color="#ffffff", bgcolor="#4a4a4a", bold=True, dim=False)
    """The selection while the search box has the focus (contrast 8.9:1)."""

    class Highlighted(Message):
        """The selection moved to another entry."""

        def __init__(self, node: TreeNode | None) -> None:
            super().__init__()
            self.node = node

    class FoldChanged(Message):
        """The user collapsed (``collapse=True``) or expanded the subtree of ``entry_id``."""

        def __init__(self, entry_id: str, collapse: bool) -> None:
            super().__init__()
            self.entry_id = entry_id
            self.collapse = collapse

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[Row] = []
        self.cursor = 0
        self.leaf_id: str | None = None
        self.edits: dict[str, str] = {}
        self._lines: dict[int, Text] = {}
        self._deepest = 0

    # -- data

    def set_rows(self, rows: list[Row], leaf_id: str | None, keep: str | None = None,
                 edits: dict[str, str] | None = None) -> None:
        """Show new rows; the selection stays on ``keep`` when it is still shown; ``edits``
        marks the entries the model sees ``edited`` or ``omitted``."""
        self.rows = rows
        self.leaf_id = leaf_id
        self.edits = edits or {}
        self._lines.clear()
        at = 0
        if keep is not None:
            for number, row in enumerate(rows):
                if row.node is not None and row.node.id == keep:
                    at = number
                    break
        columns = prefix_columns(self.size.width or 80)
        self._deepest = max((len(fit_prefix(r.prefix, columns)) for r in rows), default=0)
        self.virtual_size = Size(self._deepest + 50, len(rows))
        self.cursor = min(at, max(0, len(rows) - 1))
        self._reveal()
        self.refresh()
        self.post_message(self.Highlighted(self.selected))

    @property
    def selected(self) -> TreeNode | None:
        if not self.rows:
            return None
        return self.rows[self.cursor].node

    def on_resize(self) -> None:
        self._lines.clear()

    def forget(self, entry_id: str) -> None:
        """Redraw a row whose entry changed (its label)."""
        self._lines.clear()
        self.refresh()

    # -- drawing

    def _line(self, number: int) -> Text:
        text = self._lines.get(number)
        if text is None:
            row = self.rows[number]
            columns = prefix_columns(self.size.width)
            room = max(20, self.size.width - len(fit_prefix(row.prefix, columns)) - 23)
            text = render_row(row, leaf_id=self.leaf_id, width=room, columns=columns,
                              fold_marks=True, edit=self.edits.get(row.node.id) if row.node
                              else None)
            if len(self._lines) > 2000:
                self._lines.clear()
            self._lines[number] = text
        return text

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        number = y + scroll_y
        width = self.size.width
        if number >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        text = self._line(number)
        base = self.rich_style
        if number == self.cursor:
            chosen = base + (self.SELECTED if self.has_focus else self.SELECTED_UNFOCUSED)
            segments = [Segment(s.text, chosen) for s in text.render(self.app.console)
                        if not s.control]
            strip = Strip(segments).crop(scroll_x, scroll_x + width)
            return strip.extend_cell_length(width, chosen)
        segments = [Segment(s.text, base + s.style if s.style else base)
                    for s in text.render(self.app.console) if not s.control]
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, base)

    def _reveal(self) -> None:
        self.scroll_to_region(Region(0, self.cursor, 1, 1), animate=False, force=True)

    def move_to(self, number: int) -> None:
        if not self.rows:
            return
        number = max(0, min(len(self.rows) - 1, number))
        if number == self.cursor:
            return
        old = self.cursor
        self.cursor = number
        self.refresh_line(old)
        self.refresh_line(number)
        self._reveal()
        self.post_message(self.Highlighted(self.selected))

    def select_id(self, entry_id: str) -> bool:
        for number, row in enumerate(self.rows):
            if row.node is not None and row.node.id == entry_id:
                self.move_to(number)
                return True
        return False

    def refresh_line(self, y: int) -> None:
        self.refresh(Region(0, y - self.scroll_offset.y, self.size.width, 1))

    # -- actions

    def action_cursor(self, step: int) -> None:
        self.move_to(self.cursor + step)

    def action_page(self, step: int) -> None:
        self.move_to(self.cursor + step * max(1, self.size.height - 1))

    def action_cursor_to(self, number: int) -> None:
        self.move_to(number if number >= 0 else len(self.rows) - 1)

    def action_fold(self) -> None:
        """pi's fold-or-up: collapse the branch that starts at the selection, or go up to the
        start of its branch (of the enclosing branch, when already at a start)."""
        if not self.rows:
            return
        row = self.rows[self.cursor]
        if row.node is not None and row.foldable and not row.collapsed:
            self.post_message(self.FoldChanged(row.node.id, True))
            return
        level = row.level
        for number in range(self.cursor - 1, -1, -1):
            above = self.rows[number]
            if above.start and (above.level == level - 1 if row.start else above.level == level):
                self.move_to(number)
                return

    def action_unfold(self) -> None:
        """pi's unfold-or-down: expand a collapsed branch, or go down to the first branch
        below the selection (to the end of its run when none follows)."""
        if not self.rows:
            return
        row = self.rows[self.cursor]
        if row.node is not None and row.collapsed:
            self.post_message(self.FoldChanged(row.node.id, False))
            return
        number = self.cursor
        while number + 1 < len(self.rows):
            below = self.rows[number + 1]
            if below.level > row.level:
                number += 1
                break
            if below.level < row.level or below.start:
                break
            number += 1
        self.move_to(number)


class ConfirmNavigate(ModalScreen[bool | None]):
    """Asks whether to summarize the branch being left: y, n, or Esc to cancel."""

    DEFAULT_CSS = """
    ConfirmNavigate { align: center middle; }
    ConfirmNavigate > Vertical { width: 72; max-width: 100%; height: auto; border: thick $accent;
                                 padding: 1 2; background: $panel; }
    ConfirmNavigate Label { width: 100%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Summarize"),
        Binding("n", "answer(False)", "No summary"),
        Binding("escape", "answer(None)", "Cancel"),
    ]

    def __init__(self, target: str, what: str, summarizer: str) -> None:
        super().__init__()
        self.target = target
        self.what = what
        self.summarizer = summarizer

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(f"Go to {self.target} ({self.what})?"))
            yield Label(Text(f"Summarize the branch you leave ({self.summarizer})?"))
            yield Label("[b]y[/b] yes · [b]n[/b] no, just move · [b]Esc[/b] cancel")

    def action_answer(self, answer: bool | None) -> None:
        self.dismiss(answer)


class EditLabel(ModalScreen[str | None]):
    """Edits one entry's label: Enter saves (empty clears), Esc cancels."""

    DEFAULT_CSS = """
    EditLabel { align: center middle; }
    EditLabel > Vertical { width: 72; max-width: 100%; height: auto; border: thick $accent;
                           padding: 1 2; background: $panel; }
    EditLabel Label { width: 100%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, entry_id: str, current: str | None) -> None:
        super().__init__()
        self.entry_id = entry_id
        self.current = current or ""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(f"Label of {self.entry_id} (Enter saves, empty clears, Esc cancels)"))
            yield Input(self.current, id="label-input")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


def store_of(session: str) -> str:
    """Where a global search from a session looks: its database (``URL#ID`` without the id),
    or for a file, pi's sessions root when the file is in a ``--<cwd>--`` project folder,
    else the file's folder."""
    import os

    from ..stores.url import is_url

    if is_url(session):
        return session.partition("#")[0]
    folder = os.path.dirname(os.path.abspath(session))
    name = os.path.basename(folder)
    return os.path.dirname(folder) if name.startswith("--") and name.endswith("--") else folder


class GlobalSearch(ModalScreen["SearchHit | None"]):
    """Searches every session of a store (:func:`sessiontree.search.search_sessions`): type
    words and "phrases", Enter searches, ↓ and Enter pick a hit, Esc closes."""

    DEFAULT_CSS = """
    GlobalSearch { align: center middle; }
    GlobalSearch > Vertical { width: 90%; height: 90%; border: thick $accent; padding: 0 1;
                              background: $panel; }
    GlobalSearch #global-status { height: 1; color: $text-muted; }
    GlobalSearch OptionList { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, store: str, query: str = "") -> None:
        super().__init__()
        self.store = store
        self.query_text = query
        self.hits: list[SearchHit] = []
        self.searched: str | None = None
        """The query whose hits are shown (``None`` before the first search ends)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(f"Search every session of {self.store}", style="bold"))
            yield Input(self.query_text, placeholder='words and "exact phrases"; Enter searches',
                        id="global-query")
            yield Static("", id="global-status")
            yield OptionList(id="global-hits")

    def on_mount(self) -> None:
        self.query_one("#global-query", Input).focus()
        if self.query_text.strip():
            self._run(self.query_text)

    @on(Input.Submitted, "#global-query")
    def _submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self._run(event.value)

    def _run(self, query: str) -> None:
        self.query_one("#global-status", Static).update(Text("searching…", style="dim"))
        self._search(query)

    @work(thread=True, exclusive=True, group="global-search")
    def _search(self, query: str) -> None:
        from ..errors import SessionTreeError
        from ..search import search_sessions

        try:
            hits = search_sessions(self.store, query, limit=100)
        except SessionTreeError as exc:
            self.app.call_from_thread(self._failed, query, str(exc))
            return
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._found, query, hits)

    def _failed(self, query: str, message: str) -> None:
        self.searched = query
        self.hits = []
        self.query_one("#global-hits", OptionList).clear_options()
        self.query_one("#global-status", Static).update(Text(message, style="red"))

    def _found(self, query: str, hits: list[SearchHit]) -> None:
        self.searched = query
        self.hits = hits
        options = self.query_one("#global-hits", OptionList)
        options.clear_options()
        options.add_options([Option(_hit_text(hit), id=str(i)) for i, hit in enumerate(hits)])
        status = f"{len(hits)} hit{'s' if len(hits) != 1 else ''}" if hits else "no entry holds it"
        self.query_one("#global-status", Static).update(Text(
            f"{status} · * on the session's current branch · ↓ then Enter opens", style="dim"))
        if hits:
            options.highlighted = 0
            options.focus()

    @on(OptionList.OptionSelected, "#global-hits")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.hits[event.option_index])

    def action_close(self) -> None:
        self.dismiss(None)


def _hit_text(hit: SearchHit) -> Text:
    import os

    where = hit.session.rpartition("#")[2] if "#" in hit.session else os.path.basename(
        hit.session)
    text = Text(f"{(hit.timestamp or '')[:16].replace('T', ' '):<16} "
                f"{'*' if hit.on_current_branch else ' '} {hit.role:<9} ")
    text.append(f"{one_line(hit.cwd, 30)}  {where}  {hit.entry_id}\n", style="dim")
    snippet = Text("  " + hit.snippet)
    for start, end in hit.marks:
        snippet.stylize("bold reverse", start + 2, end + 2)
    text.append_text(snippet)
    return text


class BrowseApp(App[None]):
    """Browse a session file: the tree, a preview of the selection, filters and search."""

    TITLE = "sessiontree browse"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #status { height: 1; background: $primary-background; color: $text; padding: 0 1; }
    #panes { height: 1fr; }
    #tree { width: 3fr; }
    #side { width: 2fr; min-width: 30; border-left: solid $primary; }
    #preview { height: 1fr; padding: 0 1; }
    #context { height: auto; padding: 0 1; color: $text-muted; }
    #search { dock: bottom; display: none; }
    #search.open { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+o", "cycle_filter(1)", "Filter", priority=True),
        Binding("ctrl+shift+o", "cycle_filter(-1)", "Filter back", show=False, priority=True),
        Binding("f", "cycle_filter(1)", "Filter", show=False),
        Binding("F", "cycle_filter(-1)", "Filter back", show=False),
        Binding("slash", "search", "Search"),
        Binding("L", "edit_label", "Label"),
        Binding("S", "global_search", "All sessions"),
        Binding("enter", "navigate", "Go here"),
        Binding("l", "to_leaf", "Leaf", show=False),
        Binding("escape", "escape", "Clear", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, path: str | None, *, summarizer: Summarizer | None = None,
                 summarizer_name: str = "offline summarizer", mode: FilterMode = "default",
                 opener: Callable[[str], Session] | None = None,
                 leave_on_navigate: bool = False, store: str | None = None,
                 search: str | None = None, entry: str | None = None) -> None:
        """Args:
            path: the session (a file or ``URL#ID``); ``None``: start in the global search of
                ``store`` and open the hit picked.
            store: where the global search (shift+S) looks; default: :func:`store_of` the
                session.
            search: start in the global search with this query.
            entry: select this entry once the session is loaded.
        """
        super().__init__()
        if path is None and store is None:
            raise ValueError("BrowseApp needs a session or a store")
        self.path = path
        self.store = store if store is not None else store_of(path or "")
        self.start_search = search
        self.focus_entry = entry
        self.leave_on_navigate = leave_on_navigate
        """Exit once Enter moved the leaf (``chat``'s ``/tree``: back to the chat at once)."""
        self.summarizer = summarizer
        self.summarizer_name = summarizer_name
        self.mode: FilterMode = mode
        self.search_text = ""
        self.session: Session | None = None
        self._opener = opener
        self._roots: list[TreeNode] = []
        self.usage: UsageTotals | None = None
        """The session's token and cost totals (pi's footer), shown in the status line."""
        self.edits: dict[str, ProjectedEntry] = {}
        """The entries the context from the leaf sees edited or omitted (pi 1.5.2's
        ``context_edit``), by id, from the leaf's projection."""
        self._texts: dict[str, str] = {}
        self.editor_text: str | None = None
        self.loaded = False
        self.busy = False
        self._search_timer: Timer | None = None
        self.searching = False
        """A search was typed and is waiting for the typing to pause."""
        self.collapsed: set[str] = set()
        """Entries whose subtree is collapsed (ctrl+← / ctrl+→)."""

    # -- layout

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="status")
        with Horizontal(id="panes"):
            yield TreeView(id="tree")
            with Vertical(id="side"):
                with VerticalScroll(id="preview"):
                    yield Static("", id="preview-text")
                yield Static("", id="context")
        yield Input(placeholder="search: every word must match (Enter keeps, Esc clears)",
                    id="search")
        yield Footer()

    @property
    def tree_view(self) -> TreeView:
        return self.query_one("#tree", TreeView)

    def on_mount(self) -> None:
        from ..stores.url import is_url

        self.tree_view.focus()
        if self.path is not None:
            self._load()
        if not self.leave_on_navigate and not is_url(self.store):  # (a database's is whole)
            self._build_search_index()
        if self.start_search is not None or self.path is None:
            self.action_global_search(self.start_search or "")

    def on_unmount(self) -> None:
        if self.session is not None:
            self.session.close()

    # -- loading and rows (worker threads)

    @work(thread=True, exclusive=True, group="search-index")
    def _build_search_index(self) -> None:
        """The folder's whole search index built now, so that shift+S reads only what changes
        after (a first search indexes for a moment and scans the rest); it stops when the
        browser quits (the worker is cancelled). Failing, whatever the error (the index is
        optional: it must never take the browser down), it says why: searches then scan."""
        from ..stores.jsonl import JsonlStore

        worker = get_current_worker()
        try:
            JsonlStore(self.store, read_only=True).build_search_index(
                stop=lambda: worker.is_cancelled)
        except Exception as exc:  # noqa: BLE001 (see the docstring)
            self.call_from_thread(self.notify, f"the search index of {self.store} was not "
                                  f"built ({exc}): searches scan the files", severity="warning")

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        from ..session import Session

        assert self.path is not None
        session = self._opener(self.path) if self._opener else Session.open(self.path)
        roots = session.tree()
        rows = self._rows(roots, session, self.mode, self.search_text, self.focus_entry)
        facts = _facts(session)
        self.call_from_thread(self._loaded, session, roots, rows, facts)

    def _loaded(self, session: Session, roots: list[TreeNode], rows: list[Row],
                facts: _Facts) -> None:
        self.session = session
        self._roots = roots
        self.usage, self.edits = facts
        self.loaded = True
        leaf = self._leaf(session)
        focus, self.focus_entry = self.focus_entry, None
        self.tree_view.set_rows(rows, leaf, keep=focus or leaf, edits=self._edit_marks())
        self._status(f"found {focus}" if focus else "")

    def _text(self, node: TreeNode) -> str:
        text = self._texts.get(node.id)
        if text is None:
            text = node_text(node)
            self._texts[node.id] = text
        return text

    def _search_text(self, node: TreeNode, terms: list[str]) -> str:
        """:func:`node_text`, or only the id when the stored line cannot hold every term.

        Decoding 100,000 payloads takes seconds; a term that is not in the line's bytes (nor
        in the label or the kind's names) is not in its text either, so most entries are
        ruled out by a substring test. Terms JSON would escape skip the test.
        """
        if node.id not in self._texts and self.session is not None \
                and not any(c in term for term in terms for c in '"\\'):
            raw = self.session.raw_line(node.id).decode("utf-8", "replace").casefold()
            extra = f" {(node.label or '').casefold()} {' '.join(KIND_NAMES.values())}"
            if not all(term in raw or term in extra for term in terms):
                return node.id
        return self._text(node)

    def _edit_marks(self) -> dict[str, str]:
        return {entry_id: "omitted" if p.omitted else "edited" for entry_id, p in self.edits.items()}

    def _leaf(self, session: Session) -> str | None:
        """The leaf to mark: the session's, or in a mode that hides the operation tree's
        bookkeeping the last conversation entry before it."""
        if self.mode == "all":
            return session.leaf_id
        return shown_leaf(session.path_ids(), session.entry)

    def _rows(self, roots: list[TreeNode], session: Session, mode: FilterMode, search: str,
              keep: str | None) -> list[Row]:
        leaf = self._leaf(session)
        active = set(session.path_ids())
        worker = get_current_worker()
        terms = search_terms(search)

        def text(node: TreeNode) -> str:
            if worker.is_cancelled:
                raise _Cancelled
            return self._search_text(node, terms)

        def kept(node: TreeNode) -> bool:  # (a search shows matches only, and the leaf)
            return node.id == leaf or (node.id == keep and not terms)

        try:
            view = filter_tree(roots, mode, search or None, text=text, keep=kept)
        except _Cancelled:
            return []
        return list(flatten(view, active, collapsed=frozenset(self.collapsed)))

    def rebuild(self, *, reload_tree: bool = False) -> None:
        """Recompute the rows for the current filter and search (in a worker)."""
        if self.session is None:
            return
        selected = self.tree_view.selected
        self._rebuild(reload_tree, selected.id if selected is not None else None)

    @work(thread=True, exclusive=True, group="rows")
    def _rebuild(self, reload_tree: bool, keep: str | None) -> None:
        session = self.session
        assert session is not None
        roots = session.tree() if reload_tree else self._roots
        rows = self._rows(roots, session, self.mode, self.search_text, keep)
        facts = _facts(session) if reload_tree else _Facts(self.usage, self.edits)
        if get_current_worker().is_cancelled:
            return
        self.call_from_thread(self._rebuilt, roots, rows, keep, facts)

    def _rebuilt(self, roots: list[TreeNode], rows: list[Row], keep: str | None,
                 facts: _Facts) -> None:
        assert self.session is not None
        self._roots = roots
        self.usage, self.edits = facts
        self.tree_view.set_rows(rows, self._leaf(self.session), keep=keep,
                                edits=self._edit_marks())
        self._status()

    def _status(self, note: str = "") -> None:
        session = self.session
        if session is None:
            return
        shown = sum(1 for r in self.tree_view.rows if r.node is not None)
        name = session.name or session.file or session.id
        search = f" · search {self.search_text!r}" if self.search_text else ""
        totals = self.usage.footer() if self.usage is not None else ""
        text = (f"{one_line(name, 40)} · {shown}/{len(session)} shown · filter {self.mode}"
                f"{search} · leaf {self._leaf(session) or '(none)'}"
                f"{f' · {totals}' if totals else ''}")
        if note:
            text += f" · {note}"
        self.query_one("#status", Static).update(Text(text))

    # -- the preview

    @on(TreeView.Highlighted)
    def _highlighted(self, event: TreeView.Highlighted) -> None:
        node = event.node
        preview = self.query_one("#preview-text", Static)
        context = self.query_one("#context", Static)
        if node is None:
            preview.update(Text("no entry matches", style="dim"))
            context.update("")
            return
        preview.update(self._preview(node))
        context.update(Text("context: …", style="dim"))
        self._context_size(node.id)

    def _preview(self, node: TreeNode) -> Text:
        entry = node.entry
        kind = entry_kind(entry)
        text = Text()
        text.append(f"{KIND_NAMES.get(kind, kind)}", style=KIND_STYLE.get(kind, "bold"))
        text.append(f"  {node.id}  {node.timestamp or ''}\n", style="dim")
        if node.label:
            text.append(f"label: {node.label}\n", style="bold yellow")
        if self.session is not None and node.id == self._leaf(self.session):
            text.append("the session's leaf\n", style="yellow")
        projected = self.edits.get(node.id)
        if projected is not None and projected.edit is not None:
            edit_id = projected.edit.get("id")
            if projected.omitted:
                text.append(f"omitted from the model's context (context edit {edit_id})\n",
                            style="bold magenta")
            else:
                from ..messages import message_text

                seen = " ".join(message_text(m, separator=" ") for m in projected.typed_messages())
                text.append(f"edited for the model (context edit {edit_id}); it sees: ",
                            style="bold magenta")
                text.append(one_line(seen, 300) + "\n")
        text.append("\n")
        text.append(_full_text(entry))
        if self.editor_text is not None:
            text.append("\n\ntext of the chosen message (to edit and send again):\n",
                        style="bold")
            text.append(self.editor_text)
        return text

    @work(thread=True, exclusive=True, group="preview")
    def _context_size(self, entry_id: str) -> None:
        from ..compaction import context_tokens, estimate_context_tokens, estimate_tokens

        session = self.session
        if session is None:
            return
        try:
            context = session.build_context(entry_id).to_builtins()["messages"]
            if estimate_context_tokens(context).usage_tokens:
                size = f"~{context_tokens(session, entry_id):,} tokens"
            else:  # no reply on the path reported its usage: estimate, and say so
                estimate = sum(estimate_tokens(m) for m in context)
                size = f"~{estimate:,} tokens estimated from the text (no usage recorded)"
        except Exception as exc:  # a damaged entry: say so in the pane, never crash
            self.call_from_thread(self._show_context, entry_id, f"context: {exc}")
            return
        if get_current_worker().is_cancelled:
            return
        messages = len(context)
        self.call_from_thread(
            self._show_context, entry_id,
            f"context from here: {messages} message{'s' if messages != 1 else ''}, {size}")

    def _show_context(self, entry_id: str, text: str) -> None:
        selected = self.tree_view.selected
        if selected is not None and selected.id == entry_id:
            self.query_one("#context", Static).update(Text(text))

    # -- actions

    def action_cycle_filter(self, step: int) -> None:
        if not self.loaded or isinstance(self.screen, ModalScreen):
            return
        self.mode = next_mode(self.mode, step)
        self._status()
        self.rebuild()

    @on(TreeView.FoldChanged)
    def _fold_changed(self, event: TreeView.FoldChanged) -> None:
        if event.collapse:
            self.collapsed.add(event.entry_id)
        else:
            self.collapsed.discard(event.entry_id)
        self.rebuild()

    def action_search(self) -> None:
        field = self.query_one("#search", Input)
        field.add_class("open")
        field.focus()

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.search_text = event.value.strip()
        if self._search_timer is not None:
            self._search_timer.stop()
        # typing is debounced: each letter typed would otherwise start a search of its own
        self.searching = True
        self._search_timer = self.set_timer(0.25, self._search_due)

    def _search_due(self) -> None:
        self.searching = False
        self._search_timer = None
        self.rebuild()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the search (shown in the status line) and closes the box; ``/``
        reopens it with the text, Esc clears it."""
        event.input.remove_class("open")
        self.tree_view.focus()

    def action_escape(self) -> None:
        field = self.query_one("#search", Input)
        if field.has_class("open") or field.value:
            field.remove_class("open")
            if field.value:
                field.value = ""  # Changed clears the search
            self.tree_view.focus()

    def action_global_search(self, query: str = "") -> None:
        """Search every session of the store; a hit picked opens its session at its entry."""
        if isinstance(self.screen, ModalScreen) or self.busy or self.leave_on_navigate:
            return  # (chat's /tree browses the chat's own session only)

        def picked(hit: SearchHit | None) -> None:
            if hit is not None:
                self.open_at(hit.session, hit.entry_id)
            elif self.path is None:
                self.exit()  # started in the search and nothing was picked

        self.push_screen(GlobalSearch(self.store, query), picked)

    def open_at(self, session: str, entry_id: str) -> None:
        """Browse another session (a file or ``URL#ID``), its entry ``entry_id`` selected."""
        if self.session is not None:
            self.session.close()
        self.session = None
        self.loaded = False
        self.path = session
        self._opener = None
        self._roots = []
        self._texts = {}
        self.collapsed = set()
        self.editor_text = None
        self.focus_entry = entry_id
        field = self.query_one("#search", Input)
        field.value = ""
        self.search_text = ""
        self.query_one("#status", Static).update("loading…")
        self._load()

    def action_to_leaf(self) -> None:
        leaf = self._leaf(self.session) if self.session is not None else None
        if leaf is not None:
            self.tree_view.select_id(leaf)

    def action_edit_label(self) -> None:
        node = self.tree_view.selected
        if node is None or self.session is None or self.busy:
            return

        def done(value: str | None) -> None:
            if value is None or self.session is None:
                return
            from ..errors import SessionTreeError

            try:
                self.session.set_label(node.id, value or None)
            except SessionTreeError as exc:
                self.notify(str(exc), severity="error")
                return
            self.notify(f"label of {node.id} {'set to ' + repr(value) if value else 'cleared'}")
            self.rebuild(reload_tree=True)

        self.push_screen(EditLabel(node.id, node.label), done)

    def action_navigate(self) -> None:
        node = self.tree_view.selected
        session = self.session
        if node is None or session is None or self.busy:
            return
        if node.id == self._leaf(session):
            self.notify(f"{node.id} is already the leaf")
            return
        kind = entry_kind(node.entry)
        what = f"{KIND_NAMES.get(kind, kind)}: {entry_summary(node.entry, 40)}"

        def answered(answer: bool | None) -> None:
            if answer is None:
                return
            self.busy = True
            self._status("summarizing…" if answer else "moving…")
            self._navigate(node.id, answer)

        self.push_screen(ConfirmNavigate(node.id, what, self.summarizer_name), answered)

    @work(thread=True, exclusive=True, group="write")
    def _navigate(self, target: str, summarize: bool) -> None:
        from ..errors import SessionTreeError

        session = self.session
        assert session is not None
        try:
            result = session.navigate_tree(target, summarize=summarize,
                                           summarizer=self.summarizer)
        except SessionTreeError as exc:
            self.call_from_thread(self._navigate_failed, str(exc))
            return
        self.call_from_thread(self._navigated, result)

    def _navigate_failed(self, message: str) -> None:
        self.busy = False
        self.notify(message, severity="error", timeout=8)
        self._status()

    def _navigated(self, result: NavigationResult) -> None:
        self.busy = False
        self.editor_text = result.editor_text
        parts = [f"leaf: {result.leaf_id or '(before the first entry)'}"]
        if result.summary_entry is not None:
            parts.append(f"summary {result.summary_entry.id} written")
        elif result.marker_id is not None:
            parts.append("checkout marker written")
        self.notify(" · ".join(parts))
        if self.leave_on_navigate:
            self.exit()
            return
        self.rebuild(reload_tree=True)
        self.call_after_refresh(self.action_to_leaf)


class _Cancelled(Exception):
    """A newer rebuild replaced this one."""


class _Facts(NamedTuple):
    """What a (re)load computes beside the rows: the totals and the leaf's edited entries."""

    usage: UsageTotals | None
    edits: dict[str, ProjectedEntry]


def _facts(session: Session) -> _Facts:
    edits = {p.entry_id: p for p in session.build_projection().entries if p.edit is not None}
    return _Facts(session_usage(session), edits)


def _full_text(entry: Any) -> str:
    """The readable text of an entry for the preview (cut at 20,000 characters)."""
    from ..entries import BranchSummary, Compaction, MessageEntry
    from ..describe import system_change
    from ..messages import AssistantMessage, SystemMessage, ThinkingContent, ToolCall, message_text
    from ..renderers import render_entry

    text: str
    if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
        parts: list[str] = []
        for block in entry.message.content:
            if isinstance(block, ThinkingContent):
                parts.append(f"[thinking] {one_line(block.thinking, 200)}")
            elif isinstance(block, ToolCall):
                import msgspec

                parts.append(f"→ {block.name} {msgspec.json.encode(block.arguments).decode()}")
            else:
                parts.append(block.text)
        text = "\n\n".join(parts)
    elif isinstance(entry, MessageEntry) and isinstance(entry.message, SystemMessage):
        text = system_change(entry.message).replace("; ", "\n")
    elif isinstance(entry, MessageEntry):
        text = message_text(entry.message)
    elif (rendered := render_entry(entry)) is not None:  # an extension's renderer, as text
        text = rendered.text
    elif isinstance(entry, (Compaction, BranchSummary)):
        text = entry.summary
    else:
        text = entry_summary(entry, 2000)
    return text if len(text) <= 20_000 else text[:20_000] + "\n…"
