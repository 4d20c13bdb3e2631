"""Deterministic sessions for the view, export and browser tests (fixed ids and times, so
rendered output can be compared with goldens)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessiontree import Session
from sessiontree.testing.generate import generate_session

T0 = 1_760_000_000_000  # ms


def _stamp(n: int) -> str:
    seconds = T0 // 1000 + n * 7
    import datetime as dt

    when = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def entry(n: int, eid: str, parent: str | None, kind: str, **payload: Any) -> dict[str, Any]:
    return {"type": kind, "id": eid, "parentId": parent, "timestamp": _stamp(n), **payload}


def user(n: int, eid: str, parent: str | None, text: str) -> dict[str, Any]:
    return entry(n, eid, parent, "message", message={
        "role": "user", "content": [{"type": "text", "text": text}], "timestamp": T0 + n})


def assistant(n: int, eid: str, parent: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return entry(n, eid, parent, "message", message={
        "role": "assistant", "content": list(blocks), "api": "anthropic-messages",
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "usage": {"input": 100 + n, "output": 20, "cacheRead": 0, "cacheWrite": 0,
                  "totalTokens": 120 + n,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse" if any(b["type"] == "toolCall" for b in blocks) else "stop",
        "timestamp": T0 + n})


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def result(n: int, eid: str, parent: str, call_id: str, name: str, output: str,
           is_error: bool = False) -> dict[str, Any]:
    return entry(n, eid, parent, "message", message={
        "role": "toolResult", "toolCallId": call_id, "toolName": name,
        "content": [{"type": "text", "text": output}], "isError": is_error,
        "timestamp": T0 + n})


BRANCHED = [
    entry(0, "a0000001", None, "model_change", provider="anthropic", modelId="claude-sonnet-4-5"),
    user(1, "u0000001", "a0000001", "Write a CLI that resizes images"),
    assistant(2, "b0000001", "u0000001", {"type": "thinking", "thinking": "Node or Python?"},
              text("I'll start with **Node**:\n\n```js\nconst sharp = require('sharp');\n```"),
              call("call_1", "bash", command="ls src")),
    result(3, "r0000001", "b0000001", "call_1", "bash", "index.js\nresize.js"),
    assistant(4, "b0000002", "r0000001", text("Here is `resize.js`, done.")),
    user(5, "u0000002", "b0000002", "Add a --width flag"),
    assistant(6, "b0000003", "u0000002", text("Added `--width`.")),
    # a second branch from the first answer
    user(7, "u0000003", "b0000001", "Use Python instead"),
    assistant(8, "b0000004", "u0000003", text("Switched to Python with Pillow.")),
    entry(9, "l0000001", "b0000004", "label", targetId="u0000003", label="python-rewrite"),
    entry(10, "s0000001", "l0000001", "session_info", name="Image resize CLI"),
    user(11, "u0000004", "s0000001", "Now add tests"),
    assistant(12, "b0000005", "u0000004", text("Tests added; all pass.")),
]
"""Two branches from ``b0000001``; the leaf (last line) is ``b0000005`` on the Python branch."""


def write_branched(path: Path, entries: list[dict[str, Any]] | None = None) -> Path:
    """Write ``BRANCHED`` (or ``entries``) as a session file with a fixed header."""
    from sessiontree import _json

    header = {"type": "session", "version": 3, "id": "0199a000-0000-7000-8000-000000000001",
              "timestamp": _stamp(0), "cwd": "/home/dev/resize"}
    lines = [_json.dumps(header)] + [_json.dumps(e) for e in (entries or BRANCHED)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    with Session.open(path, strict=True):
        pass
    return path


def generate(out: Path, entries: int, seed: int = 3, branch_every: int = 40,
             compact_every: int = 200) -> Path:
    """A realistic pi file from the repository's generator."""
    generate_session(out, entries, seed=seed, branch_every=branch_every,
                     compact_every=compact_every)
    return out


def nested(depth: int) -> list[dict[str, Any]]:
    """A branch inside a branch, ``depth`` levels deep: at level k an assistant reply
    ``bK`` has a short side branch ``sK`` and the branch that goes on to level k+1; the leaf
    is the deepest reply, so every level's deeper branch is on the active path."""
    out = [user(0, "u0000000", None, "Level 0: where the whole conversation starts")]
    parent = "u0000000"
    for k in range(depth):
        reply = f"b{k:07d}"
        out.append(assistant(3 * k + 1, reply, parent,
                             text(f"Level {k}: an answer long enough to be worth reading")))
        out.append(user(3 * k + 2, f"s{k:07d}", reply, f"Side {k}: a question on the side branch"))
        parent = f"u{k + 1:07d}"
        out.append(user(3 * k + 3, parent, reply, f"Level {k + 1}: a deeper question to read"))
    out.append(assistant(3 * depth + 1, "z0000000", parent, text("The deepest answer of all")))
    # the side branches were written first; the leaf must be the last line
    return out
