"""The I/O around the core's state machines, over httpx.

The loops are written once, as generators that poll the core and say what
to do (``_delivery_steps``, ``_sender_steps``), and run by one executor per
host style: ``_run_sync`` (a thread; the requests of a round go out on
threads) and ``_run_async`` (asyncio; a round's requests are tasks). No
retry, batching or round rule lives here; those are in the Rust core,
shared with the JavaScript package. Defaults come from the core's
``DEFAULTS``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gzip as _gzip
import json
import logging
import os
import ssl
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import (
    Any,
    TypeVar,
)

import httpx

from . import _callpost
from ._errors import DeliveryError

__all__ = ["AsyncClient", "Client", "DeliveryResult", "Webhooks"]

logger = logging.getLogger("callpost")

_debug_handler: logging.Handler | None = None


def _debug_logging(debug: bool) -> None:
    """``debug=True``, or the spec's diagnostics switch (``DEBUG=analytics``
    in the environment), when a client is made: the ``callpost`` logger
    logs at DEBUG to stderr. Only that logger, and only then: importing
    callpost configures no logging, as a library must not."""
    global _debug_handler
    if not (debug or "analytics" in os.environ.get("DEBUG", "").split(",")):
        return
    logger.setLevel(logging.DEBUG)
    if _debug_handler is None:
        _debug_handler = logging.StreamHandler()
        _debug_handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(_debug_handler)


_D = _callpost.DEFAULTS
"""The core's limits and defaults; durations in ms (the API below takes seconds)."""

Endpoint = str | Mapping[str, Any]
Call = Mapping[str, Any] | str | bytes


def _now_ms() -> int:
    return int(time.time() * 1000)


# One step of a loop: ("send", [(key, request, deadline_ms), ...]), answered
# with [(key, ended_ms, report), ...] where `report` holds the keyword
# arguments of the core's handle_response; or ("wait", seconds or None),
# answered with None.
_Sends = list[tuple[int, "_callpost.Request", int]]
_Reports = list[tuple[int, int, dict[str, Any]]]
_Step = tuple[str, Any]
_T = TypeVar("_T")
_Steps = Generator[_Step, Any, _T]


def _error_kind(exc: BaseException) -> tuple[str, str]:
    """Maps an httpx failure to the core's outcome kinds."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", type(exc).__name__
    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, ssl.SSLError):
            return "tls", str(cur)
        cur = cur.__cause__ or cur.__context__
    return "connection", f"{type(exc).__name__}: {exc}"


def _post_args(req: _callpost.Request, deadline_ms: int) -> dict[str, Any]:
    return dict(headers=req.headers, content=req.body, timeout=max(deadline_ms - _now_ms(), 1) / 1000)


def _gzipped(req: _callpost.Request, deadline_ms: int) -> dict[str, Any]:
    """``gzip=True``: the batch body compressed, as the tracking API accepts
    it (the size limits apply to the JSON before compression)."""
    args = _post_args(req, deadline_ms)
    args["headers"] = [*args["headers"], ("Content-Encoding", "gzip")]
    args["content"] = _gzip.compress(args["content"], compresslevel=6)
    return args


def _report_of(r: httpx.Response) -> dict[str, Any]:
    return dict(status=r.status_code, retry_after=r.headers.get("retry-after"))


_PostArgs = Callable[["_callpost.Request", int], dict[str, Any]]


def _send_one(
    http: httpx.Client, key: int, req: _callpost.Request, deadline_ms: int, post_args: _PostArgs = _post_args
) -> tuple[int, int, dict[str, Any]]:
    try:
        report = _report_of(http.post(req.url, **post_args(req, deadline_ms)))
    except httpx.HTTPError as exc:
        kind, message = _error_kind(exc)
        report = dict(error=kind, message=message)
    return key, _now_ms(), report


async def _send_one_async(
    http: httpx.AsyncClient, key: int, req: _callpost.Request, deadline_ms: int, post_args: _PostArgs = _post_args
) -> tuple[int, int, dict[str, Any]]:
    try:
        report = _report_of(await http.post(req.url, **post_args(req, deadline_ms)))
    except httpx.HTTPError as exc:
        kind, message = _error_kind(exc)
        report = dict(error=kind, message=message)
    return key, _now_ms(), report


def _run_sync(
    steps: _Steps[_T], http: httpx.Client, wait: Callable[[float | None], None], post_args: _PostArgs = _post_args
) -> _T:
    """Runs a loop on this thread. A step's requests go out together, on
    threads when there are several (a parallel round)."""
    reply: Any = None
    while True:
        try:
            kind, arg = steps.send(reply)
        except StopIteration as stop:
            result: _T = stop.value
            return result
        if kind == "send":
            sends: _Sends = arg
            if len(sends) == 1:
                reply = [_send_one(http, *sends[0], post_args)]
            else:
                with ThreadPoolExecutor(max_workers=len(sends), thread_name_prefix="callpost-send") as pool:
                    reply = list(pool.map(lambda s: _send_one(http, s[0], s[1], s[2], post_args), sends))
        else:
            wait(arg)
            reply = None


async def _run_async(
    steps: _Steps[_T],
    http: httpx.AsyncClient,
    wait: Callable[[float | None], Awaitable[None]],
    post_args: _PostArgs = _post_args,
) -> _T:
    """Runs a loop on the running event loop; a step's requests are tasks."""
    reply: Any = None
    while True:
        try:
            kind, arg = steps.send(reply)
        except StopIteration as stop:
            result: _T = stop.value
            return result
        if kind == "send":
            reply = list(
                await asyncio.gather(
                    *(_send_one_async(http, key, req, deadline, post_args) for key, req, deadline in arg)
                )
            )
        else:
            await wait(arg)
            reply = None


