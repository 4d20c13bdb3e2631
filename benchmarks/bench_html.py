"""How fast an HTML export becomes interactive in headless Chromium (Debian's package).

For generated pi sessions of 1,000 and 10,000 entries (``../shared/bench/gen_pi_session.py``):
the export's size and the time to write it, then in a fresh page each run: the time from
navigation start until the page's script has drawn the tree and the leaf's path (the page sets
``window.sessiontreeReady``), and the time to show another node's path after a click. Prints a
Markdown table; no asserts.

    .venv/bin/python benchmarks/bench_html.py [--runs N] [--sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT.parent / "shared" / "bench" / "gen_pi_session.py"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000")
    options = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from sessiontree import Session
    from sessiontree.export.html import export_html

    rows = []
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for size in (int(s) for s in options.sizes.split(",")):
            source = Path(folder) / f"pi-{size}.jsonl"
            subprocess.run([sys.executable, str(GENERATOR), "--entries", str(size), str(source)],
                           check=True, capture_output=True)
            started = time.perf_counter()
            with Session.open(source) as session:
                page_bytes = export_html(session)
            export_ms = (time.perf_counter() - started) * 1000
            out = Path(folder) / f"pi-{size}.html"
            out.write_bytes(page_bytes)
            ready: list[float] = []
            clicks: list[float] = []
            for _ in range(options.runs):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                page = context.new_page()
                page.goto(out.as_uri())
                page.wait_for_selector("html[data-ready]", state="attached", timeout=60_000)
                ready.append(float(page.evaluate("window.sessiontreeReady")))
                target = page.eval_on_selector_all(
                    "#tree .row", "rs => rs[Math.floor(rs.length / 2)].dataset.id")
                before = float(page.evaluate("performance.now()"))
                page.click(f'#tree .row[data-id="{target}"] .text')
                page.wait_for_selector(f'#messages .target[data-id="{target}"]',
                                       state="attached")
                clicks.append(float(page.evaluate("performance.now()")) - before)
                context.close()
            rows.append((size, source.stat().st_size, len(page_bytes), export_ms,
                         statistics.median(ready), min(ready), statistics.median(clicks)))
        browser.close()
    print(f"headless {CHROMIUM}, {options.runs} runs each (median, min)\n")
    print("| entries | session file | HTML file | export (Python) | time to interactive "
          "(median) | (min) | click → path shown (median) |")
    print("|---|---|---|---|---|---|---|")
    for size, source_bytes, html_bytes, export_ms, median, best, click in rows:
        print(f"| {size:,} | {source_bytes / 2**20:.1f} MiB | {html_bytes / 2**20:.1f} MiB | "
              f"{export_ms:,.0f} ms | {median:,.0f} ms | {best:,.0f} ms | {click:,.0f} ms |")


if __name__ == "__main__":
    main()
