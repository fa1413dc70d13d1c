"""Delivery workers: claim due deliveries, run a round through the core's
``Delivery``, store what happened.

A claimed delivery is restored from its saved state (or started from the
stored message), and the core's step loop (``_delivery_steps``, the same
one ``Webhooks.deliver`` runs) says what to send; every rule about rounds,
retries, Retry-After and giving up is the core's. Here: the HTTP (aiohttp,
measured against httpx at 4-6k against 0.2-0.3k POSTs/s on this machine;
BENCHMARKS.md) and the bookkeeping. When the loop wants to wait, the
delivery's state goes back to the store with its next wake-up time; when
it ends, the delivery is finished or becomes a dead letter.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
from typing import Any, Dict, List, Optional, Set, Tuple

import aiohttp
from aiohttp.abc import AbstractResolver

from .. import _callpost
from .._errors import CallpostError
from .._io import _delivery_steps
from .clock import Clock
from .metrics import Metrics
from .store import Claimed, Finish, Store

__all__ = ["Deliverer"]

logger = logging.getLogger("callpost.relay")

# Claims per statement: a handful of round trips to the writer per second
# at the benchmark's delivery rate.
_CLAIM_BATCH = 256
# The longest the worker sleeps without looking at the store again: rows a
# CLI replay or another relay made due are picked up within this.
_IDLE_POLL_S = 1.0
# A receiver's answer body is read (to reuse the connection) up to this
# much; past it the connection is dropped instead.
_ANSWER_BYTES = 64 * 1024


class PublicResolver(AbstractResolver):
    """Resolves names like aiohttp's default resolver, and keeps only the
    public addresses (the core's rule): a destination name that resolves to
    a private or loopback address fails to connect, whenever it resolves
    there."""

    def __init__(self) -> None:
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> List[Any]:
        infos = await self._inner.resolve(host, port, family)
        public = [i for i in infos if _callpost.is_public_address(str(i["host"]).split("%")[0])]
        if not public:
            raise OSError(f"{host} resolves only to private or loopback addresses (allow_private_networks is off)")
        return public

    async def close(self) -> None:
        await self._inner.close()


def _report_error(exc: BaseException) -> Dict[str, str]:
    """An aiohttp failure as the core's outcome kinds."""
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return dict(error="timeout", message=type(exc).__name__)
    cur: Optional[BaseException] = exc
    while cur is not None:
        if isinstance(cur, (ssl.SSLError, aiohttp.ClientSSLError, ssl.CertificateError)):
            return dict(error="tls", message=str(cur))
        cur = cur.__cause__ or cur.__context__
    return dict(error="connection", message=f"{type(exc).__name__}: {exc}")


def _outcome(d: "_callpost.Delivery", outcome: Dict[str, Any]) -> Dict[str, Any]:
    """The step loop's result for the relay: the core's outcome as it is
    (the log is read only for dead letters)."""
    return outcome


def _result_class(report: Dict[str, Any]) -> str:
    if "status" in report:
        return f"{int(report['status']) // 100}xx"
    return str(report["error"])


class Deliverer:
    """Runs the deliveries of every source: claims, sends, finishes."""

    def __init__(
        self,
        store: Store,
        settings: Dict[str, "_callpost.Webhooks"],
        clock: Clock,
        metrics: Metrics,
        *,
        concurrency: int,
        lease_ms: int,
        allow_private_networks: bool = False,
        ca_file: Optional[str] = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.allow_private_networks = allow_private_networks
        self.ca_file = ca_file
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._held: Dict[int, Claimed] = {}
        self._main: Optional["asyncio.Task[None]"] = None
        self._renewer: Optional["asyncio.Task[None]"] = None
        self._session: Optional[aiohttp.ClientSession] = None
        # Deliveries that ended in one turn of the event loop are stored
        # with one call to the store.
        self._finishing: List[Finish] = []
        self._finished: Optional["asyncio.Future[None]"] = None

    def wake(self) -> None:
        """New calls were stored, or the clock moved: look for due work now."""
        self._wake.set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def start(self) -> None:
        context = ssl.create_default_context(cafile=self.ca_file)
        connector = aiohttp.TCPConnector(
            limit=self.concurrency * 2,
            ssl=context,
            resolver=None if self.allow_private_networks else PublicResolver(),
            ttl_dns_cache=10,
        )
        # No proxies from the environment: the relay posts where it is told.
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                              skip_auto_headers=("User-Agent",))
        self._main = asyncio.create_task(self._run(), name="callpost-relay-deliveries")
        self._renewer = asyncio.create_task(self._renew_leases(), name="callpost-relay-leases")

    async def stop(self, grace_s: float) -> None:
        """Stops claiming; waits up to ``grace_s`` for the attempts in
        flight to end and be stored, then gives the rest back (released:
        another start or relay makes them again at once)."""
        self._stopping = True
        self._wake.set()
        if self._main is None:
            return
        await self._main
        if self._renewer is not None:
            self._renewer.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        if self._held:
            held = list(self._held.values())
            self._held.clear()
            await self.store.finish([Finish("release", c.id, c.claim) for c in held], self.clock.now_ms())
            logger.info("released %d deliveries in flight at shutdown; they are sent again at the next start", len(held))
        if self._session is not None:
            await self._session.close()

    async def _run(self) -> None:
        while not self._stopping:
            free = self.concurrency - len(self._tasks)
            if free <= 0:
                await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
                continue
            now = self.clock.now_ms()
            want = min(free, _CLAIM_BATCH)
            try:
                rows = await self.store.claim(now, want, self.lease_ms)
            except Exception:  # noqa: BLE001 - the store may come back; keep the loop alive
                logger.exception("claiming deliveries failed; trying again in 1 s")
                await asyncio.sleep(1)
                continue
            for row in rows:
                self._held[row.id] = row
                task = asyncio.create_task(self._deliver(row))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if len(rows) == want:
                continue
            self._wake.clear()
            try:
                due = await self.store.next_due(now)
            except Exception:  # noqa: BLE001
                due = None
            delay = _IDLE_POLL_S if due is None else min(max(due - now, 0) / 1000, _IDLE_POLL_S)
            if delay > 0 and not self._stopping:
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except asyncio.TimeoutError:
                    pass

    def _delivery(self, row: Claimed, settings: "_callpost.Webhooks") -> "_callpost.Delivery":
        if row.state is not None:
            try:
                return _callpost.Delivery.from_json(row.state, settings)
            except CallpostError as e:
                # The source's endpoints changed since the state was saved:
                # the call starts again with the settings it has now.
                logger.warning("delivery %s of source %s restarts with the current settings: %s",
                               row.message_id, row.source, e)
        return _callpost.Delivery(settings, row.message, self.clock.now_ms())

    async def _deliver(self, row: Claimed) -> None:
        try:
            finish = await self._round(row)
        except Exception as e:  # noqa: BLE001 - one delivery must not stop the others
            logger.exception("delivery %s of source %s failed in the relay; it is retried", row.message_id, row.source)
            finish = Finish("retry", row.id, row.claim, row.attempts, row.state,
                            due_at=self.clock.now_ms() + 60_000)
            del e
        try:
            await self._store_finish(finish)
        except Exception:  # noqa: BLE001
            logger.exception("storing the end of delivery %s failed; its lease runs out and it is made again",
                             row.message_id)
        self._held.pop(row.id, None)

    def _store_finish(self, finish: Finish) -> "asyncio.Future[None]":
        self._finishing.append(finish)
        if self._finished is None:
            loop = asyncio.get_running_loop()
            self._finished = loop.create_future()
            loop.call_soon(self._flush_finishes)
        return self._finished

    def _flush_finishes(self) -> None:
        items, self._finishing = self._finishing, []
        done, self._finished = self._finished, None
        assert done is not None

        def settle(task: "asyncio.Task[int]") -> None:
            if task.cancelled():
                done.cancel()
            elif task.exception() is not None:
                done.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                refused = task.result()
                if refused:
                    # A worker that outlived its lease (stopped, partitioned):
                    # another holder owns these now, and its result stands.
                    self.metrics.stale_finishes += refused
                    logger.warning("%d delivery results refused: their lease had passed to another worker", refused)
                done.set_result(None)

        asyncio.ensure_future(self.store.finish(items, self.clock.now_ms())).add_done_callback(settle)

    async def _renew_leases(self) -> None:
        """Keeps the leases of the deliveries in flight, so none is taken
        over while its round still runs (a receiver that takes its full
        5 s, several endpoints in failover order)."""
        while not self._stopping:
            await asyncio.sleep(self.lease_ms / 4000)
            tokens = sorted({c.claim for c in self._held.values()})
            if tokens:
                try:
                    await self.store.renew(tokens, self.clock.now_ms() + self.lease_ms)
                except Exception:  # noqa: BLE001 - the leases then run out, and the work is redone
                    logger.exception("renewing %d leases failed", len(tokens))

    async def _round(self, row: Claimed) -> Finish:
        settings = self.settings.get(row.source)
        if settings is None:
            logger.warning("source %s has no destination now; delivery %s waits an hour", row.source, row.message_id)
            return Finish("retry", row.id, row.claim, row.attempts, row.state, due_at=self.clock.now_ms() + 3_600_000)
        try:
            d = self._delivery(row, settings)
        except CallpostError as e:
            self.metrics.delivery("dead")
            return Finish("dead", row.id, row.claim, row.attempts, None,
                          outcome=json.dumps({"kind": "gave_up", "reason": e.code, "message": str(e)}))
        steps = _delivery_steps(d, self.clock.now_ms, _outcome)
        reply: Any = None
        attempts = row.attempts
        while True:
            try:
                kind, arg = steps.send(reply)
            except StopIteration as stop:
                outcome: Dict[str, Any] = stop.value
                if outcome["kind"] in ("delivered", "disabled"):
                    self.metrics.delivery(outcome["kind"])
                    return Finish("delivered", row.id, row.claim, attempts)
                self.metrics.delivery("dead")
                logger.warning("delivery %s of source %s gave up (%s); it is a dead letter", row.message_id,
                               row.source, outcome.get("reason"))
                record = json.dumps({**outcome, "message": d.error_message, "log": d.log})
                return Finish("dead", row.id, row.claim, attempts, d.to_json(), outcome=record)
            if kind == "send":
                attempts += len(arg)
                if len(arg) == 1:
                    reply = [await self._send(*arg[0])]
                else:
                    reply = list(await asyncio.gather(*(self._send(*s) for s in arg)))
            else:
                due = d.poll_timeout()
                return Finish("retry", row.id, row.claim, attempts, d.to_json(),
                              due_at=self.clock.now_ms() if due is None else due)

    async def _send(self, key: int, req: "_callpost.Request", deadline_ms: int) -> Tuple[int, int, Dict[str, Any]]:
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=max(deadline_ms - self.clock.now_ms(), 1) / 1000)
        report: Dict[str, Any]
        try:
            async with self._session.post(req.url, data=req.body, headers=req.headers, allow_redirects=False,
                                          timeout=timeout) as r:
                report = dict(status=r.status, retry_after=r.headers.get("Retry-After"))
                # Read the answer (up to a limit) so the connection is reused.
                if r.content_length is not None and r.content_length <= _ANSWER_BYTES:
                    await r.read()
                else:
                    seen = 0
                    async for chunk in r.content.iter_chunked(16 * 1024):
                        seen += len(chunk)
                        if seen > _ANSWER_BYTES:
                            r.close()
                            break
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome for the core
            report = _report_error(exc)
        self.metrics.attempt(_result_class(report))
        return key, self.clock.now_ms(), report
