"""The ``sessiontree`` command: one click group, one module per family of subcommands."""

from __future__ import annotations

from ._app import cli

__all__ = ["cli"]
