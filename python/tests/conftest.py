"""Real HTTP(S) servers on 127.0.0.1 for the tests, and the shared vectors."""

from __future__ import annotations

import json
import pathlib
import ssl
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from servers import Handler as Handler
from servers import Received as Received
from servers import Serve as Serve
from servers import Server as Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "testdata"


def vectors(name: str) -> Any:
    return json.loads((TESTDATA / name).read_text(encoding="utf-8"))


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
