"""callpost against its Python peers, interleaved in one process, on every
fixture in benches/fixtures/.

Peers: stdlib json + hmac, orjson + hmac, segment-analytics-python, and
for the Standard Webhooks scheme its reference library (standardwebhooks). Each
round runs every candidate once for `n` calls, in turn; the reported time is
the median round, so drift on the machine hits every candidate alike, and
every ratio comes from one run.

    python benches/compare_python.py [--smoke]
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import pathlib
import statistics
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import standardwebhooks

import callpost
import callpost.segment

SMOKE = "--smoke" in sys.argv
FIXTURES_DIR = pathlib.Path(__file__).parent / "fixtures"
NAMES = [
    "track_423",
    "track_4k",
    "identify_200_traits",
    "unicode_text",
    "number_arrays",
    "product_list_32k",
    "order_completed",
]
SECRET = b"whsec-bench"


def fixture(name: str, form: str = "") -> bytes:
    return (FIXTURES_DIR / f"{name}{form}.json").read_bytes()


def bench(candidates: dict[str, Callable[[], Any]], n: int, rounds: int) -> dict[str, float]:
    """Median seconds per call for each candidate, interleaved."""
    times: dict[str, list[float]] = {k: [] for k in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            t = time.perf_counter()
            for _ in range(n):
                fn()
            times[name].append((time.perf_counter() - t) / n)
    return {k: statistics.median(v) for k, v in times.items()}


def ratio(ours: float, theirs: float) -> float:
    """How many times faster callpost is (below 1: slower)."""
    return theirs / ours


def report(title: str, result: dict[str, float], ours: str) -> None:
    print(f"\n{title}")
    for name, t in result.items():
        r = "" if name == ours else f"  callpost {ratio(result[ours], t):.2f}x"
        print(f"  {name:<44} {t * 1e6:9.2f} us/call{r}")


def iterations(size: int) -> int:
    if SMOKE:
        return 20
    return max(200, min(20_000, 4_000_000 // max(size, 1)))


def from_dict(hooks: callpost.Webhooks, ours: str, call: dict[str, Any]) -> dict[str, Callable[[], object]]:
    return {
        # `.body`: the bytes to send, as the peers' `dumps` returns them
        # (the Request makes them on access).
        ours: lambda: hooks.request(call).body,
        "orjson.dumps + hmac": lambda: hmac.new(SECRET, orjson.dumps(call), hashlib.sha1).hexdigest(),
        "json.dumps + hmac": lambda: hmac.new(
            SECRET, json.dumps(call, separators=(",", ":"), ensure_ascii=False).encode(), hashlib.sha1
        ).hexdigest(),
    }


def from_bytes(hooks: callpost.Webhooks, ours: str, raw: bytes) -> dict[str, Callable[[], object]]:
    return {
        ours: lambda: hooks.request(raw).body,
        "orjson.loads + orjson.dumps + hmac": lambda: hmac.new(
            SECRET, orjson.dumps(orjson.loads(raw)), hashlib.sha1
        ).hexdigest(),
        "json.loads + json.dumps + hmac": lambda: hmac.new(
            SECRET, json.dumps(json.loads(raw), separators=(",", ":"), ensure_ascii=False).encode(), hashlib.sha1
        ).hexdigest(),
    }


def request_benches() -> list[tuple[str, float, float, float]]:
    """Per fixture: the dict, compact bytes and json.dumps bytes, each
    against orjson. Returns (fixture, dict ratio, bytes ratio, dumps ratio)."""
    hooks = callpost.Webhooks(["https://hooks.example.com/segment"], SECRET)
    summary = []
    for name in NAMES:
        compact = fixture(name)
        dumps = fixture(name, ".dumps")
        call = json.loads(compact)
        n = iterations(len(compact))
        rounds = 3 if SMOKE else 11
        body_len = len(hooks.request(call).body)
        ours = "callpost Webhooks.request(dict)"
        result = bench(from_dict(hooks, ours, call), n, rounds)
        report(f"{name}: webhook request from a dict ({len(compact)} B call, {body_len} B body)", result, ours)
        by_dict = ratio(result[ours], result["orjson.dumps + hmac"])
        # A forwarder receives the call as JSON bytes: the peers parse it too.
        by_bytes = []
        for form, raw in (("compact", compact), ("json.dumps", dumps)):
            ours_b = f"callpost Webhooks.request(bytes, {form})"
            result = bench(from_bytes(hooks, ours_b, raw), n, rounds)
            report(f"{name}: forwarding {len(raw)} bytes as {form} writes them", result, ours_b)
            by_bytes.append(ratio(result[ours_b], result["orjson.loads + orjson.dumps + hmac"]))
        summary.append((name, by_dict, by_bytes[0], by_bytes[1]))
    return summary


def standard_benches() -> None:
    """Standard Webhooks, against the reference library from PyPI: signing
    a webhook body (the three headers), and receiving one (checking the
    timestamp and signature, then parsing the body, which the reference's
    verify also does)."""
    for name in ("track_423", "identify_200_traits", "order_completed"):
        standard_bench(name)


def standard_bench(name: str) -> None:
    whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    reference = standardwebhooks.Webhook(whsec)
    hooks = callpost.Webhooks(["https://hooks.example.com/segment"], signature="standard", signing_secrets=[whsec])
    request = hooks.request(json.loads(fixture(name)))
    body, headers = request.body, dict(request.headers)
    text = body.decode()
    msg_id = headers["webhook-id"]
    stamp = datetime.datetime.fromtimestamp(int(headers["webhook-timestamp"]), tz=datetime.timezone.utc)
    n = iterations(len(body))
    rounds = 3 if SMOKE else 11
    ours = "callpost.sign_standard"
    result = bench(
        {
            ours: lambda: callpost.sign_standard(msg_id, body, whsec),
            "standardwebhooks Webhook.sign": lambda: reference.sign(msg_id, stamp, text),
        },
        n,
        rounds,
    )
    report(f"{name}: Standard Webhooks signature ({len(body)} B body)", result, ours)
    ours = "callpost.receive(standard_secrets=)"
    result = bench(
        {
            ours: lambda: callpost.receive(body, headers, standard_secrets=whsec),
            "standardwebhooks Webhook.verify": lambda: reference.verify(body, headers),
        },
        n,
        rounds,
    )
    report(f"{name}: Standard Webhooks verify and parse ({len(body)} B body)", result, ours)


def track_cpu() -> None:
    from segment.analytics import Client as SegmentClient

    n = 300 if SMOKE else 20_000
    ours = callpost.Client(
        "wk",
        endpoint="http://127.0.0.1:9",
        flush_at=10**6,
        flush_after=3600,
        max_queue=10**7,
        on_error=lambda e, m: None,
    )
    theirs = SegmentClient("wk", host="http://127.0.0.1:9", send=False, max_queue_size=10**7)
    # The drop-in, as Segment's SDK here: checked and completed, then
    # dropped (send=False); it also builds the (success, msg) return.
    drop_in = callpost.segment.Client("wk", host="http://127.0.0.1:9", send=False, max_queue_size=10**7)
    props = json.loads(fixture("track_423"))["properties"]

    def cpu(fn: Callable[[], Any]) -> float:
        t = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - t) / n

    rounds: dict[str, list[float]] = {
        "callpost Client.track()": [],
        "callpost.segment track()": [],
        "segment-analytics-python track()": [],
    }
    for _ in range(2 if SMOKE else 5):
        rounds["callpost Client.track()"].append(cpu(lambda: ours.track("user-8f3a2c91", "Order Completed", props)))
        rounds["callpost.segment track()"].append(cpu(lambda: drop_in.track("user-8f3a2c91", "Order Completed", props)))
        rounds["segment-analytics-python track()"].append(
            cpu(lambda: theirs.track("user-8f3a2c91", "Order Completed", props))
        )
    report(
        "Client.track() of track_423: CPU time per call (enqueue; process_time, all threads)",
        {k: statistics.median(v) for k, v in rounds.items()},
        "callpost Client.track()",
    )
    ours.close(timeout=0)


class Ingest:
    """A local ingest server counting the messages it receives."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    outer.count += len(json.loads(body)["batch"])
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


