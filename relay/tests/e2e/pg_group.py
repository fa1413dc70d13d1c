"""A pg_auto_failover formation on loopback, for the failover tests: a
monitor and a group of Postgres nodes (one primary, the others standbys in
its synchronous quorum), each ``pg_autoctl`` service a process group of its
own, so that a fault can kill a node's whole process tree (the keeper with
its Postgres) or its Postgres alone.

Debian's ``pg-auto-failover-cli`` and ``postgresql-15-auto-failover`` (2.0);
every process runs as the ``postgres`` user (Postgres refuses root), with
its keeper state under the group's own directory (``XDG_*``: a stale state
under a home directory breaks the next run). ``--hostname 127.0.0.1``:
without it, ``pg_autoctl`` finds its address through a connection to an
outside host.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time
from typing import Any

PG_BIN = (
    pathlib.Path(sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin"))[-1])
    if pathlib.Path("/usr/lib/postgresql").is_dir()
    else pathlib.Path("/nonexistent")
)
PGCTL = str(PG_BIN / "pg_ctl")
AUTOCTL = shutil.which("pg_autoctl") or "pg_autoctl"
# Where Debian's Postgres (and so pg_autoctl's) puts its sockets.
SOCKETS = "/var/run/postgresql"

# The monitor's failure detection, made quick for a test on one machine
# (pg_auto_failover's defaults, for a network: a health check every 5 s, a
# node unhealthy after 20 s, a primary that does not answer given 30 s to
# demote itself). A primary that stops answering is replaced after about
# UNHEALTHY_MS + DEMOTE_MS.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "5000",
    "pgautofailover.startup_grace_period": "3000",
}


class Node:
    """One ``pg_autoctl`` service: the monitor's, or a Postgres node's."""

    def __init__(self, group: Group, name: str, port: int) -> None:
        self.group = group
        self.name = name
        self.port = port
        self.pgdata = group.root / name
        self.log = group.root / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self, args: list[str]) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.group.env,
                cwd=self.group.root,
                user="postgres" if os.geteuid() == 0 else None,
                start_new_session=True,
            )

    def run(self) -> None:
        """The service again, on the node's existing data (after a kill)."""
        self.spawn([AUTOCTL, "run", "--pgdata", str(self.pgdata)])

    def postmaster(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill_tree(self) -> None:
        """SIGKILL to the service's process group (the keeper, its
        Postgres and every backend) and to the postmaster by its pid file,
        in case it left the group."""
        pid = self.postmaster()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            self.proc = None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def kill_postgres(self) -> None:
        """SIGKILL to the postmaster alone: its keeper lives on, and starts
        it again."""
        pid = self.postmaster()
        assert pid is not None, f"{self.name} has no postmaster"
        os.kill(pid, signal.SIGKILL)


class Group:
    """A monitor on ``base_port`` and ``nodes`` Postgres nodes on the ports
    after it, with the database ``dbname`` (the relays'), every connection
    from 127.0.0.1 trusted. ``root`` and every directory above it must be
    open to the ``postgres`` user (pytest's temporary directories are not)."""

    def __init__(self, root: pathlib.Path, base_port: int, nodes: int = 3, dbname: str = "relay") -> None:
        self.root = root
        self.dbname = dbname
        # pg_autoctl keeps each node's files under <XDG dir>/pg_autoctl/<its
        # pgdata>; two of them making the same parents at once fail
        # ("File exists"), so the parents are made here first.
        made = [root]
        for xdg in ("config", "share", "run"):
            made += [root / xdg, root / xdg / "pg_autoctl"]
            nested = root / xdg / "pg_autoctl"
            for part in root.resolve().parts[1:]:
                nested = nested / part
                made.append(nested)
        for d in made:
            d.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(d, "postgres")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_DATA_HOME": str(root / "share"),
            "XDG_RUNTIME_DIR": str(root / "run"),
            "PG_CONFIG": str(PG_BIN / "pg_config"),
            "PGCONNECT_TIMEOUT": "2",
        }
        self.monitor = Node(self, "monitor", base_port)
        self.nodes = [Node(self, f"node{i + 1}", base_port + 1 + i) for i in range(nodes)]
        self.monitor_uri = ""

    def autoctl(self, *args: str, timeout: float = 30) -> str:
        done = subprocess.run(
            [AUTOCTL, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.root,
            user="postgres" if os.geteuid() == 0 else None,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)}: {done.stderr.strip()[-800:]}")
        return done.stdout

    def psql(self, where: list[str], sql: str, what: str) -> str:
        """One statement through psql (``where``: its connection options),
        unaligned and without headers; a failure names ``what``."""
        done = subprocess.run(
            [str(PG_BIN / "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", *where, "-c", sql],
            capture_output=True,
            text=True,
            timeout=30,
            env=self.env,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{what}: {sql}: {done.stderr.strip()}")
        return done.stdout.strip()

    def monitor_sql(self, sql: str) -> str:
        """A statement on the monitor as its superuser (its own socket,
        trusted: ``ALTER SYSTEM`` is not the nodes' user's to run)."""
        where = ["-h", SOCKETS, "-p", str(self.monitor.port), "-U", "postgres", "-d", "pg_auto_failover"]
        return self.psql(where, sql, "monitor")

    def start(self, timeout: float = 240) -> None:
        common = ["--pgctl", PGCTL, "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"]
        m = self.monitor
        m.spawn([AUTOCTL, "create", "monitor", "--pgdata", str(m.pgdata), "--pgport", str(m.port), *common, "--run"])
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.monitor_sql("SELECT 1 FROM pgautofailover.formation")
                uri = self.autoctl("show", "uri", "--pgdata", str(m.pgdata), "--formation", "monitor")
                self.monitor_uri = uri.strip()
                break
            except (RuntimeError, subprocess.TimeoutExpired):
                if time.monotonic() > deadline or (m.proc is not None and m.proc.poll() is not None):
                    raise RuntimeError("the monitor did not start:\n" + m.log.read_text()[-2000:]) from None
                time.sleep(0.2)
        for name, value in MONITOR_SETTINGS.items():
            self.monitor_sql(f"ALTER SYSTEM SET {name} = {value}")
        self.monitor_sql("SELECT pg_reload_conf()")
        first, *standbys = self.nodes
        self.create(first, common)
        self.wait_states(lambda states: states.get(first.name) == "single", deadline)
        # A standby starts as a copy of the primary (pg_basebackup), which
        # waits for a checkpoint; spread over checkpoint_timeout, as by
        # default, that took 90 s here. Immediate, it takes none.
        self.sql(first, "ALTER SYSTEM SET checkpoint_completion_target = 0")
        self.sql(first, "SELECT pg_reload_conf()")
        for n in standbys:
            self.create(n, common)
        self.wait_states(self.formed, deadline)

    def create(self, n: Node, common: list[str]) -> None:
        n.spawn(
            [
                AUTOCTL,
                "create",
                "postgres",
                "--pgdata",
                str(n.pgdata),
                "--pgport",
                str(n.port),
                "--name",
                n.name,
                "--dbname",
                self.dbname,
                "--monitor",
                self.monitor_uri,
                *common,
                "--run",
            ]
        )

    def sql(self, n: Node, statement: str) -> str:
        """A statement on a node, as ``postgres`` on its database."""
        return self.psql(["-d", f"postgresql://postgres@127.0.0.1:{n.port}/{self.dbname}"], statement, n.name)

    def states(self) -> dict[str, str]:
        """Each node's current state, as the monitor sees it."""
        try:
            rows = json.loads(self.autoctl("show", "state", "--pgdata", str(self.monitor.pgdata), "--json"))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            return {}
        return {
            r["nodename"]: r["current_group_state"]
            for r in rows
            if r["current_group_state"] == r["assigned_group_state"]
        }

    def formed(self, states: dict[str, str]) -> bool:
        values = [states.get(n.name) for n in self.nodes if n.proc is not None]
        return values.count("primary") == 1 and values.count("secondary") == len(values) - 1

    def wait_states(self, predicate: Any, deadline: float) -> dict[str, str]:
        while True:
            states = self.states()
            if predicate(states):
                return states
            exited = [n.name for n in self.nodes if n.proc is not None and n.proc.poll() is not None]
            if time.monotonic() > deadline or exited:
                raise RuntimeError(f"the group did not reach the state wanted: {states}\n" + self.tail())
            time.sleep(0.25)

    def primary(self) -> Node:
        states = self.states()
        for n in self.nodes:
            if states.get(n.name) == "primary":
                return n
        raise RuntimeError(f"no primary: {states}")

    def url(self, user: str = "postgres") -> str:
        """The relays' URL: every node, the session's server the one that
        takes writes."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        return f"postgresql://{user}@{hosts}/{self.dbname}?target_session_attrs=read-write"

    def tail(self) -> str:
        out = []
        for n in [self.monitor, *self.nodes]:
            if n.log.exists():
                out.append(f"--- {n.name}\n" + "\n".join(n.log.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(out)

    def stop(self) -> None:
        for n in [*self.nodes, self.monitor]:
            n.kill_tree()
