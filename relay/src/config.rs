//! The relay's configuration: a TOML file, `CALLPOST_RELAY_*` environment
//! variables and command-line flags, in rising precedence.
//!
//! Every value is checked here, at start-up, so a bad setting stops the
//! relay with a message that names it instead of failing later on live
//! traffic. The destination settings themselves (URLs, headers, secret,
//! mode) are checked by the core, as the Python and JS packages check them.
//!
//! Secrets (the admin token, shared secrets) come from the file or the
//! environment, never from flags, which any user of the machine can read
//! in `ps`.

use crate::seal::{SealError, SealKey};
use callpost_core::filter::{Condition, Filters};
use callpost_core::mapping::Mapping;
use callpost_core::notify::DEAD_LETTER_WINDOW_RANGE_MS;
use callpost_core::protection::ProtectionConfig;
use callpost_core::shard::SlotMap;
use callpost_core::sources::{
    check_destination_names, check_source, SourceError, SourceSet, DEFAULT_DESTINATION,
};
use callpost_core::webhooks::{
    Auth, Batching, ClientCertificate, EndpointConfig, Method, Mode, Signing, Webhooks,
    MAX_BATCH_BYTES, MAX_BATCH_CALLS, MIN_BATCH_BYTES,
};
use callpost_core::{Code, NotifierConfig};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Where the Tracking API listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8088";
/// An embedded SQLite database in the working directory.
pub const DEFAULT_DATABASE: &str = "sqlite:///callpost-relay.db";
/// Deliveries in flight per relay. Each holds at most 5 requests; it
/// bounds what one relay asks of all receivers together.
pub const DEFAULT_DELIVERY_CONCURRENCY: usize = 256;
/// Requests in flight to one endpoint URL, from one relay: a receiver
/// that slows down holds at most this many of the relay's deliveries,
/// and never the whole of `concurrency`. 32 is Convoy's default worker
/// share per endpoint, and far more than a healthy receiver needs at
/// 5 s per request.
pub const DEFAULT_ENDPOINT_CONCURRENCY: usize = 32;
/// How long a claimed delivery is held before another worker may take it:
/// a round lasts at most the 5 s webhook timeout (per endpoint in failover
/// mode), so 20 s leaves room; leases are renewed every quarter.
pub const DEFAULT_LEASE_SECONDS: u64 = 20;
/// Calls waiting for the storage writer before ingest answers 503: a few
/// seconds of the benchmark's sustained rate, so a slow disk shows as
/// backpressure long before memory is at risk.
pub const DEFAULT_MAX_BACKLOG: usize = 50_000;
/// Delivered calls are kept a week: a batch resent after a lost answer is
/// recognised as long as they are, and `replay --include-delivered` can
/// send them again.
pub const DEFAULT_RETENTION_HOURS: u64 = 7 * 24;
/// The deduplication window: Segment deduplicates on messageId for 24 h.
pub const MIN_RETENTION_HOURS: u64 = 24;
/// Dead letters, undeliverable and refused calls are kept 30 days: long
/// enough to notice, fix and replay (Svix keeps failed messages 30 days).
pub const DEFAULT_PARKED_RETENTION_HOURS: u64 = 30 * 24;
/// The limit on every database call. SDKs time out after 10-15 s
/// (analytics-node 10 s, analytics-python 15 s), so a stuck database is
/// answered 503 before the sender gives up on its own.
pub const DEFAULT_DATABASE_TIMEOUT_MS: u64 = 5_000;
/// A request's headers must arrive within this (slowloris). nginx's
/// `client_header_timeout` is 60 s; 10 s is generous for one header block
/// on any network an SDK sends from.
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;
/// A request's body must arrive within this once its headers have: 500 KB
/// at 64 kB/s, a slow mobile link, takes 8 s.
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 15_000;
/// An idle keep-alive connection is closed after this. SDKs send at most
/// every flush interval (analytics-node 10 s, analytics-python 0.5 s);
/// nginx's `keepalive_timeout` is 75 s.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;
/// The largest header block: hyper's default read buffer is 400 kB; an
/// SDK's headers are under 1 kB and browsers' cookies under 8 kB each
/// (nginx's `large_client_header_buffers` is 4 × 8 kB).
pub const DEFAULT_MAX_HEADER_BYTES: usize = 32 * 1024;
/// Open connections on the Tracking API listener. Each costs a task and
/// its buffers (tens of kB); 10,000 fits in a few hundred MB and is below
/// the usual 65,536 open-file limit with room for the database and
/// receivers.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Open connections on the admin listener: operators and scrapers only.
pub const DEFAULT_MAX_ADMIN_CONNECTIONS: usize = 64;
/// The share of a listener's connections one client address (an IPv4
/// address, an IPv6 /64) may hold, as nginx's `limit_conn` keys by
/// address: a quarter, so one client never holds the whole cap, while a
/// proxy in front of the relay (every request from its address) still
/// gets most of it. `limits.max_connections_per_client` sets it outright.
pub const DEFAULT_CLIENT_SHARE: usize = 4;
/// An admin token shorter than this is refused at start: 32 characters
/// of a random token is 128 bits or more.
pub const MIN_ADMIN_TOKEN_LEN: usize = 32;
/// The largest admin request body (a replay list of 10,000 ids fits).
pub const MAX_ADMIN_BODY_BYTES: usize = 1_000_000;
pub use callpost_core::sources::MAX_SOURCE_NAME_LEN;

/// A string that never shows itself in a `Debug` or a log line.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The secret itself, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A setting that cannot work: the message names it, and the code is the
/// registry's. At start the relay prints both and exits 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A relay setting (file, environment or flag) that is malformed, out
    /// of range or missing: change the setting the message names.
    #[error("{0}")]
    Invalid(String),
    /// A source's or destination's setting that the core's rules refuse
    /// (its code is the core's: `invalid_settings`, `unsupported_scheme`,
    /// `private_address`, …): change the setting the message names.
    #[error("{message}")]
    Settings {
        /// The core's code.
        code: Code,
        /// What is wrong, and where.
        message: String,
    },
}

impl ConfigError {
    /// The registry's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Invalid(_) => Code::InvalidConfig,
            Self::Settings { code, .. } => *code,
        }
    }
}

impl From<SealError> for ConfigError {
    fn from(e: SealError) -> Self {
        match e.code() {
            Code::InvalidConfig => Self::Invalid(e.to_string()),
            code => Self::Settings {
                code,
                message: e.to_string(),
            },
        }
    }
}

fn bad(message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(message.into())
}

/// A source's setting the core refuses with `code`.
fn refused(code: Code, message: impl Into<String>) -> ConfigError {
    ConfigError::Settings {
        code,
        message: message.into(),
    }
}

/// How long each kind of finished row is kept (retention), ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Delivered calls (the deduplication window needs at least 24 h).
    pub delivered_ms: i64,
    /// Undeliverable calls.
    pub undeliverable_ms: i64,
    /// Dead letters.
    pub dead_ms: i64,
    /// Refused calls.
    pub rejected_ms: i64,
}

/// SQLite's durability setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync at every commit: nothing acknowledged is lost on power loss.
    Full,
    /// WAL's NORMAL: a power loss may lose the last commits (a crash of
    /// the process does not).
    Normal,
}

impl Synchronous {
    /// As SQLite spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

/// The default `service.name` of the relay's spans (`[tracing]`).
pub const DEFAULT_SERVICE_NAME: &str = "callpost-relay";

/// A source: the write keys its senders use, and its Webhooks destination.
#[derive(Debug, Clone)]
pub struct Source {
    /// Unique name, stored with each call.
    pub name: String,
    /// Its senders' write keys.
    pub write_keys: Vec<Secret>,
    /// Its destinations, in the order given (`[sources.webhooks]`, named
    /// `webhooks`, first). None: calls are stored and go nowhere.
    pub destinations: Vec<Destination>,
    /// Its own retention (`[sources.retention]`), ms; `None` for a kind
    /// kept as long as `[storage]` says.
    pub retention: SourceRetention,
}

/// A source's own retention of each kind of finished call, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceRetention {
    /// Delivered and filtered calls.
    pub delivered_ms: Option<i64>,
    /// Undeliverable calls.
    pub undeliverable_ms: Option<i64>,
    /// Dead letters.
    pub dead_ms: Option<i64>,
    /// Refused calls.
    pub rejected_ms: Option<i64>,
}

