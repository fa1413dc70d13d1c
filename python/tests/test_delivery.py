"""Webhook delivery over real HTTP(S) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
import threading
import time
from typing import Any, TypedDict

import pytest
from conftest import Handler, Serve, ok

import callpost
from callpost._types import AttemptRecord

CALL: dict[str, Any] = {"type": "track", "userId": "u1", "event": "Tested", "messageId": "m-1", "properties": {"n": 1}}


class _Backoff(TypedDict):
    backoff_base: float
    backoff_cap: float


FAST = _Backoff(backoff_base=0.05, backoff_cap=0.2)


def status(r: AttemptRecord) -> int | None:
    """The attempt's HTTP status; None when it had no answer."""
    o = r["outcome"]
    return o["status"] if o["kind"] == "response" else None


def test_500_then_200_is_retried_and_delivered_once(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (500, {}, b"no") if n == 0 else (200, {}, b"ok"))
    hooks = callpost.Webhooks([srv.url + "/hook"], "s3cret", **FAST)
    result = hooks.deliver(CALL)
    assert result.delivered and result.endpoint == 0 and result.attempts == 2
    reqs = srv.received.requests
    assert len(reqs) == 2
    # Both attempts carry the same signed bytes and the idempotency key.
    assert reqs[0][2] == reqs[1][2]
    for path, headers, body in reqs:
        assert path == "/hook"
        assert headers["x-signature"] == callpost.sign("s3cret", body)
        assert headers["idempotency-key"] == "m-1"
        assert headers["user-agent"] == "callpost/1.0"
        assert headers["content-type"] == "application/json"
        assert callpost.verify_request(body, headers, "s3cret")


def test_a_receiver_slower_than_the_timeout_is_retried(serve: Serve) -> None:
    slow_answered = threading.Event()

    def handler(n: int, h: dict[str, str], b: bytes) -> tuple[int, dict[str, str], bytes]:
        if n == 0:
            time.sleep(2.0)
            slow_answered.set()
        return 200, {}, b"ok"

    srv = serve(handler)
    hooks = callpost.Webhooks([srv.url], timeout=0.3, **FAST)
    result = hooks.deliver(CALL)
    assert result.delivered and result.attempts == 2
    assert result.log[0]["outcome"]["kind"] == "timeout"
    assert not slow_answered.is_set(), "the caller did not wait for the slow answer"


@pytest.mark.parametrize("status", [400, 401, 404, 410, 302])
def test_4xx_and_3xx_are_not_retried(serve: Serve, status: int) -> None:
    srv = serve(lambda n, h, b: (status, {"Location": "http://127.0.0.1:9/elsewhere"}, b""))
    hooks = callpost.Webhooks([srv.url], **FAST)
    with pytest.raises(callpost.DeliveryError) as e:
        hooks.deliver(CALL)
    assert e.value.code == "all_endpoints_rejected"
    assert len(srv.received) == 1


def test_408_and_429_are_retried_and_retry_after_is_honoured(serve: Serve) -> None:
    srv = serve(
        lambda n, h, b: (429, {"Retry-After": "1"}, b"") if n == 0 else (408, {}, b"") if n == 1 else (200, {}, b"")
    )
    hooks = callpost.Webhooks([srv.url], **FAST)
    result = hooks.deliver(CALL)
    assert result.attempts == 3
    # The core scheduled the second attempt no sooner than Retry-After said
    # (its backoff alone is at most 0.2 s here).
    assert result.log[1]["sent_at"] - result.log[0]["ended_at"] >= 1000


def test_a_put_with_a_mapped_body_is_delivered_signed(serve: Serve) -> None:
    srv = serve(ok)
    mapping = {"id": {"@path": "userId"}, "text": {"@template": "{{userId}} did {{event}}"}}
    hooks = callpost.Webhooks([srv.url], "k", method="PUT", mapping=mapping, **FAST)
    assert hooks.method == "PUT"
    result = hooks.deliver(CALL)
    assert result.delivered and srv.received.methods == ["PUT"]
    _, headers, body = srv.received.requests[0]
    assert json.loads(body) == {"id": CALL["userId"], "text": f"{CALL['userId']} did {CALL['event']}"}
    assert callpost.verify(body, headers["x-signature"], "k")


