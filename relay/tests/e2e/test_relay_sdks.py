"""Real, unmodified Segment SDKs send to the relay, which delivers every call
to a verifying receiver exactly once, signed, with its skew-corrected
timestamp.

* segment-analytics-python 2.4.0 (Basic auth and the key in the body) and
  2.3.6 (the key in the body only), gzip on and off;
* @segment/analytics-node (Basic auth);
* analytics.js (@segment/analytics-next's UMD build) in headless Chromium,
  posting cross-origin as text/plain, one request per call and batched.

The relay's clock runs an hour ahead of the senders' (``--test-clock``), so
the skew correction shows: each delivered timestamp is the sender's
timestamp plus an hour, give or take the network's milliseconds.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from relay_support import WRITE_KEY, Database, Hook, RelayProcess, config_text

import callpost

SDK = pathlib.Path(__file__).parent / "sdk"
ROOT = pathlib.Path(__file__).resolve().parents[3]
N = int(os.environ.get("CALLPOST_SDK_CALLS", "200"))
"""Calls of each kind per SDK run."""
SKEW_MS = 3_600_000
"""The relay's clock is this far ahead of the senders'."""
PAST_MS = 2_000
"""Each call's timestamp is this far in the sender's past."""
KINDS = ("identify", "track", "page", "screen", "group", "alias")


def marker(d: Any) -> str:
    """The sender's marker in a delivered body (see the send_* scripts)."""
    body = d.json
    kind = body["type"]
    if kind == "alias":
        # By previousId: analytics.js sends the identified user as userId
        # whatever alias() was given (its EventFactory.addIdentity).
        return str(body["Previous ID"]).replace("-prev-", "-alias-")
    if kind == "screen":
        return str(body["name"])
    if kind in ("identify", "group"):
        return str(body["traits"]["seq"])
    return str(body["properties"]["seq"])


def expected(tag: str) -> list[str]:
    return [f"{tag}-{kind}-{i}" for kind in KINDS for i in range(N)]


@pytest.fixture
def hook(serve: Callable[..., Any]) -> Hook:
    return Hook(serve)


@pytest.fixture
def relay(tmp_path: pathlib.Path, hook: Hook, database: Database) -> Iterator[RelayProcess]:
    r = RelayProcess(
        config_text(database, [hook.url]), tmp_path, args=("--test-clock", "--clock-offset-ms", str(SKEW_MS))
    )
    r.start()
    yield r
    if r.running():
        r.stop()


def check(
    relay: RelayProcess, hook: Hook, tag: str, started: float, ended: float, timeout: float = 120, sender_said: str = ""
) -> None:
    want = expected(tag)

    def mine() -> int:
        return sum(1 for d in hook.ok() if marker(d).startswith(tag + "-"))

    try:
        relay.wait(lambda: mine() >= len(want), timeout, f"{len(want)} calls from {tag}")
    except AssertionError as e:
        raise AssertionError(f"{sender_said}\nhave {mine()}; relay status {relay.status()}\n{e}") from None
    relay.wait_drained(timeout)
    delivered = [d for d in hook.ok() if marker(d).startswith(tag + "-")]
    seen: dict[str, int] = {}
    for d in delivered:
        seen[marker(d)] = seen.get(marker(d), 0) + 1
    assert sorted(seen) == sorted(want), f"{tag}: missing {sorted(set(want) - set(seen))[:5]}"
    assert set(seen.values()) == {1}, f"{tag}: delivered more than once: {[m for m, c in seen.items() if c > 1][:5]}"
    keys = [d.key for d in delivered]
    assert len(set(keys)) == len(keys) and all(keys), f"{tag}: idempotency keys"
    assert all(d.verified for d in delivered), f"{tag}: a signature did not verify"
    # timestamp = receivedAt − (sentAt − originalTimestamp): the sender's
    # past timestamp, moved onto the relay's clock (an hour ahead).
    lo = (started * 1000) - PAST_MS + SKEW_MS - 1000
    hi = (ended * 1000) - PAST_MS + SKEW_MS + 1000
    for d in delivered:
        t = callpost.parse_timestamp(d.json["timestamp"])
        assert lo <= t <= hi, f"{tag}: {d.json['type']} timestamp {d.json['timestamp']} not skew-corrected"
    assert relay.status()["rejected"] == 0


def _python_sdk(version: str) -> str:
    """An interpreter with segment-analytics-python ``version``."""
    if version == "2.4.0":
        return sys.executable
    venv = ROOT / "target" / f"sdk-venv-{version}"
    py = venv / "bin" / "python"
    ready = venv / ".ready"
    venv.parent.mkdir(parents=True, exist_ok=True)
    # The suite's workers share the venv: one makes it, under a lock, and
    # marks it ready last; a worker that found the interpreter alone used
    # to run it before pip had installed the SDK.
    with open(venv.parent / f"sdk-venv-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run([str(py), "-m", "pip", "install", "-q", f"segment-analytics-python=={version}"], check=True)
            ready.touch()
    return str(py)


@pytest.mark.parametrize("version,gz", [("2.4.0", "1"), ("2.4.0", "0"), ("2.3.6", "1"), ("2.3.6", "0")])
def test_segment_analytics_python(relay: RelayProcess, hook: Hook, version: str, gz: str) -> None:
    tag = f"py{version.replace('.', '')}-gz{gz}"
    started = time.time()
    out = subprocess.run(
        [_python_sdk(version), str(SDK / "send_python.py"), relay.url, WRITE_KEY, str(N), str(PAST_MS), tag, gz],
        capture_output=True,
        text=True,
        timeout=300,
    )
    ended = time.time()
    assert out.returncode == 0, out.stderr
    check(relay, hook, tag, started, ended)


def _node_ready() -> None:
    if not (SDK / "node_modules" / "@segment").exists():
        pytest.fail("relay/tests/e2e/sdk has no node_modules: run npm ci there (scripts/test.sh does)")


def test_segment_analytics_node(relay: RelayProcess, hook: Hook) -> None:
    _node_ready()
    started = time.time()
    out = subprocess.run(
        ["node", str(SDK / "send_node.mjs"), relay.url, WRITE_KEY, str(N), str(PAST_MS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=SDK,
    )
    ended = time.time()
    assert out.returncode == 0, out.stderr
    check(relay, hook, "node", started, ended)


def test_analytics_js_in_chromium_cross_origin(relay: RelayProcess, hook: Hook, database: Database) -> None:
    # Each of analytics.js's delivery strategies once, one on each backend:
    # the backend is the subject of the other tests.
    mode = "per-call" if database.backend == "sqlite" else "batching"
    _node_ready()
    chromium = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    if not shutil.which(chromium):
        pytest.fail("Chromium is missing: scripts/test.sh installs Debian's")
    started = time.time()
    out = subprocess.run(
        ["node", str(SDK / "send_browser.mjs"), relay.url, WRITE_KEY, str(N), str(PAST_MS), mode],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SDK,
    )
    ended = time.time()
    assert out.returncode == 0, out.stdout + out.stderr
    check(relay, hook, "browser", started, ended, sender_said=out.stdout + out.stderr)
    routes = relay.metric("callpost_relay_requests_total", 'status="200"')
    if mode == "per-call":
        assert routes >= 6 * N, "analytics.js sent one request per call"
    else:
        assert routes < 6 * N, "analytics.js batched its calls"
