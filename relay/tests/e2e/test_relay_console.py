"""The relay's web console (``/console/`` on the admin listener) in headless
Chromium against a real relay, driven by ``sdk/console_browser.mjs``: it
signs in, reads the overview, changes a source's rate limit, finds a call
by userId and opens its attempts, and replays a dead letter, which a real
receiver then gets; another site's forms are refused and change nothing.
A screenshot of each page goes to ``target/`` (``docs/console.png`` is
the overview's, copied by hand when the console changes).

And over plain HTTP: without the token the console shows only its sign-in
form and the admin API is 401, a wrong token is slowed and refused, the
cookie alone (without the console's header) is not enough."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from relay_support import (
    ADMIN,
    WRITE_KEY,
    Database,
    Delivery,
    Hook,
    RelayProcess,
    config_text,
    free_port,
    track,
)

ROOT = pathlib.Path(__file__).resolve().parents[3]
SDK = pathlib.Path(__file__).parent / "sdk"
TARGET = ROOT / "target"
DEAD_USER = "u-refused"
"""The receiver refuses this user's call (400) until told not to: a dead
letter at once (every endpoint refused it), with no clock to move."""
FOUND_USER = "u-looked-for"
RATE = 25
"""The rate limit the console sets."""
QUERY_TOKEN = "kept-query-token"
"""A credential in the destination's URL query, which the relay never shows:
the console's editor must keep it."""


