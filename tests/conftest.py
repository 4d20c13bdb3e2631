"""Shared fixtures: where the golden data lives (in the repository, beside the tests), and the
``backend`` fixture that runs a test once per storage backend."""

from __future__ import annotations

import os
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
    redis_deployments,
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


@pytest.fixture(scope="session", autouse=True)
def sessions_outside_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test writes into the user's real pi sessions or cache: a session created without a
    folder goes to a temporary ``PI_CODING_AGENT_DIR`` (a test may set its own, or
    SESSIONTREE_DIR), envelope indexes to a temporary ``SESSIONTREE_CACHE_DIR``. Child
    processes inherit them."""
    saved = {name: os.environ.get(name) for name in ("PI_CODING_AGENT_DIR", "SESSIONTREE_DIR",
                                                      "SESSIONTREE_CACHE_DIR")}
    os.environ["PI_CODING_AGENT_DIR"] = str(tmp_path_factory.mktemp("pi-agent"))
    os.environ["SESSIONTREE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    os.environ.pop("SESSIONTREE_DIR", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
