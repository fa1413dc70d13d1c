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

from typing import AsyncIterator, Callable

from fastapi import HTTPException, Request

from .._errors import CallpostError
from .._receive import Receiver, Webhook, duplicate_body, refusal

__all__ = ["webhook_dependency"]


def webhook_dependency(receiver: Receiver) -> Callable[[Request], AsyncIterator[Webhook]]:
    """A dependency yielding the verified ``Webhook``. A refusal raises
    ``HTTPException`` (401 or 400, ``detail`` = ``{"error", "message"}``); a
    body whose calls were all seen answers 200 (``detail`` =
    ``{"duplicates": n}``) without running the endpoint. When the endpoint
    raises, the new calls' ids are forgotten so the retry is processed."""

    async def dependency(request: Request) -> AsyncIterator[Webhook]:
        try:
            hook = receiver.receive(await request.body(), request.headers.items())
        except CallpostError as e:
            status, body = refusal(e)
            raise HTTPException(status_code=status, detail=body) from None
        if hook.only_duplicates:
            raise HTTPException(status_code=200, detail=duplicate_body(hook))
        try:
            yield hook
        except BaseException:
            receiver.failed(hook)
            raise

    return dependency
