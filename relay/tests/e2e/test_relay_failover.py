"""Postgres failover under load with nothing acknowledged lost.

``failover_scenario.py`` runs inside a network namespace of its own
(``unshare --net``: loopback only, nothing of the host's network; the
monitor and the nodes on ports 5600-5603 there): a pg_auto_failover monitor
and a group of three Postgres nodes (a primary and two standbys in its
synchronous quorum), two relays on a URL of all three, a sender that
retries as the SDKs do, a verifying receiver; and four faults under load:
the primary's whole process tree killed, a relay killed and started
again, the new primary's Postgres killed alone (its keeper starts it again),
the first primary started again. This test checks its report: every
acknowledged call delivered, every duplicate explained by a fault, every
refusal a 503 with ``Retry-After``, no answer held past the database
timeout, ``/readyz`` not ready during the first failover and ready after,
the operators told of an outage and of its end.

The measured windows are written to ``target/failover/report.json``.
Needs root (namespaces, and Postgres run as the ``postgres`` user) and
Debian's pg-auto-failover; ``scripts/test.sh`` installs it and sets
``CALLPOST_FAILOVER=1``, under which a missing part fails rather than
skips.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import pytest
from failover_scenario import TIMEOUT_MS

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
REQUIRED = os.environ.get("CALLPOST_FAILOVER") == "1"


def _missing() -> str | None:
    absent = [t for t in ("pg_autoctl", "unshare", "ip") if shutil.which(t) is None]
    if absent:
        return f"{', '.join(absent)} not installed (scripts/test.sh installs pg-auto-failover)"
    if os.geteuid() != 0:
        return "a network namespace and Postgres run as another user need root"
    return None


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    why = _missing()
    if why is not None:
        if REQUIRED:
            pytest.fail(f"CALLPOST_FAILOVER=1, but {why}")
        pytest.skip(why)
    # Under target/, not pytest's temporary directory: the postgres user
    # must reach it, and pytest's is root's alone.
    work = ROOT / "target" / "failover" / "run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out = work / "report.json"
    done = subprocess.run(
        ["unshare", "--net", "--", sys.executable, str(HERE / "failover_scenario.py"), str(out), str(work)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=HERE,
    )
    loaded: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    kept = ROOT / "target" / "failover"
    kept.mkdir(parents=True, exist_ok=True)
    summary = {k: v for k, v in loaded.items() if k not in ("answers_log", "readiness")}
    (kept / "report.json").write_text(json.dumps({**summary, "windows": windows(loaded)}, indent=1))
    assert done.returncode == 0 and "error" not in loaded, (
        f"{loaded.get('error')}\n{json.dumps(loaded.get('logs'), indent=1)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    return loaded


def answers_in(report: dict[str, Any], start: float, end: float) -> list[list[Any]]:
    return [a for a in report["answers_log"] if start <= a[0] <= end]


def windows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per fault: the answers it got, the 503 window (first refusal to last)
    and the time from the fault to the first acknowledgement after the last
    refusal."""
    out = []
    for f in report.get("faults", []):
        got = answers_in(report, f["start"], f["end"])
        failed = [a for a in got if a[1] != 200]
        last_failed = max((a[0] for a in failed), default=f["start"])
        recovered = min((a[0] + a[2] for a in got if a[1] == 200 and a[0] >= last_failed), default=f["end"])
        out.append(
            {
                "fault": f["name"],
                "answers": len(got),
                "503": sum(1 for a in failed if a[1] == 503),
                "503 with Retry-After": sum(1 for a in failed if a[1] == 503 and a[3]),
                "other failures": sum(1 for a in failed if a[1] != 503),
                "503 window s": round(last_failed - min((a[0] for a in failed), default=last_failed), 2),
                "recovered after s": round(recovered - f["start"], 2),
                "longest answer s": round(max((a[2] for a in got), default=0.0), 2),
            }
        )
    return out


def test_no_acknowledged_call_is_lost(report: dict[str, Any]) -> None:
    assert report["number_sync_standbys"] == 1
    assert report["acked"] > 0
    assert report["lost_count"] == 0, report["lost"]
    assert report["unexplained"] == [], "delivered twice with no fault to explain it"


def test_ingest_answers_503_with_retry_after_and_never_hangs(report: dict[str, Any]) -> None:
    per_fault = windows(report)
    killed = per_fault[0]
    assert killed["fault"] == "primary-killed" and killed["503"] > 0, per_fault
    for w in per_fault:
        assert w["503 with Retry-After"] == w["503"], w
        # A relay killed refuses connections (an SDK retries those); the
        # database's faults are answered, never left hanging.
        if w["fault"] != "relay-killed":
            assert w["other failures"] == 0, w
        # The database's limit, and the wait in the writer's queue before it
        # (the sender gives up at 10 s, and that would count as a failure).
        assert w["longest answer s"] < 4 * TIMEOUT_MS / 1000, w


def test_readiness_and_the_operators_say_what_happens(report: dict[str, Any]) -> None:
    killed = report["faults"][0]
    during = [r for r in report["readiness"] if killed["start"] <= r[0] <= killed["end"]]
    assert any(r[2] == 503 for r in during), "/readyz said ready throughout the first failover"
    last = report["readiness"][-2:]
    assert all(r[2] == 200 for r in last), last
    # An outage of 10 s or more is reported, and its end too; a shorter
    # one neither (a quick failover needs no page).
    events = report["events"]
    assert events.count("database.unreachable") == events.count("database.recovered"), events
    longest = max(w["recovered after s"] for w in windows(report) if w["fault"] != "relay-killed")
    if longest > 15:
        assert "database.recovered" in events, (longest, events)
