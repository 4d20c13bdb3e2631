"""Where custom message renderers are registered: the registry the viewers read
(:mod:`sessiontree.renderers`) and extensions write to (:mod:`sessiontree.agent.extensions`).

Invariants:
* It knows neither the viewers nor the agent, so both can import it: the viewers load installed
  extensions' renderers through the agent's extension loader, and the agent registers here.
* A renderer that raises or returns something else gives the default text with a note naming
  the renderer and the error; it never breaks the viewer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal, Union

import msgspec

from .messages import CustomMessage, message_text

__all__ = ["MessageRenderer", "Rendered", "RendererRegistry", "register_message_renderer",
           "registry"]


class Rendered(msgspec.Struct, frozen=True):
    """A renderer's output: ``text`` shown as plain text, or as safe Markdown."""

    text: str
    format: Literal["text", "markdown"] = "text"


MessageRenderer = Callable[[CustomMessage], Union[str, Rendered, None]]


class RendererRegistry:
    """Renderers by ``customType`` (the last registration wins)."""

    def __init__(self) -> None:
        self._renderers: dict[str, MessageRenderer] = {}
        self._lock = threading.Lock()

    def register(self, custom_type: str, renderer: MessageRenderer) -> Callable[[], None]:
        """Use ``renderer`` for ``custom_type``; returns a function that removes it.

        Raises:
            TypeError: ``renderer`` is not callable or ``custom_type`` is empty.
        """
        if not callable(renderer) or not custom_type:
            raise TypeError("register_message_renderer needs a customType and a callable")
        with self._lock:
            self._renderers[custom_type] = renderer

        def unregister() -> None:
            with self._lock:
                if self._renderers.get(custom_type) is renderer:
                    del self._renderers[custom_type]

        return unregister

    def get(self, custom_type: str) -> MessageRenderer | None:
        return self._renderers.get(custom_type)

    def types(self) -> list[str]:
        return sorted(self._renderers)

    def render(self, message: CustomMessage) -> Rendered | None:
        """The registered renderer's output for ``message``, or ``None`` (no renderer, or it
        chose the default). A failing renderer gives the default text with a note."""
        renderer = self.get(message.custom_type)
        if renderer is None:
            return None
        try:
            out: Any = renderer(message)
        except Exception as exc:  # noqa: BLE001 - a viewer must survive a broken extension
            return Rendered(f"{message_text(message)}\n[renderer for {message.custom_type!r} "
                            f"failed: {type(exc).__name__}: {exc}]")
        if out is None or isinstance(out, Rendered):
            return out
        if isinstance(out, str):
            return Rendered(out)
        return Rendered(f"{message_text(message)}\n[renderer for {message.custom_type!r} returned "
                        f"{type(out).__name__}, not str or Rendered]")


registry = RendererRegistry()
"""The process-wide registry the viewers read."""


def register_message_renderer(custom_type: str, renderer: MessageRenderer) -> Callable[[], None]:
    """:meth:`RendererRegistry.register` on the process-wide :data:`registry`."""
    return registry.register(custom_type, renderer)
