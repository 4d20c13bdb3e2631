"""Forks and exports (format-spec.md 13, 17 i, 18.6; seeds/000 subtree export), on real files, and
checked in pi itself where it matters."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import CorruptHeader, EntryNotFound, LoadWarning, Session
from sessiontree._json import loads
from sessiontree.fork import ForkError, subtree_lines
from sessiontree.stores.pending import PendingFile

from .backends import Backend, reopen, stored, stored_file, stored_lines
from .conftest import CONFORMANCE
from .navhelpers import branched, generate, reply, user
from .test_navigation import build, trees
from .test_pi_interop import assert_same, pi_modules, pi_read  # noqa: F401 (fixture)


def entry_lines(path: str | Path) -> list[bytes]:
    return Path(path).read_bytes().splitlines()[1:]


def header(path: str | Path) -> dict[str, Any]:
    value = loads(Path(path).read_bytes().splitlines()[0])
    assert isinstance(value, dict)
    return value


@pytest.fixture
def session(backend: Backend) -> Session:
    """A new session on each backend (memory, jsonl, sqlite, postgres)."""
    return backend.create(cwd="/home/dev/proj")


def address(session: Session) -> str | Session:
    """What ``Session.fork_from`` takes for a stored session: its file or its URL (an
    in-memory session has none: the session itself)."""
    return session.file or session.url or session


def held(session: Session) -> list[str]:
    """What the session's store holds: the files of its folder, or the stored session ids."""
    if session.file is not None:
        return sorted(p.name for p in Path(session.file).parent.iterdir())
    store = getattr(session._log, "store", None)
    return store.session_ids() if store is not None else []


def pi_label_bug_case(session: Session) -> dict[str, str]:
    """format-spec.md section 13: q1, a1, a label on q1, q2, a2 (pi#5669)."""
    ids = {"q1": session.append_message(user("q1"))}
    ids["a1"] = session.append_message(reply("a1"))
    ids["label"] = session.set_label(ids["q1"], "L")
    ids["q2"] = session.append_message(user("q2"))
    ids["a2"] = session.append_message(reply("a2"))
    return ids


# -- create_branched_session --------------------------------------------------------------------


def test_the_pi_label_bug_case_is_fixed(session: Session) -> None:
    ids = pi_label_bug_case(session)
    source = stored(session)
    with session.create_branched_session(ids["a2"]) as fork:
        if session.file is not None:
            assert fork.file is not None and Path(fork.file).parent == Path(session.file).parent
            expected_parent = str(Path(session.file).resolve())
        else:  # memory stays in memory; a database fork goes into the same database
            assert fork.file is None
            expected_parent = session.url
            assert (fork.url is None) == (session.url is None)
            if session.url is not None:
                assert fork.url is not None and fork.url.split("#")[0] == session.url.split("#")[0]
        lines = stored_lines(fork)
        h = fork.header
        again = reopen(fork, strict=True)
    assert stored(session) == source
    with again:
        assert len(again.tree()) == 1  # one connected path: no orphan root
        texts = [m.content[0].text for m in again.build_context().messages]  # type: ignore[union-attr]
        assert texts == ["q1", "a1", "q2", "a2"]
        assert again.label(ids["q1"]) == "L"
        q2 = again.entry(ids["q2"])
        assert q2.parent_id == ids["a1"]  # re-parented past the dropped label entry
    assert lines[0] == session.raw_line(ids["q1"]) and lines[1] == session.raw_line(ids["a1"])
    assert lines[3] == session.raw_line(ids["a2"])  # unchanged lines keep their bytes
    assert loads(lines[-1])["timestamp"] == loads(session.raw_line(ids["label"]))["timestamp"]
    if session.url is not None:
        assert h.parent_session == expected_parent
    assert h.cwd == "/home/dev/proj" and h.version == 3 and h.id != session.id


def test_fork_ending_at_a_label_entry(session: Session) -> None:
    ids = pi_label_bug_case(session)
    with session.create_branched_session(ids["label"]) as fork:
        assert [e.type for e in fork.path()] == ["message", "message", "label"]
        assert fork.label(ids["q1"]) == "L"
        assert fork.build_context().to_builtins() == session.build_context(ids["label"]).to_builtins()


