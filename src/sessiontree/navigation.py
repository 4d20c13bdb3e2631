"""Moving around a session tree: ``navigate_tree`` (pi's ``/tree``), stacking (``pop``) and
``cherry_pick``, with branch summaries of what is left behind.

Invariants:
* An operation writes everything it writes after every check, hook and summary has succeeded:
  a cancelled, aborted or failed operation writes nothing and leaves the leaf where it was.
* A branch summary is appended at the new position (``parentId`` = the new leaf) and records
  where the user came from (``fromId`` = the abandoned leaf, ``"root"`` when there was none;
  format-spec.md 17 h).
* A leaf move without a summary is persisted with a checkout marker (format-spec.md 17 g), or by the
  label entry the caller asked for, so that pi and sessiontree agree on the leaf after a reload.
* No empty summary is written: when the abandoned entries hold no message to summarize (only
  markers, labels, custom or settings entries, or pi's "No content to summarize" placeholder),
  the move is made without a summary (pi 0.73.1 would store the placeholder).
* The helpers :func:`collect_entries_for_branch_summary` and :func:`prepare_branch_entries`
  are pi's (format-spec.md section 12) and do no I/O beyond reading the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from . import _json
from .context import NO_CONTENT_SUMMARY, is_placeholder_summary
from .entries import CHECKOUT_CUSTOM_TYPE, AnyEntry, BranchSummary, FileDetails, as_json_object
from .errors import EntryNotFound, InvalidEntry, SessionTreeError
from .events import OperationCancelled, TreeEvent, TreePreparation
from .messages import AgentMessage, UnknownMessage, message_from_builtins, message_text
from .summarize.base import (
    BRANCH_SUMMARY_PREAMBLE,
    AsyncSummarizer,
    CancelToken,
    Summarizer,
    SummaryCancelled,
    SummaryFailed,
    SummaryRequest,
    branch_summary_text,
)

if TYPE_CHECKING:
    from ._offload import Offload
    from .events import BeforeTreeResult
    from .session import Session

__all__ = [
    "BRANCH_SUMMARY_PREAMBLE",
    "DEFAULT_BRANCH_TOKEN_BUDGET",
    "NO_CONTENT_SUMMARY",
    "BranchEntries",
    "NavigationResult",
    "NothingToPop",
    "PreparedBranch",
    "anavigate_tree",
    "apop",
    "checkout",
    "cherry_pick",
    "collect_entries_for_branch_summary",
    "default_summarizer",
    "navigate_tree",
    "pop",
    "prepare_branch_entries",
]


DEFAULT_BRANCH_TOKEN_BUDGET = 128_000 - 16_384
"""pi's budget for the messages given to the branch summarizer: a 128k context window minus
the reserved 16,384 tokens."""

_SUMMARY_MAX_TOKENS = 2048

_WHY_NOT_CHERRY_PICKED = {
    "label": "a label is not a message; label the entry again (set_label / sessiontree label)",
    "session_info": "a session name is not a message; use set_name()",
    "compaction": "a compaction depends on its position (firstKeptEntryId); compact again instead",
    "branch_summary": "a branch summary records a move from where it was written; it is not a "
                      "message",
    "custom": "a custom entry is extension state, not a message; append_custom() writes one",
    "model_change": "a model change is a setting, not a message; use append_model_change()",
    "thinking_level_change": "a thinking level change is a setting, not a message; use "
                             "append_thinking_level_change()",
}
"""Why each entry type other than a message or a custom message cannot be cherry-picked."""


class NothingToPop(SessionTreeError, ValueError):
    """``pop`` has nothing to go back to: no leaf, no user message on the path, or a target
    that is not an earlier entry of the current path. Nothing was written."""


class BranchEntries(msgspec.Struct, frozen=True):
    """:func:`collect_entries_for_branch_summary`'s answer.

    Attributes:
        entries: the abandoned entries, oldest first.
        common_ancestor_id: the deepest entry on both paths, ``None`` if they share none.
    """

    entries: list[AnyEntry]
    common_ancestor_id: str | None


class PreparedBranch(msgspec.Struct, frozen=True):
    """:func:`prepare_branch_entries`'s answer: the messages to summarize (oldest first), the
    files the abandoned part read and modified, and the estimated tokens of the messages."""

    messages: list[AgentMessage | UnknownMessage]
    file_details: FileDetails
    total_tokens: int


class NavigationResult(msgspec.Struct, frozen=True):
    """What ``navigate_tree`` and ``pop`` did.

    Attributes:
        moved: ``False`` when the target was the current leaf (nothing happened).
        old_leaf_id: the leaf before.
        leaf_id: the new leaf: the entry the next append goes under. It is the summary, the
            label or the checkout marker when one was written, else ``position_id``.
        position_id: where the conversation continues from: the target, or its parent for a
            user message or ``custom_message`` target (``None``: before the first entry).
            Anything written by the move (summary, label, marker) is its child.
        target_id: the entry the caller chose.
        editor_text: the text of a chosen user or custom message (for an editor), if any.
        summary_entry: the ``branch_summary`` written, if any.
        from_hook: whether a ``session_before_tree`` handler supplied that summary.
        summarized_ids: the ids of the abandoned entries that were given to the summary.
        marker_id: the checkout marker written, if any.
        label_id: the label entry written, if any.
        nothing_to_summarize: a summary was asked for, but the abandoned entries held no
            message to summarize, so none was written (the move was made without one).
    """

    moved: bool
    old_leaf_id: str | None
    leaf_id: str | None
    position_id: str | None
    target_id: str | None
    editor_text: str | None = None
    summary_entry: BranchSummary | None = None
    from_hook: bool = False
    summarized_ids: list[str] = []
    marker_id: str | None = None
    label_id: str | None = None
    nothing_to_summarize: bool = False

    @property
    def new_leaf_id(self) -> str | None:
        """Deprecated: it named the position, not the new leaf; use ``position_id`` (or
        ``leaf_id`` for the leaf)."""
        import warnings

        warnings.warn("NavigationResult.new_leaf_id is deprecated: it is the position the move "
                      "continues from (position_id); the new leaf is leaf_id",
                      DeprecationWarning, stacklevel=2)
        return self.position_id


def default_summarizer() -> Summarizer:
    """The offline extractive summarizer (:class:`sessiontree.summarize.ExtractiveSummarizer`)."""
    from .summarize.offline import ExtractiveSummarizer

    return ExtractiveSummarizer()


# -- pure helpers (format-spec.md section 12) ---------------------------------------------------


def collect_entries_for_branch_summary(session: Session, old_leaf_id: str | None,
                                       target_id: str | None) -> BranchEntries:
    """pi's ``collectEntriesForBranchSummary``: the entries from ``old_leaf_id`` back to (not
    including) the deepest common ancestor of ``old_leaf_id`` and ``target_id``, oldest first.

    ``None`` for ``old_leaf_id`` means no leaf (nothing is abandoned); ``None`` for
    ``target_id`` means "before the first entry" (the whole old path is abandoned).

    Raises:
        EntryNotFound: either id is not in the session.
    """
    old_path = session.path_ids(old_leaf_id) if old_leaf_id is not None else []
    target_path = session.path_ids(target_id) if target_id is not None else []
    on_old = set(old_path)
    common = next((i for i in reversed(target_path) if i in on_old), None)
    abandoned: list[str] = []
    for entry_id in reversed(old_path):
        if entry_id == common:
            break
        abandoned.append(entry_id)
    abandoned.reverse()
    return BranchEntries([session.entry(i) for i in abandoned], common)




def prepare_branch_entries(entries: Sequence[AnyEntry | dict[str, Any]],
                           token_budget: int = DEFAULT_BRANCH_TOKEN_BUDGET) -> PreparedBranch:
    """pi's ``prepareBranchEntries``: the messages a branch summary is written from.

    File operations come first from every ``branch_summary`` not written by a hook (its
    ``details``), then, newest to oldest, each entry that stands for a message (tool results
    skipped; compactions, branch summaries and custom messages converted) is added until
    ``token_budget`` is reached; a summary entry that does not fit is still added while the
    total is under 90 % of the budget. ``read``/``write``/``edit`` tool calls of the messages
    taken add their files.
    """
    from .compaction import FileOperations, estimate_tokens
    from .context import entry_message

    data = [as_json_object(e) for e in entries]
    files = FileOperations()
    for entry in data:
        if entry.get("type") == "branch_summary" and not entry.get("fromHook"):
            files.add_details(entry.get("details"))
    taken: list[dict[str, Any]] = []
    total = 0
    for entry in reversed(data):
        message = entry_message(entry)
        if message is None or message.get("role") == "toolResult":
            continue
        files.add_message(message)
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            if entry.get("type") in ("compaction", "branch_summary") and total < 0.9 * token_budget:
                taken.append(message)
                total += tokens
            break
        taken.append(message)
        total += tokens
    taken.reverse()
    return PreparedBranch([message_from_builtins(m) for m in taken], files.lists(), total)


# -- the plan shared by the sync and async operations --------------------------------------------


class _Plan:
    """Everything decided before hooks run: the move, the abandoned entries, the options."""

    __slots__ = ("session", "target_id", "old_leaf", "new_leaf", "editor_text", "prep",
                 "summarize", "instructions", "label", "token", "persist", "summarizer",
                 "token_budget", "nothing_to_summarize")

    def __init__(self, session: Session, target_id: str | None, new_leaf: str | None,
                 collect_to: str | None, *, editor_text: str | None, summarize: bool,
                 instructions: str | None, label: str | None, cancel: CancelToken | None,
                 persist: bool, summarizer: Summarizer | None, token_budget: int) -> None:
        self.session = session
        self.target_id = target_id
        self.old_leaf = session.leaf_id
        self.new_leaf = new_leaf
        self.editor_text = editor_text
        self.summarize = summarize
        self.instructions = instructions
        self.label = label
        self.token = cancel if cancel is not None else CancelToken()
        self.persist = persist
        self.summarizer = summarizer
        self.token_budget = token_budget
        self.nothing_to_summarize = False
        collected = collect_entries_for_branch_summary(session, self.old_leaf, collect_to)
        self.prep = TreePreparation(
            session=session, target_id=target_id, old_leaf_id=self.old_leaf, new_leaf_id=new_leaf,
            common_ancestor_id=collected.common_ancestor_id,
            entries_to_summarize=collected.entries, user_wants_summary=summarize,
            instructions=instructions, label=label, cancel=self.token)

    def check_cancelled(self) -> None:
        if self.token.cancelled:
            raise SummaryCancelled("the navigation was cancelled; nothing was written",
                                   path=self.session.file)

    def apply_hook(self, result: BeforeTreeResult | None, decider: str | None
                   ) -> tuple[str, Any] | None:
        """Take a ``session_before_tree`` result; returns a hook-supplied (summary, details)."""
        if result is not None and result.cancel:
            raise OperationCancelled("session_before_tree", decider or "?")
        self.check_cancelled()
        if result is None:
            return None
        if result.instructions:
            self.instructions = result.instructions if result.replace_instructions or \
                not self.instructions else f"{self.instructions}\n\n{result.instructions}"
        if result.label is not None:
            self.label = result.label
        if result.summary is not None:
            if not result.summary.strip():
                raise SummaryFailed(f"the session_before_tree handler {decider} supplied an "
                                    "empty summary; nothing was written", path=self.session.file)
            return result.summary, result.details
        return None

    def request(self) -> tuple[SummaryRequest, FileDetails] | None:
        """The summary request, or ``None`` when no summary is to be generated."""
        entries = self.prep.entries_to_summarize
        if not (self.summarize and entries):
            return None
        prepared = prepare_branch_entries(entries, self.token_budget)
        details = prepared.file_details
        messages = [m for m in prepared.messages if not is_placeholder_summary(m)]
        request = SummaryRequest(
            messages=messages, purpose="branch", instructions=self.instructions,
            max_tokens=_SUMMARY_MAX_TOKENS, read_files=list(details.read_files),
            modified_files=list(details.modified_files))
        return request, details

    def summarizer_or_default(self) -> Summarizer:
        return self.summarizer if self.summarizer is not None else default_summarizer()

    def finish_summary(self, text: object, details: FileDetails) -> tuple[str, Any]:
        self.check_cancelled()
        if not isinstance(text, str) or not text.strip():
            raise SummaryFailed("the summarizer returned no summary; nothing was written",
                                path=self.session.file)
        summary = branch_summary_text(text, details)
        return summary, {"readFiles": list(details.read_files),
                         "modifiedFiles": list(details.modified_files)}

    def write(self, summary: tuple[str, Any] | None, from_hook: bool) -> NavigationResult:
        """Write the move; on any failure the leaf goes back to where it was."""
        session = self.session
        summary_entry: BranchSummary | None = None
        marker_id = label_id = None
        try:
            if summary is not None:
                _move_in_memory(session, self.new_leaf)
                text, details = summary
                body: dict[str, Any] = {"type": "branch_summary",
                                        "fromId": self.old_leaf or "root", "summary": text}
                if details is not None:
                    body["details"] = details
                body["fromHook"] = from_hook
                summary_id = session.append_entry(body)
                entry = session.entry(summary_id)
                assert isinstance(entry, BranchSummary)
                summary_entry = entry
                if self.label:
                    label_id = session.set_label(summary_id, self.label)
            elif self.label and self.target_id is not None:
                _move_in_memory(session, self.new_leaf)
                label_id = session.set_label(self.target_id, self.label)
            elif self.persist:
                marker_id = session.checkout(self.new_leaf)
            else:
                _move_in_memory(session, self.new_leaf)
        except BaseException:
            _move_in_memory(session, self.old_leaf)
            raise
        return NavigationResult(
            moved=True, old_leaf_id=self.old_leaf, leaf_id=session.leaf_id,
            position_id=self.new_leaf, target_id=self.target_id, editor_text=self.editor_text,
            summary_entry=summary_entry, from_hook=from_hook and summary is not None,
            summarized_ids=[e.id for e in self.prep.entries_to_summarize]
            if summary is not None else [],
            marker_id=marker_id, label_id=label_id,
            nothing_to_summarize=self.nothing_to_summarize)

    def event(self, result: NavigationResult) -> TreeEvent:
        return TreeEvent(session=self.session, new_leaf_id=result.leaf_id,
                         old_leaf_id=self.old_leaf, target_id=self.target_id,
                         summary_entry=result.summary_entry, from_hook=result.from_hook,
                         editor_text=self.editor_text)


def checkout(session: Session, entry_id: str | None) -> str | None:
    """Move the leaf so that the move survives a reload, in pi too (format-spec.md 17 g): a
    ``sessiontree.checkout`` custom entry under the target (a new root for ``None``), unless
    the target is already the last line (pi's leaf on reload).

    Returns:
        The marker's id, or ``None`` when no marker was needed.

    Raises:
        EntryNotFound: no such entry.
    """
    _move_in_memory(session, entry_id)  # EntryNotFound for an unknown id
    if entry_id is not None and entry_id == session.last_id:
        return None
    return session.append_custom(CHECKOUT_CUSTOM_TYPE, {"targetId": entry_id})


def _move_in_memory(session: Session, leaf: str | None) -> None:
    if leaf is None:
        session.reset_leaf()
    else:
        session.branch(leaf)


def _call_summarizer(summarizer: Summarizer, request: SummaryRequest, token: CancelToken) -> str:
    try:
        return summarizer.summarize(request, token)
    except SessionTreeError:
        raise
    except Exception as exc:  # a summarizer bug or a network error: a typed failure
        raise SummaryFailed(f"{type(summarizer).__name__} failed: {type(exc).__name__}: {exc}; "
                            "nothing was written") from exc


async def _acall_summarizer(summarizer: AsyncSummarizer, request: SummaryRequest,
                            token: CancelToken) -> str:
    try:
        return await summarizer.asummarize(request, token)
    except SessionTreeError:
        raise
    except Exception as exc:  # a summarizer bug or a network error: a typed failure
        raise SummaryFailed(f"{type(summarizer).__name__} failed: {type(exc).__name__}: {exc}; "
                            "nothing was written") from exc


def _parent_on_path(session: Session, entry_id: str) -> str | None:
    """The entry's effective parent (``None`` for a root, an orphan or a broken cycle)."""
    path = session.path_ids(entry_id)
    return path[-2] if len(path) > 1 else None


def _navigation_plan(session: Session, target_id: str, summarize: bool, instructions: str | None,
                     label: str | None, cancel: CancelToken | None, summarizer: Summarizer | None,
                     persist: bool, token_budget: int) -> _Plan | NavigationResult:
    target = session.entry(target_id)  # EntryNotFound for an unknown id
    old_leaf = session.leaf_id
    if target_id == old_leaf:
        return NavigationResult(moved=False, old_leaf_id=old_leaf, leaf_id=old_leaf,
                                position_id=old_leaf, target_id=target_id)
    editor_text: str | None = None
    new_leaf: str | None = target_id
    kind = target.type
    if kind == "message" and getattr(getattr(target, "message", None), "role", None) == "user":
        new_leaf = _parent_on_path(session, target_id)
        editor_text = message_text(target.message)  # type: ignore[union-attr]
    elif kind == "custom_message":
        new_leaf = _parent_on_path(session, target_id)
        content = getattr(target, "content", "")
        editor_text = content if isinstance(content, str) else "\n".join(
            b.text for b in content if getattr(b, "type", None) == "text")
    return _Plan(session, target_id, new_leaf, target_id, editor_text=editor_text,
                 summarize=summarize, instructions=instructions, label=label, cancel=cancel,
                 persist=persist, summarizer=summarizer, token_budget=token_budget)


def navigate_tree(session: Session, target_id: str, summarize: bool = False,
                  instructions: str | None = None, label: str | None = None,
                  cancel: CancelToken | None = None, *, summarizer: Summarizer | None = None,
                  persist: bool = True, token_budget: int = DEFAULT_BRANCH_TOKEN_BUDGET,
                  ) -> NavigationResult:
    """Move to another point of the tree, as pi's ``/tree`` (``AgentSession.navigateTree``).

    A user message or ``custom_message`` target moves the leaf to its parent and returns its
    text in ``editor_text`` (to edit and send again); any other target becomes the leaf; the
    current leaf is a no-op. The abandoned entries are those from the old leaf back to the
    common ancestor with the target.

    With ``summarize`` (or a summary supplied by a ``session_before_tree`` handler) a
    ``branch_summary`` is appended at the new position; without, the move is persisted with a
    checkout marker (or by the label entry, with ``label``), unless ``persist`` is False.

    Args:
        target_id: the entry to go to.
        summarize: summarize the abandoned entries (nothing is summarized when none are).
        instructions: extra instructions for the summarizer.
        label: a label for the summary entry (with a summary) or for the target (without).
        cancel: a token to cancel the summary; a cancelled navigation writes nothing.
        summarizer: writes the summary (default: the offline extractive summarizer).
        persist: with no summary and no label, write the checkout marker (default) or move
            the leaf in memory only (pi's behaviour).
        token_budget: the token budget for the messages given to the summarizer.

    Raises:
        EntryNotFound: no such target.
        OperationCancelled: a ``session_before_tree`` handler cancelled.
        HookFailed: a handler raised.
        SummaryCancelled: ``cancel`` was cancelled.
        SummaryFailed: the summarizer failed or returned nothing.
    """
    plan = _navigation_plan(session, target_id, summarize, instructions, label, cancel,
                            summarizer, persist, token_budget)
    return _run(plan) if isinstance(plan, _Plan) else plan


async def anavigate_tree(session: Session, target_id: str, summarize: bool = False,
                         instructions: str | None = None, label: str | None = None,
                         cancel: CancelToken | None = None, *,
                         summarizer: Summarizer | None = None, persist: bool = True,
                         token_budget: int = DEFAULT_BRANCH_TOKEN_BUDGET,
                         offload: Offload | None = None) -> NavigationResult:
    """:func:`navigate_tree` for async code: handlers are awaited in the running loop and the
    summarizer runs in a worker thread; cancelling the awaiting task cancels the token and
    writes nothing. ``offload`` runs the reads before the hooks and the writes after them
    (default: in the loop's thread; :class:`~sessiontree.AsyncSession` passes its worker)."""
    from ._offload import inline

    run = offload or inline
    plan = await run(lambda: _navigation_plan(session, target_id, summarize, instructions, label,
                                              cancel, summarizer, persist, token_budget))
    return await _arun(plan, run) if isinstance(plan, _Plan) else plan


def _decide(plan: _Plan, result: BeforeTreeResult | None, decider: str | None
            ) -> tuple[tuple[str, Any] | None, bool, tuple[SummaryRequest, FileDetails] | None]:
    """After the ``session_before_tree`` hooks: the summary if a hook supplied it, whether one
    did, and otherwise the request the summarizer still has to answer (``None`` when no summary
    is wanted, or when the abandoned entries hold nothing to summarize)."""
    supplied = plan.apply_hook(result, decider)
    if supplied is not None:
        return supplied, True, None
    request = plan.request()
    if request is not None and not request[0].messages:
        plan.nothing_to_summarize = True  # no empty summary: the move is made without one
        return None, False, None
    return None, False, request


def _run(plan: _Plan) -> NavigationResult:
    bus = plan.session.events
    summary, from_hook, pending = _decide(plan, *bus.decide("session_before_tree", plan.prep))
    if pending is not None:
        req, details = pending
        text = _call_summarizer(plan.summarizer_or_default(), req, plan.token)
        summary = plan.finish_summary(text, details)
    plan.check_cancelled()
    done = plan.write(summary, from_hook=from_hook)
    bus.emit("session_tree", plan.event(done))
    return done


async def _arun(plan: _Plan, run: Offload) -> NavigationResult:
    import asyncio

    bus = plan.session.events
    summary, from_hook, pending = _decide(plan, *await bus.adecide("session_before_tree",
                                                                  plan.prep))
    if pending is not None:
        req, details = pending
        summarizer = plan.summarizer_or_default()
        try:
            if isinstance(summarizer, AsyncSummarizer):
                text = await _acall_summarizer(summarizer, req, plan.token)
            else:
                text = await asyncio.to_thread(_call_summarizer, summarizer, req, plan.token)
        except asyncio.CancelledError:
            plan.token.cancel()
            raise
        summary = plan.finish_summary(text, details)
    plan.check_cancelled()
    written = summary
    done = await run(lambda: plan.write(written, from_hook=from_hook))
    await bus.aemit("session_tree", plan.event(done))
    return done


# -- stacking (the first seed: pop, cherry-pick) -------------------------------------------------


def _pop_plan(session: Session, to: str | None, summarizer: Summarizer | None,
              instructions: str | None, cancel: CancelToken | None, token_budget: int) -> _Plan:
    leaf = session.leaf_id
    if leaf is None:
        raise NothingToPop("the session has no leaf: there is nothing to pop", path=session.file)
    ids = session.path_ids(leaf)  # envelopes only: the roles are known without decoding
    editor_text: str | None = None
    if to is None:
        index = next((i for i in range(len(ids) - 1, -1, -1)
                      if session.role(ids[i]) == "user"), None)
        if index is None:
            raise NothingToPop("no user message on the current path: popping would go past the "
                               "root", path=session.file, entry_id=leaf)
        position = ids[index - 1] if index > 0 else None
        target: str | None = ids[index]
        user = session.entry(ids[index])
        editor_text = message_text(user.message)  # type: ignore[union-attr]
    else:
        if to not in session:
            raise EntryNotFound(f"no entry {to!r} in this session", path=session.file, entry_id=to)
        if to == leaf:
            raise NothingToPop(f"{to} is the leaf: there is nothing to pop", path=session.file,
                               entry_id=to)
        if to not in ids:
            raise NothingToPop(f"{to} is not on the current path; pop goes back along the path "
                               "(use navigate_tree to go elsewhere)", path=session.file,
                               entry_id=to)
        position = target = to
    return _Plan(session, target, position, position, editor_text=editor_text, summarize=True,
                 instructions=instructions, label=None, cancel=cancel, persist=True,
                 summarizer=summarizer, token_budget=token_budget)


def pop(session: Session, to: str | None = None, *, summarizer: Summarizer | None = None,
        instructions: str | None = None, cancel: CancelToken | None = None,
        token_budget: int = DEFAULT_BRANCH_TOKEN_BUDGET) -> NavigationResult:
    """Go back and leave a summary of what was popped (the first seed's stacking).

    Without ``to``: back to before the last user message of the current path (its parent
    becomes the position, its text is returned in ``editor_text``). With ``to``: back to that
    entry, which must be an earlier entry of the current path. Everything popped (the path
    after the position) is summarized into a ``branch_summary`` appended at the position, so
    the context continues from the summary. Repeated pops compose: a later pop that goes past
    an earlier summary summarizes it along with the rest.

    Raises:
        NothingToPop: no leaf, no user message on the path, or ``to`` is the leaf or not on
            the current path.
        EntryNotFound: ``to`` is not in the session.
        OperationCancelled, HookFailed, SummaryCancelled, SummaryFailed: as ``navigate_tree``.
    """
    return _run(_pop_plan(session, to, summarizer, instructions, cancel, token_budget))


async def apop(session: Session, to: str | None = None, *, summarizer: Summarizer | None = None,
               instructions: str | None = None, cancel: CancelToken | None = None,
               token_budget: int = DEFAULT_BRANCH_TOKEN_BUDGET,
               offload: Offload | None = None) -> NavigationResult:
    """:func:`pop` for async code (as :func:`anavigate_tree`)."""
    from ._offload import inline

    run = offload or inline
    plan = await run(lambda: _pop_plan(session, to, summarizer, instructions, cancel,
                                       token_budget))
    return await _arun(plan, run)


def cherry_pick(session: Session, entry_id: str) -> str:
    """Copy a message onto the current leaf (the first seed's ``/cherry-pick``).

    Only messages (user, assistant, bash execution, custom) and ``custom_message`` entries
    are copied: the copy gets a new id, parent (the leaf) and timestamp; its payload is
    unchanged (a message keeps its own ``timestamp``).

    Returns:
        The copy's id (the new leaf).

    Raises:
        EntryNotFound: no such entry.
        InvalidEntry: anything else (a label, a custom entry or checkout marker, a setting, a
            summary, a compaction, an unknown type), or a tool result (it belongs right after
            the assistant message that called the tool); the message says why.
    """
    data = _json.loads(session.raw_line(entry_id))
    assert isinstance(data, dict)
    kind = data.get("type")
    message = data.get("message")
    why: str | None = None
    if kind == "custom" and data.get("customType") == CHECKOUT_CUSTOM_TYPE:
        why = "a checkout marker records a leaf move, not a message; use checkout to move"
    elif kind in _WHY_NOT_CHERRY_PICKED:
        why = _WHY_NOT_CHERRY_PICKED[str(kind)]
    elif kind == "message" and isinstance(message, dict) and message.get("role") == "toolResult":
        why = "a tool result belongs right after the assistant message that called the tool"
    elif kind not in ("message", "custom_message"):
        why = f"a {kind!s} entry is not a message"
    if why is not None:
        raise InvalidEntry(f"cannot cherry-pick {entry_id}: {why} (cherry-pick copies messages "
                           "and custom messages)", path=session.file, entry_id=entry_id)
    return session.append_entry(data)
