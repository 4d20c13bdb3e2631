"""The one HTTP client layer of the model adapters (summarizers and agent models alike):
configuration from arguments or environment variables, one POST with timeouts and retries,
server-sent event streams, and cancellation.

Invariants:
* httpx is imported when a client is constructed, never at ``import sessiontree``; without
  it the constructor raises :class:`~sessiontree.errors.MissingExtra` naming the extra.
* A request is retried on HTTP 429, 408, 409 and every 5xx status, and on connection errors and
  timeouts, at most ``max_retries`` times, waiting ``Retry-After`` (or ``retry-after-ms``)
  when the server sends it, else ``backoff × 2^attempt``; every wait is capped at
  ``max_backoff``. Other 4xx statuses fail at once. A stream is retried only before its first
  event arrived (a retry after that would deliver the same deltas twice).
* Every failure is a :attr:`HttpClient.failed` error whose message names the provider, the
  status and the server's own error message.
* Cancelling the token aborts the request in flight (the connection is closed) and any wait,
  and raises :attr:`HttpClient.cancelled`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import MissingExtra, SessionTreeError
from ..summarize.base import CancelToken

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ANTHROPIC_VERSION",
    "AnthropicEndpoint",
    "HttpClient",
    "ModelRequestCancelled",
    "ModelRequestFailed",
    "OpenAIEndpoint",
    "ProviderNotConfigured",
    "retry_after",
]

T = TypeVar("T")

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with every Anthropic request."""


class ModelRequestFailed(SessionTreeError):
    """A model request failed (after its retries) or its answer could not be read."""


class ModelRequestCancelled(SessionTreeError):
    """A model request was cancelled through its token; nothing of it was kept."""


class ProviderNotConfigured(ModelRequestFailed):
    """A model client lacks what it needs (an API key, a model name); the message says which
    environment variable or argument to set."""


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingExtra("the OpenAI and Anthropic model adapters need httpx: "
                           "pip install 'sessiontree[llm]'") from exc
    return httpx


def retry_after(headers: Mapping[str, str]) -> float | None:
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


