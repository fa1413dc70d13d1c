"""The batching clients, for applications that send analytics calls:
:class:`Client` (a background thread sends) and :class:`AsyncClient` (a task
on the running event loop sends). Both queue into the core's ``Batcher``,
which decides batches, retries and limits; the sender loop here only polls
it and does the HTTP."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

import httpx

from . import _callpost
from ._errors import DeliveryError
from ._transport import (
    AsyncTransport,
    Outgoing,
    Send,
    Steps,
    Transport,
    Wait,
    logger,
    now_ms,
    run_async,
    run_sync,
)
from ._types import BatcherEvent, Default, Fields, Id, JSONObject, Timestamp

__all__ = ["AsyncClient", "Client", "OnError"]

_D = _callpost.DEFAULTS
"""The core's limits and defaults; durations in ms (the API below takes seconds)."""

OnError = Callable[[DeliveryError, list[JSONObject]], None]
"""``on_error(error, messages)``: messages that will not be delivered, parsed."""

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


class _CallMethods:
    """identify/track/page/screen/group/alias, shared by both clients.

    An id (``user_id``, ``anonymous_id``, ``group_id``, ``previous_id``,
    ``message_id``) is a ``str`` or an ``int``; an ``int`` is sent as its
    exact decimal string, whatever its size."""

    # Each method hands its fields to the batcher as they are, in the order
    # of the core's CALL_FIELDS, without building a dict for it to walk:
    # `_enqueue` is the client's `Batcher.handle_fields` itself, which wakes
    # the sender through `on_wake` when it must. No Python frame or lock in
    # between: they were a fifth of `track()`'s CPU. (The fourteen fields
    # stay on two lines, `fmt: skip`, to be read against CALL_FIELDS.)
    _enqueue: Callable[..., str]

    def identify(
        self,
        user_id: Id | None = None,
        traits: Fields | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Fields | None = None,
        integrations: Fields | None = None,
        timestamp: Timestamp | None = None,
        message_id: Id | None = None,
    ) -> str:
        """Records who the user is. Returns the messageId."""
        return self._enqueue("identify", user_id, anonymous_id, None, None, None, None, traits, context,
                             integrations, None, None, timestamp, message_id)  # fmt: skip

    def track(
        self,
        user_id: Id | None = None,
        event: str | None = None,
        properties: Fields | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Fields | None = None,
        integrations: Fields | None = None,
        timestamp: Timestamp | None = None,
        message_id: Id | None = None,
    ) -> str:
        """Records an event. Returns the messageId."""
        return self._enqueue("track", user_id, anonymous_id, event, None, None, properties, None, context,
                             integrations, None, None, timestamp, message_id)  # fmt: skip

    def page(
        self,
        user_id: Id | None = None,
        name: str | None = None,
        properties: Fields | None = None,
        *,
        category: str | None = None,
        anonymous_id: Id | None = None,
        context: Fields | None = None,
        integrations: Fields | None = None,
        timestamp: Timestamp | None = None,
        message_id: Id | None = None,
    ) -> str:
        """Records a page view. Returns the messageId."""
        return self._enqueue("page", user_id, anonymous_id, None, name, category, properties, None, context,
                             integrations, None, None, timestamp, message_id)  # fmt: skip

    def screen(
        self,
        user_id: Id | None = None,
        name: str | None = None,
        properties: Fields | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Fields | None = None,
        integrations: Fields | None = None,
        timestamp: Timestamp | None = None,
        message_id: Id | None = None,
    ) -> str:
        """Records a screen view. Returns the messageId."""
        return self._enqueue("screen", user_id, anonymous_id, None, name, None, properties, None, context,
                             integrations, None, None, timestamp, message_id)  # fmt: skip

    def group(
        self,
        user_id: Id | None = None,
        group_id: Id | None = None,
        traits: Fields | None = None,
        *,
        anonymous_id: Id | None = None,
        context: Fields | None = None,
        integrations: Fields | None = None,
        timestamp: Timestamp | None = None,
        message_id: Id | None = None,
    ) -> str:
        """Associates the user with a group. Returns the messageId."""
        return self._enqueue("group", user_id, anonymous_id, None, None, None, None, traits, context,
                             integrations, group_id, None, timestamp, message_id)  # fmt: skip

    def alias(
        self,
        previous_id: Id | None = None,
        user_id: Id | None = None,
        *,
        context: Fields | None = None,
        integrations: Fields | None = None,
        timestamp: Timestamp | None = None,
        message_id: Id | None = None,
    ) -> str:
        """Merges ``previous_id`` into ``user_id``. Returns the messageId."""
        return self._enqueue("alias", user_id, None, None, None, None, None, None, context,
                             integrations, None, previous_id, timestamp, message_id)  # fmt: skip


