# A program written for segment-analytics-python 2.x. test_segment.py runs
# it with Segment's SDK, and with its `segment.analytics` import changed to
# `import callpost.segment as analytics`, against one local ingest server,
# and compares what arrives field by field. It prints each call's returned
# (success, msg) as a JSON line.
import datetime
import decimal
import enum
import json
import os
import sys

import segment.analytics as analytics


class Plan(enum.Enum):
    PRO = "pro"
    TEAM = "team"


def show(result: tuple[bool, dict[str, object]]) -> None:
    success, msg = result
    print(json.dumps({"success": success, "msg": msg}, default=str, sort_keys=True))


analytics.write_key = os.environ["WRITE_KEY"]
analytics.host = os.environ["INGEST_URL"]
analytics.on_error = lambda e, batch: print("on_error", e, len(batch), file=sys.stderr)

when = datetime.datetime(2026, 3, 1, 12, 30, 15, 250000, tzinfo=datetime.timezone.utc)
products = [
    {
        "product_id": f"sku-{i}",
        "name": f"Produit n°{i} ✓",
        "price": decimal.Decimal("19.99"),
        "quantity": i % 3 + 1,
        "category": "Games",
        "tags": {"new"},
        "coupon": None,
        "in_stock": i % 2 == 0,
    }
    for i in range(12)
]

show(
    analytics.identify(
        "u-1",
        {
            "email": "ada@example.com",
            "name": "Ada Lovelace",
            "plan": Plan.PRO,
            "logins": 42,
            "vip": True,
            "score": 9.5,
            "address": {"city": "Zürich"},
            "born": datetime.date(1815, 12, 10),
        },
        timestamp=when,
    )
)
show(
    analytics.track(
        "u-1",
        "Order Completed",
        {"order_id": "o-77", "total": decimal.Decimal("239.88"), "currency": "EUR", "products": products},
        context={"ip": "203.0.113.9", "locale": "de-CH"},
        timestamp=when,
    )
)
show(analytics.track(user_id=1234, event="Numeric Id", properties={"n": 1}, timestamp=when))
show(
    analytics.track(
        anonymous_id="anon-9", event="Anonymous", timestamp=when, integrations={"All": False, "Mixpanel": True}
    )
)
show(analytics.page("u-1", "Docs", "Python", {"path": "/docs/python", "referrer": ""}, timestamp=when))
show(analytics.page("u-1", name="Home", timestamp=when))
show(analytics.screen("u-1", "Onboarding", "Step 2", {"step": 2}, timestamp=when))
show(analytics.group("u-1", "g-42", {"name": "Initech", "employees": 500, "tier": Plan.TEAM}, timestamp=when))
show(analytics.group("u-1", 42, timestamp=when))
show(analytics.alias("anon-9", "u-1", timestamp=when))
show(analytics.track("u-1", "With Id", {"x": 1}, message_id="fixed-message-id-1", timestamp=when))

client = analytics.Client(
    os.environ["WRITE_KEY"], host=os.environ["INGEST_URL"], upload_size=5, upload_interval=0.2, max_retries=3, timeout=5
)
for i in range(7):
    show(client.track("u-2", "Client Event", {"i": i, "ratio": i / 7}, timestamp=when))
client.flush()
client.shutdown()

analytics.flush()
analytics.shutdown()
