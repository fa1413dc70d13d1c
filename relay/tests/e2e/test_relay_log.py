"""The delivery log of a real relay, on SQLite and Postgres: search by each
field through the admin API and the CLI, cursor pages, one call's attempts
with its receiver's answer, refused calls, and bulk replay by the same
filters with a dry run first."""

from __future__ import annotations

import json
import pathlib
import urllib.error
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from relay_support import WRITE_KEY, Database, Delivery, Hook, RelayProcess, config_text


def call(n: int, user: str, event: str) -> dict[str, Any]:
    return {
        "type": "track",
        "userId": user,
        "event": event,
        "messageId": f"m-{n:02}",
        "properties": {"n": n, "city": "Zürich"},
    }


# Twelve calls for three users; u1's two "Refused" calls are answered 400
# until the receiver changes its mind, so they end as dead letters.
CALLS = [call(n, f"u{n % 3}", "Order Completed" if n % 2 else "Signed Up") for n in range(10)] + [
    call(10, "u1", "Refused"),
    call(11, "u1", "Refused"),
]


class Answers:
    """What the receiver answers: 400 to the refused calls while ``refuse``."""

    refuse = True

    def __call__(self, d: Delivery) -> int:
        return 400 if self.refuse and b'"Refused"' in d.body else 200


@pytest.fixture
def answers() -> Answers:
    return Answers()


@pytest.fixture
def hook(serve: Callable[..., Any], answers: Answers) -> Hook:
    return Hook(serve, answers)


@pytest.fixture
def relay(tmp_path: pathlib.Path, hook: Hook, database: Database) -> Iterator[RelayProcess]:
    r = RelayProcess(config_text(database, [hook.url]), tmp_path)
    r.start()
    # One call a request, in order, so that each is received after the one
    # before it.
    for c in CALLS:
        status, _, _ = r.post("/v1/track", {**c, "writeKey": WRITE_KEY})
        assert status == 200
    r.wait_drained()
    yield r
    if r.running():
        r.stop()


def search(relay: RelayProcess, **query: str) -> dict[str, Any]:
    result: dict[str, Any] = relay.admin("GET", "/admin/log?" + urllib.parse.urlencode(query))
    return result


def ids(page: dict[str, Any]) -> list[str]:
    return [c["message_id"] for c in page["calls"]]


def refused(relay: RelayProcess, path: str) -> tuple[int, str]:
    try:
        relay.admin("GET", path)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["message"]
    raise AssertionError(f"{path} was answered 200")


def test_a_search_finds_calls_by_each_field_newest_first(relay: RelayProcess) -> None:
    everything = search(relay, limit="100")
    assert ids(everything) == [f"m-{n:02}" for n in reversed(range(12))]
    assert everything["next"] is None
    times = [c["received_at"] for c in everything["calls"]]
    assert times == sorted(times, reverse=True)

    u1 = [c["messageId"] for c in reversed(CALLS) if c["userId"] == "u1"]
    assert ids(search(relay, userId="u1")) == u1
    assert ids(search(relay, event="Refused")) == ["m-11", "m-10"]
    assert ids(search(relay, userId="u1", event="Order Completed")) == ["m-07", "m-01"]
    assert ids(search(relay, messageId="m-04")) == ["m-04"]
    assert ids(search(relay, status="dead")) == ["m-11", "m-10"]
    assert len(ids(search(relay, status="delivered", type="track", source="web"))) == 10
    assert ids(search(relay, type="identify")) == []
    middle = everything["calls"][5]["received_at"]
    assert all(c["received_at"] >= middle for c in search(relay, since=str(middle))["calls"])
    assert all(c["received_at"] < middle for c in search(relay, until=str(middle))["calls"])

    entry = search(relay, messageId="m-10")["calls"][0]
    assert entry["type"] == "track" and entry["user_id"] == "u1" and entry["anonymous_id"] is None
    assert entry["status"] == "dead" and entry["attempts"] == 1 and entry["finished_at"] >= entry["received_at"]


def test_pages_follow_the_cursor_and_cover_every_call_once(relay: RelayProcess) -> None:
    seen: list[str] = []
    cursor = ""
    pages = 0
    while True:
        page = search(relay, limit="5", **({"cursor": cursor} if cursor else {}))
        pages += 1
        seen += ids(page)
        if page["next"] is None:
            break
        cursor = page["next"]
    assert pages == 3
    assert seen == [f"m-{n:02}" for n in reversed(range(12))]


