//! `callpost-relay`: run the relay, and look after it.
//!
//! ```text
//! callpost-relay [--config relay.toml] [flags]                  serve
//! callpost-relay status       [--config ...] [--json]           queue depth, dead letters, oldest pending
//! callpost-relay log          [--message-id ID] [--user-id U] [--anonymous-id A] [--event E]
//!                             [--type T] [--source S] [--status S] [--since T] [--until T]
//!                             [--limit N] [--cursor C]          the delivery log, newest first
//! callpost-relay call         --source S --message-id ID        one stored call and its attempts
//! callpost-relay replay       [--message-id ID ...] [--source S] [--since T] [--until T] [--dry-run]
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
//! callpost-relay healthcheck  [--ready]                         exit 0 when the relay here answers /healthz (/readyz)
//! ```
//!
//! This module reads the arguments and prints; serving is [`crate::app`],
//! and every command is an operation of [`crate::ops`] or a read of the
//! store. The commands other than serve work on the database directly,
//! whether the relay runs or not; a running relay picks their work up
//! within a second. `python -m callpost relay …` runs this same binary.

// The command line's own output: what an operator reads.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use crate::app::{self, App};
use crate::clock::Clock;
use crate::config::{self, Config, ConfigError, LogFormat, Overrides};
use crate::ops::{self, sources, OpError};
use crate::state::Sources;
use crate::store::{self, Cursor, LogFilter, LogStatus, ReplayFilter};
use callpost_core::Code;
use clap::{Args, Parser, Subcommand};
use std::io::Write as _;
use std::process::ExitCode;

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
    /// Delete a user: erase every stored call whose userId or anonymousId
    /// it is, across sources (and refused calls that name it), send the
    /// spec's delete notifications, keep an audit record; with --suppress,
    /// take none of the user's calls from now on.
    Delete {
        /// The user.
        #[arg(long)]
        user_id: String,
        /// Also suppress the user (needs CALLPOST_RELAY_SECRET_KEY).
        #[arg(long)]
        suppress: bool,
        /// Who asks, for the audit record (default: $USER).
        #[arg(long)]
        operator: Option<String>,
    },
    /// Take a suppressed user's calls again.
    Unsuppress {
        /// The user.
        #[arg(long)]
        user_id: String,
        /// Who asks (default: $USER).
        #[arg(long)]
        operator: Option<String>,
    },
    /// A user's stored calls as JSON lines, for an access request.
    Export {
        /// The user, by userId.
        #[arg(
            long,
            conflicts_with = "anonymous_id",
            required_unless_present = "anonymous_id"
        )]
        user_id: Option<String>,
        /// The user, by anonymousId.
        #[arg(long)]
        anonymous_id: Option<String>,
    },
    /// The deletions' audit records, newest first.
    Deletions {
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
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
        /// Its delivery to this destination (the first stored, without
        /// one).
        #[arg(long)]
        destination: Option<String>,
    },
    /// The exact body a mapping (a JSON file, '-': stdin; the source's own
    /// without one) builds for a stored call, with the source's filters;
    /// nothing is stored or sent.
    TryMapping {
        /// The source's name.
        #[arg(long)]
        source: String,
        /// Its destination whose filters (and mapping) apply; its first
        /// without one.
        #[arg(long)]
        destination: Option<String>,
        /// The stored call's messageId.
        #[arg(long)]
        message_id: String,
        /// The mapping to try, as JSON (docs/mappings.md).
        #[arg(long)]
        mapping: Option<String>,
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
    /// Seal every stored call, answer and refused call again under the
    /// current CALLPOST_RELAY_SECRET_KEY (after a rotation, with the old key
    /// in CALLPOST_RELAY_PREVIOUS_SECRET_KEYS on every relay; or to seal
    /// what was stored before the key was set). Online, beside the running
    /// relays; a stopped run goes on where it was.
    Reseal,
    /// Run the database's schema migrations (a start runs them too).
    Migrate,
    /// Check the configuration (the file, the variables, the flags) and
    /// exit: 0 and a summary when the relay would take it, 2 and why not.
    /// No database is opened.
    Check,
    /// Exit 0 when the relay this configuration describes answers
    /// `/healthz` with 200 within 3 s, 1 otherwise: the image's health
    /// check, which has no curl to run. An unspecified listen address
    /// (0.0.0.0, [::]) is asked on loopback.
    Healthcheck {
        /// Ask `/readyz` instead: taking calls with the database answering.
        #[arg(long)]
        ready: bool,
    },
}

