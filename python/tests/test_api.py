"""stringify, sign/verify, errors and secret hygiene."""

from __future__ import annotations

import datetime as dt
import inspect
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import callpost


def test_stringify_matches_json_stringify_rules() -> None:
    assert (
        callpost.stringify({"b": 1, "10": 2, "a": [1.0, -0.0, 1e21, 1.5e-7], "2": None})
        == '{"2":null,"10":2,"b":1,"a":[1,0,1e+21,1.5e-7]}'
    )
    assert callpost.stringify("é😀\u2028\x00\x1f\x7f") == '"é😀\u2028\\u0000\\u001f\x7f"'
    assert callpost.stringify((1, True, False)) == "[1,true,false]"
    assert callpost.stringify(10**16) == "10000000000000000"
    assert callpost.stringify(2**53) == "9007199254740992"


def test_datetimes_become_iso_strings() -> None:
    t = dt.datetime(2026, 11, 22, 12, 4, 5, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert (
        callpost.stringify({"at": t, "day": dt.date(2026, 11, 22)})
        == '{"at":"2026-11-22T10:04:05.123Z","day":"2026-11-22"}'
    )
    with pytest.raises(callpost.InvalidCallError) as e:
        callpost.stringify(dt.datetime(2026, 1, 1))
    assert e.value.code == "invalid_timestamp"


def test_index_keys_go_first_at_any_depth() -> None:
    # Dicts are written in their own order until an index key turns up; the
    # object written so far is then rewritten in JavaScript's order.
    value = {"x": {"a": 1, "b": {"c": 2, "5": 3, "d": {"7": 0}}}, "y": 1, "3": [{"z": 1, "0": 2}]}
    assert callpost.stringify(value) == '{"3":[{"0":2,"z":1}],"x":{"a":1,"b":{"5":3,"c":2,"d":{"7":0}}},"y":1}'
    assert callpost.stringify(value) == json.dumps(json.loads(callpost.stringify(value)), separators=(",", ":"))
    hooks = callpost.Webhooks(["https://example.com/"])
    body = json.loads(
        hooks.request(
            {"type": "track", "userId": "u", "event": "e", "properties": {"z": 1, "0": {"b": 1, "1": 2}}}
        ).body
    )
    assert list(body["properties"]) == ["0", "z"] and list(body["properties"]["0"]) == ["1", "b"]


class _Resizing(dt.tzinfo):
    """A tzinfo whose utcoffset adds a key to a dict: Python code that runs
    in the middle of a walk."""

    def __init__(self, target: dict[str, Any]) -> None:
        self.target = target

    def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
        self.target[f"k{len(self.target)}"] = 1
        return dt.timedelta(0)

    def dst(self, d: dt.datetime | None) -> dt.timedelta | None:
        return None

    def tzname(self, d: dt.datetime | None) -> str | None:
        return None


def test_a_dict_resized_during_the_walk_is_a_runtime_error() -> None:
    hooks = callpost.Webhooks(["https://example.com/"])
    props: dict[str, Any] = {"a": 1}
    props["at"] = dt.datetime(2026, 1, 1, tzinfo=_Resizing(props))
    props["b"] = 2
    with pytest.raises(RuntimeError, match="changed size"):
        callpost.stringify(props)
    with pytest.raises(RuntimeError, match="changed size"):
        hooks.request({"type": "track", "userId": "u", "event": "e", "properties": props})
    call: dict[str, Any] = {"type": "track", "userId": "u", "event": "e"}
    call["timestamp"] = dt.datetime(2026, 1, 1, tzinfo=_Resizing(call))
    call["anonymousId"] = "a"
    with pytest.raises(RuntimeError, match="changed size"):
        hooks.request(call)


class Custom:
    pass


@pytest.mark.parametrize(
    "value,code,path",
    [
        ({"a": {1, 2}}, "not_json", "$.a"),
        ({"a": [0, b"raw"]}, "not_json", "$.a[1]"),
        ({"x": {"y": Custom()}}, "not_json", "$.x.y"),
        ({1: "int key"}, "non_string_key", "$"),
    ],
)
def test_values_json_cannot_carry_raise_type_errors_with_paths(value: Any, code: str, path: str) -> None:
    with pytest.raises(callpost.NotJSONError) as e:
        callpost.stringify(value)
    assert e.value.code == code
    assert isinstance(e.value, TypeError)
    assert path in str(e.value)


def test_cycles_are_reported_not_overflowed() -> None:
    a: Any = []
    a.append({"self": a})
    with pytest.raises(callpost.NotJSONError) as e:
        callpost.stringify(a)
    assert e.value.code == "cyclic_value"
    shared = [1]
    assert callpost.stringify([shared, shared]) == "[[1],[1]]", "a repeated value is not a cycle"


@pytest.mark.parametrize(
    "value,code",
    [
        (math.nan, "non_finite_number"),
        (math.inf, "non_finite_number"),
        (2**53 + 1, "integer_out_of_range"),
        (2**60, "integer_out_of_range"),
        (-(2**200), "integer_out_of_range"),
        ("\ud800", "invalid_unicode"),
    ],
)
def test_values_javascript_would_change_are_rejected(value: Any, code: str) -> None:
    with pytest.raises(callpost.JSONValueError) as e:
        callpost.stringify({"v": value})
    assert e.value.code == code
    assert isinstance(e.value, ValueError)


def test_depth_limit() -> None:
    ok: Any = 1
    for _ in range(64):
        ok = [ok]
    callpost.stringify(ok)
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(callpost.JSONValueError) as e:
        callpost.stringify(deep)
    assert e.value.code == "too_deep"


def test_sign_and_verify_accept_str_and_bytes_and_rotation() -> None:
    body = '{"type":"track","n":1}'
    sig = callpost.sign("k1", body)
    assert sig == callpost.sign(b"k1", body.encode())
    assert callpost.verify(body.encode(), sig, ["old", "k1"])
    assert callpost.verify(body, sig, b"k1")
    assert not callpost.verify(body + " ", sig, "k1")
    assert callpost.verify_parsed(json.loads(body), sig, "k1")
    assert not callpost.verify_parsed({"n": 1, "type": "track"}, sig, "k1"), "key order is part of the bytes"
    with pytest.raises(callpost.SignatureError) as e:
        callpost.verify(body, "zz", "k1")
    assert e.value.code == "malformed_signature"
    with pytest.raises(callpost.SignatureError) as e:
        callpost.sign("", body)
    assert e.value.code == "empty_secret"
    with pytest.raises(TypeError):
        callpost.sign(123, body)  # type: ignore[arg-type]


def test_sign_and_verify_agree_with_hmac_when_the_secret_changes() -> None:
    # The core keeps the last secret prekeyed: same-length secrets, a prefix,
    # an empty one (refused) and back again must each sign with their own key.
    import hashlib
    import hmac

    body = b'{"type":"track","event":"e"}'
    for key in ["k1", "k1", "k2", "K1", "k", "k12", "", "k12", "k" * 100, "k1"]:
        if not key:
            with pytest.raises(callpost.SignatureError):
                callpost.sign(key, body)
            continue
        want = hmac.new(key.encode(), body, hashlib.sha1).hexdigest()
        assert callpost.sign(key, body) == want, key
        assert callpost.verify(body, want, key)
        assert not callpost.verify(body, hmac.new(b"other", body, hashlib.sha1).hexdigest(), key)


def test_verify_request_reads_the_header_case_insensitively() -> None:
    body = b'{"a":1}'
    sig = callpost.sign("k", body)
    assert callpost.verify_request(body, {"x-signature": sig}, "k")
    assert callpost.verify_request(body, {"X-Signature": sig}, "k")
    assert not callpost.verify_request(body, {}, "k")


def test_secrets_and_credentials_never_show() -> None:
    hooks = callpost.Webhooks(
        [{"url": "https://a.example/", "headers": {"Authorization": "Bearer TOPSECRET"}}], "SHAREDKEY"
    )
    req = hooks.request({"type": "identify", "userId": "u", "traits": {"ssn": "123"}}, 0, 0)
    for text in (repr(hooks), repr(req), str(hooks)):
        assert "TOPSECRET" not in text and "SHAREDKEY" not in text and "123" not in text
    c = callpost.Client("WRITEKEY_SECRET", endpoint="http://127.0.0.1:9")
    assert "WRITEKEY_SECRET" not in repr(c)
    with pytest.raises(callpost.SettingsError) as e:
        callpost.Webhooks([{"url": "https://a.example/", "headers": {"X-Key": "TOPSECRET\r\n"}}])
    assert "TOPSECRET" not in str(e.value)
    with pytest.raises(callpost.ConfigError) as e3:
        callpost.Client("wk", endpoint="https://wk:TOPSECRET@api.example/")
    assert (
        e3.value.code == "invalid_endpoint" and "TOPSECRET" not in str(e3.value) and "***@api.example" in str(e3.value)
    )
    c.close(timeout=0)


def test_settings_errors_are_raised_at_construction() -> None:
    with pytest.raises(callpost.SettingsError) as e:
        callpost.Webhooks([f"https://a.example/{i}" for i in range(6)])
    assert e.value.code == "too_many_endpoints"
    with pytest.raises(TypeError):
        callpost.Webhooks("https://a.example/")
    with pytest.raises(callpost.ConfigError) as e2:
        callpost.Client("")
    assert e2.value.code == "empty_write_key"


def test_error_hierarchy() -> None:
    for cls in (
        callpost.InvalidCallError,
        callpost.JSONValueError,
        callpost.SettingsError,
        callpost.SignatureError,
        callpost.ConfigError,
        callpost.MessageTooLargeError,
    ):
        assert issubclass(cls, callpost.CallpostError) and issubclass(cls, ValueError)
    assert issubclass(callpost.NotJSONError, TypeError)
    assert issubclass(callpost.QueueFullError, callpost.CallpostError)


def test_request_takes_dicts_datetimes_and_json_text() -> None:
    hooks = callpost.Webhooks(["https://a.example/"], "k")
    when = dt.datetime(2026, 11, 22, 10, 4, 5, 123000, tzinfo=dt.timezone.utc)
    a = hooks.request({"type": "track", "userId": "u", "event": "e", "timestamp": when})
    b = hooks.request('{"type":"track","userId":"u","event":"e","timestamp":"2026-11-22T10:04:05.123Z"}')
    c = hooks.request(b'{"type":"track","userId":"u","event":"e","timestamp":"2026-11-22T10:04:05.123Z"}')
    assert a.body == b.body == c.body
    assert a.header("x-signature") == callpost.sign("k", a.body)
    stamped = hooks.request({"type": "track", "userId": "u", "event": "e"}, now=when)
    assert json.loads(stamped.body)["timestamp"] == "2026-11-22T10:04:05.123Z"
    assert callpost.parse_timestamp("2026-11-22T12:04:05.123+02:00") == int(when.timestamp() * 1000)


HOOKS = callpost.Webhooks(["https://hooks.example.com/h"], "s")
TRACK = {"type": "track", "userId": "u", "event": "e", "timestamp": "2026-11-22T10:04:05.123Z"}


def test_dicts_and_json_text_give_identical_bodies() -> None:
    # The dict path writes properties straight to bytes; the text path parses
    # into a tree first. Both must sign the same bytes.
    props = {"b": 1, "a": [1.5, None, True, "x\n"], "10": {"2": 0, "z": 2**53}, "0": -0.0, "é": "\u2028"}
    call = dict(TRACK, properties=props, context={"ip": "1.2.3.4"})
    a = HOOKS.request(call, now=0)
    b = HOOKS.request(json.dumps(call), now=0)
    assert a.body == b.body
    assert json.loads(a.body)["properties"] == props


def test_values_under_keys_the_model_ignores_are_still_checked() -> None:
    # Dropped from the body, but refused as JS would refuse them, so both
    # languages accept the same calls.
    assert b"extra" not in HOOKS.request(dict(TRACK, extra={"k": [1]}), now=0).body
    with pytest.raises(callpost.NotJSONError) as e:
        HOOKS.request(dict(TRACK, extra={"k": {1, 2}}), now=0)
    assert e.value.code == "not_json" and "$.extra.k" in str(e.value)


def test_field_errors_do_not_depend_on_key_order() -> None:
    for call in (
        {"timestamp": 5, "userId": [], "type": "track", "event": "e"},
        {"type": "track", "event": "e", "userId": [], "timestamp": 5},
    ):
        with pytest.raises(callpost.InvalidCallError) as e:
            HOOKS.request(call)
        assert e.value.code == "invalid_field" and "userId" in str(e.value)


def test_batcher_reads_clock_and_entropy_when_not_given() -> None:
    b = callpost.Batcher("wk", seed=1, now=0)
    ids = {b.handle_call(None, {"type": "track", "userId": "u", "event": "e"}) for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 36 and i[14] == "4" for i in ids)
    # Past the 4 KB entropy buffer (256 ids) too.
    more = {b.handle_call(None, {"type": "track", "userId": "u", "event": "e"}) for _ in range(600)}
    assert len(more) == 600 and not more & ids


_FIELDS = callpost.CALL_FIELDS


def test_handle_fields_takes_the_cores_call_fields_in_order() -> None:
    # The parameters are named for readers; their order is the core's list.
    params = list(inspect.signature(callpost.Batcher.handle_fields).parameters)[1:]
    snake = [re.sub(r"(?<!^)([A-Z])", r"_\1", f).lower() for f in _FIELDS]
    assert params == ["kind", *snake]


def test_handle_fields_queues_what_handle_call_queues_for_the_same_dict() -> None:
    # The clients pass their arguments as fields (no dict); every kind must
    # give the bytes its dict gives, and the same errors.
    when = dt.datetime(2026, 11, 22, 10, 4, 5, 123000, tzinfo=dt.timezone.utc)
    common: dict[str, Any] = {
        "anonymousId": "a-1",
        "context": {"ip": "10.0.0.1"},
        "integrations": {"All": False, "Webhooks": True},
        "timestamp": when,
        "messageId": "m-1",
    }
    calls: list[dict[str, Any]] = [
        {"type": "identify", "userId": 42, "traits": {"plan": "pro", "seats": 3}},
        {
            "type": "track",
            "userId": "u-1",
            "event": "Order Completed",
            "properties": {"total": 129.95, "items": [1, 2]},
        },
        {"type": "page", "userId": "u-1", "name": "Home", "category": "Docs", "properties": {"path": "/"}},
        {"type": "screen", "userId": "u-1", "name": "Cart", "properties": {"n": 1}},
        {"type": "group", "userId": "u-1", "groupId": "g-1", "traits": {"name": "Acme"}},
        {"type": "alias", "userId": "u-2", "previousId": "u-1"},
    ]
    for call in calls:
        call = {**common, **call}
        by_dict = callpost.Batcher("wk", seed=1, now=0, flush_at=1)
        by_fields = callpost.Batcher("wk", seed=1, now=0, flush_at=1)
        assert (
            by_dict.handle_call(0, call)
            == by_fields.handle_fields(call["type"], *(call.get(f) for f in _FIELDS))
            == "m-1"
        )
        bodies = [b.poll_request(1000).request.body for b in (by_dict, by_fields)]  # type: ignore[union-attr]
        assert bodies[0] == bodies[1], call["type"]
        assert b'"messageId":"m-1"' in bodies[0]
    # A missing field, a wrong type and a value with no JSON form fail alike.
    bads: list[dict[str, Any]] = [
        {"type": "track", "userId": "u"},
        {"type": "track", "userId": "u", "event": "e", "properties": [1]},
        {"type": "group", "userId": "u", "groupId": "g", "traits": {"x": object()}},
    ]
    for bad in bads:
        errors = []
        for fields in (False, True):
            b = callpost.Batcher("wk", seed=1, now=0)
            with pytest.raises(callpost.CallpostError) as e:
                if fields:
                    b.handle_fields(bad["type"], *(bad.get(f) for f in _FIELDS))
                else:
                    b.handle_call(0, bad)
            errors.append((type(e.value), e.value.code, str(e.value)))
        assert errors[0] == errors[1]
    # The fields are positional and all thirteen are required.
    with pytest.raises(TypeError):
        callpost.Batcher("wk", seed=1, now=0).handle_fields("track", "u", None, "e")  # type: ignore[call-arg]


def test_on_wake_is_called_when_a_call_moves_the_wake_up_time_earlier() -> None:
    wakes: list[int] = []
    b = callpost.Batcher("wk", seed=1, now=0, flush_at=3, flush_after_ms=1000, on_wake=lambda: wakes.append(b.queued))
    call = {"type": "track", "userId": "u", "event": "e"}
    assert b.poll_timeout() is None
    b.handle_call(10, call)  # the first message starts the flush timer
    assert wakes == [1] and b.poll_timeout() == 1000
    b.handle_fields("track", "u", None, "e", None, None, None, None, None, None, None, None, None, None)
    assert wakes == [1], "the timer did not move"
    b.handle_call(20, call)  # flush_at: a batch is due now
    assert wakes == [1, 3]
    b.handle_call(30, call)  # still due now
    assert wakes == [1, 3]
    assert b.poll_request(40) is not None
    b.handle_call(50, call)  # the one batch allowed in flight is: nothing to do until it ends
    assert wakes == [1, 3]
    # A refused call wakes nothing; an on_wake that raises is the caller's
    # error, and the call it was woken for stays queued.
    with pytest.raises(callpost.InvalidCallError):
        b.handle_call(60, {"type": "track"})

    def boom() -> None:
        raise RuntimeError("wake failed")

    c = callpost.Batcher("wk", seed=1, now=0, on_wake=boom)
    with pytest.raises(RuntimeError, match="wake failed"):
        c.handle_call(0, call)
    assert c.queued == 1


def test_a_batcher_is_shared_between_threads() -> None:
    # Calls from several threads, with a sender polling at the same time:
    # every message is queued once and sent once.
    b = callpost.Batcher("wk", seed=1, now=0, flush_at=7, max_queue=100_000)
    sent: list[int] = []
    done = threading.Event()

    def sender() -> None:
        while not done.is_set() or b.queued:
            b.handle_timeout(0)
            r = b.poll_request(0)
            if r is None:
                if done.is_set():
                    b.flush(0)
                time.sleep(0)
                continue
            sent.append(r.message_count)
            b.handle_response(0, r.batch_id, 200)

    def caller(i: int) -> list[str]:
        return [
            b.handle_fields("track", f"u{i}", None, "e", None, None, None, None, {"n": n}, None, None, None, None, None)
            for n in range(2000)
        ]

    t = threading.Thread(target=sender)
    t.start()
    with ThreadPoolExecutor(4) as pool:
        ids = [m for batch in pool.map(caller, range(4)) for m in batch]
    done.set()
    t.join(30)
    assert len(set(ids)) == 8000
    assert sum(sent) == 8000 and b.idle


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_forked_processes_never_share_message_ids() -> None:
    # The binding buffers OS entropy; a child must not replay its parent's.
    b = callpost.Batcher("wk", seed=1, now=0)
    call = {"type": "track", "userId": "u", "event": "e"}
    b.handle_call(None, call)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, "\n".join(b.handle_call(None, call) for _ in range(50)).encode())
        os._exit(0)
    os.close(w)
    parent = {b.handle_call(None, call) for _ in range(50)}
    with os.fdopen(r) as f:
        child = set(f.read().split("\n"))
    os.waitpid(pid, 0)
    assert len(child) == 50 and not parent & child


