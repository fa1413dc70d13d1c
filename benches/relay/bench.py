"""The relay benchmark: the native relay beside a native echo server (the
ceiling) and beside the Python relay's last numbers (the before), in one
run, with ratios and the goals of issue 32.

    bash benches/relay.sh [--smoke] [--postgres] [--sealed]

``relay.sh`` builds what is measured and runs this script with the
machine's ``python3`` (the standard library only). Everything runs on this
machine's cores (2 here), shared by the sender, the server and the
receiver:

* the sender: ``wrk`` (one thread, 32 connections, closed loop) for
  saturation; ``bench_load`` (``relay/examples/bench_load.rs``, one thread,
  open loop: requests leave on a fixed schedule whatever the answers) for a
  fixed rate, each latency measured from the request's release at its slot
  (a wait for a free connection counts);
* the server: ``target/relay/examples/bench_echo`` (tokio and hyper 1's
  HTTP/1.1 server like the relay, reading each body whole and answering
  ``{"success":true}``), or ``target/relay/callpost-relay`` (cargo profile
  ``relay``, run directly: no Python in the measured path) with a TOML
  file written here;
* the receiver: ``benches/relay/receiver.mjs`` (Node's http server,
  verifying every ``X-Signature`` with callpost's ``verifyRequest``).

The bodies, from ``benches/fixtures``, every call with a fresh
``messageId`` that starts with 8 random hex digits (as an SDK's UUIDs do:
the ids' index is written at random places) and a ``userId`` drawn from
50,000 users (as ``bench_log``'s):

* a batch: ``/v1/batch`` with 20 calls, 15 of the 423-byte track and 5 of
  the 4 KB checkout-step track, the ``writeKey`` in the body after the
  batch (25 KB; the bodies of the before);
* a single call: one of those two calls (3 small to 1 large, the same
  mix) to ``/v1/track``, its ``writeKey`` in the body, ``Content-Type:
  text/plain``, as analytics.js sends one call a request.

Once a run, the ceilings:

1. The echo, through steps 2 and 3 below with the same bodies and
   senders; its CPU per 1,000 calls too.
2. The receiver: ``wrk -c32`` straight at it, with 1,000 webhook bodies of
   the same calls (as the core writes them: the call and its
   ``originalTimestamp``, ``sentAt``, ``receivedAt``), each with its valid
   signature. 32 connections is the relay's own cap per endpoint
   (``delivery.endpoint_concurrency``).

Then per backend: SQLite with ``synchronous = FULL``; with ``--postgres``
also Postgres (``scripts/postgres.sh``), one relay and then two relays on
one database (the sender's connections split between them):

1. Idle: a relay with delivery on and nothing stored; its resident memory
   (VmRSS, ``/proc/<pid>/status``) after ``IDLE_SECONDS``.
2. Ingest at saturation, an ingest-only relay (``[delivery] enabled =
   false``): ``wrk -c32`` for ``SECONDS`` with batches, then with single
   calls. Requests/s and calls/s; wrk's p50/p99 of the acknowledgement;
   the relay's CPU seconds (utime + stime, ``/proc/<pid>/stat``) per 1,000
   calls stored; its peak resident memory; SQL statements per call stored
   (``callpost_relay_sql_statements_total`` from ``/metrics``, with the
   admin token, over the pending calls that ``callpost-relay status``
   counts after the step less before it).
3. Ingest at a fixed rate, the same relay (one relay only): batches at
   ``BATCH_RATE`` requests/s (10,000 calls/s, the before's rate), single
   calls at ``SINGLE_RATE`` requests/s, ``SECONDS`` each; p50/p99.
4. Delivery: the relay restarted with delivery on, delivering what steps 2
   and 3 stored, for ``DRAIN_SECONDS`` or until none is left. Webhook
   POSTs/s (the relay's ``deliveries_total{outcome="delivered"}`` over the
   time), CPU seconds per 1,000 deliveries, peak resident memory under the
   backlog, SQL statements per delivered call. The receiver's counts show
   every POST verified.

SQL statements per call are ingest's (by body kind) plus delivery's, as
the before counted them (BEGIN and COMMIT included). To show what limits
a figure, the CPU each process used over a step (in cores: CPU seconds per
second) is printed beside it, the sender's included, and for ingest the
relay's commits (``callpost_relay_commit_seconds``): how many, how many
calls each, how long each took.

Where each call's cost goes, per step: the bytes written to the
write-ahead log per call stored or delivered (SQLite: the relay's
``callpost_relay_sqlite_wal_bytes_total``, every frame with its header;
Postgres: ``pg_current_wal_lsn()``) beside the row's own bytes, in 4 KB
pages, full-page images (Postgres' ``pg_stat_wal``), and WAL fsyncs per
second (Postgres' ``wal_sync``; SQLite's commits, one fsync each under
``synchronous = FULL``, checkpoints aside). With ``--profile``, Linux perf
samples the relay during ingest at saturation and during delivery, and its
CPU is sorted by thread and symbol into the store, signing, parsing and
checking, the HTTP stack, memory and the rest (``PROFILE_PARTS``). ``CALLPOST_BENCH_RELAY=path`` measures
another build of the relay (an older commit's) with the same steps. With
``--static``, SQLite's steps run once more with the static build
(``relay/deploy/image.sh``), and the ratios to the glibc build, the
binaries' sizes and the image's are printed.

Nothing here asserts a timing: a goal missed is reported, not failed. The
exit status is 1 only when something was wrong rather than slow: an HTTP
error, a bad signature, an acknowledged call not stored.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import hmac
import json
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "relay-bench"
BUILD = ROOT / "target" / "relay"
# CALLPOST_BENCH_RELAY: another build of the relay to measure with the same
# steps (an older commit's, for a before column).
RELAY_BIN = pathlib.Path(os.environ.get("CALLPOST_BENCH_RELAY") or BUILD / "callpost-relay").resolve()
ECHO_BIN = BUILD / "examples" / "bench_echo"
LOAD_BIN = BUILD / "examples" / "bench_load"
SMOKE = "--smoke" in sys.argv
POSTGRES = "--postgres" in sys.argv
# Samples the relay's CPU (Linux perf) during ingest at saturation and
# delivery, and sorts it into the store, signing, parsing and checking, the
# HTTP stack, memory and the rest.
PROFILE = "--profile" in sys.argv
# SQLite's steps once more with the static build (relay/deploy/image.sh:
# x86_64-unknown-linux-musl, what the image and the wheel hold), in the same
# run: the cost of musl (its allocator above all) as ratios; and the sizes
# of the binaries and of the image.
STATIC = "--static" in sys.argv
# SQLite's steps once more with the relay sealing what it stores
# (CALLPOST_RELAY_SECRET_KEY, a random key), in the same run: the cost of
# sealing at rest as ratios.
SEALED = "--sealed" in sys.argv
# The environment of every relay started: the key while the sealed steps
# run.
RELAY_ENV: dict[str, str] | None = None
STATIC_BIN = ROOT / "target" / "x86_64-unknown-linux-musl" / "relay" / "callpost-relay"
IMAGE_DIR = ROOT / "target" / "image"
SECONDS = 2 if SMOKE else int(os.environ.get("CALLPOST_BENCH_SECONDS", "20"))
# Delivery is measured over this long, not to the end of the backlog
# (ingest stores far faster than one receiver takes).
DRAIN_SECONDS = 2 * SECONDS
IDLE_SECONDS = 1 if SMOKE else 3
CONNECTIONS = 32
# The fixed rates: batches at the before's 10,000 calls/s; single calls at
# half the goal of 8,000 requests/s.
BATCH_RATE = 500
SINGLE_RATE = 4000
CALLS_PER_BATCH = 20
SECRET = "bench-secret"
WRITE_KEY = "bench-write-key"
TICK = os.sysconf("SC_CLK_TCK")

# One relay configuration for the bench and the relay tests.
sys.path.insert(0, str(ROOT / "relay" / "tests" / "e2e"))
from relay_config import ADMIN as ADMIN_TOKEN  # noqa: E402
from relay_config import config_text  # noqa: E402

# The before: the Python relay's last numbers, from BENCHMARKS.md, section
# "The relay (`benches/relay.sh`)" (two runs on 2026-11-23; ranges over
# them). That relay (uvicorn + aiohttp around the core) no longer exists to
# run. It measured batches only: no single-call, CPU or memory figures.
BEFORE: dict[str, dict[str, str]] = {
    "sqlite": {
        # 20,335-21,087 calls/s of 20-call batches; 1,054 requests/s is
        # the section's own anchor.
        "batch_rps": "1,017–1,054",
        "batch_calls": "20,335–21,087",
        "batch_sat": "p99 50–59",
        # "Latency at 10,000 calls/s (500 requests/s, open loop)".
        "batch_paced": "2.6–3.5 / 12.5–34",
        "posts": "1,940–2,059",
        "sql_batch": "1.08 (0.06 + 1.02–1.03)",
    },
    # Requests/s on Postgres: the section's calls/s ÷ 20.
    "postgres-1": {
        "batch_rps": "441–512",
        "batch_calls": "8,814–10,234",
        "batch_sat": "p99 165–169",
        "posts": "1,389–1,723",
        "sql_batch": "0.27–0.28",
    },
    "postgres-2": {
        "batch_rps": "464–488",
        "batch_calls": "9,285–9,767",
        "batch_sat": "p99 158–169",
        "posts": "2,167–2,518",
        "sql_batch": "0.27",
    },
}
# The upper end of each range, for the ratio to the before.
BEFORE_BEST = {
    "sqlite": {"batch_rps": 1054.0, "batch_calls": 21087.0, "posts": 2059.0},
    "postgres-1": {"batch_rps": 512.0, "batch_calls": 10234.0, "posts": 1723.0},
    "postgres-2": {"batch_rps": 488.0, "batch_calls": 9767.0, "posts": 2518.0},
}

# -- bodies ---------------------------------------------------------------


def fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((ROOT / "benches" / "fixtures" / f"{name}.json").read_text()))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def batch_template() -> str:
    """A /v1/batch body of 20 calls whose messageIds are __ID0__…__ID19__."""
    small, large = fixture("track_423"), fixture("track_4k")
    calls = []
    for i in range(CALLS_PER_BATCH):
        call = dict(small if i % 4 else large)
        call["messageId"] = f"__ID{i}__"
        call["userId"] = f"__U{i}__"
        calls.append(call)
    return compact({"batch": calls, "sentAt": "2026-11-22T11:59:00.000Z", "writeKey": WRITE_KEY})


def single_templates() -> list[str]:
    """/v1/track bodies, one call each (messageId __ID0__), in the batch's
    mix: the large call, then three small ones."""
    small, large = fixture("track_423"), fixture("track_4k")
    out = []
    for i in range(4):
        call = dict(small if i % 4 else large)
        call["messageId"] = "__ID0__"
        call["userId"] = "__U0__"
        call["sentAt"] = "2026-11-22T11:59:00.000Z"
        call["writeKey"] = WRITE_KEY
        out.append(compact(call))
    return out


def signed_webhooks(n: int = 1000) -> list[tuple[str, str]]:
    """(X-Signature, body) of ``n`` webhook POSTs of the same calls, as the
    core writes them: the call with its messageId and the times ingest
    adds."""
    small, large = fixture("track_423"), fixture("track_4k")
    out = []
    for i in range(n):
        call = dict(small if i % 4 else large)
        call["messageId"] = f"ceiling-{i}"
        call["originalTimestamp"] = call["timestamp"]
        call["sentAt"] = "2026-11-22T11:59:00.000Z"
        call["receivedAt"] = "2026-11-22T11:59:00.120Z"
        body = compact(call)
        out.append((hmac.new(SECRET.encode(), body.encode(), hashlib.sha1).hexdigest(), body))
    return out


# wrk's request script: bodies from a file, one a line, taken in turn; each
# __ID<k>__ becomes a messageId that starts with 8 random hex digits (as an
# SDK's UUIDs do: the ids' index is written at random places) and ends with
# <tag>-<n>-<k> (unique), each __U<k>__ one of 50,000 user ids (as
# bench_log's). The bodies are cut at their placeholders once, in init, and
# joined per request: a gsub over 25 KB per request made wrk itself the
# limit.
POST_LUA = (
    r"""
