//! `callpost-relay`: run the relay, and look after it.
//!
//! ```text
//! callpost-relay [--config relay.toml] [flags]                  serve
//! callpost-relay status       [--config ...] [--json]           queue depth, dead letters, oldest pending
//! callpost-relay replay       [--message-id ID ...] [--source S] [--since T] [--until T]
//!                             [--include-delivered] [--include-undeliverable] [--all]
//! callpost-relay delete       --user-id U                       delete notifications, one per source
//! callpost-relay audience     --source S --audience NAME --members FILE
//! callpost-relay dead-letters [--limit N]
//! callpost-relay rejected     [--limit N]
//! callpost-relay enable-endpoint --url URL                      an endpoint disabled for failing, enabled again
//! callpost-relay apply        relay.toml                        the database's sources made to match the file's
//! callpost-relay sources                                        the sources in force, as JSON lines
//! callpost-relay put-source   --file source.json                a source created or replaced in the database
//! callpost-relay delete-source NAME                             a source removed from the database
//! callpost-relay migrate                                        run the schema migrations, and exit
//! ```
//!
//! The commands other than serve work on the database directly, whether
//! the relay runs or not; a running relay picks their work up within a
//! second. `python -m callpost relay …` runs this same binary.

// The command line's own output: what an operator reads.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use crate::api::Server;
use crate::app::Relay;
use crate::clock::Clock;
use crate::config::{self, Config, LogFormat, Overrides};
use crate::deliver::Deliverer;
use crate::ops;
use crate::sources;
use crate::store::{self, Cursor, LogFilter, ReplayFilter, Status, StoreOptions};
use clap::{Args, Parser, Subcommand};
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Deletes finished rows past their retention this often.
const PURGE_EVERY: Duration = Duration::from_secs(3600);
/// The queue gauges of `/metrics` are read from the store this often: a
/// scrape itself never touches the database.
const STATS_EVERY: Duration = Duration::from_secs(5);
/// Attempts in flight at shutdown get this long to end (the webhook
/// timeout and a second) before they are given back.
const SHUTDOWN_GRACE: Duration =
    Duration::from_millis(callpost_core::delivery::WEBHOOK_TIMEOUT_MS + 1000);

#[derive(Debug, Parser)]
#[command(
    name = "callpost-relay",
    version = callpost_core::VERSION,
    about = "The callpost relay: Segment's Tracking API in, signed Webhooks deliveries out.",
    long_about = None,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    serve: Serve,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Args, Clone, Default)]
struct Common {
    /// TOML configuration file.
    #[arg(long, short = 'c', global = true)]
    config: Option<String>,
    /// sqlite:///path/to/relay.db (default: callpost-relay.db here) or
    /// postgresql://... (prefer CALLPOST_RELAY_DATABASE when it has a
    /// password).
    #[arg(long, global = true)]
    database: Option<String>,
}

