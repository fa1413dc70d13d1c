"""The relay's operations beyond ingest, shared by the admin endpoints and
the CLI: delete notifications, audience syncs, replays, status.

Calls the relay makes itself are enriched by the core (``originate``: a
``messageId``, ``receivedAt``) and stored like received ones, so they are
delivered, retried and dead-lettered the same way.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

from .. import _callpost
from .clock import Clock
from .config import RelayConfig
from .store import DISABLED, PENDING, Row, Store

__all__ = ["delete_user", "sync_audience", "replay", "status"]


async def delete_user(store: Store, cfg: RelayConfig, clock: Clock, user_id: str) -> List[str]:
    """Stores one delete notification per source whose Webhooks
    destination is enabled (webhooks-destination.md, Events); returns those
    sources. A source with its destination switched off
    (``enabled = false``) is passed to the core as ``{"Webhooks": false}``,
    which leaves it out."""
    now = clock.now_ms()
    sources = [(s.name, None if s.enabled else {"Webhooks": False}) for s in cfg.sources if s.endpoints]
    rows = []
    for source, message in _callpost.delete_notifications(user_id, sources, now):
        a = _callpost.originate(message, now)
        rows.append(Row(source, a.message_id, a.kind, a.message, now, PENDING))
    await store.insert(rows, [], now)
    return [r.source for r in rows]


async def sync_audience(store: Store, cfg: RelayConfig, clock: Clock, source: str, audience: str,
                        members: Iterable[str]) -> int:
    """Takes an audience's current member set, and stores an identify call
    for each user who joined (trait ``true``) or left (``false``) since the
    last sync (the core's ``AudienceSync``; the first sync sends everyone).
    The new state and the calls are stored in one transaction. Returns how
    many calls were stored."""
    src = cfg.source(source)
    state = await store.audience_state(source, audience)
    sync = _callpost.AudienceSync.from_json(state) if state else _callpost.AudienceSync(audience)
    now = clock.now_ms()
    sync.handle_sync(list(members), now)
    rows = []
    status = PENDING if src.has_destination else DISABLED
    while (message := sync.poll_call()) is not None:
        a = _callpost.originate(message, now)
        rows.append(Row(source, a.message_id, a.kind, a.message, now, status))
    await store.audience_sync(source, audience, sync.to_json(), rows, now)
    return len(rows)


async def replay(store: Store, clock: Clock, *, message_ids: Sequence[str] = (), source: Optional[str] = None,
                 since: Optional[int] = None, until: Optional[int] = None, include_delivered: bool = False) -> int:
    """Makes dead letters (and, with ``include_delivered``, delivered calls
    still kept for deduplication) pending again, due now, with a fresh
    4-hour window and the same ``messageId`` (so the same
    ``Idempotency-Key``). Filters combine; none replays every dead letter.
    Returns how many."""
    return await store.replay(clock.now_ms(), message_ids, source, since, until, include_delivered)


async def status(store: Store, clock: Clock) -> Dict[str, Any]:
    """Queue depth, deliveries by state, the oldest pending delivery."""
    return await store.stats(clock.now_ms())
