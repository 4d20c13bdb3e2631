"""Every golden case of tests/conformance, compared exactly (tests/conformance/README.md)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from sessiontree import CorruptHeader, CorruptLine, LoadWarning, Session, UserMessage, migrate_file
from sessiontree._json import dumps, loads
from sessiontree.testing import branch_digest, context_digest, tree_digest

from .conftest import CONFORMANCE

CASES = sorted(p.name[: -len(".jsonl")] for p in CONFORMANCE.glob("*.jsonl"))


def expected(name: str) -> dict[str, Any]:
    return json.loads((CONFORMANCE / f"{name}.expected.json").read_text("utf-8"))


def copy_case(name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"{name}.jsonl"
    shutil.copyfile(CONFORMANCE / f"{name}.jsonl", target)
    return target


def open_quietly(path: Path, **kwargs: Any) -> Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)
        return Session.open(path, **kwargs)


def entry_lines(path: Path) -> list[dict[str, Any]]:
    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    return [loads(line) for line in lines[1:]]


class IdMap:
    """Replace random ids by ``#k`` (the k-th entry line of the resulting file)."""

    def __init__(self, path: Path) -> None:
        self.map = {e["id"]: f"#{k}" for k, e in enumerate(entry_lines(path), start=1)}

    def id(self, value: Any) -> Any:
        return self.map.get(value, value) if isinstance(value, str) else value

    def entry(self, entry: dict[str, Any]) -> dict[str, Any]:
        out = dict(entry)
        for key in ("id", "parentId", "firstKeptEntryId", "targetId", "fromId"):
            if key in out:
                out[key] = self.id(out[key])
        if out.get("customType") == "sessiontree.checkout" and isinstance(out.get("data"), dict):
            out["data"] = {**out["data"], "targetId": self.id(out["data"].get("targetId"))}
        return out

    def context(self, context: dict[str, Any]) -> dict[str, Any]:
        messages = [
            {**m, "fromId": self.id(m["fromId"])} if m.get("role") == "branchSummary" and "fromId" in m
            else m for m in context["messages"]
        ]
        return {**context, "messages": messages}


class Identity(IdMap):
    def __init__(self) -> None:
        self.map = {}


def observed(session: Session, ids: IdMap) -> dict[str, Any]:
    """The library's answers in the shape of NAME.expected.json."""
    tree = [[ids.id(node.id), depth, node.label]
            for root in session.tree() for node, depth in root.walk()]
    return {
        "leaf": ids.id(session.leaf_id),
        "tree": tree,
        "problems": [{"line": p.line, "kind": p.kind} for p in session.problems],
        "name": session.name,
        "labels": {ids.id(t): {"label": label, "timestamp": ts}
                   for t, (label, ts) in session.labels().items()},
    }


@pytest.mark.parametrize("name", CASES)
def test_case(name: str, tmp_path: Path) -> None:
    exp = expected(name)
    path = copy_case(name, tmp_path)
    original = path.read_bytes()

    if exp.get("raises"):
        for strict in (False, True):
            with pytest.raises(CorruptHeader) as info:
                Session.open(path, strict=strict)
            assert [{"line": info.value.lineno, "kind": "bad_header"}] == exp["problems"]
            assert info.value.path == str(path)
            assert str(path) in str(info.value)
        if exp.get("file_unchanged"):
            assert path.read_bytes() == original
            assert [p.name for p in tmp_path.iterdir()] == [path.name]
        return

    if "import" in exp:
        migrate_file(path, now=exp["import"]["now"])

    if exp["problems"]:
        with pytest.raises(CorruptLine) as strict_error:
            Session.open(path, strict=True)
        first = exp["problems"][0]
        assert (strict_error.value.lineno, strict_error.value.kind) == (first["line"], first["kind"])
        with pytest.warns(LoadWarning, match=str(path.name)):
            session = Session.open(path)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            Session.open(path, strict=True).close()
            session = Session.open(path)

    with session:
        ids: IdMap = IdMap(path) if exp.get("ids") == "normalized" else Identity()
        got = observed(session, ids)
        for key in ("leaf", "tree", "problems", "name", "labels"):
            assert got[key] == exp[key], key

        if "context" in exp:
            assert ids.context(session.build_context().to_builtins()) == exp["context"]
        leaves = session.leaves()
        if "contexts" in exp:
            assert {ids.id(leaf) for leaf in leaves} == set(exp["contexts"])
            for leaf in leaves:
                context = ids.context(session.build_context(leaf).to_builtins())
                assert context == exp["contexts"][ids.id(leaf)], leaf
        if "digests" in exp:
            check_digests(session, exp)

    for block in ("migration", "import"):
        if block in exp:
            check_rewrite(path, original, exp[block], IdMap(path) if exp.get("ids") else Identity())

    if exp.get("roundtrip"):
        for line in original.split(b"\n"):
            line = line.rstrip(b"\r")
            if line.strip():
                assert dumps(loads(line)) == line

    if "append" in exp:
        check_append(path, exp["append"])

    if "fork" in exp:
        check_fork(path, exp["fork"])


