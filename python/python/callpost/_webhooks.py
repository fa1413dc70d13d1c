"""The Webhooks destination: a call's signed requests, and its delivery over
HTTP through the core's rounds and retries (``Webhooks.deliver`` and
``deliver_async``), for forwarders and for hosts that deliver in process."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import httpx

from . import _callpost
from ._errors import DeliveryError
from ._transport import (
    AsyncTransport,
    Outgoing,
    Send,
    Steps,
    Tokens,
    Transport,
    Wait,
    logger,
    new_async_client,
    new_client,
    now_ms,
    run_async,
    run_sync,
)
from ._types import AttemptRecord, Call, DeliveryOutcome, Endpoint, JSONObject, Now

__all__ = ["DeliveryResult", "Webhooks"]

_D = _callpost.DEFAULTS
"""The core's limits and defaults; durations in ms (the API below takes seconds)."""


@dataclass(frozen=True)
class DeliveryResult:
    """How a delivery ended. ``delivered`` is False only when nothing was
    sent: the call's ``integrations`` turned Webhooks off, or the
    destination's filters dropped it (``filtered_by`` is then the index of
    the rule). ``endpoint`` is the first endpoint that took the call."""

    delivered: bool
    endpoint: int | None
    attempts: int
    log: list[AttemptRecord] = field(default_factory=list)
    filtered_by: int | None = None


class _Timing(TypedDict):
    """A destination's delivery timing, as ``Delivery`` takes it."""

    timeout_ms: int
    retry_window_ms: int
    backoff_base_ms: int
    backoff_cap_ms: int


def _result(d: _callpost.Delivery | None, outcome: DeliveryOutcome) -> DeliveryResult:
    """How a delivery ended, as ``deliver`` returns it (``d`` None: a call
    ``pack`` put in no batch, which ends before any attempt)."""
    log = d.log if d is not None else []
    if outcome["kind"] == "delivered":
        return DeliveryResult(True, outcome["endpoint"], outcome["attempt"], log)
    if outcome["kind"] == "disabled":
        return DeliveryResult(False, None, 0, log)
    if outcome["kind"] == "filtered":
        return DeliveryResult(False, None, 0, log, filtered_by=outcome["rule"])
    message = d.error_message if d is not None else None
    raise DeliveryError(outcome["reason"], message or outcome["reason"], outcome, log)


def _delivery_steps(d: _callpost.Delivery) -> Steps[DeliveryResult]:
    """A delivery's loop: send what is due (a whole round at once in
    parallel mode), report each answer, sleep until the core's timer."""
    while True:
        now = now_ms()
        due: list[Outgoing] = []
        while (a := d.poll_request(now)) is not None:
            due.append(Outgoing(a.attempt, a.request, a.deadline_ms, a.endpoint))
        if due:
            answers = yield Send(due)
            for attempt, ended, report in answers:
                d.handle_response(ended, attempt, **report)
            if logger.isEnabledFor(logging.DEBUG):
                for r in d.log[-len(answers) :]:
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
            return _result(d, outcome)
        wake = d.poll_timeout()
        yield Wait(None if wake is None else max(wake - now_ms(), 0) / 1000)
        d.handle_timeout(now_ms())


def _batch_steps(
    batches: list[_callpost.Batch],
    skipped: list[tuple[int, DeliveryOutcome]],
    count: int,
    delivery: Callable[[_callpost.Batch], _callpost.Delivery],
) -> Steps[list[DeliveryResult]]:
    """Batches' loop: each batch's delivery in turn, its result given to
    each of its calls; the calls in no batch get theirs from the core."""
    results: list[DeliveryResult | None] = [None] * count
    for index, outcome in skipped:
        results[index] = _result(None, outcome)
    for batch in batches:
        result = yield from _delivery_steps(delivery(batch))
        for index in batch.members:
            results[index] = result
    return [r for r in results if r is not None]


def _sleep(seconds: float | None) -> None:
    time.sleep(seconds or 0)


async def _sleep_async(seconds: float | None) -> None:
    await asyncio.sleep(seconds or 0)


