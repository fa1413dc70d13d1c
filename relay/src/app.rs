//! The composition root: one place builds the relay from its
//! configuration, starts every part, and stops them in order. The command
//! line (`cli`) and the integration tests both go through [`App`], so the
//! wiring is written once.
//!
//! A start, in order: the destinations' private-network check; the
//! database opened and migrated; the sources in force (the database's,
//! with a key); the listeners bound; the delivery workers, the heartbeat,
//! the housekeeping, the console's sampler and the trace exporter started;
//! then the relay says it is ready. A stop: ingest refuses new calls, the
//! listeners let requests in progress end, the deliveries in flight get
//! [`SHUTDOWN_GRACE`], the last spans are sent, and the store commits
//! what is queued and closes.

use crate::api::Server;
use crate::clock::Clock;
use crate::config::{Config, ConfigError, Overrides};
use crate::deliver::Deliverer;
use crate::housekeeping::{self, history::History};
use crate::ops::{self, sources, OpError};
use crate::state::Relay;
use crate::store::{self, Store, StoreError, StoreOptions};
use callpost_core::Code;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Attempts in flight at shutdown get this long to end (the webhook
/// timeout and a second) before they are given back.
pub const SHUTDOWN_GRACE: Duration =
    Duration::from_millis(callpost_core::delivery::WEBHOOK_TIMEOUT_MS + 1000);

/// Why the relay did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A setting that cannot work (exit status 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database cannot be opened or migrated.
    #[error("cannot open the database {database}: {error}")]
    Store {
        /// The database, without credentials.
        database: String,
        /// Why.
        error: StoreError,
    },
    /// The sources kept in the database cannot be put in force.
    #[error("cannot put the database's sources in force: {0}")]
    Sources(OpError),
    /// A listener cannot be bound.
    #[error("cannot listen on {at}: {error}")]
    Listen {
        /// Where.
        at: String,
        /// Why.
        error: std::io::Error,
    },
    /// The delivery client cannot be made (`ca_file`, no runtime).
    #[error("cannot start delivering: {0}")]
    Deliver(std::io::Error),
}

impl StartError {
    /// The registry's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Config(e) => e.code(),
            Self::Store { error, .. } => error.code(),
            Self::Sources(e) => e.code(),
            Self::Listen { .. } => Code::InvalidConfig,
            Self::Deliver(_) => Code::InvalidConfig,
        }
    }
}

/// The database as it may be shown: no user or password.
pub fn shown_database(database: &str) -> String {
    match database.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => database.to_owned(),
    }
}

/// The store settings of `cfg`; `exclusive` for the relay that serves (a
/// command beside it shares the file).
pub fn store_options(cfg: &Config, exclusive: bool) -> StoreOptions {
    StoreOptions {
        synchronous: cfg.synchronous,
        timeout: cfg.database_timeout,
        exclusive,
        ca_file: cfg.ca_file.as_ref().map(std::path::PathBuf::from),
    }
}

/// Opens the databases `cfg` names (the home group's, then each shard
/// group's) and puts its slot map in force over them; on a failure, the
/// database shown (no credentials) and why, with the ones opened closed.
pub async fn open_store(
    cfg: &Config,
    exclusive: bool,
    clock: &Clock,
) -> Result<Arc<dyn Store>, (String, StoreError)> {
    let urls = std::iter::once(&cfg.database).chain(&cfg.shards.databases);
    let mut groups: Vec<Arc<dyn Store>> = Vec::new();
    let mut failed = None;
    for url in urls {
        match store::open(url.expose(), store_options(cfg, exclusive)).await {
            Ok(s) => groups.push(s),
            Err(e) => {
                failed = Some((shown_database(url.expose()), e));
                break;
            }
        }
    }
    let opened = match failed {
        None => store::sharded::open(cfg.shards.map.clone(), groups.clone(), clock.now_ms())
            .await
            .map_err(|e| (shown_database(cfg.database.expose()), e)),
        Some(f) => Err(f),
    };
    if opened.is_err() {
        for g in groups {
            g.close().await;
        }
    }
    opened
}

/// `store` sealed at rest when `cfg` has a secret key
/// ([`store::sealed`]), and what seals it; as it is without one.
pub async fn sealed_store(
    cfg: &Config,
    store: Arc<dyn Store>,
) -> Result<(Arc<dyn Store>, Option<Arc<store::sealed::Sealer>>), StoreError> {
    match &cfg.secret_key {
        Some(keys) => {
            let (sealed, sealer) = store::sealed::wrap(store, Arc::clone(keys)).await?;
            Ok((sealed, Some(sealer)))
        }
        None => Ok((store, None)),
    }
}

/// The relay's clock: the host's, or a test build's moved one.
pub fn clock_of(cfg: &Config) -> Clock {
    #[cfg(feature = "test-clock")]
    if let Some(offset) = cfg.test_clock {
        return Clock::with_offset(offset);
    }
    let _ = cfg;
    Clock::new()
}

