"""The relay's configuration: a TOML file, environment variables and flags.

Precedence, highest first: command-line flags, ``CALLPOST_RELAY_*``
environment variables, the TOML file, the defaults below. With no file at
all, a write key and a webhook URL (as flags or variables) are enough: the
database is then ``callpost-relay.db`` in the working directory.

Every value is checked here, at start-up, so a bad setting stops the relay
with a message that names it, instead of failing later on live traffic.
The destination settings themselves (URLs, headers, secret, mode) are
validated by the core, as the Python and JS packages validate them.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import urllib.parse
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import _callpost
from .._errors import CallpostError
from .._errors import ConfigError as _ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

__all__ = ["RelayConfig", "Source", "load", "check_destinations"]

DEFAULT_LISTEN = "127.0.0.1:8088"
DEFAULT_DATABASE = "sqlite:///callpost-relay.db"
"""An embedded SQLite database in the working directory."""

# Concurrent webhook deliveries. Each is a coroutine and at most 5 open
# requests, so 256 is a few MB; it bounds what one relay asks of receivers.
DEFAULT_DELIVERY_CONCURRENCY = 256
# How long a claimed delivery is held before another worker may take it: a
# round lasts at most the 5 s webhook timeout, so 20 s leaves room, and an
# attempt a crashed relay had in flight is made again at most 20 s later
# (the SQLite relay, the only one on its file, takes it back at start).
DEFAULT_LEASE_SECONDS = 20
# Calls waiting for the storage writer before ingest answers 503: about
# 5 s of the benchmark's sustained rate, so a slow disk shows as
# backpressure long before memory is at risk.
DEFAULT_MAX_BACKLOG = 50_000
# Delivered calls stay this long: a batch resent after a lost answer is
# recognised as long as they do (the minimum, 24 h, is the deduplication
# window), and replay --include-delivered can send them again. Older ones
# are deleted, so the history does not grow forever.
DEFAULT_RETENTION_HOURS = 7 * 24
MIN_RETENTION_HOURS = 24


def ConfigError(message: str) -> _ConfigError:  # noqa: N802 - raised like a class
    """A relay setting that cannot work (``callpost.ConfigError``, code
    ``invalid_config``); the message names it."""
    return _ConfigError("invalid_config", message)


class Secret(str):
    """A string that never shows itself in a repr or a log line."""

    def __repr__(self) -> str:
        return "Secret('***')"


@dataclass(frozen=True)
class Source:
    """A source: the write keys its senders use, and its Webhooks
    destination (``None``: calls are stored, and go nowhere)."""

    name: str
    write_keys: Tuple[Secret, ...]
    endpoints: Tuple[Any, ...] = ()
    shared_secret: Optional[Secret] = None
    mode: Optional[str] = None
    enabled: bool = True

    @property
    def has_destination(self) -> bool:
        return bool(self.endpoints) and self.enabled

    def settings(self) -> "_callpost.Webhooks":
        """The core's validated destination settings."""
        return _callpost.Webhooks(list(self.endpoints), self.shared_secret, mode=self.mode)


@dataclass(frozen=True)
class RelayConfig:
    """Everything the relay runs with. See the README's "Relay" section."""

    listen: str = DEFAULT_LISTEN
    database: str = DEFAULT_DATABASE
    admin_token: Optional[Secret] = None
    sources: Tuple[Source, ...] = ()
    allow_private_networks: bool = False
    synchronous: str = "FULL"
    cors_origins: Tuple[str, ...] = ("*",)
    deliver: bool = True
    """False: an ingest-only relay, which stores calls and sends nothing
    (another relay on the same Postgres delivers them)."""
    delivery_concurrency: int = DEFAULT_DELIVERY_CONCURRENCY
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    max_backlog: int = DEFAULT_MAX_BACKLOG
    retention_hours: int = DEFAULT_RETENTION_HOURS
    ca_file: Optional[str] = None
    log_level: str = "INFO"
    test_clock: bool = False
    clock_offset_ms: int = 0
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def host_port(self) -> Tuple[str, int]:
        host, sep, port = self.listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"listen must be host:port, not {self.listen!r}")
        return host.strip("[]") or "127.0.0.1", int(port)

    def write_keys(self) -> Dict[str, str]:
        """write key → source name."""
        return {k: s.name for s in self.sources for k in s.write_keys}

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise ConfigError(f"no source named {name!r}")


def _bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{what} must be true or false, not {value!r}")


def _int(value: Any, what: str, low: int, high: int) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be an integer, not {value!r}") from None
    if isinstance(value, bool) or not low <= n <= high:
        raise ConfigError(f"{what} must be between {low} and {high}, not {value!r}")
    return n


def _strings(value: Any, what: str) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{what} must be a list of non-empty strings")
    return tuple(value)


