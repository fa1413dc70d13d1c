"""Durable storage for the relay: every accepted call, its delivery state,
dead letters, refused calls and audience state.

``SQLiteStore`` is the default: one file, WAL mode, ``synchronous=FULL``
(``NORMAL`` is an opt-in that may lose the last commits on power loss, not
on a crash of the process). All writes go through one writer thread, which
commits whatever is waiting in one transaction (group commit): requests that
arrive together share one fsync, and no two writers ever contend for the
file. A request is acknowledged only once its transaction has committed.

One table holds a call and its delivery, so the life of a call is three
statements: the insert (shared by the whole batch: one multi-row INSERT per
transaction), the claim (one UPDATE … RETURNING for many), and the finish.
``/metrics`` counts every statement the relay runs
(``callpost_relay_sql_statements_total``).

``postgres.PostgresStore`` has the same interface, for several relays on
one database.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import queue
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .metrics import Metrics

__all__ = [
    "PENDING", "DELIVERED", "DEAD", "DISABLED", "Row", "RejectedRow", "Claimed", "Finish", "Store", "SQLiteStore",
    "open_store",
]

logger = logging.getLogger("callpost.relay")

# Delivery status.
PENDING = 0
DELIVERED = 1
DEAD = 2
DISABLED = 3
"""The call's ``integrations`` turned Webhooks off, or its source has no
destination: stored (it was accepted), and sent nowhere."""

STATUS_NAMES = {PENDING: "pending", DELIVERED: "delivered", DEAD: "dead", DISABLED: "disabled"}

@dataclass(frozen=True)
class Row:
    """An accepted call, as stored."""

    source: str
    message_id: str
    kind: str
    message: str
    received_at: int
    status: int


@dataclass(frozen=True)
class RejectedRow:
    """A call refused on its own inside an accepted batch."""

    source: str
    received_at: int
    code: str
    reason: str
    text: str


@dataclass(frozen=True)
class Claimed:
    """A delivery a worker holds: ``claim`` is its token, checked when it
    finishes, so a worker whose lease ran out cannot overwrite the next
    holder's result."""

    id: int
    claim: int
    source: str
    message_id: str
    message: str
    state: Optional[str]
    attempts: int


@dataclass(frozen=True)
class Finish:
    """How a claimed delivery ends its turn.

    ``kind`` is ``delivered``, ``retry`` (``state`` and ``due_at`` set),
    ``dead`` (``state`` and ``outcome`` set) or ``release`` (given back
    unchanged, at shutdown)."""

    kind: str
    id: int
    claim: int
    attempts: int = 0
    state: Optional[str] = None
    due_at: int = 0
    outcome: Optional[str] = None


class Store:
    """What the relay needs from storage (``SQLiteStore``, ``PostgresStore``)."""

    backlog: int
    """Calls handed to ``insert`` and not yet committed."""
    healthy: bool = True
    """False since the last write failed (the database is unreachable),
    until one succeeds: ``/readyz`` answers 503 meanwhile."""
    migrated: Tuple[int, int]
    """The schema version before and after ``start`` ran the migrations."""

    async def start(self) -> None:
        """Opens the database and runs the migrations it has not run."""
    async def close(self) -> None: ...
    async def renew(self, tokens: Sequence[int], until: int) -> None:
        """Extends the leases of the claims a worker still holds."""
        raise NotImplementedError
    async def insert(self, rows: Sequence[Row], rejected: Sequence[RejectedRow], now: int) -> int:
        """Stores the calls (duplicates of a stored (source, messageId) are
        ignored) and returns how many were new, once durable."""
        raise NotImplementedError
    async def claim(self, now: int, limit: int, lease_ms: int) -> List[Claimed]:
        raise NotImplementedError
    async def finish(self, items: Sequence[Finish], now: int) -> int:
        """Stores how the claimed deliveries ended; returns how many were
        refused because their claim is no longer the holder's (a worker
        that outlived its lease)."""
        raise NotImplementedError
    async def next_due(self, now: int) -> Optional[int]:
        raise NotImplementedError
    async def purge(self, before: int) -> int:
        raise NotImplementedError
    async def replay(self, now: int, message_ids: Sequence[str] = (), source: Optional[str] = None,
                     since: Optional[int] = None, until: Optional[int] = None,
                     include_delivered: bool = False) -> int:
        raise NotImplementedError
    async def stats(self, now: int) -> Dict[str, Any]:
        raise NotImplementedError
    async def dead_letters(self, limit: int) -> List[Dict[str, Any]]:
        raise NotImplementedError
    async def rejected(self, limit: int) -> List[Dict[str, Any]]:
        raise NotImplementedError
    async def audience_state(self, source: str, audience: str) -> Optional[str]:
        raise NotImplementedError
    async def audience_sync(self, source: str, audience: str, state: str, rows: Sequence[Row], now: int) -> int:
        """Stores the audience's new state and its identify calls in one
        transaction; returns how many calls were stored."""
        raise NotImplementedError


