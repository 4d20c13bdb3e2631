"""The pure view module: filter modes, search, the filtered forest and the row layout."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree import Session
from sessiontree.views import (
    FILTER_MODES,
    ViewNode,
    filter_tree,
    fit_prefix,
    flatten,
    next_mode,
    visible,
)

from .viewhelpers import generate, write_branched


def ids(views: list[ViewNode]) -> list[str]:
    out: list[str] = []
    stack = list(reversed(views))
    while stack:
        view = stack.pop()
        out.append(view.id)
        stack.extend(reversed(view.children))
    return out


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session.open(write_branched(tmp_path / "s.jsonl"))


def test_modes_cycle_both_ways() -> None:
    assert next_mode("default") == "no-tools"
    assert next_mode("all") == "default"
    assert next_mode("default", -1) == "all"
    for mode in FILTER_MODES:
        assert next_mode(next_mode(mode), -1) == mode


def test_default_hides_settings_entries_but_keeps_what_is_below_them(session: Session) -> None:
    view = filter_tree(session.tree(), "default")
    shown = ids(view)
    assert "a0000001" not in shown and "l0000001" not in shown and "s0000001" not in shown
    # the model change was the root: its child becomes a root, nothing below is lost
    assert [v.id for v in view] == ["u0000001"]
    # u0000004 hung under the session_info entry; it now hangs under b0000004
    b4 = next(v for v in _all(view) if v.id == "b0000004")
    assert [c.id for c in b4.children] == ["u0000004"]
    assert len(shown) == len(session) - 3


def _all(views: list[ViewNode]) -> list[ViewNode]:
    out, stack = [], list(views)
    while stack:
        view = stack.pop()
        out.append(view)
        stack.extend(view.children)
    return out


def test_each_mode(session: Session) -> None:
    roots = session.tree()
    assert "r0000001" in ids(filter_tree(roots, "default"))
    assert "r0000001" not in ids(filter_tree(roots, "no-tools"))
    assert set(ids(filter_tree(roots, "user-only"))) == {"u0000001", "u0000002", "u0000003",
                                                         "u0000004"}
    assert ids(filter_tree(roots, "labeled-only")) == ["u0000003"]
    assert len(ids(filter_tree(roots, "all"))) == len(session)


def test_user_only_keeps_the_branch_structure(session: Session) -> None:
    view = filter_tree(session.tree(), "user-only")
    assert [v.id for v in view] == ["u0000001"]
    assert sorted(c.id for c in view[0].children) == ["u0000002", "u0000003"]


def test_search_needs_every_word_case_insensitive(session: Session) -> None:
    roots = session.tree()
    assert ids(filter_tree(roots, "all", "python")) == ["u0000003", "b0000004", "l0000001"]
    assert ids(filter_tree(roots, "all", "PYTHON pillow")) == ["b0000004"]
    assert ids(filter_tree(roots, "all", "python-rewrite")) == ["u0000003", "l0000001"]
    assert filter_tree(roots, "all", "no such words") == []
    assert ids(filter_tree(roots, "all", "b0000005")) == ["b0000005"]  # ids are searchable


def test_keep_shows_a_node_whatever_the_filter(session: Session) -> None:
    view = filter_tree(session.tree(), "user-only", keep=lambda n: n.id == "b0000005")
    assert "b0000005" in ids(view)


def test_rows_put_the_active_branch_first_and_mark_it(session: Session) -> None:
    active = set(session.path_ids())
    rows = list(flatten(filter_tree(session.tree(), "all"), active))
    order = [r.node.id for r in rows if r.node is not None]
    # b0000001 has two children; the one on the path to the leaf (u0000003) comes first
    assert order.index("u0000003") < order.index("r0000001")
    first_branch = next(r for r in rows if r.node is not None and r.node.id == "u0000003")
    assert first_branch.prefix == "├─ " and first_branch.active and first_branch.level == 1
    other = next(r for r in rows if r.node is not None and r.node.id == "r0000001")
    assert other.prefix == "└─ " and not other.active
    assert len(rows) == len(session)


def test_folding_long_runs_keeps_both_ends_and_counts(session: Session) -> None:
    rows = list(flatten(filter_tree(session.tree(), "all"), set(session.path_ids()), fold=4))
    folds = [r for r in rows if r.node is None]
    assert folds and all(r.folded > 0 for r in folds)
    shown = sum(1 for r in rows if r.node is not None)
    assert shown + sum(r.folded for r in folds) == len(session)
    # only the Python branch (6 entries) is longer than 4: its two middle entries fold
    assert [(r.folded, r.active) for r in folds] == [(2, True)]
    at = rows.index(folds[0])
    assert [r.node.id for r in rows[at - 2:at] + rows[at + 1:at + 3] if r.node] == [
        "u0000003", "b0000004", "u0000004", "b0000005"]
    # a labelled entry (and the leaf) is never folded away: it keeps its own line, its
    # label on it, and the fold splits around it
    session.set_label("u0000004", "tests")  # appended at the leaf: the run is now 7 long
    rows = list(flatten(filter_tree(session.tree(), "all"), set(), fold=4))
    folds = [n for n, r in enumerate(rows) if r.node is None]
    assert [rows[n].folded for n in folds] == [2]
    after = rows[folds[0] + 1].node
    assert after is not None and (after.id, after.label) == ("u0000004", "tests")
    session.branch("s0000001")  # the leaf in the middle of the run stays visible too
    rows = list(flatten(filter_tree(session.tree(), "all"), set(), fold=4, leaf_id="l0000001"))
    assert [r.folded for r in rows if r.node is None] == [1]
    assert "l0000001" in [r.node.id for r in rows if r.node is not None]


def test_max_depth_cuts_deeper_branches_with_a_count(session: Session) -> None:
    rows = list(flatten(filter_tree(session.tree(), "all"), set(), max_depth=0))
    cut = [r for r in rows if r.below]
    assert {r.node.id for r in cut if r.node is not None} == {"u0000003", "r0000001"}
    shown = sum(1 for r in rows if r.node is not None)
    assert shown + sum(r.below for r in cut) == len(session)


def test_a_deep_generated_session_needs_no_recursion(tmp_path: Path) -> None:
    path = generate(tmp_path / "g.jsonl", 3000, branch_every=0, compact_every=0)
    with Session.open(path) as session:
        rows = list(flatten(filter_tree(session.tree(), "all"), set(session.path_ids())))
        assert len(rows) == len(session)
        view = filter_tree(session.tree(), "no-tools")
        folded = list(flatten(view, set(), fold=10))
        entries = [r for r in folded if r.node is not None]
        labelled = [r for r in entries[5:-5] if r.node is not None and r.node.label]
        # one linear run: its 5 + 5 ends, the labelled entries between, the fold lines around
        assert len(entries) == 10 + len(labelled)
        assert len(folded) - len(entries) <= len(labelled) + 1
        assert len(entries) + sum(r.folded for r in folded) == len(unfiltered_ids(view))


def unfiltered_ids(view: list[ViewNode]) -> list[str]:
    out, stack = [], list(view)
    while stack:
        item = stack.pop()
        out.append(item.id)
        stack.extend(item.children)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from(
    ["user", "assistant", "toolResult", "label", "custom", "compaction"])), min_size=1,
    max_size=40), st.sampled_from(FILTER_MODES))
def test_filtering_keeps_exactly_the_visible_nodes_and_their_order(
        shape: list[tuple[int, str]], mode: str) -> None:
    session = Session.in_memory(cwd="/x")
    made: list[str] = []
    for parent_pick, kind in shape:
        if made:
            session.branch(made[parent_pick % len(made)])
        if kind in ("user", "assistant", "toolResult"):
            message = {"role": kind, "content": [{"type": "text", "text": kind}]}
            if kind == "toolResult":
                message.update(toolCallId="c", toolName="bash", isError=False)
            made.append(session.append_message(message))
        elif kind == "label":
            made.append(session.set_label(made[-1] if made else session.append_custom("x"),
                                          "lbl"))
        elif kind == "custom":
            made.append(session.append_custom("x"))
        else:
            made.append(session.append_entry({"type": "compaction", "summary": "s",
                                              "firstKeptEntryId": made[0] if made else "",
                                              "tokensBefore": 1}))
    roots = session.tree()
    every = [n for r in roots for n, _ in r.walk()]
    expected = [n.id for n in every if visible(n, mode)]  # type: ignore[arg-type]
    assert ids(filter_tree(roots, mode)) == expected  # type: ignore[arg-type]
    # each shown node hangs under its nearest shown ancestor
    parent_of = {c.id: v.id for v in _all(filter_tree(roots, mode))  # type: ignore[arg-type]
                 for c in v.children}
    shown = set(expected)
    for node_id in expected:
        ancestors = [i for i in session.path_ids(node_id)[:-1] if i in shown]
        assert parent_of.get(node_id) == (ancestors[-1] if ancestors else None)


@given(st.lists(st.sampled_from(["│  ", "   "]), max_size=60), st.sampled_from(["├─ ", "└─ "]),
       st.integers(2, 30))
def test_a_fitted_prefix_keeps_its_tail_within_the_columns(cells: list[str], connector: str,
                                                           columns: int) -> None:
    prefix = "".join(cells) + connector
    fitted = fit_prefix(prefix, columns)
    if len(cells) + 1 <= columns:
        assert fitted == prefix
        return
    hidden = int(fitted[1:].split(" ", 1)[0].split("│")[0].split("└")[0].split("├")[0])
    badge = f"⋯{hidden}".ljust(3)
    assert fitted == badge + prefix[3 * hidden:]  # the tail is kept exactly
    assert 1 + (len(cells) + 1 - hidden) <= columns  # the badge and the tail fit
    assert hidden % max(1, columns // 2) == 0  # rows of one step stay aligned


def test_rows_of_one_step_keep_their_guides_aligned() -> None:
    deep = ["│  " * n + "├─ " for n in range(8, 12)]
    assert [fit_prefix(p, 6) for p in deep] == [
        "⋯6 │  │  ├─ ", "⋯6 │  │  │  ├─ ", "⋯6 │  │  │  │  ├─ ", "⋯9 │  │  ├─ "]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["user", "assistant", "op", "x"])),
                min_size=1, max_size=30), st.sampled_from(FILTER_MODES), st.booleans())
def test_bookkeeping_shows_only_when_asked_and_is_never_the_leaf_shown(
        shape: list[tuple[int, str]], mode: str, ops: bool) -> None:
    """Issue 20 point 1: operation-tree entries (sessiontree.op*) show in mode all or with
    ops, nothing else changes, and the leaf shown is the last non-bookkeeping entry."""
    from sessiontree.describe import is_bookkeeping
    from sessiontree.views import shown_leaf

    session = Session.in_memory(cwd="/x")
    made: list[str] = []
    for parent_pick, kind in shape:
        if made:
            session.branch(made[parent_pick % len(made)])
        if kind in ("user", "assistant"):
            made.append(session.append_message({"role": kind, "content": [
                {"type": "text", "text": kind}]}))
        else:
            made.append(session.append_custom("sessiontree.op.batch" if kind == "op" else "x"))
    roots = session.tree()
    every = [n for r in roots for n, _ in r.walk()]
    for asked in (None, ops):
        shown = set(ids(filter_tree(roots, mode, ops=asked)))  # type: ignore[arg-type]
        bookkeeping_shows = mode == "all" if asked is None else asked
        for node in every:
            expected = visible(node, mode, ops=True)  # the mode alone  # type: ignore[arg-type]
            if is_bookkeeping(node.entry):
                expected = expected and bookkeeping_shows
            assert (node.id in shown) == expected
    path = session.path_ids()
    leaf = shown_leaf(path, session.entry)
    plain = [i for i in path if not is_bookkeeping(session.entry(i))]
    assert leaf == (plain[-1] if plain else None)
