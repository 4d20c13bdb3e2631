"""No empty branch summaries (issue 12, point 4), checked against pi 0.73.1 itself.

pi stores "No content to summarize" as a branch summary when the branch being left holds no
message (only a checkout marker, labels, custom or settings entries): its generateBranchSummary
answers so before calling a model, and its convertToLlm then sends that text to the model as a
user turn. sessiontree writes no summary in that case (the move is persisted as without one,
and pi agrees on the leaf and context of the file), and never sends pi's placeholder to a model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from click.testing import CliRunner

from sessiontree import AssistantMessage, Session, UserMessage
from sessiontree.cli import cli
from sessiontree.context import NO_CONTENT_SUMMARY
from sessiontree.testing.pi import run_node_script

from .test_pi_interop import Pi, assert_same, pi  # noqa: F401 (fixture)

PROBE = Path(__file__).parent / "pi" / "branch_summary_probe.mjs"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def types(path: Path) -> list[str]:
    return [json.loads(line)["type"] for line in path.read_text("utf-8").splitlines()[1:]]


def pi_branch_summary(pi: Pi, file: Path, leaf: str, target: str) -> dict[str, Any]:
    answer = run_node_script(PROBE, str(pi.modules), payload={"file": str(file), "leaf": leaf,
                                                                "target": target})
    assert isinstance(answer, dict)
    return answer


def test_leaving_a_branch_without_messages_writes_no_summary(tmp_path: Path,
                                                             pi: Pi) -> None:  # noqa: F811
    with Session.create(tmp_path, cwd="/w") as session:
        session.append_message(UserMessage.of("Write a resize script"))
        first = session.append_message(AssistantMessage.of("resize.js", provider="p", model="m"))
        session.append_message(UserMessage.of("Add a flag"))
        second = session.append_message(AssistantMessage.of("--width", provider="p", model="m"))
        file = Path(session.file or "")
    assert run("checkout", str(file), first)[0] == 0  # a marker under `first`
    assert run("label", str(file), "leaf", "parked")[0] == 0
    with Session.open(file) as session:
        session.append_custom("ext-state", {"n": 1})
        left = session.leaf_id
    assert left is not None
    # pi itself would store its placeholder here (and later send it to the model)
    answer = pi_branch_summary(pi, file, left, second)
    assert answer["types"] == ["custom", "label", "custom"]
    assert answer["result"] == {"summary": NO_CONTENT_SUMMARY}
    before = types(file)
    code, out, _ = run("checkout", str(file), second, "--summarize")
    assert code == 0 and "no summary: the branch you left holds no message to summarize" in out
    assert types(file) == [*before, "custom"]  # only the checkout marker
    assert "branch_summary" not in types(file)
    (answer_pi,) = pi.read([file])
    assert_same(file, answer_pi)  # pi agrees on the leaf and on every context
    with Session.open(file) as session:
        assert session.build_context().messages[-1].role == "assistant"


def test_pis_placeholder_is_read_as_pi_reads_it_but_never_sent(tmp_path: Path,
                                                               pi: Pi) -> None:  # noqa: F811
    (written,) = pi.write([{"dir": str(tmp_path), "cwd": "/w", "ops": [
        ["user", "Write a resize script"], ["assistant", "resize.js", "p", "m"],
        ["branch_summary", 1, NO_CONTENT_SUMMARY], ["user", "Now add tests"],
        ["assistant", "Tests added", "p", "m"]]}])
    file = Path(written["file"])
    (answer_pi,) = pi.read([file])
    assert_same(file, answer_pi)  # build_context stays pi's buildSessionContext
    with Session.open(file) as session:
        context = session.build_context()
        assert [m.role for m in context.messages] == [
            "user", "assistant", "branchSummary", "user", "assistant"]
        sent = context.to_llm()
        leaf = session.leaf_id
    assert leaf is not None
    pis_llm = pi_branch_summary(pi, file, leaf, leaf)["llm"]
    assert any(NO_CONTENT_SUMMARY in json.dumps(m) for m in pis_llm)  # pi sends it
    assert [m.role for m in sent] == ["user", "assistant", "user", "assistant"]
    assert not any(NO_CONTENT_SUMMARY.encode() in msgspec.json.encode(m) for m in sent)
    assert len(pis_llm) == len(sent) + 1
