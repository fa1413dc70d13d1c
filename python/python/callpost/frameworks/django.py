"""Django: ``@webhook_view(receiver)`` on a view that takes the request and
the ``Webhook``. The view is exempt from CSRF (the signature authenticates
the sender) and answers POST only.

::

    from callpost import Receiver
    from callpost.frameworks.django import webhook_view

    receiver = Receiver(settings.SEGMENT_WEBHOOK_SECRET)

    @webhook_view(receiver)
    def segment(request, hook):
        for call in hook.calls:
            handle(call)
        return HttpResponse(status=204)
"""

from __future__ import annotations

import functools
from typing import Any, Callable

# Django ships no type information (django-stubs is a separate project).
from django.http import (  # type: ignore[import-untyped]
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    JsonResponse,
)
from django.views.decorators.csrf import csrf_exempt  # type: ignore[import-untyped]

from .._errors import CallpostError
from .._receive import Receiver, Webhook, duplicate_body, refusal

__all__ = ["webhook_view"]


def webhook_view(
    receiver: Receiver,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Decorates a view ``(request, hook, *args, **kwargs)``."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method != "POST":
                return HttpResponseNotAllowed(["POST"])
            try:
                hook: Webhook = receiver.receive(request.body, request.headers.items())
            except CallpostError as e:
                status, body = refusal(e)
                return JsonResponse(body, status=status)
            if hook.only_duplicates:
                return JsonResponse(duplicate_body(hook), status=200)
            try:
                return view(request, hook, *args, **kwargs)
            except BaseException:
                receiver.failed(hook)
                raise

        exempt: Callable[..., HttpResponse] = csrf_exempt(wrapper)
        return exempt

    return decorate
