"""A real HTTP(S) server on 127.0.0.1 that answers as a test says, for the
package's tests (``conftest.serve``) and the relay's end-to-end tests
(``relay/tests/e2e``), which import it from here."""

from __future__ import annotations

import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol


class Received:
    """What a test server saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.methods: list[str] = []
        self.connections = 0

    def add(self, path: str, headers: dict[str, str], body: bytes, method: str = "POST") -> None:
        with self.lock:
            self.requests.append((path, headers, body))
            self.methods.append(method)

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
                received.add(self.path, {k.lower(): v for k, v in self.headers.items()}, body, self.command)
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

            # A destination's method may be PUT or PATCH: the same answer.
            do_PUT = do_POST
            do_PATCH = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        # serve_forever looks for shutdown() every poll_interval (0.5 s by
        # default): every test would wait that long in its teardown.
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Serve(Protocol):
    """The ``serve`` fixture: starts a server answering with ``handler``
    (over TLS with ``tls``); it is closed when the test ends."""

    def __call__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> Server: ...
