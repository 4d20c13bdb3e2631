"""Summaries from any OpenAI-compatible chat completions API (OpenAI, vLLM, llama.cpp, Ollama,
LiteLLM, OpenRouter, ...), over HTTP with httpx.

Configuration: the key comes from ``OPENAI_API_KEY`` and the base URL from ``OPENAI_BASE_URL``
(default ``https://api.openai.com/v1``), unless given to the constructor. The request is
``POST {base_url}/chat/completions`` with a system and a user message; the summary is the first
choice's message content.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..providers._http import OpenAIEndpoint
from ._http import HttpSummarizer
from .base import SummaryFailed

__all__ = ["OpenAISummarizer"]


class OpenAISummarizer(HttpSummarizer, OpenAIEndpoint):
    """A :class:`~sessiontree.summarize.Summarizer` backed by an OpenAI-compatible chat model.

    Args:
        model: the model name (``gpt-4.1-mini``, ...).
        max_tokens_field: the request field that carries the budget: ``max_tokens`` (default,
            understood by every compatible server) or ``max_completion_tokens`` (OpenAI's
            reasoning models require it).
        **options: see :class:`~sessiontree.providers._http.HttpClient` (``api_key``,
            ``base_url``, ``timeout``, ``max_retries``, ``backoff``, ``max_backoff``,
            ``headers``, ``temperature``).

    Raises:
        MissingExtra: httpx is not installed (``pip install 'sessiontree[llm]'``).
        SummarizerNotConfigured: no model, or no key for api.openai.com.
    """

    path = "chat/completions"

    def __init__(self, model: str, *, max_tokens_field: str = "max_tokens", **options: Any) -> None:
        super().__init__(model, **options)
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_field must be 'max_tokens' or 'max_completion_tokens'")
        self.max_tokens_field = max_tokens_field

    def payload(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": prompt}],
            self.max_tokens_field: max_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def extract_usage(self, data: Any) -> dict[str, int]:
        usage = data.get("usage") if isinstance(data, Mapping) else None
        if not isinstance(usage, Mapping):
            return {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        cached = cached if isinstance(cached, int) else 0
        prompt, output = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return {"input": max(0, (prompt if isinstance(prompt, int) else 0) - cached),
                "output": output if isinstance(output, int) else 0, "cache_read": cached}

    def extract_text(self, data: Any) -> str:
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise SummaryFailed(f"openai answer without choices: {str(data)[:200]}")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):  # some compatible servers answer with content parts
            content = "".join(str(p.get("text", "")) for p in content
                              if isinstance(p, Mapping) and p.get("type") in ("text", "output_text"))
        return content if isinstance(content, str) else ""
