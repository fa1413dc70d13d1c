"""The relay as a real process on 127.0.0.1: the Tracking API's answers,
bad input, deduplication, CORS, probes and metrics, the admin API and the
CLI, delete notifications and audiences, shutdown, backpressure, and the
destination address rule."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import urllib.error
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from relay_support import (
    ADMIN,
    OPS_SECRET,
    RELAY_BIN,
    SECRET,
    WRITE_KEY,
    Database,
    Hook,
    RelayProcess,
    basic,
    config_text,
    operator_hook,
    track,
)

import callpost


@pytest.fixture
def hook(serve: Callable[..., Any]) -> Hook:
    return Hook(serve)


@pytest.fixture
def relay(tmp_path: pathlib.Path, hook: Hook, database: Database) -> Iterator[RelayProcess]:
    r = RelayProcess(config_text(database, [hook.url]), tmp_path)
    r.start()
    yield r
    if r.running():
        r.stop()


def batch(calls: Sequence[object], **extra: object) -> dict[str, object]:
    return {"batch": calls, "writeKey": WRITE_KEY, **extra}


def test_a_batch_is_acknowledged_with_segments_answer_and_delivered_signed_and_enriched(
    relay: RelayProcess, hook: Hook, database: Database
) -> None:
    sent_at = "2026-11-22T11:59:00.000Z"
    calls = [
        track(1, timestamp="2026-11-22T11:58:59.000Z"),
        {"type": "identify", "userId": "u2", "traits": {"plan": "pro"}},
    ]
    status, headers, body = relay.post("/v1/batch", batch(calls, sentAt=sent_at))
    assert (status, body) == (200, callpost._callpost.SUCCESS_BODY.encode())
    assert headers["content-type"] == "application/json"
    relay.wait(lambda: len(hook.ok()) == 2, what="two deliveries")
    by_type = {d.json["type"]: d for d in hook.ok()}
    t = by_type["track"]
    assert t.verified and t.key == "m-1"
    assert t.json["event"] == "Order Completed" and t.json["properties"] == {"n": 1, "total": 25.5}
    # Skew-corrected: receivedAt − (sentAt − originalTimestamp), to the millisecond.
    received = json.loads(database.query("SELECT message FROM deliveries WHERE message_id = 'm-1'")[0][0])
    corrected = callpost.parse_timestamp(received["receivedAt"]) - 1000
    assert callpost.parse_timestamp(t.json["timestamp"]) == corrected
    assert received["sentAt"] == sent_at and received["originalTimestamp"] == "2026-11-22T11:58:59.000Z"
    # A call without messageId gets one, and it is the idempotency key.
    i = by_type["identify"]
    assert i.verified and len(i.key) == 36 and i.json["traits"] == {"plan": "pro"}


def test_every_route_and_the_write_key_in_either_place(relay: RelayProcess, hook: Hook) -> None:
    calls: dict[str, dict[str, object]] = {
        "/v1/identify": {"userId": "a", "traits": {}},
        "/v1/track": {"userId": "a", "event": "e"},
        "/v1/page": {"userId": "a", "name": "Home"},
        "/v1/screen": {"userId": "a", "name": "Cart"},
        "/v1/group": {"userId": "a", "groupId": "g"},
        "/v1/alias": {"userId": "a", "previousId": "b"},
        "/v1/i": {"userId": "b", "traits": {}},
        "/v1/t": {"userId": "b", "event": "e"},
        "/v1/p": {"userId": "b"},
        "/v1/s": {"userId": "b"},
        "/v1/g": {"userId": "b", "groupId": "g"},
        "/v1/a": {"userId": "b", "previousId": "c"},
    }
    for n, (path, call) in enumerate(calls.items()):
        # Alternate: key in the body (analytics.js, older analytics-python), Basic auth (the rest).
        if n % 2:
            status, _, _ = relay.post(path, {**call, "messageId": f"r{n}", "writeKey": WRITE_KEY})
        else:
            status, _, _ = relay.post(path, {**call, "messageId": f"r{n}"}, {"Authorization": basic(WRITE_KEY)})
        assert status == 200, path
    for path in ("/v1/batch", "/v1/import", "/v1/b"):
        assert relay.post(path, {"batch": [track(path)]}, {"Authorization": basic(WRITE_KEY)})[0] == 200
    relay.wait(lambda: len(hook.ok()) == len(calls) + 3, what="every route's call")
    kinds = sorted(d.json["type"] for d in hook.ok())
    assert kinds == sorted(["identify", "track", "page", "screen", "group", "alias"] * 2 + ["track"] * 3)
    assert all(d.verified for d in hook.ok())


def _answer(relay: RelayProcess, path: str, body: Any, headers: dict[str, str]) -> Any:
    status, h, raw = relay.post(path, body, headers)
    return status, h, json.loads(raw) if raw else None


def test_bad_input_gets_the_documented_answer_and_nothing_crashes(relay: RelayProcess, hook: Hook) -> None:
    auth = {"Authorization": basic(WRITE_KEY)}
    one = '{"type":"track","userId":"u","event":"e","properties":{"p":"PAD"}}'
    cases = [
        ("malformed JSON", "/v1/batch", b'{"batch": [', auth, 400, "invalid_json"),
        ("not a batch", "/v1/batch", b"[1]", auth, 400, "invalid_batch"),
        (
            "wrong content type",
            "/v1/batch",
            b"{}",
            {**auth, "Content-Type": "application/x-www-form-urlencoded"},
            415,
            "unsupported_media_type",
        ),
        ("unknown encoding", "/v1/batch", b"{}", {**auth, "Content-Encoding": "br"}, 415, "unsupported_encoding"),
        (
            "zip bomb",
            "/v1/batch",
            gzip.compress(b" " * 50_000_000),
            {**auth, "Content-Encoding": "gzip"},
            413,
            "batch_too_large",
        ),
        ("corrupt gzip", "/v1/batch", b"not gzip", {**auth, "Content-Encoding": "gzip"}, 400, "invalid_compression"),
        (
            "oversize call",
            "/v1/batch",
            ('{"batch":[' + one.replace("PAD", "x" * 32_000) + "]}").encode(),
            auth,
            400,
            "call_too_large",
        ),
        (
            "oversize batch",
            "/v1/batch",
            ('{"batch":[],"pad":"' + "x" * 500_001 + '"}').encode(),
            auth,
            400,
            "batch_too_large",
        ),
        (
            "2,501 calls",
            "/v1/batch",
            ('{"batch":[' + ",".join([one.replace("PAD", "")] * 2501) + "]}").encode(),
            auth,
            400,
            "too_many_calls",
        ),
        ("unknown write key", "/v1/batch", b'{"batch":[]}', {"Authorization": basic("nope")}, 401, "unknown_write_key"),
        ("no write key", "/v1/batch", b'{"batch":[]}', {}, 401, "missing_write_key"),
        ("unknown route", "/v1/nope", b"{}", auth, 404, "unknown_route"),
        ("invalid single call", "/v1/track", b'{"userId":"u"}', auth, 400, "missing_event"),
    ]
    for name, path, body, headers, status, code in cases:
        got_status, _, answer = _answer(relay, path, body, headers)
        assert (got_status, answer["code"]) == (status, code), name
        assert answer["message"], name
        assert callpost.ERROR_CODES[code][0] in ("IngestError", "JSONValueError", "InvalidCallError"), code
    # The relay is still up, and took nothing from any of them.
    assert relay.running()
    assert relay.status()["pending"] == 0 and relay.status()["rejected"] == 0
    assert relay.metric("callpost_relay_requests_total", 'status="400"') == 7


def test_invalid_calls_among_valid_ones_are_recorded_and_the_rest_delivered(relay: RelayProcess, hook: Hook) -> None:
    calls = [track(1), {"type": "track", "userId": "u"}, 7, {"type": "teleport"}, track(2)]
    status, _, body = relay.post("/v1/batch", batch(calls))
    assert (status, body) == (200, callpost._callpost.SUCCESS_BODY.encode())
    relay.wait(lambda: len(hook.ok()) == 2, what="the valid calls")
    assert sorted(d.key for d in hook.ok()) == ["m-1", "m-2"]
    rejected = relay.admin("GET", "/admin/rejected")
    assert sorted(r["code"] for r in rejected) == ["missing_event", "not_an_object", "unknown_type"]
    assert all(r["source"] == "web" and r["text"] for r in rejected)
    assert relay.metric("callpost_relay_calls_total", 'source="web",outcome="rejected",code="missing_event"') == 1
    # The queue gauges are read from the store on an interval, never per scrape.
    relay.wait(lambda: relay.metric("callpost_relay_rejected_calls") == 3, what="the rejected-calls gauge")
    listed = relay.cli("rejected")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 3


def test_a_batch_sent_again_is_delivered_once(relay: RelayProcess, hook: Hook) -> None:
    body = batch([track(n) for n in range(5)])
    for _ in range(3):
        assert relay.post("/v1/batch", body)[0] == 200
    relay.wait(lambda: len(hook.ok()) == 5, what="five deliveries")
    time.sleep(0.5)
    assert sorted(hook.keys().values()) == [1] * 5
    assert relay.metric("callpost_relay_calls_total", 'source="web",outcome="duplicate"') == 10


def test_gzip_and_text_plain_and_cors(relay: RelayProcess, hook: Hook) -> None:
    raw = json.dumps(batch([track(1)])).encode()
    status, _, _ = relay.post("/v1/batch", gzip.compress(raw), {"Content-Encoding": "gzip"})
    assert status == 200
    # analytics.js: text/plain (no preflight), cross-origin.
    status, headers, _ = relay.post(
        "/v1/t",
        json.dumps({**track(2), "writeKey": WRITE_KEY}),
        {"Content-Type": "text/plain", "Origin": "https://shop.example"},
    )
    assert status == 200 and headers["access-control-allow-origin"] == "*"
    import urllib.request

    req = urllib.request.Request(
        relay.url + "/v1/batch",
        method="OPTIONS",
        headers={
            "Origin": "https://shop.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,authorization",
        },
    )
    with urllib.request.urlopen(req) as r:
        assert r.status == 204
        assert r.headers["Access-Control-Allow-Methods"] == "POST, OPTIONS"
        assert r.headers["Access-Control-Allow-Headers"] == "content-type,authorization"
    relay.wait(lambda: len(hook.ok()) == 2, what="both deliveries")


def test_probes_metrics_status_and_admin_auth(relay: RelayProcess) -> None:
    import urllib.error
    import urllib.request

    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(relay.url + path) as r:
            assert r.status == 200
    text = relay.metrics()
    for name in (
        "callpost_relay_queue_depth",
        "callpost_relay_oldest_pending_age_seconds",
        "callpost_relay_dead_letters",
        "callpost_relay_commit_seconds_bucket",
        "callpost_relay_sql_statements_total",
    ):
        assert name in text
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(relay.url + "/admin/status")
    assert e.value.code == 401
    bad = urllib.request.Request(relay.url + "/admin/status", headers={"Authorization": "Bearer wrong"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad)
    assert e.value.code == 401
    assert relay.status()["pending"] == 0
    out = relay.cli("status")
    assert out.returncode == 0 and "pending deliveries: 0" in out.stdout
    assert json.loads(relay.cli("status", "--json").stdout)["dead"] == 0
    # Secrets never reach the log.
    assert not any(SECRET in line or ADMIN in line or WRITE_KEY in line for line in relay.log)


def test_the_operator_is_told_of_a_backlog_once_signed_and_endpoints_are_in_the_status(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    fast = threading.Event()
    slow = Hook(serve, lambda d: 200 if fast.is_set() else 0.3)
    ops, operator = operator_hook(serve, "backlog_threshold = 10\n")
    extra = operator + "[delivery]\nendpoint_concurrency = 1\n"
    r = RelayProcess(config_text(database, [slow.url], extra=extra), tmp_path).start()
    try:
        assert r.post("/v1/batch", batch([track(n) for n in range(40)]))[0] == 200
        # The status check every 5 s sees more than 10 waiting.
        r.wait(lambda: len(ops.deliveries) >= 1, 30, "the backlog event")
        shown = r.status()["endpoints"]
        assert [e["url"] for e in shown] == [slow.url] and shown[0]["state"] == {"kind": "healthy"}, shown
        fast.set()
        r.wait_drained(60, database)
        time.sleep(6)  # another status check: still one event, the backlog is gone
    finally:
        r.stop()
    events = list(ops.deliveries)
    assert len(events) == 1, [d.json for d in events]
    e = events[0]
    assert e.verified and e.key == e.json["id"]
    assert e.json["type"] == "backlog.over_threshold" and e.json["version"] == 1
    assert e.json["data"]["threshold"] == 10 and e.json["data"]["pending"] > 10
    assert not any(OPS_SECRET in line for line in r.log)


def test_a_rotated_shared_secret_is_verified_by_receivers_that_hold_both(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    old, new = "the-old-shared-secret", "the-new-shared-secret"
    hook = Hook(serve, secret=old)
    r = RelayProcess(config_text(database, [hook.url], secret=old), tmp_path).start()
    try:
        assert r.post("/v1/batch", batch([track(n) for n in range(3)]))[0] == 200
        r.wait(lambda: len(hook.ok()) == 3, what="three deliveries under the old secret")
        # The operator switches the relay to the new secret and restarts it.
        assert r.stop() == 0
        r.path.write_text(config_text(database, [hook.url], secret=new))
        r.start()
        assert r.post("/v1/batch", batch([track(n) for n in range(3, 6)]))[0] == 200
        r.wait(lambda: len(hook.ok()) == 6, what="three more under the new secret")
    finally:
        r.stop()
    both = [new.encode(), old.encode()]
    for d in hook.ok():
        assert callpost.receive(d.body, d.headers, both) == d.json
    # Each request carries one signature, by the secret in use when it left.
    for d in hook.ok():
        signer = old if d.key in {"m-0", "m-1", "m-2"} else new
        other = new if signer == old else old
        assert callpost.verify_request(d.body, d.headers, signer.encode())
        assert not callpost.verify_request(d.body, d.headers, other.encode())


def test_a_destination_signing_both_ways_is_verified_by_the_reference_standard_webhooks_library(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    """`signature = "both"` with two whsec_ secrets (a rotation): every
    request carries X-Signature, which callpost verifies, and the Standard
    Webhooks headers, which the specification's own library (`standardwebhooks`
    from PyPI) verifies with either secret alone."""
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    new = "whsec_" + base64.b64encode(b"a new standard webhooks secret!").decode()
    old = "whsec_" + base64.b64encode(b"the old standard webhooks key").decode()
    hook = Hook(serve)
    signing = f'signature = "both"\nsigning_secrets = ["{new}", "{old}"]\n'
    r = RelayProcess(config_text(database, [hook.url], sources=signing), tmp_path).start()
    try:
        assert r.post("/v1/batch", batch([track(n) for n in range(3)]))[0] == 200
        r.wait(lambda: len(hook.ok()) == 3, what="three deliveries")
        shown = r.admin("GET", "/admin/sources/web")["webhooks"]
    finally:
        r.stop()
    assert shown["signature"] == "both" and shown["signed"] is True, shown
    for d in hook.ok():
        assert d.verified, "X-Signature"
        assert d.headers["webhook-id"] == d.key
        for secret in (new, old):
            assert Webhook(secret).verify(d.body, d.headers) == d.json
        other = "whsec_" + base64.b64encode(b"a key nobody signed with").decode()
        with pytest.raises(WebhookVerificationError):
            Webhook(other).verify(d.body, d.headers)
        # callpost's own receivers: held to the Standard headers when they
        # hold a whsec_ secret (either one), to X-Signature when they do not.
        # The id: the signed webhook-id, or under X-Signature alone the
        # signed body's (the Idempotency-Key header is not signed).
        body_id = "body_" + hashlib.sha256(d.body).hexdigest()[:32]
        for receiver, header, id in [
            (callpost.Receiver(standard_secrets=old), "webhook-signature", d.key),
            (callpost.Receiver(SECRET, standard_secrets=new), "webhook-signature", d.key),
            (callpost.Receiver(SECRET), "X-Signature", body_id),
        ]:
            got = receiver.receive(d.body, d.headers)
            assert (got.header, got.ids, got.call) == (header, [id], d.json)
        with pytest.raises(callpost.SignatureError):
            callpost.Receiver(standard_secrets=other).receive(d.body, d.headers)
    assert not any(new[6:] in line or old[6:] in line for line in r.log)


def test_sighup_reloads_the_sources_and_a_bad_file_changes_nothing(
    tmp_path: pathlib.Path, hook: Hook, serve: Callable[..., Any], database: Database
) -> None:
    shop = Hook(serve)
    base = config_text(database, [hook.url])
    with_shop = (
        base + f'\n[[sources]]\nname = "shop"\nwrite_keys = ["wk-shop"]\n[sources.webhooks]\n'
        f'urls = ["{shop.url}"]\nshared_secret = "{SECRET}"\n'
    )
    r = RelayProcess(base, tmp_path).start()

    def post(key: str, n: str) -> int:
        return r.post("/v1/track", track(n), {"Authorization": basic(key)})[0]

    def reload(text: str, outcome: str) -> None:
        seen = sum(outcome in line for line in r.log)
        r.path.write_text(text)
        assert r.proc is not None
        r.proc.send_signal(signal.SIGHUP)
        r.wait(lambda: sum(outcome in line for line in r.log) > seen, 20, outcome)

    try:
        assert post("wk-shop", "s0") == 401
        reload(with_shop, "configuration reloaded: 2 source(s) in force, added shop")
        shown = r.admin("GET", "/admin/sources")
        assert [x["name"] for x in shown] == ["web", "shop"]
        endpoint = shown[1]["webhooks"]["endpoints"][0]
        assert endpoint["url"] == shop.url and endpoint["protection"]["breaker_failures"] == 10
        assert shown[1]["write_keys"] == 1 and shown[1]["webhooks"]["signed"] is True
        assert "wk-shop" not in json.dumps(shown) and SECRET not in json.dumps(shown)
        assert post("wk-shop", "s1") == 200 and post(WRITE_KEY, "w1") == 200
        r.wait(lambda: [d.key for d in shop.ok()] == ["m-s1"], 30, "the new source's call delivered")
        # Two sources of one name: refused, and what was in force stays.
        duplicate = with_shop + '\n[[sources]]\nname = "shop"\nwrite_keys = ["wk-other"]\n'
        reload(duplicate, "reloading the configuration failed, the sources in force stay")
        assert post("wk-shop", "s2") == 200 and post("wk-other", "x") == 401
        r.wait(lambda: len(shop.ok()) == 2, 30, "the second call delivered")
        # The admin API reloads too, and says what it refused.
        r.path.write_text(duplicate)
        with pytest.raises(urllib.error.HTTPError) as refused:
            r.admin("POST", "/admin/reload")
        assert refused.value.code == 400
        # The core's code for the set it refuses: two sources of one name.
        assert json.loads(refused.value.read())["code"] == "invalid_settings"
        r.path.write_text(with_shop)
        assert r.admin("POST", "/admin/reload") == {"sources": ["web", "shop"], "added": [], "removed": []}
        reload(base, "configuration reloaded: 1 source(s) in force, removed shop")
        assert post("wk-shop", "s3") == 401 and post(WRITE_KEY, "w2") == 200
        r.wait(lambda: {"m-w1", "m-w2"} <= {d.key for d in hook.ok()}, 30, "the first source's calls delivered")
        assert r.running()
    finally:
        r.stop()
    assert {d.key for d in shop.ok()} == {"m-s1", "m-s2"}
    assert not any("wk-shop" in line or SECRET in line for line in r.log)


def test_delete_notifications_go_to_every_enabled_source(
    tmp_path: pathlib.Path, hook: Hook, serve: Callable[..., Any], database: Database
) -> None:
    other = Hook(serve)
    off = Hook(serve)
    sources = f"""
