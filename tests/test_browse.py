"""``sessiontree browse``, driven by Textual's pilot on real files: navigate, filter, search,
label, go to an entry (with and without a summary) and read the file back; an SVG snapshot."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from click.testing import CliRunner

from sessiontree import Session, UserMessage
from sessiontree.cli.tui import KEYS, BrowseApp, ConfirmNavigate, EditLabel

from .viewhelpers import BRANCHED, generate, nested, user, write_branched

SNAPSHOTS = Path(__file__).parent / "snapshots"
SIZE = (110, 30)

Script = Callable[[BrowseApp, object], Awaitable[None]]


def drive(path: Path, script: Script, *, size: tuple[int, int] = SIZE, **kwargs: object) -> None:
    async def main() -> None:
        app = BrowseApp(str(path), **kwargs)  # type: ignore[arg-type]
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            await script(app, pilot)

    asyncio.run(main())


async def settle(app: BrowseApp, pilot: object) -> None:
    """Wait until loading, rebuilds and the preview are done."""
    for _ in range(400):
        await pilot.pause()  # type: ignore[attr-defined]
        await app.workers.wait_for_complete()
        if app.loaded and not app.searching and not app.workers._workers:  # noqa: SLF001
            await pilot.pause()  # type: ignore[attr-defined]
            return
    raise AssertionError("the browser never settled")


async def until(pilot: object, condition: Callable[[], bool], what: str) -> None:
    """Let the app run until ``condition()`` holds (a loaded machine may need many turns)."""
    for _ in range(400):
        if condition():
            return
        await pilot.pause()  # type: ignore[attr-defined]
    raise AssertionError(f"never happened: {what}")


def selected(app: BrowseApp) -> str | None:
    node = app.tree_view.selected
    return node.id if node is not None else None


def shown(app: BrowseApp) -> list[str]:
    return [r.node.id for r in app.tree_view.rows if r.node is not None]


def test_opens_on_the_leaf_with_the_active_branch_first(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        assert selected(app) == "b0000005"
        rows = shown(app)
        assert rows.index("u0000003") < rows.index("r0000001")
        assert "l0000001" not in rows  # the default filter
        preview = str(app.query_one("#preview-text").render())
        assert "Tests added; all pass." in preview and "the session's leaf" in preview
        context = str(app.query_one("#context").render())
        assert re.search(r"context from here: \d+ messages, ~[\d,]+ tokens", context)

    drive(path, script)


def test_moving_updates_the_preview(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        await press("home")
        await settle(app, pilot)
        assert selected(app) == "u0000001"
        assert "Write a CLI that resizes images" in str(app.query_one("#preview-text").render())
        assert "context from here: 1 message," in str(app.query_one("#context").render())
        await press("down", "down")
        await settle(app, pilot)
        assert selected(app) == "u0000003"
        assert "label: python-rewrite" in str(app.query_one("#preview-text").render())
        await press("end")
        assert selected(app) == shown(app)[-1]
        await press("l")
        assert selected(app) == "b0000005"

    drive(path, script)


def test_filters_cycle_with_ctrl_o_both_ways(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        seen = []
        for _ in range(5):
            await press("ctrl+o")
            await settle(app, pilot)
            seen.append((app.mode, len(shown(app))))
        assert [mode for mode, _ in seen] == ["no-tools", "user-only", "labeled-only", "all",
                                              "default"]
        counts = dict(seen)
        assert counts["all"] == 13 and counts["default"] == 10 and counts["no-tools"] == 9
        assert counts["user-only"] == 5  # four user messages and the leaf, always shown
        await press("ctrl+shift+o")
        await settle(app, pilot)
        assert app.mode == "all"
        await press("F", "F")
        await settle(app, pilot)
        assert app.mode == "user-only"
        assert "filter user-only" in str(app.query_one("#status").render())

    drive(path, script)


def test_search_filters_rows_and_escape_clears_it(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        await press("slash", *"pillow", "enter")
        await settle(app, pilot)
        assert app.search_text == "pillow"
        assert shown(app) == ["b0000004", "b0000005"]  # the match and the leaf
        assert app.focused is app.tree_view
        await press("slash", "escape")
        await settle(app, pilot)
        assert app.search_text == "" and len(shown(app)) == 10

    drive(path, script)


def test_shift_l_edits_the_label_in_the_file(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        await press("home")
        await press("L")
        await until(pilot, lambda: isinstance(app.screen, EditLabel), "the label dialog")
        await press(*"start here", "enter")
        await settle(app, pilot)
        assert "[start here]" in str(app.tree_view._line(app.tree_view.cursor))  # noqa: SLF001
        await press("down", "down", "L")  # u0000003: clear its label
        await until(pilot, lambda: isinstance(app.screen, EditLabel), "the label dialog")
        await press("ctrl+a", "ctrl+k", "enter")
        await settle(app, pilot)
        await press("L", *"ignored", "escape")  # cancelled: nothing written
        await settle(app, pilot)

    drive(path, script)
    with Session.open(path) as session:
        assert session.label("u0000001") == "start here"
        assert session.label("u0000003") is None
        assert session.labels() == {"u0000001": ("start here", session.labels()["u0000001"][1])}


def test_enter_goes_to_the_entry_without_a_summary(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        assert app.tree_view.select_id("b0000003")
        await press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmNavigate), "the summary question")
        await press("n")
        await until(pilot, lambda: app.session is not None and app.session.leaf_id != "b0000005",
                    "the move")
        await settle(app, pilot)
        assert app.session is not None and selected(app) == app.session.leaf_id

    drive(path, script)
    with Session.open(path) as session:  # the move survives a reload (a checkout marker)
        assert session.path_ids()[-2:] == ["b0000003", session.leaf_id]
        assert session.entry(session.leaf_id).type == "custom"  # type: ignore[arg-type]
        assert session.build_context().messages[-1].role == "assistant"


def test_enter_on_a_user_message_with_a_summary_and_escape_cancels(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    before = path.read_bytes()

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        app.tree_view.select_id("u0000002")
        await press("enter", "escape")
        await settle(app, pilot)
        assert path.read_bytes() == before  # cancelled: nothing written
        await press("enter", "y")
        await settle(app, pilot)
        assert app.editor_text == "Add a --width flag"
        assert "text of the chosen message" in str(app.query_one("#preview-text").render())

    drive(path, script)
    with Session.open(path) as session:
        leaf = session.entry(session.leaf_id)  # type: ignore[arg-type]
        assert leaf.type == "branch_summary"
        # a user message target moves to its parent; the summary is written there
        assert session.path_ids()[-2] == "b0000002"
        assert "Tests added" in leaf.summary or leaf.summary  # type: ignore[union-attr]


def test_enter_on_the_leaf_does_nothing(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    before = path.read_bytes()

    async def script(app: BrowseApp, pilot: object) -> None:
        await pilot.press("enter")  # type: ignore[attr-defined]
        await settle(app, pilot)
        assert app.screen is app.screen_stack[0]

    drive(path, script)
    assert path.read_bytes() == before


def test_a_large_session_loads_in_the_background(tmp_path: Path) -> None:
    path = generate(tmp_path / "g.jsonl", 5000, branch_every=150)

    async def script(app: BrowseApp, pilot: object) -> None:
        assert app.session is not None
        assert len(app.tree_view.rows) > 3000
        assert selected(app) == app.session.leaf_id
        await pilot.press("pagedown", "pageup", "home", "end")  # type: ignore[attr-defined]
        await settle(app, pilot)

    async def main() -> None:
        app = BrowseApp(str(path))
        async with app.run_test(size=SIZE) as pilot:
            # the interface is up before the session is loaded (loading runs in a thread)
            assert "loading" in str(app.query_one("#status").render()) or app.loaded
            await settle(app, pilot)
            await script(app, pilot)

    asyncio.run(main())


def test_svg_snapshot(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    svg: list[str] = []

    async def script(app: BrowseApp, pilot: object) -> None:
        app.tree_view.select_id("u0000003")
        await settle(app, pilot)
        svg.append(app.export_screenshot(title="sessiontree browse"))

    drive(path, script)
    golden = SNAPSHOTS / "browse.svg"
    if os.environ.get("SESSIONTREE_UPDATE_SNAPSHOTS") == "1" or not golden.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        golden.write_text(svg[0])
        if os.environ.get("SESSIONTREE_UPDATE_SNAPSHOTS") != "1":
            raise AssertionError(f"{golden} did not exist; written now: check it and commit it")
    (tmp_path / "browse.svg").write_text(svg[0])
    assert svg[0] == golden.read_text(), (
        f"the browser looks different from {golden} (see {tmp_path / 'browse.svg'}); if the "
        "change is wanted, rerun with SESSIONTREE_UPDATE_SNAPSHOTS=1")


def test_keys_are_in_the_readme() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for key, _ in KEYS:
        assert f"| {key} |" in readme


def test_browse_command_checks_its_file(tmp_path: Path) -> None:
    from sessiontree.cli import cli

    outcome = CliRunner().invoke(cli, ["browse", str(tmp_path / "missing.jsonl")])
    assert outcome.exit_code == 2 and "does not exist" in outcome.stderr


# -- the selection, the dialog, the search box, folding, deep branches ---------------------------


def _luminance(color: object) -> float:
    """WCAG 2 relative luminance of a rich colour (resolved to its RGB triplet)."""
    triplet = color.get_truecolor()  # type: ignore[attr-defined]

    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(triplet.red) + 0.7152 * channel(triplet.green) + \
        0.0722 * channel(triplet.blue)


def contrast(foreground: object, background: object) -> float:
    lighter, darker = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_the_selected_row_meets_wcag_aa_and_stands_out(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    def check_row(app: BrowseApp) -> tuple[object, ...]:
        view = app.tree_view
        strip = view.render_line(view.cursor - view.scroll_offset.y)
        backgrounds = set()
        for segment in strip:
            style = segment.style
            assert style is not None and style.color is not None and style.bgcolor is not None
            backgrounds.add(style.bgcolor)
            if segment.text.strip():
                assert not style.dim, segment.text
                assert contrast(style.color, style.bgcolor) >= 4.5, segment.text
        (background,) = backgrounds  # one band across the whole row
        other = view.render_line(view.cursor - view.scroll_offset.y + 1)
        assert all(s.style is None or s.style.bgcolor != background for s in other)
        return (background,)

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        for at in ("u0000001", "r0000001", "b0000003"):  # a user row, a dim tool row, inactive
            assert app.tree_view.select_id(at)
            await settle(app, pilot)
            focused = check_row(app)
        await press("slash")  # the search box has the focus: still readable, another band
        await until(pilot, lambda: check_row(app) != focused, "the search box's band")

    drive(path, script)


def test_the_confirm_dialog_wraps_its_text(tmp_path: Path) -> None:
    long = "Please rewrite the whole resize tool so that it keeps EXIF orientation intact"
    entries = [*BRANCHED[:-1], user(13, "u0000009", "u0000004", long), BRANCHED[-1]]
    path = write_branched(tmp_path / "s.jsonl", entries)

    async def script(app: BrowseApp, pilot: object) -> None:
        assert app.tree_view.select_id("u0000009")
        await pilot.press("enter")  # type: ignore[attr-defined]
        await until(pilot, lambda: isinstance(app.screen, ConfirmNavigate), "the dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmNavigate)
        box = dialog.query_one("Vertical")
        assert box.outer_size.width <= 50
        for label in dialog.query("Label"):
            lines = label.render_lines(label.region.reset_offset)  # type: ignore[attr-defined]
            shown = " ".join("".join(s.text for s in line).strip() for line in lines)
            assert label.region.right <= box.region.right
            expected = " ".join(str(label.render()).split())
            assert " ".join(shown.split()) == expected  # every word is on screen
        first = dialog.query("Label").first()
        assert first.region.height >= 2  # the question wrapped instead of being cut
        await pilot.press("escape")  # type: ignore[attr-defined]

    drive(path, script, size=(50, 24))


def test_enter_closes_the_search_box_and_slash_reopens_it(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        field = app.query_one("#search")
        await press("slash", *"pillow", "enter")
        await settle(app, pilot)
        assert not field.display and app.focused is app.tree_view
        assert shown(app) == ["b0000004", "b0000005"]
        assert "search 'pillow'" in str(app.query_one("#status").render())
        await press("slash")
        assert field.display and app.focused is field
        assert field.value == "pillow"  # type: ignore[attr-defined]
        await press("enter", "escape")  # closed, then Esc clears the search kept
        await settle(app, pilot)
        assert not field.display and app.search_text == "" and len(shown(app)) == 10

    drive(path, script)


def test_fold_keys_collapse_and_expand_a_branch_as_pi_does(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        view = app.tree_view
        assert view.select_id("b0000004")  # inside the Python branch
        await press("ctrl+left")  # not a branch start: up to the start of its branch
        assert selected(app) == "u0000003"
        mark = str(view._line(view.cursor))  # noqa: SLF001
        assert "├⊟ " in mark  # foldable, as pi marks it
        await press("ctrl+left")  # collapse it
        await settle(app, pilot)
        assert selected(app) == "u0000003"
        assert "b0000004" not in shown(app) and "b0000005" not in shown(app)  # as in pi
        line = str(view._line(view.cursor))  # noqa: SLF001
        assert "├⊞ " in line and "(+" in line and "hidden)" in line
        await press("ctrl+left")  # already collapsed: up to the enclosing branch's start
        assert selected(app) == "u0000001"
        assert view.select_id("u0000003")
        await press("ctrl+right")  # expand
        await settle(app, pilot)
        assert "b0000004" in shown(app)
        assert view.select_id("u0000001")
        await press("ctrl+right")  # not collapsed: down to the first branch below
        assert selected(app) == "u0000003"
        await press("ctrl+right")  # no branch below: to the end of the run
        assert selected(app) == "b0000005"
        # collapsing the other branch hides its entries until it is expanded again
        assert view.select_id("u0000002")
        await press("ctrl+left", "ctrl+left")  # up to its start (the tool result), collapse
        await settle(app, pilot)
        assert selected(app) == "r0000001"
        assert "b0000003" not in shown(app) and "u0000002" not in shown(app)
        assert "b0000005" in shown(app)

    drive(path, script)


def test_deep_branches_keep_the_entry_text_readable(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl", nested(12))

    async def script(app: BrowseApp, pilot: object) -> None:
        view = app.tree_view
        assert max(r.level for r in view.rows) == 12
        await pilot.press("home")  # type: ignore[attr-defined]
        seen = 0
        for number, row in enumerate(view.rows):
            if row.node is None or not view.select_id(row.node.id):
                continue
            await pilot.pause()  # type: ignore[attr-defined]
            line = "".join(s.text for s in view.render_line(view.cursor - view.scroll_offset.y))
            words = row.node.entry.message.content[0].text  # type: ignore[union-attr]
            start = line.index(words[:8])
            # the guides take at most about a quarter of the pane, the text keeps the rest
            assert start <= view.size.width // 4 + 3 + 22, line
            assert len(line.rstrip()) - start >= min(len(words), 20), line
            seen += 1
        assert seen == len(view.rows)
        assert view.size.width == 60

    drive(path, script, size=(100, 40))


# -- the search of every session (issue 18 point 4) ----------------------------------------------


def _search_root(tmp_path: Path) -> tuple[Path, Path]:
    from sessiontree.stores.jsonl import default_session_dir
    from sessiontree.testing.generate import generate_folder

    from .test_search import PROJECT, handmade

    root = tmp_path / "sessions"
    path = handmade(root / default_session_dir(PROJECT, "").name)
    generate_folder(root / "--srv-app--", 3, seed=4, min_entries=30, max_entries=80,
                    cwds=("/srv/app",))
    return root, path


def drive_store(store: Path, script: Script, **kwargs: object) -> None:
    async def main() -> None:
        app = BrowseApp(None, store=str(store), **kwargs)  # type: ignore[arg-type]
        async with app.run_test(size=SIZE) as pilot:
            await script(app, pilot)

    asyncio.run(main())


def test_browse_search_opens_the_session_at_the_hit(tmp_path: Path) -> None:
    from sessiontree.cli.tui import GlobalSearch

    root, path = _search_root(tmp_path)

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        await until(pilot, lambda: isinstance(app.screen, GlobalSearch)
                    and app.screen.searched is not None, "the hits")
        screen = app.screen
        assert isinstance(screen, GlobalSearch)
        assert [(hit.entry_id, hit.on_current_branch) for hit in screen.hits] == \
            [("e003", True), ("e001", False)]
        await press("down", "enter")  # the abandoned answer
        await until(pilot, lambda: app.loaded, "the session")
        await settle(app, pilot)
        assert app.session is not None and app.session.file == str(path)
        assert selected(app) == "e001" and app.session.leaf_id == "e009"
        await press("enter")  # go on from the hit: the leaf moves there
        await until(pilot, lambda: isinstance(app.screen, ConfirmNavigate), "the question")
        await press("n")
        await until(pilot, lambda: app.session is not None and not app.busy
                    and app.session.path_ids()[:2] == ["e000", "e001"], "the move")

    drive_store(root, script, search='"heartbeat interval"')
    with Session.open(path) as session:  # written to the file: the next message goes there
        assert session.path_ids()[:2] == ["e000", "e001"] and "e002" not in session.path_ids()


def test_shift_s_searches_every_session_from_a_session(tmp_path: Path) -> None:
    from sessiontree.cli.tui import GlobalSearch

    root, path = _search_root(tmp_path)
    other = sorted((root / "--srv-app--").glob("*.jsonl"))[0]
    with Session.open(other) as session:
        session.append_message(UserMessage.of("where is the pelican config"))
        wanted = session.leaf_id

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        await press("S")
        await until(pilot, lambda: isinstance(app.screen, GlobalSearch), "the search")
        screen = app.screen
        assert isinstance(screen, GlobalSearch) and screen.store == str(root)
        await press(*"pelican", "enter")
        await until(pilot, lambda: screen.searched == "pelican", "the hits")
        assert [hit.entry_id for hit in screen.hits] == [wanted]
        await press("enter")
        await until(pilot, lambda: app.loaded and app.session is not None
                    and app.session.file == str(other), "the other session")
        await settle(app, pilot)
        assert selected(app) == wanted
        await press("S")  # Esc closes the search and stays where it was
        await until(pilot, lambda: isinstance(app.screen, GlobalSearch), "the search")
        await press("escape")
        await until(pilot, lambda: not isinstance(app.screen, GlobalSearch), "closed")
        assert app.session is not None and app.session.file == str(other)

    drive(path, script)


def test_escape_from_the_starting_search_quits(tmp_path: Path) -> None:
    from sessiontree.cli.tui import GlobalSearch

    root, _ = _search_root(tmp_path)
    ended: list[bool] = []

    async def script(app: BrowseApp, pilot: object) -> None:
        await until(pilot, lambda: isinstance(app.screen, GlobalSearch), "the search")
        await pilot.press("escape")  # type: ignore[attr-defined]
        await until(pilot, lambda: not app.is_running, "the exit")
        ended.append(app.session is None)

    drive_store(root, script)
    assert ended == [True]


def test_browsing_builds_the_folders_search_index_at_startup(tmp_path: Path) -> None:
    """The store's search index (for shift+S) is built in a worker at startup, so the first
    search reads it instead of scanning every file; not for chat's /tree, which does not
    search. A build stopped before its first second (quitting cancels the worker) indexes
    nothing."""
    import sqlite3
    from contextlib import closing

    from sessiontree.stores._jsonl_search import index_path
    from sessiontree.stores.jsonl import JsonlStore

    root, path = _search_root(tmp_path)
    index = Path(index_path(root))
    sessions = len(list(root.rglob("*.jsonl")))

    def indexed() -> tuple[int, int]:
        """The session files the index holds, and whether it holds the folder's digest
        (kept only when every file is indexed)."""
        with closing(sqlite3.connect(index)) as conn:
            files = conn.execute("SELECT count(*) FROM files WHERE session_id IS NOT NULL")
            return int(files.fetchone()[0]), int(conn.execute(
                "SELECT count(*) FROM state").fetchone()[0])

    async def loaded(app: BrowseApp, pilot: object) -> None:  # (settled: every worker done)
        assert app.loaded and app.session is not None

    drive(path, loaded, leave_on_navigate=True)
    assert not index.exists()
    JsonlStore(root).build_search_index(stop=lambda: True)
    assert indexed() == (0, 0)
    drive(path, loaded)
    assert sessions == 4 and indexed() == (sessions, 1)


def test_a_failing_background_build_only_says_so(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The background build is optional: whatever it raises is said in a notice, and the
    browser goes on. (The build itself survives what a folder gives it: a folder it cannot
    write gets an index in memory, a damaged index is built again, a non-UTF-8 name is
    indexed; so the failure is put in its place: an index damaged for good.)"""
    import sqlite3

    from sessiontree.stores.jsonl import JsonlStore

    def damaged(self: JsonlStore, stop: object = None) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    _, path = _search_root(tmp_path)
    monkeypatch.setattr(JsonlStore, "build_search_index", damaged)

    async def script(app: BrowseApp, pilot: object) -> None:
        assert app.is_running and app.loaded and app.session is not None
        (notice,) = [n for n in app._notifications if "search index" in n.message]  # noqa: SLF001
        assert notice.severity == "warning" and "searches scan the files" in notice.message
        await pilot.press("j")  # type: ignore[attr-defined]
        await settle(app, pilot)
        assert app.is_running

    drive(path, script)


