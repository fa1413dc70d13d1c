"""``python -m callpost``: the command line.

``python -m callpost demo`` runs the whole path on 127.0.0.1: a Client
batches every call kind to a local ingest server (speaking Segment's
``/v1/batch``), which forwards each message through the Webhooks destination
to two endpoints at once (parallel mode): the first always answers 503; the
second is a receiver that verifies ``X-Signature`` and fails its very first
request, so a retry round shows too.

``python -m callpost relay`` runs the relay (see ``callpost.relay.cli``).

``python -m callpost --version`` prints the version.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Tuple

import callpost

SECRET = "demo-shared-secret"
WRITE_KEY = "demo-write-key"


def _serve(handle: Callable[[BaseHTTPRequestHandler, bytes], Tuple[int, bytes]]) -> Tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status, reply = handle(self, body)
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def demo() -> int:
    lock = threading.Lock()
    received: List[Dict[str, Any]] = []
    first = [True]

    def receiver(req: BaseHTTPRequestHandler, body: bytes) -> Tuple[int, bytes]:
        with lock:
            if first[0]:
                first[0] = False
                print("  receiver: answering 500 to its first request (watch the retry)")
                return 500, b"not yet"
        ok = callpost.verify_request(body, dict(req.headers.items()), SECRET)
        with lock:
            received.append({"body": json.loads(body), "verified": ok})
        return (200, b"ok") if ok else (401, b"bad signature")

    def broken(req: BaseHTTPRequestHandler, body: bytes) -> Tuple[int, bytes]:
        return 503, b"down"

    recv_server, recv_url = _serve(receiver)
    broken_server, broken_url = _serve(broken)
    hooks = callpost.Webhooks(
        [broken_url + "/hook", {"url": recv_url + "/hook", "headers": {"X-Demo": "1"}}],
        shared_secret=SECRET,
        backoff_base=0.2,
        backoff_cap=1.0,
    )

    def ingest(req: BaseHTTPRequestHandler, body: bytes) -> Tuple[int, bytes]:
        expected = "Basic " + base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
        if req.headers.get("Authorization") != expected:
            return 401, b"bad write key"
        batch = json.loads(body)["batch"]
        print(f"  ingest: batch of {len(batch)} messages, {len(body)} bytes")
        for message in batch:
            result = hooks.deliver(message)
            tries = ", ".join(f"round {a['round']} endpoint {a['endpoint']}: {a['outcome']['kind']} {a['outcome'].get('status', '')}".strip()
                              for a in result.log)
            print(f"    {message['type']:<8} taken by endpoint {result.endpoint} ({tries})")
        return 200, b"{}"

    ingest_server, ingest_url = _serve(ingest)

    print(f"client → ingest {ingest_url} → webhooks, both at once: [{broken_url} (always 503), {recv_url} (verifies)]")
    with callpost.Client(WRITE_KEY, endpoint=ingest_url, flush_at=20, flush_after=0.2) as analytics:
        analytics.identify("user-1", {"email": "ada@example.com", "plan": "pro"})
        analytics.track("user-1", "Order Completed", {"total": 25.0, "items": 2, "tiny": 1.5e-7})
        analytics.page("user-1", "Home", {"path": "/", "title": "Home", "url": "https://shop.example/"})
        analytics.screen("user-1", "Cart", context={"app": {"name": "Shop", "version": "2.1", "build": "7"}})
        analytics.group("user-1", "group-9", {"name": "Initech", "employees": 250})
        analytics.alias("anon-42", "user-1")
    hooks.deliver({"type": "delete", "userId": "user-1"})

    for server in (recv_server, broken_server, ingest_server):
        server.shutdown()

    print("\nreceived by the verifying receiver:")
    for r in received:
        print(f"  verified={r['verified']}  {json.dumps(r['body'], ensure_ascii=False)}")
    kinds = sorted({r["body"]["type"] for r in received})
    ok = all(r["verified"] for r in received) and kinds == sorted(
        ["identify", "track", "page", "screen", "group", "alias", "delete"]
    )
    print(f"\n{len(received)} calls arrived, kinds {kinds}; all signatures verified: {ok}")
    return 0 if ok else 1


USAGE = "usage: python -m callpost demo | relay [...] | --version"


def main(argv: List[str]) -> int:
    if argv[1:2] == ["demo"]:
        return demo()
    if argv[1:2] == ["relay"]:
        from .relay.cli import main as relay_main

        return relay_main(argv[2:])
    if argv[1:2] == ["--version"]:
        print(f"callpost {callpost.__version__}")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
