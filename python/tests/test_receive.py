"""Receivers: ``callpost.receive``, ``Receiver`` (duplicates, failures), and
each framework helper in a real server process receiving webhooks sent by
``Webhooks.deliver``."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import callpost
from callpost import Receiver, SeenIds, SignatureError, Webhooks

SECRET = "whsec-frameworks"
STANDARD_SECRET = "whsec_" + base64.b64encode(b"the frameworks' standard secret").decode()
SERVE = Path(__file__).parent / "receivers" / "serve.py"


def call(event: str = "Order Completed", **extra: Any) -> dict[str, Any]:
    return {"type": "track", "userId": "u1", "event": event, "messageId": str(uuid.uuid4()), **extra}


def signed(body: str, header: str = "X-Signature", secret: str = SECRET) -> dict[str, str]:
    return {"Content-Type": "application/json", header: callpost.sign(secret, body)}


# -- receive and Receiver ------------------------------------------------------


def test_receive_returns_the_call_and_names_each_refusal() -> None:
    body = callpost.stringify(call(properties={"total": 25.5, "items": [1, 2]}))
    got = callpost.receive(body.encode(), signed(body), SECRET)
    assert got == json.loads(body)
    assert isinstance(got["properties"]["items"][0], int)
    codes = {}
    for name, headers in {
        "missing": {"Content-Type": "application/json"},
        "malformed": {"X-Signature": "nope"},
        "mismatch": signed(body, secret="other"),
    }.items():
        with pytest.raises(SignatureError) as e:
            callpost.receive(body, headers, SECRET)
        codes[name] = e.value.code
    assert codes == {
        "missing": "missing_signature",
        "malformed": "malformed_signature",
        "mismatch": "signature_mismatch",
    }


def test_a_parsed_body_is_refused_with_the_fix() -> None:
    body = call()
    with pytest.raises(callpost.InvalidArgumentError) as e:
        callpost.receive(body, signed(callpost.stringify(body)), SECRET)  # type: ignore[arg-type]
    assert e.value.code == "invalid_argument"
    assert "raw request body" in str(e.value) and "verify_parsed" in str(e.value)


def test_receiver_drops_duplicates_and_forgets_failed_ones() -> None:
    receiver = Receiver(SECRET)
    first, second = call(), call()
    batch = callpost.stringify([first, second])
    hook = receiver.receive(batch, signed(batch, "X-Segment-Signature"))
    assert hook.batch and [c["messageId"] for c in hook.calls] == [first["messageId"], second["messageId"]]
    again = receiver.receive(batch, signed(batch, "X-Segment-Signature"))
    assert again.calls == [] and again.duplicates == [first["messageId"], second["messageId"]]
    assert again.only_duplicates
    # A handler failure: the retry is processed.
    third = callpost.stringify(call())
    hook = receiver.receive(third, signed(third))
    receiver.failed(hook)
    assert receiver.receive(third, signed(third)).call is not None
    # No filter at all.
    every = Receiver(SECRET, seen=False)
    assert len(every.receive(batch, signed(batch, "X-Segment-Signature")).calls) == 2
    assert SECRET not in repr(receiver)


def test_a_receiver_needs_some_secret_and_hides_the_standard_ones() -> None:
    with pytest.raises(callpost.InvalidArgumentError):
        Receiver()
    standard = Receiver(standard_secrets=STANDARD_SECRET, tolerance_ms=1000)
    assert STANDARD_SECRET not in repr(standard) and STANDARD_SECRET[6:] not in repr(standard)
    # A timestamp two seconds old is outside a one-second tolerance.
    body = callpost.stringify(call())
    old = dict(callpost.sign_standard("m-1", body, STANDARD_SECRET, now=int(time.time() * 1000) - 2000))
    with pytest.raises(SignatureError) as e:
        standard.receive(body, old)
    assert e.value.code == "timestamp_too_old"


def test_seen_ids_is_a_bounded_lru() -> None:
    seen = SeenIds(capacity=2)
    # "a" is used again, so "b" is the one evicted by "c"; then "b" evicts "a".
    assert [seen("a"), seen("b"), seen("a"), seen("c"), seen("b"), seen("c"), seen("a")] == [
        False,
        False,
        True,
        False,
        False,
        True,
        False,
    ]
    assert len(seen) == 2


def test_first_event_signature_is_refused_unless_opted_in() -> None:
    events = [call(), call()]
    body = callpost.stringify(events)
    headers = {"X-Signature": callpost.sign(SECRET, callpost.stringify(events[0]))}
    with pytest.raises(SignatureError) as e:
        Receiver(SECRET).receive(body, headers)
    assert e.value.code == "first_event_signature"
    hook = Receiver(SECRET, allow_first_event_signature=True).receive(body, headers)
    assert hook.coverage == "first_event" and len(hook.calls) == 2


# -- frameworks, each in its own server process ----------------------------------


@pytest.fixture(params=["flask", "django", "fastapi", "starlette"])
def app(request: pytest.FixtureRequest) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVE), request.param, SECRET, STANDARD_SECRET],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.strip().isdigit():
            proc.kill()
            raise AssertionError(f"{request.param} did not start: {line!r} {proc.communicate()[1]}")
        yield f"http://127.0.0.1:{line.strip()}"
    finally:
        proc.terminate()
        proc.wait(10)


def processed(base: str) -> list[str]:
    return list(httpx.get(f"{base}/processed").json())


def test_framework_receives_real_webhooks(app: str) -> None:
    hooks = Webhooks([f"{app}/hook"], shared_secret=SECRET)
    # A timestamp of its own: the body (and so its id) is the same each
    # time it is built, as a sender's retries send the same bytes.
    sent = call(
        properties={"products": [{"sku": "A-1", "price": 9.99, "name": "Café ☕"}]},
        timestamp="2026-11-22T10:04:05.123Z",
    )
    result = hooks.deliver(sent)
    assert result.delivered and result.attempts == 1, result.log
    # The spec's body has no messageId: its id is the signed body's.
    resend = hooks.request(sent, 0)
    sent_id = "body_" + hashlib.sha256(resend.body).hexdigest()[:32]
    assert processed(app) == [sent_id]

    # The sender retries (the same signed bytes): answered 200, not
    # processed again, whatever its Idempotency-Key says.
    for key in (sent["messageId"], "a-new-key"):
        headers = {**dict(resend.headers), "Idempotency-Key": key}
        again = httpx.post(f"{app}/hook", content=resend.body, headers=headers)
        assert again.status_code == 200, again.text
    assert processed(app) == [sent_id]

    # Refusals: 401 with the code; nothing processed.
    body = callpost.stringify(call())
    for headers, code in [
        ({"Content-Type": "application/json"}, "missing_signature"),
        (signed(body, secret="not-the-secret"), "signature_mismatch"),
        ({"X-Signature": "sha1=abc"}, "malformed_signature"),
    ]:
        r = httpx.post(f"{app}/hook", content=body, headers=headers)
        assert r.status_code == 401, r.text
        assert code in r.text
    tampered = httpx.post(f"{app}/hook", content=body.replace("u1", "u2"), headers=signed(body))
    assert tampered.status_code == 401 and "signature_mismatch" in tampered.text

    # A batch under X-Segment-Signature: every new call, in order; sent
    # again, nothing.
    batch_calls = [call(), call()]
    batch = callpost.stringify(batch_calls)
    r = httpx.post(f"{app}/hook", content=batch, headers=signed(batch, "X-Segment-Signature"))
    assert r.status_code == 204, r.text
    r = httpx.post(f"{app}/hook", content=batch, headers=signed(batch, "X-Segment-Signature"))
    assert r.status_code == 200, r.text
    assert processed(app) == [sent_id, batch_calls[0]["messageId"], batch_calls[1]["messageId"]]

    # A failing handler answers 5xx, and the retry is processed.
    flaky = call("Fail Once")
    flaky_body = callpost.stringify(flaky)
    assert httpx.post(f"{app}/hook", content=flaky_body, headers=signed(flaky_body)).status_code == 500
    assert httpx.post(f"{app}/hook", content=flaky_body, headers=signed(flaky_body)).status_code == 204
    assert processed(app)[-1] == flaky["messageId"]

    # A destination signing the Standard Webhooks way reaches the same
    # receiver (it holds both kinds of secret): processed once, its retry
    # dropped by webhook-id; a request replayed outside the tolerance is
    # refused, and so is one whose webhook-signature is wrong even though
    # its X-Signature is right (no fallback).
    standard = Webhooks([f"{app}/hook"], signature="standard", signing_secrets=[STANDARD_SECRET])
    fresh = call("Standard Signed")
    result = standard.deliver(fresh)
    assert result.delivered and result.attempts == 1, result.log
    assert processed(app)[-1] == fresh["messageId"]
    retry = standard.request(fresh, 0)
    assert "X-Signature" not in dict(retry.headers)
    r = httpx.post(f"{app}/hook", content=retry.body, headers=retry.headers)
    assert r.status_code == 200 and "duplicates" in r.text, r.text
    late = call("Replayed")
    old = standard.request(late, 0, now=int(time.time() * 1000) - 6 * 60 * 1000)
    r = httpx.post(f"{app}/hook", content=old.body, headers=old.headers)
    assert r.status_code == 401 and "timestamp_too_old" in r.text, r.text
    both = Webhooks([f"{app}/hook"], shared_secret=SECRET, signature="both", signing_secrets=[STANDARD_SECRET])
    forged = both.request(late, 0)
    headers = {**dict(forged.headers), "webhook-id": "another-id"}
    r = httpx.post(f"{app}/hook", content=forged.body, headers=headers)
    assert r.status_code == 401 and "signature_mismatch" in r.text, r.text
    assert late["messageId"] not in processed(app)
