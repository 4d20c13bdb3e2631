"""pi 1.5.2's entries in the views: ``usage`` entries hidden from the tree's filters (shown in
``all`` only), ``context_edit`` entries among the settings the default filter hides, and the
Markdown export, the HTML page (headless Chromium) and browse (Textual pilot) showing system
prompt changes, usage, and which entries the model sees edited or not at all."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sessiontree import Session, SystemMessage, ToolDeclaration, UserMessage
from sessiontree.cli.tui import BrowseApp
from sessiontree.export.html import export_html
from sessiontree.export.markdown import export_markdown
from sessiontree.redact import context_edit, redact
from sessiontree.views import filter_tree, unfiltered

from .navhelpers import reply
from .test_browse import settle, shown
from .test_export_html import Page, browser  # noqa: F401 - the fixture


def pi15_session(folder: Path) -> tuple[Path, dict[str, str]]:
    """A system prompt, a patch of it, a usage entry, a redacted and an omitted message."""
    with Session.create(folder, cwd="/w") as session:
        ids = {"system": session.append_message(SystemMessage(
            content="You are terse.", sections={"style": "Answer briefly.", "tools": "Use read."},
            tools_added=[ToolDeclaration(name="read", description="Read a file")]))}
        ids["ask"] = session.append_message(UserMessage.of("my token is sk-12345"))
        ids["answer"] = session.append_message(reply("Noted."))
        ids["warm"] = session.append_entry({
            "type": "usage", "kind": "cache_warm", "provider": "p", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 5000, "cacheWrite": 0, "totalTokens": 5000,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0.01, "cacheWrite": 0, "total": 0.01}}})
        ids["patch"] = session.append_message(SystemMessage(
            sections={"tools": None}, tools_removed=[{"name": "read"}]))  # type: ignore[list-item]
        ids["redact"] = redact(session, ids["ask"], "my token is [redacted]")
        ids["omit"] = context_edit(session, ids["answer"], None)
        ids["next"] = session.append_message(UserMessage.of("go on"))
        assert session.file is not None
        return Path(session.file), ids


def test_usage_and_edits_in_the_tree_filters(tmp_path: Path) -> None:
    path, ids = pi15_session(tmp_path)
    with Session.open(path) as session:
        roots = session.tree()
        every = [node.id for node in _walk(unfiltered(roots))]

        def kept(mode: Any) -> list[str]:
            return [n.node.id for n in _walk(filter_tree(roots, mode))]

        assert ids["warm"] in every and ids["redact"] in every
        for mode in ("default", "no-tools", "user-only", "labeled-only"):
            assert ids["warm"] not in kept(mode)  # pi hides usage entries in its tree
        assert ids["redact"] not in kept("default") and ids["omit"] not in kept("no-tools")
        assert {ids["warm"], ids["redact"], ids["omit"]} <= set(kept("all"))
        assert ids["system"] in kept("default") and ids["patch"] in kept("default")


def _walk(nodes: Any) -> Iterator[Any]:
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def test_markdown_shows_system_prompts_usage_and_edits(tmp_path: Path) -> None:
    path, ids = pi15_session(tmp_path)
    with Session.open(path) as session:
        text = export_markdown(session)
    assert "### System prompt" in text and "**Section `style`:**" in text
    assert "**Tools added:**\n\n- `read`: Read a file" in text
    assert "**Section `tools` removed**" in text and "**Tools removed:**\n\n- `read`" in text
    assert f"*Usage (cache_warm): p/m, 5,000 tokens, $0.0100* (`{ids['warm']}`)" in text
    assert f"*Context edit: the model sees `{ids['ask']}` as* (`{ids['redact']}`)" in text
    assert f"*Context edit: `{ids['answer']}` left out of the model's context* (`{ids['omit']}`)" in text
    # the entries themselves, marked as the leaf's context sees them
    assert f"*The model sees instead (context edit `{ids['redact']}`):*\n\n> my token is [redacted]" \
        in text
    assert f"*Left out of the model's context (context edit `{ids['omit']}`).*" in text


def test_browse_hides_usage_and_describes_the_new_entries(tmp_path: Path) -> None:
    """(Before the page tests: Playwright's loop, alive while its browser is, would refuse
    Textual's.)"""
    path, ids = pi15_session(tmp_path)

    async def main() -> tuple[list[str], list[str], list[str]]:
        app = BrowseApp(str(path))
        async with app.run_test(size=(150, 40)) as pilot:
            await settle(app, pilot)
            rows = shown(app)
            lines = {row.node.id: app.tree_view._line(n).plain  # noqa: SLF001 - the drawn row
                     for n, row in enumerate(app.tree_view.rows) if row.node is not None}
            previews = []
            for entry_id in (ids["patch"], ids["ask"], ids["answer"]):
                app.tree_view.select_id(entry_id)
                await settle(app, pilot)
                previews.append(str(app.query_one("#preview-text").render()))
            return rows, [lines[ids["ask"]], lines[ids["answer"]], lines[ids["next"]]], previews

    rows, lines, previews = asyncio.run(main())
    assert ids["warm"] not in rows and ids["redact"] not in rows and ids["patch"] in rows
    assert "- sections tools\n- tools read" in previews[0]
    assert "\u270e edited" in lines[0] and "\u2298 omitted" in lines[1] and "edited" not in lines[2]
    assert f"edited for the model (context edit {ids['redact']}); it sees: my token is [redacted]" \
        in previews[1]
    assert f"omitted from the model's context (context edit {ids['omit']})" in previews[2]


def test_the_html_page_marks_edits_and_shows_system_prompts(browser: Any, tmp_path: Path) -> None:
    path, ids = pi15_session(tmp_path)
    with Session.open(path) as session:
        (tmp_path / "s.html").write_bytes(export_html(session))
    page = Page(browser, tmp_path / "s.html")
    try:
        assert page.errors == []
        assert ids["warm"] not in page.rows() and ids["redact"] not in page.rows()  # default filter
        asked = f'.card[data-id="{ids["ask"]}"]'
        assert "edited" in str(page.page.get_attribute(asked, "class"))
        assert f"edited for the model (edit {ids['redact']})" in str(page.page.text_content(asked))
        assert "my token is [redacted]" in str(page.page.text_content(f"{asked} .model-sees"))
        answered = f'.card[data-id="{ids["answer"]}"]'
        assert "omitted" in str(page.page.get_attribute(answered, "class"))
        system = str(page.page.text_content(f'.card[data-id="{ids["system"]}"]'))
        assert "System prompt" in system and "Tools added: read" in system
        patch = str(page.page.text_content(f'.card[data-id="{ids["patch"]}"]'))
        assert "Section tools removed" in patch and "Tools removed: read" in patch
        page.click_row(ids["answer"])  # a path without the edits: nothing marked
        assert "edited" not in str(page.page.get_attribute(asked, "class"))
        page.page.select_option("#filter", "all")
        assert ids["warm"] in page.rows()
    finally:
        page.close()


def test_the_new_entries_have_one_line_summaries(tmp_path: Path) -> None:
    from sessiontree.describe import entry_summary

    path, ids = pi15_session(tmp_path)
    with Session.open(path) as session:
        assert entry_summary(session.entry(ids["system"])) == \
            "prompt: You are terse.; sections style, tools; + tools read"
        assert entry_summary(session.entry(ids["warm"])) == "cache_warm: p/m 5,000 tokens $0.0100"
        assert entry_summary(session.entry(ids["redact"])) == \
            f"replace {ids['ask']}: my token is [redacted]"
        assert entry_summary(session.entry(ids["omit"])) == f"omit {ids['answer']}"
