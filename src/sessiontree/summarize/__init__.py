"""Summaries of branches and compacted history: the protocol, an offline default, model adapters.

* :class:`Summarizer` — the protocol (``summarize(request, cancel) -> str``).
* :class:`ExtractiveSummarizer` — the default: offline, deterministic, within the budget.
* :class:`OpenAISummarizer`, :class:`AnthropicSummarizer` — OpenAI-compatible chat completions
  and the Anthropic messages API over HTTP (the ``llm`` extra: ``pip install
  'sessiontree[llm]'``).
* :func:`summarizer_from_spec` — ``"offline"``, ``"openai:MODEL"`` or ``"anthropic:MODEL"``.

The adapters are imported on first use, so ``import sessiontree`` never imports httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import (
    BRANCH_SUMMARY_PREAMBLE,
    AsyncSummarizer,
    CancelToken,
    Summarizer,
    SummarizerNotConfigured,
    SummaryCancelled,
    SummaryFailed,
    SummaryRequest,
    SummaryText,
    branch_summary_text,
    format_file_operations,
)

if TYPE_CHECKING:
    from .anthropic import AnthropicSummarizer
    from .offline import ExtractiveSummarizer
    from .openai import OpenAISummarizer

__all__ = [
    "BRANCH_SUMMARY_PREAMBLE",
    "AnthropicSummarizer",
    "AsyncSummarizer",
    "CancelToken",
    "ExtractiveSummarizer",
    "OpenAISummarizer",
    "Summarizer",
    "SummarizerNotConfigured",
    "SummaryCancelled",
    "SummaryFailed",
    "SummaryRequest",
    "SummaryText",
    "branch_summary_text",
    "format_file_operations",
    "summarizer_from_spec",
]

_LAZY = {
    "ExtractiveSummarizer": ".offline",
    "OpenAISummarizer": ".openai",
    "AnthropicSummarizer": ".anthropic",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)


def summarizer_from_spec(spec: str | None, **options: Any) -> Summarizer:
    """A summarizer from a short spec, as the command line takes it.

    Args:
        spec: ``None``, ``""`` or ``"offline"`` for the :class:`ExtractiveSummarizer`;
            ``"openai:MODEL"`` or ``"anthropic:MODEL"`` for a model adapter (its key and base
            URL come from the environment unless given in ``options``).
        options: passed to the adapter's constructor.

    Raises:
        SummarizerNotConfigured: an unknown provider, no model name, or no API key.
        MissingExtra: httpx is not installed.
    """
    if not spec or spec == "offline":
        from .offline import ExtractiveSummarizer

        return ExtractiveSummarizer()
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider not in ("openai", "anthropic"):
        raise SummarizerNotConfigured(
            f"unknown summarizer {spec!r}: use 'offline', 'openai:MODEL' or 'anthropic:MODEL'")
    if not model:
        raise SummarizerNotConfigured(f"{spec!r} names no model: use '{provider}:MODEL'")
    if provider == "openai":
        from .openai import OpenAISummarizer

        return OpenAISummarizer(model, **options)
    from .anthropic import AnthropicSummarizer

    return AnthropicSummarizer(model, **options)
