"""The command's conventions, as a newcomer meets them: naming entries (id prefix, @label,
--label, leaf) the same way in every command, defaults that run (`export FILE`, `ls` with no
sessions), one-line listings, and a quiet exit into a closed pipe (real subprocess pipes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import AssistantMessage, Session, UserMessage
from sessiontree.cli import cli
from sessiontree.demo import build_demo_session


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


def entry_line(entry_id: str, parent: str | None, text: str, role: str = "user") -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}],
                               "timestamp": 1_767_225_600_000}
    if role == "assistant":
        message.update(api="x", provider="p", model="m", stopReason="stop")
    return {"type": "message", "id": entry_id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:00.000Z", "message": message}


@pytest.fixture
def prefixed(tmp_path: Path) -> Path:
    """Two branches whose ids share prefixes: abcd1111 -> abcd2222 (assistant) -> abcd3333
    (user), and abcd2222 -> abce4444 (user); abcd2222 is labelled "answer"."""
    with Session.create(tmp_path / "s", cwd="/w") as session:
        session.extend([entry_line("abcd1111", None, "first question"),
                        entry_line("abcd2222", "abcd1111", "first answer", "assistant"),
                        entry_line("abcd3333", "abcd2222", "follow-up"),
                        entry_line("abce4444", "abcd2222", "other follow-up")])
        session.set_label("abcd2222", "answer")
        assert session.file is not None
        return Path(session.file)


def leaf_of(path: Path) -> str | None:
    with Session.open(path) as session:
        return session.leaf_id


# -- naming entries ------------------------------------------------------------------------------


def test_every_form_names_the_same_entry_in_context(prefixed: Path) -> None:
    expected = run("context", str(prefixed), "--json", "--leaf", "abcd2222")[1]
    assert json.loads(expected)["messages"][-1]["content"][0]["text"] == "first answer"
    for ref in ("abcd2222", "abcd2", "@answer", "@ANSWER"):
        code, out, err = run("context", str(prefixed), "--json", "--leaf", ref)
        assert (code, out, err) == (0, expected, ""), ref
    code, out, _ = run("context", str(prefixed), "--json", "--leaf", "leaf")
    assert code == 0 and out == run("context", str(prefixed), "--json")[1]


def test_an_ambiguous_prefix_lists_its_candidates_and_changes_nothing(prefixed: Path) -> None:
    before = prefixed.read_bytes()
    code, _, err = run("checkout", str(prefixed), "abcd")
    assert code == 1
    assert "id prefix 'abcd' matches 3 entries" in err
    for candidate in ("abcd1111 (user: first question)", "abcd2222 (assistant: first answer) "
                      "[answer]", "abcd3333 (user: follow-up)"):
        assert candidate in err
    assert "abce4444" not in err and "give more characters" in err
    assert prefixed.read_bytes() == before


@pytest.mark.parametrize("ref", ["abc", "zzzz9999", "@", "@nolabel"])
def test_errors_name_the_forms_that_are_accepted(prefixed: Path, ref: str) -> None:
    for args in (["checkout", str(prefixed), ref], ["context", str(prefixed), "--leaf", ref],
                 ["export", str(prefixed), "--branch", ref, "-o", "-", "--format", "md"]):
        code, out, err = run(*args)
        assert code == 1 and out == "", args
        if ref == "@nolabel":
            assert "no entry is labelled 'nolabel' (labels: @answer)" in err
        else:
            assert "expected an entry id, a unique id prefix of at least 4 characters, @LABEL " \
                   "or 'leaf'" in err, args


def test_label_option_and_at_label_work_in_every_command_with_an_id(prefixed: Path,
                                                                    tmp_path: Path) -> None:
    # checkout by --label: the assistant message becomes the leaf (a marker keeps the move)
    code, out, _ = run("checkout", str(prefixed), "--label", "answer")
    assert code == 0 and leaf_of(prefixed) != "abce4444"
    with Session.open(prefixed) as session:
        assert session.path_ids()[-2] == "abcd2222"
    # cherry-pick by @label and by prefix
    code, out, _ = run("cherry-pick", str(prefixed), "abce", "--json")
    assert code == 0 and json.loads(out)["sourceId"] == "abce4444"
    # fork the path to a label
    code, out, _ = run("fork", str(prefixed), "--label", "answer", "-o", str(tmp_path / "f.jsonl"))
    assert code == 0
    with Session.open(tmp_path / "f.jsonl") as fork:
        assert fork.ids()[:2] == ["abcd1111", "abcd2222"] and "abcd3333" not in fork
        assert fork.label("abcd2222") == "answer"  # the path, its labels kept
    # pop back to a prefix on the current path
    code, out, _ = run("pop", str(prefixed), "abcd1", "--json")
    assert code == 0 and json.loads(out)["targetId"] == "abcd1111"
    # relabel by label; then the old name is gone and the new one resolves
    code, out, _ = run("label", str(prefixed), "--label", "answer", "reply")
    assert code == 0 and out.startswith("abcd2222: label 'reply'")
    assert run("context", str(prefixed), "--leaf", "@answer")[0] == 1
    assert run("label", str(prefixed), "@reply", "--clear")[0] == 0
    with Session.open(prefixed) as session:
        assert session.label("abcd2222") is None
    # export the branch to a prefix
    code, out, _ = run("export", str(prefixed), "--branch", "abcd3", "--format", "md")
    assert code == 0 and "follow-up" in out and "other follow-up" not in out


def test_id_and_label_together_is_a_usage_error_that_says_what_to_do(prefixed: Path) -> None:
    code, _, err = run("checkout", str(prefixed), "abcd1111", "--label", "answer")
    assert code == 2 and "give ID or --label NAME, not both" in err and "--set-label" in err
    code, _, err = run("cherry-pick", str(prefixed))
    assert code == 2 and "give the entry: ID (an entry id, a unique id prefix" in err


# -- defaults that run ---------------------------------------------------------------------------


def test_export_with_no_options_writes_the_whole_session_as_html(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    with build_demo_session(tmp_path / "demo") as session:
        file, ids = Path(session.file or ""), session.ids()
    monkeypatch.chdir(tmp_path)
    code, out, err = run("export", str(file))
    assert (code, err) == (0, "")
    written = tmp_path / (file.stem + ".html")
    assert out.strip() == written.name
    page = written.read_text("utf-8")
    assert page.startswith("<!DOCTYPE html>") and all(i in page for i in ids)
    # the format follows OUT's extension when --format is not given
    code, out, _ = run("export", str(file), "-o", str(tmp_path / "x.md"))
    assert code == 0 and (tmp_path / "x.md").read_text("utf-8").startswith("# ")


def test_ls_with_no_sessions_says_so_and_succeeds(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    assert run("ls", str(tmp_path / "empty")) == (0, f"no sessions in {tmp_path / 'empty'}\n", "")
    # the default folder (pi's, for the working directory) does not exist yet: not an error
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("ls")
    assert code == 0 and out.startswith("no sessions in ") and str(tmp_path / "agent") in out
    assert run("ls", str(tmp_path), "--json")[:2] == (0, "[]\n")
    code, _, err = run("ls", str(tmp_path / "typo"))
    assert code == 1 and "no such session folder" in err


def test_ls_shows_one_line_per_session_and_says_which_time(tmp_path: Path) -> None:
    with Session.create(tmp_path) as chatty:
        chatty.append_message(UserMessage(content="line one\nline two\n\n\tand [red]three[/red]",
                                          timestamp=1_767_225_600_000))
        chatty.append_message(AssistantMessage.of("ok"))
    with Session.create(tmp_path) as quiet:
        quiet.append_custom("state", {"n": 1})
        quiet.set_name("a name\nover two lines")
    code, out, _ = run("ls", str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["LAST", "MESSAGE", "ENTRIES", "NAME", "OR", "FIRST", "MESSAGE"]
    assert "line one line two and [red]three[/red]" in out  # one line, markup shown as text
    assert any(line.endswith("a name over two lines") and line[16] == "*" for line in lines)
    assert lines[-1] == "* no user or assistant message yet: the time the session was created"
    rows = {row["id"]: row for row in json.loads(run("ls", str(tmp_path), "--json")[1])}
    assert rows[chatty.id]["modified_from"] == "message"
    assert rows[quiet.id]["modified_from"] == "created"


# -- a closed pipe -------------------------------------------------------------------------------


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    """One successful invocation per command, each writing to stdout."""
    with build_demo_session(tmp_path / "demo") as session:
        file = session.file or ""
        user = next(i for i in session.path_ids() if session.entry(i).type == "message")
    fresh = str(tmp_path / "v2.jsonl")
    Path(fresh).write_text('{"type":"session","version":2,"id":"s","timestamp":'
                           '"2026-01-01T00:00:00.000Z","cwd":"/w"}\n')
    return {
        "demo": ["demo", str(tmp_path / "demo2")],
        "tree": ["tree", file],
        "context": ["context", file],
        "ls": ["ls", str(tmp_path / "demo")],
        "migrate": ["migrate", fresh],
        "verify": ["verify", file],
        "repair": ["repair", file],
        "label": ["label", file, "leaf", "x"],
        "redact": ["redact", file, user, "--purge"],
        "search": ["search", "test", str(tmp_path / "demo")],
        "checkout": ["checkout", file, user],
        "fork": ["fork", file, "-o", str(tmp_path / "forked.jsonl")],
        "pop": ["pop", file],
        "cherry-pick": ["cherry-pick", file, user],
        "export": ["export", file, "--format", "md"],
        "compact": ["compact", file, "--dry-run", "--keep-recent-tokens", "1"],
        "ops": ["ops", file],
        "import": ["import", "--from", "responses",
                   str(Path(__file__).parent / "importers" / "responses-items.json"),
                   "--to", str(tmp_path / "imported")],
        "copy": ["copy", file, str(tmp_path / "copied")],
        "delete": ["delete", "--yes", file],
        "prune": ["prune", str(tmp_path / "demo"), "--older-than", "100000", "--dry-run"],
        "tail": ["tail", "--no-follow", file],
        "chat": ["chat", file, "-m", "anthropic:claude-sonnet-4-5", "--base-url",
                 "http://127.0.0.1:9", "--no-installed-extensions"],  # stdin: no prompt
        "--help": ["--help"],
    }


def test_every_command_exits_quietly_into_a_closed_pipe(tmp_path: Path) -> None:
    commands = _commands(tmp_path)
    interactive = {"browse"}  # a full-screen app: it draws on a terminal, never into a pipe
    assert set(cli.commands) - interactive <= set(commands)
    demo = commands["tree"][1]
    source = Path(demo).read_bytes()
    for name, args in commands.items():
        for n, arg in enumerate(args):  # each command on its own copy of the demo session
            if arg == demo:
                args[n] = str(tmp_path / f"{name}.jsonl")
                Path(args[n]).write_bytes(source)
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first byte (`| head -0`)
        try:
            done = subprocess.run([sys.executable, "-m", "sessiontree", *args],
                                  stdout=write_end, stderr=subprocess.PIPE, timeout=60)
        finally:
            os.close(write_end)
        assert (name, done.returncode, done.stderr.decode()) == (name, 1, ""), name


def test_a_reader_that_stops_early_leaves_no_noise(tmp_path: Path) -> None:
    with Session.create(tmp_path, cwd="/w") as session:
        for n in range(400):
            session.append_message(UserMessage.of(f"question {n} " + "words " * 30))
            session.append_message(AssistantMessage.of(f"answer {n}"))
        file = session.file or ""
    for args in (["tree", file, "--fold", "0"], ["tree", file, "--json"],
                 ["export", file, "--format", "md"], ["context", file]):
        with subprocess.Popen([sys.executable, "-m", "sessiontree", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
            assert child.stdout is not None and child.stderr is not None
            assert child.stdout.readline()  # `| head -1`
            child.stdout.close()
            err = child.stderr.read()
            child.wait(timeout=60)
        # a write that the kernel cut short ends the output silently (exit 0); a later write
        # raises EPIPE (exit 1): quiet either way
        assert err == b"" and child.returncode in (0, 1), args


# -- honest output: the entry that became the leaf -----------------------------------------------


def last_entry(path: Path) -> tuple[str, str]:
    with Session.open(path) as session:
        entry = session.entry(session.ids()[-1])
        return entry.id, entry.type


def test_pop_and_checkout_print_the_entry_that_became_the_leaf(tmp_path: Path) -> None:
    with build_demo_session(tmp_path) as session:
        file = Path(session.file or "")
        first_user = next(i for i in session.path_ids()
                          if getattr(session.entry(i), "type", "") == "message")
    code, out, _ = run("pop", str(file))
    summary_id, kind = last_entry(file)
    assert code == 0 and kind == "branch_summary"
    assert out.splitlines()[0].startswith(f"leaf: {summary_id} (was ")
    assert f"the leaf is the branch summary {summary_id} of " in out
    code, out, _ = run("checkout", str(file), "@python-rewrite")
    marker_id, kind = last_entry(file)
    assert code == 0 and kind == "custom" and out.startswith(f"leaf: {marker_id} (was {summary_id})")
    assert "the leaf is a checkout marker under" in out
    assert "Actually, let's use Python with Pillow." in out  # the text to edit and send again
    code, out, _ = run("checkout", str(file), first_user[:6], "--summarize", "--set-label", "x")
    label_id, kind = last_entry(file)
    assert code == 0 and kind == "label" and out.startswith(f"leaf: {label_id} ")
    assert "the leaf is the label entry of the branch summary" in out
    code, out, _ = run("checkout", str(file), "leaf", "--json")
    assert code == 0 and json.loads(out)["moved"] is False


def test_navigation_result_has_one_field_for_the_new_leaf(tmp_path: Path) -> None:
    with build_demo_session(tmp_path) as session:
        target = session.path_ids()[3]
        result = session.navigate_tree(target)
        assert result.leaf_id == session.leaf_id == result.marker_id
        assert result.position_id == target != result.leaf_id
        with pytest.deprecated_call(match="position_id"):
            assert result.new_leaf_id == result.position_id


def test_cherry_pick_copies_messages_only(tmp_path: Path) -> None:
    with build_demo_session(tmp_path) as session:
        file = Path(session.file or "")
        marker = session.checkout(session.path_ids()[3])
        state = session.append_custom("ext-state", {"n": 1})
        note = session.append_custom_message("note", "remember the tests")
    before = file.read_bytes()
    for target, why in ((marker, "a checkout marker records a leaf move"),
                        (state, "a custom entry is extension state"),
                        ("@python-rewrite", None)):
        code, out, err = run("cherry-pick", str(file), str(target))
        if why is None:  # a user message: copied
            assert code == 0 and "copied as" in out
            continue
        assert code == 1 and why in err and "copies messages and custom messages" in err
        assert file.read_bytes() == before
    code, out, _ = run("cherry-pick", str(file), str(note), "--json")
    assert code == 0 and json.loads(out)["sourceId"] == note
