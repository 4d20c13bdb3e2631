"""What the model sees of each entry: pi 1.5.2's ``buildSessionProjection``.

A context (:mod:`.context`) is a flat list of messages; a projection keeps, for every entry of
the context, the entry it comes from and the messages it contributes after ``context_edit``
entries (none when an edit omits it, or when the entry stands for no message: a usage entry, a
label, an edit itself). A UI shows it beside what was said: which entries the model sees edited
or not at all, and where the system prompt changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from . import _json
from .context import (
    Contribution,
    ModelRef,
    contributions_from_path,
    dict_path,
    typed_messages,
)
from .messages import AgentMessage
from .system_prompt import current_system_message

__all__ = ["ProjectedEntry", "SessionProjection", "build_projection", "projection_from_path"]


def _plain(message: Any) -> Any:
    return _json.loads(message) if isinstance(message, msgspec.Raw) else message


class ProjectedEntry:
    """One context entry: its source entry and the messages it contributes after edits."""

    __slots__ = ("entry_id", "type", "source", "messages", "original", "edit")

    def __init__(self, contribution: Contribution, source: dict[str, Any]) -> None:
        self.entry_id: str = contribution.item.id
        self.type: str = str(source.get("type", ""))
        self.source = source
        """The entry as stored (on-disk dict)."""
        self.messages: list[Any] = [_plain(m) for m in contribution.messages]
        """What it contributes to the context (JSON shape), after its edit."""
        self.original: list[Any] = [_plain(m) for m in contribution.original]
        """What it stands for before any edit (JSON shape)."""
        self.edit: dict[str, Any] | None = contribution.edit
        """The ``context_edit`` entry (on-disk dict) that applies to it: the latest of the
        context's edits of this entry."""

    @property
    def omitted(self) -> bool:
        """An edit leaves the entry out of the context (``replacement: null``)."""
        return self.edit is not None and self.edit.get("replacement") is None

    @property
    def edited(self) -> bool:
        """An edit replaces the entry's content in the context."""
        return self.edit is not None and not self.omitted

    def typed_messages(self) -> list[AgentMessage]:
        """:attr:`messages` typed (one that does not fit its type is an ``UnknownMessage``)."""
        return typed_messages(self.messages)

    def to_builtins(self) -> dict[str, Any]:
        """pi's shape: ``{"sourceEntry": ..., "messages": [...]}``."""
        return {"sourceEntry": self.source, "messages": self.messages}

    def __repr__(self) -> str:
        state = " omitted" if self.omitted else " edited" if self.edited else ""
        return f"ProjectedEntry({self.entry_id!r}, {self.type!r}, {len(self.messages)} messages{state})"


class SessionProjection:
    """Every context entry of one leaf with its messages, the thinking level and the model."""

    __slots__ = ("entries", "_thinking_level", "model")

    def __init__(self, entries: list[ProjectedEntry], thinking_level: Any,
                 model: ModelRef | None) -> None:
        self.entries = entries
        self._thinking_level = thinking_level
        self.model = model

    @property
    def thinking_level(self) -> str:
        level = self._thinking_level
        return level if isinstance(level, str) else "off"

    @property
    def messages(self) -> list[Any]:
        """Every entry's messages in order (JSON shape): the context's messages."""
        return [message for entry in self.entries for message in entry.messages]

    def entry(self, entry_id: str) -> ProjectedEntry | None:
        """The context entry with this id, ``None`` when the entry is not in the context."""
        return next((e for e in self.entries if e.entry_id == entry_id), None)

    def system_message(self) -> dict[str, Any] | None:
        """The system prompt and tools replayed over the context (pi-ai's
        ``getCurrentSystemMessage``), ``None`` when there is none."""
        return current_system_message(self.messages)

    def to_builtins(self) -> dict[str, Any]:
        """pi's ``buildSessionProjection()`` result as plain JSON values:
        ``{"entries", "messages", "thinkingLevel", "model"}``."""
        out: dict[str, Any] = {"entries": [e.to_builtins() for e in self.entries],
                               "messages": self.messages}
        if self._thinking_level is not UNSET:
            out["thinkingLevel"] = self._thinking_level
        out["model"] = msgspec.to_builtins(self.model) if self.model is not None else None
        return out

    def __repr__(self) -> str:
        return f"SessionProjection({len(self.entries)} entries, {len(self.messages)} messages)"


def projection_from_path(path: Sequence[Any], load: Callable[[Any], dict[str, Any]],
                         load_message: Callable[[Any], Any] | None = None
                         ) -> SessionProjection:
    """The projection of a root-to-leaf ``path`` (arguments as
    :func:`~sessiontree.context.context_from_path`)."""
    if not path:
        return SessionProjection([], "off", None)
    contributions, thinking, model = contributions_from_path(path, load, load_message)
    return SessionProjection([ProjectedEntry(c, load(c.item)) for c in contributions],
                             thinking, model)


def build_projection(entries: Sequence[Mapping[str, Any] | msgspec.Struct],
                     leaf_id: str | None | UnsetType = UNSET) -> SessionProjection:
    """pi's ``buildSessionProjection(entries, leafId)`` over entries in file order, without a
    session (``leaf_id`` as :func:`~sessiontree.context.build_context` takes it)."""
    return projection_from_path(dict_path(entries, leaf_id), lambda item: item.data)
