"""``--format md``: a session's conversation as readable Markdown.

The active branch by default (the path from the root to the selection's leaf); with
``all_branches`` every branch, one ``##`` heading per leaf, the current branch first and in
full, each other branch from the entry after its branch point (what it shares with a branch
above is written once), so the document grows with the session, not with its branch count. Each entry is a ``###`` heading
(who, id, time, label) and its content: text as written, thinking as a quote, tool calls as
JSON code blocks followed by their results, images as a note of their type and size, and
compactions and branch summaries marked.

Invariants:
* Text from the session is never interpreted: code blocks use a fence longer than any run
  of backticks in their content, so a message cannot close its own block.
* Entries are read from their stored JSON (unknown types and roles still print).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .. import _json
from ..views import shown_leaf
from ._select import Selection, select, selected_tree, walk

if TYPE_CHECKING:
    from ..projection import ProjectedEntry
    from ..session import Session

__all__ = ["export_markdown", "fence", "render_entry"]

_TICKS = re.compile(r"`+")


def fence(text: str, info: str = "") -> str:
    """``text`` in a fenced code block whose fence no backtick run inside can close."""
    longest = max((len(m.group()) for m in _TICKS.finditer(text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{info}\n{text}\n{bar}"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines() or [""])


def _blocks_text(content: Any) -> tuple[str, list[str]]:
    """Text and image notes of a ``content`` (string or blocks)."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "image":
            data = block.get("data")
            size = len(data) * 3 // 4 - data[-2:].count("=") if isinstance(data, str) else 0
            images.append(f"*[image: {block.get('mimeType', '?')}, about {size:,} bytes]*")
    return "\n\n".join(texts), images


def _result_text(result: dict[str, Any]) -> str:
    text, images = _blocks_text(result.get("content"))
    parts = []
    status = " (error)" if result.get("isError") else ""
    parts.append(f"**Result{status}:**\n\n" + fence(text or "(no output)"))
    parts.extend(images)
    return "\n\n".join(parts)


def _when(entry: dict[str, Any]) -> str:
    stamp = entry.get("timestamp")
    return f" · {stamp[:19].replace('T', ' ')}" if isinstance(stamp, str) else ""


def render_entry(entry: dict[str, Any], label: str | None = None,
                 results: dict[str, dict[str, Any]] | None = None) -> str | None:
    """One entry as a Markdown section, or ``None`` for entries with nothing to read (labels,
    tool results already shown under their call).

    Args:
        entry: the entry as stored (decoded JSON).
        label: its current label.
        results: tool results by ``toolCallId`` to show under their calls (they are then not
            shown again).
    """
    kind = entry.get("type")
    eid = entry.get("id", "?")
    tag = f" · [{label}]" if label else ""
    when = _when(entry)

    def head(title: str) -> str:  # not str.format: an id or a label may hold braces
        return f"### {title} · `{eid}`{when}{tag}"

    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return None
        role = message.get("role")
        if role == "user":
            text, images = _blocks_text(message.get("content"))
            return "\n\n".join([head("User"), text, *images]).rstrip()
        if role == "assistant":
            return _assistant(head, message, results or {})
        if role == "toolResult":
            if results is not None and message.get("toolCallId") in results:
                return None
            return head(f"Tool result: {message.get('toolName', '?')}") + "\n\n" + \
                _result_text(message)
        if role == "bashExecution":
            code = message.get("exitCode")
            out = fence(f"$ {message.get('command', '')}\n{message.get('output', '')}", "console")
            return f"{head('Shell')}\n\n{out}\n\nexit code: {code}"
        if role == "custom":
            text, images = _blocks_text(message.get("content"))
            return "\n\n".join([head(f"Custom: {message.get('customType', '?')}"), text,
                                *images])
        if role == "system":
            return _system(head, message)
        return head(f"Message ({role})") + "\n\n" + fence(_json.dumps(message).decode(),
                                                                 "json")
    if kind == "compaction":
        return (f"{head('Compaction')}\n\n*{entry.get('tokensBefore', 0):,} tokens "
                f"summarized; the context continues from this summary.*\n\n"
                + _quote(str(entry.get("summary", ""))))
    if kind == "branch_summary":
        return (f"{head('Branch summary')}\n\n*Summary of the branch left at "
                f"`{entry.get('fromId', '?')}`.*\n\n" + _quote(str(entry.get("summary", ""))))
    if kind == "custom_message":
        if entry.get("display") is False:
            return None
        text, images = _blocks_text(entry.get("content"))
        return "\n\n".join([head(f"Custom: {entry.get('customType', '?')}"), text,
                            *images])
    if kind == "model_change":
        return f"*Model: {entry.get('provider', '?')}/{entry.get('modelId', '?')}* (`{eid}`)"
    if kind == "thinking_level_change":
        return f"*Thinking level: {entry.get('thinkingLevel', '?')}* (`{eid}`)"
    if kind == "session_info":
        name = entry.get("name")
        return f"*Session name: {name}* (`{eid}`)" if name else f"*Session name cleared* (`{eid}`)"
    if kind == "context_edit":
        replacement = entry.get("replacement")
        if not isinstance(replacement, dict):
            return f"*Context edit: `{entry.get('targetId', '?')}` left out of the model's context* (`{eid}`)"
        text, images = _blocks_text(replacement.get("content"))
        return "\n\n".join([f"*Context edit: the model sees `{entry.get('targetId', '?')}` as* (`{eid}`)",
                             _quote(text), *images])
    if kind == "usage":
        found = entry.get("usage")
        usage: dict[str, Any] = found if isinstance(found, dict) else {}
        tokens = sum(v for k in ("input", "output", "cacheRead", "cacheWrite")
                     if isinstance(v := usage.get(k), int))
        costs = usage.get("cost")
        cost = costs.get("total") if isinstance(costs, dict) else None
        price = f", ${cost:.4f}" if isinstance(cost, (int, float)) else ""
        return (f"*Usage ({entry.get('kind', '?')}): {entry.get('provider', '?')}/"
                f"{entry.get('model', '?')}, {tokens:,} tokens{price}* (`{eid}`)")
    if kind in ("label", "custom"):
        return None
    return head(f"Entry ({kind})") + "\n\n" + fence(_json.dumps(entry).decode(), "json")


