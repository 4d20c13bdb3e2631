"""Smaller file defects (issue 23 point 12): ``-o`` into a missing folder names the folder, a
read-only session file forks no new file beside it (as read-only databases refuse), and an
empty session file keeps the id its name carries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessiontree import Session, UserMessage
from sessiontree.cli import cli
from sessiontree.errors import ReadOnlyStore, WriteFailed


def one_session(folder: Path) -> Session:
    session = Session.create(folder, cwd="/w")
    session.append_message(UserMessage.of("hello"))
    return session


@pytest.mark.parametrize("kind", [[], ["--format", "md"], ["--format", "json"]])
def test_output_into_a_missing_folder_names_the_folder(tmp_path: Path, kind: list[str]) -> None:
    session = one_session(tmp_path / "s")
    assert session.file is not None
    target = tmp_path / "missing" / "out.txt"
    result = CliRunner().invoke(cli, ["export", session.file, *kind, "-o", str(target)])
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {target}: could not write: its folder "
                                     f"{target.parent} does not exist; nothing was kept")
    assert "tmp-" not in result.output and not target.parent.exists()


def test_a_read_only_session_file_forks_no_file_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    first = one_session(folder).ids()[0]
    before = sorted(os.listdir(folder))
    with Session.open(Path(folder) / before[0], read_only=True) as reader:
        for fork in (lambda: reader.create_branched_session(first),
                     lambda: reader.fork_from(reader),
                     lambda: Session.fork_from(reader, first)):
            with pytest.raises(ReadOnlyStore, match="opened read-only"):
                fork()
        assert sorted(os.listdir(folder)) == before
        assert reader.create_branched_session(first, in_memory=True).ids() == [first]
        elsewhere = reader.create_branched_session(first, directory=tmp_path / "forks")
        assert elsewhere.file is not None and Path(elsewhere.file).parent == tmp_path / "forks"


def test_an_empty_session_file_keeps_the_id_its_name_carries(tmp_path: Path) -> None:
    path = tmp_path / "2026-01-01T00-00-00-000Z_0196e1a8-0000-7000-8000-00000000abcd.jsonl"
    path.touch()
    with Session.open(path) as session:
        assert session.id == "0196e1a8-0000-7000-8000-00000000abcd"
        session.append_message(UserMessage.of("first"))
    with Session.open(path) as again:
        assert again.id == "0196e1a8-0000-7000-8000-00000000abcd"
    other = tmp_path / "notes.jsonl"  # a name without an id: a new one is drawn
    other.touch()
    with Session.open(other) as session:
        assert session.id and session.id != "notes"
