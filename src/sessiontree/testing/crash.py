"""Crash harness: a child process writes, the parent kills it with SIGKILL at a random moment,
then checks what is stored. Run by the test suite (a few kills) and by
``benchmarks/crash.py`` (hundreds per backend).

Scenarios (``scenario`` in :func:`run`):

* ``append``: the child opens one session (JSONL file, SQLite or PostgreSQL) with
  ``durable=True`` and appends in a loop: single messages and, on the databases, batches of up
  to 200 entries through ``extend`` (one transaction). Before a batch it prints the batch's ids,
  after every append that returned it prints the ids it stored. After each kill the session
  must open with no problem but a torn last line (a JSONL append the kernel cut short: never an
  entry, saved aside before the next append), hold every acknowledged entry, keep every line
  stored before the round byte for byte, and hold nothing else but the one append in flight (a
  batch whole or not at all: a kill mid-transaction leaves no part of it). A JSONL file has no
  multi-line transaction: a kill inside a large ``extend`` write can leave some of its lines.
* ``migrate``: the child sets a fresh database's schema up (every migration); after the kill
  the database is at version 0 with no table, or complete. For JSONL: ``migrate_file`` of a
  version-1 file; after the kill the file is the original or the migrated one, byte for byte.
* ``repair``: ``repair_file`` of a file with a torn line and a cycle: the original or the
  repaired file, byte for byte.
* ``copy``: a folder of generated sessions copied into the store: every session at the
  destination is absent or complete (byte for byte), and running the copy again completes it.
* ``copies``: three copies of one folder into one store started at the same moment
  (:func:`race_copies`), one of them killed: the others finish with status 0, each having
  copied or skipped every session, and the store holds every session complete or not at all.

The attacks of :mod:`sessiontree.testing.attacks` (a lockless writer racing rewrites, a full
disk, hostile files in a folder) run here too, on JSONL, ``rewrite_kills`` rounds each.

Nothing here is timed; the report counts kills and checks.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .attacks import ATTACKS, Unavailable, attack

__all__ = ["Copier", "CrashReport", "main", "race_copies", "run"]

BACKENDS = ("jsonl", "sqlite", "postgres")
SCENARIOS = ("append", "migrate", "repair", "copy", "copies")
"""The kill scenarios; :data:`~sessiontree.testing.attacks.ATTACKS` (JSONL only) run too when
named."""


@dataclass
class CrashReport:
    """What one harness run did: kills per backend and scenario, and what went wrong."""

    kills: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    """Attacks this machine cannot run (no node, no right to mount), with the reason."""

    def count(self, key: str) -> None:
        self.kills[key] = self.kills.get(key, 0) + 1


# -- the child ---------------------------------------------------------------------------------


def _child_append(location: str, seed: int) -> None:
    from .. import Session, UserMessage
    from .._time import new_entry_id
    from ..stores.url import is_url

    rng = random.Random(seed)
    session = Session.open(location, durable=True)
    batches = 0.3 if is_url(location) else 0.0  # a transaction; a file has no multi-line one
    print("ready", flush=True)
    while True:
        if rng.random() < batches:
            size = rng.randint(2, 200)
            parent = session.leaf_id
            taken = set(session.ids())
            batch: list[dict[str, Any]] = []
            for _ in range(size):
                entry_id = new_entry_id(taken)
                taken.add(entry_id)
                batch.append({"type": "message", "id": entry_id, "parentId": parent,
                              "timestamp": "2025-01-01T00:00:00.000Z",
                              "message": {"role": "user", "content": "batch " * rng.randint(1, 50),
                                          "timestamp": 1}})
                parent = entry_id
            ids = [str(e["id"]) for e in batch]
            print("begin " + " ".join(ids), flush=True)
            session.extend(batch)
            print("ok " + " ".join(ids), flush=True)
        else:
            entry_id = session.append_message(UserMessage.of("x" * rng.randint(1, 4000)))
            print("ok " + entry_id, flush=True)


def _child_rewrite(scenario: str, target: str, extra: str) -> None:
    print("ready", flush=True)
    if scenario == "migrate":
        from ..stores.url import is_url, open_store

        if is_url(target):
            open_store(target).close()  # opening sets the schema up
        else:
            from ..migrate import migrate_file

            migrate_file(target)
    elif scenario == "repair":
        from ..repair import repair_file

        repair_file(target)
    elif scenario == "copy":
        from ..transfer import copy_sessions

        copy_sessions(extra, target)
    print("done", flush=True)
    time.sleep(60)


def _child_copies(target: str, source: str) -> None:
    """Copy ``source`` into ``target`` once the parent says go (on standard input)."""
    from ..transfer import copy_sessions

    print("ready", flush=True)
    sys.stdin.readline()
    result = copy_sessions(source, target)
    print(f"done {len(result.copied)} {len(result.skipped)}", flush=True)


def _child(argv: Sequence[str]) -> None:
    scenario, target, extra, seed = argv
    if scenario == "append":
        _child_append(target, int(seed))
    elif scenario == "copies":
        _child_copies(target, extra)
    else:
        _child_rewrite(scenario, target, extra)


# -- the parent ----------------------------------------------------------------------------------


def _spawn(args: Sequence[str], *, stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sessiontree.testing.crash", "--child", *args],
                            stdin=subprocess.PIPE if stdin else None, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@dataclass
class Copier:
    """How one of :func:`race_copies`' processes ended."""

    status: int
    """Its exit status (``-9``: killed)."""
    copied: int | None
    """How many sessions it copied and skipped (``None``: it did not finish)."""
    skipped: int | None
    stderr: str


