"""A line nested deeper than Python's recursion allows (pi's JSON.parse reads it): every command
that reads the session fails with a typed error naming the file and the line, a listing of the
folder goes on (the line skipped as one it cannot decode), and nothing is rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sessiontree import Session, UserMessage
from sessiontree.cli import cli
from sessiontree.errors import CorruptLine
from sessiontree.migrate import migrate_file
from sessiontree.repair import repair_file

DEEP = b"[" * 100_000 + b"]" * 100_000


def deep_session(folder: Path) -> Path:
    session = Session.create(folder, cwd="/w")
    first = session.append_message(UserMessage.of("before the deep line"))
    session.close()
    assert session.file is not None
    with open(session.file, "ab") as stream:
        stream.write(b'{"type":"custom","id":"deep0001","parentId":"%s","timestamp":"2025-01-01T00'
                     b':00:00.000Z","customType":"x","data":%s}\n' % (first.encode(), DEEP))
    return Path(session.file)


def test_reading_a_session_with_a_line_nested_too_deep_names_the_file_and_line(
        tmp_path: Path) -> None:
    path = deep_session(tmp_path / "s")
    before = path.read_bytes()
    with pytest.raises(CorruptLine) as refused:
        Session.open(path)
    assert refused.value.path == str(path) and refused.value.lineno == 3
    assert "nested too deep" in str(refused.value)
    for rewrite in (migrate_file, repair_file):
        with pytest.raises(CorruptLine, match="line 3"):
            rewrite(path)
    for command in (["verify", str(path)], ["tree", str(path)], ["context", str(path)],
                    ["export", str(path), "--format", "md"],
                    ["export", str(path), "-o", str(tmp_path / "out.html")]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 1, command
        assert f"{path} line 3: the JSON is nested too deep" in result.output, command
    assert path.read_bytes() == before and not (tmp_path / "out.html").exists()


def test_a_folder_with_such_a_session_is_listed_and_pruned(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    deep = deep_session(folder)
    other = Session.create(folder, cwd="/w")
    other.append_message(UserMessage.of("a plain session"))
    other.close()
    listed = CliRunner().invoke(cli, ["ls", str(folder)])
    assert listed.exit_code == 0, listed.output
    assert "before the deep line" in listed.output and "a plain session" in listed.output
    pruned = CliRunner().invoke(cli, ["prune", str(folder), "--older-than", "1", "--dry-run"])
    assert pruned.exit_code == 0 and "would delete 0 session(s)" in pruned.output
    assert deep.exists()
