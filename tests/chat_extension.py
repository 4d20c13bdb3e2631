"""An extension for the ``sessiontree chat`` tests: a tool, commands, and a renderer."""

from __future__ import annotations

from typing import Any

from sessiontree.agent import ExtensionAPI, tool
from sessiontree.renderers import Rendered

FILES = {"a.py": "print('a')\n"}


@tool
def read(path: str) -> str:
    """Read a file.

    Args:
        path: the file's path.
    """
    return FILES[path]


def setup(api: ExtensionAPI) -> None:
    api.register_tool(read)
    api.register_command("hello", lambda ctx: ctx.output(f"hello, {ctx.args or 'world'}"),
                         "Say hello")

    def note(ctx: Any) -> None:
        api.send_message({"customType": "chat.note", "content": ctx.args}, trigger_turn=True)

    api.register_command("note", note, "Send a note to the model")
    api.register_message_renderer("chat.note", lambda m: Rendered(f"**NOTE** {m.content}", "markdown"))
