"""The summarizer protocol: what navigation and compaction ask of anything that writes summaries.

A summarizer turns messages into text within a token budget. It may be offline (the default,
deterministic and extractive) or call a model. It must honour cancellation: when the token is
cancelled it raises :class:`SummaryCancelled` and nothing is written by the caller.
"""

from __future__ import annotations

import threading
from typing import Literal, Protocol, runtime_checkable

import msgspec

from ..errors import SessionTreeError
from ..messages import AgentMessage

__all__ = [
    "CancelToken",
    "SummaryCancelled",
    "SummaryFailed",
    "SummaryRequest",
    "Summarizer",
]


class SummaryCancelled(SessionTreeError):
    """The summary was cancelled (by the caller, a hook or the user); nothing was written."""


class SummaryFailed(SessionTreeError):
    """The summarizer failed or returned nothing; nothing was written."""


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

    messages: list[AgentMessage]
    purpose: Literal["branch", "compaction", "turn_prefix"] = "branch"
    previous_summary: str | None = None
    instructions: str | None = None
    max_tokens: int = 2048
    read_files: list[str] = []
    modified_files: list[str] = []


@runtime_checkable
class Summarizer(Protocol):
    """Anything that can write a summary."""

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        """Return the summary text (non-empty).

        Raises:
            SummaryCancelled: ``cancel`` was cancelled before the summary was done.
            SummaryFailed: the summary could not be produced.
        """
