"""``sessiontree compact`` on real files: pi's own files (generated and written by pi itself) gain
one compaction entry and still load in pi with the same context; nothing is written on failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessiontree import Session
from sessiontree.cli import cli
from sessiontree.testing.generate import generate_session
from sessiontree.testing.pi import ensure_pi, run_node_script

from .fake_llm import OPENAI_KEY, FakeLLM
from .test_pi_interop import PROBE


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def pi_modules() -> Path:
    return ensure_pi()


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    out = tmp_path / "gen.jsonl"
    generate_session(out, 800, branch_every=100, compact_every=300, seed=21)
    return out


def pi_written(pi_modules: Path, folder: Path) -> Path:
    """A session written by pi's own SessionManager."""
    ops: list[list[object]] = [["model", "anthropic", "claude-sonnet-4-5"], ["thinking", "medium"]]
    for i in range(8):
        ops += [["user", f"Question {i}: " + "why " * 120], ["assistant", f"Answer {i}: " + "because " * 100,
                                                           "anthropic", "claude-sonnet-4-5"]]
    ops += [["label", 2, "start"], ["custom_message", "reminder", "be brief", True], ["user", "last"]]
    (path,) = run_node_script(PROBE, str(pi_modules), "write",
                              payload=[{"dir": str(folder), "cwd": "/home/dev/proj", "ops": ops}])
    return Path(path)


def pi_context(pi_modules: Path, file: Path) -> dict[str, object]:
    (result,) = run_node_script(PROBE, str(pi_modules), "read", payload=[str(file)])
    assert result["unchanged"]
    return result  # type: ignore[no-any-return]


def test_compact_a_generated_pi_file(generated: Path, pi_modules: Path) -> None:
    before = generated.read_bytes()
    code, out, err = run("compact", str(generated), "--keep-recent-tokens", "3000")
    assert code == 0, err
    assert "compaction" in out
    after = generated.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    entry = json.loads(after.splitlines()[-1])
    assert entry["type"] == "compaction" and entry["fromHook"] is False
    assert set(entry["details"]) == {"readFiles", "modifiedFiles"}
    pi = pi_context(pi_modules, generated)
    with Session.open(generated) as session:
        assert pi["leaf"] == session.leaf_id == entry["id"]
        assert pi["context"] == session.build_context().to_builtins()
    messages = pi["context"]["messages"]  # type: ignore[index]
    assert messages[0]["role"] == "compactionSummary" and messages[0]["summary"] == entry["summary"]


def test_compact_a_file_pi_wrote(pi_modules: Path, tmp_path: Path) -> None:
    file = pi_written(pi_modules, tmp_path)
    code, out, err = run("compact", str(file), "--keep-recent-tokens", "200", "--json")
    assert code == 0, err
    shown = json.loads(out)
    entry = shown["entry"]
    assert shown == {"compacted": True, "reason": None, "entry": entry, "plan": None}
    assert entry["type"] == "compaction"
    assert "Question 0" in entry["summary"]
    pi = pi_context(pi_modules, file)
    with Session.open(file) as session:
        assert pi["context"] == session.build_context().to_builtins()
        assert pi["leaf"] == entry["id"]


def test_dry_run_writes_nothing(generated: Path) -> None:
    before = generated.read_bytes()
    code, out, _ = run("compact", str(generated), "--keep-recent-tokens", "3000", "--dry-run", "--json")
    assert code == 0
    shown = json.loads(out)
    prep = shown["plan"]
    assert shown == {"compacted": False, "reason": None, "entry": None, "plan": prep}
    assert prep["messagesToSummarize"] > 0 and isinstance(prep["firstKeptEntryId"], str)
    code, out, _ = run("compact", str(generated), "--keep-recent-tokens", "3000", "--dry-run")
    assert code == 0 and "would summarize" in out
    assert generated.read_bytes() == before


def test_nothing_to_compact_exits_0_with_one_message_and_writes_nothing(tmp_path: Path) -> None:
    s = Session.create(tmp_path, cwd="/p")
    s.append_message({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    s.close()
    file = Path(str(s.file))
    before = file.read_bytes()
    expected = (f"{file}: nothing to compact: keep_recent_tokens=20000 keeps the whole path; "
                "nothing was written\n")
    assert run("compact", str(file)) == (0, expected, "")
    assert run("compact", str(file), "--dry-run") == (0, expected, "")
    code, out, _ = run("compact", str(file), "--json")
    assert code == 0 and json.loads(out) == {  # one shape for every outcome (issue 20 point 5)
        "compacted": False, "reason": "nothing to compact: keep_recent_tokens=20000 keeps the "
                                      "whole path", "entry": None, "plan": None}
    assert file.read_bytes() == before
    # after a compaction, compacting again says so the same way
    for _ in range(3):
        with Session.open(file) as session:
            session.append_message({"role": "assistant", "content": [
                {"type": "text", "text": "long answer " * 400}]})
            session.append_message({"role": "user", "content": "and more " * 400})
    assert run("compact", str(file), "--keep-recent-tokens", "100")[0] == 0
    again = f"{file}: nothing to compact: the path already ends in a compaction; nothing was written\n"
    assert run("compact", str(file), "--keep-recent-tokens", "100") == (0, again, "")
    assert run("compact", str(file), "--keep-recent-tokens", "100", "--dry-run") == (0, again, "")


def test_compact_with_a_model_from_the_environment(generated: Path, server: FakeLLM) -> None:
    env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": f"{server.url}/v1"}
    code, out, err = run("compact", str(generated), "--keep-recent-tokens", "3000",
                         "--model", "openai:gpt-4.1-mini", "--json", env=env)
    assert code == 0, err
    entry = json.loads(out)["entry"]
    assert entry["summary"].startswith("## Goal\n- ")
    assert "summarized by the fake model" in entry["summary"]
    assert server.requests and server.requests[0].body["model"] == "gpt-4.1-mini"


def test_model_without_a_key_is_a_clear_error(generated: Path) -> None:
    before = generated.read_bytes()
    code, _, err = run("compact", str(generated), "--model", "anthropic:claude-sonnet-4-5",
                       env={"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""})
    assert code == 1 and "ANTHROPIC_API_KEY" in err
    assert generated.read_bytes() == before