def race_copies(source: str, target: str, copies: int, kill_after: float | None = None
                ) -> list[Copier]:
    """Copy ``source`` into the store ``target`` from ``copies`` processes at the same moment
    (each starts once all are ready); with ``kill_after``, SIGKILL the first one that many
    seconds after the start. How each ended, in start order."""
    children = [_spawn(["copies", target, source, "0"], stdin=True) for _ in range(copies)]
    try:
        for child in children:
            assert child.stdout is not None
            first = child.stdout.readline()
            if first.strip() != "ready":
                raise RuntimeError(f"a copier did not start: {first!r}")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.close()
        if kill_after is not None:
            time.sleep(kill_after)
            children[0].send_signal(signal.SIGKILL)
        ended = []
        for child in children:
            assert child.stdout is not None and child.stderr is not None
            out, err = child.stdout.read(), child.stderr.read()
            status = child.wait()
            done = out.split()
            finished = len(done) == 3 and done[0] == "done"
            ended.append(Copier(status, int(done[1]) if finished else None,
                                int(done[2]) if finished else None, err))
        return ended
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
            for stream in (child.stdin, child.stdout, child.stderr):
                if stream is not None:
                    stream.close()


def _kill_after(child: subprocess.Popen[str], delay: float) -> str:
    """Wait for "ready", let the child work ``delay`` seconds, SIGKILL it; its stdout."""
    assert child.stdout is not None
    first = child.stdout.readline()
    if first.strip() != "ready":
        child.kill()
        _, err = child.communicate()
        raise RuntimeError(f"the child did not start: {first!r} {err[-2000:]}")
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    # read through the same buffered stream as readline(): lines it already buffered count too
    # (communicate() would read the pipe underneath and miss them)
    out = child.stdout.read()
    assert child.stderr is not None
    child.stderr.read()
    child.wait()
    child.stdout.close()
    child.stderr.close()
    return out


def _stored(location: str) -> tuple[list[str], list[bytes], list[str]]:
    """Ids and lines of a session as stored, and the problems opening it reported, except a
    torn last line: the bytes of the append a kill cut short (a write the kernel stopped), never
    read as an entry and saved aside before the next append."""
    from .. import Session

    with Session.open(location, warn=False) as session:
        ids = session.ids()
        problems = [p.describe() for p in session.problems if p.kind != "torn"]
        return ids, [session.raw_line(i) for i in ids], problems


