"""A drop-in for segment-analytics-python 2.x: moving over is one import line.

::

    import callpost.segment as analytics      # was: import segment.analytics as analytics

    analytics.write_key = "WRITE_KEY"
    analytics.track("u1", "Signed Up", {"plan": "pro"})
    analytics.page("u1", "Docs", "Python")    # category "Docs", name "Python"
    analytics.shutdown()

or ``from callpost.segment import Client`` with Segment's keyword arguments.
The names, argument order, defaults and return values are Segment's: each
call returns ``(success, msg)``, with ``msg`` the message as it will be sent.
Underneath is callpost's batching client and the core's ``Batcher``: the
same size limits, retries and ``messageId``/``timestamp`` rules as
``callpost.Client``. Where this module does deliberately differ from
Segment's SDK, the README's migration section says so.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import enum
import json
import logging
import numbers
import uuid
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import httpx

from . import _callpost
from ._client import Client as _Client
from ._errors import CallpostError, InvalidCallError, MessageTooLargeError, QueueFullError
from ._types import Default, Id, JSONObject, JSONValue

__all__ = [
    "Client",
    "SegmentArgumentError",
    "SegmentMessageTooLargeError",
    "alias",
    "convert",
    "flush",
    "group",
    "identify",
    "join",
    "page",
    "screen",
    "shutdown",
    "track",
]

VERSION = _callpost.__version__
__version__ = VERSION

_SD = _callpost.SEGMENT_DEFAULTS
"""segment-analytics-python's defaults, from the core (durations in ms)."""

ID_TYPES = (numbers.Number, str)
Msg = JSONObject
_P = ParamSpec("_P")
_R = TypeVar("_R")
OnError = Callable[[Exception, list[Msg]], None]


class SegmentArgumentError(InvalidCallError, AssertionError):
    """An argument Segment's SDK refuses with ``AssertionError``: caught by
    ``except AssertionError`` as there, and by callpost's ``InvalidCallError``."""


class SegmentMessageTooLargeError(MessageTooLargeError, RuntimeError):
    """A message over the 32 KB limit: a ``RuntimeError`` as in Segment's SDK,
    and callpost's ``MessageTooLargeError``."""


