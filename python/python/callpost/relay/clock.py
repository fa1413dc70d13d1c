"""The relay's clock: the host's, plus an offset that only tests set.

Every time the relay uses (receipt, due times, the core's ``now``) comes
from here, so a test can move the relay hours ahead, across restarts, and
watch the 4-hour retry window play out in seconds. The offset is only
settable when the relay was started with ``--test-clock``.
"""

from __future__ import annotations

import time

__all__ = ["Clock"]


class Clock:
    """Milliseconds since the epoch, shifted by ``offset_ms``."""

    def __init__(self, offset_ms: int = 0) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms
