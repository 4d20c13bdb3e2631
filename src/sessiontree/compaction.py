"""Compaction exactly as pi 0.73.1 does it (format-spec.md section 14), then one entry.

The pure functions here work on a root-to-leaf path of entries (on-disk dicts or typed
entries) and on messages (on-disk dicts or typed messages); :func:`compact` is the only one
that touches a session.

Invariants:
* Every number equals pi's: token estimates are ``ceil(chars / 4)`` where ``chars`` counts
  JavaScript string length (UTF-16 code units) of the stored JSON values; the cut point, the
  previous compaction's boundary, split turns and file operations follow pi's rules
  (``findCutPoint``, ``prepareCompaction``, ``computeFileLists``) to the index.
* A cut never falls on a tool result, so a kept tool result always keeps the call it answers.
* :func:`compact` writes exactly one ``compaction`` entry or nothing: when there is nothing to
  compact, the summarizer fails or returns nothing, or a hook cancels, nothing is written and
  the leaf stays where it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

import msgspec
from msgspec import UNSET, UnsetType

from . import _json
from ._time import iso_to_ms
from .context import convert_to_llm
from .system_prompt import current_system_message
from .entries import (
    AnyEntry,
    Compaction,
    FileDetails,
    as_json_object,
    entry_from_builtins,
)
from .errors import EntryNotFound, SessionTreeError
from .messages import AgentMessage, Cost, UnknownMessage, Usage, message_from_builtins
from .summarize.base import (
    CancelToken,
    Summarizer,
    SummaryCancelled,
    SummaryFailed,
    SummaryRequest,
    format_file_operations,
)

if TYPE_CHECKING:
    from ._offload import Offload
    from .projection import ProjectedEntry, SessionProjection
    from .session import Session

__all__ = [
    "DEFAULT_COMPACTION_SETTINGS",
    "TURN_CONTEXT_SEPARATOR",
    "AlreadyCompacted",
    "CompactionPreparation",
    "CompactionResult",
    "CompactionSettings",
    "ContextTokens",
    "CutPoint",
    "FileOperations",
    "NothingToCompact",
    "acompact",
    "agenerate_compaction",
    "calculate_context_tokens",
    "compact",
    "context_tokens",
    "estimate_context_tokens",
    "estimate_tokens",
    "find_cut_point",
    "find_turn_start_index",
    "find_valid_cut_points",
    "format_file_operations",
    "generate_compaction",
    "get_last_assistant_usage",
    "js_length",
    "plan_compaction",
    "prepare_compaction",
    "serialize_conversation",
    "should_compact",
]

MessageLike = Union[AgentMessage, UnknownMessage, Mapping[str, Any]]
"""A message as a typed struct or as its on-disk dict."""
EntryLike = Union[AnyEntry, Mapping[str, Any]]
"""An entry as a typed struct or as its on-disk dict."""

TURN_CONTEXT_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
"""What joins the history summary and the turn prefix summary of a split turn (pi's layout)."""

NO_PRIOR_HISTORY = "No prior history."


# -- errors -------------------------------------------------------------------------------------


class NothingToCompact(SessionTreeError):
    """Compacting would remove nothing from the context (the path is empty, or everything on it
    fits in ``keep_recent_tokens``); nothing was written."""


class AlreadyCompacted(NothingToCompact):
    """The path already ends in a compaction entry; nothing was written."""


# -- settings -----------------------------------------------------------------------------------


class CompactionSettings(msgspec.Struct, frozen=True):
    """pi's ``CompactionSettings``.

    Attributes:
        enabled: whether automatic compaction (:func:`should_compact`) may trigger.
        reserve_tokens: room left for the reply; compaction triggers when the context exceeds
            the window minus this. Summaries get ``0.8 ×`` (history) and ``0.5 ×`` (turn
            prefix) of it as their budget.
        keep_recent_tokens: about how many tokens of the newest messages stay verbatim.
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000


DEFAULT_COMPACTION_SETTINGS = CompactionSettings()
"""pi's ``DEFAULT_COMPACTION_SETTINGS``: enabled, 16384 reserved, 20000 kept."""


# -- token estimates ----------------------------------------------------------------------------


def js_length(text: str) -> int:
    """``text.length`` in JavaScript: the number of UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2




def _text_chars(content: Any, *, images: bool) -> int:
    if isinstance(content, str):
        return js_length(content)
    chars = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            text = block.get("text")
            if kind == "text" and isinstance(text, str) and text:
                chars += js_length(text)
            if images and kind == "image":
                chars += 4800  # pi: an image counts as 4,800 characters (1,200 tokens)
    return chars


def _json_length(value: Any) -> int:
    """``JSON.stringify(value).length``."""
    raw = _json.dumps(value)
    if raw.isascii():
        return len(raw)
    return js_length(raw.decode("utf-8", "surrogatepass"))


def _str_length(value: Any) -> int:
    return js_length(value) if isinstance(value, str) else 0


def estimate_tokens(message: MessageLike) -> int:
    """pi 1.5.2's ``estimateTokens``: characters / 4, rounded up.

    Counted characters: system → content, every non-empty section and the JSON of
    ``toolsAdded``; user, custom and toolResult → text plus 4800 per image (pi 0.73.1 did not
    count a user message's images); assistant → text, thinking, and for each tool call its
    name plus its JSON arguments; bashExecution → command and output; branch and compaction
    summaries → the summary. Other roles count 0.
    """
    m = as_json_object(message)
    role = m.get("role")
    chars = 0
    if role == "system":
        chars = _text_chars(m.get("content"), images=True)
        sections = m.get("sections")
        if isinstance(sections, Mapping):
            chars += sum(js_length(v) for v in sections.values() if isinstance(v, str) and v)
        tools = m.get("toolsAdded")
        if tools is not None and tools is not False:
            chars += _json_length(tools)
    elif role == "user":
        chars = _text_chars(m.get("content"), images=True)
    elif role == "assistant":
        content = m.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                chars += _str_length(block.get("text"))
            elif kind == "thinking":
                chars += _str_length(block.get("thinking"))
            elif kind == "toolCall":
                chars += _str_length(block.get("name")) + _json_length(block.get("arguments"))
    elif role in ("custom", "toolResult"):
        chars = _text_chars(m.get("content"), images=True)
    elif role == "bashExecution":
        chars = _str_length(m.get("command")) + _str_length(m.get("output"))
    elif role in ("branchSummary", "compactionSummary"):
        chars = _str_length(m.get("summary"))
    else:
        return 0
    return math.ceil(chars / 4)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return value


def calculate_context_tokens(usage: Any) -> int:
    """pi's ``calculateContextTokens``: ``totalTokens``, or when that is 0 or missing, input +
    output + cache reads + cache writes.

    Args:
        usage: a :class:`~sessiontree.messages.Usage` or its on-disk dict.
    """
    data = usage if isinstance(usage, Mapping) else msgspec.to_builtins(usage)
    if not isinstance(data, Mapping):
        return 0
    total = _number(data.get("totalTokens"))
    if total:
        return int(total)
    return int(sum(_number(data.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite")))


def _usage(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The usage of an assistant message that counts (not aborted, not errored, not all
    zero: pi 1.5.2's ``getAssistantUsage``), else None."""
    if message.get("role") != "assistant" or message.get("stopReason") in ("aborted", "error"):
        return None
    usage = message.get("usage")
    return usage if isinstance(usage, Mapping) and calculate_context_tokens(usage) > 0 else None


class ContextTokens(msgspec.Struct, frozen=True):
    """pi's ``ContextUsageEstimate``.

    Attributes:
        tokens: ``usage_tokens + trailing_tokens``.
        usage_tokens: the context tokens reported by the last assistant reply that has usage.
        trailing_tokens: estimates of the messages after that reply (of all messages when
            there is none).
        last_usage_index: the index of that reply, or ``None``.
    """

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def estimate_context_tokens(messages: Sequence[MessageLike]) -> ContextTokens:
    """pi's ``estimateContextTokens``: the last counting assistant usage plus estimates of the
    messages after it; with no usage at all, the sum of every message's estimate."""
    dicts = [as_json_object(m) for m in messages]
    for index in range(len(dicts) - 1, -1, -1):
        usage = _usage(dicts[index])
        if usage is not None:
            used = calculate_context_tokens(usage)
            trailing = sum(estimate_tokens(m) for m in dicts[index + 1:])
            return ContextTokens(used + trailing, used, trailing, index)
    estimated = sum(estimate_tokens(m) for m in dicts)
    return ContextTokens(estimated, 0, estimated, None)


def get_last_assistant_usage(entries: Sequence[EntryLike]) -> dict[str, Any] | None:
    """pi's ``getLastAssistantUsage``: the usage (on-disk dict) of the last assistant message
    entry that is neither aborted nor errored, or ``None``."""
    for entry in reversed(entries):
        data = as_json_object(entry)
        message = data.get("message")
        if data.get("type") == "message" and isinstance(message, Mapping):
            usage = _usage(message)
            if usage is not None:
                return dict(usage)
    return None


def should_compact(context_tokens: int, context_window: int,
                   settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS) -> bool:
    """pi's ``shouldCompact``: enabled, and the context exceeds the window minus the reserve."""
    return settings.enabled and context_tokens > context_window - settings.reserve_tokens


# -- cut points ---------------------------------------------------------------------------------




def _as_dicts(entries: Sequence[EntryLike]) -> Sequence[Mapping[str, Any]]:
    if all(isinstance(e, Mapping) for e in entries):
        return entries  # type: ignore[return-value]
    return [as_json_object(e) for e in entries]


def _role(entry: Mapping[str, Any]) -> Any:
    message = entry.get("message")
    return message.get("role") if isinstance(message, Mapping) else None


_CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary",
                        "compactionSummary"})


