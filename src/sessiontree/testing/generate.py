"""Realistic pi session files, generated from a seed: for tests, benchmarks and demos.

A generated session reads like a coding agent's work: user requests, assistants thinking and
calling tools (``read``, ``bash``, ``edit``, ``write``, ``grep``) in several rounds, long tool
results, ``!`` shell commands, images, errored and aborted answers, model and thinking-level
changes, labels set and cleared, a session name, extension state (``custom``) and extension
messages (``custom_message``), moves back to an earlier point of the conversation as pi's
``/tree`` makes them (half of them leaving a ``branch_summary``, a few starting a new root), and
``compaction`` entries whose ``firstKeptEntryId`` is chosen by pi's cut-point rule.

With ``pi1=True`` it also writes what pi 1.x adds: system messages (the first one with prompt
sections and tools, later ones patching sections, adding and removing tools), ``usage``
entries (cache warming and other kinds), ``context_edit`` entries (omitting or replacing an
earlier entry's content; now and then one that changes nothing: an unknown id, an entry that
gives no editable content or one off the path), compactions with their ``systemMessage``
checkpoint and summarizer ``usage``, branch summaries with ``usage``, and now and then a
message whose ``content`` is null, as hand-edited files have.

Invariants:
* Same arguments, same bytes: everything random comes from one ``random.Random(seed)`` and the
  clock is simulated; nothing depends on the machine, the time or the Python version.
* Exactly ``entries`` entry lines after the header; every line is what pi's ``JSON.stringify``
  writes (``sessiontree._json``), with pi's key order for each entry type.
* Ids are 8 lowercase hex digits, unique by construction (a bijection of the entry's number, so
  no set of ids is kept); every ``parentId`` names an earlier line; every tool result follows its
  call on the path; every ``firstKeptEntryId`` and label target is on the path it was made from.
* Memory is a few arrays of numbers per entry (about 20 bytes), so a million-entry file (about
  1.6 GB) is generated in bounded memory, streamed to disk.

Run it as ``python -m sessiontree.testing.generate --entries 10000 out.jsonl`` or, for a folder of
sessions (listing benchmarks), ``python -m sessiontree.testing.generate --sessions 1000 DIR``.
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import os
import random
import struct
import sys
import zlib
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import msgspec

from .. import _json
from ..compaction import estimate_tokens, find_cut_point
from ..system_prompt import current_system_message

__all__ = ["GeneratedSession", "generate_folder", "generate_session", "main"]

DEFAULT_CWD = "/home/dev/projects/acme-api"
DEFAULT_START_MS = 1_759_151_128_000  # 2025-09-29T13:05:28Z; each session starts from here on

# Entry kinds, as small integers in the per-entry array.
_USER, _ASSISTANT, _TOOL_RESULT, _BASH, _MODEL, _THINKING, _LABEL, _INFO, _CUSTOM, \
    _CUSTOM_MESSAGE, _BRANCH_SUMMARY, _COMPACTION, _SYSTEM, _USAGE, _CONTEXT_EDIT = range(15)
_MESSAGE_ROLES = {_USER: "user", _ASSISTANT: "assistant", _TOOL_RESULT: "toolResult",
                  _BASH: "bashExecution", _SYSTEM: "system"}
_ENTRY_TYPES = {_MODEL: "model_change", _THINKING: "thinking_level_change", _LABEL: "label",
                _INFO: "session_info", _CUSTOM: "custom", _CUSTOM_MESSAGE: "custom_message",
                _BRANCH_SUMMARY: "branch_summary", _COMPACTION: "compaction",
                _USAGE: "usage", _CONTEXT_EDIT: "context_edit"}
_EDITABLE = (_USER, _ASSISTANT, _TOOL_RESULT, _CUSTOM_MESSAGE)
_SECTIONS = ("preamble", "tools", "guidelines", "cwd", "skills", "project-context", "date")
_TOOL_NAMES = ("read", "bash", "edit", "write", "grep", "find", "ls")
_USAGE_KINDS = ("cache_warm", "cache_warm", "title", "classifier")

_WORDS = (
    "the a to of and in for is it that this with on as we be not or but can should will".split()
    + "test tests parser session tree branch leaf entry context model token tokens cache file "
      "files function method class module import export return value values error errors type "
      "types config option options path paths request response stream output input result "
      "results index indexes table query migration schema handler event events hook hooks "
      "label labels summary compaction refactor rename helper fixture build lint format check "
      "commit diff patch merge release version update upgrade flag argument default retry "
      "timeout lock write read append offset buffer line lines json jsonl header field fields "
      "bug fix issue failing passes green red slow fast memory async await promise callback "
      "client server api endpoint route cli command shell script docker deploy ci pipeline "
      "logger logging debug trace metrics cost usage provider latency".split()
)
_VERBS = ("Fix", "Add", "Refactor", "Explain", "Rename", "Speed up", "Document", "Test",
          "Remove", "Port", "Review", "Debug", "Split", "Simplify", "Migrate")
_SUBJECTS = ("the session parser", "the retry logic in the HTTP client", "the CLI's --json output",
             "the compaction cut point", "the flaky integration test", "the config loader",
             "the database migration", "the label editor", "the tree view", "the export to HTML",
             "the token counter", "the auth middleware", "the websocket reconnect",
             "the README examples", "the release script", "the cache invalidation")
_FILES = ("src/session.ts", "src/tree.ts", "src/context.ts", "src/cli/main.ts", "src/http/retry.ts",
          "src/config.ts", "src/db/migrate.ts", "src/export/html.ts", "src/tokens.ts",
          "tests/session.test.ts", "tests/tree.test.ts", "tests/cli.test.ts", "README.md",
          "package.json", "src/util/json.ts", "src/ui/tree-view.ts", "src/auth.ts",
          "src/ws/client.ts", "scripts/release.sh", "docs/format.md")
_COMMANDS = ("npm test", "npm run build", "npx tsc --noEmit", "git status", "git diff --stat",
             "npm run lint", "ls -la src", "rg -n \"buildSessionContext\" src", "npx vitest run",
             "cat package.json", "git log --oneline -5", "node --version", "du -sh node_modules")
_LABELS = ("checkpoint", "before-refactor", "python-rewrite", "tests-green", "good-state",
           "try-2", "baseline", "api-design", "bug-repro", "release-candidate")
_NAMES = ("Refactor session storage", "Fix flaky CI", "CLI polish", "Port parser to Rust",
          "Speed up tree view", "Auth middleware rewrite")
_MODELS = (  # provider, model, api, $ per million tokens: input, output, cache read, cache write
    ("anthropic", "claude-sonnet-4-5", "anthropic-messages", 3.0, 15.0, 0.3, 3.75),
    ("anthropic", "claude-opus-4-1", "anthropic-messages", 15.0, 75.0, 1.5, 18.75),
    ("openai", "gpt-5", "openai-responses", 1.25, 10.0, 0.125, 0.0),
    ("google", "gemini-2.5-pro", "google-generative-ai", 1.25, 10.0, 0.31, 0.0),
)
_THINKING_LEVELS = ("off", "minimal", "low", "medium", "high")
_CODE_LINES = (
    "import { readFileSync } from \"node:fs\";", "export function parse(line: string) {",
    "  const entry = JSON.parse(line);", "  if (!entry.id) throw new Error(`bad line ${n}`);",
    "  return entry;", "}", "", "for (const child of node.children) {", "  stack.push(child);",
    "const byId = new Map<string, Entry>();", "def build_context(entries, leaf_id):",
    "    path = []", "    while node is not None:", "        node = by_id.get(node.parent_id)",
    "    return list(reversed(path))", "  // TODO: handle the torn last line",
    "  await retry(() => client.send(request), { attempts: 3 });", "} catch (err) {",
    "  logger.warn(\"retrying\", { attempt, err });", "    assert result.ok, result.error",
    "✓ tests/session.test.ts (42 tests) 318ms", "✗ tests/tree.test.ts > getBranch > deep path",
    "  Expected: 4108", "  Received: 4107", "Test Files  1 failed | 11 passed (12)",
    "error TS2345: Argument of type 'string | undefined' is not assignable.",
    "src/context.ts:118:7 - warning: unused variable 'leaf'", "M  src/session.ts",
    " 3 files changed, 41 insertions(+), 12 deletions(-)", "Größe: 12 KiB — naïve café ✓",
)


def _entry_id(number: int, salt: int) -> str:
    """A unique, random-looking 8-hex id for entry ``number`` (an invertible mix of 32 bits)."""
    x = (number * 0x9E3779B1 + salt) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    x ^= x >> 16
    return f"{x:08x}"


def _iso(ms: int) -> str:
    moment = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _uuid7(ms: int, rng: random.Random) -> str:
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rng.getrandbits(12) << 64 \
        | 0b10 << 62 | rng.getrandbits(62)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A valid PNG of one colour, so generated images display."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    row = b"\x00" + bytes(rgb) * width
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


def _signature(api: str, thinking: str, data: bytes) -> str:
    """A thinking block's ``thinkingSignature`` as pi-ai writes it for ``api``: for OpenAI
    Responses the reasoning output item, JSON-encoded (``JSON.stringify(item)`` of
    ``response.output_item.done``; its summary is the thinking text, its id and encrypted content
    drawn from ``data``); for the others the provider's opaque base64 signature."""
    if api != "openai-responses":
        return base64.b64encode(data).decode()
    item = {"id": "rs_" + data[:25].hex(), "type": "reasoning",
            "encrypted_content": "gAAAAAB" + base64.urlsafe_b64encode(data).decode(),
            "summary": [{"type": "summary_text", "text": thinking}]}
    return _json.dumps(item).decode()


