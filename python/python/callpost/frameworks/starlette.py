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
from typing import Awaitable, Callable, Optional, Union

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._errors import CallpostError
from .._receive import Receiver, Webhook, duplicate_body, refusal

__all__ = ["webhook_endpoint"]

Handler = Callable[[Webhook], Union[Awaitable[Optional[Response]], Optional[Response]]]


def webhook_endpoint(receiver: Receiver, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint that verifies, filters duplicates and calls
    ``handler`` (sync or async) with the ``Webhook``."""

    async def endpoint(request: Request) -> Response:
        try:
            hook = receiver.receive(await request.body(), request.headers.items())
        except CallpostError as e:
            status, body = refusal(e)
            return JSONResponse(body, status_code=status)
        if hook.only_duplicates:
            return JSONResponse(duplicate_body(hook), status_code=200)
        try:
            result = handler(hook)
            if inspect.isawaitable(result):
                result = await result
        except BaseException:
            receiver.failed(hook)
            raise
        return result if isinstance(result, Response) else Response(status_code=204)

    return endpoint