impl SourceRetention {
    /// The retention in force for the source: its own where it has one,
    /// the relay's elsewhere; `None` when it has none of its own.
    pub fn over(&self, relay: Retention) -> Option<Retention> {
        (*self != Self::default()).then(|| Retention {
            delivered_ms: self.delivered_ms.unwrap_or(relay.delivered_ms),
            undeliverable_ms: self.undeliverable_ms.unwrap_or(relay.undeliverable_ms),
            dead_ms: self.dead_ms.unwrap_or(relay.dead_ms),
            rejected_ms: self.rejected_ms.unwrap_or(relay.rejected_ms),
        })
    }
}

/// One destination of a source: a Webhooks destination with a name and a
/// trigger.
#[derive(Debug, Clone)]
pub struct Destination {
    /// Unique within its source, stored with each call it takes.
    pub name: String,
    /// The core's validated settings.
    pub webhooks: Webhooks,
    /// False: its calls are stored as undeliverable, nothing is sent.
    pub enabled: bool,
    /// The receiver protections it gives its endpoint URLs, if any.
    pub protection: Option<ProtectionConfig>,
    /// Which calls it takes (none: every call).
    pub trigger: Option<Condition>,
}

impl Destination {
    /// How messages name it: `source "shop": webhooks` for the default
    /// destination, `source "shop": destination "crm"` for another.
    pub fn at(&self, source: &str) -> String {
        if self.name == DEFAULT_DESTINATION {
            format!("source {source:?}: webhooks")
        } else {
            format!("source {source:?}: destination {:?}", self.name)
        }
    }

    /// Whether `call` goes to it: its trigger holds, or it has none.
    pub fn takes(&self, call: &callpost_core::Call) -> bool {
        self.trigger.as_ref().is_none_or(|t| t.holds(call))
    }
}

impl Source {
    /// Its destination `name`, enabled or not.
    pub fn destination(&self, name: &str) -> Option<&Destination> {
        self.destinations.iter().find(|d| d.name == name)
    }

    /// The settings of its destination `name`, if it is there and enabled.
    pub fn routed(&self, name: &str) -> Option<&Webhooks> {
        self.destination(name)
            .filter(|d| d.enabled)
            .map(|d| &d.webhooks)
    }

    /// Its enabled destinations.
    pub fn enabled(&self) -> impl Iterator<Item = &Destination> {
        self.destinations.iter().filter(|d| d.enabled)
    }
}

/// The listener protections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Headers must arrive within this.
    pub header_timeout: Duration,
    /// The body must arrive within this after the headers.
    pub body_timeout: Duration,
    /// An idle keep-alive connection is closed after this.
    pub idle_timeout: Duration,
    /// The largest header block.
    pub max_header_bytes: usize,
    /// Open connections on the Tracking API listener.
    pub max_connections: usize,
    /// Open connections on the admin listener.
    pub max_admin_connections: usize,
    /// Open connections one client address may hold on a listener.
    pub max_connections_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_millis(DEFAULT_HEADER_TIMEOUT_MS),
            body_timeout: Duration::from_millis(DEFAULT_BODY_TIMEOUT_MS),
            idle_timeout: Duration::from_millis(DEFAULT_IDLE_TIMEOUT_MS),
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_admin_connections: DEFAULT_MAX_ADMIN_CONNECTIONS,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS / DEFAULT_CLIENT_SHARE,
        }
    }
}

/// `[tracing]`: OpenTelemetry spans, exported by OTLP/HTTP ([`crate::trace`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracing {
    /// The collector's base URL (`http://host:4318`); spans go to
    /// `<it>/v1/traces`.
    pub otlp_endpoint: String,
    /// The resource's `service.name`.
    pub service_name: String,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object per line.
    Json,
}

/// Everything the relay runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Tracking API's `host:port` (port 0 picks a free one).
    pub listen: String,
    /// The admin API's and `/metrics`' own `host:port`; `None`: served on
    /// `listen`.
    pub admin_listen: Option<String>,
    /// `sqlite:///path` or `postgresql://…`.
    pub database: Secret,
    /// Bearer token for `/admin` and `/metrics`; `None`: no admin API.
    pub admin_token: Option<Secret>,
    /// The sources the file and the flags give (with a secret key, the
    /// database's sources are in force instead, once these are applied to
    /// it: [`crate::sources`]).
    pub sources: Vec<Arc<Source>>,
    /// The same sources in the form the database keeps.
    pub source_docs: Vec<SourceDoc>,
    /// `CALLPOST_RELAY_SECRET_KEY`: seals the sources kept in the
    /// database. Without it, the relay runs from the file alone.
    pub secret_key: Option<Arc<SealKey>>,
    /// Webhook URLs may resolve to loopback and private addresses.
    pub allow_private_networks: bool,
    /// PEM certificates trusted for deliveries, beside the system's.
    pub ca_file: Option<String>,
    /// SQLite durability.
    pub synchronous: Synchronous,
    /// How long finished rows are kept.
    pub retention: Retention,
    /// The limit on every database call.
    pub database_timeout: Duration,
    /// Origins browsers may send from (`*`: any).
    pub cors_origins: Vec<String>,
    /// False: an ingest-only relay (another relay on the same Postgres
    /// delivers).
    pub deliver: bool,
    /// Deliveries in flight per relay.
    pub delivery_concurrency: usize,
    /// Requests in flight per endpoint URL, per relay.
    pub endpoint_concurrency: usize,
    /// The receiver protections of each endpoint URL that has settings
    /// (`[sources.webhooks.protection]`); every other URL has the core's
    /// defaults.
    pub protections: HashMap<String, ProtectionConfig>,
    /// Where operational events go (`[operator]`), if anywhere.
    pub operator: Option<Operator>,
    /// How long a claim is held, ms.
    pub lease_ms: i64,
    /// Calls waiting for the writer before ingest answers 503.
    pub max_backlog: usize,
    /// Listener protections.
    pub limits: Limits,
    /// `error`, `warn`, `info` (default), `debug`, `trace`.
    pub log_level: String,
    /// Plain or JSON lines.
    pub log_format: LogFormat,
    /// OpenTelemetry spans (`[tracing]`); `None`: no tracing work at all.
    pub tracing: Option<Tracing>,
    /// Test builds: the clock starts this far ahead, and
    /// `POST /admin/test/clock` may move it.
    pub test_clock: Option<i64>,
    /// The shard groups past `database` (`[shards]`).
    pub shards: Shards,
}

/// The shard groups past the home database (`[shards]`): the slot map and
/// each group's database.
#[derive(Debug, Clone)]
pub struct Shards {
    /// The slot map this configuration gives (every slot at home without
    /// groups).
    pub map: SlotMap,
    /// Each group's database but home's, in the map's order.
    pub databases: Vec<Secret>,
}

impl Default for Shards {
    fn default() -> Self {
        Self {
            map: SlotMap::single(),
            databases: Vec::new(),
        }
    }
}

/// The operator's own Webhooks destination for operational events
/// (`[operator]`), and what to report.
#[derive(Debug, Clone)]
pub struct Operator {
    /// Its URLs (tried in order) and shared secret.
    pub webhooks: Webhooks,
    /// The backlog threshold and the dead-letter window (the core's).
    pub notify: NotifierConfig,
}

impl Config {
    /// The source named `name`.
    pub fn source(&self, name: &str) -> Option<&Arc<Source>> {
        self.sources.iter().find(|s| s.name == name)
    }

    /// The `listen` address, checked.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr(&self.listen, "listen")
    }

    /// The `admin_listen` address, checked.
    pub fn admin_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        self.admin_listen
            .as_deref()
            .map(|a| parse_addr(a, "admin_listen"))
            .transpose()
    }
}

fn parse_addr(s: &str, what: &str) -> Result<SocketAddr, ConfigError> {
    let normal = s.replace("localhost:", "127.0.0.1:");
    normal.parse().map_err(|_| {
        bad(format!(
            "{what} must be host:port with an IP address, not {s:?}"
        ))
    })
}

// -- the file ------------------------------------------------------------

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    listen: Option<String>,
    admin_listen: Option<String>,
    database: Option<String>,
    admin_token: Option<String>,
    log_level: Option<String>,
    log_format: Option<String>,
    #[serde(default)]
    sources: Vec<FileSource>,
    #[serde(default)]
    security: FileSecurity,
    #[serde(default)]
    storage: FileStorage,
    #[serde(default)]
    delivery: FileDelivery,
    #[serde(default)]
    ingest: FileIngest,
    #[serde(default)]
    limits: FileLimits,
    operator: Option<FileOperator>,
    #[serde(default)]
    tracing: FileTracing,
    #[serde(default)]
    shards: FileShards,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShards {
    version: Option<i64>,
    #[serde(default)]
    groups: Vec<FileGroup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    name: String,
    database: String,
    #[serde(default)]
    slots: String,
}

