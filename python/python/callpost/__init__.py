"""callpost: Segment-style analytics calls, batching, and signed webhook
delivery, on one Rust core shared with the JavaScript package.

Receivers::

    callpost.verify(raw_body, request.headers["X-Signature"], secret)

Senders::

    hooks = callpost.Webhooks(["https://example.com/hook"], shared_secret="s3cret")
    hooks.deliver({"type": "track", "userId": "u1", "event": "Signed Up"})

    with callpost.Client("WRITE_KEY") as analytics:
        analytics.track("u1", "Signed Up", {"plan": "pro"})
"""

from __future__ import annotations

from ._callpost import (
    CALL_FIELDS,
    DEFAULT_ENDPOINT,
    DEFAULTS,
    ERROR_CODES,
    MAX_BATCH_BYTES,
    MAX_MESSAGE_BYTES,
    SIGNATURE_HEADER,
    USER_AGENT,
    Attempt,
    BatchRequest,
    Batcher,
    Delivery,
    Request,
    __version__,
    parse_timestamp,
    sign,
    stringify,
    trait_name,
    verify,
    verify_parsed,
    verify_request,
)
from ._errors import (
    CallpostError,
    ClosedError,
    ConfigError,
    DeliveryError,
    IngestError,
    InvalidArgumentError,
    InvalidCallError,
    JSONValueError,
    MessageTooLargeError,
    NotJSONError,
    QueueFullError,
    SettingsError,
    SignatureError,
    StateError,
)
from ._io import AsyncClient, Client, DeliveryResult, Webhooks

__all__ = [
    "AsyncClient",
    "Attempt",
    "BatchRequest",
    "Batcher",
    "CALL_FIELDS",
    "CallpostError",
    "Client",
    "ClosedError",
    "ConfigError",
    "DEFAULTS",
    "DEFAULT_ENDPOINT",
    "Delivery",
    "DeliveryError",
    "DeliveryResult",
    "ERROR_CODES",
    "IngestError",
    "InvalidArgumentError",
    "InvalidCallError",
    "JSONValueError",
    "MAX_BATCH_BYTES",
    "MAX_MESSAGE_BYTES",
    "MessageTooLargeError",
    "NotJSONError",
    "QueueFullError",
    "Request",
    "SIGNATURE_HEADER",
    "SettingsError",
    "SignatureError",
    "StateError",
    "USER_AGENT",
    "Webhooks",
    "__version__",
    "parse_timestamp",
    "sign",
    "stringify",
    "trait_name",
    "verify",
    "verify_parsed",
    "verify_request",
]
