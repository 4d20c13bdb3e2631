"""Rebuild tests/conformance-pi1 from pi 1.5.2 (see README.md): run from the repository root as
``python tests/conformance-pi1/regenerate.py``. Needs node 20+ and npm (pi 1.5.2 is installed
into .cache/pi-1.5.2 on first use). Not a test: the tests read what this wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sessiontree.testing.generate import generate_session
from sessiontree.testing.pi import PI_1_5, ensure_pi, run_node_script

HERE = Path(__file__).resolve().parent
PROBE = HERE.parent / "pi" / "pi1_probe.mjs"
GENERATED = {  # name: generate_session arguments (pi1 sessions, small enough to keep)
    "generated-pi1-seed11": dict(entries=300, seed=11, branch_every=40, compact_every=120,
                                 keep_recent_tokens=3000),
    "generated-pi1-seed12": dict(entries=300, seed=12, branch_every=25, compact_every=90,
                                 keep_recent_tokens=2000),
    "generated-pi1-seed13": dict(entries=500, seed=13, branch_every=60, compact_every=150,
                                 keep_recent_tokens=5000),
}


def main() -> None:
    for old in HERE.glob("*.jsonl"):
        old.unlink()
    for old in HERE.glob("*.expected.json"):
        old.unlink()
    for old in HERE.glob("*.description.txt"):
        old.unlink()
    subprocess.run([sys.executable, str(HERE / "make_cases.py"), str(HERE)], check=True)
    for name, arguments in GENERATED.items():
        generate_session(HERE / f"{name}.jsonl", pi1=True, **arguments)  # type: ignore[arg-type]
    modules = ensure_pi(release=PI_1_5)
    for path in sorted(HERE.glob("*.jsonl")):
        name = path.name[:-len(".jsonl")]
        full = not name.startswith("generated-")
        (answer,) = run_node_script(PROBE, str(modules), "read",
                                    payload={"files": [str(path)], "full": full})
        assert answer["unchanged"], f"pi 1.5.2 changed {path}"
        description = HERE / f"{name}.description.txt"
        expected = {
            "description": description.read_text("utf-8").strip() if description.exists()
            else f"generate_session(pi1=True, {arguments_text(GENERATED[name])})",
            "basis": "pi 1.5.2",
            "values": "json" if full else "sha256",
            "leaf": answer["leaf"], "tree": answer["tree"], "at": answer["at"],
        }
        if description.exists():
            description.unlink()
        (HERE / f"{name}.expected.json").write_text(
            json.dumps(expected, indent=1, ensure_ascii=False) + "\n", "utf-8")


def arguments_text(arguments: dict[str, object]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in arguments.items())


if __name__ == "__main__":
    main()