/// The database URL is a secret.
impl fmt::Debug for FileGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileGroup")
            .field("name", &self.name)
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTracing {
    otlp_endpoint: Option<String>,
    service_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOperator {
    #[serde(default)]
    urls: Vec<FileUrl>,
    shared_secret: Option<String>,
    backlog_threshold: Option<u64>,
    dead_letter_window_seconds: Option<u64>,
}

/// A source as the file's `[[sources]]` table gives it, and as the
/// database keeps it (the same fields, as JSON).
#[derive(Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileSource {
    name: String,
    write_keys: Vec<String>,
    /// The source's default destination, named `webhooks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    webhooks: Option<FileWebhooks>,
    /// Its named destinations (`[[sources.destinations]]`), after
    /// `webhooks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    destinations: Vec<FileWebhooks>,
    /// How long its finished calls are kept (`[sources.retention]`), where
    /// not as long as `[storage]` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retention: Option<FileRetention>,
}

/// `[sources.retention]`: `[storage]`'s retention settings, for one source.
#[derive(Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileRetention {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retention_hours: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dead_letter_retention_hours: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    undeliverable_retention_hours: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rejected_retention_hours: Option<u64>,
}

/// A destination: `[sources.webhooks]` or one of `[[sources.destinations]]`.
#[derive(Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileWebhooks {
    /// Its name: required in `destinations`; `webhooks` in
    /// `[sources.webhooks]`, where it may be left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// Which calls it takes, in the filters' condition form
    /// (`core::filter::Condition`); none: every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trigger: Option<serde_json::Value>,
    #[serde(default)]
    urls: Vec<FileUrl>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shared_secret: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    /// `POST` (default), `PUT` or `PATCH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    protection: Option<ProtectionConfig>,
    /// `segment` (default), `standard` or `both`.
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    /// The Standard Webhooks `whsec_` secrets (each signs every request).
    #[serde(skip_serializing_if = "Option::is_none")]
    signing_secrets: Option<Vec<String>>,
    /// Destination filters, in the core's JSON form (`core::filter`):
    /// `[[sources.webhooks.filters]]` tables in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    filters: Option<Vec<serde_json::Value>>,
    /// The body each call is sent with, in the core's JSON form
    /// (`core::mapping`): `[sources.webhooks.mapping]` in the file. Its
    /// keys keep their order (serde_json's and toml's `preserve_order`):
    /// they are the body's.
    #[serde(skip_serializing_if = "Option::is_none")]
    mapping: Option<serde_json::Value>,
    /// Several calls per POST (`[sources.webhooks.batch]`; an empty table
    /// takes the core's limits).
    #[serde(skip_serializing_if = "Option::is_none")]
    batch: Option<FileBatch>,
}

/// `[sources.webhooks.batch]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FileBatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_calls: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_bytes: Option<usize>,
}

#[derive(Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
enum FileUrl {
    Url(String),
    WithHeaders {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// The core's `auth` object (`core::webhooks::Auth`): basic or
        /// oauth2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<serde_json::Value>,
        /// `{certificate, private_key}` in PEM, for mutual TLS.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_certificate: Option<serde_json::Value>,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSecurity {
    allow_private_networks: Option<bool>,
    ca_file: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStorage {
    synchronous: Option<String>,
    retention_hours: Option<u64>,
    dead_letter_retention_hours: Option<u64>,
    undeliverable_retention_hours: Option<u64>,
    rejected_retention_hours: Option<u64>,
    timeout_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDelivery {
    enabled: Option<bool>,
    concurrency: Option<u64>,
    endpoint_concurrency: Option<u64>,
    lease_seconds: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIngest {
    max_backlog: Option<u64>,
    cors_origins: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    header_timeout_ms: Option<u64>,
    body_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    max_header_bytes: Option<u64>,
    max_connections: Option<u64>,
    max_admin_connections: Option<u64>,
    max_connections_per_client: Option<u64>,
}

/// What the command line gives (flags; `None`/empty: not given).
#[derive(Default, Clone)]
pub struct Overrides {
    /// `--config`.
    pub config: Option<String>,
    /// `--listen`.
    pub listen: Option<String>,
    /// `--admin-listen`.
    pub admin_listen: Option<String>,
    /// `--database`.
    pub database: Option<String>,
    /// `--write-key` (the `default` source).
    pub write_keys: Vec<String>,
    /// `--webhook-url` (the `default` source).
    pub webhook_urls: Vec<String>,
    /// `--allow-private-networks`.
    pub allow_private_networks: Option<bool>,
    /// `--synchronous`.
    pub synchronous: Option<String>,
    /// `--log-level`.
    pub log_level: Option<String>,
    /// `--log-format`.
    pub log_format: Option<String>,
    /// `--test-clock` with its start offset (test builds).
    pub test_clock: Option<i64>,
}

// The types that hold what the file, the database or the flags give,
// secrets and URLs (which may carry credentials) among it, print neither:
// only what a secret cannot be in.

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field("listen", &self.listen)
            .field("admin_listen", &self.admin_listen)
            .field("sources", &self.sources)
            .field("operator", &self.operator)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for FileOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileOperator")
            .field("urls", &self.urls.len())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for FileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSource")
            .field("name", &self.name)
            .field("write_keys", &self.write_keys.len())
            .field("webhooks", &self.webhooks)
            .field("destinations", &self.destinations)
            .finish()
    }
}

impl fmt::Debug for FileWebhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWebhooks")
            .field("name", &self.name)
            .field("urls", &self.urls.len())
            .field("mode", &self.mode)
            .field("method", &self.method)
            .field("enabled", &self.enabled)
            .field("signature", &self.signature)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for FileUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(url) => write!(f, "{:?}", callpost_core::ops::shown_url(url)),
            Self::WithHeaders {
                url,
                headers,
                auth,
                client_certificate,
            } => f
                .debug_struct("FileUrl")
                .field("url", &callpost_core::ops::shown_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field(
                    "auth",
                    &auth
                        .as_ref()
                        .and_then(|a| a.get("type"))
                        .and_then(|t| t.as_str()),
                )
                .field("client_certificate", &client_certificate.is_some())
                .finish(),
        }
    }
}

impl fmt::Debug for Overrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overrides")
            .field("config", &self.config)
            .field("listen", &self.listen)
            .field("admin_listen", &self.admin_listen)
            .field("write_keys", &self.write_keys.len())
            .field("webhook_urls", &self.webhook_urls.len())
            .finish_non_exhaustive()
    }
}

/// The environment variables read, after `CALLPOST_RELAY_`.
pub const ENV_PREFIX: &str = "CALLPOST_RELAY_";

/// The configuration file `--config` names, parsed (an empty one without).
fn read_file(overrides: &Overrides) -> Result<File, ConfigError> {
    match &overrides.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| bad(format!("cannot read {path}: {e}")))?;
            toml::from_str::<File>(&text)
                .map_err(|e| bad(format!("{path} is not a valid configuration: {e}")))
        }
        None => Ok(File::default()),
    }
}

