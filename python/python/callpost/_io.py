"""The I/O loops around the core's state machines, over httpx.

Each loop is short: poll the core, send, report the outcome, sleep until
``poll_timeout()``. No retry, batching or failover rule lives here; those are
in the Rust core, shared with the JavaScript package.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import ssl
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import httpx

from . import _callpost
from ._errors import DeliveryError

__all__ = ["Webhooks", "DeliveryResult", "Client", "AsyncClient"]

logger = logging.getLogger("callpost")

# The spec's diagnostics switch: DEBUG=analytics turns on runtime logging.
if "analytics" in os.environ.get("DEBUG", "").split(","):
    logging.basicConfig()
    logger.setLevel(logging.DEBUG)

Endpoint = Union[str, Mapping[str, Any]]
Call = Union[Mapping[str, Any], str, bytes]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


def _error_kind(exc: BaseException) -> Tuple[str, str]:
    """Maps an httpx failure to the core's outcome kinds."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", type(exc).__name__
    cur: Optional[BaseException] = exc
    while cur is not None:
        if isinstance(cur, ssl.SSLError):
            return "tls", str(cur)
        cur = cur.__cause__ or cur.__context__
    return "connection", f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class DeliveryResult:
    """How a delivery ended. ``delivered`` is False only when the call's
    ``integrations`` turned Webhooks off (nothing was sent)."""

    delivered: bool
    endpoint: Optional[int]
    attempts: int
    log: List[Dict[str, Any]] = field(default_factory=list)


def _finish(d: "_callpost.Delivery", outcome: Dict[str, Any]) -> DeliveryResult:
    kind = outcome["kind"]
    log = d.log
    if kind == "delivered":
        return DeliveryResult(True, outcome["endpoint"], outcome["attempt"], log)
    if kind == "disabled":
        return DeliveryResult(False, None, 0, log)
    last = outcome.get("last") or {}
    raise DeliveryError(
        outcome["reason"],
        f"delivery gave up after {outcome['attempts']} attempts ({outcome['reason']}); last: {last.get('kind')}",
        outcome,
        log,
    )


