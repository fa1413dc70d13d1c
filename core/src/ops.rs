//! Operational events: what a service tells its operator (an endpoint's
//! circuit opened or closed, an endpoint disabled, calls dead-lettered, a
//! backlog over its threshold, the database unreachable), as the body of a
//! signed POST through a Webhooks destination of the operator's own, so
//! operators verify them with the same `receive()` as any webhook.
//!
//! The body is `{"version", "id", "type", "timestamp", "data"}` in
//! `JSON.stringify` form, after Svix's and Convoy's operational webhooks
//! (`type` names an object and what happened to it) with a version for the
//! shape. `id` is also the request's `Idempotency-Key`, so a receiver can
//! drop a repeat.

use crate::json::{Map, Value};
use crate::misuse::ApiMisuse;
use crate::protection::{EndpointState, GuardEvent};
use crate::timestamp::Timestamp;
use crate::webhooks::{Request, Webhooks};

/// The version of the body's shape; a change that could break a reader
/// raises it.
pub const OPS_EVENT_VERSION: u32 = 1;

/// One operational event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpsEvent {
    /// An endpoint's circuit opened: nothing is sent to it but a probe now
    /// and then.
    CircuitOpened {
        /// The endpoint URL (shown as [`shown_url`] says).
        url: String,
        /// When the first probe goes.
        until: Timestamp,
    },
    /// An endpoint's circuit closed again: it answered a probe.
    CircuitClosed {
        /// The endpoint URL.
        url: String,
    },
    /// An endpoint was disabled for failing too long; its calls are kept
    /// as undeliverable until it is enabled.
    EndpointDisabled {
        /// The endpoint URL.
        url: String,
        /// Since when it had failed.
        failing_since: Option<Timestamp>,
    },
    /// Calls became dead letters (counted over a period, not one event per
    /// call).
    DeadLettered {
        /// How many, in all.
        count: u64,
        /// How many per source, by source name.
        sources: Vec<(String, u64)>,
        /// How many per source and destination, where the host knows the
        /// destination (`data.destinations`, by source then destination;
        /// left out when empty).
        destinations: Vec<(String, String, u64)>,
        /// The start of the period counted.
        since: Timestamp,
    },
    /// More calls wait for delivery than the threshold.
    BacklogOver {
        /// Calls waiting.
        pending: u64,
        /// The threshold.
        threshold: u64,
        /// When the oldest waiting call was received.
        oldest_pending_at: Option<Timestamp>,
    },
    /// The database has not answered since `since`.
    DatabaseUnreachable {
        /// Since when.
        since: Timestamp,
        /// The last error, without credentials.
        reason: String,
    },
    /// The database answers again, after an outage reported as
    /// [`OpsEvent::DatabaseUnreachable`] (a failover, a restart): the
    /// event's `timestamp` is when it answered.
    DatabaseRecovered {
        /// Since when it had not answered (the unreachable event's `since`).
        since: Timestamp,
    },
}

