"""Receivers: a verified webhook, its new calls, and duplicate protection.

``callpost.receive`` (from the core) verifies a body and returns the parsed
call. ``Receiver`` adds what a web endpoint needs around it: the secrets and
options in one place, a ``seen`` hook that drops calls already processed
(Segment and callpost retry a call until they see a 2xx, so a receiver that
answered slowly gets it again), and the HTTP status for each refusal. The
framework helpers in ``callpost.frameworks`` are thin wrappers over it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from threading import Lock
from typing import Literal, Protocol

from ._callpost import DEFAULTS, STANDARD_TOLERANCE_MS, receive_webhook, refusal_status
from ._errors import CallpostError, InvalidArgumentError
from ._types import Headers, JSONObject, JSONValue

__all__ = ["Answer", "Receiver", "SeenHook", "SeenIds", "Webhook"]

Secrets = str | bytes | Sequence[str | bytes]


class SeenHook(Protocol):
    """``seen(message_id)``: True when the id was processed before; otherwise
    remember it and return False (check-and-set, as Redis ``SET NX`` does, so
    two concurrent retries of one call cannot both pass).

    A hook may also have ``forget(message_id)``: the helpers call it when the
    handler fails, so the sender's retry is processed. Without it, a call
    whose handler failed is treated as seen when it comes again.
    """

    def __call__(self, message_id: str) -> bool: ...


class SeenIds:
    """The default ``seen`` hook: the last ``capacity`` message ids, in
    memory (an LRU), per process. ``capacity`` defaults to
    ``DEFAULTS["seen_capacity"]``. Several processes or hosts behind one URL
    need a shared store instead (a Redis ``SET NX`` with a 4-hour expiry is
    the usual one)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = int(DEFAULTS["seen_capacity"] if capacity is None else capacity)
        if self.capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = Lock()

    def __call__(self, message_id: str) -> bool:
        with self._lock:
            if message_id in self._ids:
                self._ids.move_to_end(message_id)
                return True
            self._ids[message_id] = None
            if len(self._ids) > self.capacity:
                self._ids.popitem(last=False)
            return False

    def forget(self, message_id: str) -> None:
        with self._lock:
            self._ids.pop(message_id, None)

    def __len__(self) -> int:
        return len(self._ids)


@dataclass(frozen=True)
class Webhook:
    """A verified webhook.

    ``calls`` holds the calls not seen before, in body order: process these.
    ``ids`` holds their ids (``messageId``, else the request's signed id:
    the verified ``webhook-id``, or under ``X-Signature`` ``body_`` and 16
    bytes of the body's SHA-256 in hex, with ``.<index>`` in a batch; None
    where neither). The unsigned ``Idempotency-Key`` header is never an id.
    ``duplicates`` holds the ids of the calls dropped as seen.
    ``body`` is the whole parsed body (a dict, or a list for a batch).
    ``header`` is the header whose signature was accepted (``X-Signature``,
    ``X-Segment-Signature`` or ``webhook-signature``), and ``coverage``
    says what it covers: ``"body"``, or ``"first_event"`` (a batch under
    Segment's legacy ``X-Signature``, accepted only when opted in).
    """

    body: JSONValue
    calls: list[JSONObject]
    ids: list[str | None]
    duplicates: list[str]
    batch: bool
    header: str
    coverage: str

    @property
    def only_duplicates(self) -> bool:
        """Every call was seen before: answer 2xx and process nothing."""
        return not self.calls and bool(self.duplicates)

    @property
    def call(self) -> JSONObject | None:
        """The one new call of a single-call body (None for a duplicate)."""
        return self.calls[0] if len(self.calls) == 1 and not self.batch else None


