"""A typed usage example; CI runs `mypy --strict` over it."""

from __future__ import annotations

import datetime
from typing import Any

import callpost


def receive(body: bytes, signature: str) -> bool:
    return callpost.verify(body, signature, ["old-secret", "new-secret"])


def forward(call: dict[str, Any]) -> int | None:
    hooks = callpost.Webhooks(
        ["https://hooks.example.com/a", {"url": "https://b.example/", "headers": {"X-Team": "1"}}], "s"
    )
    req: callpost.Request = hooks.request(call, 0, datetime.datetime.now(datetime.timezone.utc))
    assert req.method == "POST" and isinstance(req.body, bytes)
    try:
        result: callpost.DeliveryResult = hooks.deliver(call)
    except callpost.DeliveryError as e:
        print(e.code, e.log)
        return None
    return result.endpoint


def own_queue(hooks: callpost.Webhooks) -> str:
    d: callpost.Delivery = hooks.delivery({"type": "track", "userId": "u", "event": "e"}, now=0, seed=1)
    attempt: callpost.Attempt | None = d.poll_request(0)
    if attempt is not None:
        d.handle_response(10, attempt.attempt, status=503, retry_after="5")
    restored = callpost.Delivery.from_json(d.to_json(), hooks.settings)
    del restored
    wake: int | None = d.poll_timeout()
    del wake
    return d.to_json()


def delivered_to(d: callpost.Delivery) -> int | None:
    # The outcome is a dict tagged by "kind": each kind has its own keys.
    outcome = d.poll_outcome()
    if outcome is not None and outcome["kind"] == "delivered":
        return outcome["endpoint"]
    for record in d.log:
        if record["outcome"]["kind"] == "response":
            print(record["endpoint"], record["outcome"]["status"])
    return None


def on_error(err: callpost.DeliveryError, messages: list[dict[str, Any]]) -> None:
    print(err.code, len(messages))


def client() -> None:
    with callpost.Client("WRITE_KEY", flush_at=10, flush_after=1.0, on_error=on_error) as c:
        message_id: str = c.track("u1", "Signed Up", {"plan": "pro"})
        c.identify("u1", {"email": "a@example.com"})
        print(message_id)
    text: str = callpost.stringify({"a": [1, 2.5, None, True]})
    print(text, callpost.trait_name("High Value Users"))