def end_to_end() -> None:
    from segment.analytics import Client as SegmentClient

    n = 500 if SMOKE else 20_000
    props = json.loads(fixture("track_423"))["properties"]
    results: dict[str, float] = {}
    for name in ("callpost Client", "segment-analytics-python Client"):
        srv = Ingest()
        t = time.perf_counter()
        if name.startswith("callpost"):
            c = callpost.Client("wk", endpoint=srv.url, flush_at=100, flush_after=0.05, max_queue=10**6)
            for _ in range(n):
                c.track("user-8f3a2c91", "Order Completed", props)
            c.flush()
            c.close()
        else:
            s = SegmentClient("wk", host=srv.url, upload_size=100, upload_interval=0.05, max_queue_size=10**6)
            for _ in range(n):
                s.track("user-8f3a2c91", "Order Completed", props)
            s.flush()
            s.shutdown()
        elapsed = time.perf_counter() - t
        assert srv.count == n, (name, srv.count, n)
        results[name] = elapsed / n
        srv.httpd.shutdown()
    print(f"\nend to end: {n} track calls delivered to a local ingest server (batches of 100)")
    for k, v in results.items():
        print(f"  {k:<44} {1 / v:9.0f} messages/s")
    print(
        f"  callpost delivers {results['segment-analytics-python Client'] / results['callpost Client']:.2f}x the messages per second"
    )


if __name__ == "__main__":
    print(f"python {sys.version.split()[0]}, callpost {callpost.__version__}, orjson {orjson.__version__}")
    summary = request_benches()
    print("\nsummary: callpost's speed against orjson + hmac (above 1: faster)")
    print(f"  {'fixture':<22} {'request(dict)':>14} {'request(bytes)':>15} {'request(dumps bytes)':>21}")
    for name, d, b, p in summary:
        print(f"  {name:<22} {d:14.2f} {b:15.2f} {p:21.2f}")
    standard_benches()
    track_cpu()
    end_to_end()
