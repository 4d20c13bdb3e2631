"""sessiontree: LLM agent conversations stored as append-only trees (pi session format v3).

Start with :class:`Session`::

    from sessiontree import Session, UserMessage, AssistantMessage

    session = Session.create()  # pi's folder: ~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl
                                # ($SESSIONTREE_DIR or Session.create(directory) elsewhere)
    session.append_message(UserMessage.of("Hello"))
    hi = session.append_message(AssistantMessage.of("Hi there"))
    session.append_message(UserMessage.of("Tell me a joke"))
    session.branch(hi)                         # go back; the next append starts a branch
    session.append_message(UserMessage.of("Tell me a fact instead"))
    session.build_context().messages           # user, assistant, user: what the model gets
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (it costs milliseconds)
if TYPE_CHECKING:
    from typing import Any

    from ._scan import Problem
    from ._tree import TreeNode, path_to_root
    from .context import ModelRef, SessionContext, build_context, convert_to_llm
    from .entries import (
        CURRENT_VERSION,
        AnyEntry,
        BranchSummary,
        Compaction,
        ContextEdit,
        ContextReplacement,
        Custom,
        CustomMessageEntry,
        Entry,
        FileDetails,
        Label,
        MessageEntry,
        ModelChange,
        SessionHeader,
        SessionInfo,
        ThinkingLevelChange,
        UnknownEntry,
        UsageEntry,
    )
    from .addressing import resolve_entry
    from .projection import ProjectedEntry, SessionProjection, build_projection
    from .system_prompt import (
        collapse_system_messages,
        current_system_message,
        current_tools,
        system_message_text,
    )
    from .errors import (
        AmbiguousEntry,
        BlockingCallInLoop,
        ConcurrentModification,
        CopyRefused,
        CorruptHeader,
        CorruptLine,
        DuplicateId,
        EntryNotFound,
        InvalidEntry,
        InvalidLocation,
        InvalidMessage,
        MalformedSource,
        MissingExtra,
        ReadOnlyStore,
        SessionLocked,
        SessionLockedError,
        SessionNotFound,
        SessionTreeError,
        StoreUnavailable,
        UnsupportedVersion,
        WriteFailed,
    )
    from .events import (
        BeforeBranchResult,
        BeforeCompactResult,
        BeforeTreeResult,
        BranchEvent,
        BranchPreparation,
        CompactEvent,
        CompactPreparation,
        ContextEvent,
        ContextResult,
        EventBus,
        HookFailed,
        HookWarning,
        OperationCancelled,
        TreeEvent,
        TreePreparation,
    )
    from .messages import (
        AgentMessage,
        AssistantMessage,
        BashExecutionMessage,
        BranchSummaryMessage,
        CompactionSummaryMessage,
        Cost,
        CustomMessage,
        ImageContent,
        SystemMessage,
        TextContent,
        ThinkingContent,
        ToolCall,
        ToolDeclaration,
        ToolReference,
        ToolResultMessage,
        UnknownMessage,
        Usage,
        UserMessage,
        validate_message,
    )
    from .migrate import MigrationResult, migrate_file
    from .session import CHECKOUT_CUSTOM_TYPE, LoadWarning, Session
    from .stores.base import SessionListing, SessionLog, Store
    from .stores.jsonl import JsonlFile, JsonlStore, default_session_dir, list_sessions
    from .stores.memory import MemoryLog, MemoryStore
    from .summarize.base import (
        CancelToken,
        Summarizer,
        SummaryCancelled,
        SummaryFailed,
        SummaryRequest,
        SummaryText,
    )
    from .compaction import (
        DEFAULT_COMPACTION_SETTINGS,
        AlreadyCompacted,
        CompactionPreparation,
        CompactionSettings,
        NothingToCompact,
    )
    from .fork import ForkError
    from .navigation import NavigationResult, NothingToPop
    from .repair import RepairResult, repair_file
    from .summarize import AnthropicSummarizer, ExtractiveSummarizer, OpenAISummarizer
    from .agent import AgentSession, AsyncAgentSession, ExtensionAPI, ExtensionMessage, Tool, ToolResult
    from .renderers import Rendered, register_message_renderer
    from .asession import AsyncSession
    from .stores.postgres import AsyncPostgresStore, PostgresStore
    from .stores.sqlite import AsyncSqliteStore, SqliteStore
    from .stores.url import open_store
    from .search import SearchHit, search_sessions
    from .transfer import copy_sessions

# Every public name is imported on first use, so that ``import sessiontree`` stays light.
_MODULES = {
    "_scan": (
        "Problem"),
    "_tree": (
        "TreeNode path_to_root"),
    "context": (
        "ModelRef SessionContext build_context convert_to_llm"),
    "entries": (
        "CURRENT_VERSION AnyEntry BranchSummary Compaction ContextEdit ContextReplacement Custom "
        "CustomMessageEntry Entry FileDetails Label MessageEntry ModelChange SessionHeader "
        "SessionInfo ThinkingLevelChange UnknownEntry UsageEntry"),
    "projection": (
        "ProjectedEntry SessionProjection build_projection"),
    "system_prompt": (
        "collapse_system_messages current_system_message current_tools system_message_text"),
    "addressing": (
        "resolve_entry"),
    "errors": (
        "AmbiguousEntry BlockingCallInLoop ConcurrentModification CopyRefused CorruptHeader "
        "CorruptLine DuplicateId EntryNotFound InvalidEntry InvalidLocation InvalidMessage "
        "MalformedSource MissingExtra ReadOnlyStore SessionLocked SessionLockedError "
        "SessionNotFound SessionTreeError StoreUnavailable UnsupportedVersion WriteFailed"),
    "events": (
        "BeforeBranchResult BeforeCompactResult BeforeTreeResult BranchEvent BranchPreparation "
        "CompactEvent CompactPreparation ContextEvent ContextResult EventBus HookFailed "
        "HookWarning OperationCancelled TreeEvent TreePreparation"),
    "messages": (
        "AgentMessage AssistantMessage BashExecutionMessage BranchSummaryMessage "
        "CompactionSummaryMessage Cost CustomMessage ImageContent SystemMessage TextContent "
        "ThinkingContent ToolCall ToolDeclaration ToolReference ToolResultMessage UnknownMessage "
        "Usage UserMessage validate_message"),
    "migrate": (
        "MigrationResult migrate_file"),
    "session": (
        "CHECKOUT_CUSTOM_TYPE LoadWarning Session"),
    "stores.base": (
        "SessionListing SessionLog Store"),
    "stores.jsonl": (
        "JsonlFile JsonlStore default_session_dir list_sessions"),
    "stores.memory": (
        "MemoryLog MemoryStore"),
    "summarize.base": (
        "CancelToken Summarizer SummaryCancelled SummaryFailed SummaryRequest SummaryText"),
    "agent": (
        "AgentSession AsyncAgentSession ExtensionAPI ExtensionMessage Tool ToolResult"),
    "renderers": (
        "Rendered register_message_renderer"),
}
_LAZY = {
    **{name: module for module, names in _MODULES.items() for name in names.split()},
    "DEFAULT_COMPACTION_SETTINGS": "compaction", "AlreadyCompacted": "compaction",
    "CompactionPreparation": "compaction", "CompactionSettings": "compaction",
    "NothingToCompact": "compaction", "ForkError": "fork", "NavigationResult": "navigation",
    "NothingToPop": "navigation", "RepairResult": "repair", "repair_file": "repair",
    "AnthropicSummarizer": "summarize", "ExtractiveSummarizer": "summarize",
    "OpenAISummarizer": "summarize", "AsyncSession": "asession",
    "PostgresStore": "stores.postgres", "AsyncPostgresStore": "stores.postgres",
    "SqliteStore": "stores.sqlite", "AsyncSqliteStore": "stores.sqlite",
    "open_store": "stores.url", "copy_sessions": "transfer",
    "search_sessions": "search", "SearchHit": "search",
}


def _submodule(name: str) -> Any:
    """``importlib.import_module`` without importing importlib (with ``from sessiontree
    import Session`` every millisecond counts)."""
    return __import__(f"{__name__}.{name}", fromlist=["__name__"])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        try:  # a submodule not imported yet (``sessiontree.session``)
            return _submodule(name)
        except ModuleNotFoundError:
            raise AttributeError(f"module 'sessiontree' has no attribute {name!r}") from None
    value = getattr(_submodule(module), name)
    globals()[name] = value  # found directly from now on
    return value

__all__ = [
    "AgentSession",
    "AsyncAgentSession",
    "ExtensionAPI",
    "ExtensionMessage",
    "Rendered",
    "Tool",
    "ToolResult",
    "register_message_renderer",
    "AsyncPostgresStore",
    "AsyncSession",
    "BlockingCallInLoop",
    "AsyncSqliteStore",
    "CopyRefused",
    "DuplicateId",
    "InvalidLocation",
    "PostgresStore",
    "ReadOnlyStore",
    "SqliteStore",
    "StoreUnavailable",
    "copy_sessions",
    "search_sessions",
    "SearchHit",
    "open_store",
    "CHECKOUT_CUSTOM_TYPE",
    "CURRENT_VERSION",
    "DEFAULT_COMPACTION_SETTINGS",
    "AlreadyCompacted",
    "AnthropicSummarizer",
    "BeforeBranchResult",
    "BeforeCompactResult",
    "BeforeTreeResult",
    "BranchEvent",
    "BranchPreparation",
    "CancelToken",
    "CompactEvent",
    "CompactPreparation",
    "CompactionPreparation",
    "CompactionSettings",
    "ContextEvent",
    "ContextResult",
    "EventBus",
    "ExtractiveSummarizer",
    "ForkError",
    "HookFailed",
    "HookWarning",
    "NavigationResult",
    "NothingToCompact",
    "NothingToPop",
    "OpenAISummarizer",
    "OperationCancelled",
    "RepairResult",
    "Summarizer",
    "SummaryCancelled",
    "SummaryFailed",
    "SummaryRequest",
    "SummaryText",
    "TreeEvent",
    "TreePreparation",
    "repair_file",
    "AgentMessage",
    "AmbiguousEntry",
    "AnyEntry",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummary",
    "BranchSummaryMessage",
    "Compaction",
    "CompactionSummaryMessage",
    "ConcurrentModification",
    "ContextEdit",
    "ContextReplacement",
    "CorruptHeader",
    "CorruptLine",
    "Cost",
    "Custom",
    "CustomMessage",
    "CustomMessageEntry",
    "Entry",
    "EntryNotFound",
    "FileDetails",
    "ImageContent",
    "InvalidEntry",
    "InvalidMessage",
    "JsonlFile",
    "JsonlStore",
    "Label",
    "LoadWarning",
    "MemoryLog",
    "MemoryStore",
    "MessageEntry",
    "MigrationResult",
    "MalformedSource",
    "MissingExtra",
    "ModelChange",
    "ModelRef",
    "Problem",
    "ProjectedEntry",
    "Session",
    "SessionContext",
    "SessionHeader",
    "SessionInfo",
    "SessionListing",
    "SessionLocked",
    "SessionLockedError",
    "SessionLog",
    "SessionNotFound",
    "SessionProjection",
    "SessionTreeError",
    "Store",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevelChange",
    "ToolCall",
    "ToolDeclaration",
    "ToolReference",
    "ToolResultMessage",
    "TreeNode",
    "UnknownEntry",
    "UnknownMessage",
    "UnsupportedVersion",
    "WriteFailed",
    "Usage",
    "UsageEntry",
    "UserMessage",
    "build_context",
    "build_projection",
    "collapse_system_messages",
    "convert_to_llm",
    "current_system_message",
    "current_tools",
    "default_session_dir",
    "list_sessions",
    "migrate_file",
    "path_to_root",
    "resolve_entry",
    "system_message_text",
    "validate_message",
]
