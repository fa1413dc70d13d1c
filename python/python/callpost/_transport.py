"""HTTP for the senders, over httpx, and the one way their loops are run.

A sender's loop (a webhook delivery, the batching client's sender) is a
generator that polls the core and yields what to do next: :class:`Send`
some requests, answered with an :class:`Answer` for each, or :class:`Wait`
until the core's timer or a wake-up, answered with nothing. It holds every
decision of the loop; :func:`run_sync` (requests on threads) and
:func:`run_async` (requests as tasks) only carry the steps out, the way
h11's examples drive its state machine. No retry, batching or round rule
lives here either: those are the Rust core's, shared with the JavaScript
package.
"""

from __future__ import annotations

import asyncio
import gzip as _gzip
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, Literal, NamedTuple, TypedDict, TypeVar

import httpx

from . import _callpost
from ._errors import CallpostError

logger = logging.getLogger("callpost")

_T = TypeVar("_T")


def now_ms() -> int:
    return int(time.time() * 1000)


class Outgoing(NamedTuple):
    """A request to send. ``key`` names it to the core: a delivery's
    attempt number or a batch id. ``endpoint`` is a delivery's endpoint
    (its OAuth 2.0 token, if it has one, is added: :class:`Tokens`)."""

    key: int
    request: _callpost.Request
    deadline_ms: int
    endpoint: int = -1


class Report(TypedDict, total=False):
    """The keyword arguments of the core's ``handle_response``: a status
    (with the raw ``Retry-After``), or an error kind and its message."""

    status: int
    retry_after: str | None
    error: Literal["timeout", "connection", "tls", "token"]
    message: str


class Answer(NamedTuple):
    key: int
    ended_ms: int
    report: Report


@dataclass(frozen=True)
class Send:
    """Send these requests now, together; answer with one Answer each."""

    requests: list[Outgoing]


@dataclass(frozen=True)
class Wait:
    """Sleep this many seconds (None: until woken); answer with no Answers."""

    seconds: float | None


Steps = Generator[Send | Wait, list[Answer], _T]
"""A sender's loop, returning its result."""


@dataclass(frozen=True)
class _Done(Generic[_T]):
    value: _T


def _advance(steps: Steps[_T], answers: list[Answer] | None) -> Send | Wait | _Done[_T]:
    # `None` starts the generator: a fresh one takes nothing else.
    try:
        return next(steps) if answers is None else steps.send(answers)
    except StopIteration as stop:
        return _Done(stop.value)


def run_sync(
    steps: Steps[_T], send: Callable[[list[Outgoing]], list[Answer]], wait: Callable[[float | None], None]
) -> _T:
    """Runs a loop on this thread."""
    step = _advance(steps, None)
    while not isinstance(step, _Done):
        if isinstance(step, Send):
            step = _advance(steps, send(step.requests))
        else:
            wait(step.seconds)
            step = _advance(steps, [])
    return step.value


async def run_async(
    steps: Steps[_T],
    send: Callable[[list[Outgoing]], Awaitable[list[Answer]]],
    wait: Callable[[float | None], Awaitable[None]],
) -> _T:
    """Runs a loop on the running event loop: :func:`run_sync` with awaits."""
    step = _advance(steps, None)
    while not isinstance(step, _Done):
        if isinstance(step, Send):
            step = _advance(steps, await send(step.requests))
        else:
            await wait(step.seconds)
            step = _advance(steps, [])
    return step.value


def new_client() -> httpx.Client:
    # Certificates are always verified; redirects are never followed (the
    # core counts a 3xx as a rejection).
    return httpx.Client(verify=True, follow_redirects=False)


def new_async_client() -> httpx.AsyncClient:
    # As new_client.
    return httpx.AsyncClient(verify=True, follow_redirects=False)


class _PostArgs(TypedDict):
    headers: list[tuple[str, str]]
    content: bytes
    timeout: float