def _source(raw: Mapping[str, Any], index: int) -> Source:
    where = f"sources[{index}]"
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name must be a non-empty string")
    keys = tuple(Secret(k) for k in _strings(raw.get("write_keys", []), f"source {name!r} write_keys"))
    if not keys:
        raise ConfigError(f"source {name!r} needs at least one write key")
    hooks = raw.get("webhooks")
    if hooks is None:
        return Source(name, keys)
    if not isinstance(hooks, Mapping):
        raise ConfigError(f"source {name!r}: webhooks must be a table")
    unknown = set(hooks) - {"urls", "shared_secret", "mode", "enabled"}
    if unknown:
        raise ConfigError(f"source {name!r}: unknown webhooks settings {sorted(unknown)}")
    urls = hooks.get("urls", [])
    if isinstance(urls, (str, Mapping)):
        urls = [urls]
    if not isinstance(urls, list):
        raise ConfigError(f"source {name!r}: webhooks.urls must be a list")
    secret = hooks.get("shared_secret")
    if secret is not None and not isinstance(secret, str):
        raise ConfigError(f"source {name!r}: webhooks.shared_secret must be a string")
    mode = hooks.get("mode")
    if mode is not None and not isinstance(mode, str):
        raise ConfigError(f"source {name!r}: webhooks.mode must be a string")
    src = Source(
        name,
        keys,
        tuple(dict(u) if isinstance(u, Mapping) else u for u in urls),
        Secret(secret) if secret else None,
        mode,
        _bool(hooks.get("enabled", True), f"source {name!r} webhooks.enabled"),
    )
    try:
        src.settings()
    except CallpostError as e:
        raise ConfigError(f"source {name!r}: {e} ({e.code})") from None
    return src


_TOP = {
    "listen", "database", "admin_token", "sources", "security", "storage", "delivery", "ingest", "log_level",
}


def _from_toml(data: Mapping[str, Any]) -> Dict[str, Any]:
    unknown = set(data) - _TOP
    if unknown:
        raise ConfigError(f"unknown settings {sorted(unknown)}")
    out: Dict[str, Any] = {}
    for key in ("listen", "database", "admin_token", "log_level"):
        if key in data:
            out[key] = data[key]
    sources = data.get("sources", [])
    if not isinstance(sources, list):
        raise ConfigError("sources must be an array of tables ([[sources]])")
    out["sources"] = sources
    sections = {
        "security": {"allow_private_networks", "ca_file"},
        "storage": {"synchronous", "retention_hours"},
        "delivery": {"enabled", "concurrency", "lease_seconds"},
        "ingest": {"max_backlog", "cors_origins"},
    }
    for section, keys in sections.items():
        table = data.get(section, {})
        if not isinstance(table, Mapping):
            raise ConfigError(f"[{section}] must be a table")
        unknown = set(table) - keys
        if unknown:
            raise ConfigError(f"unknown [{section}] settings {sorted(unknown)}")
        renamed = {("delivery", "concurrency"): "delivery_concurrency", ("delivery", "enabled"): "deliver"}
        for k, v in table.items():
            out[renamed.get((section, str(k)), str(k))] = v
    return out


ENV_PREFIX = "CALLPOST_RELAY_"
_ENV = {
    "LISTEN": "listen",
    "DATABASE": "database",
    "ADMIN_TOKEN": "admin_token",
    "WRITE_KEYS": "write_keys",
    "WEBHOOK_URLS": "webhook_urls",
    "SHARED_SECRET": "shared_secret",
    "ALLOW_PRIVATE_NETWORKS": "allow_private_networks",
    "SYNCHRONOUS": "synchronous",
    "CA_FILE": "ca_file",
    "LOG_LEVEL": "log_level",
    "DELIVER": "deliver",
}


