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
import time
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, Literal, NamedTuple, TypedDict, TypeVar

import httpx

from . import _callpost

logger = logging.getLogger("callpost")

_T = TypeVar("_T")


def now_ms() -> int:
    return int(time.time() * 1000)


class Outgoing(NamedTuple):
    """A request to send. ``key`` names it to the core: a delivery's
    attempt number or a batch id."""

    key: int
    request: _callpost.Request
    deadline_ms: int


class Report(TypedDict, total=False):
    """The keyword arguments of the core's ``handle_response``: a status
    (with the raw ``Retry-After``), or an error kind and its message."""

    status: int
    retry_after: str | None
    error: Literal["timeout", "connection", "tls"]
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


class Transport:
    """Sends a step's requests with an ``httpx.Client``: one on this
    thread, several (a parallel round) on threads at once."""

    def __init__(self, http: httpx.Client, gzip: bool = False) -> None:
        self.http = http
        self.gzip = gzip

    def _post(self, out: Outgoing) -> Answer:
        try:
            return _answered(out, self.http.request(out.request.method, out.request.url, **_post_args(out, self.gzip)))
        except httpx.HTTPError as exc:
            return _failed(out, exc)

    def send(self, requests: list[Outgoing]) -> list[Answer]:
        if len(requests) == 1:
            return [self._post(requests[0])]
        with ThreadPoolExecutor(max_workers=len(requests), thread_name_prefix="callpost-send") as pool:
            return list(pool.map(self._post, requests))


class AsyncTransport:
    """Sends a step's requests with an ``httpx.AsyncClient``, as tasks."""

    def __init__(self, http: httpx.AsyncClient, gzip: bool = False) -> None:
        self.http = http
        self.gzip = gzip

    # Transport._post with an await: a coroutine and a function cannot
    # share a body.
    async def _post(self, out: Outgoing) -> Answer:
        try:
            return _answered(
                out, await self.http.request(out.request.method, out.request.url, **_post_args(out, self.gzip))
            )
        except httpx.HTTPError as exc:
            return _failed(out, exc)

    async def send(self, requests: list[Outgoing]) -> list[Answer]:
        return list(await asyncio.gather(*(self._post(out) for out in requests)))
