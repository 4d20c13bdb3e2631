"""The package type-checks under mypy --strict (pyproject.toml), so its public API stays typed."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO


def test_mypy_strict_passes() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "src/sessiontree"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
