"""Type stubs for the native module. Everything here is re-exported by
``callpost``; the classes are the sans-IO core, for hosts that drive their own
I/O (Celery, RQ, a database outbox)."""

import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, final


__all__ = [
    "Attempt",
    "BatchRequest",
    "Batcher",
    "Delivery",
    "MAX_BATCH_BYTES",
    "MAX_MESSAGE_BYTES",
    "Request",
    "USER_AGENT",
    "Webhooks",
    "parse_timestamp",
    "sign",
    "stringify",
    "trait_name",
    "verify",
    "verify_parsed",
]

_Bytes = Union[str, bytes]
_Now = Union[int, datetime.datetime, None]
_Call = Union[Mapping[str, Any], str, bytes]
"""A call: a dict with Segment's camelCase keys, or its JSON text."""

USER_AGENT: str
"""The ``User-Agent`` webhook requests carry (``callpost/1.0``)."""
MAX_MESSAGE_BYTES: int
"""Largest serialized message the batching client accepts (32,000)."""
MAX_BATCH_BYTES: int
"""Largest batch body, envelope included (500,000)."""

def stringify(value: Any) -> str:
    """``JSON.stringify(value)``, byte for byte. Takes dict (str keys), list,
    tuple, str, int, float, bool, None, aware datetime and date. Raises
    NotJSONError (naming the path) for anything else, JSONValueError for NaN,
    infinities, integers JavaScript would change, or nesting over 64."""

def sign(secret: _Bytes, body: _Bytes) -> str:
    """Lowercase hex HMAC-SHA1 of ``body`` keyed with ``secret``."""

def verify(body: _Bytes, signature: str, secrets: Union[_Bytes, Sequence[_Bytes]]) -> bool:
    """Constant-time check of ``signature`` over the raw body, against one or
    several secrets (rotation). Raises SignatureError if malformed."""

def verify_parsed(value: Any, signature: str, secrets: Union[_Bytes, Sequence[_Bytes]]) -> bool:
    """Verifies a parsed body by re-stringifying it as JavaScript does."""

def trait_name(audience: str) -> str:
    """The snake_case trait name for an audience name."""

def parse_timestamp(text: str) -> int:
    """ISO 8601 (with an offset) to milliseconds since the epoch, UTC."""

@final
class Request:
    """An HTTP request to send. ``repr`` hides header values and the body."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def headers(self) -> List[Tuple[str, str]]: ...
    @property
    def body(self) -> bytes: ...
    def header(self, name: str) -> Optional[str]:
        """The first header named ``name`` (case-insensitive), or None."""

@final
class Webhooks:
    """Native settings object; use ``callpost.Webhooks``, which adds delivery."""

    def __new__(cls, endpoints: Sequence[Union[str, Mapping[str, Any]]], shared_secret: Optional[_Bytes] = None) -> "Webhooks": ...
    def request(self, call: _Call, endpoint: int = 0, now: _Now = None) -> Request:
        """The signed request for ``call`` to endpoint ``endpoint``."""
    def is_enabled_for(self, call: _Call) -> bool:
        """Whether the call's ``integrations`` let it reach Webhooks."""
    @property
    def urls(self) -> List[str]: ...
    @property
    def signed(self) -> bool: ...

