"""Shared fixtures: where the shared golden data lives, and sample sessions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SESSIONTREE_SHARED", REPO.parent / "shared")).resolve()
CONFORMANCE = SHARED / "conformance"
BENCH = SHARED / "bench"

if not CONFORMANCE.is_dir():  # never skip silently: the golden data is part of the suite
    raise RuntimeError(
        f"the shared golden data was not found at {SHARED}; set SESSIONTREE_SHARED to the folder "
        "that holds conformance/, bench/ and optree/"
    )


@pytest.fixture
def conformance_dir() -> Path:
    return CONFORMANCE
