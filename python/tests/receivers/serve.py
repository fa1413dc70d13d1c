"""A webhook receiver in one framework, as its users write it, in a real
server process: ``python serve.py flask|django|fastapi|starlette SECRET
[WHSEC]`` (with a ``whsec_`` secret it also takes Standard Webhooks).
Prints the port, then serves POST /hook (through callpost's helper for that
framework) and GET /processed (the messageIds the handler processed, in
order). A call whose event is "Fail Once" makes the handler raise the first
time it is processed."""

from __future__ import annotations

import socket
import sys
import threading
from typing import Any

from callpost import Receiver, Webhook

framework, secret = sys.argv[1], sys.argv[2]
receiver = Receiver(secret, standard_secrets=sys.argv[3] if len(sys.argv) > 3 else None)
processed: list[str] = []
failed_once: set[str | None] = set()
lock = threading.Lock()


def handle(hook: Webhook) -> None:
    for call, message_id in zip(hook.calls, hook.ids, strict=True):
        with lock:
            if call.get("event") == "Fail Once" and message_id not in failed_once:
                failed_once.add(message_id)
                raise RuntimeError("handler failed")
            processed.append(message_id or "?")


def listen() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    return sock


def serve_wsgi(app: Any) -> None:
    from werkzeug.serving import make_server

    sock = listen()
    server = make_server("127.0.0.1", 0, app, threaded=True, fd=sock.fileno())
    server.serve_forever()


def serve_asgi(app: Any) -> None:
    import uvicorn

    sock = listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    server.run(sockets=[sock])


def serve_flask() -> None:
    from flask import Flask, Response, jsonify

    from callpost.frameworks.flask import webhook

    app = Flask(__name__)

    @app.post("/hook")
    @webhook(receiver)
    def hook(hook: Webhook) -> tuple[str, int]:
        handle(hook)
        return "", 204

    @app.get("/processed")
    def processed_ids() -> Response:
        return jsonify(processed)

    serve_wsgi(app)


def serve_django() -> None:
    global urlpatterns
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        SECRET_KEY="test-only",
        MIDDLEWARE=["django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware"],
    )
    django.setup()
    from django.core.wsgi import get_wsgi_application
    from django.http import HttpRequest, HttpResponse, JsonResponse
    from django.urls import path

    from callpost.frameworks.django import webhook_view

    @webhook_view(receiver)
    def hook_view(request: HttpRequest, hook: Webhook) -> HttpResponse:
        handle(hook)
        return HttpResponse(status=204)

    def processed_view(request: HttpRequest) -> HttpResponse:
        return JsonResponse(processed, safe=False)

    urlpatterns = [path("hook", hook_view), path("processed", processed_view)]
    serve_wsgi(get_wsgi_application())


def serve_fastapi() -> None:
    from fastapi import Depends, FastAPI

    from callpost.frameworks.fastapi import webhook_dependency

    app = FastAPI()
    segment_webhook = webhook_dependency(receiver)

    @app.post("/hook", status_code=204)
    async def hook(hook: Webhook = Depends(segment_webhook)) -> None:
        handle(hook)

    @app.get("/processed")
    async def processed_ids() -> list[str]:
        return processed

    serve_asgi(app)


def serve_starlette() -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from callpost.frameworks.starlette import webhook_endpoint

    async def processed_ids(request: Request) -> JSONResponse:
        return JSONResponse(processed)

    app = Starlette(
        routes=[
            Route("/hook", webhook_endpoint(receiver, handle), methods=["POST"]),
            Route("/processed", processed_ids),
        ]
    )
    serve_asgi(app)


# Django finds the routes here: ROOT_URLCONF is this module.
urlpatterns: list[object] = []

SERVERS = {"flask": serve_flask, "django": serve_django, "fastapi": serve_fastapi, "starlette": serve_starlette}
if framework not in SERVERS:
    raise SystemExit(f"unknown framework {framework}")
SERVERS[framework]()