class Webhooks:
    """The Webhooks destination: settings, signed requests, and delivery.

    ``endpoints`` is a list of 1 to 5 URLs or ``{"url": ..., "headers": {...}}``
    dicts, tried in order. Bad settings raise :class:`SettingsError` here.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        shared_secret: Union[str, bytes, None] = None,
        *,
        timeout: float = 5.0,
        retry_window: float = 4 * 3600.0,
        backoff_base: float = 10.0,
        backoff_cap: float = 1800.0,
    ) -> None:
        self._native = _callpost.Webhooks(endpoints, shared_secret)
        self._timing = dict(
            timeout_ms=int(timeout * 1000),
            retry_window_ms=int(retry_window * 1000),
            backoff_base_ms=int(backoff_base * 1000),
            backoff_cap_ms=int(backoff_cap * 1000),
        )

    def __repr__(self) -> str:
        return repr(self._native)

    @property
    def urls(self) -> List[str]:
        return self._native.urls

    @property
    def settings(self) -> "_callpost.Webhooks":
        """The validated settings, to pass to ``Delivery.poll_request`` when
        you drive a delivery yourself (see :meth:`delivery`)."""
        return self._native

    def request(self, call: Call, endpoint: int = 0, now: Union[int, Any, None] = None) -> "_callpost.Request":
        """The signed request for ``call`` to endpoint ``endpoint``."""
        return self._native.request(call, endpoint, now)

    def delivery(self, call: Call, now: Optional[int] = None, *, seed: Optional[int] = None) -> "_callpost.Delivery":
        """A sans-IO delivery to drive yourself (for queues and outboxes):
        ``d.poll_request(now_ms, hooks.settings)``, send, ``d.handle_response``."""
        return _callpost.Delivery(
            self._native, call, _now_ms() if now is None else now, seed=_seed() if seed is None else seed, **self._timing
        )

    def deliver(self, call: Call, *, client: Optional[httpx.Client] = None) -> DeliveryResult:
        """Delivers ``call`` over HTTP, blocking through retries (up to 4 hours).

        Certificates are always verified and redirects are never followed.
        Raises :class:`DeliveryError` when the delivery gives up.
        """
        d = self.delivery(call)
        own = client is None
        http = client or httpx.Client(verify=True, follow_redirects=False)
        try:
            while True:
                now = _now_ms()
                attempt = d.poll_request(now, self._native)
                if attempt is not None:
                    req = attempt.request
                    try:
                        r = http.post(
                            req.url,
                            headers=req.headers,
                            content=req.body,
                            timeout=max(attempt.deadline_ms - now, 1) / 1000,
                        )
                        d.handle_response(_now_ms(), r.status_code, r.headers.get("retry-after"))
                    except httpx.HTTPError as exc:
                        kind, message = _error_kind(exc)
                        d.handle_response(_now_ms(), error=kind, message=message)
                    logger.debug("webhook attempt %d to endpoint %d: %s", attempt.attempt, attempt.endpoint, d.log[-1]["outcome"]["kind"])
                    continue
                outcome = d.poll_outcome()
                if outcome is not None:
                    return _finish(d, outcome)
                wake = d.poll_timeout()
                if wake is not None:
                    time.sleep(max(wake - _now_ms(), 0) / 1000)
                d.handle_timeout(_now_ms())
        finally:
            if own:
                http.close()

    async def deliver_async(self, call: Call, *, client: Optional[httpx.AsyncClient] = None) -> DeliveryResult:
        """:meth:`deliver` for asyncio: never blocks the event loop."""
        d = self.delivery(call)
        own = client is None
        http = client or httpx.AsyncClient(verify=True, follow_redirects=False)
        try:
            while True:
                now = _now_ms()
                attempt = d.poll_request(now, self._native)
                if attempt is not None:
                    req = attempt.request
                    try:
                        r = await http.post(
                            req.url,
                            headers=req.headers,
                            content=req.body,
                            timeout=max(attempt.deadline_ms - now, 1) / 1000,
                        )
                        d.handle_response(_now_ms(), r.status_code, r.headers.get("retry-after"))
                    except httpx.HTTPError as exc:
                        kind, message = _error_kind(exc)
                        d.handle_response(_now_ms(), error=kind, message=message)
                    continue
                outcome = d.poll_outcome()
                if outcome is not None:
                    return _finish(d, outcome)
                wake = d.poll_timeout()
                if wake is not None:
                    await asyncio.sleep(max(wake - _now_ms(), 0) / 1000)
                d.handle_timeout(_now_ms())
        finally:
            if own:
                await http.aclose()


OnError = Callable[[DeliveryError, List[Dict[str, Any]]], None]


def _waker(client: Union["Client", "AsyncClient"]) -> Callable[[], None]:
    """The batcher's on_wake for `client`. It holds the client weakly: the
    client holds the batcher, and a cycle through a Rust object would keep
    both alive for good (it is not visible to the garbage collector)."""
    ref = weakref.ref(client)

    def wake() -> None:
        c = ref()
        if c is not None:
            c._wake_sender()

    return wake


class _CallMethods:
    """identify/track/page/screen/group/alias, shared by both clients."""

    # Each method hands its fields to the batcher as they are, in this
    # order, without building a dict for it to walk: `_enqueue` is the
    # client's `Batcher.handle_fields` itself, which wakes the sender
    # through `on_wake` when it must. No Python frame or lock in between:
    # they were a fifth of `track()`'s CPU.
    _enqueue: Callable[..., str]

    def identify(self, user_id: Optional[str] = None, traits: Optional[Mapping[str, Any]] = None, *, anonymous_id: Optional[str] = None,
                 context: Optional[Mapping[str, Any]] = None, integrations: Optional[Mapping[str, Any]] = None,
                 timestamp: Any = None, message_id: Optional[str] = None) -> Any:
        """Records who the user is. Returns the messageId."""
        return self._enqueue("identify", user_id, anonymous_id, None, None, None, None, None, None, traits, context, integrations,
                             timestamp, message_id)

    def track(self, user_id: Optional[str] = None, event: Optional[str] = None, properties: Optional[Mapping[str, Any]] = None, *,
              anonymous_id: Optional[str] = None, context: Optional[Mapping[str, Any]] = None,
              integrations: Optional[Mapping[str, Any]] = None, timestamp: Any = None, message_id: Optional[str] = None) -> Any:
        """Records an event. Returns the messageId."""
        return self._enqueue("track", user_id, anonymous_id, event, None, None, None, None, properties, None, context, integrations,
                             timestamp, message_id)

    def page(self, user_id: Optional[str] = None, name: Optional[str] = None, properties: Optional[Mapping[str, Any]] = None, *,
             category: Optional[str] = None, anonymous_id: Optional[str] = None, context: Optional[Mapping[str, Any]] = None,
             integrations: Optional[Mapping[str, Any]] = None, timestamp: Any = None, message_id: Optional[str] = None) -> Any:
        """Records a page view. Returns the messageId."""
        return self._enqueue("page", user_id, anonymous_id, None, name, category, None, None, properties, None, context,
                             integrations, timestamp, message_id)

    def screen(self, user_id: Optional[str] = None, name: Optional[str] = None, properties: Optional[Mapping[str, Any]] = None, *,
               anonymous_id: Optional[str] = None, context: Optional[Mapping[str, Any]] = None,
               integrations: Optional[Mapping[str, Any]] = None, timestamp: Any = None, message_id: Optional[str] = None) -> Any:
        """Records a screen view. Returns the messageId."""
        return self._enqueue("screen", user_id, anonymous_id, None, name, None, None, None, properties, None, context, integrations,
                             timestamp, message_id)

    def group(self, user_id: Optional[str] = None, group_id: Optional[str] = None, traits: Optional[Mapping[str, Any]] = None, *,
              anonymous_id: Optional[str] = None, context: Optional[Mapping[str, Any]] = None,
              integrations: Optional[Mapping[str, Any]] = None, timestamp: Any = None, message_id: Optional[str] = None) -> Any:
        """Associates the user with a group. Returns the messageId."""
        return self._enqueue("group", user_id, anonymous_id, None, None, None, group_id, None, None, traits, context, integrations,
                             timestamp, message_id)

    def alias(self, previous_id: Optional[str] = None, user_id: Optional[str] = None, *, context: Optional[Mapping[str, Any]] = None,
              integrations: Optional[Mapping[str, Any]] = None, timestamp: Any = None, message_id: Optional[str] = None) -> Any:
        """Merges ``previous_id`` into ``user_id``. Returns the messageId."""
        return self._enqueue("alias", user_id, None, None, None, None, None, previous_id, None, None, context, integrations,
                             timestamp, message_id)


def _report(on_error: Optional[OnError], event: Dict[str, Any]) -> None:
    kind = event["kind"]
    if kind == "failed":
        messages = [json.loads(m) for _, m in event["messages"]]
        err = DeliveryError(event["code"], event["reason"], event)
        logger.error("callpost: %d messages failed: %s", len(messages), event["reason"])
        if on_error is not None:
            try:
                on_error(err, messages)
            except Exception:  # a user callback must not kill the sender
                logger.exception("callpost: on_error raised")
    elif kind == "retrying":
        logger.debug("callpost: batch %s attempt %s failed (%s); retrying", event["batch_id"], event["attempt"], event["reason"])
    else:
        logger.debug("callpost: batch %s delivered (%d messages)", event["batch_id"], len(event["message_ids"]))


class Client(_CallMethods):
    """The batching client (client-library.md): calls queue in memory and a
    background thread sends them in batches of ``flush_at`` or every
    ``flush_after`` seconds. Use as a context manager, or call :meth:`close`;
    at interpreter exit anything queued is sent or handed to ``on_error``.
    """

    def __init__(
        self,
        write_key: str,
        *,
        endpoint: Optional[str] = None,
        flush_at: int = 20,
        flush_after: float = 5.0,
        max_queue: int = 10_000,
        max_attempts: int = 10,
        max_retry: float = 600.0,
        timeout: float = 15.0,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        on_error: Optional[OnError] = None,
        shutdown_timeout: float = 10.0,
    ) -> None:
        self._settings: Dict[str, Any] = dict(
            backoff_base_ms=int(backoff_base * 1000),
            backoff_cap_ms=int(backoff_cap * 1000),
            endpoint=endpoint,
            flush_at=flush_at,
            flush_after_ms=int(flush_after * 1000),
            max_queue=max_queue,
            max_attempts=max_attempts,
            max_retry_ms=int(max_retry * 1000),
            request_timeout_ms=int(timeout * 1000),
        )
        self._write_key = write_key
        self._timeout = timeout
        self.on_error = on_error
        self._shutdown_timeout = shutdown_timeout
        self._reset()
        ref = weakref.ref(self)
        atexit.register(_close_at_exit, ref)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def _reset(self) -> None:
        self._batcher = _callpost.Batcher(self._write_key, seed=_seed(), now=_now_ms(), on_wake=_waker(self),
                                          **self._settings)
        self._enqueue = self._batcher.handle_fields
        # A plain Lock, not Condition()'s default RLock: `with self._lock` is
        # entered in C, and nothing re-enters it (callbacks run unlocked).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        self._http: Optional[httpx.Client] = None

    def __repr__(self) -> str:
        return f"Client(endpoint={self._settings['endpoint']!r}, flush_at={self._settings['flush_at']})"

    def _wake_sender(self) -> None:
        # The batcher calls this when a call moved its wake-up time earlier
        # (the first queued message starts the flush_after timer; flush_at
        # makes a batch due now), and only then: waking the sender on every
        # call cost more CPU than the call.
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="callpost-client", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        http = self._http = httpx.Client(verify=True, follow_redirects=False, timeout=self._timeout)
        while True:
            with self._cond:
                now = _now_ms()
                self._batcher.handle_timeout(now)
                batch = self._batcher.poll_request(now)
                events = []
                while (ev := self._batcher.poll_event()) is not None:
                    events.append(ev)
                if batch is None and not events:
                    if self._closed and self._batcher.idle:
                        self._cond.notify_all()
                        break
                    wake = self._batcher.poll_timeout()
                    self._cond.notify_all()
                    self._cond.wait(None if wake is None else max(wake - now, 0) / 1000)
                    continue
            for ev in events:
                _report(self.on_error, ev)
            if batch is not None:
                req = batch.request
                try:
                    r = http.post(req.url, headers=req.headers, content=req.body,
                                  timeout=max(batch.deadline_ms - _now_ms(), 1) / 1000)
                    result: Dict[str, Any] = dict(status=r.status_code, retry_after=r.headers.get("retry-after"))
                except httpx.HTTPError as exc:
                    kind, message = _error_kind(exc)
                    result = dict(error=kind, message=message)
                with self._cond:
                    self._batcher.handle_response(_now_ms(), batch.batch_id, **result)
                    self._cond.notify_all()
        http.close()

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Sends everything queued now (batches waiting to retry too) and
        waits until it is delivered or reported. Returns False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._batcher.flush(_now_ms())
            self._cond.notify_all()
            while not self._batcher.idle:
                if self._thread is None or not self._thread.is_alive():
                    return self._batcher.idle
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: Optional[float] = None) -> None:
        """Flushes, waits up to ``timeout`` seconds (``shutdown_timeout`` by
        default), then hands whatever is left to ``on_error``. Idempotent."""
        if self._closed:
            return
        self.flush(self._shutdown_timeout if timeout is None else timeout)
        with self._cond:
            self._closed = True
            self._batcher.shutdown()
            events = []
            while (ev := self._batcher.poll_event()) is not None:
                events.append(ev)
            self._cond.notify_all()
        for ev in events:
            _report(self.on_error, ev)
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 1)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _close_at_exit(ref: "weakref.ref[Client]") -> None:
    client = ref()
    if client is not None:
        client.close()


def _after_fork(ref: "weakref.ref[Client]") -> None:
    # The child gets a fresh, working client. Messages the parent had queued
    # stay the parent's to send: copying them would send them twice.
    client = ref()
    if client is not None and not client._closed:
        client._reset()


class AsyncClient(_CallMethods):
    """The batching client for asyncio: call methods are synchronous (they
    only queue); a task on the running loop sends batches. ``await close()``
    before the loop ends."""

    def __init__(self, write_key: str, *, endpoint: Optional[str] = None, flush_at: int = 20, flush_after: float = 5.0,
                 max_queue: int = 10_000, max_attempts: int = 10, max_retry: float = 600.0, timeout: float = 15.0,
                 backoff_base: float = 1.0, backoff_cap: float = 60.0, on_error: Optional[OnError] = None) -> None:
        self._batcher = _callpost.Batcher(write_key, endpoint=endpoint, flush_at=flush_at, flush_after_ms=int(flush_after * 1000),
                                          backoff_base_ms=int(backoff_base * 1000), backoff_cap_ms=int(backoff_cap * 1000),
                                          max_queue=max_queue, max_attempts=max_attempts, max_retry_ms=int(max_retry * 1000),
                                          request_timeout_ms=int(timeout * 1000), seed=_seed(), now=_now_ms(),
                                          on_wake=_waker(self))
        self._enqueue = self._batcher.handle_fields
        self.on_error = on_error
        self._timeout = timeout
        self._wake: Optional[asyncio.Event] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._closed = False

    def _wake_sender(self) -> None:
        # Called by the batcher as for Client._wake_sender, on the caller's
        # loop.
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())
        assert self._wake is not None
        self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        async with httpx.AsyncClient(verify=True, follow_redirects=False, timeout=self._timeout) as http:
            while True:
                now = _now_ms()
                self._batcher.handle_timeout(now)
                while (ev := self._batcher.poll_event()) is not None:
                    _report(self.on_error, ev)
                batch = self._batcher.poll_request(now)
                if batch is None:
                    if self._closed and self._batcher.idle:
                        return
                    wake = self._batcher.poll_timeout()
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), None if wake is None else max(wake - now, 0) / 1000)
                    except asyncio.TimeoutError:
                        pass
                    continue
                req = batch.request
                try:
                    r = await http.post(req.url, headers=req.headers, content=req.body,
                                        timeout=max(batch.deadline_ms - _now_ms(), 1) / 1000)
                    self._batcher.handle_response(_now_ms(), batch.batch_id, r.status_code, r.headers.get("retry-after"))
                except httpx.HTTPError as exc:
                    kind, message = _error_kind(exc)
                    self._batcher.handle_response(_now_ms(), batch.batch_id, error=kind, message=message)

    async def flush(self) -> None:
        """Sends everything queued now and waits until it is delivered or reported."""
        self._batcher.flush(_now_ms())
        if self._wake is not None:
            self._wake.set()
        while not self._batcher.idle and self._task is not None and not self._task.done():
            await asyncio.sleep(0.005)

    async def close(self, timeout: float = 10.0) -> None:
        """Flushes (up to ``timeout`` seconds), then hands the rest to ``on_error``."""
        if self._closed:
            return
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except asyncio.TimeoutError:
            pass
        self._closed = True
        self._batcher.shutdown()
        while (ev := self._batcher.poll_event()) is not None:
            _report(self.on_error, ev)
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, self._timeout + 1)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
