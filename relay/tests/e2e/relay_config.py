"""The relay's configuration file for the relay tests and the relay
benchmark (``benches/relay/bench.py``): one template. Standard library only,
as the benchmark runs on the system's Python."""

from __future__ import annotations

import json

# At least 32 characters: the relay refuses shorter admin tokens.
ADMIN = "admin-test-token-0123456789abcdef0123"


def config_text(
    database_url: str, urls: list[str], *, secret: str, write_key: str, extra: str = "", sources: str = ""
) -> str:
    """One source ("web") with its Webhooks destination at ``urls``,
    private networks allowed (everything runs on 127.0.0.1); ``sources``
    goes on inside the source's table, ``extra`` after everything."""
    hooks = ", ".join(json.dumps(u) for u in urls)
    return f"""
database = "{database_url}"
admin_token = "{ADMIN}"
log_level = "INFO"

[[sources]]
name = "web"
write_keys = ["{write_key}"]
[sources.webhooks]
urls = [{hooks}]
shared_secret = "{secret}"
{sources}
[security]
allow_private_networks = true
{extra}
"""
