"""Summaries of branches and compacted history: the protocol, an offline default, model adapters."""

from __future__ import annotations

from .base import CancelToken, SummaryCancelled, SummaryFailed, SummaryRequest, Summarizer

__all__ = ["CancelToken", "SummaryCancelled", "SummaryFailed", "SummaryRequest", "Summarizer"]
