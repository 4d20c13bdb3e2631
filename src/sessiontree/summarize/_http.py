"""What the model adapters share: the prompt, and one POST with timeouts, retries and
cancellation. The adapters (:mod:`.openai`, :mod:`.anthropic`) only say where to send what,
and where the text is in the answer.

Invariants:
* httpx is imported when an adapter is constructed, never at ``import sessiontree``; without
  it the constructor raises :class:`~sessiontree.errors.MissingExtra` naming the extra.
* A request is retried on HTTP 429, 408, 409 and every 5xx status, and on connection errors and
  timeouts, at most ``max_retries`` times, waiting ``Retry-After`` (or ``retry-after-ms``)
  when the server sends it, else ``backoff × 2^attempt``; every wait is capped at
  ``max_backoff``. Other 4xx statuses fail at once.
* Every failure is a :class:`~sessiontree.summarize.SummaryFailed` whose message names the
  provider, the status and the server's own error message; an answer without text is one too.
* Cancelling the token aborts the request in flight (the connection is closed) and any wait,
  and raises :class:`~sessiontree.summarize.SummaryCancelled`.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import MissingExtra
from .base import (
    CancelToken,
    SummarizerNotConfigured,
    SummaryCancelled,
    SummaryFailed,
    SummaryRequest,
)

if TYPE_CHECKING:
    import httpx

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


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingExtra("the OpenAI and Anthropic summarizers need httpx: "
                           "pip install 'sessiontree[llm]'") from exc
    return httpx


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, ``Retry-After`` in seconds or as
    an HTTP date), or ``None``."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Retry(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


_RETRY_STATUS = frozenset({408, 409, 429})
_POLL_SECONDS = 0.02


class HttpSummarizer:
    """The shared machinery of the model adapters. Subclasses set :attr:`provider`,
    :attr:`key_variable`, :attr:`base_url_variable` and :attr:`default_base_url` and implement
    :meth:`endpoint`, :meth:`headers`, :meth:`payload` and :meth:`extract_text`.

    Args:
        model: the model name sent with each request.
        api_key: the key (default: the provider's environment variable). Required for the
            provider's own URL; optional for another base URL (a local server).
        base_url: where the API lives (default: the provider's environment variable, else
            its public URL).
        timeout: seconds one attempt may take, from connecting to the last byte.
        max_retries: how many times a failed attempt is retried (429, 5xx, network errors).
        backoff: the first wait between attempts when the server names none; doubled each time.
        max_backoff: the longest wait between attempts, ``Retry-After`` included.
        headers: extra HTTP headers for every request.
        temperature: the sampling temperature, when set.

    Raises:
        MissingExtra: httpx is not installed.
        SummarizerNotConfigured: no model name, or no key for the provider's own URL.
    """

    provider: ClassVar[str] = ""
    key_variable: ClassVar[str] = ""
    base_url_variable: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 120.0, max_retries: int = 3, backoff: float = 1.0,
                 max_backoff: float = 60.0, headers: Mapping[str, str] | None = None,
                 temperature: float | None = None) -> None:
        self._httpx = _import_httpx()
        if not model or not model.strip():
            raise SummarizerNotConfigured(f"{type(self).__name__} needs a model name")
        self.model = model.strip()
        configured_url = base_url or os.environ.get(self.base_url_variable) or None
        self.base_url = (configured_url or self.default_base_url).rstrip("/")
        key = api_key if api_key is not None else os.environ.get(self.key_variable)
        if not key and configured_url is None:
            raise SummarizerNotConfigured(
                f"{type(self).__name__} needs an API key: set {self.key_variable} (or pass "
                f"api_key=..., or base_url=... for a server that needs none)")
        self.api_key = key or None
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.backoff = max(0.0, float(backoff))
        self.max_backoff = max(0.0, float(max_backoff))
        self.extra_headers = dict(headers or {})
        self.temperature = temperature

    # -- what a subclass says ------------------------------------------------------------------

    def endpoint(self) -> str:
        """The URL to POST to."""
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        """The request headers (authentication and versions)."""
        raise NotImplementedError

    def payload(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        """The JSON request body."""
        raise NotImplementedError

    def extract_text(self, data: Any) -> str:
        """The summary text in a successful answer (``""`` when there is none).

        Raises:
            SummaryFailed: the answer is not shaped as the API documents it.
        """
        raise NotImplementedError

    @staticmethod
    def error_message(data: Any) -> str:
        """The server's own error message in an error answer, or ``""``."""
        if isinstance(data, Mapping):
            error = data.get("error")
            if isinstance(error, Mapping):
                message = error.get("message")
                kind = error.get("type")
                text = str(message) if message else ""
                return f"{kind}: {text}" if kind and text else text or str(kind or "")
            if isinstance(error, str):
                return error
            if isinstance(data.get("message"), str):
                return str(data["message"])
        return ""

    # -- summarizing ---------------------------------------------------------------------------

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
        work = asyncio.ensure_future(self._post(body))
        if cancel is None:
            return await work
        while True:
            done, _ = await asyncio.wait({work}, timeout=_POLL_SECONDS)
            if done:
                return work.result()
            if cancel.cancelled:
                work.cancel()
                try:
                    await work
                except asyncio.CancelledError:
                    pass
                except Exception:  # noqa: BLE001 - the cancellation is what the caller sees
                    pass
                raise SummaryCancelled(f"the {self.provider} summary was cancelled")

    async def _post(self, body: dict[str, Any]) -> str:
        httpx = self._httpx
        url = self.endpoint()
        headers = {"content-type": "application/json", "accept": "application/json",
                   **self.headers(), **self.extra_headers}
        attempts = self.max_retries + 1
        last = ""
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout)) as client:
            for attempt in range(attempts):
                try:
                    return await asyncio.wait_for(self._attempt(client, url, headers, body),
                                                  timeout=self.timeout)
                except _Retry as retry:
                    last = retry.reason
                    if attempt + 1 >= attempts:
                        break
                    wait = retry.wait if retry.wait is not None else self.backoff * 2 ** attempt
                    await asyncio.sleep(min(wait, self.max_backoff))
                except asyncio.TimeoutError:
                    last = f"no complete answer within {self.timeout:g} s"
                    if attempt + 1 >= attempts:
                        break
                    await asyncio.sleep(min(self.backoff * 2 ** attempt, self.max_backoff))
        tries = f"{attempts} attempts" if attempts > 1 else "1 attempt"
        raise SummaryFailed(f"{self.provider} request to {url} failed after {tries}: {last}")

    async def _attempt(self, client: httpx.AsyncClient, url: str, headers: dict[str, str],
                       body: dict[str, Any]) -> str:
        httpx = self._httpx
        try:
            response = await client.post(url, headers=headers, json=body)
        except httpx.TimeoutException as exc:
            raise _Retry(f"timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retry(f"{type(exc).__name__}: {exc}") from exc
        try:
            data = response.json()
        except ValueError:
            data = None
        status = response.status_code
        if status >= 400:
            detail = self.error_message(data) or response.text[:300].strip() or response.reason_phrase
            reason = f"HTTP {status}: {detail}"
            if status in _RETRY_STATUS or status >= 500:
                raise _Retry(reason, _retry_after(response.headers))
            raise SummaryFailed(f"{self.provider} request to {url} failed: {reason}")
        if data is None:
            raise SummaryFailed(f"{self.provider} answered HTTP {status} with a body that is not "
                                f"JSON: {response.text[:200]!r}")
        text = self.extract_text(data)
        if not text.strip():
            raise SummaryFailed(f"{self.provider} model {self.model} returned an empty summary")
        return text.strip()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"
