"""Several relays on one Postgres: the outbox they share survives a relay
killed again and again, a relay stopped past its lease, and Postgres itself
restarting.

Every test here runs real relay processes against the real server (Debian's
postgresql, a throwaway cluster under target/, from scripts/postgres.sh).
``CALLPOST_MULTI_KILLS`` sets the number of kills per run (default 30).
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import random
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from relay_support import (
    ADMIN,
    OPS_SECRET,
    RELAY_BIN,
    SECRET,
    WRITE_KEY,
    Database,
    Groups,
    Hook,
    RelayProcess,
    Sender,
    Settled,
    Tally,
    basic,
    config_text,
    free_port,
    operator_hook,
    track,
)

pytest.importorskip("psycopg")

ROOT = pathlib.Path(__file__).resolve().parents[3]
KILLS = int(os.environ.get("CALLPOST_MULTI_KILLS", "30"))
LEASE_S = 10
"""The shortest lease the configuration allows, so takeovers come quickly."""


@pytest.fixture
def pg(postgres_url: str, tmp_path: pathlib.Path) -> Iterator[Database]:
    db = Database("postgres", tmp_path, postgres_url)
    yield db
    db.drop()


def relays(n: int, db: Database, tmp: pathlib.Path, hook: Hook, extra: str = "") -> list[RelayProcess]:
    out = []
    for i in range(n):
        d = tmp / f"relay{i}"
        d.mkdir()
        out.append(RelayProcess(config_text(db, [hook.url], extra=extra), d, port=free_port()))
    return out


def answers(seed: int) -> Callable[[Any], Any]:
    """Most answers immediate, some slow, so kills land during attempts."""
    slow = random.Random(seed)
    lock = threading.Lock()

    def behaviour(d: Any) -> Any:
        with lock:
            r = slow.random()
        return 0.3 if r < 0.05 else 0.05 if r < 0.2 else 200

    return behaviour


def drained(procs: list[RelayProcess], timeout: float, pg: Database) -> None:
    live = next(p for p in procs if p.running())
    live.wait_drained(timeout, pg)


@pytest.mark.parametrize("n", [3])
def test_relays_on_one_postgres_with_one_killed_again_and_again(
    n: int, pg: Database, tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    seed = int(os.environ.get("CALLPOST_CRASH_SEED", str(random.randrange(1 << 30))))
    print(f"{n} relays, seed {seed} (CALLPOST_CRASH_SEED={seed} replays it), {KILLS} kills")
    rng = random.Random(seed)
    hook = Hook(serve, answers(seed + 1))
    procs = relays(n, pg, tmp_path, hook, extra=f"[delivery]\nlease_seconds = {LEASE_S}\n")
    for p in procs:
        p.start()
    ports = [p.port for p in procs]
    senders = [Sender(ports, seed + 10 + i, prefix=f"s{i}-") for i in range(n)]
    for s in senders:
        s.start()
    kills: list[tuple[float, float]] = []
    settled = Settled()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.1, 1.0))
            victim = rng.choice(procs)
            at = time.time()
            victim.kill()
            settled.record(pg)
            # Its port stays closed a moment, so the senders move on.
            time.sleep(rng.uniform(0.0, 0.5))
            victim.start()
            kills.append((at, time.time()))
        for s in senders:
            s.stopping = True
        for s in senders:
            s.join(60)
        # What a killed relay held comes back when its lease runs out.
        drained(procs, 120, pg)
    finally:
        for s in senders:
            s.stopping = True
        for p in procs:
            if p.running():
                p.stop()

    acked = set().union(*(s.acked for s in senders))
    tally = Tally(hook, acked, kills, settled)
    report = (
        f"{n} relays, kills {len(kills)}; batches acknowledged {sum(s.batches for s in senders)} "
        f"(sent again {sum(s.retries for s in senders)}); calls acknowledged {len(acked)}, delivered "
        f"{len(tally.delivered)}, lost {len(tally.lost)}, delivered twice {len(tally.twice)}, "
        f"of which unexplained {len(tally.unexplained)}"
    )
    print(report)
    (ROOT / "target" / f"multi-relay-{n}.txt").write_text(report + "\n")
    assert not tally.lost, f"acknowledged but never delivered: {sorted(tally.lost)[:10]}"
    assert not tally.unexplained, f"delivered twice with no attempt unsettled at a kill: {tally.unexplained[:10]}"
    assert all(s.batches > 0 for s in senders)
    # The database agrees: each call delivered, once.
    # (A batch stored but never acknowledged, as its sender stopped, is
    # delivered too.)
    rows = dict(pg.query("SELECT status, count(*) FROM deliveries GROUP BY status"))
    assert set(rows) == {1} and rows[1] >= len(acked), rows


def test_a_relay_stopped_past_its_lease_cannot_finish_what_another_took_over(
    pg: Database, tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    first = threading.Event()

    def behaviour(d: Any) -> Any:
        # The first attempt is answered after 2 s: by then its relay is
        # stopped, and the answer waits in its socket.
        if not first.is_set():
            first.set()
            return 2.0
        return 200

    hook = Hook(serve, behaviour)
    a, b = relays(2, pg, tmp_path, hook, extra=f"[delivery]\nlease_seconds = {LEASE_S}\n")
    a.start()
    assert a.post("/v1/track", track(1), {"Authorization": "Basic d2stdGVzdDo="})[0] == 200
    a.wait(first.is_set, 30, "the first attempt")
    assert a.proc is not None
    a.proc.send_signal(signal.SIGSTOP)
    stopped = time.time()
    try:
        b.start()
        b.wait(lambda: len(hook.ok()) >= 2, 60, "the second relay to take the delivery over")
        took_over = time.time() - stopped
        assert took_over < 30, f"an expired lease is recovered within 30 s, not {took_over:.1f}"
        b.wait_drained(30)
    finally:
        a.proc.send_signal(signal.SIGCONT)
    # The stopped relay wakes with the first answer (or its timeout) for a
    # delivery it no longer holds: its result is refused.
    a.wait(lambda: a.metric("callpost_relay_stale_finishes_total") >= 1, 30, "the stale finish to be refused")
    time.sleep(1)
    assert [d.key for d in hook.deliveries] == ["m-1", "m-1"], "both attempts carried the same Idempotency-Key"
    assert pg.query("SELECT status, attempts FROM deliveries") == [(1, 1)], "delivered once, by the second relay"
    said = "\n".join(["relay a:", *a.log[-30:], a.metrics(), "relay b:", *b.log[-30:], b.metrics()])
    assert b.metric("callpost_relay_deliveries_total", 'outcome="delivered"') == 1, said
    assert a.metric("callpost_relay_deliveries_total", 'outcome="delivered"') <= 1
    assert b.status()["delivered"] == 1
    a.stop()
    b.stop()


def _pg(action: str, env: dict[str, str]) -> str:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres.sh"), action],
        check=True,
        capture_output=True,
        text=True,
        env=dict(os.environ, **env),
    ).stdout.strip()


def test_postgres_restarted_mid_run(tmp_path: pathlib.Path, serve: Callable[..., Any]) -> None:
    # A cluster of its own, so that restarting it disturbs no other test.
    env = {"CALLPOST_PG_DIR": str(ROOT / "target" / "pg-restart"), "CALLPOST_PG_PORT": str(free_port())}
    url = _pg("start", env)
    try:
        db = Database("postgres", tmp_path, url)
        hook = Hook(serve)
        procs = relays(2, db, tmp_path, hook)
        for p in procs:
            p.start()
        senders = [Sender([p.port for p in procs], 7 + i, prefix=f"s{i}-") for i in range(2)]
        for s in senders:
            s.start()
        time.sleep(2)
        before = sum(s.batches for s in senders)
        down = time.time()
        _pg("stop", env)
        # While it is down: nothing is acknowledged, ingest answers 503 and
        # the relays say they are not ready.
        acked_at_stop = sum(len(s.acked) for s in senders)
        seen: dict[int, int] = {}
        deadline = time.time() + 20
        while time.time() < deadline and not (seen.get(503) and all(not_ready(p) for p in procs)):
            status = procs[0].post(
                "/v1/track", track("while-down"), {"Authorization": "Basic d2stdGVzdDo="}, timeout=15
            )[0]
            seen[status] = seen.get(status, 0) + 1
            time.sleep(0.2)
        assert seen.get(503), f"ingest while Postgres is down answered {seen}"
        assert all(not_ready(p) for p in procs)
        time.sleep(2)
        stuck = sum(len(s.acked) for s in senders)
        up = time.time()
        _pg("start", env)
        # They reconnect: the senders' batches are acknowledged again.
        procs[0].wait(lambda: sum(s.batches for s in senders) > before + 20, 60, "acknowledgements after the restart")
        for p in procs:
            p.wait(ready(p), 30, "ready again")
        for s in senders:
            s.stopping = True
        for s in senders:
            s.join(60)
        drained(procs, 120, db)
        for p in procs:
            p.stop()
        acked = set().union(*(s.acked for s in senders))
        tally = Tally(hook, acked, [(down, up)])
        print(
            f"acknowledged {acked_at_stop} before the stop, {stuck - acked_at_stop} while down "
            f"(batches in flight at the stop), {len(acked)} in all; answers while down {seen}; "
            f"lost {len(tally.lost)}, delivered twice {len(tally.twice)}"
        )
        assert not tally.lost, f"acknowledged but never delivered: {sorted(tally.lost)[:10]}"
        assert not tally.unexplained, tally.unexplained[:10]
        if not seen.get(200):
            assert "m-while-down" not in {d.key for d in hook.ok()}, "a refused call was delivered"
        db.drop()
    finally:
        _pg("stop", env)


def test_the_operator_is_told_once_when_the_database_stops_answering_and_once_when_it_is_back(
    pg: Database, tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    hook = Hook(serve)
    ops, extra = operator_hook(serve)
    r = RelayProcess(config_text(pg, [hook.url], extra=extra), tmp_path).start()
    try:
        # Another session holds every lock on the queue: the relay's status
        # checks (every 5 s) time out after 5 s each, and after 10 s of
        # failures the operator is told.
        release = pg.stall(reads=True)
        stalled = time.time()
        try:
            r.wait(lambda: len(ops.deliveries) >= 1, 60, "the database event")
            told = time.time() - stalled
            assert not_ready(r), "the relay is not ready while its database does not answer"
            time.sleep(6)  # another failed check, the same outage: no second event
        finally:
            release()
        r.wait(ready(r), 30, "ready again")
        r.wait(lambda: len(ops.deliveries) >= 2, 30, "the recovery event")
        time.sleep(6)  # a good check and another: nothing more to tell
    finally:
        r.stop()
    events = list(ops.deliveries)
    assert len(events) == 2, [d.json for d in events]
    e, back = events
    assert e.verified and e.key == e.json["id"]
    assert e.json["type"] == "database.unreachable" and e.json["version"] == 1, e.json
    assert e.json["data"]["reason"] and e.json["data"]["since"] < e.json["timestamp"], e.json
    # Its end: when the database answered again, and since when it had not.
    assert back.verified and back.json["type"] == "database.recovered", back.json
    assert back.json["data"]["since"] == e.json["data"]["since"] < e.json["timestamp"] < back.json["timestamp"]
    assert told >= 10, f"told after {told:.1f} s: a single slow check is not an outage"
    assert not any(OPS_SECRET in line for line in r.log)


def test_relays_on_one_postgres_share_an_endpoints_rate_limit_and_cap(
    pg: Database, tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    rate, cap = 40, 4
    hook = Hook(serve, lambda d: 0.2 if d.key.startswith("slow-") else 200)
    protection = f"[sources.webhooks.protection]\nrate_per_second = {rate}\nmax_in_flight = {cap}\n"
    procs = []
    for i in range(2):
        d = tmp_path / f"relay{i}"
        d.mkdir()
        procs.append(RelayProcess(config_text(pg, [hook.url], sources=protection), d))
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.wait(said(p, "2 relays deliver"), 30, "both relays counted")

        def send(prefix: str, n: int) -> None:
            for k in range(0, n, 50):
                calls = [track(i, messageId=f"{prefix}{i}") for i in range(k, k + 50)]
                body = {"batch": calls, "writeKey": WRITE_KEY}
                assert procs[k // 50 % 2].post("/v1/batch", body)[0] == 200

        # Quick answers: the rate limit is what holds the relays back.
        send("fast-", 600)
        drained(procs, 120, pg)
        # Slow answers: the cap is.
        send("slow-", 200)
        drained(procs, 120, pg)
    finally:
        for p in procs:
            p.stop()
    fast = sorted(d.started for d in hook.deliveries if d.key.startswith("fast-"))
    slow = [d for d in hook.deliveries if d.key.startswith("slow-")]
    assert len(fast) == 600 and len(slow) == 200
    busiest = max(sum(1 for t in fast[i:] if t < at + 1) for i, at in enumerate(fast))
    events = sorted([(d.started, 1) for d in slow] + [(d.ended, -1) for d in slow], key=lambda e: (e[0], e[1]))
    in_flight = most = 0
    for _, step in events:
        in_flight += step
        most = max(most, in_flight)
    print(
        f"2 relays, rate {rate}/s and cap {cap} shared: at most {busiest} requests in a second "
        f"({len(fast)} in {fast[-1] - fast[0]:.1f} s), at most {most} in flight"
    )
    # Each relay sends 20 a second, 50 ms apart; the receiver may see a
    # request a little late, so one more from each can fall into a second.
    assert busiest <= rate + 2, busiest
    assert most <= cap, most
    # Both relays were sending at once: one alone would hold at most half.
    assert most > cap // 2, most


def said(p: RelayProcess, text: str) -> Callable[[], bool]:
    return lambda: any(text in line for line in p.log)


def ready(p: RelayProcess) -> Callable[[], bool]:
    return lambda: not not_ready(p)


def not_ready(p: RelayProcess) -> bool:
    try:
        with urllib.request.urlopen(p.url + "/readyz", timeout=10) as r:
            return bool(r.status != 200)
    except urllib.error.HTTPError as e:
        return e.code == 503


def test_sources_changed_through_one_relay_reach_another_and_stay_secret(
    pg: Database, tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    """Sources in the database: a change through one relay's admin API is in
    force on another relay on the same Postgres within the documented
    bound; `apply` is idempotent; bad settings are refused with the core's
    codes; no key, secret or header value shows anywhere but the request
    that carries it."""
    env = {"CALLPOST_RELAY_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()}
    web = Hook(serve)
    shop_secret, header_value, shop_key = "shop-secret-5f1c", "header-value-9d2e", "wk-shop-77"
    shop = Hook(serve, secret=shop_secret)
    first = tmp_path / "relay0"
    first.mkdir()
    second = tmp_path / "relay1"
    second.mkdir()
    # The first relay's file gives "web", applied to the database at start;
    # the second has no sources of its own and runs from the database's.
    a = RelayProcess(config_text(pg, [web.url]), first, env=env)
    bare = f'database = "{pg.url}"\nadmin_token = "{ADMIN}"\n[security]\nallow_private_networks = true\n'
    b = RelayProcess(bare, second, env=env)
    answers: list[str] = []

    def admin(p: RelayProcess, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        try:
            out = p.admin(method, path, body)
            answers.append(json.dumps(out))
            return 200, out
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            answers.append(text)
            return e.code, json.loads(text)

    a.start()
    b.start()
    try:
        assert admin(b, "GET", "/admin/sources/web")[0] == 200
        source = {
            "write_keys": [shop_key],
            "webhooks": {
                "urls": [{"url": shop.url, "headers": {"X-Api-Key": header_value}}],
                "shared_secret": shop_secret,
                "protection": {"rate_per_second": 50},
            },
        }
        status, out = admin(a, "PUT", "/admin/sources/shop", source)
        assert status == 200 and out["changes"]["added"] == ["shop"], out
        put_at = time.time()
        b.wait(lambda: admin(b, "GET", "/admin/sources/shop")[0] == 200, 60, "the second relay to have shop")
        took = time.time() - put_at
        print(f"a source put through one relay was in force on the other after {took:.2f} s (bound 2 s)")
        call = track(1, messageId="shop-1")
        assert b.post("/v1/track", call, headers={"Authorization": basic(shop_key)})[0] == 200
        b.wait(lambda: len(shop.ok()) == 1, 30, "the shop receiver")
        got = shop.ok()[0]
        assert got.verified and got.headers["x-api-key"] == header_value
        # The same again changes nothing; a change is "changed".
        again = admin(a, "PUT", "/admin/sources/shop", source)
        assert again[0] == 200, again
        assert again[1]["changes"] == {
            "added": [],
            "changed": [],
            "removed": [],
        }
        # Refused with the core's codes, and nothing kept.
        taken = {"write_keys": [WRITE_KEY]}
        status, out = admin(b, "PUT", "/admin/sources/other", taken)
        assert (status, out["code"]) == (400, "invalid_settings") and "is taken" in out["message"], out
        # The source that holds the key is not named to whoever guessed it.
        assert '"web"' not in out["message"], out
        ftp = {"write_keys": ["wk-x"], "webhooks": {"urls": ["ftp://example.com/in"]}}
        status, out = admin(b, "PUT", "/admin/sources/other", ftp)
        assert (status, out["code"]) == (400, "unsupported_scheme") and "ftp" in out["message"], out
        status, out = admin(b, "PUT", "/admin/sources/other", {"write_keys": ["wk-x"], "colour": "red"})
        assert (status, out["code"]) == (400, "invalid_settings"), out
        assert admin(a, "GET", "/admin/sources/other")[0] == 404
        # Removed through the second relay: the first stops taking its key.
        status, out = admin(b, "DELETE", "/admin/sources/shop")
        assert status == 200 and out["changes"]["removed"] == ["shop"], out
        assert admin(b, "DELETE", "/admin/sources/shop")[0] == 404
        a.wait(
            lambda: a.post("/v1/track", call, headers={"Authorization": basic(shop_key)})[0] == 401,
            60,
            "the first relay to drop shop",
        )
        # `apply` makes the database match a file, and prints nothing when
        # it already does.
        extra = '[[sources]]\nname = "extra"\nwrite_keys = ["wk-extra"]\n'
        applied = tmp_path / "apply.toml"
        applied.write_text(config_text(pg, [web.url], extra=extra))

        def apply() -> str:
            run = subprocess.run(
                [RELAY_BIN, "apply", str(applied)],
                capture_output=True,
                text=True,
                timeout=60,
                env=dict(os.environ, **env),
            )
            assert run.returncode == 0, run.stderr
            return run.stdout

        assert apply() == 'added source "extra"\n'
        assert apply() == ""
        b.wait(lambda: admin(b, "GET", "/admin/sources/extra")[0] == 200, 60, "the second relay to have extra")
        stored = pg.query("SELECT name, sealed FROM sources ORDER BY name")
        metrics = a.metrics() + b.metrics()
    finally:
        a.stop()
        b.stop()
    assert [r[0] for r in stored] == ["extra", "web"]
    seen = "\n".join(answers + a.log + b.log + [metrics] + [str(r) for r in stored])
    for secret in (shop_secret, header_value, shop_key, SECRET, WRITE_KEY, env["CALLPOST_RELAY_SECRET_KEY"]):
        assert secret not in seen, secret


def test_a_retry_after_told_to_one_relay_holds_back_every_relay_and_outlives_a_restart(
    pg: Database, tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    """The receiver answers its first request 429 with Retry-After: 20.
    Calls posted a few seconds later to the other relay wait until the
    pause ends, and the relay that was told keeps the pause across a
    restart."""
    wait_s = 20
    first: list[float] = []
    lock = threading.Lock()

    def behaviour(d: Any) -> Any:
        with lock:
            if not first:
                first.append(d.started)
                return 429, {"Retry-After": str(wait_s)}
        return 200

    hook = Hook(serve, behaviour)
    procs = relays(2, pg, tmp_path, hook)
    for p in procs:
        p.start()
    try:
        assert procs[0].post("/v1/track", {**track(0, messageId="first"), "writeKey": WRITE_KEY})[0] == 200
        procs[0].wait(lambda: bool(first), 30, "the first request")
        told = first[0]

        def was_told(p: RelayProcess) -> bool:
            return any(
                f"waiting {wait_s - 1} s (Retry-After)" in line or f"waiting {wait_s} s (Retry-After)" in line
                for line in p.log
            )

        procs[0].wait(lambda: any(was_told(p) for p in procs), 30, "a relay to log the pause")
        holder = next(p for p in procs if was_told(p))
        other = next(p for p in procs if p is not holder)
        # The relay that was told restarts (it must not forget); the other
        # takes new calls, and claims them itself as soon as they are
        # stored: it must hold them back though no receiver told it to.
        time.sleep(3)
        holder.stop()
        holder.start()
        sent_at = time.time()
        batch = [track(i, messageId=f"later-{i}") for i in range(40)]
        assert other.post("/v1/batch", {"batch": batch, "writeKey": WRITE_KEY})[0] == 200
        drained(procs, 120, pg)
    finally:
        for p in procs:
            p.stop()
    later = [d for d in hook.deliveries if d.key.startswith("later-")]
    assert len({d.key for d in later}) == 40
    early = [round(d.started - told, 2) for d in later if d.started < told + wait_s]
    print(
        f"Retry-After: {wait_s} to one of 2 relays (restarted): 40 calls posted to the other "
        f"{sent_at - told:.1f} s after it, the first sent {min(d.started for d in later) - told:.1f} s after it"
    )
    assert not early, f"sent during the pause, seconds after the 429: {early}"
    # The restarted relay took the pause from the database.
    assert any("held by another relay, or before a restart" in line for line in holder.log), holder.log[-20:]


def test_a_database_that_only_reads_is_a_503_and_its_sessions_are_not_kept(
    pg: Database, tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    """What a primary demoted by a failover looks like to sessions it keeps
    (``target_session_attrs=read-write`` is checked only when a session
    starts): every write refused as read-only. The relay answers 503 with
    ``Retry-After``, says it is not ready, and drops each such session, so
    that once the database takes writes again (here: for new sessions only,
    as a new primary would) its writes go through."""
    import psycopg

    hook = Hook(serve)
    r = RelayProcess(config_text(pg, [hook.url]), tmp_path).start()
    auth = {"Authorization": basic(WRITE_KEY)}

    def admin(sql: str) -> None:
        with psycopg.connect(pg.admin_url, autocommit=True) as conn:
            conn.execute(sql)

    try:
        assert r.post("/v1/track", track("before"), auth)[0] == 200
        admin(f"ALTER DATABASE {pg.name} SET default_transaction_read_only = on")
        admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{pg.name}' AND application_name = 'callpost-relay'"
        )
        refused = 0
        deadline = time.monotonic() + 30
        while not said(r, "read-only transaction")() and time.monotonic() < deadline:
            status, headers, _ = r.post("/v1/track", track(f"ro-{refused}"), auth)
            assert status == 503 and headers.get("retry-after"), (status, headers)
            refused += 1
        assert said(r, "read-only transaction")(), "\n".join(r.log[-20:])
        r.wait(lambda: not_ready(r), 30, "not ready while writes are refused")
        # New sessions take writes again; the read-only ones still would not.
        admin(f"ALTER DATABASE {pg.name} SET default_transaction_read_only = off")
        accepted = [False]

        def writes() -> bool:
            accepted[0] = r.post("/v1/track", track("after"), auth)[0] == 200
            return accepted[0]

        r.wait(writes, 30, "a write accepted after the database takes writes again")
        r.wait(ready(r), 30, "ready again")
        r.wait_drained(30, pg)
    finally:
        r.stop()
    delivered = {d.json["properties"]["n"] for d in hook.ok() if "properties" in d.json}
    assert {"before", "after"} <= delivered, delivered


def wait_for(what: str, done: Callable[[], bool], timeout: float = 30) -> None:
    end = time.time() + timeout
    while not done():
        assert time.time() < end, f"waited {timeout} s for {what}"
        time.sleep(0.05)


def test_a_shard_group_added_during_a_run_loses_nothing_and_stores_each_call_once(
    tmp_path: pathlib.Path, serve: Callable[..., Any], postgres_url: str
) -> None:
    """Two relays on one database under load; group ``b`` is added as the
    operator's guide says: one relay started with the new map (it puts the
    map in force), then the other restarted with it. Meanwhile the relay
    still on the old map refuses the calls of the slots that moved (503:
    the SDK sends them to the other relay), and no call is stored twice."""
    groups = Groups(tmp_path, postgres_url)
    hook = Hook(serve, lambda d: 200)
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    one = config_text(groups, [hook.url])
    two = config_text(groups, [hook.url], extra=groups.shards(version=1))
    a = RelayProcess(one, dirs[0], port=free_port())
    b = RelayProcess(one, dirs[1], port=free_port())
    sender = Sender([a.port, b.port], random.randrange(1 << 30), users=50, record=True)
    restarts: list[tuple[float, float]] = []
    try:
        a.start()
        b.start()
        sender.start()
        wait_for("load", lambda: sender.batches >= 30)
        at = time.time()
        b.stop()
        b.path.write_text(two)
        b.start()
        restarts.append((at, time.time()))
        # The relay on the old map reads the new one within the sources'
        # poll (2 s) and refuses the moved slots' calls from then on.
        wait_for("a 503 from the relay on the old map", lambda: any(x[1] == 503 for x in sender.answers))
        moved_refused = sum(1 for x in sender.answers if x[1] == 503)
        at = time.time()
        a.stop()
        a.path.write_text(two)
        a.start()
        restarts.append((at, time.time()))
        settled_after = sender.batches
        wait_for("load on the new map", lambda: sender.batches >= settled_after + 30)
        sender.stopping = True
        sender.join(60)
        a.wait_drained(60, groups)
    finally:
        sender.stopping = True
        for r in (a, b):
            if r.running():
                r.stop()
    try:
        tally = Tally(hook, sender.acked, restarts)
        print(
            f"calls acknowledged {len(sender.acked)}, delivered {len(tally.delivered)}, lost {len(tally.lost)}, "
            f"delivered twice {len(tally.twice)}; refused by the relay on the old map: {moved_refused}"
        )
        assert not tally.lost, sorted(tally.lost)[:10]
        assert not tally.unexplained, tally.unexplained[:10]
        # Stored once: no call in both groups, every call delivered.
        home = {str(m) for (m,) in groups.home_query("SELECT message_id FROM deliveries")}
        in_b = {str(m) for (m,) in groups.b.query("SELECT message_id FROM deliveries")}
        assert home and in_b, (len(home), len(in_b))
        assert not home & in_b, sorted(home & in_b)[:10]
        assert sender.acked <= home | in_b
        statuses = dict(groups.query("SELECT status, count(*) FROM deliveries GROUP BY status"))
        assert set(statuses) == {1}, statuses
        # Every refusal said when to come back.
        assert all(x[3] for x in sender.answers if x[1] == 503)
    finally:
        groups.drop()


def slot_of(source: str, user: str) -> int:
    """A call's slot, by the rule the relay's core states
    (``callpost_core::shard::slot_of``): FNV-1a, 64 bits, of the source, a
    zero byte and the user, modulo 1,024."""
    h = 0xCBF29CE484222325
    for b in source.encode() + b"\0" + user.encode():
        h = ((h ^ b) * 0x100000001B3) % (1 << 64)
    return h % 1024


def test_one_shard_group_down_holds_back_only_its_own_users(
    tmp_path: pathlib.Path, serve: Callable[..., Any], postgres_url: str
) -> None:
    """Group ``b``'s database stops taking sessions: calls of its users are
    refused (503 with ``Retry-After``), home's users' calls are stored and
    delivered meanwhile, the relay stays ready; once ``b`` is back, its
    users' calls are taken and delivered."""
    import psycopg

    groups = Groups(tmp_path, postgres_url)
    hook = Hook(serve)
    extra = groups.shards(version=1) + "[storage]\ntimeout_ms = 1000\n"
    r = RelayProcess(config_text(groups, [hook.url], extra=extra), tmp_path)
    auth = {"Authorization": basic(WRITE_KEY)}
    users = [f"user-{i}" for i in range(200)]
    at_home = [u for u in users if slot_of("web", u) < 512]
    in_b = [u for u in users if slot_of("web", u) >= 512]

    def call(user: str, n: str) -> dict[str, Any]:
        return track(n, userId=user)

    def admin(sql: str) -> None:
        with psycopg.connect(groups.admin_url, autocommit=True) as conn:
            conn.execute(sql)

    def delivered() -> set[str]:
        return {d.json["properties"]["n"] for d in hook.ok() if "properties" in d.json}

    try:
        r.start()
        assert r.post("/v1/track", call(in_b[0], "b-before"), auth)[0] == 200
        r.wait(lambda: "b-before" in delivered(), 30, "a call of b delivered")
        admin(f"ALTER DATABASE {groups.b.name} ALLOW_CONNECTIONS false")
        admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{groups.b.name}'")
        status, headers, _ = r.post("/v1/track", call(in_b[1], "b-down"), auth)
        assert status == 503 and headers.get("retry-after"), (status, headers)
        for i, u in enumerate(at_home[:10]):
            assert r.post("/v1/track", call(u, f"home-{i}"), auth)[0] == 200
        r.wait(lambda: {f"home-{i}" for i in range(10)} <= delivered(), 30, "home's calls delivered while b is down")
        assert not not_ready(r), "one group down: still ready"
        admin(f"ALTER DATABASE {groups.b.name} ALLOW_CONNECTIONS true")
        r.wait(lambda: r.post("/v1/track", call(in_b[1], "b-down"), auth)[0] == 200, 30, "b's users taken again")
        r.wait(lambda: "b-down" in delivered(), 30, "b's call delivered")
        r.wait_drained(30, groups)
    finally:
        if r.running():
            r.stop()
        admin(f"ALTER DATABASE {groups.b.name} ALLOW_CONNECTIONS true")
        groups.drop()
