"""The destination's 4-hour retry window, kept across restarts, on the
relay's injectable clock (``--test-clock``): hours pass in seconds."""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable
from typing import Any

from relay_support import Database, Hook, RelayProcess, config_text, operator_hook, track

HOUR = 3_600_000


class World:
    """The relay, its clock and a receiver that fails until told not to."""

    def __init__(
        self, tmp: pathlib.Path, serve: Callable[..., Any], database: Database, sources: str = "", extra: str = ""
    ) -> None:
        self.failing = True
        self.hook = Hook(serve, lambda d: 500 if self.failing else 200)
        self.offset = 0
        self.relay = RelayProcess(config_text(database, [self.hook.url], sources=sources, extra=extra), tmp)
        self.restarts = 0

    def start(self) -> None:
        self.relay.start("--test-clock", "--clock-offset-ms", str(self.offset))

    def restart(self) -> None:
        # Both ways a relay goes away: a deploy (SIGTERM) and a crash.
        if self.restarts % 2:
            self.relay.kill()
        else:
            self.relay.stop()
        self.restarts += 1
        self.start()

    def now(self) -> int:
        return int(time.time() * 1000) + self.offset

    def settle(self) -> dict[str, Any]:
        """Waits until the relay has done everything due at its clock."""
        status: dict[str, Any] = {}

        def idle() -> bool:
            nonlocal status
            status = self.relay.status()
            due = status["next_due_at"]
            return status["in_flight"] == 0 and (due is None or due > self.now())

        self.relay.wait(idle, 30, "the due deliveries")
        return status

    def advance_to_next_round(self) -> dict[str, Any]:
        """Moves the relay's clock to its next due delivery."""
        status = self.settle()
        if status["next_due_at"] is None:
            return status
        self.offset += max(status["next_due_at"] - self.now(), 0) + 1
        self.relay.admin("POST", "/admin/test/clock", {"offsetMs": self.offset})
        return self.settle()

    def delivered(self, message_id: str) -> None:
        """Until the receiver has answered the call once. A call replayed
        while its endpoint's circuit is still open waits for the next probe
        (at most 10 minutes of the relay's clock away), so the clock moves
        round by round."""
        for _ in range(20):
            if self.hook.keys().get(message_id) == 1:
                return
            self.advance_to_next_round()
        self.relay.wait(lambda: self.hook.keys().get(message_id) == 1, 30, f"the delivery of {message_id}")


