"""The HTML export, opened in headless Chromium (Debian's package) through Playwright: the
tree sidebar, paths, the leaf button, filters, rendering, narrow screens, offline use, and
that no string from a session can run anything."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontree import Session
from sessiontree.export.html import export_html, operations_data, script_json

from .viewhelpers import BRANCHED, T0, assistant, call, entry, generate, nested, result, text, \
    user, write_branched

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: the HTML tests need Debian's chromium; run .ci/run "
                    "(it installs it) or apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: run .ci/run (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Page:
    """A page with the export open, recording console errors, page errors and requests."""

    def __init__(self, browser: Any, path: Path, *, width: int = 1280, height: int = 800,
                 bypass_csp: bool = False) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height},
                                           bypass_csp=bypass_csp)
        self.page = self.context.new_page()
        self.page.set_default_timeout(10_000)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("html[data-ready]", state="attached", timeout=30_000)

    def rows(self) -> list[str]:
        return list(self.page.eval_on_selector_all("#tree .row", "rs => rs.map(r => r.dataset.id)"))

    def cards(self) -> list[str]:
        return list(self.page.eval_on_selector_all("#messages .card",
                                                   "cs => cs.map(c => c.dataset.id)"))

    def info(self) -> str:
        return str(self.page.text_content("#path-info"))

    def click_row(self, entry_id: str) -> None:
        self.page.click(f'#tree .row[data-id="{entry_id}"] .text')

    def close(self) -> None:
        self.context.close()


def export(session_path: Path, out: Path) -> Path:
    with Session.open(session_path) as session:
        out.write_bytes(export_html(session))
    return out


@pytest.fixture
def branched_page(browser: Any, tmp_path: Path) -> Iterator[Page]:
    page = Page(browser, export(write_branched(tmp_path / "s.jsonl"), tmp_path / "s.html"))
    yield page
    page.close()


def test_open_click_a_node_see_its_path_then_back_to_the_leaf(branched_page: Page,
                                                               tmp_path: Path) -> None:
    page = branched_page
    assert "Path to b0000005" in page.info() and "the session's leaf" in page.info()
    leaf_path = ["a0000001", "u0000001", "b0000001", "u0000003", "b0000004", "l0000001",
                 "s0000001", "u0000004", "b0000005"]
    assert page.cards() == leaf_path
    assert page.page.get_attribute("#messages .card.target", "data-id") == "b0000005"
    # the default filter hides the settings entries; the active branch comes first
    rows = page.rows()
    assert "l0000001" not in rows and "a0000001" not in rows
    assert rows.index("u0000003") < rows.index("r0000001")
    assert "[python-rewrite]" in str(page.page.text_content('#tree .row[data-id="u0000003"]'))
    page.click_row("b0000003")
    assert "Path to b0000003" in page.info() and "not the session's leaf" in page.info()
    # the tool result is shown under its call, not on its own
    assert page.cards() == ["a0000001", "u0000001", "b0000001", "b0000002", "u0000002",
                            "b0000003"]
    assert page.page.text_content(
        '.card[data-id="b0000001"] .tool-call .tool-result pre') == "index.js\nresize.js"
    assert "selected" in str(page.page.get_attribute('#tree .row[data-id="b0000003"]', "class"))
    page.page.screenshot(path=str(tmp_path / "branch.png"))
    page.page.click("#back-to-leaf")
    assert "Path to b0000005" in page.info()
    assert page.cards() == leaf_path
    shot = tmp_path / "leaf.png"
    page.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert page.errors == []


def test_messages_render_markdown_code_thinking_and_notes(branched_page: Page) -> None:
    page = branched_page.page
    card = '.card[data-id="b0000001"]'
    assert page.text_content(f"{card} pre code[data-lang='js']") == \
        "const sharp = require('sharp');"
    assert page.text_content(f"{card} strong") == "Node"
    assert page.eval_on_selector(f"{card} details.thinking", "d => d.open") is False
    assert page.text_content(f"{card} .tool-call .name") == "bash"
    branched_page.click_row("b0000003")
    assert page.text_content('.card[data-id="b0000002"] .body code') == "resize.js"
    branched_page.page.click("#back-to-leaf")
    assert "python-rewrite" in str(page.text_content('.card[data-id="u0000003"] .label'))
    assert "note" in str(page.get_attribute('.card[data-id="s0000001"]', "class"))


def test_filters_and_search_in_the_sidebar(branched_page: Page) -> None:
    page = branched_page
    page.page.select_option("#filter", "user-only")
    assert page.rows() == ["u0000001", "u0000003", "u0000004", "b0000005", "u0000002"]
    page.page.select_option("#filter", "all")
    assert len(page.rows()) == len(BRANCHED)
    page.page.fill("#search", "pillow")
    page.page.wait_for_selector('#tree .row[data-id="u0000001"]', state="detached")
    assert page.rows() == ["b0000004", "b0000005"]  # the match, and the leaf always shown
    page.page.fill("#search", "")
    page.page.wait_for_selector('#tree .row[data-id="u0000001"]')
    assert len(page.rows()) == len(BRANCHED)


def test_collapsing_a_branch_point(branched_page: Page) -> None:
    page = branched_page.page
    page.click('#tree .row[data-id="b0000001"] .toggle')
    rows = branched_page.rows()
    assert "u0000003" not in rows and "r0000001" not in rows
    assert "(+" in str(page.text_content('#tree .row[data-id="b0000001"]'))
    page.click('#tree .row[data-id="b0000001"] .toggle')
    assert "r0000001" in branched_page.rows()


_TEXT_ROOM = """rows => rows.map(r => {
  const text = r.querySelector('.text'), box = r.getBoundingClientRect();
  return [r.dataset.id, box.right - text.getBoundingClientRect().left,
          r.querySelector('.prefix').textContent, r.title];
})"""


def test_deep_branches_keep_their_text_readable_and_the_sidebar_resizes(browser: Any,
                                                                        tmp_path: Path) -> None:
    entries = nested(12)
    path = export(write_branched(tmp_path / "s.jsonl", entries), tmp_path / "s.html")
    texts = {e["id"]: e["message"]["content"][0]["text"] for e in entries}
    page = Page(browser, path, width=1280, height=1000)
    try:
        sidebar = page.page.locator("#sidebar")
        assert sidebar.bounding_box()["width"] == 380  # type: ignore[index]
        rows = page.page.eval_on_selector_all("#tree .row", _TEXT_ROOM)
        assert len(rows) == len(entries)
        char = page.page.evaluate("""() => { const s = document.createElement('span');
            s.textContent = '0'.repeat(10); s.style.whiteSpace = 'pre';
            document.querySelector('#tree').appendChild(s);
            const w = s.getBoundingClientRect().width / 10; s.remove(); return w; }""")
        for entry_id, room, prefix, title in rows:
            # the guide columns stay within about a quarter of the sidebar; the text keeps
            # at least 20 characters of room at every depth (12 levels here)
            assert len(prefix) * char <= 380 / 4 + 3 * char, (entry_id, prefix)
            assert room >= 20 * char, (entry_id, prefix, room)
            assert texts[entry_id] in title  # the full text on hover
        deepest = {r[0]: r[2] for r in rows}["z0000000"]
        assert deepest.startswith("\u22ef")  # "⋯N": N guide columns left out
        # drag the handle: the sidebar widens and the deep rows get their guides back
        handle = page.page.locator("#sidebar-resizer").bounding_box()
        assert handle is not None
        y = handle["y"] + 200
        page.page.mouse.move(handle["x"] + 3, y)
        page.page.mouse.down()
        page.page.mouse.move(handle["x"] + 320, y, steps=5)
        page.page.mouse.up()
        assert 690 <= sidebar.bounding_box()["width"] <= 710  # type: ignore[index]
        wide = {r[0]: r for r in page.page.eval_on_selector_all("#tree .row", _TEXT_ROOM)}
        assert len(wide["z0000000"][2]) > len(deepest)
        assert not wide["b0000005"][2].startswith("\u22ef")
        # the keyboard works on the handle too, within limits
        page.page.focus("#sidebar-resizer")
        for _ in range(40):
            page.page.keyboard.press("ArrowLeft")
        assert sidebar.bounding_box()["width"] == 240  # type: ignore[index]
        assert page.page.get_attribute("#sidebar-resizer", "aria-valuenow") == "240"
        assert page.errors == []
    finally:
        page.close()


def test_the_sidebar_collapses_on_narrow_screens(browser: Any, tmp_path: Path) -> None:
    path = export(write_branched(tmp_path / "s.jsonl"), tmp_path / "s.html")
    page = Page(browser, path, width=400, height=800)
    try:
        assert not page.page.is_visible("#sidebar")
        page.page.click("#sidebar-toggle")
        assert page.page.is_visible("#sidebar")
        page.page.screenshot(path=str(tmp_path / "narrow.png"))
        page.click_row("b0000003")
        assert "Path to b0000003" in page.info()
        assert not page.page.is_visible("#sidebar")  # closed again to show the path
    finally:
        page.close()
    wide = Page(browser, path)
    try:
        assert wide.page.is_visible("#sidebar")
        wide.page.click("#sidebar-toggle")
        assert not wide.page.is_visible("#sidebar")
    finally:
        wide.close()


def test_the_page_makes_no_request_and_is_one_file(branched_page: Page, tmp_path: Path) -> None:
    page = branched_page
    page.click_row("b0000003")
    page.page.click("#back-to-leaf")
    assert page.requests == [(tmp_path / "s.html").as_uri()]
    html = (tmp_path / "s.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "default-src 'none'" in html and "connect-src 'none'" in html


def test_a_long_path_renders_in_chunks(browser: Any, tmp_path: Path) -> None:
    source = generate(tmp_path / "g.jsonl", 1500, branch_every=0, compact_every=0)
    page = Page(browser, export(source, tmp_path / "g.html"))
    try:
        first = page.cards()
        assert 0 < len(first) <= 60
        assert page.page.is_visible("#show-earlier")
        page.page.click("#show-earlier")
        more = page.cards()
        assert len(more) > len(first) and more[-len(first):] == first
        assert len(page.rows()) < 200  # only the rows on screen exist
        assert page.errors == []
    finally:
        page.close()


def test_operations_panel_when_the_session_records_an_op_tree(browser: Any,
                                                              tmp_path: Path) -> None:
    from sessiontree.optree import OpTreeBuilder

    path = write_branched(tmp_path / "s.jsonl")
    with Session.open(path) as session:
        assert operations_data(session) is None
        builder = OpTreeBuilder({"agentId": "root"}, sink=session)
        builder.set_session_title("Fix <img src=x onerror=window.__pwned=9>")
        turn = builder.begin_turn()
        op = builder.begin_op(turn, "tool", {"name": "bash"})
        builder.end_op(op)
        builder.end_turn(turn)
        builder.end_session(True)
        assert operations_data(session) is not None
        (tmp_path / "ops.html").write_bytes(export_html(session))
    page = Page(browser, tmp_path / "ops.html")
    try:
        assert page.page.is_visible("#operations")
        panel = str(page.page.text_content("#operations"))
        assert "Fix <img src=x onerror=window.__pwned=9>" in panel and "bash" in panel
        assert page.page.evaluate("window.__pwned") is None
    finally:
        page.close()


# -- nothing from a session runs ---------------------------------------------------------------

PAYLOADS = [
    "<script>window.__pwned = 1</script>",
    "<img src=x onerror=\"window.__pwned = 2\">",
    "</script><script>window.__pwned = 3</script>",
    "<svg onload=\"window.__pwned = 4\"></svg>",
    "[click](javascript:window.__pwned=5) <a href=\"javascript:window.__pwned=6\">x</a>",
    "\u2028\u2029 <!-- <script> --> ]]> &lt;script&gt; `</script>`",
]
EVIL = " ".join(PAYLOADS)


def evil_session(path: Path) -> Path:
    entries = [
        entry(0, "s0", None, "session_info", name=EVIL),
        user(1, "u1", "s0", EVIL + "\n\n```html\n" + EVIL + "\n```\n\n**" + EVIL + "**"),
        assistant(2, "b1", "u1", {"type": "thinking", "thinking": EVIL}, text("# " + EVIL),
                  call("c1</script>", EVIL, command=EVIL)),
        result(3, "r1", "b1", "c1</script>", EVIL, EVIL, is_error=True),
        entry(4, "r2", "r1", "message", message={
            "role": "toolResult", "toolCallId": "none", "toolName": EVIL, "isError": False,
            "content": [{"type": "image", "mimeType": "image/png\" onerror=\"window.__pwned=7",
                         "data": "AAAA\" onerror=\"window.__pwned=8"},
                        {"type": "image", "mimeType": "image/svg+xml", "data": base64.b64encode(
                            b"<svg xmlns='http://www.w3.org/2000/svg' onload='window.top."
                            b"__pwned=10'><script>window.top.__pwned=11</script></svg>"
                        ).decode()}],
            "timestamp": T0}),
        entry(5, "l1", "r2", "label", targetId="u1", label=EVIL),
        entry(6, "k1", "l1", "compaction", summary=EVIL, firstKeptEntryId="u1", tokensBefore=1),
        entry(7, "m1", "k1", "branch_summary", fromId=EVIL, summary=EVIL),
        entry(8, "x1", "m1", "custom_message", customType=EVIL, content=EVIL, display=True),
        entry(9, "</script>", "x1", "custom", customType=EVIL, data={"v": EVIL}),
    ]
    return write_branched(path, entries)


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "escaping-alone"])
def test_no_string_from_the_session_runs(browser: Any, tmp_path: Path, bypass_csp: bool) -> None:
    path = export(evil_session(tmp_path / "evil.jsonl"), tmp_path / "evil.html")
    page = Page(browser, path, bypass_csp=bypass_csp)
    try:
        for row in page.rows():  # show every entry's path
            page.click_row(row) if row != "</script>" else page.page.click("#back-to-leaf")
        page.page.select_option("#filter", "all")
        page.page.click("#back-to-leaf")
        page.page.wait_for_timeout(200)  # let any image error handler fire
        assert page.page.evaluate("window.__pwned") is None
        assert page.errors == []
        assert page.page.evaluate("document.scripts.length") == 2  # the data and the app
        assert page.page.evaluate(
            "document.querySelectorAll('[onerror],[onload],a[href^=javascript]').length") == 0
        body = str(page.page.text_content('.card[data-id="u1"]'))
        assert "<script>window.__pwned = 1</script>" in body and "</script><script>" in body
        assert EVIL in str(page.page.text_content("#session-title"))
        assert page.page.title() == EVIL.replace("\u2028", " ").replace("\u2029", " ").strip() \
            or "<script>" in page.page.title()
        assert "[click](javascript:window.__pwned=5)" in body
        assert page.page.is_visible('.card[data-id="r2"] .body >> text=not shown')
    finally:
        page.close()


def test_script_json_escapes_what_could_close_the_element() -> None:
    raw = json.dumps({"a": "</script><!-- & \u2028\u2029 >"}, ensure_ascii=False).encode()
    safe = script_json(raw)
    assert b"<" not in safe and b">" not in safe and b"&" not in safe
    assert "\u2028".encode() not in safe and "\u2029".encode() not in safe
    assert json.loads(safe) == json.loads(raw)


def test_the_page_runs_only_its_own_script(tmp_path: Path) -> None:
    path = evil_session(tmp_path / "evil.jsonl")
    with Session.open(path) as session:
        html = export_html(session).decode()
    policy = re.search(r"script-src '(sha256-[^']+)'", html)
    assert policy is not None
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert policy.group(1) == f"sha256-{digest}"
    # the data element is the only other script and holds nothing that closes it
    data = re.search(r'<script id="session-data" type="application/json">(.*?)</script>', html,
                     re.S)
    assert data is not None and "<" not in data.group(1)
    assert json.loads(data.group(1))["entries"][-1]["id"] == "</script>"


def test_a_tool_result_node_is_shown_under_its_call(branched_page: Page) -> None:
    page = branched_page
    page.click_row("r0000001")
    assert "Path to r0000001" in page.info()
    target = '#messages .tool-result.target[data-id="r0000001"]'
    assert page.page.eval_on_selector(target, "d => d.open") is True
    assert page.page.eval_on_selector(target, "d => d.closest('.card').dataset.id") == "b0000001"


MARKDOWN = """# Title
Some **bold**, *em*, _also em_, ~~gone~~ and `a < b` code; snake_case_name and a__b__c and
2 * 3 * 4 stay text. A [link](https://example.org/a?b=1) and [bad](javascript:alert(1)).

- one
- two **strong**

3. three
4. four

> quoted *text*

````python
```
print("<b>hi</b>")
````
---
https://example.org/plain."""


def test_the_markdown_subset(browser: Any, tmp_path: Path) -> None:
    path = write_branched(tmp_path / "md.jsonl", [user(1, "u1", None, MARKDOWN)])
    page = Page(browser, export(path, tmp_path / "md.html"))
    try:
        body = '.card[data-id="u1"] .body'

        def texts(selector: str) -> list[str]:
            return list(page.page.eval_on_selector_all(f"{body} {selector}",
                                                       "es => es.map(e => e.textContent)"))

        assert texts("h3") == ["Title"]
        assert texts("> p > strong") == ["bold"] and texts("> p > em") == ["em", "also em"]
        assert texts("p > del") == ["gone"] and texts("p > code") == ["a < b"]
        paragraph = texts("p")[0]
        assert "snake_case_name and a__b__c and\n2 * 3 * 4 stay text" in paragraph
        assert page.page.eval_on_selector_all(
            f"{body} a", "as => as.map(a => [a.textContent, a.getAttribute('href'), a.rel])") == [
            ["link", "https://example.org/a?b=1", "noopener noreferrer nofollow"],
            ["https://example.org/plain", "https://example.org/plain", "noopener noreferrer "
                                                                       "nofollow"]]
        assert "[bad](javascript:alert(1))" in paragraph
        assert texts("ul > li") == ["one", "two strong"] and texts("ul li strong") == ["strong"]
        assert texts("ol > li") == ["three", "four"]
        assert page.page.get_attribute(f"{body} ol", "start") == "3"
        assert texts("blockquote em") == ["text"]
        assert texts("pre > code") == ['```\nprint("<b>hi</b>")']
        assert page.page.get_attribute(f"{body} pre > code", "data-lang") == "python"
        assert len(texts("hr")) == 1
        assert page.errors == []
    finally:
        page.close()


# -- issue 20 point 10 ---------------------------------------------------------------------------

def test_the_sidebar_starts_wider_on_wide_screens(browser: Any, tmp_path: Path) -> None:
    entries = nested(12)
    path = export(write_branched(tmp_path / "s.jsonl", entries), tmp_path / "s.html")
    page = Page(browser, path, width=1920, height=1000)
    try:
        width = page.page.locator("#sidebar").bounding_box()["width"]  # type: ignore[index]
        assert width == 640
        char = page.page.evaluate("""() => { const s = document.createElement('span');
            s.textContent = '0'.repeat(10); s.style.whiteSpace = 'pre';
            document.querySelector('#tree').appendChild(s);
            const w = s.getBoundingClientRect().width / 10; s.remove(); return w; }""")
        rows = page.page.eval_on_selector_all("#tree .row", _TEXT_ROOM)
        assert len(rows) == len(entries)
        assert min(room for _, room, _, _ in rows) >= 50 * char  # at every depth (12 here)
    finally:
        page.close()
    default = Page(browser, path, width=1280, height=1000)
    try:
        rows = default.page.eval_on_selector_all("#tree .row", _TEXT_ROOM)
        deepest = {r[0]: r for r in rows}["z0000000"]
        assert deepest[1] >= 28 * 7  # 380 px: the guides take about a fifth, the text the rest
    finally:
        default.close()


def test_edits_show_as_diffs_and_writes_as_the_files_text(browser: Any, tmp_path: Path) -> None:
    old, new = "def f():\n    return 1\n", "def f():\n    return 2\n"
    entries = [
        user(1, "u0000001", None, "Change f and add a file"),
        assistant(2, "b0000001", "u0000001", call("c1", "edit", path="f.py", oldText=old,
                                                  newText=new)),
        result(3, "r0000001", "b0000001", "c1", "edit", "ok"),
        assistant(4, "b0000002", "r0000001", call("c2", "edit", path="g.py", edits=[
            {"oldText": "a = 1", "newText": "a = 10\nb = 2"}])),
        result(5, "r0000002", "b0000002", "c2", "edit", "ok"),
        assistant(6, "b0000003", "r0000002", call("c3", "write", path="notes.md",
                                                  content="# Notes\nline two\n")),
        result(7, "r0000003", "b0000003", "c3", "write", "ok"),
        entry(8, "s0000001", "r0000003", "session_info", name="Edits"),
    ]
    page = Page(browser, export(write_branched(tmp_path / "s.jsonl", entries),
                                tmp_path / "s.html"))
    try:
        first = '.card[data-id="b0000001"] .tool-call'
        assert page.page.text_content(f"{first} .path") == "f.py"
        assert page.page.eval_on_selector_all(
            f"{first} .diff span", "s => s.map(x => [x.className, x.textContent])") == [
            ["same", "  def f():\n"], ["del", "-     return 1\n"], ["add", "+     return 2\n"],
            ["same", "  \n"]]
        second = page.page.text_content('.card[data-id="b0000002"] .diff') or ""
        assert second == "- a = 1\n+ a = 10\n+ b = 2\n"
        assert page.page.text_content('.card[data-id="b0000003"] .file-text') == \
            "# Notes\nline two\n"
        assert "\\n" not in (page.page.text_content("#messages") or "")  # no JSON escapes
        assert page.page.text_content('.card[data-id="s0000001"] .who') == "name: Edits"
        assert page.errors == []
    finally:
        page.close()


def test_entry_ids_never_wrap_on_a_narrow_screen(browser: Any, tmp_path: Path) -> None:
    entries = [json.loads(json.dumps(e)) for e in BRANCHED]
    for item in entries:
        if item.get("message", {}).get("role") == "assistant":
            item["message"]["model"] = "claude-sonnet-4-5-20250929-extended"
    entries.append(entry(13, "l0000002", "b0000005", "label", targetId="b0000005",
                         label="tests-pass-checkpoint"))
    page = Page(browser, export(write_branched(tmp_path / "s.jsonl", entries),
                                tmp_path / "s.html"), width=420, height=800)
    try:
        heights = page.page.eval_on_selector_all("#messages .card .head .id", """ids =>
            ids.map(i => i.getBoundingClientRect().height /
                         parseFloat(getComputedStyle(i).fontSize))""")
        assert heights and max(heights) < 2, heights  # one line each
    finally:
        page.close()


def test_search_matches_text_and_ids_only_when_the_query_looks_like_one(
        branched_page: Page) -> None:
    page = branched_page
    page.page.select_option("#filter", "all")
    page.page.fill("#search", "u0000002")  # not an id's shape (u is no hex digit): the text
    page.page.wait_for_selector('#tree .row[data-id="u0000001"]', state="detached")
    assert page.rows() == ["b0000005"]  # nothing says u0000002; the leaf stays
    page.page.fill("#search", "b000000")  # looks like an id: the ids it begins
    page.page.wait_for_selector('#tree .row[data-id="b0000001"]')
    assert sorted(page.rows()) == ["b0000001", "b0000002", "b0000003", "b0000004", "b0000005"]
    page.click_row("b0000003")
    page.page.fill("#search", "pillow")  # the selected row does not match: it goes
    page.page.wait_for_selector('#tree .row[data-id="b0000003"]', state="detached")
    assert page.rows() == ["b0000004", "b0000005"]


def test_the_operation_trees_entries_are_hidden_and_never_the_leaf(browser: Any,
                                                                   tmp_path: Path) -> None:
    """Issue 20 point 1: bookkeeping shows only in the filter 'all'; the page opens on the
    reply before it."""
    entries = [json.loads(json.dumps(e)) for e in BRANCHED]
    entries.append(entry(13, "o0000001", "b0000005", "custom", customType="sessiontree.op.batch",
                         data={"v": 1, "events": []}))
    page = Page(browser, export(write_branched(tmp_path / "s.jsonl", entries),
                                tmp_path / "s.html"))
    try:
        assert "Path to b0000005" in page.info() and "o0000001" not in page.rows()
        assert page.page.get_attribute("#messages .card.target", "data-id") == "b0000005"
        page.page.select_option("#filter", "all")
        page.page.wait_for_selector('#tree .row[data-id="o0000001"]')
        assert page.errors == []
    finally:
        page.close()
