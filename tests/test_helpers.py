"""Helper processes (``sessiontree._helpers``) run isolated: nothing from the folder they start
in, nor from ``PYTHONPATH``, is imported by them; an interrupted caller stops them together;
what a helper says on its standard error reaches its caller."""

from __future__ import annotations

import signal
import threading
import warnings
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


def _answered(monkeypatch: pytest.MonkeyPatch, code: str) -> tuple[bytes | None, list[str]]:
    """What a helper running ``code`` answers, and the warnings its caller is given."""
    monkeypatch.setattr(_helpers, "_RUN", code)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = _helpers.answer(_helpers.start("some.module:function", "argument"))
    return data, [str(warning.message) for warning in caught
                  if issubclass(warning.category, RuntimeWarning)]


def test_a_helpers_warning_reaches_its_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warning in a helper that answers (Hyperscan failed, the pure path used) is the
    caller's warning too; a helper that says nothing gives none."""
    data, said = _answered(monkeypatch, (
        "import sys, warnings; warnings.warn('Hyperscan failed (no AVX2): scanning without "
        "it', RuntimeWarning); sys.stdout.write('done')"))
    assert data == b"done"
    [message] = said
    assert message.startswith("a helper process (some.module:function): ")
    assert "RuntimeWarning: Hyperscan failed (no AVX2): scanning without it" in message
    assert _answered(monkeypatch, "import sys; sys.stdout.write('done')") == (b"done", [])


def test_a_helpers_error_reaches_its_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper that fails with an error: its caller is told ``None`` (it does the work) and
    warned with the error's traceback and the exit status; a long one by its end."""
    data, [message] = _answered(monkeypatch, "import sys; print('x' * 9000, file=sys.stderr); "
                                             "raise MemoryError('out of memory here')")
    assert data is None
    assert message.startswith("a helper process (some.module:function) failed (exit status "
                              "1; its work is done here): ...xxx")
    assert message.endswith("MemoryError: out of memory here")
    assert len(message) < _helpers.SAID_SHOWN + 200


def test_a_helper_saying_much_on_both_outputs_never_waits_for_its_caller(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper writing far more than a pipe holds to its standard error, then to its
    standard output (read by its caller after), ends and is heard: nothing waits forever."""
    monkeypatch.setattr(_helpers, "_RUN", "import sys; sys.stderr.write('e' * (4 << 20)); "
                                          "sys.stdout.write('o' * (4 << 20))")
    helper = _helpers.start("some.module:function")
    result: list[object] = []

    def run() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result.append(_helpers.answer(helper))
        result.append([str(warning.message) for warning in caught])

    waiting = threading.Thread(target=run, daemon=True)
    waiting.start()
    waiting.join(60)
    if waiting.is_alive():
        _helpers.finish(helper)  # (ends the wait: the test fails, not hangs)
        waiting.join()
        pytest.fail("the caller and its helper waited for each other")
    data, [message] = result
    assert data == b"o" * (4 << 20)
    assert message.endswith("e" * 100)
