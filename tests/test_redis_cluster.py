"""Redis Cluster under failure, with a cluster of its own per test (six nodes, one-second
``cluster-node-timeout``): writer processes append with ``durable=True`` while a master is
killed with SIGKILL, and while slots move with ``redis-cli --cluster reshard``; afterwards every
acknowledged append is stored exactly once."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from sessiontree.entries import SessionHeader
from sessiontree.stores.redis import RedisStore
from sessiontree._time import iso_now

from .servers import RedisCluster, ServerFailed, redis_cli

WRITER = Path(__file__).with_name("redis_writer.py")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    try:
        made = RedisCluster(tmp_path / "nodes", node_timeout_ms=2000)  # failovers in seconds
    except ServerFailed as exc:
        pytest.fail(f"the test Redis cluster did not start: {exc}")
    try:
        yield made
    finally:
        made.stop()


def slot_owners(cluster: RedisCluster) -> list[tuple[int, int, int]]:
    """``(first slot, last slot, port of the master)`` for every range, as a live node sees it."""
    with redis.Redis(port=cluster.alive()[0].port) as node:
        return sorted((int(first), int(last), int(master[1]))
                      for first, last, master, *_ in node.execute_command("CLUSTER SLOTS"))


def session_in(low: int, high: int) -> str:
    """A session id whose slot (its hash tag's) is in ``[low, high]``."""
    while True:
        candidate = uuid.uuid4().hex
        if low <= key_slot(candidate.encode()) <= high:
            return candidate


def node_id(port: int) -> str:
    return redis_cli(port, "CLUSTER", "MYID").strip()


class Writers:
    """Writer processes (``tests/redis_writer.py``), one per session."""

    def __init__(self, url: str, sessions: list[str], folder: Path, *, durable: bool) -> None:
        self.folder = folder
        folder.mkdir()
        self.names = [f"w{k}" for k in range(len(sessions))]
        self.sessions = dict(zip(self.names, sessions))
        self.processes = [subprocess.Popen(
            [sys.executable, str(WRITER), url, sid, name, str(folder)]
            + (["durable"] if durable else []))
            for name, sid in self.sessions.items()]

    def acked(self, name: str) -> list[str]:
        path = self.folder / f"{name}.acked"
        return path.read_text().split() if path.exists() else []

    def wait_for(self, name: str, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked(name)) < count:
            assert time.monotonic() < deadline, f"{name} acknowledged only " \
                f"{len(self.acked(name))} of {count} appends"
            assert all(p.poll() is None for p in self.processes), "a writer died"
            time.sleep(0.05)

    def stop(self) -> dict[str, dict[str, int]]:
        (self.folder / "stop").touch()
        for process in self.processes:
            assert process.wait(60) == 0
        errors = {}
        for name in self.names:
            text = (self.folder / f"{name}.errors").read_text()
            errors[name] = {kind: int(n) for kind, n in (line.split() for line in
                                                          text.splitlines())}
        return errors

    def kill(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def check_exactly_once(url: str, writers: Writers) -> int:
    """Every acknowledged id is stored once, and every stored line once; the acks counted."""
    total = 0
    with RedisStore.from_url(url) as store:
        for name, session_id in writers.sessions.items():
            ids = [e.id for e in store.read(session_id)]
            assert len(ids) == len(set(ids)), f"{name}: an entry stored twice"
            _, lines = store.export_lines(session_id)
            stored = list(lines)
            assert len(stored) == len(set(stored))
            acked = writers.acked(name)
            missing = set(acked) - set(ids)
            assert not missing, f"{name}: acknowledged but lost: {sorted(missing)[:5]}"
            total += len(acked)
    return total


def test_a_killed_master_loses_no_durable_append(cluster: RedisCluster, tmp_path: Path) -> None:
    url = f"{cluster.url}?prefix=failover"
    ranges = slot_owners(cluster)
    sessions = [session_in(first, last) for first, last, _ in ranges[:3]]
    victim = next(n for n in cluster.nodes if n.port == ranges[0][2])
    with RedisStore.from_url(url) as store:
        for sid in sessions:
            store.create(SessionHeader(id=sid, timestamp=iso_now(), cwd="/w"))
    writers = Writers(url, sessions, tmp_path / "writers", durable=True)
    try:
        for name in writers.names:
            writers.wait_for(name, 20)
        before = len(writers.acked("w0"))
        victim.kill()  # SIGKILL, mid-stream
        wait_for_failover(cluster, ranges[0][0], victim.port)
        # its replica is the master now, with no replica of its own: durable appends to it
        # are refused (StoreUnavailable) until the old master comes back as its replica
        victim.start()
        writers.wait_for("w0", before + 20, timeout=40)
        errors = writers.stop()
    finally:
        writers.kill()
    assert errors["w0"].get("StoreUnavailable", 0) >= 1, errors  # typed, and retried
    assert victim not in cluster.masters()
    assert check_exactly_once(url, writers) > 60


def wait_for_failover(cluster: RedisCluster, slot: int, dead: int, timeout: float = 30) -> None:
    """Until a live node says ``slot`` is served by a master other than the dead one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            owners = slot_owners(cluster)
        except redis.RedisError:
            owners = []
        if any(low <= slot <= high and port != dead for low, high, port in owners):
            return
        time.sleep(0.1)
    raise AssertionError(f"no replica took slot {slot} over within {timeout:g} s")


def test_moving_slots_during_appends_loses_nothing(cluster: RedisCluster, tmp_path: Path) -> None:
    url = f"{cluster.url}?prefix=reshard"
    first, _, port = slot_owners(cluster)[0]
    moved = 300
    sessions = [session_in(first, first + moved - 1) for _ in range(3)]
    target = next(n.port for n in cluster.masters() if n.port != port)
    with RedisStore.from_url(url) as store:
        for sid in sessions:
            store.create(SessionHeader(id=sid, timestamp=iso_now(), cwd="/w"))
    writers = Writers(url, sessions, tmp_path / "writers", durable=False)
    try:
        for name in writers.names:
            writers.wait_for(name, 10)
        redis_cli(port, "--cluster", "reshard", f"127.0.0.1:{port}",
                  "--cluster-from", node_id(port), "--cluster-to", node_id(target),
                  "--cluster-slots", str(moved), "--cluster-yes", timeout=120)
        counts = [len(writers.acked(name)) for name in writers.names]
        for name, count in zip(writers.names, counts):
            writers.wait_for(name, count + 10)
        writers.stop()
    finally:
        writers.kill()
    owners = slot_owners(cluster)
    for sid in sessions:  # the sessions' slots are on the target now
        slot = key_slot(sid.encode())
        assert any(low <= slot <= high and owner == target for low, high, owner in owners)
    assert check_exactly_once(url, writers) > 60
