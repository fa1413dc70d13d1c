"""Crash safety: the relay is killed with SIGKILL at random points while a
sender posts batches and deliveries run, then restarted, over and over.

Afterwards every acknowledged call has been delivered (lost = 0), and a
call was delivered more than once only if one of its deliveries was
unsettled at a kill: in flight, or answered before the kill with its
result not yet stored (the store is read straight after each kill).
Every delivery of a call carries the same ``Idempotency-Key``.

After the sender stops, the test waits while the queue drains, and no
longer: a call whose receiver did not answer in time waits for its retry,
up to minutes later (the spec's retry, not a crash's doing), so as soon as
nothing is due and nothing is in flight, the relay's clock
(``--test-clock``) moves an hour ahead, inside the 4-hour window, and
every retry is due. The jump ends every lease at once, as a kill does: a
call leased at it may be sent again. The report says how the queue
drained and what waited; a queue that stops draining after the jump fails
the test.

``CALLPOST_CRASH_KILLS`` sets the number of kills (by default 30 on each
backend and 15 with batched webhooks, which the test run makes;
``CALLPOST_CRASH_KILLS=200`` is the run the documentation's figures come
from); the seed is printed, and ``CALLPOST_CRASH_SEED`` replays a run.
"""

from __future__ import annotations

import base64
import os
import pathlib
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from relay_support import (
    Database,
    Groups,
    Hook,
    RelayProcess,
    Sender,
    Settled,
    Tally,
    config_text,
    free_port,
    pending_report,
)

KILLS = {"sqlite": 30, "postgres": 30}
BATCHED_KILLS = 15
GROUPS_KILLS = 10

# A hang guard: how long the queue may go without shrinking while calls are
# due or in flight (or at all, after the clock moved) before the test fails.
STALL_S = 60

# How far the clock moves: past any retry the backoff schedules in the
# first few minutes of a delivery (the ceilings run 10 s, 20 s, … 21 min),
# and well inside the 4-hour window.
AHEAD_MS = 60 * 60 * 1000


def test_kill_9_at_random_points_loses_nothing(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    # Sealed at rest (a secret key): a body is sealed in the request that
    # stores it and opened in the claim that sends it, and a kill between
    # loses nothing either.
    crash(tmp_path, serve, database, KILLS[database.backend], batching="", sealed=True)


# The same guarantees with the destination sending calls several to a POST
# (a batch's state kept on each of its rows, rows claimed apart packed
# again): on SQLite, with fewer kills, as the batching is the subject.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_kill_9_with_batched_webhooks_loses_nothing(
    tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database
) -> None:
    crash(tmp_path, serve, database, BATCHED_KILLS, batching="[sources.webhooks.batch]\nmax_calls = 50\n")


# The same over two shard groups (two Postgres databases, half the slots
# each), the calls of 50 users spread across them.
def test_kill_9_over_two_shard_groups_loses_nothing(
    tmp_path: pathlib.Path, serve: Callable[..., Any], postgres_url: str
) -> None:
    groups = Groups(tmp_path, postgres_url)
    try:
        crash(tmp_path, serve, groups, GROUPS_KILLS, batching="", extra=groups.shards(), users=50, sealed=True)
        per_group = [
            len(groups.home_query("SELECT 1 FROM deliveries")),
            len(groups.b.query("SELECT 1 FROM deliveries")),
        ]
        assert all(n > 0 for n in per_group), per_group
    finally:
        groups.drop()


