//! `/healthz`, `/readyz` and `/metrics`.
//!
//! `/metrics` is behind the admin token, as the rest of the admin API: it
//! names sources and shows traffic. With no `admin_token` configured it is
//! 403 `admin_disabled`, like the admin routes (serving it openly then
//! would make "no token" the way to expose it). A scrape costs no database
//! work: the queue gauges come from counts read on an interval.

use super::{admin, json, Answer, Api};
use crate::state::Relay;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::HeaderMap;
use std::net::SocketAddr;

/// prometheus-client's exposition format.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The process is up.
pub(crate) fn healthz() -> Answer {
    json(200, Bytes::from_static(br#"{"status":"ok"}"#))
}

/// Taking calls, the database answering, the writer not behind.
pub(crate) fn readyz(relay: &Relay) -> Answer {
    if relay.is_healthy() {
        json(200, Bytes::from_static(br#"{"status":"ready"}"#))
    } else {
        json(503, Bytes::from_static(br#"{"status":"not ready"}"#))
    }
}

/// The metrics, for a caller with the admin token.
pub(crate) async fn metrics(api: &Api, headers: &HeaderMap, remote: SocketAddr) -> Answer {
    if let Err(a) = admin::authorize(api, headers, remote).await {
        return a;
    }
    let relay = &api.relay;
    let store = &relay.store;
    let groups = store.group_health();
    let text = relay.metrics.render(&crate::metrics::StoreCounts {
        backlog: store.backlog(),
        statements: store.statements(),
        conflicts: store.conflicts(),
        wal_bytes: store.wal_bytes(),
        healthy: store.healthy(),
        groups: &groups,
    });
    let mut a = json(200, text);
    a.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(METRICS_CONTENT_TYPE));
    a
}
