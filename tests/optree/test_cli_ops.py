"""The ``sessiontree ops FILE`` command."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import sessiontree.cli.ops  # noqa: F401  (registers the command until cli/__init__ imports it)
from sessiontree import Session, UserMessage
from sessiontree.cli import cli
from sessiontree.optree import OpTreeBuilder, Usage

from .conftest import Clock, Ids


def session_with_ops(folder: Path) -> tuple[str, OpTreeBuilder]:
    session = Session.create(folder)
    session.append_message(UserMessage(content="hi", timestamp=1))
    root = OpTreeBuilder({"agentId": "root"}, clock=Clock(), ids=Ids(), sink=session)
    turn = root.begin_turn()
    llm = root.begin_op(turn, "llm", {"provider": "anthropic", "model": "claude-sonnet-4"})
    root.account_llm(llm, Usage.from_anthropic({"input_tokens": 1000, "output_tokens": 200,
                                                "cache_read_input_tokens": 300,
                                                "cache_creation_input_tokens": 50}))
    root.end_op(llm)
    child = root.spawn_child(root.begin_op(turn, "session", {"name": "agent__sub"}),
                             agent_id="sub")
    child.begin_op(child.begin_turn(), "tool", {"name": "ls"})
    session.close()
    return session.file or "", root


def test_ops_prints_the_tree_and_the_totals_table(tmp_path: Path) -> None:
    file, _ = session_with_ops(tmp_path)
    result = CliRunner().invoke(cli, ["ops", file])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Run id1 agent=root"
    assert any("LLM 1-1 op=id3 [anthropic:claude-sonnet-4]" in line for line in lines)
    assert any("Run id5 agent=sub" in line for line in lines)
    assert any("TOOL 1-2.1-1" in line and "status=unfinished" in line for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("run "))
    assert lines[header].split() == ["run", "agent", "scope", "in", "cR", "cW", "out", "reasoning",
                                     "cost", "unpriced", "llm", "tools", "agents", "failed"]
    own = lines[header + 2].split()
    assert own[:4] == ["id1", "root", "own", "1000"] and "$0.0062775" in own
    assert lines[header + 3].split()[:2] == ["rollup", "1000"]
    assert lines[header + 4].split()[:3] == ["id5", "sub", "own"]


def test_ops_json(tmp_path: Path) -> None:
    file, _ = session_with_ops(tmp_path)
    result = CliRunner().invoke(cli, ["ops", file, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["version"] == 1 and data["problems"] == []
    (run,) = data["roots"]
    assert run["runId"] == "id1" and run["rollup"]["agentsRun"] == 2
    assert run["own"]["costUsd"] == "0.0062775" and run["own"]["tokensInTotal"] == 1350
    sub = run["turns"][0]["ops"][1]
    assert sub["child"] == "id5" and sub["childRun"]["agentId"] == "sub"
    assert [(t["run"], t["depth"]) for t in data["totals"]] == [("id1", 0), ("id5", 1)]


def test_ops_compat_style(tmp_path: Path) -> None:
    file, _ = session_with_ops(tmp_path)
    result = CliRunner().invoke(cli, ["ops", file, "--style", "compat"])
    assert result.exit_code == 0
    assert result.output.startswith("SessionTree id1 agent=root\n├─ started=")
    assert "|  tokens in=1000 out=200 cR=300 cW=50 tools=1 agents=2 cost=$0.01" in result.output


def test_ops_without_an_operation_tree(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.append_message(UserMessage(content="hi", timestamp=1))
    result = CliRunner().invoke(cli, ["ops", session.file or ""])
    assert result.exit_code == 0
    assert "no operation tree" in result.output
    as_json = CliRunner().invoke(cli, ["ops", session.file or "", "--json"])
    assert json.loads(as_json.output)["roots"] == []


def test_ops_reports_problems_and_missing_files(tmp_path: Path) -> None:
    file, root = session_with_ops(tmp_path)
    with Session.open(file) as session:
        session.append_custom("sessiontree.op.log", {"v": 1, "run": root.run_id, "opId": "ghost",
                                                     "log": {"timestamp": 1}})
    result = CliRunner().invoke(cli, ["ops", file])
    assert result.exit_code == 0
    assert "warning: sessiontree.op.log" in result.stderr and "ghost" in result.stderr
    assert "warning" not in result.stdout
    missing = CliRunner().invoke(cli, ["ops", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code != 0
