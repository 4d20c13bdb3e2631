"""Building the model context from a root-to-leaf path, exactly as pi 1.5.2's
``buildSessionContext`` (which agrees with pi 0.73.1's on every file 0.73.1 could write).

Rules (format-spec.md section 10, FORMAT-pi1.md): over the whole path the last
``thinking_level_change`` sets the thinking level (default ``"off"``) and the later of
``model_change`` and assistant messages sets the model. The *context entries* are the path
without a compaction; with one, the last compaction, then the path entries before it starting
at its ``firstKeptEntryId`` (none if that id is not there) less their system messages, then
everything after it. Message entries emit their stored message unchanged (a null or missing
``content`` becomes ``""`` for system messages, ``[]`` for user, assistant and tool results);
``custom_message`` and non-empty ``branch_summary`` entries emit synthesized messages; the
leading compaction emits its ``systemMessage`` checkpoint (when it has one) and its summary, a
compaction inside the kept range nothing; everything else (``usage``, ``context_edit``,
``custom``, labels, names, settings) nothing. Last, among the context entries the latest
``context_edit`` of each target applies to the target's messages: ``replacement: null`` leaves
them out, otherwise the content of its user, assistant, tool result and custom messages is
replaced (a string turned into one text block for assistant and tool results).

Only the entries the result needs are decoded, so building costs O(depth) envelope steps plus
the payloads of the emitted messages. A session remembers the contexts of its last few leaves
(:class:`ContextMemo`): building again at the same leaf costs a lookup, and at a child of a
remembered leaf one step (:func:`extend_context`), which is what an agent loop does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, NamedTuple, Protocol, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from . import _json
from ._time import iso_to_ms
from ._tree import TreeIndex, path_to_root
from .errors import InvalidEntry
from .messages import (
    AgentMessage,
    BranchSummaryMessage,
    TextContent,
    UnknownMessage,
    UserMessage,
    message_from_builtins,
)

__all__ = [
    "EMPTY_CONTEXT",
    "NO_CONTENT_SUMMARY",
    "ContextMemo",
    "Contribution",
    "ModelRef",
    "SessionContext",
    "build_context",
    "context_from_path",
    "contributions_from_path",
    "dict_path",
    "edit_replacement",
    "convert_to_llm",
    "apply_edit",
    "compaction_messages",
    "context_edits",
    "entry_message",
    "extend_context",
    "is_placeholder_summary",
    "kept_after_compaction",
    "typed_messages",
]

T = TypeVar("T")

NO_CONTENT_SUMMARY = "No content to summarize"
"""The placeholder pi 0.73.1 stores as a branch summary when the abandoned entries hold no
message (only markers, labels or custom entries). It says nothing, so :func:`convert_to_llm`
never sends it to a model, and sessiontree never writes it."""


class ModelRef(msgspec.Struct, rename="camel", omit_defaults=True):
    """The model in effect at a leaf; a key the source entry lacks stays absent."""

    provider: str | UnsetType = UNSET
    model_id: str | UnsetType = UNSET


class PathItem(Protocol):
    """What context building needs of a path entry: its envelope, and its payload on demand."""

    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def type(self) -> str: ...
    @property
    def role(self) -> str | None: ...

    # Optional: ``has_content``, true when the envelope saw the message's top-level
    # ``content`` there and not null (a store's records: :meth:`Scanner.entry_records`).


Edits = dict[str, dict[str, Any]]
"""The edits of a context: target id -> the ``context_edit`` entry (on-disk dict) that applies."""


class SessionContext:
    """The messages to send to a model from one leaf, with the thinking level and model.

    ``messages`` are typed; :meth:`to_builtins` and :meth:`to_json` give pi's exact JSON shape
    (format-spec.md section 11), stored messages unchanged, unknown fields included.

    A session keeps the contexts it built for its last few leaves; the typed messages of a
    context are shared with the session's copy (as pi shares its message objects), so treat them
    as read-only: copy a message before changing it. The lists themselves are the caller's own.
    """

    __slots__ = ("_data", "_typed", "_thinking_level", "model", "_shared", "_edits")

    def __init__(self, data: list[Any], thinking_level: Any,
                 model: ModelRef | None, typed: list[AgentMessage] | None = None,
                 edits: Edits | None = None) -> None:
        self._data = data  # stored messages stay raw JSON until someone looks at them
        self._typed = typed
        self._thinking_level = thinking_level
        self.model = model
        self._shared: SessionContext | None = None
        self._edits = edits  # kept so that a later entry an earlier edit targets is edited too

    def share(self) -> SessionContext:
        """A context for a caller: its own lists, typed messages decoded once through this one."""
        copy = SessionContext(list(self._data), self._thinking_level, self.model,
                              list(self._typed) if self._typed is not None else None,
                              self._edits)
        copy._shared = self
        return copy

    @property
    def thinking_level(self) -> str:
        level = self._thinking_level
        return level if isinstance(level, str) else "off"

    @property
    def messages(self) -> list[AgentMessage]:
        """Typed messages; one that does not fit its type is an :class:`UnknownMessage`."""
        if self._typed is None:
            shared = self._shared
            self._typed = list(shared.messages) if shared is not None else \
                typed_messages(self._data)
        return self._typed

    def copy_messages(self) -> list[AgentMessage]:
        """Typed messages decoded anew: the caller's own to change (hooks get these)."""
        return typed_messages(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def to_builtins(self) -> dict[str, Any]:
        """``{"messages", "thinkingLevel", "model"}`` as plain JSON values, in pi's shape."""
        messages = [_json.loads(m) if isinstance(m, msgspec.Raw) else m for m in self._data]
        return self._shape(messages)

    def _shape(self, messages: list[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"messages": messages}
        if self._thinking_level is not UNSET:
            out["thinkingLevel"] = self._thinking_level
        out["model"] = msgspec.to_builtins(self.model) if self.model is not None else None
        return out

    def to_json(self) -> str:
        """The JSON text pi's ``JSON.stringify(buildSessionContext(...))`` would print, as a
        ``str`` (:meth:`to_json_bytes` gives it UTF-8 encoded; :meth:`to_builtins` as Python
        values)."""
        return self.to_json_bytes().decode("utf-8")

    def to_json_bytes(self) -> bytes:
        """:meth:`to_json` as UTF-8 bytes, built without decoding: stored messages are copied
        as their stored bytes."""
        placeholder = self._shape([])
        head, _, tail = _json.dumps(placeholder).partition(b'"messages":[]')
        body = b",".join(bytes(m) if isinstance(m, msgspec.Raw) else _json.dumps(m)
                         for m in self._data)
        return head + b'"messages":[' + body + b"]" + tail

    def to_llm(self, *, collapse: bool = False) -> list[AgentMessage]:
        """The messages as a model receives them (:func:`convert_to_llm`): system messages
        stay where they are, as pi's ``convertToLlm`` leaves them. With ``collapse``, for a
        model API without mid-conversation system messages, the system prompt and tools
        replayed from all of them lead and the others are dropped (pi-ai's
        ``collapseSystemMessages``; the request builders of :mod:`sessiontree.providers` do
        this themselves)."""
        messages = convert_to_llm(self.messages)
        if not collapse:
            return messages
        from .system_prompt import collapse_system_messages

        collapsed = collapse_system_messages(messages)
        if collapsed and isinstance(collapsed[0], dict):
            collapsed[0] = message_from_builtins(collapsed[0])
        return collapsed

    def __repr__(self) -> str:
        return (f"SessionContext({len(self._data)} messages, thinking_level={self.thinking_level!r}, "
                f"model={self.model!r})")


def typed_messages(data: Sequence[Any]) -> list[AgentMessage]:
    """Typed messages of stored payloads: raw JSON ones in one decoder call when they all fit."""
    if data and all(isinstance(m, msgspec.Raw) for m in data):
        try:
            return _messages_decoder().decode(b"[" + b",".join(data) + b"]")
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass  # one of them is unusual: each on its own below
    return [_typed_message(m) for m in data]


@functools.cache
def _messages_decoder() -> msgspec.json.Decoder[list[AgentMessage]]:
    return msgspec.json.Decoder(list[AgentMessage])


def _typed_message(data: dict[str, Any] | msgspec.Raw) -> AgentMessage:
    if isinstance(data, msgspec.Raw):
        try:
            return _message_decoder().decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            data = _json.loads(data)
    return message_from_builtins(data)  # type: ignore[return-value]


@functools.cache
def _message_decoder() -> msgspec.json.Decoder[AgentMessage]:
    return msgspec.json.Decoder(AgentMessage)


def _truthy(value: Any) -> bool:
    """JavaScript truthiness of a JSON value."""
    if isinstance(value, (dict, list)):
        return True
    return bool(value)


def _ms(timestamp: Any) -> int | None:
    return iso_to_ms(timestamp)


def _pick(source: Mapping[str, Any], out: dict[str, Any], *keys: str) -> None:
    for key in keys:
        if key in source:
            out[key] = source[key]


def entry_message(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The message an entry (on-disk dict) stands for: a ``message`` entry's own, or the one pi
    synthesizes for ``custom_message``, ``branch_summary`` and ``compaction`` entries (the
    summary; a compaction's ``systemMessage`` is :func:`compaction_messages`'); ``None`` for
    entries that stand for no message. (Context building skips empty branch summaries and
    every compaction but the last; compaction and branch summaries count them all.)"""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) else None
    fields = {"custom_message": ("custom", ("customType", "content", "display", "details")),
              "branch_summary": ("branchSummary", ("summary", "fromId")),
              "compaction": ("compactionSummary", ("summary", "tokensBefore"))}.get(str(kind))
    if fields is None:
        return None
    role, keys = fields
    msg: dict[str, Any] = {"role": role}
    _pick(entry, msg, *keys)
    if kind == "custom_message" and msg.get("content") is None:  # pi 1.5.2: content ?? []
        msg["content"] = []
        for key in ("display", "details"):  # back behind content, in pi's key order
            if key in msg:
                msg[key] = msg.pop(key)
    msg["timestamp"] = _ms(entry.get("timestamp"))
    return msg


def compaction_messages(entry: Mapping[str, Any]) -> list[Any]:
    """What a compaction (on-disk dict) leading a context emits: its ``systemMessage``
    checkpoint when it has one (any truthy value, as pi tests it), then its summary."""
    summary = entry_message(entry)
    checkpoint = entry.get("systemMessage")
    return [checkpoint, summary] if _truthy(checkpoint) else [summary]


_EMPTY_CONTENT = {"system": "", "user": [], "assistant": [], "toolResult": []}
"""What a null or missing ``content`` of these roles becomes in the context (pi 1.5.2)."""
_CONTENT_KEY = b'"content":'


def _visibly_has_content(raw: bytes) -> bool:
    """Whether stored message bytes certainly hold a non-null top-level ``content``: the first
    ``"content":`` comes before any nested object or array (so it is a top-level key: inside a
    string its quotes would be escaped), is not ``null``, and no ``"content":null`` follows.
    ``False`` only means "decode to know"."""
    at = raw.find(_CONTENT_KEY)
    if at <= 0 or raw.find(b"{", 1, at) >= 0 or raw.find(b"[", 1, at) >= 0:
        return False
    start = at + len(_CONTENT_KEY)
    return raw[start:start + 1] != b"n" and raw.find(b'"content":null', start) < 0


def _stored_message(message: dict[str, Any] | msgspec.Raw, role: str | None
                    ) -> dict[str, Any] | msgspec.Raw:
    """A message entry's message as the context holds it: unchanged, unless its role is one
    whose null or missing ``content`` pi 1.5.2 fills in. Stored bytes that visibly have a
    non-null top-level ``content`` are kept without decoding."""
    empty = _EMPTY_CONTENT.get(role) if isinstance(role, str) else None
    if empty is None:
        return message
    if isinstance(message, msgspec.Raw):
        raw = bytes(message)
        if _visibly_has_content(raw):
            return message
        data = _json.loads(raw)
        if not isinstance(data, dict) or data.get("content") is not None:
            return message
        return {**data, "content": type(empty)()}
    if message.get("content") is not None:
        return message
    return {**message, "content": type(empty)()}


_MISSING: Any = object()
_EDITABLE = frozenset({"user", "assistant", "toolResult", "custom"})


def apply_edit(messages: list[Any], edit: Mapping[str, Any]) -> list[Any]:
    """pi's ``projectContextEntry``: an entry's messages after a ``context_edit`` (on-disk
    dict). ``replacement: null`` gives none; otherwise user, assistant, tool result and custom
    messages get the replacement's ``content`` (a string as one text block for assistant and
    tool results; no content key when the replacement has none), other messages stay."""
    replacement = edit.get("replacement")
    if replacement is None:
        return []
    content = replacement.get("content", _MISSING) if isinstance(replacement, dict) else _MISSING
    out: list[Any] = []
    for message in messages:
        data = _json.loads(message) if isinstance(message, msgspec.Raw) else message
        role = data.get("role") if isinstance(data, dict) else None
        if role not in _EDITABLE:
            out.append(message)
            continue
        changed = dict(data)
        if content is _MISSING:
            changed.pop("content", None)
        elif isinstance(content, str) and role in ("assistant", "toolResult"):
            changed["content"] = [{"type": "text", "text": content}]
        else:
            changed["content"] = content
        out.append(changed)
    return out


def context_edit(target_id: str, replacement: Any, *, entry_type: str, role: str | None,
                 on_branch: bool, path: str | None = None) -> dict[str, Any]:
    """The ``targetId`` and ``replacement`` of a ``context_edit`` of an entry of ``entry_type``
    (a message's ``role``), checked as pi 1.5.2's ``appendContextEdit`` checks them
    (``on_branch``: the target is on the path the edit is appended to).

    Raises:
        InvalidEntry: the target is not on the branch, gives no editable content (only user,
            assistant, tool result and custom messages do), or the replacement holds no
            string or list content.
    """
    if not on_branch:
        raise InvalidEntry(f"entry {target_id} is not on the current branch", path=path,
                           entry_id=target_id)
    editable = "custom" if entry_type == "custom_message" else \
        role if entry_type == "message" else None
    if editable not in ("user", "assistant", "toolResult", "custom"):
        raise InvalidEntry(f"entry {target_id} does not contribute editable model content",
                           path=path, entry_id=target_id)
    return {"targetId": target_id, "replacement": edit_replacement(editable, replacement)}


def edit_replacement(role: str, replacement: Any) -> dict[str, Any] | None:
    """The ``replacement`` a ``context_edit`` of an entry of ``role`` stores, as pi 1.5.2's
    ``appendContextEdit`` writes it: ``None`` (omit), else ``{"content": ...}`` with a string
    turned into one text block for assistant messages and tool results.

    Args:
        role: the target's role (``custom`` for a custom message entry).
        replacement: ``None``, the new content (a string or a list of blocks), or a mapping
            (or :class:`~sessiontree.entries.ContextReplacement`) holding it as ``content``.

    Raises:
        InvalidEntry: the replacement is not ``None`` and holds no string or list content.
    """
    if replacement is None:
        return None
    if isinstance(replacement, msgspec.Struct):
        replacement = msgspec.to_builtins(replacement)
    content = replacement.get("content") if isinstance(replacement, Mapping) else replacement
    if isinstance(content, (list, tuple)):
        content = [msgspec.to_builtins(b) if isinstance(b, msgspec.Struct) else b for b in content]
    elif not isinstance(content, str):
        raise InvalidEntry("a context edit's replacement is None or holds string or list content")
    if isinstance(content, str) and role in ("assistant", "toolResult"):
        content = [{"type": "text", "text": content}]
    return {"content": content}


def _emit(item: PathItem, load: Callable[[Any], dict[str, Any]],
          load_message: Callable[[Any], dict[str, Any] | msgspec.Raw | None],
          out: list[Any], edits: Edits | None = None) -> None:
    """Add what a context entry other than the leading compaction emits, after its edit."""
    kind = item.type
    found: list[Any] = []
    if kind == "message":
        message = load_message(item)
        if message is not None:  # a store's record may know its content is there
            found.append(message if getattr(item, "has_content", False)
                         else _stored_message(message, item.role))
    elif kind == "custom_message" or kind == "branch_summary":
        data = load(item)
        if kind == "custom_message" or _truthy(data.get("summary")):
            found.append(entry_message(data))
    if not found:
        return
    edit = edits.get(item.id) if edits else None
    out.extend(found if edit is None else apply_edit(found, edit))


def context_edits(entries: Sequence[Any], load: Callable[[Any], dict[str, Any]]) -> Edits:
    """The edits that apply among these context entries: for each target, the latest
    ``context_edit`` (one without a ``replacement`` key, on which pi fails, is not an edit)."""
    edits: Edits = {}
    for item in entries:
        if item.type == "context_edit":
            data = load(item)
            target = data.get("targetId")
            if isinstance(target, str) and "replacement" in data:
                edits[target] = data
    return edits


def _last_positions(path: Sequence[Any]) -> tuple[int, int, int]:
    """Where the path's last thinking level change, model source (a ``model_change`` or an
    assistant message) and compaction are (-1: none). A path that knows (a database path, see
    :class:`PositionedPath`) answers without being read; otherwise it is read back from the leaf
    until all three are found."""
    known = getattr(path, "last_positions", None)
    if known is not None:
        return known()  # type: ignore[no-any-return]
    thinking = model = compaction = -1
    for index in range(len(path) - 1, -1, -1):
        item = path[index]
        kind = item.type
        if thinking < 0 and kind == "thinking_level_change":
            thinking = index
        elif model < 0 and (kind == "model_change" or (kind == "message" and
                                                       item.role == "assistant")):
            model = index
        elif compaction < 0 and kind == "compaction":
            compaction = index
        if thinking >= 0 and model >= 0 and compaction >= 0:
            break
    return thinking, model, compaction


class PositionedPath(Protocol):
    """A path that knows the positions :func:`context_from_path` looks for."""

    def last_positions(self) -> tuple[int, int, int]:
        """The last thinking level change, model source and compaction (-1: none)."""
def _emits(item: PathItem) -> bool:
    """Whether an entry may emit a message (its payload decides for branch summaries)."""
    return item.type in ("message", "custom_message", "branch_summary")


def _is_system(item: PathItem) -> bool:
    return item.type == "message" and item.role == "system"


class _ModelFields(msgspec.Struct):
    provider: Any = UNSET
    model: Any = UNSET


_model_fields_decoder = msgspec.json.Decoder(_ModelFields)


def _assistant_model(item: PathItem, load: Callable[[Any], dict[str, Any]],
                     load_message: Callable[[Any], dict[str, Any] | msgspec.Raw | None]
                     ) -> ModelRef:
    """The model an assistant message entry sets: its ``provider`` and ``model``."""
    message = load_message(item)
    if isinstance(message, msgspec.Raw):
        try:
            fields = _model_fields_decoder.decode(message)
            return ModelRef(provider=fields.provider, model_id=fields.model)
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass
    data = load(item).get("message", {})
    return ModelRef(provider=data.get("provider", UNSET), model_id=data.get("model", UNSET))


def _change_model(data: Mapping[str, Any]) -> ModelRef:
    return ModelRef(provider=data.get("provider", UNSET), model_id=data.get("modelId", UNSET))


_item_id = attrgetter("id")


def kept_after_compaction(path: Sequence[T], compaction_at: int, first_kept: Any,
                          id_of: Callable[[T], Any],
                          is_system: Callable[[T], bool] | None = None) -> list[T]:
    """The entries of ``path`` a context built after its compaction at ``compaction_at`` goes
    on with, in order: from the entry ``first_kept`` names up to the compaction (none when that
    id is not before it on the path) less the system messages ``is_system`` tells (the
    compaction's checkpoint replaces them), then everything after the compaction."""
    start = next((i for i in range(compaction_at - 1, -1, -1) if id_of(path[i]) == first_kept),
                 compaction_at)  # ids on a path are unique: searching back finds the same one
    kept = path[start:compaction_at]
    if is_system is not None:
        kept = [item for item in kept if not is_system(item)]
    return [*kept, *path[compaction_at + 1:]]


class _Plan(NamedTuple):
    """What building a context from a path decided before emitting any message."""

    thinking: Any
    model: ModelRef | None
    compaction: Any  # the leading compaction's path item, or None
    leading: list[Any]  # what it emits before edits: checkpoint and summary
    emitted: Sequence[Any]  # the other context entries, in order
    edits: Edits


def _plan(path: Sequence[Any], load: Callable[[Any], dict[str, Any]],
          load_message: Callable[[Any], dict[str, Any] | msgspec.Raw | None],
          prefetch: Callable[[Sequence[Any]], None] | None = None) -> _Plan:
    thinking_at, model_at, compaction_at = _last_positions(path)
    thinking: Any = load(path[thinking_at]).get("thinkingLevel", UNSET) if thinking_at >= 0 \
        else "off"
    emitted: Sequence[Any] = path
    leading: list[Any] = []
    compaction = None
    if compaction_at >= 0:
        compaction = path[compaction_at]
        compaction_data = load(compaction)
        emitted = kept_after_compaction(path, compaction_at,
                                        compaction_data.get("firstKeptEntryId"), _item_id,
                                        _is_system)
        leading = compaction_messages(compaction_data)
    edits = context_edits(emitted, load)
    if prefetch is not None:
        prefetch([item for item in emitted if _emits(item)])
    model: ModelRef | None = None
    if model_at >= 0:
        source = path[model_at]
        model = _change_model(load(source)) if source.type == "model_change" else \
            _assistant_model(source, load, load_message)
    return _Plan(thinking, model, compaction, leading, emitted, edits)


def context_from_path(
    path: Sequence[Any], load: Callable[[Any], dict[str, Any]],
    load_message: Callable[[Any], dict[str, Any] | msgspec.Raw | None] | None = None,
    prefetch: Callable[[Sequence[Any]], None] | None = None,
) -> SessionContext:
    """Build the context of a root-to-leaf ``path``.

    Args:
        path: the path entries, root first; each has ``id``, ``type`` and ``role`` (the message
            role of ``message`` entries) without needing its payload.
        load: returns an entry's whole object (decoded JSON, on-disk key names); called only for
            the entries the context needs.
        load_message: returns a ``message`` entry's ``message`` (raw JSON or decoded), ``None``
            when it has none; default: taken from ``load``.
        prefetch: told, before any payload is loaded, which entries may emit a message, so
            that it can read them together.
    """
    if load_message is None:
        load_message = lambda item: load(item).get("message")  # noqa: E731
    plan = _plan(path, load, load_message, prefetch)
    edits = plan.edits
    messages: list[Any] = []
    if plan.compaction is not None:
        edit = edits.get(plan.compaction.id)
        messages.extend(plan.leading if edit is None else apply_edit(plan.leading, edit))
    add = messages.append
    for item in plan.emitted:
        if item.type == "message" and getattr(item, "has_content", False) and \
                item.id not in edits:  # the usual entry: its message as stored
            message = load_message(item)
            if message is not None:
                add(message)
        else:
            _emit(item, load, load_message, messages, edits)
    return SessionContext(messages, plan.thinking, plan.model, edits=edits or None)


class Contribution(NamedTuple):
    """One context entry and what it gives the model (pi's ``SessionProjectionEntry``)."""

    item: Any
    """The path item (the entry's envelope; its payload through the ``load`` given)."""
    original: list[Any]
    """The messages it stands for before any edit (JSON shape)."""
    messages: list[Any]
    """The messages it contributes: ``original`` after ``edit``."""
    edit: dict[str, Any] | None
    """The ``context_edit`` entry (on-disk dict) that applies to it, if any."""


def contributions_from_path(
    path: Sequence[Any], load: Callable[[Any], dict[str, Any]],
    load_message: Callable[[Any], dict[str, Any] | msgspec.Raw | None] | None = None,
) -> tuple[list[Contribution], Any, ModelRef | None]:
    """pi's ``buildSessionProjection`` over a root-to-leaf ``path`` (arguments as
    :func:`context_from_path`): every context entry with its messages, and the thinking level
    and model. Concatenating the entries' ``messages`` gives :func:`context_from_path`'s."""
    if load_message is None:
        load_message = lambda item: load(item).get("message")  # noqa: E731
    plan = _plan(path, load, load_message)
    out: list[Contribution] = []

    def add(item: Any, original: list[Any]) -> None:
        edit = plan.edits.get(item.id)
        out.append(Contribution(item, original, original if edit is None
                                else apply_edit(original, edit), edit))

    if plan.compaction is not None:
        add(plan.compaction, plan.leading)
    for item in plan.emitted:
        found: list[Any] = []
        _emit(item, load, load_message, found)
        add(item, found)
    return out, plan.thinking, plan.model


EMPTY_CONTEXT = SessionContext([], "off", None, [])
"""The context before the first entry (share it: :meth:`SessionContext.share`)."""


def extend_context(context: SessionContext, item: PathItem, load: Callable[[Any], dict[str, Any]],
                   load_message: Callable[[Any], dict[str, Any] | msgspec.Raw | None]
                   ) -> SessionContext | None:
    """The context of ``item`` from the context of its parent (``EMPTY_CONTEXT`` for a root).

    The same rules as :func:`context_from_path`, applied one entry forward: a message entry adds
    its message (edited if an earlier edit of the context targets it), settings entries replace
    the thinking level or model, an assistant message sets the model. ``None`` for a compaction
    or a context edit, whose context is rebuilt from its path.
    """
    kind = item.type
    if kind == "compaction" or kind == "context_edit":
        return None
    added: list[Any] = []
    _emit(item, load, load_message, added, context._edits)
    thinking, model = context._thinking_level, context.model
    if kind == "thinking_level_change":
        thinking = load(item).get("thinkingLevel", UNSET)
    elif kind == "model_change":
        model = _change_model(load(item))
    elif kind == "message" and item.role == "assistant":
        model = _assistant_model(item, load, load_message)
    elif not added:
        return context  # labels, custom entries, names: the parent's context
    typed = context._typed
    return SessionContext(context._data + added, thinking, model,
                          typed + typed_messages(added) if typed is not None else None,
                          context._edits)


class ContextMemo:
    """The contexts a session built for its last few leaves (cleared when its index changes)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._by_leaf: dict[str, SessionContext] = {}

    def get(self, leaf_id: str) -> SessionContext | None:
        return self._by_leaf.get(leaf_id)

    def put(self, leaf_id: str, context: SessionContext) -> None:
        by_leaf = self._by_leaf
        by_leaf.pop(leaf_id, None)
        by_leaf[leaf_id] = context
        if len(by_leaf) > self.size:
            del by_leaf[next(iter(by_leaf))]

    def clear(self) -> None:
        self._by_leaf.clear()

    def context(self, target: str, record_of: Callable[[str], Any], index: object,
                path_of: Callable[[str], Sequence[Any]], load: Callable[[Any], dict[str, Any]],
                load_message: Callable[[Any], dict[str, Any] | msgspec.Raw | None],
                prefetch: Callable[[Sequence[Any]], None]) -> SessionContext:
        """The context of ``target``: remembered, else one step from its parent's remembered
        context (O(1) as a conversation grows), else built from its path, then remembered.

        Args:
            record_of: an entry's envelope by id (raises for an unknown id).
            index: the session's tree index; only an in-memory :class:`~._tree.TreeIndex`
                steps from a parent (a database answers paths itself: built from those).
            path_of: the root-to-entry path, as :func:`context_from_path` takes it.
            load, load_message, prefetch: as for :func:`context_from_path`.
        """
        context = self.get(target)
        if context is not None:
            return context
        base: SessionContext | None = None
        if isinstance(index, TreeIndex):  # a database's path says whether the entry is there
            record = record_of(target)
            parent_id = record.parent_id
            base = EMPTY_CONTEXT if parent_id is None or target in index.cycle_roots \
                else self.get(parent_id)  # None for an orphan: it is built from its path
            if base is not None:
                context = extend_context(base, record, load, load_message)
        if context is None:
            context = context_from_path(path_of(target), load, load_message, prefetch)
        self.put(target, context)
        return context


class _DictItem:
    __slots__ = ("data", "id", "parent_id", "type", "role")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        entry_id = data.get("id")
        self.id: str = entry_id if isinstance(entry_id, str) else ""
        parent = data.get("parentId")
        self.parent_id = parent if isinstance(parent, str) else None
        self.type = data.get("type")
        message = data.get("message")
        self.role = message.get("role") if isinstance(message, dict) else None


def build_context(entries: Sequence[Mapping[str, Any] | msgspec.Struct],
                  leaf_id: str | None | UnsetType = UNSET) -> SessionContext:
    """pi's ``buildSessionContext(entries, leafId)`` over entries in file order, without a session.

    Args:
        entries: the entries (no header), as on-disk dicts or typed entries.
        leaf_id: the leaf; ``None`` means "before the first entry" (empty context); omitted or
            unknown means the last entry.
    """
    path = dict_path(entries, leaf_id)
    if not path:
        return SessionContext([], "off", None)
    return context_from_path(path, _item_data)


def _item_data(item: _DictItem) -> dict[str, Any]:
    return item.data


def dict_path(entries: Sequence[Mapping[str, Any] | msgspec.Struct],
              leaf_id: str | None | UnsetType = UNSET) -> list[Any]:
    """The root-to-leaf path of entries in file order, as pi finds it (``leaf_id`` as
    :func:`build_context` takes it); its items' ``data`` is the on-disk dict."""
    items = [_DictItem(e if isinstance(e, dict) else msgspec.to_builtins(e)) for e in entries]
    if leaf_id is None or not items:
        return []
    by_id = {item.id: item for item in items if item.id}
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if leaf is None:
        leaf = items[-1]
    return path_to_root(by_id, leaf.id) if leaf.id else [leaf]


_BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
_COMPACTION_PREFIX = ("The conversation history before this point was compacted into the following "
                      "summary:\n\n<summary>\n")


def _bash_text(data: Mapping[str, Any]) -> str:
    text = f"Ran `{data.get('command', '')}`\n"
    output = data.get("output") or ""
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = data.get("exitCode")
    if data.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(exit_code, (int, float)) and not isinstance(exit_code, bool) and exit_code != 0:
        text += f"\n\nCommand exited with code {_json.js_number(exit_code) if isinstance(exit_code, float) else exit_code}"
    if data.get("truncated") and data.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {data['fullOutputPath']}]"
    return text


def is_placeholder_summary(message: Any) -> bool:
    """Whether a message (typed, or its on-disk dict) is a branch summary holding only pi's
    :data:`NO_CONTENT_SUMMARY` placeholder."""
    if isinstance(message, BranchSummaryMessage):
        return message.summary.strip() == NO_CONTENT_SUMMARY
    return isinstance(message, Mapping) and message.get("role") == "branchSummary" and \
        str(message.get("summary", "")).strip() == NO_CONTENT_SUMMARY


def convert_to_llm(messages: Sequence[AgentMessage]) -> list[AgentMessage]:
    """pi's ``convertToLlm``: turn session-only roles into user messages a model accepts.

    ``bashExecution`` becomes a user text (dropped when ``exclude_from_context``), ``custom`` a
    user message, branch and compaction summaries user texts with pi's exact wording; user,
    assistant and tool result messages pass unchanged.

    One difference from pi: a branch summary that is only pi's placeholder
    (:data:`NO_CONTENT_SUMMARY`, written by pi when the abandoned branch held no message) is
    left out; a model would read it as a user turn that says nothing.
    """
    out: list[AgentMessage] = []
    for message in messages:
        data = msgspec.to_builtins(message) if not isinstance(message, UnknownMessage) else message.data
        role = data.get("role")
        raw_stamp = data.get("timestamp")
        stamp = raw_stamp if isinstance(raw_stamp, int) else 0
        if role == "bashExecution":
            if data.get("excludeFromContext"):
                continue
            out.append(UserMessage(content=[TextContent(text=_bash_text(data))], timestamp=stamp))
        elif role == "custom":
            content = data.get("content")
            typed = message_from_builtins({"role": "user", "content": content, "timestamp": stamp})
            if isinstance(content, str):
                typed = UserMessage(content=[TextContent(text=content)], timestamp=stamp)
            out.append(typed)  # type: ignore[arg-type]
        elif role == "branchSummary":
            if is_placeholder_summary(data):
                continue
            text = _BRANCH_PREFIX + str(data.get("summary", "")) + "</summary>"
            out.append(UserMessage(content=[TextContent(text=text)], timestamp=stamp))
        elif role == "compactionSummary":
            text = _COMPACTION_PREFIX + str(data.get("summary", "")) + "\n</summary>"
            out.append(UserMessage(content=[TextContent(text=text)], timestamp=stamp))
        else:
            out.append(message)
    return out
