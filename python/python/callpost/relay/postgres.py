"""The relay's store on Postgres: several relays, on one machine or many,
share one outbox.

The same tables and the same life for a call as on SQLite (store.py): one
transaction for whatever requests arrive together (group commit), each
request's calls in by ``COPY`` and one ``INSERT … SELECT`` whatever their
number, deduplicated by a unique constraint that holds across relays; one
claim for many (``FOR UPDATE SKIP LOCKED``, oldest due first, so relays
never wait for each other's rows); one finish for many (an ``UPDATE … FROM
unnest(…)`` checking each claim token, so a worker that outlived its lease
cannot overwrite the result of the worker that took over).

Leases last ``lease_seconds`` (20 s) and are renewed while a round runs: a
relay that dies has its deliveries taken over by the others within the
lease, and a new relay takes nothing from live ones. Relays on one
database need clocks in step (NTP), as every lease-based queue does.

psycopg 3 with its connection pool; the pool reconnects after Postgres
restarts. While Postgres is down, writes fail fast, ingest answers 503
(nothing acknowledged), ``/readyz`` says not ready, and the workers keep
trying.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple

from .metrics import Metrics
from .store import (
    DEAD_LETTERS_SQL,
    REJECTED_SQL,
    STATUS_NAMES,
    Claimed,
    Finish,
    RejectedRow,
    Row,
    Store,
    _replay_filter,
    dead_letter_rows,
    rejected_rows,
)

__all__ = ["PostgresStore", "MIGRATIONS"]

logger = logging.getLogger("callpost.relay")

# Numbered as store.MIGRATIONS; times are milliseconds since the epoch.
MIGRATIONS: List[Tuple[int, List[str]]] = [
    (1, [
        """CREATE TABLE deliveries (
            id BIGSERIAL PRIMARY KEY,
            source TEXT NOT NULL,
            message_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            message TEXT NOT NULL,
            received_at BIGINT NOT NULL,
            status SMALLINT NOT NULL,
            due_at BIGINT NOT NULL,
            lease_until BIGINT,
            claim BIGINT,
            state TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            outcome TEXT,
            finished_at BIGINT,
            UNIQUE (source, message_id)
        )""",
        "CREATE INDEX deliveries_due ON deliveries (due_at) WHERE status = 0",
        "CREATE INDEX deliveries_claim ON deliveries (claim) WHERE status = 0",
        "CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE status IN (1, 3)",
        "CREATE INDEX deliveries_dead ON deliveries (received_at) WHERE status = 2",
        """CREATE TABLE rejected (
            id BIGSERIAL PRIMARY KEY,
            source TEXT NOT NULL,
            received_at BIGINT NOT NULL,
            code TEXT NOT NULL,
            reason TEXT NOT NULL,
            text TEXT NOT NULL
        )""",
        "CREATE INDEX rejected_received ON rejected (received_at)",
        """CREATE TABLE audiences (
            source TEXT NOT NULL,
            audience TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (source, audience)
        )""",
    ]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
# Transactions in flight at once from one relay. One at a time (SQLite's
# only choice) held a relay to 5,400 calls/s: each transaction waits for
# its round trips and its commit's WAL flush, and Postgres flushes
# concurrent commits together. 4 gave 2x that on the benchmark, within the
# pool's 8 connections, which leave room for claims and reads.
_WRITERS = 4
# Deadlock detected, serialization failure: the transaction is run again,
# up to this many times in all.
_CONFLICTS = ("40P01", "40001")
_CONFLICT_TRIES = 5
# Any fixed number: the key of the advisory lock that lets one relay at a
# time run the migrations.
_MIGRATION_LOCK = 0x63616C6C706F7374

# Calls go in by COPY into a per-connection staging table, then one
# statement moves them into deliveries, skipping duplicates. A multi-row
# INSERT from unnest(text[]) was the first design: the calls' JSON, full of
# quotes, made its array literals cost 300 ms per 640 calls against 35-50
# ms this way (measured on the benchmark's batches).
_STAGE = (
    "CREATE TEMP TABLE IF NOT EXISTS ingest_stage (source TEXT, message_id TEXT, kind TEXT, message TEXT,"
    " received_at BIGINT, status SMALLINT, due_at BIGINT) ON COMMIT DELETE ROWS"
)
_COPY = "COPY ingest_stage FROM STDIN"
_MOVE = (
    "WITH staged AS (DELETE FROM ingest_stage RETURNING *)"
    " INSERT INTO deliveries (source, message_id, kind, message, received_at, status, due_at)"
    " SELECT * FROM staged ON CONFLICT (source, message_id) DO NOTHING"
)


async def _configure(conn: Any) -> None:
    await conn.execute(_STAGE)


class _Op:
    __slots__ = ("fn", "future", "calls")

    def __init__(self, fn: Callable[[Any], Awaitable[Any]], future: "asyncio.Future[Any]", calls: int) -> None:
        self.fn = fn
        self.future = future
        self.calls = calls


class PostgresStore(Store):
    """The store for several relays on one Postgres database."""

    def __init__(self, url: str, *, metrics: Optional[Metrics] = None, pool_size: int = 8) -> None:
        self.url = url
        self.metrics = metrics or Metrics()
        self.backlog = 0
        self.healthy = True
        self.migrated = (SCHEMA_VERSION, SCHEMA_VERSION)
        self._statements = self.metrics.statement_counter()
        self._ops: List[_Op] = []
        self._wake: Optional[asyncio.Event] = None
        self._writer: Optional["asyncio.Task[None]"] = None
        self._closing = False
        self._pool_size = pool_size
        self._pool: Any = None

    def _count(self, n: int = 1) -> None:
        self._statements[0] += n

    async def start(self) -> None:
        from psycopg_pool import AsyncConnectionPool

        # autocommit: transactions are explicit (conn.transaction()). A
        # connection attempt gives up after 5 s, and a request for a
        # connection after 5 s, so an unreachable database fails fast.
        self._pool = AsyncConnectionPool(
            self.url, min_size=2, max_size=self._pool_size, open=False, timeout=5,
            kwargs={"autocommit": True, "connect_timeout": 5}, reconnect_timeout=0, configure=_configure,
        )
        await self._pool.open(wait=True, timeout=30)
        self.migrated = await self._migrate()
        self._wake = asyncio.Event()
        self._writer = asyncio.create_task(self._write_loop(), name="callpost-relay-pg-writer")

    async def _migrate(self) -> Tuple[int, int]:
        async with self._pool.connection() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                await conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                cur = await conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
                row = await cur.fetchone()
                before = int(row[0]) if row else 0
                if before > SCHEMA_VERSION:
                    raise RuntimeError(
                        f"the database has schema version {before}, newer than this relay's {SCHEMA_VERSION}")
                for version, statements in MIGRATIONS:
                    if version > before:
                        for statement in statements:
                            await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))
        return before, SCHEMA_VERSION

    async def close(self) -> None:
        self._closing = True
        if self._writer is not None and self._wake is not None:
            self._wake.set()
            await self._writer
            self._writer = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # -- the writer: group commit ------------------------------------------

    async def _write_loop(self) -> None:
        assert self._wake is not None
        slots = asyncio.Semaphore(_WRITERS)
        running: "set[asyncio.Task[None]]" = set()

        async def commit(ops: List[_Op]) -> None:
            try:
                await self._commit(ops)
            finally:
                slots.release()

        while True:
            if not self._ops:
                if self._closing:
                    if running:
                        await asyncio.gather(*running)
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            await slots.acquire()
            # Whatever arrived while every writer was busy goes in one
            # transaction.
            ops, self._ops = self._ops, []
            task = asyncio.create_task(commit(ops))
            running.add(task)
            task.add_done_callback(running.discard)

    async def _commit(self, ops: List[_Op], tries: int = 1) -> None:
        started = time.perf_counter()
        try:
            async with self._pool.connection() as conn:
                async with conn.transaction():
                    self._count(2)  # BEGIN, COMMIT
                    results = [await op.fn(conn) for op in ops]
        except Exception as e:  # noqa: BLE001 - reported to each waiting caller
            if getattr(e, "sqlstate", None) in _CONFLICTS and tries < _CONFLICT_TRIES:
                # Transactions in flight together can deadlock (a finish
                # and a renewal locking the same rows in another order;
                # two requests resending the same calls). Postgres aborts
                # one; it runs again, whole. Before this, such a finish was
                # lost, and its call sent again when its lease ran out.
                self.metrics.conflicts += 1
                logger.info("a transaction was aborted by a conflict (%s); it runs again", getattr(e, "sqlstate", ""))
                await self._commit(ops, tries + 1)
                return
            if len(ops) > 1 and self.healthy:
                # One bad operation must not fail the others: each again, alone.
                for op in ops:
                    await self._commit([op])
                return
            if self.healthy:
                logger.warning("the database refused a write: %s", e)
            self.healthy = False
            for op in ops:
                self._settle(op, None, e)
            return
        self.healthy = True
        self.metrics.observe_commit(time.perf_counter() - started, sum(op.calls for op in ops))
        for op, result in zip(ops, results):
            self._settle(op, result, None)

    def _settle(self, op: _Op, result: Any, error: Optional[BaseException]) -> None:
        self.backlog -= op.calls
        if op.future.done():
            return
        if error is not None:
            op.future.set_exception(error)
        else:
            op.future.set_result(result)

    async def _write(self, fn: Callable[[Any], Awaitable[Any]], calls: int = 0) -> Any:
        if self._writer is None or self._wake is None:
            raise RuntimeError("the store is not running")
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self.backlog += calls
        self._ops.append(_Op(fn, future, calls))
        self._wake.set()
        return await future

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        async with self._pool.connection() as conn:
            self._count()
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall())

    # -- operations ---------------------------------------------------------

    async def _insert_rows(self, conn: Any, rows: Sequence[Row]) -> int:
        self._count(2)
        async with conn.cursor().copy(_COPY) as copy:
            for r in rows:
                await copy.write_row((r.source, r.message_id, r.kind, r.message, r.received_at, r.status,
                                      r.received_at))
        cur = await conn.execute(_MOVE)
        return max(int(cur.rowcount), 0)

    async def insert(self, rows: Sequence[Row], rejected: Sequence[RejectedRow], now: int) -> int:
        async def run(conn: Any) -> int:
            new = await self._insert_rows(conn, rows) if rows else 0
            if rejected:
                self._count()
                await conn.execute(
                    "INSERT INTO rejected (source, received_at, code, reason, text)"
                    " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[])",
                    ([r.source for r in rejected], [r.received_at for r in rejected], [r.code for r in rejected],
                     [r.reason for r in rejected], [r.text for r in rejected]),
                )
            return new

        result: int = await self._write(run, len(rows) + len(rejected))
        return result

    async def claim(self, now: int, limit: int, lease_ms: int) -> List[Claimed]:
        token = secrets.randbits(62)

        async def run(conn: Any) -> List[Claimed]:
            self._count()
            cur = await conn.execute(
                "UPDATE deliveries SET lease_until = %s, claim = %s WHERE id IN ("
                " SELECT id FROM deliveries WHERE status = 0 AND due_at <= %s"
                " AND (lease_until IS NULL OR lease_until <= %s) ORDER BY due_at LIMIT %s"
                " FOR UPDATE SKIP LOCKED)"
                " RETURNING id, source, message_id, message, state, attempts",
                (now + lease_ms, token, now, now, limit),
            )
            return [Claimed(r[0], token, r[1], r[2], r[3], r[4], r[5]) for r in await cur.fetchall()]

        result: List[Claimed] = await self._write(run)
        return result

    async def finish(self, items: Sequence[Finish], now: int) -> int:
        async def run(conn: Any) -> int:
            changed = 0
            by_kind: Dict[str, List[Finish]] = {}
            for f in items:
                by_kind.setdefault(f.kind, []).append(f)
            if "delivered" in by_kind:
                fs = by_kind["delivered"]
                self._count()
                cur = await conn.execute(
                    "UPDATE deliveries d SET status = 1, finished_at = %s, attempts = f.attempts, state = NULL,"
                    " lease_until = NULL, claim = NULL"
                    " FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) AS f(id, claim, attempts)"
                    " WHERE d.id = f.id AND d.claim = f.claim",
                    (now, [f.id for f in fs], [f.claim for f in fs], [f.attempts for f in fs]),
                )
                changed += cur.rowcount
            if "retry" in by_kind:
                fs = by_kind["retry"]
                self._count()
                cur = await conn.execute(
                    "UPDATE deliveries d SET state = f.state, due_at = f.due_at, attempts = f.attempts,"
                    " lease_until = NULL, claim = NULL"
                    " FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::text[], %s::bigint[])"
                    " AS f(id, claim, attempts, state, due_at) WHERE d.id = f.id AND d.claim = f.claim",
                    ([f.id for f in fs], [f.claim for f in fs], [f.attempts for f in fs], [f.state for f in fs],
                     [f.due_at for f in fs]),
                )
                changed += cur.rowcount
            if "dead" in by_kind:
                fs = by_kind["dead"]
                self._count()
                cur = await conn.execute(
                    "UPDATE deliveries d SET status = 2, state = f.state, outcome = f.outcome, finished_at = %s,"
                    " attempts = f.attempts, lease_until = NULL, claim = NULL"
                    " FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::text[], %s::text[])"
                    " AS f(id, claim, attempts, state, outcome) WHERE d.id = f.id AND d.claim = f.claim",
                    (now, [f.id for f in fs], [f.claim for f in fs], [f.attempts for f in fs],
                     [f.state for f in fs], [f.outcome for f in fs]),
                )
                changed += cur.rowcount
            if "release" in by_kind:
                fs = by_kind["release"]
                self._count()
                cur = await conn.execute(
                    "UPDATE deliveries d SET lease_until = NULL, claim = NULL"
                    " FROM unnest(%s::bigint[], %s::bigint[]) AS f(id, claim)"
                    " WHERE d.id = f.id AND d.claim = f.claim",
                    ([f.id for f in fs], [f.claim for f in fs]),
                )
                changed += cur.rowcount
            return len(items) - changed

        refused: int = await self._write(run)
        return refused

    async def renew(self, tokens: Sequence[int], until: int) -> None:
        async def run(conn: Any) -> None:
            self._count()
            await conn.execute("UPDATE deliveries SET lease_until = %s WHERE status = 0 AND claim = ANY(%s::bigint[])",
                               (until, list(tokens)))

        if tokens:
            await self._write(run)

    async def next_due(self, now: int) -> Optional[int]:
        rows = await self._read(
            "SELECT min(CASE WHEN lease_until IS NULL OR lease_until <= %s THEN due_at ELSE lease_until END)"
            " FROM deliveries WHERE status = 0", (now,))
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    async def purge(self, before: int) -> int:
        async def run(conn: Any) -> int:
            self._count()
            cur = await conn.execute("DELETE FROM deliveries WHERE status IN (1, 3) AND finished_at < %s", (before,))
            return int(cur.rowcount)

        result: int = await self._write(run)
        return result

    async def replay(self, now: int, message_ids: Sequence[str] = (), source: Optional[str] = None,
                     since: Optional[int] = None, until: Optional[int] = None,
                     include_delivered: bool = False) -> int:
        where, params = _replay_filter(message_ids, source, since, until, include_delivered, mark="%s")

        async def run(conn: Any) -> int:
            self._count()
            cur = await conn.execute(
                "UPDATE deliveries SET status = 0, due_at = %s, state = NULL, outcome = NULL, attempts = 0,"
                " finished_at = NULL, lease_until = NULL, claim = NULL WHERE " + where, [now, *params])
            return int(cur.rowcount)

        result: int = await self._write(run)
        return result

    async def stats(self, now: int) -> Dict[str, Any]:
        async with self._pool.connection() as conn:
            return await _stats_pg(conn, now, self._count)

    async def dead_letters(self, limit: int) -> List[Dict[str, Any]]:
        return dead_letter_rows(await self._read(DEAD_LETTERS_SQL.replace("?", "%s"), (limit,)))

    async def rejected(self, limit: int) -> List[Dict[str, Any]]:
        return rejected_rows(await self._read(REJECTED_SQL.replace("?", "%s"), (limit,)))

    async def audience_state(self, source: str, audience: str) -> Optional[str]:
        rows = await self._read("SELECT state FROM audiences WHERE source = %s AND audience = %s", (source, audience))
        return None if not rows else str(rows[0][0])

    async def audience_sync(self, source: str, audience: str, state: str, rows: Sequence[Row], now: int) -> int:
        async def run(conn: Any) -> int:
            self._count()
            await conn.execute(
                "INSERT INTO audiences (source, audience, state, updated_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (source, audience) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                (source, audience, state, now))
            return await self._insert_rows(conn, rows) if rows else 0

        result: int = await self._write(run, len(rows))
        return result


async def _stats_pg(conn: Any, now: int, count: Callable[[int], None]) -> Dict[str, Any]:
    count(3)
    counts = {name: 0 for name in STATUS_NAMES.values()}
    cur = await conn.execute("SELECT status, count(*) FROM deliveries GROUP BY status")
    for status, n in await cur.fetchall():
        counts[STATUS_NAMES.get(int(status), str(status))] = int(n)
    cur = await conn.execute(
        "SELECT min(received_at), min(due_at), count(*) FILTER (WHERE lease_until > %s) FROM deliveries WHERE status = 0",
        (now,))
    oldest, next_due, in_flight = await cur.fetchone()
    cur = await conn.execute("SELECT count(*) FROM rejected")
    (rejected,) = await cur.fetchone()
    return {
        "pending": counts["pending"],
        "in_flight": int(in_flight or 0),
        "delivered": counts["delivered"],
        "dead": counts["dead"],
        "disabled": counts["disabled"],
        "rejected": int(rejected),
        "oldest_pending_received_at": None if oldest is None else int(oldest),
        "next_due_at": None if next_due is None else int(next_due),
        "oldest_pending_age_seconds": None if oldest is None else max(now - int(oldest), 0) / 1000,
    }
