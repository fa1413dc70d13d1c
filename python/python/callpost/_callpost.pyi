"""Type stubs for the native module. Everything here is re-exported by
``callpost``; the classes are the sans-IO core, for hosts that drive their own
I/O (Celery, RQ, a database outbox).

Parameters that default to ``None`` take the core's default, listed in
``DEFAULTS`` (durations in milliseconds)."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import final

from ._types import (
    AttemptRecord,
    BatcherEvent,
    Call,
    Default,
    DeliveryOutcome,
    Endpoint,
    Headers,
    JSONObject,
    JSONValue,
    Now,
    StandardVerified,
)

__all__ = [
    "CALL_FIELDS",
    "DEFAULTS",
    "DEFAULT_ENDPOINT",
    "ERROR_CODES",
    "MAX_BATCH_BYTES",
    "MAX_MESSAGE_BYTES",
    "SEGMENT_DEFAULTS",
    "SEGMENT_SIGNATURE_HEADER",
    "SIGNATURE_HEADER",
    "STANDARD_TOLERANCE_MS",
    "SUCCESS_BODY",
    "USER_AGENT",
    "Attempt",
    "AudienceSync",
    "Batch",
    "BatchRequest",
    "Batcher",
    "Delivery",
    "Message",
    "Request",
    "TokenSource",
    "Webhooks",
    "__version__",
    "delete_notifications",
    "parse_timestamp",
    "receive",
    "receive_webhook",
    "refusal_status",
    "sign",
    "sign_standard",
    "stringify",
    "trait_name",
    "verify",
    "verify_parsed",
    "verify_request",
    "verify_standard",
]

_Bytes = str | bytes

__version__: str
"""callpost's version (the Rust workspace's)."""
USER_AGENT: str
"""The ``User-Agent`` webhook requests carry."""
DEFAULT_ENDPOINT: str
"""The batching client's default ingest base URL."""
SIGNATURE_HEADER: str
"""The header webhook signatures travel in (``X-Signature``)."""
SEGMENT_SIGNATURE_HEADER: str
"""The header Segment's Webhooks (Actions) destination signs the whole body
in when "Use X-Segment-Signature Header" is on (``X-Segment-Signature``)."""
STANDARD_TOLERANCE_MS: int
"""How far a Standard Webhooks ``webhook-timestamp`` may be from the
receiver's clock, either way, by default (5 minutes, the specification's)."""
MAX_MESSAGE_BYTES: int
"""Largest serialized message the batching client accepts."""
MAX_BATCH_BYTES: int
"""Largest batch body, envelope included."""
SUCCESS_BODY: str
"""The exact body of a Tracking API server's answer to an accepted request (Segment's, and the relay's)."""
DEFAULTS: dict[str, int]
"""Every limit and default of the core, by name; durations in milliseconds."""
SEGMENT_DEFAULTS: dict[str, int]
"""segment-analytics-python 2.x's defaults, which ``callpost.segment`` keeps; durations in milliseconds."""
CALL_FIELDS: list[str]
"""A call's top-level keys other than ``type``, in the order ``Batcher.handle_fields`` takes them."""
ERROR_CODES: dict[str, tuple[str, str | None]]
"""The core's error registry: code → (exception class name, built-in base or None)."""

def stringify(value: object, *, default: Default | None = None) -> str:
    """``JSON.stringify(value)``, byte for byte. Takes dict (str keys), list,
    tuple, str, int, float, bool, None, aware datetime and date. ``default``,
    as for ``json.dumps``, is called with any other value (and a naive
    datetime) and its result written instead; a TypeError from it means no
    conversion. Raises NotJSONError (naming the path) for a value with no JSON
    form, JSONValueError for NaN, infinities, integers JavaScript would change,
    or nesting over 64."""

def sign(secret: _Bytes, body: _Bytes) -> str:
    """Lowercase hex HMAC-SHA1 of ``body`` keyed with ``secret``."""

def verify(body: _Bytes, signature: str, secrets: _Bytes | Sequence[_Bytes]) -> bool:
    """Constant-time check of ``signature`` over the raw body, against one or
    several secrets (rotation). Raises SignatureError if malformed."""