def test_basic_auth_and_an_oauth2_bearer_token_are_sent(serve: Serve) -> None:
    srv = serve(ok)
    basic = {"type": "basic", "username": "callpost", "password": "pä:ss"}
    hooks = callpost.Webhooks([{"url": srv.url + "/hook", "auth": basic}], "s3cret")
    assert hooks.deliver(CALL).delivered
    ((_, headers, _),) = srv.received.requests
    assert headers["authorization"] == "Basic Y2FsbHBvc3Q6cMOkOnNz"
    assert "pä:ss" not in repr(hooks)

    tokens = ["t1", "t2"]

    def token_endpoint(n: int, h: dict[str, str], b: bytes) -> tuple[int, dict[str, str], bytes]:
        answer = {"access_token": tokens[min(n, 1)], "token_type": "Bearer", "expires_in": 3600}
        return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()

    auth = serve(token_endpoint)
    want = ["Bearer t1"]

    def api(n: int, h: dict[str, str], b: bytes) -> tuple[int, dict[str, str], bytes]:
        given = {k.lower(): v for k, v in h.items()}.get("authorization")
        return (200, {}, b"ok") if given == want[0] else (401, {}, b"no")

    crm = serve(api)
    grant = {"type": "oauth2", "token_url": auth.url + "/token", "client_id": "c", "client_secret": "hunter2"}
    hooks = callpost.Webhooks([{"url": crm.url + "/users", "auth": grant}], **FAST)
    assert "hunter2" not in repr(hooks)
    # Built without the token (a host that sends them itself adds it).
    assert hooks.request(CALL).header("Authorization") is None
    assert hooks.deliver(CALL).delivered
    assert asyncio.run(hooks.deliver_async(CALL)).delivered
    assert len(auth.received.requests) == 1, "one token for both deliveries"
    _, token_headers, token_body = auth.received.requests[0]
    assert token_body == b"grant_type=client_credentials"
    assert token_headers["authorization"].startswith("Basic ")
    # The API revokes t1: a 401, a new token, the call delivered.
    want[0] = "Bearer t2"
    result = hooks.deliver(CALL)
    assert result.delivered and result.attempts == 2
    assert [status(r) for r in result.log] == [401, 200]
    assert len(auth.received.requests) == 2


def test_a_failing_token_endpoint_fails_attempts_as_token_errors(serve: Serve) -> None:
    auth = serve(lambda n, h, b: (401, {"Content-Type": "application/json"}, b'{"error":"invalid_client"}'))
    crm = serve(ok)
    grant = {"type": "oauth2", "token_url": auth.url + "/token", "client_id": "c", "client_secret": "hunter2"}
    hooks = callpost.Webhooks([{"url": crm.url, "auth": grant}], retry_window=0.5, **FAST)
    with pytest.raises(callpost.DeliveryError) as e:
        hooks.deliver(CALL)
    log = e.value.log
    assert log and all(r["outcome"]["kind"] == "token" for r in log)
    first = log[0]["outcome"]
    assert first["kind"] == "token" and "invalid_client" in first["message"]
    assert "hunter2" not in str(log)
    assert len(crm.received.requests) == 0, "nothing sent without a token"
    # The token endpoint is asked once per backoff, not once per attempt.
    assert len(auth.received.requests) < len(log) or len(log) == 1
    cert = {"certificate": "-----BEGIN CERTIFICATE-----\nx\n", "private_key": "-----BEGIN PRIVATE KEY-----\nx\n"}
    with pytest.raises(callpost.SettingsError) as refused:
        callpost.Webhooks([{"url": crm.url, "client_certificate": cert}]).deliver(CALL)
    assert refused.value.code == "invalid_auth" and "callpost-relay" in str(refused.value)


def test_failover_to_the_second_url(serve: Serve) -> None:
    down = serve(lambda n, h, b: (503, {}, b""))
    up = serve(ok)
    third = serve(ok)
    hooks = callpost.Webhooks(
        [down.url, {"url": up.url, "headers": {"Authorization": "Bearer t"}}, third.url], "k", mode="failover", **FAST
    )
    result = hooks.deliver(CALL)
    assert result.endpoint == 1 and result.attempts == 2
    assert len(down.received) == 1 and len(up.received) == 1 and len(third.received) == 0
    assert up.received.requests[0][1]["authorization"] == "Bearer t"


def test_connection_refused_fails_over(serve: Serve) -> None:
    up = serve(ok)
    hooks = callpost.Webhooks(["http://127.0.0.1:9/", up.url], mode="failover", **FAST)
    result = hooks.deliver(CALL)
    assert result.endpoint == 1
    assert result.log[0]["outcome"]["kind"] == "connection"


def test_a_connection_closed_mid_response_is_retried(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (-1, {}, b"") if n == 0 else (200, {}, b""))
    result = callpost.Webhooks([srv.url], **FAST).deliver(CALL)
    assert result.attempts == 2 and result.log[0]["outcome"]["kind"] == "connection"


