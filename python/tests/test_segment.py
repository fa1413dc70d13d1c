"""callpost.segment, the drop-in for segment-analytics-python 2.x, against a
real ingest server on 127.0.0.1; and one program run through Segment's own
SDK (installed from PyPI into target/) and through callpost.segment, with
what arrives compared field by field."""

from __future__ import annotations

import base64
import datetime
import decimal
import enum
import fcntl
import gzip
import importlib.util
import json
import logging
import os
import pathlib
import subprocess
import sys
import threading
import types
import unittest
import unittest.mock
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from conftest import ROOT, Serve, ok

import callpost
import callpost.segment as analytics

SEGMENT_SDK = "segment-analytics-python==2.4.0"
SCRIPT = pathlib.Path(__file__).parent / "segment" / "script.py"
WHEN = datetime.datetime(2026, 3, 1, 12, 30, 15, 250000, tzinfo=datetime.timezone.utc)


def messages(srv: Any) -> list[dict[str, Any]]:
    out = []
    for _, headers, body in srv.received.requests:
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        out.extend(json.loads(body)["batch"])
    return out


@pytest.fixture
def module() -> Iterator[Any]:
    """callpost.segment's module-level settings, restored afterwards."""
    names = [
        "write_key",
        "host",
        "on_error",
        "debug",
        "send",
        "sync_mode",
        "max_queue_size",
        "gzip",
        "timeout",
        "max_retries",
        "default_client",
    ]
    saved = {n: getattr(analytics, n) for n in names}
    yield analytics
    if analytics.default_client is not None and analytics.default_client is not saved["default_client"]:
        analytics.default_client.join()
    for n, v in saved.items():
        setattr(analytics, n, v)


def test_module_level_settings_and_proxies(serve: Serve, module: Any) -> None:
    srv = serve(ok)
    module.write_key = "wk_mod"
    module.host = srv.url
    success, msg = module.track("u1", "Signed Up", {"plan": "pro"})
    assert success is True
    assert module.default_client is not None and module.default_client.host == srv.url
    module.identify("u1", {"email": "a@example.com"})
    module.group("u1", "g1", {"name": "Initech"})
    module.alias("anon", "u1")
    module.page("u1", "Docs", "Python")
    module.screen("u1", "Onboarding", "Step 1")
    module.flush()
    got = messages(srv)
    assert [m["type"] for m in got] == ["track", "identify", "group", "alias", "page", "screen"]
    assert got[0]["messageId"] == msg["messageId"]
    _, headers, _ = srv.received.requests[0]
    assert headers["authorization"] == "Basic " + base64.b64encode(b"wk_mod:").decode()
    module.shutdown()
    # After shutdown a call is reported, not silently dropped.
    success, msg = module.track("u1", "Too Late")
    assert success is False and msg["event"] == "Too Late"


def test_each_method_returns_segments_msg_with_its_arguments(serve: Serve) -> None:
    srv = serve(ok)
    c = analytics.Client("wk", host=srv.url)
    ok1, identify = c.identify("u1", {"a": 1}, {"ip": "203.0.113.1"}, WHEN, "anon1", {"All": True}, "m-identify")
    ok2, track = c.track("u1", "Played", {"n": 2}, {"locale": "fr"}, WHEN, "anon1", {"X": False}, "m-track")
    ok3, alias = c.alias("old", "u1", {"c": 1}, WHEN, {"Y": True}, "m-alias")
    ok4, group = c.group("u1", "g1", {"size": 3}, {"d": 1}, WHEN, "anon1", {"Z": True}, "m-group")
    ok5, page = c.page("u1", "Docs", "Python", {"path": "/p"}, {"e": 1}, WHEN, "anon1", {}, "m-page")
    ok6, screen = c.screen("u1", "Onboarding", "Step 2", {"s": 2}, None, WHEN, None, None, "m-screen")
    c.shutdown()
    assert all([ok1, ok2, ok3, ok4, ok5, ok6])
    library = {"name": "callpost", "version": callpost.__version__}
    stamp = "2026-03-01T12:30:15.250Z"
    assert identify == {
        "type": "identify",
        "userId": "u1",
        "anonymousId": "anon1",
        "traits": {"a": 1},
        "context": {"ip": "203.0.113.1", "library": library},
        "integrations": {"All": True},
        "timestamp": stamp,
        "messageId": "m-identify",
    }
    assert track["event"] == "Played" and track["properties"] == {"n": 2} and track["context"]["locale"] == "fr"
    assert alias["previousId"] == "old" and alias["userId"] == "u1" and alias["integrations"] == {"Y": True}
    assert group["groupId"] == "g1" and group["traits"] == {"size": 3}
    # Segment's argument order: page(user_id, category, name, properties, ...).
    assert (page["category"], page["name"], page["properties"]) == ("Docs", "Python", {"path": "/p"})
    assert (screen["category"], screen["name"], screen["properties"]) == ("Onboarding", "Step 2", {"s": 2})
    assert screen["context"] == {"library": library} and screen["integrations"] == {}
    # What was returned is what was sent.
    sent = {m["messageId"]: m for m in messages(srv)}
    for m in (identify, track, alias, group, page, screen):
        assert sent[m["messageId"]] == m


