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
from collections.abc import Callable

# Django ships no type information (django-stubs is a separate project):
# pyproject.toml's mypy settings let it be imported untyped.
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    JsonResponse,
)
from django.views.decorators.csrf import csrf_exempt

from .._receive import Answer, Receiver

__all__ = ["webhook_view"]


def webhook_view(
    receiver: Receiver,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Decorates a view ``(request, hook, *args, **kwargs)``."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            if request.method != "POST":
                return HttpResponseNotAllowed(["POST"])
            hook = receiver.check(request.body, request.headers.items())
            if isinstance(hook, Answer):
                return JsonResponse(hook.body, status=hook.status)
            with receiver.processing(hook):
                return view(request, hook, *args, **kwargs)

        exempt: Callable[..., HttpResponse] = csrf_exempt(wrapper)
        return exempt

    return decorate
