"""The relay benchmark: sender (wrk), relay and receiver (Node, verifying
every signature) on one machine, in one run, with ratios.

    bash benches/relay.sh [--smoke] [--postgres]

With ``--postgres`` the SQLite runs are followed by the same runs on
Postgres (the throwaway cluster of scripts/postgres.sh), with one relay and
then two relays on the one database, and a table of both backends.

1. The ceiling: the same ASGI server (uvicorn, uvloop, httptools) serving
   a bare echo app, posted the same batches by wrk.
2. Ingest: an ingest-only relay (``[delivery] enabled = false``) with
   ``synchronous = FULL``, posted batches of 20 realistic calls (15 of the
   423-byte checkout-step track, 5 of the 4 KB one, from
   ``benches/fixtures``), each with fresh message ids. Calls/s, the
   acknowledgement's latency (wrk's percentiles), and the ratio to the
   echo.
3. Delivery: the relay restarted with deliveries on, delivering what step
   2 stored to the receiver for 40 s. Webhook POSTs/s; every one verified.
4. SQL statements per call across steps 2 and 3, from the relay's own
   counter (``callpost_relay_sql_statements_total``).
5. Postgres, two relays: both ingest-only, each posted by its own wrk
   (half the connections each), then both delivering what they stored.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "relay-bench"
PY = sys.executable
SMOKE = "--smoke" in sys.argv
POSTGRES = "--postgres" in sys.argv
SECONDS = 3 if SMOKE else int(os.environ.get("CALLPOST_BENCH_SECONDS", "20"))
# Delivery is measured over this long, not to the end of what ingest
# stored (at 2,000 POSTs/s, 20 s of ingest takes minutes to deliver).
DRAIN_SECONDS = 2 * SECONDS
CONNECTIONS = 32
SECRET = "bench-secret"
WRITE_KEY = "bench-write-key"


def batch_template() -> str:
    """A /v1/batch body of 20 calls whose messageIds are __ID0__…__ID19__."""
    fx = ROOT / "benches" / "fixtures"
    small = json.loads((fx / "track_423.json").read_text())
    large = json.loads((fx / "track_4k.json").read_text())
    calls = []
    for i in range(20):
        call = dict(small if i % 4 else large)
        call["messageId"] = f"__ID{i}__"
        calls.append(call)
    return json.dumps({"batch": calls, "sentAt": "2026-11-22T11:59:00.000Z", "writeKey": WRITE_KEY},
                      separators=(",", ":"), ensure_ascii=False)


WRK_SCRIPT = r"""
local template
local n = 0
local prefix
function init(args)
  local f = io.open(args[1], "r"); template = f:read("*a"); f:close()
  prefix = args[2] .. "-" .. tostring(math.random(1, 1e9)) .. "-"
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end
function request()
  n = n + 1
  local id = prefix .. n .. "-"
  local body = template:gsub("__ID(%d+)__", function(i) return id .. i end)
  return wrk.format(nil, "/v1/batch", nil, body)
