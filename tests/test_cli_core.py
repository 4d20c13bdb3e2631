"""The core commands, run through click's runner on real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from sessiontree import Session
from sessiontree.cli import cli

from .conftest import CONFORMANCE


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"{name}.jsonl"
    shutil.copyfile(CONFORMANCE / f"{name}.jsonl", target)
    return target


def test_demo_writes_a_branched_session_and_prints_its_tree(tmp_path: Path) -> None:
    code, out, _ = run("demo", str(tmp_path))
    assert code == 0
    (file,) = tmp_path.glob("*.jsonl")
    with Session.open(file, strict=True) as session:
        assert len(session.leaves()) == 2 and session.branch_points()
        kinds = {e.type for e in session.entries()}
        assert {"compaction", "branch_summary", "label", "session_info"} <= kinds
        assert session.name == "Image resize CLI"
        for entry_id in session.ids():
            assert entry_id in out  # every entry is in the printed tree
        assert f"● {session.leaf_id}" in out
        assert "[python-rewrite]" in out


def test_context_json_is_pis_shape_exactly(tmp_path: Path) -> None:
    for name in ("ex2-compaction-branch-summary-custom", "model-thinking-changes", "images"):
        path = copy(name, tmp_path)
        expected = json.loads((CONFORMANCE / f"{name}.expected.json").read_text())
        code, out, _ = run("context", str(path), "--json")
        assert code == 0 and json.loads(out) == expected["context"]
        for leaf, context in expected.get("contexts", {}).items():
            code, out, _ = run("context", str(path), "--leaf", leaf, "--json")
            assert json.loads(out) == context


def test_context_text_lists_roles(tmp_path: Path) -> None:
    code, out, _ = run("context", str(copy("ex1-linear-tool-label-name", tmp_path)))
    assert code == 0
    assert "4 messages · thinking medium · model anthropic/claude-sonnet-4-5" in out
    assert "user: Run the tests" in out and "toolResult: 2 passed" in out


def test_tree_json_nests_children(tmp_path: Path) -> None:
    code, out, _ = run("tree", str(copy("ex2-compaction-branch-summary-custom", tmp_path)), "--json")
    data = json.loads(out)
    assert code == 0 and data["leafId"] == "7547cf7b"
    node = data["roots"][0]
    depth = 0
    while len(node["children"]) == 1:
        node, depth = node["children"][0], depth + 1
    assert node["id"] == "26ad6201" and depth == 4
    assert [c["id"] for c in node["children"]] == ["8344b686", "a6abd1fe"]


def test_verify_reports_each_problem_and_exits_1(tmp_path: Path) -> None:
    path = copy("corrupt-middle-line", tmp_path)
    code, out, _ = run("verify", str(path))
    assert code == 1
    assert out.splitlines() == [
        f"{path} line 5: corrupt: not valid JSON: Input data was truncated",
        f"{path} line 6: orphan: parent c09c5b1d is not in the session; treated as a root",
    ]
    code, out, _ = run("verify", str(copy("missing-header", tmp_path)), "--json")
    assert code == 1 and json.loads(out)["problems"][0]["kind"] == "bad_header"
    code, out, _ = run("verify", str(copy("ex1-linear-tool-label-name", tmp_path)))
    assert code == 0 and out.strip().endswith(": ok")


def test_errors_are_one_line_with_exit_code_1(tmp_path: Path) -> None:
    code, _, err = run("tree", str(tmp_path / "missing.jsonl"))
    assert code == 1 and err.strip() == f"Error: {tmp_path / 'missing.jsonl'}: no such session file"
    path = copy("corrupt-header", tmp_path)
    code, _, err = run("context", str(path))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "line 1" in err
    code, _, err = run("context", str(copy("ex1-linear-tool-label-name", tmp_path)), "--leaf", "zz")
    assert code == 1 and "zz" in err
    code, _, _ = run("context")
    assert code == 2


def test_migrate_rewrites_in_place_with_a_backup(tmp_path: Path) -> None:
    path = copy("v2-hook-message", tmp_path)
    original = path.read_bytes()
    code, out, _ = run("migrate", str(path))
    assert code == 0 and "from version 2" in out
    assert Path(f"{path}.v2.bak").read_bytes() == original
    assert b'"version":3' in path.read_bytes().splitlines()[0]
    code, out, _ = run("migrate", str(path))
    assert code == 0 and "nothing to do" in out


def test_label_sets_and_clears(tmp_path: Path) -> None:
    path = copy("ex1-linear-tool-label-name", tmp_path)
    assert run("label", str(path), "c09c5b1d", "tool call")[0] == 0
    with Session.open(path) as session:
        assert session.label("c09c5b1d") == "tool call"
    assert run("label", str(path), "c09c5b1d", "--clear")[0] == 0
    with Session.open(path) as session:
        assert session.label("c09c5b1d") is None
    assert run("label", str(path), "c09c5b1d")[0] == 2


def test_ls_lists_newest_first(tmp_path: Path) -> None:
    copy("ex1-linear-tool-label-name", tmp_path)
    copy("ex2-compaction-branch-summary-custom", tmp_path)
    code, out, _ = run("ls", str(tmp_path), "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 2
    assert rows[0]["modified_ms"] >= rows[1]["modified_ms"]
    assert {r["name"] for r in rows} == {"Test run", None}
    code, out, _ = run("ls", str(tmp_path))
    assert "Test run" in out and "q1" in out


def test_repair_leaves_a_file_with_the_same_tree_and_no_problems(tmp_path: Path) -> None:
    for name in ("non-entry-lines", "duplicate-id-cycle", "parent-cycle", "self-parent",
                 "torn-last-line", "duplicate-id", "garbage-before-header"):
        path = copy(name, tmp_path)
        original = path.read_bytes()
        expected = json.loads((CONFORMANCE / f"{name}.expected.json").read_text())
        code, out, _ = run("repair", str(path), "--json")
        result = json.loads(out)
        assert code == 0 and Path(result["backup"]).read_bytes() == original
        assert run("verify", str(path))[0] == 0, name
        with Session.open(path, strict=True) as session:
            assert session.leaf_id == expected["leaf"]
            assert session.build_context().to_builtins() == expected["context"]
            tree = [[n.id, d, n.label] for root in session.tree() for n, d in root.walk()]
            assert tree == expected["tree"]
        assert run("repair", str(path))[1].endswith("nothing to repair\n")
