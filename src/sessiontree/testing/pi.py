"""Running pi itself (npm ``@mariozechner/pi-coding-agent``) beside sessiontree, for the tests and
the benchmark that compare the two on the same files.

pi is installed once with npm into a cache folder: ``$SESSIONTREE_PI_DIR`` if set, else
``<repo>/.cache/pi`` (git-ignored). Nothing here skips: when node or npm is missing, node is too
old, or the install fails, :class:`PiUnavailable` says so and what to do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["PI_PACKAGE", "PI_VERSION", "PiUnavailable", "default_pi_dir", "ensure_pi", "node_version",
           "run_node_script"]

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
MIN_NODE = 20


class PiUnavailable(RuntimeError):
    """pi could not be installed or run (no node/npm, node too old, or the install failed)."""


def default_pi_dir() -> Path:
    """Where pi is installed: ``$SESSIONTREE_PI_DIR``, else ``<repo>/.cache/pi``."""
    configured = os.environ.get("SESSIONTREE_PI_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(__file__).resolve().parents[3] / ".cache" / "pi"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise PiUnavailable(f"node is needed to run pi {PI_VERSION} (install Node {MIN_NODE} or later "
                            "and put it on PATH)")
    return node


def node_version() -> str:
    """``node --version`` without the ``v``.

    Raises:
        PiUnavailable: node is missing or older than 20.
    """
    out = subprocess.run([_node(), "--version"], capture_output=True, text=True, check=False).stdout.strip()
    match = re.match(r"v?(\d+)\.", out)
    if match is None or int(match.group(1)) < MIN_NODE:
        raise PiUnavailable(f"pi {PI_VERSION} needs Node {MIN_NODE} or later; `node --version` says "
                            f"{out or 'nothing'}")
    return out.lstrip("v")


def _installed(modules: Path) -> bool:
    manifest = modules / PI_PACKAGE / "package.json"
    try:
        return json.loads(manifest.read_text("utf-8")).get("version") == PI_VERSION  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return False


def ensure_pi(directory: str | os.PathLike[str] | None = None) -> Path:
    """Install pi (only if that version is not there yet) and return its ``node_modules`` folder.

    Concurrent callers (a test run beside a benchmark) take turns on a lock file, so one installs
    and the others find it installed.

    Raises:
        PiUnavailable: node or npm is missing, node is too old, or ``npm install`` failed.
    """
    target = Path(directory) if directory is not None else default_pi_dir()
    modules = target / "node_modules"
    if _installed(modules):
        return modules
    node_version()
    npm = shutil.which("npm")
    if npm is None:
        raise PiUnavailable(f"npm is needed to install pi {PI_VERSION} into {target}")
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".install.lock", "w") as lock:
        try:
            import fcntl
            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # Windows: no lock, installs are rare
            pass
        if _installed(modules):
            return modules
        done = subprocess.run(
            [npm, "install", "--prefix", str(target), "--no-audit", "--no-fund",
             f"{PI_PACKAGE}@{PI_VERSION}"],
            capture_output=True, text=True, check=False,
        )
    if done.returncode != 0 or not _installed(modules):
        raise PiUnavailable(
            f"`npm install --prefix {target} {PI_PACKAGE}@{PI_VERSION}` failed (exit "
            f"{done.returncode}); the npm registry must be reachable once, or set "
            f"SESSIONTREE_PI_DIR to a folder where it is installed:\n"
            f"{(done.stderr or done.stdout)[-2000:]}")
    return modules


def run_node_script(script: str | os.PathLike[str], *args: str, payload: Any = None,
                    timeout: float = 300, node_options: tuple[str, ...] = ()) -> Any:
    """Run ``node [node_options] script args…`` with ``payload`` as JSON on stdin and return the
    JSON it prints.

    Raises:
        PiUnavailable: node is missing, or the script failed (its stderr is in the message).
    """
    done = subprocess.run([_node(), *node_options, str(script), *args], input=json.dumps(payload),
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout, check=False)
    if done.returncode != 0:
        raise PiUnavailable(f"node {script} {' '.join(args)} failed (exit {done.returncode}):\n"
                            f"{done.stderr[-4000:]}")
    return json.loads(done.stdout)