class Receiver:
    """Verifies webhooks for one endpoint.

    ``secrets``: the ``X-Signature`` shared secret, or several while
    rotating. ``standard_secrets``: ``whsec_`` secrets for a destination
    that signs the Standard Webhooks way (``signature = "standard"`` or
    ``"both"``); its ``webhook-timestamp`` must be within ``tolerance_ms``
    of the clock (``STANDARD_TOLERANCE_MS``, 5 minutes, by default). Give
    either or both: with only ``standard_secrets`` a request must carry
    ``webhook-signature``; with both, a request carrying it is held to it
    and one without it to ``X-Signature`` (for the move from one to the
    other). ``seen``: the duplicate filter (None, the default: a
    ``SeenIds()`` of its own; False: none, every call goes to the handler).
    ``allow_first_event_signature``: accept a batch whose ``X-Signature``
    covers only its first event (Segment's Actions destination without "Use
    X-Segment-Signature Header"); the other events are then unauthenticated.
    """

    def __init__(
        self,
        secrets: Secrets | None = None,
        *,
        standard_secrets: str | Sequence[str] | None = None,
        seen: Callable[[str], bool] | Literal[False] | None = None,
        allow_first_event_signature: bool = False,
        tolerance_ms: int = STANDARD_TOLERANCE_MS,
    ) -> None:
        if secrets is None and standard_secrets is None:
            raise InvalidArgumentError(
                "invalid_argument", "give secrets (X-Signature), standard_secrets (whsec_), or both"
            )
        self._secrets = secrets
        self._standard_secrets = standard_secrets
        self.seen: Callable[[str], bool] | None = SeenIds() if seen is None else (seen or None)
        self.allow_first_event_signature = allow_first_event_signature
        self.tolerance_ms = tolerance_ms

    def __repr__(self) -> str:
        # Never the secrets.
        return (
            f"Receiver(seen={self.seen!r}, allow_first_event_signature={self.allow_first_event_signature}, "
            f"standard={self._standard_secrets is not None})"
        )

    def receive(self, body: bytes | str, headers: Headers) -> Webhook:
        """Verifies the raw body against the headers' signature and returns
        the webhook with its new calls. Raises ``SignatureError`` or
        ``JSONValueError`` (see ``callpost.receive``)."""
        value, header, coverage, ids = receive_webhook(
            body,
            headers,
            self._secrets,
            standard_secrets=self._standard_secrets,
            allow_first_event_signature=self.allow_first_event_signature,
            tolerance_ms=self.tolerance_ms,
        )
        calls: list[JSONObject] = value if isinstance(value, list) else [value]
        fresh: list[JSONObject] = []
        fresh_ids: list[str | None] = []
        duplicates: list[str] = []
        for call, message_id in zip(calls, ids, strict=True):
            if message_id is not None and self.seen is not None and self.seen(message_id):
                duplicates.append(message_id)
                continue
            fresh.append(call)
            fresh_ids.append(message_id)
        return Webhook(value, fresh, fresh_ids, duplicates, isinstance(value, list), header, coverage)

    def check(self, body: bytes | str, headers: Headers) -> Webhook | Answer:
        """``receive`` for the framework helpers: the webhook to hand to the
        handler, or the ``Answer`` to send instead: a refusal (401 for a
        signature that did not verify, 400 otherwise, with ``{"error",
        "message"}``, never a secret or the expected signature), or 200
        ``{"duplicates": n}`` when every call was seen before."""
        try:
            hook = self.receive(body, headers)
        except CallpostError as e:
            return Answer(refusal_status(e.code), {"error": e.code, "message": str(e)})
        if hook.only_duplicates:
            return Answer(200, {"duplicates": len(hook.duplicates)})
        return hook

    def failed(self, webhook: Webhook) -> None:
        """The handler failed: forget the webhook's new ids (where the
        ``seen`` hook can), so the sender's retry is processed."""
        forget = getattr(self.seen, "forget", None)
        if forget is not None:
            for message_id in webhook.ids:
                if message_id is not None:
                    forget(message_id)

    @contextmanager
    def processing(self, webhook: Webhook) -> Iterator[Webhook]:
        """Wraps the handler: when it raises, ``failed(webhook)``, then the
        error goes on."""
        try:
            yield webhook
        except BaseException:
            self.failed(webhook)
            raise


@dataclass(frozen=True)
class Answer:
    """What a helper answers instead of calling the handler."""

    status: int
    body: JSONObject
