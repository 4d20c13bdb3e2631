"""What the summary adapters share: the prompt, and the request through the shared HTTP client
layer (:mod:`sessiontree.providers._http`: timeouts, retries with ``Retry-After``,
cancellation). The adapters (:mod:`.openai`, :mod:`.anthropic`) only say where to send what,
and where the text is in the answer.

Invariants:
* Every failure is a :class:`~sessiontree.summarize.SummaryFailed` whose message names the
  provider, the status and the server's own error message; an answer without text is one too.
* Cancelling the token aborts the request in flight and any wait, and raises
  :class:`~sessiontree.summarize.SummaryCancelled`.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from ..providers._http import HttpClient
from .base import (
    SummaryText,
    CancelToken,
    SummarizerNotConfigured,
    SummaryCancelled,
    SummaryFailed,
    SummaryRequest,
)

__all__ = ["HttpSummarizer", "SYSTEM_PROMPT", "build_prompt"]

SYSTEM_PROMPT = (
    "You write summaries of work sessions between a user and an AI coding assistant. You are "
    "given a transcript to read, not a conversation to join: do not answer the user, do not "
    "carry on the work, and do not comment on the transcript. Reply with the summary alone, in "
    "the format you are asked for."
)

_HISTORY = """Summarize the transcript above so that an assistant who never saw it can carry on the work from your summary alone. Write these markdown sections, in this order, each one brief:

## Goal
What the user wants done; several items when the session had several tasks.

## Constraints & Preferences
Requirements and preferences the user stated, as a list, or "(none)".

## Progress
### Done
Work that is finished, as "- [x]" items.
### In Progress
Work that was started and is not finished, as "- [ ]" items.
### Blocked
Problems that stop the work, if any.

## Key Decisions
Each choice that was made, as "- **choice**: why".

## Next Steps
A numbered list of what to do next.

## Critical Context
Facts, values, identifiers or error messages needed to continue, or "(none)".

Quote file paths, names of functions and commands, and error messages exactly as they appear."""

_UPDATE = """The transcript above continues a session whose earlier part is summarized in <previous-summary>. Write one summary of the whole session that an assistant can continue from: keep everything from the previous summary that still matters, add the new goals, constraints, progress and decisions, move work that is now finished to Done, and bring Next Steps up to date. Use the same sections as the previous summary:

## Goal
## Constraints & Preferences
## Progress (### Done, ### In Progress, ### Blocked)
## Key Decisions
## Next Steps
## Critical Context

Quote file paths, names of functions and commands, and error messages exactly as they appear."""

_TURN_PREFIX = """The transcript above is the first part of one long turn; the rest of that turn is kept word for word after your summary. Summarize this first part so that the kept rest makes sense on its own, in three short sections:

## Original Request
What the user asked for in this turn.

## Early Progress
What was done and decided in this part.

## Context for Suffix
What the reader needs to know to follow the kept rest of the turn."""

_BRANCH = """The transcript above is a branch of the conversation that the user left to go back to an earlier point. Summarize it so that the work done there can be recalled later, in these markdown sections, each one brief:

## Goal
What the user was trying to do in this branch.

## Constraints & Preferences
Requirements the user stated, or "(none)".

## Progress
### Done
### In Progress
### Blocked

## Key Decisions
Each choice that was made, as "- **choice**: why".

## Next Steps
A numbered list of what would come next.

Quote file paths, names of functions and commands, and error messages exactly as they appear."""


def build_prompt(request: SummaryRequest) -> tuple[str, str]:
    """The system prompt and the user message for a summary request.

    The messages are given as a plain transcript (``serialize_conversation``) inside
    ``<conversation>`` tags, so that the model reads them instead of continuing them; the
    previous summary, when there is one, follows in ``<previous-summary>`` tags.
    """
    from ..compaction import serialize_conversation

    transcript = serialize_conversation(request.messages)
    text = f"<conversation>\n{transcript}\n</conversation>\n\n"
    if request.purpose == "turn_prefix":
        instructions = _TURN_PREFIX
    elif request.purpose == "branch":
        instructions = _BRANCH
    elif request.previous_summary:
        text += f"<previous-summary>\n{request.previous_summary}\n</previous-summary>\n\n"
        instructions = _UPDATE
    else:
        instructions = _HISTORY
    if request.previous_summary and request.purpose == "branch":
        text += f"<previous-summary>\n{request.previous_summary}\n</previous-summary>\n\n"
    text += instructions
    if request.instructions:
        text += f"\n\nGive particular attention to: {request.instructions}"
    return SYSTEM_PROMPT, text


class HttpSummarizer(HttpClient):
    """The shared part of the summary adapters. Subclasses pick the endpoint class
    (:class:`~sessiontree.providers._http.OpenAIEndpoint`, ...) and implement :meth:`payload`
    and :meth:`extract_text`; :attr:`path` is the API path to POST to. Constructor arguments:
    :class:`~sessiontree.providers._http.HttpClient`.

    Raises:
        MissingExtra: httpx is not installed.
        SummarizerNotConfigured: no model name, or no key for the provider's own URL.
    """

    path: ClassVar[str] = ""
    failed = SummaryFailed
    cancelled = SummaryCancelled
    not_configured = SummarizerNotConfigured

    def payload(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        """The JSON request body."""
        raise NotImplementedError

    def extract_text(self, data: Any) -> str:
        """The summary text in a successful answer (``""`` when there is none).

        Raises:
            SummaryFailed: the answer is not shaped as the API documents it.
        """
        raise NotImplementedError

    def extract_usage(self, data: Any) -> dict[str, int]:
        """The answer's token counts as pi counts them (``input`` without cached tokens,
        ``output``, ``cache_read``, ``cache_write``); empty when the answer has none."""
        return {}

    def summarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        """Ask the model for the summary; blocks until it arrives.

        Raises:
            SummaryCancelled: ``cancel`` was cancelled (the request in flight is aborted).
            SummaryFailed: the request failed after its retries, or the answer had no text.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.asummarize(request, cancel))
        # Called from async code: run in a private loop in a worker thread.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiontree-summary") as pool:
            return pool.submit(asyncio.run, self.asummarize(request, cancel)).result()

    async def asummarize(self, request: SummaryRequest, cancel: CancelToken | None = None) -> str:
        """:meth:`summarize` for async code."""
        if cancel is not None:
            cancel.raise_if_cancelled()
        system, prompt = build_prompt(request)
        body = self.payload(system, prompt, max(1, int(request.max_tokens)))
        return await self.cancellable(self._summary(body), cancel, f"the {self.provider} summary")

    async def _summary(self, body: dict[str, Any]) -> str:
        from ..providers.base import priced_usage

        data = await self.post_json(self.path, body)
        text = self.extract_text(data)
        if not text.strip():
            raise SummaryFailed(f"{self.provider} model {self.model} returned an empty summary")
        tokens = self.extract_usage(data)
        return SummaryText(text.strip(), priced_usage(self.provider, self.model, **tokens)
                           if tokens else None)
