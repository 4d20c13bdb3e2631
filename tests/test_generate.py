"""The seeded session generator: same bytes for the same arguments, pi's format and invariants,
every entry type, and compactions cut where pi would cut (what pi itself builds from generated
files is checked in test_pi_interop.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sessiontree import Session, list_sessions
from sessiontree._json import dumps
from sessiontree.compaction import prepare_compaction
from sessiontree.testing.generate import generate_folder, generate_session


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("generated") / "g.jsonl"
    generate_session(path, 3000, seed=5, branch_every=80, compact_every=400,
                     keep_recent_tokens=4000)
    return path


def test_same_arguments_same_bytes_and_another_seed_differs(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    made = generate_session(a, 500, seed=9)
    generate_session(b, 500, seed=9)
    generate_session(c, 500, seed=10)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert made.bytes == a.stat().st_size and made.entries == 500


def test_lines_are_pi_format_with_exact_count_and_js_serialization(sample: Path) -> None:
    raw = sample.read_bytes().split(b"\n")
    assert raw[-1] == b""  # every line terminated
    header, *entries = lines(sample)
    assert header["type"] == "session" and header["version"] == 3 and header["cwd"]
    assert len(entries) == 3000
    for line in raw[:-1]:
        assert dumps(json.loads(line)) == line  # exactly what JSON.stringify writes


def test_tree_invariants(sample: Path) -> None:
    _, *entries = lines(sample)
    by_id: dict[str, dict[str, Any]] = {}
    for entry in entries:
        assert len(entry["id"]) == 8 and int(entry["id"], 16) >= 0
        assert entry["id"] not in by_id
        assert entry["parentId"] is None or entry["parentId"] in by_id  # parents come first
        by_id[entry["id"]] = entry

    def path_to(entry_id: str) -> list[dict[str, Any]]:
        out = []
        node: dict[str, Any] | None = by_id[entry_id]
        while node is not None:
            out.append(node)
            node = by_id.get(node["parentId"]) if node["parentId"] else None
        return out[::-1]

    for entry in entries:
        if entry["type"] == "message" and entry["message"]["role"] == "toolResult":
            calls = {block["id"] for e in path_to(entry["id"]) if e["type"] == "message"
                     and e["message"]["role"] == "assistant"
                     for block in e["message"]["content"] if block["type"] == "toolCall"}
            assert entry["message"]["toolCallId"] in calls
        if entry["type"] == "compaction":
            assert entry["firstKeptEntryId"] in {e["id"] for e in path_to(entry["id"])}
        if entry["type"] == "label":
            assert entry["targetId"] in by_id


def test_every_entry_type_and_message_kind_appears(sample: Path) -> None:
    _, *entries = lines(sample)
    kinds = Counter(e["type"] for e in entries)
    assert set(kinds) == {"message", "model_change", "thinking_level_change", "label",
                          "session_info", "custom", "custom_message", "branch_summary",
                          "compaction"}
    roles = Counter(e["message"]["role"] for e in entries if e["type"] == "message")
    assert set(roles) == {"user", "assistant", "toolResult", "bashExecution"}
    stops = {e["message"]["stopReason"] for e in entries
             if e["type"] == "message" and e["message"]["role"] == "assistant"}
    assert {"stop", "toolUse", "error", "aborted"} <= stops
    assert any(e["type"] == "label" and "label" not in e for e in entries)  # a cleared label
    assert any(e["type"] == "message" and any(b.get("type") == "image" for b in
               e["message"]["content"] if isinstance(b, dict)) for e in entries
               if e["type"] == "message" and isinstance(e["message"].get("content"), list))
    longest = max(len(json.dumps(e)) for e in entries)
    assert longest > 10_000  # some tool results are whole large files


def test_compactions_keep_what_pis_cut_point_keeps(sample: Path) -> None:
    with Session.open(sample, strict=True) as session:
        compactions = [e for e in session.entries() if e.type == "compaction"]
        assert len(compactions) >= 3
        for compaction in compactions:
            before = session.path(compaction.parent_id)
            preparation = prepare_compaction(before, keep_recent_tokens=4000)
            assert preparation is not None
            assert preparation.first_kept_entry_id == compaction.first_kept_entry_id


def test_opens_cleanly_with_branches_and_roots(sample: Path) -> None:
    with Session.open(sample, strict=True) as session:
        assert session.problems == [] and len(session) == 3000
        assert len(session.branch_points()) >= 5 and len(session.leaves()) >= 5
        assert session.build_context().messages


def test_a_new_root_and_branch_summaries_from_root(tmp_path: Path) -> None:
    made = generate_session(tmp_path / "r.jsonl", 20_000, seed=3, branch_every=100,
                            compact_every=0)
    assert made.new_roots >= 1 and made.branch_summaries >= 1
    with Session.open(made.path) as session:
        assert len([node for node in session.tree()]) == made.new_roots + 1


def test_never_overwrites_and_rejects_negative_sizes(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        generate_session(path, 10)
    assert path.read_bytes() == b"precious"
    with pytest.raises(ValueError, match="entries"):
        generate_session(tmp_path / "y.jsonl", -1)
    assert not (tmp_path / "y.jsonl").exists()


def test_folder_of_sessions_named_as_pi_names_them(tmp_path: Path) -> None:
    made = generate_folder(tmp_path / "sessions", 25, seed=4, min_entries=20, max_entries=300)
    files = sorted((tmp_path / "sessions").glob("*.jsonl"))
    assert len(files) == 25 and not list((tmp_path / "sessions").glob(".generating-*"))
    assert all(20 <= m.entries <= 300 for m in made)
    for item in made:
        name = Path(item.path).name
        assert name.endswith(f"_{item.session_id}.jsonl") and name[:4] in ("2024", "2025")
    listed = list_sessions(tmp_path / "sessions")
    assert {item.id for item in listed} == {m.session_id for m in made}
    assert generate_folder(tmp_path / "again", 25, seed=4, min_entries=20, max_entries=300)[3] \
        .bytes == made[3].bytes


def test_command_line(tmp_path: Path) -> None:
    out = tmp_path / "cli.jsonl"
    done = subprocess.run([sys.executable, "-m", "sessiontree.testing.generate", "--entries", "50",
                           "--seed", "2", "--branch-every", "0", str(out)],
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    assert report["entries"] == 50 and report["branches"] == 0 and out.exists()
    failed = subprocess.run([sys.executable, "-m", "sessiontree.testing.generate", str(out)],
                            capture_output=True, text=True, check=False)
    assert failed.returncode == 1 and "exists" in failed.stderr