[[sources]]
name = "app"
write_keys = ["wk-app"]
[sources.webhooks]
urls = ["{other.url}"]
shared_secret = "{SECRET}"

[[sources]]
name = "off"
write_keys = ["wk-off"]
[sources.webhooks]
urls = ["{off.url}"]
shared_secret = "{SECRET}"
enabled = false
"""
    r = RelayProcess(config_text(database, [hook.url], sources=sources), tmp_path).start()
    try:
        deleted = r.admin("POST", "/admin/delete", {"userId": "u-1"})
        assert deleted == {"sources": ["web", "app"], "erased": {"calls": 0, "rejected": 0}, "suppressed": False}
        out = r.cli("delete", "--user-id", "u-2")
        assert out.returncode == 0, out.stderr
        r.wait(lambda: len(hook.ok()) == 2 and len(other.ok()) == 2, what="delete notifications")
        for d in hook.ok() + other.ok():
            assert d.verified and d.json["type"] == "delete" and set(d.json) == {"type", "userId", "timestamp"}
        assert sorted(d.json["userId"] for d in hook.ok()) == ["u-1", "u-2"]
        assert off.deliveries == []
    finally:
        r.stop()


def test_audience_syncs_send_the_changes_as_identify_calls(
    relay: RelayProcess, hook: Hook, tmp_path: pathlib.Path
) -> None:
    def sync(members: list[str]) -> Any:
        return relay.admin(
            "POST", "/admin/audiences", {"source": "web", "audience": "High Value Users", "members": members}
        )

    assert sync(["a", "b", "c"]) == {"calls": 3}
    relay.wait(lambda: len(hook.ok()) == 3, what="first sync")
    assert sync(["b", "c", "d"]) == {"calls": 2}
    relay.wait(lambda: len(hook.ok()) == 5, what="second sync")
    assert sync(["b", "c", "d"]) == {"calls": 0}
    members = tmp_path / "members.txt"
    members.write_text("c\nd\ne\n")
    out = relay.cli("audience", "--source", "web", "--audience", "High Value Users", "--members", str(members))
    assert out.returncode == 0 and "2 identify call(s)" in out.stdout, out.stderr
    relay.wait(lambda: len(hook.ok()) == 7, what="the CLI's sync")
    seen = [(d.json["userId"], d.json["traits"]["high_value_users"]) for d in hook.ok()]
    assert sorted(seen[:3]) == [("a", True), ("b", True), ("c", True)]
    assert sorted(seen[3:5]) == [("a", False), ("d", True)]
    assert sorted(seen[5:]) == [("b", False), ("e", True)]
    assert all(d.json["type"] == "identify" and d.verified for d in hook.ok())


def test_sigterm_finishes_or_gives_back_what_is_in_flight_and_loses_nothing(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    slow = Hook(serve, lambda d: 1.5)
    r = RelayProcess(config_text(database, [slow.url]), tmp_path).start()
    assert r.post("/v1/batch", batch([track(n) for n in range(20)]))[0] == 200
    r.wait(lambda: len(slow.deliveries) >= 1, what="attempts in flight")
    assert r.stop() == 0
    assert any("relay stopped" in line for line in r.log), r.log
    # Whatever had not been answered and stored is sent again after a restart.
    r.start()
    r.wait_drained(60)
    keys = slow.keys()
    assert sorted(keys) == sorted(f"m-{n}" for n in range(20))
    r.stop()


def test_backpressure_answers_503_with_retry_after_and_loses_no_acknowledged_call(
    tmp_path: pathlib.Path, hook: Hook, database: Database
) -> None:
    r = RelayProcess(config_text(database, [hook.url], extra="[ingest]\nmax_backlog = 40\n"), tmp_path).start()
    try:
        # Storage stalls: another session holds the write lock.
        release = database.stall()
        answers: list[Any] = []
        lock = threading.Lock()

        def send(n: int) -> None:
            result = r.post("/v1/batch", batch([track(f"{n}-{i}") for i in range(20)]), timeout=60)
            with lock:
                answers.append((n, result))

        threads = [threading.Thread(target=send, args=(n,)) for n in range(12)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        time.sleep(1.0)
        release()
        for t in threads:
            t.join(60)
        refused = [res for _, res in answers if res[0] == 503]
        accepted = [n for n, res in answers if res[0] == 200]
        assert refused, "a stalled store must refuse new calls"
        for _status, headers, body in refused:
            assert headers["retry-after"] == "1" and json.loads(body)["code"] == "overloaded"
        assert accepted, "the calls queued before the stall are acknowledged once it ends"
        r.wait_drained(60)
        delivered = hook.keys()
        for n in accepted:
            for i in range(20):
                assert delivered.get(f"m-{n}-{i}") == 1
    finally:
        r.stop()


def test_destinations_on_private_addresses_are_refused_unless_allowed(tmp_path: pathlib.Path, hook: Hook) -> None:
    text = config_text(f"sqlite:///{tmp_path / 'relay.db'}", [hook.url]).replace(
        "allow_private_networks = true", "allow_private_networks = false"
    )
    r = RelayProcess(text, tmp_path)
    with pytest.raises(RuntimeError):
        r.start()
    assert r.proc is not None and r.proc.wait(30) == 2
    assert any("private or loopback address" in line for line in r.log), r.log
    # IP literals, IPv4-mapped IPv6 included, are checked as what they are.
    for url in (
        "http://127.0.0.1:9/hook",
        "http://[::ffff:127.0.0.1]:9/hook",
        "http://[::1]:9/hook",
        "http://10.0.0.1/hook",
    ):
        out = _run_relay(
            tmp_path,
            "--listen",
            "127.0.0.1:0",
            "--write-key",
            "k",
            "--webhook-url",
            url,
            "--database",
            f"sqlite:///{tmp_path / 'other.db'}",
        )
        assert out.returncode == 2 and "private or loopback address" in out.stderr, (url, out.stderr)


def test_a_destination_whose_name_resolves_privately_keeps_nothing_else_from_working(tmp_path: pathlib.Path) -> None:
    # What a name resolves to is its owner's to change: the relay starts and
    # takes calls, warns, and only the connections to that name are
    # refused ("localhost" resolves to loopback).
    database = f"sqlite:///{tmp_path / 'relay.db'}"
    text = config_text(database, ["http://localhost:9/hook"]).replace(
        "allow_private_networks = true", "allow_private_networks = false"
    )
    r = RelayProcess(text, tmp_path).start()
    try:
        assert any("resolves to private or loopback addresses" in line for line in r.log), r.log
        status, _, _ = r.post("/v1/track", track(1), {"Authorization": basic(WRITE_KEY)})
        assert status == 200
        r.wait(
            lambda: r.admin("GET", "/admin/log/call?source=web&messageId=m-1").get("attempts", []) != [],
            30,
            "the first attempt",
        )
        attempt = r.admin("GET", "/admin/log/call?source=web&messageId=m-1")["attempts"][0]
        assert attempt["outcome"]["kind"] == "connection", attempt
        assert "private or loopback" in attempt["outcome"]["message"], attempt
    finally:
        r.stop()


def _run_relay(
    tmp_path: pathlib.Path, *args: str, env: dict[str, str] | None = None, timeout: float = 10
) -> subprocess.CompletedProcess[str]:
    """The relay with ``args``, for one that is expected to stop at once."""
    return subprocess.run(
        [RELAY_BIN, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_configuration_errors_name_the_setting(tmp_path: pathlib.Path) -> None:
    def bad(text: str, *args: str, env: dict[str, str] | None = None) -> str:
        p = tmp_path / "bad.toml"
        p.write_text(text)
        out = _run_relay(tmp_path, "--config", str(p), *args, env=env)
        assert out.returncode == 2, out.stderr
        return out.stderr

    assert "listen" in bad('listen = "nope"')
    assert "lsten" in bad('lsten = "127.0.0.1:1"')
    assert "write key" in bad('[[sources]]\nname = "a"\nwrite_keys = []')
    assert "too_many_endpoints" in bad(
        '[[sources]]\nname = "a"\nwrite_keys = ["k"]\n[sources.webhooks]\n'
        'urls = ["https://a.example/1","https://a.example/2","https://a.example/3",'
        '"https://a.example/4","https://a.example/5","https://a.example/6"]'
    )
    assert "synchronous" in bad('[storage]\nsynchronous = "OFF"')
    assert "a write key it lists is taken" in bad(
        '[[sources]]\nname = "a"\nwrite_keys = ["k"]\n[[sources]]\nname = "b"\nwrite_keys = ["k"]'
    )
    # A short admin token is refused, and the token itself is never echoed.
    assert "admin_token" in (msg := bad('admin_token = "t0k3n"'))
    assert "t0k3n" not in msg
    # Secrets are not flags: they would show in `ps`.
    out = _run_relay(tmp_path, "--shared-secret", "s3cr3t")
    assert out.returncode == 2 and "s3cr3t" not in out.stderr
    out = _run_relay(tmp_path, "--admin-token", "t0k3n")
    assert out.returncode == 2 and "t0k3n" not in out.stderr


def test_the_shipped_relay_has_no_test_clock(tmp_path: pathlib.Path) -> None:
    # The wheel's binary, not the tests' build (CALLPOST_RELAY_BIN).
    env = {k: v for k, v in os.environ.items() if k != "CALLPOST_RELAY_BIN"}
    shipped = subprocess.run(
        [sys.executable, "-c", "from callpost._relay import relay_binary; print(relay_binary())"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    assert shipped and shipped != os.environ.get("CALLPOST_RELAY_BIN")
    out = subprocess.run(
        [shipped, "--test-clock", "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=10, cwd=tmp_path
    )
    assert out.returncode == 2 and "--test-clock" in out.stderr
    assert "--test-clock" not in subprocess.run([shipped, "--help"], capture_output=True, text=True).stdout
    # The tests' build has it.
    assert (
        "--test-clock"
        in subprocess.run([os.environ["CALLPOST_RELAY_BIN"], "--help"], capture_output=True, text=True).stdout
    )


def test_a_second_relay_on_the_same_sqlite_file_is_refused(tmp_path: pathlib.Path, hook: Hook) -> None:
    # Several relays share work through Postgres; on SQLite, one per file.
    config = config_text(f"sqlite:///{tmp_path / 'relay.db'}", [hook.url])
    first = RelayProcess(config, tmp_path).start()
    second = RelayProcess(config, tmp_path)
    try:
        with pytest.raises(RuntimeError):
            second.start()
        assert any("another relay is using" in line for line in second.log)
    finally:
        first.stop()
