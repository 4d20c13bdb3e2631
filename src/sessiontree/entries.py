"""The session header and every version 3 entry type, as one tagged union on ``type``.

Invariants:
* Field order is pi's key order on disk (format-spec.md section 4): ``type, id, parentId, timestamp``
  then the payload, except ``custom`` and ``custom_message`` whose payload comes first.
* Optional keys default to ``msgspec.UNSET`` so that an absent key stays absent when written.
* An entry of a type this library does not know, or one whose fields do not fit its type, is an
  :class:`UnknownEntry` that holds the stored object unchanged; the original line's bytes are
  kept by the session, so nothing is lost either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

import msgspec
from msgspec import UNSET, UnsetType

from .messages import (
    AgentMessage,
    ContentBlock,
    ImageContent,
    SystemMessage,
    TextContent,
    UnknownMessage,
    Usage,
    message_from_builtins,
)

__all__ = [
    "CHECKOUT_CUSTOM_TYPE",
    "CURRENT_VERSION",
    "BranchSummary",
    "Compaction",
    "ContextEdit",
    "ContextReplacement",
    "Custom",
    "CustomMessageEntry",
    "Entry",
    "FileDetails",
    "Label",
    "MessageEntry",
    "ModelChange",
    "SessionHeader",
    "SessionInfo",
    "ThinkingLevelChange",
    "UnknownEntry",
    "UsageEntry",
    "as_json_object",
    "entry_from_builtins",
    "AnyEntry",
]

CURRENT_VERSION = 3
"""The session format version this library writes (pi's ``CURRENT_SESSION_VERSION``)."""

CHECKOUT_CUSTOM_TYPE = "sessiontree.checkout"
"""``customType`` of the marker entry that persists a leaf move (format-spec.md 17 g)."""


class SessionHeader(msgspec.Struct, tag_field="type", tag="session", rename="camel"):
    """The first line of a session file."""

    version: int | UnsetType = CURRENT_VERSION
    id: str = ""
    timestamp: str = ""
    cwd: str = ""
    parent_session: str | UnsetType = UNSET


class FileDetails(msgspec.Struct, rename="camel"):
    """The ``details`` pi writes on compactions and branch summaries: files the summarized part touched."""

    read_files: list[str] = msgspec.field(default_factory=list)
    modified_files: list[str] = msgspec.field(default_factory=list)


class _EntryBase(msgspec.Struct, tag_field="type", rename="camel", frozen=True):
    id: str
    parent_id: str | None
    timestamp: str

    @property
    def type(self) -> str:
        """The entry's ``type`` tag."""
        return str(self.__struct_config__.tag)


class _PayloadFirstBase(msgspec.Struct, tag_field="type", rename="camel", frozen=True, kw_only=True):
    # kw_only on the base puts id, parentId and timestamp after the payload, as pi writes custom entries.
    id: str
    parent_id: str | None
    timestamp: str

    @property
    def type(self) -> str:
        """The entry's ``type`` tag."""
        return str(self.__struct_config__.tag)


class MessageEntry(_EntryBase, tag="message", frozen=True):
    """A conversation message. ``message`` is an :class:`~sessiontree.messages.UnknownMessage` when
    its role or fields do not fit the known types."""

    message: AgentMessage


class ThinkingLevelChange(_EntryBase, tag="thinking_level_change", frozen=True):
    thinking_level: str


class ModelChange(_EntryBase, tag="model_change", frozen=True):
    provider: str
    model_id: str


class Compaction(_EntryBase, tag="compaction", frozen=True):
    """Older entries replaced by a summary. pi 1.x adds ``usage`` (the summarizer's) and
    ``system_message``, the replayed prompt and tools at the compaction, which leads the
    compacted context in place of the system messages it replaced."""

    summary: str
    first_kept_entry_id: str | UnsetType = UNSET
    tokens_before: int | float = 0
    details: Any = UNSET
    usage: Usage | UnsetType = UNSET
    from_hook: bool | UnsetType = UNSET
    system_message: SystemMessage | UnsetType = UNSET


class BranchSummary(_EntryBase, tag="branch_summary", frozen=True):
    from_id: str
    summary: str
    details: Any = UNSET
    usage: Usage | UnsetType = UNSET
    from_hook: bool | UnsetType = UNSET


class UsageEntry(_EntryBase, tag="usage", frozen=True):
    """Model usage that is no assistant message (cache warming and the like, pi 1.x): counted in
    the session's totals, never part of the context. Any ``kind`` is ordinary usage."""

    kind: str
    provider: str
    model: str
    usage: Usage
    note: str | UnsetType = UNSET


class ContextReplacement(msgspec.Struct, frozen=True):
    """What a :class:`ContextEdit` puts in place of its target's content."""

    content: str | list[ContentBlock]


class ContextEdit(_EntryBase, tag="context_edit", frozen=True):
    """An append-only, branch-local change to an earlier entry's model content (pi 1.x):
    ``replacement`` ``None`` leaves the target out of the context, otherwise its content is
    replaced. The target's own line is never changed."""

    target_id: str
    replacement: ContextReplacement | None


class Label(_EntryBase, tag="label", frozen=True):
    target_id: str
    label: str | UnsetType = UNSET


class SessionInfo(_EntryBase, tag="session_info", frozen=True):
    name: str | UnsetType = UNSET


class Custom(_PayloadFirstBase, tag="custom", frozen=True):
    """Extension state: stored in the tree, never sent to the model."""

    custom_type: str
    data: Any = UNSET


class CustomMessageEntry(_PayloadFirstBase, tag="custom_message", frozen=True):
    """A message an extension injects into the model context."""

    custom_type: str
    content: str | list[TextContent | ImageContent]
    display: bool = True
    details: Any = UNSET


class UnknownEntry(msgspec.Struct, frozen=True):
    """An entry this library cannot type; ``data`` is the stored object, unchanged."""

    type: str
    id: str
    parent_id: str | None
    timestamp: str | None
    data: dict[str, Any]


Entry = Union[
    MessageEntry,
    ThinkingLevelChange,
    ModelChange,
    Compaction,
    BranchSummary,
    Label,
    SessionInfo,
    Custom,
    CustomMessageEntry,
    UsageEntry,
    ContextEdit,
]
"""Every typed entry. Code that reads sessions should also expect :class:`UnknownEntry`."""

AnyEntry = Union[Entry, UnknownEntry]

_entry_type: Any = Entry


def as_json_object(value: Any) -> dict[str, Any]:
    """A typed entry or message, an unknown one, or an on-disk dict, as the on-disk dict."""
    if isinstance(value, dict):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (UnknownEntry, UnknownMessage)):
        return value.data
    data = msgspec.to_builtins(value)
    if not isinstance(data, dict):
        raise TypeError(f"{type(value).__name__} is not an entry or a message")
    return data


def entry_from_builtins(data: dict[str, Any]) -> AnyEntry:
    """Type an entry decoded from JSON; an unknown type or an unfitting field gives :class:`UnknownEntry`."""
    try:
        return msgspec.convert(data, _entry_type)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        pass
    parent = data.get("parentId")
    timestamp = data.get("timestamp")
    envelope_fits = (
        isinstance(data.get("id"), str)
        and (parent is None or isinstance(parent, str))
    )
    if envelope_fits and isinstance(timestamp, str) and data.get("type") == "message" \
            and isinstance(data.get("message"), dict):
        return MessageEntry(
            id=data["id"], parent_id=parent, timestamp=timestamp,
            message=message_from_builtins(data["message"]),  # type: ignore[arg-type]
        )
    return UnknownEntry(
        type=str(data.get("type", "")),
        id=str(data.get("id", "")),
        parent_id=parent if isinstance(parent, str) else None,
        timestamp=timestamp if isinstance(timestamp, str) else None,
        data=data,
    )
