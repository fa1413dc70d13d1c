"""A source with three destinations, end to end: the built relay, Segment's
Python SDK unmodified, and real receivers on 127.0.0.1. A CRM takes
``PUT /users/{userId}`` with a mapped body and an OAuth 2.0 bearer token
from a local token server; a warehouse takes every call in batches; a
chat incoming webhook takes ``{"text": …}`` for completed orders. Each
call reaches exactly the destinations its triggers name, and each request
is checked by its receiver."""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from relay_support import ADMIN, SECRET, WRITE_KEY, Hook, RelayProcess

SDK = pathlib.Path(__file__).parent / "sdk"
N = 10
"""Calls of each kind the SDK sends."""
KINDS = ("identify", "track", "page", "screen", "group", "alias")


def config(tmp: pathlib.Path, token_url: str, crm: str, warehouse: str, chat: str) -> str:
    return f"""
database = "sqlite:///{tmp}/relay.db"
admin_token = "{ADMIN}"
log_level = "INFO"

[security]
allow_private_networks = true

[[sources]]
name = "shop"
write_keys = ["{WRITE_KEY}"]

[[sources.destinations]]
name = "crm"
trigger = {{ field = "type", equals = "identify" }}
method = "PUT"
urls = [{{ url = "{crm}/users/{{{{userId}}}}", auth = {{ type = "oauth2", token_url = "{token_url}", client_id = "relay", client_secret = "crm-client-secret", scope = "users:write" }} }}]
shared_secret = "{SECRET}"
[sources.destinations.mapping]
email = {{ "@path" = "traits.email" }}
seq = {{ "@path" = "traits.seq" }}

[[sources.destinations]]
name = "warehouse"
urls = ["{warehouse}"]
shared_secret = "{SECRET}"
[sources.destinations.batch]
max_calls = 25

[[sources.destinations]]
name = "chat"
trigger = {{ and = [{{ field = "type", equals = "track" }}, {{ field = "event", equals = "Order Completed" }}] }}
urls = ["{chat}"]
[sources.destinations.mapping]
text = {{ "@template" = "{{{{userId}}}} ordered {{{{properties.total}}}}" }}
"""


def settled(relay: RelayProcess, want: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if want() and relay.status()["pending"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"not settled: {relay.status()}")


def test_each_call_reaches_exactly_the_destinations_its_triggers_name(
    tmp_path: pathlib.Path, serve: Callable[..., Any]
) -> None:
    token_requests: list[tuple[dict[str, str], bytes]] = []

    def token_endpoint(n: int, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        token_requests.append(({k.lower(): v for k, v in headers.items()}, body))
        answer = {"access_token": "crm-token", "token_type": "Bearer", "expires_in": 3600}
        return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()

    tokens = serve(token_endpoint)
    crm = Hook(serve, lambda d: 200 if d.headers.get("authorization") == "Bearer crm-token" else 401)
    warehouse = Hook(serve)
    chat = Hook(serve)
    text = config(tmp_path, tokens.url + "/token", crm.server.url, warehouse.url, chat.url)
    relay = RelayProcess(text, tmp_path).start()
    try:
        out = subprocess.run(
            [sys.executable, str(SDK / "send_python.py"), relay.url, WRITE_KEY, str(N), "0", "dest", "1"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        settled(
            relay,
            lambda: (
                len(crm.ok()) >= N
                and len(chat.ok()) >= N
                and sum(len(d.json) for d in warehouse.ok()) >= N * len(KINDS)
            ),
        )

        # The CRM: identify calls only, each a PUT to its user's record with
        # the mapped body, the bearer token and a signature over the body.
        assert len(crm.deliveries) == N, [d.json for d in crm.deliveries]
        assert all(d.verified for d in crm.deliveries)
        assert sorted(crm.server.received.methods) == ["PUT"] * N
        paths = sorted(p for p, _, _ in crm.server.received.requests)
        assert paths == sorted(f"/users/{urllib.parse.quote(f'dest-user-{i}')}" for i in range(N))
        assert sorted(d.json["seq"] for d in crm.deliveries) == sorted(f"dest-identify-{i}" for i in range(N))
        assert all(set(d.json) == {"email", "seq"} for d in crm.deliveries)
        assert len(token_requests) == 1, "one token for every call"
        headers, body = token_requests[0]
        assert body == b"grant_type=client_credentials&scope=users%3Awrite"
        basic = headers["authorization"].removeprefix("Basic ")
        assert base64.b64decode(basic) == b"relay:crm-client-secret"

        # The warehouse: every call, in batches, each batch signed.
        batches = warehouse.ok()
        assert all(d.verified for d in batches)
        assert all(isinstance(d.json, list) and len(d.json) <= 25 for d in batches)
        kinds = sorted(c["type"] for d in batches for c in d.json)
        assert kinds == sorted(k for k in KINDS for _ in range(N))

        # The chat: completed orders only, as text.
        assert len(chat.deliveries) == N
        assert sorted(d.json["text"] for d in chat.deliveries) == sorted(
            f"dest-user-{i} ordered 25.5" for i in range(N)
        )

        # The delivery log tells the destinations apart.
        log = relay.admin("GET", "/admin/log?destination=chat&limit=100")
        assert {c["destination"] for c in log["calls"]} == {"chat"}
        assert len(log["calls"]) == N
        sources = relay.admin("GET", "/admin/sources")
        shop = next(s for s in sources if s["name"] == "shop")
        assert [d["name"] for d in shop["destinations"]] == ["crm", "warehouse", "chat"]
        assert shop["destinations"][0]["endpoints"][0]["auth"] == "oauth2"
        assert "crm-client-secret" not in json.dumps(sources)
        metrics = relay.metrics()
        for destination, n in (("crm", N), ("chat", N), ("warehouse", N * len(KINDS))):
            line = (
                f'callpost_relay_destination_deliveries_total{{source="shop",destination="{destination}",'
                f'outcome="delivered"}} {n}'
            )
            assert line in metrics, metrics
    finally:
        relay.stop()