def _post_args(out: Outgoing, gzip: bool) -> _PostArgs:
    """What httpx posts: the core's request, with what is left of its
    deadline as the timeout. ``gzip``: the body compressed, as the tracking
    API accepts it (the size limits apply to the JSON before compression)."""
    req = out.request
    timeout = max(out.deadline_ms - now_ms(), 1) / 1000
    if gzip:
        headers = [*req.headers, ("Content-Encoding", "gzip")]
        return _PostArgs(headers=headers, content=_gzip.compress(req.body, compresslevel=6), timeout=timeout)
    return _PostArgs(headers=req.headers, content=req.body, timeout=timeout)


def _answered(out: Outgoing, r: httpx.Response) -> Answer:
    return Answer(out.key, now_ms(), Report(status=r.status_code, retry_after=r.headers.get("retry-after")))


def _failed(out: Outgoing, exc: httpx.HTTPError) -> Answer:
    """Maps an httpx failure to the core's outcome kinds."""
    report: Report
    if isinstance(exc, httpx.TimeoutException):
        report = Report(error="timeout", message=type(exc).__name__)
    else:
        report = Report(error="connection", message=f"{type(exc).__name__}: {exc}")
        cur: BaseException | None = exc
        while cur is not None:
            if isinstance(cur, ssl.SSLError):
                report = Report(error="tls", message=str(cur))
                break
            cur = cur.__cause__ or cur.__context__
    return Answer(out.key, now_ms(), report)


class Tokens:
    """The bearer tokens of a destination's OAuth 2.0 endpoints: the core's
    token sources (fetched, cached, refreshed before they expire, dropped
    on a 401), one request per grant at a time, over the sender's own
    HTTP client. A token that cannot be had fails the attempt at once as
    a ``token`` outcome, which the core retries."""

    def __init__(self, sources: dict[int, _callpost.TokenSource]) -> None:
        self.sources = sources
        self.locks = {i: threading.Lock() for i in sources}
        self.async_locks: dict[int, asyncio.Lock] = {}

    def __bool__(self) -> bool:
        return bool(self.sources)

    def _answer(self, source: _callpost.TokenSource, status: int, body: bytes) -> None:
        try:
            source.handle_response(now_ms(), status, body)
        except CallpostError as exc:
            logger.warning("an OAuth 2.0 token request failed: %s", exc)

    def _failed(self, source: _callpost.TokenSource, exc: httpx.HTTPError) -> None:
        source.handle_failure(now_ms(), f"{type(exc).__name__}: {exc}")
        logger.warning("an OAuth 2.0 token request failed: %s: %s", type(exc).__name__, exc)

    def authorization(self, http: httpx.Client, endpoint: int) -> str | None:
        """``Bearer …`` for ``endpoint`` (fetched first when due), or None
        when it has no OAuth 2.0 auth. Raises the core's error
        (``token_unavailable``) when no token can be had."""
        source = self.sources.get(endpoint)
        if source is None:
            return None
        with self.locks[endpoint]:
            request = source.poll_request(now_ms())
            if request is not None:
                url, headers, body, deadline_ms = request
                timeout = max(deadline_ms - now_ms(), 1) / 1000
                try:
                    with http.stream("POST", url, headers=headers, content=body, timeout=timeout) as r:
                        self._answer(source, r.status_code, _read_capped(r.iter_bytes()))
                except httpx.HTTPError as exc:
                    self._failed(source, exc)
            return source.authorization(now_ms())

    async def authorization_async(self, http: httpx.AsyncClient, endpoint: int) -> str | None:
        """:meth:`authorization` for asyncio."""
        source = self.sources.get(endpoint)
        if source is None:
            return None
        lock = self.async_locks.setdefault(endpoint, asyncio.Lock())
        async with lock:
            request = source.poll_request(now_ms())
            if request is not None:
                url, headers, body, deadline_ms = request
                timeout = max(deadline_ms - now_ms(), 1) / 1000
                try:
                    async with http.stream("POST", url, headers=headers, content=body, timeout=timeout) as r:
                        data = bytearray()
                        async for chunk in r.aiter_bytes():
                            if _full(data, chunk):
                                break
                        self._answer(source, r.status_code, bytes(data))
                except httpx.HTTPError as exc:
                    self._failed(source, exc)
            return source.authorization(now_ms())

    def rejected(self, endpoint: int, authorization: str) -> None:
        """A receiver answered 401 to ``authorization``: its token is dropped."""
        source = self.sources.get(endpoint)
        if source is not None:
            source.handle_rejected(authorization)


