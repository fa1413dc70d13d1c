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
//! is the core's, and the relay adds none. What it adds is I/O:
//!
//! * [`api`]: the HTTP listeners (the Tracking API; the admin API,
//!   `/metrics` and the probes), with their protections: read timeouts,
//!   size limits, a connection cap, credentials checked before any parse;
//! * [`store`]: durable storage on SQLite or Postgres;
//! * [`deliver`]: claims, leases, the core's `Delivery` rounds, and the
//!   HTTP client (per-host pools, a cap per endpoint, the private-network
//!   rule at every connection);
//! * [`ops`]: delete notifications, audience syncs, replays, status;
//! * [`notify`]: operational events to the operator's own destination;
//! * [`history`]: the last hour of counts, for the console's charts;
//! * [`trace`]: OpenTelemetry spans for ingest and each attempt (OTLP);
//! * [`config`], [`cli`], [`metrics`], [`clock`], [`tls`].

pub mod api;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod deliver;
pub mod history;
pub mod metrics;
pub mod notify;
pub mod ops;
pub mod sources;
pub mod store;
pub mod tls;
pub mod trace;

pub use app::Relay;
pub use config::Config;
