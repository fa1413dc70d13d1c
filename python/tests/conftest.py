"""Real HTTP(S) servers on 127.0.0.1 for the tests, and the shared vectors."""

from __future__ import annotations

import json
import os
import pathlib
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import pytest

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "testdata"


def vectors(name: str) -> Any:
    return json.loads((TESTDATA / name).read_text(encoding="utf-8"))


class Received:
    """What a test server saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.connections = 0

    def add(self, path: str, headers: dict[str, str], body: bytes) -> None:
        with self.lock:
            self.requests.append((path, headers, body))

    def __len__(self) -> int:
        with self.lock:
            return len(self.requests)


Handler = Callable[[int, dict[str, str], bytes], tuple[float, dict[str, str], bytes]]
"""(request number from 0, headers, body) -> (status, headers, body). A
negative status closes the connection without answering; a float status
sleeps that many seconds first and then answers 200."""


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up first (a timeout, which the fault tests cause
    on purpose) is not an error here; anything else is still printed."""

    # socketserver's default listen backlog is 5: a relay opening 20
    # connections at once would see the rest wait for SYN retransmits
    # (1 s, 3 s, 7 s) and time out on requests the server then still
    # reads. Real servers listen with 128 or more (Node: 511).
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class Server:
    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.received = Received()
        received = self.received
        counter = [0]
        lock = threading.Lock()

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Buffered: each answer goes out in one write when the request
            # ends. Unbuffered, the status line and the body leave in two,
            # and a keep-alive client waits about 40 ms for the second
            # (Nagle's algorithm here, its delayed ACK there). The relay's
            # own test of such a receiver is in relay/tests.
            wbufsize = -1

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock:
                    n = counter[0]
                    counter[0] += 1
                received.add(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                status, headers, reply = handler(n, dict(self.headers.items()), body)
                if isinstance(status, float):
                    time.sleep(status)
                    status = 200
                if status < 0:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out first, which these tests cause on purpose

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Serve(Protocol):
    """The ``serve`` fixture: starts a server answering with ``handler``
    (over TLS with ``tls``); it is closed when the test ends."""

    def __call__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> Server: ...


@pytest.fixture
def serve() -> Iterator[Serve]:
    servers: list[Server] = []

    def start(handler: Handler, tls: ssl.SSLContext | None = None) -> Server:
        s = Server(handler, tls)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


@pytest.fixture(scope="session")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A genuinely self-signed certificate for 127.0.0.1, made with openssl."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "cert.pem", d / "key.pem")
    return ctx


def ok(n: int, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    return 200, {}, b"ok"


# -- the relay's databases --------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The test Postgres cluster: CALLPOST_TEST_POSTGRES when set, else the
    cluster of scripts/postgres.sh, started here and stopped at the end
    unless it was already running (someone started it to work with it)."""
    url = os.environ.get("CALLPOST_TEST_POSTGRES")
    started = False
    if not url:
        import psycopg

        url = f"postgresql://postgres@127.0.0.1:{os.environ.get('CALLPOST_PG_PORT', '25432')}/postgres"
        try:
            psycopg.connect(url, connect_timeout=2).close()
        except psycopg.OperationalError:
            url = subprocess.run(
                ["bash", str(ROOT / "scripts" / "postgres.sh"), "start"], check=True, capture_output=True, text=True
            ).stdout.strip()
            started = True
    yield url
    if started:
        subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh"), "stop"], check=False)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database(backend: str, tmp_path: pathlib.Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh relay database on each backend."""
    from relay_support import Database

    postgres = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    db = Database(backend, tmp_path, postgres)
    yield db
    db.drop()
