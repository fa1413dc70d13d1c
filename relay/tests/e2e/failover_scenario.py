"""Postgres failover under load: the scenario that
``test_relay_failover.py`` runs inside a network namespace of its own
(loopback only) and whose report it checks.

    python failover_scenario.py REPORT.json WORKDIR

A pg_auto_failover monitor and a group of three Postgres nodes (a primary,
two standbys in its synchronous quorum: a commit waits for one of them);
two relays on the URL of all three (``target_session_attrs=read-write``);
a sender that retries a batch until it is acknowledged, as the SDKs do,
and records every answer; a receiver that verifies every signature; the
relays' operational events. The faults, one after another, under load:

1. ``primary-killed``: the primary's whole process tree (the keeper, its
   Postgres, every backend) killed: a standby is promoted;
2. ``relay-killed``: a relay killed (SIGKILL) and started again;
3. ``primary-postgres-killed``: the new primary's Postgres killed alone:
   its keeper starts it again, as a primary whose commits wait for a
   standby;
4. ``old-primary-back``: the node killed first started again: it rejoins
   as a standby.

Then the sender stops, and the run waits until every acknowledged call is
delivered (or a deadline). The report holds what a test checks: the
acknowledged calls not delivered, the duplicates no fault explains, and for
each fault its window, its answers (503s, with ``Retry-After`` or not,
other failures, the longest answer), the time to recover, what ``/readyz``
said, and the operators' events.
"""

from __future__ import annotations

import json
import pathlib
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "python" / "tests"))

from pg_group import Group  # noqa: E402
from relay_support import Hook, RelayProcess, Sender, Tally, config_text, free_port, operator_hook  # noqa: E402
from servers import Handler, Server  # noqa: E402

LEASE_S = 10
"""The shortest lease the relay takes: a killed relay's deliveries are
taken over this soon."""
TIMEOUT_MS = 2000
"""The relay's limit on a database call: an answer during a failover comes
within about this."""
STEADY_BATCHES = 40
"""Batches acknowledged between faults: the load runs before each."""


def readiness(relays: list[RelayProcess], stop: threading.Event, seen: list[tuple[float, int, int]]) -> None:
    """Polls each relay's /readyz every 0.2 s: (time, relay, status)."""
    while not stop.is_set():
        for i, r in enumerate(relays):
            if not r.running():
                continue
            try:
                with urllib.request.urlopen(r.url + "/readyz", timeout=5) as answer:
                    status = answer.status
            except urllib.error.HTTPError as e:
                status = e.code
            except (urllib.error.URLError, OSError):
                status = 0
            seen.append((time.time(), i, status))
        stop.wait(0.2)


def main(report_path: pathlib.Path, work: pathlib.Path) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    servers: list[Server] = []

    def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> Server:
        s = Server(handler, tls)
        servers.append(s)
        return s

    report: dict[str, Any] = {"faults": []}
    group = Group(work / "pg", 5600)
    relays: list[RelayProcess] = []
    stop_polling = threading.Event()
    try:
        began = time.monotonic()
        group.start()
        # The monitor sets it to 1 once two standbys are in the quorum: a
        # commit waits for one of them.
        report["number_sync_standbys"] = int(
            group.monitor_sql("SELECT number_sync_standbys FROM pgautofailover.formation WHERE formationid = 'default'")
        )
        report["formed_s"] = round(time.monotonic() - began, 1)

        hook = Hook(serve)
        ops, ops_table = operator_hook(serve)
        extra = f"[storage]\ntimeout_ms = {TIMEOUT_MS}\n[delivery]\nlease_seconds = {LEASE_S}\n{ops_table}"
        for i in range(2):
            d = work / f"relay{i}"
            d.mkdir(parents=True, exist_ok=True)
            relays.append(RelayProcess(config_text(group.url(), [hook.url], extra=extra), d, port=free_port()))
        for r in relays:
            r.start()
        ready: list[tuple[float, int, int]] = []
        threading.Thread(target=readiness, args=(relays, stop_polling, ready), daemon=True).start()
        sender = Sender([r.port for r in relays], seed=47, record=True, pause=0.005)
        sender.start()
        windows: list[tuple[float, float]] = []

        def steady() -> None:
            base = sender.batches
            deadline = time.monotonic() + 120
            while sender.batches < base + STEADY_BATCHES:
                if time.monotonic() > deadline:
                    raise RuntimeError("the load did not resume:\n" + "\n".join(relays[0].log[-20:]))
                time.sleep(0.05)

        def acknowledged_after(t: float) -> bool:
            return any(sent > t and status == 200 for sent, status, _, _ in sender.answers[-200:])

        def fault(name: str, act: Callable[[], None], recovered: Callable[[float], bool]) -> None:
            steady()
            start = time.time()
            act()
            deadline = time.monotonic() + 240
            while not recovered(start):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: no recovery in 240 s: {group.states()}\n{group.tail()}")
                time.sleep(0.05)
            # The window ends at the first acknowledgement after the
            # recovery condition, so every failed answer of the fault is in it.
            done_at = time.time()
            while not acknowledged_after(done_at) and time.monotonic() < deadline:
                time.sleep(0.05)
            end = time.time()
            windows.append((start, end))
            report["faults"].append({"name": name, "start": start, "end": end})

        first = group.primary()
        report["first_primary"] = first.name
        fault(
            "primary-killed",
            first.kill_tree,
            lambda t: (
                group.states().get(first.name) != "primary"
                and any(group.states().get(n.name) == "primary" for n in group.nodes if n is not first)
                and acknowledged_after(t)
            ),
        )
        report["second_primary"] = group.primary().name

        def restart_relay() -> None:
            relays[0].kill()
            relays[0].start()

        fault("relay-killed", restart_relay, acknowledged_after)
        second = group.primary()
        fault("primary-postgres-killed", second.kill_postgres, acknowledged_after)
        fault("old-primary-back", first.run, lambda t: group.formed(group.states()) and acknowledged_after(t))

        sender.stopping = True
        sender.join(60)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if sender.acked <= {s for s in Tally(hook, set(), windows).delivered}:
                break
            time.sleep(0.5)
        stop_polling.set()
        tally = Tally(hook, sender.acked, windows)
        report.update(
            acked=len(sender.acked),
            delivered=len(tally.delivered),
            lost=sorted(tally.lost)[:20],
            lost_count=len(tally.lost),
            delivered_twice=len(tally.twice),
            unexplained=tally.unexplained[:20],
            answers=len(sender.answers),
            events=[d.json.get("type") for d in ops.deliveries],
            readiness=[list(x) for x in ready],
            answers_log=[list(a) for a in sender.answers],
        )
        return 0
    except Exception as e:  # the report says what failed
        report["error"] = f"{type(e).__name__}: {e}"
        report["logs"] = {f"relay{i}": r.log[-30:] for i, r in enumerate(relays)}
        return 1
    finally:
        stop_polling.set()
        for r in relays:
            if r.running():
                r.kill()
        group.stop()
        for s in servers:
            s.close()
        report_path.write_text(json.dumps(report))


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