def load(
    path: Optional[str] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> RelayConfig:
    """The configuration from ``path`` (TOML, optional), the environment,
    and ``overrides`` (flags; ``None`` values are ignored)."""
    raw: Dict[str, Any] = {}
    if path:
        try:
            with open(path, "rb") as f:
                raw = _from_toml(tomllib.load(f))
        except OSError as e:
            raise ConfigError(f"cannot read {path}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path} is not valid TOML: {e}") from None
    env = os.environ if environ is None else environ
    for suffix, key in _ENV.items():
        if ENV_PREFIX + suffix in env:
            raw[key] = env[ENV_PREFIX + suffix]
    for key, value in (overrides or {}).items():
        if value is not None and value != [] and value != ():
            raw[key] = value
    return _build(raw)


def _build(raw: Dict[str, Any]) -> RelayConfig:
    sources = [_source(s, i) for i, s in enumerate(raw.pop("sources", []) or [])]
    # The flag/environment form: one source called "default".
    keys = raw.pop("write_keys", None)
    urls = raw.pop("webhook_urls", None)
    secret = raw.pop("shared_secret", None)
    if keys is not None or urls is not None:
        if keys is None:
            raise ConfigError("a webhook URL needs a write key (--write-key or CALLPOST_RELAY_WRITE_KEYS)")
        hooks: Dict[str, Any] = {}
        if urls is not None:
            hooks["urls"] = list(_strings(urls, "webhook URLs"))
        if secret:
            hooks["shared_secret"] = secret
        sources.append(_source({"name": "default", "write_keys": list(_strings(keys, "write keys")),
                                **({"webhooks": hooks} if hooks else {})}, len(sources)))
    elif secret is not None:
        raise ConfigError("a shared secret needs a webhook URL")
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError("source names must be unique")
    owners: Dict[str, str] = {}
    for s in sources:
        for k in s.write_keys:
            if k in owners:
                raise ConfigError(f"a write key is used by both {owners[k]!r} and {s.name!r}")
            owners[k] = s.name
    cfg = RelayConfig(sources=tuple(sources))
    if "listen" in raw:
        cfg = replace(cfg, listen=str(raw["listen"]))
    if "database" in raw:
        cfg = replace(cfg, database=str(raw["database"]))
    if raw.get("admin_token"):
        cfg = replace(cfg, admin_token=Secret(str(raw["admin_token"])))
    if "allow_private_networks" in raw:
        cfg = replace(cfg, allow_private_networks=_bool(raw["allow_private_networks"], "allow_private_networks"))
    if "synchronous" in raw:
        sync = str(raw["synchronous"]).upper()
        if sync not in ("FULL", "NORMAL"):
            raise ConfigError(f"storage.synchronous must be FULL or NORMAL, not {raw['synchronous']!r}")
        cfg = replace(cfg, synchronous=sync)
    if "cors_origins" in raw:
        cfg = replace(cfg, cors_origins=_strings(raw["cors_origins"], "ingest.cors_origins"))
    if "delivery_concurrency" in raw:
        cfg = replace(cfg, delivery_concurrency=_int(raw["delivery_concurrency"], "delivery.concurrency", 1, 10_000))
    if "deliver" in raw:
        cfg = replace(cfg, deliver=_bool(raw["deliver"], "delivery.enabled"))
    if "lease_seconds" in raw:
        cfg = replace(cfg, lease_seconds=_int(raw["lease_seconds"], "delivery.lease_seconds", 10, 3600))
    if "max_backlog" in raw:
        cfg = replace(cfg, max_backlog=_int(raw["max_backlog"], "ingest.max_backlog", 1, 10_000_000))
    if "retention_hours" in raw:
        cfg = replace(cfg, retention_hours=_int(raw["retention_hours"], "storage.retention_hours",
                                                MIN_RETENTION_HOURS, 24 * 3650))
    if raw.get("ca_file"):
        cfg = replace(cfg, ca_file=str(raw["ca_file"]))
    if raw.get("log_level"):
        cfg = replace(cfg, log_level=str(raw["log_level"]).upper())
    if raw.get("test_clock"):
        cfg = replace(cfg, test_clock=True, clock_offset_ms=_int(raw.get("clock_offset_ms", 0), "clock offset", 0, 10**12))
    cfg.host_port  # checks listen
    if not cfg.database.startswith(("sqlite://", "postgresql://", "postgres://")):
        raise ConfigError(f"database must be sqlite:///path or postgresql://..., not {cfg.database!r}")
    return cfg


def destination_hosts(cfg: RelayConfig) -> List[Tuple[str, str]]:
    """(source name, host) of every destination URL."""
    out = []
    for s in cfg.sources:
        if not s.has_destination:
            continue
        for url in s.settings().urls:
            host = urllib.parse.urlsplit(url).hostname or ""
            out.append((s.name, host))
    return out


def check_destinations(cfg: RelayConfig, resolve: Any = socket.getaddrinfo) -> None:
    """Refuses destinations on loopback, private and other non-public
    addresses (the core's rule) unless ``allow_private_networks``. Names
    are resolved now, and every connection checks its addresses again (a
    name may later resolve elsewhere). A name that does not resolve yet is
    left to the connection check."""
    if cfg.allow_private_networks:
        return
    for source, host in destination_hosts(cfg):
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                addresses = sorted({str(info[4][0]).split("%")[0] for info in resolve(host, None)})
            except OSError:
                continue
        bad = [a for a in addresses if not _callpost.is_public_address(a)]
        if bad:
            raise ConfigError(
                f"source {source!r}: the webhook host {host} is at a private or loopback address ({', '.join(bad)}); "
                "set [security] allow_private_networks = true to allow it"
            )