def test_python_defaults_are_the_cores() -> None:
    d = callpost.DEFAULTS

    def seconds(name: str) -> float:
        return d[name] / 1000

    want = {
        callpost.Client: dict(
            flush_at=d["flush_at"],
            flush_after=seconds("flush_after_ms"),
            max_queue=d["max_queue"],
            max_attempts=d["max_attempts"],
            max_retry=seconds("max_retry_ms"),
            timeout=seconds("request_timeout_ms"),
            backoff_base=seconds("batch_backoff_base_ms"),
            backoff_cap=seconds("batch_backoff_cap_ms"),
            shutdown_timeout=seconds("shutdown_timeout_ms"),
        ),
        callpost.Webhooks: dict(
            timeout=seconds("webhook_timeout_ms"),
            retry_window=seconds("retry_window_ms"),
            backoff_base=seconds("delivery_backoff_base_ms"),
            backoff_cap=seconds("delivery_backoff_cap_ms"),
        ),
    }
    want[callpost.AsyncClient] = {k: v for k, v in want[callpost.Client].items() if k != "shutdown_timeout"}
    for cls, params in want.items():
        sig = inspect.signature(cls)
        for name, value in params.items():
            assert sig.parameters[name].default == value, (cls.__name__, name)
    assert inspect.signature(callpost.AsyncClient.close).parameters["timeout"].default == seconds("shutdown_timeout_ms")
    # The raw classes leave every default to the core: None in, the core's value out.
    b = callpost.Batcher("wk", now=0)
    b.handle_call(0, {"type": "track", "userId": "u", "event": "e"})
    assert b.poll_timeout() == d["flush_after_ms"]
    assert d["max_message_bytes"] == callpost.MAX_MESSAGE_BYTES and d["max_batch_bytes"] == callpost.MAX_BATCH_BYTES