def find_valid_cut_points(entries: Sequence[EntryLike], start: int, end: int) -> list[int]:
    """Indices in ``[start, end)`` where a kept suffix may begin (pi's ``findValidCutPoints``).

    ``message`` entries of role user, assistant, bashExecution, custom, branchSummary and
    compactionSummary, and ``branch_summary`` and ``custom_message`` entries. Never a tool
    result (it must follow its call), nor a settings, label, custom, session_info or compaction
    entry.
    """
    items = _as_dicts(entries)
    points = []
    for index in range(start, end):
        entry = items[index]
        kind = entry.get("type")
        if (kind == "message" and _role(entry) in _CUT_ROLES) or \
                kind in ("branch_summary", "custom_message"):
            points.append(index)
    return points


def find_turn_start_index(entries: Sequence[EntryLike], entry_index: int, start_index: int) -> int:
    """The index of the entry that starts the turn holding ``entry_index``, scanning back to
    ``start_index``: a user or bashExecution message, a ``branch_summary`` or a
    ``custom_message``; -1 when there is none (pi's ``findTurnStartIndex``)."""
    items = _as_dicts(entries)
    for index in range(entry_index, start_index - 1, -1):
        entry = items[index]
        kind = entry.get("type")
        if kind in ("branch_summary", "custom_message"):
            return index
        if kind == "message" and _role(entry) in ("user", "bashExecution"):
            return index
    return -1