def receive(
    body: _Bytes,
    headers: Headers,
    secrets: _Bytes | Sequence[_Bytes] | None = None,
    *,
    standard_secrets: str | Sequence[str] | None = None,
    allow_first_event_signature: bool = False,
    now: Now = None,
    tolerance_ms: int = ...,
) -> JSONValue:
    """Verifies a received webhook and returns its parsed body: a dict for
    one call, a list for a batch. It never returns a body it did not verify.

    ``body`` is the raw request body, byte for byte (Flask
    ``request.get_data()``, Django ``request.body``, Starlette ``await
    request.body()``); a parsed dict or list is refused with
    InvalidArgumentError. ``headers``: any mapping or name/value pairs.
    ``X-Segment-Signature`` is used when present, else ``X-Signature``.

    Raises SignatureError with ``code`` ``missing_signature``,
    ``malformed_signature``, ``signature_mismatch``, or
    ``first_event_signature`` (a batch whose ``X-Signature`` covers only its
    first event, as Segment's Actions destination signs without "Use
    X-Segment-Signature Header"; accepted with
    ``allow_first_event_signature=True``); JSONValueError for a verified
    body that is not JSON.

    ``standard_secrets``: ``whsec_`` secrets for the Standard Webhooks
    scheme (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``),
    whose timestamp must be within ``tolerance_ms`` (``STANDARD_TOLERANCE_MS``)
    of ``now`` (default: the clock), or SignatureError ``timestamp_too_old`` /
    ``timestamp_too_new``. Give ``secrets``, ``standard_secrets`` or both:
    with only ``standard_secrets`` a request must carry
    ``webhook-signature``; with both, a request carrying it is held to it
    (no fallback) and one without it to ``X-Signature``."""

def receive_webhook(
    body: _Bytes,
    headers: Headers,
    secrets: _Bytes | Sequence[_Bytes] | None = None,
    *,
    standard_secrets: str | Sequence[str] | None = None,
    allow_first_event_signature: bool = False,
    now: Now = None,
    tolerance_ms: int = ...,
) -> tuple[JSONValue, str, str, list[str | None]]:
    """``receive`` with ``(body, header, coverage, message_ids)``: the
    accepted header's name, ``"body"`` or ``"first_event"``, and each call's
    ``messageId`` (None where absent). ``callpost.Receiver`` is built on it."""

def refusal_status(code: str) -> int:
    """The HTTP status a receiver answers a refused webhook with: 401 for a
    signature error code, 400 for the rest."""

def verify_request(body: _Bytes, headers: Headers, secrets: _Bytes | Sequence[_Bytes]) -> bool:
    """Verifies a received webhook from its raw body and its headers (any
    mapping, or name/value pairs; the header name is matched
    case-insensitively). False when the request carries no ``X-Signature``
    or it does not match; raises SignatureError when it is malformed.
    Prefer ``receive``, which returns the verified body and says why it
    refused one.

    Use the raw body bytes, before any JSON parsing: Flask ``request.get_data()``,
    Django ``request.body``, FastAPI/Starlette ``await request.body()``."""

def verify_parsed(value: object, signature: str, secrets: _Bytes | Sequence[_Bytes]) -> bool:
    """Verifies a parsed body by re-stringifying it as JavaScript does."""

def sign_standard(msg_id: str, body: _Bytes, secrets: str | Sequence[str], now: Now = None) -> list[tuple[str, str]]:
    """The Standard Webhooks headers (``webhook-id``, ``webhook-timestamp``,
    ``webhook-signature``) for ``body`` sent at ``now`` (default: the
    clock), one ``v1`` signature per ``whsec_`` secret."""

def verify_standard(
    body: _Bytes,
    headers: Headers,
    secrets: str | Sequence[str],
    *,
    now: Now = None,
    tolerance_ms: int = ...,
) -> StandardVerified:
    """Verifies a request's Standard Webhooks headers against its raw body:
    the timestamp within ``tolerance_ms`` (default ``STANDARD_TOLERANCE_MS``)
    of ``now`` (default: the clock), then a ``v1`` signature under one of
    the ``whsec_`` secrets, compared in constant time. Raises
    SignatureError with ``timestamp_too_old``, ``timestamp_too_new``,
    ``missing_signature``, ``malformed_signature``, ``signature_mismatch``
    or ``malformed_secret``."""

