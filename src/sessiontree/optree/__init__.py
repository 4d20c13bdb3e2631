"""The operation tree: what an agent run did (runs, turns, operations), its totals and views."""

from __future__ import annotations

from .compat import CompatTreeBuilder, compat_totals, render_reference_ascii

__all__ = ["CompatTreeBuilder", "compat_totals", "render_reference_ascii"]