/// Where the Tracking API listens, resolved as [`load`] resolves it (the
/// flag, the variable, the file, [`DEFAULT_LISTEN`]) with nothing else
/// checked: `healthcheck` runs with the environment a container gives its
/// health check, which has none of the relay's flags (a shared secret
/// without the `--webhook-url` it goes with would fail [`load`]).
pub fn listen_of(
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SocketAddr, ConfigError> {
    let file = read_file(overrides)?;
    let listen = listen_in(overrides, env, &file);
    parse_addr(&listen, "listen")
}

/// The Tracking API's address as given, the one rule [`load`] and
/// [`listen_of`] share: the flag, the variable, the file, [`DEFAULT_LISTEN`].
fn listen_in(overrides: &Overrides, env: &dyn Fn(&str) -> Option<String>, file: &File) -> String {
    let var = |name: &str| env(&format!("{ENV_PREFIX}{name}")).filter(|v| !v.is_empty());
    overrides
        .listen
        .clone()
        .or_else(|| var("LISTEN"))
        .or_else(|| file.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned())
}

/// The configuration from `overrides.config` (TOML, optional), the
/// environment `env` and the flags.
pub fn load(
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let file = read_file(overrides)?;
    let var = |name: &str| env(&format!("{ENV_PREFIX}{name}")).filter(|v| !v.is_empty());
    let first = |flag: &Option<String>, name: &str, file: &Option<String>| {
        flag.clone().or_else(|| var(name)).or_else(|| file.clone())
    };

    let mut docs: Vec<SourceDoc> = file.sources.iter().cloned().map(SourceDoc).collect();
    // The flag/variable form: one source called "default".
    let keys = if overrides.write_keys.is_empty() {
        var("WRITE_KEYS")
            .map(|v| split_list(&v))
            .unwrap_or_default()
    } else {
        overrides.write_keys.clone()
    };
    let urls = if overrides.webhook_urls.is_empty() {
        var("WEBHOOK_URLS")
            .map(|v| split_list(&v))
            .unwrap_or_default()
    } else {
        overrides.webhook_urls.clone()
    };
    let secret = var("SHARED_SECRET");
    if !keys.is_empty() {
        if urls.is_empty() && secret.is_some() {
            return Err(bad("a shared secret needs a webhook URL"));
        }
        docs.push(SourceDoc(FileSource {
            name: "default".into(),
            write_keys: keys,
            destinations: Vec::new(),
            retention: None,
            webhooks: (!urls.is_empty()).then(|| FileWebhooks {
                name: None,
                trigger: None,
                urls: urls.into_iter().map(FileUrl::Url).collect(),
                shared_secret: secret,
                mode: None,
                method: None,
                enabled: None,
                protection: None,
                signature: None,
                signing_secrets: None,
                filters: None,
                mapping: None,
                batch: None,
            }),
        }));
    } else if !urls.is_empty() {
        return Err(bad(
            "a webhook URL needs a write key (--write-key or CALLPOST_RELAY_WRITE_KEYS)",
        ));
    } else if secret.is_some() && file.sources.is_empty() {
        return Err(bad("a shared secret needs a webhook URL"));
    }
    let sources = docs
        .iter()
        .enumerate()
        .map(|(i, d)| d.check(&format!("sources[{i}]")).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let protections = checked_set(&sources)?;
    let previous = var("PREVIOUS_SECRET_KEYS");
    let secret_key = var("SECRET_KEY")
        .map(|k| SealKey::with_previous(&k, previous.as_deref().unwrap_or("")).map(Arc::new))
        .transpose()?;
    if secret_key.is_none() && previous.is_some() {
        return Err(bad(
            "CALLPOST_RELAY_PREVIOUS_SECRET_KEYS needs the current key in \
             CALLPOST_RELAY_SECRET_KEY",
        ));
    }

    let listen = listen_in(overrides, env, &file);
    let admin_listen = first(&overrides.admin_listen, "ADMIN_LISTEN", &file.admin_listen);
    let database = first(&overrides.database, "DATABASE", &file.database)
        .unwrap_or_else(|| DEFAULT_DATABASE.to_owned());
    if !(database.starts_with("sqlite://")
        || database.starts_with("postgresql://")
        || database.starts_with("postgres://"))
    {
        return Err(bad("database must be sqlite:///path or postgresql://..."));
    }
    let admin_token = var("ADMIN_TOKEN").or(file.admin_token.clone());
    if let Some(t) = &admin_token {
        if t.chars().count() < MIN_ADMIN_TOKEN_LEN {
            return Err(bad(format!(
                "admin_token must be at least {MIN_ADMIN_TOKEN_LEN} characters (a random token: \
                 openssl rand -hex 32)"
            )));
        }
    }
    let allow_private_networks = match overrides.allow_private_networks {
        Some(b) => b,
        None => match var("ALLOW_PRIVATE_NETWORKS") {
            Some(v) => parse_bool(&v, "CALLPOST_RELAY_ALLOW_PRIVATE_NETWORKS")?,
            None => file.security.allow_private_networks.unwrap_or(false),
        },
    };
    let synchronous = match first(
        &overrides.synchronous,
        "SYNCHRONOUS",
        &file.storage.synchronous,
    )
    .map(|s| s.to_ascii_uppercase())
    .as_deref()
    {
        None | Some("FULL") => Synchronous::Full,
        Some("NORMAL") => Synchronous::Normal,
        Some(other) => {
            return Err(bad(format!(
                "storage.synchronous must be FULL or NORMAL, not {other:?}"
            )))
        }
    };
    let retention_hours = file
        .storage
        .retention_hours
        .unwrap_or(DEFAULT_RETENTION_HOURS);
    let hours = |v: Option<u64>, what: &str, default: u64| -> Result<i64, ConfigError> {
        let h = v.unwrap_or(default);
        range(h, what, MIN_RETENTION_HOURS, 24 * 3650).map(|h| (h as i64) * 3_600_000)
    };
    let retention = Retention {
        delivered_ms: hours(Some(retention_hours), "storage.retention_hours", 0)?,
        dead_ms: hours(
            file.storage.dead_letter_retention_hours,
            "storage.dead_letter_retention_hours",
            DEFAULT_PARKED_RETENTION_HOURS,
        )?,
        undeliverable_ms: hours(
            file.storage.undeliverable_retention_hours,
            "storage.undeliverable_retention_hours",
            DEFAULT_PARKED_RETENTION_HOURS,
        )?,
        rejected_ms: hours(
            file.storage.rejected_retention_hours,
            "storage.rejected_retention_hours",
            DEFAULT_PARKED_RETENTION_HOURS,
        )?,
    };
    let database_timeout = Duration::from_millis(range(
        file.storage
            .timeout_ms
            .unwrap_or(DEFAULT_DATABASE_TIMEOUT_MS),
        "storage.timeout_ms",
        100,
        600_000,
    )?);
    let deliver = match var("DELIVER") {
        Some(v) => parse_bool(&v, "CALLPOST_RELAY_DELIVER")?,
        None => file.delivery.enabled.unwrap_or(true),
    };
    let delivery_concurrency = range(
        file.delivery
            .concurrency
            .unwrap_or(DEFAULT_DELIVERY_CONCURRENCY as u64),
        "delivery.concurrency",
        1,
        10_000,
    )? as usize;
    let endpoint_concurrency = range(
        file.delivery
            .endpoint_concurrency
            .unwrap_or(DEFAULT_ENDPOINT_CONCURRENCY as u64),
        "delivery.endpoint_concurrency",
        1,
        10_000,
    )? as usize;
    let lease_ms = range(
        file.delivery.lease_seconds.unwrap_or(DEFAULT_LEASE_SECONDS),
        "delivery.lease_seconds",
        10,
        3600,
    )? as i64
        * 1000;
    let max_backlog = range(
        file.ingest
            .max_backlog
            .unwrap_or(DEFAULT_MAX_BACKLOG as u64),
        "ingest.max_backlog",
        1,
        10_000_000,
    )? as usize;
    let cors_origins = file
        .ingest
        .cors_origins
        .clone()
        .unwrap_or_else(|| vec!["*".to_owned()]);
    if cors_origins.iter().any(String::is_empty) {
        return Err(bad(
            "ingest.cors_origins must be a list of non-empty strings",
        ));
    }
    let l = &file.limits;
    let ms = |v: Option<u64>, what: &str, default: u64| -> Result<Duration, ConfigError> {
        range(v.unwrap_or(default), what, 100, 3_600_000).map(Duration::from_millis)
    };
    let limits = Limits {
        header_timeout: ms(
            l.header_timeout_ms,
            "limits.header_timeout_ms",
            DEFAULT_HEADER_TIMEOUT_MS,
        )?,
        body_timeout: ms(
            l.body_timeout_ms,
            "limits.body_timeout_ms",
            DEFAULT_BODY_TIMEOUT_MS,
        )?,
        idle_timeout: ms(
            l.idle_timeout_ms,
            "limits.idle_timeout_ms",
            DEFAULT_IDLE_TIMEOUT_MS,
        )?,
        max_header_bytes: range(
            l.max_header_bytes
                .unwrap_or(DEFAULT_MAX_HEADER_BYTES as u64),
            "limits.max_header_bytes",
            8192,
            1 << 20,
        )? as usize,
        max_connections: range(
            l.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS as u64),
            "limits.max_connections",
            1,
            1_000_000,
        )? as usize,
        max_admin_connections: range(
            l.max_admin_connections
                .unwrap_or(DEFAULT_MAX_ADMIN_CONNECTIONS as u64),
            "limits.max_admin_connections",
            1,
            10_000,
        )? as usize,
        max_connections_per_client: 0,
    };
    let limits = Limits {
        max_connections_per_client: match l.max_connections_per_client {
            Some(n) => range(
                n,
                "limits.max_connections_per_client",
                1,
                limits.max_connections as u64,
            )? as usize,
            None => (limits.max_connections / DEFAULT_CLIENT_SHARE).max(1),
        },
        ..limits
    };
    let log_level = first(&overrides.log_level, "LOG_LEVEL", &file.log_level)
        .unwrap_or_else(|| "info".to_owned())
        .to_ascii_lowercase();
    if !["error", "warn", "warning", "info", "debug", "trace"].contains(&log_level.as_str()) {
        return Err(bad(format!(
            "log_level must be error, warn, info, debug or trace, not {log_level:?}"
        )));
    }
    let log_format = match first(&overrides.log_format, "LOG_FORMAT", &file.log_format)
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("plain") => LogFormat::Plain,
        Some("json") => LogFormat::Json,
        Some(other) => {
            return Err(bad(format!(
                "log_format must be plain or json, not {other:?}"
            )))
        }
    };
    let ca_file = var("CA_FILE").or(file.security.ca_file.clone());
    let tracing = tracing_of(
        var("OTLP_ENDPOINT").or(file.tracing.otlp_endpoint.clone()),
        var("OTLP_SERVICE_NAME").or(file.tracing.service_name.clone()),
    )?;
    let shards = shards_of(&file.shards, &database)?;
    let cfg = Config {
        listen,
        admin_listen,
        database: Secret::new(database),
        admin_token: admin_token.map(Secret::new),
        sources,
        source_docs: docs,
        secret_key,
        allow_private_networks,
        ca_file,
        synchronous,
        retention,
        database_timeout,
        cors_origins,
        deliver,
        delivery_concurrency,
        endpoint_concurrency,
        protections,
        operator: file.operator.as_ref().map(operator_from_file).transpose()?,
        lease_ms,
        max_backlog,
        limits,
        log_level: if log_level == "warning" {
            "warn".into()
        } else {
            log_level
        },
        log_format,
        tracing,
        test_clock: overrides.test_clock,
        shards,
    };
    cfg.listen_addr()?;
    cfg.admin_addr()?;
    Ok(cfg)
}