def crash(
    tmp_path: pathlib.Path,
    serve: Callable[..., Any],
    database: Database,
    kills_default: int,
    batching: str,
    extra: str = "",
    users: int = 1,
    sealed: bool = False,
) -> None:
    seed = int(os.environ.get("CALLPOST_CRASH_SEED", str(random.randrange(1 << 30))))
    kills_wanted = int(os.environ.get("CALLPOST_CRASH_KILLS", kills_default))
    print(f"crash test seed {seed} (CALLPOST_CRASH_SEED={seed} replays it), {kills_wanted} kills")
    rng = random.Random(seed)
    slow = random.Random(seed + 1)
    lock = threading.Lock()

    def behaviour(d: Any) -> Any:
        # Most answers are immediate; some take a while, so kills land in
        # the middle of attempts too.
        with lock:
            r = slow.random()
        return 0.3 if r < 0.05 else 0.05 if r < 0.2 else 200

    hook = Hook(serve, behaviour)
    port = free_port()
    key = {"CALLPOST_RELAY_SECRET_KEY": base64.b64encode(rng.randbytes(32)).decode()} if sealed else {}
    relay = RelayProcess(
        config_text(database, [hook.url], sources=batching, extra=extra),
        tmp_path,
        port=port,
        args=("--test-clock",),
        env=key,
    )
    sender = Sender([port], seed, users=users)
    kills: list[tuple[float, float, bool, int]] = []
    settled = Settled()
    waited_for_retry = ""
    jump: tuple[set[str], str] | None = None
    drained = "not drained"
    relay.start()
    sender.start()
    try:
        for _ in range(kills_wanted):
            time.sleep(rng.uniform(0.05, 0.8))
            at = time.time()
            with hook.lock:
                attempts = sum(1 for d in hook.deliveries if d.ended == 0.0)
            ingest = sender.in_flight
            relay.kill()
            settled.record(database)
            relay.start()
            # A request the killed relay wrote may reach the receiver after
            # the kill (the kernel still holds it); nothing the next relay
            # sends starts before it is up.
            kills.append((at, time.time(), ingest, attempts))
        sender.stopping = True
        sender.join(60)
        stopped = time.time()
        jump = drain(relay, database)
        drained = f"drained {time.time() - stopped:.0f} s after the sender stopped"
        if jump is not None:
            waited_for_retry = jump[1]
    finally:
        sender.stopping = True
        if relay.running():
            relay.stop()

    windows = [(at, restarted) for at, restarted, _, _ in kills]
    tally = Tally(hook, sender.acked, windows, settled, excused=jump[0] if jump else set())
    delivered, lost, twice, unexplained = tally.delivered, tally.lost, tally.twice, tally.unexplained
    during_ingest = sum(1 for k in kills if k[2])
    during_attempt = sum(1 for k in kills if k[3] > 0)
    report = (
        f"kills {len(kills)} (with a batch in flight: {during_ingest}, with attempts in flight: "
        f"{during_attempt}); calls answered but not stored at a kill: {len(tally.answered_then_lost)}; "
        f"batches acknowledged {sender.batches} (sent again {sender.retries}); "
        f"calls acknowledged {len(sender.acked)}, delivered {len(delivered)}, lost {len(lost)}, "
        f"delivered twice {len(twice)}, of which unexplained {len(unexplained)}; "
        + drained
        + (
            f"; nothing was due and the clock moved ahead, ending {len(jump[0]) if jump else 0} "
            f"leases. {waited_for_retry}"
            if waited_for_retry
            else ""
        )
    )
    print(report)
    for m in unexplained[:5]:
        first = twice[m][0].ended
        print(
            "unexplained",
            m,
            [(d.started, d.ended, d.status) for d in twice[m]],
            "next kill",
            min((at for at, _, _, _ in kills if at >= first), default=None),
        )
    (pathlib.Path(__file__).resolve().parents[3] / "target").mkdir(exist_ok=True)
    name = f"crash-test-{database.backend}{'-batched' if batching else ''}.txt"
    (pathlib.Path(__file__).resolve().parents[3] / "target" / name).write_text(report + "\n")
    if batching:
        batched = sum(1 for d in hook.deliveries if isinstance(d.json, list))
        assert batched > 0, "the destination batches: its calls arrive as arrays"
    assert not lost, f"acknowledged but never delivered: {sorted(lost)[:10]}"
    assert not unexplained, f"delivered twice with no attempt unsettled at a kill: {unexplained[:10]}"
    assert len(kills) == kills_wanted and sender.batches > kills_wanted
    if kills_wanted >= 100:
        assert during_ingest > 0 and during_attempt > 0 and tally.answered_then_lost, report
    else:
        # Fewer kills: each way of landing still happens, if not all three.
        assert during_ingest > 0 and during_attempt > 0, report


def leased(database: Database) -> set[str]:
    """The calls whose lease, taken by the real clock, has not ended (a
    lease taken after the clock moved ends an hour later)."""
    now = time.time() * 1000
    rows = database.query(
        "SELECT message_id FROM deliveries WHERE status = 0 AND lease_until > ? AND lease_until < ?",
        (now, now + AHEAD_MS / 2),
    )
    return {str(m) for (m,) in rows}


def drain(relay: RelayProcess, database: Database) -> tuple[set[str], str] | None:
    """Waits while the queue drains. As soon as calls are pending but none
    is due or in flight (they wait for retries), the relay's clock moves
    ahead; returns the calls whose leases the jump ended and what the
    pending calls waited for then (None when it did not have to). Those
    calls may be sent again: the jump ends a lease as a kill does, and a
    worker may still send a call it claimed before. A queue that stops
    shrinking for ``STALL_S`` fails, with what it waits for."""
    jump: tuple[set[str], str] | None = None
    least = None
    since = time.time()
    while True:
        status = relay.status()
        pending = int(status["pending"])
        if pending == 0:
            return jump
        if least is None or pending < least:
            least, since = pending, time.time()
        elif time.time() - since > STALL_S:
            raise AssertionError(f"the queue stopped draining\n{pending_report(database)}")
        due = status.get("next_due_at")
        waiting = int(status["in_flight"]) == 0 and due is not None and due > time.time() * 1000
        if jump is None and waiting:
            report = pending_report(database)
            # Read before and after: a call claimed in between is in the
            # second read, its lease counted by the real clock.
            ended = leased(database)
            relay.admin("POST", "/admin/test/clock", {"offsetMs": AHEAD_MS})
            jump = (ended | leased(database), report)
            least, since = pending, time.time()
        time.sleep(0.1)
