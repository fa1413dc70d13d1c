"""The exception hierarchy, defined once here and raised from Rust too.

Every exception carries ``.code``: the core's stable snake_case code, the same
in Rust, Python and JavaScript. Which class each code is raised as comes from
the core's registry (``callpost.ERROR_CODES``); the test suite checks that
every class the registry names is defined here with the base it names.
Catch by class, or test ``.code``.
"""

from __future__ import annotations

from ._types import AttemptRecord, BatchFailed, GaveUp

__all__ = [
    "CallpostError",
    "ClosedError",
    "ConfigError",
    "DeliveryError",
    "IngestError",
    "InvalidArgumentError",
    "InvalidCallError",
    "JSONValueError",
    "MessageTooLargeError",
    "NotJSONError",
    "QueueFullError",
    "RelayError",
    "SettingsError",
    "SignatureError",
    "StateError",
]


class CallpostError(Exception):
    """Base of every callpost error. ``code`` is stable; the message is not."""

    code: str

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InvalidCallError(CallpostError, ValueError):
    """A call breaks the spec's rules (missing ids, wrong field types, bad timestamp)."""


class JSONValueError(CallpostError, ValueError):
    """A value JSON (or a JavaScript receiver) cannot carry: NaN, unsafe integers, too deep, lone surrogates."""


class NotJSONError(CallpostError, TypeError):
    """A Python object with no JSON form (set, bytes, custom class, cycle, non-str key). The message names its path."""


class SettingsError(CallpostError, ValueError):
    """Bad Webhooks settings: endpoints, URLs, headers, mode, audience names."""


class SignatureError(CallpostError, ValueError):
    """A signature or secret that can never verify: malformed header, empty secret, no secrets."""


class ConfigError(CallpostError, ValueError):
    """Bad client settings: empty write key, bad endpoint, out-of-range numbers."""


class MessageTooLargeError(CallpostError, ValueError):
    """A message over 32,000 bytes serialized. Nothing was queued."""


class QueueFullError(CallpostError):
    """The client's queue is full (the server is slow or down). Nothing was queued."""


class ClosedError(CallpostError):
    """The client was closed."""


class StateError(CallpostError, ValueError):
    """A saved delivery state (``Delivery.to_json``) that cannot be restored."""


class InvalidArgumentError(CallpostError, TypeError):
    """The API was called wrongly: an argument of the wrong type or shape."""


class DeliveryError(CallpostError):
    """A webhook delivery or a batch upload gave up. ``outcome`` and ``log`` say what happened."""

    def __init__(
        self,
        code: str,
        message: str,
        outcome: GaveUp | BatchFailed | None = None,
        log: list[AttemptRecord] | None = None,
    ) -> None:
        super().__init__(code, message)
        self.outcome = outcome
        self.log = log or []


class IngestError(CallpostError, ValueError):
    """A Tracking API request the relay refuses as a whole: route, size, encoding, write key, batch shape.

    ``status`` is the HTTP status the relay answers with, and
    ``retry_after`` the seconds of its ``Retry-After`` (None: none).
    """

    status: int = 400
    retry_after: int | None = None


class RelayError(CallpostError):
    """A request the relay's admin API or console refuses (token, route, body), or an
    operation it cannot do (an unknown source, a lost race, its database). The relay
    answers with it; the package raises it for none of its own calls."""