#[derive(Debug, Args, Clone, Default)]
struct Serve {
    /// host:port for the Tracking API (default 127.0.0.1:8088; port 0
    /// picks one).
    #[arg(long)]
    listen: Option<String>,
    /// host:port for the admin API and /metrics, apart from the Tracking
    /// API.
    #[arg(long)]
    admin_listen: Option<String>,
    /// A write key of the 'default' source (repeat for more).
    #[arg(long = "write-key")]
    write_keys: Vec<String>,
    /// An endpoint of the 'default' source's Webhooks destination (up to
    /// 5). Its shared secret comes from CALLPOST_RELAY_SHARED_SECRET.
    #[arg(long = "webhook-url")]
    webhook_urls: Vec<String>,
    /// Allow webhook URLs on loopback and private addresses.
    #[arg(long)]
    allow_private_networks: bool,
    /// SQLite durability: FULL (default) or NORMAL.
    #[arg(long)]
    synchronous: Option<String>,
    /// error, warn, info (default), debug, trace.
    #[arg(long)]
    log_level: Option<String>,
    /// plain (default) or json.
    #[arg(long)]
    log_format: Option<String>,
    /// Testing only: let POST /admin/test/clock move the relay's clock.
    #[cfg(feature = "test-clock")]
    #[arg(long)]
    test_clock: bool,
    /// Testing only, with --test-clock: start the clock this far ahead.
    #[cfg(feature = "test-clock")]
    #[arg(long, default_value_t = 0)]
    clock_offset_ms: i64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Queue depth, deliveries by state, the oldest pending delivery.
    Status {
        /// As one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Dead letters (and, when asked, delivered or undeliverable calls)
    /// sent again, with the same messageId, by id, source or time.
    Replay {
        /// Which calls.
        #[command(flatten)]
        calls: CallArgs,
        /// Count what would be replayed, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also calls already delivered and still kept.
        #[arg(long)]
        include_delivered: bool,
        /// Also calls stored while their destination was off or absent.
        #[arg(long)]
        include_undeliverable: bool,
        /// Every dead letter (needed when no other filter is given).
        #[arg(long)]
        all: bool,
    },
    /// Send a delete notification for a user to every enabled destination.
    Delete {
        /// The user.
        #[arg(long)]
        user_id: String,
    },
    /// Sync an audience's members: identify calls for the changes.
    Audience {
        /// The source.
        #[arg(long)]
        source: String,
        /// The audience's name.
        #[arg(long)]
        audience: String,
        /// A file of user ids, one per line, or a JSON array ('-': stdin).
        #[arg(long)]
        members: String,
    },
    /// Search the delivery log, newest first (one JSON object a line; the
    /// next page's cursor goes to stderr).
    Log {
        /// Which calls.
        #[command(flatten)]
        calls: CallArgs,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Where the page starts: the cursor an earlier page printed.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One stored call with its message and each attempt, as JSON.
    Call {
        /// The source's name.
        #[arg(long)]
        source: String,
        /// The call's messageId.
        #[arg(long)]
        message_id: String,
    },
    /// List deliveries that gave up.
    DeadLetters {
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// List calls refused inside accepted batches.
    Rejected {
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Enable an endpoint URL disabled for failing too long: every relay
    /// on the database sends to it again within 5 s.
    EnableEndpoint {
        /// The URL, as `status` shows it.
        #[arg(long)]
        url: String,
    },
    /// Make the database's sources match a configuration file's
    /// [[sources]] (needs CALLPOST_RELAY_SECRET_KEY); prints what changed.
    Apply {
        /// The configuration file (its database and sources are used).
        file: String,
    },
    /// The sources in force (the database's with CALLPOST_RELAY_SECRET_KEY,
    /// the file's without), as JSON lines without keys, secrets or header
    /// values.
    Sources,
    /// Create or replace a source in the database from a JSON file of a
    /// [[sources]] table's fields ('-': stdin).
    PutSource {
        /// The JSON file.
        #[arg(long)]
        file: String,
    },
    /// Remove a source from the database (its pending calls are set aside
    /// as undeliverable).
    DeleteSource {
        /// The source's name.
        name: String,
    },
    /// Run the database's schema migrations (a start runs them too).
    Migrate,
}

/// Runs the command line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut overrides = overrides(&cli);
    if let Some(Command::Apply { file }) = &cli.command {
        overrides.config = Some(file.clone());
    }
    let cfg = match config::load(&overrides, &|k| std::env::var(k).ok()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("callpost relay: {e} (invalid_config)");
            return ExitCode::from(2);
        }
    };
    init_logging(&cfg);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("callpost relay: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Some(command) => runtime.block_on(run_command(cfg, command)),
        None => runtime.block_on(serve(cfg, overrides)),
    }
}

fn overrides(cli: &Cli) -> Overrides {
    let s = &cli.serve;
    #[cfg(feature = "test-clock")]
    let test_clock = s.test_clock.then_some(s.clock_offset_ms);
    #[cfg(not(feature = "test-clock"))]
    let test_clock = None;
    Overrides {
        config: cli.common.config.clone(),
        listen: s.listen.clone(),
        admin_listen: s.admin_listen.clone(),
        database: cli.common.database.clone(),
        write_keys: s.write_keys.clone(),
        webhook_urls: s.webhook_urls.clone(),
        allow_private_networks: s.allow_private_networks.then_some(true),
        synchronous: s.synchronous.clone(),
        log_level: s.log_level.clone(),
        log_format: s.log_format.clone(),
        test_clock,
    }
}

fn init_logging(cfg: &Config) {
    let filter = tracing_subscriber::EnvFilter::new(format!(
        "callpost_relay={level},warn",
        level = cfg.log_level
    ));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in files and journals.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    // A second subscriber cannot be set (tests that run main twice); the
    // first one stays.
    let _ = match cfg.log_format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// The database as it may be shown: no user or password.
fn shown(database: &str) -> String {
    match database.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => database.to_owned(),
    }
}

fn store_options(cfg: &Config, exclusive: bool) -> StoreOptions {
    StoreOptions {
        synchronous: cfg.synchronous,
        timeout: cfg.database_timeout,
        exclusive,
        ca_file: cfg.ca_file.as_ref().map(std::path::PathBuf::from),
    }
}

fn clock_of(cfg: &Config) -> Clock {
    #[cfg(feature = "test-clock")]
    if let Some(offset) = cfg.test_clock {
        return Clock::with_offset(offset);
    }
    let _ = cfg;
    Clock::new()
}

async fn serve(cfg: Config, overrides: Overrides) -> ExitCode {
    // Registered before anything is opened or logged: until a handler is
    // in place a SIGTERM (or a SIGHUP) is the default kill, and a deploy
    // may send one as soon as the relay says it listens.
    let stop = shutdown_signal();
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    if let Err(e) =
        crate::deliver::check_destinations(&cfg.sources, cfg.allow_private_networks).await
    {
        eprintln!("callpost relay: {e} (invalid_config)");
        return ExitCode::from(2);
    }
    let database = shown(cfg.database.expose());
    let store = match store::open(cfg.database.expose(), store_options(&cfg, true)).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot open the database {database}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (before, after) = store.migrated();
    if before != after {
        tracing::info!("database schema migrated from version {before} to {after}");
    }
    let clock = Arc::new(clock_of(&cfg));
    let relay = Arc::new(Relay::new(cfg, store, clock));
    let _ = relay.reload_from.set(overrides);
    let polling = match start_sources(&relay).await {
        Ok(p) => p,
        Err(code) => {
            relay.store.close().await;
            return code;
        }
    };
    let metrics = Arc::clone(&relay.metrics);
    relay
        .store
        .set_commit_observer(Arc::new(move |took, calls| metrics.commit(took, calls)));
    let server = match Server::bind(Arc::clone(&relay)).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot listen on {}: {e}", relay.cfg.listen);
            relay.store.close().await;
            return ExitCode::FAILURE;
        }
    };
    let deliverer = if relay.cfg.deliver {
        match Deliverer::start(Arc::clone(&relay)) {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::error!("cannot start delivering: {e}");
                relay.store.close().await;
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let housekeeping = tokio::spawn(housekeeping(Arc::clone(&relay)));
    let exporter = relay
        .tracer
        .as_ref()
        .map(|t| tokio::spawn(Arc::clone(t).run()));
    let reloads = match hangups {
        Ok(hangups) => Some(tokio::spawn(reload_on_hangup(Arc::clone(&relay), hangups))),
        Err(e) => {
            tracing::warn!("SIGHUP cannot be handled ({e}): the sources reload only at a restart");
            None
        }
    };
    relay.set_ready(true);
    tracing::info!(
        "relay started: {} source(s), database {database}, synchronous={}",
        relay.sources().list.len(),
        relay.cfg.synchronous.as_str()
    );
    // Tests and scripts wait for this line; it names the port picked when
    // `listen` asked for port 0.
    tracing::info!("callpost relay listening on http://{}", server.api_addr);
    server.run(stop).await;
    relay.set_ready(false);
    housekeeping.abort();
    if let Some(p) = polling {
        p.abort();
    }
    if let Some(r) = reloads {
        r.abort();
    }
    if let Some(d) = deliverer {
        d.stop(SHUTDOWN_GRACE).await;
    }
    if let (Some(exporter), Some(tracer)) = (exporter, &relay.tracer) {
        // The last requests' and attempts' spans, within one export's time
        // limit in all: a slow collector does not hold the stop longer.
        exporter.abort();
        let _ = tokio::time::timeout(crate::trace::EXPORT_TIMEOUT, tracer.flush()).await;
    }
    relay.store.close().await;
    tracing::info!("relay stopped");
    ExitCode::SUCCESS
}

/// With a secret key: the file's sources applied to the database, the
/// database's in force, and the task that reads them again. Without one:
/// the file's, with a warning when the database keeps sources it cannot
/// open.
async fn start_sources(
    relay: &Arc<Relay>,
) -> Result<Option<tokio::task::JoinHandle<()>>, ExitCode> {
    if relay.cfg.secret_key.is_none() {
        match relay.store.stored_sources().await {
            Ok(rows) if !rows.is_empty() => tracing::warn!(
                "the database keeps {} source(s) this relay does not use: set {} to use them",
                rows.len(),
                sources::SECRET_KEY_VAR
            ),
            _ => {}
        }
        return Ok(None);
    }
    if let Err(e) = sources::start(relay, &relay.cfg.source_docs).await {
        tracing::error!("cannot put the database's sources in force: {e}");
        return Err(ExitCode::FAILURE);
    }
    Ok(Some(tokio::spawn(sources::poll(Arc::clone(relay)))))
}

/// Reloads the sources on each SIGHUP.
async fn reload_on_hangup(relay: Arc<Relay>, mut hangups: tokio::signal::unix::Signal) {
    while hangups.recv().await.is_some() {
        // The outcome is logged.
        let _ = ops::reload(&relay).await;
    }
}

/// Handles SIGTERM and SIGINT from now on; the future ends at the first.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            // No signal handling: only a kill stops the relay.
            _ => std::future::pending::<()>().await,
        }
    }
}

