"""The default summarizer: offline, deterministic and extractive.

It needs no model: it reads the messages once, sorts what they say by kind, and prints the
sections a person needs to pick the work up again:

* **Goal** — what the user asked for (the first requests and the latest ones);
* **Constraints & Preferences** — the user's sentences with "must", "never", "prefer", ...;
* **Progress** — the files written and edited, commands run, and what the assistant reported;
* **Key Decisions** — the assistant's sentences that choose or decide something;
* **Files** — files read and files modified (from ``read``/``write``/``edit`` tool calls);
* **Open Questions** — questions left unanswered, errors not yet resolved;
* **Last State** — the last request and the last thing the assistant said or did.

A turn prefix (the start of a turn split by a compaction) gets "Original Request", "Early
Progress" and "Context for Suffix" instead. A previous summary, when given, is carried over
(condensed) under "Earlier". The text never exceeds ``max_tokens`` × 4 characters (counted
as JavaScript does, like pi's token estimate): sections get fewer and shorter items until it
fits. The same request always gives the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..entries import as_json_object
from .base import CancelToken, SummaryRequest

__all__ = ["ExtractiveSummarizer"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.S)
_TAGS = re.compile(r"<(read-files|modified-files)>.*?</\1>", re.S)
_CONSTRAINT = re.compile(
    r"\b(must|mustn't|should|shouldn't|don't|do not|never|always|prefer|avoid|only|without|"
    r"instead of|make sure|keep|no more than|at most|at least|required?|needs? to)\b", re.I)
_DECISION = re.compile(
    r"\b(decid\w*|chose|choose|choosing|switch(?:ed|ing)? to|going with|go with|will use|"
    r"i'll use|let's use|rather than|instead|opted|the plan is|approach|because)\b", re.I)
_DONE = re.compile(
    r"\b(done|fixed|added|implemented|created|updated|wrote|written|removed|renamed|refactored|"
    r"passe[sd]|passing|works|working now|finished|completed|merged|resolved)\b", re.I)
_WORD = re.compile(r"[a-z0-9_./-]{4,}")
_FILLER = re.compile(r"^(great|thanks|thank you|ok|okay|perfect|nice|cool|good|sure|yes|alright|"
                     r"awesome|right|hmm|well)\b[\s,.!]*$", re.I)
_CONNECTOR = re.compile(r"^(i'll|i will|i'm going to|so\b|instead\b|therefore|hence|that's why|"
                        r"this is why|to fix (it|this)|the fix)", re.I)
_PREAMBLE = "The user explored a different conversation branch before returning here."

Keep = Literal["head", "tail", "ends"]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _js_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    text = _flat(text)
    if _js_len(text) <= limit:
        return text
    out = text[: max(limit - 1, 0)]
    while out and _js_len(out) > limit - 1:
        out = out[:-1]
    space = out.rfind(" ")
    if space > limit * 0.6:
        out = out[:space]
    return out.rstrip(" ,;:") + "…"


def _prose(text: str) -> str:
    """Text without code blocks (replaced by ``[code]``)."""
    return _CODE_BLOCK.sub(" [code] ", text)


def _sentences(text: str) -> list[str]:
    out = []
    for part in _SENTENCE_END.split(_prose(text)):
        sentence = _flat(part).lstrip("-*• ").strip()
        if len(sentence) > 1:
            out.append(sentence)
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(str(b.get("text", "")) for b in content
                     if isinstance(b, Mapping) and b.get("type") == "text")




def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = _flat(item).lower().rstrip(".!?…")
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _add_unique(target: list[str], item: str) -> None:
    if item and item not in target:
        target.append(item)


@dataclass
class _Digest:
    """What the messages say, sorted by kind, in order."""

    requests: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    edits: dict[str, int] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    tools: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    open_user_questions: list[str] = field(default_factory=list)
    assistant_questions: list[str] = field(default_factory=list)
    last_request: str = ""
    last_reply: str = ""
    last_action: str = ""
    last_stop: str = ""
    turn: int = 0
    last_request_turn: int = -1

    def take(self, message: Any) -> None:
        m = as_json_object(message)
        role = m.get("role")
        if role == "user":
            self._user(_content_text(m.get("content")))
        elif role == "assistant":
            self._assistant(m)
        elif role == "toolResult":
            text = _content_text(m.get("content")).strip()
            name = str(m.get("toolName") or "tool")
            first = text.splitlines()[0] if text else ""
            action = self.last_action or name
            if m.get("isError"):
                self.errors.append((self.turn, f"{name}: {first or 'failed'}"))
                self.last_action = f"{action} (failed: {first or 'no output'})"
            elif first:
                self.last_action = f"{action} (returned: {first})"
        elif role == "bashExecution":
            command = str(m.get("command", ""))
            code = m.get("exitCode")
            _add_unique(self.commands, command)
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                self.errors.append((self.turn, f"`{command}` exited with code {code}"))
            self.last_action = f"the user ran `{command}`" + (
                f" (exit code {code})" if isinstance(code, int) and not isinstance(code, bool) else "")
        elif role in ("branchSummary", "compactionSummary"):
            summary = str(m.get("summary", ""))
            body = _TAGS.sub("", summary.replace(_PREAMBLE, "")).replace(
                "Summary of that exploration:", "")
            goal = _section(body, "Goal") or body
            label = "an abandoned branch" if role == "branchSummary" else "earlier, compacted work"
            if _flat(goal):
                self.earlier.append(f"{label}: {_flat(goal)}")
        elif role == "custom":
            text = _content_text(m.get("content")).strip()
            if text:
                self.notes.append(f"({m.get('customType') or 'note'}) {text}")

    def _user(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        self.turn += 1
        self.requests.append(text)
        self.last_request = text
        self.last_request_turn = self.turn
        sentences = _sentences(text)
        self.constraints += [s for s in sentences if _CONSTRAINT.search(s) and not s.endswith("?")]
        self.open_user_questions = [s for s in sentences if s.endswith("?")]
        self.assistant_questions = []
        self.last_reply = ""
        self.last_stop = ""
        self.last_action = ""

    def _assistant(self, m: Mapping[str, Any]) -> None:
        content = m.get("content")
        blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
        for block in blocks:
            if block.get("type") == "toolCall":
                self._tool_call(str(block.get("name", "")), block.get("arguments"))
        stop = m.get("stopReason")
        self.last_stop = str(stop) if stop in ("error", "aborted", "length") else ""
        if stop in ("error", "aborted"):
            reason = m.get("errorMessage")
            self.errors.append((self.turn, f"the assistant's reply {'failed' if stop == 'error' else 'was aborted'}"
                                + (f": {reason}" if isinstance(reason, str) and reason else "")))
        if not text:
            return
        sentences = _sentences(text)
        decisions = []
        for index, sentence in enumerate(sentences):
            if _DECISION.search(sentence):
                if index and _CONNECTOR.match(sentence):  # "I'll do X instead" needs its reason
                    sentence = f"{sentences[index - 1]} {sentence}"
                decisions.append(sentence)
        self.decisions += decisions
        reported = [s for s in sentences if _DONE.search(s) and not _DECISION.search(s)]
        if reported:
            self.reports += reported[:2]
        elif stop == "stop" and sentences:
            self.reports.append(sentences[0])
        self.last_reply = text
        self.open_user_questions = []
        self.assistant_questions = [s for s in sentences if s.endswith("?")]

    def _tool_call(self, name: str, arguments: Any) -> None:
        self.tools[name] = self.tools.get(name, 0) + 1
        args = arguments if isinstance(arguments, Mapping) else {}
        path = args.get("path")
        if isinstance(path, str) and path:
            if name == "read":
                _add_unique(self.read, path)
                self.last_action = f"reading {path}"
            elif name in ("write", "edit"):
                _add_unique(self.modified, path)
                self.edits[path] = self.edits.get(path, 0) + 1
                self.last_action = f"{'writing' if name == 'write' else 'editing'} {path}"
        command = args.get("command")
        if isinstance(command, str) and command:
            _add_unique(self.commands, command)
            self.last_action = f"running `{_flat(command)}`"
        pattern = args.get("pattern")
        if isinstance(pattern, str) and pattern and name not in ("read", "write", "edit"):
            where = args.get("path")
            _add_unique(self.searches, f"{name} `{pattern}`" + (f" in {where}" if isinstance(where, str) else ""))


def _section(text: str, heading: str) -> str:
    """The body of ``## heading`` in a markdown summary, or ``""``."""
    match = re.search(rf"^##\s*{re.escape(heading)}\s*\n(.*?)(?=^##\s|\Z)", text, re.S | re.M)
    return match.group(1).strip() if match else ""


