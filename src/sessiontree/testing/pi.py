"""Running pi itself (npm ``@mariozechner/pi-coding-agent``) beside sessiontree, for tests and
benchmarks that compare the two on the same files.

pi is installed once with npm into a cache folder (``<repo>/.cache/pi`` by default, or
``$SESSIONTREE_PI_DIR``). Nothing here skips: when node or npm is missing, or the install fails,
the error says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["PI_PACKAGE", "PI_VERSION", "PiUnavailable", "ensure_pi", "run_node_script"]

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"


class PiUnavailable(RuntimeError):
    """pi could not be installed or run (no node/npm, or the npm registry is unreachable)."""


def _default_dir() -> Path:
    configured = os.environ.get("SESSIONTREE_PI_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / ".cache" / "pi"


def ensure_pi(directory: str | os.PathLike[str] | None = None) -> Path:
    """Install pi (if needed) and return its ``node_modules`` folder.

    Raises:
        PiUnavailable: node or npm is missing, or ``npm install`` failed.
    """
    target = Path(directory) if directory is not None else _default_dir()
    modules = target / "node_modules"
    manifest = modules / PI_PACKAGE / "package.json"
    if manifest.exists() and json.loads(manifest.read_text("utf-8")).get("version") == PI_VERSION:
        return modules
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise PiUnavailable("node and npm are needed to run pi (install Node 20 or later)")
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(target), "--no-audit", "--no-fund",
         f"{PI_PACKAGE}@{PI_VERSION}"],
        capture_output=True, text=True,
    )
    if done.returncode != 0 or not manifest.exists():
        raise PiUnavailable(f"npm install of {PI_PACKAGE}@{PI_VERSION} into {target} failed:\n"
                            f"{done.stderr[-2000:]}")
    return modules


def run_node_script(script: str | os.PathLike[str], *args: str, payload: Any = None,
                    timeout: float = 300) -> Any:
    """Run a node script with JSON on stdin and parse the JSON it prints."""
    node = shutil.which("node")
    if node is None:
        raise PiUnavailable("node is needed to run pi")
    done = subprocess.run([node, str(script), *args], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise PiUnavailable(f"{script} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)