end
function done(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d %d %d %d\n", summary.requests, summary.duration,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
"""

ECHO_APP = '''
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            await send({"type": m["type"] + ".complete"})
            if m["type"] == "lifespan.shutdown":
                return
    more = True
    while more:
        m = await receive()
        more = m.get("more_body", False)
    body = b'{"success":true}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"16")]})
    await send({"type": "http.response.body", "body": body})
'''


def wait_port(proc: subprocess.Popen[str], pattern: str, timeout: float = 30) -> int:
    deadline = time.time() + timeout
    assert proc.stdout is not None
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise RuntimeError(f"process exited: {proc.args}")
            continue
        m = re.search(pattern, line)
        if m:
            return int(m.group(1))
    raise RuntimeError(f"no port from {proc.args}")


def wrk(port: int, template: pathlib.Path, tag: str, connections: int = CONNECTIONS) -> Dict[str, float]:
    script = WORK / "post.lua"
    script.write_text(WRK_SCRIPT)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{SECONDS}s", "--latency", "-s", str(script),
         f"http://127.0.0.1:{port}", "--", str(template), tag],
        check=True, capture_output=True, text=True,
    ).stdout
    m = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    assert m, out
    requests, duration_us, errors, p50, p99, p999 = map(int, m.groups())
    return dict(requests=requests, rps=requests / (duration_us / 1e6), errors=errors,
                p50_ms=p50 / 1000, p99_ms=p99 / 1000, p999_ms=p999 / 1000)


def paced(port: int, template: str, rate: float, seconds: float) -> Dict[str, float]:
    """Open-loop load: ``rate`` requests per second on a fixed schedule,
    each request's latency measured from its scheduled time (so a stall
    counts against every request it delays: no coordinated omission)."""
    import asyncio

    import aiohttp

    async def run() -> Dict[str, float]:
        latencies: List[float] = []
        errors = 0
        url = f"http://127.0.0.1:{port}/v1/batch"
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256)) as session:
            async def one(n: int, at: float) -> None:
                nonlocal errors
                body = bodies[n]
                delay = at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                try:
                    async with session.post(url, data=body, headers=headers) as r:
                        await r.read()
                        if r.status != 200:
                            errors += 1
                except aiohttp.ClientError:
                    errors += 1
                latencies.append(loop.time() - at)

            loop = asyncio.get_running_loop()
            total = int(rate * seconds)
            # Built before the schedule starts: building them on the way
            # made the sender itself late, and that counted as latency.
            bodies = []
            for n in range(total):
                body = template
                for i in range(20):
                    body = body.replace(f"__ID{i}__", f"paced-{n}-{i}", 1)
                bodies.append(body.encode())
            start = loop.time() + 0.5
            await asyncio.gather(*(one(n, start + n / rate) for n in range(total)))
        latencies.sort()
        pick = lambda q: latencies[min(int(q * len(latencies)), len(latencies) - 1)] * 1000  # noqa: E731
        return dict(requests=total, rps=rate, errors=errors, p50_ms=pick(0.5), p99_ms=pick(0.99), p999_ms=pick(0.999))

    return asyncio.run(run())


def get(url: str, token: Optional[str] = None) -> Any:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read().decode()
    return json.loads(body) if body.startswith("{") else body


def statements(port: int) -> int:
    text = get(f"http://127.0.0.1:{port}/metrics")
    m = re.search(r"^callpost_relay_sql_statements_total (\d+)", text, re.M)
    assert m
    return int(m.group(1))


def relay(config: pathlib.Path, deliver: bool) -> Tuple[subprocess.Popen[str], int]:
    env = dict(os.environ, CALLPOST_RELAY_DELIVER="true" if deliver else "false")
    proc = subprocess.Popen([PY, "-m", "callpost", "relay", "--config", str(config)], cwd=WORK, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = wait_port(proc, r"listening on http://127\.0\.0\.1:(\d+)")
    # The log goes on; nobody reads it, so it must not fill the pipe.
    threading.Thread(target=lambda: [None for _ in proc.stdout or ()], daemon=True).start()
    return proc, port


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


class Backend:
    """One database for the relays under test: a SQLite file, or a fresh
    database on the Postgres cluster."""

    def __init__(self, kind: str, admin_url: Optional[str] = None) -> None:
        self.kind = kind
        self.admin_url = admin_url
        if kind == "sqlite":
            self.url = f"sqlite:///{WORK}/relay.db"
        else:
            import psycopg

            assert admin_url
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute("DROP DATABASE IF EXISTS callpost_bench WITH (FORCE)")
                conn.execute("CREATE DATABASE callpost_bench")
            self.url = admin_url.rsplit("/", 1)[0] + "/callpost_bench"
            subprocess.run([PY, "-m", "callpost", "relay", "migrate", "--database", self.url], check=True,
                           capture_output=True)

    def pending(self) -> int:
        sql = "SELECT count(*) FROM deliveries WHERE status = 0"
        if self.kind == "sqlite":
            with sqlite3.connect(WORK / "relay.db") as db:
                return int(db.execute(sql).fetchone()[0])
        import psycopg

        with psycopg.connect(self.url) as conn:
            row = conn.execute(sql).fetchone()
            assert row
            return int(row[0])

    def config(self, recv_port: int, name: str) -> pathlib.Path:
        path = WORK / f"{name}.toml"
        path.write_text(f"""