def _check_append(location: str, before: list[bytes], out: str) -> str | None:
    acked: list[str] = []
    pending: list[str] = []
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "ok":
            acked.extend(rest.split())
            pending = []
        elif kind == "begin":
            pending = rest.split()
    ids, lines, problems = _stored(location)
    if problems:
        return f"{location}: after the kill: {'; '.join(problems)}"
    if lines[:len(before)] != before:
        return f"{location}: lines stored before the round changed"
    new = ids[len(before):]
    if new[:len(acked)] != acked:
        return f"{location}: acknowledged entries missing or out of order"
    extra = new[len(acked):]
    if pending and extra not in ([], pending):
        return f"{location}: a batch was stored in part ({len(extra)} of {len(pending)})"
    if not pending and len(extra) > 1:
        return f"{location}: {len(extra)} entries nobody appended"
    return None


def _fresh_postgres(dsn: str) -> tuple[str, str]:
    schema = f"sessiontree_crash_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}schema={schema}", schema


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _new_session(backend: str, work: Path, store_url: str | None) -> str:
    from .. import Session, UserMessage

    if backend == "jsonl":
        session = Session.create(work / "files", cwd="/crash")
        session.append_message(UserMessage.of("start"))
        location = str(session.file)
    else:
        assert store_url is not None
        session = Session.create(cwd="/crash", store=store_url)
        session.append_message(UserMessage.of("start"))
        location = f"{store_url}#{session.id}"
    session.close()
    return location


def _store_url(backend: str, work: Path, postgres: str | None, name: str) -> tuple[str, str | None]:
    if backend == "sqlite":
        return f"sqlite:///{work / name}.db", None
    if backend == "postgres":
        assert postgres is not None
        return _fresh_postgres(postgres)
    return str(work / name), None


def _round_append(backend: str, kills: int, rng: random.Random, work: Path,
                  postgres: str | None, report: CrashReport) -> None:
    store_url, schema = _store_url(backend, work, postgres, "append")
    try:
        location = _new_session(backend, work, None if backend == "jsonl" else store_url)
        before = _stored(location)[1]
        for _ in range(kills):
            out = _kill_after(_spawn(["append", location, "", str(rng.getrandbits(32))]),
                              rng.uniform(0.0, 0.25))
            report.count(f"{backend}/append")
            problem = _check_append(location, before, out)
            if problem:
                report.failures.append(problem)
                return
            before = _stored(location)[1]
    finally:
        if schema is not None and postgres is not None:
            _drop_schema(postgres, schema)


def _round_copies(backend: str, kills: int, rng: random.Random, work: Path,
                  postgres: str | None, report: CrashReport) -> None:
    from ..testing.generate import generate_folder

    source = work / "many"
    if not source.exists():
        generate_folder(source, 20, seed=12, min_entries=5, max_entries=60)
    for round_number in range(kills):
        target, schema = _store_url(backend, work, postgres, f"copies-{round_number}")
        try:
            ended = race_copies(str(source), target, 3, rng.uniform(0.0, 0.4))
            report.count(f"{backend}/copies")
            problem = None
            for copier in ended[1:]:  # the first was killed
                if copier.status != 0 or copier.copied is None:
                    problem = f"{target}: a copy beside others failed: {copier.stderr[-500:]}"
                elif copier.copied + (copier.skipped or 0) != 20:
                    problem = f"{target}: a copy neither copied nor skipped some sessions"
            problem = problem or _check_copied(target, str(source))
        finally:
            if schema is not None and postgres is not None:
                _drop_schema(postgres, schema)
        if problem:
            report.failures.append(problem)
            return


def _bytes_of_store(target: str) -> dict[str, bytes]:
    """Every session of a store as its JSONL bytes (what a complete copy holds)."""
    from ..stores.url import is_url, open_store

    if target.startswith("sqlite:///") and not os.path.exists(target[len("sqlite:///"):]):
        return {}
    if not is_url(target) and not os.path.isdir(target):
        return {}
    out = {}
    with open_store(target) as store:
        for session_id in store.session_ids():
            header, lines = store.export_lines(session_id)
            out[session_id] = b"".join(x + b"\n" for x in (header, *lines))
    return out