def _system(head: Callable[[str], str], message: dict[str, Any]) -> str:
    """A system message: what it changes in the prompt and the tools (pi replays them in
    order: text, sections set or removed by name, tools added and removed)."""
    parts = [head("System prompt")]
    text, _ = _blocks_text(message.get("content"))
    if text:
        parts.append(_quote(text))
    sections = message.get("sections")
    for name, value in (sections.items() if isinstance(sections, dict) else ()):
        parts.append(f"**Section `{name}` removed**" if value is None else
                     f"**Section `{name}`:**\n\n" + _quote(str(value)))
    for key, verb in (("toolsAdded", "added"), ("toolsRemoved", "removed")):
        tools = message.get(key)
        if isinstance(tools, list) and tools:
            names = [f"`{t.get('name', '?')}`" + (f": {t['description']}" if verb == "added" and
                                                   t.get("description") else "")
                     for t in tools if isinstance(t, dict)]
            parts.append(f"**Tools {verb}:**\n\n" + "\n".join(f"- {n}" for n in names))
    if len(parts) == 1:
        parts.append("*(no change)*")
    return "\n\n".join(parts)


def _assistant(head: Callable[[str], str], message: dict[str, Any],
               results: dict[str, dict[str, Any]]) -> str:
    model = message.get("model")
    parts = [head(f"Assistant{f' ({model})' if model else ''}")]
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            parts.append(_quote("*Thinking:* " + block["thinking"]))
        elif kind == "toolCall":
            args = _json.dumps(block.get("arguments", {})).decode()
            parts.append(f"**Tool call:** `{block.get('name', '?')}`\n\n" + fence(args, "json"))
            result = results.get(str(block.get("id")))
            if result is not None:
                parts.append(_result_text(result))
    reason = message.get("stopReason")
    if reason in ("error", "aborted"):
        parts.append(f"*[{reason}] {message.get('errorMessage', '')}*".rstrip())
    return "\n\n".join(parts)


def _edit_note(projected: ProjectedEntry) -> str:
    """Under an entry the model sees edited or not at all (its ``context_edit`` from the
    projection of the branch's leaf): what the model sees instead."""
    edit = projected.edit or {}
    edit_id = edit.get("id", "?")
    if projected.omitted:
        return f"*Left out of the model's context (context edit `{edit_id}`).*"
    replacement = edit.get("replacement")
    text, images = _blocks_text(replacement.get("content") if isinstance(replacement, dict)
                                else None)
    return "\n\n".join([f"*The model sees instead (context edit `{edit_id}`):*", _quote(text),
                         *images])


