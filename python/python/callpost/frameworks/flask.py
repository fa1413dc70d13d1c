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
from typing import Any, Callable, TypeVar

from flask import jsonify, request

from .._errors import CallpostError
from .._receive import Receiver, Webhook, duplicate_body, refusal

__all__ = ["webhook"]

R = TypeVar("R")


def webhook(receiver: Receiver) -> Callable[[Callable[..., R]], Callable[..., Any]]:
    """Decorates a view: the view is called with the verified ``Webhook``
    first, then the URL's own arguments."""

    def decorate(view: Callable[..., R]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                hook: Webhook = receiver.receive(request.get_data(cache=True), request.headers.items())
            except CallpostError as e:
                status, body = refusal(e)
                return jsonify(body), status
            if hook.only_duplicates:
                return jsonify(duplicate_body(hook)), 200
            try:
                return view(hook, *args, **kwargs)
            except BaseException:
                receiver.failed(hook)
                raise

        return wrapper

    return decorate
