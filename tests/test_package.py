"""Packaging promises: a light import, typed public names, and a README whose code runs."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sessiontree

from .conftest import REPO


def _loaded_after(code: str, modules: set[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys; print(sorted({sorted(modules)!r} & sys.modules.keys()))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout.strip())


def test_import_pulls_in_no_heavy_dependency() -> None:
    assert _loaded_after("import sessiontree",
                         {"click", "rich", "httpx", "textual", "playwright"}) == []


def test_session_import_loads_only_what_a_session_file_needs() -> None:
    """``from sessiontree import Session``, then opening a file and building its context,
    loads neither the hooks, the listing, the database code nor pathlib and json (their
    import time is what a user's first line would pay)."""
    code = ("import tempfile, os; from sessiontree import Session, UserMessage\n"
            "path = os.path.join(tempfile.mkdtemp(), 's.jsonl')\n"
            "s = Session.create(os.path.dirname(path)); s.append_message(UserMessage.of('hi'))\n"
            "s.close(); s = Session.open(s.file); s.build_context().messages; s.close()")
    assert _loaded_after(code, {
        "sessiontree.events", "sessiontree.stores._sql_common", "pathlib",
        "sessiontree.stores._jsonl_listing", "sessiontree._listing", "json", "subprocess",
        "urllib.parse"}) == []


def test_session_import_leaves_the_rest_to_first_use() -> None:
    """``from sessiontree import Session`` alone loads no URL parsing (urllib.parse imports
    ipaddress), no context building, no file lock (fcntl is a shared library) and no operation
    or provider: each is imported by its first use (issue 21: the import is what a user's first
    line pays)."""
    assert _loaded_after("from sessiontree import Session", {
        "urllib.parse", "ipaddress", "fcntl", "sessiontree.stores.url", "sessiontree.context",
        "sessiontree.stores._follow", "sessiontree.stores.memory", "sessiontree.events",
        "sessiontree.navigation", "sessiontree.compaction", "sessiontree.fork",
        "sessiontree.providers", "sessiontree.summarize"}) == []


def test_public_names_resolve_and_package_is_typed() -> None:
    for name in sessiontree.__all__:
        assert getattr(sessiontree, name) is not None
    assert (Path(sessiontree.__file__).parent / "py.typed").exists()


def test_readme_api_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks, "the README has a Python API tour"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.chdir(tmp_path)
    checked = []
    for number, block in enumerate(blocks):
        namespace: dict[str, object] = {}
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own README
        for value in namespace.values():
            if not isinstance(value, sessiontree.Session):
                continue
            try:
                roles = [m.role for m in value.build_context().messages]
            except (ValueError, sessiontree.SessionTreeError):  # the block closed it (or its store)
                continue
            # a context a model accepts: never two user turns in a row
            assert ("user", "user") not in list(zip(roles, roles[1:])), (number, roles)
            checked.append(number)
    assert 0 in checked  # the API tour's branching example at least
    files = list((tmp_path / "agent" / "sessions").rglob("*.jsonl"))
    assert files and all(os.path.getsize(f) > 0 for f in files)
