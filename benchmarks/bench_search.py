"""Full-text search beside ``grep -r -F`` on the same files, in one run (issue 18 point 5).

    .venv/bin/python benchmarks/bench_search.py [--sessions 1000] [--db-sessions 10000]
        [--db-entries 20,120] [--repeat 5] [--skip-db] [--skip-folder]
        [--redis redis://HOST:PORT/DB] [--redis-cluster redis+cluster://SEEDS]
        [--keep] [--baseline DIR]

1. A folder of ``--sessions`` generated sessions in pi's layout (two project folders of a
   sessions root; ``generate_folder``, 20-1,500 entries each: 1,000 sessions are about 785 MB),
   generated into benchmarks/.data/ (or ``$SESSIONTREE_BENCH_DATA``) unless this generator
   made it. Five of them get a user message holding the needle phrase, so the phrase query
   has few hits, as a user's would.
2. On a copy of that folder for each code measured (its files linked, the 10 it grows
   copied, removed after: the generated folder is never changed), in a new process (each
   peak RSS is the process's own, read as ``VmHWM``): the whole index built from nothing,
   as a caller asks for it (``build_search_index``). Then for each query (the rare phrase,
   and a word found in most sessions), in one new process: the first search with the built
   index set aside (no index: more new bytes than ``INDEX_BYTES``, so it scans them all;
   once in one process, once asking for 2 as the command-line tool does, which a busy
   machine may refuse), then with the built index back one search that opens it again
   (timed apart: a new connection's first searches fill SQLite's page cache, 4-5 ms against
   3), a warm search (median of ``--repeat``), then 10 sessions grow by one message each and the next search (only their
   appended bytes are read), then warm again. ``grep -r -F QUERY ROOT`` (its output written
   to a temporary file; our index's folder excluded) runs on the same files before and after
   the growth, median of ``--repeat``, with the files in the page cache as for our warm runs.
3. SQLite, PostgreSQL (``SESSIONTREE_TEST_POSTGRES``), Redis and Redis Cluster (``--redis``,
   ``--redis-cluster``, each into a key prefix of its own, dropped at the end) holding
   ``--db-sessions`` sessions of ``--db-entries`` entries (copied from a second generated
   folder; the needle in five): the warm search, and the search after 10 sessions grew (their
   search rows were written in the appends' transactions or scripts). ``--keep`` keeps the
   SQLite and PostgreSQL databases for the next run with ``--keep``, which measures them
   as they are (loading 10,000 sessions into PostgreSQL takes over 20 minutes); ``--baseline
   DIR`` measures the code of another checkout (``DIR/src``, e.g. a ``git worktree`` of an
   earlier commit) beside this one in the same run, on databases of its own that it loads,
   and on the folder after building its own index (one code's index at a time in it).

Prints one Markdown table; each figure beside its baseline from the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCE = os.environ.get("SESSIONTREE_BENCH_SRC") or str(REPO / "src")
"""The code measured: this checkout's, or ``--baseline``'s in its children."""
sys.path.insert(0, SOURCE)
DATA = Path(os.environ.get("SESSIONTREE_BENCH_DATA") or HERE / ".data")
"""Generated folders, as run.py's (``SESSIONTREE_BENCH_DATA`` puts them outside the worktree)."""
GENERATOR = REPO / "src" / "sessiontree" / "testing" / "generate.py"
NEEDLE = "pelican webhook retry"
QUERIES = {"phrase": f'"{NEEDLE}"', "common word": "error"}
CWDS = ("/home/dev/projects/acme-api", "/home/dev/projects/web")