def trait_name(audience: str) -> str:
    """The snake_case trait name for an audience name."""

def parse_timestamp(text: str) -> int:
    """ISO 8601 (with an offset) to milliseconds since the epoch, UTC."""

def delete_notifications(
    user_id: str, sources: Sequence[tuple[str, Mapping[str, object] | None]], now: Now = None
) -> list[tuple[str, str]]:
    """One delete call per ``(source_id, integrations)`` whose integrations
    leave Webhooks on, as ``(source_id, message JSON text)``."""

@final
class AudienceSync:
    """Membership sync for one audience, sans I/O: ``handle_sync`` with the
    full member list, then ``poll_call`` until None for the identify calls
    of the changes. ``to_json`` / ``from_json`` keep it between syncs."""

    def __new__(cls, audience: str) -> AudienceSync: ...
    @staticmethod
    def from_json(text: str) -> AudienceSync: ...
    def to_json(self) -> str: ...
    @property
    def trait_name(self) -> str: ...
    def handle_sync(self, members: Sequence[str], now: Now = None) -> None: ...
    def poll_call(self) -> str | None:
        """The next identify call as Segment message JSON text, or None."""

@final
class Request:
    """An HTTP request to send. ``repr`` hides header values and the body."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def headers(self) -> list[tuple[str, str]]: ...
    @property
    def body(self) -> bytes: ...
    def header(self, name: str) -> str | None:
        """The first header named ``name`` (case-insensitive), or None."""

@final
class Webhooks:
    """Native settings object; use ``callpost.Webhooks``, which adds delivery."""

    def __new__(
        cls,
        endpoints: Sequence[Endpoint],
        shared_secret: _Bytes | None = None,
        *,
        mode: str | None = None,
        signature: str | None = None,
        signing_secrets: list[str] | None = None,
        filters: Sequence[JSONObject] | None = None,
        batch_max_calls: int | None = None,
        batch_max_bytes: int | None = None,
        batch: bool = False,
        mapping: JSONObject | None = None,
        method: str | None = None,
    ) -> Webhooks: ...
    def pack(self, calls: Iterable[Call], now: Now = None) -> tuple[list[Batch], list[tuple[int, DeliveryOutcome]]]:
        """Groups ``calls`` into batches (the destination's batching, or the
        default limits), and the calls in none with their outcome."""
    def request(self, call: Call, endpoint: int = 0, now: Now = None) -> Request:
        """The signed request for ``call`` to endpoint ``endpoint``."""
    def is_enabled_for(self, call: Call) -> bool:
        """Whether the call's ``integrations`` let it reach Webhooks."""
    def check_sent_as_built(self) -> None:
        """Raises :class:`SettingsError` (``invalid_auth``) when an endpoint
        presents a client certificate, which this package's ``deliver``
        does not (callpost-relay does)."""
    def token_source(self, endpoint: int, *, seed: int | None = None) -> TokenSource | None:
        """The token source of endpoint ``endpoint``'s OAuth 2.0 grant, or
        None when its auth is not ``oauth2``."""
    @property
    def urls(self) -> list[str]: ...
    @property
    def signed(self) -> bool: ...
    @property
    def mode(self) -> str:
        """``"parallel"`` or ``"failover"``."""
    @property
    def method(self) -> str:
        """``"POST"``, ``"PUT"`` or ``"PATCH"``."""
    @property
    def signature(self) -> str:
        """``"segment"``, ``"standard"`` or ``"both"``."""