@dataclass(frozen=True)
class DeliveryResult:
    """How a delivery ended. ``delivered`` is False only when the call's
    ``integrations`` turned Webhooks off (nothing was sent). ``endpoint``
    is the first endpoint that took the call."""

    delivered: bool
    endpoint: int | None
    attempts: int
    log: list[dict[str, Any]] = field(default_factory=list)


def _finish(d: _callpost.Delivery, outcome: dict[str, Any]) -> DeliveryResult:
    kind = outcome["kind"]
    log = d.log
    if kind == "delivered":
        return DeliveryResult(True, outcome["endpoint"], outcome["attempt"], log)
    if kind == "disabled":
        return DeliveryResult(False, None, 0, log)
    raise DeliveryError(outcome["reason"], d.error_message or outcome["reason"], outcome, log)


def _delivery_steps(
    d: _callpost.Delivery,
    clock: Callable[[], int] = _now_ms,
    finish: Callable[[_callpost.Delivery, dict[str, Any]], _T] = _finish,  # type: ignore[assignment]
) -> _Steps[_T]:
    """A delivery's host loop: send what is due (a whole round at once in
    parallel mode), report each answer, sleep until the core's timer.
    ``clock`` gives the time in ms (the relay's may be offset in tests);
    ``finish`` turns the core's outcome into the loop's result."""
    while True:
        now = clock()
        sends: _Sends = []
        while (a := d.poll_request(now)) is not None:
            sends.append((a.attempt, a.request, a.deadline_ms))
        if sends:
            reports: _Reports = yield ("send", sends)
            for attempt, ended, report in reports:
                d.handle_response(ended, attempt, **report)
            if logger.isEnabledFor(logging.DEBUG):
                for r in d.log[-len(reports) :]:
                    logger.debug(
                        "webhook attempt %d (round %d) to endpoint %d: %s",
                        r["attempt"],
                        r["round"],
                        r["endpoint"],
                        r["outcome"]["kind"],
                    )
            continue
        outcome = d.poll_outcome()
        if outcome is not None:
            return finish(d, outcome)
        wake = d.poll_timeout()
        yield ("wait", None if wake is None else max(wake - clock(), 0) / 1000)
        d.handle_timeout(clock())


def _http(client_type: Any) -> Any:
    # Certificates are always verified; redirects are never followed (the
    # core counts a 3xx as a rejection).
    return client_type(verify=True, follow_redirects=False)