class CutPoint(msgspec.Struct, frozen=True):
    """pi's ``CutPointResult``.

    Attributes:
        first_kept_entry_index: the first entry to keep.
        turn_start_index: the start of the turn the cut splits, or -1.
        is_split_turn: whether the cut falls inside a turn (the kept part does not start with
            a user message, and the turn's start was found).
    """

    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool


def find_cut_point(entries: Sequence[EntryLike], start: int, end: int,
                   keep_recent_tokens: int, *,
                   estimate: Callable[[Mapping[str, Any]], int] = estimate_tokens) -> CutPoint:
    """Where to cut ``entries[start:end]`` so that about ``keep_recent_tokens`` stay (pi's
    ``findCutPoint``).

    Walking back from ``end``, the estimates of ``message`` entries are added up; at the first
    entry where the sum reaches ``keep_recent_tokens`` the cut is the first valid cut point at
    or after it (the first of the range when the budget is never reached). The cut then moves
    back over directly preceding entries that are neither messages nor compactions (settings,
    labels, custom entries, ...), so they stay with the kept part.

    ``estimate`` counts one message's tokens (pi's characters / 4 by default); a caller that
    already knows the counts, such as the session generator, passes its own.
    """
    items = _as_dicts(entries)
    points = find_valid_cut_points(items, start, end)
    if not points:
        return CutPoint(start, -1, False)
    accumulated = 0
    cut = points[0]
    for index in range(end - 1, start - 1, -1):
        entry = items[index]
        if entry.get("type") != "message":
            continue
        message = entry.get("message")
        accumulated += estimate(message if isinstance(message, Mapping) else {})
        if accumulated >= keep_recent_tokens:
            cut = next((p for p in points if p >= index), cut)
            break
    while cut > start and items[cut - 1].get("type") not in ("compaction", "message"):
        cut -= 1
    cut_entry = items[cut]
    is_user = cut_entry.get("type") == "message" and _role(cut_entry) == "user"
    turn_start = -1 if is_user else find_turn_start_index(items, cut, start)
    return CutPoint(cut, turn_start, not is_user and turn_start != -1)


# -- file operations ----------------------------------------------------------------------------


def _js_sorted(items: Iterable[str]) -> list[str]:
    """Sorted as JavaScript's default ``sort()`` does: by UTF-16 code units."""
    return sorted(items, key=lambda s: s.encode("utf-16-be", "surrogatepass"))


class FileOperations:
    """Files read, written and edited by ``read``, ``write`` and ``edit`` tool calls (pi's
    ``FileOperations``), collected from messages and from earlier summaries' ``details``."""

    __slots__ = ("read", "written", "edited")

    def __init__(self) -> None:
        self.read: set[str] = set()
        self.written: set[str] = set()
        self.edited: set[str] = set()

    def add_details(self, details: Any) -> None:
        """Take an earlier summary's ``details``: its ``readFiles`` count as read, its
        ``modifiedFiles`` as edited (pi's rule)."""
        if isinstance(details, FileDetails):
            details = msgspec.to_builtins(details)
        if not isinstance(details, Mapping):
            return
        for key, target in (("readFiles", self.read), ("modifiedFiles", self.edited)):
            files = details.get(key)
            if isinstance(files, list):
                target.update(f for f in files if isinstance(f, str))

    def add_message(self, message: MessageLike) -> None:
        """Take the tool calls of an assistant message whose ``arguments.path`` is a non-empty
        string (pi's ``extractFileOpsFromMessage``)."""
        m = as_json_object(message)
        content = m.get("content")
        if m.get("role") != "assistant" or not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, Mapping) or block.get("type") != "toolCall":
                continue
            arguments = block.get("arguments")
            path = arguments.get("path") if isinstance(arguments, Mapping) else None
            if not isinstance(path, str) or not path:
                continue
            name = block.get("name")
            if name == "read":
                self.read.add(path)
            elif name == "write":
                self.written.add(path)
            elif name == "edit":
                self.edited.add(path)

    def lists(self) -> FileDetails:
        """pi's ``computeFileLists``: files only read, and files written or edited; each sorted."""
        modified = self.edited | self.written
        return FileDetails(read_files=_js_sorted(self.read - modified),
                           modified_files=_js_sorted(modified))

    def __repr__(self) -> str:
        return f"FileOperations(read={sorted(self.read)}, written={sorted(self.written)}, " \
               f"edited={sorted(self.edited)})"


# -- the transcript a summarizer reads ----------------------------------------------------------

_TOOL_RESULT_MAX_CHARS = 2000


def _truncate(text: str, limit: int = _TOOL_RESULT_MAX_CHARS) -> str:
    """The first ``limit`` UTF-16 code units and a note, as JavaScript's ``slice`` cuts."""
    length = js_length(text)
    if length <= limit:
        return text
    if text.isascii():
        head = text[:limit]
    else:
        units = text.encode("utf-16-le", "surrogatepass")[:2 * limit]
        head = units.decode("utf-16-le", "surrogatepass")
    return f"{head}\n\n[... {length - limit} more characters truncated]"


def _is_index_key(key: str) -> bool:
    """Whether JavaScript treats ``key`` as an array index (such keys come first, ascending)."""
    return key.isdigit() and key.isascii() and (key == "0" or key[0] != "0") and \
        int(key) < 4294967295


