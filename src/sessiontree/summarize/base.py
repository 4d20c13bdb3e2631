"""The summarizer protocol: what navigation and compaction ask of anything that writes summaries.

A summarizer turns messages into text within a token budget. It may be offline (the default,
deterministic and extractive) or call a model. It must honour cancellation: when the token is
cancelled it raises :class:`SummaryCancelled` and nothing is written by the caller.

This module also holds the text layouts pi stores around summaries (format-spec.md sections 12 and
14): the branch summary preamble and the ``<read-files>``/``<modified-files>`` tags.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from ..errors import SessionTreeError
from ..messages import AgentMessage, UnknownMessage, Usage

__all__ = [
    "BRANCH_SUMMARY_PREAMBLE",
    "AsyncSummarizer",
    "CancelToken",
    "SummarizerNotConfigured",
    "SummaryCancelled",
    "SummaryFailed",
    "SummaryRequest",
    "SummaryText",
    "Summarizer",
    "branch_summary_text",
    "format_file_operations",
]


class SummaryCancelled(SessionTreeError):
    """The summary was cancelled (by the caller, a hook or the user); nothing was written."""


class SummaryFailed(SessionTreeError):
    """The summarizer failed or returned nothing; nothing was written."""


class SummarizerNotConfigured(SummaryFailed):
    """A model summarizer lacks what it needs (an API key, a model name); the message says
    which environment variable or argument to set."""


class CancelToken:
    """A thread-safe cancellation flag shared by a caller and a running summarizer."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise SummaryCancelled("the summary was cancelled")

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as the token is cancelled."""
        return self._event.wait(seconds)


class SummaryRequest(msgspec.Struct, frozen=True):
    """What to summarize.

    Attributes:
        messages: the messages to summarize, oldest first (context-shaped: user, assistant,
            toolResult, bashExecution, custom, branchSummary, compactionSummary).
        purpose: ``branch`` (an abandoned branch), ``compaction`` (history before a cut) or
            ``turn_prefix`` (the start of a turn split by a compaction cut).
        previous_summary: the summary this one updates (the previous compaction's), if any.
        instructions: extra instructions from the user, if any.
        max_tokens: the budget for the summary text (about 4 characters per token).
        read_files: files the summarized part read (already collected by the caller).
        modified_files: files it wrote or edited.
    """

    messages: list[AgentMessage | UnknownMessage]
    purpose: Literal["branch", "compaction", "turn_prefix"] = "branch"
    previous_summary: str | None = None
    instructions: str | None = None
    max_tokens: int = 2048
    read_files: list[str] = []
    modified_files: list[str] = []


class SummaryText(str):
    """A summary a summarizer wrote, with the usage of the model call that wrote it (the HTTP
    summarizers return one): a compaction stores it as its ``usage``, counted in the
    session's totals. A plain ``str`` summary has none."""

    usage: Usage | None

    def __new__(cls, text: str, usage: Usage | None = None) -> SummaryText:
        made = super().__new__(cls, text)
        made.usage = usage
        return made


@runtime_checkable
class AsyncSummarizer(Protocol):
    """A summarizer with an ``async`` twin of :meth:`Summarizer.summarize` (the HTTP adapters)."""

    async def asummarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        """Return the summary text (non-empty), without blocking the event loop."""


@runtime_checkable
class Summarizer(Protocol):
    """Anything that can write a summary."""

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        """Return the summary text (non-empty).

        Raises:
            SummaryCancelled: ``cancel`` was cancelled before the summary was done.
            SummaryFailed: the summary could not be produced.
        """


BRANCH_SUMMARY_PREAMBLE = ("The user explored a different conversation branch before returning here.\n"
                           "Summary of that exploration:\n\n")
"""What pi puts before every branch summary it stores (format-spec.md section 12)."""


def _files(details: Any, key: str, attribute: str) -> Sequence[str]:
    value = details.get(key) if isinstance(details, dict) else getattr(details, attribute, None)
    return [f for f in value if isinstance(f, str)] if isinstance(value, (list, tuple)) else []


def format_file_operations(details: Any) -> str:
    """pi's ``formatFileOperations``: ``"\n\n<read-files>\n…\n</read-files>"`` and
    ``"\n\n<modified-files>\n…\n</modified-files>"``, each only when its list is non-empty.

    Args:
        details: a :class:`~sessiontree.entries.FileDetails` or its on-disk dict
            (``readFiles``, ``modifiedFiles``).
    """
    sections = []
    read = _files(details, "readFiles", "read_files")
    modified = _files(details, "modifiedFiles", "modified_files")
    if read:
        sections.append("<read-files>\n" + "\n".join(read) + "\n</read-files>")
    if modified:
        sections.append("<modified-files>\n" + "\n".join(modified) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""


def branch_summary_text(summary: str, details: Any = None) -> str:
    """The ``summary`` of a ``branch_summary`` entry as pi stores it: the preamble, the
    summarizer's text, then the file-operation tags of ``details``."""
    return BRANCH_SUMMARY_PREAMBLE + summary + (format_file_operations(details) if details else "")