def _read_capped(chunks: Iterator[bytes]) -> bytes:
    """The first ``TokenSource.ANSWER_BYTES`` of an answer: a token endpoint
    that sends more is not read further."""
    data = bytearray()
    for chunk in chunks:
        if _full(data, chunk):
            break
    return bytes(data)


def _full(data: bytearray, chunk: bytes) -> bool:
    """Adds what of ``chunk`` fits under ``TokenSource.ANSWER_BYTES``;
    True once nothing more fits."""
    data += chunk[: _callpost.TokenSource.ANSWER_BYTES - len(data)]
    return len(data) >= _callpost.TokenSource.ANSWER_BYTES


def _token_failed(out: Outgoing, exc: CallpostError) -> Answer:
    return Answer(out.key, now_ms(), Report(error="token", message=str(exc)))


def _with_authorization(args: _PostArgs, authorization: str | None) -> _PostArgs:
    if authorization is not None:
        args["headers"] = [*args["headers"], ("Authorization", authorization)]
    return args


class Transport:
    """Sends a step's requests with an ``httpx.Client``: one on this
    thread, several (a parallel round) on threads at once."""

    def __init__(self, http: httpx.Client, gzip: bool = False, tokens: Tokens | None = None) -> None:
        self.http = http
        self.gzip = gzip
        self.tokens = tokens

    def _post(self, out: Outgoing) -> Answer:
        authorization = None
        if self.tokens:
            try:
                authorization = self.tokens.authorization(self.http, out.endpoint)
            except CallpostError as exc:
                return _token_failed(out, exc)
        try:
            args = _with_authorization(_post_args(out, self.gzip), authorization)
            answer = _answered(out, self.http.request(out.request.method, out.request.url, **args))
        except httpx.HTTPError as exc:
            return _failed(out, exc)
        if authorization is not None and self.tokens and answer.report.get("status") == 401:
            self.tokens.rejected(out.endpoint, authorization)
        return answer

    def send(self, requests: list[Outgoing]) -> list[Answer]:
        if len(requests) == 1:
            return [self._post(requests[0])]
        with ThreadPoolExecutor(max_workers=len(requests), thread_name_prefix="callpost-send") as pool:
            return list(pool.map(self._post, requests))


class AsyncTransport:
    """Sends a step's requests with an ``httpx.AsyncClient``, as tasks."""

    def __init__(self, http: httpx.AsyncClient, gzip: bool = False, tokens: Tokens | None = None) -> None:
        self.http = http
        self.gzip = gzip
        self.tokens = tokens

    # Transport._post with an await: a coroutine and a function cannot
    # share a body.
    async def _post(self, out: Outgoing) -> Answer:
        authorization = None
        if self.tokens:
            try:
                authorization = await self.tokens.authorization_async(self.http, out.endpoint)
            except CallpostError as exc:
                return _token_failed(out, exc)
        try:
            args = _with_authorization(_post_args(out, self.gzip), authorization)
            answer = _answered(out, await self.http.request(out.request.method, out.request.url, **args))
        except httpx.HTTPError as exc:
            return _failed(out, exc)
        if authorization is not None and self.tokens and answer.report.get("status") == 401:
            self.tokens.rejected(out.endpoint, authorization)
        return answer

    async def send(self, requests: list[Outgoing]) -> list[Answer]:
        return list(await asyncio.gather(*(self._post(out) for out in requests)))
