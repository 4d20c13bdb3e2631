"""Model provider APIs: context messages -> the exact request payloads of OpenAI Chat
Completions (:mod:`.openai_chat`), OpenAI Responses (:mod:`.openai_responses`) and Anthropic
Messages (:mod:`.anthropic`), following pi 0.73.1's conversions (tool calls and results
paired, images as each API takes them, summaries as the user messages pi sends); and beside
each conversion, the streaming HTTP model adapter of that API (:class:`OpenAIChatModel`,
:class:`OpenAIResponsesModel`, :class:`AnthropicModel`) over one shared client layer
(:mod:`._http`, also used by the summarizers).

The conversions are pure functions of the messages; httpx is imported only when an adapter is
constructed.
"""

from __future__ import annotations

from typing import Any

from ._common import LlmMessage, ToolSpec, prepare_messages
from ._http import ModelRequestCancelled, ModelRequestFailed, ProviderNotConfigured
from .anthropic import AnthropicModel, anthropic_messages, anthropic_request, anthropic_tools
from .base import Model, ModelRequest, StreamDelta
from .openai_chat import OpenAIChatModel, chat_messages, chat_request, chat_tools
from .openai_responses import OpenAIResponsesModel, responses_input, responses_request, responses_tools

__all__ = [
    "AnthropicModel",
    "LlmMessage",
    "Model",
    "ModelRequest",
    "ModelRequestCancelled",
    "ModelRequestFailed",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderNotConfigured",
    "StreamDelta",
    "ToolSpec",
    "anthropic_messages",
    "anthropic_request",
    "anthropic_tools",
    "chat_messages",
    "chat_request",
    "chat_tools",
    "model_from_spec",
    "model_spec",
    "prepare_messages",
    "responses_input",
    "responses_request",
    "responses_tools",
]


_SPECS = {"openai": OpenAIChatModel, "openai-chat": OpenAIChatModel,
          "openai-responses": OpenAIResponsesModel, "anthropic": AnthropicModel}


def model_spec(model: Model) -> str:
    """The ``PROVIDER:MODEL`` that :func:`model_from_spec` makes ``model`` from (its provider
    and model for adapters of other kinds): ``openai-responses:gpt-5`` stays that."""
    name = next((spec for spec, adapter in _SPECS.items() if type(model) is adapter),
                model.provider)
    return f"{name}:{model.model}"


def model_from_spec(spec: str, **options: Any) -> Model:
    """A model adapter from ``"PROVIDER:MODEL"``: ``openai:gpt-4.1`` (Chat Completions),
    ``openai-responses:gpt-5``, ``anthropic:claude-sonnet-4-5``.

    Args:
        spec: the provider and model.
        options: passed to the adapter (``api_key``, ``base_url``, ``max_retries``...).

    Raises:
        ProviderNotConfigured: an unknown provider, no model name, or no API key.
        MissingExtra: httpx is not installed.
    """
    provider, _, model = spec.partition(":")
    adapter = _SPECS.get(provider.strip().lower())
    if adapter is None:
        raise ProviderNotConfigured(f"unknown model provider {provider!r} in {spec!r}; use one of "
                                    f"{', '.join(sorted(_SPECS))} as PROVIDER:MODEL")
    return adapter(model, **options)
