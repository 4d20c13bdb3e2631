"""HTML export beside pi's own ``export-html``, on the same sessions, in headless Chromium.

For generated pi sessions of 1,000 and 10,000 entries (``sessiontree.testing.generate``, default options):
the time to write the page and its size, then in a fresh page each run the time from navigation
start until the page is usable (sessiontree: its script has drawn the tree and the leaf's path;
pi: its tree sidebar and the messages are drawn), measured the same way for both, and for ours
the time to show another node's path after a click. Prints a Markdown table; no asserts.

    .venv/bin/python benchmarks/bench_html.py [--runs N] [--sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PI_EXPORT = Path(__file__).resolve().parent / "pi_export_html.mjs"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
# Selectors, not script conditions: our page's security policy forbids evaluating strings.
OURS_READY = ["html[data-ready]"]
PI_READY = ["#tree-container .tree-node", "#messages > *"]


def ready_ms(browser: object, page_file: Path, selectors: list[str]) -> float:
    """Milliseconds from navigation start until every selector matches, in a fresh page."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(page_file.as_uri(), wait_until="commit")
    for selector in selectors:
        page.wait_for_selector(selector, state="attached", timeout=120_000)
    elapsed = float(page.evaluate("performance.now()"))
    context.close()
    return elapsed


def click_ms(browser: object, page_file: Path) -> float:
    """Milliseconds from a click on a tree row to its path being shown (ours only)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(page_file.as_uri())
    page.wait_for_selector(OURS_READY[0], state="attached", timeout=120_000)
    target = page.eval_on_selector_all("#tree .row", "rs => rs[Math.floor(rs.length / 2)].dataset.id")
    before = float(page.evaluate("performance.now()"))
    # The click event itself: a pointer click would first scroll the virtualized list, which
    # redraws its rows under the pointer, and then time the scroll too.
    page.dispatch_event(f'#tree .row[data-id="{target}"] .text', "click")
    # every click shows the path's heading (some entries render no body of their own)
    page.wait_for_selector(f'#path-info:has-text("Path to {target}")', state="attached")
    elapsed = float(page.evaluate("performance.now()")) - before
    context.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000")
    options = parser.parse_args()

    sys.path.insert(0, str(ROOT / "src"))
    from playwright.sync_api import sync_playwright

    from sessiontree import Session
    from sessiontree.export.html import export_html
    from sessiontree.testing.generate import generate_session
    from sessiontree.testing.pi import ensure_pi, run_node_script

    modules = ensure_pi()
    rows = []
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for size in (int(s) for s in options.sizes.split(",")):
            source = Path(folder) / f"pi-{size}.jsonl"
            generate_session(source, size)
            started = time.perf_counter()
            with Session.open(source) as session:
                page_bytes = export_html(session)
            ours_export = (time.perf_counter() - started) * 1000
            ours = Path(folder) / f"ours-{size}.html"
            ours.write_bytes(page_bytes)
            theirs = Path(folder) / f"pi-{size}.html"
            pi_export = run_node_script(PI_EXPORT, str(modules), str(source), str(theirs))["export_ms"]
            ours_ready = [ready_ms(browser, ours, OURS_READY) for _ in range(options.runs)]
            pi_ready = [ready_ms(browser, theirs, PI_READY) for _ in range(options.runs)]
            clicks = [click_ms(browser, ours) for _ in range(options.runs)]
            rows.append((size, source.stat().st_size, ours.stat().st_size, theirs.stat().st_size,
                         ours_export, pi_export, statistics.median(ours_ready),
                         statistics.median(pi_ready), statistics.median(clicks)))
        browser.close()
    print(f"headless {CHROMIUM}; {options.runs} runs each, medians; pi 0.73.1's export-html as "
          "the baseline, same files, same run\n")
    print("| entries | page size (ours / pi) | export (ours / pi) | usable after load (ours / pi) "
          "| pi ÷ ours | click → path shown (ours) |")
    print("|---|---|---|---|---|---|")
    for size, src, ours_b, pi_b, ours_x, pi_x, ours_r, pi_r, click in rows:
        print(f"| {size:,} | {ours_b / 2**20:.1f} / {pi_b / 2**20:.1f} MiB | {ours_x:,.0f} / "
              f"{pi_x:,.0f} ms | {ours_r:,.0f} / {pi_r:,.0f} ms | {pi_r / ours_r:.1f}× | "
              f"{click:,.0f} ms |")


if __name__ == "__main__":
    main()