listen = "127.0.0.1:0"
database = "{self.url}"
admin_token = "bench-admin"
log_level = "INFO"

[[sources]]
name = "bench"
write_keys = ["{WRITE_KEY}"]
[sources.webhooks]
urls = ["http://127.0.0.1:{recv_port}/hook"]
shared_secret = "{SECRET}"

[security]
allow_private_networks = true

[storage]
synchronous = "FULL"
""")
        return path


def ingest(configs: List[pathlib.Path], template: pathlib.Path, tag: str) -> Tuple[Dict[str, float], int]:
    """wrk against each relay at once (ingest-only), the connections split
    between them: summed requests/s, the worst p99, SQL statements."""
    started = [relay(c, deliver=False) for c in configs]
    before = sum(statements(port) for _, port in started)
    results: List[Dict[str, float]] = [{} for _ in started]

    def one(k: int) -> None:
        results[k] = wrk(started[k][1], template, f"{tag}{k}", CONNECTIONS // len(started))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(started))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    used = sum(statements(port) for _, port in started) - before
    for proc, _ in started:
        stop(proc)
    total = dict(rps=sum(r["rps"] for r in results), errors=sum(r["errors"] for r in results),
                 p50_ms=max(r["p50_ms"] for r in results), p99_ms=max(r["p99_ms"] for r in results),
                 p999_ms=max(r["p999_ms"] for r in results))
    return total, used


def drain(configs: List[pathlib.Path], backend: "Backend") -> Tuple[float, int, int]:
    """The relays delivering for up to DRAIN_SECONDS (or until nothing is
    pending): seconds, calls delivered, SQL statements."""
    pending = backend.pending()
    started = [relay(c, deliver=True) for c in configs]
    before = sum(statements(port) for _, port in started)
    t0 = time.time()
    while time.time() - t0 < DRAIN_SECONDS:
        if get(f"http://127.0.0.1:{started[0][1]}/admin/status", "bench-admin")["pending"] == 0:
            break
        time.sleep(0.2)
    took = time.time() - t0
    used = sum(statements(port) for _, port in started) - before
    for proc, _ in started:
        stop(proc)
    return took, pending - backend.pending(), used


def run_backend(backend: Backend, relays: int, recv_port: int, template: pathlib.Path, echo_rps: float,
                rows: List[Dict[str, Any]]) -> bool:
    name = f"{backend.kind}, {relays} relay{'s' if relays > 1 else ''}"
    configs = [backend.config(recv_port, f"{backend.kind}-{k}") for k in range(relays)]
    print(f"\n{name}")
    if relays == 1:
        proc, port = relay(configs[0], deliver=False)
        p = paced(port, template.read_text(), 500, SECONDS)
        stop(proc)
        print(f"  ingest at 10,000 calls/s (500 requests/s, open loop): p50 {p['p50_ms']:.1f} ms, "
              f"p99 {p['p99_ms']:.1f} ms, p99.9 {p['p999_ms']:.1f} ms; {p['errors']} errors")
    else:
        p = dict(errors=0)
    # Counted once the relays have stopped: requests in flight when wrk's
    # time ran out were still answered, and stored.
    already = backend.pending()
    i, ingest_statements = ingest(configs, template, f"{backend.kind}{relays}-")
    calls = backend.pending()
    print(f"  ingest at saturation (wrk -c{CONNECTIONS}): {i['rps']:.0f} requests/s = {i['rps'] * 20:.0f} calls/s, "
          f"p50 {i['p50_ms']:.1f} ms, p99 {i['p99_ms']:.1f} ms, p99.9 {i['p999_ms']:.1f} ms; "
          f"{i['errors']} errors; {calls - already} calls stored; {i['rps'] / echo_rps:.2f}x the echo's requests/s")
    verified = get(f"http://127.0.0.1:{recv_port}/count")
    took, delivered, delivery_statements = drain(configs, backend)
    got = get(f"http://127.0.0.1:{recv_port}/count")
    sent, bad = got["verified"] - verified["verified"], got["bad"] - verified["bad"]
    print(f"  delivery: {delivered / took:.0f} webhook POSTs/s ({delivered} of {calls} in {took:.1f} s); "
          f"receiver: {sent} verified, {bad} bad signatures")
    ingest_per_call = ingest_statements / max(calls - already, 1)
    delivery_per_call = delivery_statements / max(delivered, 1)
    print(f"  SQL statements per call: {ingest_per_call + delivery_per_call:.2f} (ingest {ingest_per_call:.2f}, "
          f"delivery {delivery_per_call:.2f}; BEGIN and COMMIT counted)")
    rows.append(dict(name=name, calls_s=i["rps"] * 20, p99=i["p99_ms"], posts_s=delivered / took,
                     statements=ingest_per_call + delivery_per_call))
    # A delivery answered while its relay stopped is released and sent
    # again later (at least once), so the receiver may count a few more.
    return bad == 0 and sent >= delivered and i["errors"] == 0 and p["errors"] == 0


def main() -> int:
    if shutil.which("wrk") is None:
        print("wrk is missing (benches/relay.sh installs it)", file=sys.stderr)
        return 1
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    template = WORK / "batch.json"
    template.write_text(batch_template())
    (WORK / "echo_app.py").write_text(ECHO_APP)
    node_dir = ROOT / "target" / "bench-node"
    shutil.copy(ROOT / "benches" / "relay" / "receiver.mjs", node_dir / "relay_receiver.mjs")
    receiver = subprocess.Popen(["node", str(node_dir / "relay_receiver.mjs"), "0", SECRET], stdout=subprocess.PIPE,
                                text=True)
    procs: List[subprocess.Popen[str]] = [receiver]
    try:
        recv_port = wait_port(receiver, r"^(\d+)$")
        cores = os.cpu_count()
        print(f"relay benchmark: {cores} cores, {SECONDS} s per run, wrk -c{CONNECTIONS}, batches of 20 calls "
              f"({template.stat().st_size} B)")

        echo = subprocess.Popen(
            [PY, "-m", "uvicorn", "echo_app:app", "--port", "0", "--no-access-log", "--loop", "uvloop",
             "--http", "httptools", "--log-level", "info"],
            cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(echo)
        echo_port = wait_port(echo, r"running on http://127\.0\.0\.1:(\d+)")
        e = wrk(echo_port, template, "echo")
        stop(echo)
        print(f"\nceiling, bare ASGI echo (uvicorn): {e['rps']:.0f} requests/s = {e['rps'] * 20:.0f} calls/s, "
              f"p50 {e['p50_ms']:.1f} ms, p99 {e['p99_ms']:.1f} ms")

        rows: List[Dict[str, Any]] = []
        ok = run_backend(Backend("sqlite"), 1, recv_port, template, e["rps"], rows)
        if POSTGRES:
            admin = subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh"), "start"], check=True,
                                   capture_output=True, text=True).stdout.strip()
            for n in (1, 2):
                ok = run_backend(Backend("postgres", admin), n, recv_port, template, e["rps"], rows) and ok
            print("\n| backend | ingest calls/s | p99 ack (wrk -c32) | delivery POSTs/s | SQL statements/call |")
            print("|---|---|---|---|---|")
            for r in rows:
                print(f"| {r['name']} | {r['calls_s']:,.0f} | {r['p99']:.1f} ms | {r['posts_s']:,.0f} | "
                      f"{r['statements']:.2f} |")
            one, two = rows[1], rows[2]
            print(f"\npostgres, 2 relays / 1 relay: ingest {two['calls_s'] / one['calls_s']:.2f}x, "
                  f"delivery {two['posts_s'] / one['posts_s']:.2f}x (on {cores} cores, shared with wrk, "
                  f"the receiver and Postgres)")
        return 0 if ok else 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
