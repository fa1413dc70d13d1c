"""Crash safety: the relay is killed with SIGKILL at random points while a
sender posts batches and deliveries run, then restarted, over and over.

Afterwards every acknowledged call has been delivered (lost = 0), and a
call was delivered more than once only if one of its deliveries was
unsettled at a kill: in flight, or answered so shortly before the kill
that its result may not have been stored. Every delivery of a call
carries the same ``Idempotency-Key``.

``CALLPOST_CRASH_KILLS`` sets the number of kills (default 200); the seed
is printed, and ``CALLPOST_CRASH_SEED`` replays a run.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Set, Tuple

import pytest

from relay_support import WRITE_KEY, Database, Hook, RelayProcess, basic, config_text, free_port

pytest.importorskip("uvicorn")

KILLS = int(os.environ.get("CALLPOST_CRASH_KILLS", "200"))
SETTLE_S = 1.0
"""An answer this close before a kill may not have been stored: its
delivery counts as unsettled at that kill."""


class Sender(threading.Thread):
    """Posts batches of fresh calls like a Segment SDK: a batch that is not
    acknowledged (connection refused or reset, 5xx) is sent again, the same
    batch, until it is."""

    def __init__(self, port: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/v1/batch"
        self.rng = random.Random(seed)
        self.acked: Set[str] = set()
        self.in_flight = False
        self.stopping = False
        self.batches = 0
        self.retries = 0

    def run(self) -> None:
        n = 0
        while not self.stopping:
            size = self.rng.randint(1, 20)
            ids = [f"c{n + i}" for i in range(size)]
            n += size
            body = json.dumps({"batch": [
                {"type": "track", "userId": "u", "event": "Crash Test", "messageId": m, "properties": {"seq": m}}
                for m in ids
            ]}).encode()
            while True:
                req = urllib.request.Request(self.url, data=body, method="POST", headers={
                    "Content-Type": "application/json", "Authorization": basic(WRITE_KEY)})
                self.in_flight = True
                try:
                    with urllib.request.urlopen(req, timeout=10) as r:
                        ok = r.status == 200
                except (urllib.error.URLError, OSError):
                    ok = False
                self.in_flight = False
                if ok:
                    self.acked.update(ids)
                    self.batches += 1
                    break
                self.retries += 1
                if self.stopping:
                    return
                time.sleep(0.02)


def test_kill_9_at_random_points_loses_nothing(tmp_path: pathlib.Path, serve: Callable[..., Any], database: Database) -> None:
    seed = int(os.environ.get("CALLPOST_CRASH_SEED", str(random.randrange(1 << 30))))
    print(f"crash test seed {seed} (CALLPOST_CRASH_SEED={seed} replays it), {KILLS} kills")
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
    relay = RelayProcess(config_text(database, [hook.url]), tmp_path, port=port)
    sender = Sender(port, seed)
    kills: List[Tuple[float, float, bool, int]] = []
    relay.start()
    sender.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.05, 0.8))
            at = time.time()
            with hook.lock:
                attempts = sum(1 for d in hook.deliveries if d.ended == 0.0)
            ingest = sender.in_flight
            relay.kill()
            relay.start()
            # A request the killed relay wrote may reach the receiver after
            # the kill (the kernel still holds it); nothing the next relay
            # sends starts before it is up.
            kills.append((at, time.time(), ingest, attempts))
        sender.stopping = True
        sender.join(60)
        relay.wait_drained(120)
    finally:
        sender.stopping = True
        if relay.running():
            relay.stop()

    # What the receiver got, by call.
    got: Dict[str, List[Any]] = {}
    for d in hook.deliveries:
        seq = d.json["properties"]["seq"]
        assert d.key == seq, "every delivery of a call carries its messageId as Idempotency-Key"
        assert d.verified
        got.setdefault(seq, []).append(d)
    delivered = {m for m, ds in got.items() if any(200 <= d.status < 300 for d in ds)}
    lost = sender.acked - delivered
    def unsettled(d: Any) -> bool:
        # Sent by a relay that was then killed, and answered at most
        # SETTLE_S before the kill (or after it).
        end = d.ended or float("inf")
        return any(d.started <= restarted and end >= at - SETTLE_S for at, restarted, _, _ in kills)

    twice = {m: ds for m, ds in got.items() if sum(1 for d in ds if 200 <= d.status < 300) > 1}
    unexplained = [m for m, ds in twice.items() if not any(unsettled(d) for d in ds[:-1])]
    during_ingest = sum(1 for k in kills if k[2])
    during_attempt = sum(1 for k in kills if k[3] > 0)
    # A kill that fell after an attempt was answered and before its result
    # was stored: the call was answered before the kill, then sent again.
    answered_first = [ds[0].ended for ds in twice.values() if ds[0].ended]
    between = sum(1 for at, _, _, _ in kills if any(at - SETTLE_S <= e < at for e in answered_first))
    report = (f"kills {len(kills)} (with a batch in flight: {during_ingest}, with attempts in flight: "
              f"{during_attempt}, between an answer and its state write: {between}); "
              f"batches acknowledged {sender.batches} (sent again {sender.retries}); "
              f"calls acknowledged {len(sender.acked)}, delivered {len(delivered)}, lost {len(lost)}, "
              f"delivered twice {len(twice)}, of which unexplained {len(unexplained)}")
    print(report)
    for m in unexplained[:5]:
        print("unexplained", m, [(d.started, d.ended, d.status) for d in twice[m]])
    (pathlib.Path(__file__).resolve().parents[2] / "target").mkdir(exist_ok=True)
    (pathlib.Path(__file__).resolve().parents[2] / "target" / f"crash-test-{database.backend}.txt").write_text(report + "\n")
    assert not lost, f"acknowledged but never delivered: {sorted(lost)[:10]}"
    assert not unexplained, f"delivered twice with no attempt unsettled at a kill: {unexplained[:10]}"
    assert len(kills) == KILLS and sender.batches > KILLS
    if KILLS >= 100:
        assert during_ingest > 0 and during_attempt > 0 and between > 0, report
