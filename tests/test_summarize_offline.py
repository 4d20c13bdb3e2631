"""The offline extractive summarizer: what a reader needs (goals, constraints, decisions, files,
open questions, last state) on a hand-written session and on generated pi sessions; always
within the budget; deterministic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree import (
    AssistantMessage,
    BashExecutionMessage,
    Session,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)
from sessiontree.compaction import js_length, prepare_compaction
from sessiontree.context import entry_message
from sessiontree.summarize import (
    CancelToken,
    ExtractiveSummarizer,
    Summarizer,
    SummaryCancelled,
    SummaryRequest,
)
from sessiontree.summarize.offline import _sentences
from sessiontree.testing.generate import generate_session


def reply(text: str, *calls: ToolCall, stop: str | None = None) -> AssistantMessage:
    content: list[Any] = [TextContent(text=text)] if text else []
    content.extend(calls)
    return AssistantMessage(content=content, stop_reason=stop or ("toolUse" if calls else "stop"))  # type: ignore[arg-type]


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def result(call_id: str, name: str, text: str, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)],
                             is_error=error)


CSV_SESSION: list[Any] = [
    UserMessage.of("The CSV export in src/export.py drops rows when a customer name has accents. "
                   "Fix it and add a regression test. Don't change the public API of export_csv()."),
    reply("Let me look at the exporter and its tests.", call("1", "read", path="src/export.py"),
          call("2", "read", path="tests/test_export.py")),
    result("1", "read", "def export_csv(rows, path):\n    with open(path, 'w') as f: ..."),
    result("2", "read", "def test_basic(): ..."),
    reply("The writer opens the file with the platform default encoding, so names with accents "
          "raise UnicodeEncodeError and the row is skipped. I'll open it with encoding='utf-8' "
          "instead.", call("3", "edit", path="src/export.py", edits=[])),
    result("3", "edit", "Successfully replaced 1 block(s) in src/export.py."),
    reply("", call("4", "write", path="tests/test_export_unicode.py", content="def test(): ...")),
    result("4", "write", "Successfully wrote 120 bytes"),
    reply("", call("5", "bash", command="pytest -q")),
    result("5", "bash", "FAILED tests/test_export_unicode.py::test_unicode_names", error=True),
    reply("The test compared bytes with a str; fixing the test.",
          call("6", "edit", path="tests/test_export_unicode.py", edits=[])),
    result("6", "edit", "ok"),
    reply("", call("7", "bash", command="pytest -q")),
    result("7", "bash", "12 passed in 0.4s"),
    reply("Fixed: export_csv now writes UTF-8 and tests/test_export_unicode.py covers accents."),
    UserMessage.of("Should we add a BOM so Excel opens it correctly?"),
    reply("I decided against a BOM by default because it breaks other CSV readers; I added an "
          "opt-in excel=True parameter instead.", call("8", "edit", path="src/export.py", edits=[])),
    result("8", "edit", "ok"),
    reply("Added excel=True (writes utf-8-sig). Default output is unchanged."),
    UserMessage.of("Great. Can you also document the excel flag in README.md? Which section fits best?"),
    reply("", call("9", "read", path="README.md")),
    result("9", "read", "# Project\n## Usage\n..."),
]


def summarize(messages: list[Any], **options: Any) -> str:
    options.setdefault("max_tokens", 2048)
    return ExtractiveSummarizer().summarize(SummaryRequest(messages=messages, **options))


def section(text: str, heading: str) -> str:
    body = text.split(f"{heading}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def test_is_a_summarizer() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)


def test_hand_written_session_reads_well() -> None:
    text = summarize(CSV_SESSION, purpose="compaction")
    goal = section(text, "## Goal")
    assert "The CSV export in src/export.py drops rows" in goal
    assert "Fix it and add a regression test" in goal
    assert "document the excel flag in README.md" in goal
    assert "Great." not in goal  # filler is dropped
    assert "Don't change the public API of export_csv()" in section(text, "## Constraints & Preferences")
    progress = section(text, "## Progress")
    assert "changed src/export.py (2 edits), tests/test_export_unicode.py (2 edits)" in progress
    assert "`pytest -q`" in progress
    assert "export_csv now writes UTF-8" in progress
    decisions = section(text, "## Key Decisions")
    assert "decided against a BOM" in decisions
    # a decision keeps the sentence that gives its reason
    assert "platform default encoding" in decisions and "encoding='utf-8'" in decisions
    files = section(text, "## Files")
    assert "read: tests/test_export.py, README.md" in files
    assert "modified: src/export.py, tests/test_export_unicode.py" in files
    open_questions = section(text, "## Open Questions")
    assert "Which section fits best?" in open_questions
    assert "FAILED" not in open_questions  # fixed in the same turn's later steps... and an old turn
    last = section(text, "## Last State")
    assert "document the excel flag in README.md" in last and "reading README.md" in last


def test_unresolved_errors_of_the_last_turn_are_open() -> None:
    messages = [*CSV_SESSION[:15], UserMessage.of("Run the whole suite."),
                reply("", call("x", "bash", command="pytest")),
                result("x", "bash", "ImportError: cannot import name 'export_tsv'", error=True)]
    text = summarize(messages)
    assert "unresolved: bash: ImportError: cannot import name 'export_tsv'" in section(text, "## Open Questions")
    assert "running `pytest` (failed: ImportError" in section(text, "## Last State")


def test_aborted_reply_and_user_commands_are_reported() -> None:
    messages = [UserMessage.of("Deploy it"),
                BashExecutionMessage(command="make deploy", output="error: no target", exit_code=2),
                reply("partial", stop="aborted")]
    text = summarize(messages)
    assert "`make deploy` exited with code 2" in text
    assert "stopped early (aborted)" in section(text, "## Last State")


def test_previous_summary_is_carried_over() -> None:
    previous = ("## Goal\n- Migrate the job queue from Redis to Postgres\n\n## Key Decisions\n"
                "- **SKIP LOCKED**: no extra dependency\n\n<read-files>\nold.py\n</read-files>")
    text = summarize(CSV_SESSION[:5], previous_summary=previous, purpose="compaction")
    earlier = section(text, "## Earlier")
    assert "Goal: Migrate the job queue from Redis to Postgres" in earlier
    assert "SKIP LOCKED" in earlier
    assert "<read-files>" not in text
    assert "The CSV export" in section(text, "## Goal")


def test_earlier_summaries_in_the_messages() -> None:
    messages = [{"role": "branchSummary", "fromId": "a", "timestamp": 0,
                 "summary": "The user explored a different conversation branch before returning "
                            "here.\nSummary of that exploration:\n\n## Goal\nTry SQLite first"},
                *CSV_SESSION[:3]]
    text = summarize(messages, purpose="branch")
    assert "an abandoned branch: Try SQLite first" in section(text, "## Earlier")


def test_turn_prefix_sections() -> None:
    text = summarize(CSV_SESSION[:8], purpose="turn_prefix", max_tokens=1000)
    assert text.startswith("## Original Request\n- The CSV export in src/export.py")
    assert "## Early Progress" in text and "## Context for Suffix" in text
    assert "modified: src/export.py, tests/test_export_unicode.py" in text


def test_instructions_come_first_and_focus_the_goals() -> None:
    text = summarize(CSV_SESSION, instructions="Excel BOM handling")
    assert text.startswith("## Focus\n- Excel BOM handling")
    assert section(text, "## Goal").startswith("- Should we add a BOM so Excel opens it correctly?")


def test_empty_and_unknown_messages() -> None:
    text = summarize([])
    assert "(no request from the user in this part)" in text
    text = summarize([UnknownMessage(data={"role": "weird", "content": 5}),
                      {"role": "custom", "customType": "reminder", "content": "use tabs", "display": True}])
    assert "(reminder) use tabs" in text


def test_cancel() -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(SummaryCancelled):
        ExtractiveSummarizer().summarize(SummaryRequest(messages=CSV_SESSION), token)


def test_sentences_keep_colons_and_drop_list_markers() -> None:
    assert _sentences("Fixed: it works. - second item\n* third") == ["Fixed: it works.", "second item", "third"]
    assert _sentences("see ```code. more``` after.") == ["see [code] after."]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3000), st.sampled_from(["compaction", "branch", "turn_prefix"]),
       st.booleans())
def test_always_within_budget_and_deterministic(max_tokens: int, purpose: str, long: bool) -> None:
    messages = CSV_SESSION * (6 if long else 1)
    request = SummaryRequest(messages=messages, purpose=purpose, max_tokens=max_tokens,  # type: ignore[arg-type]
                             previous_summary="## Goal\n- " + "earlier work 😀 " * 200,
                             instructions="csv")
    first = ExtractiveSummarizer().summarize(request)
    assert first.strip()
    assert js_length(first) <= 4 * max_tokens
    assert ExtractiveSummarizer().summarize(request) == first


# -- generated pi sessions ----------------------------------------------------------------------

GENERATED = [(1, 600, 0), (2, 2500, 120), (3, 4000, 300)]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("offline")
    files = []
    for seed, entries, branch_every in GENERATED:
        out = folder / f"gen{seed}.jsonl"
        generate_session(out, entries, branch_every=branch_every, compact_every=0, seed=seed)
        files.append(out)
    return files


def first_words(text: str, n: int = 4) -> str:
    return " ".join(" ".join(text.split()).split(" ")[:n])


@pytest.mark.parametrize("index", range(len(GENERATED)))
def test_generated_sessions(generated: list[Path], index: int) -> None:
    from sessiontree._json import loads

    with Session.open(generated[index]) as session:
        for leaf in session.leaves()[-3:]:
            path = [loads(session.raw_line(i)) for i in session.path_ids(leaf)]
            prep = prepare_compaction(path, keep_recent_tokens=4000)
            if prep is None or not prep.messages_to_summarize:
                continue
            messages = prep.messages_to_summarize
            for purpose, budget in (("compaction", int(0.8 * 16384)), ("branch", 2048), ("branch", 300)):
                request = SummaryRequest(messages=list(messages), purpose=purpose,  # type: ignore[arg-type]
                                         max_tokens=budget, read_files=prep.file_details.read_files,
                                         modified_files=prep.file_details.modified_files)
                text = ExtractiveSummarizer().summarize(request)
                assert js_length(text) <= 4 * budget
                assert text == ExtractiveSummarizer().summarize(request)
                users = [m for m in messages if m.role == "user"]
                texts = [" ".join(b.text for b in u.content if isinstance(b, TextContent))  # type: ignore[union-attr]
                         for u in users]
                texts = [t for t in texts if t.strip()]
                assert texts, "a generated history has user messages"
                goal = section(text, "## Goal")
                # the first request (the session's goal) is always shown, at least its start
                assert first_words(texts[0], 3) in " ".join(goal.split())
                assert "## Last State" in text
                if budget >= 2048:
                    assert first_words(texts[-1], 3) in " ".join(section(text, "## Last State").split())
                    modified = prep.file_details.modified_files
                    if modified:
                        assert modified[0] in section(text, "## Files")
                    assert "## Key Decisions" in text and "## Open Questions" in text


def test_generated_branch_summary_through_entries(generated: list[Path]) -> None:
    """The entries a branch summary covers (with custom messages and bash runs) summarize."""
    from sessiontree._json import loads

    with Session.open(generated[1]) as session:
        leaf = session.leaves()[0]
        entries = [loads(session.raw_line(i)) for i in session.path_ids(leaf)][-120:]
        messages = [m for m in (entry_message(e) for e in entries) if m is not None]
        text = summarize(messages, purpose="branch")
        assert js_length(text) <= 4 * 2048
        assert "## Goal" in text and "## Last State" in text
