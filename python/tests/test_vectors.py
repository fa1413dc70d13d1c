"""The shared vectors in testdata/: the same bytes as Rust and JS."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import vectors

import callpost
from callpost._types import AttemptOutcome, StandardVerified


def assert_code(err: BaseException, code: str) -> None:
    """`err` has `code` and is raised as the class the core's registry names for it."""
    assert isinstance(err, callpost.CallpostError)
    assert err.code == code
    assert type(err).__name__ == callpost.ERROR_CODES[code][0], (code, type(err).__name__)


def test_every_registered_class_exists_with_its_base() -> None:
    # The core's registry names a class and a built-in base for every code;
    # callpost/_errors.py must define each, and nothing else.
    builtins = {"ValueError": ValueError, "TypeError": TypeError}
    classes = {name: base for name, base in callpost.ERROR_CODES.values()}
    assert len(callpost.ERROR_CODES) >= 40
    for name, base in classes.items():
        cls = getattr(callpost, name)
        assert issubclass(cls, callpost.CallpostError), name
        for other, b in builtins.items():
            assert issubclass(cls, b) == (other == base), (name, other)
    defined = {n for n in dir(callpost._errors) if n.endswith("Error") and n != "CallpostError"}
    assert defined == set(classes)


REQUESTS = vectors("webhook_requests.json")
ERRORS = vectors("errors.json")
SIGNATURES = vectors("signatures.json")
RETRY = vectors("retry.json")


def settings(s: dict[str, Any]) -> callpost.Webhooks:
    return callpost.Webhooks(s["endpoints"], s.get("sharedSecret"), method=s.get("method"))


@pytest.mark.parametrize("case", REQUESTS, ids=[c["name"] for c in REQUESTS])
def test_webhook_requests(case: dict[str, Any]) -> None:
    call = case["call_json"] if "call_json" in case else case["call"]
    req = settings(case["settings"]).request(call, case["endpoint"], case["now"])
    want = case["expect"]
    assert req.body.decode() == want["body"]
    assert req.method == want["method"]
    assert req.url == want["url"]
    assert req.headers == [tuple(h) for h in want["headers"]]
    if isinstance(call, str):
        # A forwarder's raw bytes take the same streaming parse as text.
        from_bytes = settings(case["settings"]).request(call.encode(), case["endpoint"], case["now"])
        assert (from_bytes.body, from_bytes.headers) == (req.body, req.headers)


@pytest.mark.parametrize("case", [c for c in REQUESTS if "call_json" in c], ids=lambda c: c["name"])
def test_parsed_dict_gives_the_same_bytes_as_text(case: dict[str, Any]) -> None:
    # json.loads keeps text order, and stringify reorders as JS does.
    call = json.loads(case["call_json"])
    req = settings(case["settings"]).request(call, case["endpoint"], case["now"])
    assert req.body.decode() == case["expect"]["body"]


def js_int(text: str) -> Any:
    """JSON.parse's reading of an integer literal, as the core reads JSON
    text: beyond 64 bits it is a double. (A Python int that JS would print
    differently is rejected instead; see test_api.)"""
    n = int(text)
    return n if -(2**63) <= n < 2**64 else float(n)


@pytest.mark.parametrize("case", vectors("stringify.json"), ids=lambda c: c["input"][:30])
def test_stringify(case: dict[str, str]) -> None:
    assert callpost.stringify(json.loads(case["input"], parse_int=js_int)) == case["expected"]


@pytest.mark.parametrize("case", SIGNATURES["rfc2202"], ids=lambda c: c["digest"][:8])
def test_rfc2202(case: dict[str, str]) -> None:
    assert callpost.sign(bytes.fromhex(case["key_hex"]), bytes.fromhex(case["data_hex"])) == case["digest"]


@pytest.mark.parametrize("case", SIGNATURES["sign"], ids=lambda c: c["signature"][:8])
def test_sign(case: dict[str, str]) -> None:
    assert callpost.sign(case["secret"], case["body"]) == case["signature"]
    assert callpost.sign(case["secret"].encode(), case["body"].encode()) == case["signature"]


