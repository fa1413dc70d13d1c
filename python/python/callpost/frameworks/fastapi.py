"""FastAPI: ``webhook_dependency(receiver)`` for ``Depends``. A refusal or an
all-duplicate body ends the request before the endpoint runs::

    from callpost import Receiver, Webhook
    from callpost.frameworks.fastapi import webhook_dependency

    segment_webhook = webhook_dependency(Receiver(os.environ["WEBHOOK_SECRET"]))

    @app.post("/segment", status_code=204)
    async def segment(hook: Webhook = Depends(segment_webhook)) -> None:
        for call in hook.calls:
            await handle(call)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from fastapi import HTTPException, Request

from .._receive import Answer, Receiver, Webhook

__all__ = ["webhook_dependency"]


def webhook_dependency(receiver: Receiver) -> Callable[[Request], AsyncIterator[Webhook]]:
    """A dependency yielding the verified ``Webhook``. A refusal raises
    ``HTTPException`` (401 or 400, ``detail`` = ``{"error", "message"}``); a
    body whose calls were all seen answers 200 (``detail`` =
    ``{"duplicates": n}``) without running the endpoint. When the endpoint
    raises, the new calls' ids are forgotten so the retry is processed."""

    async def dependency(request: Request) -> AsyncIterator[Webhook]:
        hook = receiver.check(await request.body(), request.headers.items())
        if isinstance(hook, Answer):
            raise HTTPException(status_code=hook.status, detail=hook.body)
        with receiver.processing(hook):
            yield hook

    return dependency