# The schema, as numbered migrations: a database records the last one it
# ran (meta.schema_version), and each start (or ``relay migrate``) runs the
# ones after it, in order, each in its own transaction. Postgres's are in
# postgres.py, numbered alike.
MIGRATIONS: List[Tuple[int, List[str]]] = [
    (1, [
        """CREATE TABLE deliveries (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            message_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            message TEXT NOT NULL,
            received_at INTEGER NOT NULL,
            status INTEGER NOT NULL,
            due_at INTEGER NOT NULL,
            lease_until INTEGER,
            claim INTEGER,
            state TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            outcome TEXT,
            finished_at INTEGER,
            UNIQUE (source, message_id)
        )""",
        "CREATE INDEX deliveries_due ON deliveries (due_at) WHERE status = 0",
        "CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE status IN (1, 3)",
        "CREATE INDEX deliveries_dead ON deliveries (received_at) WHERE status = 2",
        """CREATE TABLE rejected (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            received_at INTEGER NOT NULL,
            code TEXT NOT NULL,
            reason TEXT NOT NULL,
            text TEXT NOT NULL
        )""",
        "CREATE INDEX rejected_received ON rejected (received_at)",
        """CREATE TABLE audiences (
            source TEXT NOT NULL,
            audience TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (source, audience)
        )""",
    ]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def _migrate_sqlite(conn: sqlite3.Connection) -> Tuple[int, int]:
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        before = int(row[0]) if row else 0
        if before > SCHEMA_VERSION:
            raise RuntimeError(f"the database has schema version {before}, newer than this relay's {SCHEMA_VERSION}")
        for version, statements in MIGRATIONS:
            if version > before:
                for statement in statements:
                    conn.execute(statement)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
                     " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return before, SCHEMA_VERSION


# Rows per INSERT statement: 7 parameters each, far below SQLite's 32,766.
_INSERT_CHUNK = 500


def _insert_sql(n: int) -> str:
    values = ",".join(["(?,?,?,?,?,?,?)"] * n)
    return (
        "INSERT INTO deliveries (source, message_id, kind, message, received_at, status, due_at) VALUES "
        + values
        + " ON CONFLICT (source, message_id) DO NOTHING"
    )


def _insert_rows(conn: Any, rows: Sequence[Row], placeholder: Callable[[int], str] = _insert_sql) -> int:
    """One multi-row INSERT per chunk; returns how many rows were new."""
    new = 0
    for i in range(0, len(rows), _INSERT_CHUNK):
        chunk = rows[i : i + _INSERT_CHUNK]
        params: List[Any] = []
        for r in chunk:
            params += (r.source, r.message_id, r.kind, r.message, r.received_at, r.status, r.received_at)
        cur = conn.execute(placeholder(len(chunk)), params)
        new += max(cur.rowcount, 0)
    return new


class _Op:
    __slots__ = ("fn", "future", "loop", "calls")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any], future: "asyncio.Future[Any]",
                 loop: asyncio.AbstractEventLoop, calls: int) -> None:
        self.fn = fn
        self.future = future
        self.loop = loop
        self.calls = calls




def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///path`` URL (``sqlite:////abs/path`` for an
    absolute path, as SQLAlchemy writes them; ``sqlite:///:memory:`` is
    refused: the relay's promise is durability)."""
    path = url[len("sqlite://") :]
    if path.startswith("/"):
        path = path[1:]
    if not path or path == ":memory:":
        raise ValueError("the relay needs a database file: sqlite:///path/to/relay.db")
    return path


