"""A full disk, for real (a small tmpfs mounted for the test; skipped where mounting is not
allowed): every write either lands whole or leaves the files as they were, and says so with a
typed error naming the file; once space is back the same call succeeds."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessiontree import Session, UserMessage
from sessiontree.cli import cli
from sessiontree.errors import WriteFailed
from sessiontree.migrate import migrate_file
from sessiontree.repair import repair_file
from sessiontree.testing.fulldisk import DiskUnavailable, fill, small_disk

V1 = (b'{"type":"session","id":"v1-full","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/c"}\n'
      + b"".join(b'{"type":"message","timestamp":"2024-01-01T00:00:00.000Z","message":'
                 b'{"role":"user","content":"%d","timestamp":1}}\n' % i for i in range(2000)))
TORN = (b'{"type":"session","version":3,"id":"torn","timestamp":"2025-01-01T00:00:00.000Z",'
        b'"cwd":"/c"}\n'
        + b"".join(b'{"type":"message","id":"m%04d","parentId":%s,"timestamp":"2025-01-01T00:'
                   b'00:00.000Z","message":{"role":"user","content":"%d","timestamp":1}}\n'
                   % (i, b"null" if i == 0 else b'"m%04d"' % (i - 1), i) for i in range(2000))
        + b'{"type":"mess')


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    try:
        with small_disk(tmp_path / "disk", 1 << 20) as mounted:
            yield mounted
    except DiskUnavailable as exc:
        pytest.skip(str(exc))


def test_the_first_append_on_a_full_disk_leaves_no_file_and_a_retry_writes_the_header(
        disk: Path) -> None:
    folder = disk / "sessions"
    session = Session.create(folder, cwd="/w")
    filler = fill(disk)
    with pytest.raises(WriteFailed) as failed:
        session.append_message(UserMessage.of("lost to a full disk"))
    assert failed.value.errno == errno.ENOSPC and session.file is not None
    assert failed.value.path == session.file and session.file in str(failed.value)
    assert isinstance(failed.value, OSError)
    assert not os.path.exists(session.file)  # no empty, headerless file left
    filler.unlink()
    first = session.append_message(UserMessage.of("after space was freed"))
    second = session.append_message(UserMessage.of("and another"))
    with Session.open(session.file) as again:
        assert again.id == session.id and again.ids() == [first, second]
        assert again.problems == []


def test_an_append_on_a_full_disk_keeps_the_file_as_it_was(disk: Path) -> None:
    session = Session.create(disk / "sessions", cwd="/w")
    kept = session.append_message(UserMessage.of("kept"))
    assert session.file is not None
    before = Path(session.file).read_bytes()
    filler = fill(disk, leave=100)  # room for part of the next line, not all of it
    with pytest.raises(WriteFailed, match="No space left"):
        session.append_message(UserMessage.of("x" * 20_000))
    assert Path(session.file).read_bytes() == before
    filler.unlink()
    later = session.append_message(UserMessage.of("later"))
    with Session.open(session.file) as again:
        assert again.ids() == [kept, later] and again.problems == []


@pytest.mark.parametrize("rewrite", ["migrate", "repair"])
def test_migrate_and_repair_on_a_full_disk_leave_the_file_and_no_backup(
        disk: Path, rewrite: str) -> None:
    target = disk / "old.jsonl"
    original = V1 if rewrite == "migrate" else TORN
    target.write_bytes(original)
    for leave in (0, len(original) // 2, len(original) + 30_000):  # backup or rewrite fails
        filler = fill(disk, leave=leave)
        with pytest.raises(WriteFailed) as failed:
            (migrate_file if rewrite == "migrate" else repair_file)(str(target))
        assert str(target) in str(failed.value)
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "old.jsonl"]
        assert target.read_bytes() == original
        filler.unlink()
    (migrate_file if rewrite == "migrate" else repair_file)(str(target))
    with Session.open(target, migrate=False) as done:
        assert len(done) == 2000 and done.problems == []


def test_export_and_fork_on_a_full_disk_fail_in_one_line_naming_the_file(disk: Path) -> None:
    session = Session.create(disk / "sessions", cwd="/w")
    first = session.append_message(UserMessage.of("hello " * 2000))
    assert session.file is not None
    filler = fill(disk)
    result = CliRunner().invoke(cli, ["export", session.file, "-o", str(disk / "out.html")])
    assert result.exit_code == 1
    assert result.output.strip().endswith(f"{disk / 'out.html'}: could not write: No space left "
                                          "on device; nothing was kept")
    with pytest.raises(WriteFailed, match="No space left"):
        session.create_branched_session(first)
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "sessions"]
    assert len(os.listdir(disk / "sessions")) == 1
    filler.unlink()


def test_a_failed_append_keeps_the_lines_pi_added_after_the_session_last_read(
        disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session.create(disk / "sessions", cwd="/w")
    kept = session.append_message(UserMessage.of("kept"))
    assert session.file is not None
    path = Path(session.file)
    pis = (b'{"type":"message","id":"0a0b0c0d","parentId":"%s","timestamp":"2026-01-01T00:00:'
           b'00.000Z","message":{"role":"user","content":[{"type":"text","text":"from pi"}],'
           b'"timestamp":1}}\n' % kept.encode())
    write = session._log.write  # type: ignore[attr-defined]

    def pi_appends_then_the_disk_fills(lines: list[bytes], header: bytes | None,
                                       *envelopes: object) -> object:
        """pi (no lock) appends a line after this session read the file and before its write;
        then the disk fills, leaving room for part of the write only."""
        with path.open("ab") as pi:
            pi.write(pis)
        fill(disk, leave=100)
        return write(lines, header, *envelopes)

    monkeypatch.setattr(session._log, "write", pi_appends_then_the_disk_fills)
    before = path.read_bytes()
    with pytest.raises(WriteFailed, match="No space left"):
        session.append_message(UserMessage.of("x" * 20_000))
    assert path.read_bytes() == before + pis  # cut back to pi's line, not to what was read
    monkeypatch.undo()
    (disk / "filler").unlink()
    later = session.append_message(UserMessage.of("later"))
    with Session.open(path) as again:
        assert again.ids() == [kept, "0a0b0c0d", later] and again.problems == []