@final
class Attempt:
    """One request to send for a Delivery."""

    @property
    def endpoint(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def request(self) -> Request: ...
    @property
    def deadline_ms(self) -> int: ...

@final
class Delivery:
    """One call's delivery: failover, retries for 4 hours, an attempt log.
    Drive it: ``poll_request`` → send → ``handle_response``; sleep until
    ``poll_timeout`` → ``handle_timeout``; ``poll_outcome`` once done."""

    def __new__(
        cls,
        webhooks: Webhooks,
        call: _Call,
        now: _Now = None,
        *,
        timeout_ms: int = 5000,
        retry_window_ms: int = 14400000,
        backoff_base_ms: int = 10000,
        backoff_cap_ms: int = 1800000,
        seed: int = 0,
    ) -> "Delivery": ...
    def poll_request(self, now_ms: int, webhooks: Webhooks) -> Optional[Attempt]:
        """The request to send now, or None."""
    def handle_response(
        self,
        now_ms: int,
        status: Optional[int] = None,
        retry_after: Optional[str] = None,
        error: Optional[str] = None,
        message: str = "",
    ) -> None:
        """Reports a status (with the raw Retry-After header) or an
        ``error`` of 'timeout', 'connection' or 'tls'."""
    def handle_timeout(self, now_ms: int) -> None: ...
    def poll_timeout(self) -> Optional[int]:
        """When to call ``handle_timeout`` / ``poll_request`` next (ms), or None when done."""
    def poll_outcome(self) -> Optional[Dict[str, Any]]:
        """The final outcome, once: kind 'delivered' | 'gave_up' | 'disabled'."""
    @property
    def outcome(self) -> Optional[Dict[str, Any]]: ...
    @property
    def log(self) -> List[Dict[str, Any]]: ...
    @property
    def body(self) -> bytes: ...
    @property
    def done(self) -> bool: ...
    def to_json(self) -> str:
        """The whole state, to persist and resume with ``from_json``."""
    @staticmethod
    def from_json(text: str) -> "Delivery": ...

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
class Batcher:
    """The batching client's state machine: queue, batches, retries."""

    def __new__(
        cls,
        write_key: str,
        *,
        endpoint: Optional[str] = None,
        flush_at: int = 20,
        flush_after_ms: int = 5000,
        max_queue: int = 10000,
        max_attempts: int = 10,
        max_retry_ms: int = 600000,
        request_timeout_ms: int = 15000,
        max_in_flight: int = 1,
        backoff_base_ms: int = 1000,
        backoff_cap_ms: int = 60000,
        library_name: Optional[str] = None,
        library_version: Optional[str] = None,
        seed: int = 0,
        now: _Now = None,
        on_wake: Optional[Callable[[], object]] = None,
    ) -> "Batcher":
        """Safe to share between threads (each method locks it briefly). ``on_wake`` is called, after
        ``handle_call``/``handle_fields`` queued a call that moved ``poll_timeout()`` earlier, so an I/O
        loop sleeping until the old time can look again; its exception propagates (the call is queued)."""
    def handle_call(self, now_ms: Optional[int], call: _Call, random: Optional[bytes] = None) -> str:
        """Queues a call; ``random`` is 16 bytes for its messageId. Returns the messageId.
        ``None`` reads the host clock / the OS's entropy."""
    def handle_fields(
        self,
        kind: str,
        user_id: Any,
        anonymous_id: Any,
        event: Any,
        name: Any,
        category: Any,
        group_id: Any,
        previous_id: Any,
        properties: Any,
        traits: Any,
        context: Any,
        integrations: Any,
        timestamp: Any,
        message_id: Any,
    ) -> str:
        """``handle_call(None, {"type": kind, "userId": ..., ...}, None)`` without the dict: what the clients'
        ``track()`` and friends call. ``None`` fields are absent."""
    def flush(self, now_ms: int) -> None: ...
    def shutdown(self) -> None: ...
    def poll_request(self, now_ms: int) -> Optional[BatchRequest]: ...
    def handle_response(
        self,
        now_ms: int,
        batch_id: int,
        status: Optional[int] = None,
        retry_after: Optional[str] = None,
        error: Optional[str] = None,
        message: str = "",
    ) -> None: ...
    def handle_timeout(self, now_ms: int) -> None: ...
    def poll_timeout(self) -> Optional[int]: ...
    def poll_event(self) -> Optional[Dict[str, Any]]:
        """The next event: kind 'delivered' | 'retrying' | 'failed'."""
    @property
    def queued(self) -> int: ...
    @property
    def in_batches(self) -> int: ...
    @property
    def idle(self) -> bool: ...
