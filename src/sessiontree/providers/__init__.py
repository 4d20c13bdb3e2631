"""Model provider APIs: context messages -> the exact request payloads of OpenAI Chat
Completions (:mod:`.openai_chat`), OpenAI Responses (:mod:`.openai_responses`) and Anthropic
Messages (:mod:`.anthropic`), following pi 0.73.1's conversions (tool calls and results
paired, images as each API takes them, summaries as the user messages pi sends).

Nothing here imports an HTTP library; the conversions are pure functions of the messages.
"""

from __future__ import annotations

from ._common import LlmMessage, ToolSpec, prepare_messages
from .anthropic import anthropic_messages, anthropic_request, anthropic_tools
from .openai_chat import chat_messages, chat_request, chat_tools
from .openai_responses import responses_input, responses_request, responses_tools

__all__ = [
    "LlmMessage",
    "ToolSpec",
    "anthropic_messages",
    "anthropic_request",
    "anthropic_tools",
    "chat_messages",
    "chat_request",
    "chat_tools",
    "prepare_messages",
    "responses_input",
    "responses_request",
    "responses_tools",
]