/// `[shards]`: the groups past `database` (the home group). Each is a
/// Postgres database, as home must then be: a SQLite file is one relay's.
fn shards_of(file: &FileShards, home: &str) -> Result<Shards, ConfigError> {
    if file.groups.is_empty() && file.version.is_none() {
        return Ok(Shards::default());
    }
    let postgres = |url: &str| url.starts_with("postgresql://") || url.starts_with("postgres://");
    if !postgres(home) {
        return Err(bad(
            "[shards] needs a Postgres database: a SQLite file is one relay's",
        ));
    }
    let mut urls = vec![home];
    for g in &file.groups {
        if !postgres(&g.database) {
            return Err(bad(format!(
                "shards.groups {:?}: database must be postgresql://...",
                g.name
            )));
        }
        if urls.contains(&g.database.as_str()) {
            // The URL is a secret: the group is named, not its database.
            return Err(bad(format!(
                "shards.groups {:?}: its database is another group's",
                g.name
            )));
        }
        urls.push(&g.database);
    }
    let version = file
        .version
        .ok_or_else(|| bad("[shards] needs a version (raise it with every change of the map)"))?;
    let groups: Vec<(String, String)> = file
        .groups
        .iter()
        .map(|g| (g.name.clone(), g.slots.clone()))
        .collect();
    let map = SlotMap::configured(version, &groups).map_err(|e| bad(format!("[shards]: {e}")))?;
    Ok(Shards {
        map,
        databases: file
            .groups
            .iter()
            .map(|g| Secret::new(g.database.clone()))
            .collect(),
    })
}

/// `[tracing]` (or `CALLPOST_RELAY_OTLP_ENDPOINT` and
/// `CALLPOST_RELAY_OTLP_SERVICE_NAME`): off without an endpoint.
fn tracing_of(
    endpoint: Option<String>,
    service_name: Option<String>,
) -> Result<Option<Tracing>, ConfigError> {
    let Some(endpoint) = endpoint else {
        if service_name.is_some() {
            return Err(bad(
                "tracing.service_name needs tracing.otlp_endpoint (CALLPOST_RELAY_OTLP_ENDPOINT)",
            ));
        }
        return Ok(None);
    };
    let what = "tracing.otlp_endpoint (CALLPOST_RELAY_OTLP_ENDPOINT)";
    // Shown without credentials, as every URL the relay prints.
    let not_url = || {
        bad(format!(
            "{what} must be an http:// or https:// URL, not {:?}",
            callpost_core::ops::shown_url(&endpoint)
        ))
    };
    let uri: http::Uri = endpoint.parse().map_err(|_| not_url())?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(not_url());
    }
    if uri.query().is_some() {
        return Err(bad(format!(
            "{what} takes no query: spans go to its path + /v1/traces"
        )));
    }
    let service_name = service_name.unwrap_or_else(|| DEFAULT_SERVICE_NAME.into());
    if service_name.trim().is_empty() {
        return Err(bad("tracing.service_name must be a non-empty string"));
    }
    Ok(Some(Tracing {
        otlp_endpoint: endpoint,
        service_name,
    }))
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn parse_bool(v: &str, what: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(format!("{what} must be true or false, not {v:?}"))),
    }
}

fn range(v: u64, what: &str, low: u64, high: u64) -> Result<u64, ConfigError> {
    if (low..=high).contains(&v) {
        Ok(v)
    } else {
        Err(bad(format!(
            "{what} must be between {low} and {high}, not {v}"
        )))
    }
}

fn webhooks_of(
    at: &str,
    endpoints: &[EndpointConfig],
    secret: Option<&str>,
    mode: Option<&str>,
) -> Result<Webhooks, ConfigError> {
    let mode = match mode {
        None => Mode::default(),
        Some(m) => Mode::parse(m).ok_or_else(|| {
            refused(
                Code::InvalidSettings,
                format!("{at}.mode must be parallel or failover, not {m:?}"),
            )
        })?,
    };
    Webhooks::with_mode(endpoints, secret.map(str::as_bytes), mode)
        .map_err(|e| refused(e.code(), format!("{at}: {e}")))
}

/// The destination signing as `webhooks.signature` and
/// `webhooks.signing_secrets` say (the core checks them).
fn signing_of(at: &str, webhooks: Webhooks, hooks: &FileWebhooks) -> Result<Webhooks, ConfigError> {
    let signing = match hooks.signature.as_deref() {
        None => Signing::default(),
        Some(v) => Signing::parse(v).ok_or_else(|| {
            refused(
                Code::InvalidSettings,
                format!(
                    "{at}.signature must be segment, standard or both, not \
                     {v:?}"
                ),
            )
        })?,
    };
    let secrets: Vec<&str> = hooks
        .signing_secrets
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    webhooks.with_signing(signing, &secrets).map_err(|_| {
        refused(
            Code::InvalidSettings,
            format!(
                "{at}.signature = \"{}\" needs webhooks.signing_secrets, one \
                 or more whsec_ secrets (and segment takes none)",
                signing.as_str()
            ),
        )
    })
}

/// The destination with `webhooks.batch`, `webhooks.method`,
/// `webhooks.filters` and `webhooks.mapping` (the core reads and checks
/// them; the file's tables are the core's JSON form).
fn filters_of(at: &str, webhooks: Webhooks, hooks: &FileWebhooks) -> Result<Webhooks, ConfigError> {
    let webhooks = match hooks.batch {
        None => webhooks,
        Some(b) => {
            let batching = Batching::new(b.max_calls, b.max_bytes).map_err(|e| {
                refused(
                    e.code(),
                    format!(
                        "{at}.batch: max_calls is 1 to {MAX_BATCH_CALLS} and \
                         max_bytes {MIN_BATCH_BYTES} to {MAX_BATCH_BYTES} ({e})"
                    ),
                )
            })?;
            webhooks
                .with_batching(Some(batching))
                .map_err(|e| refused(e.code(), format!("{at}.{e}")))?
        }
    };
    let webhooks = match hooks.method.as_deref() {
        None => webhooks,
        Some(m) => webhooks.with_method(Method::parse(m).ok_or_else(|| {
            refused(
                Code::InvalidSettings,
                format!("{at}.method must be POST, PUT or PATCH, not {m:?}"),
            )
        })?),
    };
    let webhooks = match &hooks.mapping {
        None => webhooks,
        Some(m) => {
            let mapping = Mapping::from_value(&core_value(at, m, "mapping")?)
                .map_err(|e| refused(e.code(), format!("{at}.{e}")))?;
            webhooks.with_mapping(Some(mapping))
        }
    };
    let Some(rules) = &hooks.filters else {
        return Ok(webhooks);
    };
    let filters = Filters::from_value(&core_value(at, rules, "filters")?)
        .map_err(|e| refused(e.code(), format!("{at}.{e}")))?;
    Ok(webhooks.with_filters(filters))
}