def test_ids_are_strings_and_defaults_are_filled_as_segment_fills_them(serve: Serve) -> None:
    c = analytics.Client("wk", host=serve(ok).url, send=False)
    _, msg = c.track(1234, "Numeric", message_id=uuid.UUID(int=7))
    assert msg["userId"] == "1234" and msg["messageId"] == str(uuid.UUID(int=7))
    assert msg["properties"] == {} and msg["integrations"] == {}
    _, msg = c.group(5, 42)
    assert msg["groupId"] == "42" and msg["traits"] == {}
    _, msg = c.alias(1, 2)
    assert (msg["previousId"], msg["userId"]) == ("1", "2")
    _, msg = c.identify(anonymous_id="a1")
    uuid.UUID(msg["messageId"])  # generated: a UUID
    assert datetime.datetime.fromisoformat(msg["timestamp"].replace("Z", "+00:00")).tzinfo is not None


def test_integer_ids_of_any_size_are_their_exact_digits(serve: Serve) -> None:
    srv = serve(ok)
    c = analytics.Client("wk", host=srv.url)
    _, track = c.track(157963456373623802, "Big", message_id=2**64)
    _, group = c.group(-157963456373623803, 10**30, anonymous_id=0)
    _, alias = c.alias(2**53 + 1, int("9" * 50))
    c.shutdown()
    assert (track["userId"], track["messageId"]) == ("157963456373623802", "18446744073709551616")
    assert (group["userId"], group["groupId"], group["anonymousId"]) == ("-157963456373623803", "1" + "0" * 30, "0")
    assert (alias["previousId"], alias["userId"]) == ("9007199254740993", "9" * 50)
    assert messages(srv) == [track, group, alias]
    # An id given as a float or a bool is no identifier (Segment's SDK sends str() of it).
    bads: list[Callable[[], object]] = [
        lambda: c.track(1.5, "E"),  # type: ignore[arg-type]
        lambda: c.track(True, "E"),
        lambda: c.group("u", 2.5),  # type: ignore[arg-type]
        lambda: c.track("u", "E", message_id=False),
    ]
    for bad in bads:
        with pytest.raises(callpost.InvalidCallError) as e:
            bad()
        assert e.value.code == "invalid_field"
    # What was sent leaves out an id not given; the returned msg reads None
    # for it, as Segment's does.
    _, msg = c.track(anonymous_id="a1", event="Anonymous")
    assert msg["userId"] is None and "userId" not in msg and msg.get("userId") is None
    with pytest.raises(KeyError):
        msg["groupId"]