/// A running relay.
pub struct App {
    relay: Arc<Relay>,
    api_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    stop_listeners: Option<oneshot::Sender<()>>,
    listeners: JoinHandle<()>,
    deliverer: Option<Deliverer>,
    exporter: Option<JoinHandle<()>>,
    /// Tasks that hold nothing to finish: aborted at the stop.
    chores: Vec<JoinHandle<()>>,
}

impl App {
    /// Checks the destinations, opens the database `cfg` names and starts.
    /// `reload_from` is how the configuration was read, so a reload reads
    /// it the same way.
    pub async fn open(cfg: Config, reload_from: Option<Overrides>) -> Result<Self, StartError> {
        raise_open_files(&cfg);
        crate::deliver::check_destinations(&cfg.sources, cfg.allow_private_networks).await?;
        let clock = Arc::new(clock_of(&cfg));
        let store = open_store(&cfg, true, &clock)
            .await
            .map_err(|(database, error)| StartError::Store { database, error })?;
        if cfg.secret_key.is_none() {
            if let Err(error) = store::sealed::refuse_without_key(store.as_ref()).await {
                store.close().await;
                return Err(StartError::Store {
                    database: shown_database(cfg.database.expose()),
                    error,
                });
            }
        }
        let (before, after) = store.migrated();
        if before != after {
            tracing::info!("database schema migrated from version {before} to {after}");
        }
        let app = Self::start(cfg, Arc::clone(&store), clock, reload_from).await;
        if app.is_err() {
            store.close().await;
        }
        app
    }

    /// Starts over `store`, which it closes at the stop (the tests give
    /// their own).
    pub async fn start(
        cfg: Config,
        store: Arc<dyn Store>,
        clock: Arc<Clock>,
        reload_from: Option<Overrides>,
    ) -> Result<Self, StartError> {
        let (store, sealer) = match sealed_store(&cfg, Arc::clone(&store)).await {
            Ok(s) => s,
            Err(error) => {
                return Err(StartError::Store {
                    database: shown_database(cfg.database.expose()),
                    error,
                })
            }
        };
        let relay = Arc::new(Relay::new(cfg, store, clock));
        if let Some(s) = sealer {
            let _ = relay.sealer.set(s);
        }
        if let Some(o) = reload_from {
            let _ = relay.reload_from.set(o);
        }
        let mut chores = Vec::new();
        if let Some(polling) = start_sources(&relay).await? {
            chores.push(polling);
        }
        if let Err(e) = relay.reload_suppressed().await {
            tracing::warn!("the suppressed users were not read: {e}");
        }
        chores.push(tokio::spawn(refresh_store(Arc::clone(&relay))));
        let metrics = Arc::clone(&relay.metrics);
        relay
            .store
            .set_commit_observer(Arc::new(move |took, calls| metrics.commit(took, calls)));
        let history = Arc::new(History::default());
        let server = Server::bind(Arc::clone(&relay), Arc::clone(&history))
            .await
            .map_err(|error| StartError::Listen {
                at: relay.cfg.listen.clone(),
                error,
            })?;
        let deliverer = if relay.cfg.deliver {
            chores.push(tokio::spawn(housekeeping::heartbeat(Arc::clone(&relay))));
            Some(Deliverer::start(Arc::clone(&relay)).map_err(StartError::Deliver)?)
        } else {
            None
        };
        chores.push(tokio::spawn(housekeeping::run(Arc::clone(&relay))));
        chores.push(tokio::spawn(housekeeping::history::run(
            Arc::clone(&relay),
            history,
        )));
        let exporter = relay
            .tracer
            .as_ref()
            .map(|t| tokio::spawn(Arc::clone(t).run()));
        let (api_addr, admin_addr) = (server.api_addr, server.admin_addr);
        let (stop_listeners, stopped) = oneshot::channel::<()>();
        let listeners = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        relay.set_ready(true);
        tracing::info!(
            "relay started: {} source(s), database {}, synchronous={}",
            relay.sources().list.len(),
            shown_database(relay.cfg.database.expose()),
            relay.cfg.synchronous.as_str()
        );
        // Tests and scripts wait for this line; it names the port picked
        // when `listen` asked for port 0.
        tracing::info!("callpost relay listening on http://{api_addr}");
        Ok(Self {
            relay,
            api_addr,
            admin_addr,
            stop_listeners: Some(stop_listeners),
            listeners,
            deliverer,
            exporter,
            chores,
        })
    }