class World:
    """A relay with its admin API (and console) on its own listener, and a
    receiver."""

    def __init__(self, tmp: pathlib.Path, serve: Callable[..., Any]) -> None:
        self.refusing = True
        self.hook = Hook(serve, self.answer)
        self.admin_port = free_port()
        self.relay = RelayProcess(
            config_text(Database("sqlite", tmp, None), [f"{self.hook.url}?token={QUERY_TOKEN}"]),
            tmp,
            args=("--admin-listen", f"127.0.0.1:{self.admin_port}"),
            env={"CALLPOST_RELAY_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()},
        )
        self.admin_url = f"http://127.0.0.1:{self.admin_port}"

    def answer(self, d: Delivery) -> int:
        return 400 if self.refusing and d.json.get("userId") == DEAD_USER else 200

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request to the admin listener, never following a redirect."""

        class Stay(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any) -> None:
                return None

        req = urllib.request.Request(self.admin_url + path, data=body, headers=headers or {}, method=method)
        try:
            with urllib.request.build_opener(Stay).open(req, timeout=30) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        status, _, out = self.request(
            method,
            path,
            None if body is None else json.dumps(body).encode(),
            {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
        )
        assert status == 200, (status, out)
        return json.loads(out)


@pytest.fixture
def world(tmp_path: pathlib.Path, serve: Callable[..., Any]) -> Iterator[World]:
    w = World(tmp_path, serve)
    w.relay.start()
    yield w
    if w.relay.running():
        w.relay.stop()


def sign_in(w: World, token: str) -> tuple[int, dict[str, str], bytes]:
    return w.request(
        "POST",
        "/console/session",
        f"token={token}".encode(),
        {"Content-Type": "application/x-www-form-urlencoded"},
    )


def test_without_the_token_there_is_only_the_sign_in_form_and_the_cookie_needs_the_console_header(
    world: World,
) -> None:
    w = world
    assert w.relay.post("/v1/batch", {"batch": [track(1)], "writeKey": WRITE_KEY})[0] == 200
    w.relay.wait(lambda: len(w.hook.ok()) == 1, what="the delivery")

    status, headers, page = w.request("GET", "/console/")
    assert status == 200 and b'type="password"' in page and b"console.js" not in page
    assert headers["content-security-policy"] == (
        "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    )
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-cache"
    for path in ("/admin/status", "/admin/dead-letters", "/console/history"):
        assert w.request("GET", path)[0] == 401, path
    # Only the admin listener serves the console.
    assert urllib_status(w.relay.url + "/console/") == 404

    started = time.monotonic()
    status, headers, page = sign_in(w, "not-the-admin-token-0123456789abcdef")
    assert status == 401 and "set-cookie" not in headers and b"not the admin token" in page
    assert time.monotonic() - started >= 1.0, "a wrong token is slowed as the admin API's are"
    assert ADMIN.encode() not in page

    status, headers, _ = sign_in(w, ADMIN)
    assert status == 303 and headers["location"] == "/console/"
    cookie = headers["set-cookie"]
    assert cookie.endswith("; Path=/; Max-Age=43200; HttpOnly; SameSite=Strict") and ADMIN not in cookie
    session = cookie.split(";")[0]
    # Behind an HTTPS proxy, the cookie is Secure.
    secure = w.request(
        "POST",
        "/console/session",
        f"token={ADMIN}".encode(),
        {"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-Proto": "https"},
    )[1]["set-cookie"]
    assert secure == cookie + "; Secure"

    status, _, page = w.request("GET", "/console/", headers={"Cookie": session})
    assert status == 200 and b"console.js" in page
    console = {"Cookie": session, "X-Callpost-Console": "1"}
    status, _, body = w.request("GET", "/admin/status", headers=console)
    assert status == 200 and json.loads(body)["delivered"] == 1
    status, _, body = w.request("GET", "/console/history", headers=console)
    assert status == 200 and json.loads(body)["interval_ms"] == 10_000
    # The cookie alone, or with a browser saying another origin asked: 401.
    assert w.request("GET", "/admin/status", headers={"Cookie": session})[0] == 401
    assert w.request("GET", "/admin/status", headers={**console, "Sec-Fetch-Site": "same-site"})[0] == 401
    wrong = {"Cookie": "callpost_console=" + "0" * 64, "X-Callpost-Console": "1"}
    assert w.request("GET", "/admin/status", headers=wrong)[0] == 401
    # Another site's page cannot sign a browser in, even with the token.
    status, headers, _ = w.request(
        "POST",
        "/console/session",
        f"token={ADMIN}".encode(),
        {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"},
    )
    assert status == 403 and "set-cookie" not in headers
    # Another site's page cannot sign a browser out either.
    for elsewhere in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
        status, headers, _ = w.request("POST", "/console/session/end", headers={"Cookie": session, **elsewhere})
        assert status == 403 and "set-cookie" not in headers, elsewhere
    # Signing out clears the cookie.
    status, headers, _ = w.request("POST", "/console/session/end", headers={"Cookie": session})
    assert status == 303 and headers["set-cookie"].startswith("callpost_console=; Path=/; Max-Age=0")
    assert ADMIN not in "\n".join(w.relay.log)


def urllib_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def _chromium() -> str:
    chromium = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    if not shutil.which(chromium):
        pytest.fail("Chromium is missing: scripts/test.sh installs Debian's")
    if not (SDK / "node_modules" / "playwright-core").exists():
        pytest.fail("relay/tests/e2e/sdk has no node_modules: run npm ci there (scripts/test.sh does)")
    return chromium


def test_an_operator_works_the_console_in_chromium_and_another_site_cannot(world: World) -> None:
    _chromium()
    w = world
    calls = [track(n) for n in range(5)]
    calls.append(track("found", userId=FOUND_USER, messageId="m-found"))
    calls.append(track("dead", userId=DEAD_USER, messageId="m-dead"))
    assert w.relay.post("/v1/batch", {"batch": calls, "writeKey": WRITE_KEY})[0] == 200

    def settled() -> bool:
        s = w.admin("GET", "/admin/status")
        return bool(s["pending"] == 0 and s["dead"] == 1 and s["delivered"] == 6)

    w.relay.wait(settled, what="six deliveries and a dead letter")

    # More calls between the history's samples, so its charts have lines.
    def sampled() -> int:
        return sum("pending" in s for s in w.admin("GET", "/console/history")["samples"])

    for wave, size in enumerate((8, 3, 12)):
        before = sampled()
        more = [track(f"wave{wave}-{n}") for n in range(size)]
        assert w.relay.post("/v1/batch", {"batch": more, "writeKey": WRITE_KEY})[0] == 200

        def next_sample(before: int = before) -> bool:
            return sampled() > before

        w.relay.wait(next_sample, 30, "the next sample of the history")
    w.relay.wait(lambda: w.admin("GET", "/admin/status")["pending"] == 0, what="the waves' deliveries")
    w.refusing = False
    TARGET.mkdir(exist_ok=True)
    for old in TARGET.glob("console-*.png"):
        old.unlink()
    received_before = len(w.hook.deliveries)
    settings = {
        "userId": FOUND_USER,
        "deadId": "m-dead",
        "foundId": "m-found",
        "source": "web",
        "rate": RATE,
    }
    out = subprocess.run(
        ["node", str(SDK / "console_browser.mjs"), w.admin_url, ADMIN, str(TARGET), json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=SDK,
    )
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr
    seen = json.loads(lines[-1])
    assert out.returncode == 0 and "failed" not in seen, seen.get("failed", out.stderr) + f"\nsteps: {seen['steps']}"
    assert seen["errors"] == [], "script errors or CSP violations in the page"

    # Signed out: the form, and no data.
    assert seen["signedOut"]["password"] == 1
    assert "Pending" not in seen["signedOut"]["text"] and "web" not in seen["signedOut"]["text"]
    assert "not the admin token" in seen["wrongToken"]["error"] and seen["wrongToken"]["cookies"] == 0
    assert seen["cookie"] == [
        {
            "name": "callpost_console",
            "httpOnly": True,
            "sameSite": "Strict",
            "secure": False,
            "path": "/",
            "tokenInValue": False,
        }
    ]

    # The overview shows /admin/status's numbers, and a chart of each.
    shown, status = seen["overview"]["shown"], seen["overview"]["status"]
    for key, value in shown.items():
        assert value == status[key], (key, shown, status)
    assert shown["dead"] == 1 and shown["delivered"] == 6 + 8 + 3 + 12 and shown["pending"] == 0
    assert seen["overview"]["charts"] == 5 and seen["overview"]["lines"] >= 2

    # The endpoint's state; then the rate limit set through the editor.
    assert seen["sources"]["states"] == ["healthy"]
    assert "Saved web" in seen["sources"]["saved"]
    assert seen["sources"]["protection"] == [f"{RATE}/s, breaker after 10"]
    # The mapping tried on the stored call: its exact body, nothing saved.
    assert seen["sources"]["tried"] == json.dumps({"u": FOUND_USER, "e": "Order Completed!"}, separators=(",", ":"))
    web = w.admin("GET", "/admin/sources/web")
    assert [e["protection"]["rate_per_second"] for e in web["webhooks"]["endpoints"]] == [RATE]
    # The editor sent only what it shows: the write key, the shared secret
    # and the URL's query credential, none of them shown, are as they were.
    assert web["write_keys"] == 1 and web["webhooks"]["signed"]
    assert QUERY_TOKEN not in json.dumps(web)

    # Another site's forms: refused, the dead letter still dead, no cookie.
    by = {(a["from"].split(":")[1], a["to"]): a for a in seen["crossSite"]}
    assert len(by) == 4, seen["crossSite"]
    for (_, to), a in by.items():
        assert a["status"] == (401 if to == "/admin/replay" else 403), a
        assert a["setCookie"] is None, a
    assert seen["afterCrossSite"]["dead"] == 1 and seen["cookiesAfterCrossSite"] == 1

    # The call found by userId, with its attempt.
    assert seen["log"]["found"] == ["m-found"], seen["log"]
    assert seen["log"]["body"]["userId"] == FOUND_USER and seen["log"]["body"]["messageId"] == "m-found"
    assert len(seen["log"]["attempts"]) == 1 and "200" in seen["log"]["attempts"][0]

    # "Replay every matching call" with no status filter counts every state
    # the list shows (the call found was delivered), not only dead letters.
    assert seen["log"]["replayAsked"].startswith("Replay 1 call?"), seen["log"]
    replays = [json.loads(a["body"]) for a in seen["asked"] if a["path"] == "/admin/replay"]
    assert replays[0] == {
        "userId": FOUND_USER,
        "includeDelivered": True,
        "includeUndeliverable": True,
        "dryRun": True,
    }, replays

    # The dead letter: the dry run's count asked about, replayed (in its own
    # source), delivered.
    assert replays[1:] == [
        {"source": "web", "messageIds": ["m-dead"], "status": "dead", "dryRun": True},
        {"source": "web", "messageIds": ["m-dead"], "status": "dead"},
    ], replays
    assert seen["dead"]["asked"].startswith("Replay 1 call?")
    assert "Replaying 1 call" in seen["dead"]["note"]
    assert seen["dead"]["statusAfter"]["dead"] == 0
    w.relay.wait(lambda: w.hook.keys().get("m-dead") == 1, what="the replayed call")

    def notified() -> list[str]:
        return [
            str(d.json["userId"])
            for d in w.hook.deliveries[received_before:]
            if isinstance(d.json, dict) and d.json.get("type") == "delete"
        ]

    w.relay.wait(lambda: notified() == [FOUND_USER], what="the deleted user's delete notification")
    late = [
        d.key
        for d in w.hook.deliveries[received_before:]
        if not (isinstance(d.json, dict) and d.json.get("type") == "delete")
    ]
    assert late == ["m-dead"], "the cross-site replay sent nothing; the console's replay sent the call once"

    # Privacy: the found user deleted and suppressed through the console,
    # asked first; the audit lists the operator and a keyed hash, not the id.
    assert seen["privacy"]["ok"] == "Delete" and FOUND_USER in seen["privacy"]["asked"], seen["privacy"]
    assert "1 stored call row(s)" in seen["privacy"]["note"] and "suppressed" in seen["privacy"]["note"], seen[
        "privacy"
    ]
    assert "console-test" in seen["privacy"]["rows"][0], seen["privacy"]["rows"]
    assert FOUND_USER not in json.dumps(seen["privacy"]["rows"])
    assert w.admin("GET", f"/admin/log?userId={FOUND_USER}")["calls"] == []
    # Sent after the edit: to the URL with its query credential, signed with
    # the shared secret, accepted with the write key.
    assert w.hook.deliveries[-1].verified
    assert w.hook.server.received.requests[-1][0] == f"/hook?token={QUERY_TOKEN}"
    assert w.relay.post("/v1/batch", {"batch": [track("after-edit")], "writeKey": WRITE_KEY})[0] == 200

    # The refused calls: the latest 100, not the thousand a write key's
    # holder could fill with 32 KB each.
    assert [a["path"] for a in seen["asked"] if a["path"].startswith("/admin/rejected")] == [
        "/admin/rejected?limit=100"
    ]
    # #constructor is no page: the overview, not a loop.
    assert seen["notAPage"] == "Overview"

    for page in ("overview", "sources", "log", "dead-letters", "privacy"):
        shot = TARGET / f"console-{page}.png"
        assert shot.stat().st_size > 10_000, shot
    # docs/console.png is this overview, copied there by hand when the
    # console changes (a test never writes to a tracked file).
    assert (TARGET / "console-overview.png").stat().st_size < 150_000