/// A setting in the core's JSON form: serde_json writes what it read; the
/// core's parser takes it back.
pub(crate) fn core_value(
    at: &str,
    v: &impl Serialize,
    what: &str,
) -> Result<callpost_core::Value, ConfigError> {
    let text = serde_json::to_vec(v).map_err(|e| refused(Code::InvalidSettings, e.to_string()))?;
    callpost_core::Value::from_json_slice(&text)
        .map_err(|e| refused(e.code(), format!("{at}.{what}: {e}")))
}

/// A source the core's rules refuse, as a configuration error.
fn source_error(e: SourceError) -> ConfigError {
    refused(e.code(), e.to_string())
}

/// The endpoints `urls` give, their `auth` and `client_certificate` read
/// by the core's rules; `at` names them in errors (`source "a": webhooks`).
fn endpoints_of(at: &str, urls: &[FileUrl]) -> Result<Vec<EndpointConfig>, ConfigError> {
    urls.iter()
        .enumerate()
        .map(|(i, u)| match u {
            FileUrl::Url(url) => Ok(EndpointConfig::new(url.clone())),
            FileUrl::WithHeaders {
                url,
                headers,
                auth,
                client_certificate,
            } => {
                let invalid = |reason: String| {
                    refused(Code::InvalidAuth, format!("{at}.urls[{i}]: {reason}"))
                };
                let value = |v: &serde_json::Value, what: &str| {
                    let text = serde_json::to_vec(v).map_err(|e| invalid(e.to_string()))?;
                    callpost_core::Value::from_json_slice(&text)
                        .map_err(|e| invalid(format!("{what}: {e}")))
                };
                Ok(EndpointConfig {
                    url: url.clone(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    auth: auth
                        .as_ref()
                        .map(|a| Auth::from_value(&value(a, "auth")?).map_err(invalid))
                        .transpose()?,
                    client_certificate: client_certificate
                        .as_ref()
                        .map(|c| {
                            ClientCertificate::from_value(&value(c, "client_certificate")?)
                                .map_err(invalid)
                        })
                        .transpose()?,
                })
            }
        })
        .collect()
}

/// `[operator]`, checked by the core's rules: its URLs and secret as any
/// destination's, its settings as the notifier's.
fn operator_from_file(o: &FileOperator) -> Result<Operator, ConfigError> {
    let webhooks = Webhooks::new(
        &endpoints_of("operator", &o.urls)?,
        o.shared_secret.as_deref().map(str::as_bytes),
    )
    .map_err(|e| refused(e.code(), format!("operator: {e}")))?;
    let (low, high) = DEAD_LETTER_WINDOW_RANGE_MS;
    let window = match o.dead_letter_window_seconds {
        None => NotifierConfig::default().dead_letter_window_ms,
        Some(s) => {
            range(
                s,
                "operator.dead_letter_window_seconds",
                low / 1000,
                high / 1000,
            )? * 1000
        }
    };
    let notify = NotifierConfig {
        backlog_threshold: o.backlog_threshold,
        dead_letter_window_ms: window,
    };
    notify
        .validate()
        .map_err(|e| refused(e.code(), format!("operator.{e}")))?;
    Ok(Operator { webhooks, notify })
}

/// A source in the form the file's `[[sources]]` table and the database
/// give it: checked by [`SourceDoc::check`] before it is used.
#[derive(Clone, PartialEq)]
pub struct SourceDoc(FileSource);

impl fmt::Debug for SourceDoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceDoc({:?}, ***)", self.0.name)
    }
}

impl SourceDoc {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Reads a source from JSON with the fields of a `[[sources]]` table.
    /// Unknown fields and wrong types are refused; the settings themselves
    /// are checked by [`SourceDoc::check`].
    pub fn from_json(json: &str) -> Result<Self, ConfigError> {
        serde_json::from_str(json)
            .map(Self)
            .map_err(|e| refused(Code::InvalidSettings, format!("not a valid source: {e}")))
    }

    /// Reads a source from a JSON value, as [`SourceDoc::from_json`].
    pub fn from_value(value: serde_json::Value) -> Result<Self, ConfigError> {
        serde_json::from_value(value)
            .map(Self)
            .map_err(|e| refused(Code::InvalidSettings, format!("not a valid source: {e}")))
    }

    /// As a JSON value (with its secrets).
    pub fn to_value(&self) -> serde_json::Value {
        // A struct of strings, lists and maps always serialises.
        serde_json::to_value(&self.0).unwrap_or_default()
    }

