"""An extension package "installed" in a folder: its module and a ``*.dist-info`` with a
``sessiontree.extensions`` entry point, found by importlib.metadata once the folder is on
``sys.path`` (or ``PYTHONPATH`` for a child process)."""

from __future__ import annotations

from pathlib import Path


def install_extension(site: Path, name: str, setup_body: str) -> Path:
    """Write module ``name`` whose ``setup(api)`` runs ``setup_body`` (indented lines) and its
    distribution metadata into ``site``; returns ``site``."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("def setup(api):\n" + setup_body)
    dist = site / f"{name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[sessiontree.extensions]\n{name.split('_')[0]} = {name}\n")
    return site
