"""Custom message renderers everywhere: the HTML export (headless Chromium, with hostile
renderer output that must stay text), the terminal browser (Textual's pilot), a renderer that
fails, and extensions installed as entry points found by ``browse`` and ``export`` in a
separate process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontree import CustomMessage, Session, UserMessage
from sessiontree.cli.tui import BrowseApp
from sessiontree.renderers import Rendered, register_message_renderer, registry

from .installed_extension import install_extension
from .test_browse import settle
from .test_export_html import PAYLOADS, Page, browser  # noqa: F401 - fixture

EVIL = " ".join(PAYLOADS)


@pytest.fixture
def renderers() -> Iterator[None]:
    offs = [
        register_message_renderer("evil.text", lambda m: "TEXT " + EVIL),
        register_message_renderer("evil.md", lambda m: Rendered("**bold** " + EVIL, "markdown")),
        register_message_renderer("broken", lambda m: 1 / 0),  # type: ignore[arg-type, return-value]
        register_message_renderer("plain", lambda m: None),
    ]
    yield
    for off in offs:
        off()


def session_with_cards(path: Path) -> Session:
    session = Session.create(path.parent, cwd="/proj")
    session.append_message(UserMessage.of("hello"))
    session.append_custom_message("evil.text", "raw one", details={"x": 1})
    session.append_custom_message("evil.md", "raw two")
    session.append_custom_message("broken", "raw three")
    session.append_custom_message("plain", "raw four")
    return session


def test_registry_rules(renderers: None) -> None:
    assert registry.render(CustomMessage(custom_type="evil.text", content="c")) == Rendered("TEXT " + EVIL)
    broken = registry.render(CustomMessage(custom_type="broken", content="c"))
    assert broken is not None and "renderer for 'broken' failed: ZeroDivisionError" in broken.text
    assert registry.render(CustomMessage(custom_type="plain", content="c")) is None
    assert registry.render(CustomMessage(custom_type="unknown", content="c")) is None


def test_browse_preview_uses_the_renderer(renderers: None, tmp_path: Path) -> None:
    session = session_with_cards(tmp_path / "s.jsonl")
    target = session.ids()[1]

    async def main() -> None:
        app = BrowseApp(str(session.file))
        async with app.run_test(size=(110, 30)) as pilot:
            await settle(app, pilot)
            app.tree_view.select_id(target)
            await settle(app, pilot)
            preview = str(app.query_one("#preview-text").render())
            assert "TEXT <script>window.__pwned = 1</script>" in preview
            assert "raw one" not in preview

    asyncio.run(main())


def test_installed_extension_renderers_reach_the_commands(tmp_path: Path) -> None:
    site = install_extension(tmp_path / "site", "cards_ext", (
        "    api.register_message_renderer('card', lambda m: 'CARD<b>' + str(m.content) + '</b>')\n"))
    session = Session.create(tmp_path, cwd="/proj")
    session.append_message(UserMessage.of("hi"))
    session.append_custom_message("card", "seven of hearts")
    out = tmp_path / "page.html"
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-m", "sessiontree", "export", str(session.file), "-o",
                           str(out)], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    page = out.read_text("utf-8")
    assert "CARD\\u003cb\\u003eseven of hearts\\u003c/b\\u003e" in page or \
        "CARD\\u003Cb\\u003Eseven of hearts" in page


# Last: Playwright's sync API keeps an event loop running in this thread from here on.
@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "escaping-alone"])
def test_html_export_shows_renderer_output_as_text_never_script(
        renderers: None, browser: Any, tmp_path: Path, bypass_csp: bool) -> None:
    from sessiontree.export.html import export_html

    session = session_with_cards(tmp_path / "s.jsonl")
    ids = session.ids()
    out = tmp_path / "s.html"
    out.write_bytes(export_html(session))
    page = Page(browser, out, bypass_csp=bypass_csp)
    try:
        page.page.select_option("#filter", "all")
        page.page.wait_for_timeout(200)
        assert page.page.evaluate("window.__pwned") is None and page.errors == []
        assert page.page.evaluate("document.scripts.length") == 2
        assert page.page.evaluate(
            "document.querySelectorAll('[onerror],[onload],a[href^=javascript]').length") == 0
        text_card = str(page.page.text_content(f'.card[data-id="{ids[1]}"]'))
        assert "TEXT <script>window.__pwned = 1</script>" in text_card and "raw one" not in text_card
        md_card = page.page.locator(f'.card[data-id="{ids[2]}"]')
        assert md_card.locator("strong").first.text_content() == "bold"
        assert "<img src=x onerror" in str(md_card.text_content())
        broken = str(page.page.text_content(f'.card[data-id="{ids[3]}"]'))
        assert "raw three" in broken and "ZeroDivisionError" in broken
        assert "raw four" in str(page.page.text_content(f'.card[data-id="{ids[4]}"]'))
    finally:
        page.close()