def test_browse_command_takes_a_store_or_a_search(tmp_path: Path) -> None:
    from sessiontree.cli import cli

    outcome = CliRunner().invoke(cli, ["browse"])
    assert outcome.exit_code == 2 and "--search QUERY" in outcome.stderr


def test_the_preview_says_when_no_usage_was_recorded(tmp_path: Path) -> None:
    """Issue 20 point 9: no reply recorded its usage: an estimate, said to be one (not ~0)."""
    entries = [dict(e) for e in BRANCHED]
    for entry in entries:
        message = entry.get("message")
        if isinstance(message, dict) and "usage" in message:
            message["usage"] = {k: 0 for k in message["usage"] if k != "cost"} | {
                "cost": {k: 0 for k in message["usage"]["cost"]}}
    path = write_branched(tmp_path / "s.jsonl", entries)

    async def script(app: BrowseApp, pilot: object) -> None:
        context = str(app.query_one("#context").render())
        found = re.search(r"~([\d,]+) tokens estimated from the text \(no usage recorded\)",
                          context)
        assert found and int(found.group(1).replace(",", "")) > 0, context

    drive(path, script)


def test_a_search_hides_the_selected_row_when_it_does_not_match(tmp_path: Path) -> None:
    """Issue 20 point 9: only matches (and the leaf) stay while searching."""
    path = write_branched(tmp_path / "s.jsonl")

    async def script(app: BrowseApp, pilot: object) -> None:
        press = pilot.press  # type: ignore[attr-defined]
        await press("home")
        await settle(app, pilot)
        assert selected(app) == "u0000001"  # "Write a CLI that resizes images"
        await press("slash", *"pillow", "enter")
        await settle(app, pilot)
        assert shown(app) == ["b0000004", "b0000005"] and selected(app) in shown(app)

    drive(path, script)


def test_the_operation_trees_entries_are_hidden_and_never_the_leaf(tmp_path: Path) -> None:
    """Issue 20 point 1: in the default filter the browser opens on the reply, not on the
    bookkeeping entry after it, which shows in the filter 'all' only."""
    from .viewhelpers import entry

    entries = [*BRANCHED, entry(13, "o0000001", "b0000005", "custom",
                                customType="sessiontree.op.batch", data={"v": 1, "events": []})]
    path = write_branched(tmp_path / "s.jsonl", entries)

    async def script(app: BrowseApp, pilot: object) -> None:
        assert selected(app) == "b0000005" and "o0000001" not in shown(app)
        assert "leaf b0000005" in str(app.query_one("#status").render())
        await pilot.press("ctrl+shift+o")  # type: ignore[attr-defined]
        await settle(app, pilot)
        assert app.mode == "all" and "o0000001" in shown(app)

    drive(path, script)
