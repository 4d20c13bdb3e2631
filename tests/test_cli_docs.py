"""The command as a whole: every subcommand has help and a README entry with its usage line,
read commands take --json, and errors are one line with exit code 1 (2 for usage)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sessiontree.cli import cli

README = (Path(__file__).parents[1] / "README.md").read_text()
COMMANDS = sorted(cli.commands)
READ_COMMANDS = ["context", "export", "ls", "ops", "tree", "verify"]


def test_there_are_commands() -> None:
    assert {"browse", "tree", "export", "context", "label"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help(name: str) -> None:
    command = cli.commands[name]
    assert command.help and command.help.strip(), f"{name} has no help text"
    outcome = CliRunner().invoke(cli, [name, "--help"])
    assert outcome.exit_code == 0 and "Usage:" in outcome.output and name in outcome.output


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_in_the_readme_with_its_usage_line(name: str) -> None:
    match = re.search(rf"^### sessiontree {re.escape(name)}\n(.+)$", README, re.M)
    assert match, f"README.md has no '### sessiontree {name}' entry"
    assert match.group(1).startswith(f"`sessiontree {name}"), \
        f"the README entry of {name} does not start with its usage line"


def test_the_readme_documents_no_command_that_does_not_exist() -> None:
    documented = set(re.findall(r"^### sessiontree (\S+)$", README, re.M))
    assert documented <= set(COMMANDS)


@pytest.mark.parametrize("name", READ_COMMANDS)
def test_read_commands_take_json(name: str) -> None:
    options = {opt for p in cli.commands[name].params if isinstance(p, click.Option)
               for opt in p.opts}
    assert "--json" in options


def test_shell_completion_is_documented() -> None:
    assert "_SESSIONTREE_COMPLETE=bash_source" in README
    assert "_SESSIONTREE_COMPLETE" in str(cli.help)
    outcome = CliRunner().invoke(cli, [], env={"_SESSIONTREE_COMPLETE": "bash_source"},
                                 prog_name="sessiontree")
    assert outcome.exit_code == 0 and "complete" in outcome.output


@pytest.mark.parametrize("name", ["tree", "context", "export", "browse", "label", "verify"])
def test_a_missing_file_is_one_line_and_a_nonzero_exit(name: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.jsonl")
    args = {"label": [missing, "x", "y"]}.get(name, [missing])
    outcome = CliRunner().invoke(cli, [name, *args])
    assert outcome.exit_code in (1, 2)
    assert "Traceback" not in outcome.output
    lines = [line for line in outcome.stderr.splitlines() if line.startswith("Error")]
    assert len(lines) == 1 and "missing.jsonl" in lines[0]


def test_a_usage_error_exits_2() -> None:
    outcome = CliRunner().invoke(cli, ["tree"])
    assert outcome.exit_code == 2
