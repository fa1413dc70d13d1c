"""A user's deletion and suppression against the built relay: after a
deletion the SQLite files hold no byte of the user's id or of their calls,
and a suppressed user's calls are acknowledged and never delivered, on
SQLite and on Postgres with two relays (the one that did not suppress
learns it within its poll)."""

from __future__ import annotations

import base64
import os
import pathlib
from collections.abc import Callable
from typing import Any

from relay_support import WRITE_KEY, Database, Hook, RelayProcess, basic, config_text, free_port

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
    r = RelayProcess(config_text(f"sqlite:///{db}", [hook.url]), tmp_path, env=key_env())
    user, secret = "user-5f3c9e1a", "basket-b7d04c22"
    try:
        r.start()
        assert r.post("/v1/batch", calls(user, secret, "before"), AUTH)[0] == 200
        r.wait_drained(30)
        r.stop()
        # The test can fail: the files held the user before.
        held = database_bytes(db)
        assert user.encode() in held and secret.encode() in held
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
