"""``sessiontree tree`` (filters, search, depth, folding, --json) and the md and json exports,
through click's runner on real files."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from sessiontree import Session, UserMessage
from sessiontree.export import select
from sessiontree.export.markdown import export_markdown, fence

from .viewhelpers import BRANCHED, T0, assistant, call, entry, generate, nested, result, text, \
    user, write_branched


def run(*args: str) -> tuple[int, str, str]:
    from sessiontree.cli import cli

    outcome = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return outcome.exit_code, outcome.stdout, outcome.stderr


# -- tree ---------------------------------------------------------------------------------------


def test_tree_draws_branches_with_box_drawing_labels_and_the_active_path(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("tree", str(path), "--fold", "0")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(BRANCHED)
    assert any(line.startswith("├─ • u0000003") and "[python-rewrite]" in line for line in lines)
    assert any(line.startswith("└─   r0000001") for line in lines)
    assert any("● b0000005" in line for line in lines)
    # the active branch is drawn first
    assert out.index("u0000003") < out.index("r0000001")


def test_tree_filters_and_search(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("tree", str(path), "--filter", "user-only")
    assert code == 0
    assert [next(w for w in line.split() if len(w) == 8) for line in out.splitlines()] == [
        "u0000001", "u0000003", "u0000004", "u0000002"]
    assert out.splitlines()[1].startswith("├─ • u0000003")  # hidden entries keep the shape
    code, out, _ = run("tree", str(path), "--filter", "labeled-only")
    assert code == 0 and "u0000003" in out and "u0000001" not in out
    code, out, _ = run("tree", str(path), "--search", "pillow")
    assert code == 0 and out.count("\n") == 1 and "b0000004" in out
    code, out, err = run("tree", str(path), "--search", "nothing like this")
    assert code == 0 and out == "" and "no entry matches" in err


def test_tree_max_depth_and_folding(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("tree", str(path), "--max-depth", "0")
    assert code == 0
    assert "(+5 below)" in out and "(+3 below)" in out and "b0000005" not in out
    code, out, _ = run("tree", str(path), "--fold", "4")
    assert code == 0 and "… 2 more entries …" in out
    generated = generate(tmp_path / "g.jsonl", 600, branch_every=0, compact_every=0)
    code, out, _ = run("tree", str(generated))
    assert code == 0 and "… 560 more entries …" in out and len(out.splitlines()) == 41


def test_tree_keeps_deep_entries_readable_in_80_columns(tmp_path: Path) -> None:
    entries = nested(12)
    path = write_branched(tmp_path / "s.jsonl", entries)
    from sessiontree.cli import cli

    outcome = CliRunner().invoke(cli, ["tree", str(path)], env={"COLUMNS": "80"},
                                 catch_exceptions=False)
    lines = outcome.stdout.splitlines()
    assert outcome.exit_code == 0 and len(lines) == len(entries)
    assert all(len(line) <= 80 for line in lines)
    texts = [e["message"]["content"][0]["text"] for e in entries]
    for text_ in texts:
        line = next(x for x in lines if text_[:12] in x)
        start = line.index(text_[:12])
        assert start <= 20 + 22 and len(line) - start >= min(len(text_), 30), line
    assert any(line.startswith("⋯") for line in lines)


def test_tree_json_applies_the_filter(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("tree", str(path), "--json", "--filter", "user-only")
    data = json.loads(out)
    assert code == 0 and data["filter"] == "user-only" and data["leafId"] == "b0000005"
    (root,) = data["roots"]
    assert root["id"] == "u0000001" and root["role"] == "user"
    assert sorted(c["id"] for c in root["children"]) == ["u0000002", "u0000003"]
    deep = generate(tmp_path / "deep.jsonl", 300, branch_every=0, compact_every=0)
    code, out, _ = run("tree", str(deep), "--json")
    assert code == 0 and json.loads(out)["roots"][0]["children"]


def test_bad_filter_is_a_usage_error(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, _, err = run("tree", str(path), "--filter", "nope")
    assert code == 2 and "nope" in err


# -- markdown -----------------------------------------------------------------------------------


def test_markdown_of_the_active_branch(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("export", str(path), "--format", "md")
    assert code == 0
    assert out.startswith("# Image resize CLI\n")
    assert "## Branch to `b0000005`" in out
    assert "### User · `u0000003`" in out and "[python-rewrite]" in out
    assert "Add a --width flag" not in out  # another branch
    assert "**Tool call:** `bash`" in out and "index.js" not in out  # its result: other branch
    assert "> *Thinking:* Node or Python?" in out
    code, out, _ = run("export", str(path), "--format", "md", "--branch", "b0000003")
    assert code == 0 and "index.js\nresize.js" in out
    assert out.index("**Tool call:**") < out.index("**Result:**")
    assert "### Tool result" not in out  # shown under its call, not again
    assert "```js\nconst sharp" in out  # the message's own markdown is kept


def test_markdown_all_branches_each_under_a_heading(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("export", str(path), "--format", "md", "--all")
    assert code == 0
    assert "## Branch 1 of 2: to `b0000005` (current)" in out
    assert "## Branch 2 of 2: to `b0000003`" in out
    # the shared part is written once; the second branch starts after its branch point
    assert out.count("Write a CLI that resizes images") == 1
    second = out[out.index("## Branch 2 of 2"):]
    assert "*Branches off after `b0000001` (assistant: I'll start with **Node**:" in second
    assert "u0000001" not in second and second.index("`r0000001`") < second.index("`u0000002`")


def test_markdown_all_branches_grows_with_the_session_not_its_branches(tmp_path: Path) -> None:
    path = generate(tmp_path / "g.jsonl", 1000, seed=11, branch_every=25, compact_every=0)
    with Session.open(path) as session:
        leaves, size = len(session.leaves()), path.stat().st_size
        ids = session.ids()
    code, out, _ = run("export", str(path), "--format", "md", "--all")
    assert code == 0 and leaves >= 10 and out.count("\n## Branch ") == leaves
    headings = re.findall(r"^### .*? · `([0-9a-f]{8})`", out, re.M)
    assert len(headings) == len(set(headings))  # every entry at most once
    assert set(headings) <= set(ids) and len(headings) > len(ids) // 2
    assert len(out.encode()) <= size  # about the session's own size, not leaves x path


def test_markdown_branch_and_subtree(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("export", str(path), "--format", "md", "--branch", "b0000003")
    assert code == 0 and "Add a --width flag" in out and "Use Python instead" not in out
    out_file = tmp_path / "sub.md"
    code, out, _ = run("export", str(path), "--format", "md", "--subtree", "u0000002", "-o",
                       str(out_file))
    assert code == 0 and out.strip() == str(out_file)
    written = out_file.read_text()
    assert "Add a --width flag" in written and "Write a CLI" in written  # path to it kept
    code, _, _ = run("export", str(path), "--format", "md", "--subtree", "u0000002",
                     "--no-ancestors", "-o", str(out_file), "--force")
    assert code == 0 and "Write a CLI" not in out_file.read_text()


def test_markdown_of_a_subtree_is_everything_below_it(tmp_path: Path) -> None:
    """Issue 20 point 4: ``--subtree ID`` is ID and every branch below it, and the count said
    is the count shown."""
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("export", str(path), "--format", "md", "--subtree", "b0000001",
                       "--no-ancestors")
    assert code == 0
    for below in ("Add a --width flag", "Added `--width`.", "Use Python instead",
                  "Switched to Python", "Now add tests", "Tests added; all pass."):
        assert out.count(below) == 1, below
    assert "Write a CLI" not in out and "· 11 entries*" in out
    code, out, _ = run("export", str(path), "--format", "md")
    assert code == 0 and "· 9 of 13 entries (the branch to the leaf; --all for every branch)*" \
        in out and "Add a --width flag" not in out


def test_markdown_fences_cannot_be_closed_by_the_content() -> None:
    assert fence("a ``` b") == "````\na ``` b\n````"
    assert fence("plain") == "```\nplain\n```"


def test_markdown_of_errors_images_compaction_and_summaries(tmp_path: Path) -> None:
    entries = [
        user(1, "u1", None, "Look at this"),
        assistant(2, "b1", "u1", call("c1", "read", path="x.png")),
        entry(3, "r1", "b1", "message", message={
            "role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": True,
            "content": [{"type": "text", "text": "denied ```"},
                        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
            "timestamp": T0}),
        entry(4, "k1", "r1", "compaction", summary="## Goal\nresize", firstKeptEntryId="u1",
              tokensBefore=1234),
        entry(5, "s1", "k1", "branch_summary", fromId="b1", summary="tried Node"),
        result(6, "r2", "s1", "orphan", "bash", "no call for me"),
    ]
    path = write_branched(tmp_path / "e.jsonl", entries)
    with Session.open(path) as session:
        out = export_markdown(session)
    assert "**Result (error):**" in out and "````\ndenied ```\n````" in out
    assert "*[image: image/png, about 8 bytes]*" in out
    assert "### Compaction" in out and "1,234 tokens" in out and "> ## Goal" in out
    assert "### Branch summary" in out and "> tried Node" in out
    assert "### Tool result: bash" in out and "no call for me" in out


# -- json ---------------------------------------------------------------------------------------


def test_json_export_has_entries_byte_for_byte_and_the_tree(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("export", str(path), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["format"] == "sessiontree-export" and data["leafId"] == "b0000005"
    assert data["name"] == "Image resize CLI" and data["labels"] == {"u0000003": "python-rewrite"}
    assert [e["id"] for e in data["entries"]] == [e["id"] for e in BRANCHED]
    assert data["tree"]["roots"] == ["a0000001"]
    assert data["tree"]["children"]["b0000001"] == ["r0000001", "u0000003"]
    lines = path.read_bytes().splitlines()[1:]
    assert all(line in out.encode() for line in lines)


def test_json_export_of_a_branch_and_a_subtree(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, out, _ = run("export", str(path), "--format", "json", "--branch", "b0000003")
    data = json.loads(out)
    assert code == 0 and data["leafId"] == "b0000003" and data["labels"] == {}
    assert [e["id"] for e in data["entries"]] == ["a0000001", "u0000001", "b0000001", "r0000001",
                                                  "b0000002", "u0000002", "b0000003"]
    out_file = tmp_path / "sub.json"
    code, out, _ = run("export", str(path), "--format", "json", "--subtree", "u0000003",
                       "--no-ancestors", "-o", str(out_file), "--json")
    assert code == 0 and json.loads(out) == {"format": "json", "file": str(out_file)}
    data = json.loads(out_file.read_text())
    assert data["tree"]["roots"] == ["u0000003"] and data["leafId"] == "b0000005"
    assert len(data["entries"]) == 6


def test_export_errors(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    code, _, err = run("export", str(path), "--format", "md", "--branch", "zzz")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "zzz" in err
    code, _, err = run("export", str(path), "--format", "json", "--all")
    assert code == 2 and "--all" in err
    code, _, err = run("export", str(path), "--format", "md", "--json")
    assert code == 2 and "-o OUT" in err
    target = tmp_path / "out.md"
    target.write_text("keep me")
    code, _, err = run("export", str(path), "--format", "md", "-o", str(target))
    assert code == 1 and "--force" in err and target.read_text() == "keep me"


def test_selection_of_a_subtree_keeps_the_path_to_it(tmp_path: Path) -> None:
    path = write_branched(tmp_path / "s.jsonl")
    with Session.open(path) as session:
        chosen = select(session, subtree="u0000002")
        assert chosen.ids == ["a0000001", "u0000001", "b0000001", "r0000001", "b0000002",
                              "u0000002", "b0000003"]
        assert chosen.leaf_id == "u0000002"  # the session's leaf is elsewhere
        assert select(session, subtree="u0000003").leaf_id == "b0000005"
        assert text("x") == {"type": "text", "text": "x"}


def test_html_export_default_output_force_and_parts(tmp_path: Path, monkeypatch: object) -> None:
    import re

    path = write_branched(tmp_path / "s.jsonl")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # type: ignore[attr-defined]
    code, out, _ = run("export", str(path), "--format", "html")
    assert code == 0 and out.strip() == "s.html"
    page = (work / "s.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>Image resize CLI</title>" in page
    code, _, err = run("export", str(path), "--format", "html")
    assert code == 1 and "--force" in err
    code, out, _ = run("export", str(path), "--format", "html", "--branch", "b0000003", "-o",
                       "b.html", "--json")
    assert code == 0 and json.loads(out) == {"format": "html", "file": "b.html"}
    data = re.search(r'type="application/json">(.*?)</script>', (work / "b.html").read_text(),
                     re.S)
    assert data is not None
    payload = json.loads(data.group(1))
    assert payload["leafId"] == "b0000003" and len(payload["entries"]) == 7
    assert payload["optree"] is None and len(payload["visible"]) == 7


def test_tree_prints_whole_summaries_when_not_in_a_terminal(tmp_path: Path) -> None:
    """Issue 20 point 7: piped, ``tree`` does not cut text at the default width."""
    from sessiontree.cli import cli

    long = "word " * 60
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of(long.strip()))
    outcome = CliRunner().invoke(cli, ["tree", str(session.file)], env={"COLUMNS": None},
                                 catch_exceptions=False)
    assert long.strip() in outcome.stdout


def test_markdown_of_labels_and_ids_holding_braces(tmp_path: Path) -> None:
    """A label is text: `{`, `}` and `{0}` in it reach the page as written (str.format raised)."""
    session = Session.create(tmp_path, cwd="/w")
    first = session.append_message(UserMessage.of("hello"))
    session.set_label(first, "x{0}y{ }")
    session.close()
    (path,) = tmp_path.glob("*.jsonl")
    code, out, err = run("export", str(path), "--format", "md")
    assert code == 0, err
    assert "[x{0}y{ }]" in out and "hello" in out


def test_markdown_headings_name_the_leaf_a_person_sees() -> None:
    """A chat turn ends with the operation tree's bookkeeping entry: the headings name the
    reply before it, as tree, browse and the HTML page do (issue 20 point 1)."""
    session = Session.in_memory()
    shown = session.append_message(UserMessage.of("hi"))
    session.append_custom("sessiontree.op.batch", {"events": []})
    for document in (export_markdown(session), export_markdown(session, all_branches=True)):
        headings = [line for line in document.splitlines() if line.startswith("## ")]
        assert len(headings) == 1 and f"`{shown}`" in headings[0], headings
