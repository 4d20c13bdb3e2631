"""The interactive side of ``sessiontree chat``: input, streamed display, built-in commands.

Two front ends share :class:`ChatApp`: a terminal one (prompt_toolkit: history, multi-line
input with Alt+Enter or a trailing backslash, a bottom status line; rich: streamed Markdown)
and a plain one for pipes (one prompt per line, plain text out). The agent runs in a worker
thread so that Ctrl+C cancels the run cleanly (the run's cancel token; nothing half-written)
instead of tearing the event loop down.

Built-in commands: ``/tree`` (the browser, then the conversation goes on from where you went;
the chosen message's text is offered as the next prompt), ``/fork``, ``/label TEXT``,
``/compact [INSTRUCTIONS]``, ``/name NAME``, ``/model [SPEC]``, ``/export [PATH]``, ``/help``,
``/quit``; every command an extension registers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from ..agent import AgentSession, RunResult
from ..entries import CustomMessageEntry
from ..messages import CustomMessage, ToolResultMessage, message_text
from ..compaction import NothingToCompact
from ..describe import KIND_NAMES, entry_kind, entry_summary
from ..providers import StreamDelta, model_from_spec, model_spec
from ..renderers import render_custom_message
from ..session import Session
from ..views import shown_leaf
from ..summarize import CancelToken, Summarizer

__all__ = ["BUILTINS", "ChatApp", "PlainInput", "TerminalInput"]

BUILTINS: dict[str, str] = {
    "tree": "Browse the session tree and go to another entry (asks whether to summarize)",
    "fork": "Copy the current path into a new session file and continue there",
    "label": "Label the current entry: /label TEXT (empty clears)",
    "compact": "Summarize older history into a compaction: /compact [INSTRUCTIONS]",
    "name": "Name the session: /name NAME",
    "model": "Show or switch the model: /model openai:gpt-4.1 | anthropic:claude-sonnet-4-5",
    "export": "Write the session as an HTML page: /export [PATH]",
    "help": "List the commands",
    "quit": "Leave (also /exit, Ctrl+D)",
}


class PlainInput:
    """Prompts read line by line from a stream (a pipe): no history, no editing."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def read(self, status: str, default: str = "") -> str | None:
        line = self.stream.readline()
        return None if not line else line.rstrip("\n")


class TerminalInput:
    """prompt_toolkit input: history in a file, Enter sends, Alt+Enter (or a line ending in a
    backslash) starts a new line, and the status line at the bottom."""

    def __init__(self, history_file: str | None) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("enter")
        def _send(event: Any) -> None:
            buffer = event.current_buffer
            if buffer.text.endswith("\\"):
                buffer.text = buffer.text[:-1]
                buffer.cursor_position = len(buffer.text)
                buffer.insert_text("\n")
            else:
                buffer.validate_and_handle()

        @bindings.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        if history_file:
            os.makedirs(os.path.dirname(history_file), mode=0o700, exist_ok=True)
        history = FileHistory(history_file) if history_file else InMemoryHistory()
        self.prompt: Any = PromptSession(history=history, multiline=True, key_bindings=bindings)

    def read(self, status: str, default: str = "") -> str | None:
        try:
            return str(self.prompt.prompt("› ", default=default, bottom_toolbar=status,
                                          prompt_continuation="  "))
        except EOFError:
            return None
        except KeyboardInterrupt:
            return ""