/// Retention and the metrics' queue gauges, on their intervals.
async fn housekeeping(relay: Arc<Relay>) {
    let mut purge = tokio::time::interval(PURGE_EVERY);
    let mut stats = tokio::time::interval(STATS_EVERY);
    loop {
        tokio::select! {
            _ = purge.tick() => {
                let now = relay.clock.now_ms();
                match relay.store.purge(now, relay.cfg.retention).await {
                    Ok(p) if p != store::Purged::default() => tracing::info!(
                        "deleted past their retention: {} delivered, {} dead, {} undeliverable, {} rejected",
                        p.delivered, p.dead, p.undeliverable, p.rejected
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("purging past retention failed: {e}; trying again in an hour"),
                }
            }
            _ = stats.tick() => {
                let now = relay.clock.now_ms();
                let stats = relay.store.stats(now).await;
                if let Some(op) = &relay.operator {
                    let at = relay.clock.now();
                    match &stats {
                        Ok(s) => op.status_check(
                            at,
                            Ok((
                                u64::try_from(s.pending).unwrap_or(0),
                                s.oldest_pending_received_at
                                    .and_then(|t| callpost_core::Timestamp::from_millis(t).ok()),
                            )),
                        ),
                        Err(e) => op.status_check(at, Err(&e.to_string())),
                    }
                }
                match stats {
                    Ok(s) => {
                        relay.metrics.set_stats(&s, now);
                        if let Ok(mut cached) = relay.stats.lock() {
                            *cached = Some(s);
                        }
                    }
                    Err(e) => tracing::debug!("reading queue counts for /metrics failed: {e}"),
                }
            }
        }
    }
}

fn out(line: &str) {
    // A closed stdout (a pipe to `head`) is not an error worth a panic.
    let _ = writeln!(std::io::stdout(), "{line}");
}

fn members_of(path: &str) -> Result<Vec<String>, String> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| format!("cannot read stdin: {e}"))?
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?
    };
    let trimmed = text.trim();
    if trimmed.starts_with('[') {
        return serde_json::from_str::<Vec<String>>(trimmed)
            .map_err(|_| "the members JSON must be an array of strings".to_owned());
    }
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Prints a page's rows, one JSON object a line; returns its cursor.
fn print_page<T: serde::Serialize>(page: store::Page<T>) -> Result<Option<Cursor>, String> {
    for row in &page.rows {
        out(&serde_json::to_string(row).map_err(|e| e.to_string())?);
    }
    Ok(page.next)
}