def _round_rewrite(backend: str, scenario: str, kills: int, rng: random.Random, work: Path,
                   postgres: str | None, report: CrashReport) -> None:
    from ..testing.generate import generate_folder

    source = work / "source"
    if not source.exists():
        generate_folder(source, 3, seed=11, min_entries=50, max_entries=300)
    for round_number in range(kills):
        name = f"{scenario}-{round_number}"
        schema = None
        if scenario == "repair" or (scenario == "migrate" and backend == "jsonl"):
            target = str(work / f"{name}.jsonl")
            Path(target).write_bytes(_BROKEN if scenario == "repair" else _V1)
        else:
            target, schema = _store_url(backend, work, postgres, name)
        try:
            _kill_after(_spawn([scenario, target, str(source), "0"]), rng.uniform(0.0, 0.4))
            report.count(f"{backend}/{scenario}")
            if scenario == "repair":
                problem = _check_repaired(target)
            elif scenario == "migrate":
                problem = _check_migrated(target) if backend == "jsonl" else \
                    _check_schema(backend, target)
            else:
                problem = _check_copied(target, str(source))
        finally:
            if schema is not None and postgres is not None:
                _drop_schema(postgres, schema)
        if problem:
            report.failures.append(problem)
            return


def _check_repaired(target: str) -> str | None:
    from ..repair import repair_file

    data = Path(target).read_bytes()
    scratch = Path(target + ".expected")
    scratch.write_bytes(_BROKEN)
    repair_file(str(scratch))
    if data not in (_BROKEN, scratch.read_bytes()):
        return f"{target}: neither the original nor the repaired file"
    return None


def _check_migrated(target: str) -> str | None:
    """The original bytes, or a complete version-3 file whose backup holds the original."""
    from .. import Session

    data = Path(target).read_bytes()
    if data == _V1:
        return None
    backups = list(Path(target).parent.glob(Path(target).name + ".v1.bak*"))
    if not any(b.read_bytes() == _V1 for b in backups):
        return f"{target}: migrated but the original is in no backup"
    with Session.open(target, strict=True, migrate=False) as session:
        if len(session) != _V1.count(b"\n") - 1:
            return f"{target}: the migrated file has {len(session)} entries"
    return None


def _check_copied(target: str, source: str) -> str | None:
    from ..transfer import copy_sessions

    expected = _bytes_of_store(source)
    for session_id, data in _bytes_of_store(target).items():
        if expected.get(session_id) != data:
            return f"{target}: session {session_id} copied in part"
    copy_sessions(source, target)  # running it again completes it
    if _bytes_of_store(target) != expected:
        return f"{target}: the copy run again did not complete it"
    return None


def _check_schema(backend: str, target: str) -> str | None:
    if backend == "sqlite":
        import sqlite3

        path = target[len("sqlite:///"):]
        if not os.path.exists(path):
            return None
        with sqlite3.connect(path) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            version = conn.execute("SELECT MAX(v) FROM sessiontree_migrations").fetchone()[0] \
                if "sessiontree_migrations" in tables else 0
    else:
        import psycopg

        from ..stores.postgres import split_schema

        dsn, schema = split_schema(target)
        with psycopg.connect(dsn, autocommit=True) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,))}
            row = conn.execute(f'SELECT MAX(v) FROM "{schema}".sessiontree_migrations'
                               ).fetchone() if "sessiontree_migrations" in tables else None
            version = row[0] if row else 0
    data_tables = {"sessiontree_sessions", "sessiontree_entries"}
    if version and not data_tables <= tables:
        return f"{target}: version {version} recorded but tables missing"
    if not version and tables & data_tables:
        return f"{target}: tables created but no version recorded"
    return None


_V1 = (b'{"type":"session","id":"v1-crash","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/c"}\n'
       + b"".join(b'{"type":"message","timestamp":"2024-01-01T00:00:0%d.000Z","message":'
                  b'{"role":"user","content":"%d","timestamp":1}}\n' % (i % 10, i)
                  for i in range(2000)))
