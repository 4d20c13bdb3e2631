"""The ``sessiontree`` command: one click group, one module per family of subcommands."""

from __future__ import annotations

from . import (  # noqa: F401  (each registers its commands)
    browse,
    chat,
    compact,
    core,
    export,
    imports,
    navigate,
    ops,
    redact,
    search,
    storage,
)
from ._app import cli

__all__ = ["cli"]