def _report(on_error: OnError | None, event: BatcherEvent) -> None:
    if event["kind"] == "failed":
        messages = [json.loads(m["json"]) for m in event["messages"]]
        err = DeliveryError(event["code"], event["reason"], event)
        logger.error("callpost: %d messages failed: %s", len(messages), event["reason"])
        if on_error is not None:
            try:
                on_error(err, messages)
            except Exception:  # a user callback must not kill the sender
                logger.exception("callpost: on_error raised")
    elif event["kind"] == "retrying":
        logger.debug(
            "callpost: batch %s attempt %s failed (%s); retrying", event["batch_id"], event["attempt"], event["reason"]
        )
    else:
        logger.debug("callpost: batch %s delivered (%d messages)", event["batch_id"], len(event["message_ids"]))


def _prepare_only(batcher: _callpost.Batcher) -> Callable[..., str]:
    """``send=False``: each call is checked and completed as it would be
    sent (so tests see the same errors and ids), then dropped."""

    def enqueue(kind: str, *fields: object) -> str:
        return batcher.prepare_fields(kind, *fields).message_id

    return enqueue


_Http = TypeVar("_Http", httpx.Client, httpx.AsyncClient)


class _BatchingClient(_CallMethods, Generic[_Http]):
    """What both clients are: a core ``Batcher`` made from the options, the
    call methods queueing into it, and a sender loop (:meth:`_steps`) that
    a thread or a task runs. The options are :class:`Client`'s."""

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
        default: Default | None = None,
        http_client: _Http | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._flush_at = flush_at
        # The batcher's options, kept for `_reset`, which makes a new batcher
        # from them after a fork.
        self._new_batcher = functools.partial(
            _callpost.Batcher,
            write_key,
            endpoint=endpoint,
            flush_at=flush_at,
            flush_after_ms=int(flush_after * 1000),
            max_queue=max_queue,
            max_attempts=max_attempts,
            max_retry_ms=int(max_retry * 1000),
            request_timeout_ms=int(timeout * 1000),
            backoff_base_ms=int(backoff_base * 1000),
            backoff_cap_ms=int(backoff_cap * 1000),
            default=default,
        )
        self._timeout = timeout
        self.on_error = on_error
        self._send = send
        self._gzip = gzip
        self._http_client: _Http | None = http_client
        _debug_logging(debug)
        self._reset()

    def _reset(self) -> None:
        # The jitter seed is the native batcher's: OS randomness.
        self._batcher = self._new_batcher(on_wake=_waker(self))
        self._enqueue = self._batcher.handle_fields if self._send else _prepare_only(self._batcher)
        self._closed = False

    def _wake_sender(self) -> None:
        """The batcher's ``on_wake``: a call moved its wake-up time earlier
        (the first queued message starts the flush_after timer; flush_at
        makes a batch due now), and only then: waking the sender on every
        call cost more CPU than the call."""
        raise NotImplementedError

    def _steps(self) -> Steps[None]:
        """The sender loop: report the batcher's events, send the batches
        due, and wait for the batcher's timer or a wake-up. It ends once
        the client is closed and nothing is left."""
        b = self._batcher
        while True:
            now = now_ms()
            b.handle_timeout(now)
            self._report_events()
            due: list[Outgoing] = []
            while (req := b.poll_request(now)) is not None:
                due.append(Outgoing(req.batch_id, req.request, req.deadline_ms))
            if due:
                for batch_id, ended, report in (yield Send(due)):
                    b.handle_response(ended, batch_id, **report)
                continue
            if self._closed and b.idle:
                return None
            wake = b.poll_timeout()
            yield Wait(None if wake is None else max(wake - now, 0) / 1000)

    def _report_events(self) -> None:
        while (ev := self._batcher.poll_event()) is not None:
            _report(self.on_error, ev)

    def _shut(self) -> None:
        """Closes the batcher: what is left goes to ``on_error`` now."""
        self._closed = True
        self._batcher.shutdown()
        self._report_events()