def test_the_stub_leaves_defaults_to_the_core() -> None:
    # The .pyi restates no number: the raw classes' defaults are None (the
    # core's), and the high-level classes' come from DEFAULTS in _client.py and _webhooks.py.
    stub = (pathlib.Path(callpost.__file__).parent / "_callpost.pyi").read_text()
    for name, value in callpost.DEFAULTS.items():
        assert not re.search(rf"\b{name}\s*:\s*\w+\s*=\s*{value}\b", stub), name
    assert not re.search(r"=\s*\d{2,}", stub)


def test_misuse_is_invalid_argument() -> None:
    hooks = callpost.Webhooks(["https://example.com/"])
    d = callpost.Delivery(hooks.settings, {"type": "track", "userId": "u", "event": "e"}, 0, seed=1)
    a = d.poll_request(0)
    assert a is not None
    for misuse in (
        lambda: callpost.sign(1, "body"),  # type: ignore[arg-type]
        lambda: callpost.verify("body", "0" * 40, [3]),  # type: ignore[list-item]
        lambda: d.handle_response(0, a.attempt),
        lambda: d.handle_response(0, a.attempt, error="dns"),
        lambda: callpost.Batcher("wk").handle_call(0, {"type": "track", "userId": "u", "event": "e"}, b"short"),
        lambda: hooks.request({"type": "track", "userId": "u", "event": "e"}, 3),
        lambda: callpost.verify_request("body", 42, "s"),  # type: ignore[arg-type]
        lambda: callpost.Webhooks("https://example.com/"),
    ):
        with pytest.raises(callpost.InvalidArgumentError) as e:
            misuse()
        assert e.value.code == "invalid_argument" and isinstance(e.value, TypeError)


def test_version_has_one_source() -> None:
    cargo = (pathlib.Path(__file__).resolve().parents[2] / "Cargo.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', cargo, re.M)
    assert version is not None and callpost.__version__ == version.group(1)
    from importlib.metadata import version as dist_version

    assert dist_version("callpost") == callpost.__version__
    out = subprocess.run([sys.executable, "-m", "callpost", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"callpost {callpost.__version__}"