/// What `check` says of a configuration the relay takes: no secrets, the
/// databases by host only.
fn checked(cfg: &Config) -> String {
    let map = &cfg.shards.map;
    let groups: Vec<String> = map
        .groups()
        .iter()
        .map(|g| format!("{g} (slots {})", map.slots_of(g)))
        .collect();
    format!(
        "configuration ok: {} source(s), database {}, shard groups: {} (map version {})",
        cfg.sources.len(),
        app::shown_database(cfg.database.expose()),
        groups.join(", "),
        map.version()
    )
}

/// Who runs a command, for a deletion's audit record: `$USER`, else `cli`.
fn cli_operator() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "cli".to_owned())
}

/// Runs the command line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut overrides = overrides(&cli);
    if let Some(Command::Healthcheck { ready }) = &cli.command {
        return healthcheck(&overrides, *ready);
    }
    if let Some(Command::Apply { file }) = &cli.command {
        overrides.config = Some(file.clone());
    }
    let cfg = match config::load(&overrides, &|k| std::env::var(k).ok()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("callpost relay: {e} ({})", e.code());
            return ExitCode::from(2);
        }
    };
    if let Some(Command::Check) = &cli.command {
        println!("{}", checked(&cfg));
        return ExitCode::SUCCESS;
    }
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

async fn serve(cfg: Config, overrides: Overrides) -> ExitCode {
    // Registered before anything is opened or logged: until a handler is
    // in place a SIGTERM (or a SIGHUP) is the default kill, and a deploy
    // may send one as soon as the relay says it listens.
    let stop = shutdown_signal();
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    let mut app = match App::open(cfg, Some(overrides)).await {
        Ok(app) => app,
        Err(app::StartError::Config(e)) => {
            eprintln!("callpost relay: {e} ({})", e.code());
            return ExitCode::from(2);
        }
        Err(e) => {
            tracing::error!("{e} ({})", e.code());
            return ExitCode::FAILURE;
        }
    };
    match hangups {
        Ok(hangups) => app.reload_on(hangups),
        Err(e) => {
            tracing::warn!("SIGHUP cannot be handled ({e}): the sources reload only at a restart");
        }
    }
    app.run_until(stop).await;
    ExitCode::SUCCESS
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

/// Why a command failed: an operation's error, or an argument or file the
/// command line itself cannot use.
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error(transparent)]
    Op(#[from] OpError),
    #[error("{0}")]
    Argument(String),
}

impl CommandError {
    fn code(&self) -> Code {
        match self {
            Self::Op(e) => e.code(),
            Self::Argument(_) => Code::InvalidArgument,
        }
    }
}

impl From<store::StoreError> for CommandError {
    fn from(e: store::StoreError) -> Self {
        Self::Op(e.into())
    }
}

impl From<ConfigError> for CommandError {
    fn from(e: ConfigError) -> Self {
        Self::Op(e.into())
    }
}

fn argument(message: impl Into<String>) -> CommandError {
    CommandError::Argument(message.into())
}

/// Writes `value` as one line of JSON.
fn out_json<T: serde::Serialize>(value: &T) -> Result<(), CommandError> {
    // Every value printed is made of strings, numbers and maps.
    out(&serde_json::to_string(value).map_err(|e| argument(e.to_string()))?);
    Ok(())
}

fn out(line: &str) {
    // A closed stdout (a pipe to `head`) is not an error worth a panic.
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// A file's text, or stdin's for `-`.
fn text_of(path: &str) -> Result<String, CommandError> {
    if path == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| argument(format!("cannot read stdin: {e}")))
    } else {
        std::fs::read_to_string(path).map_err(|e| argument(format!("cannot read {path}: {e}")))
    }
}

