"""A user's deletion and suppression against the built relay: after a
deletion the SQLite files hold no byte of the user's id or of their calls,
and a suppressed user's calls are acknowledged and never delivered, on
SQLite and on Postgres with two relays (the one that did not suppress
learns it within its poll). Sealed at rest: the files hold no body,
answer, id or event in plain text, the log still finds calls by id and
event, and a key's rotation completes while calls flow, losing none."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import sqlite3
import urllib.parse
from collections.abc import Callable
from typing import Any

from relay_support import WRITE_KEY, Database, Hook, RelayProcess, Sender, basic, config_text, free_port

AUTH = {"Authorization": basic(WRITE_KEY)}


def key_env() -> dict[str, str]:
    return {"CALLPOST_RELAY_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()}


def calls(user: str, secret: str, prefix: str, n: int = 10) -> dict[str, Any]:
    """``n`` calls of ``user`` (by userId and by anonymousId) holding
    ``secret``, a refused one naming them, and ``n`` of someone else."""
    batch: list[dict[str, Any]] = []
    for i in range(n):
        batch.append(
            {
                "type": "track",
                "userId": user,
                "event": "Order Completed",
                "messageId": f"{prefix}-mine-{i}",
                "properties": {"basket": secret, "items": [{"sku": "SKU-1", "name": "Café crème"}]},
            }
        )
        batch.append(
            {"type": "identify", "anonymousId": user, "messageId": f"{prefix}-anon-{i}", "traits": {"note": secret}}
        )
        batch.append({"type": "track", "userId": "someone-else", "event": "Viewed", "messageId": f"{prefix}-other-{i}"})
    batch.append({"type": "track", "userId": user, "messageId": f"{prefix}-refused", "properties": {"basket": secret}})
    return {"batch": batch}


def database_bytes(db: pathlib.Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file())


def delivered_ids(hook: Hook) -> set[str]:
    """The messageIds delivered (each request's ``Idempotency-Key``: the
    spec's body has none)."""
    return {d.key for d in hook.ok()}


def test_a_deleted_user_leaves_no_byte_in_the_sqlite_files_and_stays_suppressed(
    tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    hook = Hook(serve)
    db = tmp_path / "relay.db"
    # First without a key (nothing sealed, so the files hold the user and
    # the test can fail), then with one: the calls stored before stay
    # plain until a reseal, and the deletion erases them as they are.
    r = RelayProcess(config_text(f"sqlite:///{db}", [hook.url]), tmp_path)
    user, secret = "user-5f3c9e1a", "basket-b7d04c22"
    try:
        r.start()
        assert r.post("/v1/batch", calls(user, secret, "before"), AUTH)[0] == 200
        r.wait_drained(30)
        r.stop()
        held = database_bytes(db)
        assert user.encode() in held and secret.encode() in held
        r.env = key_env()
        r.start()
        deleted = r.admin(
            "POST", "/admin/delete", {"userId": user, "suppress": True, "operator": "privacy@example.com"}
        )
        assert deleted["erased"] == {"calls": 20, "rejected": 1}, deleted
        assert deleted["suppressed"] is True
        # Suppressed: acknowledged, neither stored nor delivered.
        status, _, _ = r.post("/v1/batch", calls(user, secret, "after", n=2), AUTH)
        assert status == 200
        r.wait_drained(30)
        # Its two tracks, two identifies and the refused call naming it.
        assert r.metric("callpost_relay_calls_total", 'source="web",outcome="suppressed"') == 5
        deletions = r.admin("GET", "/admin/deletions")["deletions"]
        assert deletions[0]["operator"] == "privacy@example.com" and len(deletions[0]["userHash"]) == 64
    finally:
        if r.running():
            r.stop()
    got = delivered_ids(hook)
    assert not {m for m in got if m.startswith("after-mine") or m.startswith("after-anon")}, got
    assert {"after-other-0", "after-other-1"} <= got
    notifications = [d.json for d in hook.ok() if isinstance(d.json, dict) and d.json.get("type") == "delete"]
    assert [n["userId"] for n in notifications] == [user]
    left = database_bytes(db)
    assert user.encode() not in left, "the user's id is still in the database files"
    assert secret.encode() not in left, "the user's calls are still in the database files"
    assert b"someone-else" in left, "the others' calls are kept"


def test_a_user_suppressed_through_one_relay_is_suppressed_by_the_other(
    tmp_path: pathlib.Path, serve: Callable[..., Any], postgres_url: str
) -> None:
    pg = Database("postgres", tmp_path, postgres_url)
    hook = Hook(serve)
    env = key_env()
    relays = []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        relays.append(RelayProcess(config_text(pg, [hook.url]), d, port=free_port(), env=env))
    a, b = relays
    user = "user-2e9d41"
    try:
        for x in relays:
            x.start()
        assert a.admin("POST", "/admin/delete", {"userId": user, "suppress": True})["suppressed"] is True
        # The other relay reads the suppression within its poll (2 s).
        sent = [0]

        def suppressed_by_b() -> bool:
            sent[0] += 1
            body = {"batch": [{"type": "track", "userId": user, "event": "E", "messageId": f"probe-{sent[0]}"}]}
            assert b.post("/v1/batch", body, AUTH)[0] == 200
            return b.metric("callpost_relay_calls_total", 'source="web",outcome="suppressed"') > 0

        b.wait(suppressed_by_b, 10, "the other relay to read the suppression")
        for x in relays:
            body = {
                "batch": [
                    {"type": "track", "userId": user, "event": "E", "messageId": f"late-{x.port}-{i}"} for i in range(5)
                ]
                + [{"type": "identify", "anonymousId": user, "messageId": f"late-anon-{x.port}"}]
            }
            assert x.post("/v1/batch", body, AUTH)[0] == 200
        a.wait_drained(30, pg)
        stored = {str(m) for (m,) in pg.query("SELECT message_id FROM deliveries")}
        assert not {m for m in stored if m.startswith("late-")}, stored
        assert not {m for m in delivered_ids(hook) if m.startswith("late-")}
        # Lifted through the other relay: taken again.
        assert b.admin("POST", "/admin/unsuppress", {"userId": user}) == {"lifted": True}
        body = {"batch": [{"type": "track", "userId": user, "event": "E", "messageId": "back"}]}
        assert b.post("/v1/batch", body, AUTH)[0] == 200
        b.wait(lambda: "back" in delivered_ids(hook), 30, "the user's call delivered again")
    finally:
        for x in relays:
            if x.running():
                x.stop()
        pg.drop()


def kid_of(output: str) -> str:
    """The key id ``callpost-relay reseal`` says it sealed under."""
    m = re.search(r"sealed under key ([0-9a-f]{8})", output)
    assert m, output
    return m.group(1)


def test_sealed_at_rest_searches_find_calls_and_a_rotation_completes_while_calls_flow(
    tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    marker = "answer-9c1d77"

    def behaviour(d: Any) -> Any:
        # The "bad-" calls are refused with a body the relay keeps the start
        # of (in the attempts' log and the outcome).
        if d.key.startswith("bad-"):
            return 400, {}, f"rejected: {marker}".encode()
        return 200

    hook = Hook(serve, behaviour)
    db = tmp_path / "relay.db"
    key_a, key_b = key_env(), key_env()
    r = RelayProcess(config_text(f"sqlite:///{db}", [hook.url]), tmp_path, env=key_a)
    user, secret, event = "sealed-user-41b7", "basket-e5a0c3", "Checkout \u2603 Step"
    first = {
        "batch": [
            {
                "type": "track",
                "userId": user,
                "event": event,
                "messageId": f"{'bad' if i % 5 == 0 else 'ok'}-{i}",
                "properties": {"basket": secret, "items": [{"sku": "SKU-1", "name": "Café crème"}]},
            }
            for i in range(20)
        ]
        + [{"type": "track", "userId": user, "messageId": "refused", "properties": {"basket": secret}}]
    }
    flow = Sender([r.port], seed=7, prefix="flow-", pause=0.01)
    try:
        r.start()
        assert r.post("/v1/batch", first, AUTH)[0] == 200
        r.wait_drained(30)

        def found(**query: str) -> list[str]:
            page = r.admin("GET", "/admin/log?" + urllib.parse.urlencode(query))
            return sorted(e["message_id"] for e in page["calls"])

        # The log finds the calls by exact id and event, and shows them.
        assert len(found(userId=user)) == 20
        assert found(event=event, userId=user) == found(userId=user)
        call = r.admin("GET", "/admin/log/call?source=web&messageId=bad-0")
        assert secret in json.dumps(call) and marker in json.dumps(call), call
        r.stop()
        files = database_bytes(db)
        assert b"ok-1" in files, "the test reads the files it means to"
        for plain in (user, secret, marker, event, "Café crème"):
            assert plain.encode() not in files, f"{plain!r} is in the database files in plain text"

        # The rotation: the relay seals with B and opens A's rows; reseal
        # runs beside it while calls flow.
        r.env = {**key_b, "CALLPOST_RELAY_PREVIOUS_SECRET_KEYS": key_a["CALLPOST_RELAY_SECRET_KEY"]}
        r.start()
        flow.start()
        r.wait(lambda: len(flow.acked) > 200, 30, "calls to flow")
        resealed = r.cli("reseal")
        assert resealed.returncode == 0, resealed.stdout + resealed.stderr
        kid = kid_of(resealed.stdout)
        r.wait(lambda: len(flow.acked) > 400, 30, "calls to flow after the reseal")
        flow.stopping = True
        flow.join(30)
        r.wait_drained(60)
        r.stop()
        con = sqlite3.connect(db)
        try:
            texts = [t for (t,) in con.execute("SELECT message FROM deliveries")]
            texts += [t for (t,) in con.execute("SELECT text FROM rejected")]
            texts += [t for (t,) in con.execute("SELECT outcome FROM deliveries WHERE outcome IS NOT NULL")]
        finally:
            con.close()
        under_b = sum(1 for t in texts if t.startswith(f"v2.{kid}."))
        # Everything stored before the reseal, and everything after, is
        # under B; a row a finish changed under the pass was taken by the
        # next pass.
        assert under_b == len(texts), f"{len(texts) - under_b} of {len(texts)} not sealed under {kid}"

        # B alone: the old key is gone, and the log still finds the calls.
        r.env = key_b
        r.start()
        assert len(found(userId=user)) == 20
        assert len(found(userId="u", limit="1000")) >= 400
        r.stop()
        # Without the key, a relay or a command over the sealed database is
        # refused, rather than storing plain calls beside sealed ones.
        r.env = {}
        keyless = r.cli("status")
        assert keyless.returncode != 0 and "calls are sealed" in keyless.stderr, keyless.stderr
    finally:
        flow.stopping = True
        if r.running():
            r.stop()
    delivered = delivered_ids(hook)
    lost = flow.acked - delivered
    assert not lost, f"{len(lost)} acknowledged calls were not delivered"