@final
class TokenSource:
    """One OAuth 2.0 grant's bearer token, sans I/O: fetched, cached,
    refreshed before it expires, dropped on a receiver's 401. The host
    sends the request ``poll_request`` gives and reports the answer."""

    ANSWER_BYTES: int
    """The most bytes of a token answer to read."""

    def poll_request(self, now_ms: int) -> tuple[str, list[tuple[str, str]], bytes, int] | None:
        """``(url, headers, body, deadline_ms)`` of the token request to
        send now (a ``POST``), or None."""
    def handle_response(self, now_ms: int, status: int, body: bytes) -> None:
        """The token endpoint's answer. Raises :class:`DeliveryError`
        (``token_unavailable``) when it is not a bearer token."""
    def handle_failure(self, now_ms: int, message: str) -> None:
        """The token request failed without an answer."""
    def authorization(self, now_ms: int) -> str:
        """``Bearer …`` to send now. Raises :class:`DeliveryError`
        (``token_unavailable``) with the last failure when there is none."""
    def handle_rejected(self, authorization: str) -> None:
        """A receiver answered 401 to a request sent with ``authorization``."""

@final
class Batch:
    """Several calls in one POST, from ``Webhooks.pack``."""

    @property
    def id(self) -> str:
        """``Idempotency-Key`` and ``webhook-id``: the same for the same calls."""
    @property
    def body(self) -> bytes:
        """The JSON array of the calls' bodies."""
    @property
    def members(self) -> list[int]:
        """The indexes of its calls in the list packed."""

@final
class Attempt:
    """One request to send for a Delivery."""

    @property
    def endpoint(self) -> int: ...
    @property
    def attempt(self) -> int:
        """Pass it back to ``Delivery.handle_response``."""
    @property
    def request(self) -> Request: ...
    @property
    def deadline_ms(self) -> int: ...

@final
class Delivery:
    """One call's delivery: rounds across the endpoints, retries for 4 hours,
    an attempt log. Drive it: ``poll_request`` until None → send every
    request → ``handle_response`` for each; sleep until ``poll_timeout`` →
    ``handle_timeout``; ``poll_outcome`` once done. With ``seed=None`` the
    backoff's jitter is seeded from OS randomness."""

    def __new__(
        cls,
        webhooks: Webhooks,
        call: Call,
        now: Now = None,
        *,
        timeout_ms: int | None = None,
        retry_window_ms: int | None = None,
        backoff_base_ms: int | None = None,
        backoff_cap_ms: int | None = None,
        seed: int | None = None,
    ) -> Delivery: ...
    @staticmethod
    def for_batch(
        webhooks: Webhooks,
        batch: Batch,
        now: Now = None,
        *,
        timeout_ms: int | None = None,
        retry_window_ms: int | None = None,
        backoff_base_ms: int | None = None,
        backoff_cap_ms: int | None = None,
        seed: int | None = None,
    ) -> Delivery:
        """The delivery of ``batch``: one POST of its body under its id,
        decided by one answer."""
    def poll_request(self, now_ms: int) -> Attempt | None:
        """A request to send now, or None; call until None."""
    def handle_response(
        self,
        now_ms: int,
        attempt: int,
        status: int | None = None,
        retry_after: str | None = None,
        error: str | None = None,
        message: str = "",
    ) -> None:
        """Reports attempt ``attempt``'s status (with the raw Retry-After
        header) or an ``error`` of 'timeout', 'connection' or 'tls'."""
    def handle_timeout(self, now_ms: int) -> None: ...
    def poll_timeout(self) -> int | None:
        """When to call ``poll_request`` / ``handle_timeout`` next (ms), or None when done."""
    def poll_outcome(self) -> DeliveryOutcome | None:
        """The final outcome, once: kind 'delivered' | 'gave_up' | 'disabled'."""
    @property
    def outcome(self) -> DeliveryOutcome | None: ...
    @property
    def error_message(self) -> str | None:
        """What a host raises when the delivery gave up, or None."""
    @property
    def log(self) -> list[AttemptRecord]: ...
    @property
    def body(self) -> bytes: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def mode(self) -> str: ...
    @property
    def done(self) -> bool: ...
    def to_json(self) -> str:
        """The whole state, to persist and resume with ``from_json``."""
    @staticmethod
    def from_json(text: str, webhooks: Webhooks) -> Delivery:
        """Restores a saved state for the same settings. Requests that were in
        flight when it was saved are sent again (same attempt, same
        ``Idempotency-Key``)."""

