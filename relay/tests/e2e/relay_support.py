"""Running the relay as a real process for the tests, and a webhook
receiver that verifies what it gets."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import random
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import relay_config
from relay_config import ADMIN as ADMIN

import callpost

SECRET = "relay-test-secret"
WRITE_KEY = "wk-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def basic(key: str) -> str:
    return "Basic " + base64.b64encode(f"{key}:".encode()).decode()


class Delivery:
    """One webhook request the receiver got."""

    def __init__(self, key: str, body: bytes, headers: dict[str, str], verified: bool, started: float) -> None:
        self.key = key
        self.body = body
        # One call (an object), or a batch of them (an array).
        self.json: Any = json.loads(body)
        self.headers = headers
        self.verified = verified
        self.started = started
        self.ended = 0.0
        self.status = 0


Behaviour = Callable[[Delivery], int | float | tuple[int, dict[str, str]] | tuple[int, dict[str, str], bytes]]
"""What to answer: a status, a status with headers, or a float: sleep that
many seconds, then 200."""


class Hook:
    """A webhook receiver on 127.0.0.1 (conftest's threaded server) that
    verifies every ``X-Signature`` and records each request with its
    ``Idempotency-Key`` and when it was in progress."""

    def __init__(
        self, serve: Callable[..., Any], behaviour: Behaviour | None = None, secret: str = SECRET, tls: Any = None
    ) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[Delivery] = []
        self.behaviour: Behaviour = behaviour or (lambda d: 200)
        self.secret = secret

        def handle(n: int, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
            lower = {k.lower(): v for k, v in headers.items()}
            d = Delivery(
                lower.get("idempotency-key", ""),
                body,
                lower,
                callpost.verify_request(body, headers, self.secret),
                time.time(),
            )
            with self.lock:
                self.deliveries.append(d)
            answer = self.behaviour(d)
            extra: dict[str, str] = {}
            body = b"ok"
            if isinstance(answer, tuple) and len(answer) == 3:
                answer, extra, body = answer
            elif isinstance(answer, tuple):
                answer, extra = answer
            if isinstance(answer, float):
                time.sleep(answer)
                answer = 200
            d.status = int(answer)
            d.ended = time.time()
            return d.status, extra, body

        self.server = serve(handle, tls)
        self.url = self.server.url + "/hook"

    def ok(self) -> list[Delivery]:
        """The deliveries it answered 2xx."""
        with self.lock:
            return [d for d in self.deliveries if 200 <= d.status < 300]

    def keys(self) -> dict[str, int]:
        """Idempotency-Key → times it was answered 2xx."""
        out: dict[str, int] = {}
        for d in self.ok():
            out[d.key] = out.get(d.key, 0) + 1
        return out


OPS_SECRET = "operator-secret-for-the-test"


def operator_hook(serve: Callable[..., Any], settings: str = "") -> tuple[Hook, str]:
    """A receiver for the relay's operational events, and the ``[operator]``
    table that sends them to it (signed with ``OPS_SECRET``; ``settings``
    go on inside the table)."""
    ops = Hook(serve, secret=OPS_SECRET)
    return ops, f'[operator]\nurls = ["{ops.url}"]\nshared_secret = "{OPS_SECRET}"\n{settings}'


class Database:
    """A relay database for one test: a SQLite file, or a fresh database on
    the test Postgres cluster (scripts/postgres.sh)."""

    def __init__(self, backend: str, tmp: pathlib.Path, postgres: str | None) -> None:
        self.backend = backend
        if backend == "sqlite":
            self.path = tmp / "relay.db"
            self.url = f"sqlite:///{self.path}"
        else:
            import psycopg

            assert postgres is not None
            self.name = "relay_" + os.urandom(6).hex()
            with psycopg.connect(postgres, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {self.name}")
            self.admin_url = postgres
            self.url = postgres.rsplit("/", 1)[0] + "/" + self.name

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query (``?`` placeholders), straight from the database."""
        if self.backend == "sqlite":
            with sqlite3.connect(self.path) as conn:
                return list(conn.execute(sql, params).fetchall())
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            return list(conn.execute(sql.replace("?", "%s"), params).fetchall())

    def stall(self, reads: bool = False) -> Callable[[], None]:
        """Blocks the relay's writes (another session holds the write lock),
        and with ``reads`` (Postgres only) its reads of the queue too, until
        the returned function is called."""
        if self.backend == "sqlite":
            assert not reads, "SQLite's readers are never blocked (WAL)"
            lite = sqlite3.connect(self.path, isolation_level=None)
            lite.execute("BEGIN IMMEDIATE")

            def release_sqlite() -> None:
                lite.execute("ROLLBACK")
                lite.close()

            return release_sqlite
        import psycopg

        pg = psycopg.connect(self.url)
        pg.execute(f"LOCK TABLE deliveries IN {'ACCESS EXCLUSIVE' if reads else 'EXCLUSIVE'} MODE")

        def release() -> None:
            pg.rollback()
            pg.close()

        return release

    def drop(self) -> None:
        if self.backend == "postgres":
            import psycopg

            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


class Groups(Database):
    """Two shard groups for one test: home (this database) and ``b``, each a
    fresh database on the test Postgres cluster. Queries read both, so what
    the tests ask of "the store" is asked of every group."""

    def __init__(self, tmp: pathlib.Path, postgres: str) -> None:
        super().__init__("postgres", tmp, postgres)
        self.b = Database("postgres", tmp, postgres)
        self.backend = "postgres-groups"

    def shards(self, version: int = 1, slots: str = "512-1023") -> str:
        """The ``[shards]`` table that gives group ``b`` these slots."""
        return (
            f'[shards]\nversion = {version}\n[[shards.groups]]\nname = "b"\n'
            f'database = "{self.b.url}"\nslots = "{slots}"\n'
        )

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.home_query(sql, params) + self.b.query(sql, params)

    def home_query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query on the home group alone."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            return list(conn.execute(sql.replace("?", "%s"), params).fetchall())

    def stall(self, reads: bool = False) -> Callable[[], None]:
        raise NotImplementedError("stall one group's database: Database(...).stall")

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        self.b.drop()


def config_text(
    database: str | Database,
    urls: list[str],
    *,
    extra: str = "",
    sources: str = "",
    secret: str = SECRET,
    write_key: str = WRITE_KEY,
) -> str:
    url = database.url if isinstance(database, Database) else database
    return relay_config.config_text(url, urls, secret=secret, write_key=write_key, extra=extra, sources=sources)


RELAY_BIN = os.environ.get("CALLPOST_RELAY_BIN") or str(
    pathlib.Path(__file__).resolve().parents[3] / "target" / "debug" / "callpost-relay"
)
"""The relay binary under test: started directly, with nothing in front of
it (a restart after a kill costs the relay's own start, not an
interpreter's)."""


class RelayProcess:
    """The relay binary (``RELAY_BIN``, the tests' build, which has the
    test clock) in a subprocess, on a fixed port across restarts (as an SDK
    would point at it)."""

    def __init__(
        self,
        config: str,
        tmp: pathlib.Path,
        *,
        port: int | None = None,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.path = tmp / "relay.toml"
        self.path.write_text(config)
        self.port = port or free_port()
        self.args = args
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.log: list[str] = []
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *args: str, wait: bool = True) -> RelayProcess:
        cmd = [
            RELAY_BIN,
            "--config",
            str(self.path),
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.args,
            *args,
        ]
        env = dict(os.environ, **self.env)
        self.proc = subprocess.Popen(
            cmd, cwd=self.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.starts += 1
        ready = threading.Event()
        listening = threading.Event()
        proc = self.proc

        def drain() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.log.append(line.rstrip())
                if "listening on" in line:
                    listening.set()
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        # Its output ending without "listening on" is a failed start, even
        # before the process is reaped (poll() may still say it runs).
        if wait and (not ready.wait(60) or not listening.is_set() or proc.poll() is not None):
            raise RuntimeError("relay did not start:\n" + "\n".join(self.log[-30:]))
        return self

    def stop(self, timeout: float = 60) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def post(
        self,
        path: str,
        body: bytes | str | Mapping[str, object],
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], bytes]:
        data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        req = urllib.request.Request(self.url + path, data=data, headers=h, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        req = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
            method=method,
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self.admin("GET", "/admin/status")
        return result

    def metrics(self) -> str:
        """``/metrics``, which needs the admin token."""
        req = urllib.request.Request(self.url + "/metrics", headers={"Authorization": f"Bearer {ADMIN}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return str(r.read().decode())

    def metric(self, name: str, labels: str = "") -> float:
        pattern = re.escape(name) + (re.escape("{" + labels + "}") if labels else "") + r" ([0-9.e+-]+)$"
        m = re.search(pattern, self.metrics(), re.M)
        return float(m.group(1)) if m else 0.0

    def wait(self, predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; relay log:\n" + "\n".join(self.log[-40:]))

    def wait_drained(self, timeout: float = 60, database: Database | None = None) -> None:
        """Until no delivery is pending; on a timeout, with ``database``,
        the message says what the pending calls wait for."""
        try:
            self.wait(lambda: self.status()["pending"] == 0, timeout, "the queue to drain")
        except AssertionError as e:
            if database is None:
                raise
            raise AssertionError(f"{e}\n{pending_report(database)}") from None

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [RELAY_BIN, *args, "--config", str(self.path)],
            cwd=self.tmp,
            env=dict(os.environ, **self.env),
            capture_output=True,
            text=True,
            timeout=60,
        )


def track(n: int | str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "track",
        "userId": f"u{n}",
        "event": "Order Completed",
        "messageId": f"m-{n}",
        "properties": {"n": n, "total": 25.5},
        **extra,
    }


class Sender(threading.Thread):
    """Posts batches of fresh calls like a Segment SDK: a batch that is not
    acknowledged (connection refused or reset, 5xx) is sent again, the same
    batch, until it is."""

    def __init__(
        self,
        ports: list[int],
        seed: int,
        prefix: str = "c",
        record: bool = False,
        pause: float = 0.0,
        users: int = 1,
    ) -> None:
        super().__init__(daemon=True)
        # The calls' userIds: "u", or with ``users`` > 1 that many, in turn
        # (over shard groups, the users spread the calls across them).
        self.users = users
        # With ``record``: every answer as (sent at, status or 0 for none,
        # seconds it took, Retry-After); ``pause`` between batches.
        self.record = record
        self.pause = pause
        self.answers: list[tuple[float, int, float, str | None]] = []
        # Several relays: each batch goes to one at random, and a batch that
        # is not acknowledged goes to the next, as behind a load balancer.
        self.urls = [f"http://127.0.0.1:{p}/v1/batch" for p in ports]
        self.prefix = prefix
        self.rng = random.Random(seed)
        self.acked: set[str] = set()
        self.in_flight = False
        self.stopping = False
        self.batches = 0
        self.retries = 0

    def run(self) -> None:
        n = 0
        while not self.stopping:
            size = self.rng.randint(1, 20)
            ids = [f"{self.prefix}{n + i}" for i in range(size)]
            n += size
            body = json.dumps(
                {
                    "batch": [
                        {
                            "type": "track",
                            "userId": "u" if self.users == 1 else f"u{int(m[len(self.prefix) :]) % self.users}",
                            "event": "Crash Test",
                            "messageId": m,
                            "properties": {"seq": m},
                        }
                        for m in ids
                    ]
                }
            ).encode()
            target = self.rng.randrange(len(self.urls))
            while True:
                req = urllib.request.Request(
                    self.urls[target],
                    data=body,
                    method="POST",
                    headers={"Content-Type": "application/json", "Authorization": basic(WRITE_KEY)},
                )
                self.in_flight = True
                sent = time.time()
                status, retry_after = 0, None
                try:
                    with urllib.request.urlopen(req, timeout=10) as r:
                        status = r.status
                except urllib.error.HTTPError as e:
                    status, retry_after = e.code, e.headers.get("Retry-After")
                except (urllib.error.URLError, OSError):
                    pass
                self.in_flight = False
                if self.record:
                    self.answers.append((sent, status, time.time() - sent, retry_after))
                if status == 200:
                    self.acked.update(ids)
                    self.batches += 1
                    if self.pause:
                        time.sleep(self.pause)
                    break
                self.retries += 1
                target = (target + 1) % len(self.urls)
                if self.stopping:
                    return
                time.sleep(0.02)


SETTLE_S = 1.0
"""Where the store was not read at a kill (a database outage): an answer
this close before it may not have been stored, and its delivery counts as
unsettled then."""


class Settled:
    """What the store held as delivered at each kill, read straight after
    it: the killed relay can store nothing more, so a call answered before
    the kill and missing then had its result lost, and may be sent again.

    Kept as the first kill at which each call was held (delivered calls
    stay delivered), not as a set per kill: a few hundred sets of up to
    150,000 ids made the test process grow to about 2 GB, and the
    collector's passes over it held the receiver up in the same process."""

    def __init__(self) -> None:
        self.kills = 0
        self.first: dict[str, int] = {}

    def record(self, database: Database) -> None:
        k = self.kills
        for (m,) in database.query("SELECT message_id FROM deliveries WHERE status = 1"):
            self.first.setdefault(str(m), k)
        self.kills += 1

    def held(self, message_id: str, kill: int) -> bool:
        """Whether the store held the call as delivered at kill ``kill``."""
        return self.first.get(message_id, self.kills) <= kill


def pending_report(database: Database) -> str:
    """What the calls still pending wait for, straight from the store:
    by attempts made, a saved state (a retry), a lease and the due time;
    and the attempt log of a few that are waiting for a retry."""
    now = time.time() * 1000
    lines = [f"pending calls at {now:.0f} (attempts, saved state, leased, due in s: count):"]
    rows = database.query(
        "SELECT attempts, state IS NOT NULL, lease_until IS NOT NULL AND lease_until > ?, "
        "CAST((due_at - ?) / 1000 AS INTEGER), count(*) FROM deliveries WHERE status = 0 "
        "GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC LIMIT 20",
        (now, now),
    )
    lines += [f"  {r[0]}, {bool(r[1])}, {bool(r[2])}, {r[3]}: {r[4]}" for r in rows]
    for m, state in database.query(
        "SELECT message_id, state FROM deliveries WHERE status = 0 AND state IS NOT NULL LIMIT 3"
    ):
        log = json.loads(state).get("log", [])
        lines.append(f"  {m}: " + json.dumps(log)[:600])
    return "\n".join(lines)


class Tally:
    """What a receiver got from relays that were killed (or lost their
    database) at known moments, against what the senders had acknowledged.

    ``windows`` are (from, to) times. A delivery in progress during one is
    unsettled; so is one answered before it whose call the store did not
    hold as delivered at that kill (``settled``), or, without ``settled``,
    answered at most ``SETTLE_S`` before it. A call may be delivered
    again only after an unsettled delivery, or when it is ``excused``
    (its lease was ended on purpose)."""

    def __init__(
        self,
        hook: Hook,
        acked: set[str],
        windows: list[tuple[float, float]],
        settled: Settled | None = None,
        excused: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        assert settled is None or settled.kills == len(windows)
        self.got: dict[str, list[Delivery]] = {}
        for d in hook.deliveries:
            assert d.verified
            if isinstance(d.json, list):
                # A batch: each of its calls delivered with it, under the
                # batch's id, the same each time the batch is sent.
                assert d.key.startswith("batch_"), d.key
                for call in d.json:
                    self.got.setdefault(call["properties"]["seq"], []).append(d)
                continue
            seq = d.json["properties"]["seq"]
            assert d.key == seq, "every delivery of a call carries its messageId as Idempotency-Key"
            self.got.setdefault(seq, []).append(d)
        self.delivered = {m for m, ds in self.got.items() if any(200 <= d.status < 300 for d in ds)}
        self.lost = acked - self.delivered
        self.windows = windows
        self.settled = settled
        self.twice = {m: ds for m, ds in self.got.items() if sum(1 for d in ds if 200 <= d.status < 300) > 1}
        self.unexplained = [
            m for m, ds in self.twice.items() if m not in excused and not any(self.unsettled(m, d) for d in ds[:-1])
        ]
        # Calls sent again because an answer was lost at a kill rather than
        # cut off in flight.
        self.answered_then_lost = [
            m for m, ds in self.twice.items() if any(self.unsettled(m, d) and not self.in_flight(d) for d in ds[:-1])
        ]

    def in_flight(self, d: Delivery) -> bool:
        end = d.ended or float("inf")
        return any(d.started <= to and end >= start for start, to in self.windows)

    def unsettled(self, message_id: str, d: Delivery) -> bool:
        if self.in_flight(d):
            return True
        if not d.ended:
            return False
        if self.settled is None:
            return any(start - SETTLE_S <= d.ended < start for start, _ in self.windows)
        settled = self.settled
        return any(d.ended < start and not settled.held(message_id, k) for k, (start, _) in enumerate(self.windows))
