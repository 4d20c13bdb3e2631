"""Request bodies checked against the providers' own SDK types (``openai``, ``anthropic``).

The SDKs describe request bodies as TypedDicts; pydantic validates a body against them with
unknown keys forbidden and no coercion, so a field the API would reject (a misspelt key, a
wrong type, a role or block type the API does not have) fails. The SDK types use ``Iterable``
for lists, which pydantic validates lazily: :func:`check` walks the result so every item is
validated.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import ConfigDict, TypeAdapter

Api = Literal["openai_chat", "openai_responses", "anthropic", "anthropic_beta"]


@functools.cache
def _adapter(api: Api) -> TypeAdapter[Any]:
    if api == "openai_chat":
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming as T
    elif api == "openai_responses":
        from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming as T
    elif api == "anthropic":
        from anthropic.types.message_create_params import MessageCreateParamsNonStreaming as T
    else:  # what /v1/messages?beta=true takes (Claude Code's requests)
        from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming as T
    # The config applies to nested TypedDicts only through a container. A few beta types allow
    # extra keys on purpose; pydantic warns that it keeps them allowing extra keys.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*allows extra items.*")
        return TypeAdapter(list[T], config=ConfigDict(extra="forbid", strict=True))  # type: ignore[valid-type]


def _consume(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _consume(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_consume(v) for v in value]
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [_consume(v) for v in value]
    return value


def check(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """Validate ``body`` as a request of ``api``; returns the validated body.

    Raises:
        pydantic.ValidationError: the body has a field or value the API's types do not allow.
    """
    return _consume(_adapter(api).validate_python([body]))[0]  # type: ignore[no-any-return]
