"""Helper processes (``sessiontree._helpers``) run isolated: nothing from the folder they start
in, nor from ``PYTHONPATH``, is imported by them; an interrupted caller stops them together."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from sessiontree import _helpers, list_sessions
from sessiontree.stores import _jsonl_listing
from sessiontree.testing.generate import generate_folder

PLANTED = ("typing", "msgspec", "struct", "os", "enum", "functools", "sitecustomize",
           "usercustomize")


def plant(folder: Path, marker: Path) -> None:
    """Modules that a helper would import if this folder were on its import path; each one
    leaves ``marker`` behind when imported."""
    folder.mkdir()
    for name in PLANTED:
        (folder / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n", "utf-8")


def test_a_helper_never_imports_modules_from_its_folder_or_pythonpath(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    generate_folder(sessions, 6, seed=3, min_entries=1, max_entries=20)
    marker = tmp_path / "imported"
    plant(tmp_path / "cwd", marker)
    plant(tmp_path / "pythonpath", marker)
    expected = [(row.path, row.message_count) for row in list_sessions(sessions, index=False)]

    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pythonpath"))
    monkeypatch.setattr(_jsonl_listing, "PARALLEL_FILES", 1)
    monkeypatch.setattr(_helpers, "processes", lambda requested=None: 3)
    answers: list[bytes | None] = []
    real_answer = _helpers.answer
    monkeypatch.setattr(_helpers, "answer", lambda h, **options: answers.append(
        real_answer(h, **options)) or answers[-1])
    rows = [(row.path, row.message_count) for row in list_sessions(sessions, index=False)]

    assert not marker.exists(), marker.read_text()
    assert len(answers) == 2 and None not in answers  # both helpers ran and answered
    assert rows == expected


def test_an_interrupted_caller_asks_every_helper_to_stop_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller interrupted while it waits for one helper's answer stops all its helpers
    together: that helper alone was stopped first (up to STOP_WAIT) while the others went on."""
    finished: list[tuple[Any, ...]] = []
    real_finish = _helpers.finish
    monkeypatch.setattr(_helpers, "finish", lambda *helpers: finished.append(helpers) or
                        real_finish(*helpers))
    started: list[Any] = []
    real_start = _helpers.start
    monkeypatch.setattr(_helpers, "start", lambda *given: started.append(
        real_start(*given)) or started[-1])

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    def here(share: int) -> int:
        signal.setitimer(signal.ITIMER_REAL, 0.2)  # while it waits for the first helper
        return share

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):  # (helpers that wait for a signal: pause)
            _helpers.shared("signal:pause", [1, 2, 3], lambda share: [], here,
                            lambda data, share: share)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert len(started) == 2 and None not in started
    assert finished[0] == tuple(started)  # all asked to stop together, first
    assert all(helper.returncode is not None for helper in started)