def _waker(client: _BatchingClient[_Http]) -> Callable[[], None]:
    """The batcher's on_wake for `client`. It holds the client weakly: the
    client holds the batcher, and a cycle through a Rust object would keep
    both alive for good (it is not visible to the garbage collector)."""
    ref = weakref.ref(client)

    def wake() -> None:
        c = ref()
        if c is not None:
            c._wake_sender()

    return wake


class Client(_BatchingClient[httpx.Client]):
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

    # The shared options restated, to add shutdown_timeout: help(), IDEs and
    # type checkers read a signature whole, so it cannot be extended in place.
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
        default: Default | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._shutdown_timeout = shutdown_timeout
        super().__init__(
            write_key,
            endpoint=endpoint,
            flush_at=flush_at,
            flush_after=flush_after,
            max_queue=max_queue,
            max_attempts=max_attempts,
            max_retry=max_retry,
            timeout=timeout,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            on_error=on_error,
            send=send,
            debug=debug,
            gzip=gzip,
            default=default,
            http_client=http_client,
        )
        ref = weakref.ref(self)
        atexit.register(_close_at_exit, ref)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def _reset(self) -> None:
        super()._reset()
        # A plain Lock, not Condition()'s default RLock: `with self._lock` is
        # entered in C, and nothing re-enters it (callbacks run unlocked).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._woken = False
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"Client(endpoint={self._endpoint!r}, flush_at={self._flush_at})"

    def _wake_sender(self) -> None:
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
            run_sync(self._steps(), Transport(self._http_client, self._gzip).send, self._wait)
        else:
            with httpx.Client(verify=True, follow_redirects=False, timeout=self._timeout) as http:
                run_sync(self._steps(), Transport(http, self._gzip).send, self._wait)
        with self._cond:
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Sends everything queued now (batches waiting to retry too) and
        waits until it is delivered or reported. Returns False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._batcher.flush(now_ms())
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
        self._shut()
        with self._cond:
            self._woken = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 1)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
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


class AsyncClient(_BatchingClient[httpx.AsyncClient]):
    """The batching client for asyncio: call methods are synchronous (they
    only queue); a task on the running loop sends batches. ``await close()``
    before the loop ends. Options as for :class:`Client`, but for
    ``shutdown_timeout``, which is ``close()``'s ``timeout`` here;
    ``http_client`` is an ``httpx.AsyncClient``."""

    _wake: asyncio.Event | None = None
    _progress: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None

    def _wake_sender(self) -> None:
        # On the caller's loop: the first wake-up starts the sender there.
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
            await run_async(self._steps(), AsyncTransport(self._http_client, self._gzip).send, self._wait)
        else:
            async with httpx.AsyncClient(verify=True, follow_redirects=False, timeout=self._timeout) as http:
                await run_async(self._steps(), AsyncTransport(http, self._gzip).send, self._wait)
        assert self._progress is not None
        self._progress.set()

    async def flush(self) -> None:
        """Sends everything queued now and waits until it is delivered or reported."""
        self._batcher.flush(now_ms())
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
        self._shut()
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, self._timeout + 1)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