def test_self_signed_https_is_rejected_before_any_request(serve: Serve, self_signed: ssl.SSLContext) -> None:
    srv = serve(ok, tls=self_signed)
    hooks = callpost.Webhooks([srv.url + "/hook"], "k", **FAST)
    with pytest.raises(callpost.DeliveryError) as e:
        hooks.deliver(CALL)
    assert e.value.code == "all_endpoints_rejected"
    assert e.value.log[0]["outcome"]["kind"] == "tls"
    assert "certificate" in e.value.log[0]["outcome"]["message"].lower()
    assert len(srv.received) == 0, "the server saw no HTTP request"


def test_self_signed_endpoint_fails_over_to_a_good_one(serve: Serve, self_signed: ssl.SSLContext) -> None:
    bad = serve(ok, tls=self_signed)
    good = serve(ok)
    for mode in ("parallel", "failover"):
        result = callpost.Webhooks([bad.url, good.url], mode=mode, **FAST).deliver(CALL)
        assert result.endpoint == 1 and len(bad.received) == 0


def test_disabled_by_integrations_sends_nothing(serve: Serve) -> None:
    srv = serve(ok)
    result = callpost.Webhooks([srv.url]).deliver({**CALL, "integrations": {"Webhooks": False}})
    assert not result.delivered and len(srv.received) == 0


def test_deliver_async(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (503, {}, b"") if n < 2 else (200, {}, b""))
    hooks = callpost.Webhooks([srv.url], "k", **FAST)

    async def main() -> tuple[callpost.DeliveryResult, int]:
        ticks = 0
        task = asyncio.ensure_future(hooks.deliver_async(CALL))
        while not task.done():  # the loop keeps running while it waits
            ticks += 1
            await asyncio.sleep(0.005)
        return task.result(), ticks

    result, ticks = asyncio.run(main())
    assert result.attempts == 3 and ticks > 3


def together(parties: int, status: int = 200) -> Handler:
    """A handler for `parties` receivers that answers `status` only when all
    of them hold a request at the same moment (a barrier), and 599 if they
    never do: requests sent one after another cannot pass it."""
    barrier = threading.Barrier(parties, timeout=2.0)

    def handler(n: int, h: dict[str, str], b: bytes) -> tuple[int, dict[str, str], bytes]:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return 599, {}, b"not together"
        return status, {}, b""

    return handler


def test_parallel_sends_each_round_to_every_url_at_once(serve: Serve) -> None:
    # Round 1: all three answer 503 only when all hold a request together;
    # round 2 goes to all three again, and they answer 200 together.
    rounds = [together(3, 503), together(3, 200)]
    servers = [serve(lambda n, h, b: rounds[min(n, 1)](n, h, b)) for _ in range(3)]
    hooks = callpost.Webhooks([s.url for s in servers], "k", retry_window=3, **FAST)
    assert hooks.mode == "parallel"
    result = hooks.deliver(CALL)
    assert all(len(s.received) == 2 for s in servers), "every url, every round"
    assert [r["round"] for r in result.log] == [1, 1, 1, 2, 2, 2]
    assert [status(r) for r in result.log] == [503] * 3 + [200] * 3, "each round's requests were in flight together"
    assert result.delivered
    bodies = {s.received.requests[1][2] for s in servers}
    assert len(bodies) == 1, "the same signed bytes to every url"


def test_parallel_does_not_retry_a_url_that_failed_beside_a_success(serve: Serve) -> None:
    down = serve(lambda n, h, b: (500, {}, b""))
    up = serve(ok)
    result = callpost.Webhooks([down.url, up.url], **FAST).deliver(CALL)
    assert result.endpoint == 1 and result.attempts == 2
    time.sleep(0.3)  # past the backoff: nothing more comes
    assert len(down.received) == 1 and len(up.received) == 1


def test_deliver_async_sends_a_round_as_tasks(serve: Serve) -> None:
    handler = together(3)
    servers = [serve(handler) for _ in range(3)]
    hooks = callpost.Webhooks([s.url for s in servers], retry_window=3, **FAST)
    result = asyncio.run(hooks.deliver_async(CALL))
    assert result.delivered and [status(r) for r in result.log] == [200] * 3
    assert all(len(s.received) == 1 for s in servers)


def test_four_hour_window_on_a_fake_clock() -> None:
    hooks = callpost.Webhooks(["https://dead.example/", "https://dead-too.example/"])
    t0 = 1_795_341_845_123
    d = hooks.delivery(CALL, t0, seed=5)
    now = t0
    sent: list[int] = []
    while True:
        attempts = []
        while (a := d.poll_request(now)) is not None:
            attempts.append(a)
        for a in attempts:
            sent.append(now)
            d.handle_response(now, a.attempt, 503)
        if attempts:
            continue
        t = d.poll_timeout()
        if t is None:
            break
        now = t
        d.handle_timeout(now)
    out = d.poll_outcome()
    assert out is not None and out["kind"] == "gave_up" and out["reason"] == "window_exhausted"
    assert all(s - t0 <= 4 * 3600_000 for s in sent)
    assert sent[-1] - t0 > 3.4 * 3600_000
    assert 24 <= len(sent) <= 44 and len(sent) % 2 == 0, "both urls in every round"


