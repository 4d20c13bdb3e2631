"""Where sessions are kept: one module per backend (``jsonl``, ``memory``, ``sqlite``,
``postgres``, ``redis``) behind the protocols of :mod:`.base`, and :mod:`.url` to open one by address.

Backends deal in logs and lines: they never import a session or an operation, and none imports
another (``pyproject.toml``'s import-linter contracts). Import a backend's module for its store.
"""

__all__: list[str] = []
