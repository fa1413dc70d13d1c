"""The batching client against a real ingest server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import datetime
import gc
import json
import os
import pathlib
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from conftest import Serve, Server, ok

import callpost


def batches(srv: Server) -> list[dict[str, Any]]:
    return [json.loads(body) for _, _, body in srv.received.requests]


def ids(srv: Server) -> list[str]:
    return [m["messageId"] for b in batches(srv) for m in b["batch"]]


def test_batches_arrive_with_basic_auth_and_a_valid_envelope(serve: Serve) -> None:
    srv = serve(ok)
    with callpost.Client("wk_123", endpoint=srv.url, flush_at=5, flush_after=60) as c:
        sent = [c.track("u1", "Event", {"i": i, "pad": "x" * 2000}) for i in range(12)]
        sent.append(c.identify("u1", {"plan": "pro"}))
        sent.append(c.page("u1", "Home", {"path": "/"}, category="Docs"))
        sent.append(c.screen(anonymous_id="a1", name="Cart"))
        sent.append(c.group("u1", "g1", {"name": "Initech"}))
        sent.append(c.alias("anon", "u1"))
    reqs = srv.received.requests
    assert [len(json.loads(b)["batch"]) for _, _, b in reqs] == [5, 5, 5, 2]
    for path, headers, body in reqs:
        assert path == "/v1/batch"
        assert headers["authorization"] == "Basic " + base64.b64encode(b"wk_123:").decode()
        assert headers["content-type"] == "application/json"
        assert len(body) <= callpost.MAX_BATCH_BYTES
        env = json.loads(body)
        assert set(env) == {"batch", "sentAt"}
        for m in env["batch"]:
            assert m["context"]["library"] == {"name": "callpost", "version": "0.1.0"}
            assert m["timestamp"].endswith("Z")
    assert ids(srv) == sent
    kinds = [m["type"] for b in batches(srv) for m in b["batch"]]
    assert kinds[-5:] == ["identify", "page", "screen", "group", "alias"]
    alias = batches(srv)[-1]["batch"][-1]
    assert alias["previousId"] == "anon" and alias["userId"] == "u1"


def test_each_method_sends_its_arguments_under_their_segment_names(serve: Serve) -> None:
    # The methods hand their arguments to the core as positional fields; a
    # field in the wrong place must show here as a message that differs from
    # the one the same call, written as a dict, makes.
    srv = serve(ok)
    when = datetime.datetime(2026, 11, 22, 10, 4, 5, 123000, tzinfo=datetime.timezone.utc)
    ctx, integ = {"ip": "10.0.0.1"}, {"All": False, "Webhooks": True}
    common: dict[str, Any] = {"context": ctx, "integrations": integ, "timestamp": when}
    with callpost.Client("wk", endpoint=srv.url, flush_at=100, flush_after=60) as c:
        c.identify("u-1", {"plan": "pro"}, anonymous_id="a-1", message_id="m-1", **common)
        c.track("u-1", "Bought", {"n": 1}, anonymous_id="a-1", message_id="m-2", **common)
        c.page("u-1", "Home", {"path": "/"}, category="Docs", anonymous_id="a-1", message_id="m-3", **common)
        c.screen("u-1", "Cart", {"n": 2}, anonymous_id="a-1", message_id="m-4", **common)
        c.group("u-1", "g-1", {"name": "Acme"}, anonymous_id="a-1", message_id="m-5", **common)
        c.alias("u-0", "u-1", message_id="m-6", **common)
    same = {"context": ctx, "integrations": integ, "timestamp": when}
    as_dicts: list[dict[str, Any]] = [
        {
            "type": "identify",
            "userId": "u-1",
            "traits": {"plan": "pro"},
            "anonymousId": "a-1",
            "messageId": "m-1",
            **same,
        },
        {
            "type": "track",
            "userId": "u-1",
            "event": "Bought",
            "properties": {"n": 1},
            "anonymousId": "a-1",
            "messageId": "m-2",
            **same,
        },
        {
            "type": "page",
            "userId": "u-1",
            "name": "Home",
            "properties": {"path": "/"},
            "category": "Docs",
            "anonymousId": "a-1",
            "messageId": "m-3",
            **same,
        },
        {
            "type": "screen",
            "userId": "u-1",
            "name": "Cart",
            "properties": {"n": 2},
            "anonymousId": "a-1",
            "messageId": "m-4",
            **same,
        },
        {
            "type": "group",
            "userId": "u-1",
            "groupId": "g-1",
            "traits": {"name": "Acme"},
            "anonymousId": "a-1",
            "messageId": "m-5",
            **same,
        },
        {"type": "alias", "previousId": "u-0", "userId": "u-1", "messageId": "m-6", **same},
    ]
    sent = [m for b in batches(srv) for m in b["batch"]]
    assert len(sent) == len(as_dicts)
    for got, call in zip(sent, as_dicts, strict=True):
        b = callpost.Batcher("wk", flush_at=1, now=0)
        b.handle_call(0, call)
        req = b.poll_request(0)
        assert req is not None
        assert got == json.loads(req.request.body)["batch"][0], call["type"]


def test_flush_at_twenty(serve: Serve) -> None:
    srv = serve(ok)
    c = callpost.Client("wk", endpoint=srv.url, flush_after=60)
    for i in range(19):
        c.track("u", "e", {"i": i})
    time.sleep(0.3)
    assert len(srv.received) == 0, "no flush before 20"
    c.track("u", "e", {"i": 19})
    deadline = time.monotonic() + 5
    while len(srv.received) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [len(b["batch"]) for b in batches(srv)] == [20]
    c.close()


def test_tracks_from_many_threads_are_sent_without_close(serve: Serve) -> None:
    # No lock around track(): the batcher locks itself and wakes the sender.
    # Each round, one call starts the (hour-long) flush timer and the sender
    # goes back to sleep; then four threads fill the batch of flush_at
    # between them, and only a wake-up from the call that filled it gets the
    # batch sent before close().
    srv = serve(ok)
    c = callpost.Client("wk", endpoint=srv.url, flush_at=21, flush_after=3600)
    sent: list[str] = []
    with ThreadPoolExecutor(4) as pool:
        for r in range(10):
            sent.append(c.track("u", "e", {"round": r}))
            time.sleep(0.05)
            for batch in pool.map(lambda i, r=r: [c.track(f"u{i}", "e", {"round": r}) for _ in range(5)], range(4)):
                sent.extend(batch)
            deadline = time.monotonic() + 5
            while len(ids(srv)) < len(sent) and time.monotonic() < deadline:
                time.sleep(0.005)
            assert sorted(ids(srv)) == sorted(sent), f"round {r}"
    assert len(set(sent)) == 210 and [len(b["batch"]) for b in batches(srv)] == [21] * 10
    c.close()


def test_an_unused_client_is_garbage(serve: Serve) -> None:
    # The batcher holds its on_wake callback, and the client holds the
    # batcher: the callback holds the client weakly, or neither is freed.
    c = callpost.Client("wk", endpoint=serve(ok).url)
    ref = weakref.ref(c)
    del c
    gc.collect()
    assert ref() is None


def test_flush_after_the_interval(serve: Serve) -> None:
    srv = serve(ok)
    c = callpost.Client("wk", endpoint=srv.url, flush_after=0.3)
    c.track("u", "e")
    time.sleep(0.1)
    assert len(srv.received) == 0, "one message is not a batch of 20: it waits for flush_after"
    deadline = time.monotonic() + 10
    while len(srv.received) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(srv.received) == 1, "sent once flush_after passed, with no flush() or close()"
    c.close()


def test_close_delivers_everything_queued(serve: Serve) -> None:
    srv = serve(ok)
    c = callpost.Client("wk", endpoint=srv.url, flush_at=100, flush_after=3600)
    sent = [c.track("u", "e", {"i": i}) for i in range(250)]
    c.close()
    assert sorted(ids(srv)) == sorted(sent)
    with pytest.raises(callpost.ClosedError) as e:
        c.track("u", "late")
    assert e.value.code == "closed"


def test_a_message_over_32kb_raises_and_nothing_else_changes(serve: Serve) -> None:
    srv = serve(ok)
    with callpost.Client("wk", endpoint=srv.url) as c:
        keep = c.track("u", "small")
        with pytest.raises(callpost.MessageTooLargeError) as e:
            c.track("u", "big", {"pad": "x" * 40_000})
        assert e.value.code == "message_too_large"
        assert isinstance(e.value, ValueError)
    assert ids(srv) == [keep]


def test_integer_ids_of_any_size_are_sent_as_their_exact_digits(serve: Serve) -> None:
    srv = serve(ok)
    with callpost.Client("wk", endpoint=srv.url) as c:
        c.track(157963456373623802, "Big", anonymous_id=-(2**64), message_id=10**30)
        c.group("u", int("9" * 50))
        c.alias(2**53 + 1, 0)
        bads: list[tuple[Callable[[], object], str]] = [
            (lambda: c.track(1.5, "e"), "invalid_field"),  # type: ignore[arg-type]
            (lambda: c.track(True, "e"), "invalid_field"),
            (lambda: c.track(float(2**53), "e"), "integer_out_of_range"),  # type: ignore[arg-type]
            # Other fields keep the JSON rule for integers.
            (lambda: c.track("u", "e", {"n": 2**53 + 1}), "integer_out_of_range"),
            (lambda: c.track("u", 2**64), "integer_out_of_range"),  # type: ignore[arg-type]
        ]
        for bad, code in bads:
            with pytest.raises(callpost.CallpostError) as e:
                bad()
            assert e.value.code == code
    track, group, alias = (m for b in batches(srv) for m in b["batch"])
    assert (track["userId"], track["anonymousId"], track["messageId"]) == (
        "157963456373623802",
        "-18446744073709551616",
        "1" + "0" * 30,
    )
    assert group["groupId"] == "9" * 50
    assert (alias["previousId"], alias["userId"]) == ("9007199254740993", "0")


def test_invalid_calls_raise_typed_errors(serve: Serve) -> None:
    with callpost.Client("wk", endpoint="http://127.0.0.1:9") as c:
        with pytest.raises(callpost.InvalidCallError) as e:
            c.track(event="no user")
        assert e.value.code == "missing_identity"
        with pytest.raises(callpost.InvalidCallError) as e:
            c.track("u")
        assert e.value.code == "missing_event"
        with pytest.raises(callpost.NotJSONError) as e2:
            c.track("u", "e", {"tags": {"a", "b"}})
        assert e2.value.code == "not_json" and "$.properties.tags" in str(e2.value)


def test_500_three_times_then_200_loses_nothing(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (500, {}, b"") if n < 3 else (200, {}, b""))
    errors: list[Any] = []
    c = callpost.Client(
        "wk",
        endpoint=srv.url,
        flush_at=10,
        backoff_base=0.05,
        backoff_cap=0.2,
        on_error=lambda err, msgs: errors.append((err, msgs)),
    )
    sent = [c.track("u", "e", {"i": i}) for i in range(10)]
    assert c.flush(timeout=10)
    c.close()
    assert len(srv.received) == 4
    assert ids(srv)[-10:] == sent
    assert errors == []


def test_4xx_hands_the_messages_to_on_error(serve: Serve) -> None:
    srv = serve(lambda n, h, b: (400, {}, b"bad"))
    errors: list[tuple[Any, list[dict[str, Any]]]] = []
    c = callpost.Client("wk", endpoint=srv.url, flush_at=3, on_error=lambda err, msgs: errors.append((err, msgs)))
    sent = [c.track("u", "e", {"i": i}) for i in range(3)]
    c.close()
    assert len(srv.received) == 1, "a 4xx is not retried"
    assert len(errors) == 1
    err, msgs = errors[0]
    assert isinstance(err, callpost.DeliveryError) and err.code == "rejected"
    assert [m["messageId"] for m in msgs] == sent


def test_close_with_the_server_down_reports_every_message(serve: Serve) -> None:
    errors: list[Any] = []
    c = callpost.Client(
        "wk",
        endpoint="http://127.0.0.1:9",
        flush_at=5,
        backoff_base=0.05,
        on_error=lambda err, msgs: errors.extend(m["messageId"] for m in msgs),
    )
    sent = [c.track("u", "e", {"i": i}) for i in range(12)]
    c.close(timeout=0.5)
    assert sorted(errors) == sorted(sent)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_can_send(serve: Serve) -> None:
    srv = serve(ok)
    c = callpost.Client("wk", endpoint=srv.url, flush_after=0.1)
    c.track("parent", "before fork")
    assert c.flush(timeout=5)
    pid = os.fork()
    if pid == 0:
        try:
            c.track("child", "from the child")
            code = 0 if c.flush(timeout=5) else 3
            c.close()
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    c.track("parent", "after fork")
    c.close()
    users = [m["userId"] for b in batches(srv) for m in b["batch"]]
    assert sorted(users) == ["child", "parent", "parent"]


def test_messages_queued_at_exit_are_sent(serve: Serve, tmp_path: pathlib.Path) -> None:
    import subprocess
    import sys

    srv = serve(ok)
    script = tmp_path / "app.py"
    script.write_text(
        "import callpost\n"
        f"c = callpost.Client('wk', endpoint={srv.url!r}, flush_at=100, flush_after=3600)\n"
        "for i in range(30):\n"
        "    c.track('u', 'at exit', {'i': i})\n"
        "# no close(): the atexit hook must send them\n"
    )
    subprocess.run([sys.executable, str(script)], check=True, timeout=30)
    assert len(ids(srv)) == 30


def test_async_client(serve: Serve) -> None:
    srv = serve(ok)

    async def main() -> list[str]:
        async with callpost.AsyncClient("wk", endpoint=srv.url, flush_at=4, flush_after=60) as c:
            return [c.track("u", "e", {"i": i}) for i in range(10)]

    sent = asyncio.run(main())
    assert ids(srv) == sent
    assert [len(b["batch"]) for b in batches(srv)] == [4, 4, 2]


def test_debug_env_turns_on_logging_when_a_client_is_made(tmp_path: pathlib.Path) -> None:
    # Importing configures nothing (a library must not); the spec's switch
    # takes effect when a client is made, and on the callpost logger only.
    import subprocess
    import sys

    code = (
        "import logging, callpost; print(logging.getLogger('callpost').level); "
        "callpost.Client('wk', send=False); print(logging.getLogger('callpost').level)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DEBUG": "analytics"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["0", "10"]