_BROKEN = (b'{"type":"session","version":3,"id":"broken","timestamp":"2025-01-01T00:00:00.000Z",'
           b'"cwd":"/c"}\n'
           + b"".join(b'{"type":"message","id":"m%04d","parentId":%s,"timestamp":"2025-01-01T00:'
                      b'00:00.000Z","message":{"role":"user","content":"%d","timestamp":1}}\n'
                      % (i, b"null" if i == 0 else b'"m%04d"' % (i - 1), i) for i in range(3000))
           + b'{"type":"message","id":"c1","parentId":"c2","timestamp":"2025-01-01T00:00:00.000Z"}\n'
           + b'{"type":"message","id":"c2","parentId":"c1","timestamp":"2025-01-01T00:00:00.000Z"}\n'
           + b'{"type":"mess')


def _round_attack(name: str, rounds: int, rng: random.Random, work: Path,
                  report: CrashReport) -> None:
    for _ in range(rounds):
        try:
            problem = attack(name, rng, work / name)
        except Unavailable as exc:
            report.unavailable.append(f"{name}: {exc}")
            return
        report.count(f"jsonl/{name}")
        if problem:
            report.failures.append(problem)
            return


def run(backends: Sequence[str], kills: int, *, scenarios: Sequence[str] = SCENARIOS,
        rewrite_kills: int | None = None, seed: int = 1, postgres: str | None = None,
        work: str | os.PathLike[str] | None = None) -> CrashReport:
    """Kill writers ``kills`` times per backend (and ``rewrite_kills`` per rewrite scenario).

    Args:
        backends: any of ``jsonl``, ``sqlite``, ``postgres``.
        kills: kills of the ``append`` scenario per backend.
        scenarios: which scenarios to run (kill scenarios and attacks).
        rewrite_kills: kills per rewrite scenario and backend, and rounds of each attack
            (default: ``kills // 4``, at least 1).
        seed: the random seed (kill moments, sizes).
        postgres: a PostgreSQL DSN (each scenario uses its own schema, dropped afterwards).
        work: a scratch folder (default: a temporary one, removed afterwards).

    Returns:
        The kills made and the failures found (empty when everything held).
    """
    rng = random.Random(seed)
    report = CrashReport()
    owned = work is None
    root = Path(tempfile.mkdtemp(prefix="sessiontree-crash-") if work is None else work)
    per_rewrite = rewrite_kills if rewrite_kills is not None else max(1, kills // 4)
    try:
        for backend in backends:
            if backend == "postgres" and not postgres:
                raise ValueError("the postgres backend needs a DSN")
            folder = root / backend
            folder.mkdir(parents=True, exist_ok=True)
            if "append" in scenarios:
                _round_append(backend, kills, rng, folder, postgres, report)
            for scenario in scenarios:
                if scenario in ATTACKS:
                    if backend == "jsonl":  # attacks on files
                        _round_attack(scenario, per_rewrite, rng, folder, report)
                    continue
                if scenario == "append":
                    continue
                if scenario == "repair" and backend != "jsonl":
                    continue  # repair rewrites files; databases never hold what it fixes
                if scenario == "copies":
                    _round_copies(backend, per_rewrite, rng, folder, postgres, report)
                    continue
                _round_rewrite(backend, scenario, per_rewrite, rng, folder, postgres, report)
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--child"]:
        _child(args[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backends", default="jsonl,sqlite")
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--rewrite-kills", type=int, default=None)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS + ATTACKS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--postgres", default=os.environ.get("SESSIONTREE_TEST_POSTGRES"))
    options = parser.parse_args(args)
    started = time.perf_counter()
    report = run(options.backends.split(","), options.kills,
                 scenarios=options.scenarios.split(","), rewrite_kills=options.rewrite_kills,
                 seed=options.seed, postgres=options.postgres)
    for key, count in sorted(report.kills.items()):
        print(f"{key:<20} {count:>5} {'rounds' if key.split('/')[1] in ATTACKS else 'kills'}")
    for reason in report.unavailable:
        print(f"not run: {reason}")
    for failure in report.failures:
        print(f"FAILED: {failure}")
    print(f"{sum(report.kills.values())} kills and rounds, {len(report.failures)} failures in "
          f"{time.perf_counter() - started:.0f} s")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