@final
class BatchRequest:
    """One batch upload to perform."""

    @property
    def batch_id(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def message_count(self) -> int: ...
    @property
    def request(self) -> Request: ...
    @property
    def deadline_ms(self) -> int: ...

@final
class Message:
    """A message made by ``Batcher.prepare_fields``, as it would be sent."""

    @property
    def message_id(self) -> str: ...
    @property
    def json(self) -> str:
        """The message object, in ``JSON.stringify`` form."""

@final
class Batcher:
    """The batching client's state machine: queue, batches, retries."""

    def __new__(
        cls,
        write_key: str,
        *,
        endpoint: str | None = None,
        flush_at: int | None = None,
        flush_after_ms: int | None = None,
        max_queue: int | None = None,
        max_attempts: int | None = None,
        max_retry_ms: int | None = None,
        request_timeout_ms: int | None = None,
        max_in_flight: int | None = None,
        backoff_base_ms: int | None = None,
        backoff_cap_ms: int | None = None,
        library_name: str | None = None,
        library_version: str | None = None,
        seed: int | None = None,
        now: Now = None,
        on_wake: Callable[[], object] | None = None,
        default: Default | None = None,
    ) -> Batcher:
        """Safe to share between threads (each method locks it briefly). With ``seed=None`` the retry jitter
        is seeded from OS randomness. ``on_wake`` is called after ``handle_call``/``handle_fields`` queued a
        call that moved ``poll_timeout()`` earlier, so an I/O loop sleeping until the old time can look again;
        its exception propagates (the call is queued). ``default`` converts call values with no JSON form
        (see ``stringify``)."""
    def handle_call(self, now_ms: int | None, call: Call, random: bytes | None = None) -> str:
        """Queues a call; ``random`` is 16 bytes for its messageId. Returns the messageId.
        ``None`` reads the host clock / the OS's entropy."""
    # handle_fields and prepare_fields each list CALL_FIELDS in full: the
    # native methods take them positionally, and a stub cannot share a
    # parameter list between two methods.
    def handle_fields(
        self,
        kind: str,
        user_id: object,
        anonymous_id: object,
        event: object,
        name: object,
        category: object,
        properties: object,
        traits: object,
        context: object,
        integrations: object,
        group_id: object,
        previous_id: object,
        timestamp: object,
        message_id: object,
    ) -> str:
        """``handle_call(None, {"type": kind, "userId": ..., ...}, None)`` without the dict, fields in the
        order of ``CALL_FIELDS``: what the clients' ``track()`` and friends call. ``None`` fields are absent."""
    def prepare_fields(
        self,
        kind: str,
        user_id: object,
        anonymous_id: object,
        event: object,
        name: object,
        category: object,
        properties: object,
        traits: object,
        context: object,
        integrations: object,
        group_id: object,
        previous_id: object,
        timestamp: object,
        message_id: object,
    ) -> Message:
        """The message ``handle_fields`` would queue, not queued: checked, completed (messageId, timestamp,
        ``context.library``) and size-checked. Queue it with ``handle_message``."""
    def handle_message(self, message: Message) -> None:
        """Queues a message from this batcher's ``prepare_fields``. Raises QueueFullError or ClosedError."""
    def flush(self, now_ms: int) -> None: ...
    def shutdown(self) -> None: ...
    def poll_request(self, now_ms: int) -> BatchRequest | None: ...
    def handle_response(
        self,
        now_ms: int,
        batch_id: int,
        status: int | None = None,
        retry_after: str | None = None,
        error: str | None = None,
        message: str = "",
    ) -> None: ...
    def handle_timeout(self, now_ms: int) -> None: ...
    def poll_timeout(self) -> int | None: ...
    def poll_event(self) -> BatcherEvent | None:
        """The next event: kind 'delivered' | 'retrying' | 'failed'."""
    @property
    def queued(self) -> int: ...
    @property
    def in_batches(self) -> int: ...
    @property
    def idle(self) -> bool: ...