def _js_items(mapping: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``Object.entries`` order: array-index keys ascending, then the others as inserted."""
    items = list(mapping.items())
    index = sorted(((k, v) for k, v in items if _is_index_key(k)), key=lambda kv: int(kv[0]))
    if not index:
        return items
    return index + [(k, v) for k, v in items if not _is_index_key(k)]


def _typed(message: MessageLike) -> AgentMessage | UnknownMessage:
    if isinstance(message, Mapping):
        return message_from_builtins(dict(message))
    return message


def serialize_conversation(messages: Iterable[MessageLike]) -> str:
    """Messages as the plain transcript a summarizing model reads (pi's
    ``serializeConversation`` after ``convertToLlm``).

    One paragraph per part, separated by blank lines: ``[User]: …``, ``[Assistant]: …``,
    ``[Assistant tool calls]: name(key=<json>, …); …`` and ``[Tool result]: …`` (cut after 2000
    characters). As pi 1.5.2 writes it: an assistant's thinking is left out (pi 0.73.1 sent it
    as ``[Assistant thinking]: …``).
    """
    typed = [_typed(m) for m in messages]
    parts: list[str] = []
    for message in convert_to_llm(typed):  # type: ignore[arg-type]
        m = as_json_object(message)
        role = m.get("role")
        content = m.get("content")
        blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        if role == "user":
            text = content if isinstance(content, str) else "".join(
                str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            texts: list[str] = []
            calls: list[str] = []
            for block in blocks:
                kind = block.get("type")
                if kind == "text":
                    texts.append(str(block.get("text", "")))
                elif kind == "toolCall":
                    arguments = block.get("arguments")
                    shown = ", ".join(
                        f"{key}={_json.dumps(value).decode('utf-8', 'surrogatepass')}"
                        for key, value in (_js_items(arguments) if isinstance(arguments, Mapping)
                                           else ()))
                    calls.append(f"{block.get('name')}({shown})")
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            if text:
                parts.append(f"[Tool result]: {_truncate(text)}")
    return "\n\n".join(parts)


# -- preparation --------------------------------------------------------------------------------


class CompactionPreparation(msgspec.Struct, frozen=True):
    """What compacting a path would do (pi's ``CompactionPreparation``, plus the indices).

    Attributes:
        first_kept_entry_id: the first entry the context keeps after the compaction.
        first_kept_entry_index: its index in the path.
        messages_to_summarize: the history to summarize, oldest first: what the context
            entries from the boundary up to the cut (up to the turn start for a split turn)
            give the model after edits, system messages left out.
        turn_prefix_messages: for a split turn, the messages from the turn start to the cut.
        is_split_turn: whether the cut falls inside a turn.
        turn_start_index: the index of that turn's start, or -1.
        tokens_before: the context's estimated tokens before compacting.
        previous_summary: the summary of the compaction leading the context, if any.
        previous_compaction_index: its index in the path, or -1.
        boundary_start: the path index of the first context entry after that compaction (its
            kept part first), else 0.
        file_details: files only read, and files modified, by the summarized part (with the
            previous compaction's lists when it was not written by a hook).
        settings: the settings used.
    """

    first_kept_entry_id: str
    first_kept_entry_index: int
    messages_to_summarize: list[AgentMessage | UnknownMessage]
    turn_prefix_messages: list[AgentMessage | UnknownMessage]
    is_split_turn: bool
    turn_start_index: int
    tokens_before: int
    previous_summary: str | None
    previous_compaction_index: int
    boundary_start: int
    file_details: FileDetails
    settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS

    @property
    def is_empty(self) -> bool:
        """Whether compacting would remove nothing from the context."""
        return not self.messages_to_summarize and not self.turn_prefix_messages


def estimate_projected_context_tokens(projection: SessionProjection,
                                     path: Sequence[Mapping[str, Any]]) -> ContextTokens:
    """pi 1.5.2's ``estimateProjectedContextTokens``: :func:`estimate_context_tokens` of the
    projected context, unless a context edit or a compaction on the path came after the
    reply whose usage it uses (that usage measured another context); then the replayed system
    message plus every other message, estimated."""
    messages = projection.messages
    estimate = estimate_context_tokens(messages)
    if estimate.last_usage_index is not None:
        source_id, seen = None, 0
        for entry in projection.entries:
            seen += len(entry.messages)
            if estimate.last_usage_index < seen:
                source_id = entry.entry_id
                break
        usage_at = next((i for i, e in enumerate(path) if e.get("id") == source_id), -1) \
            if source_id is not None else -1
        invalidated_at = next((i for i in range(len(path) - 1, -1, -1)
                               if path[i].get("type") in ("context_edit", "compaction")), -1)
        if usage_at > invalidated_at:
            return estimate
    system = current_system_message(messages)
    tokens = estimate_tokens(system) if system is not None else 0
    tokens += sum(estimate_tokens(m) for m in messages
                  if not (isinstance(m, Mapping) and m.get("role") == "system"))
    return ContextTokens(tokens, 0, tokens, None)


_TURN_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary", "compactionSummary"})


def _role_of(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _starts_turn(entry: ProjectedEntry) -> bool:
    return entry.type != "compaction" and any(_role_of(m) in _TURN_ROLES for m in entry.messages)


def _projected_turn_start(entries: Sequence[ProjectedEntry], index: int, start: int) -> int:
    return next((i for i in range(index, start - 1, -1) if _starts_turn(entries[i])), -1)


def find_projected_cut_point(entries: Sequence[ProjectedEntry], start: int, end: int,
                             keep_recent_tokens: int) -> CutPoint:
    """Where to cut the context entries ``entries[start:end]`` of a projection so that about
    ``keep_recent_tokens`` stay (pi 1.5.2's ``findProjectedCutPoint``): as
    :func:`find_cut_point`, counted on what each entry contributes after edits (every
    contributing entry counts, system messages, summaries and custom messages included).

    One rule more: when the budget is reached and everything after the cut is an omitted
    assistant attempt with its omitting edits (a recovered failure), the cut moves past it.
    """
    points = [i for i in range(start, end) if entries[i].type != "compaction"
              and any(_role_of(m) in _CUT_ROLES for m in entries[i].messages)]
    if not points:
        return CutPoint(start, -1, False)
    accumulated, exceeded, cut = 0, False, points[0]
    for index in range(end - 1, start - 1, -1):
        tokens = sum(estimate_tokens(m) for m in entries[index].messages)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            exceeded = True
            cut = next((p for p in points if p >= index), points[-1])
            break
    suffix = entries[cut + 1:end]

    def visible(entry: ProjectedEntry) -> bool:
        return entry.type != "context_edit" and (entry.type == "compaction" or bool(entry.original))

    def omitted(entry: ProjectedEntry) -> bool:
        return visible(entry) and not entry.messages

    omitted_ids = {e.entry_id for e in suffix if omitted(e)}
    replaced_elsewhere = any(e.type == "context_edit" and e.source.get("replacement") is not None
                             and e.source.get("targetId") not in omitted_ids for e in suffix)
    if exceeded and not replaced_elsewhere \
            and any(e.type == "message" and _role_of(e.source.get("message")) == "assistant"
                    and omitted(e) for e in suffix) \
            and all(e.type != "compaction" and (not visible(e) or omitted(e)) for e in suffix):
        cut += 1
    while cut > start:
        previous = entries[cut - 1]
        if previous.type == "compaction" or previous.messages:
            break
        cut -= 1
    starts = cut < len(entries) and _starts_turn(entries[cut])
    turn_start = -1 if starts else _projected_turn_start(entries, min(cut, len(entries) - 1),
                                                         start)
    return CutPoint(cut, turn_start, not starts and turn_start != -1)


def _summarized(entries: Sequence[ProjectedEntry]) -> list[Any]:
    """What these context entries give the summarizer: their messages after edits, without
    system messages (the compaction carries their replay) and without compactions."""
    return [m for e in entries if e.type != "compaction" for m in e.messages
            if _role_of(m) != "system"]


def prepare_compaction(path: Sequence[EntryLike],
                       settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS, *,
                       keep_recent_tokens: int | None = None) -> CompactionPreparation | None:
    """pi 1.5.2's ``prepareCompaction`` over a root-to-leaf path: the cut is chosen on the
    projected context (:mod:`sessiontree.projection`), after context edits, from the entry
    after the latest compaction's kept part on; what is summarized is what the model saw.

    Args:
        path: the path's entries, root first (on-disk dicts or typed entries), as
            ``Session.path()`` returns them.
        settings: ``keep_recent_tokens`` decides the cut.
        keep_recent_tokens: overrides ``settings.keep_recent_tokens``.

    Returns:
        The preparation, or ``None`` when the path is empty, already ends in a compaction,
        nothing would be summarized, or the entry to keep from has no id (pi's "needs
        migration").
    """
    from .projection import build_projection

    if keep_recent_tokens is not None:
        settings = msgspec.structs.replace(settings, keep_recent_tokens=keep_recent_tokens)
    items = _as_dicts(path)
    if not items or items[-1].get("type") == "compaction":
        return None
    projection = build_projection(items)
    entries = projection.entries
    previous = next((i for i, e in enumerate(entries)
                     if e.type == "compaction" and e.messages), -1)
    previous_summary: str | None = None
    boundary = 0
    if previous >= 0:
        summary = entries[previous].source.get("summary")
        previous_summary = summary if isinstance(summary, str) else None
        boundary = previous + 1
    tokens_before = estimate_projected_context_tokens(projection, items).tokens
    cut = find_projected_cut_point(entries, boundary, len(entries), settings.keep_recent_tokens)
    if cut.first_kept_entry_index >= len(entries):
        return None
    first_kept_id = entries[cut.first_kept_entry_index].entry_id
    if not isinstance(first_kept_id, str) or not first_kept_id:
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    to_summarize = _summarized(entries[boundary:history_end])
    prefix = _summarized(entries[cut.turn_start_index:cut.first_kept_entry_index]) \
        if cut.is_split_turn else []
    if not to_summarize and not prefix:
        return None
    files = FileOperations()
    if previous >= 0 and not entries[previous].source.get("fromHook"):
        files.add_details(entries[previous].source.get("details"))
    for message in (*to_summarize, *prefix):
        files.add_message(message)
    where = {entry.get("id"): i for i, entry in enumerate(items)}

    def path_index(index: int) -> int:
        return where.get(entries[index].entry_id, -1) if 0 <= index < len(entries) else -1

    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        first_kept_entry_index=path_index(cut.first_kept_entry_index),
        messages_to_summarize=[_typed(m) for m in to_summarize],
        turn_prefix_messages=[_typed(m) for m in prefix],
        is_split_turn=cut.is_split_turn, turn_start_index=path_index(cut.turn_start_index),
        tokens_before=tokens_before, previous_summary=previous_summary,
        previous_compaction_index=path_index(previous),
        boundary_start=path_index(boundary) if boundary < len(entries) else len(items),
        file_details=files.lists(), settings=settings,
    )


# -- summaries ----------------------------------------------------------------------------------


class CompactionResult(msgspec.Struct, frozen=True):
    """What to append (pi's ``CompactionResult``).

    Attributes:
        summary: the stored summary: history, the split turn's prefix summary if any, then the
            ``<read-files>`` and ``<modified-files>`` tags.
        first_kept_entry_id: where the kept part starts.
        tokens_before: the context's estimated tokens before compacting.
        details: ``{readFiles, modifiedFiles}`` (a :class:`FileDetails`), or a hook's own.
        usage: what the summaries cost, when the summarizer reported it (a
            :class:`~sessiontree.summarize.base.SummaryText`): both summaries' of a split turn
            added up, as pi's ``combineUsage`` does.
    """

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = msgspec.UNSET
    usage: Usage | UnsetType = msgspec.UNSET


def _checked(summarizer: Any, text: Any, cancel: CancelToken | None) -> str:
    if not isinstance(text, str) or not text.strip():
        raise SummaryFailed(f"{type(summarizer).__name__} returned an empty summary")
    if cancel is not None:
        cancel.raise_if_cancelled()
    return text


def _failed(summarizer: Any, exc: Exception) -> SummaryFailed:
    error = SummaryFailed(f"{type(summarizer).__name__} failed: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


def _summarize(summarizer: Summarizer, request: SummaryRequest, cancel: CancelToken | None) -> str:
    if cancel is not None:
        cancel.raise_if_cancelled()
    try:
        text = summarizer.summarize(request, cancel)
    except (SummaryCancelled, SummaryFailed):
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a summarizer is a SummaryFailed
        raise _failed(summarizer, exc) from exc
    return _checked(summarizer, text, cancel)


async def _asummarize(summarizer: Summarizer, request: SummaryRequest,
                      cancel: CancelToken | None) -> str:
    """:func:`_summarize` for async code: ``asummarize`` when the summarizer has it, else
    ``summarize`` in a worker thread."""
    import asyncio

    if cancel is not None:
        cancel.raise_if_cancelled()
    native = getattr(summarizer, "asummarize", None)
    try:
        if native is not None:
            text = await native(request, cancel)
        else:
            text = await asyncio.to_thread(summarizer.summarize, request, cancel)
    except (SummaryCancelled, SummaryFailed):
        raise
    except Exception as exc:  # noqa: BLE001
        raise _failed(summarizer, exc) from exc
    return _checked(summarizer, text, cancel)


def _default_summarizer() -> Summarizer:
    from .summarize.offline import ExtractiveSummarizer

    return ExtractiveSummarizer()


class _Requests(msgspec.Struct, frozen=True):
    """The summaries a preparation needs: the history's (or a text standing for it) and, for a
    split turn, the turn prefix's."""

    history: SummaryRequest | None
    history_text: str
    prefix: SummaryRequest | None


def _requests(preparation: CompactionPreparation, instructions: str | None) -> _Requests:
    settings = preparation.settings
    details = preparation.file_details
    history = SummaryRequest(
        messages=list(preparation.messages_to_summarize), purpose="compaction",
        previous_summary=preparation.previous_summary, instructions=instructions,
        max_tokens=math.floor(0.8 * settings.reserve_tokens),
        read_files=list(details.read_files), modified_files=list(details.modified_files))
    if not (preparation.is_split_turn and preparation.turn_prefix_messages):
        return _Requests(history, "", None)
    prefix = SummaryRequest(messages=list(preparation.turn_prefix_messages), purpose="turn_prefix",
                            max_tokens=math.floor(0.5 * settings.reserve_tokens))
    if preparation.messages_to_summarize:
        return _Requests(history, "", prefix)
    return _Requests(None, preparation.previous_summary or NO_PRIOR_HISTORY, prefix)


def _combined_usage(*texts: str | None) -> Usage | UnsetType:
    """The usage the summarizer reported for these summaries, added up (pi's
    ``combineUsage``); unset when it reported none."""
    found = [u for u in (getattr(t, "usage", None) for t in texts) if isinstance(u, Usage)]
    if not found:
        return msgspec.UNSET
    if len(found) == 1:
        return found[0]
    fields = ("input", "output", "cache_read", "cache_write", "total_tokens")
    costs = ("input", "output", "cache_read", "cache_write", "total")
    return Usage(**{f: sum(getattr(u, f) for u in found) for f in fields},
                 cost=Cost(**{c: sum(getattr(u.cost, c) for u in found) for c in costs}))


def _result(preparation: CompactionPreparation, history: str, prefix: str | None) -> CompactionResult:
    summary = history if prefix is None else history + TURN_CONTEXT_SEPARATOR + prefix
    summary += format_file_operations(preparation.file_details)
    return CompactionResult(summary=summary, first_kept_entry_id=preparation.first_kept_entry_id,
                            tokens_before=preparation.tokens_before,
                            details=preparation.file_details,
                            usage=_combined_usage(history, prefix))


def generate_compaction(preparation: CompactionPreparation, summarizer: Summarizer | None = None,
                        *, instructions: str | None = None,
                        cancel: CancelToken | None = None) -> CompactionResult:
    """Write the summaries of a preparation (pi's ``compact``, without the model specifics).

    The history is summarized with a budget of ``0.8 × reserve_tokens`` (updating the previous
    summary when there is one, with the caller's instructions); for a split turn the turn's
    prefix is summarized separately (``0.5 × reserve_tokens``) and joined as ``<history>`` +
    :data:`TURN_CONTEXT_SEPARATOR` + ``<prefix>``, the history being the previous summary or
    ``"No prior history."`` when no message precedes the turn. The file-operation tags follow.

    Raises:
        SummaryCancelled: ``cancel`` was cancelled.
        SummaryFailed: the summarizer raised or returned nothing.
    """
    summarizer = summarizer if summarizer is not None else _default_summarizer()
    plan = _requests(preparation, instructions)
    history = _summarize(summarizer, plan.history, cancel) if plan.history else plan.history_text
    prefix = _summarize(summarizer, plan.prefix, cancel) if plan.prefix else None
    return _result(preparation, history, prefix)


async def agenerate_compaction(preparation: CompactionPreparation,
                               summarizer: Summarizer | None = None, *,
                               instructions: str | None = None,
                               cancel: CancelToken | None = None) -> CompactionResult:
    """:func:`generate_compaction` for async code; the history and the turn prefix are
    summarized concurrently (as pi does)."""
    import asyncio

    summarizer = summarizer if summarizer is not None else _default_summarizer()
    plan = _requests(preparation, instructions)

    async def history() -> str:
        return await _asummarize(summarizer, plan.history, cancel) if plan.history \
            else plan.history_text

    async def prefix() -> str | None:
        return await _asummarize(summarizer, plan.prefix, cancel) if plan.prefix else None

    history_task = asyncio.ensure_future(history())
    prefix_task = asyncio.ensure_future(prefix())
    tasks: list[asyncio.Future[Any]] = [history_task, prefix_task]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:  # the first failure decides; the other summary is not waited for
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return _result(preparation, history_task.result(), prefix_task.result())


# -- sessions ------------------------------------------------------------------------------------


def context_tokens(session: Session, leaf_id: str | None | UnsetType = UNSET) -> int:
    """The estimated tokens of a leaf's context (default: the current leaf), as pi 1.5.2's
    automatic trigger measures them (:func:`estimate_projected_context_tokens`): the last
    counting assistant usage plus estimates of what follows, unless a context edit or a
    compaction came after that reply (its usage measured another context); then every
    message is estimated.
    """
    target = session.leaf_id if leaf_id is UNSET else leaf_id
    if target is None:
        return 0
    return estimate_projected_context_tokens(session.build_projection(target),
                                             _path_dicts(session, target)).tokens


# -- the one function that writes ---------------------------------------------------------------


def compaction_entry(session: Session, summary: str, first_kept_entry_id: str,
                     tokens_before: int, details: FileDetails | Any = UNSET,
                     from_hook: bool = False, usage: Usage | UnsetType = UNSET
                     ) -> Callable[[str, str | None, str], dict[str, Any]]:
    """What ``Session.append_compaction`` writes at the leaf, given the new id, parent and time:
    as pi 1.5.2 does, a compaction carries the system prompt and tools replayed at the leaf
    (``systemMessage``, stamped with the compaction's time; none when the context has no
    system message and no tool), its checkpoint for the compacted context.

    Raises:
        EntryNotFound: ``first_kept_entry_id`` is not on the current path.
    """
    if first_kept_entry_id not in session.path_ids():
        raise EntryNotFound(f"first kept entry {first_kept_entry_id!r} is not on the current "
                            "path", path=session.file, entry_id=first_kept_entry_id)
    checkpoint = current_system_message(session.build_context().to_builtins()["messages"])

    def make(i: str, p: str | None, t: str) -> dict[str, Any]:
        entry = msgspec.to_builtins(Compaction(
            id=i, parent_id=p, timestamp=t, summary=summary,
            first_kept_entry_id=first_kept_entry_id, tokens_before=tokens_before,
            details=details, usage=usage, from_hook=from_hook))
        if checkpoint is not None:
            entry["systemMessage"] = {**checkpoint, "timestamp": iso_to_ms(t)}
        return entry  # type: ignore[no-any-return]

    return make


def _path_dicts(session: Session, leaf_id: str | None | UnsetType = UNSET
                ) -> list[dict[str, Any]]:
    out = []
    for entry_id in session.path_ids(leaf_id):
        data = _json.loads(session.raw_line(entry_id))
        if isinstance(data, dict):
            out.append(data)
    return out


def _compactable(session: Session, path: list[dict[str, Any]],
                 settings: CompactionSettings) -> CompactionPreparation:
    """The preparation for compacting ``path``, or the reason there is nothing to compact."""
    if path and path[-1].get("type") == "compaction":
        raise AlreadyCompacted("nothing to compact: the path already ends in a compaction",
                               path=session.file, entry_id=session.leaf_id)
    preparation = prepare_compaction(path, settings)
    if preparation is None or preparation.is_empty:
        kept = f"keep_recent_tokens={settings.keep_recent_tokens} keeps the whole path" \
            if path else "the path is empty"
        raise NothingToCompact(f"nothing to compact: {kept}", path=session.file,
                               entry_id=session.leaf_id)
    return preparation


def plan_compaction(session: Session, settings: CompactionSettings | None = None
                    ) -> CompactionPreparation:
    """What :func:`compact` would do at the current leaf, without doing it.

    Returns:
        The preparation (what would be summarized, where the kept part starts).

    Raises:
        AlreadyCompacted: the path already ends in a compaction.
        NothingToCompact: the path is empty, or ``keep_recent_tokens`` keeps all of it; the
            message says which (the same message :func:`compact` gives).
    """
    return _compactable(session, _path_dicts(session), settings or DEFAULT_COMPACTION_SETTINGS)


class _Compacting(msgspec.Struct):
    """One compaction under way: what was prepared, and what the hooks get."""

    leaf: str | None
    preparation: CompactionPreparation
    payload: Any
    token: CancelToken


def _begin(session: Session, keep_recent_tokens: int | None, reserve_tokens: int | None,
           settings: CompactionSettings | None, instructions: str | None,
           cancel: CancelToken | None) -> _Compacting:
    from .events import CompactPreparation

    settings = settings or DEFAULT_COMPACTION_SETTINGS
    changes: dict[str, int] = {}
    if keep_recent_tokens is not None:
        changes["keep_recent_tokens"] = keep_recent_tokens
    if reserve_tokens is not None:
        changes["reserve_tokens"] = reserve_tokens
    if changes:
        settings = msgspec.structs.replace(settings, **changes)
    leaf = session.leaf_id
    path = _path_dicts(session)
    preparation = _compactable(session, path, settings)
    token = cancel if cancel is not None else CancelToken()
    previous = [c for c in (entry_from_builtins(dict(e)) for e in reversed(path)
                            if e.get("type") == "compaction") if isinstance(c, Compaction)]
    payload = CompactPreparation(
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        messages_to_summarize=list(preparation.messages_to_summarize),  # type: ignore[arg-type]
        turn_prefix_messages=list(preparation.turn_prefix_messages),  # type: ignore[arg-type]
        is_split_turn=preparation.is_split_turn, previous_summary=preparation.previous_summary,
        file_details=preparation.file_details, previous_compactions=previous,
        instructions=instructions, session=session, cancel=token)
    return _Compacting(leaf, preparation, payload, token)


def _hook_result(state: _Compacting, hook: Any) -> CompactionResult | None:
    """The compaction a ``session_before_compact`` handler supplied, if any."""
    from .events import BeforeCompactResult

    if not isinstance(hook, BeforeCompactResult) or hook.summary is None:
        return None
    if not hook.summary.strip():
        raise SummaryFailed("a session_before_compact handler supplied an empty summary")
    prep = state.preparation
    return CompactionResult(
        summary=hook.summary,
        first_kept_entry_id=hook.first_kept_entry_id or prep.first_kept_entry_id,
        tokens_before=hook.tokens_before if hook.tokens_before is not None else prep.tokens_before,
        details=hook.details if hook.details is not None else msgspec.UNSET)


def _check_cancelled(session: Session, state: _Compacting, hook: Any, decider: str | None) -> None:
    """Raise as navigation does: a handler's cancel names the handler, a token's does not."""
    from .events import OperationCancelled

    if getattr(hook, "cancel", False):
        raise OperationCancelled("session_before_compact", decider or "?")
    if state.token.cancelled:
        raise SummaryCancelled("the compaction was cancelled; nothing was written",
                               path=session.file)


def _append(session: Session, state: _Compacting, result: CompactionResult,
            from_hook: bool) -> tuple[Compaction, Any]:
    from .events import CompactEvent

    if session.leaf_id != state.leaf:  # a hook moved the leaf: compact where we prepared
        session.branch(state.leaf) if state.leaf is not None else session.reset_leaf()
    entry_id = session.append_compaction(result.summary, result.first_kept_entry_id,
                                         result.tokens_before, result.details, from_hook=from_hook,
                                         usage=result.usage)
    entry = session.entry(entry_id)
    assert isinstance(entry, Compaction)
    return entry, CompactEvent(compaction=entry, from_hook=from_hook, session=session)


def compact(session: Session, summarizer: Summarizer | None = None, *,
            keep_recent_tokens: int | None = None, reserve_tokens: int | None = None,
            settings: CompactionSettings | None = None, instructions: str | None = None,
            cancel: CancelToken | None = None) -> Compaction:
    """Summarize the current path's history before the cut point and append a compaction.

    Emits ``session_before_compact`` (a handler may cancel, or supply the compaction to write;
    its payload holds the preparation and the earlier compactions, newest first) and, once
    written, ``session_compact`` (:mod:`sessiontree.events`).

    Args:
        session: the session; its current leaf is compacted and the entry appended there.
        summarizer: writes the summaries (default: the offline
            :class:`~sessiontree.summarize.offline.ExtractiveSummarizer`).
        keep_recent_tokens: about how many tokens of the newest messages to keep verbatim
            (default: ``settings``, pi's 20000).
        reserve_tokens: sets the summaries' budgets (default: ``settings``, pi's 16384).
        settings: the base settings (default :data:`DEFAULT_COMPACTION_SETTINGS`).
        instructions: extra focus for the summary.
        cancel: cancels the operation; a hook may cancel it too.

    Returns:
        The compaction entry written (now the leaf).

    Raises:
        OperationCancelled: a ``session_before_compact`` handler cancelled (nothing written).
        SummaryCancelled: ``cancel`` was cancelled (nothing written).
        AlreadyCompacted: the path already ends in a compaction.
        NothingToCompact: the path is empty, or everything on it is kept.
        SummaryFailed: the summarizer raised or returned nothing, or a hook supplied an empty
            summary.
        HookFailed: a ``session_before_compact`` handler raised.
        EntryNotFound: a hook supplied a first kept entry that is not on the path.
    """
    state = _begin(session, keep_recent_tokens, reserve_tokens, settings, instructions, cancel)
    hook, decider = session.events.decide("session_before_compact", state.payload)
    _check_cancelled(session, state, hook, decider)
    result = _hook_result(state, hook)
    from_hook = result is not None
    if result is None:
        result = generate_compaction(state.preparation, summarizer, instructions=instructions,
                                     cancel=state.token)
    _check_cancelled(session, state, None, None)
    entry, event = _append(session, state, result, from_hook)
    session.events.emit("session_compact", event)
    return entry


async def acompact(session: Session, summarizer: Summarizer | None = None, *,
                   keep_recent_tokens: int | None = None, reserve_tokens: int | None = None,
                   settings: CompactionSettings | None = None, instructions: str | None = None,
                   cancel: CancelToken | None = None, offload: Offload | None = None
                   ) -> Compaction:
    """:func:`compact` for async code: hooks are awaited in the running loop, a summarizer's
    ``asummarize`` is used when it has one (the HTTP adapters do), and the history and turn
    prefix summaries run concurrently. ``offload`` runs the path's reads and the append
    (default: in the loop's thread; :class:`~sessiontree.AsyncSession` passes its worker)."""
    from ._offload import inline

    run = offload or inline
    state = await run(lambda: _begin(session, keep_recent_tokens, reserve_tokens, settings,
                                     instructions, cancel))
    hook, decider = await session.events.adecide("session_before_compact", state.payload)
    _check_cancelled(session, state, hook, decider)
    result = _hook_result(state, hook)
    from_hook = result is not None
    if result is None:
        result = await agenerate_compaction(state.preparation, summarizer,
                                            instructions=instructions, cancel=state.token)
    _check_cancelled(session, state, None, None)
    written = result
    entry, event = await run(lambda: _append(session, state, written, from_hook))
    await session.events.aemit("session_compact", event)
    return entry
