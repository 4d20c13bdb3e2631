"""Shared fixtures: where the golden data lives (in the repository, beside the tests)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CONFORMANCE = TESTS / "conformance"
"""The golden sessions and what pi made of them (``tests/conformance/README.md``)."""