def test_fork_of_an_in_memory_session_stays_in_memory() -> None:
    session = Session.in_memory(cwd="/p")
    ids = branched(session)
    with session.create_branched_session(ids["a3"]) as fork:
        assert fork.file is None
        assert fork.header.parent_session is msgspec_unset()
        assert fork.build_context().to_builtins() == session.build_context(ids["a3"]).to_builtins()
        fork.append_message(user("continue in the fork"))
    assert ids["a3"] in session and len(session) == 9


def msgspec_unset() -> Any:
    import msgspec

    return msgspec.UNSET


def test_in_memory_fork_writes_nothing(session: Session) -> None:
    ids = branched(session)
    before, lines = held(session), stored(session)
    with session.create_branched_session(ids["a3"], in_memory=True) as fork:
        assert fork.file is None and fork.url is None and len(fork) == 7
        fork.append_message(user("only in memory"))
    assert held(session) == before and stored(session) == lines


def test_fork_to_a_chosen_file(session: Session, tmp_path: Path) -> None:
    ids = branched(session)
    out = tmp_path / "chosen.jsonl"
    with session.create_branched_session(ids["a2b"], path=out) as fork:
        assert fork.file == str(out)
    with pytest.raises(ForkError):
        session.create_branched_session(ids["a2b"], path=out)
    with pytest.raises(EntryNotFound):
        session.create_branched_session("0badc0de", path=tmp_path / "other.jsonl")
    assert not (tmp_path / "other.jsonl").exists()


def test_forks_load_identically_in_pi(session: Session, tmp_path: Path,
                                      pi_modules: Path) -> None:  # noqa: F811
    ids = pi_label_bug_case(session)
    session.branch(ids["a1"])
    session.append_message(user("q2b"))
    session.set_label(ids["a1"], "branch point")
    with session.create_branched_session(ids["a2"]) as a, \
            session.create_branched_session(ids["label"]) as b:  # in the session's store
        files = [stored_file(a, tmp_path / "a.jsonl"), stored_file(b, tmp_path / "b.jsonl")]
    for path, pi in zip(files, pi_read(pi_modules, files)):
        assert_same(path, pi)
        assert len(pi["tree"]) == 1 or pi["tree"][0][1] == 0


# -- fork_from ------------------------------------------------------------------------------------


def test_fork_from_copies_every_branch_byte_for_byte(session: Session, tmp_path: Path) -> None:
    ids = branched(session)
    session.set_label(ids["q2"], "first try")
    with Session.fork_from(address(session), directory=tmp_path / "out") as fork:
        assert fork.file is not None
        assert entry_lines(fork.file) == stored_lines(session)
        assert fork.leaf_id == session.leaf_id
        assert fork.labels() == session.labels()
        h = header(fork.file)
        parent = str(Path(session.file).resolve()) if session.file else session.url
        assert h.get("parentSession") == parent and h["cwd"] == session.cwd
        assert Path(fork.file).name.endswith(f"_{h['id']}.jsonl")


def test_fork_from_takes_an_entry_id_for_one_path(session: Session, tmp_path: Path) -> None:
    ids = branched(session)
    session.set_label(ids["q2"], "first try")
    parent = str(Path(session.file).resolve()) if session.file else session.url
    with session.create_branched_session(ids["a2"], directory=tmp_path / "a") as expected, \
            Session.fork_from(address(session), ids["a2"], directory=tmp_path / "b") as by_path, \
            Session.fork_from(session, ids["a2"], directory=tmp_path / "c") as by_session:
        assert expected.file is not None
        copied = [line for line in entry_lines(expected.file) if b'"type":"label"' not in line]
        for fork in (by_path, by_session):
            assert fork.file is not None and fork.file != expected.file
            lines = entry_lines(fork.file)
            assert [line for line in lines if b'"type":"label"' not in line] == copied
            assert fork.labels().keys() == expected.labels().keys()  # re-created, new ids
            assert header(fork.file).get("parentSession") == parent
        assert ids["a3"] not in by_path and by_path.label(ids["q2"]) == "first try"
    before = held(session)
    with pytest.raises(EntryNotFound):
        Session.fork_from(address(session), "0badc0de", directory=tmp_path / "d")
    assert not (tmp_path / "d").exists() or not list((tmp_path / "d").iterdir())
    assert held(session) == before


