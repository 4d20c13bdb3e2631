"""Tools an agent can call: plain Python callables with JSON-schema parameters.

A :class:`Tool` is a name, a description, a JSON schema of its parameters and a function
(sync or async). :func:`tool` makes one from a function's signature and docstring. The agent
runs a call with :func:`run_tool`, which never raises: arguments that do not fit the schema,
an unknown tool and an exception in the function all become error results the model reads
(``isError: true``), so the model can correct itself.

A function returns its result as a ``str``, a :class:`ToolResult` (content blocks, details,
error flag), an :class:`~sessiontree.messages.ImageContent`, a list of content blocks, or any
JSON value or msgspec Struct (sent as JSON text). A parameter annotated :class:`ToolContext`
receives the context of the call (the cancel token, the agent, sub-agent runs) and is not
part of the schema.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

import msgspec
from msgspec import UNSET

from ..messages import ImageContent, TextContent, ToolCall, ToolResultMessage
from ..providers._common import ToolSpec
from ..summarize.base import CancelToken

if TYPE_CHECKING:
    from .session import AsyncAgentSession

__all__ = ["Tool", "ToolContext", "ToolError", "ToolResult", "run_tool", "tool"]


class ToolError(Exception):
    """Raise in a tool to fail with this message alone (no exception type in the result)."""


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns when it needs more than text.

    Attributes:
        content: the output the model sees: text, or text and image blocks.
        details: tool-specific data kept in the session for viewers, never sent to the model.
        is_error: the call failed; ``content`` says how.
    """

    content: str | Sequence[TextContent | ImageContent]
    details: Any = UNSET
    is_error: bool = False


@dataclass
class ToolContext:
    """Passed to a tool function that declares a parameter of this type.

    Attributes:
        call: the tool call being run.
        cancel: the run's cancel token (a long tool should check it).
        agent: the agent running the call.
    """

    call: ToolCall
    cancel: CancelToken
    agent: AsyncAgentSession
    _subagent: Callable[..., Awaitable[str]] | None = field(default=None, repr=False)

    async def run_subagent(self, prompt: str, *, system_prompt: str | None = None,
                           tools: Sequence[Tool] = (), model: Any = None) -> str:
        """Run a sub-agent on ``prompt`` (its own session, linked in the operation tree as a
        child run of this call's turn) and return its final text."""
        if self._subagent is None:
            raise RuntimeError("this tool call cannot start sub-agents")
        return await self._subagent(prompt, system_prompt=system_prompt, tools=tools, model=model)


@dataclass(frozen=True)
class Tool:
    """A tool: what the model sees (:attr:`spec`) and the function that runs it."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    context_parameter: str | None = None

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               list: "array", tuple: "array", dict: "object"}


def _schema(annotation: Any) -> tuple[dict[str, Any], bool]:
    """The JSON schema of an annotation, and whether ``None`` is allowed."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}, False
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        if len(members) == 1:
            return _schema(members[0])[0], optional
        return {"anyOf": [_schema(a)[0] for a in members]}, optional
    if origin is Literal:
        values = list(typing.get_args(annotation))
        return {"enum": values}, False
    if origin in (list, tuple, Sequence, typing.get_origin(Sequence[int])):
        args = typing.get_args(annotation)
        schema: dict[str, Any] = {"type": "array"}
        if args and args[0] is not Ellipsis:
            schema["items"] = _schema(args[0])[0]
        return schema, False
    if origin in (dict, Mapping):
        return {"type": "object"}, False
    kind = _JSON_TYPES.get(annotation)
    return ({"type": kind} if kind else {}), False


