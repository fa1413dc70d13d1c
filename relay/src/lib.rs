//! The callpost relay: the service between Segment's SDKs and the Webhooks
//! destination.
//!
//! Any unmodified Segment SDK sends to it (`/v1/batch`, `/v1/track`, …,
//! analytics.js's `/v1/t` …). It stores every call durably before it
//! answers, then delivers each through its source's Webhooks destination,
//! keeping the destination's 4-hour retry promise across restarts.
//!
//! The relay is a host of `callpost-core`, like the Python and npm
//! packages: every Tracking API, enrichment, retry, round and address rule
//! is the core's, and the relay adds none. What it adds is I/O.
//!
//! The modules form layers, each using only those before it (a test,
//! `tests/it/layers.rs`, refuses any import the other way):
//!
//! 1. leaves: [`clock`], [`seal`] (the sealing key), [`config`] (every
//!    setting checked at start), [`tls`];
//! 2. [`store`]: durable storage on SQLite or Postgres;
//! 3. [`metrics`], [`notify`] (operational events to the operator's own
//!    destination), [`trace`] (OpenTelemetry spans);
//! 4. [`guards`]: receiver protection per endpoint URL;
//! 5. [`state`]: what the listeners, the workers and the operations share;
//! 6. [`deliver`]: claims, leases, the core's `Delivery` rounds, and the
//!    HTTP client (per-host pools, a cap per endpoint, the private-network
//!    rule at every connection);
//! 7. [`ops`]: delete notifications, audience syncs, replays, status, the
//!    sources kept in the database, reloads;
//! 8. [`housekeeping`]: retention, the store's counts, heartbeats, the
//!    console's last hour;
//! 9. [`api`]: the HTTP listeners (the Tracking API; the admin API, the
//!    console, `/metrics` and the probes), with their protections;
//! 10. [`app`]: the composition root, which builds and runs all of them;
//! 11. [`cli`]: the command line.

pub mod api;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod deliver;
pub mod guards;
pub mod housekeeping;
pub mod metrics;
pub mod notify;
pub mod ops;
pub mod seal;
pub mod state;
pub mod store;
pub mod tls;
pub mod trace;

pub use app::App;
pub use config::Config;
pub use state::Relay;
