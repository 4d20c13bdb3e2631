"""Summaries from the Anthropic messages API, over HTTP with httpx.

Configuration: the key comes from ``ANTHROPIC_API_KEY`` and the base URL from
``ANTHROPIC_BASE_URL`` (default ``https://api.anthropic.com``), unless given to the constructor.
The request is ``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``
headers; the summary is the answer's text blocks, joined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..providers._http import ANTHROPIC_VERSION, AnthropicEndpoint
from ._http import HttpSummarizer
from .base import SummaryFailed

__all__ = ["ANTHROPIC_VERSION", "AnthropicSummarizer"]

class AnthropicSummarizer(HttpSummarizer, AnthropicEndpoint):
    """A :class:`~sessiontree.summarize.Summarizer` backed by a Claude model.

    Args:
        model: the model name (``claude-sonnet-4-5``, ...).
        **options: see :class:`~sessiontree.providers._http.HttpClient` (``api_key``,
            ``base_url``, ``timeout``, ``max_retries``, ``backoff``, ``max_backoff``,
            ``headers``, ``temperature``).

    Raises:
        MissingExtra: httpx is not installed (``pip install 'sessiontree[llm]'``).
        SummarizerNotConfigured: no model, or no key for api.anthropic.com.
    """

    path = "messages"

    def payload(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def extract_usage(self, data: Any) -> dict[str, int]:
        usage = data.get("usage") if isinstance(data, Mapping) else None
        if not isinstance(usage, Mapping):
            return {}
        return {ours: usage[theirs] for ours, theirs in (
            ("input", "input_tokens"), ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens")) if isinstance(usage.get(theirs), int)}

    def extract_text(self, data: Any) -> str:
        content = data.get("content") if isinstance(data, Mapping) else None
        if not isinstance(content, list):
            raise SummaryFailed(f"anthropic answer without content: {str(data)[:200]}")
        return "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, Mapping) and b.get("type") == "text")
