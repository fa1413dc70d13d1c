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

from typing import Any, Mapping, Sequence, Union

from ._callpost import (
    MAX_BATCH_BYTES,
    MAX_MESSAGE_BYTES,
    USER_AGENT,
    Attempt,
    BatchRequest,
    Batcher,
    Delivery,
    Request,
    parse_timestamp,
    sign,
    stringify,
    trait_name,
    verify,
    verify_parsed,
)
from ._errors import (
    CallpostError,
    ClosedError,
    ConfigError,
    DeliveryError,
    InvalidCallError,
    JSONValueError,
    MessageTooLargeError,
    NotJSONError,
    QueueFullError,
    SettingsError,
    SignatureError,
)
from ._io import AsyncClient, Client, DeliveryResult, Webhooks

__version__ = "0.1.0"


def verify_request(
    body: Union[str, bytes],
    headers: Mapping[str, str],
    secrets: Union[str, bytes, Sequence[Union[str, bytes]]],
) -> bool:
    """Verifies a received webhook from its raw body and its headers (any
    mapping; the header name is matched case-insensitively). False when the
    request carries no ``X-Signature`` or it does not match; raises
    :class:`SignatureError` when the header is malformed.

    Use the raw body bytes, before any JSON parsing: Flask ``request.get_data()``,
    Django ``request.body``, FastAPI/Starlette ``await request.body()``.
    """
    signature = None
    for name, value in headers.items():
        if name.lower() == "x-signature":
            signature = value
            break
    if signature is None:
        return False
    return verify(body, signature, secrets)


__all__ = [
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
    "InvalidCallError",
    "JSONValueError",
    "MAX_BATCH_BYTES",
    "MAX_MESSAGE_BYTES",
    "MessageTooLargeError",
    "NotJSONError",
    "QueueFullError",
    "Request",
    "SettingsError",
    "SignatureError",
    "USER_AGENT",
    "Webhooks",
    "parse_timestamp",
    "sign",
    "stringify",
    "trait_name",
    "verify",
    "verify_parsed",
    "verify_request",
]