class SQLiteStore(Store):
    """The default store: one SQLite file, one writer thread (group
    commit), one reader thread for status queries."""

    def __init__(self, path: str, *, synchronous: str = "FULL", metrics: Optional[Metrics] = None,
                 exclusive: bool = True) -> None:
        self.path = path
        self.synchronous = synchronous
        self.metrics = metrics or Metrics()
        self.exclusive = exclusive
        self.backlog = 0
        self._queue: "queue.SimpleQueue[Optional[_Op]]" = queue.SimpleQueue()
        self._writer: Optional[threading.Thread] = None
        self._reader_lock = threading.Lock()
        self._reader: Optional[sqlite3.Connection] = None
        self._lock_file: Optional[int] = None
        self.migrated: Tuple[int, int] = (SCHEMA_VERSION, SCHEMA_VERSION)

    # -- set-up -----------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        # Every statement the relay runs is counted, per connection (each is
        # used by one thread at a time, so no lock), for /metrics.
        counter = self.metrics.statement_counter()
        conn.set_trace_callback(lambda _sql: counter.__setitem__(0, counter[0] + 1))
        return conn

    def open_sync(self) -> None:
        """Opens the file and creates the schema (no threads): for the CLI."""
        if self.exclusive:
            # One relay per SQLite file: a second one would take the first
            # one's leases back at its start. Several relays share work
            # through Postgres.
            fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise RuntimeError(
                    f"another relay is using {self.path}; run one relay per SQLite file, or share Postgres"
                ) from None
            self._lock_file = fd
        conn = self._connect()
        self.migrated = _migrate_sqlite(conn)
        if self.exclusive:
            # The only relay on this file: whatever was leased was held by
            # a relay that is gone. Its attempts are made again now.
            conn.execute("UPDATE deliveries SET lease_until = NULL, claim = NULL WHERE status = 0 AND lease_until IS NOT NULL")
        conn.close()
        self._reader = self._connect()

    async def start(self) -> None:
        await asyncio.to_thread(self.open_sync)
        self._writer = threading.Thread(target=self._write_loop, name="callpost-relay-writer", daemon=True)
        self._writer.start()

    async def close(self) -> None:
        if self._writer is not None:
            self._queue.put(None)
            await asyncio.to_thread(self._writer.join)
            self._writer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._lock_file is not None:
            os.close(self._lock_file)
            self._lock_file = None

    # -- the writer ---------------------------------------------------------

    def _write_loop(self) -> None:
        conn = self._connect()
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                ops = [first]
                stop = False
                while True:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    ops.append(nxt)
                self._commit(conn, ops)
                if stop:
                    return
        finally:
            conn.close()

    def _commit(self, conn: sqlite3.Connection, ops: List[_Op]) -> None:
        started = time.perf_counter()
        try:
            conn.execute("BEGIN IMMEDIATE")
            results = [op.fn(conn) for op in ops]
            conn.execute("COMMIT")
        except BaseException as e:  # noqa: BLE001 - reported to each waiting caller
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if len(ops) > 1:
                # One bad operation must not fail the others: each again, alone.
                for op in ops:
                    self._commit(conn, [op])
                return
            self.healthy = False
            self._done(ops, None, e)
            return
        self.healthy = True
        self.metrics.observe_commit(time.perf_counter() - started, sum(op.calls for op in ops))
        self._done(ops, results, None)

    def _done(self, ops: List[_Op], results: Optional[List[Any]], error: Optional[BaseException]) -> None:
        for i, op in enumerate(ops):
            op.loop.call_soon_threadsafe(self._settle, op, None if results is None else results[i], error)

    def _settle(self, op: _Op, result: Any, error: Optional[BaseException]) -> None:
        # On the event loop's thread, where `backlog` is also raised.
        self.backlog -= op.calls
        if op.future.done():
            return
        if error is not None:
            op.future.set_exception(error)
        else:
            op.future.set_result(result)

    async def _write(self, fn: Callable[[sqlite3.Connection], Any], calls: int = 0) -> Any:
        if self._writer is None:
            raise RuntimeError("the store is not running")
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[Any]" = loop.create_future()
        self.backlog += calls
        self._queue.put(_Op(fn, future, loop, calls))
        return await future

    async def _read(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        def run() -> Any:
            with self._reader_lock:
                assert self._reader is not None
                return fn(self._reader)

        return await asyncio.to_thread(run)

    # -- operations ---------------------------------------------------------

    async def insert(self, rows: Sequence[Row], rejected: Sequence[RejectedRow], now: int) -> int:
        def run(conn: sqlite3.Connection) -> int:
            new = _insert_rows(conn, rows) if rows else 0
            if rejected:
                conn.executemany(
                    "INSERT INTO rejected (source, received_at, code, reason, text) VALUES (?,?,?,?,?)",
                    [(r.source, r.received_at, r.code, r.reason, r.text) for r in rejected],
                )
            return new

        result: int = await self._write(run, len(rows) + len(rejected))
        return result

    async def claim(self, now: int, limit: int, lease_ms: int) -> List[Claimed]:
        token = secrets.randbits(62)

        def run(conn: sqlite3.Connection) -> List[Claimed]:
            rows = conn.execute(
                "UPDATE deliveries SET lease_until = ?, claim = ? WHERE id IN ("
                " SELECT id FROM deliveries WHERE status = 0 AND due_at <= ?"
                " AND (lease_until IS NULL OR lease_until <= ?) ORDER BY due_at LIMIT ?)"
                " RETURNING id, source, message_id, message, state, attempts",
                (now + lease_ms, token, now, now, limit),
            ).fetchall()
            return [Claimed(r[0], token, r[1], r[2], r[3], r[4], r[5]) for r in rows]

        result: List[Claimed] = await self._write(run)
        return result

    async def finish(self, items: Sequence[Finish], now: int) -> int:
        def run(conn: sqlite3.Connection) -> int:
            changed = 0
            by_kind: Dict[str, List[Finish]] = {}
            for f in items:
                by_kind.setdefault(f.kind, []).append(f)
            if "delivered" in by_kind:
                changed += conn.executemany(
                    "UPDATE deliveries SET status = 1, finished_at = ?, attempts = ?, state = NULL,"
                    " lease_until = NULL, claim = NULL WHERE id = ? AND claim = ?",
                    [(now, f.attempts, f.id, f.claim) for f in by_kind["delivered"]],
                ).rowcount
            if "retry" in by_kind:
                changed += conn.executemany(
                    "UPDATE deliveries SET state = ?, due_at = ?, attempts = ?, lease_until = NULL, claim = NULL"
                    " WHERE id = ? AND claim = ?",
                    [(f.state, f.due_at, f.attempts, f.id, f.claim) for f in by_kind["retry"]],
                ).rowcount
            if "dead" in by_kind:
                changed += conn.executemany(
                    "UPDATE deliveries SET status = 2, state = ?, outcome = ?, finished_at = ?, attempts = ?,"
                    " lease_until = NULL, claim = NULL WHERE id = ? AND claim = ?",
                    [(f.state, f.outcome, now, f.attempts, f.id, f.claim) for f in by_kind["dead"]],
                ).rowcount
            if "release" in by_kind:
                changed += conn.executemany(
                    "UPDATE deliveries SET lease_until = NULL, claim = NULL WHERE id = ? AND claim = ?",
                    [(f.id, f.claim) for f in by_kind["release"]],
                ).rowcount
            return len(items) - changed

        refused: int = await self._write(run)
        return refused

    async def renew(self, tokens: Sequence[int], until: int) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE deliveries SET lease_until = ? WHERE status = 0 AND claim IN ("
                + ",".join("?" * len(tokens)) + ")",
                [until, *tokens],
            )

        if tokens:
            await self._write(run)

    async def next_due(self, now: int) -> Optional[int]:
        def run(conn: sqlite3.Connection) -> Optional[int]:
            row = conn.execute(
                "SELECT min(CASE WHEN lease_until IS NULL OR lease_until <= ? THEN due_at ELSE lease_until END)"
                " FROM deliveries WHERE status = 0",
                (now,),
            ).fetchone()
            return None if row is None or row[0] is None else int(row[0])

        result: Optional[int] = await self._read(run)
        return result

    async def purge(self, before: int) -> int:
        def run(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM deliveries WHERE status IN (1, 3) AND finished_at < ?", (before,)).rowcount

        result: int = await self._write(run)
        return result

    async def replay(self, now: int, message_ids: Sequence[str] = (), source: Optional[str] = None,
                     since: Optional[int] = None, until: Optional[int] = None,
                     include_delivered: bool = False) -> int:
        where, params = _replay_filter(message_ids, source, since, until, include_delivered)

        def run(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "UPDATE deliveries SET status = 0, due_at = ?, state = NULL, outcome = NULL, attempts = 0,"
                " finished_at = NULL, lease_until = NULL, claim = NULL WHERE " + where,
                [now, *params],
            ).rowcount

        result: int = await self._write(run)
        return result

    async def stats(self, now: int) -> Dict[str, Any]:
        result: Dict[str, Any] = await self._read(lambda conn: _stats(conn, now))
        return result

    async def dead_letters(self, limit: int) -> List[Dict[str, Any]]:
        rows = await self._read(lambda conn: conn.execute(DEAD_LETTERS_SQL, (limit,)).fetchall())
        return dead_letter_rows(rows)

    async def rejected(self, limit: int) -> List[Dict[str, Any]]:
        rows = await self._read(lambda conn: conn.execute(REJECTED_SQL, (limit,)).fetchall())
        return rejected_rows(rows)

    async def audience_state(self, source: str, audience: str) -> Optional[str]:
        def run(conn: sqlite3.Connection) -> Optional[str]:
            row = conn.execute(
                "SELECT state FROM audiences WHERE source = ? AND audience = ?", (source, audience)
            ).fetchone()
            return None if row is None else str(row[0])

        result: Optional[str] = await self._read(run)
        return result

    async def audience_sync(self, source: str, audience: str, state: str, rows: Sequence[Row], now: int) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute(
                "INSERT INTO audiences (source, audience, state, updated_at) VALUES (?,?,?,?)"
                " ON CONFLICT (source, audience) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                (source, audience, state, now),
            )
            return _insert_rows(conn, rows) if rows else 0

        result: int = await self._write(run, len(rows))
        return result


def _replay_filter(message_ids: Sequence[str], source: Optional[str], since: Optional[int], until: Optional[int],
                   include_delivered: bool, mark: str = "?") -> Tuple[str, List[Any]]:
    clauses = ["status IN (1, 2)" if include_delivered else "status = 2"]
    params: List[Any] = []
    if message_ids:
        clauses.append("message_id IN (" + ",".join([mark] * len(message_ids)) + ")")
        params += list(message_ids)
    if source is not None:
        clauses.append(f"source = {mark}")
        params.append(source)
    if since is not None:
        clauses.append(f"received_at >= {mark}")
        params.append(since)
    if until is not None:
        clauses.append(f"received_at < {mark}")
        params.append(until)
    return " AND ".join(clauses), params


def _stats(conn: Any, now: int) -> Dict[str, Any]:
    counts = {name: 0 for name in STATUS_NAMES.values()}
    for status, n in conn.execute("SELECT status, count(*) FROM deliveries GROUP BY status").fetchall():
        counts[STATUS_NAMES.get(int(status), str(status))] = int(n)
    oldest, next_due = conn.execute("SELECT min(received_at), min(due_at) FROM deliveries WHERE status = 0").fetchone()
    in_flight = conn.execute(
        "SELECT count(*) FROM deliveries WHERE status = 0 AND lease_until > ?", (now,)
    ).fetchone()[0]
    (rejected,) = conn.execute("SELECT count(*) FROM rejected").fetchone()
    return {
        "pending": counts["pending"],
        "in_flight": int(in_flight),
        "delivered": counts["delivered"],
        "dead": counts["dead"],
        "disabled": counts["disabled"],
        "rejected": int(rejected),
        "oldest_pending_received_at": None if oldest is None else int(oldest),
        "next_due_at": None if next_due is None else int(next_due),
        "oldest_pending_age_seconds": None if oldest is None else max(now - int(oldest), 0) / 1000,
    }


DEAD_LETTERS_SQL = ("SELECT source, message_id, kind, received_at, finished_at, attempts, outcome FROM deliveries"
                    " WHERE status = 2 ORDER BY received_at LIMIT ?")
REJECTED_SQL = "SELECT source, received_at, code, reason, text FROM rejected ORDER BY id DESC LIMIT ?"


def dead_letter_rows(rows: Sequence[Sequence[Any]]) -> List[Dict[str, Any]]:
    return [
        dict(source=r[0], message_id=r[1], kind=r[2], received_at=r[3], finished_at=r[4], attempts=r[5], outcome=r[6])
        for r in rows
    ]


def rejected_rows(rows: Sequence[Sequence[Any]]) -> List[Dict[str, Any]]:
    return [dict(source=r[0], received_at=r[1], code=r[2], reason=r[3], text=r[4]) for r in rows]


def open_store(database: str, *, synchronous: str = "FULL", metrics: Optional[Metrics] = None,
               exclusive: bool = True) -> Store:
    """The store for a ``database`` URL: ``sqlite:///path`` or
    ``postgresql://...``."""
    if database.startswith("sqlite://"):
        return SQLiteStore(sqlite_path(database), synchronous=synchronous, metrics=metrics, exclusive=exclusive)
    if database.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(database, metrics=metrics)
    raise ValueError(f"unsupported database URL {database!r}")