class GeneratedSession(msgspec.Struct, frozen=True):
    """What :func:`generate_session` wrote: the file and the counts of what is in it."""

    path: str
    entries: int
    bytes: int
    session_id: str
    cwd: str
    leaf_id: str | None
    branches: int
    branch_summaries: int
    new_roots: int
    compactions: int
    labels: int
    label_clears: int
    model_changes: int


class _Generator:
    """One session being written: the simulated clock, the tree so far, and the output."""

    def __init__(self, out: IO[bytes], entries: int, *, seed: int, branch_every: int,
                 compact_every: int, keep_recent_tokens: int, cwd: str, start_ms: int,
                 pi1: bool = False) -> None:
        self.out = out
        self.pi1 = pi1
        self.system: dict[int, dict[str, Any]] = {}  # pi1: system message entries by number
        self.checkpoints: dict[int, dict[str, Any]] = {}  # pi1: compaction -> systemMessage
        self.target = entries
        self.rng = random.Random(seed)
        self.branch_every = branch_every
        self.compact_every = compact_every
        self.keep_recent_tokens = keep_recent_tokens
        self.clock = start_ms + self.rng.randrange(0, 3_600_000)
        self.salt = self.rng.getrandbits(32)
        self.session_id = _uuid7(self.clock, self.rng)
        self.cwd = cwd
        self.parents = array("l")   # entry number -> parent number, -1 for a root
        self.kinds = array("b")     # entry number -> kind
        self.tokens = array("l")    # entry number -> pi's token estimate (messages only)
        self.leaf = -1
        self.size = 0
        self.labeled: dict[int, str] = {}
        self.kept: dict[int, int] = {}  # compaction number -> path index of its first kept entry
        self.model = _MODELS[0]
        self.thinking = "medium"
        self.named = False
        self.since_branch = 0
        self.since_compaction = 0
        self.read_files: list[str] = []
        self.modified_files: list[str] = []
        self.stats = dict.fromkeys(("branches", "branch_summaries", "new_roots", "compactions",
                                    "labels", "label_clears", "model_changes"), 0)
        self._write_line({"type": "session", "version": 3, "id": self.session_id,
                          "timestamp": _iso(self.clock), "cwd": cwd})

    # -- output ----------------------------------------------------------------------------------

    def _write_line(self, value: Mapping[str, Any]) -> None:
        line = _json.dumps(value) + b"\n"
        self.out.write(line)
        self.size += len(line)

    @property
    def full(self) -> bool:
        return len(self.kinds) >= self.target

    def _tick(self, low: int, high: int) -> int:
        self.clock += self.rng.randint(low, high)
        return self.clock

    def _append(self, kind: int, body: Mapping[str, Any], *, tokens: int = 0,
                payload_first: bool = False, parent: int | None = None,
                stamp: int | None = None) -> int:
        """Write one entry under ``parent`` (default: the leaf) at ``stamp`` (default: a tick
        later); it becomes the leaf."""
        number = len(self.kinds)
        parent = self.leaf if parent is None else parent
        envelope = {"id": _entry_id(number, self.salt),
                    "parentId": _entry_id(parent, self.salt) if parent >= 0 else None,
                    "timestamp": _iso(self._tick(1, 40) if stamp is None else stamp)}
        kind_name = "message" if kind in _MESSAGE_ROLES else _ENTRY_TYPES[kind]
        line = {"type": kind_name, **body, **envelope} if payload_first else \
            {"type": kind_name, **envelope, **body}
        self._write_line(line)
        self.parents.append(parent)
        self.kinds.append(kind)
        self.tokens.append(tokens)
        self.leaf = number
        self.since_branch += 1
        self.since_compaction += 1
        return number

    def _message(self, kind: int, message: dict[str, Any]) -> int:
        return self._append(kind, {"message": message}, tokens=estimate_tokens(message))

    # -- text ------------------------------------------------------------------------------------

    def _words(self, low: int, high: int) -> str:
        words = self.rng.choices(_WORDS, k=self.rng.randint(low, high))
        return " ".join(words).capitalize()

    def _prose(self, sentences: int) -> str:
        return " ".join(self._words(5, 18) + self.rng.choice(".?!:") for _ in range(sentences))

    def _code(self, low: int, high: int) -> str:
        return "\n".join(self.rng.choices(_CODE_LINES, k=self.rng.randint(low, high)))

    def _tool_output(self) -> str:
        """Mostly a few hundred characters to a few KiB; now and then a whole large file."""
        roll = self.rng.random()
        if roll < 0.04:
            return self._code(400, 1200)
        if roll < 0.25:
            return self._code(40, 160)
        return self._code(3, 30)

    # -- the conversation -------------------------------------------------------------------------

    def _path(self) -> list[int]:
        """Entry numbers from the root to the leaf."""
        path = []
        node = self.leaf
        while node >= 0:
            path.append(node)
            node = self.parents[node]
        path.reverse()
        return path

    def run(self) -> None:
        self._append(_MODEL, {"provider": self.model[0], "modelId": self.model[1]})
        if not self.full:
            self._append(_THINKING, {"thinkingLevel": self.thinking})
        if self.pi1 and not self.full:
            self._system(first=True)
        while not self.full:
            self._between_turns()
            if not self.full:
                self._turn()

    def _between_turns(self) -> None:
        rng = self.rng
        if self.branch_every and self.since_branch >= self.branch_every * rng.uniform(0.7, 1.3):
            self._branch()
        elif self.compact_every and \
                self.since_compaction >= self.compact_every * rng.uniform(0.8, 1.2):
            self._compact()
        if rng.random() < 0.015 and not self.full:
            self.model = rng.choice([m for m in _MODELS if m != self.model])
            self.stats["model_changes"] += 1
            self._append(_MODEL, {"provider": self.model[0], "modelId": self.model[1]})
        if rng.random() < 0.01 and not self.full:
            self.thinking = rng.choice([t for t in _THINKING_LEVELS if t != self.thinking])
            self._append(_THINKING, {"thinkingLevel": self.thinking})
        if rng.random() < 0.02 and not self.full:
            self._label()
        if not self.named and len(self.kinds) > 20 and rng.random() < 0.1 and not self.full:
            self.named = True
            self._append(_INFO, {"name": rng.choice(_NAMES)})
        if rng.random() < 0.01 and not self.full:
            self._append(_CUSTOM, {"customType": "todo-extension", "data": {
                "todos": [{"text": self._words(3, 8), "done": rng.random() < 0.5}
                          for _ in range(rng.randint(1, 4))]}}, payload_first=True)
        if rng.random() < 0.006 and not self.full:
            self._append(_CUSTOM_MESSAGE, {
                "customType": "git-status", "content": "Working tree: " + self._words(4, 12),
                "display": rng.random() < 0.7, "details": {"dirty": rng.randint(0, 9)}},
                payload_first=True)
        if self.pi1:
            self._pi1_between_turns()

    # -- pi 1.x -----------------------------------------------------------------------------------

    def _pi1_between_turns(self) -> None:
        rng = self.rng
        if rng.random() < 0.2 and not self.full:
            self._system(first=False)
        if rng.random() < 0.2 and not self.full:
            self._usage_entry()
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            if not self.full:
                self._context_edit()
        if rng.random() < 0.04 and not self.full:
            self._append(_CUSTOM_MESSAGE, {"customType": "note", "content": None, "display": True},
                         payload_first=True)
        if rng.random() < 0.04 and not self.full:
            self._message(_USER, {"role": "user", "content": None, "timestamp": self.clock})

    def _tool(self, name: str) -> dict[str, Any]:
        return {"name": name, "description": f"{name.capitalize()}: {self._words(4, 10)}",
                "parameters": {"type": "object", "properties": {
                    "path": {"type": "string", "description": self._words(2, 5)}},
                    "required": ["path"]}}

    def _system(self, *, first: bool) -> None:
        """A system message: the whole prompt and tools first, then patches."""
        rng = self.rng
        message: dict[str, Any] = {"role": "system", "content": ""}
        if first:
            if rng.random() < 0.3:
                message["content"] = "You are an expert coding assistant. " + self._prose(1)
            message["sections"] = {name: f"<{name}>\n{self._prose(rng.randint(1, 3))}\n</{name}>"
                                   for name in _SECTIONS[:rng.randint(2, len(_SECTIONS))]}
            message["toolsAdded"] = [self._tool(n) for n in _TOOL_NAMES[:rng.randint(2, 5)]]
        else:
            roll = rng.random()
            if roll < 0.2:
                message["content"] = self._prose(1)
            if roll > 0.1:
                patch: dict[str, Any] = {}
                for name in rng.sample(_SECTIONS, rng.randint(1, 3)):
                    patch[name] = None if rng.random() < 0.3 else \
                        f"<{name}>\n{self._prose(rng.randint(1, 2))}\n</{name}>"
                message["sections"] = patch
            if rng.random() < 0.4:
                message["toolsAdded"] = [self._tool(n) for n in rng.sample(_TOOL_NAMES, 2)]
            if rng.random() < 0.3:
                message["toolsRemoved"] = [{"name": rng.choice(_TOOL_NAMES)}]
        message["timestamp"] = self.clock
        number = self._message(_SYSTEM, message)
        self.system[number] = message

    def _usage_entry(self) -> None:
        rng = self.rng
        provider, model = self.model[:2]
        body: dict[str, Any] = {"kind": rng.choice(_USAGE_KINDS), "provider": provider,
                                "model": model, "usage": self._usage()}
        if rng.random() < 0.3:
            body["note"] = self._words(2, 6)
        self._append(_USAGE, body)

    def _context_edit(self) -> None:
        """Omit or replace an earlier entry's content; now and then an edit that changes nothing."""
        rng = self.rng
        path = self._path()
        roll = rng.random()
        if roll < 0.08:
            target = "deadbeef"  # no such entry
        elif roll < 0.16:
            others = [n for n in path if self.kinds[n] not in _EDITABLE]
            if not others:
                return
            target = _entry_id(rng.choice(others), self.salt)  # gives no editable content
        elif roll < 0.22 and len(self.kinds) > len(path):
            on_path = set(path)
            off = [n for n in range(len(self.kinds)) if n not in on_path
                   and self.kinds[n] in _EDITABLE]
            if not off:
                return
            target = _entry_id(rng.choice(off), self.salt)  # on another branch
        else:
            candidates = [n for n in path if self.kinds[n] in _EDITABLE]
            if not candidates:
                return
            chosen = rng.choice(candidates[-40:])
            target = _entry_id(chosen, self.salt)
        replacement: Any
        shape = rng.random()
        if shape < 0.35:
            replacement = None
        elif shape < 0.7:
            replacement = {"content": "[redacted] " + self._words(2, 8)}
        else:
            replacement = {"content": [{"type": "text", "text": self._words(3, 12)}]}
        self._append(_CONTEXT_EDIT, {"targetId": target, "replacement": replacement})

    def _checkpoint(self, path: list[int]) -> dict[str, Any] | None:
        """The system message replayed at the end of ``path`` as pi 1.5.2's context has it: the
        latest compaction's checkpoint, then the system messages after it (those it kept are
        dropped in its favour); without one, every system message of the path."""
        last = next((i for i in range(len(path) - 1, -1, -1)
                     if self.kinds[path[i]] == _COMPACTION), -1)
        messages: list[dict[str, Any]] = []
        if last >= 0 and path[last] in self.checkpoints:
            messages.append(self.checkpoints[path[last]])
        messages.extend(self.system[n] for n in path[last + 1:] if n in self.system)
        return current_system_message(messages)

    def _turn(self) -> None:
        rng = self.rng
        self._tick(20_000, 600_000)  # the user reads, thinks, types
        if rng.random() < 0.025:
            command = rng.choice(_COMMANDS)
            self._message(_BASH, {"role": "bashExecution", "command": command,
                                  "output": self._tool_output(), "exitCode": rng.choice((0, 0, 1)),
                                  "cancelled": False, "truncated": False, "timestamp": self.clock})
            return
        text = f"{rng.choice(_VERBS)} {rng.choice(_SUBJECTS)}. {self._prose(rng.randint(0, 4))}"
        if rng.random() < 0.15:
            text += "\n\n```\n" + self._code(3, 25) + "\n```"
        content: str | list[dict[str, Any]]
        if rng.random() < 0.05:
            content = text
        else:
            content = [{"type": "text", "text": text}]
            if rng.random() < 0.01:
                color = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
                image = _png(rng.randint(8, 64), rng.randint(8, 64), color)
                content.append({"type": "image", "data": base64.b64encode(image).decode(),
                                "mimeType": "image/png"})
        self._message(_USER, {"role": "user", "content": content, "timestamp": self.clock})
        rounds = min(int(rng.expovariate(0.45)), 12)
        for _ in range(rounds):
            if self.full:
                return
            calls = self._assistant(final=False)
            if calls is None:
                return  # errored or aborted: the turn ends here
            for call_id, name in calls:
                if self.full:
                    return
                self._tool_result(call_id, name)
        if not self.full:
            self._assistant(final=True)

    def _usage(self) -> dict[str, Any]:
        rng = self.rng
        _, _, _, p_in, p_out, p_read, p_write = self.model
        tokens = {"input": rng.randint(3, 4000), "output": rng.randint(20, 3000),
                  "cacheRead": rng.randint(0, 120_000), "cacheWrite": rng.randint(0, 8000)}
        costs = {"input": tokens["input"] * p_in / 1e6, "output": tokens["output"] * p_out / 1e6,
                 "cacheRead": tokens["cacheRead"] * p_read / 1e6,
                 "cacheWrite": tokens["cacheWrite"] * p_write / 1e6}
        costs["total"] = sum(costs.values())
        return {**tokens, "totalTokens": sum(tokens.values()), "cost": costs}

    def _assistant(self, *, final: bool) -> list[tuple[str, str]] | None:
        """An assistant message; returns its tool calls, or None when it errored or aborted."""
        rng = self.rng
        self._tick(2_000, 90_000)
        provider, model, api = self.model[:3]
        blocks: list[dict[str, Any]] = []
        if self.thinking != "off" and rng.random() < 0.7:
            thinking = self._prose(rng.randint(1, 8))
            blocks.append({"type": "thinking", "thinking": thinking,
                           "thinkingSignature": _signature(api, thinking, rng.randbytes(
                               rng.randint(48, 240)))})
        calls: list[tuple[str, str]] = []
        stop = "stop"
        failure = rng.random()
        if final:
            text = self._prose(rng.randint(1, 6))
            if rng.random() < 0.3:
                text += "\n\n```ts\n" + self._code(4, 30) + "\n```\n\n" + self._prose(1)
            blocks.append({"type": "text", "text": text})
        else:
            if rng.random() < 0.5:
                blocks.append({"type": "text", "text": self._prose(1)})
            for _ in range(1 if rng.random() < 0.75 else rng.randint(2, 4)):
                name, arguments = self._tool_call()
                call_id = "toolu_" + base64.b64encode(rng.randbytes(18)).decode().replace(
                    "+", "A").replace("/", "B")
                blocks.append({"type": "toolCall", "id": call_id, "name": name,
                               "arguments": arguments})
                calls.append((call_id, name))
            stop = "toolUse"
        message: dict[str, Any] = {"role": "assistant", "content": blocks, "api": api,
                                   "provider": provider, "model": model, "usage": self._usage(),
                                   "stopReason": stop, "timestamp": self.clock}
        if failure < 0.012:
            message["stopReason"] = "aborted"
            message["errorMessage"] = "Request was aborted"
        elif failure < 0.025:
            message["stopReason"] = "error"
            message["errorMessage"] = rng.choice((
                "529 overloaded_error: Overloaded", "Connection error.",
                "429 rate_limit_error: Number of request tokens has exceeded your rate limit"))
        else:
            message["responseId"] = "msg_" + base64.b64encode(rng.randbytes(18)).decode().replace(
                "+", "x").replace("/", "y")
        self._message(_ASSISTANT, message)
        return None if message["stopReason"] in ("aborted", "error") else calls

    def _tool_call(self) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        path = rng.choice(_FILES)
        name = rng.choices(("read", "bash", "edit", "write", "grep"), (40, 25, 20, 5, 10))[0]
        if name == "read":
            self.read_files.append(path)
            arguments: dict[str, Any] = {"path": path}
            if rng.random() < 0.2:
                arguments.update(offset=rng.randint(1, 400), limit=rng.choice((50, 100, 200)))
            return name, arguments
        if name == "bash":
            return name, {"command": rng.choice(_COMMANDS)}
        if name == "grep":
            return name, {"pattern": rng.choice(_WORDS), "path": "src"}
        self.modified_files.append(path)
        if name == "write":
            return name, {"path": path, "content": self._code(5, 60)}
        return name, {"path": path, "edits": [{"oldText": self._code(1, 6), "newText": self._code(1, 8)}
                                              for _ in range(rng.randint(1, 3))]}

    def _tool_result(self, call_id: str, name: str) -> None:
        rng = self.rng
        self._tick(50, 20_000)
        error = rng.random() < 0.05
        output = ("Error: " + self._prose(1)) if error else self._tool_output()
        message: dict[str, Any] = {"role": "toolResult", "toolCallId": call_id, "toolName": name,
                                   "content": [{"type": "text", "text": output}]}
        if name == "edit" and not error:
            message["details"] = {"diff": "-" + self._code(1, 4) + "\n+" + self._code(1, 4),
                                  "firstChangedLine": rng.randint(1, 500)}
        message["isError"] = error
        message["timestamp"] = self.clock
        self._message(_TOOL_RESULT, message)

    def _label(self) -> None:
        rng = self.rng
        if self.labeled and rng.random() < 0.3:
            target = rng.choice(sorted(self.labeled))
            del self.labeled[target]
            self.stats["label_clears"] += 1
            body: dict[str, Any] = {"targetId": _entry_id(target, self.salt)}
        else:
            candidates = [n for n in self._path() if self.kinds[n] in (_USER, _ASSISTANT)]
            if not candidates:
                return
            target = rng.choice(candidates)
            self.labeled[target] = rng.choice(_LABELS)
            self.stats["labels"] += 1
            body = {"targetId": _entry_id(target, self.salt), "label": self.labeled[target]}
        self._append(_LABEL, body)

    def _files(self) -> dict[str, list[str]]:
        read = sorted(set(self.read_files) - set(self.modified_files))
        modified = sorted(set(self.modified_files))
        self.read_files, self.modified_files = [], []
        return {"readFiles": read, "modifiedFiles": modified}

    def _summary(self, heading: str) -> str:
        rng = self.rng
        return (f"## {heading}\n{self._prose(1)}\n\n## Progress\n"
                + "\n".join(f"- {self._words(4, 12)}" for _ in range(rng.randint(2, 6)))
                + f"\n\n## Next steps\n- {self._words(4, 10)}")

    def _branch(self) -> None:
        """Go back to an earlier point of the path, as pi's /tree does."""
        rng = self.rng
        self.since_branch = 0
        self.stats["branches"] += 1
        path = self._path()
        if rng.random() < 0.015:
            target = -1  # before the first entry: the next entry is a new root
            self.stats["new_roots"] += 1
        else:
            # mostly a few turns back (within the last ~0.8 x branch_every entries), rarely anywhere
            window = len(path) if rng.random() < 0.03 else int(0.8 * self.branch_every) + 2
            candidates = [n for n in path[-window:-2] if self.kinds[n] in (_USER, _ASSISTANT)]
            if not candidates:
                return
            chosen = rng.choice(candidates)
            # /tree on a user message puts its text back in the editor: the leaf is its parent
            target = self.parents[chosen] if self.kinds[chosen] == _USER else chosen
        self.leaf = target
        if rng.random() < 0.5 and not self.full:
            self.stats["branch_summaries"] += 1
            body: dict[str, Any] = {
                "fromId": _entry_id(target, self.salt) if target >= 0 else "root",
                "summary": self._summary("Goal"), "details": self._files()}
            if self.pi1 and rng.random() < 0.5:
                body["usage"] = self._usage()
            body["fromHook"] = False
            self._append(_BRANCH_SUMMARY, body)

    def _compact(self) -> None:
        """A compaction at the leaf, cut where pi's findCutPoint would cut."""
        path = self._path()
        previous = next((i for i in range(len(path) - 1, -1, -1)
                         if self.kinds[path[i]] == _COMPACTION), -1)
        start = 0 if previous < 0 else self.kept.get(path[previous], previous + 1)
        if len(path) - start < 4:
            return
        proxies = [{"type": "message", "message": {"role": _MESSAGE_ROLES[self.kinds[n]],
                                                   "tokens": self.tokens[n]}}
                   if self.kinds[n] in _MESSAGE_ROLES else {"type": _ENTRY_TYPES[self.kinds[n]]}
                   for n in path]
        cut = find_cut_point(proxies, start, len(path), self.keep_recent_tokens,
                             estimate=lambda message: int(message["tokens"]))
        if cut.first_kept_entry_index <= start:
            return  # everything is recent: pi would not compact either
        self.since_compaction = 0
        self.stats["compactions"] += 1
        tokens_before = sum(self.tokens[n] for n in path[start:])
        kept = cut.first_kept_entry_index
        body: dict[str, Any] = {
            "summary": self._summary("Goal"),
            "firstKeptEntryId": _entry_id(path[cut.first_kept_entry_index], self.salt),
            "tokensBefore": tokens_before, "details": self._files()}
        checkpoint, stamp = None, None
        if self.pi1:
            if self.rng.random() < 0.6:
                body["usage"] = self._usage()
            checkpoint = self._checkpoint(path)
            stamp = self._tick(1, 40)
        body["fromHook"] = False
        if checkpoint is not None:  # pi stamps it with the compaction entry's own time
            checkpoint = {**checkpoint, "timestamp": stamp}
            body["systemMessage"] = checkpoint
        number = self._append(_COMPACTION, body, stamp=stamp)
        if checkpoint is not None:
            self.checkpoints[number] = checkpoint
        self.kept[number] = kept  # where the next compaction on this path starts (pi's boundary)


