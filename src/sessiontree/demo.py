"""A small, realistic branched session: what ``sessiontree demo`` writes and shows."""

from __future__ import annotations

import os

from .entries import FileDetails
from .messages import (
    AssistantMessage,
    Cost,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .session import Session

__all__ = ["build_demo_session"]

def _reply(text: str, *calls: ToolCall, tokens: int = 900) -> AssistantMessage:
    usage = Usage(input=12, output=tokens // 10, cache_read=tokens, cache_write=0,
                  total_tokens=12 + tokens // 10 + tokens,
                  cost=Cost(input=0.000036, output=0.00135, cache_read=0.00027, total=0.001656))
    content: list[TextContent | ThinkingContent | ToolCall] = [TextContent(text=text)] if text else []
    content.extend(calls)
    return AssistantMessage(content=content, usage=usage, stop_reason="toolUse" if calls else "stop",
                            api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5")


def _tool(call_id: str, name: str, output: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name,
                             content=[TextContent(text=output)])


def build_demo_session(directory: str | os.PathLike[str]) -> Session:
    """Write a demo session into ``directory`` and return it, open.

    It has two branches (one abandoned with a branch summary), a label, a compaction and a
    session name, and it opens in pi as it is.
    """
    session = Session.create(directory, cwd=os.path.abspath(directory))
    session.append_model_change("anthropic", "claude-sonnet-4-5")
    session.append_thinking_level_change("medium")
    ask = session.append_message(UserMessage.of("Write a CLI that resizes images in a folder."))
    session.append_message(_reply("I'll start with a Node.js script.", ToolCall(
        id="toolu_01", name="write", arguments={"path": "resize.js", "content": "// sharp…"})))
    session.append_message(_tool("toolu_01", "write", "Wrote resize.js (42 lines)"))
    session.append_message(_reply("resize.js is ready: `node resize.js DIR --width 800`."))
    session.append_message(UserMessage.of("Add a --verbose flag."))
    session.append_message(_reply("Done: --verbose prints each file as it is resized."))
    abandoned = session.leaf_id
    assert abandoned is not None

    # Go back to the first answer and take another road, leaving a summary of the first one.
    first_answer = session.children_ids(ask)[0]
    session.branch_with_summary(
        first_answer,
        "The user explored a different conversation branch before returning here.\n"
        "Summary of that exploration:\n\nA Node.js resize.js with a --verbose flag was written "
        "and then abandoned in favour of Python.",
        FileDetails(read_files=[], modified_files=["resize.js"]),
    )
    python = session.append_message(UserMessage.of("Actually, let's use Python with Pillow."))
    session.set_label(python, "python-rewrite")
    session.append_message(_reply("Switching to Python.", ToolCall(
        id="toolu_02", name="write", arguments={"path": "resize.py", "content": "from PIL …"})))
    session.append_message(_tool("toolu_02", "write", "Wrote resize.py (35 lines)"))
    session.append_message(_reply("resize.py works: `python resize.py DIR --width 800`."))
    kept = session.append_message(UserMessage.of("Add tests."))
    session.append_message(_reply("Added tests/test_resize.py; 4 tests pass.", tokens=1800))
    session.append_compaction(
        "## Goal\nA CLI that resizes every image in a folder.\n\n## Done\n- resize.py (Pillow), "
        "--width flag\n- tests/test_resize.py, 4 passing\n\n## Abandoned\n- a Node.js version",
        kept, tokens_before=48_213,
        details=FileDetails(read_files=[], modified_files=["resize.py", "tests/test_resize.py"]),
    )
    session.append_message(UserMessage.of("Now make it keep the aspect ratio."))
    session.append_message(_reply("resize.py now keeps the aspect ratio when only --width is given."))
    session.set_name("Image resize CLI")
    return session