    /// The relay's shared state.
    pub fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// Where the Tracking API listens (and the admin API, without
    /// `admin_listen`).
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// Where the admin API listens, when apart.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Reloads the sources each time `hangups` yields (SIGHUP), until the
    /// stop.
    pub fn reload_on(&mut self, mut hangups: tokio::signal::unix::Signal) {
        let relay = Arc::clone(&self.relay);
        self.chores.push(tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                // The outcome is logged.
                let _ = ops::reload(&relay).await;
            }
        }));
    }

    /// Serves until `shutdown` resolves, then stops.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) {
        shutdown.await;
        self.stop().await;
    }

    /// Stops: no new calls, requests in progress end, deliveries in flight
    /// get [`SHUTDOWN_GRACE`], the store closes.
    pub async fn stop(mut self) {
        self.relay.set_ready(false);
        if let Some(stop) = self.stop_listeners.take() {
            let _ = stop.send(());
        }
        if let Err(e) = (&mut self.listeners).await {
            tracing::error!("the listeners ended abnormally: {e}");
        }
        for chore in self.chores.drain(..) {
            chore.abort();
        }
        if let Some(d) = self.deliverer.take() {
            d.stop(SHUTDOWN_GRACE).await;
        }
        if let (Some(exporter), Some(tracer)) = (self.exporter.take(), &self.relay.tracer) {
            // The last requests' and attempts' spans, within one export's
            // time limit in all: a slow collector does not hold the stop
            // longer.
            exporter.abort();
            let _ = tokio::time::timeout(crate::trace::EXPORT_TIMEOUT, tracer.flush()).await;
        }
        self.relay.store.close().await;
        tracing::info!("relay stopped");
    }
}

/// Files kept open besides the listeners' and the deliveries'
/// connections: the database (SQLite's file, WAL and lock, or Postgres's
/// pool), the listeners themselves, DNS, logs.
const OTHER_OPEN_FILES: u64 = 64;

/// What the settings can hold open at once: every connection each listener
/// may take, every request the deliveries may have in flight (each at most
/// one per endpoint of its destination), and [`OTHER_OPEN_FILES`].
pub fn open_files_needed(cfg: &Config) -> u64 {
    let listeners = cfg.limits.max_connections
        + cfg
            .admin_listen
            .as_ref()
            .map_or(0, |_| cfg.limits.max_admin_connections);
    let deliveries = if cfg.deliver {
        cfg.delivery_concurrency * callpost_core::webhooks::MAX_ENDPOINTS
    } else {
        0
    };
    u64::try_from(listeners + deliveries).unwrap_or(u64::MAX) + OTHER_OPEN_FILES
}

/// Raises the soft limit on open files to the hard one (systems start
/// services at 1,024, far below the default connection cap), and warns
/// when even that is below what the settings can hold open: then a flood
/// of connections runs out of files before it meets the caps, and the
/// listener and the database fail instead of refusing.
fn raise_open_files(cfg: &Config) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let mut soft = limit.current;
    if soft != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => {
                tracing::info!(
                    "open files: soft limit raised from {} to {}",
                    shown_limit(soft),
                    shown_limit(limit.maximum)
                );
                soft = limit.maximum;
            }
            Err(e) => tracing::warn!("open files: the soft limit could not be raised: {e}"),
        }
    }
    let needed = open_files_needed(cfg);
    if soft.is_some_and(|n| n < needed) {
        tracing::warn!(
            "open files: the limit is {} and the settings can hold {needed} open \
             (limits.max_connections, limits.max_admin_connections, delivery.concurrency): \
             raise the service's limit (LimitNOFILE=, ulimit -n) or lower the caps",
            shown_limit(soft)
        );
    }
}

fn shown_limit(n: Option<u64>) -> String {
    n.map_or_else(|| "unlimited".to_owned(), |n| n.to_string())
}

/// With a secret key: the file's sources applied to the database, the
/// database's in force, and the task that reads them again. Without one:
/// the file's, with a warning when the database keeps sources it cannot
/// open.
/// Reads again what the store keeps in force for every relay (the slot
/// map, the suppressed users), as often as the sources are polled: a relay
/// learns of another's change within that time.
async fn refresh_store(relay: Arc<Relay>) {
    let every = Duration::from_millis(callpost_core::sources::SOURCES_POLL_MS);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(e) = relay.store.refresh().await {
            tracing::debug!(error = %e, "the store's settings were not read again");
        }
        if let Err(e) = relay.reload_suppressed().await {
            tracing::debug!(error = %e, "the suppressed users were not read again");
        }
    }
}

async fn start_sources(relay: &Arc<Relay>) -> Result<Option<JoinHandle<()>>, StartError> {
    if relay.cfg.secret_key.is_none() {
        match relay.store.stored_sources().await {
            Ok(stored) if !stored.rows.is_empty() => tracing::warn!(
                "the database keeps {} source(s) this relay does not use: set {} to use them",
                stored.rows.len(),
                crate::seal::SECRET_KEY_VAR
            ),
            _ => {}
        }
        return Ok(None);
    }
    sources::start(relay, &relay.cfg.source_docs)
        .await
        .map_err(StartError::Sources)?;
    Ok(Some(tokio::spawn(sources::poll(Arc::clone(relay)))))
}
