"""The tree over indexed entries: parents, paths, children, roots, labels, name. No I/O.

Invariants (format-spec.md sections 12 and 18.1):
* For a duplicate id the later line wins; the earlier line is not a node.
* A root is an entry whose ``parentId`` is null, names no indexed entry (an orphan), or was chosen
  to break a cycle (the first member in file order of each cycle). After that, following parents
  always ends, so every walk terminates.
* Roots are in file order; :meth:`TreeIndex.tree` orders children by timestamp instant, stably.
* Labels and the session name are replayed in file order over the indexed entries.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import msgspec

from ._columns import Columns
from ._scan import Problem, Record, no_gc
from ._time import Either, iso_to_ms

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

    _columns: Columns
    _row: int
    _label: tuple[str, str | None] | None
    _load: Callable[[Record], AnyEntry]
    children: list[TreeNode] = []
    _entry: AnyEntry | None = None

    @property
    def id(self) -> str:
        return self._columns.id_at(self._row)

    @property
    def parent_id(self) -> str | None:
        """The stored ``parentId`` (a root may still name a missing parent or close a cycle)."""
        return self._columns.parent_id(self._row)

    @property
    def type(self) -> str:
        return self._columns.type_of(self._row)

    @property
    def timestamp(self) -> str | None:
        return self._columns.timestamp(self._row)

    @property
    def role(self) -> str | None:
        """The message role for ``message`` entries, without decoding the payload."""
        return self._columns.role_of(self._row)

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
            self._entry = self._load(self._columns.record(self._row))
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


def _sibling_key(columns: Columns, kids: list[TreeNode]) -> Callable[[TreeNode], Any]:
    stamps = {k._row: columns.timestamp(k._row) for k in kids}
    if all(s is not None and len(s) == 24 and s.endswith("Z") for s in stamps.values()):
        return lambda n: stamps[n._row]  # one fixed-width UTC form: string order is instants
    inf = float("inf")

    def instant(n: TreeNode) -> float:
        ms = iso_to_ms(stamps[n._row])
        return inf if ms is None else ms

    return instant


_REPLAYED = frozenset({"label", "session_info"})


class RowPath(Sequence[Record]):
    """A path as rows of :class:`~sessiontree._columns.Columns`, a record made when an item is
    read; it knows where its last settings and compaction are without making any
    (:class:`~sessiontree.context.PositionedPath`)."""

    def __init__(self, columns: Columns, rows: list[int]) -> None:
        self._columns = columns
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...
    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        if isinstance(index, slice):
            return self._columns.records(self._rows[index])
        return self._columns.record(self._rows[index])

    def last_positions(self) -> tuple[int, int, int]:
        """Where the last thinking level change, model source (a model change or an assistant
        message) and compaction are (-1: none), read back from the leaf in the type codes."""
        columns = self._columns
        types, roles = columns.types, columns.roles
        codes = columns.type_codes
        thinking_code, change_code, message_code, compaction_code = (
            codes.get(name, -1) for name in ("thinking_level_change", "model_change", "message",
                                             "compaction"))
        assistant = columns.role_codes.get("assistant", -1)
        thinking = model = compaction = -1
        rows = self._rows
        for index in range(len(rows) - 1, -1, -1):
            row = rows[index]
            kind = types[row]
            if thinking < 0 and kind == thinking_code:
                thinking = index
            elif model < 0 and (kind == change_code or (kind == message_code and
                                                        roles[row] == assistant)):
                model = index
            elif compaction < 0 and kind == compaction_code:
                compaction = index
            if thinking >= 0 and model >= 0 and compaction >= 0:
                break
        return thinking, model, compaction


class TreeIndex:
    """The session's entries as a tree; built once on load, then kept up to date on appends
    (which join the columns when they are next read: :meth:`add`).

    The envelopes live in :class:`~sessiontree._columns.Columns` (a million entries fit in
    about 250 MB); the tree works on row numbers, and a :class:`Record` is made only for the
    rows a caller asks for.
    """

    def __init__(self, records: Sequence[Record], problems: list[Problem]) -> None:
        self._indexed = records if isinstance(records, Columns) else Columns.of(records)
        self._pending: dict[str, Record] = {}
        """Entries added since the columns were last read, by id (see :meth:`add`)."""
        self.cycle_roots: set[str] = set()
        self._forced: set[int] = set()  # the rows of cycle_roots
        self._dead: set[int] = set()  # rows whose id a later row took (not nodes)
        self._duplicates = 0
        self.labels: dict[str, tuple[str, str | None]] = {}
        self.name: str | None = None
        self._children: dict[int, list[int]] | None = None
        self._roots: list[int] | None = None
        self._paths: dict[str, list[Record]] = {}
        with no_gc():
            self._settle(0, problems)

    @property
    def _columns(self) -> Columns:
        """The columns, holding every entry added (what is pending goes in first, in one batch)."""
        if self._pending:
            self._flush()
        return self._indexed

    def _flush(self) -> None:
        columns, start = self._indexed, len(self._indexed)
        pending = list(self._pending.values())
        if len(pending) == 1:  # (one row costs less on its own than as a batch)
            columns.append(pending[0])
        else:
            columns.add_batch(pending, keep=True)
        self._pending = {}
        if self._children is not None and self._roots is not None:
            parents = columns.parents
            for row in range(start, len(columns)):
                parent = parents[row]
                if parent < 0:
                    self._roots.append(row)
                else:
                    self._children.setdefault(parent, []).append(row)

    def _settle(self, start: int, problems: list[Problem]) -> None:
        """Index the rows from ``start`` on: duplicates, parents named before they came,
        orphans, labels and the name, then cycles."""
        columns = self._columns
        parents, lines = columns.parents, columns.lines
        check_cycles = columns.forward
        if columns.duplicates != self._duplicates:
            self._duplicates = columns.duplicates
            self._find_duplicates(start, problems)
            check_cycles = True
        unresolved = columns.unresolved
        for row, parent_id in list(unresolved.items()):
            parent = columns.row_of(parent_id)
            if parent is not None:  # named before it came (or another writer appended it)
                parents[row] = parent
                del unresolved[row]
                check_cycles = True
                # (as when the columns resolve it: a scan in one batch, or a file read whole
                # after its index, agrees with one read in parts)
                columns.forward = columns.forward or parent >= row
            elif row >= start and row not in self._dead:
                problems.append(Problem(
                    lines[row], "orphan",
                    f"parent {parent_id} is not in the session; treated as a root",
                    columns.id_at(row)))
        rare, dead = columns.rare, self._dead
        replayed = []
        for row in reversed(rare):
            if row < start:
                break
            replayed.append(row)
        codes = columns.type_codes
        label_code, info_code = codes.get("label", -1), codes.get("session_info", -1)
        types = columns.types
        for row in reversed(replayed):
            code = types[row]
            if (code == label_code or code == info_code) and row not in dead:
                _, target, label, name = rare[row]
                self._replay(columns.type_of(row), target, label, name, columns.timestamp(row))
        if check_cycles:
            self._break_cycles(problems)

    def _find_duplicates(self, start: int, problems: list[Problem]) -> None:
        """Rows whose id a later row took are dead; their children now hang on the later row."""
        columns = self._columns
        ids, lines, parents, dead = columns.ids, columns.lines, columns.parents, self._dead
        seen: dict[str, int] = {}
        for row, entry_id in enumerate(ids):
            earlier = seen.get(entry_id)
            seen[entry_id] = row
            if earlier is None:
                continue
            dead.add(earlier)
            if row >= start and lines[earlier] != lines[row]:  # same line: a tail read again
                problems.append(Problem(
                    lines[row], "duplicate_id",
                    f"id {entry_id} is also used on line {lines[earlier]}; this later line wins",
                    entry_id))
        for row, parent in enumerate(parents):
            if parent in dead:
                parent = parents[row] = seen[ids[parent]]  # (its id's last row)
                # (as when the columns resolve it: a scan in one batch sees the last row at
                # once, and an index written from these columns must say so for its reopens)
                columns.forward = columns.forward or parent >= row

    def _replay(self, kind: str, target: str | None, label: str | None, name: str | None,
                timestamp: str | None) -> None:
        """Apply a label or session_info entry (its fields, no record needed)."""
        if kind == "label":
            if target is not None:
                if label:
                    self.labels[target] = (label, timestamp)
                else:
                    self.labels.pop(target, None)
        elif kind == "session_info":
            self.name = js_trim(name or "") or None

    def _live(self) -> Iterable[int]:
        """The rows that are nodes, in stored order."""
        rows = range(len(self._columns))
        dead = self._dead
        return [row for row in rows if row not in dead] if dead else rows

    def _parent_row(self, row: int) -> int:
        """The effective parent's row: ``-1`` for roots (null parent, orphan, broken cycle)."""
        return -1 if row in self._forced else self._indexed.parents[row]

    def _break_cycles(self, problems: list[Problem]) -> None:
        columns = self._columns
        state = bytearray(len(columns))  # 1: on the current walk, 2: done
        parent_row, lines = self._parent_row, columns.lines
        for start in self._live():
            if state[start]:
                continue
            stack: list[int] = []
            row = start
            while row >= 0 and not state[row]:
                state[row] = 1
                stack.append(row)
                row = parent_row(row)
            if row >= 0 and state[row] == 1:
                members = stack[stack.index(row):]
                first = min(members, key=lines.__getitem__)
                first_id = columns.id_at(first)
                self._forced.add(first)
                self.cycle_roots.add(first_id)
                what = ("is its own parent" if len(members) == 1
                        else f"is in a parent cycle of {len(members)} entries")
                problems.append(Problem(lines[first], "cycle", f"{first_id} {what}; treated as "
                                        "a root", first_id))
            for row in stack:
                state[row] = 2

    # -- updates -----------------------------------------------------------------------------

    def extend(self, records: Iterable[Record], problems: list[Problem]) -> None:
        """Index lines another writer appended; duplicates, orphans and cycles are checked again."""
        columns = self._columns
        start = len(columns)
        for rec in records:
            columns.append(rec)
        self._settle(start, problems)
        self._children = self._roots = None
        self._paths.clear()

    def add(self, rec: Record) -> None:
        """Index a new entry whose parent is indexed (or null) and whose id is new.

        It waits, with those after it, until the columns are next read, and goes in with them
        in one batch (an append then costs only what must happen at once; a row costs less in
        a batch than alone): until then it is answered from here (its id is taken, it is the
        last entry, :meth:`get` finds it), and the labels and name it sets are replayed at
        once.
        """
        self._pending[rec.id] = rec
        if rec.type in _REPLAYED:
            self._replay(rec.type, rec.target_id, rec.label, rec.name, rec.timestamp)

    # -- queries -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._indexed) + len(self._pending) - len(self._dead)

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and (entry_id in self._pending or
                                              self._indexed.row_of(entry_id) is not None)

    def get(self, entry_id: str) -> Record | None:
        found = self._pending.get(entry_id)
        if found is not None:
            return found
        row = self._indexed.row_of(entry_id)
        return None if row is None else self._indexed.record(row)

    def last(self) -> Record | None:
        """The last indexed entry in stored order (the leaf on open; a later line always wins
        over an earlier one with its id, so the last row is a node)."""
        if self._pending:
            return next(reversed(self._pending.values()))
        count = len(self._indexed)
        return self._indexed.record(count - 1) if count else None

    def records(self) -> list[Record]:
        """Every indexed entry in stored order."""
        return self._columns.records(self._live())

    def ids(self) -> list[str]:
        """Every indexed id in stored order (no record made)."""
        ids = self._columns.ids
        return list(ids) if not self._dead else [ids[row] for row in self._live()]

    def taken(self) -> Container[str]:
        """The ids in use (for drawing a new one): this index, whose ``in`` asks the columns."""
        return self

    def new_id(self, also: Container[str] = ()) -> str:
        """An id for a new entry, in use nowhere here nor in ``also`` (:meth:`Columns.new_id`)."""
        return self._indexed.new_id(Either(self._pending, also) if also else self._pending)

    def label(self, entry_id: str) -> tuple[str, str | None] | None:
        """The entry's label and the timestamp of the label entry that set it."""
        return self.labels.get(entry_id)

    def path(self, leaf_id: str) -> list[Record]:
        """Root first; ``[]`` for an unknown id (a new list each time: the caller's own).

        The last few paths are remembered (entries never change their parent, so a path stays
        valid until lines of another writer are read in); a child of a remembered leaf costs
        one step.
        """
        paths = self._paths
        found = paths.get(leaf_id)
        if found is None:
            columns = self._columns
            row = columns.row_of(leaf_id)
            if row is None:
                return []
            parent = self._parent_row(row)
            above = paths.get(columns.id_at(parent)) if parent >= 0 else None
            found = [*above, columns.record(row)] if above is not None else \
                columns.records(self._walk(row))
            if len(paths) >= 4:
                del paths[next(iter(paths))]
            paths[leaf_id] = found
        return list(found)

    def row_path(self, leaf_id: str) -> RowPath:
        """The root-to-leaf path whose records are made only as they are read (building a
        context reads the part after the last compaction)."""
        row = self._columns.row_of(leaf_id)
        return RowPath(self._columns, self._walk(row) if row is not None else [])

    def _walk(self, row: int) -> list[int]:
        """The rows of the path, root first (cycles are broken, so no visited set is needed)."""
        parents, forced = self._columns.parents, self._forced
        rows: list[int] = []
        append = rows.append
        if forced:
            while row >= 0:
                append(row)
                row = -1 if row in forced else parents[row]
        else:
            while row >= 0:
                append(row)
                row = parents[row]
        rows.reverse()
        return rows

    def _index_children(self) -> tuple[dict[int, list[int]], list[int]]:
        if self._children is None or self._roots is None:
            children: dict[int, list[int]] = {}
            roots: list[int] = []
            parent_row = self._parent_row if self._forced else self._columns.parents.__getitem__
            with no_gc():
                for row in self._live():
                    parent = parent_row(row)
                    if parent < 0:
                        roots.append(row)
                    elif parent in children:
                        children[parent].append(row)
                    else:
                        children[parent] = [row]
            self._children, self._roots = children, roots
        return self._children, self._roots

    def children(self, entry_id: str) -> list[Record]:
        """Direct children in file order (pi's ``getChildren``)."""
        row = self._columns.row_of(entry_id)
        found = self._index_children()[0].get(row, ()) if row is not None else ()
        return self._columns.records(found)

    def roots(self) -> list[Record]:
        return self._columns.records(self._index_children()[1])

    def leaves(self) -> list[Record]:
        children = self._index_children()[0]
        return self._columns.records(row for row in self._live() if row not in children)

    def branch_points(self) -> list[Record]:
        children = self._index_children()[0]
        return self._columns.records(row for row in self._live()
                                     if len(children.get(row, ())) > 1)

    def tree(self, load: Callable[[Record], AnyEntry]) -> list[TreeNode]:
        """Every indexed entry as nodes: roots in file order, children by timestamp (stable).

        One pass in file order, where parents come before their children; the few entries
        whose parent comes later in the file (or is missing) are placed afterwards.
        """
        columns = self._columns
        ids, parents, unresolved, forced = columns.ids, columns.parents, columns.unresolved, \
            self._forced
        label_of = self.labels.get
        nodes: list[TreeNode | None] = [None] * len(columns)
        roots: list[TreeNode] = []
        crowded: list[list[TreeNode]] = []  # children lists with more than one node
        later: list[TreeNode] = []
        with no_gc():
            for row in self._live():
                node = nodes[row] = TreeNode(columns, row, label_of(ids[row]), load, [])
                parent = parents[row]
                if parent < 0 and row not in unresolved or row in forced:
                    roots.append(node)
                    continue
                above = nodes[parent] if parent >= 0 else None
                if above is None:
                    later.append(node)
                    continue
                kids = above.children
                kids.append(node)
                if len(kids) == 2:
                    crowded.append(kids)
            if later:
                self._place_later(later, nodes, roots, crowded)
            for kids in crowded:
                kids.sort(key=_sibling_key(columns, kids))
        return roots

    def _place_later(self, later: list[TreeNode], nodes: list[TreeNode | None],
                     roots: list[TreeNode], crowded: list[list[TreeNode]]) -> None:
        """Orphans become roots and children of later lines join their parent, in file order."""
        lines, parents = self._columns.lines, self._columns.parents

        def line(node: TreeNode) -> int:
            return lines[node._row]

        changed: dict[int, list[TreeNode]] = {id(roots): roots}
        for node in later:
            parent = parents[node._row]
            above = nodes[parent] if parent >= 0 else None
            kids = roots if above is None else above.children
            kids.append(node)
            changed[id(kids)] = kids
            if len(kids) == 2:
                crowded.append(kids)
        for kids in changed.values():
            kids.sort(key=line)