def test_a_receiver_down_for_3_hours_gets_the_call_once_across_5_restarts(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    w = World(tmp_path, serve, database)
    w.start()
    try:
        assert w.relay.post("/v1/batch", {"batch": [track(1)], "writeKey": "wk-test"})[0] == 200
        start = w.now()
        restart_at = [start + h * HOUR // 2 for h in range(1, 6)]
        while w.relay.status()["pending"]:
            if w.failing and w.now() >= start + 3 * HOUR:
                w.failing = False
            if restart_at and w.now() >= restart_at[0]:
                restart_at.pop(0)
                w.restart()
            w.advance_to_next_round()
            assert w.now() < start + 5 * HOUR, "still pending after the window"
        assert w.restarts == 5
        attempts = [d for d in w.hook.deliveries if d.key == "m-1"]
        assert [d.status for d in attempts].count(200) == 1
        assert len(attempts) > 10, "retried across the 3 hours"
        assert all(d.verified and d.json == attempts[0].json for d in attempts), "the same signed body every time"
        assert w.relay.status()["dead"] == 0 and w.relay.status()["delivered"] == 1
    finally:
        if w.relay.running():
            w.relay.stop()


def test_past_4_hours_the_call_is_a_dead_letter_and_replay_delivers_it(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    w = World(tmp_path, serve, database)
    w.start()
    try:
        assert w.relay.post("/v1/batch", {"batch": [track(7), track(8)], "writeKey": "wk-test"})[0] == 200
        start = w.now()
        while w.relay.status()["pending"]:
            w.advance_to_next_round()
            if w.now() > start + 2 * HOUR and w.restarts == 0:
                w.restart()
        status = w.relay.status()
        assert status["dead"] == 2 and status["pending"] == 0
        assert all(d.status == 500 for d in w.hook.deliveries)
        dead = w.relay.admin("GET", "/admin/dead-letters")
        assert sorted(d["message_id"] for d in dead) == ["m-7", "m-8"]
        for d in dead:
            outcome = json.loads(d["outcome"])
            assert outcome["kind"] == "gave_up" and outcome["reason"] == "window_exhausted"
            assert len(outcome["log"]) == d["attempts"] > 10
            # Rounds ran across the whole window, and none began after it.
            times = [a["sent_at"] for a in outcome["log"]]
            assert 3 * HOUR < max(times) - min(times) <= 4 * HOUR
        w.relay.wait(lambda: w.relay.metric("callpost_relay_dead_letters") == 2, 30, "the dead-letters gauge")
        # The receiver is fixed; the operator replays one call by id.
        w.failing = False
        out = w.relay.cli("replay", "--message-id", "m-7")
        assert out.returncode == 0 and "replaying 1" in out.stdout, out.stderr
        w.delivered("m-7")
        assert w.relay.status()["dead"] == 1
        # And the rest by source, over the admin API.
        assert w.relay.admin("POST", "/admin/replay", {"source": "web"}) == {"replayed": 1}
        w.delivered("m-8")
        assert w.relay.status()["dead"] == 0
    finally:
        if w.relay.running():
            w.relay.stop()


def test_an_endpoint_failing_past_its_period_is_disabled_and_its_calls_kept_until_enabled(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    ops, operator = operator_hook(serve)
    w = World(
        tmp_path,
        serve,
        database,
        sources="[sources.webhooks.protection]\ndisable_after_ms = 14400000\n",
        extra=operator,
    )

    def post(*ns: int) -> None:
        assert w.relay.post("/v1/batch", {"batch": [track(n) for n in ns], "writeKey": "wk-test"})[0] == 200

    def state() -> str:
        shown = w.relay.status()["endpoints"]
        return str(shown[0]["state"]["kind"]) if shown else "unknown"

    w.start()
    try:
        post(*range(10))
        start = w.now()
        # Failing for 4 hours (the shortest period allowed): the calls of
        # the first hours die at the end of their windows; one sent late
        # still has retries when the period ends, and its next attempt
        # finds the endpoint disabled.
        while state() != "disabled":
            if (
                w.now() >= start + 3 * HOUR
                and w.hook.keys().get("m-late") is None
                and not any(d.key == "m-late" for d in w.hook.deliveries)
            ):
                post_late = {"batch": [track("late")], "writeKey": "wk-test"}
                assert w.relay.post("/v1/batch", post_late)[0] == 200
            w.advance_to_next_round()
            assert w.now() < start + 5 * HOUR, f"not disabled after 5 hours: {state()}"
        # Probed, not flooded: the breaker let one request through per open
        # period instead of each call's retries.
        failed = len(w.hook.deliveries)
        print(
            f"a receiver down for {(w.now() - start) / HOUR:.1f} h with 11 calls saw {failed} requests before it was disabled"
        )
        # The database keeps it disabled across a restart.
        w.relay.wait(lambda: bool(database.query("SELECT url FROM disabled_endpoints")), 30, "the record")
        w.restart()
        w.relay.wait(lambda: state() == "disabled", 30, "disabled after the restart")
        post(100)
        # The late call at its next round, the new one at once: set aside.
        for _ in range(5):
            if not w.advance_to_next_round()["pending"]:
                break
        status = w.relay.status()
        assert status["dead"] == 10 and status["undeliverable"] == 2, status
        assert not any(d.key == "m-100" for d in w.hook.deliveries), "nothing is sent to a disabled endpoint"
        w.relay.wait(lambda: any(d.json["type"] == "endpoint.disabled" for d in ops.deliveries), 30, "the event")

        # The receiver is fixed; the operator enables the endpoint and
        # replays what was kept.
        assert w.relay.status()["disabled_endpoints"] == [w.hook.url]
        out = w.relay.cli("status")
        assert f"disabled endpoint:  {w.hook.url}" in out.stdout, out.stdout + out.stderr
        w.failing = False
        if database.backend == "sqlite":
            # Through the relay: its guard at once, the database for the rest.
            assert w.relay.admin("POST", "/admin/endpoints/enable", {"url": w.hook.url}) == {"enabled": True}
            assert state() == "healthy"
        else:
            # From the command line, on the database alone: the relay sees
            # it gone at its next look (5 s), as another relay's would be.
            out = w.relay.cli("enable-endpoint", "--url", w.hook.url)
            assert out.returncode == 0 and "enabled" in out.stdout, out.stderr
            w.relay.wait(lambda: state() == "healthy", 30, "enabled from the database")
        assert w.relay.status()["disabled_endpoints"] == []
        replayed = w.relay.admin("POST", "/admin/replay", {"source": "web", "includeUndeliverable": True})
        assert replayed == {"replayed": 12}
        for m in ["m-late", "m-100", *(f"m-{n}" for n in range(10))]:
            w.delivered(m)
    finally:
        if w.relay.running():
            w.relay.stop()
    assert all(n == 1 for n in w.hook.keys().values()), w.hook.keys()
    events = [d for d in ops.deliveries if d.json["type"] == "endpoint.disabled"]
    assert len(events) == 1, "told once, not again by the restarted relay"
    event = events[0]
    assert event.verified and event.json["data"]["url"] == w.hook.url, event.json