def check_fork(path: Path, block: dict[str, Any]) -> None:
    """``create_branched_session(leaf_arg)``: a new file beside the source (format-spec.md 18.6)."""
    import re

    before = path.read_bytes()
    with open_quietly(path) as session:
        source_ids = set(session.ids())
        fork = session.create_branched_session(block["leaf_arg"])
    with fork:
        assert fork.file is not None
        forked = Path(fork.file)
    assert path.read_bytes() == before
    assert forked.parent == path.parent
    header = loads(forked.read_bytes().split(b"\n")[0])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_" + header["id"] + r"\.jsonl",
                        forked.name)
    assert {k: header[k] for k in block["header"]} == block["header"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                        header["id"])
    assert header["parentSession"] == str(path.resolve())
    assert [e["id"] for e in entry_lines(forked) if e["id"] in source_ids] == block["kept_ids"]
    ids = IdMap(forked)
    assert [ids.entry(e) for e in entry_lines(forked)] == block["entries"]
    with Session.open(forked, strict=True) as reopened:
        got = observed(reopened, ids)
        for key in ("leaf", "tree", "labels"):
            assert got[key] == block[key], key
        assert ids.context(reopened.build_context().to_builtins()) == block["context"]


def check_digests(session: Session, exp: dict[str, Any]) -> None:
    digests = exp["digests"]
    context = session.build_context().to_builtins()
    assert len(context["messages"]) == digests["context"]["messages"]
    assert context["thinkingLevel"] == digests["context"]["thinkingLevel"]
    assert context["model"] == digests["context"]["model"]
    assert context_digest(context["messages"]) == digests["context"]["digest"]
    tree = session.tree()
    assert tree_digest(tree) == digests["tree"]["digest"]
    assert len(tree) == digests["tree"]["roots"]
    depth = {node.id: d for root in tree for node, d in root.walk()}
    greatest = max(depth.values())
    deepest = next(i for i in session.ids() if depth[i] == greatest)  # first in file order
    assert deepest == digests["branch"]["deepest_leaf_id"]
    path = session.path_ids(deepest)
    assert len(path) == digests["branch"]["length"]
    assert branch_digest(path) == digests["branch"]["digest"]
    for leaf, digest in exp["leaf_context_digests"].items():
        assert context_digest(session.build_context(leaf).to_builtins()["messages"]) == digest


def check_rewrite(path: Path, original: bytes, block: dict[str, Any], ids: IdMap) -> None:
    backup = Path(f"{path}{block.get('backup_suffix', '.v0.bak')}")
    assert backup.read_bytes() == original
    if "lines" in block:
        assert path.read_text("utf-8").split("\n") == [*block["lines"], ""]
    if "header" in block:
        header = loads(path.read_bytes().split(b"\n")[0])
        assert header == block["header"]
        assert [ids.entry(e) for e in entry_lines(path)] == block["entries"]


def check_append(path: Path, rule: dict[str, Any]) -> None:
    before = path.read_bytes()
    session = open_quietly(path)
    with session:
        session.append_message(UserMessage.of("appended"))
        new_id = session.leaf_id
    after = path.read_bytes()
    prefix = before[: rule["keep_bytes"]] + rule["insert"].encode("utf-8")
    assert after.startswith(prefix)
    rest = after[len(prefix):].split(b"\n")
    if rule.get("writes_header"):
        header = loads(rest.pop(0))
        assert header["type"] == "session" and header["version"] == 3
    assert rest[-1] == b"" and len(rest) == 2
    assert loads(rest[0])["id"] == new_id
    sidecars = sorted(path.parent.glob(f"{path.name}.torn-*"))
    if "sidecar" in rule:
        assert len(sidecars) == 1
        assert sidecars[0].read_bytes() == rule["sidecar"].encode("utf-8")
    else:
        assert sidecars == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)
        reopened = Session.open(path)
    with reopened:
        assert reopened.leaf_id == new_id
        assert reopened.entry(new_id).message.content[0].text == "appended"  # type: ignore[union-attr]
