"""The tree over indexed entries: parents, paths, children, roots, labels, name. No I/O.

Invariants (FORMAT.md sections 12 and 18.1):
* For a duplicate id the later line wins; the earlier line is not a node.
* A root is an entry whose ``parentId`` is null, names no indexed entry (an orphan), or was chosen
  to break a cycle (the first member in file order of each cycle). After that, following parents
  always ends, so every walk terminates.
* Roots are in file order; :meth:`TreeIndex.tree` orders children by timestamp instant, stably.
* Labels and the session name are replayed in file order over the indexed entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from ._scan import Problem, Record, no_gc
from ._time import iso_to_ms

if TYPE_CHECKING:
    from .entries import AnyEntry

__all__ = ["TreeIndex", "TreeNode", "js_trim", "path_to_root"]

# JavaScript's String.prototype.trim removes WhiteSpace and LineTerminator (ECMA-262): not the
# same set as str.strip(), which also removes U+001C-U+001F and U+0085 but keeps U+FEFF.
_JS_WHITESPACE = ("\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                  "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")


def js_trim(text: str) -> str:
    """``text.trim()`` as JavaScript does it (pi trims session names this way)."""
    return text.strip(_JS_WHITESPACE)


class _Node(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...


N = TypeVar("N", bound=_Node)


def path_to_root(by_id: Mapping[str, N], leaf_id: str, roots: Iterable[str] = ()) -> list[N]:
    """The root-to-``leaf_id`` path over ``by_id``; cycle-safe, ``[]`` for an unknown id.

    Args:
        by_id: entries by id (anything with ``id`` and ``parent_id``).
        leaf_id: where the path ends.
        roots: ids to treat as roots whatever their ``parent_id`` (broken cycles).
    """
    forced = roots if isinstance(roots, (set, frozenset)) else set(roots)
    path: list[N] = []
    seen: set[str] = set()
    node = by_id.get(leaf_id)
    while node is not None and node.id not in seen:
        seen.add(node.id)
        path.append(node)
        parent = node.parent_id
        if parent is None or node.id in forced:
            break
        node = by_id.get(parent)
    path.reverse()
    return path


class TreeNode(msgspec.Struct, gc=False, repr_omit_defaults=True):
    """One node of :meth:`Session.tree`: the entry's envelope, its children and its label.

    ``entry`` decodes the full entry on first access, so walking a large tree stays cheap.
    (A msgspec Struct only because it is three times faster to create than a class.)
    """

    _record: Record
    _label: tuple[str, str | None] | None
    _load: Callable[[Record], AnyEntry]
    children: list[TreeNode] = []
    _entry: AnyEntry | None = None

    @property
    def id(self) -> str:
        return self._record.id

    @property
    def parent_id(self) -> str | None:
        """The stored ``parentId`` (a root may still name a missing parent or close a cycle)."""
        return self._record.parent_id

    @property
    def type(self) -> str:
        return self._record.type

    @property
    def timestamp(self) -> str | None:
        return self._record.timestamp

    @property
    def role(self) -> str | None:
        """The message role for ``message`` entries, without decoding the payload."""
        return self._record.role

    @property
    def label(self) -> str | None:
        return self._label[0] if self._label else None

    @property
    def label_timestamp(self) -> str | None:
        """When the current label was set (the label entry's timestamp)."""
        return self._label[1] if self._label else None

    @property
    def entry(self) -> AnyEntry:
        if self._entry is None:
            self._entry = self._load(self._record)
        return self._entry

    def walk(self) -> Iterator[tuple[TreeNode, int]]:
        """This node and its descendants in pre-order, with depths relative to this node."""
        stack: list[tuple[TreeNode, int]] = [(self, 0)]
        while stack:
            node, depth = stack.pop()
            yield node, depth
            stack.extend((child, depth + 1) for child in reversed(node.children))

    def __repr__(self) -> str:
        return f"TreeNode(id={self.id!r}, type={self.type!r}, children={len(self.children)})"


def _sibling_key(records: list[Record]) -> Callable[[TreeNode], Any]:
    stamps = [r.timestamp for r in records]
    if all(s is not None and len(s) == 24 and s.endswith("Z") for s in stamps):
        return lambda n: n._record.timestamp  # one fixed-width UTC form: string order is instants
    inf = float("inf")

    def instant(n: TreeNode) -> float:
        ms = iso_to_ms(n._record.timestamp)
        return inf if ms is None else ms

    return instant


_REPLAYED = frozenset({"label", "session_info"})


class TreeIndex:
    """The session's entries as a tree; built once on load, then kept up to date on appends."""

    def __init__(self, records: Sequence[Record], problems: list[Problem]) -> None:
        self.cycle_roots: set[str] = set()
        self.labels: dict[str, tuple[str, str | None]] = {}
        self.name: str | None = None
        self._children: dict[str, list[Record]] | None = None
        self._roots: list[Record] | None = None
        self._paths: dict[str, list[Record]] = {}
        with no_gc():
            by_id = {rec.id: rec for rec in records}
            if len(by_id) != len(records):
                by_id = self._without_duplicates(records, problems)
            self.by_id = by_id
            backward_only = True  # no parent comes later in the file: then there is no cycle
            for rec in by_id.values():
                if rec.type in _REPLAYED:
                    self._replay(rec)
                parent_id = rec.parent_id
                if parent_id is None:
                    continue
                parent = by_id.get(parent_id)
                if parent is None:
                    problems.append(Problem(
                        rec.line, "orphan",
                        f"parent {parent_id} is not in the session; treated as a root", rec.id,
                    ))
                else:
                    rec.parent_id = parent.id  # one string for both (less memory)
                    if parent.line >= rec.line:
                        backward_only = False
            if not backward_only:
                self._break_cycles(problems)

    @staticmethod
    def _without_duplicates(records: Sequence[Record], problems: list[Problem]) -> dict[str, Record]:
        by_id: dict[str, Record] = {}
        for rec in records:
            old = by_id.pop(rec.id, None)
            if old is not None:
                problems.append(Problem(
                    rec.line, "duplicate_id",
                    f"id {rec.id} is also used on line {old.line}; this later line wins", rec.id,
                ))
            by_id[rec.id] = rec
        return by_id

    def _replay(self, rec: Record) -> None:
        if rec.type == "label":
            target = rec.target_id
            if target is not None:
                if rec.label:
                    self.labels[target] = (rec.label, rec.timestamp)
                else:
                    self.labels.pop(target, None)
        elif rec.type == "session_info":
            self.name = js_trim(rec.name or "") or None

    def _break_cycles(self, problems: list[Problem]) -> None:
        by_id = self.by_id
        done: set[str] = set()
        for start in by_id.values():
            if start.id in done:
                continue
            stack: list[Record] = []
            on_stack: set[str] = set()
            node: Record | None = start
            while node is not None and node.id not in done and node.id not in on_stack:
                stack.append(node)
                on_stack.add(node.id)
                node = self.parent(node)
            if node is not None and node.id in on_stack:
                members = stack[stack.index(node):]
                first = min(members, key=lambda r: r.line)
                self.cycle_roots.add(first.id)
                what = ("is its own parent" if len(members) == 1
                        else f"is in a parent cycle of {len(members)} entries")
                problems.append(Problem(first.line, "cycle", f"{first.id} {what}; treated as a root",
                                        first.id))
            done.update(on_stack)

    # -- updates -----------------------------------------------------------------------------

    def extend(self, records: Iterable[Record], problems: list[Problem]) -> None:
        """Index lines another writer appended; duplicates, orphans and cycles are checked again."""
        new = list(records)
        by_id = self.by_id
        for rec in new:
            old = by_id.pop(rec.id, None)
            if old is not None and old.line != rec.line:  # same line: a tail read again whole
                problems.append(Problem(
                    rec.line, "duplicate_id",
                    f"id {rec.id} is also used on line {old.line}; this later line wins", rec.id,
                ))
            by_id[rec.id] = rec
        for rec in new:
            if rec.parent_id is not None and rec.parent_id not in by_id:
                problems.append(Problem(
                    rec.line, "orphan",
                    f"parent {rec.parent_id} is not in the session; treated as a root", rec.id,
                ))
            self._replay(rec)
        self._break_cycles(problems)
        self._children = self._roots = None
        self._paths.clear()

    def add(self, rec: Record) -> None:
        """Index a new entry whose parent is indexed (or null) and whose id is new."""
        self.by_id[rec.id] = rec
        self._replay(rec)
        if self._children is not None and self._roots is not None:
            if rec.parent_id is None:
                self._roots.append(rec)
            else:
                self._children.setdefault(rec.parent_id, []).append(rec)

    # -- queries -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.by_id

    def get(self, entry_id: str) -> Record | None:
        return self.by_id.get(entry_id)

    def last(self) -> Record | None:
        """The last indexed entry in stored order (the leaf on open)."""
        return next(reversed(self.by_id.values()), None)

    def records(self) -> list[Record]:
        """Every indexed entry in stored order."""
        return list(self.by_id.values())

    def taken(self) -> dict[str, Record]:
        """The ids in use (for drawing a new one)."""
        return self.by_id

    def label(self, entry_id: str) -> tuple[str, str | None] | None:
        """The entry's label and the timestamp of the label entry that set it."""
        return self.labels.get(entry_id)

    def parent(self, rec: Record) -> Record | None:
        """The effective parent: ``None`` for roots (null parent, orphan, broken cycle)."""
        if rec.parent_id is None or rec.id in self.cycle_roots:
            return None
        return self.by_id.get(rec.parent_id)

    def path(self, leaf_id: str) -> list[Record]:
        """Root first; ``[]`` for an unknown id (a new list each time: the caller's own).

        The last few paths are remembered (entries never change their parent, so a path stays
        valid until lines of another writer are read in); a child of a remembered leaf costs
        one step.
        """
        paths = self._paths
        found = paths.get(leaf_id)
        if found is None:
            rec = self.by_id.get(leaf_id)
            if rec is None:
                return []
            parent_id = rec.parent_id
            above = paths.get(parent_id) if parent_id is not None and \
                leaf_id not in self.cycle_roots else None
            found = [*above, rec] if above is not None else self._walk(leaf_id)
            if len(paths) >= 4:
                del paths[next(iter(paths))]
            paths[leaf_id] = found
        return list(found)

    def _walk(self, leaf_id: str) -> list[Record]:
        """The path by following parents (cycles are broken, so no visited set is needed)."""
        by_id, forced = self.by_id, self.cycle_roots
        node = by_id.get(leaf_id)
        path: list[Record] = []
        append = path.append
        if forced:
            while node is not None:
                append(node)
                if node.parent_id is None or node.id in forced:
                    break
                node = by_id.get(node.parent_id)
        else:
            while node is not None:
                append(node)
                parent = node.parent_id
                node = by_id.get(parent) if parent is not None else None
        path.reverse()
        return path

    def _index_children(self) -> tuple[dict[str, list[Record]], list[Record]]:
        if self._children is None or self._roots is None:
            children: dict[str, list[Record]] = {}
            roots: list[Record] = []
            by_id, forced = self.by_id, self.cycle_roots
            with no_gc():
                for rec in by_id.values():
                    parent_id = rec.parent_id
                    if parent_id is None or parent_id not in by_id or rec.id in forced:
                        roots.append(rec)
                    elif parent_id in children:
                        children[parent_id].append(rec)
                    else:
                        children[parent_id] = [rec]
            self._children, self._roots = children, roots
        return self._children, self._roots

    def children(self, entry_id: str) -> list[Record]:
        """Direct children in file order (pi's ``getChildren``)."""
        return list(self._index_children()[0].get(entry_id, ()))

    def roots(self) -> list[Record]:
        return list(self._index_children()[1])

    def leaves(self) -> list[Record]:
        children = self._index_children()[0]
        return [rec for rec in self.by_id.values() if rec.id not in children]

    def branch_points(self) -> list[Record]:
        children = self._index_children()[0]
        return [rec for rec in self.by_id.values() if len(children.get(rec.id, ())) > 1]

    def tree(self, load: Callable[[Record], AnyEntry]) -> list[TreeNode]:
        """Every indexed entry as nodes: roots in file order, children by timestamp (stable).

        One pass in file order, where parents come before their children; the few entries
        whose parent comes later in the file (or is missing) are placed afterwards.
        """
        label_of, forced = self.labels.get, self.cycle_roots
        nodes: dict[str, TreeNode] = {}
        node_of = nodes.get
        roots: list[TreeNode] = []
        crowded: list[list[TreeNode]] = []  # children lists with more than one node
        later: list[TreeNode] = []
        with no_gc():
            for rec in self.by_id.values():
                entry_id = rec.id
                node = nodes[entry_id] = TreeNode(rec, label_of(entry_id), load, [])
                parent_id = rec.parent_id
                if parent_id is None or entry_id in forced:
                    roots.append(node)
                    continue
                parent = node_of(parent_id)
                if parent is None:
                    later.append(node)
                    continue
                kids = parent.children
                kids.append(node)
                if len(kids) == 2:
                    crowded.append(kids)
            if later:
                self._place_later(later, nodes, roots, crowded)
            for kids in crowded:
                kids.sort(key=_sibling_key([k._record for k in kids]))
        return roots

    @staticmethod
    def _place_later(later: list[TreeNode], nodes: dict[str, TreeNode], roots: list[TreeNode],
                     crowded: list[list[TreeNode]]) -> None:
        """Orphans become roots and children of later lines join their parent, in file order."""
        def line(node: TreeNode) -> int:
            return node._record.line

        changed: dict[int, list[TreeNode]] = {id(roots): roots}
        for node in later:
            parent = nodes.get(node._record.parent_id or "")
            kids = roots if parent is None else parent.children
            kids.append(node)
            changed[id(kids)] = kids
            if len(kids) == 2:
                crowded.append(kids)
        for kids in changed.values():
            kids.sort(key=line)