class Webhooks:
    """The Webhooks destination: settings, signed requests, and delivery.

    ``endpoints`` is a list of 1 to 5 URLs or ``{"url": ..., "headers": {...},
    "auth": {...}}`` dicts; ``auth`` ``{"type": "basic", "username": ...,
    "password": ...}`` sends HTTP Basic; ``{"type": "oauth2", "token_url":
    ..., "client_id": ..., "client_secret": ...}`` sends a bearer token
    from an OAuth 2.0 client-credentials grant, fetched with the same HTTP
    client, kept by this object for its deliveries, refreshed before it
    expires and fetched again after a 401 (docs/operators.md, "Outbound
    authentication"). An endpoint with a ``client_certificate`` is
    delivered by callpost-relay: :meth:`deliver` refuses it with
    :class:`SettingsError` (``invalid_auth``). ``mode`` is ``"parallel"`` (every round goes to every endpoint at
    once; the core's default) or ``"failover"`` (one endpoint after another
    until one takes the call). ``signature`` is ``"segment"`` (``X-Signature``
    under ``shared_secret``; the default), ``"standard"`` (the Standard
    Webhooks headers, one signature per ``whsec_`` secret in
    ``signing_secrets``) or ``"both"``. ``filters`` is a list of rules
    (docs/operators.md, "Destination filters") that drop calls or their
    fields before delivery; a dropped call's ``deliver`` returns
    ``filtered_by`` and sends nothing.
    ``method`` is ``"POST"`` (the spec's; the default), ``"PUT"`` or
    ``"PATCH"``, for a receiver that updates a record; retries and
    signatures are the same for each.
    ``mapping`` (docs/mappings.md) builds each call's body with Segment
    Actions-style directives (``@path``, ``@template``, ``@if``,
    ``@arrayPath``, ``@default``, ``@literal``) in place of the spec's body.
    ``batch=True`` (or ``batch_max_calls`` / ``batch_max_bytes``: at most
    4,000 calls and 500,000 bytes; 1,000 and 500,000 by default) is what
    ``deliver_batch`` packs by; it changes nothing about ``deliver``.
    Bad settings raise :class:`SettingsError` here.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        shared_secret: str | bytes | None = None,
        *,
        mode: str | None = None,
        method: str | None = None,
        signature: str | None = None,
        signing_secrets: Sequence[str] | None = None,
        filters: Sequence[JSONObject] | None = None,
        mapping: JSONObject | None = None,
        batch: bool = False,
        batch_max_calls: int | None = None,
        batch_max_bytes: int | None = None,
        timeout: float = _D["webhook_timeout_ms"] / 1000,
        retry_window: float = _D["retry_window_ms"] / 1000,
        backoff_base: float = _D["delivery_backoff_base_ms"] / 1000,
        backoff_cap: float = _D["delivery_backoff_cap_ms"] / 1000,
    ) -> None:
        self._native = _callpost.Webhooks(
            endpoints,
            shared_secret,
            mode=mode,
            signature=signature,
            signing_secrets=None if signing_secrets is None else list(signing_secrets),
            filters=filters,
            mapping=mapping,
            method=method,
            batch=batch,
            batch_max_calls=batch_max_calls,
            batch_max_bytes=batch_max_bytes,
        )
        # The endpoints' OAuth 2.0 tokens, kept across deliveries.
        sources = {i: self._native.token_source(i) for i in range(len(self._native.urls))}
        self._tokens = Tokens({i: s for i, s in sources.items() if s is not None})
        self._timing = _Timing(
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
    def method(self) -> str:
        """``"POST"``, ``"PUT"`` or ``"PATCH"``."""
        return self._native.method

    @property
    def signature(self) -> str:
        """``"segment"``, ``"standard"`` or ``"both"``."""
        return self._native.signature

    @property
    def settings(self) -> _callpost.Webhooks:
        """The validated settings: what ``Delivery(...)`` and
        ``Delivery.from_json(text, settings)`` take."""
        return self._native

    def request(self, call: Call, endpoint: int = 0, now: Now = None) -> _callpost.Request:
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
        self._native.check_sent_as_built()
        http = client or new_client()
        try:
            return run_sync(_delivery_steps(self.delivery(call)), Transport(http, tokens=self._tokens).send, _sleep)
        finally:
            if client is None:
                http.close()

    def batch_delivery(
        self, batch: _callpost.Batch, now: int | None = None, *, seed: int | None = None
    ) -> _callpost.Delivery:
        """:meth:`delivery` for a batch from ``settings.pack(calls)``."""
        return _callpost.Delivery.for_batch(self._native, batch, now, seed=seed, **self._timing)

    def deliver_batch(self, calls: Sequence[Call], *, client: httpx.Client | None = None) -> list[DeliveryResult]:
        """Delivers ``calls`` several to a POST: a JSON array of their
        bodies, signed as one body, each batch retried as one call is.
        Returns one result per call, in order (a batch's for each of its
        calls; a call the filters or its integrations keep out is not sent).
        Raises :class:`DeliveryError` at the first batch that gives up: the
        batches before it were delivered, the ones after it are not sent.
        """
        self._native.check_sent_as_built()
        batches, skipped = self._native.pack(list(calls))
        steps = _batch_steps(batches, skipped, len(calls), self.batch_delivery)
        http = client or new_client()
        try:
            return run_sync(steps, Transport(http, tokens=self._tokens).send, _sleep)
        finally:
            if client is None:
                http.close()

    async def deliver_batch_async(
        self, calls: Sequence[Call], *, client: httpx.AsyncClient | None = None
    ) -> list[DeliveryResult]:
        """:meth:`deliver_batch` for asyncio."""
        self._native.check_sent_as_built()
        batches, skipped = self._native.pack(list(calls))
        steps = _batch_steps(batches, skipped, len(calls), self.batch_delivery)
        http = client or new_async_client()
        try:
            return await run_async(steps, AsyncTransport(http, tokens=self._tokens).send, _sleep_async)
        finally:
            if client is None:
                await http.aclose()

    async def deliver_async(self, call: Call, *, client: httpx.AsyncClient | None = None) -> DeliveryResult:
        """:meth:`deliver` for asyncio: never blocks the event loop; a round's
        requests are tasks."""
        self._native.check_sent_as_built()
        http = client or new_async_client()
        try:
            return await run_async(
                _delivery_steps(self.delivery(call)), AsyncTransport(http, tokens=self._tokens).send, _sleep_async
            )
        finally:
            if client is None:
                await http.aclose()