def _docstring(function: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The summary of a docstring and its Google-style ``Args:`` descriptions."""
    doc = inspect.getdoc(function) or ""
    summary = doc.split("\n\n", 1)[0].strip()
    args: dict[str, str] = {}
    section = re.search(r"^Args:\n((?:[ \t]+.*\n?)+)", doc, flags=re.M)
    if section:
        for line in section.group(1).splitlines():
            match = re.match(r"\s+(\w+)(?: \(.*?\))?:\s*(.*)", line)
            if match:
                args[match.group(1)] = match.group(2).strip()
    return summary, args


def tool(function: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, parameters: dict[str, Any] | None = None) -> Any:
    """Make a :class:`Tool` of a function (usable as ``@tool`` or ``@tool(name=...)``).

    The schema comes from the signature (``str``, ``int``, ``float``, ``bool``, lists,
    dicts, ``Literal`` and optional types; parameters with defaults are not required), the
    description from the docstring's first paragraph and the parameter descriptions from its
    ``Args:`` section, unless given.

    Args:
        function: the function.
        name: the tool name (default: the function's name).
        description: what the tool does (default: from the docstring).
        parameters: a JSON schema to use instead of the derived one.
    """
    def make(fn: Callable[..., Any]) -> Tool:
        summary, arg_docs = _docstring(fn)
        hints = typing.get_type_hints(fn)
        context_parameter = None
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in inspect.signature(fn).parameters.values():
            annotation = hints.get(param.name, param.annotation)
            if annotation is ToolContext:
                context_parameter = param.name
                continue
            schema, optional = _schema(annotation)
            if param.name in arg_docs:
                schema = {**schema, "description": arg_docs[param.name]}
            properties[param.name] = schema
            if param.default is inspect.Parameter.empty and not optional:
                required.append(param.name)
        derived: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            derived["required"] = required
        return Tool(name=name or fn.__name__, description=description or summary,
                    parameters=parameters or derived, function=fn,
                    context_parameter=context_parameter)

    return make(function) if function is not None else make


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``arguments`` against the top level of an object schema."""
    if "_invalid_json" in arguments and len(arguments) == 1:
        return [f"the arguments are not a JSON object: {str(arguments['_invalid_json'])[:200]!r}"]
    problems = [f"missing required argument {key!r}" for key in schema.get("required", ())
                if key not in arguments]
    properties = schema.get("properties") or {}
    for key, value in arguments.items():
        spec = properties.get(key)
        if spec is None:
            if schema.get("additionalProperties") is False:
                problems.append(f"unknown argument {key!r}")
            continue
        kind = spec.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
        if kinds and not any(_TYPE_CHECKS.get(k, lambda v: True)(value) for k in kinds):
            problems.append(f"argument {key!r} must be {' or '.join(kinds)}, got {json.dumps(value)[:80]}")
        if "enum" in spec and value not in spec["enum"]:
            problems.append(f"argument {key!r} must be one of {json.dumps(spec['enum'])}")
    return problems


def _content(value: Any) -> tuple[list[TextContent | ImageContent], Any, bool]:
    if isinstance(value, ToolResult):
        blocks, _, _ = _content(value.content)
        return blocks, value.details, value.is_error
    if value is None:
        return [], UNSET, False
    if isinstance(value, str):
        return [TextContent(text=value)], UNSET, False
    if isinstance(value, (TextContent, ImageContent)):
        return [value], UNSET, False
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (TextContent, ImageContent)) for v in value):
        return list(value), UNSET, False
    text = msgspec.json.encode(value).decode() if isinstance(value, msgspec.Struct) else \
        json.dumps(value, ensure_ascii=False, default=str)
    return [TextContent(text=text)], UNSET, False


def _error(call: ToolCall, text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                             content=[TextContent(text=text)], is_error=True)


async def run_tool(found: Tool | None, call: ToolCall, context: ToolContext) -> ToolResultMessage:
    """Run one call and return its result message; never raises (except on cancellation of
    the task itself): every failure is an error result the model can read."""
    if found is None:
        return _error(call, f"Tool {call.name!r} not found")
    problems = _problems(found.parameters, call.arguments)
    if problems:
        return _error(call, f"Invalid arguments for {call.name}: " + "; ".join(problems))
    kwargs = dict(call.arguments)
    if found.context_parameter:
        kwargs[found.context_parameter] = context
    try:
        if inspect.iscoroutinefunction(found.function):
            value = await found.function(**kwargs)
        else:
            value = await asyncio.to_thread(found.function, **kwargs)
            if inspect.isawaitable(value):
                value = await value
    except ToolError as exc:
        return _error(call, str(exc))
    except Exception as exc:  # noqa: BLE001 - the model reads what went wrong
        return _error(call, f"{call.name} failed: {type(exc).__name__}: {exc}")
    try:
        blocks, details, is_error = _content(value)
    except (TypeError, ValueError) as exc:
        return _error(call, f"{call.name} returned a value that cannot be sent: {exc}")
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=blocks,
                             details=details, is_error=is_error)
