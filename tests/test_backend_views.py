"""Exports (md, json, html) and ``browse`` on every backend: the same session, kept in memory,
in a file, in SQLite or in PostgreSQL, exports to the same bytes (through the API and through
``sessiontree export ADDRESS``), and the terminal browser reads and writes it by its address."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import Session
from sessiontree.cli.tui import BrowseApp, ConfirmNavigate, EditLabel
from sessiontree.export.html import export_html
from sessiontree.export.json import export_json
from sessiontree.export.markdown import export_markdown
from sessiontree.stores.memory import MemoryLog
from sessiontree.transfer import copy_sessions

from .test_browse import SIZE, selected, settle, shown, until
from .viewhelpers import write_branched

EXPORTS = {"md": export_markdown, "json": export_json, "html": export_html}


def run(*args: str) -> tuple[int, str, str]:
    from sessiontree.cli import cli

    outcome = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return outcome.exit_code, outcome.stdout, outcome.stderr


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """The branched, labelled, named session of the view tests, as a file."""
    (tmp_path / "source").mkdir()
    return write_branched(tmp_path / "source" / "s.jsonl")


def address_of(kind: str, source: Path, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where the same session (same id, same lines) is kept on ``kind``: a file or a URL."""
    if kind == "jsonl":
        copy = tmp_path / "copy" / source.name
        copy.parent.mkdir()
        copy.write_bytes(source.read_bytes())
        return str(copy)
    store = f"sqlite:///{tmp_path / 'views.db'}" if kind == "sqlite" \
        else str(request.getfixturevalue("fresh_postgres_url"))
    (session_id,) = copy_sessions(str(source), store).copied
    return f"{store}#{session_id}"


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def address(request: pytest.FixtureRequest, source: Path, tmp_path: Path) -> str:
    return address_of(request.param, source, tmp_path, request)


def opened(kind: str, source: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Session:
    if kind == "memory":
        return Session(MemoryLog(source.read_bytes().splitlines()))
    return Session.open(address_of(kind, source, tmp_path, request))


@pytest.mark.parametrize("fmt", sorted(EXPORTS))
@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
def test_exports_are_the_same_bytes_on_every_backend(kind: str, fmt: str, source: Path,
                                                     tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    export: Any = EXPORTS[fmt]
    with Session.open(source) as reference:
        expected = export(reference)
    with opened(kind, source, tmp_path, request) as session:
        found = export(session)
    assert found == expected
    if isinstance(found, bytes):
        found = found.decode("utf-8")
    if fmt == "json":  # the entries, byte for byte, and the tree
        data = json.loads(found)
        assert data["leafId"] == "b0000005" and data["labels"] == {"u0000003": "python-rewrite"}
    elif fmt == "md":
        assert found.startswith("# Image resize CLI\n") and "[python-rewrite]" in found
    else:
        assert found.startswith("<!DOCTYPE html>") and "<title>Image resize CLI</title>" in found


@pytest.mark.parametrize("fmt", sorted(EXPORTS))
def test_export_command_takes_a_session_address(fmt: str, address: str, source: Path,
                                                tmp_path: Path) -> None:
    code, expected, err = run("export", str(source), "--format", fmt, "-o", "-")
    assert code == 0, err
    code, found, err = run("export", address, "--format", fmt, "-o", "-")
    assert code == 0, err
    assert found == expected
    out = tmp_path / f"out.{fmt}"
    code, printed, err = run("export", address, "--format", fmt, "-o", str(out), "--json")
    assert code == 0, err
    assert json.loads(printed) == {"format": fmt, "file": str(out)}
    assert out.read_text("utf-8") == expected


def drive(address: str, script: Any) -> None:
    async def main() -> None:
        app = BrowseApp(address)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await script(app, pilot)

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_browse_a_database_session_by_its_address(kind: str, source: Path, tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    address = address_of(kind, source, tmp_path, request)
    rows: list[str] = []

    async def read(app: BrowseApp, pilot: Any) -> None:
        rows.extend(shown(app))

    drive(str(source), read)  # what the file shows

    async def script(app: BrowseApp, pilot: Any) -> None:
        assert selected(app) == "b0000005" and shown(app) == rows
        preview = str(app.query_one("#preview-text").render())
        assert "Tests added; all pass." in preview
        await pilot.press("home", "L")  # label the first entry
        await until(pilot, lambda: isinstance(app.screen, EditLabel), "the label dialog")
        await pilot.press(*"start here", "enter")
        await settle(app, pilot)
        assert app.tree_view.select_id("b0000003")
        await pilot.press("enter")  # go there, without a summary
        await until(pilot, lambda: isinstance(app.screen, ConfirmNavigate), "the summary question")
        await pilot.press("n")
        await until(pilot, lambda: app.session is not None and app.session.leaf_id != "b0000005",
                    "the move")
        await settle(app, pilot)

    drive(address, script)
    with Session.open(address) as session:  # written to the database, through Session
        assert session.label("u0000001") == "start here"
        assert session.path_ids()[-2:] == ["b0000003", session.leaf_id]
        assert session.entry(session.leaf_id or "").type == "custom"  # the checkout marker
    code, out, err = run("browse", f"{address.split('#')[0]}#no-such-session")
    assert code != 0 and "no session no-such-session" in err


def test_commands_that_write_take_a_session_address(address: str, source: Path,
                                                    tmp_path: Path) -> None:
    """label, checkout, pop, cherry-pick, compact and fork on a file and by URL leave the same
    tree and the same context (new entries have new ids and times: compared by shape)."""
    from sessiontree.testing.digests import context_digest

    def apply(where: str) -> tuple[Any, ...]:
        steps = [("label", where, "u0000001", "start"),
                 ("checkout", where, "b0000003", "--summarize"),
                 ("pop", where), ("cherry-pick", where, "b0000002"),
                 ("compact", where, "--keep-recent-tokens", "20"),
                 ("fork", where, "b0000003", "--json")]
        outputs = []
        for step in steps:
            code, out, err = run(*step)
            assert code == 0, (step, err)
            outputs.append(out)
        fork = json.loads(outputs[-1])["url"]  # a file beside it, or in the same database
        with Session.open(where) as session, Session.open(fork) as forked:
            tree = [(n.type, n.label) for n in _walk(session.tree())]
            return (tree, context_digest(session.build_context().to_builtins()["messages"]),
                    len(forked), forked.url != session.url, session.label("u0000001"))

    expected = apply(str(source))
    assert apply(address) == expected
    assert expected[-1] == "start" and expected[3]  # the fork is another session


def _walk(nodes: list[Any]) -> Iterator[Any]:
    for node in nodes:
        yield node
        yield from _walk(node.children)