/// The calls a search or a replay names (every one given must match).
#[derive(Debug, clap::Args)]
struct CallArgs {
    /// Only this messageId (repeat for more).
    #[arg(long = "message-id")]
    message_ids: Vec<String>,
    /// Only this userId.
    #[arg(long)]
    user_id: Option<String>,
    /// Only this anonymousId.
    #[arg(long)]
    anonymous_id: Option<String>,
    /// Only track calls of this event.
    #[arg(long)]
    event: Option<String>,
    /// Only calls of this type (track, identify, ...).
    #[arg(long = "type")]
    kind: Option<String>,
    /// Only this source.
    #[arg(long)]
    source: Option<String>,
    /// Only calls in this state: pending, delivered, dead or undeliverable
    /// (and, for `log`, rejected: refused calls, by source and time).
    #[arg(long)]
    status: Option<String>,
    /// Received at or after (ISO 8601).
    #[arg(long)]
    since: Option<String>,
    /// Received before (ISO 8601).
    #[arg(long)]
    until: Option<String>,
}

impl CallArgs {
    /// The filter, and whether it asks for refused calls.
    fn filter(self) -> Result<(LogFilter, bool), String> {
        let rejected = self.status.as_deref() == Some("rejected");
        let status = match self.status.as_deref() {
            None | Some("rejected") => None,
            Some(name) => Some(Status::named(name).ok_or_else(|| {
                format!(
                    "--status must be one of pending, delivered, dead, undeliverable, rejected, \
                     not {name:?}"
                )
            })?),
        };
        Ok((
            LogFilter {
                message_ids: (!self.message_ids.is_empty()).then_some(self.message_ids),
                user_id: self.user_id,
                anonymous_id: self.anonymous_id,
                event: self.event,
                kind: self.kind,
                source: self.source,
                status,
                since: time_arg(self.since, "since")?,
                until: time_arg(self.until, "until")?,
            },
            rejected,
        ))
    }
}