    /// As JSON (with its secrets: seal it before it leaves the process).
    pub fn to_json(&self) -> String {
        // A struct of strings, lists and maps always serialises.
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    /// Checks it by the core's rules (name, write keys, destination,
    /// protections); `at` names it in the message when its name cannot.
    pub fn check(&self, at: &str) -> Result<Source, ConfigError> {
        let s = &self.0;
        if s.name.is_empty() {
            return Err(refused(
                Code::InvalidSettings,
                format!("{at}.name must be a non-empty string"),
            ));
        }
        check_source(&s.name, &s.write_keys).map_err(source_error)?;
        let given = s
            .webhooks
            .iter()
            .map(|h| {
                (
                    h.name.clone().unwrap_or_else(|| DEFAULT_DESTINATION.into()),
                    h,
                    None,
                )
            })
            .chain(
                s.destinations
                    .iter()
                    .enumerate()
                    .map(|(i, h)| (h.name.clone().unwrap_or_default(), h, Some(i))),
            );
        let mut destinations = Vec::new();
        for (name, hooks, index) in given {
            let at = match index {
                None => format!("source {:?}: webhooks", s.name),
                Some(i) => format!("source {:?}: destinations[{i}]", s.name),
            };
            destinations.push(destination_of(&at, name, hooks)?);
        }
        let names: Vec<&str> = destinations.iter().map(|d| d.name.as_str()).collect();
        check_destination_names(&s.name, &names).map_err(source_error)?;
        let retention = match &s.retention {
            None => SourceRetention::default(),
            Some(r) => {
                let hours = |v: Option<u64>, what: &str| {
                    v.map(|h| {
                        let what = format!("source {:?}: retention.{what}", s.name);
                        range(h, &what, MIN_RETENTION_HOURS, 24 * 3650)
                            .map(|h| (h as i64) * 3_600_000)
                    })
                    .transpose()
                };
                SourceRetention {
                    delivered_ms: hours(r.retention_hours, "retention_hours")?,
                    undeliverable_ms: hours(
                        r.undeliverable_retention_hours,
                        "undeliverable_retention_hours",
                    )?,
                    dead_ms: hours(r.dead_letter_retention_hours, "dead_letter_retention_hours")?,
                    rejected_ms: hours(r.rejected_retention_hours, "rejected_retention_hours")?,
                }
            }
        };
        Ok(Source {
            name: s.name.clone(),
            write_keys: s.write_keys.iter().cloned().map(Secret::new).collect(),
            destinations,
            retention,
        })
    }
}

/// One destination, checked by the core's rules; `at` names it in
/// messages (`source "shop": destinations[1]`).
fn destination_of(
    at: &str,
    name: String,
    hooks: &FileWebhooks,
) -> Result<Destination, ConfigError> {
    let webhooks = webhooks_of(
        at,
        &endpoints_of(at, &hooks.urls)?,
        hooks.shared_secret.as_deref(),
        hooks.mode.as_deref(),
    )?;
    let webhooks = signing_of(at, webhooks, hooks)?;
    let webhooks = filters_of(at, webhooks, hooks)?;
    if let Some(p) = hooks.protection {
        p.validate()
            .map_err(|e| refused(e.code(), format!("{at}.protection.{e}")))?;
    }
    let trigger = match &hooks.trigger {
        None => None,
        Some(t) => Some(
            Condition::from_value(&core_value(at, t, "trigger")?)
                .map_err(|e| refused(e.code(), format!("{at}.{e}")))?,
        ),
    };
    Ok(Destination {
        name,
        webhooks,
        enabled: hooks.enabled.unwrap_or(true),
        protection: hooks.protection,
        trigger,
    })
}

/// Checks a set of sources by the core's rules (no name or write key
/// twice, one protection per endpoint URL); returns the protection of each
/// URL that has one.
pub fn checked_set(
    sources: &[Arc<Source>],
) -> Result<HashMap<String, ProtectionConfig>, ConfigError> {
    let mut set = SourceSet::new();
    for s in sources {
        let keys: Vec<&str> = s.write_keys.iter().map(Secret::expose).collect();
        let protected: Vec<(&str, ProtectionConfig)> = s
            .destinations
            .iter()
            .filter_map(|d| d.protection.map(|p| (d, p)))
            .flat_map(|(d, p)| d.webhooks.endpoints().iter().map(move |e| (e.url(), p)))
            .collect();
        set.add(&s.name, &keys, protected).map_err(source_error)?;
    }
    Ok(set.into_protections())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn load_text(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relay.toml");
        std::fs::write(&path, text).unwrap();
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        load(
            &Overrides {
                config: Some(path.to_string_lossy().into_owned()),
                ..Overrides::default()
            },
            &|k| env.get(k).cloned(),
        )
    }

    const ONE: &str = r#"
[[sources]]
name = "web"
write_keys = ["wk"]
[sources.webhooks]
urls = ["https://a.example.com/hook", { url = "https://b.example.com/hook", headers = { "X-Team" = "growth" } }]
shared_secret = "s3cret"
"#;

    /// What the file, the database and the flags give prints none of
    /// its secrets, nor a URL's credentials or a header's value.
    #[test]
    fn nothing_secret_is_in_debug_output() {
        let text = r#"
admin_token = "admin-token-0123456789-0123456789-xyz"
database = "postgresql://relay:pg-password@db.example.com/relay"
[operator]
urls = ["https://ops.example.com/in?token=ops-query-token"]
shared_secret = "ops-shared-secret"
[[sources]]
name = "web"
write_keys = ["wk_live_secret"]
[sources.webhooks]
urls = ["https://user:url-password@a.example.com/hook?key=url-query-key",
        { url = "https://b.example.com/hook", headers = { "Authorization" = "Bearer header-value" } }]
shared_secret = "source-shared-secret"
signature = "both"
signing_secrets = ["whsec_c2lnbmluZy1zZWNyZXQtdmFsdWU="]
"#;
        let file: File = toml::from_str(text).unwrap();
        let doc = SourceDoc(file.sources[0].clone());
        let overrides = Overrides {
            write_keys: vec!["wk_flag_secret".into()],
            webhook_urls: vec!["https://c.example.com/?t=flag-url-token".into()],
            ..Overrides::default()
        };
        let shown = format!("{file:?} {doc:?} {:?} {overrides:?}", file.sources[0]);
        for secret in [
            "admin-token",
            "pg-password",
            "ops-query-token",
            "ops-shared-secret",
            "wk_live_secret",
            "url-password",
            "url-query-key",
            "header-value",
            "source-shared-secret",
            "whsec_",
            "wk_flag_secret",
            "flag-url-token",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("\"web\""), "{shown}");
    }

    /// The health check's address: the flag, the variable, the file, the
    /// default, in that order; found even where the rest would not load
    /// (a container's health check has the variables, not the flags).
    #[test]
    fn the_health_check_finds_the_listen_address_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relay.toml");
        std::fs::write(&path, "listen = \"127.0.0.1:7001\"\n").unwrap();
        let file = Some(path.to_string_lossy().into_owned());
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let at = |o: &Overrides, e: &dyn Fn(&str) -> Option<String>| {
            listen_of(o, e).unwrap().to_string()
        };
        let none = Overrides::default();
        assert_eq!(at(&none, &env(&[])), DEFAULT_LISTEN);
        let with_file = Overrides {
            config: file.clone(),
            ..Overrides::default()
        };
        assert_eq!(at(&with_file, &env(&[])), "127.0.0.1:7001");
        let vars = env(&[
            ("CALLPOST_RELAY_LISTEN", "0.0.0.0:7002"),
            ("CALLPOST_RELAY_SHARED_SECRET", "s"),
            ("CALLPOST_RELAY_WRITE_KEYS", "wk"),
        ]);
        assert_eq!(at(&with_file, &vars), "0.0.0.0:7002");
        let flag = Overrides {
            listen: Some("[::]:7003".into()),
            config: file,
            ..Overrides::default()
        };
        assert_eq!(at(&flag, &vars), "[::]:7003");
        // The same variables do not make a configuration to serve with.
        assert!(load(&none, &vars).is_err());
        let bad = Overrides {
            listen: Some("nowhere".into()),
            ..Overrides::default()
        };
        assert_eq!(
            listen_of(&bad, &env(&[])).unwrap_err().code(),
            Code::InvalidConfig
        );
    }

    #[test]
    fn a_file_with_one_source_loads_with_the_documented_defaults() {
        let cfg = load_text(ONE, &[]).unwrap();
        assert_eq!(cfg.sources.len(), 1);
        let hooks = cfg.sources[0].routed(DEFAULT_DESTINATION).unwrap();
        assert_eq!(hooks.endpoints().len(), 2);
        assert_eq!(cfg.listen, DEFAULT_LISTEN);
        assert_eq!(cfg.delivery_concurrency, DEFAULT_DELIVERY_CONCURRENCY);
        assert_eq!(cfg.retention.delivered_ms, 168 * 3_600_000);
        assert_eq!(cfg.limits, Limits::default());
    }

