"""OpenTelemetry traces of a real relay, on SQLite and Postgres: a local
OTLP/HTTP stand-in gets one ``ingest`` span per Tracking API request and
one ``webhook attempt`` span per attempt, each attempt a child of the
ingest span of the request that stored its call (the link goes through
the database), and the receiver gets each attempt's context in
``traceparent``. A collector that is down costs the relay nothing but the spans.
Without ``[tracing]`` none of it happens."""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Callable
from typing import Any

from relay_support import WRITE_KEY, Database, Delivery, Hook, RelayProcess, config_text, free_port

# The W3C specification's example: an upstream service's span.
UPSTREAM_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
UPSTREAM_SPAN = "00f067aa0ba902b7"
UPSTREAM = f"00-{UPSTREAM_TRACE}-{UPSTREAM_SPAN}-01"

Span = dict[str, Any]


class Collector:
    """An OTLP/HTTP receiver: keeps every POST to ``/v1/traces``, decoded."""

    def __init__(self, serve: Callable[..., Any]) -> None:
        self.lock = threading.Lock()
        self.posts: list[tuple[str, dict[str, str], Any]] = []

        def handle(n: int, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
            return 200, {"Content-Type": "application/json"}, b"{}"

        self.server = serve(handle)
        self.url = self.server.url

    def requests(self) -> list[tuple[str, dict[str, str], bytes]]:
        with self.server.received.lock:
            return list(self.server.received.requests)

    def spans(self) -> list[Span]:
        out: list[Span] = []
        for path, _, body in self.requests():
            if path != "/v1/traces":
                continue
            for rs in json.loads(body)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    out.extend(ss["spans"])
        return out

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans() if s["name"] == name]


def attributes(span: Span) -> dict[str, Any]:
    """An OTLP/JSON span's attributes as plain values (``intValue`` is a
    string in OTLP/JSON)."""
    out: dict[str, Any] = {}
    for a in span.get("attributes", []):
        v = a["value"]
        out[a["key"]] = int(v["intValue"]) if "intValue" in v else v.get("stringValue")
    return out


def call(message_id: str) -> dict[str, Any]:
    return {"type": "track", "userId": "u1", "event": "Traced", "messageId": message_id}