class HttpClient:
    """Configuration and transport shared by every HTTP model adapter. A subclass names the
    provider (usually through :class:`OpenAIEndpoint` or :class:`AnthropicEndpoint`) and the
    error types its callers expect (:attr:`failed`, :attr:`cancelled`, :attr:`not_configured`).

    Args:
        model: the model name sent with each request.
        api_key: the key (default: the provider's environment variable). Required for the
            provider's own URL; optional for another base URL (a local server).
        base_url: where the API lives (default: the provider's environment variable, else
            its public URL).
        timeout: seconds one attempt may take, from connecting to the last byte (for a
            stream: the longest silence between two chunks).
        max_retries: how many times a failed attempt is retried (429, 5xx, network errors).
        backoff: the first wait between attempts when the server names none; doubled each time.
        max_backoff: the longest wait between attempts, ``Retry-After`` included.
        headers: extra HTTP headers for every request.
        temperature: the sampling temperature, when set.

    Raises:
        MissingExtra: httpx is not installed.
        ProviderNotConfigured: no model name, or no key for the provider's own URL (the
            subclass's :attr:`not_configured` type).
    """

    provider: ClassVar[str] = ""
    key_variable: ClassVar[str] = ""
    base_url_variable: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    failed: ClassVar[type[Exception]] = ModelRequestFailed
    cancelled: ClassVar[type[Exception]] = ModelRequestCancelled
    not_configured: ClassVar[type[Exception]] = ProviderNotConfigured

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 120.0, max_retries: int = 3, backoff: float = 1.0,
                 max_backoff: float = 60.0, headers: Mapping[str, str] | None = None,
                 temperature: float | None = None) -> None:
        self._httpx = _import_httpx()
        if not model or not model.strip():
            raise self.not_configured(f"{type(self).__name__} needs a model name")
        self.model = model.strip()
        configured_url = base_url or os.environ.get(self.base_url_variable) or None
        self.base_url = (configured_url or self.default_base_url).rstrip("/")
        key = api_key if api_key is not None else os.environ.get(self.key_variable)
        if not key and configured_url is None:
            raise self.not_configured(
                f"{type(self).__name__} needs an API key: set {self.key_variable} (or pass "
                f"api_key=..., or base_url=... for a server that needs none)")
        self.api_key = key or None
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.backoff = max(0.0, float(backoff))
        self.max_backoff = max(0.0, float(max_backoff))
        self.extra_headers = dict(headers or {})
        self.temperature = temperature

    # -- what the provider says ------------------------------------------------------------------

    def url(self, path: str) -> str:
        """The URL of an API path (``chat/completions``, ``messages``...)."""
        return f"{self.base_url}/{path}"

    def auth_headers(self) -> dict[str, str]:
        """The authentication and version headers."""
        return {}

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

    # -- requests ------------------------------------------------------------------------------

    def _headers(self, accept: str) -> dict[str, str]:
        return {"content-type": "application/json", "accept": accept,
                **self.auth_headers(), **self.extra_headers}

    def _tries(self, attempts: int) -> str:
        return f"{attempts} attempts" if attempts > 1 else "1 attempt"

    async def _wait_before_retry(self, attempt: int, wait: float | None) -> None:
        wait = wait if wait is not None else self.backoff * 2 ** attempt
        await asyncio.sleep(min(wait, self.max_backoff))

    async def post_json(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` and return the decoded JSON answer, retrying as the module says.

        Raises:
            ModelRequestFailed: (the :attr:`failed` type) the request failed after its retries,
                or the answer is not JSON.
        """
        httpx = self._httpx
        url = self.url(path)
        headers = self._headers("application/json")
        attempts = self.max_retries + 1
        last = ""
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout)) as client:
            for attempt in range(attempts):
                try:
                    return await asyncio.wait_for(self._json_attempt(client, url, headers, body),
                                                  timeout=self.timeout)
                except _Retry as retry:
                    last = retry.reason
                    if attempt + 1 < attempts:
                        await self._wait_before_retry(attempt, retry.wait)
                except asyncio.TimeoutError:
                    last = f"no complete answer within {self.timeout:g} s"
                    if attempt + 1 < attempts:
                        await self._wait_before_retry(attempt, None)
        raise self.failed(f"{self.provider} request to {url} failed after "
                          f"{self._tries(attempts)}: {last}")

    def _check_status(self, url: str, status: int, data: Any, text: str, reason: str,
                      headers: Mapping[str, str]) -> None:
        if status < 400:
            return
        detail = self.error_message(data) or text[:300].strip() or reason
        message = f"HTTP {status}: {detail}"
        if status in _RETRY_STATUS or status >= 500:
            raise _Retry(message, retry_after(headers))
        raise self.failed(f"{self.provider} request to {url} failed: {message}")

    async def _json_attempt(self, client: httpx.AsyncClient, url: str, headers: dict[str, str],
                            body: dict[str, Any]) -> Any:
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
        self._check_status(url, response.status_code, data, response.text,
                           response.reason_phrase, response.headers)
        if data is None:
            raise self.failed(f"{self.provider} answered HTTP {response.status_code} with a body "
                              f"that is not JSON: {response.text[:200]!r}")
        return data

    async def stream_events(self, path: str, body: dict[str, Any]
                            ) -> AsyncIterator[tuple[str | None, Any]]:
        """POST ``body`` and yield the server-sent events of the answer as ``(event name, decoded
        data)``; ``data: [DONE]`` ends the stream. Retried as the module says, only before the
        first event.

        Raises:
            ModelRequestFailed: (the :attr:`failed` type) the request failed, an event is not
                JSON, or the connection broke after the stream started.
        """
        httpx = self._httpx
        url = self.url(path)
        headers = self._headers("text/event-stream")
        attempts = self.max_retries + 1
        last = ""
        timeout = httpx.Timeout(self.timeout)
        async with httpx.AsyncClient(timeout=timeout) as client:
            for attempt in range(attempts):
                started = False
                try:
                    async with client.stream("POST", url, headers=headers, json=body) as response:
                        if response.status_code >= 400:
                            raw = (await response.aread()).decode("utf-8", "replace")
                            try:
                                data = json.loads(raw)
                            except ValueError:
                                data = None
                            self._check_status(url, response.status_code, data, raw,
                                               response.reason_phrase, response.headers)
                        async for event in _sse(response.aiter_lines()):
                            if event[1] == "[DONE]":
                                return
                            started = True
                            yield event[0], self._decode_event(url, event[1])
                    return
                except (httpx.TimeoutException, httpx.TransportError) as exc:
                    reason = (f"timed out ({type(exc).__name__})"
                              if isinstance(exc, httpx.TimeoutException)
                              else f"{type(exc).__name__}: {exc}")
                    if started:
                        raise self.failed(f"{self.provider} stream from {url} broke off: "
                                          f"{reason}") from exc
                    last = reason
                    if attempt + 1 < attempts:
                        await self._wait_before_retry(attempt, None)
                except _Retry as retry:
                    last = retry.reason
                    if attempt + 1 < attempts:
                        await self._wait_before_retry(attempt, retry.wait)
        raise self.failed(f"{self.provider} request to {url} failed after "
                          f"{self._tries(attempts)}: {last}")

    def _decode_event(self, url: str, data: str) -> Any:
        try:
            return json.loads(data)
        except ValueError as exc:
            raise self.failed(f"{self.provider} stream from {url} sent an event that is not "
                              f"JSON: {data[:200]!r}") from exc

    async def cancellable(self, work: Awaitable[T], cancel: CancelToken | None, what: str) -> T:
        """Await ``work``; when ``cancel`` is cancelled first, abort it (closing its connection)
        and raise :attr:`cancelled` saying ``what`` was cancelled."""
        if cancel is not None and cancel.cancelled:
            if asyncio.iscoroutine(work):
                work.close()
            raise self.cancelled(f"{what} was cancelled")
        task = asyncio.ensure_future(work)
        if cancel is None:
            return await task
        while True:
            done, _ = await asyncio.wait({task}, timeout=_POLL_SECONDS)
            if done:
                return task.result()
            if cancel.cancelled:
                # Cancel again until the work ends: Python 3.11's wait_for drops a cancellation
                # that arrives as its inner call finishes, and the work would go on (into a
                # retry's wait of up to max_backoff).
                while not task.done():
                    task.cancel()
                    await asyncio.wait({task}, timeout=_POLL_SECONDS)
                if not task.cancelled():
                    task.exception()  # retrieved: the cancellation is what the caller sees
                raise self.cancelled(f"{what} was cancelled")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"


async def _sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, str]]:
    """Server-sent events from text lines: ``(event name or None, data)`` per event."""
    name: str | None = None
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        yield name, "\n".join(data)


class OpenAIEndpoint(HttpClient):
    """OpenAI and compatible servers: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` (default
    ``https://api.openai.com/v1``), ``Authorization: Bearer``."""

    provider = "openai"
    key_variable = "OPENAI_API_KEY"
    base_url_variable = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}


class AnthropicEndpoint(HttpClient):
    """Anthropic: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL`` (default
    ``https://api.anthropic.com``), ``x-api-key`` and ``anthropic-version`` headers; paths
    live under ``/v1`` (a base URL that already ends in ``/v1`` works too)."""

    provider = "anthropic"
    key_variable = "ANTHROPIC_API_KEY"
    base_url_variable = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"

    def url(self, path: str) -> str:
        base = self.base_url
        return f"{base}/{path}" if base.endswith("/v1") else f"{base}/v1/{path}"

    def auth_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers
