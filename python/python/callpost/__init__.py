"""callpost: Segment-style analytics calls, batching, and signed webhook
delivery, on one Rust core shared with the JavaScript package.

Receivers::

    call = callpost.receive(raw_body, request.headers, secret)  # raises SignatureError

and ``callpost.Receiver`` with the helpers in ``callpost.frameworks``
(Flask, Django, Starlette/FastAPI).

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
    SEGMENT_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    STANDARD_TOLERANCE_MS,
    USER_AGENT,
    Attempt,
    Batcher,
    BatchRequest,
    Delivery,
    Request,
    TokenSource,
    __version__,
    parse_timestamp,
    receive,
    receive_webhook,
    sign,
    sign_standard,
    stringify,
    trait_name,
    verify,
    verify_parsed,
    verify_request,
    verify_standard,
)
from ._client import AsyncClient, Client
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
    RelayError,
    SettingsError,
    SignatureError,
    StateError,
)
from ._receive import Answer, Receiver, SeenHook, SeenIds, Webhook
from ._webhooks import DeliveryResult, Webhooks

__all__ = [
    "CALL_FIELDS",
    "DEFAULTS",
    "DEFAULT_ENDPOINT",
    "ERROR_CODES",
    "MAX_BATCH_BYTES",
    "MAX_MESSAGE_BYTES",
    "SEGMENT_SIGNATURE_HEADER",
    "SIGNATURE_HEADER",
    "STANDARD_TOLERANCE_MS",
    "USER_AGENT",
    "Answer",
    "AsyncClient",
    "Attempt",
    "BatchRequest",
    "Batcher",
    "CallpostError",
    "Client",
    "ClosedError",
    "ConfigError",
    "Delivery",
    "DeliveryError",
    "DeliveryResult",
    "IngestError",
    "InvalidArgumentError",
    "InvalidCallError",
    "JSONValueError",
    "MessageTooLargeError",
    "NotJSONError",
    "QueueFullError",
    "Receiver",
    "RelayError",
    "Request",
    "SeenHook",
    "SeenIds",
    "SettingsError",
    "SignatureError",
    "StateError",
    "TokenSource",
    "Webhook",
    "Webhooks",
    "__version__",
    "parse_timestamp",
    "receive",
    "receive_webhook",
    "sign",
    "sign_standard",
    "stringify",
    "trait_name",
    "verify",
    "verify_parsed",
    "verify_request",
    "verify_standard",
]
