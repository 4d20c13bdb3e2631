"""Custom message renderers: how a ``custom_message`` of a given ``customType`` is shown by the
terminal browser (``sessiontree browse``), ``sessiontree chat`` and the HTML export.

An extension registers a renderer with ``api.register_message_renderer(custom_type, renderer)``
(or :func:`register_message_renderer` directly). A renderer takes the
:class:`~sessiontree.messages.CustomMessage` and returns plain text (a ``str``), a
:class:`Rendered` (text or Markdown), or ``None`` to keep the default display.

Invariants:
* Output is never trusted: plain text is escaped everywhere; Markdown goes through each
  viewer's safe Markdown (the HTML export's renderer escapes every character and allows only
  http(s) and mailto links), so a renderer can never put markup or script into a page.
* A renderer that raises or returns something else does not break the viewer: the message is
  shown the default way with a note naming the renderer and the error.
* Renderers of installed packages come from the ``sessiontree.extensions`` entry points
  (:func:`load_installed_renderers`, loaded once, on demand).
"""

from __future__ import annotations

from typing import Any

from ._renderer_registry import (
    MessageRenderer,
    Rendered,
    RendererRegistry,
    register_message_renderer,
    registry,
)
from .messages import CustomMessage

__all__ = [
    "MessageRenderer",
    "Rendered",
    "RendererRegistry",
    "load_installed_renderers",
    "register_message_renderer",
    "registry",
    "render_custom_message",
    "render_entry",
    "rendered_entries",
]


def render_custom_message(message: CustomMessage) -> Rendered | None:
    """The process-wide registry's rendering of ``message`` (installed extensions loaded)."""
    load_installed_renderers()
    return registry.render(message)


def render_entry(entry: Any) -> Rendered | None:
    """The rendering of a ``custom_message`` entry (``None`` for any other entry, or when no
    renderer applies)."""
    from ._time import iso_to_ms
    from .entries import CustomMessageEntry

    if not isinstance(entry, CustomMessageEntry):
        return None
    stamp = iso_to_ms(entry.timestamp)
    message = CustomMessage(custom_type=entry.custom_type, content=entry.content,
                            display=entry.display, details=entry.details,
                            timestamp=stamp if stamp is not None else 0)
    return render_custom_message(message)


def rendered_entries(session: Any, ids: list[str]) -> dict[str, dict[str, str]]:
    """``{entry id: {"text", "format"}}`` for the ``custom_message`` entries among ``ids`` that
    a registered renderer shows (only those lines are decoded)."""
    load_installed_renderers()
    if not registry.types():
        return {}
    out: dict[str, dict[str, str]] = {}
    for entry_id in ids:
        if b'"custom_message"' not in session.raw_line(entry_id):
            continue
        rendered = render_entry(session.entry(entry_id))
        if rendered is not None:
            out[entry_id] = {"text": rendered.text, "format": rendered.format}
    return out


_loaded = False


def load_installed_renderers() -> list[str]:
    """Load the renderers of installed extensions (``sessiontree.extensions`` entry points) into
    :data:`registry`, once per process; returns the extensions' names. An extension that fails
    to load is reported as a warning and skipped."""
    global _loaded
    if _loaded:
        return []
    _loaded = True
    from .agent.extensions import load_installed

    return [name for name, _ in load_installed(renderers_only=True)]
