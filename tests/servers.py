"""Throwaway database servers for the suite: Redis servers and a six-node Redis Cluster started
from the machine's ``redis-server``, and a PostgreSQL cluster made by the machine's ``initdb``
and ``pg_ctl`` (``/usr/lib/postgresql/*/bin``), on 127.0.0.1 ports, stopped after. A server that
cannot be started raises :class:`ServerFailed` with the reason (the fixtures turn it into a
failed run, never a skip)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["PostgresServer", "RedisCluster", "RedisServer", "ServerFailed", "free_port"]


class ServerFailed(RuntimeError):
    """A test server did not start (the message says why)."""


def free_port(*, with_bus: bool = False) -> int:
    """A port nobody listens on (and, ``with_bus``, nor on the port 10000 above it: a cluster
    node's bus)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if not with_bus:
            return port
        if port + 10000 < 65536:
            with socket.socket() as bus:
                try:
                    bus.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            return port
    raise ServerFailed("no free port pair on 127.0.0.1")


def _binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists()
                                   else None)
    if found is None:
        raise ServerFailed(f"{name} is not installed (apt-get install redis-server); the Redis "
                           "tests need it")
    return found


def redis_cli(port: int, *args: str, timeout: float = 30) -> str:
    """``redis-cli -p PORT ARGS`` on 127.0.0.1; its output.

    Raises:
        ServerFailed: it failed.
    """
    done = subprocess.run([_binary("redis-cli"), "-h", "127.0.0.1", "-p", str(port), *args],
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise ServerFailed(f"redis-cli {' '.join(args)} failed: {done.stderr or done.stdout}")
    return done.stdout


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1 (no persistence unless asked)."""

    def __init__(self, directory: Path, *, port: int | None = None, cluster: bool = False,
                 extra: Sequence[str] = (), tls: bool = False,
                 node_timeout_ms: int = 1000) -> None:
        """``tls``: TLS only (``rediss://``), with a CA and a server certificate for 127.0.0.1
        made by ``openssl`` in the server's folder (``ca.crt`` is what clients trust);
        ``node_timeout_ms``: a cluster node's ``cluster-node-timeout``."""
        self.port = port or free_port(with_bus=cluster)
        self.directory = directory / str(self.port)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.log = self.directory / "server.log"
        self.ca: Path | None = None
        listen = ["--port", str(self.port)]
        if tls:
            self.ca = _certificates(self.directory)
            listen = ["--port", "0", "--tls-port", str(self.port),
                      "--tls-cert-file", str(self.directory / "server.crt"),
                      "--tls-key-file", str(self.directory / "server.key"),
                      "--tls-ca-cert-file", str(self.ca), "--tls-auth-clients", "no"]
        args = [_binary("redis-server"), *listen, "--bind", "127.0.0.1",
                "--dir", str(self.directory), "--save", "", "--appendonly", "no",
                "--logfile", str(self.log), "--daemonize", "no"]
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", str(node_timeout_ms)]
        self._args = [*args, *extra]
        self.start()

    def start(self) -> None:
        """Start the server (again, after :meth:`kill`: a cluster node rejoins from its
        ``nodes.conf``, as a replica of whoever took its slots over)."""
        self.process = subprocess.Popen(self._args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, start_new_session=True)
        self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                self.stop()
                log = self.log.read_text() if self.log.exists() else ""
                raise ServerFailed(f"redis-server on port {self.port} exited with "
                                   f"{self.process.returncode}: {err}{log[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as raw:
                    if self.ca is None:
                        answered = _pings(raw)
                    else:
                        context = ssl.create_default_context(cafile=str(self.ca))
                        with context.wrap_socket(raw, server_hostname="127.0.0.1") as secure:
                            answered = _pings(secure)
                    if answered:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise ServerFailed(f"redis-server on port {self.port} did not answer within 15 s")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL: a crash, not a shutdown."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stderr is not None:
            self.process.stderr.close()


def _pings(conn: socket.socket) -> bool:
    """Whether the server at the other end answers PING (or asks for a password first)."""
    conn.sendall(b"PING\r\n")
    return conn.recv(64).startswith((b"+PONG", b"-NOAUTH"))


def _certificates(folder: Path) -> Path:
    """A CA and a server certificate for 127.0.0.1 signed by it (``openssl``); the CA's file."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ServerFailed("openssl is not installed: the TLS test server needs certificates")
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    for args in (["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
                  "ca.crt", "-days", "2", "-subj", "/CN=sessiontree test CA"],
                 ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
                  "server.csr", "-subj", "/CN=127.0.0.1"],
                 ["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                  "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf"]):
        done = subprocess.run([openssl, *args], cwd=folder, capture_output=True, text=True)
        if done.returncode != 0:
            raise ServerFailed(f"openssl {args[0]} failed: {done.stderr}")
    return folder / "ca.crt"


class RedisCluster:
    """Six nodes (three masters, three replicas) made a cluster by ``redis-cli --cluster
    create``. ``node_timeout_ms`` is short where a test kills a master (a failover takes
    seconds), long for the cluster the backend suites share: on a loaded machine a node that
    answers late must not be taken for dead (the cluster went down mid-suite at one second)."""

    def __init__(self, directory: Path, *, nodes: int = 6, node_timeout_ms: int = 15000) -> None:
        self.nodes: list[RedisServer] = []
        try:
            for _ in range(nodes):
                self.nodes.append(RedisServer(directory, cluster=True,
                                              node_timeout_ms=node_timeout_ms))
            redis_cli(self.nodes[0].port, "--cluster", "create",
                      *[f"127.0.0.1:{n.port}" for n in self.nodes],
                      "--cluster-replicas", "1", "--cluster-yes")
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:3])

    def alive(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.process.poll() is None]

    def masters(self) -> list[RedisServer]:
        """The live nodes that are masters now."""
        return [n for n in self.alive()
                if "role:master" in redis_cli(n.port, "INFO", "replication")]

    def wait_healthy(self, timeout: float = 30) -> None:
        """Until every live node says the cluster is ok, and every master has a replica."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                states = [redis_cli(n.port, "CLUSTER", "INFO") for n in self.alive()]
                if all("cluster_state:ok" in s for s in states):
                    infos = [redis_cli(n.port, "INFO", "replication") for n in self.alive()]
                    masters = [i for i in infos if "role:master" in i]
                    if len(masters) == 3 and all("connected_slaves:1" in i for i in masters) \
                            and all("master_link_status:up" in i for i in infos
                                    if "role:slave" in i):
                        return
            except ServerFailed:
                pass
            time.sleep(0.1)
        raise ServerFailed(f"the Redis cluster was not healthy within {timeout:g} s")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class PostgresServer:
    """A throwaway PostgreSQL (trust authentication, no fsync) in a temporary folder, for a run
    without ``SESSIONTREE_TEST_POSTGRES``. As root it runs as the ``postgres`` user (the server
    refuses root)."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                       key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0)
        initdb = found[-1] if found else shutil.which("initdb")
        if initdb is None:
            raise ServerFailed("no PostgreSQL server binaries (initdb) in /usr/lib/postgresql/*/bin"
                               " or on PATH: install postgresql, or set SESSIONTREE_TEST_POSTGRES")
        self._pg_ctl = str(Path(initdb).with_name("pg_ctl"))
        self.directory = Path(tempfile.mkdtemp(prefix="sessiontree-pg-"))
        self._as: list[str] = []
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerFailed("running as root and there is no postgres user to run the "
                                   "test PostgreSQL as") from None
            os.chown(self.directory, owner.pw_uid, owner.pw_gid)
            self._as = [shutil.which("runuser") or "/usr/sbin/runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self.data = self.directory / "data"
        self._run([initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                   "--no-sync", "--locale=C"])
        options = (f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        self._run([self._pg_ctl, "-D", str(self.data), "-o", options, "-l",
                   str(self.directory / "server.log"), "-w", "-t", "60", "start"])

    def _run(self, args: list[str]) -> None:
        done = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.directory / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            self.directory_cleanup()
            raise ServerFailed(f"{Path(args[0]).name} failed ({done.returncode}): "
                               f"{done.stderr or done.stdout}{tail}")

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        subprocess.run([*self._as, self._pg_ctl, "-D", str(self.data), "-m", "immediate",
                        "stop"], capture_output=True, timeout=60)
        self.directory_cleanup()

    def directory_cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