def test_naive_timestamps_are_guessed_as_segment_guesses(serve: Serve) -> None:
    c = analytics.Client("wk", host=serve(ok).url, send=False)
    # Long ago and naive: UTC.
    _, msg = c.track("u1", "Old", timestamp=datetime.datetime(2020, 1, 2, 3, 4, 5))
    assert msg["timestamp"] == "2020-01-02T03:04:05.000Z"
    # Naive "now": local time, so the instant is now.
    _, msg = c.track("u1", "Now", timestamp=datetime.datetime.now())
    sent = datetime.datetime.fromisoformat(msg["timestamp"].replace("Z", "+00:00"))
    assert abs((sent - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) < 5


class Color(enum.Enum):
    RED = "red"
    PRICE = decimal.Decimal("1.5")


def test_segments_value_conversions_apply(serve: Serve) -> None:
    srv = serve(ok)
    c = analytics.Client("wk", host=srv.url)
    props = {
        "price": decimal.Decimal("19.99"),
        "color": Color.RED,
        "nested_enum": Color.PRICE,
        "tags": {"a"},
        "id": uuid.UUID(int=1),
        "raw": b"caf\xc3\xa9",
        "day": datetime.date(2026, 1, 2),
        "naive": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "tuple": (1, 2),
    }
    _, msg = c.track("u1", "Converted", props)
    c.shutdown()
    expected = {
        "price": 19.99,
        "color": "red",
        "nested_enum": 1.5,
        "tags": ["a"],
        "id": str(uuid.UUID(int=1)),
        "raw": "café",
        "day": "2026-01-02",
        "naive": "2026-01-02T03:04:05",
        "tuple": [1, 2],
    }
    assert msg["properties"] == expected
    assert messages(srv)[0]["properties"] == expected


def test_a_value_with_no_json_form_is_refused_with_its_path(serve: Serve) -> None:
    c = analytics.Client("wk", host=serve(ok).url, send=False)
    with pytest.raises(callpost.NotJSONError) as e:
        c.track("u1", "Bad", {"list": [1, object()]})
    assert e.value.code == "not_json" and "$.properties.list[1]" in str(e.value)


def test_argument_errors_are_segments_classes_and_callposts(serve: Serve) -> None:
    c = analytics.Client("wk", host=serve(ok).url, send=False)
    bads: list[Callable[[], object]] = [
        lambda: c.track(None, "No Id"),
        lambda: c.track("u1", None),
        lambda: c.track("u1", "E", [1]),  # type: ignore[arg-type]
        lambda: c.identify("u1", "traits"),  # type: ignore[arg-type]
        lambda: c.group("u1"),
        lambda: c.alias(None, "u1"),
        lambda: c.page("u1", name=5),  # type: ignore[arg-type]
        lambda: c.track("u1", "E", timestamp="2026-01-01"),  # type: ignore[arg-type]
    ]
    for bad in bads:
        with pytest.raises(AssertionError) as e:
            bad()
        assert isinstance(e.value, callpost.InvalidCallError) and e.value.code == "invalid_argument"
    with pytest.raises(RuntimeError) as big:
        c.track("u1", "Big", {"pad": "x" * 40_000})
    assert isinstance(big.value, callpost.MessageTooLargeError) and big.value.code == "message_too_large"
    with pytest.raises(AssertionError):
        analytics.Client(None)


def test_send_false_sends_nothing_and_returns_the_msg(serve: Serve) -> None:
    srv = serve(ok)
    c = analytics.Client("wk", host=srv.url, send=False, upload_size=1)
    success, msg = c.track("u1", "Dry Run", {"a": 1})
    c.flush()
    c.shutdown()
    assert success is True and msg["event"] == "Dry Run" and msg["properties"] == {"a": 1}
    assert len(srv.received) == 0


def test_sync_mode_has_sent_the_call_when_it_returns(serve: Serve) -> None:
    srv = serve(ok)
    c = analytics.Client("wk", host=srv.url, sync_mode=True, upload_interval=60)
    for i in range(3):
        _, msg = c.track("u1", "Sync", {"i": i})
        assert [m["messageId"] for m in messages(srv)][-1] == msg["messageId"]
    c.shutdown()


def test_on_error_gets_the_exception_and_the_batch(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (400, {"Content-Type": "application/json"}, b'{"code":"invalid","message":"no"}'))
    failures: list[tuple[Exception, list[dict[str, Any]]]] = []
    c = analytics.Client("wk", host=srv.url, on_error=lambda e, batch: failures.append((e, batch)))
    _, msg = c.track("u1", "Refused")
    c.flush()
    c.shutdown()
    assert len(failures) == 1
    e, batch = failures[0]
    assert isinstance(e, callpost.DeliveryError) and "400" in str(e)
    assert [m["messageId"] for m in batch] == [msg["messageId"]]


def test_max_retries_counts_retries_after_the_first_attempt(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (503, {"Retry-After": "0"}, b""))
    failures: list[Any] = []
    c = analytics.Client("wk", host=srv.url, max_retries=2, on_error=lambda e, batch: failures.append(batch))
    c.track("u1", "Retried")
    c.flush()
    c.shutdown()
    assert len(srv.received) == 3 and len(failures) == 1


def test_flush_blocks_until_delivered_and_join_stops_the_client(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (0.3, {}, b""))
    c = analytics.Client("wk", host=srv.url, upload_interval=60)
    for i in range(250):
        c.track("u1", "Queued", {"i": i})
    c.flush()
    assert len(messages(srv)) == 250
    assert [len(json.loads(b)["batch"]) for _, _, b in srv.received.requests] == [100, 100, 50]
    c.join()
    assert c.track("u1", "After Join")[0] is False


def test_a_full_queue_returns_false_with_the_msg(serve: Serve) -> None:
    release = threading.Event()
    srv = serve(lambda n, h, b: (200, {}, b"") if release.wait(10) else (500, {}, b""))
    c = analytics.Client("wk", host=srv.url, max_queue_size=3, upload_size=1, upload_interval=0.01)
    results = [c.track("u1", "E", {"i": i}) for i in range(20)]
    release.set()
    c.shutdown()
    assert any(r[0] is False for r in results)
    refused = [r[1]["properties"]["i"] for r in results if r[0] is False]
    delivered = [m["properties"]["i"] for m in messages(srv)]
    assert not set(refused) & set(delivered)
    assert sorted(refused + delivered) == list(range(20))


def test_gzip_compresses_batches(serve: Serve) -> None:
    srv = serve(ok)
    c = analytics.Client("wk", host=srv.url, gzip=True)
    c.track("u1", "Zipped", {"text": "abc" * 1000})
    c.shutdown()
    _, headers, body = srv.received.requests[0]
    assert headers["content-encoding"] == "gzip" and len(body) < 1000
    assert messages(srv)[0]["properties"]["text"] == "abc" * 1000


def test_proxies_send_through_the_proxy(serve: Serve) -> None:
    # An HTTP proxy gets the request with the absolute URL in its request
    # line; the test server plays the proxy and records it.
    proxy = serve(ok)
    c = analytics.Client("wk", host="http://ingest.invalid", proxies={"http": proxy.url})
    c.track("u1", "Proxied")
    c.shutdown()
    path, _, _ = proxy.received.requests[0]
    assert path == "http://ingest.invalid/v1/batch"


def test_http_client_is_used_and_left_open(serve: Serve) -> None:
    srv = serve(ok)
    http = httpx.Client(headers={"X-Through": "mine"})
    c = analytics.Client("wk", host=srv.url, http_client=http)
    c.track("u1", "Mine")
    c.shutdown()
    assert srv.received.requests[0][1]["x-through"] == "mine"
    assert not http.is_closed
    http.close()


def test_oauth_settings_are_refused_clearly() -> None:
    with pytest.raises(callpost.InvalidCallError, match="OAuth"):
        analytics.Client("wk", oauth_client_id="id", oauth_client_key="key", oauth_key_id="kid")


def test_debug_logs_through_the_callpost_logger_only(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    root_handlers = list(logging.getLogger().handlers)
    c = analytics.Client("wk", host=serve(ok).url, debug=True, send=False)
    with caplog.at_level(logging.DEBUG, logger="callpost"):
        c.track("u1", "Logged")
    assert any("queueing" in r.getMessage() and r.name == "callpost" for r in caplog.records)
    assert logging.getLogger().handlers == root_handlers
    assert logging.getLogger("callpost").handlers


def test_importing_callpost_with_debug_set_configures_no_logging() -> None:
    code = (
        "import logging, callpost, callpost.segment; "
        "assert logging.getLogger().handlers == [], logging.getLogger().handlers; "
        "assert logging.getLogger('callpost').handlers == []; "
        "callpost.Client('wk', send=False); "
        "assert logging.getLogger().handlers == []; "
        "assert logging.getLogger('callpost').level == logging.DEBUG; "
        "assert len(logging.getLogger('callpost').handlers) == 1"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, DEBUG="analytics"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


def test_default_hook_for_stringify_and_the_clients(serve: Serve) -> None:
    def default(v: Any) -> Any:
        if isinstance(v, decimal.Decimal):
            return str(v)
        raise TypeError

    assert callpost.stringify({"p": decimal.Decimal("1.10")}, default=default) == '{"p":"1.10"}'
    with pytest.raises(callpost.NotJSONError):
        callpost.stringify({"p": object()}, default=default)
    with pytest.raises(callpost.NotJSONError):
        callpost.stringify({"p": decimal.Decimal(1)})
    # A hook that returns its argument is a cycle, not endless recursion.
    with pytest.raises(callpost.NotJSONError):
        callpost.stringify([object()], default=lambda v: v)
    srv = serve(ok)
    with callpost.Client("wk", endpoint=srv.url, default=default) as c:
        c.track("u1", "Priced", {"price": decimal.Decimal("2.50")})
    assert messages(srv)[0]["properties"] == {"price": "2.50"}


# -- the same program through Segment's SDK and through callpost.segment -----


@pytest.fixture(scope="session")
def segment_python() -> str:
    """Segment's own SDK, from PyPI, in a throwaway virtualenv under target/."""
    venv = ROOT / "target" / "segment-sdk-python"
    python = venv / "bin" / "python"
    marker = venv / SEGMENT_SDK
    venv.parent.mkdir(parents=True, exist_ok=True)
    # pytest-xdist's workers each have this fixture: one makes the venv.
    with open(venv.parent / "segment-sdk-python.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", SEGMENT_SDK], check=True, timeout=600)
            marker.write_text("")
    return str(python)


def run(python: str, source: str, url: str, tmp: pathlib.Path) -> list[dict[str, Any]]:
    path = tmp / "program.py"
    path.write_text(source)
    r = subprocess.run(
        [python, str(path)],
        env=dict(os.environ, WRITE_KEY="wk_same", INGEST_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "on_error" not in r.stderr, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


# What may differ: the generated id and clock readings, and the library.
VARIES = {"messageId", "timestamp", "originalTimestamp", "sentAt"}


def comparable(m: dict[str, Any], fixed_id: bool) -> dict[str, Any]:
    out = {k: v for k, v in m.items() if k not in VARIES or (k == "messageId" and fixed_id)}
    out["context"] = {k: v for k, v in m["context"].items() if k != "library"}
    # Segment's SDK sends an id or name it was not given as null; callpost
    # leaves it out (the tracking API reads both alike). Only these keys.
    for k in ("userId", "anonymousId", "name", "category"):
        if out.get(k, "") is None:
            del out[k]
    # And it sends a numeric groupId or previousId as a number; the core
    # writes every id as a string, as the tracking API's schema has them.
    for k in ("groupId", "previousId"):
        if isinstance(out.get(k), (int, float)):
            out[k] = str(out[k])
    return out


def test_one_program_through_segments_sdk_and_callpost_segment(
    serve: Serve, segment_python: str, tmp_path: pathlib.Path
) -> None:
    source = SCRIPT.read_text()
    theirs_import = "\nimport segment.analytics as analytics\n"
    assert source.count(theirs_import) == 1
    ours = source.replace(theirs_import, "\nimport callpost.segment as analytics\n")
    theirs_srv, ours_srv = serve(ok), serve(ok)
    theirs_out = run(segment_python, source, theirs_srv.url, tmp_path)
    ours_out = run(sys.executable, ours, ours_srv.url, tmp_path)

    theirs, mine = messages(theirs_srv), messages(ours_srv)
    assert len(theirs) == len(mine) == 18
    for t, o in zip(sorted(theirs, key=order), sorted(mine, key=order), strict=True):
        fixed = t["messageId"] == "fixed-message-id-1"
        assert comparable(o, fixed) == comparable(t, fixed)
        assert t["context"]["library"]["name"] == "analytics-python"
        assert o["context"]["library"] == {"name": "callpost", "version": callpost.__version__}
        # The same instant, in each SDK's format.
        assert parse(o["timestamp"]) == parse(t["timestamp"])
    # The (success, msg) each call returned, likewise.
    assert len(theirs_out) == len(ours_out) == 18
    for t, o in zip(theirs_out, ours_out, strict=True):
        assert t["success"] is o["success"] is True
        fixed = t["msg"]["messageId"] == "fixed-message-id-1"
        assert comparable(o["msg"], fixed) == comparable(json.loads(json.dumps(t["msg"], default=str)), fixed)


def order(m: dict[str, Any]) -> tuple[str, str, str]:
    return (
        m["type"],
        m.get("event") or m.get("name") or "",
        json.dumps(m.get("properties", m.get("traits")), sort_keys=True, default=str),
    )


def parse(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_defaults_are_segments(segment_python: str) -> None:
    code = (
        "import json, inspect; from segment.analytics import Client; "
        "print(json.dumps({k: v for k, v in vars(Client.DefaultConfig).items() if not k.startswith('_')}, "
        "default=str)); print(json.dumps(list(inspect.signature(Client.__init__).parameters)))"
    )
    r = subprocess.run([segment_python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    theirs, their_params = (json.loads(line) for line in r.stdout.splitlines())
    ours = {k: v for k, v in vars(analytics.Client.DefaultConfig).items() if not k.startswith("_")}
    assert ours == theirs
    # The same keyword names, in the same order (Segment's are positional too).
    import inspect

    our_params = list(inspect.signature(analytics.Client.__init__).parameters)
    assert our_params[: len(their_params)] == their_params
    assert our_params[len(their_params) :] == ["http_client", "default"]


# -- Segment's own tests, unmodified, against callpost.segment ---------------

SEGMENTS_OWN_TESTS = ["test_stringifies_user_id", "test_stringifies_anonymous_id"]


@pytest.fixture(scope="session")
def segments_test_client(segment_python: str) -> pathlib.Path:
    """segment/analytics/test/test_client.py of Segment's SDK as PyPI ships it."""
    r = subprocess.run(
        [segment_python, "-c", "import os, segment.analytics as a; print(os.path.dirname(a.__file__))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return pathlib.Path(r.stdout.strip()) / "test" / "test_client.py"


@pytest.mark.parametrize("name", SEGMENTS_OWN_TESTS)
def test_segments_own_test_passes_against_callpost_segment(
    serve: Serve, segments_test_client: pathlib.Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Segment's test module, unmodified, with its imports pointed at
    callpost.segment: `segment.analytics.client.Client` is callpost's, sending
    to a local server rather than api.segment.io."""
    srv = serve(ok)
    made: list[analytics.Client] = []

    class Client(analytics.Client):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("host", srv.url)
            super().__init__(*args, **kwargs)
            made.append(self)

    shims = {
        "segment": types.ModuleType("segment"),
        "segment.analytics": types.ModuleType("segment.analytics"),
        "segment.analytics.client": types.ModuleType("segment.analytics.client"),
        "segment.analytics.version": types.ModuleType("segment.analytics.version"),
        "mock": unittest.mock,
    }
    vars(shims["segment.analytics.client"])["Client"] = Client
    vars(shims["segment.analytics.version"])["VERSION"] = analytics.VERSION
    for module_name, module in shims.items():
        monkeypatch.setitem(sys.modules, module_name, module)
    spec = importlib.util.spec_from_file_location("segments_test_client", segments_test_client)
    assert spec is not None and spec.loader is not None
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)

    result = unittest.TestResult()
    tests.TestClient(name).run(result)
    for c in made:
        c.shutdown()
    assert result.testsRun == 1
    assert result.wasSuccessful(), "\n".join(text for _, text in result.errors + result.failures)
    sent = messages(srv)
    assert len(sent) == 1 and sent[0]["type"] == "track"
    assert sent[0].get("userId", sent[0].get("anonymousId")) in ("157963456373623802", "157963456373623803")
