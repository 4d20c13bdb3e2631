"""checkout, pop, cherry-pick, fork and export through click's runner, on copies of pi's files
(conformance cases and generated sessions); pi itself then loads every file we touched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sessiontree import Session
from sessiontree.cli import cli

from .conftest import CONFORMANCE
from .navhelpers import generate
from .test_pi_interop import assert_same, pi_modules, pi_read  # noqa: F401 (fixture)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"{name}.jsonl"
    shutil.copyfile(CONFORMANCE / f"{name}.jsonl", target)
    return target


def expected(name: str) -> dict[str, Any]:
    value = json.loads((CONFORMANCE / f"{name}.expected.json").read_text("utf-8"))
    assert isinstance(value, dict)
    return value


def context_of(path: Path, leaf: str | None = None) -> dict[str, Any]:
    code, out, _ = run("context", str(path), "--json", *(["--leaf", leaf] if leaf else []))
    assert code == 0
    value = json.loads(out)
    assert isinstance(value, dict)
    return value


def check_in_pi(modules: Path, files: list[Path]) -> list[dict[str, Any]]:
    answers = pi_read(modules, files)
    for path, pi in zip(files, answers):
        assert_same(path, pi)
    return answers


def test_checkout_persists_the_move_for_pi(tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    name = "ex2-compaction-branch-summary-custom"
    path = copy(name, tmp_path)
    r3 = "3986151c"
    code, out, _ = run("checkout", str(path), r3)
    assert code == 0 and "checkout marker" in out
    assert context_of(path) == expected(name)["contexts"][r3]
    (pi,) = check_in_pi(pi_modules, [path])
    assert pi["context"] == expected(name)["contexts"][r3]


def test_checkout_a_user_message_with_a_summary_and_label(tmp_path: Path,
                                                          pi_modules: Path) -> None:  # noqa: F811
    path = copy("ex1-linear-tool-label-name", tmp_path)
    code, out, _ = run("checkout", str(path), "a9158b08", "--summarize", "--set-label", "retry",
                       "--json")
    assert code == 0
    result = json.loads(out)
    assert result["positionId"] == "b5419992" and result["editorText"] == "Run the tests"
    assert result["summaryId"] and result["labelId"] == result["leafId"]
    with Session.open(path, strict=True) as session:
        summary = session.entry(result["summaryId"])
        assert summary.parent_id == "b5419992" and summary.from_id == "df059638"  # type: ignore[union-attr]
        assert session.label(result["summaryId"]) == "retry"
    check_in_pi(pi_modules, [path])


def test_checkout_no_op_and_errors_leave_the_file_alone(tmp_path: Path) -> None:
    path = copy("ex1-linear-tool-label-name", tmp_path)
    before = path.read_bytes()
    code, out, _ = run("checkout", str(path), "df059638")
    assert code == 0 and "nothing to do" in out
    code, _, err = run("checkout", str(path), "0badc0de")
    assert code == 1 and "0badc0de" in err
    code, _, err = run("checkout", str(path), "ed828d47", "--summarize", "--summarizer",
                       "nonsense:model")
    assert code == 1 and "unknown summarizer" in err
    assert path.read_bytes() == before


def test_pop_twice_on_a_generated_session(tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    path = generate(tmp_path / "gen.jsonl", entries=250, seed=5)
    code, out, _ = run("pop", str(path), "--json")
    assert code == 0
    first = json.loads(out)
    code, out, _ = run("pop", str(path), "--json")
    assert code == 0
    second = json.loads(out)
    with Session.open(path, strict=True) as session:
        assert session.leaf_id == second["summaryId"]
        # no new turn since the first pop: the second goes further back and its summary
        # covers the first one
        assert first["summaryId"] in second["summarizedIds"]
        assert first["summaryId"] not in session.path_ids()
        roles = [m.role for m in session.build_context().messages]
        assert roles[-1] == "branchSummary"
    check_in_pi(pi_modules, [path])


def test_pop_to_an_entry_and_past_the_root(tmp_path: Path) -> None:
    path = copy("ex1-linear-tool-label-name", tmp_path)
    code, out, _ = run("pop", str(path), "c09c5b1d")
    assert code == 0 and "summary" in out
    with Session.open(path) as session:
        assert session.entry(session.leaf_id or "").parent_id == "c09c5b1d"
    bare = copy("model-thinking-changes", tmp_path)
    with Session.open(bare) as session:
        session.reset_leaf()
        session.append_model_change("anthropic", "claude")
    before = bare.read_bytes()
    code, _, err = run("pop", str(bare))
    assert code == 1 and "past the root" in err
    assert bare.read_bytes() == before


def test_cherry_pick(tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    name = "ex2-compaction-branch-summary-custom"
    path = copy(name, tmp_path)
    code, out, _ = run("cherry-pick", str(path), "8344b686", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["parentId"] == "7547cf7b"
    messages = context_of(path)["messages"]
    assert messages[-1]["content"][0]["text"] == "q3"
    code, _, err = run("cherry-pick", str(path), "26ad6201")
    assert code == 1 and "compaction" in err
    check_in_pi(pi_modules, [path])


def test_fork_a_path_and_every_branch(tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    name = "fork-with-labels"
    path = copy(name, tmp_path)
    before = path.read_bytes()
    out_file = tmp_path / "out" / "fork.jsonl"
    code, out, _ = run("fork", str(path), "09f41133", "-o", str(out_file))
    assert code == 0 and out.strip() == str(out_file)
    assert context_of(out_file) == expected(name)["fork"]["context"]
    code, _, err = run("fork", str(path), "09f41133", "-o", str(out_file))
    assert code == 1 and "exists" in err
    code, out, _ = run("fork", str(path), "--json")
    assert code == 0
    everything = json.loads(out)
    assert Path(everything["file"]).parent == tmp_path
    assert everything["parentSession"] == str(path.resolve())
    assert everything["entries"] == 5
    assert path.read_bytes() == before
    check_in_pi(pi_modules, [out_file, Path(everything["file"])])


def test_export_branch_and_subtree(tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    source = generate(tmp_path / "gen.jsonl", entries=300, seed=9)
    with Session.open(source) as session:
        leaf = session.leaves()[0]
        middle = session.path_ids(leaf)[len(session.path_ids(leaf)) // 2]
        leaf_context = session.build_context(leaf).to_builtins()
    branch = tmp_path / "branch.jsonl"
    code, out, _ = run("export", str(source), "--branch", leaf, "-o", str(branch))
    assert code == 0 and out.strip() == str(branch)
    assert context_of(branch) == leaf_context
    sub = tmp_path / "sub.jsonl"
    code, out, _ = run("export", str(source), "--subtree", middle, "-o", str(sub), "--json")
    assert code == 0 and json.loads(out) == {"format": "jsonl", "file": str(sub)}
    assert context_of(sub, leaf) == leaf_context
    bare = tmp_path / "bare.jsonl"
    code, _, _ = run("export", str(source), "--subtree", middle, "--no-ancestors", "-o", str(bare))
    assert code == 0
    with Session.open(bare, strict=True) as exported:
        assert exported.entry(middle).parent_id is None
    code, _, err = run("export", str(source), "--branch", leaf, "-o", str(branch))
    assert code == 1 and "exists" in err
    code, _, _ = run("export", str(source), "--branch", leaf, "-o", str(branch), "--force")
    assert code == 0
    check_in_pi(pi_modules, [branch, sub, bare])


def test_export_usage_errors(tmp_path: Path) -> None:
    path = copy("ex1-linear-tool-label-name", tmp_path)
    code, _, err = run("export", str(path), "--format", "jsonl", "--branch", "ed828d47")
    assert code == 2 and "-o OUT" in err
    code, _, err = run("export", str(path), "-o", str(tmp_path / "x.jsonl"))
    assert code == 2 and "--branch ID or --subtree ID" in err
    code, _, err = run("export", str(path), "--branch", "a", "--subtree", "b", "-o", "x")
    assert code == 2 and "not both" in err
    code, _, err = run("export", str(path), "--branch", "nope", "-o", str(tmp_path / "y.jsonl"))
    assert code == 1 and "nope" in err
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "y.jsonl").exists()


def test_leaf_names_the_last_conversation_entry_not_the_bookkeeping(tmp_path: Path) -> None:
    """Issue 20 point 1: ``sessiontree label FILE leaf TEXT`` labels the reply, not the
    operation tree's entry written after it."""
    from click.testing import CliRunner

    from sessiontree import AssistantMessage, Session, UserMessage
    from sessiontree.cli import cli

    session = Session.create(tmp_path, cwd="/w")
    session.append_message(UserMessage.of("question"))
    reply = session.append_message(AssistantMessage.of("answer"))
    after = session.append_custom("sessiontree.op.batch", {"v": 1, "events": []})
    session.close()
    done = CliRunner().invoke(cli, ["label", str(session.file), "leaf", "good"])
    assert done.exit_code == 0, done.output
    with Session.open(session.file or "") as reopened:
        assert list(reopened.labels()) == [reply] and reopened.path_ids()[-2] == after
