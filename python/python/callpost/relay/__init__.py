"""callpost relay: the service between Segment SDKs and the Webhooks
destination.

Any unmodified Segment SDK can send to it (``/v1/batch``, ``/v1/track``,
…, analytics.js's ``/v1/t``…). It stores every call durably before it
answers, and delivers each through its source's Webhooks destination,
keeping the destination's 4-hour retry promise across restarts. Run it
with ``python -m callpost relay``; embed it as an ASGI app with
``Relay(load("relay.toml"))``.

Needs the ``relay`` extra: ``pip install 'callpost[relay]'``.
"""

from __future__ import annotations

from .app import Relay
from .clock import Clock
from .config import RelayConfig, Source, load

__all__ = ["Relay", "RelayConfig", "Source", "Clock", "load"]