class _Stream:
    """Shows a reply as it streams: Markdown for text, dim thinking, tool calls as they come."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live: Live | None = None
        self.key: tuple[str, int] | None = None
        self.text = ""
        self.lock = threading.Lock()

    def __call__(self, delta: StreamDelta) -> None:
        with self.lock:
            key = (delta.kind, delta.index)
            if key != self.key:
                self._close()
                self.key = key
                if delta.kind == "tool_call":
                    self.console.print(Text(f"→ {delta.name} ", style="bold cyan"), end="")
                elif delta.kind == "thinking":
                    self.console.print(Text("thinking: ", style="dim italic"), end="")
                else:
                    self.live = Live(Markdown(""), console=self.console, refresh_per_second=12,
                                     vertical_overflow="visible")
                    self.live.start()
            self.text += delta.text
            if self.live is not None:
                self.live.update(Markdown(self.text))
            else:
                self.console.print(Text(delta.text, style="dim" if delta.kind == "thinking"
                                        else "cyan"), end="")

    def _close(self) -> None:
        if self.live is not None:
            self.live.update(Markdown(self.text))
            self.live.stop()
            self.live = None
            if not self.console.is_terminal:  # a pipe gets the final render without a newline
                self.console.print()
        elif self.key is not None:
            self.console.print()
        self.key, self.text = None, ""

    def close(self) -> None:
        with self.lock:
            self._close()


class ChatApp:
    """One chat: an agent over a session, a console to show it, an input to read from.

    Args:
        agent: the agent (its session is the chat's).
        console: where output goes.
        reader: :class:`TerminalInput` or :class:`PlainInput`.
        summarizer: for ``/tree`` and ``/compact`` (default: offline).
        summarizer_name: how to name it in the browser.
        model_options: passed to :func:`~sessiontree.providers.model_from_spec` by ``/model``.
        interactive: whether ``/tree`` can open the full-screen browser.
    """

    def __init__(self, agent: AgentSession, console: Console, reader: Any, *,
                 summarizer: Summarizer | None = None, summarizer_name: str = "offline summarizer",
                 model_options: dict[str, Any] | None = None, interactive: bool = False) -> None:
        self.agent = agent
        self.console = console
        self.reader = reader
        self.summarizer = summarizer
        self.summarizer_name = summarizer_name
        self.model_options = model_options or {}
        self.interactive = interactive
        self.next_default = ""
        self.failed = 0
        """Turns that failed (the model's error, or an exception): the chat exits 1."""
        self._stream: _Stream | None = None
        self._shown: set[str] = set()
        self._subscribe(agent.session)
        self._mark_shown()

    def _mark_shown(self) -> None:
        """Custom messages already on the path are history: not shown again."""
        self._shown.update(e.id for e in self.session.path() if isinstance(e, CustomMessageEntry))

    @property
    def session(self) -> Session:
        return self.agent.session  # type: ignore[no-any-return]

    # -- display -----------------------------------------------------------------------------

    def _subscribe(self, session: Session) -> None:
        session.events.on("tool_result", self._show_tool_result)
        session.events.on("turn_start", lambda event: self.show_new_custom_messages())

    def _show_tool_result(self, event: Any) -> None:
        if self._stream is not None:
            self._stream.close()
        result: ToolResultMessage = event.result
        text = message_text(result).strip().splitlines()
        first = (text[0][:100] + (" …" if len(text) > 1 or len(text[0]) > 100 else "")) if text else ""
        style = "red" if result.is_error else "green"
        self.console.print(Text(f"← {result.tool_name}: {first}", style=style))

    @property
    def leaf(self) -> str | None:
        """The leaf as the user sees it: the last conversation entry on the path (never the
        operation tree's bookkeeping written after a reply)."""
        return shown_leaf(self.session.path_ids(), self.session.entry)

    def status(self) -> str:
        """The status line: model, tokens and cost so far, where the leaf is."""
        totals = self.agent.totals
        model = self.agent.model
        name = model_spec(model) if model is not None else "no model"
        where = self.leaf or "(start)"
        return (f" {name} · ↑{totals.input + totals.cache_read:,} ↓{totals.output:,} tokens · "
                f"${totals.cost:.4f} · leaf {where} · /help")

    def show_custom(self, message: CustomMessage) -> None:
        if not message.display:
            return
        rendered = render_custom_message(message)
        title = Text(f"[{message.custom_type}] ", style="magenta")
        if rendered is not None and rendered.format == "markdown":
            self.console.print(title)
            self.console.print(Markdown(rendered.text))
        else:
            self.console.print(title + Text(rendered.text if rendered else message_text(message)))

    def show_new_custom_messages(self, since: str | None = None) -> None:
        """Show the custom messages written on the path since the entry ``since`` (or since
        the last ones shown)."""
        new: list[CustomMessage] = []
        for entry in reversed(self.session.path()):
            if entry.id == since or entry.id in self._shown:
                break
            if isinstance(entry, CustomMessageEntry):
                self._shown.add(entry.id)
                new.append(CustomMessage(custom_type=entry.custom_type, content=entry.content,
                                         display=entry.display, details=entry.details))
        for message in reversed(new):
            self.show_custom(message)

    # -- running -----------------------------------------------------------------------------

    def run_agent(self, work: Callable[[Callable[[StreamDelta], None], CancelToken], Any]) -> Any:
        """Run ``work(on_delta, cancel)`` in a worker thread; Ctrl+C cancels it cleanly."""
        stream = self._stream = _Stream(self.console)
        token = CancelToken()
        leaf = self.session.leaf_id
        outcome: dict[str, Any] = {}

        finished = threading.Event()

        def target() -> None:
            try:
                outcome["result"] = work(stream, token)
            except BaseException as exc:  # noqa: BLE001 - shown to the user below
                outcome["error"] = exc
            finally:
                finished.set()

        # (an Event, not Thread.join: a join interrupted by Ctrl+C can leave is_alive() wrong)
        threading.Thread(target=target, name="sessiontree-chat-run", daemon=True).start()
        while not finished.is_set():
            try:
                finished.wait(0.05)
            except KeyboardInterrupt:
                token.cancel()
                stream.close()
                self.console.print(Text("cancelling…", style="yellow"))
        stream.close()
        if "error" in outcome:
            error = outcome["error"]
            self.failed += 1
            self.console.print(Text(f"error: {error}", style="bold red"))
            return None
        result = outcome.get("result")
        self.show_new_custom_messages(leaf)
        if isinstance(result, RunResult):
            if result.stop == "aborted":
                self.console.print(Text("cancelled: nothing half-written was kept", style="yellow"))
            elif result.stop in ("error", "length", "max_turns"):
                self.failed += result.stop == "error"
                self.console.print(Text(f"stopped ({result.stop}): {result.error or ''}".rstrip(": "),
                                        style="bold red"))
            self.console.print(Text(self.status(), style="dim"))
        return result

    def send(self, text: str) -> Any:
        return self.run_agent(lambda on_delta, cancel: self.agent.prompt(
            text, on_delta=on_delta, cancel=cancel))

    def loop(self) -> None:
        """Read and answer until the input ends or ``/quit``."""
        while True:
            line = self.reader.read(self.status(), self.next_default)
            self.next_default = ""
            if line is None:
                return
            if not line.strip():
                continue
            if line.startswith("/"):
                if self.command(line) is False:
                    return
                continue
            self.send(line)

    # -- commands ----------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run a slash command; False means leave."""
        name, _, args = line[1:].strip().partition(" ")
        args = args.strip()
        if name in ("quit", "exit"):
            return False
        handler = getattr(self, f"cmd_{name}", None)
        if name in BUILTINS and handler is not None:
            try:
                handler(args)
            except Exception as exc:  # noqa: BLE001 - a failed command must not end the chat
                self.console.print(Text(f"/{name} failed: {exc}", style="bold red"))
            return True
        if name in self.agent.commands:
            self.run_agent(lambda on_delta, cancel: self.agent.run_command(
                line, lambda text: self.console.print(text), on_delta=on_delta, cancel=cancel))
            return True
        self.console.print(Text(f"unknown command /{name}; /help lists them", style="red"))
        return True

    def cmd_help(self, args: str) -> None:
        self.console.print(Text("Commands:", style="bold"))
        for name, description in BUILTINS.items():
            self.console.print(f"  /{name:<10} {description}")
        for name, command in sorted(self.agent.commands.items()):
            origin = f" ({command.extension})" if command.extension else ""
            self.console.print(f"  /{name:<10} {command.description}{origin}")
        self.console.print("Enter sends; Alt+Enter or a trailing \\ adds a line; Ctrl+C cancels "
                           "a reply; Ctrl+D leaves.")

    def _switch(self, session: Session) -> None:
        """Continue in ``session`` (same handlers: the bus moves with the conversation)."""
        old = self.session
        session.events = old.events
        self.agent.session = session
        if old is not session:
            old.close()  # closing twice is harmless
        self._mark_shown()

    def cmd_tree(self, args: str) -> None:
        path = self.session.file
        if path is None:
            self.console.print(Text("/tree needs a session file (this one is in memory)", style="red"))
            return
        if not self.interactive:
            self.console.print(Text("/tree needs a terminal", style="red"))
            return
        from .tui import BrowseApp

        app = BrowseApp(path, summarizer=self.summarizer, summarizer_name=self.summarizer_name,
                        leave_on_navigate=True)
        self.session.close()  # release the writer's lock: the browser writes where you go
        try:
            app.run()
        finally:
            self._switch(Session.open(path))
        if app.editor_text:
            self.next_default = app.editor_text
        self.console.print(Text(self.where_next(), style="dim"))

    def where_next(self) -> str:
        """Where the next message goes, in words."""
        leaf = self.leaf
        if leaf is None:
            return "the next message starts the conversation (a new root)"
        entry = self.session.entry(leaf)
        kind = entry_kind(entry)
        return (f"the next message goes after {leaf} ({KIND_NAMES.get(kind, kind)}: "
                f"{entry_summary(entry, 60)})")

    def cmd_fork(self, args: str) -> None:
        leaf = self.session.leaf_id
        if leaf is None:
            self.console.print(Text("nothing to fork yet", style="red"))
            return
        fork = self.session.create_branched_session(leaf)
        self._switch(fork)
        if fork.file is not None and not os.path.exists(fork.file):  # pi 1.5.2's rule: no file
            self.console.print(f"forked into {fork.file} (written with the next message)")
        else:
            self.console.print(f"forked into {fork.file or '(memory)'}")

    def cmd_label(self, args: str) -> None:
        leaf = self.leaf
        if leaf is None:
            self.console.print(Text("nothing to label yet", style="red"))
            return
        self.session.set_label(leaf, args or None)
        self.console.print(f"label of {leaf}: {args or '(cleared)'}")

    def cmd_compact(self, args: str) -> None:
        try:
            entry = self.session.compact(self.summarizer, instructions=args or None)
        except NothingToCompact as nothing:  # not a failure: it is as compact as it gets
            self.console.print(Text(f"{nothing.reason}; nothing was written", style="dim"))
            return
        self.console.print(f"compacted: {entry.tokens_before:,} tokens before, kept from "
                           f"{entry.first_kept_entry_id}")

    def cmd_name(self, args: str) -> None:
        self.session.set_name(args or None)
        self.console.print(f"name: {args or '(cleared)'}")

    def cmd_model(self, args: str) -> None:
        if not args:
            self.console.print(self.status().split("·")[0].strip())
            return
        self.agent.set_model(model_from_spec(args, **self.model_options))
        self.console.print(f"model: {args}")

    def cmd_export(self, args: str) -> None:
        from .._fs import atomic_write
        from ..export.html import export_html

        default = os.path.splitext(os.path.basename(self.session.file or f"{self.session.id}.jsonl"))[0]
        target = args or f"{default}.html"
        atomic_write(target, export_html(self.session))
        self.console.print(f"wrote {target}")