def test_fork_from_copies_every_branch_into_the_sources_store(session: Session,
                                                             tmp_path: Path) -> None:
    ids = branched(session)
    session.set_label(ids["q2"], "first try")
    target: dict[str, Any] = {"directory": tmp_path / "out"} if session.file is not None else \
        {"in_memory": True} if session.url is None else {}
    with Session.fork_from(session, **target) as fork:
        assert stored_lines(fork) == stored_lines(session)
        assert fork.leaf_id == session.leaf_id and fork.labels() == session.labels()
        assert (fork.url is None) == (session.url is None) and fork.id != session.id
    if session.url is not None and session.file is None:
        # by address: the store opened for the source stays open for the fork living in it
        with Session.fork_from(session.url, ids["a2"]) as fork:
            assert fork.url is not None and fork.url.split("#")[0] == session.url.split("#")[0]
            fork.append_message(user("continued in the fork"))
            assert [m.role for m in fork.build_context().messages][-1] == "user"
        assert fork._owned_store is None  # closed with the fork


def test_fork_from_with_another_cwd(session: Session, tmp_path: Path) -> None:
    branched(session)
    with Session.fork_from(session, cwd="/elsewhere", directory=tmp_path / "o") as fork:
        assert fork.cwd == "/elsewhere"
    with Session.fork_from(session, in_memory=True) as fork:
        assert fork.file is None and len(fork) == len(session)


def test_fork_from_bad_sources(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ForkError, match="no entries"):
        Session.fork_from(empty, directory=tmp_path / "o")
    bad = tmp_path / "bad.jsonl"
    shutil.copyfile(CONFORMANCE / "corrupt-header.jsonl", bad)
    with pytest.raises(CorruptHeader):
        Session.fork_from(bad, directory=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_fork_from_cuts_parent_cycles(backend: Backend, tmp_path: Path,
                                     pi_modules: Path) -> None:  # noqa: F811
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)  # the cycle, reported
        source = backend.load(CONFORMANCE / "parent-cycle.jsonl")
    assert [p.kind for p in source.problems] == ["cycle"]
    with source, Session.fork_from(source) as fork:  # into the source's store
        path = stored_file(fork, tmp_path / "fork.jsonl")
        with reopen(fork, strict=True) as again:  # no cycle left: strict open succeeds
            assert again.problems == []
    assert_same(path, pi_read(pi_modules, [path])[0])  # pi no longer hangs on it


# -- exports --------------------------------------------------------------------------------------


def test_export_branch_is_a_fork_file(session: Session, tmp_path: Path) -> None:
    ids = pi_label_bug_case(session)
    out = session.export_branch(ids["a2"], tmp_path / "branch.jsonl")
    with Session.open(out, strict=True) as exported:
        assert exported.build_context().to_builtins() == session.build_context(ids["a2"]).to_builtins()
        assert exported.label(ids["q1"]) == "L"
    with pytest.raises(ForkError):
        session.export_branch(ids["a2"], out)
    session.export_branch(ids["a1"], out, overwrite=True)
    with Session.open(out) as exported:
        assert len(exported.build_context()) == 2
    folder = tmp_path / "folder"
    folder.mkdir()
    named = session.export_branch(ids["a1"], folder)
    assert Path(named).parent == folder and Path(named).name.endswith(".jsonl")


