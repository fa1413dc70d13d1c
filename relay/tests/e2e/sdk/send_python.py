"""segment-analytics-python, unmodified, sending every call kind to the relay.

    python send_python.py <host> <writeKey> <n per kind> <timestamp offset ms> <tag> <gzip 0|1>

Run with the interpreter of a virtualenv holding the SDK version under test.
Markers as in send_node.mjs, with ``<tag>-``.
"""

import datetime
import sys

import segment.analytics as analytics

host, write_key, n, offset, tag, gz = sys.argv[1:]
client = analytics.Client(write_key, host=host, gzip=gz == "1", upload_size=20, max_retries=10, sync_mode=False)


def ts() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(milliseconds=int(offset))


for i in range(int(n)):
    user = f"{tag}-user-{i}"
    client.identify(user, {"seq": f"{tag}-identify-{i}", "email": "ada@example.com"}, timestamp=ts())
    client.track(
        user, "Order Completed", {"seq": f"{tag}-track-{i}", "total": 25.5, "items": [{"sku": "A1"}]}, timestamp=ts()
    )
    client.page(user, "Docs", "Home", {"seq": f"{tag}-page-{i}"}, timestamp=ts())
    client.screen(user, "Docs", f"{tag}-screen-{i}", {"seq": f"{tag}-screen-{i}"}, timestamp=ts())
    client.group(user, f"g-{i}", {"seq": f"{tag}-group-{i}"}, timestamp=ts())
    client.alias(f"{tag}-prev-{i}", f"{tag}-alias-{i}", timestamp=ts())
client.flush()
client.join()
print("sent")
