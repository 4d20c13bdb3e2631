"""AsyncSession over PostgreSQL: the two ways it can sit on the database, beside the blocking
Session, in one run.

    SESSIONTREE_TEST_POSTGRES=postgresql://... .venv/bin/python benchmarks/bench_async.py
        [--appends 300] [--depth 2000] [--writers 8] [--repeat 5]

(``SESSIONTREE_BENCH_POSTGRES`` is used first when set.) Every run works in a schema of its own,
dropped at the end.

* **sync**: ``Session`` over ``PostgresStore`` (psycopg's blocking pool), called directly; with
  several writers, one thread each. The baseline.
* **thread**: ``AsyncSession`` wrapping that same ``Session`` (``PostgresStore`` in worker
  threads; ``follow`` waits on the blocking store's LISTEN connection in a worker thread).
* **native**: ``AsyncSession`` over ``AsyncPostgresStore`` (what ``AsyncSession.open
  ("postgresql://...#ID")`` gives): the session's code in a worker thread, every statement
  handed to the event loop and run on psycopg's async pool (``AsyncPostgresStore.blocking``);
  ``follow`` woken by ``NOTIFY`` in the loop.

Rows: one append (median of ``--appends`` appends in a row); open + ``build_context`` at the
end of a ``--depth`` deep path (median of ``--repeat`` fresh opens); ``--writers`` sessions
appending at once (appends per second, all of them); the time from a writer's commit to a
follower holding the entry (median of 40); and the event loop's worst delay while the writers
run (a 1 ms ticker in the same loop: what other tasks of the application wait).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sessiontree import AsyncPostgresStore, AsyncSession, PostgresStore, Session, UserMessage

KINDS = ("sync", "thread", "native")


def message(i: int) -> UserMessage:
    return UserMessage.of(f"message {i}: " + "words " * 20)


class Bench:
    """One variant's sessions over one schema, opened in the running loop."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind, self.url = kind, url
        self.store: Any = None
        self.async_store: AsyncPostgresStore | None = None

    async def __aenter__(self) -> Bench:
        if self.kind == "native":
            self.async_store = await AsyncPostgresStore.from_url(self.url, pool_size=10).open()
        else:
            self.store = PostgresStore.from_url(self.url, pool_size=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.async_store is not None:
            await self.async_store.aclose()
        if self.store is not None:
            self.store.close()

    async def create(self) -> Any:
        if self.kind == "native":
            return await AsyncSession.create(cwd="/bench", store=self.async_store)
        session = Session.create(cwd="/bench", store=self.store)
        return session if self.kind == "sync" else AsyncSession(session)

    async def open(self, session_id: str) -> Any:
        if self.kind == "native":
            return await AsyncSession.open(session_id, store=self.async_store)
        session = Session(self.store.open_log(session_id))
        return session if self.kind == "sync" else AsyncSession(session)

    async def call(self, session: Any, name: str, *args: Any) -> Any:
        result = getattr(session, name)(*args)
        return await result if self.kind != "sync" else result

    async def close(self, session: Any) -> None:
        await session.aclose() if self.kind != "sync" else session.close()


async def append_us(bench: Bench, appends: int) -> float:
    session = await bench.create()
    await bench.call(session, "append_message", message(0))
    times = []
    for i in range(appends):
        start = time.perf_counter()
        await bench.call(session, "append_message", message(i))
        times.append(time.perf_counter() - start)
    await bench.close(session)
    return statistics.median(times) * 1e6


async def context_ms(bench: Bench, session_id: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session = await bench.open(session_id)
        context = await bench.call(session, "build_context")
        times.append(time.perf_counter() - start)
        assert len(context.messages) > 0
        await bench.close(session)
    return statistics.median(times) * 1e3


async def writers_per_s(bench: Bench, writers: int, each: int) -> tuple[float, float]:
    """(appends per second of ``writers`` sessions at once, the loop's worst delay in ms)."""
    sessions = [await bench.create() for _ in range(writers)]
    lag = [0.0]
    running = [True]

    async def ticker() -> None:  # what any other task of the application waits
        while running[0]:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            lag[0] = max(lag[0], time.perf_counter() - start - 0.001)

    async def write(session: Any) -> None:
        for i in range(each):
            await bench.call(session, "append_message", message(i))

    def write_sync(session: Session) -> None:
        for i in range(each):
            session.append_message(message(i))

    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    if bench.kind == "sync":
        threads = [threading.Thread(target=write_sync, args=(s,)) for s in sessions]
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            await asyncio.sleep(0.01)
    else:
        await asyncio.gather(*(write(s) for s in sessions))
    elapsed = time.perf_counter() - start
    running[0] = False
    await tick
    for session in sessions:
        await bench.close(session)
    return writers * each / elapsed, lag[0] * 1e3


async def follow_ms(bench: Bench, url: str, rounds: int) -> float | None:
    """Median time from a writer's commit (another connection) to the follower's entry."""
    if bench.kind == "sync":
        return None
    session = await bench.create()
    await bench.call(session, "append_message", message(0))
    committed: list[float] = []
    delays: list[float] = []

    def write() -> None:
        with PostgresStore.from_url(url) as other, Session(other.open_log(session.id)) as writer:
            for i in range(rounds):
                writer.append_message(message(i))
                committed.append(time.perf_counter())
                time.sleep(0.02)

    writing = asyncio.create_task(asyncio.to_thread(write))
    async for _ in session.follow(poll=0.2):
        delays.append(time.perf_counter() - committed[len(delays)] if len(committed) >
                      len(delays) else 0.0)
        if len(delays) == rounds:
            break
    await writing
    await bench.close(session)
    return statistics.median(delays) * 1e3


async def deep_session(url: str, depth: int) -> str:
    with PostgresStore.from_url(url) as store, Session.create(cwd="/deep", store=store) as s:
        s.extend({"type": "message", "id": f"d{i:07d}", "parentId": f"d{i - 1:07d}" if i else None,
                  "timestamp": "2026-01-01T00:00:00.000Z",
                  "message": {"role": "user", "content": f"deep {i}", "timestamp": 0}}
                 for i in range(depth))
        return s.id


async def measure(kind: str, url: str, args: argparse.Namespace, deep: str
                  ) -> dict[str, float | None]:
    async with Bench(kind, url) as bench:
        append = await append_us(bench, args.appends)
        context = await context_ms(bench, deep, args.repeat)
        rate, lag = await writers_per_s(bench, args.writers, args.appends // 2)
        follow = await follow_ms(bench, url, 40)
    return {"append": append, "context": context, "rate": rate, "lag": lag, "follow": follow}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--depth", type=int, default=2000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    dsn = os.environ.get("SESSIONTREE_BENCH_POSTGRES") or os.environ.get(
        "SESSIONTREE_TEST_POSTGRES")
    if not dsn:
        sys.exit("set SESSIONTREE_BENCH_POSTGRES (or SESSIONTREE_TEST_POSTGRES)")
    import psycopg

    schema = f"sessiontree_bench_{uuid.uuid4().hex[:10]}"
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    results: dict[str, dict[str, float | None]] = {}
    try:
        deep = asyncio.run(deep_session(url, args.depth))
        for kind in KINDS:
            results[kind] = asyncio.run(measure(kind, url, args, deep))
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(f"load average {os.getloadavg()[0]:.2f}; {args.writers} writers x {args.appends // 2} "
          f"appends; depth {args.depth}\n")
    rows: list[tuple[str, str, Callable[[float], str]]] = [
        ("append (median)", "append", lambda v: f"{v:,.0f} µs"),
        (f"open + context at depth {args.depth:,}", "context", lambda v: f"{v:,.1f} ms"),
        (f"{args.writers} writers at once", "rate", lambda v: f"{v:,.0f} appends/s"),
        ("loop's worst delay meanwhile", "lag", lambda v: f"{v:,.1f} ms"),
        ("follow: commit to entry (median)", "follow", lambda v: f"{v:,.1f} ms"),
    ]
    print("| | " + " | ".join(KINDS) + " | native / thread |")
    print("|---|" + "---:|" * (len(KINDS) + 1))
    for label, key, fmt in rows:
        values = [results[k][key] for k in KINDS]
        cells = [fmt(v) if v is not None else "-" for v in values]
        thread, native = results["thread"][key], results["native"][key]
        ratio = f"{native / thread:.2f}x" if native is not None and thread else "-"
        print(f"| {label} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main()