def generate_session(path: str | os.PathLike[str], entries: int, *, seed: int = 1,
                     branch_every: int = 200, compact_every: int = 1000,
                     keep_recent_tokens: int = 20_000, cwd: str = DEFAULT_CWD,
                     start_ms: int = DEFAULT_START_MS, pi1: bool = False) -> GeneratedSession:
    """Write a realistic pi session file (format version 3) of exactly ``entries`` entries.

    Args:
        path: the file to write; it must not exist yet.
        entries: how many entry lines follow the header.
        seed: the random seed; the same arguments always give the same bytes.
        branch_every: about every this many entries (at a turn boundary) the conversation goes
            back to an earlier point; 0 never.
        compact_every: about every this many entries (at a turn boundary) a compaction; 0 never.
        keep_recent_tokens: pi's ``keepRecentTokens`` for the compactions' cut points.
        cwd: the working directory recorded in the header.
        start_ms: the simulated clock's start (epoch milliseconds, jittered by the seed).
        pi1: also write what pi 1.x adds (system messages, usage entries, context edits,
            compaction checkpoints, summary usage); without it the bytes are those of earlier
            versions of this generator.

    Returns:
        What was written.

    Raises:
        FileExistsError: ``path`` exists (a generator never overwrites a file).
        ValueError: ``entries`` is negative.
    """
    if entries < 0:
        raise ValueError(f"entries must be 0 or more, got {entries}")
    target = Path(path)
    with open(target, "xb", buffering=1 << 20) as out:
        generator = _Generator(out, entries, seed=seed, branch_every=branch_every,
                               compact_every=compact_every, keep_recent_tokens=keep_recent_tokens,
                               cwd=cwd, start_ms=start_ms, pi1=pi1)
        if entries:
            generator.run()
    leaf = _entry_id(generator.leaf, generator.salt) if generator.leaf >= 0 else None
    return GeneratedSession(path=str(target), entries=len(generator.kinds), bytes=generator.size,
                            session_id=generator.session_id, cwd=cwd, leaf_id=leaf,
                            **generator.stats)


