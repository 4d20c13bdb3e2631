"""Shared fixtures: where the golden data lives (in the repository, beside the tests), and the
``backend`` fixture that runs a test once per storage backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .fake_llm import FakeLLM
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


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    """The fake model server on 127.0.0.1 (``tests/fake_llm.py``), stopped after the test."""
    fake = FakeLLM().start()
    try:
        yield fake
    finally:
        fake.stop()
