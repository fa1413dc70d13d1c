"""The shapes of what goes into the core and what comes out of it.

The dicts the core hands out (a delivery's outcome and log, the batcher's
events) are ``TypedDict``s here, in the shapes the JavaScript package's
types give them, with snake_case keys. The native module's stub imports
them; at run time they are plain dicts.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypedDict

__all__ = [
    "AttemptOutcome",
    "AttemptRecord",
    "BatcherEvent",
    "Call",
    "Default",
    "DeliveryOutcome",
    "Endpoint",
    "Fields",
    "Headers",
    "Id",
    "JSONObject",
    "JSONValue",
    "Now",
    "StandardVerified",
    "Timestamp",
]

JSONValue = Any
"""A JSON value as Python holds it: dict, list, str, int, float, bool or
None. ``Any``, as ``json.loads`` returns, so that callers index a parsed
body without narrowing each level."""

JSONObject = dict[str, JSONValue]
"""A JSON object: a call or message as the core parsed or completed it."""

Fields = Mapping[str, object]
"""A call's ``properties``, ``traits``, ``context`` or ``integrations``:
values of any type go in, and the core refuses (naming the path) those
with no JSON form, after the ``default=`` hook had its turn."""

Call = Mapping[str, object] | str | bytes
"""A call: a dict with Segment's camelCase keys, or its JSON text."""

Id = str | int
"""A user, anonymous, group or message id; an ``int`` is sent as its exact
decimal string, whatever its size."""

Timestamp = datetime.datetime | datetime.date | str
"""When a call happened: an aware ``datetime``, or ISO 8601 text."""

Now = int | datetime.datetime | None
"""A time: ms since the epoch, or an aware ``datetime``; None reads the
host clock."""

Endpoint = str | Mapping[str, object]
"""A webhook endpoint: its URL, or ``{"url": ..., "headers": {...}}``."""

Default = Callable[[Any], object]
"""The ``default=`` hook, as ``json.dumps`` has it: called with a value
that has no JSON form (so of any type), it returns one that has, or raises
``TypeError``."""

Headers = Mapping[str, str] | Iterable[tuple[str, str]]
"""Request headers: any mapping, or name/value pairs."""


class StandardVerified(TypedDict):
    """What ``verify_standard`` returns for a request that verified."""

    id: str
    """``webhook-id``: drop a request whose id was seen before."""
    timestamp: int
    """``webhook-timestamp``, seconds since the epoch."""


class _Response(TypedDict):
    kind: Literal["response"]
    status: int


class ResponseOutcome(_Response, total=False):
    retry_after: str
    """The raw ``Retry-After`` header, when the answer had one."""


class TimeoutOutcome(TypedDict):
    kind: Literal["timeout"]


class ErrorOutcome(TypedDict):
    kind: Literal["connection", "tls", "token"]
    message: str


class HeldOutcome(TypedDict):
    """Not sent: a host held it back while its endpoint was protected (the
    relay's circuit breaker or a receiver's ``Retry-After``)."""

    kind: Literal["held"]
    until: int
    reason: str


AttemptOutcome = ResponseOutcome | TimeoutOutcome | ErrorOutcome | HeldOutcome
"""What one HTTP attempt came to."""


class AttemptRecord(TypedDict):
    """One entry of a delivery's log. Times are ms since the epoch."""

    attempt: int
    round: int
    """1-based: in parallel mode every live endpoint gets one attempt per round."""
    endpoint: int
    sent_at: int
    ended_at: int
    outcome: AttemptOutcome
    verdict: Literal["success", "retry", "reject"]


class Delivered(TypedDict):
    kind: Literal["delivered"]
    endpoint: int
    attempt: int
    at: int


class GaveUp(TypedDict):
    kind: Literal["gave_up"]
    reason: Literal["window_exhausted", "all_endpoints_rejected", "mapped_body_too_large", "invalid_url_value"]
    attempts: int
    last: AttemptOutcome | None


class Disabled(TypedDict):
    kind: Literal["disabled"]


class Filtered(TypedDict):
    kind: Literal["filtered"]
    rule: int


DeliveryOutcome = Delivered | GaveUp | Disabled | Filtered
"""How a delivery ended: ``Delivery.poll_outcome()``."""


class BatchDelivered(TypedDict):
    kind: Literal["delivered"]
    batch_id: int
    message_ids: list[str]


class BatchRetrying(TypedDict):
    kind: Literal["retrying"]
    batch_id: int
    attempt: int
    retry_at_ms: int
    reason: str


class FailedMessage(TypedDict):
    """A message of a failed batch, as it was queued."""

    message_id: str
    json: str


class BatchFailed(TypedDict):
    kind: Literal["failed"]
    batch_id: int | None
    """None for messages still queued at shutdown."""
    code: Literal["rejected", "retries_exhausted", "shutdown"]
    reason: str
    messages: list[FailedMessage]
    """Each message's id and JSON text."""


BatcherEvent = BatchDelivered | BatchRetrying | BatchFailed
"""``Batcher.poll_event()``: what became of a batch."""