def convert(value: object) -> object:
    """Segment's value conversions, as this module's ``default=`` hook:
    ``Decimal`` to float, ``Enum`` to its value, ``set`` to a list, ``bytes``
    decoded as UTF-8, a naive ``datetime`` as its ``isoformat()``; and
    ``UUID`` to its string (Segment's SDK drops a UUID value from the
    message). Anything else has no JSON form and is refused, naming its path
    (Segment's SDK drops it with a warning)."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no JSON form")


def _require(name: str, value: object, types: type | tuple[type, ...]) -> None:
    # Segment's `require`, with its message; the class also says which code.
    if not isinstance(value, types):
        raise SegmentArgumentError("invalid_argument", f"{name} must have {types}, got: {value!r}")


def _message_id(value: object) -> str | int | float | None:
    # Segment's `stringify_id` for the one id that may be any object (a
    # `uuid4()`). Numbers go to the core as they are, as the other ids do:
    # its id rule writes an int as its exact digits.
    return value if value is None or isinstance(value, (str, int, float)) else str(value)


class _Msg(dict[str, JSONValue]):
    """The message as it is sent, read as Segment's SDK returns it: its
    ``msg["userId"]`` and ``msg["anonymousId"]`` are ``None`` when not given
    (Segment's SDK sends them as ``null``; callpost leaves them out)."""

    def __missing__(self, key: str) -> None:
        if key in ("userId", "anonymousId"):
            return None
        raise KeyError(key)


def _aware(value: object) -> _dt.datetime | None:
    """Segment's ``guess_timezone``: a naive datetime within 5 s of the local
    clock was made with ``datetime.now()`` and is local time; any other naive
    datetime is taken as UTC."""
    if value is None:
        return None
    _require("timestamp", value, _dt.datetime)
    assert isinstance(value, _dt.datetime)
    ts = value
    if ts.tzinfo is not None and ts.tzinfo.utcoffset(ts) is not None:
        return ts
    if (_dt.datetime.now() - ts).total_seconds() < 5:
        return ts.astimezone()
    return ts.replace(tzinfo=_dt.timezone.utc)


def _proxied(proxies: dict[str, str], timeout: float) -> httpx.Client:
    """A ``requests``-style ``proxies`` dict as an httpx client."""
    mounts = {f"{scheme}://": httpx.HTTPTransport(proxy=url) for scheme, url in proxies.items()}
    return httpx.Client(mounts=mounts, timeout=timeout, follow_redirects=False)


class Client:
    """segment-analytics-python's ``Client``, on callpost's batching client.

    The keyword arguments are Segment's, with its defaults. ``upload_size``
    and ``upload_interval`` are the batch size and flush interval;
    ``max_retries`` counts retries after the first attempt;
    ``thread`` and ``max_rate_limit_duration`` are accepted and have no
    effect (one sender; the core bounds ``Retry-After`` waits by
    ``max_total_backoff_duration``). Two additions: ``http_client``, an
    ``httpx.Client`` to send with, and ``default``, the hook for values with
    no JSON form (Segment's conversions by default).
    """

    class DefaultConfig:
        write_key: str | None = None
        host: str | None = None
        on_error: OnError | None = None
        debug = False
        log_handler: logging.Handler | None = None
        send = True
        sync_mode = False
        max_queue_size = int(_SD["max_queue_size"])
        gzip = False
        timeout: float = _SD["timeout_ms"] / 1000
        max_retries = int(_SD["max_retries"])
        max_total_backoff_duration: float = _SD["max_total_backoff_duration_ms"] / 1000
        max_rate_limit_duration: float = _SD["max_rate_limit_duration_ms"] / 1000
        proxies: dict[str, str] | None = None
        thread = 1
        upload_interval: float = _SD["upload_interval_ms"] / 1000
        upload_size = int(_SD["upload_size"])
        oauth_client_id: str | None = None
        oauth_client_key: str | None = None
        oauth_key_id: str | None = None
        oauth_auth_server = "https://oauth2.segment.io"
        oauth_scope = "tracking_api:write"

    log = logging.getLogger("callpost")

    def __init__(
        self,
        write_key: str | None = DefaultConfig.write_key,
        host: str | None = DefaultConfig.host,
        debug: bool = DefaultConfig.debug,
        max_queue_size: int = DefaultConfig.max_queue_size,
        send: bool = DefaultConfig.send,
        on_error: OnError | None = DefaultConfig.on_error,
        gzip: bool = DefaultConfig.gzip,
        max_retries: int = DefaultConfig.max_retries,
        sync_mode: bool = DefaultConfig.sync_mode,
        timeout: float = DefaultConfig.timeout,
        proxies: dict[str, str] | None = DefaultConfig.proxies,
        thread: int = DefaultConfig.thread,
        upload_size: int = DefaultConfig.upload_size,
        upload_interval: float = DefaultConfig.upload_interval,
        log_handler: logging.Handler | None = DefaultConfig.log_handler,
        oauth_client_id: str | None = DefaultConfig.oauth_client_id,
        oauth_client_key: str | None = DefaultConfig.oauth_client_key,
        oauth_key_id: str | None = DefaultConfig.oauth_key_id,
        oauth_auth_server: str = DefaultConfig.oauth_auth_server,
        oauth_scope: str = DefaultConfig.oauth_scope,
        max_total_backoff_duration: float = DefaultConfig.max_total_backoff_duration,
        max_rate_limit_duration: float = DefaultConfig.max_rate_limit_duration,
        *,
        http_client: httpx.Client | None = None,
        default: Default | None = convert,
    ) -> None:
        _require("write_key", write_key, str)
        assert isinstance(write_key, str)
        if max_total_backoff_duration is None or max_total_backoff_duration < 0:
            raise ValueError("max_total_backoff_duration must be a non-negative number")
        if max_rate_limit_duration is None or max_rate_limit_duration < 0:
            raise ValueError("max_rate_limit_duration must be a non-negative number")
        if oauth_client_id or oauth_client_key or oauth_key_id:
            # Segment's OAuth flow signs a JWT for its own token server; a
            # relay or another tracking API takes the write key.
            raise SegmentArgumentError("invalid_argument", "OAuth settings are not supported; use the write key")
        self.write_key = write_key
        self.host = host
        self.on_error = on_error
        self.debug = debug
        self.send = send
        self.sync_mode = sync_mode
        self.gzip = gzip
        self.timeout = timeout
        self.proxies = proxies
        if log_handler is not None:
            self.log.addHandler(log_handler)
        self._own_http = _proxied(proxies, timeout) if proxies and http_client is None else None
        self._client = _Client(
            write_key,
            endpoint=host,
            flush_at=upload_size,
            flush_after=upload_interval,
            max_queue=max_queue_size,
            max_attempts=max_retries + 1,
            max_retry=max_total_backoff_duration,
            timeout=timeout,
            on_error=on_error,
            send=send,
            debug=debug,
            gzip=gzip,
            default=default,
            http_client=http_client or self._own_http,
        )
        self._batcher = self._client._batcher

    def __repr__(self) -> str:
        return f"Client(host={self.host!r}, send={self.send}, sync_mode={self.sync_mode})"

    def identify(
        self,
        user_id: Id | None = None,
        traits: Msg | None = None,
        context: Msg | None = None,
        timestamp: _dt.datetime | None = None,
        anonymous_id: Id | None = None,
        integrations: Msg | None = None,
        message_id: object = None,
    ) -> tuple[bool, Msg]:
        traits = traits or {}
        _require("user_id or anonymous_id", user_id or anonymous_id, ID_TYPES)
        _require("traits", traits, dict)
        return self._enqueue("identify", user_id, anonymous_id, None, None, None, None, traits, context,
                             integrations, None, None, timestamp, message_id)  # fmt: skip

    def track(
        self,
        user_id: Id | None = None,
        event: str | None = None,
        properties: Msg | None = None,
        context: Msg | None = None,
        timestamp: _dt.datetime | None = None,
        anonymous_id: Id | None = None,
        integrations: Msg | None = None,
        message_id: object = None,
    ) -> tuple[bool, Msg]:
        properties = properties or {}
        _require("user_id or anonymous_id", user_id or anonymous_id, ID_TYPES)
        _require("properties", properties, dict)
        _require("event", event, str)
        return self._enqueue("track", user_id, anonymous_id, event, None, None, properties, None, context,
                             integrations, None, None, timestamp, message_id)  # fmt: skip

    def alias(
        self,
        previous_id: Id | None = None,
        user_id: Id | None = None,
        context: Msg | None = None,
        timestamp: _dt.datetime | None = None,
        integrations: Msg | None = None,
        message_id: object = None,
    ) -> tuple[bool, Msg]:
        _require("previous_id", previous_id, ID_TYPES)
        _require("user_id", user_id, ID_TYPES)
        return self._enqueue("alias", user_id, None, None, None, None, None, None, context,
                             integrations, None, previous_id, timestamp, message_id)  # fmt: skip

    def group(
        self,
        user_id: Id | None = None,
        group_id: Id | None = None,
        traits: Msg | None = None,
        context: Msg | None = None,
        timestamp: _dt.datetime | None = None,
        anonymous_id: Id | None = None,
        integrations: Msg | None = None,
        message_id: object = None,
    ) -> tuple[bool, Msg]:
        traits = traits or {}
        _require("user_id or anonymous_id", user_id or anonymous_id, ID_TYPES)
        _require("group_id", group_id, ID_TYPES)
        _require("traits", traits, dict)
        return self._enqueue("group", user_id, anonymous_id, None, None, None, None, traits, context,
                             integrations, group_id, None, timestamp, message_id)  # fmt: skip

    def page(
        self,
        user_id: Id | None = None,
        category: str | None = None,
        name: str | None = None,
        properties: Msg | None = None,
        context: Msg | None = None,
        timestamp: _dt.datetime | None = None,
        anonymous_id: Id | None = None,
        integrations: Msg | None = None,
        message_id: object = None,
    ) -> tuple[bool, Msg]:
        return self._page(
            "page", user_id, category, name, properties, context, timestamp, anonymous_id, integrations, message_id
        )

    def screen(
        self,
        user_id: Id | None = None,
        category: str | None = None,
        name: str | None = None,
        properties: Msg | None = None,
        context: Msg | None = None,
        timestamp: _dt.datetime | None = None,
        anonymous_id: Id | None = None,
        integrations: Msg | None = None,
        message_id: object = None,
    ) -> tuple[bool, Msg]:
        return self._page(
            "screen", user_id, category, name, properties, context, timestamp, anonymous_id, integrations, message_id
        )

    def _page(
        self,
        kind: str,
        user_id: Id | None,
        category: str | None,
        name: str | None,
        properties: Msg | None,
        context: Msg | None,
        timestamp: _dt.datetime | None,
        anonymous_id: Id | None,
        integrations: Msg | None,
        message_id: object,
    ) -> tuple[bool, Msg]:
        properties = properties or {}
        _require("user_id or anonymous_id", user_id or anonymous_id, ID_TYPES)
        _require("properties", properties, dict)
        if name:
            _require("name", name, str)
        if category:
            _require("category", category, str)
        return self._enqueue(kind, user_id, anonymous_id, None, name or None, category or None, properties, None,
                             context, integrations, None, None, timestamp, message_id)  # fmt: skip

    def _enqueue(
        self,
        kind: str,
        user_id: Id | None,
        anonymous_id: Id | None,
        event: str | None,
        name: str | None,
        category: str | None,
        properties: Msg | None,
        traits: Msg | None,
        context: Msg | None,
        integrations: Msg | None,
        group_id: Id | None,
        previous_id: Id | None,
        timestamp: _dt.datetime | None,
        message_id: object,
    ) -> tuple[bool, Msg]:
        context = context or {}
        integrations = integrations or {}
        _require("integrations", integrations, dict)
        _require("context", context, dict)
        try:
            # Segment's fields, in the order of the core's CALL_FIELDS; the
            # core completes the message (messageId, timestamp,
            # context.library) and checks it and its size.
            message = self._batcher.prepare_fields(kind, user_id, anonymous_id, event, name, category, properties, traits,
                context, integrations, group_id, previous_id, _aware(timestamp), _message_id(message_id))  # fmt: skip
        except MessageTooLargeError as e:
            raise SegmentMessageTooLargeError(e.code, str(e)) from None
        msg: Msg = _Msg(json.loads(message.json))
        self.log.debug("queueing: %s", msg)
        if not self.send:
            return True, msg
        try:
            self._batcher.handle_message(message)
        except QueueFullError:
            self.log.warning("callpost queue is full; message %s not queued", message.message_id)
            return False, msg
        except CallpostError as e:  # closed: after join() or shutdown()
            self.log.warning("message %s not queued: %s", message.message_id, e)
            return False, msg
        if self.sync_mode:
            # Segment's sync_mode posts before returning; here the message
            # goes out at once with whatever else is queued.
            self._client.flush()
        return True, msg

    def flush(self) -> None:
        """Sends everything queued and blocks until it is delivered or handed
        to ``on_error``."""
        self._client.flush()

    def join(self) -> None:
        """Stops the client: sends what is queued (up to callpost's shutdown
        timeout) and hands anything left to ``on_error``. Later calls
        return ``(False, msg)``."""
        self._client.close()
        if self._own_http is not None:
            self._own_http.close()

    def shutdown(self) -> None:
        """Flushes, then stops the client."""
        self.flush()
        self.join()


# Module-level settings and proxies, as segment.analytics has them: set the
# settings, then call; the first call makes `default_client` from them.
write_key: str | None = Client.DefaultConfig.write_key
host: str | None = Client.DefaultConfig.host
on_error: OnError | None = Client.DefaultConfig.on_error
debug: bool = Client.DefaultConfig.debug
log_handler: logging.Handler | None = Client.DefaultConfig.log_handler
send: bool = Client.DefaultConfig.send
sync_mode: bool = Client.DefaultConfig.sync_mode
max_queue_size: int = Client.DefaultConfig.max_queue_size
gzip: bool = Client.DefaultConfig.gzip
timeout: float = Client.DefaultConfig.timeout
max_retries: int = Client.DefaultConfig.max_retries
oauth_client_id: str | None = Client.DefaultConfig.oauth_client_id
oauth_client_key: str | None = Client.DefaultConfig.oauth_client_key
oauth_key_id: str | None = Client.DefaultConfig.oauth_key_id
oauth_auth_server: str = Client.DefaultConfig.oauth_auth_server
oauth_scope: str = Client.DefaultConfig.oauth_scope

default_client: Client | None = None


def _default_client() -> Client:
    """Makes the default client from the module's settings on first use."""
    global default_client
    if not default_client:
        default_client = Client(
            write_key,
            host=host,
            debug=debug,
            max_queue_size=max_queue_size,
            send=send,
            on_error=on_error,
            gzip=gzip,
            max_retries=max_retries,
            sync_mode=sync_mode,
            timeout=timeout,
            log_handler=log_handler,
            oauth_client_id=oauth_client_id,
            oauth_client_key=oauth_client_key,
            oauth_key_id=oauth_key_id,
            oauth_auth_server=oauth_auth_server,
            oauth_scope=oauth_scope,
        )
    return default_client


def _forward(method: Callable[Concatenate[Client, _P], _R], doc: str) -> Callable[_P, _R]:
    """A module-level call: ``method`` on the default client, looked up by
    name as Segment's module does, with the method's signature."""

    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        bound: Callable[_P, _R] = getattr(_default_client(), method.__name__)
        return bound(*args, **kwargs)

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = doc
    return call


track = _forward(Client.track, "Send a track call.")
identify = _forward(Client.identify, "Send an identify call.")
group = _forward(Client.group, "Send a group call.")
alias = _forward(Client.alias, "Send an alias call.")
page = _forward(Client.page, "Send a page call.")
screen = _forward(Client.screen, "Send a screen call.")


def flush() -> None:
    """Tell the client to flush."""
    _default_client().flush()


def join() -> None:
    """Block until the client has sent what is queued, and stop it."""
    _default_client().join()


def shutdown() -> None:
    """Flush all messages and cleanly shut down the client."""
    _default_client().flush()
    _default_client().join()
