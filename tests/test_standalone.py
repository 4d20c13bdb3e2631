"""The repository stands alone: a fresh clone with nothing beside it runs the README's demo and
collects the whole suite, and nothing reads outside the repository. (`.ci/run` runs both README
commands, verbatim, in such a clone on every CI run.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .conftest import REPO


# the design material's folder beside the clone, or this machine's layout (split so that this
# file does not match itself)
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "SESSIONTREE_" + "SHARED", "/" + "work/"]))


def readme_commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", (REPO / "README.md").read_text("utf-8"), re.S)
    return [block.strip() for block in blocks[:2]]


def tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return out.splitlines()


def test_the_readme_starts_with_the_demo_then_the_test_suite() -> None:
    demo, suite = readme_commands()
    assert demo.endswith("sessiontree demo") and "pip install ." in demo
    assert "pip install -e '.[test]'" in suite and suite.endswith("python -m pytest -n 2")
    ci = (REPO / ".ci" / "run").read_text("utf-8")
    assert "README.md" in ci and "git clone" in ci  # CI runs these very blocks in a fresh clone


def test_nothing_reads_outside_the_repository() -> None:
    offenders = []
    for name in tracked("src", "tests", "benchmarks", ".ci", "pyproject.toml"):
        if name.endswith((".py", ".mjs", ".toml", ".js")) or name == ".ci/run":
            text = (REPO / name).read_text("utf-8")
            if OUTSIDE.search(text):
                offenders.append(name)
    assert offenders == []


def test_golden_data_is_committed() -> None:
    conformance = tracked("tests/conformance")
    assert sum(name.endswith(".jsonl") for name in conformance) >= 44
    assert sum(name.endswith(".expected.json") for name in conformance) >= 44
    assert "tests/conformance/README.md" in conformance
    assert "tests/optree/vectors/vectors.json" in tracked("tests/optree/vectors")


def test_a_fresh_clone_runs_the_demo_and_collects_the_suite(tmp_path: Path) -> None:
    clone = tmp_path / "sessiontree"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "checkout", "--quiet", head], cwd=clone, check=True)
    assert [p.name for p in tmp_path.iterdir()] == ["sessiontree"]  # nothing beside it

    demo = subprocess.run(["bash", "-ec", readme_commands()[0]], cwd=clone, capture_output=True,
                          text=True, check=False)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "●" in demo.stdout  # the tree, with its leaf marked

    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                                "-p", "no:cacheprovider"], cwd=clone, capture_output=True,
                               text=True, check=False)
    assert collected.returncode == 0, collected.stdout[-3000:]
    count = re.search(r"(\d+) tests? collected", collected.stdout)
    assert count is not None and int(count.group(1)) > 600
    assert "tests/test_conformance.py::test_case[generated-1k-seed101]" in collected.stdout
