"""``python -m callpost``: the command line.

``python -m callpost demo`` runs the whole path on 127.0.0.1: a Client
batches every call kind to the relay (``python -m callpost relay``, started
for the demo on a throwaway SQLite file), which stores them and delivers each
through the Webhooks destination to two endpoints at once (parallel mode):
the first always answers 503; the second is a receiver that verifies
``X-Signature`` and fails its very first request, so a retry round shows
too. Then a delete notification goes out through the relay's admin API.
``python -m callpost demo --direct`` skips the relay: a local ingest server
calls ``Webhooks.deliver`` for each message.

``python -m callpost relay`` runs the relay, the native ``callpost-relay``
program (see ``callpost._relay``).

``python -m callpost --version`` prints the version.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import callpost
from callpost._types import JSONObject

SECRET = "demo-shared-secret"
WRITE_KEY = "demo-write-key"


def _serve(handle: Callable[[BaseHTTPRequestHandler, bytes], tuple[int, bytes]]) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status, reply = handle(self, body)
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class _Receivers:
    """The demo's two webhook endpoints: one always down, one that verifies
    every signature and fails its first request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[JSONObject] = []
        self.first = True
        self.servers: list[ThreadingHTTPServer] = []
        server, self.receiver_url = _serve(self._receive)
        self.servers.append(server)
        server, self.broken_url = _serve(lambda req, body: (503, b"down"))
        self.servers.append(server)

    def _receive(self, req: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
        with self.lock:
            if self.first:
                self.first = False
                print("  receiver: answering 500 to its first request (watch the retry)")
                return 500, b"not yet"
        ok = callpost.verify_request(body, dict(req.headers.items()), SECRET)
        with self.lock:
            self.received.append({"body": json.loads(body), "verified": ok})
            print(f"  receiver: {json.loads(body)['type']:<8} signature verified: {ok}")
        return (200, b"ok") if ok else (401, b"bad signature")

    def report(self) -> int:
        for server in self.servers:
            server.shutdown()
        print("\nreceived by the verifying receiver:")
        for r in self.received:
            print(f"  verified={r['verified']}  {json.dumps(r['body'], ensure_ascii=False)}")
        kinds = sorted({r["body"]["type"] for r in self.received})
        ok = all(r["verified"] for r in self.received) and kinds == sorted(KINDS)
        print(f"\n{len(self.received)} calls arrived, kinds {kinds}; all signatures verified: {ok}")
        return 0 if ok else 1


KINDS = ["identify", "track", "page", "screen", "group", "alias", "delete"]


def _send_every_kind(endpoint: str) -> None:
    with callpost.Client(WRITE_KEY, endpoint=endpoint, flush_at=20, flush_after=0.2) as analytics:
        analytics.identify("user-1", {"email": "ada@example.com", "plan": "pro"})
        analytics.track("user-1", "Order Completed", {"total": 25.0, "items": 2, "tiny": 1.5e-7})
        analytics.page("user-1", "Home", {"path": "/", "title": "Home", "url": "https://shop.example/"})
        analytics.screen("user-1", "Cart", context={"app": {"name": "Shop", "version": "2.1", "build": "7"}})
        analytics.group("user-1", "group-9", {"name": "Initech", "employees": 250})
        analytics.alias("anon-42", "user-1")


def demo() -> int:
    """Client → relay → Webhooks destination."""
    hooks = _Receivers()
    admin = "demo-admin-token-0123456789abcdef0123"  # the relay wants 32 characters or more
    with tempfile.TemporaryDirectory(prefix="callpost-demo-") as tmp:
        env = dict(os.environ, CALLPOST_RELAY_SHARED_SECRET=SECRET, CALLPOST_RELAY_ADMIN_TOKEN=admin)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        relay = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "callpost",
                "relay",
                "--listen",
                f"127.0.0.1:{port}",
                "--database",
                f"sqlite:///{tmp}/relay.db",
                "--write-key",
                WRITE_KEY,
                "--webhook-url",
                hooks.broken_url + "/hook",
                "--webhook-url",
                hooks.receiver_url + "/hook",
                "--allow-private-networks",
                "--log-level",
                "WARNING",
            ],
            env=env,
        )
        try:
            deadline = time.time() + 30
            while True:
                try:
                    with urllib.request.urlopen(url + "/readyz", timeout=2):
                        break
                except OSError:
                    if relay.poll() is not None or time.time() > deadline:
                        print("the relay did not start", file=sys.stderr)
                        return 1
                    time.sleep(0.1)
            print(
                f"client → relay {url} (SQLite in {tmp}) → webhooks, both at once: "
                f"[{hooks.broken_url} (always 503), {hooks.receiver_url} (verifies)]"
            )
            _send_every_kind(url)
            print("  client: 6 calls acknowledged by the relay (stored before it answered)")
            # A deletion erases the user's stored calls too: a user who sent
            # none here, so user-1's calls still go out.
            req = urllib.request.Request(
                url + "/admin/delete",
                data=json.dumps({"userId": "user-2"}).encode(),
                headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                print(f"  admin: user-2 deleted (stored calls erased, delete notification sent): {r.read().decode()}")
            # The first round fails at both endpoints; the retry comes
            # after the destination's backoff (5-10 s for round 2).
            print("  waiting for the retry round (the destination's backoff: 5-10 s)...")
            deadline = time.time() + 60
            while time.time() < deadline:
                with hooks.lock:
                    if sorted({r["body"]["type"] for r in hooks.received}) == sorted(KINDS):
                        break
                time.sleep(0.1)
            status = urllib.request.Request(url + "/admin/status", headers={"Authorization": f"Bearer {admin}"})
            with urllib.request.urlopen(status, timeout=10) as r:
                print(f"  relay status: {r.read().decode()}")
        finally:
            relay.terminate()
            relay.wait(30)
    return hooks.report()


def demo_direct() -> int:
    """Client → a local ingest server that calls ``Webhooks.deliver``."""
    hooks = _Receivers()
    destination = callpost.Webhooks(
        [hooks.broken_url + "/hook", {"url": hooks.receiver_url + "/hook", "headers": {"X-Demo": "1"}}],
        shared_secret=SECRET,
        backoff_base=0.2,
        backoff_cap=1.0,
    )

    def ingest(req: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
        expected = "Basic " + base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
        if req.headers.get("Authorization") != expected:
            return 401, b"bad write key"
        batch = json.loads(body)["batch"]
        print(f"  ingest: batch of {len(batch)} messages, {len(body)} bytes")
        for message in batch:
            result = destination.deliver(message)
            tries = ", ".join(
                f"round {a['round']} endpoint {a['endpoint']}: {a['outcome']['kind']} {a['outcome'].get('status', '')}".strip()
                for a in result.log
            )
            print(f"    {message['type']:<8} taken by endpoint {result.endpoint} ({tries})")
        return 200, b"{}"

    ingest_server, ingest_url = _serve(ingest)
    hooks.servers.append(ingest_server)
    print(
        f"client → ingest {ingest_url} → webhooks, both at once: [{hooks.broken_url} (always 503), "
        f"{hooks.receiver_url} (verifies)]"
    )
    _send_every_kind(ingest_url)
    destination.deliver({"type": "delete", "userId": "user-1"})
    return hooks.report()


USAGE = "usage: python -m callpost demo [--direct] | relay [...] | --version"


def main(argv: list[str]) -> int:
    if argv[1:3] == ["demo", "--direct"]:
        return demo_direct()
    if argv[1:2] == ["demo"]:
        return demo()
    if argv[1:2] == ["relay"]:
        from ._relay import exec_relay

        return exec_relay(argv[2:])
    if argv[1:2] == ["--version"]:
        print(f"callpost {callpost.__version__}")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
