"""``python -m sessiontree``: the ``sessiontree`` command."""

from __future__ import annotations

from .cli import cli

__all__: list[str] = []

if __name__ == "__main__":
    cli(prog_name="sessiontree")