fn time_arg(value: Option<String>, what: &str) -> Result<Option<i64>, String> {
    value
        .map(|v| {
            callpost_core::Timestamp::parse(&v)
                .map(callpost_core::Timestamp::as_millis)
                .map_err(|e| format!("--{what}: {e}"))
        })
        .transpose()
}

async fn run_command(cfg: Config, command: Command) -> ExitCode {
    let name = match &command {
        Command::Status { .. } => "status",
        Command::Replay { .. } => "replay",
        Command::Log { .. } => "log",
        Command::Call { .. } => "call",
        Command::Delete { .. } => "delete",
        Command::Audience { .. } => "audience",
        Command::DeadLetters { .. } => "dead-letters",
        Command::Rejected { .. } => "rejected",
        Command::EnableEndpoint { .. } => "enable-endpoint",
        Command::Apply { .. } => "apply",
        Command::Sources => "sources",
        Command::PutSource { .. } => "put-source",
        Command::DeleteSource { .. } => "delete-source",
        Command::Migrate => "migrate",
    };
    match command_result(cfg, command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("callpost relay {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn command_result(cfg: Config, command: Command) -> Result<(), String> {
    let store = store::open(cfg.database.expose(), store_options(&cfg, false))
        .await
        .map_err(|e| e.to_string())?;
    let clock = clock_of(&cfg);
    let result = command_on(&*store, &cfg, &clock, command).await;
    store.close().await;
    result
}

async fn command_on(
    store: &dyn store::Store,
    cfg: &Config,
    clock: &Clock,
    command: Command,
) -> Result<(), String> {
    match command {
        Command::Migrate => {
            let (before, after) = store.migrated();
            out(&if before == after {
                format!("schema version {after}: up to date")
            } else {
                format!("schema version {before} -> {after}")
            });
        }
        Command::Status { json } => {
            let s = ops::status(store, clock).await.map_err(|e| e.to_string())?;
            if json {
                out(&serde_json::to_string(&s).map_err(|e| e.to_string())?);
            } else {
                let st = &s.stats;
                out(&format!(
                    "pending deliveries: {} ({} in flight)",
                    st.pending, st.in_flight
                ));
                out(&format!("dead letters:       {}", st.dead));
                out(&format!("delivered (kept):   {}", st.delivered));
                out(&format!("undeliverable:      {}", st.undeliverable));
                out(&format!("rejected calls:     {}", st.rejected));
                out(&match s.oldest_pending_age_seconds {
                    None => "oldest pending:     none".to_owned(),
                    Some(age) => format!("oldest pending:     {age:.1} s old"),
                });
                for url in &s.disabled_endpoints {
                    out(&format!("disabled endpoint:  {url}"));
                }
            }
        }
        Command::EnableEndpoint { url } => {
            let urls = ops::enable_endpoint(store, clock, &url)
                .await
                .map_err(|e| e.to_string())?;
            for u in urls {
                out(&format!(
                    "enabled {}: relays send to it again within 5 s; replay what was kept \
                     with --include-undeliverable",
                    callpost_core::ops::shown_url(&u)
                ));
            }
        }
        Command::Replay {
            calls,
            dry_run,
            include_delivered,
            include_undeliverable,
            all,
        } => {
            let (calls, rejected) = calls.filter()?;
            if rejected {
                return Err("a refused call cannot be replayed".into());
            }
            let filter = ReplayFilter {
                calls,
                include_delivered,
                include_undeliverable,
            };
            let n = ops::replay(store, clock, filter, all, dry_run)
                .await
                .map_err(|e| e.to_string())?;
            out(&if dry_run {
                format!("would replay {n} deliveries")
            } else {
                format!("replaying {n} deliveries")
            });
        }
        Command::Log {
            calls,
            limit,
            cursor,
        } => {
            if !(1..=store::log::MAX_PAGE).contains(&limit) {
                return Err(format!(
                    "--limit must be from 1 to {}",
                    store::log::MAX_PAGE
                ));
            }
            let after = cursor
                .map(|c| Cursor::parse(&c).ok_or("--cursor must be one an earlier page printed"))
                .transpose()?;
            let (calls, rejected) = calls.filter()?;
            let next = if rejected {
                let page = store.search_rejected(calls, after, limit).await;
                print_page(page.map_err(|e| e.to_string())?)?
            } else {
                let page = store.search(calls, after, limit).await;
                print_page(page.map_err(|e| e.to_string())?)?
            };
            if let Some(next) = next {
                eprintln!("next page: --cursor {next}");
            }
        }
        Command::Call { source, message_id } => {
            let list = sources::in_force(store, cfg)
                .await
                .map_err(|e| e.to_string())?;
            match ops::logged_call(store, &list, &source, &message_id)
                .await
                .map_err(|e| e.to_string())?
            {
                Some(report) => {
                    out(&serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
                }
                None => return Err(format!("no stored call {message_id:?} of {source:?}")),
            }
        }
        Command::Apply { .. } => {
            if cfg.source_docs.is_empty() {
                return Err(
                    "the file gives no sources: applying it would remove every source \
                            (remove them one by one with `delete-source`)"
                        .into(),
                );
            }
            crate::deliver::check_destinations(&cfg.sources, cfg.allow_private_networks)
                .await
                .map_err(|e| e.to_string())?;
            let changes = sources::apply(store, cfg.secret_key.as_deref(), &cfg.source_docs)
                .await
                .map_err(|e| e.to_string())?;
            for line in changes.lines() {
                out(&line);
            }
        }
        Command::Sources => sources_command(store, cfg, None).await?,
        Command::PutSource { file } => sources_command(store, cfg, Some(Ok(file))).await?,
        Command::DeleteSource { name } => sources_command(store, cfg, Some(Err(name))).await?,
        Command::Delete { user_id } => {
            let list = sources::in_force(store, cfg)
                .await
                .map_err(|e| e.to_string())?;
            let sources = ops::delete_user(store, &list, clock, &user_id)
                .await
                .map_err(|e| e.to_string())?;
            let list = if sources.is_empty() {
                "none".to_owned()
            } else {
                sources.join(", ")
            };
            out(&format!(
                "delete notifications stored for {} source(s): {list}",
                sources.len()
            ));
        }
        Command::Audience {
            source,
            audience,
            members,
        } => {
            let members = members_of(&members)?;
            let list = sources::in_force(store, cfg)
                .await
                .map_err(|e| e.to_string())?;
            let n = ops::sync_audience(store, &list, clock, &source, &audience, members)
                .await
                .map_err(|e| e.to_string())?;
            out(&format!(
                "{n} identify call(s) stored for audience {audience:?}"
            ));
        }
        Command::DeadLetters { limit } => {
            for row in store.dead_letters(limit).await.map_err(|e| e.to_string())? {
                out(&serde_json::to_string(&row).map_err(|e| e.to_string())?);
            }
        }
        Command::Rejected { limit } => {
            for row in store.rejected(limit).await.map_err(|e| e.to_string())? {
                out(&serde_json::to_string(&row).map_err(|e| e.to_string())?);
            }
        }
    }
    Ok(())
}

/// `sources` (`None`), `put-source --file` (`Ok(file)`) and
/// `delete-source` (`Err(name)`).
async fn sources_command(
    store: &dyn store::Store,
    cfg: &Config,
    change: Option<Result<String, String>>,
) -> Result<(), String> {
    let key = cfg.secret_key.as_deref();
    let changes = match change {
        None => {
            let list = sources::in_force(store, cfg)
                .await
                .map_err(|e| e.to_string())?;
            let protections = config::checked_set(&list).map_err(|e| e.to_string())?;
            let set = crate::app::Sources::new(list, protections, 0);
            for report in ops::sources_report(&set) {
                out(&serde_json::to_string(&report).map_err(|e| e.to_string())?);
            }
            return Ok(());
        }
        Some(Ok(file)) => {
            let text = if file == "-" {
                std::io::read_to_string(std::io::stdin())
                    .map_err(|e| format!("cannot read stdin: {e}"))?
            } else {
                std::fs::read_to_string(&file).map_err(|e| format!("cannot read {file}: {e}"))?
            };
            let doc = config::SourceDoc::from_json(&text).map_err(|e| e.to_string())?;
            sources::check_one(&doc, cfg.allow_private_networks)
                .await
                .map_err(|e| e.message)?;
            sources::put(store, key, doc).await
        }
        Some(Err(name)) => sources::remove(store, key, &name).await,
    }
    .map_err(|e| e.to_string())?;
    for line in changes.lines() {
        out(&line);
    }
    if !changes.is_empty() {
        out(&format!(
            "every relay on the database puts it in force within {} s",
            sources::SOURCES_POLL_MS / 1000
        ));
    }
    Ok(())
}