class Webhooks:
    """The Webhooks destination: settings, signed requests, and delivery.

    ``endpoints`` is a list of 1 to 5 URLs or ``{"url": ..., "headers": {...}}``
    dicts. ``mode`` is ``"parallel"`` (every round goes to every endpoint at
    once; the core's default) or ``"failover"`` (one endpoint after another
    until one takes the call). Bad settings raise :class:`SettingsError` here.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        shared_secret: str | bytes | None = None,
        *,
        mode: str | None = None,
        timeout: float = _D["webhook_timeout_ms"] / 1000,
        retry_window: float = _D["retry_window_ms"] / 1000,
        backoff_base: float = _D["delivery_backoff_base_ms"] / 1000,
        backoff_cap: float = _D["delivery_backoff_cap_ms"] / 1000,
    ) -> None:
        self._native = _callpost.Webhooks(endpoints, shared_secret, mode=mode)
        self._timing = dict(
            timeout_ms=int(timeout * 1000),
            retry_window_ms=int(retry_window * 1000),
            backoff_base_ms=int(backoff_base * 1000),
            backoff_cap_ms=int(backoff_cap * 1000),
        )

    def __repr__(self) -> str:
        return repr(self._native)

    @property
    def urls(self) -> list[str]:
        return self._native.urls

    @property
    def mode(self) -> str:
        return self._native.mode

    @property
    def settings(self) -> _callpost.Webhooks:
        """The validated settings: what ``Delivery(...)`` and
        ``Delivery.from_json(text, settings)`` take."""
        return self._native

    def request(self, call: Call, endpoint: int = 0, now: int | Any | None = None) -> _callpost.Request:
        """The signed request for ``call`` to endpoint ``endpoint``."""
        return self._native.request(call, endpoint, now)

    def delivery(self, call: Call, now: int | None = None, *, seed: int | None = None) -> _callpost.Delivery:
        """A sans-IO delivery to drive yourself (for queues and outboxes):
        ``d.poll_request(now_ms)`` until None, send, ``d.handle_response``.
        Its jitter is seeded from OS randomness unless ``seed`` is given."""
        return _callpost.Delivery(self._native, call, now, seed=seed, **self._timing)

    def deliver(self, call: Call, *, client: httpx.Client | None = None) -> DeliveryResult:
        """Delivers ``call`` over HTTP, blocking through retries (up to 4 hours).

        A parallel round's requests go out on threads at once. Certificates
        are always verified and redirects are never followed. Raises
        :class:`DeliveryError` when the delivery gives up.
        """
        http = client or _http(httpx.Client)
        try:
            return _run_sync(_delivery_steps(self.delivery(call)), http, lambda s: time.sleep(s or 0))
        finally:
            if client is None:
                http.close()

    async def deliver_async(self, call: Call, *, client: httpx.AsyncClient | None = None) -> DeliveryResult:
        """:meth:`deliver` for asyncio: never blocks the event loop; a round's
        requests are tasks."""
        http = client or _http(httpx.AsyncClient)
        try:
            return await _run_async(_delivery_steps(self.delivery(call)), http, lambda s: asyncio.sleep(s or 0))
        finally:
            if client is None:
                await http.aclose()


OnError = Callable[[DeliveryError, list[dict[str, Any]]], None]
Id = str | int


def _waker(client: Client | AsyncClient) -> Callable[[], None]:
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
    """identify/track/page/screen/group/alias, shared by both clients.

    An id (``user_id``, ``anonymous_id``, ``group_id``, ``previous_id``,
    ``message_id``) is a ``str`` or an ``int``; an ``int`` is sent as its
    exact decimal string, whatever its size."""

    # Each method hands its fields to the batcher as they are, in the order
    # of the core's CALL_FIELDS, without building a dict for it to walk:
    # `_enqueue` is the client's `Batcher.handle_fields` itself, which wakes
    # the sender through `on_wake` when it must. No Python frame or lock in
    # between: they were a fifth of `track()`'s CPU.
    _enqueue: Callable[..., str]

    def identify(
        self,
        user_id: Id | None = None,
        traits: Mapping[str, Any] | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Mapping[str, Any] | None = None,
        integrations: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        message_id: Id | None = None,
    ) -> Any:
        """Records who the user is. Returns the messageId."""
        return self._enqueue(
            "identify",
            user_id,
            anonymous_id,
            None,
            None,
            None,
            None,
            traits,
            context,
            integrations,
            None,
            None,
            timestamp,
            message_id,
        )

    def track(
        self,
        user_id: Id | None = None,
        event: str | None = None,
        properties: Mapping[str, Any] | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Mapping[str, Any] | None = None,
        integrations: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        message_id: Id | None = None,
    ) -> Any:
        """Records an event. Returns the messageId."""
        return self._enqueue(
            "track",
            user_id,
            anonymous_id,
            event,
            None,
            None,
            properties,
            None,
            context,
            integrations,
            None,
            None,
            timestamp,
            message_id,
        )

    def page(
        self,
        user_id: Id | None = None,
        name: str | None = None,
        properties: Mapping[str, Any] | None = None,
        *,
        category: str | None = None,
        anonymous_id: Id | None = None,
        context: Mapping[str, Any] | None = None,
        integrations: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        message_id: Id | None = None,
    ) -> Any:
        """Records a page view. Returns the messageId."""
        return self._enqueue(
            "page",
            user_id,
            anonymous_id,
            None,
            name,
            category,
            properties,
            None,
            context,
            integrations,
            None,
            None,
            timestamp,
            message_id,
        )

    def screen(
        self,
        user_id: Id | None = None,
        name: str | None = None,
        properties: Mapping[str, Any] | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Mapping[str, Any] | None = None,
        integrations: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        message_id: Id | None = None,
    ) -> Any:
        """Records a screen view. Returns the messageId."""
        return self._enqueue(
            "screen",
            user_id,
            anonymous_id,
            None,
            name,
            None,
            properties,
            None,
            context,
            integrations,
            None,
            None,
            timestamp,
            message_id,
        )

    def group(
        self,
        user_id: Id | None = None,
        group_id: Id | None = None,
        traits: Mapping[str, Any] | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Mapping[str, Any] | None = None,
        integrations: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        message_id: Id | None = None,
    ) -> Any:
        """Associates the user with a group. Returns the messageId."""
        return self._enqueue(
            "group",
            user_id,
            anonymous_id,
            None,
            None,
            None,
            None,
            traits,
            context,
            integrations,
            group_id,
            None,
            timestamp,
            message_id,
        )

    def alias(
        self,
        previous_id: Id | None = None,
        user_id: Id | None = None,
        *,
        context: Mapping[str, Any] | None = None,
        integrations: Mapping[str, Any] | None = None,
        timestamp: Any = None,
        message_id: Id | None = None,
    ) -> Any:
        """Merges ``previous_id`` into ``user_id``. Returns the messageId."""
        return self._enqueue(
            "alias",
            user_id,
            None,
            None,
            None,
            None,
            None,
            None,
            context,
            integrations,
            None,
            previous_id,
            timestamp,
            message_id,
        )


def _report(on_error: OnError | None, event: dict[str, Any]) -> None:
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
        logger.debug(
            "callpost: batch %s attempt %s failed (%s); retrying", event["batch_id"], event["attempt"], event["reason"]
        )
    else:
        logger.debug("callpost: batch %s delivered (%d messages)", event["batch_id"], len(event["message_ids"]))


def _sender_steps(client: Client | AsyncClient) -> _Steps[None]:
    """The batching client's sender loop: report the batcher's events, send
    the batches due, and wait for the batcher's timer or a wake-up. It ends
    once the client is closed and nothing is left."""
    b = client._batcher
    while True:
        now = _now_ms()
        b.handle_timeout(now)
        while (ev := b.poll_event()) is not None:
            _report(client.on_error, ev)
        sends: _Sends = []
        while (req := b.poll_request(now)) is not None:
            sends.append((req.batch_id, req.request, req.deadline_ms))
        if sends:
            for batch_id, ended, report in (yield ("send", sends)):
                b.handle_response(ended, batch_id, **report)
            continue
        if client._closed and b.idle:
            return None
        wake = b.poll_timeout()
        yield ("wait", None if wake is None else max(wake - now, 0) / 1000)


def _prepare_only(batcher: _callpost.Batcher) -> Callable[..., str]:
    """``send=False``: each call is checked and completed as it would be
    sent (so tests see the same errors and ids), then dropped."""

    def enqueue(*fields: Any) -> str:
        return batcher.prepare_fields(*fields).message_id

    return enqueue


def _client_settings(
    endpoint: str | None,
    flush_at: int,
    flush_after: float,
    max_queue: int,
    max_attempts: int,
    max_retry: float,
    timeout: float,
    backoff_base: float,
    backoff_cap: float,
) -> dict[str, Any]:
    return dict(
        endpoint=endpoint,
        flush_at=flush_at,
        flush_after_ms=int(flush_after * 1000),
        max_queue=max_queue,
        max_attempts=max_attempts,
        max_retry_ms=int(max_retry * 1000),
        request_timeout_ms=int(timeout * 1000),
        backoff_base_ms=int(backoff_base * 1000),
        backoff_cap_ms=int(backoff_cap * 1000),
    )


class Client(_CallMethods):
    """The batching client (client-library.md): calls queue in memory and a
    background thread sends them in batches of ``flush_at`` or every
    ``flush_after`` seconds. Use as a context manager, or call :meth:`close`;
    at interpreter exit anything queued is sent or handed to ``on_error``.

    ``send=False`` checks and completes each call, then drops it (tests,
    dry runs). ``debug=True`` logs to stderr through the ``callpost``
    logger. ``gzip=True`` compresses batch bodies. ``default`` converts
    values with no JSON form, as ``json.dumps(default=...)`` does.
    ``http_client`` is an ``httpx.Client`` to send with (proxies, private
    CAs); it stays open when the client closes.
    """

    def __init__(
        self,
        write_key: str,
        *,
        endpoint: str | None = None,
        flush_at: int = _D["flush_at"],
        flush_after: float = _D["flush_after_ms"] / 1000,
        max_queue: int = _D["max_queue"],
        max_attempts: int = _D["max_attempts"],
        max_retry: float = _D["max_retry_ms"] / 1000,
        timeout: float = _D["request_timeout_ms"] / 1000,
        backoff_base: float = _D["batch_backoff_base_ms"] / 1000,
        backoff_cap: float = _D["batch_backoff_cap_ms"] / 1000,
        on_error: OnError | None = None,
        shutdown_timeout: float = _D["shutdown_timeout_ms"] / 1000,
        send: bool = True,
        debug: bool = False,
        gzip: bool = False,
        default: Callable[[Any], Any] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._settings = _client_settings(
            endpoint, flush_at, flush_after, max_queue, max_attempts, max_retry, timeout, backoff_base, backoff_cap
        )
        self._write_key = write_key
        self._timeout = timeout
        self.on_error = on_error
        self._shutdown_timeout = shutdown_timeout
        self._send = send
        self._default = default
        self._post_args: _PostArgs = _gzipped if gzip else _post_args
        self._http_client = http_client
        _debug_logging(debug)
        self._reset()
        ref = weakref.ref(self)
        atexit.register(_close_at_exit, ref)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def _reset(self) -> None:
        # The jitter seed is the native batcher's: OS randomness.
        self._batcher = _callpost.Batcher(
            self._write_key, on_wake=_waker(self), default=self._default, **self._settings
        )
        self._enqueue = self._batcher.handle_fields if self._send else _prepare_only(self._batcher)
        # A plain Lock, not Condition()'s default RLock: `with self._lock` is
        # entered in C, and nothing re-enters it (callbacks run unlocked).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._woken = False
        self._thread: threading.Thread | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"Client(endpoint={self._settings['endpoint']!r}, flush_at={self._settings['flush_at']})"

    def _wake_sender(self) -> None:
        # The batcher calls this when a call moved its wake-up time earlier
        # (the first queued message starts the flush_after timer; flush_at
        # makes a batch due now), and only then: waking the sender on every
        # call cost more CPU than the call.
        with self._cond:
            self._woken = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="callpost-client", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _wait(self, timeout: float | None) -> None:
        # The sender is about to sleep: flush() waiters look at the batcher
        # again, and a wake-up that came since the sender last polled is not
        # lost (`_woken` is set under the same lock).
        with self._cond:
            self._cond.notify_all()
            if not self._woken:
                self._cond.wait(timeout)
            self._woken = False

    def _run(self) -> None:
        if self._http_client is not None:
            # The caller's client (proxies, private CAs, mounts): theirs to close.
            _run_sync(_sender_steps(self), self._http_client, self._wait, self._post_args)
        else:
            with httpx.Client(verify=True, follow_redirects=False, timeout=self._timeout) as http:
                _run_sync(_sender_steps(self), http, self._wait, self._post_args)
        with self._cond:
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Sends everything queued now (batches waiting to retry too) and
        waits until it is delivered or reported. Returns False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._batcher.flush(_now_ms())
        with self._cond:
            self._woken = True
            self._cond.notify_all()
            while not self._batcher.idle:
                if self._thread is None or not self._thread.is_alive():
                    return self._batcher.idle
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float | None = None) -> None:
        """Flushes, waits up to ``timeout`` seconds (``shutdown_timeout`` by
        default), then hands whatever is left to ``on_error``. Idempotent."""
        if self._closed:
            return
        self.flush(self._shutdown_timeout if timeout is None else timeout)
        self._closed = True
        self._batcher.shutdown()
        while (ev := self._batcher.poll_event()) is not None:
            _report(self.on_error, ev)
        with self._cond:
            self._woken = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 1)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _close_at_exit(ref: weakref.ref[Client]) -> None:
    client = ref()
    if client is not None:
        client.close()


def _after_fork(ref: weakref.ref[Client]) -> None:
    # The child gets a fresh, working client. Messages the parent had queued
    # stay the parent's to send: copying them would send them twice.
    client = ref()
    if client is not None and not client._closed:
        client._reset()


class AsyncClient(_CallMethods):
    """The batching client for asyncio: call methods are synchronous (they
    only queue); a task on the running loop sends batches. ``await close()``
    before the loop ends. Options as for :class:`Client`; ``http_client``
    is an ``httpx.AsyncClient``."""

    def __init__(
        self,
        write_key: str,
        *,
        endpoint: str | None = None,
        flush_at: int = _D["flush_at"],
        flush_after: float = _D["flush_after_ms"] / 1000,
        max_queue: int = _D["max_queue"],
        max_attempts: int = _D["max_attempts"],
        max_retry: float = _D["max_retry_ms"] / 1000,
        timeout: float = _D["request_timeout_ms"] / 1000,
        backoff_base: float = _D["batch_backoff_base_ms"] / 1000,
        backoff_cap: float = _D["batch_backoff_cap_ms"] / 1000,
        on_error: OnError | None = None,
        send: bool = True,
        debug: bool = False,
        gzip: bool = False,
        default: Callable[[Any], Any] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        settings = _client_settings(
            endpoint, flush_at, flush_after, max_queue, max_attempts, max_retry, timeout, backoff_base, backoff_cap
        )
        self._batcher = _callpost.Batcher(write_key, on_wake=_waker(self), default=default, **settings)
        self._enqueue = self._batcher.handle_fields if send else _prepare_only(self._batcher)
        self.on_error = on_error
        self._timeout = timeout
        self._post_args: _PostArgs = _gzipped if gzip else _post_args
        self._http_client = http_client
        _debug_logging(debug)
        self._wake: asyncio.Event | None = None
        self._progress: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def _wake_sender(self) -> None:
        # Called by the batcher as for Client._wake_sender, on the caller's
        # loop.
        if self._task is None:
            self._wake = asyncio.Event()
            self._progress = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())
        assert self._wake is not None
        self._wake.set()

    async def _wait(self, timeout: float | None) -> None:
        assert self._wake is not None and self._progress is not None
        # The sender is about to sleep: flush() looks at the batcher again.
        self._progress.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)
        self._wake.clear()

    async def _run(self) -> None:
        if self._http_client is not None:
            await _run_async(_sender_steps(self), self._http_client, self._wait, self._post_args)
        else:
            async with httpx.AsyncClient(verify=True, follow_redirects=False, timeout=self._timeout) as http:
                await _run_async(_sender_steps(self), http, self._wait, self._post_args)
        assert self._progress is not None
        self._progress.set()

    async def flush(self) -> None:
        """Sends everything queued now and waits until it is delivered or reported."""
        self._batcher.flush(_now_ms())
        task, wake, progress = self._task, self._wake, self._progress
        if task is None or wake is None or progress is None:
            return
        wake.set()
        while not self._batcher.idle and not task.done():
            progress.clear()
            waiter = asyncio.ensure_future(progress.wait())
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

    async def close(self, timeout: float = _D["shutdown_timeout_ms"] / 1000) -> None:
        """Flushes (up to ``timeout`` seconds), then hands the rest to ``on_error``."""
        if self._closed:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.flush(), timeout)
        self._closed = True
        self._batcher.shutdown()
        while (ev := self._batcher.poll_event()) is not None:
            _report(self.on_error, ev)
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, self._timeout + 1)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