local templates, n, path, tag = {}, 0, nil, nil
local function split(t)
  local parts, keys, pos = {}, {}, 1
  while true do
    local s, e, kind, k = t:find("__(%u+)(%d+)__", pos)
    if not s then break end
    parts[#parts + 1] = t:sub(pos, s - 1)
    keys[#keys + 1] = {kind, k}
    pos = e + 1
  end
  parts[#parts + 1] = t:sub(pos)
  return {parts = parts, keys = keys}
end
function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then templates[#templates + 1] = split(line) end
  end
  path = args[2]
  wrk.method = "POST"
  wrk.headers["Content-Type"] = args[3]
  tag = args[4] .. "-"
  math.randomseed(os.time() + #tag)
end
function request()
  n = n + 1
  local t = templates[(n - 1) % #templates + 1]
  local id, parts, keys, buf = tag .. n .. "-", t.parts, t.keys, {}
  for i = 1, #keys do
    buf[2 * i - 1] = parts[i]
    local kind, k = keys[i][1], keys[i][2]
    if kind == "U" then
      buf[2 * i] = "user-" .. math.random(0, 49999)
    else
      buf[2 * i] = string.format("%08x-", math.random(0, 0x7fffffff)) .. id .. k
    end
  end
  buf[2 * #keys + 1] = parts[#parts]
  return wrk.format(nil, path, nil, table.concat(buf))
end
"""
    + r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d\n", summary.requests, summary.duration,
    e.status + e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
"""
)

# wrk's script for the receiver's ceiling: signed webhook POSTs, formatted
# once and sent in turn.
SIGNED_LUA = r"""
local items, n = {}, 0
function init(args)
  for line in io.lines(args[1]) do
    local tab = line:find("\t", 1, true)
    if tab then
      items[#items + 1] = wrk.format("POST", args[2],
        {["Content-Type"] = "application/json", ["X-Signature"] = line:sub(1, tab - 1)}, line:sub(tab + 1))
    end
  end
end
function request()
  n = n % #items + 1
  return items[n]
end
""" + POST_LUA[POST_LUA.index("function done") :]


class Bodies:
    """The files the senders read."""

    def __init__(self) -> None:
        self.batch = WORK / "batch.jsonl"
        self.batch.write_text(batch_template() + "\n")
        self.single = WORK / "single.jsonl"
        self.single.write_text("".join(t + "\n" for t in single_templates()))
        self.signed = WORK / "signed.tsv"
        self.signed.write_text("".join(f"{s}\t{b}\n" for s, b in signed_webhooks()))
        self.post_lua = WORK / "post.lua"
        self.post_lua.write_text(POST_LUA)
        self.signed_lua = WORK / "signed.lua"
        self.signed_lua.write_text(SIGNED_LUA)

    def kind(self, kind: str) -> tuple[pathlib.Path, str, str, int]:
        """(file, path, content type, calls a request) of a body kind."""
        if kind == "batch":
            return self.batch, "/v1/batch", "application/json", CALLS_PER_BATCH
        return self.single, "/v1/track", "text/plain", 1


# -- processes ------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, seconds."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    """Resident memory (VmRSS) of a process, MB."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Peak:
    """The largest resident memory of some processes, sampled every 100 ms
    until stopped."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peak = max(rss_mb(p) for p in pids)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.done.wait(0.1):
            try:
                self.peak = max(self.peak, max(rss_mb(p) for p in self.pids))
            except OSError:
                return

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return self.peak


def children_cpu() -> float:
    """CPU seconds of the children waited for so far (the senders)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Server:
    """A process under test, started and waited for until it names its
    port; its output is kept (the last lines, for errors) and never fills
    the pipe."""

    def __init__(self, args: list[str], pattern: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.log: deque[str] = deque(maxlen=40)
        self.proc = subprocess.Popen(
            args, cwd=WORK, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.port = self.wait(pattern)
        threading.Thread(target=self.drain, daemon=True).start()

    def wait(self, pattern: str, timeout: float = 60) -> int:
        assert self.proc.stdout is not None
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.args[0]} exited ({self.proc.returncode}):\n" + "".join(self.log))
                continue
            self.log.append(line)
            m = re.search(pattern, line)
            if m:
                return int(m.group(1))
        raise RuntimeError(f"{self.args[0]} named no port within {timeout} s:\n" + "".join(self.log))

    def drain(self) -> None:
        for line in self.proc.stdout or ():
            self.log.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss(self) -> float:
        return rss_mb(self.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def get(url: str, token: str | None = None) -> str:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return str(r.read().decode())


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples that carry ``labels`` (OpenMetrics
    text)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(4))
    return total


class Relay(Server):
    """The native relay, run directly with a configuration file."""

    def __init__(self, config: pathlib.Path) -> None:
        super().__init__(
            [str(RELAY_BIN), "--config", str(config)],
            r"callpost relay listening on http://127\.0\.0\.1:(\d+)",
            env=RELAY_ENV,
        )

    def counters(self) -> dict[str, float]:
        text = get(f"http://127.0.0.1:{self.port}/metrics", ADMIN_TOKEN)
        return {
            "statements": metric(text, "callpost_relay_sql_statements_total"),
            "delivered": metric(text, "callpost_relay_deliveries_total", outcome="delivered"),
            "commits": metric(text, "callpost_relay_commit_seconds_count"),
            "commit_seconds": metric(text, "callpost_relay_commit_seconds_sum"),
            "wal_bytes": metric(text, "callpost_relay_sqlite_wal_bytes_total"),
        }


def start_all(configs: list[pathlib.Path]) -> list[Relay]:
    started: list[Relay] = []
    try:
        for c in configs:
            started.append(Relay(c))
    except BaseException:
        for r in started:
            r.stop()
        raise
    return started


# -- senders --------------------------------------------------------------


def wrk(port: int, script: pathlib.Path, args: list[str], connections: int, seconds: int) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), f"http://127.0.0.1:{port}", "--", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    m = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    if not m:
        raise RuntimeError(f"wrk gave no result:\n{out}")
    requests, duration_us, errors, p50, p99, p999 = map(int, m.groups())
    return dict(
        requests=requests,
        rps=requests / (duration_us / 1e6),
        errors=errors,
        p50_ms=p50 / 1000,
        p99_ms=p99 / 1000,
        p999_ms=p999 / 1000,
    )


def paced(port: int, bodies: Bodies, kind: str, rate: float, seconds: int, tag: str) -> dict[str, float]:
    file, path, ctype, _ = bodies.kind(kind)
    out = subprocess.run(
        [
            str(LOAD_BIN),
            "--url",
            f"http://127.0.0.1:{port}{path}",
            "--rate",
            str(rate),
            "--seconds",
            str(seconds),
            "--content-type",
            ctype,
            "--tag",
            tag,
            str(file),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    m = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    if not m:
        raise RuntimeError(f"bench_load gave no result:\n{out}")
    requests, errors, p50, p99, p999, top, lag = map(int, m.groups())
    return dict(
        requests=requests,
        rps=rate,
        errors=errors,
        p50_ms=p50 / 1000,
        p99_ms=p99 / 1000,
        p999_ms=p999 / 1000,
        max_ms=top / 1000,
        lag_p99_ms=lag / 1000,
    )


def split_wrk(servers: list[Server], bodies: Bodies, kind: str, tag: str) -> dict[str, float]:
    """wrk at every server at once, the connections split between them:
    summed requests/s, the worst percentiles."""
    file, path, ctype, _ = bodies.kind(kind)
    results: list[dict[str, float]] = [{} for _ in servers]
    failed: list[BaseException] = []

    def one(k: int) -> None:
        try:
            results[k] = wrk(
                servers[k].port,
                bodies.post_lua,
                [str(file), path, ctype, f"{tag}{k}"],
                CONNECTIONS // len(servers),
                SECONDS,
            )
        except BaseException as e:
            failed.append(e)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(servers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]
    return dict(
        requests=sum(r["requests"] for r in results),
        rps=sum(r["rps"] for r in results),
        errors=sum(r["errors"] for r in results),
        p50_ms=max(r["p50_ms"] for r in results),
        p99_ms=max(r["p99_ms"] for r in results),
        p999_ms=max(r["p999_ms"] for r in results),
    )


def measured(
    servers: list[Server], send: Callable[[], dict[str, float]], db: Backend | None = None
) -> dict[str, float]:
    """``send()`` with the servers' CPU, peak memory and (relays) counters
    around it, the sender's CPU, and the database's WAL (Postgres: its own
    statistics; SQLite: the relay's count)."""
    relays = [s for s in servers if isinstance(s, Relay)]
    before = [r.counters() for r in relays]
    wal0 = db.wal() if db else {}
    cpu0 = sum(s.cpu() for s in servers)
    sender0 = children_cpu()
    peak = Peak([s.pid for s in servers])
    t0 = time.monotonic()
    result = send()
    wall = time.monotonic() - t0
    result["wall"] = wall
    result["rss_peak_mb"] = peak.stop()
    result["cpu"] = sum(s.cpu() for s in servers) - cpu0
    result["cores"] = result["cpu"] / wall
    result["sender_cores"] = (children_cpu() - sender0) / wall
    if relays:
        after = [r.counters() for r in relays]
        for key in ("statements", "delivered", "commits", "commit_seconds", "wal_bytes"):
            result[key] = sum(a[key] - b[key] for a, b in zip(after, before, strict=True))
    if db:
        wal1 = db.wal()
        for key, value in wal1.items():
            result[key] = value - wal0[key]
    return result


# What the profile's symbols are part of (first match wins; the store
# first, as ``profile_parts`` counts SQLite's threads whole to it): the
# kernel's own file system and network symbols, then the relay's crates.
PROFILE_PARTS = [
    (
        "store (SQLite, Postgres client, file system)",
        r"sqlite3|rusqlite|tokio_postgres|postgres_protocol|deadpool|"
        r"callpost_relay::store|ext4|jbd2|filemap|iomap|folio|fsync|blk_|xfs|pwrite|__x64_sys_fdatasync|file_write",
    ),
    ("signing (HMAC)", r"sha1|sha256|hmac|ring::|block_data_order"),
    (
        "parsing, checking, enriching (core)",
        r"callpost_core|serde_json|serde::|jiter|uuid|getrandom|chacha|rand::|"
        r"flate2|miniz|itoa|ryu|core::str::|from_utf8|unicode",
    ),
    (
        "HTTP stack (hyper, tokio, sockets)",
        r"hyper|httparse|http::|h2::|tokio|mio|epoll|tcp_|ip_|sock|skb|"
        r"__dev_|net_|netif|loopback|sys_sendto|sys_recvfrom|sys_write|sys_read|ep_poll|inet",
    ),
    ("memory (allocation, copies)", r"malloc|free|memcpy|memmove|memset|realloc|_int_|alloc::|cfree"),
]


class Perf:
    """Linux perf sampling one process until ``stop()``, which gives its
    CPU's shares by part (``profile:<part>`` keys)."""

    def __init__(self, pid: int, tag: str) -> None:
        self.data = WORK / f"perf-{tag}.data"
        self.proc = subprocess.Popen(
            ["perf", "record", "-q", "-F", "999", "-o", str(self.data), "-p", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> dict[str, float]:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait()
        return {f"profile:{name}": share for name, share in profile_parts(self.data).items()}


def profile_parts(data: pathlib.Path) -> dict[str, float]:
    """Shares of the samples in ``data`` by part (``PROFILE_PARTS``), the
    rest as "other", from perf's self time per thread and symbol: every
    sample of SQLite's threads (``callpost-relay-sqlite-*``, cut by the
    kernel to 15 characters) is the store's, whatever function it is in."""
    out = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "comm,sym", "--stdio", "-q"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    parts = {name: 0.0 for name, _ in PROFILE_PARTS} | {"other": 0.0}
    store = PROFILE_PARTS[0][0]
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
        if not m:
            continue
        share, comm, sym = float(m.group(1)), m.group(2), m.group(3)
        if comm.startswith("callpost-relay-"):
            name = store
        else:
            name = next((n for n, pattern in PROFILE_PARTS if re.search(pattern, sym)), "other")
        parts[name] += share
    return parts


# -- steps ----------------------------------------------------------------


def ingest_steps(
    servers: list[Server], bodies: Bodies, tag: str, paced_too: bool, db: Backend | None = None
) -> dict[str, dict[str, float]]:
    """Steps 2 and 3 against ``servers``: the echo, or ingest-only relays
    on ``db``, whose ``pending()`` counts the calls in (read between steps,
    never during one)."""
    out: dict[str, dict[str, float]] = {}
    label = {"batch": "batches", "single": "single calls"}
    stored = db.pending if db else None
    for kind in ("batch", "single"):
        calls = bodies.kind(kind)[3]
        before = stored() if stored else 0
        perf = Perf(servers[0].pid, f"{tag}-{kind}") if PROFILE and db else None
        r = measured(servers, functools.partial(split_wrk, servers, bodies, kind, f"{tag}-{kind}-sat"), db)
        if perf:
            r.update(perf.stop())
        acknowledged = (r["requests"] - r["errors"]) * calls
        r["calls_s"] = r["rps"] * calls
        if stored:
            # Requests in flight when wrk stopped are answered just after.
            time.sleep(0.5)
        r["stored"] = stored() - before if stored else acknowledged
        r["cpu_per_1000"] = r["cpu"] / max(r["stored"], 1) * 1000
        if "statements" in r:
            r["sql_per_call"] = r["statements"] / max(r["stored"], 1)
            # What a write costs and how many calls share it: with the
            # server's CPU below a core, commits are what limit ingest.
            r["commit_ms"] = r["commit_seconds"] / max(r["commits"], 1) * 1000
            r["calls_per_commit"] = r["stored"] / max(r["commits"], 1)
        if db:
            r["row_bytes"] = db.row_bytes()
            r["wal_per_call"] = r["wal_bytes"] / max(r["stored"], 1)
            # Pages: 4 KB on both (SQLite's default page, Postgres' 8 KB
            # blocks counted as the bytes they wrote).
            r["pages_per_call"] = r["wal_per_call"] / 4096
            # Postgres counts its WAL fsyncs; SQLite under FULL makes one
            # a commit (checkpoints aside).
            r["fsyncs_s"] = r.get("syncs", r["commits"]) / r["wall"]
        # Requests in flight when wrk's time ran out are answered and stored
        # after it stops counting: more may be stored, never fewer.
        r["lost"] = max(acknowledged - r["stored"], 0)
        out[f"{kind}_sat"] = r
        print(
            f"  {label[kind]} at saturation: {r['rps']:,.0f} requests/s = {r['calls_s']:,.0f} calls/s, p50 {r['p50_ms']:.2f} ms, "
            f"p99 {r['p99_ms']:.2f} ms; {r['errors']:.0f} errors; server {r['cores']:.2f} cores "
            f"({r['cpu_per_1000']:.3f} CPU-s per 1,000 calls), sender {r['sender_cores']:.2f} cores; "
            f"peak RSS {r['rss_peak_mb']:.1f} MB"
            + (
                f"; {r['sql_per_call']:.3f} SQL statements per call; {r['commits']:,.0f} commits of "
                f"{r['calls_per_commit']:.1f} calls, {r['commit_ms']:.2f} ms each"
                if "sql_per_call" in r
                else ""
            )
            + (
                f"; WAL {r['wal_per_call']:,.0f} B per call ({r['wal_per_call'] / r['row_bytes']:.2f}× its "
                f"{r['row_bytes']:,.0f} B row), {r['pages_per_call']:.2f} pages"
                + (f", {r['wal_fpi'] / max(r['stored'], 1):.2f} full-page images" if "wal_fpi" in r else "")
                + f" per call; {r['fsyncs_s']:,.0f} WAL fsyncs/s"
                if "wal_per_call" in r
                else ""
            )
        )
        if PROFILE and db:
            parts = "; ".join(f"{k[8:]} {v:.1f}%" for k, v in r.items() if k.startswith("profile:"))
            print(f"    relay CPU by part: {parts}")
    if paced_too:
        for kind, rate in (("batch", BATCH_RATE), ("single", SINGLE_RATE)):
            r = measured(
                servers, functools.partial(paced, servers[0].port, bodies, kind, rate, SECONDS, f"{tag}-{kind}-paced")
            )
            out[f"{kind}_paced"] = r
            print(
                f"  {label[kind]} at {rate:,} requests/s (open loop): p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
                f"p99.9 {r['p999_ms']:.2f} ms, max {r['max_ms']:.1f} ms; {r['errors']:.0f} errors; "
                f"server {r['cores']:.2f} cores; sender timer lag p99 {r['lag_p99_ms']:.2f} ms"
            )
    return out


def receiver_counts(port: int) -> dict[str, int]:
    return {k: int(v) for k, v in json.loads(get(f"http://127.0.0.1:{port}/count")).items()}


class Backend:
    """One database for the relays under test: a SQLite file, or a fresh
    database on the Postgres cluster."""

    def __init__(self, kind: str, admin_url: str | None = None) -> None:
        self.kind = kind
        if kind == "sqlite":
            db = WORK / "relay.db"
            for suffix in ("", "-wal", "-shm"):
                pathlib.Path(f"{db}{suffix}").unlink(missing_ok=True)
            self.url = f"sqlite:///{db}"
        else:
            assert admin_url
            psql = shutil.which("psql") or "psql"
            for sql in ("DROP DATABASE IF EXISTS callpost_bench WITH (FORCE)", "CREATE DATABASE callpost_bench"):
                subprocess.run([psql, "-X", "-q", "-d", admin_url, "-c", sql], check=True, capture_output=True)
            self.url = admin_url.rsplit("/", 1)[0] + "/callpost_bench"
        subprocess.run([str(RELAY_BIN), "migrate", "--database", self.url], cwd=WORK, check=True, capture_output=True)

    def pending(self) -> int:
        out = subprocess.run(
            [str(RELAY_BIN), "status", "--json", "--database", self.url],
            cwd=WORK,
            env=RELAY_ENV,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return int(json.loads(out)["pending"])

    def sql(self, query: str) -> str:
        """One value, read outside the relay (SQLite: the standard library's
        module, read-only; Postgres: psql)."""
        if self.kind == "sqlite":
            import sqlite3

            con = sqlite3.connect(f"file:{WORK / 'relay.db'}?mode=ro", uri=True)
            try:
                return str(con.execute(query).fetchone()[0])
            finally:
                con.close()
        return subprocess.run(
            [shutil.which("psql") or "psql", "-X", "-q", "-A", "-t", "-d", self.url, "-c", query],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    def row_bytes(self) -> float:
        """A stored call's bytes: its row's columns, text as UTF-8 and
        integers as 8 bytes (what the row holds, before the database's own
        page and index overhead)."""

        # SQLite's length() counts a text's characters, a blob's bytes.
        def size(c: str) -> str:
            return f"octet_length({c})" if self.kind == "postgres" else f"length(CAST({c} AS BLOB))"

        texts = "source message_id destination kind message user_id anonymous_id event trace_parent batch"
        total = " + ".join(f"coalesce({size(c)}, 0)" for c in texts.split())
        return float(self.sql(f"SELECT avg({total} + 8 * 8) FROM deliveries") or 0)

    def wal(self) -> dict[str, float]:
        """Postgres' WAL so far (the server's; nothing else writes during
        a step): bytes, full-page images, fsyncs. SQLite's is the relay's
        count (``callpost_relay_sqlite_wal_bytes_total``)."""
        if self.kind == "sqlite":
            return {}
        # The statistics are flushed at most once a second.
        time.sleep(1.1)
        row = self.sql(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') || ' ' || wal_fpi || ' ' || wal_sync FROM pg_stat_wal"
        )
        lsn, fpi, sync = (float(v) for v in row.split())
        return {"wal_bytes": lsn, "wal_fpi": fpi, "syncs": sync}

    def config(self, recv_port: int, name: str, deliver: bool) -> pathlib.Path:
        path = WORK / f"{name}-{'deliver' if deliver else 'ingest'}.toml"
        # The relay tests' configuration, with the bench's keys, the
        # stricter of the two synchronous modes, and delivery on or off.
        extra = f"""
[storage]
synchronous = "FULL"

[delivery]
enabled = {"true" if deliver else "false"}
"""
        text = config_text(
            self.url, [f"http://127.0.0.1:{recv_port}/hook"], secret=SECRET, write_key=WRITE_KEY, extra=extra
        )
        path.write_text('listen = "127.0.0.1:0"\n' + text)
        return path


def run_backend(backend: Backend, relays: int, recv_port: int, bodies: Bodies) -> dict[str, Any]:
    """Steps 1 to 4 on one backend with ``relays`` relays."""
    name = f"{backend.kind}" if backend.kind == "sqlite" else f"{backend.kind}, {relays} relay{'s' * (relays > 1)}"
    print(f"\n{name}")
    ingest_cfg = [backend.config(recv_port, f"{backend.kind}-{k}", False) for k in range(relays)]
    deliver_cfg = [backend.config(recv_port, f"{backend.kind}-{k}", True) for k in range(relays)]
    res: dict[str, Any] = {"name": name, "key": "sqlite" if backend.kind == "sqlite" else f"postgres-{relays}"}

    started = start_all(deliver_cfg)
    try:
        time.sleep(IDLE_SECONDS)
        res["rss_idle_mb"] = max(r.rss() for r in started)
    finally:
        for r in started:
            r.stop()
    print(f"  idle, delivery on, nothing stored: RSS {res['rss_idle_mb']:.1f} MB")

    started = start_all(ingest_cfg)
    try:
        res.update(ingest_steps(list(started), bodies, f"{backend.kind}{relays}", relays == 1, backend))
    finally:
        for r in started:
            r.stop()
    backlog = backend.pending()

    verified = receiver_counts(recv_port)
    started = start_all(deliver_cfg)
    try:

        def drain() -> dict[str, float]:
            t0 = time.monotonic()
            base = sum(r.counters()["delivered"] for r in started)
            while time.monotonic() - t0 < DRAIN_SECONDS:
                time.sleep(0.2)
                if sum(r.counters()["delivered"] for r in started) - base >= backlog:
                    break
            return {}

        perf = Perf(started[0].pid, f"{backend.kind}{relays}-delivery") if PROFILE and relays == 1 else None
        d = measured(list(started), drain, backend)
        if perf:
            d.update(perf.stop())
    finally:
        for r in started:
            r.stop()
    got = receiver_counts(recv_port)
    took = d["wall"]
    d["backlog"] = backlog
    d["posts_s"] = d["delivered"] / took if took else 0.0
    d["cpu_per_1000"] = d["cpu"] / max(d["delivered"], 1) * 1000
    d["sql_per_call"] = d["statements"] / max(d["delivered"], 1)
    d["wal_per_call"] = d["wal_bytes"] / max(d["delivered"], 1)
    d["verified"] = got["verified"] - verified["verified"]
    d["bad"] = got["bad"] - verified["bad"]
    res["delivery"] = d
    print(
        f"  delivery of a backlog of {backlog:,} calls: {d['posts_s']:,.0f} webhook POSTs/s "
        f"({d['delivered']:,.0f} in {took:.1f} s); relay {d['cores']:.2f} cores "
        f"({d['cpu_per_1000']:.3f} CPU-s per 1,000 deliveries), peak RSS {d['rss_peak_mb']:.1f} MB; "
        f"{d['sql_per_call']:.3f} SQL statements per delivery; WAL {d['wal_per_call']:,.0f} B per delivery; receiver: {d['verified']:,} verified, "
        f"{d['bad']} bad signatures"
    )
    if PROFILE and relays == 1:
        parts = "; ".join(f"{k[8:]} {v:.1f}%" for k, v in d.items() if k.startswith("profile:"))
        print(f"    relay CPU by part: {parts}")
    return res


# -- the table ------------------------------------------------------------


def num(v: float) -> str:
    return f"{v:,.0f}"


def ms(r: dict[str, float]) -> str:
    return f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "—"


def verdict(checks: list[tuple[str, bool]]) -> str:
    missed = [what for what, ok in checks if not ok]
    return "met" if not missed else "missed: " + ", ".join(missed)


def table(res: dict[str, Any], echo: dict[str, dict[str, float]], receiver: dict[str, float]) -> list[str]:
    key = res["key"]
    before = BEFORE[key]
    best = BEFORE_BEST[key]
    sqlite = key == "sqlite"
    b, s, d = res["batch_sat"], res["single_sat"], res["delivery"]
    eb, es = echo["batch_sat"], echo["single_sat"]
    sql_goal = 1.1 if sqlite else 0.3
    rows: list[list[str]] = []

    def row(
        measure: str,
        ceiling: str,
        relay: str,
        vs_ceiling: str = "",
        was: str = "—",
        vs_was: str = "",
        goal: str = "",
        met: str = "",
    ) -> None:
        rows.append([measure, ceiling, relay, vs_ceiling, was, vs_was, goal, met])

    row(
        "batches of 20: requests/s (wrk -c32)",
        num(eb["rps"]),
        num(b["rps"]),
        ratio(b["rps"], eb["rps"]),
        before.get("batch_rps", "—"),
        ratio(b["rps"], best["batch_rps"]),
        "≥ 0.5× echo",
        verdict([("0.5× echo", b["rps"] >= 0.5 * eb["rps"])]),
    )
    row(
        "batches of 20: calls/s",
        num(eb["calls_s"]),
        num(b["calls_s"]),
        ratio(b["calls_s"], eb["calls_s"]),
        before.get("batch_calls", "—"),
        ratio(b["calls_s"], best["batch_calls"]),
        "≥ 100,000 (SQLite, FULL)" if sqlite else "≥ 60,000",
        verdict([("100,000", b["calls_s"] >= 100_000)]) if sqlite else verdict([("60,000", b["calls_s"] >= 60_000)]),
    )
    row(
        "single calls to /v1/track: requests/s (wrk -c32)",
        num(es["rps"]),
        num(s["rps"]),
        ratio(s["rps"], es["rps"]),
        "—",
        "",
        "≥ 0.5× echo" if sqlite else "",
        verdict([("0.5× echo", s["rps"] >= 0.5 * es["rps"])]) if sqlite else "",
    )
    row("batches: p50 / p99 ms at saturation", ms(eb), ms(b), "", before.get("batch_sat", "—"))
    row("single calls: p50 / p99 ms at saturation", ms(es), ms(s))

    def paced_ms(of: dict[str, dict[str, float]], kind: str, rate: int) -> str:
        # A rate over what the server took at saturation builds a queue
        # that only grows: its latencies measure the queue, not the server.
        over = rate > of[f"{kind}_sat"]["rps"]
        return ms(of[f"{kind}_paced"]) + (" (rate over capacity)" if over else "")

    if "batch_paced" in res:
        row(
            f"batches: p50 / p99 ms at {BATCH_RATE:,} requests/s (open loop)",
            paced_ms(echo, "batch", BATCH_RATE),
            paced_ms(res, "batch", BATCH_RATE),
            "",
            before.get("batch_paced", "—"),
        )
        row(
            f"single calls: p50 / p99 ms at {SINGLE_RATE:,} requests/s (open loop)",
            paced_ms(echo, "single", SINGLE_RATE),
            paced_ms(res, "single", SINGLE_RATE),
        )
    row(
        "CPU seconds per 1,000 calls: batches",
        f"{eb['cpu_per_1000']:.3f}",
        f"{b['cpu_per_1000']:.3f}",
        ratio(b["cpu_per_1000"], eb["cpu_per_1000"]),
    )
    row(
        "CPU seconds per 1,000 calls: single calls",
        f"{es['cpu_per_1000']:.3f}",
        f"{s['cpu_per_1000']:.3f}",
        ratio(s["cpu_per_1000"], es["cpu_per_1000"]),
    )
    row(
        "delivery: webhook POSTs/s (ceiling: the receiver's)",
        num(receiver["rps"]),
        num(d["posts_s"]),
        ratio(d["posts_s"], receiver["rps"]),
        before.get("posts", "—"),
        ratio(d["posts_s"], best["posts"]),
        "≥ 0.8× receiver",
        verdict([("0.8× receiver", d["posts_s"] >= 0.8 * receiver["rps"])]),
    )
    row("CPU seconds per 1,000 deliveries", "", f"{d['cpu_per_1000']:.3f}")
    for kind, r in (("batches", b), ("single calls", s)):
        row(
            f"WAL bytes per call stored, {kind} (÷ the row's bytes)",
            "",
            f"{r['wal_per_call']:,.0f} ({r['wal_per_call'] / r['row_bytes']:.2f}×)",
            "",
            "—",
            "",
            "≤ 3× the row",
            verdict([("3×", r["wal_per_call"] <= 3 * r["row_bytes"])]),
        )
    row("WAL bytes per delivery", "", f"{d['wal_per_call']:,.0f}")
    row(
        "WAL fsyncs/s at saturation, batches / single calls",
        "",
        " / ".join(f"{r['fsyncs_s']:,.0f}" for r in (b, s)),
    )
    if PROFILE:
        for kind, r in (("batches", b), ("single calls", s)):
            row(
                f"relay CPU by part, {kind} (perf samples)",
                "",
                "; ".join(f"{k[8:]} {v:.0f}%" for k, v in r.items() if k.startswith("profile:")),
            )
    row(
        "resident memory, idle (MB)",
        "",
        f"{res['rss_idle_mb']:.1f}",
        "",
        "—",
        "",
        "≤ 64",
        verdict([("64 MB", res["rss_idle_mb"] <= 64)]),
    )
    row(
        "resident memory, peak, ingest at saturation (MB)",
        f"{max(eb['rss_peak_mb'], es['rss_peak_mb']):.1f}",
        f"{max(b['rss_peak_mb'], s['rss_peak_mb']):.1f}",
    )
    row(f"resident memory, peak, delivering a backlog of {num(d['backlog'])} calls (MB)", "", f"{d['rss_peak_mb']:.1f}")
    for kind, r in (("batches", b), ("single calls", s)):
        total = r["sql_per_call"] + d["sql_per_call"]
        row(
            f"SQL statements per call, {kind} (ingest + delivery)",
            "",
            f"{total:.2f} ({r['sql_per_call']:.3f} + {d['sql_per_call']:.3f})",
            "",
            before.get("sql_batch", "—") if kind == "batches" else "—",
            "",
            f"≤ {sql_goal}",
            verdict([(f"{sql_goal}", total <= sql_goal)]),
        )
    row(
        "ingest commits at saturation: calls per commit, batches / single calls",
        "",
        f"{b['calls_per_commit']:.1f} / {s['calls_per_commit']:.1f}",
    )
    row(
        "ingest commits at saturation: mean ms, batches / single calls",
        "",
        f"{b['commit_ms']:.2f} / {s['commit_ms']:.2f}",
    )
    head = [
        "measure",
        "ceiling (native echo)",
        "native relay",
        "relay ÷ ceiling",
        "Python relay (before)",
        "relay ÷ before",
        "goal",
        "met?",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


# -- main -----------------------------------------------------------------


def problems(res: dict[str, Any]) -> list[str]:
    """What went wrong (not slow) in one backend's run."""
    out = []
    for step in ("batch_sat", "single_sat", "batch_paced", "single_paced"):
        r = res.get(step)
        if r and r["errors"]:
            out.append(f"{res['name']}: {step}: {r['errors']:.0f} HTTP errors")
        if r and r.get("lost"):
            out.append(f"{res['name']}: {step}: {r['lost']:.0f} acknowledged calls not stored")
    d = res["delivery"]
    if d["bad"]:
        out.append(f"{res['name']}: delivery: {d['bad']} bad signatures")
    # A delivery answered while its relay stopped is sent again later (at
    # least once), so the receiver may count more than were delivered.
    if d["verified"] < d["delivered"]:
        out.append(f"{res['name']}: delivery: {d['delivered']:.0f} delivered but {d['verified']} verified")
    return out


def describe() -> str:
    """Which relay is measured: the binary's build time and the tree's
    commit, marked when relay/ or core/ had changes not committed."""
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(RELAY_BIN.stat().st_mtime))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "relay", "core"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"{os.path.relpath(RELAY_BIN, ROOT)} built {built}"
    return f"{os.path.relpath(RELAY_BIN, ROOT)} built {built}, tree at {head}" + (
        " with uncommitted changes in relay/ or core/" if dirty else ""
    )


def sealed_report(plain: dict[str, Any], sealed: dict[str, Any]) -> list[str]:
    """Sealed at rest against plain, SQLite, same run."""

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}×" if b else "—"

    p, s = plain, sealed
    return [
        "\nsealed at rest ÷ plain, SQLite, this run:",
        f"  batches: {ratio(s['batch_sat']['calls_s'], p['batch_sat']['calls_s'])} calls/s, "
        f"{ratio(s['batch_sat']['cpu_per_1000'], p['batch_sat']['cpu_per_1000'])} CPU per call",
        f"  single calls: {ratio(s['single_sat']['rps'], p['single_sat']['rps'])} calls/s, "
        f"{ratio(s['single_sat']['cpu_per_1000'], p['single_sat']['cpu_per_1000'])} CPU per call",
        f"  delivery: {ratio(s['delivery']['posts_s'], p['delivery']['posts_s'])} POSTs/s, "
        f"{ratio(s['delivery']['cpu_per_1000'], p['delivery']['cpu_per_1000'])} CPU per delivery",
    ]


def static_report(glibc: dict[str, Any], static: dict[str, Any]) -> list[str]:
    """The static build against the glibc one, SQLite, same run; and sizes."""

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}×" if b else "—"

    g, s = glibc, static
    lines = [
        "\nthe static build (musl) ÷ the glibc build, SQLite, this run:",
        f"  batches: {ratio(s['batch_sat']['calls_s'], g['batch_sat']['calls_s'])} calls/s, "
        f"{ratio(s['batch_sat']['cpu_per_1000'], g['batch_sat']['cpu_per_1000'])} CPU per call",
        f"  single calls: {ratio(s['single_sat']['rps'], g['single_sat']['rps'])} calls/s, "
        f"{ratio(s['single_sat']['cpu_per_1000'], g['single_sat']['cpu_per_1000'])} CPU per call",
        f"  delivery: {ratio(s['delivery']['posts_s'], g['delivery']['posts_s'])} POSTs/s, "
        f"{ratio(s['delivery']['cpu_per_1000'], g['delivery']['cpu_per_1000'])} CPU per delivery",
        f"  resident memory idle: {g['rss_idle_mb']:.1f} MB glibc, {s['rss_idle_mb']:.1f} MB static",
        f"  binary: {RELAY_BIN.stat().st_size / 1e6:.1f} MB glibc (dynamic), {STATIC_BIN.stat().st_size / 1e6:.1f} MB static",
    ]
    for archive in sorted(IMAGE_DIR.glob("callpost-relay-*.tar")):
        packed = len(gzip.compress(archive.read_bytes(), 6))
        lines.append(
            f"  image {archive.name}: {archive.stat().st_size / 1e6:.1f} MB, {packed / 1e6:.1f} MB gzipped "
            f"(a registry stores its layer gzipped)"
        )
    return lines


def main() -> int:
    global RELAY_BIN, RELAY_ENV
    for tool, hint in (
        ("wrk", "benches/relay.sh installs it"),
        (str(RELAY_BIN), "benches/relay.sh builds it"),
        (str(ECHO_BIN), "benches/relay.sh builds it"),
        (str(LOAD_BIN), "benches/relay.sh builds it"),
    ):
        if shutil.which(tool) is None:
            print(f"{tool} is missing ({hint})", file=sys.stderr)
            return 1
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    bodies = Bodies()
    node_dir = ROOT / "target" / "bench-node"
    shutil.copy(ROOT / "benches" / "relay" / "receiver.mjs", node_dir / "relay_receiver.mjs")
    servers: list[Server] = []
    try:
        receiver = Server(["node", str(node_dir / "relay_receiver.mjs"), "0", SECRET], r"^(\d+)$")
        servers.append(receiver)
        cores = os.cpu_count()
        print(f"relay benchmark: {describe()}")
        print(
            f"  load average at the start: {os.getloadavg()[0]:.2f} (every process shares the cores: run it on a "
            f"quiet machine)"
        )
        print(
            f"  {cores} cores, {SECONDS} s a step, wrk -t1 -c{CONNECTIONS}; batches of "
            f"{CALLS_PER_BATCH} calls ({bodies.batch.stat().st_size - 1:,} B), single calls of "
            f"{min(len(t) for t in single_templates()):,}–{max(len(t) for t in single_templates()):,} B"
        )

        print("\nceiling: native echo (tokio + hyper 1, the relay's stack)")
        echo = Server([str(ECHO_BIN)], r"listening on http://127\.0\.0\.1:(\d+)")
        servers.append(echo)
        echo_res = ingest_steps([echo], bodies, "echo", paced_too=True)
        echo.stop()

        # Unmeasured: Node compiles its hot paths in the first second.
        wrk(receiver.port, bodies.signed_lua, [str(bodies.signed), "/hook"], CONNECTIONS, 1)
        before = receiver_counts(receiver.port)
        recv = measured(
            [receiver],
            lambda: wrk(receiver.port, bodies.signed_lua, [str(bodies.signed), "/hook"], CONNECTIONS, SECONDS),
        )
        after = receiver_counts(receiver.port)
        print(
            f"\nceiling: the receiver (Node, verifying each signature), wrk -c{CONNECTIONS} with signed webhook "
            f"bodies: {recv['rps']:,.0f} POSTs/s, p99 {recv['p99_ms']:.2f} ms; receiver {recv['cores']:.2f} cores, "
            f"sender {recv['sender_cores']:.2f}; {after['verified'] - before['verified']:,} verified, "
            f"{after['bad'] - before['bad']} bad"
        )
        bad_ceiling = after["bad"] - before["bad"] + recv["errors"]

        results = [run_backend(Backend("sqlite"), 1, receiver.port, bodies)]
        static: dict[str, Any] | None = None
        if STATIC:
            glibc_bin = RELAY_BIN
            RELAY_BIN = STATIC_BIN
            try:
                print(f"\nthe static build: {os.path.relpath(STATIC_BIN, ROOT)}")
                static = run_backend(Backend("sqlite"), 1, receiver.port, bodies)
            finally:
                RELAY_BIN = glibc_bin
        sealed: dict[str, Any] | None = None
        if SEALED:
            key = base64.b64encode(os.urandom(32)).decode()
            RELAY_ENV = dict(os.environ, CALLPOST_RELAY_SECRET_KEY=key)
            try:
                print("\nsealed at rest (CALLPOST_RELAY_SECRET_KEY)")
                sealed = run_backend(Backend("sqlite"), 1, receiver.port, bodies)
            finally:
                RELAY_ENV = None
        if POSTGRES:
            admin = subprocess.run(
                ["bash", str(ROOT / "scripts" / "postgres.sh"), "start"], check=True, capture_output=True, text=True
            ).stdout.strip()
            for n in (1, 2):
                results.append(run_backend(Backend("postgres", admin), n, receiver.port, bodies))

        for res in results:
            print(f"\n{res['name']}:\n")
            print("\n".join(table(res, echo_res, recv)))
        if POSTGRES:
            one, two = results[1], results[2]
            print(
                f"\npostgres, 2 relays ÷ 1 relay: batches {two['batch_sat']['calls_s'] / one['batch_sat']['calls_s']:.2f}×, "
                f"single calls {two['single_sat']['rps'] / one['single_sat']['rps']:.2f}×, delivery "
                f"{two['delivery']['posts_s'] / max(one['delivery']['posts_s'], 1):.2f}× "
                f"(on {cores} cores shared with the sender, the receiver and Postgres)"
            )

        if static is not None:
            print("\n".join(static_report(results[0], static)))
        if sealed is not None:
            print("\n".join(sealed_report(results[0], sealed)))

        extra = [r for r in (static, sealed) if r]
        wrong = [p for res in results + extra for p in problems(res)]
        if bad_ceiling:
            wrong.append(f"the receiver's ceiling: {bad_ceiling} errors or bad signatures")
        for step, r in echo_res.items():
            if r["errors"]:
                wrong.append(f"echo: {step}: {r['errors']:.0f} HTTP errors")
        if wrong:
            print("\nsomething went wrong (not a timing):\n  " + "\n  ".join(wrong))
        return 1 if wrong else 0
    finally:
        for p in servers:
            p.stop()


if __name__ == "__main__":
    sys.exit(main())
