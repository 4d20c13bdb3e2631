"""Session token and cost totals as pi 1.5.2 counts them (assistant messages, tool results with
usage, ``usage`` entries of any kind, compaction and branch summary usage; every branch), checked
against pi 1.5.2's own ``getUsageCostBreakdown``, and shown the same by ``list_sessions``,
``Session.listing()``, ``ls --json``, ``ops --json`` and browse's status line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import Session, list_sessions
from sessiontree.cli import cli
from sessiontree.cli.tui import BrowseApp
from sessiontree.testing.pi import run_node_script
from sessiontree.usage import UsageTotals, session_usage

from .test_browse import settle
from .test_listing import PROBE, pi15  # noqa: F401 - the fixture
from .test_pi_interop import Pi


def usage(tokens: int, cost: float) -> dict[str, Any]:
    return {"input": tokens, "output": tokens // 2, "cacheRead": tokens * 3, "cacheWrite": 7,
            "totalTokens": tokens * 4 + tokens // 2 + 7,
            "cost": {"input": cost / 2, "output": cost / 4, "cacheRead": cost / 8, "cacheWrite": cost / 8,
                     "total": cost}}


def every_kind(path: Path) -> Path:
    """A session with each kind of counted usage, on two branches, and usage-looking fields
    that do not count."""
    entries: list[dict[str, Any]] = []

    def add(entry_type: str, parent: str | None, **fields: Any) -> str:
        entry_id = f"e{len(entries):07d}"
        entries.append({"type": entry_type, "id": entry_id, "parentId": parent,
                        "timestamp": f"2026-11-01T00:00:{len(entries):02d}.000Z", **fields})
        return entry_id

    def assistant(parent: str, tokens: int, cost: float) -> str:
        return add("message", parent, message={
            "role": "assistant", "content": [{"type": "text", "text": "ok"}], "api": "x", "provider": "p",
            "model": "m", "usage": usage(tokens, cost), "stopReason": "stop", "timestamp": 1})

    root = add("message", None, message={"role": "user", "content": "hi", "timestamp": 1,
                                          "usage": usage(1000, 9.0)})  # a user's usage: not counted
    first = assistant(root, 120, 0.0123)
    warm = add("usage", first, kind="cache_warm", provider="p", model="m", usage=usage(50_000, 0.015))
    odd = add("usage", warm, kind="a-kind-pi-does-not-know", provider="p", model="n",
              usage=usage(33, 0.0001))
    tool = add("message", odd, message={"role": "toolResult", "toolCallId": "t", "toolName": "sub",
                                         "content": [{"type": "text", "text": "done"}], "isError": False,
                                         "timestamp": 1, "usage": usage(400, 0.2)})
    plain = add("message", tool, message={"role": "toolResult", "toolCallId": "u", "toolName": "ls",
                                           "content": [], "isError": False, "timestamp": 1})
    compaction = add("compaction", plain, summary="s", firstKeptEntryId=tool, tokensBefore=10,
                     usage=usage(900, 0.03))
    assistant(compaction, 70, 0.007)
    add("custom", compaction, customType="x", data={"usage": usage(10**6, 99.0)}, usage=usage(5, 5.0))
    side = add("branch_summary", first, fromId=first, summary="other way", usage=usage(250, 0.0025))
    assistant(side, 11, 1e-7)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in [
        {"type": "session", "version": 3, "id": "totals", "timestamp": "2026-11-01T00:00:00.000Z",
         "cwd": "/w"}, *entries]), "utf-8")
    return path


def as_pi_would(totals: UsageTotals) -> dict[str, Any]:
    return {"tokens": totals.tokens, "cost": totals.cost}


def test_totals_equal_pi_1_5s(tmp_path: Path, pi15: Pi, fresh_postgres_url: str) -> None:
    from sessiontree.transfer import copy_sessions

    path = every_kind(tmp_path / "folder" / "2026-11-01T00-00-00-000Z_totals.jsonl")
    breakdown = run_node_script(PROBE, str(pi15.modules), "usage", str(path))
    assert {row["key"] for row in breakdown} == {"p/m", "p/n", "Tools/summaries"}
    with Session.open(path) as session:
        totals = session_usage(session)
    assert totals.tokens == sum(row["tokens"] for row in breakdown)
    assert totals.cost == pytest.approx(sum(row["cost"] for row in breakdown), rel=1e-12)
    assert totals.footer() == f"\u219152k \u219326k R155k W56 ${totals.cost:.3f}"
    # the same totals in every store
    for url in (f"sqlite:///{tmp_path / 'store.db'}", fresh_postgres_url):
        copy_sessions(str(path), url)
        with Session.open(f"{url}#totals") as stored:
            assert session_usage(stored) == totals
    # in the listing of the folder and of the file, and in ls --json and ops --json
    (row,) = list_sessions(path.parent, index=False)
    assert row.usage == totals == list_sessions(path.parent)[0].usage == list_sessions(path.parent)[0].usage
    with Session.open(path) as session:
        assert session.listing().usage == totals
    listed = json.loads(CliRunner().invoke(cli, ["ls", str(path.parent), "--json"]).output)
    assert listed[0]["usage"] == {"input": totals.input, "output": totals.output,
                                  "cache_read": totals.cache_read, "cache_write": totals.cache_write,
                                  "cost": totals.cost}
    ops = json.loads(CliRunner().invoke(cli, ["ops", str(path), "--json"]).output)
    assert ops["sessionUsage"]["tokens"] == totals.tokens and ops["sessionUsage"]["cost"] == totals.cost


def test_browse_shows_the_session_totals(tmp_path: Path) -> None:
    path = every_kind(tmp_path / "s.jsonl")
    with Session.open(path) as session:
        footer = session_usage(session).footer()

    async def main() -> str:
        app = BrowseApp(str(path))
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(app, pilot)
            return str(app.query_one("#status").render())

    status = asyncio.run(main())
    assert status.endswith(f" · {footer}") and "$0.267" in status
    assert "\u2191" in footer and "\u2193" in footer
