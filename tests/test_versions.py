"""The header's ``version``: read as pi 0.73.1 and 1.5.2 read it (``migrateToCurrentVersion``
compares ``version ?? 1`` with numbers, so ``"3"`` is 3), and a read never writes: an odd value
(``3.5``, ``"2"``, ``0``, ``{}``) or a newer one is refused with a clear error, the file left as it
was; only ``migrate`` rewrites an odd one, as pi reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sessiontree import Session
from sessiontree.cli import cli
from sessiontree.errors import UnsupportedVersion
from sessiontree.migrate import migrate_file
from sessiontree.repair import repair_file

BODY = (b'{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z",'
        b'"message":{"role":"user","content":"one branch","timestamp":1}}\n'
        b'{"type":"message","id":"b1","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z",'
        b'"message":{"role":"user","content":"another","timestamp":1}}\n'
        b'{"type":"label","id":"l1","parentId":"b1","timestamp":"2025-01-01T00:00:00.000Z",'
        b'"targetId":"a1","label":"first"}\n')


def session_file(folder: Path, version: str) -> Path:
    path = folder / "s.jsonl"
    path.write_bytes(b'{"type":"session","version":%s,"id":"s-1","timestamp":"2025-01-01T00:00:00'
                     b'.000Z","cwd":"/c"}\n' % version.encode() + BODY)
    return path


@pytest.mark.parametrize("version", ['"3"', "3.0", '" 3 "'])
def test_a_version_pi_compares_equal_to_3_is_read_as_3(tmp_path: Path, version: str) -> None:
    path = session_file(tmp_path, version)
    before = path.read_bytes()
    with Session.open(path) as session:
        assert session.ids() == ["a1", "b1", "l1"] and len(session.tree()) == 2
        assert session.label("a1") == "first"
    result = CliRunner().invoke(cli, ["tree", str(path)])
    assert result.exit_code == 0 and "b1" in result.output
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]
    assert migrate_file(path).backup is None and path.read_bytes() == before


@pytest.mark.parametrize("version", ["3.5", '"2"', "0", "-1", "{}", '[3, 4]', '"three"', "true"])
def test_an_odd_version_is_refused_by_every_read_and_left_as_it_was(tmp_path: Path,
                                                                    version: str) -> None:
    path = session_file(tmp_path, version)
    before = path.read_bytes()
    with pytest.raises(UnsupportedVersion, match="sessiontree migrate") as refused:
        Session.open(path)
    assert refused.value.path == str(path) and refused.value.lineno == 1
    for command in (["tree", str(path)], ["context", str(path)], ["verify", str(path)],
                    ["export", str(path), "-o", str(tmp_path / "out.html")]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 1 and "is not a format version" in result.output, command
    with pytest.raises(UnsupportedVersion):
        repair_file(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]


@pytest.mark.parametrize("version", ['"99"', "4", "4.0", '"1e3"'])
def test_a_newer_version_is_refused_even_by_migrate(tmp_path: Path, version: str) -> None:
    path = session_file(tmp_path, version)
    before = path.read_bytes()
    for attempt in (Session.open, migrate_file, repair_file):
        with pytest.raises(UnsupportedVersion, match="newer than this library's 3"):
            attempt(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]


@pytest.mark.parametrize(("version", "as_pi"), [("3.5", 3), ("{}", 3), ('"2"', 2)])
def test_migrate_rewrites_an_odd_version_as_pi_reads_it(tmp_path: Path, version: str,
                                                        as_pi: int) -> None:
    path = session_file(tmp_path, version)
    before = path.read_bytes()
    result = CliRunner().invoke(cli, ["migrate", str(path)])
    assert result.exit_code == 0
    assert f"from version {version} (read as pi reads it: {as_pi}) to 3" in result.output
    assert Path(f"{path}.v{as_pi}.bak").read_bytes() == before
    header, *lines = path.read_bytes().splitlines(keepends=True)
    assert b'"version":3,' in header and b"".join(lines) == BODY  # ids, branches, labels kept
    with Session.open(path) as session:
        assert session.ids() == ["a1", "b1", "l1"] and session.label("a1") == "first"