impl OpsEvent {
    /// The event's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CircuitOpened { .. } => "endpoint.circuit_opened",
            Self::CircuitClosed { .. } => "endpoint.circuit_closed",
            Self::EndpointDisabled { .. } => "endpoint.disabled",
            Self::DeadLettered { .. } => "calls.dead_lettered",
            Self::BacklogOver { .. } => "backlog.over_threshold",
            Self::DatabaseUnreachable { .. } => "database.unreachable",
            Self::DatabaseRecovered { .. } => "database.recovered",
        }
    }

    /// The event an endpoint's state change is reported as, if any: a
    /// circuit opening (not each reopening after a failed probe), closing,
    /// and an endpoint disabled. A pause by `Retry-After` is the receiver's
    /// own doing and is shown in the status only.
    pub fn from_guard(
        url: &str,
        event: &GuardEvent,
        failing_since: Option<Timestamp>,
    ) -> Option<Self> {
        let url = url.to_owned();
        match (event.from, event.to) {
            (
                EndpointState::Healthy | EndpointState::Slowed { .. },
                EndpointState::CircuitOpen { until },
            ) => Some(Self::CircuitOpened { url, until }),
            (
                EndpointState::CircuitOpen { .. } | EndpointState::Probing,
                EndpointState::Healthy,
            ) => Some(Self::CircuitClosed { url }),
            (from, EndpointState::Disabled) if from != EndpointState::Disabled => {
                Some(Self::EndpointDisabled { url, failing_since })
            }
            _ => None,
        }
    }

    /// The body: `{"version", "id", "type", "timestamp", "data"}`, `id` the
    /// UUID v4 made of `random`, `timestamp` `now`.
    pub fn body(&self, random: [u8; 16], now: Timestamp) -> String {
        let mut data = Map::new();
        let mut put = |k: &str, v: Value| {
            data.insert(k.to_owned(), v);
        };
        let time = |t: Timestamp| Value::String(iso(t));
        let opt_time = |t: Option<Timestamp>| t.map_or(Value::Null, time);
        // Counts stay far below 2^53: exact as JSON numbers.
        let count = |n: u64| Value::Number(n as f64);
        match self {
            Self::CircuitOpened { url, until } => {
                put("url", shown_url(url).into());
                put("until", time(*until));
            }
            Self::CircuitClosed { url } => put("url", shown_url(url).into()),
            Self::EndpointDisabled { url, failing_since } => {
                put("url", shown_url(url).into());
                put("failing_since", opt_time(*failing_since));
            }
            Self::DeadLettered {
                count: n,
                sources,
                destinations,
                since,
            } => {
                put("count", count(*n));
                let by_source = sources
                    .iter()
                    .map(|(name, n)| (name.clone(), count(*n)))
                    .collect();
                put("sources", Value::Object(by_source));
                if !destinations.is_empty() {
                    let mut by_destination = Map::new();
                    for (source, destination, n) in destinations {
                        if let Value::Object(m) = by_destination
                            .entry(source.clone())
                            .or_insert_with(|| Value::Object(Map::new()))
                        {
                            m.insert(destination.clone(), count(*n));
                        }
                    }
                    put("destinations", Value::Object(by_destination));
                }
                put("since", time(*since));
            }
            Self::BacklogOver {
                pending,
                threshold,
                oldest_pending_at,
            } => {
                put("pending", count(*pending));
                put("threshold", count(*threshold));
                put("oldest_pending_at", opt_time(*oldest_pending_at));
            }
            Self::DatabaseUnreachable { since, reason } => {
                put("since", time(*since));
                put("reason", reason.as_str().into());
            }
            Self::DatabaseRecovered { since } => put("since", time(*since)),
        }
        let mut body = Map::new();
        body.insert("version".into(), count(OPS_EVENT_VERSION.into()));
        body.insert("id".into(), event_id(random).into());
        body.insert("type".into(), self.kind().into());
        body.insert("timestamp".into(), time(now));
        body.insert("data".into(), Value::Object(data));
        // Strings, small numbers and two levels: writing cannot fail.
        Value::Object(body).to_json_string().unwrap_or_default()
    }
}

impl Webhooks {
    /// The signed request carrying `event` to endpoint `endpoint` of the
    /// operator's destination: the body of [`OpsEvent::body`], signed as
    /// any webhook, its id as the `Idempotency-Key`.
    pub fn event_request(
        &self,
        event: &OpsEvent,
        random: [u8; 16],
        now: Timestamp,
        endpoint: usize,
    ) -> Result<Request, ApiMisuse> {
        let id = event_id(random);
        let body = event.body(random, now).into_bytes();
        self.request_for_body(Some(&id), body, endpoint, None, now, None)
    }
}

/// An endpoint URL as events show it: without user information or query,
/// which may carry credentials (`https://***@host/path`, `?token=…` cut).
/// Settings refuse fragments, so there are none to cut.
pub fn shown_url(url: &str) -> String {
    crate::weburl::shown(url)
}

fn event_id(random: [u8; 16]) -> String {
    uuid::Builder::from_random_bytes(random)
        .into_uuid()
        .hyphenated()
        .to_string()
}

fn iso(t: Timestamp) -> String {
    let mut out = Vec::with_capacity(24);
    t.write_iso(&mut out);
    String::from_utf8(out).unwrap_or_default()
}