def generate_folder(directory: str | os.PathLike[str], sessions: int, *, seed: int = 1,
                    min_entries: int = 20, max_entries: int = 1500,
                    cwds: Sequence[str] = (DEFAULT_CWD,)) -> list[GeneratedSession]:
    """Write ``sessions`` session files into ``directory``, named as pi names them.

    Sizes spread over ``[min_entries, max_entries]`` (more small sessions than large ones), start
    times over about a year, and working directories round-robin over ``cwds``.

    Returns:
        What was written, one per file, in the order written.
    """
    if not 0 <= min_entries <= max_entries:
        raise ValueError(f"need 0 <= min_entries <= max_entries, got {min_entries}, {max_entries}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    written = []
    for index in range(sessions):
        span = max_entries - min_entries
        entries = min_entries + int(span * rng.random() ** 2)
        session_seed = rng.getrandbits(32)
        start = DEFAULT_START_MS - rng.randrange(0, 365 * 86_400_000)
        scratch = folder / f".generating-{index}.jsonl"
        made = generate_session(scratch, entries, seed=session_seed,
                                branch_every=rng.choice((0, 40, 120)),
                                compact_every=rng.choice((0, 300, 600)),
                                cwd=cwds[index % len(cwds)], start_ms=start)
        with open(scratch, "rb") as stream:
            stamp = _json.loads(stream.readline())["timestamp"]
        name = folder / f"{stamp.replace(':', '-').replace('.', '-')}_{made.session_id}.jsonl"
        os.replace(scratch, name)
        written.append(msgspec.structs.replace(made, path=str(name)))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sessiontree.testing.generate``: print one JSON line per file written."""
    parser = argparse.ArgumentParser(prog="python -m sessiontree.testing.generate",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("out", help="the file to write (with --sessions: the folder)")
    parser.add_argument("--entries", type=int, default=1000, help="entries after the header")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--branch-every", type=int, default=200, help="0: never branch")
    parser.add_argument("--compact-every", type=int, default=1000, help="0: never compact")
    parser.add_argument("--keep-recent-tokens", type=int, default=20_000)
    parser.add_argument("--cwd", default=DEFAULT_CWD)
    parser.add_argument("--sessions", type=int, help="write this many sessions into the folder OUT")
    parser.add_argument("--min-entries", type=int, default=20)
    parser.add_argument("--max-entries", type=int, default=1500)
    parser.add_argument("--pi1", action="store_true",
                        help="also write pi 1.x's entries (system messages, usage, context edits)")
    args = parser.parse_args(argv)
    try:
        if args.sessions is not None:
            made = generate_folder(args.out, args.sessions, seed=args.seed,
                                   min_entries=args.min_entries, max_entries=args.max_entries,
                                   cwds=[args.cwd])
        else:
            made = [generate_session(args.out, args.entries, seed=args.seed,
                                     branch_every=args.branch_every,
                                     compact_every=args.compact_every,
                                     keep_recent_tokens=args.keep_recent_tokens, cwd=args.cwd,
                                     pi1=args.pi1)]
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for item in made:
        sys.stdout.write(msgspec.json.encode(item).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
