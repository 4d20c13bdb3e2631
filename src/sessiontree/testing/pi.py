"""Running pi itself beside sessiontree, for the tests and the benchmark that compare the two on
the same files.

Two releases are known (:data:`PI_RELEASES`): pi 0.73.1 (npm ``@mariozechner/pi-coding-agent``,
the one the format was first written down from) and pi 1.5.2 (npm
``@earendil-works/pi-coding-agent``, what pi users run today). Each is installed once with npm
into its own cache folder: :func:`default_pi_dir`. Installing pi 1.5.2 needs one npm ``overrides``
entry: its terminal UI depends on ``marked-cjk-friendly``, which the registry here does not serve;
the install points it at a small empty package generated in the install folder (the session
manager never loads it). Nothing else is downloaded beyond what ``npm install`` fetches.

Nothing here skips: when node or npm is missing, node is too old, or the install fails,
:class:`PiUnavailable` says so and what to do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PI_0_73", "PI_1_5", "PI_PACKAGE", "PI_RELEASES", "PI_VERSION", "PiRelease", "PiUnavailable",
           "default_pi_dir", "ensure_pi", "node_version", "pi_dist", "run_node_script"]

MIN_NODE = 20


@dataclass(frozen=True)
class PiRelease:
    """One pi release as npm serves it.

    Attributes:
        package: the npm package name.
        version: the exact version installed.
        stubbed: dependencies the registry does not serve, replaced (npm ``overrides``) by a
            generated empty package: they must be ones the session manager never loads.
    """

    package: str
    version: str
    stubbed: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"pi {self.version}"


PI_0_73 = PiRelease("@mariozechner/pi-coding-agent", "0.73.1")
PI_1_5 = PiRelease("@earendil-works/pi-coding-agent", "1.5.2", stubbed=("marked-cjk-friendly",))
PI_RELEASES = (PI_0_73, PI_1_5)
PI_PACKAGE = PI_0_73.package
PI_VERSION = PI_0_73.version


class PiUnavailable(RuntimeError):
    """pi could not be installed or run (no node/npm, node too old, or the install failed)."""


def default_pi_dir(release: PiRelease = PI_0_73) -> Path:
    """Where a release is installed.

    pi 0.73.1 goes to ``$SESSIONTREE_PI_DIR`` if set, else ``<repo>/.cache/pi`` (git-ignored);
    any other release to a sibling folder named after its version (``.cache/pi-1.5.2``), so the
    two installs never share a ``node_modules`` (node would resolve one's missing package from
    the other's).
    """
    configured = os.environ.get("SESSIONTREE_PI_DIR")
    base = (Path(configured).expanduser().resolve() if configured
            else Path(__file__).resolve().parents[3] / ".cache" / "pi")
    return base if release == PI_0_73 else base.with_name(f"{base.name}-{release.version}")


def pi_dist(modules: str | os.PathLike[str], release: PiRelease = PI_0_73) -> Path:
    """The ``dist`` folder of the release's package inside ``modules`` (what :func:`ensure_pi`
    returned)."""
    return Path(modules) / release.package / "dist"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise PiUnavailable(f"node is needed to run pi (install Node {MIN_NODE} or later and put it "
                            "on PATH)")
    return node


def node_version() -> str:
    """``node --version`` without the ``v``.

    Raises:
        PiUnavailable: node is missing or older than 20.
    """
    out = subprocess.run([_node(), "--version"], capture_output=True, text=True, check=False).stdout.strip()
    match = re.match(r"v?(\d+)\.", out)
    if match is None or int(match.group(1)) < MIN_NODE:
        raise PiUnavailable(f"pi needs Node {MIN_NODE} or later; `node --version` says "
                            f"{out or 'nothing'}")
    return out.lstrip("v")


def _installed(modules: Path, release: PiRelease) -> bool:
    manifest = modules / release.package / "package.json"
    try:
        return json.loads(manifest.read_text("utf-8")).get("version") == release.version  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return False


def _write_manifest(target: Path, release: PiRelease) -> None:
    """The install folder's ``package.json`` (the release pinned exactly) and one empty package
    per stubbed dependency, which ``overrides`` points at."""
    overrides: dict[str, str] = {}
    for name in release.stubbed:
        folder = target / "stubs" / name.replace("/", "__")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(json.dumps(
            {"name": name, "version": "0.0.0", "private": True, "main": "index.js",
             "description": "empty stand-in written by sessiontree.testing.pi: the registry does "
                            "not serve this package and pi's session manager never loads it"},
            indent=2) + "\n", "utf-8")
        (folder / "index.js").write_text(
            "// Empty stand-in (see package.json): a default export that makes no extension.\n"
            "module.exports = function stub() { return {}; };\n"
            "module.exports.default = module.exports;\n", "utf-8")
        overrides[name] = f"file:./{folder.relative_to(target).as_posix()}"
    manifest: dict[str, Any] = {"name": f"sessiontree-pi-{release.version}", "private": True,
                                "dependencies": {release.package: release.version}}
    if overrides:
        manifest["overrides"] = overrides
    (target / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")


def ensure_pi(directory: str | os.PathLike[str] | None = None, release: PiRelease = PI_0_73) -> Path:
    """Install a pi release (only if that version is not there yet) and return its
    ``node_modules`` folder (``pi_dist(modules, release)`` is the package's ``dist``).

    Concurrent callers (a test run beside a benchmark) take turns on a lock file, so one installs
    and the others find it installed.

    Args:
        directory: the install folder; :func:`default_pi_dir` of the release when omitted.
        release: :data:`PI_0_73` (the default, for older callers) or :data:`PI_1_5`.

    Raises:
        PiUnavailable: node or npm is missing, node is too old, or ``npm install`` failed.
    """
    target = Path(directory) if directory is not None else default_pi_dir(release)
    modules = target / "node_modules"
    if _installed(modules, release):
        return modules
    node_version()
    npm = shutil.which("npm")
    if npm is None:
        raise PiUnavailable(f"npm is needed to install {release} into {target}")
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".install.lock", "w") as lock:
        try:
            import fcntl
            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # Windows: no lock, installs are rare
            pass
        if _installed(modules, release):
            return modules
        _write_manifest(target, release)
        done = subprocess.run([npm, "install", "--prefix", str(target), "--no-audit", "--no-fund"],
                              capture_output=True, text=True, check=False)
    if done.returncode != 0 or not _installed(modules, release):
        raise PiUnavailable(
            f"installing {release} (`npm install --prefix {target}` of {release.package}@"
            f"{release.version}) failed (exit {done.returncode}); the npm registry must be reachable "
            f"once, or set SESSIONTREE_PI_DIR to a folder where it is installed:\n"
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