def _condense_previous(summary: str) -> list[str]:
    """The previous summary's lines that carry content (no tags, no empty headings)."""
    body = _TAGS.sub("", summary.replace(_PREAMBLE, ""))
    body = body.replace("Summary of that exploration:", "")
    lines = []
    heading = ""
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line == "---":
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            continue
        line = line.lstrip("-*0123456789.) ").replace("[x] ", "").replace("[ ] ", "").strip()
        if not line or line in ("(none)", "(none stated)", "(none recorded)"):
            continue
        lines.append(f"{heading}: {line}" if heading else line)
    return _unique(lines)


def _focus(items: list[str], instructions: str | None) -> list[str]:
    """Items that share a word with the instructions first (otherwise in order)."""
    if not instructions:
        return items
    words = set(_WORD.findall(instructions.lower()))
    if not words:
        return items
    return sorted(items, key=lambda s: not (words & set(_WORD.findall(s.lower()))))


@dataclass
class _Section:
    heading: str
    items: list[str]
    keep: Keep = "head"
    empty: str = ""
    fixed: bool = False
    """Printed in full (or cut only at the very end): one short line, like the focus."""
    pinned: list[str] = field(default_factory=list)
    """Printed first whatever the level (the activity lines of a progress section)."""


def _choose(items: Sequence[str], limit: int, keep: Keep) -> tuple[list[str], int]:
    if len(items) <= limit:
        return list(items), 0
    hidden = len(items) - limit
    if keep == "head":
        return list(items[:limit]), hidden
    if keep == "tail":
        return list(items[-limit:]), hidden
    head = max(1, limit // 3)
    return list(items[:head]) + list(items[len(items) - (limit - head):]), hidden


def _render(sections: Sequence[_Section], per_section: int, per_item: int) -> str:
    blocks = []
    for section in sections:
        lines: list[str]
        if section.heading.startswith("### ") and not section.items:
            continue
        if section.fixed:
            lines = [f"- {_cut(item, max(per_item, 160))}" for item in section.items]
        else:
            chosen, hidden = _choose(section.items, per_section, section.keep)
            lines = [f"- {_cut(item, per_item)}" for item in chosen]
            pinned = [f"- {_cut(item, max(per_item, 100))}" for item in section.pinned]
            if hidden:
                note = f"- (+{hidden} more)"
                if section.keep == "head":
                    lines.append(note)
                elif section.keep == "tail":
                    lines.insert(0, note)
                else:
                    lines.insert(max(1, per_section // 3), note)
            lines = pinned + lines
        if not lines and section.empty:
            lines = [f"- {section.empty}"]
        if lines or not section.heading.startswith("### "):
            blocks.append(section.heading + ("\n" + "\n".join(lines) if lines else ""))
    return "\n\n".join(blocks).replace("\n\n### ", "\n### ")


_ESSENTIAL = frozenset({"## Goal", "## Last State", "## Original Request", "## Context for Suffix"})
_LEVELS = ((10, 360), (8, 280), (6, 220), (5, 180), (4, 150), (3, 120), (2, 100), (2, 80),
           (1, 70), (1, 50), (1, 36))


class ExtractiveSummarizer:
    """Summaries without a model (see the module documentation for their sections).

    Args:
        max_items: the most items a section shows before "(+N more)".
        max_item_chars: the longest an item may be before it is cut.
    """

    def __init__(self, max_items: int = 10, max_item_chars: int = 360) -> None:
        self.max_items = max(1, max_items)
        self.max_item_chars = max(20, max_item_chars)

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        """Summarize ``request.messages`` within ``request.max_tokens`` (about 4 characters a
        token). Raises :class:`~sessiontree.summarize.SummaryCancelled` when ``cancel`` is
        cancelled."""
        if cancel is not None:
            cancel.raise_if_cancelled()
        digest = _Digest()
        for index, message in enumerate(request.messages):
            if cancel is not None and index % 256 == 255:
                cancel.raise_if_cancelled()
            digest.take(message)
        if request.purpose == "turn_prefix":
            sections = self._turn_prefix(request, digest)
        else:
            sections = self._history(request, digest)
        text = self._fit(sections, max(1, request.max_tokens) * 4)
        if cancel is not None:
            cancel.raise_if_cancelled()
        return text

    # -- sections ------------------------------------------------------------------------------

    @staticmethod
    def _files(request: SummaryRequest, d: _Digest) -> tuple[list[str], list[str]]:
        modified = _unique([*request.modified_files, *d.modified])
        read = [f for f in _unique([*request.read_files, *d.read]) if f not in modified]
        return read, modified

    @staticmethod
    def _activity(d: _Digest, modified: list[str]) -> list[str]:
        out = []
        changed = [f"{path} ({count} edits)" if count > 1 else path
                   for path, count in ((p, d.edits.get(p, 0)) for p in modified)]
        if changed:
            out.append("changed " + ", ".join(changed))
        if d.commands:
            out.append("ran " + ", ".join(f"`{_flat(c)}`" for c in d.commands[-8:])
                       + (f" (and {len(d.commands) - 8} more commands)" if len(d.commands) > 8 else ""))
        if d.searches:
            out.append("searched: " + ", ".join(d.searches[-5:]))
        return out

    def _history(self, request: SummaryRequest, d: _Digest) -> list[_Section]:
        read, modified = self._files(request, d)
        sections: list[_Section] = []
        if request.instructions:
            sections.append(_Section("## Focus", [request.instructions], fixed=True))
        earlier = (_condense_previous(request.previous_summary) if request.previous_summary
                   else []) + d.earlier
        if earlier:
            sections.append(_Section("## Earlier", earlier, keep="head"))
        goals = [_first_sentences(r) for r in d.requests]
        unresolved = [text for turn, text in d.errors if turn >= d.last_request_turn]
        open_items = _unique(d.open_user_questions + d.assistant_questions) + \
            [f"unresolved: {e}" for e in _unique(unresolved)[-3:]]
        last = []
        if d.last_request:
            last.append(f"last request: {_first_sentences(d.last_request)}")
        if d.last_reply:
            last.append(f"last reply: {d.last_reply}")
        if d.last_action and (not d.last_reply or d.last_stop):
            last.append(f"last action: {d.last_action}")
        if d.last_stop:
            last.append(f"the last reply stopped early ({d.last_stop})")
        in_progress = []
        if d.last_action and not d.last_reply:
            in_progress.append(d.last_action)
        sections += [
            _Section("## Goal", _focus(_unique(goals), request.instructions), keep="ends",
                     empty="(no request from the user in this part)"),
            _Section("## Constraints & Preferences", _unique(d.constraints + d.notes), keep="tail",
                     empty="(none stated)"),
            _Section("## Progress", []),
            _Section("### Done", _focus(_unique(d.reports), request.instructions), keep="tail",
                     pinned=self._activity(d, modified)),
            _Section("### In Progress", in_progress),
            _Section("## Key Decisions", _focus(_unique(d.decisions), request.instructions),
                     keep="tail", empty="(none recorded)"),
            _Section("## Files", ([f"read: {', '.join(read)}"] if read else [])
                     + ([f"modified: {', '.join(modified)}"] if modified else []),
                     empty="(none read or modified)"),
            _Section("## Open Questions", open_items, keep="tail", empty="(none)"),
            _Section("## Last State", last, empty="(nothing yet)"),
        ]
        return sections

    def _turn_prefix(self, request: SummaryRequest, d: _Digest) -> list[_Section]:
        read, modified = self._files(request, d)
        context = ([f"read: {', '.join(read)}"] if read else []) + \
            ([f"modified: {', '.join(modified)}"] if modified else [])
        if d.last_reply:
            context.append(f"the assistant last said: {d.last_reply}")
        if d.last_action:
            context.append(f"last action: {d.last_action}")
        sections = []
        if request.instructions:
            sections.append(_Section("## Focus", [request.instructions], fixed=True))
        sections += [
            _Section("## Original Request", d.requests[:1] or d.notes[:1],
                     empty="(the turn began before this part)"),
            _Section("## Early Progress", _unique(d.reports + d.decisions), keep="tail",
                     empty="(nothing done yet)", pinned=self._activity(d, modified)),
            _Section("## Context for Suffix", context, keep="tail", empty="(none)"),
        ]
        return sections

    # -- fitting -------------------------------------------------------------------------------

    def _fit(self, sections: list[_Section], budget: int) -> str:
        """The fullest rendering that fits ``budget`` characters: fewer, shorter items first,
        then fewer sections (the last ones are kept), then a plain cut."""
        for per_section, per_item in _LEVELS:
            per_section = min(per_section, self.max_items)
            per_item = min(per_item, self.max_item_chars)
            text = _render(sections, per_section, per_item)
            if _js_len(text) <= budget:
                return text
        essential = [s for s in sections if s.heading in _ESSENTIAL] or sections[:1]
        text = _render(essential, 1, 60)
        if _js_len(text) <= budget:
            return text
        return _cut(text, budget) or "…"


def _first_sentences(text: str, limit: int = 2) -> str:
    sentences = _sentences(text)
    while len(sentences) > 1 and _FILLER.match(sentences[0]):
        sentences = sentences[1:]
    if not sentences:
        return _flat(_prose(text)) or _flat(text)
    return " ".join(sentences[:limit])
