"""Starlette.

Starlette: ``webhook_endpoint(receiver, handler)`` is an endpoint; the
handler takes the ``Webhook`` and may return a ``Response`` (default: 204)::

    async def on_webhook(hook):
        for call in hook.calls:
            await handle(call)

    app = Starlette(routes=[Route("/segment", webhook_endpoint(receiver, on_webhook), methods=["POST"])])

FastAPI: see ``callpost.frameworks.fastapi``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._receive import Answer, Receiver, Webhook

__all__ = ["webhook_endpoint"]

Handler = Callable[[Webhook], Awaitable[Response | None] | Response | None]


def webhook_endpoint(receiver: Receiver, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint that verifies, filters duplicates and calls
    ``handler`` (sync or async) with the ``Webhook``."""

    async def endpoint(request: Request) -> Response:
        hook = receiver.check(await request.body(), request.headers.items())
        if isinstance(hook, Answer):
            return JSONResponse(hook.body, status_code=hook.status)
        with receiver.processing(hook):
            result = handler(hook)
            if inspect.isawaitable(result):
                result = await result
        return result if isinstance(result, Response) else Response(status_code=204)

    return endpoint
