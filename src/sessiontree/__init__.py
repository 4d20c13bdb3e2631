"""sessiontree: LLM agent conversations stored as append-only trees (pi session format v3).

Start with :class:`Session`::

    from sessiontree import Session, UserMessage, AssistantMessage

    session = Session.create()                 # ~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl
    first = session.append_message(UserMessage.of("Hello"))
    session.append_message(AssistantMessage.of("Hi there"))
    session.branch(first)                      # go back; the next append starts a branch
    session.append_message(UserMessage.of("Actually, start over"))
    session.build_context().messages           # what to send to the model from the leaf
"""

from __future__ import annotations

from ._scan import Problem
from ._tree import TreeNode, path_to_root
from .context import ModelRef, SessionContext, build_context, convert_to_llm
from .entries import (
    CURRENT_VERSION,
    AnyEntry,
    BranchSummary,
    Compaction,
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
)
from .errors import (
    ConcurrentModification,
    CorruptHeader,
    CorruptLine,
    EntryNotFound,
    InvalidEntry,
    MissingExtra,
    SessionLocked,
    SessionNotFound,
    SessionTreeError,
    UnsupportedVersion,
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
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
)
from .migrate import MigrationResult, migrate_file
from .session import CHECKOUT_CUSTOM_TYPE, LoadWarning, Session
from .stores.base import SessionListing, SessionLog, Store
from .stores.jsonl import JsonlFile, JsonlStore, default_session_dir, list_sessions
from .stores.memory import MemoryLog, MemoryStore

__all__ = [
    "CHECKOUT_CUSTOM_TYPE",
    "CURRENT_VERSION",
    "AgentMessage",
    "AnyEntry",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummary",
    "BranchSummaryMessage",
    "Compaction",
    "CompactionSummaryMessage",
    "ConcurrentModification",
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
    "JsonlFile",
    "JsonlStore",
    "Label",
    "LoadWarning",
    "MemoryLog",
    "MemoryStore",
    "MessageEntry",
    "MigrationResult",
    "MissingExtra",
    "ModelChange",
    "ModelRef",
    "Problem",
    "Session",
    "SessionContext",
    "SessionHeader",
    "SessionInfo",
    "SessionListing",
    "SessionLocked",
    "SessionLog",
    "SessionNotFound",
    "SessionTreeError",
    "Store",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevelChange",
    "ToolCall",
    "ToolResultMessage",
    "TreeNode",
    "UnknownEntry",
    "UnknownMessage",
    "UnsupportedVersion",
    "Usage",
    "UserMessage",
    "build_context",
    "convert_to_llm",
    "default_session_dir",
    "list_sessions",
    "migrate_file",
    "path_to_root",
]