@pytest.mark.parametrize("case", SIGNATURES["verify"], ids=lambda c: c["name"])
def test_verify(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(callpost.SignatureError) as e:
            callpost.verify(case["body"], case["signature"], case["secrets"])
        assert_code(e.value, case["error"])
    else:
        assert callpost.verify(case["body"], case["signature"], case["secrets"]) is case["expect"]


def nested_call(n: int) -> str:
    return '{"type":"track","userId":"u","event":"e","properties":' + '{"a":' * n + "1" + "}" * n + "}"


@pytest.mark.parametrize("case", ERRORS["calls"], ids=lambda c: c["name"])
def test_call_errors(case: dict[str, Any]) -> None:
    text = case["call_json"] if "call_json" in case else nested_call(case["call_json_nest"])
    hooks = callpost.Webhooks(["https://example.com/"])
    if case["code"] is None:
        hooks.request(text, 0, 0)
        return
    with pytest.raises(callpost.CallpostError) as e:
        hooks.request(text, 0, 0)
    assert_code(e.value, case["code"])
    if "message" in case:
        assert str(e.value) == case["message"]
    with pytest.raises(type(e.value)) as e_bytes:
        hooks.request(text.encode("utf-8", "surrogatepass"), 0, 0)
    assert e_bytes.value.code == case["code"]


@pytest.mark.parametrize("raw", [b"\xff", b'{"type":"track","userId":"\xc3","event":"e"}', b'{"a":"\xed\xa0\x80"}'])
def test_bytes_that_are_not_utf8_are_refused(raw: bytes) -> None:
    with pytest.raises(callpost.JSONValueError) as e:
        callpost.Webhooks(["https://example.com/"]).request(raw, 0, 0)
    assert_code(e.value, "invalid_unicode")


@pytest.mark.parametrize("case", ERRORS["settings"], ids=lambda c: c["name"])
def test_settings_errors(case: dict[str, Any]) -> None:
    if case["code"] is None:
        settings(case["settings"])
        return
    with pytest.raises(callpost.SettingsError) as e:
        settings(case["settings"])
    assert_code(e.value, case["code"])


@pytest.mark.parametrize("case", ERRORS["stringify"], ids=lambda c: c["name"])
def test_stringify_errors(case: dict[str, str]) -> None:
    with pytest.raises(callpost.JSONValueError) as e:
        callpost.stringify({"n": float(case["number"])})
    assert_code(e.value, case["code"])


def test_audiences() -> None:
    data = vectors("audiences.json")
    for name, want in data["trait_names"]:
        assert callpost.trait_name(name) == want
    for name in data["invalid_names"]:
        with pytest.raises(callpost.SettingsError) as e:
            callpost.trait_name(name)
        assert_code(e.value, "invalid_audience_name")


@pytest.mark.parametrize("case", vectors("batches.json"), ids=lambda c: c["name"])
def test_batches(case: dict[str, Any]) -> None:
    c = case["config"]
    b = callpost.Batcher(
        c["writeKey"],
        endpoint=c["endpoint"],
        flush_at=c["flushAt"],
        library_name=c["libraryName"],
        library_version=c["libraryVersion"],
        now=0,
    )
    for item in case["calls"]:
        b.handle_call(item["now"], item["call"], bytes.fromhex(item["random"]))
    b.flush(case["flushAt"])
    bodies: list[str] = []
    while (req := b.poll_request(case["flushAt"])) is not None:
        assert req.request.url == case["expect"]["url"]
        assert req.request.headers == [tuple(h) for h in case["expect"]["headers"]]
        bodies.append(req.request.body.decode())
        b.handle_response(case["flushAt"], req.batch_id, 200)
    assert bodies == case["expect"]["bodies"]


def test_retry_statuses_through_a_delivery() -> None:
    # The verdict table, observed through the state machine: one endpoint,
    # one reply, then see whether the delivery retries, rejects or succeeds.
    hooks = callpost.Webhooks(["https://r.example/"])
    for status, verdict in RETRY["statuses"]:
        d = callpost.Delivery(hooks.settings, {"type": "track", "userId": "u", "event": "e"}, 0, seed=1)
        a = d.poll_request(0)
        assert a is not None
        d.handle_response(0, a.attempt, status)
        out = d.poll_outcome()
        got = "success" if out and out["kind"] == "delivered" else "reject" if out else "retry"
        assert got == verdict, status


@pytest.mark.parametrize("case", RETRY["deliveries"], ids=lambda c: c["name"])
def test_deliveries(case: dict[str, Any]) -> None:
    # The runner of testdata/README.md: send every request due now, then
    # answer them at once in the order they were sent; a `timeout` reply
    # never answers, so the core's timer fires.
    start = 1_795_341_845_123
    hooks = callpost.Webhooks([f"https://r{i}.example/" for i in range(case["endpoints"])], "k", mode=case["mode"])
    call: dict[str, Any] = {"type": "track", "userId": "u", "event": "e"}
    if "integrations" in case:
        call["integrations"] = case["integrations"]
    d = callpost.Delivery(hooks.settings, call, start, seed=case["seed"])
    used = [0] * case["endpoints"]
    now = start
    for _ in range(1000):
        sent = []
        while (a := d.poll_request(now)) is not None:
            replies = case["replies"][a.endpoint]
            sent.append((a.attempt, replies[min(used[a.endpoint], len(replies) - 1)]))
            used[a.endpoint] += 1
        for attempt, reply in sent:
            kind = reply.get("kind")
            if kind == "timeout":
                continue
            if kind:
                d.handle_response(now, attempt, error=kind, message="vector")
            else:
                d.handle_response(now, attempt, reply["status"], reply.get("retry_after"))
        if sent:
            continue
        t = d.poll_timeout()
        if t is None:
            break
        now = t
        d.handle_timeout(now)

    def code(o: AttemptOutcome) -> str:
        if o["kind"] == "response":
            return f"http_{o['status']}"
        return {"timeout": "timeout", "connection": "connection_error", "tls": "tls_error"}[o["kind"]]

    got = [[r["sent_at"] - start, r["endpoint"], code(r["outcome"]), r["round"]] for r in d.log]
    assert got == case["expect"]["attempts"]
    out = d.poll_outcome()
    assert out is not None
    want = case["expect"]
    assert out["kind"] == want["outcome"]
    if out["kind"] == "delivered":
        assert out["endpoint"] == want["endpoint"]
    if out["kind"] == "gave_up":
        assert out["reason"] == want["reason"]


@pytest.mark.parametrize("case", ERRORS["call_bytes"], ids=lambda c: c["name"])
def test_call_bytes(case: dict[str, Any]) -> None:
    hooks = callpost.Webhooks(["https://example.com/"])
    raw = bytes.fromhex(case["hex"])
    if case["code"] is None:
        hooks.request(raw, 0, 0)
        return
    with pytest.raises(callpost.CallpostError) as e:
        hooks.request(raw, 0, 0)
    assert_code(e.value, case["code"])


@pytest.mark.parametrize("case", ERRORS["enqueue"], ids=lambda c: c["name"])
def test_enqueue_errors(case: dict[str, Any]) -> None:
    b = callpost.Batcher("wk", now=0)
    call: dict[str, Any] = {"type": "track", "event": "e", "properties": {"pad": "x" * case["pad"]}}
    if not case.get("drop_user"):
        call["userId"] = "u"
    if case["code"] is None:
        b.handle_call(0, call, bytes(16))
        return
    with pytest.raises(callpost.CallpostError) as e:
        b.handle_call(0, call, bytes(16))
    assert_code(e.value, case["code"])


@pytest.mark.parametrize("case", RETRY["retry_after"], ids=lambda c: repr(c["value"]))
def test_retry_after_through_a_delivery(case: dict[str, Any]) -> None:
    # After a 503 with this header, the next round waits max(backoff, header);
    # the first round's backoff is 5-10 s, so longer delays show exactly.
    hooks = callpost.Webhooks(["https://r.example/"])
    now = case["now"]
    d = callpost.Delivery(hooks.settings, {"type": "track", "userId": "u", "event": "e"}, now, seed=3)
    a = d.poll_request(now)
    assert a is not None
    d.handle_response(now, a.attempt, 503, case["value"])
    ms = case["ms"]
    if ms is not None and ms > 4 * 3600_000:
        out = d.poll_outcome()
        assert out is not None and out["kind"] == "gave_up" and out["reason"] == "window_exhausted"
        return
    wait = d.poll_timeout() - now
    if ms is not None and ms >= 10_000:
        assert wait == ms
    else:
        assert 5_000 <= wait <= 10_000, "ignored or short: the normal backoff applies"


@pytest.mark.parametrize("case", vectors("receive.json"), ids=lambda c: c["name"])
def test_receive(case: dict[str, Any]) -> None:
    allow = case["options"]["allow_first_event_signature"]
    args = (case["body"].encode(), case["headers"], case["secrets"])
    kwargs: dict[str, Any] = {
        "allow_first_event_signature": allow,
        "standard_secrets": case["standard_secrets"] or None,
        "now": case["now_ms"],
    }
    expect = case["expect"]
    if "error" in expect:
        with pytest.raises(callpost.CallpostError) as e:
            callpost.receive(*args, **kwargs)
        assert_code(e.value, expect["error"])
        return
    assert callpost.receive(*args, **kwargs) == expect["value"]
    value, header, coverage, ids = callpost.receive_webhook(*args, **kwargs)
    assert (header, coverage, ids) == (expect["header"], expect["coverage"], expect["message_ids"])
    assert isinstance(value, list) == expect["batch"]


@pytest.mark.parametrize("case", vectors("ops_events.json"), ids=lambda c: c["name"])
def test_operational_events_verify_as_any_webhook(case: dict[str, Any]) -> None:
    """An operator's receiver checks the relay's operational events with
    the same receive() as any webhook."""
    expect = case["expect"]
    headers = [("X-Signature", expect["signature"]), ("Idempotency-Key", expect["idempotency_key"])]
    value = callpost.receive(expect["body"].encode(), headers, [case["secret"]])
    assert isinstance(value, dict)
    assert (value["version"], value["type"], value["id"]) == (1, case["type"], expect["idempotency_key"])
    with pytest.raises(callpost.SignatureError):
        callpost.receive(expect["body"].encode(), headers, ["another-secret"])


IDS = vectors("ids.json")
ID_CASES = [(case, field) for case in IDS["cases"] for field in case.get("fields", list(IDS["calls"]))]


def host_id(case: dict[str, Any]) -> Any:
    """The case's id as the Python value its `form` names (testdata/README.md)."""
    text = case["id"]
    forms: dict[str, Callable[[str], object]] = {
        "integer": int,
        "float": float,
        "string": str,
        "bool": lambda t: t == "true",
    }
    return forms[case["form"]](text)


def id_sent(how: str, case: dict[str, Any], field: str) -> Any:
    """The id `field` holds in the message the batcher makes of the case's call."""
    template: dict[str, Any] = IDS["calls"][field]
    b = callpost.Batcher("wk", now=0)
    if how == "fields":
        # What callpost.Client and callpost.segment call: the fields as arguments.
        given = {**template, field: host_id(case)}
        return json.loads(b.prepare_fields(given["type"], *(given.get(k) for k in callpost.CALL_FIELDS)).json)[field]
    if how == "dict":
        call: Any = {**template, field: host_id(case)}
    else:  # the id as a number literal in the call's JSON text
        call = json.dumps(template, separators=(",", ":"))[:-1] + f',"{field}":{case["id"]}}}'
    b.handle_call(0, call, bytes(16))
    b.flush(0)
    req = b.poll_request(0)
    assert req is not None
    return json.loads(req.request.body)["batch"][0][field]


@pytest.mark.parametrize("how", ["dict", "fields"])
@pytest.mark.parametrize(
    "case,field",
    [(c, f) for c, f in ID_CASES if c["form"] != "json"],
    ids=lambda v: v["name"] if isinstance(v, dict) else v,
)
def test_id_vectors(case: dict[str, Any], field: str, how: str) -> None:
    if "code" not in case:
        assert id_sent(how, case, field) == case["expect"]
        return
    with pytest.raises(callpost.CallpostError) as e:
        id_sent(how, case, field)
    assert_code(e.value, case["code"])


@pytest.mark.parametrize(
    "case,field",
    [(c, f) for c, f in ID_CASES if c["form"] == "json"],
    ids=lambda v: v["name"] if isinstance(v, dict) else v,
)
def test_id_vectors_in_json_text(case: dict[str, Any], field: str) -> None:
    if "code" not in case:
        assert id_sent("text", case, field) == case["expect"]
        return
    with pytest.raises(callpost.CallpostError) as e:
        id_sent("text", case, field)
    assert_code(e.value, case["code"])


def test_id_vectors_cover_every_id_field() -> None:
    assert list(IDS["calls"]) == ["userId", "anonymousId", "groupId", "previousId", "messageId"]
    assert all(f in callpost.CALL_FIELDS for f in IDS["calls"])


def test_standard_webhooks_vectors_are_what_the_reference_library_signs() -> None:
    """testdata/standard_webhooks.json (made with node:crypto) against the
    specification's own Python library, `standardwebhooks` from PyPI: a
    second oracle for the vectors the core is tested with."""
    from datetime import datetime, timezone

    from standardwebhooks.webhooks import Webhook

    cases = vectors("standard_webhooks.json")["sign"]
    assert len(cases) >= 4
    for case in cases:
        at = datetime.fromtimestamp(case["timestamp"], tz=timezone.utc)
        signed = [Webhook(secret).sign(case["id"], at, case["body"]) for secret in case["secrets"]]
        assert " ".join(signed) == case["signature"], case["name"]


def test_standard_webhooks_vectors_sign_and_verify() -> None:
    """The shared Standard Webhooks vectors through ``sign_standard`` and
    ``verify_standard`` (the core's ``standard`` module), as in Rust."""
    cases = vectors("standard_webhooks.json")
    for case in cases["sign"]:
        # Any millisecond of the second signs as that second.
        headers = dict(
            callpost.sign_standard(case["id"], case["body"], case["secrets"], now=case["timestamp"] * 1000 + 999)
        )
        assert headers == {
            "webhook-id": case["id"],
            "webhook-timestamp": str(case["timestamp"]),
            "webhook-signature": case["signature"],
        }, case["name"]
    for case in cases["verify"]:
        tolerance = case.get("tolerance_ms", callpost.STANDARD_TOLERANCE_MS)

        def run(case: dict[str, Any] = case, tolerance: int = tolerance) -> StandardVerified:
            return callpost.verify_standard(
                case["body"], case["headers"], case["secrets"], now=case["now"] * 1000, tolerance_ms=tolerance
            )

        if "error" in case["expect"]:
            with pytest.raises(callpost.CallpostError) as e:
                run()
            assert_code(e.value, case["expect"]["error"])
        else:
            assert run() == case["expect"], case["name"]


def test_webhooks_sign_the_standard_way_for_the_reference_library() -> None:
    """``Webhooks(signature="standard")``: its requests verify with the
    specification's own library, and with ``verify_standard``, under each
    secret of a rotation; ``"both"`` keeps ``X-Signature``."""
    from standardwebhooks.webhooks import Webhook

    new = "whsec_" + base64.b64encode(b"the new key of the destination").decode()
    old = "whsec_" + base64.b64encode(b"the old key, still trusted").decode()
    call = {"type": "track", "userId": "u", "event": "Order Completed", "messageId": "m-7"}
    for signature, x_signature in (("standard", False), ("both", True)):
        hooks = callpost.Webhooks(
            ["https://example.com/in"], "segment-secret", signature=signature, signing_secrets=[new, old]
        )
        assert hooks.signature == signature
        r = hooks.settings.request(call)
        headers = dict(r.headers)
        assert ("X-Signature" in headers) == x_signature
        assert headers["webhook-id"] == "m-7"
        for secret in (new, old):
            assert Webhook(secret).verify(r.body, headers) == json.loads(r.body)
            assert callpost.verify_standard(r.body, headers, secret)["id"] == "m-7"
    with pytest.raises(callpost.SettingsError):
        callpost.Webhooks(["https://example.com/in"], signature="standard")


FILTERS = vectors("filters.json")


@pytest.mark.parametrize("case", FILTERS["cases"], ids=lambda c: c["name"])
def test_filter_decisions(case: dict[str, Any]) -> None:
    """Each case's filters keep its call with exactly the expected body, or
    drop it by the expected rule, through a delivery as deliver() runs one."""
    hooks = callpost.Webhooks(["https://hooks.example.com/in"], filters=case["filters"])
    d = callpost.Delivery(hooks.settings, case["call"].encode(), case["now"], seed=0)
    expect = case["expect"]
    if "dropped_by" in expect:
        assert d.poll_request(case["now"]) is None
        assert d.poll_outcome() == {"kind": "filtered", "rule": expect["dropped_by"]}
        result = hooks.deliver(case["call"].encode())
        assert (result.delivered, result.filtered_by, result.attempts) == (False, expect["dropped_by"], 0)
        return
    attempt = d.poll_request(case["now"])
    assert attempt is not None
    assert attempt.request.body.decode() == expect["body"]


@pytest.mark.parametrize("case", FILTERS["invalid"], ids=lambda c: c["name"])
def test_refused_filters(case: dict[str, Any]) -> None:
    with pytest.raises(callpost.SettingsError) as e:
        callpost.Webhooks(["https://hooks.example.com/in"], filters=case["filters"])
    assert_code(e.value, case["code"])
    assert "filters" in str(e.value)


MAPPINGS = vectors("mappings.json")


@pytest.mark.parametrize("case", MAPPINGS["cases"], ids=lambda c: c["name"])
def test_mapped_bodies(case: dict[str, Any]) -> None:
    """Each case's mapping builds its call's body exactly as the
    generator's JavaScript reading of the rules does, in the request and
    through a delivery."""
    hooks = callpost.Webhooks(["https://hooks.example.com/in"], mapping=case["mapping"])
    expect = case["expect"]["body"]
    assert hooks.request(case["call"].encode(), now=case["now"]).body.decode() == expect
    d = callpost.Delivery(hooks.settings, case["call"].encode(), case["now"], seed=0)
    attempt = d.poll_request(case["now"])
    assert attempt is not None
    assert attempt.request.body.decode() == expect


@pytest.mark.parametrize("case", MAPPINGS["url_templates"], ids=lambda c: c["name"])
def test_url_templates(case: dict[str, Any]) -> None:
    """Each call's URL filled in from its endpoint's template as the
    generator's JavaScript does, or refused with invalid_url_value; a
    refused call's delivery gives up unsent."""
    hooks = settings(case["settings"])
    expect = case["expect"]
    d = callpost.Delivery(hooks.settings, case["call"].encode(), case["now"], seed=0)
    if "url" in expect:
        assert hooks.request(case["call"], now=case["now"]).url == expect["url"]
        attempt = d.poll_request(case["now"])
        assert attempt is not None and attempt.request.url == expect["url"]
    else:
        with pytest.raises(callpost.DeliveryError) as e:
            hooks.request(case["call"], now=case["now"])
        assert_code(e.value, expect["code"])
        assert d.poll_request(case["now"]) is None
        assert d.poll_outcome() == {"kind": "gave_up", "reason": "invalid_url_value", "attempts": 0, "last": None}


@pytest.mark.parametrize("case", MAPPINGS["invalid_url_templates"], ids=lambda c: c["name"])
def test_refused_url_templates(case: dict[str, Any]) -> None:
    s = case["settings"]
    with pytest.raises(callpost.SettingsError) as e:
        callpost.Webhooks(s["endpoints"], batch="batch" in s)
    assert_code(e.value, case["code"])


@pytest.mark.parametrize("case", MAPPINGS["invalid"], ids=lambda c: c["name"])
def test_refused_mappings(case: dict[str, Any]) -> None:
    with pytest.raises(callpost.SettingsError) as e:
        callpost.Webhooks(["https://hooks.example.com/in"], mapping=case["mapping"])
    assert_code(e.value, case["code"])
    assert "mapping" in str(e.value)


@pytest.mark.parametrize("case", vectors("webhook_batches.json"), ids=lambda c: c["name"])
def test_webhook_batches(case: dict[str, Any]) -> None:
    """The calls packed into batches (ids, bodies, members) and the calls in
    none, as the generator's JavaScript packs them; a batch's delivery
    sends its body under its id."""
    hooks = callpost.Webhooks(
        ["https://hooks.example.com/in"],
        "s3cret",
        filters=case.get("filters"),
        batch=True,
        batch_max_calls=case["batch"].get("maxCalls"),
        batch_max_bytes=case["batch"].get("maxBytes"),
    )
    batches, skipped = hooks.settings.pack([c.encode() for c in case["calls"]], case["now"])
    expect = case["expect"]
    got = [{"id": b.id, "body": b.body.decode(), "members": b.members} for b in batches]
    assert got == expect["batches"]
    want_skipped = [[i, kind, *rest] for i, kind, *rest in expect["skipped"]]
    assert [[i, o["kind"], *([o["rule"]] if o["kind"] == "filtered" else [])] for i, o in skipped] == want_skipped
    for b in batches:
        attempt = hooks.batch_delivery(b, case["now"], seed=0).poll_request(case["now"])
        assert attempt is not None and attempt.request.body == b.body
        assert dict(attempt.request.headers)["Idempotency-Key"] == b.id
