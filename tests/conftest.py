"""Shared fixtures: where the golden data lives (in the repository, beside the tests), and the
``backend`` fixture that runs a test once per storage backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from .backends import (  # noqa: F401 (fixtures)
    BACKENDS,
    Backend,
    fresh_postgres_url,
    make_backend,
    postgres_url,
)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CONFORMANCE = TESTS / "conformance"
"""The golden sessions and what pi made of them (``tests/conformance/README.md``)."""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each test that takes it runs once per backend (memory, jsonl, sqlite, postgres)."""
    return make_backend(request, tmp_path)