class FailOnce:
    """Answers 503 to the first request for ``m-retry`` (its Idempotency-Key), 200 to every other."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, d: Delivery) -> int:
        if d.key == "m-retry" and not self.failed:
            self.failed = True
            return 503
        return 200


def test_one_ingest_span_per_request_and_one_linked_span_per_attempt(
    serve: Callable[..., Any], database: Database, tmp_path: pathlib.Path
) -> None:
    collector = Collector(serve)
    hook = Hook(serve, FailOnce())
    tracing = f'[tracing]\notlp_endpoint = "{collector.url}"\nservice_name = "relay-under-test"\n'
    relay = RelayProcess(config_text(database, [hook.url], extra=tracing), tmp_path, args=("--test-clock",))
    relay.start()
    try:
        batch = {"writeKey": WRITE_KEY, "batch": [call("b-1"), call("b-2"), call("b-3")]}
        assert relay.post("/v1/batch", batch)[0] == 200
        traced = {**call("m-traced"), "writeKey": WRITE_KEY}
        assert relay.post("/v1/track", traced, headers={"traceparent": UPSTREAM})[0] == 200
        assert relay.post("/v1/track", {**call("m-retry"), "writeKey": WRITE_KEY})[0] == 200

        relay.wait(lambda: any(d.status == 503 for d in hook.deliveries), what="the 503")
        # Once the 503 is stored (a jump before it would end the lease of
        # the delivery still holding it, and the call would start over),
        # the next round is 5-10 s away on the relay's clock: jump it.
        relay.wait(
            lambda: database.query("SELECT attempts FROM deliveries WHERE message_id = 'm-retry'") == [(1,)],
            what="the 503 stored",
        )
        relay.admin("POST", "/admin/test/clock", {"offsetMs": 60_000})
        relay.wait(lambda: len(hook.ok()) == 5, what="every call delivered")
        relay.wait(
            lambda: len(collector.named("ingest")) >= 3 and len(collector.named("webhook attempt")) >= 6,
            what="the spans exported",
        )
        stored = dict(database.query("SELECT message_id, trace_parent FROM deliveries"))
    finally:
        relay.stop()

    posts = collector.requests()
    assert all(path == "/v1/traces" for path, _, _ in posts)
    assert all(h["content-type"] == "application/json" for _, h, _ in posts)
    resource = json.loads(posts[0][2])["resourceSpans"][0]["resource"]
    assert {"key": "service.name", "value": {"stringValue": "relay-under-test"}} in resource["attributes"]

    # One ingest span per request, a server span with the request's facts.
    ingest = collector.named("ingest")
    assert len(ingest) == 3, ingest
    for s in ingest:
        assert s["kind"] == 2 and int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"])
        a = attributes(s)
        assert a["callpost.source"] == "web" and a["http.response.status_code"] == 200
    by_calls = sorted(ingest, key=lambda s: -attributes(s)["callpost.calls"])
    batch_span = by_calls[0]
    assert attributes(batch_span)["callpost.calls"] == 3
    # The request that came with a traceparent is a child of its span, in
    # its trace; the others each start a trace of their own.
    upstream = [s for s in ingest if s["traceId"] == UPSTREAM_TRACE]
    assert len(upstream) == 1 and upstream[0]["parentSpanId"] == UPSTREAM_SPAN
    untraced = [s for s in ingest if s["traceId"] != UPSTREAM_TRACE]
    assert all("parentSpanId" not in s for s in untraced)
    assert len({s["traceId"] for s in ingest}) == 3
    retry_span = next(s for s in untraced if s is not batch_span)
    request_of = {"b-1": batch_span, "b-2": batch_span, "b-3": batch_span, "m-traced": upstream[0]}
    request_of["m-retry"] = retry_span

    # The context each call was stored with is its request's ingest span.
    for message_id, span in request_of.items():
        assert stored[message_id] == f"00-{span['traceId']}-{span['spanId']}-01", message_id

    # One span per attempt, a client span in its call's ingest trace, a
    # child of its ingest span.
    attempts = collector.named("webhook attempt")
    assert len(attempts) == 6, attempts
    for s in attempts:
        a = attributes(s)
        parent = request_of[a["callpost.message_id"]]
        assert s["kind"] == 3
        assert s["traceId"] == parent["traceId"] and s["parentSpanId"] == parent["spanId"], a
        assert a["url.full"] == hook.url
        assert int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"])
    retried = sorted(
        (attributes(s) for s in attempts if attributes(s)["callpost.message_id"] == "m-retry"),
        key=lambda a: int(a["callpost.attempt"]),
    )
    assert [(a["callpost.attempt"], a["callpost.round"], a["http.response.status_code"]) for a in retried] == [
        (1, 1, 503),
        (2, 2, 200),
    ]
    failed = next(s for s in attempts if attributes(s).get("http.response.status_code") == 503)
    assert failed["status"]["code"] == 2
    assert len({s["spanId"] for s in attempts + ingest}) == 9

    # The receiver got each attempt's own context.
    seen = set()
    for d in hook.deliveries:
        version, trace_id, span_id, flags = d.headers["traceparent"].split("-")
        assert (version, flags) == ("00", "01")
        seen.add((d.key, trace_id, span_id))
    assert seen == {(attributes(s)["callpost.message_id"], s["traceId"], s["spanId"]) for s in attempts}


def test_without_tracing_nothing_is_traced_or_sent(
    serve: Callable[..., Any], database: Database, tmp_path: pathlib.Path
) -> None:
    collector = Collector(serve)
    hook = Hook(serve)
    # The stand-in listens, and the relay is not told of it.
    relay = RelayProcess(config_text(database, [hook.url]), tmp_path)
    relay.start()
    try:
        body = {**call("m-plain"), "writeKey": WRITE_KEY}
        assert relay.post("/v1/track", body, headers={"traceparent": UPSTREAM})[0] == 200
        relay.wait(lambda: len(hook.ok()) == 1, what="the delivery")
        stored = database.query("SELECT trace_parent FROM deliveries")
    finally:
        relay.stop()
    assert "traceparent" not in hook.deliveries[0].headers
    assert stored == [(None,)]
    assert collector.requests() == []


def test_a_collector_that_is_down_delays_nothing_and_its_spans_are_counted(
    serve: Callable[..., Any], database: Database, tmp_path: pathlib.Path
) -> None:
    hook = Hook(serve)
    # Nothing listens there: every export is refused.
    tracing = f'[tracing]\notlp_endpoint = "http://127.0.0.1:{free_port()}"\n'
    relay = RelayProcess(config_text(database, [hook.url], extra=tracing), tmp_path)
    relay.start()
    try:
        for n in range(3):
            assert relay.post("/v1/track", {**call(f"m-{n}"), "writeKey": WRITE_KEY})[0] == 200
        relay.wait(lambda: len(hook.ok()) == 3, what="every call delivered")
        assert all("traceparent" in d.headers for d in hook.deliveries)
        # Three ingest spans and three attempt spans, dropped and counted.
        relay.wait(
            lambda: relay.metric("callpost_relay_trace_spans_dropped_total") == 6,
            what="the spans counted as dropped",
        )
    finally:
        relay.stop()
