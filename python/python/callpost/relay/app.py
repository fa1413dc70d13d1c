"""The relay as an ASGI application: Segment's Tracking API, probes,
metrics and the admin endpoints, over one store and one set of delivery
workers.

The application is raw ASGI (no framework): the hot path is one request
in, one core call (``parse_request``), one group-committed insert, one
answer. Every rule of the Tracking API (routes, limits, write keys,
enrichment, the answers' codes and statuses) is the core's.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import urllib.parse
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from .. import _callpost
from .._errors import CallpostError
from .clock import Clock
from .config import RelayConfig
from .deliver import Deliverer
from .metrics import Metrics
from .ops import delete_user, replay, status, sync_audience
from .store import DISABLED, PENDING, RejectedRow, Row, Store, open_store

__all__ = ["Relay"]

logger = logging.getLogger("callpost.relay")

Scope = Dict[str, Any]
Receive = Callable[[], Awaitable[Dict[str, Any]]]
Send = Callable[[Dict[str, Any]], Awaitable[None]]

_JSON = (b"content-type", b"application/json")
_SUCCESS = _callpost.SUCCESS_BODY.encode()
_MAX_BODY = _callpost.MAX_REQUEST_BYTES
# Deletes delivered calls past the retention once an hour.
_PURGE_EVERY_S = 3600
# The longest an attempt takes: in-flight rounds get this long to end at
# shutdown before they are given back.
_GRACE_S = _callpost.DEFAULTS["webhook_timeout_ms"] / 1000 + 1


def _header(scope: Scope, name: bytes) -> Optional[str]:
    for k, v in scope["headers"]:
        if k == name:
            return str(v.decode("latin-1"))
    return None


def _parse_time(value: Any, what: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _callpost.parse_timestamp(value)
    raise ValueError(f"{what} must be an ISO 8601 time or milliseconds")


class Relay:
    """The relay: ``await relay.start()``, serve it as an ASGI app (its
    lifespan starts and stops it too), ``await relay.stop()``."""

    def __init__(self, cfg: RelayConfig, *, store: Optional[Store] = None, clock: Optional[Clock] = None) -> None:
        self.cfg = cfg
        self.clock = clock or Clock(cfg.clock_offset_ms)
        self.metrics = Metrics()
        self.store = store or open_store(cfg.database, synchronous=cfg.synchronous, metrics=self.metrics)
        self.write_keys = cfg.write_keys()
        self.sources = {s.name: s for s in cfg.sources}
        self.deliverer = Deliverer(
            self.store,
            {s.name: s.settings() for s in cfg.sources if s.has_destination},
            self.clock,
            self.metrics,
            concurrency=cfg.delivery_concurrency,
            lease_ms=cfg.lease_seconds * 1000,
            allow_private_networks=cfg.allow_private_networks,
            ca_file=cfg.ca_file,
        )
        self.ready = False
        self.stopping = False
        self._purger: Optional["asyncio.Task[None]"] = None
        self._audience_locks: Dict[Tuple[str, str], asyncio.Lock] = {}
        self._routes: Dict[Tuple[str, str], Callable[[Scope, Receive, Send], Awaitable[None]]] = {
            ("GET", "/healthz"): self._healthz,
            ("GET", "/readyz"): self._readyz,
            ("GET", "/metrics"): self._metrics,
            ("GET", "/admin/status"): self._admin(self._status),
            ("GET", "/admin/dead-letters"): self._admin(self._dead_letters),
            ("GET", "/admin/rejected"): self._admin(self._rejected),
            ("POST", "/admin/delete"): self._admin(self._delete),
            ("POST", "/admin/audiences"): self._admin(self._audience),
            ("POST", "/admin/replay"): self._admin(self._replay),
            ("POST", "/admin/test/clock"): self._admin(self._test_clock),
        }

    # -- life -------------------------------------------------------------

    async def start(self) -> None:
        await self.store.start()
        if self.cfg.deliver:
            await self.deliverer.start()
        self._purger = asyncio.create_task(self._purge_loop(), name="callpost-relay-purge")
        self.ready = True
        logger.info("relay started: %d source(s), database %s, synchronous=%s", len(self.sources),
                    self.cfg.database.split("@")[-1], self.cfg.synchronous)

    async def stop(self) -> None:
        """Stops taking calls, lets the attempts in flight end (or gives
        them back), commits what is queued, and closes the store."""
        self.ready = False
        self.stopping = True
        if self._purger is not None:
            self._purger.cancel()
        await self.deliverer.stop(_GRACE_S)
        await self.store.close()
        logger.info("relay stopped")

    async def _purge_loop(self) -> None:
        while True:
            try:
                cutoff = self.clock.now_ms() - self.cfg.retention_hours * 3_600_000
                n = await self.store.purge(cutoff)
                if n:
                    logger.info("deleted %d delivered calls older than %d h (retention_hours)", n,
                                self.cfg.retention_hours)
            except Exception:  # noqa: BLE001 - try again next time
                logger.exception("purging delivered calls failed")
            await asyncio.sleep(_PURGE_EVERY_S)

    # -- ASGI ---------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        method = scope["method"]
        if path.startswith("/v1/"):
            if method == "POST":
                await self._ingest(scope, receive, send)
            elif method == "OPTIONS":
                await self._preflight(scope, send)
            else:
                await self._answer(send, 405, b'{"code":"method_not_allowed","message":"use POST"}',
                                   self._cors(scope) + [(b"allow", b"POST, OPTIONS")])
            return
        route = self._routes.get((method, path))
        if route is None:
            await self._answer(send, 404, b'{"code":"not_found","message":"no such endpoint"}')
            return
        await route(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as e:  # noqa: BLE001 - reported to the server, which exits
                    logger.exception("relay failed to start")
                    await send({"type": "lifespan.startup.failed", "message": str(e)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @staticmethod
    async def _answer(send: Send, status: int, body: bytes, headers: Optional[List[Tuple[bytes, bytes]]] = None,
                      content_type: Tuple[bytes, bytes] = _JSON) -> None:
        await send({
            "type": "http.response.start",
            "status": status,
            "headers": [content_type, (b"content-length", str(len(body)).encode()), *(headers or [])],
        })
        await send({"type": "http.response.body", "body": body})

    # -- the Tracking API ---------------------------------------------------

    def _cors(self, scope: Scope) -> List[Tuple[bytes, bytes]]:
        origins = self.cfg.cors_origins
        origin = _header(scope, b"origin")
        if origin is None:
            return []
        if "*" in origins:
            return [(b"access-control-allow-origin", b"*")]
        if origin in origins:
            return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
        return []

    async def _preflight(self, scope: Scope, send: Send) -> None:
        cors = self._cors(scope)
        if not cors:
            await self._answer(send, 403, b'{"code":"cors","message":"origin not allowed"}')
            return
        requested = _header(scope, b"access-control-request-headers") or "content-type"
        await self._answer(send, 204, b"", cors + [
            (b"access-control-allow-methods", b"POST, OPTIONS"),
            (b"access-control-allow-headers", requested.encode("latin-1")),
            (b"access-control-max-age", b"86400"),
        ])

    async def _refuse(self, scope: Scope, send: Send, error: BaseException) -> None:
        status = int(getattr(error, "status", 400))
        code = getattr(error, "code", "invalid_batch")
        body = json.dumps({"code": code, "message": str(error)}).encode()
        headers = self._cors(scope)
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            headers.append((b"retry-after", str(retry_after).encode()))
        self.metrics.request(status)
        await self._answer(send, status, body, headers)

    async def _read_body(self, receive: Receive) -> Optional[bytes]:
        """The request body, or None past the limit (not read further)."""
        chunks: List[bytes] = []
        size = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > _MAX_BODY:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _ingest(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.ready:
            await self._refuse(scope, send, _callpost.ingest_refusal("unavailable"))
            return
        try:
            length = _header(scope, b"content-length")
            gzip = _callpost.check_headers(
                _header(scope, b"content-type"), _header(scope, b"content-encoding"),
                int(length) if length and length.isdigit() else None,
            )
        except CallpostError as e:
            await self._refuse(scope, send, e)
            return
        if self.store.backlog > self.cfg.max_backlog:
            await self._refuse(scope, send, _callpost.ingest_refusal("overloaded"))
            return
        body = await self._read_body(receive)
        if body is None:
            await self._refuse(scope, send, _callpost.ingest_refusal("batch_too_large"))
            return
        now = self.clock.now_ms()
        try:
            if gzip:
                body = _callpost.inflate(body)
            parsed = _callpost.parse_request(scope["path"], body, self.write_keys, now,
                                             _header(scope, b"authorization"))
        except CallpostError as e:
            await self._refuse(scope, send, e)
            return
        source = parsed.source
        routed = source in self.deliverer.settings
        rows = [
            Row(source, a.message_id, a.kind, a.message, now, PENDING if routed and a.webhooks_enabled else DISABLED)
            for a in parsed.accepted
        ]
        rejected = [RejectedRow(source, now, r.code, r.reason, r.text) for r in parsed.rejected]
        try:
            new = await self.store.insert(rows, rejected, now)
        except Exception:  # noqa: BLE001 - not stored, so not acknowledged
            logger.exception("storing a batch failed; answered 503")
            await self._refuse(scope, send, _callpost.ingest_refusal("unavailable"))
            return
        self.metrics.call(source, "accepted", new)
        if len(rows) > new:
            self.metrics.call(source, "duplicate", len(rows) - new)
        for r in parsed.rejected:
            self.metrics.call(source, "rejected", 1, r.code)
        if new:
            self.deliverer.wake()
        self.metrics.request(200)
        await self._answer(send, 200, _SUCCESS, self._cors(scope))

    # -- probes and metrics ------------------------------------------------

    async def _healthz(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(send, 200, b'{"status":"ok"}')

    async def _readyz(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.ready and self.store.healthy and self.store.backlog <= self.cfg.max_backlog:
            await self._answer(send, 200, b'{"status":"ready"}')
        else:
            await self._answer(send, 503, b'{"status":"not ready"}')

    async def _metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            stats: Optional[Dict[str, Any]] = await self.store.stats(self.clock.now_ms())
        except Exception:  # noqa: BLE001 - the counters are still worth serving
            logger.exception("reading queue stats for /metrics failed")
            stats = None
        text = self.metrics.render(stats, self.store.backlog).encode()
        await self._answer(send, 200, text, content_type=(b"content-type", b"text/plain; version=0.0.4"))

    # -- admin --------------------------------------------------------------

    def _admin(self, handler: Callable[[Dict[str, Any], Dict[str, str]], Awaitable[Tuple[int, Any]]]
               ) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
        async def run(scope: Scope, receive: Receive, send: Send) -> None:
            token = self.cfg.admin_token
            if not token:
                await self._answer(send, 403, b'{"code":"admin_disabled","message":"set admin_token to use the admin API"}')
                return
            auth = _header(scope, b"authorization") or ""
            given = auth[7:] if auth[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), str(token).encode()):
                await self._answer(send, 401, b'{"code":"unauthorized","message":"admin token required"}',
                                   [(b"www-authenticate", b"Bearer")])
                return
            raw = await self._read_body(receive)
            try:
                payload = json.loads(raw) if raw else {}
                if not isinstance(payload, dict):
                    raise ValueError("the body must be a JSON object")
                query = dict(urllib.parse.parse_qsl(scope.get("query_string", b"").decode("latin-1")))
                status_code, result = await handler(payload, query)
            except (ValueError, CallpostError) as e:
                code = getattr(e, "code", "invalid_argument")
                await self._answer(send, 400, json.dumps({"code": code, "message": str(e)}).encode())
                return
            await self._answer(send, status_code, json.dumps(result).encode())

        return run

    async def _status(self, payload: Dict[str, Any], query: Dict[str, str]) -> Tuple[int, Any]:
        return 200, await status(self.store, self.clock)

    async def _dead_letters(self, payload: Dict[str, Any], query: Dict[str, str]) -> Tuple[int, Any]:
        return 200, await self.store.dead_letters(int(query.get("limit", "100")))

    async def _rejected(self, payload: Dict[str, Any], query: Dict[str, str]) -> Tuple[int, Any]:
        return 200, await self.store.rejected(int(query.get("limit", "100")))

    async def _delete(self, payload: Dict[str, Any], query: Dict[str, str]) -> Tuple[int, Any]:
        user_id = payload.get("userId")
        if not isinstance(user_id, str) or not user_id:
            raise ValueError("userId must be a non-empty string")
        sources = await delete_user(self.store, self.cfg, self.clock, user_id)
        self.deliverer.wake()
        return 200, {"sources": sources}

    async def _audience(self, payload: Dict[str, Any], query: Dict[str, str]) -> Tuple[int, Any]:
        source, audience, members = payload.get("source"), payload.get("audience"), payload.get("members")
        if not isinstance(source, str) or source not in self.sources:
            raise ValueError("source must name a configured source")
        if not isinstance(audience, str):
            raise ValueError("audience must be a string")
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise ValueError("members must be a list of user ids")
        # Syncs of one audience must not interleave: each reads the state
        # the previous one stored.
        lock = self._audience_locks.setdefault((source, audience), asyncio.Lock())
        async with lock:
            n = await sync_audience(self.store, self.cfg, self.clock, source, audience, members)
        self.deliverer.wake()
        return 200, {"calls": n}

    async def _replay(self, payload: Dict[str, Any], query: Dict[str, str]) -> Tuple[int, Any]:
        ids = payload.get("messageIds", [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("messageIds must be a list of strings")
        source = payload.get("source")
        if source is not None and not isinstance(source, str):
            raise ValueError("source must be a string")
        n = await replay(self.store, self.clock, message_ids=ids, source=source,
                         since=_parse_time(payload.get("since"), "since"),
                         until=_parse_time(payload.get("until"), "until"),
                         include_delivered=bool(payload.get("includeDelivered", False)))
        self.deliverer.wake()
        return 200, {"replayed": n}

    async def _test_clock(self, payload: Dict[str, Any], query: Dict[str, str]) -> Tuple[int, Any]:
        if not self.cfg.test_clock:
            return 404, {"code": "not_found", "message": "start the relay with --test-clock to move its clock"}
        offset = payload.get("offsetMs")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError("offsetMs must be a non-negative integer")
        self.clock.offset_ms = offset
        self.deliverer.wake()
        return 200, {"offsetMs": offset, "nowMs": self.clock.now_ms()}
