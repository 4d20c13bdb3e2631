"""Extensions: the seed-002 extension API on an agent, in Python style.

An extension is a plain object with a ``setup(api)`` method, or a function ``extension(api)``;
a package ships one as an entry point in the ``sessiontree.extensions`` group. ``api`` is an
:class:`ExtensionAPI`:

* ``api.on(event, handler)`` — the session's event bus (``before_agent_start``,
  ``turn_start``, ``turn_end``, ``tool_call``, ``tool_result``, ``context``, and the session
  events);
* ``api.send_message(message, trigger_turn=False)`` — a ``custom_message`` entry (queued
  until the end of the current turn while the agent runs), optionally starting a turn;
* ``api.append_entry(custom_type, data)`` — extension state (a ``custom`` entry, never sent to
  the model);
* ``api.register_command(name, handler, description)`` — a slash command (``/name args``);
  the handler gets a :class:`CommandContext` and may return a prompt to send;
* ``api.register_message_renderer(custom_type, renderer)`` — how viewers show its messages
  (:mod:`sessiontree.renderers`);
* ``api.register_tool(tool)`` — a tool the model may call.

An API without an agent (used by the viewers to collect renderers from installed extensions)
takes every registration and ignores what needs a running agent.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from msgspec import UNSET

from .._renderer_registry import MessageRenderer, register_message_renderer
from .events import ExtensionMessage
from .tools import Tool

if TYPE_CHECKING:
    from ..session import Session
    from .session import AsyncAgentSession

__all__ = [
    "ENTRY_POINT_GROUP",
    "CommandContext",
    "CommandHandler",
    "Extension",
    "ExtensionAPI",
    "ExtensionWarning",
    "RegisteredCommand",
    "apply_extension",
    "load_installed",
]

ENTRY_POINT_GROUP = "sessiontree.extensions"


class ExtensionWarning(UserWarning):
    """An installed extension could not be loaded; it was skipped."""


@dataclass(frozen=True)
class CommandContext:
    """What a command handler gets.

    Attributes:
        args: everything after ``/name``, stripped.
        agent: the agent.
        session: its session.
        output: where a command writes lines for the user (the chat prints them).
    """

    args: str
    agent: AsyncAgentSession
    session: Session
    output: Callable[[str], None]


CommandHandler = Callable[[CommandContext], Union[str, None, Awaitable[Union[str, None]]]]


@dataclass(frozen=True)
class RegisteredCommand:
    """A slash command: ``/name args`` runs ``handler``; ``description`` is listed by ``/help``."""

    name: str
    handler: CommandHandler
    description: str = ""
    extension: str = ""


@runtime_checkable
class Extension(Protocol):
    """An extension object: ``setup`` registers what it adds."""

    def setup(self, api: ExtensionAPI) -> None: ...


class ExtensionAPI:
    """The object an extension's ``setup`` receives (seed 002's ``pi``).

    Args:
        agent: the agent (``None``: registrations only, for viewers).
        name: the extension's name (for messages).
    """

    def __init__(self, agent: AsyncAgentSession | None, name: str = "") -> None:
        self.agent = agent
        self.name = name

    @property
    def session(self) -> Session:
        """The agent's session.

        Raises:
            RuntimeError: there is no agent.
        """
        return self._agent().session

    def _agent(self) -> AsyncAgentSession:
        if self.agent is None:
            raise RuntimeError(f"extension {self.name or '?'}: no agent session here (the "
                               f"extension was loaded only for its renderers)")
        return self.agent

    def on(self, event: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Subscribe to an event of the session's bus; returns a function that unsubscribes."""
        if self.agent is None:
            return lambda: None
        return self.agent.session.events.on(event, handler)

    def send_message(self, message: ExtensionMessage | Mapping[str, Any],
                     trigger_turn: bool = False) -> None:
        """Write a custom message (while the agent runs: at the end of the current turn); with
        ``trigger_turn``, the model answers it (now, or when the running command returns).

        Args:
            message: an :class:`ExtensionMessage`, or a dict with ``custom_type`` (or
                ``customType``), ``content``, ``display`` and ``details``.
            trigger_turn: start a turn after writing it.
        """
        self._agent().queue_message(_as_message(message), trigger_turn)

    def append_entry(self, custom_type: str, data: Any = UNSET) -> str:
        """Store extension state as a ``custom`` entry (never sent to the model); returns its id."""
        return self.session.append_custom(custom_type, data)

    def register_command(self, name: str, handler: CommandHandler, description: str = "") -> None:
        """Add the slash command ``/name``.

        Raises:
            ValueError: the name is empty or has spaces.
        """
        name = name.lstrip("/")
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"a command name is one word, not {name!r}")
        if self.agent is not None:
            self.agent.commands[name] = RegisteredCommand(name, handler, description, self.name)

    def register_message_renderer(self, custom_type: str, renderer: MessageRenderer) -> None:
        """Show ``custom_type`` messages with ``renderer`` (in chat, browse and HTML exports)."""
        register_message_renderer(custom_type, renderer)

    def register_tool(self, tool: Tool) -> None:
        """Let the model call ``tool``."""
        if self.agent is not None:
            self.agent.tools[tool.name] = tool


def _as_message(message: ExtensionMessage | Mapping[str, Any]) -> ExtensionMessage:
    if isinstance(message, ExtensionMessage):
        return message
    custom_type = message.get("custom_type", message.get("customType"))
    if not isinstance(custom_type, str) or not custom_type:
        raise ValueError("a message needs a custom_type")
    return ExtensionMessage(custom_type=custom_type, content=message.get("content", ""),
                            display=bool(message.get("display", True)),
                            details=message.get("details", UNSET))


def apply_extension(extension: Any, api: ExtensionAPI) -> None:
    """Run an extension's setup against ``api``.

    Raises:
        TypeError: ``extension`` has no ``setup`` and is not callable.
    """
    setup = getattr(extension, "setup", None)
    if callable(setup):
        setup(api)
    elif callable(extension):
        extension(api)
    else:
        raise TypeError(f"an extension is an object with setup(api) or a function of api, "
                        f"not {type(extension).__name__}")


def load_installed(agent: AsyncAgentSession | None = None, *, renderers_only: bool = False,
                   names: Iterable[str] | None = None) -> list[tuple[str, Any]]:
    """Load the extensions installed as ``sessiontree.extensions`` entry points and set them up
    against ``agent`` (or only for their registrations, with ``renderers_only``). One that
    fails is skipped with an :class:`ExtensionWarning`.

    Args:
        agent: the agent to set them up for.
        renderers_only: set them up without an agent.
        names: only these entry point names.

    Returns:
        ``(name, extension)`` of each one loaded.
    """
    from importlib.metadata import entry_points

    wanted = set(names) if names is not None else None
    loaded = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if wanted is not None and point.name not in wanted:
            continue
        try:
            extension = point.load()
            apply_extension(extension, ExtensionAPI(None if renderers_only else agent, point.name))
        except Exception as exc:  # noqa: BLE001 - one broken package must not stop the others
            warnings.warn(ExtensionWarning(f"extension {point.name} ({point.value}) could not be "
                                           f"loaded: {type(exc).__name__}: {exc}"), stacklevel=2)
            continue
        loaded.append((point.name, extension))
    return loaded