def test_raw_deliveries_do_not_share_one_schedule() -> None:
    # No seed: OS randomness, so two deliveries that fail together retry at
    # different times.
    hooks = callpost.Webhooks(["https://a.example/"])
    waits = set()
    for _ in range(5):
        d = callpost.Delivery(hooks.settings, CALL, 0)
        a = d.poll_request(0)
        assert a is not None
        d.handle_response(0, a.attempt, 503)
        waits.add(d.poll_timeout())
    assert len(waits) > 1


def test_delivery_state_survives_a_restart() -> None:
    hooks = callpost.Webhooks(["https://a.example/", "https://b.example/"], "k", mode="failover")
    d = hooks.delivery(CALL, 1000, seed=9)
    a = d.poll_request(1000)
    assert a is not None
    d.handle_response(1010, a.attempt, error="connection", message="reset")
    saved = d.to_json()
    restored = callpost.Delivery.from_json(saved, hooks.settings)
    assert restored.to_json() == saved
    a2 = restored.poll_request(1010)
    assert a2 is not None and a2.endpoint == 1 and a2.attempt == 2
    assert a2.request.body == a.request.body
    # Restored with a request in flight, it is sent again as the same attempt.
    again = callpost.Delivery.from_json(restored.to_json(), hooks.settings).poll_request(5000)
    assert again is not None and (again.endpoint, again.attempt) == (1, 2)
    with pytest.raises(callpost.StateError) as e:
        callpost.Delivery.from_json("{not json", hooks.settings)
    assert e.value.code == "invalid_state"
    other = callpost.Webhooks(["https://a.example/"], "k")
    with pytest.raises(callpost.StateError):
        callpost.Delivery.from_json(saved, other.settings)


def test_deliver_batch_sends_calls_several_to_a_post_and_receivers_take_the_list(serve: Serve) -> None:
    """Batched webhooks: the calls go as JSON arrays of their bodies, at
    most batch_max_calls a POST, each batch signed as one body and retried
    whole; a filtered call goes in none; a callpost Receiver takes each
    batch's calls with ids from the batch's id, and a retried batch is
    seen as the duplicate it is."""
    srv = serve(lambda n, h, b: (503, {}, b"busy") if n == 1 else (200, {}, b"ok"))
    hooks = callpost.Webhooks(
        [srv.url + "/hook"],
        "s3cret",
        batch_max_calls=2,
        filters=[{"action": "drop", "if": {"field": "type", "equals": "page"}}],
        **FAST,
    )
    calls: list[dict[str, Any]] = [
        {"type": "track", "userId": "u1", "event": "Order Completed", "messageId": f"m-{i}", "properties": {"n": i}}
        for i in range(5)
    ]
    calls.insert(2, {"type": "page", "userId": "u1", "name": "Home", "messageId": "m-page"})
    results = hooks.deliver_batch(calls)
    assert [r.delivered for r in results] == [True, True, False, True, True, True]
    assert results[2].filtered_by == 0
    # Three batches of 2, 2 and 1 calls; the second answered 503 once and
    # was sent again whole.
    assert [r.attempts for r in results] == [1, 1, 0, 2, 2, 1]
    reqs = srv.received.requests
    assert len(reqs) == 4 and reqs[1][2] == reqs[2][2]
    receiver = callpost.Receiver("s3cret")
    seen: list[str | None] = []
    for i, (_, headers, body) in enumerate(reqs):
        assert headers["x-signature"] == callpost.sign("s3cret", body)
        hook = receiver.receive(body, headers)
        assert hook.batch
        if i == 2:
            assert hook.only_duplicates, "the retried batch is the one seen before"
            continue
        assert all(c["type"] == "track" for c in hook.calls)
        seen += hook.ids
    key = reqs[0][1]["idempotency-key"]
    # The spec's bodies carry no messageId: a call's id is its signed
    # body's (body_ and 16 bytes of its SHA-256) and its index.
    body_id = "body_" + hashlib.sha256(reqs[0][2]).hexdigest()[:32]
    assert key.startswith("batch_") and seen[:2] == [f"{body_id}.0", f"{body_id}.1"]
    assert len(set(seen)) == 5
    # The same calls make the same batches, so a sender's retry keeps its ids.
    again, _ = hooks.settings.pack(calls)
    assert again[0].id == key and [b.members for b in again] == [[0, 1], [3, 4], [5]]
    with pytest.raises(callpost.SettingsError):
        callpost.Webhooks([srv.url], batch_max_calls=4001)
