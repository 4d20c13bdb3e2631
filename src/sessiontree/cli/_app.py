"""The click group every subcommand module registers on."""

from __future__ import annotations

import click

__all__ = ["cli"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sessiontree")
def cli() -> None:
    """Store and explore LLM agent sessions as trees (pi session format v3)."""
