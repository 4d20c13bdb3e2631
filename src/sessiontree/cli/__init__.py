"""The ``sessiontree`` command: one click group, one module per family of subcommands."""

from __future__ import annotations

from . import browse, compact, core, export, imports, navigate, ops  # noqa: F401  (each registers its commands)
from ._app import cli

__all__ = ["cli"]
