"""Serving the relay with uvicorn, in this process.

uvicorn or granian: measured with the same bare ASGI echo app on this
2-core machine, posting 6 KB batches with wrk (BENCHMARKS.md, "Relay"),
uvicorn with uvloop and httptools answered 12.4-13.8k requests/s and
granian 13.3-17.3k: within each other's noise. uvicorn runs inside this
process, on the relay's own event loop, so the HTTP server, the storage
writer and the delivery workers are one process: ``SIGTERM`` reaches all of
them through one shutdown, and ``kill -9`` leaves nothing running. granian
serves from worker processes of its own, which would outlive a killed
parent.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import uvicorn

from .app import Relay
from .config import RelayConfig

__all__ = ["serve"]

logger = logging.getLogger("callpost.relay")


class _Server(uvicorn.Server):
    """uvicorn's server, saying where it listens once it does (port 0
    picks a free port; tests read this line)."""

    async def startup(self, sockets: Optional[Any] = None) -> None:
        await super().startup(sockets)
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                logger.info("callpost relay listening on http://%s:%d", host, port)


def serve(cfg: RelayConfig, relay: Optional[Relay] = None) -> int:
    """Runs the relay until SIGTERM or SIGINT; returns the exit status."""
    host, port = cfg.host_port
    app = relay or Relay(cfg)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        access_log=False,
        # uvicorn's lines go through the same logging set-up as the relay's.
        log_config=None,
        log_level=cfg.log_level.lower(),
        server_header=False,
        date_header=False,
        # Requests in progress get this long after SIGTERM; the app's own
        # shutdown (deliveries in flight, the last commits) follows.
        timeout_graceful_shutdown=10,
    )
    server = _Server(config)
    server.run()
    return 0 if server.started else 1