def generated_root(sessions: int, min_entries: int, max_entries: int, name: str) -> Path:
    """A sessions root of generated sessions (two project folders), the needle in five."""
    from sessiontree import Session, UserMessage
    from sessiontree.stores.jsonl import default_session_dir
    from sessiontree.testing.generate import generate_folder

    key = hashlib.sha256(GENERATOR.read_bytes() + f"{sessions} {min_entries} {max_entries} "
                         f"{NEEDLE}".encode()).hexdigest()[:12]
    root = DATA / f"{name}-{sessions}-{key}"
    if root.is_dir():
        return root
    scratch = root.with_suffix(".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"generating {root.name} …", file=sys.stderr, flush=True)
    for number, cwd in enumerate(CWDS):
        generate_folder(scratch / default_session_dir(cwd, "").name, sessions // len(CWDS),
                        seed=31 + number, min_entries=min_entries, max_entries=max_entries,
                        cwds=(cwd,))
    files = sorted(scratch.rglob("*.jsonl"))
    for path in files[:: max(1, len(files) // 5)][:5]:
        with Session.open(path) as session:
            session.append_message(UserMessage.of(f"where did we set the {NEEDLE} limit?"))
    scratch.rename(root)
    return root


def grow(paths: list[Path], round_number: int) -> None:
    """One message more in each session (as pi would append it)."""
    from sessiontree import Session, UserMessage

    for path in paths:
        with Session.open(path) as session:
            session.append_message(UserMessage.of(f"round {round_number}: one more question"))


def grep_ms(root: Path, query: str, repeat: int) -> float:
    """``grep -r -F``'s median time, its output written to a file (GNU grep stops at the first
    match when its output is /dev/null, which no user sees)."""
    text = query.strip('"')
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryFile() as out:
            start = time.perf_counter()
            subprocess.run(["grep", "-r", "-F", "--exclude-dir=.sessiontree-cache", text,
                            str(root)], stdout=out, check=False)
            runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def _index_files(root: str) -> list[Path]:
    from sessiontree.stores._jsonl_search import index_path

    index = Path(index_path(root))
    return [index.parent / (index.name + suffix) for suffix in ("", "-journal")]


def _child_build(root: str) -> None:
    """In a new process: the folder's whole index built from nothing; prints JSON."""
    from sessiontree.stores.jsonl import JsonlStore

    for path in _index_files(root):
        path.unlink(missing_ok=True)
    start = time.perf_counter()
    JsonlStore(root).build_search_index()
    print(json.dumps({"build_ms": (time.perf_counter() - start) * 1000,
                      "build_rss_mib": _peak_mib(),
                      "index_mib": _index_files(root)[0].stat().st_size / 2**20}))


def _child_folder(root: str, query: str, repeat: int, grow_list: str) -> None:
    """In a new process: the first search (the built index set aside: no index), then with
    the built index back: one search opening it, warm, after growth, warm; prints JSON."""
    from sessiontree.stores.jsonl import JsonlStore

    index, journal = _index_files(root)
    aside = index.with_name(index.name + ".built")
    index.rename(aside)
    journal.unlink(missing_ok=True)
    store = JsonlStore(root)
    out: dict[str, Any] = {}
    start = time.perf_counter()
    out["hits"] = len(store.search(query))
    out["first_ms"] = (time.perf_counter() - start) * 1000
    out["first_rss_mib"] = _peak_mib()
    # again as the command-line tool searches: with helper processes when CPUs are free
    # (SESSIONTREE_PROCESSES=2 asks for one helper; a busy machine gets none)
    from sessiontree import _helpers

    os.environ["SESSIONTREE_PROCESSES"] = "2"
    out["split_processes"] = _helpers.processes()
    start = time.perf_counter()
    store.search(query)
    out["split_ms"] = (time.perf_counter() - start) * 1000
    del os.environ["SESSIONTREE_PROCESSES"]
    journal.unlink(missing_ok=True)
    aside.replace(index)
    start = time.perf_counter()  # (opens the index again and fills its page cache: apart)
    store.search(query)
    out["opened_ms"] = (time.perf_counter() - start) * 1000
    out["warm_ms"] = _median(lambda: store.search(query), repeat)
    out["warm_cpu_ms"] = _median(lambda: store.search(query), repeat, time.process_time)
    grow([Path(p) for p in json.loads(grow_list)], 1)
    start = time.perf_counter()
    store.search(query)
    out["grown_ms"] = (time.perf_counter() - start) * 1000
    out["warm_after_ms"] = _median(lambda: store.search(query), repeat)
    out["peak_rss_mib"] = _peak_mib()
    print(json.dumps(out))


def _peak_mib() -> float:
    """This process's peak resident size (``VmHWM``: ``ru_maxrss`` would carry over the peak
    of the process that started it)."""
    from open_child import _peak_mib as peak

    return peak()


def _median(call: Any, repeat: int, clock: Any = time.perf_counter) -> float:
    runs = []
    for _ in range(repeat):
        start = clock()
        call()
        runs.append((clock() - start) * 1000)
    return statistics.median(runs)


def _child_db(url: str, query: str, repeat: int) -> None:
    """In a new process: warm searches of a database store, 10 sessions grow, search again."""
    from sessiontree import Session, UserMessage
    from sessiontree.stores.base import SearchableStore
    from sessiontree.stores.url import open_store

    out: dict[str, Any] = {}
    with open_store(url) as store:
        assert isinstance(store, SearchableStore)
        store.search(query)
        out["hits"] = len(store.search(query))
        out["warm_ms"] = _median(lambda: store.search(query), repeat)
        # this process's CPU time (a database server's is not in it): what the load on a
        # shared machine does not stretch
        out["warm_cpu_ms"] = _median(lambda: store.search(query), repeat, time.process_time)
        for session_id in store.session_ids()[:10]:
            with Session.open(f"{store.url}#{session_id}") as session:
                session.append_message(UserMessage.of("round 1: one more question"))
        start = time.perf_counter()
        store.search(query)
        out["grown_ms"] = (time.perf_counter() - start) * 1000
        out["warm_after_ms"] = _median(lambda: store.search(query), repeat)
    out["peak_rss_mib"] = _peak_mib()
    print(json.dumps(out))


def _child_load(url: str, root: str) -> None:
    """In a new process (the code measured): the sessions copied into a database; prints JSON."""
    from sessiontree.transfer import copy_sessions

    start = time.perf_counter()
    copy_sessions(root, url)
    print(json.dumps({"load_s": time.perf_counter() - start}))


def _run_child(*args: str, source: str | None = None) -> dict[str, Any]:
    env = {**os.environ, "SESSIONTREE_BENCH_SRC": source} if source else None
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                          text=True, check=True, cwd=REPO, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--db-sessions", type=int, default=10000)
    parser.add_argument("--db-entries", default="20,120")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-db", action="store_true")
    parser.add_argument("--skip-folder", action="store_true")
    parser.add_argument("--redis", help="a Redis server (redis://HOST:PORT/DB)")
    parser.add_argument("--redis-cluster", help="a Redis Cluster (redis+cluster://HOST:PORT,...)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the SQLite and PostgreSQL databases, and measure those an "
                             "earlier run with --keep left as they are")
    parser.add_argument("--baseline", type=Path,
                        help="a checkout whose src/ is measured beside this one (databases of "
                             "its own)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "build":
            _child_build(rest[0])
        elif kind == "folder":
            _child_folder(rest[0], rest[1], args.repeat, rest[2])
        elif kind == "load":
            _child_load(rest[0], rest[1])
        else:
            _child_db(rest[0], rest[1], args.repeat)
        return
    rows: list[str] = []
    if not args.skip_folder:
        rows += folder_rows(args)
    if not args.skip_db:
        rows += db_rows(args)
    print("\n".join(rows))


def folder_rows(args: argparse.Namespace) -> list[str]:
    root = generated_root(args.sessions, 20, 1500, "search-root")
    size = sum(p.stat().st_size for p in root.rglob("*.jsonl")) / 2**20
    rows = [f"Folder: {args.sessions:,} sessions, {size:,.0f} MB (pi's layout, two projects); "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} before.", "",
            "| query | measure | sessiontree | `grep -r -F` | grep ÷ ours |", "|---|---|---|---|---|"]
    files = sorted(root.rglob("*.jsonl"))
    grown = files[3::max(1, len(files) // 10)][:10]
    for label, source in _codes(args):  # (each builds its own index, from nothing)
        with scratch_root(root, grown) as copy:
            rows += _folder_code_rows(args, copy, [copy / p.relative_to(root) for p in grown],
                                      label, source)
    rows.append(f"\nLoad average {os.getloadavg()[0]:.1f} after.")
    return rows


def _folder_code_rows(args: argparse.Namespace, root: Path, grown_paths: list[Path],
                      label: str, source: str | None) -> list[str]:
    """The folder's rows for one code measured, on its own copy of the folder."""
    rows: list[str] = []
    built = _run_child("build", str(root), source=source)
    grep_first = grep_ms(root, QUERIES["phrase"], args.repeat)
    rows.append(f"| —{label} | whole index built from nothing (`build_search_index`, once) | "
                f"{built['build_ms']:,.0f} ms | {grep_first:,.1f} ms (phrase) | "
                f"{grep_first / built['build_ms']:,.2f}× |")
    rows.append(f"| —{label} | peak RSS of the build; index size | "
                f"{built['build_rss_mib']:.0f} MiB; {built['index_mib']:.0f} MB | — | |")
    for query_name, query in QUERIES.items():
        grown = [str(p) for p in grown_paths]
        grep_before = grep_ms(root, query, args.repeat)
        ours = _run_child("folder", str(root), query, json.dumps(grown), source=source)
        grep_after = grep_ms(root, query, args.repeat)
        for measure, value, base in (
                ("first search (no index: every byte scanned), one process",
                 ours["first_ms"], grep_before),
                ("first search with `SESSIONTREE_PROCESSES=2` (as `sessiontree search`), "
                 f"{ours['split_processes']} process(es) free", ours["split_ms"],
                 grep_before),
                ("first search with the built index back (opens it)", ours["opened_ms"],
                 grep_before),
                (f"warm search (the whole index; CPU {ours['warm_cpu_ms']:,.1f} ms)",
                 ours["warm_ms"], grep_before),
                ("search after 10 sessions grew", ours["grown_ms"], grep_after),
                ("warm search after that", ours["warm_after_ms"], grep_after)):
            rows.append(f"| {query_name}{label} ({ours['hits']} hits) | {measure} | "
                        f"{value:,.1f} ms | {base:,.1f} ms | {base / value:,.1f}× |")
        rows.append(f"| {query_name}{label} | peak RSS (first search / whole process) | "
                    f"{ours['first_rss_mib']:.0f} / {ours['peak_rss_mib']:.0f} MiB | — | |")
    return rows


@contextmanager
def scratch_root(root: Path, grown: list[Path]) -> Iterator[Path]:
    """``root`` as a folder of its own for one code's measures, removed after: its files
    linked (they are only read), the ones the measures grow copied (an append to a link
    would change the generated folder, which later runs and other checkouts measure), the
    index written in it."""
    scratch = root.with_name(f"{root.name}.scratch-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        for path in sorted(root.rglob("*.jsonl")):
            target = scratch / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path not in grown:
                try:
                    os.link(path, target)
                    continue
                except OSError:
                    pass  # (another file system, or no links there: copied)
            shutil.copy2(path, target)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def db_rows(args: argparse.Namespace) -> list[str]:
    low, high = (int(x) for x in args.db_entries.split(","))
    root = generated_root(args.db_sessions, low, high, "search-db")
    rows = ["", f"Databases: {args.db_sessions:,} sessions of {low}-{high} entries; load "
            f"average {os.getloadavg()[0]:.1f} before.", "",
            "| backend | query | load (copy, search rows included) | warm search (its CPU "
            "time in this process) | after 10 sessions grew | warm after | peak RSS |",
            "|---|---|---|---|---|---|---|"]
    dropped: list[str] = []
    try:
        for label, source in _codes(args):
            urls = _db_urls(args, root, "-baseline" if source else "")
            dropped += [url for name, url in urls.items() if name.startswith("Redis")]
            for name, (url, loaded) in _loaded(urls, root, args.keep, source).items():
                for query_name, query in QUERIES.items():
                    ours = _run_child("db", url, query, source=source)
                    rows.append(f"| {name}{label} | {query_name} ({ours['hits']} hits) | "
                                f"{loaded} | {ours['warm_ms']:,.1f} ms "
                                f"({ours['warm_cpu_ms']:,.1f} ms) | "
                                f"{ours['grown_ms']:,.1f} ms | {ours['warm_after_ms']:,.1f} ms "
                                f"| {ours['peak_rss_mib']:.0f} MiB |")
    finally:
        from bench_storage import drop_prefix

        for url in dropped:
            drop_prefix(url)
    rows.append(f"\nLoad average {os.getloadavg()[0]:.1f} after.")
    return rows


def _codes(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The code measured (its label, its ``src``): this checkout's, then ``--baseline``'s."""
    codes: list[tuple[str, str | None]] = [("", None)]
    if args.baseline:
        codes.append((" (baseline)", str(args.baseline.resolve() / "src")))
    return codes


def _db_urls(args: argparse.Namespace, root: Path, suffix: str) -> dict[str, str]:
    """Each backend's address for one code measured (``suffix``: the baseline's own)."""
    urls = {"SQLite": f"sqlite:///{DATA / f'{root.name}{suffix}.db'}"}
    postgres = os.environ.get("SESSIONTREE_TEST_POSTGRES")
    if postgres:
        schema = f"bench_{root.name}{suffix}".replace("-", "_")  # (its sessions' own)
        urls["PostgreSQL"] = f"{postgres}{'&' if '?' in postgres else '?'}schema={schema}"
    prefix = f"benchsearch{os.getpid()}{suffix.replace('-', '')}"
    if args.redis:
        urls["Redis"] = f"{args.redis}?prefix={prefix}"
    if args.redis_cluster:
        urls["Redis Cluster"] = f"{args.redis_cluster}?prefix={prefix}"
    return urls


def _loaded(urls: dict[str, str], root: Path, keep: bool,
            source: str | None) -> dict[str, tuple[str, str]]:
    """Each backend's address with how long loading it took (or that an earlier run did):
    a database kept by an earlier ``--keep`` run is measured as it is, anything else is
    emptied and loaded by the code measured."""
    out = {}
    for name, url in urls.items():
        if name == "SQLite":
            path = Path(url.removeprefix("sqlite:///"))
            kept = keep and path.exists()
            if not kept:
                path.unlink(missing_ok=True)
        elif name == "PostgreSQL":
            import psycopg

            schema = url.rpartition("schema=")[2]
            with psycopg.connect(os.environ["SESSIONTREE_TEST_POSTGRES"],
                                 autocommit=True) as admin:
                kept = keep and admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                              (schema,)).fetchone() is not None
                if not kept:
                    admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        else:
            kept = False
        if kept:
            out[name] = (url, "(an earlier run's)")
        else:
            out[name] = (url, f"{_run_child('load', url, str(root), source=source)['load_s']:,.0f} s")
    return out


if __name__ == "__main__":
    main()