fn members_of(path: &str) -> Result<Vec<String>, CommandError> {
    let text = text_of(path)?;
    let trimmed = text.trim();
    if trimmed.starts_with('[') {
        return serde_json::from_str::<Vec<String>>(trimmed)
            .map_err(|_| argument("the members JSON must be an array of strings"));
    }
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Prints a page's rows, one JSON object a line; returns its cursor.
fn print_page<T: serde::Serialize>(page: store::Page<T>) -> Result<Option<Cursor>, CommandError> {
    for row in &page.rows {
        out_json(row)?;
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
    /// Only the deliveries to this destination of the source.
    #[arg(long)]
    destination: Option<String>,
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
    fn filter(self) -> Result<(LogFilter, bool), CommandError> {
        let status = self
            .status
            .as_deref()
            .map(|name| LogStatus::parse(name).map_err(|e| argument(format!("--{e}"))))
            .transpose()?;
        Ok((
            LogFilter {
                message_ids: (!self.message_ids.is_empty()).then_some(self.message_ids),
                user_id: self.user_id,
                anonymous_id: self.anonymous_id,
                event: self.event,
                kind: self.kind,
                source: self.source,
                destination: self.destination,
                status: match status {
                    Some(LogStatus::Calls(s)) => Some(s),
                    _ => None,
                },
                since: time_arg(self.since, "since")?,
                until: time_arg(self.until, "until")?,
                ..LogFilter::default()
            },
            status == Some(LogStatus::Rejected),
        ))
    }
}

fn time_arg(value: Option<String>, what: &str) -> Result<Option<i64>, CommandError> {
    value
        .map(|v| {
            callpost_core::Timestamp::parse(&v)
                .map(callpost_core::Timestamp::as_millis)
                .map_err(|e| argument(format!("--{what}: {e}")))
        })
        .transpose()
}

async fn run_command(cfg: Config, command: Command) -> ExitCode {
    let name = match &command {
        Command::Status { .. } => "status",
        Command::Replay { .. } => "replay",
        Command::Log { .. } => "log",
        Command::Call { .. } => "call",
        Command::TryMapping { .. } => "try-mapping",
        Command::Delete { .. } => "delete",
        Command::Unsuppress { .. } => "unsuppress",
        Command::Export { .. } => "export",
        Command::Deletions { .. } => "deletions",
        Command::Reseal => "reseal",
        Command::Audience { .. } => "audience",
        Command::DeadLetters { .. } => "dead-letters",
        Command::Rejected { .. } => "rejected",
        Command::EnableEndpoint { .. } => "enable-endpoint",
        Command::Apply { .. } => "apply",
        Command::Sources => "sources",
        Command::PutSource { .. } => "put-source",
        Command::DeleteSource { .. } => "delete-source",
        Command::Migrate => "migrate",
        // Answered by main before the configuration is loaded, or once it
        // is, without a database.
        Command::Healthcheck { .. } => "healthcheck",
        Command::Check => "check",
    };
    match command_result(cfg, command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("callpost relay {name}: {e} ({})", e.code());
            ExitCode::FAILURE
        }
    }
}

/// How long `healthcheck` waits for the answer: shorter than the image's
/// `HEALTHCHECK --timeout=5s` (Docker's default is 30 s), so the command's
/// own limit fires first and the health log says why it failed.
const HEALTHCHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// `healthcheck`: only the listen address is resolved from the
/// configuration (no database is opened, nothing else is checked), and the
/// relay asked on it.
fn healthcheck(overrides: &Overrides, ready: bool) -> ExitCode {
    let path = if ready { "/readyz" } else { "/healthz" };
    let mut addr = match config::listen_of(overrides, &|k| std::env::var(k).ok()) {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("callpost relay healthcheck: {e} ({})", e.code());
            return ExitCode::from(2);
        }
    };
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("callpost relay healthcheck: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let answer = runtime.block_on(async {
        tokio::time::timeout(HEALTHCHECK_TIMEOUT, get_status(addr, path)).await
    });
    match answer {
        Ok(Ok(200)) => {
            out(&format!("healthy: http://{addr}{path} answered 200"));
            ExitCode::SUCCESS
        }
        Ok(Ok(status)) => {
            eprintln!("callpost relay healthcheck: http://{addr}{path} answered {status}");
            ExitCode::FAILURE
        }
        Ok(Err(e)) => {
            eprintln!("callpost relay healthcheck: http://{addr}{path}: {e}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!(
                "callpost relay healthcheck: http://{addr}{path} did not answer within {} s",
                HEALTHCHECK_TIMEOUT.as_secs()
            );
            ExitCode::FAILURE
        }
    }
}

/// One GET on a fresh connection; the answer's status.
async fn get_status(addr: std::net::SocketAddr, path: &str) -> Result<u16, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<
        _,
        http_body_util::Empty<bytes::Bytes>,
    >(hyper_util::rt::TokioIo::new(stream))
    .await
    .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = http::Request::get(path)
        .header(http::header::HOST, addr.to_string())
        .body(http_body_util::Empty::new())
        .map_err(|e| e.to_string())?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    Ok(answer.status().as_u16())
}