def test_a_call_shows_its_message_and_each_attempt_with_the_receivers_answer(relay: RelayProcess, hook: Hook) -> None:
    good = relay.admin("GET", "/admin/log/call?source=web&messageId=m-03")
    assert good["status"] == "delivered"
    assert good["message"]["properties"] == {"n": 3, "city": "Zürich"}
    assert good["message"]["messageId"] == "m-03"
    [attempt] = good["attempts"]
    assert attempt["outcome"] == {"kind": "response", "status": 200}
    assert attempt["answer"] == "ok"
    assert attempt["url"] == hook.url
    assert attempt["latency_ms"] == attempt["ended_at"] - attempt["sent_at"] >= 0
    assert good["outcome"]["kind"] == "delivered"

    dead = relay.admin("GET", "/admin/log/call?source=web&messageId=m-10")
    assert [a["outcome"]["status"] for a in dead["attempts"]] == [400]
    assert dead["outcome"]["kind"] == "gave_up" and dead["outcome"]["reason"] == "all_endpoints_rejected"
    assert refused(relay, "/admin/log/call?source=web&messageId=nope")[0] == 404


def test_refused_calls_are_searched_by_source_and_time(relay: RelayProcess) -> None:
    status, _, _ = relay.post("/v1/batch", {"batch": [{"type": "track", "userId": "u"}], "writeKey": WRITE_KEY})
    assert status == 200
    page = search(relay, status="rejected", source="web")
    assert [(c["status"], c["code"]) for c in page["calls"]] == [("rejected", "missing_event")]
    code, message = refused(relay, "/admin/log?status=rejected&userId=u")
    assert code == 400 and "source, since and until only" in message


def test_bad_searches_are_400_and_say_why(relay: RelayProcess) -> None:
    for query, says in [
        ("status=lost", "status must be one of"),
        ("cursor=page-two", "cursor"),
        ("limit=0", "limit must be"),
        ("since=yesterday", "since must be"),
        ("color=red", 'unknown query parameter "color"'),
        ("userId=a&userId=b", "given twice"),
    ]:
        code, message = refused(relay, "/admin/log?" + query)
        assert code == 400 and says in message, (query, message)


def test_a_replay_by_the_logs_filters_counts_first_then_delivers(
    relay: RelayProcess, hook: Hook, answers: Answers
) -> None:
    dry = relay.admin("POST", "/admin/replay", {"userId": "u1", "event": "Refused", "dryRun": True})
    assert dry == {"would_replay": 2}
    assert ids(search(relay, status="dead")) == ["m-11", "m-10"], "a dry run changes nothing"
    answers.refuse = False
    assert relay.admin("POST", "/admin/replay", {"userId": "u1", "event": "Refused"}) == {"replayed": 2}
    relay.wait_drained()
    assert search(relay, status="dead")["calls"] == []
    assert sorted(d.key for d in hook.ok() if b'"Refused"' in d.body) == ["m-10", "m-11"]
    replayed = relay.admin("GET", "/admin/log/call?source=web&messageId=m-11")
    assert replayed["status"] == "delivered" and replayed["attempts"][-1]["outcome"]["status"] == 200
    # Delivered calls come back only when asked for by their state.
    assert relay.admin("POST", "/admin/replay", {"userId": "u2", "dryRun": True}) == {"would_replay": 0}
    u2 = len(search(relay, userId="u2")["calls"])
    assert relay.admin("POST", "/admin/replay", {"userId": "u2", "status": "delivered", "dryRun": True}) == {
        "would_replay": u2
    }


def test_the_cli_searches_shows_a_call_and_replays_with_a_dry_run(relay: RelayProcess) -> None:
    listed = relay.cli("log", "--user-id", "u1", "--limit", "2")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["message_id"] for r in rows] == ["m-11", "m-10"]
    cursor = listed.stderr.split("--cursor ")[1].strip()
    more = relay.cli("log", "--user-id", "u1", "--limit", "2", "--cursor", cursor)
    assert [json.loads(line)["message_id"] for line in more.stdout.splitlines()] == ["m-07", "m-04"]

    shown = relay.cli("call", "--source", "web", "--message-id", "m-10")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["status"] == "dead" and report["attempts"][0]["outcome"]["status"] == 400

    mapping = relay.tmp / "mapping.json"
    mapping.write_text('{"who": {"@path": "userId"}, "said": {"@template": "{{userId}}/{{messageId}}"}}')
    tried = relay.cli("try-mapping", "--source", "web", "--message-id", "m-10", "--mapping", str(mapping))
    assert (tried.returncode, tried.stdout.strip()) == (0, '{"who":"u1","said":"u1/m-10"}'), tried.stderr
    mapping.write_text('{"who": {"@path": "userId["}}')
    refused = relay.cli("try-mapping", "--source", "web", "--message-id", "m-10", "--mapping", str(mapping))
    assert refused.returncode != 0 and "mapping.who.@path" in refused.stderr and "invalid_settings" in refused.stderr

    dry = relay.cli("replay", "--event", "Refused", "--dry-run")
    assert (dry.returncode, dry.stdout.strip()) == (0, "would replay 2 deliveries")
    bad = relay.cli("log", "--status", "lost")
    assert bad.returncode != 0 and "--status must be one of" in bad.stderr
