"""``python -m callpost relay``: run the relay, and look after it.

    python -m callpost relay [--config relay.toml] [flags]      serve
    python -m callpost relay status       [--config ...]        queue depth, dead letters, oldest pending
    python -m callpost relay replay       [--message-id ID ...] [--source S] [--since T] [--until T]
                                          [--include-delivered]
    python -m callpost relay delete       --user-id U           delete notifications, one per source
    python -m callpost relay audience     --source S --audience NAME --members FILE
    python -m callpost relay dead-letters [--limit N]
    python -m callpost relay rejected     [--limit N]
    python -m callpost relay migrate                            run the schema migrations, and exit

The commands other than serve work on the database directly, whether the
relay runs or not; a running relay picks their work up within a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any, Dict, List, Optional, Sequence

from .. import _callpost
from .._errors import CallpostError
from . import ops
from .clock import Clock
from .config import RelayConfig, check_destinations, load
from .store import open_store

__all__ = ["main"]

logger = logging.getLogger("callpost.relay")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", help="TOML configuration file")
    p.add_argument("--database", help="sqlite:///path/to/relay.db (default: callpost-relay.db here) or postgresql://...")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m callpost relay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p)
    p.add_argument("--listen", help="host:port to listen on (default 127.0.0.1:8088; port 0 picks one)")
    p.add_argument("--write-key", action="append", dest="write_keys", default=[],
                   help="a write key of the 'default' source (repeat for more)")
    p.add_argument("--webhook-url", action="append", dest="webhook_urls", default=[],
                   help="an endpoint of the 'default' source's Webhooks destination (up to 5)")
    p.add_argument("--shared-secret", help="the 'default' source's shared secret (prefer CALLPOST_RELAY_SHARED_SECRET)")
    p.add_argument("--admin-token", help="bearer token for /admin (prefer CALLPOST_RELAY_ADMIN_TOKEN)")
    p.add_argument("--allow-private-networks", action="store_const", const=True, default=None,
                   help="allow webhook URLs on loopback and private addresses")
    p.add_argument("--synchronous", choices=["FULL", "NORMAL"], help="SQLite durability (default FULL)")
    p.add_argument("--log-level", help="DEBUG, INFO (default), WARNING, ERROR")
    p.add_argument("--test-clock", action="store_true",
                   help="testing only: let POST /admin/test/clock move the relay's clock")
    p.add_argument("--clock-offset-ms", type=int, default=0, help="testing only, with --test-clock: start the clock this far ahead")
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("status", help="queue depth, dead letters, the oldest pending delivery")
    _common(s)
    s.add_argument("--json", action="store_true", help="print JSON")
    r = sub.add_parser("replay", help="deliver dead letters again (filters combine)")
    _common(r)
    r.add_argument("--message-id", action="append", dest="message_ids", default=[])
    r.add_argument("--source")
    r.add_argument("--since", help="received at or after (ISO 8601)")
    r.add_argument("--until", help="received before (ISO 8601)")
    r.add_argument("--include-delivered", action="store_true",
                   help="also calls already delivered and still kept for deduplication")
    d = sub.add_parser("delete", help="send a delete notification for a user to every enabled destination")
    _common(d)
    d.add_argument("--user-id", required=True)
    a = sub.add_parser("audience", help="sync an audience's members: identify calls for the changes")
    _common(a)
    a.add_argument("--source", required=True)
    a.add_argument("--audience", required=True)
    a.add_argument("--members", required=True, help="file of user ids, one per line, or a JSON array ('-': stdin)")
    m = sub.add_parser("migrate", help="run the database's schema migrations (a start runs them too)")
    _common(m)
    for name, what in (("dead-letters", "deliveries that gave up"), ("rejected", "calls refused inside accepted batches")):
        x = sub.add_parser(name, help=f"list {what}")
        _common(x)
        x.add_argument("--limit", type=int, default=100)
    return p


def _config(args: argparse.Namespace) -> RelayConfig:
    overrides: Dict[str, Any] = {"database": args.database}
    for key in ("listen", "write_keys", "webhook_urls", "shared_secret", "admin_token", "allow_private_networks",
                "synchronous", "log_level"):
        overrides[key] = getattr(args, key, None)
    if getattr(args, "test_clock", False):
        overrides["test_clock"] = True
        overrides["clock_offset_ms"] = args.clock_offset_ms
    return load(args.config, overrides)


def _members(path: str) -> List[str]:
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    stripped = text.strip()
    if stripped.startswith("["):
        members = json.loads(stripped)
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise ValueError("the members JSON must be an array of strings")
        return members
    return [line.strip() for line in text.splitlines() if line.strip()]


async def _command(cfg: RelayConfig, args: argparse.Namespace) -> int:
    store = open_store(cfg.database, synchronous=cfg.synchronous, exclusive=False)
    clock = Clock()
    await store.start()
    try:
        if args.command == "migrate":
            before, after = store.migrated
            print(f"schema version {before} -> {after}" if before != after else f"schema version {after}: up to date")
        elif args.command == "status":
            stats = await ops.status(store, clock)
            if args.json:
                print(json.dumps(stats))
            else:
                age = stats["oldest_pending_age_seconds"]
                print(f"pending deliveries: {stats['pending']} ({stats['in_flight']} in flight)")
                print(f"dead letters:       {stats['dead']}")
                print(f"delivered (kept):   {stats['delivered']}")
                print(f"disabled:           {stats['disabled']}")
                print(f"rejected calls:     {stats['rejected']}")
                print("oldest pending:     " + ("none" if age is None else f"{age:.1f} s old"))
        elif args.command == "replay":
            since = None if args.since is None else _callpost.parse_timestamp(args.since)
            until = None if args.until is None else _callpost.parse_timestamp(args.until)
            n = await ops.replay(store, clock, message_ids=args.message_ids, source=args.source, since=since,
                                 until=until, include_delivered=args.include_delivered)
            print(f"replaying {n} deliveries")
        elif args.command == "delete":
            sources = await ops.delete_user(store, cfg, clock, args.user_id)
            print(f"delete notifications stored for {len(sources)} source(s): {', '.join(sources) or 'none'}")
        elif args.command == "audience":
            n = await ops.sync_audience(store, cfg, clock, args.source, args.audience, _members(args.members))
            print(f"{n} identify call(s) stored for audience {args.audience!r}")
        elif args.command in ("dead-letters", "rejected"):
            rows = await (store.dead_letters(args.limit) if args.command == "dead-letters" else store.rejected(args.limit))
            for row in rows:
                print(json.dumps(row, ensure_ascii=False))
        return 0
    finally:
        await store.close()


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        cfg = _config(args)
    except CallpostError as e:
        print(f"callpost relay: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command:
        try:
            return asyncio.run(_command(cfg, args))
        except (CallpostError, ValueError, OSError, RuntimeError) as e:
            print(f"callpost relay {args.command}: {e}", file=sys.stderr)
            return 1
    try:
        check_destinations(cfg)
    except CallpostError as e:
        print(f"callpost relay: {e}", file=sys.stderr)
        return 2
    from .server import serve

    return serve(cfg)