async fn command_result(cfg: Config, command: Command) -> Result<(), CommandError> {
    let clock = app::clock_of(&cfg);
    let store = app::open_store(&cfg, false, &clock)
        .await
        .map_err(|(_, e)| e)?;
    let sealed = match cfg.secret_key {
        Some(_) => app::sealed_store(&cfg, std::sync::Arc::clone(&store)).await,
        None => store::sealed::refuse_without_key(store.as_ref())
            .await
            .map(|()| (std::sync::Arc::clone(&store), None)),
    };
    let result = match sealed {
        Ok((sealed, sealer)) => {
            command_on(&*sealed, sealer.as_deref(), &cfg, &clock, command).await
        }
        Err(e) => Err(e.into()),
    };
    store.close().await;
    result
}

async fn command_on(
    store: &dyn store::Store,
    sealer: Option<&store::sealed::Sealer>,
    cfg: &Config,
    clock: &Clock,
    command: Command,
) -> Result<(), CommandError> {
    match command {
        // Answered by main before the configuration is loaded.
        Command::Healthcheck { .. } | Command::Check => {}
        Command::Migrate => {
            let (before, after) = store.migrated();
            out(&if before == after {
                format!("schema version {after}: up to date")
            } else {
                format!("schema version {before} -> {after}")
            });
        }
        Command::Status { json } => {
            let s = ops::status(store, clock).await?;
            if json {
                out_json(&s)?;
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
            for u in ops::enable_endpoint(store, clock, &url).await? {
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
                return Err(argument("a refused call cannot be replayed"));
            }
            let filter = ReplayFilter {
                calls,
                include_delivered,
                include_undeliverable,
            };
            let n = ops::replay(store, clock, filter, all, dry_run).await?;
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
                return Err(argument(format!(
                    "--limit must be from 1 to {}",
                    store::log::MAX_PAGE
                )));
            }
            let after = cursor
                .map(|c| {
                    Cursor::parse(&c)
                        .ok_or_else(|| argument("--cursor must be one an earlier page printed"))
                })
                .transpose()?;
            let (calls, rejected) = calls.filter()?;
            let next = if rejected {
                print_page(store.search_rejected(calls, after, limit).await?)?
            } else {
                print_page(store.search(calls, after, limit).await?)?
            };
            if let Some(next) = next {
                eprintln!("next page: --cursor {next}");
            }
        }
        Command::Call {
            source,
            message_id,
            destination,
        } => {
            let list = sources::in_force(store, cfg).await?;
            match ops::logged_call(store, &list, &source, &message_id, destination).await? {
                Some(report) => {
                    out(&serde_json::to_string_pretty(&report)
                        .map_err(|e| argument(e.to_string()))?);
                }
                None => {
                    return Err(OpError::NotFound(format!(
                        "no stored call {message_id:?} of {source:?}"
                    ))
                    .into())
                }
            }
        }
        Command::Apply { .. } => {
            if cfg.source_docs.is_empty() {
                return Err(argument(
                    "the file gives no sources: applying it would remove every source \
                     (remove them one by one with `delete-source`)",
                ));
            }
            crate::deliver::check_destinations(&cfg.sources, cfg.allow_private_networks).await?;
            let changes =
                sources::apply(store, cfg.secret_key.as_deref(), &cfg.source_docs).await?;
            for line in changes.lines() {
                out(&line);
            }
        }
        Command::Sources => sources_command(store, cfg, None).await?,
        Command::TryMapping {
            source,
            destination,
            message_id,
            mapping,
        } => {
            let mapping = match mapping {
                None => None,
                Some(path) => {
                    let text = text_of(&path)?;
                    Some(
                        serde_json::from_str(&text)
                            .map_err(|e| argument(format!("the mapping is not JSON: {e}")))?,
                    )
                }
            };
            let list = sources::in_force(store, cfg).await?;
            let trial = ops::MappingTrial {
                source,
                destination,
                mapping,
                message_id: Some(message_id),
                call: None,
            };
            let report = ops::try_mapping(store, &list, clock.now(), trial).await?;
            match (report.body, report.filtered) {
                (Some(body), _) => out(&body),
                (None, Some(rule)) => {
                    out(&format!("dropped by filter rule {rule}: nothing is sent"));
                }
                (None, None) => {
                    return Err(OpError::Invalid {
                        code: Code::MappedBodyTooLarge,
                        message: report.message.unwrap_or_default(),
                    }
                    .into())
                }
            }
        }
        Command::PutSource { file } => sources_command(store, cfg, Some(Ok(file))).await?,
        Command::DeleteSource { name } => sources_command(store, cfg, Some(Err(name))).await?,
        Command::Delete {
            user_id,
            suppress,
            operator,
        } => {
            let list = sources::in_force(store, cfg).await?;
            let operator = operator.unwrap_or_else(cli_operator);
            let request = ops::DeleteRequest {
                user_id: &user_id,
                suppress,
                operator: &operator,
            };
            let deleted = ops::delete_user(store, &list, clock, sealer, request).await?;
            let list = if deleted.sources.is_empty() {
                "none".to_owned()
            } else {
                deleted.sources.join(", ")
            };
            out(&format!(
                "erased {} stored call row(s) and {} refused call(s); delete notifications stored \
                 for {} source(s): {list}{}",
                deleted.erased.calls,
                deleted.erased.rejected,
                deleted.sources.len(),
                if deleted.suppressed {
                    "; the user is suppressed"
                } else {
                    ""
                }
            ));
        }
        Command::Unsuppress { user_id, operator } => {
            let operator = operator.unwrap_or_else(cli_operator);
            let lifted = ops::unsuppress(store, clock, sealer, &user_id, &operator).await?;
            out(if lifted {
                "the user's calls are taken again (every relay within its poll)"
            } else {
                "the user was not suppressed"
            });
        }
        Command::Export {
            user_id,
            anonymous_id,
        } => {
            let filter = LogFilter {
                user_id,
                anonymous_id,
                ..LogFilter::default()
            };
            let mut after = None;
            loop {
                let (lines, next) =
                    ops::export_user(store, filter.clone(), after, store::log::MAX_PAGE).await?;
                for line in lines {
                    out(&line);
                }
                match next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
        }
        Command::Reseal => {
            let Some(sealer) = sealer else {
                return Err(ops::core_error(
                    Code::NoSecretKey,
                    format!(
                        "reseal seals under {}: set it (and the previous keys in {})",
                        crate::seal::SECRET_KEY_VAR,
                        crate::seal::PREVIOUS_KEYS_VAR
                    ),
                )
                .into());
            };
            let sources = sources::reseal(store, sealer.keys()).await?;
            let mut pages = 0u64;
            let done = store::sealed::reseal(store, sealer, |r| {
                pages += 1;
                if pages.is_multiple_of(100) {
                    eprintln!("{} rows read, {} sealed again", r.read, r.sealed);
                }
            })
            .await?;
            out(&format!(
                "sealed under key {}: {} row(s) read, {} sealed again ({} changed meanwhile and \
                 were taken by a later pass), {sources} source(s) sealed again",
                sealer.keys().id(),
                done.read,
                done.sealed,
                done.changed
            ));
        }
        Command::Deletions { limit } => {
            for row in store.deletions(limit).await? {
                out_json(&row)?;
            }
        }
        Command::Audience {
            source,
            audience,
            members,
        } => {
            let members = members_of(&members)?;
            let list = sources::in_force(store, cfg).await?;
            let n = ops::sync_audience(store, &list, clock, &source, &audience, members).await?;
            out(&format!(
                "{n} identify call(s) stored for audience {audience:?}"
            ));
        }
        Command::DeadLetters { limit } => {
            for row in store.dead_letters(limit).await? {
                out_json(&row)?;
            }
        }
        Command::Rejected { limit } => {
            for row in store.rejected(limit).await? {
                out_json(&row)?;
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
) -> Result<(), CommandError> {
    let key = cfg.secret_key.as_deref();
    let changes = match change {
        None => {
            let list = sources::in_force(store, cfg).await?;
            let protections = config::checked_set(&list)?;
            let set = Sources::new(list, protections, 0);
            for report in ops::sources_report(&set) {
                out_json(&report)?;
            }
            return Ok(());
        }
        Some(Ok(file)) => {
            let doc = config::SourceDoc::from_json(&text_of(&file)?)?;
            sources::check_one(&doc, cfg.allow_private_networks).await?;
            sources::put(store, key, doc).await?
        }
        Some(Err(name)) => sources::remove(store, key, &name).await?,
    };
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