    #[test]
    fn unknown_settings_and_bad_values_name_the_setting() {
        let e = load_text("nonsense = 1", &[]).unwrap_err();
        assert!(e.to_string().contains("nonsense"), "{e}");
        let e = load_text("[storage]\nretention_hours = 2", &[]).unwrap_err();
        assert!(e.to_string().contains("storage.retention_hours"), "{e}");
        let e = load_text(&ONE.replace("https://a.example.com/hook", "ftp://x"), &[]).unwrap_err();
        assert_eq!(e.code(), Code::UnsupportedScheme, "{e}");
        let e = load_text(&format!("{ONE}signature = \"standard\"\n"), &[]).unwrap_err();
        assert!(e.to_string().contains("webhooks.signing_secrets"), "{e}");
        let e = load_text(&format!("{ONE}signature = \"svix\"\n"), &[]).unwrap_err();
        assert!(e.to_string().contains("webhooks.signature"), "{e}");
        let secret = "whsec_c2VjcmV0LWtleS1vZi10aGUtdGVzdA==";
        let both = format!("{ONE}signature = \"both\"\nsigning_secrets = [\"{secret}\"]\n");
        let cfg = load_text(&both, &[]).unwrap();
        let hooks = &cfg.sources[0].destinations[0].webhooks;
        assert_eq!(hooks.signing(), Signing::Both);
        assert!(
            !format!("{cfg:?}").contains("c2VjcmV0"),
            "the secret stays hidden"
        );
        // Filters: the file's tables are the core's JSON form, checked by it.
        let filters = format!(
            "{ONE}[[sources.webhooks.filters]]\naction = \"drop\"\n\
             if = {{ field = \"type\", in = [\"page\", \"screen\"] }}\n\
             [[sources.webhooks.filters]]\naction = \"drop_fields\"\nfields = [\"context.ip\"]\n"
        );
        let cfg = load_text(&filters, &[]).unwrap();
        let hooks = &cfg.sources[0].destinations[0].webhooks;
        let page = callpost_core::Call::from_json_str(r#"{"type":"page","userId":"u"}"#).unwrap();
        assert!(matches!(
            hooks.filter(&page),
            callpost_core::filter::Decision::Drop { rule: 0 }
        ));
        let e = load_text(&filters.replace("drop_fields", "drop_some"), &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("webhooks.filters[1]: unknown action")
                && e.code() == Code::InvalidSettings,
            "{e}"
        );
        // Mappings: the file's table is the core's JSON form, its keys in
        // the file's order (the body's), checked by the core.
        let mapped = format!(
            "{ONE}[sources.webhooks.mapping]
zeta = {{ \"@path\" = \"event\" }}
             alpha = {{ \"@template\" = \"{{{{userId}}}}!\" }}
             items = {{ \"@arrayPath\" = [\"properties.products\", {{ sku = {{ \"@path\" = \"sku\" }} }}] }}
"
        );
        let cfg = load_text(&mapped, &[]).unwrap();
        let hooks = &cfg.sources[0].destinations[0].webhooks;
        let track = callpost_core::Call::from_json_str(
            r#"{"type":"track","userId":"u","event":"e","properties":{"products":[{"sku":"a"}]}}"#,
        )
        .unwrap();
        let body = hooks
            .request(&track, 0, callpost_core::Timestamp::from_millis(0).unwrap())
            .unwrap()
            .body;
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"zeta":"e","alpha":"u!","items":[{"sku":"a"}]}"#
        );
        let e = load_text(&mapped.replace("@template", "@liquid"), &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("webhooks.mapping.alpha.@liquid: unknown directive")
                && e.code() == Code::InvalidSettings,
            "{e}"
        );
        // Method: POST unless set; only the three.
        let put = load_text(&format!("{ONE}method = \"PUT\"\n"), &[]).unwrap();
        let hooks = &put.sources[0].destinations[0].webhooks;
        assert_eq!(hooks.method(), Method::Put);
        let e = load_text(&format!("{ONE}method = \"GET\"\n"), &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("webhooks.method must be POST, PUT or PATCH")
                && e.code() == Code::InvalidSettings,
            "{e}"
        );
        // A URL template sends each call alone: no batch with it.
        let templated = ONE.replace(
            "https://a.example.com/hook",
            "https://a.example.com/u/{{userId}}",
        );
        let e = load_text(&format!("{templated}[sources.webhooks.batch]\n"), &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("webhooks.batch cannot be set with a URL template")
                && e.code() == Code::InvalidSettings,
            "{e}"
        );
        // Batching: an empty table takes the core's limits; bad ones name
        // the setting.
        let batched = load_text(&format!("{ONE}[sources.webhooks.batch]\n"), &[]).unwrap();
        let hooks = &batched.sources[0].destinations[0].webhooks;
        assert_eq!(hooks.batching(), Some(Default::default()));
        let e = load_text(
            &format!("{ONE}[sources.webhooks.batch]\nmax_calls = 5000\n"),
            &[],
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("webhooks.batch") && e.to_string().contains("4000"),
            "{e}"
        );
        let e = load_text(&format!("{ONE}[sources.webhooks.batch]\nsize = 5\n"), &[]).unwrap_err();
        assert!(e.to_string().contains("size"), "{e}");
        let e = load_text("admin_token = \"short\"", &[]).unwrap_err();
        assert!(e.to_string().contains("admin_token"), "{e}");
        assert!(
            !e.to_string().contains("short"),
            "the token itself is never echoed: {e}"
        );
    }

    #[test]
    fn tracing_is_off_unless_an_endpoint_is_set_and_checked_when_it_is() {
        assert_eq!(load_text(ONE, &[]).unwrap().tracing, None);
        let on = load_text(
            &format!("[tracing]\notlp_endpoint = \"http://127.0.0.1:4318\"\n{ONE}"),
            &[],
        )
        .unwrap();
        assert_eq!(
            on.tracing,
            Some(Tracing {
                otlp_endpoint: "http://127.0.0.1:4318".into(),
                service_name: "callpost-relay".into(),
            })
        );
        let env = load_text(
            ONE,
            &[
                ("CALLPOST_RELAY_OTLP_ENDPOINT", "https://otel.example.com"),
                ("CALLPOST_RELAY_OTLP_SERVICE_NAME", "relay-eu"),
            ],
        )
        .unwrap();
        let t = env.tracing.unwrap();
        assert_eq!(t.otlp_endpoint, "https://otel.example.com");
        assert_eq!(t.service_name, "relay-eu");
        for bad in [
            "ftp://127.0.0.1:4318",
            "127.0.0.1:4318",
            "not a url",
            "http://h/?x=1",
        ] {
            let e = load_text(&format!("[tracing]\notlp_endpoint = {bad:?}\n"), &[]).unwrap_err();
            assert!(
                e.to_string().contains("tracing.otlp_endpoint"),
                "{bad}: {e}"
            );
        }
        let e = load_text("[tracing]\nservice_name = \"x\"\n", &[]).unwrap_err();
        assert!(e.to_string().contains("tracing.service_name"), "{e}");
        let e = load_text("[tracing]\nendpoint = \"http://x\"\n", &[]).unwrap_err();
        assert!(e.to_string().contains("endpoint"), "{e}");
    }

    #[test]
    fn the_environment_overrides_the_file_and_secrets_stay_hidden() {
        let cfg = load_text(
            ONE,
            &[
                ("CALLPOST_RELAY_LISTEN", "127.0.0.1:0"),
                (
                    "CALLPOST_RELAY_ADMIN_TOKEN",
                    "0123456789abcdef0123456789abcdef",
                ),
            ],
        )
        .unwrap();
        assert_eq!(cfg.listen, "127.0.0.1:0");
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(!shown.contains("\"wk\""), "{shown}");
    }

    #[test]
    fn shard_groups_load_with_their_map_and_bad_ones_are_refused() {
        let home = "database = \"postgresql://relay:home-pw@a.example.com/relay\"\n";
        let group = |name: &str, url: &str, slots: &str| {
            format!(
                "[[shards.groups]]\nname = \"{name}\"\ndatabase = \"{url}\"\nslots = \"{slots}\"\n"
            )
        };
        let b = group(
            "b",
            "postgresql://relay:b-pw@b.example.com/relay",
            "512-1023",
        );
        let text = format!("{home}{ONE}[shards]\nversion = 2\n{b}");
        let cfg = load_text(&text, &[]).unwrap();
        assert_eq!(cfg.shards.map.version(), 2);
        assert_eq!(cfg.shards.map.groups(), ["home", "b"]);
        assert_eq!(cfg.shards.map.slots_of("b"), "512-1023");
        assert_eq!(cfg.shards.databases.len(), 1);
        let shown = format!("{cfg:?}");
        assert!(
            !shown.contains("b-pw") && !shown.contains("home-pw"),
            "{shown}"
        );
        // Without [shards], one group.
        assert_eq!(load_text(ONE, &[]).unwrap().shards.map.groups(), ["home"]);
        for (text, says) in [
            (format!("{home}{ONE}{b}"), "needs a version"),
            (
                format!("{ONE}[shards]\nversion = 1\n{b}"),
                "needs a Postgres database",
            ),
            (
                format!(
                    "{home}{ONE}[shards]\nversion = 1\n{}",
                    group("b", "sqlite:///x.db", "1")
                ),
                "database must be postgresql",
            ),
            (
                format!(
                    "{home}{ONE}[shards]\nversion = 1\n{}",
                    group("b", "postgresql://relay:home-pw@a.example.com/relay", "1")
                ),
                "another group's",
            ),
            (
                format!(
                    "{home}{ONE}[shards]\nversion = 1\n{}",
                    group("b", "postgresql://b/r", "0-2000")
                ),
                "slots are ranges",
            ),
            (
                format!(
                    "{home}{ONE}[shards]\nversion = 1\n{}",
                    group("home", "postgresql://b/r", "1")
                ),
                "taken",
            ),
        ] {
            let e = load_text(&text, &[]).unwrap_err();
            assert!(e.to_string().contains(says), "{says}: {e}");
            assert!(!e.to_string().contains("home-pw"), "{e}");
            assert_eq!(e.code(), Code::InvalidConfig);
        }
    }

    #[test]
    fn a_source_keeps_its_own_retention_where_it_gives_one() {
        let text = format!(
            "{ONE}[sources.retention]\nretention_hours = 24\nrejected_retention_hours = 48\n"
        );
        let cfg = load_text(&text, &[]).unwrap();
        let own = cfg.sources[0].retention;
        let hour = 3_600_000;
        assert_eq!(
            (own.delivered_ms, own.rejected_ms, own.dead_ms),
            (Some(24 * hour), Some(48 * hour), None)
        );
        let r = own.over(cfg.retention).unwrap();
        assert_eq!((r.delivered_ms, r.rejected_ms), (24 * hour, 48 * hour));
        assert_eq!(r.dead_ms, cfg.retention.dead_ms);
        assert_eq!(
            load_text(ONE, &[]).unwrap().sources[0]
                .retention
                .over(cfg.retention),
            None
        );
        let e = load_text(
            &format!("{ONE}[sources.retention]\nretention_hours = 1\n"),
            &[],
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("source \"web\": retention.retention_hours must be between 24"),
            "{e}"
        );
        assert!(load_text(&format!("{ONE}[sources.retention]\nforever = true\n"), &[]).is_err());
    }
}
