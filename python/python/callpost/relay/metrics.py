"""The relay's counters, as Prometheus text (``GET /metrics``).

Counters live in this process; the queue gauges (pending deliveries, the
oldest one's age, dead letters) are read from the store at each scrape, so
they are right across restarts and, on Postgres, across relays.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Tuple

__all__ = ["Metrics"]

# Commit latency buckets, seconds: fsync on an SSD is 0.1-2 ms; the
# benchmark's p99 target for the whole acknowledgement is 25 ms.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Tuple[Tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


class Metrics:
    """Counters and histograms; ``render`` writes them out."""

    def __init__(self) -> None:
        self.requests: "Counter[Tuple[Tuple[str, str], ...]]" = Counter()
        self.calls: "Counter[Tuple[Tuple[str, str], ...]]" = Counter()
        self.deliveries: "Counter[Tuple[Tuple[str, str], ...]]" = Counter()
        self.attempts: "Counter[Tuple[Tuple[str, str], ...]]" = Counter()
        self._statement_counters: List[List[int]] = []
        self.commit_buckets = [0] * (len(_BUCKETS) + 1)
        self.commit_sum = 0.0
        self.commit_count = 0
        self.committed_calls = 0
        self.stale_finishes = 0
        self.conflicts = 0

    def statement_counter(self) -> List[int]:
        """A counter cell for one connection's statements; each is written
        by one thread only, and summed on scrape."""
        cell = [0]
        self._statement_counters.append(cell)
        return cell

    @property
    def sql_statements(self) -> int:
        return sum(c[0] for c in self._statement_counters)

    def request(self, status: int) -> None:
        self.requests[(("status", str(status)),)] += 1

    def call(self, source: str, outcome: str, n: int = 1, code: str = "") -> None:
        """``outcome``: accepted, duplicate, rejected (with its ``code``)."""
        key: Tuple[Tuple[str, str], ...] = (("source", source), ("outcome", outcome))
        if code:
            key += (("code", code),)
        self.calls[key] += n

    def delivery(self, outcome: str) -> None:
        """``outcome``: delivered, dead, disabled."""
        self.deliveries[(("outcome", outcome),)] += 1

    def attempt(self, result: str) -> None:
        """``result``: an HTTP status class (2xx…5xx) or timeout, connection, tls."""
        self.attempts[(("result", result),)] += 1

    def observe_commit(self, seconds: float, calls: int) -> None:
        self.commit_buckets[bisect.bisect_left(_BUCKETS, seconds)] += 1
        self.commit_sum += seconds
        self.commit_count += 1
        self.committed_calls += calls

    def render(self, stats: Optional[Mapping[str, Any]] = None, backlog: int = 0) -> str:
        out: List[str] = []

        def counter(name: str, help_: str, values: Mapping[Tuple[Tuple[str, str], ...], int]) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} counter")
            for labels, v in sorted(values.items()):
                out.append(f"{name}{_labels(labels)} {v}")

        def gauge(name: str, help_: str, value: Any) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} gauge")
            out.append(f"{name} {value}")

        counter("callpost_relay_requests_total", "Tracking API requests, by HTTP status answered.", self.requests)
        counter("callpost_relay_calls_total",
                "Calls received: accepted, duplicate (already stored) or rejected (by code).", self.calls)
        counter("callpost_relay_deliveries_total", "Deliveries ended: delivered, dead (dead letter), disabled.",
                self.deliveries)
        counter("callpost_relay_webhook_attempts_total", "Webhook attempts, by result.", self.attempts)
        counter("callpost_relay_sql_statements_total", "SQL statements run, BEGIN and COMMIT included.",
                {(): self.sql_statements})
        counter("callpost_relay_stale_finishes_total",
                "Delivery results refused because the lease had passed to another worker.", {(): self.stale_finishes})
        counter("callpost_relay_transaction_conflicts_total",
                "Transactions Postgres aborted for a deadlock or serialization failure, and that ran again.",
                {(): self.conflicts})
        out.append("# HELP callpost_relay_commit_seconds Storage transaction latency (group commit).")
        out.append("# TYPE callpost_relay_commit_seconds histogram")
        running = 0
        for bound, n in zip(_BUCKETS + (float("inf"),), self.commit_buckets):
            running += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'callpost_relay_commit_seconds_bucket{{le="{le}"}} {running}')
        out.append(f"callpost_relay_commit_seconds_sum {self.commit_sum}")
        out.append(f"callpost_relay_commit_seconds_count {self.commit_count}")
        gauge("callpost_relay_ingest_backlog_calls", "Calls waiting for the storage writer.", backlog)
        if stats is not None:
            gauge("callpost_relay_queue_depth", "Deliveries pending (due or waiting for a retry).", stats["pending"])
            gauge("callpost_relay_in_flight", "Deliveries held by a worker now.", stats["in_flight"])
            gauge("callpost_relay_dead_letters", "Deliveries that gave up, waiting for a replay.", stats["dead"])
            gauge("callpost_relay_rejected_calls", "Calls refused inside accepted batches, kept for review.",
                  stats["rejected"])
            age = stats["oldest_pending_age_seconds"]
            gauge("callpost_relay_oldest_pending_age_seconds", "Age of the oldest pending delivery.",
                  0 if age is None else age)
        return "\n".join(out) + "\n"

    def snapshot(self) -> Dict[str, Any]:
        """The counters as plain numbers, for tests and the benchmark."""
        return {
            "requests": {dict(k).get("status", ""): v for k, v in self.requests.items()},
            "sql_statements": self.sql_statements,
            "commits": self.commit_count,
            "committed_calls": self.committed_calls,
        }
