"""The relay's end-to-end tests: the built binary as real processes, on
SQLite and on a throwaway Postgres cluster, with real Segment SDKs,
headless Chromium, kill -9 and several relays on one database.

The binary is ``CALLPOST_RELAY_BIN`` (``scripts/test.sh`` sets it to the
tests' build, which has the test clock), or ``target/debug/callpost-relay``.
The Postgres cluster is ``CALLPOST_PG_URL`` when set, else the one
``scripts/postgres.sh`` starts (and this session stops). Webhook receivers
are the package tests' threaded HTTP server (``python/tests/servers.py``).
"""

from __future__ import annotations

import os
import pathlib
import ssl
import subprocess
import sys
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "python" / "tests"))

from relay_support import Database  # noqa: E402
from servers import Handler, Serve, Server  # noqa: E402


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
def postgres_url() -> Iterator[str]:
    """The test Postgres cluster: ``CALLPOST_PG_URL`` when set, else the
    cluster of scripts/postgres.sh, started here and stopped at the end."""
    url = os.environ.get("CALLPOST_PG_URL")
    if url:
        yield url
        return
    script = str(ROOT / "scripts" / "postgres.sh")
    url = subprocess.run(["bash", script, "start"], check=True, capture_output=True, text=True).stdout.strip()
    yield url
    subprocess.run(["bash", script, "stop"], check=False)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database(backend: str, tmp_path: pathlib.Path, request: pytest.FixtureRequest) -> Iterator[Database]:
    """A fresh relay database on each backend."""
    postgres = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    db = Database(backend, tmp_path, postgres)
    yield db
    db.drop()