def test_export_subtree_keeps_every_leafs_context(session: Session, tmp_path: Path) -> None:
    ids = branched(session)
    out = session.export_subtree(ids["a1"], tmp_path / "sub.jsonl")
    with Session.open(out, strict=True) as exported:
        assert set(exported.leaves()) == {ids["a3"], ids["a2b"]}
        for leaf in exported.leaves():
            assert exported.build_context(leaf).to_builtins() == \
                session.build_context(leaf).to_builtins()
        assert entry_lines(out) == [session.raw_line(i) for i in session.ids()]


def test_export_subtree_without_ancestors_makes_the_entry_a_root(session: Session,
                                                                 tmp_path: Path) -> None:
    ids = branched(session)
    out = session.export_subtree(ids["q2"], tmp_path / "sub.jsonl", ancestors=False)
    with Session.open(out, strict=True) as exported:
        assert exported.ids() == [ids[k] for k in ("q2", "a2", "r", "q3", "a3")]
        assert exported.entry(ids["q2"]).parent_id is None
        assert [m.role for m in exported.build_context().messages] == \
            ["user", "assistant", "toolResult", "user", "assistant"]


def test_export_subtree_fixes_labels_set_or_cleared_outside(session: Session,
                                                            tmp_path: Path) -> None:
    ids = branched(session)
    session.branch(ids["a3"])
    session.set_label(ids["q3"], "inside")  # a label entry in the subtree of q2
    session.branch(ids["a2b"])
    session.set_label(ids["q3"], None)  # cleared on another branch
    session.set_label(ids["a2"], "set outside")
    lines, kept = subtree_lines(session, ids["q2"], ancestors=False)
    out = session.export_subtree(ids["q2"], tmp_path / "sub.jsonl", ancestors=False)
    with Session.open(out, strict=True) as exported:
        assert {t: v[0] for t, v in exported.labels().items()} == {ids["a2"]: "set outside"}
        assert exported.labels()[ids["a2"]] == session.labels()[ids["a2"]]
    assert len(lines) == len(kept) + 2


def test_exports_of_generated_pi_sessions_load_in_pi(backend: Backend, tmp_path: Path,
                                                     pi_modules: Path) -> None:  # noqa: F811
    source = generate(tmp_path / "gen.jsonl", entries=400, seed=11)
    with backend.load(source) as session:
        leaves = session.leaves()
        picks = [leaves[0], leaves[len(leaves) // 2], leaves[-1]]
        files = []
        for n, leaf in enumerate(picks):
            with session.create_branched_session(leaf) as fork:  # in the session's store
                assert fork.build_context().to_builtins() == session.build_context(leaf).to_builtins()
                files.append(stored_file(fork, tmp_path / f"fork{n}.jsonl"))
            files.append(Path(session.export_branch(leaf, tmp_path / f"branch{n}.jsonl")))
        middle = session.path_ids(picks[1])[len(session.path_ids(picks[1])) // 2]
        files.append(Path(session.export_subtree(middle, tmp_path / "sub.jsonl")))
        files.append(Path(session.export_subtree(middle, tmp_path / "bare.jsonl", ancestors=False)))
    for path, pi in zip(files, pi_read(pi_modules, files)):
        assert_same(path, pi)


# -- properties -----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=trees(), data=st.data())
def test_fork_context_equals_the_source_leafs(backend: Backend, spec: list[tuple[int, str]],
                                              data: st.DataObject) -> None:
    with backend.create(cwd="/p") as session:
        ids = build(session, spec)
        leaf = data.draw(st.sampled_from(ids))
        fork = session.create_branched_session(leaf)  # in the session's store
        if isinstance(fork.log, PendingFile) and not fork.log.written:  # not written yet, as pi
            assert fork.file is not None and not os.path.exists(fork.file)
            assert not {"user", "assistant"} & {session.role(i) for i in session.path_ids(leaf)}
            reopened = fork
        else:
            fork.close()
            with warnings.catch_warnings():
                warnings.simplefilter("error", LoadWarning)
                reopened = reopen(fork, strict=True)
        with reopened:
            assert reopened.build_context().to_builtins() == session.build_context(leaf).to_builtins()
            assert len(reopened.tree()) == 1
            labels = {t: v for t, v in session.labels().items() if t in reopened}
            assert reopened.labels() == labels
