"""Webhook receivers for web frameworks, over ``callpost.Receiver``.

* ``callpost.frameworks.flask.webhook``: a Flask view decorator.
* ``callpost.frameworks.django.webhook_view``: a Django view decorator.
* ``callpost.frameworks.starlette.webhook_endpoint``: a Starlette endpoint.
* ``callpost.frameworks.fastapi.webhook_dependency``: for FastAPI's ``Depends``.

Each reads the raw body, verifies it, answers a refusal itself (401 for a
signature that did not verify, 400 for a body that is not JSON, as
``{"error": code, "message": ...}``), answers 200 without calling the
handler when every call is a duplicate, and otherwise hands the handler a
``callpost.Webhook`` whose ``calls`` are the new ones. When the handler
raises, the new calls' ids are forgotten so the sender's retry is
processed. Each module imports its framework only when imported itself.
"""
