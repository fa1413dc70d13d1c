"""Flask: ``@webhook(receiver)`` on a view that takes the ``Webhook``.

::

    from callpost import Receiver
    from callpost.frameworks.flask import webhook

    receiver = Receiver(os.environ["WEBHOOK_SECRET"])

    @app.post("/segment")
    @webhook(receiver)
    def segment(hook):
        for call in hook.calls:
            handle(call)
        return "", 204
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from flask import Response, jsonify, request

from .._receive import Answer, Receiver

__all__ = ["webhook"]

R = TypeVar("R")


def webhook(receiver: Receiver) -> Callable[[Callable[..., R]], Callable[..., R | tuple[Response, int]]]:
    """Decorates a view: the view is called with the verified ``Webhook``
    first, then the URL's own arguments."""

    def decorate(view: Callable[..., R]) -> Callable[..., R | tuple[Response, int]]:
        @functools.wraps(view)
        def wrapper(*args: object, **kwargs: object) -> R | tuple[Response, int]:
            hook = receiver.check(request.get_data(cache=True), request.headers.items())
            if isinstance(hook, Answer):
                return jsonify(hook.body), hook.status
            with receiver.processing(hook):
                return view(hook, *args, **kwargs)

        return wrapper

    return decorate