def _path_markdown(session: Session, ids: Iterable[str], labels: dict[str, str],
                   leaf: str | None = None) -> list[str]:
    """The entries, each marked when the context from ``leaf`` sees it edited or omitted."""
    edited = {} if leaf is None else {
        p.entry_id: p for p in session.build_projection(leaf).entries if p.edit is not None}
    entries = [_json.loads(session.raw_line(i)) for i in ids]
    results = {}
    for entry in entries:
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "toolResult":
            results[str(message.get("toolCallId"))] = message
    calls = set()
    for entry in entries:
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "assistant":
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    calls.add(str(block.get("id")))
    shown_results = {k: v for k, v in results.items() if k in calls}
    out = []
    for entry in entries:
        text = render_entry(entry, labels.get(str(entry.get("id"))), shown_results)
        projected = edited.get(str(entry.get("id")))
        if projected is not None:
            text = (text or f"`{entry.get('id')}`") + "\n\n" + _edit_note(projected)
        if text:
            out.append(text)
    return out


def _fork_note(session: Session, entry_id: str, labels: dict[str, str]) -> str:
    """`` (assistant: first words…) [label]`` for the entry a branch starts after."""
    from ..describe import KIND_NAMES, entry_kind, entry_summary

    entry = session.entry(entry_id)
    kind = entry_kind(entry)
    label = f" [{labels[entry_id]}]" if entry_id in labels else ""
    return f" ({KIND_NAMES.get(kind, kind)}: {entry_summary(entry, 60)}){label}"


def _named_leaf(session: Session, leaf: str) -> str:
    """The leaf a heading names: the last entry of its path that is not operation-tree
    bookkeeping (a chat turn ends with one), as every other view names it."""
    return shown_leaf(session.path_ids(leaf), session.entry) or leaf


def export_markdown(session: Session, selection: Selection | None = None, *,
                    all_branches: bool = False,
                    advance: Callable[[int], None] | None = None) -> str:
    """The Markdown document.

    Args:
        selection: what to export (default: everything, opened on the session's leaf).
        all_branches: every branch of the selection, each under its own heading, instead of
            only the path to the selection's leaf; each entry is written once. A subtree
            selection ("this entry and everything below it") always writes every branch.
        advance: called with the number of branches done, for a progress bar.
    """
    selection = selection or select(session)
    all_branches = all_branches or selection.kind == "subtree"
    shown = set(selection.ids)
    labels = {k: v[0] for k, v in session.labels().items() if k in shown}
    title = session.name or f"Session {session.id}"
    lines = [f"# {title}", "", ""]  # (the third line, the count, once it is known)
    written: set[str] = set()
    if all_branches:
        roots = selected_tree(session, selection)
        leaves = [n.id for n in walk(roots) if not n.children]
        leaves.sort(key=lambda leaf: leaf != selection.leaf_id)  # the current branch first
        for number, leaf in enumerate(leaves, 1):
            path = [i for i in session.path_ids(leaf) if i in shown]
            start = next((n for n, i in enumerate(path) if i not in written), len(path))
            mark = " (current)" if leaf == selection.leaf_id else ""
            named = _named_leaf(session, leaf)
            label = f" [{labels[named]}]" if named in labels else ""
            lines += ["", f"## Branch {number} of {len(leaves)}: to `{named}`{label}{mark}", ""]
            if start > 0:  # the shared part is written once, in the branch that came first
                fork = path[start - 1]
                lines += [f"*Branches off after `{fork}`{_fork_note(session, fork, labels)}; "
                          "the entries before it are above.*", ""]
            lines.append("\n\n".join(_path_markdown(session, path[start:], labels, leaf)))
            written.update(path)
            if advance is not None:
                advance(1)
    elif selection.leaf_id is not None:
        path = [i for i in session.path_ids(selection.leaf_id) if i in shown]
        lines += ["", f"## Branch to `{_named_leaf(session, selection.leaf_id)}`", ""]
        lines.append("\n\n".join(_path_markdown(session, path, labels, selection.leaf_id)))
        written.update(path)
        if advance is not None:
            advance(1)
    count = f"{len(written)} entries" if len(written) == len(shown) else \
        f"{len(written)} of {len(shown)} entries (the branch to the leaf; --all for every branch)"
    lines[2] = (f"*{session.cwd} · started {session.header.timestamp[:19].replace('T', ' ')} · "
                f"{count}*")
    return "\n".join(lines).rstrip() + "\n"
