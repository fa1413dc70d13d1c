//! The sans-IO core of callpost.
//!
//! This crate performs no I/O of any kind: no network, no clock, no
//! randomness, no threads, no environment variables. The caller passes the
//! current time (a [`Timestamp`]) and any random bytes in, and carries
//! requests out and sends them itself. That is what lets one core serve
//! Python (pyo3) and JavaScript (wasm) with identical behaviour, and lets
//! tests drive hours of retries on a fake clock.
//!
//! The central pieces:
//!
//! * [`Call`]: a Segment-spec identify, track, page, screen, group, alias or
//!   delete call, parsed from JSON with Segment's keys and validated.
//! * [`json`]: a JSON model and writer whose output equals JavaScript's
//!   `JSON.stringify`, byte for byte, so receivers that re-stringify the body
//!   to check the signature always agree with us.
//! * [`Webhooks`]: the destination's settings; builds the exact body and the
//!   signed [`Request`] for a call and endpoint. A host whose platform HMAC
//!   is faster may compute the signature itself ([`HostHmac`]); where it
//!   goes stays the core's decision.
//! * [`signature`]: HMAC-SHA1 `X-Signature` signing, and constant-time
//!   verification with secret rotation.
//! * [`receive`]: a receiver's whole check (which header, which bytes),
//!   returning the verified call or a typed error, never a bool.
//! * [`routing`], [`audience`], [`delete_notifications`]: which calls reach the
//!   destination, audience membership as identify calls, and delete
//!   notifications.
//! * [`Batcher`]: the client library's queue, batches and upload retries.
//! * [`Delivery`]: one call through the Webhooks destination, in rounds
//!   across its endpoints, with 4 hours of retries.
//! * [`mapping`]: a destination's request body built from each call by
//!   Segment-style mapping directives.
//! * [`protection`], [`ops`], [`notify`]: a service's receiver protection
//!   per endpoint URL, its operational events, and which of them it sends
//!   its operator, when.
//!
//! The state machines follow one shape (after quinn-proto): inputs are
//! `handle_*(now, …)`, commands are verbs (`flush`, `shutdown`), outputs are
//! `poll_*()` returning `Option`, called until `None`, and `poll_timeout()`
//! says when to wake. What an HTTP outcome means is decided once, in
//! [`retry`], for both.
//!
//! Every failure has a stable [`Code`] from one registry ([`code`]), which
//! the Python and JavaScript packages expose unchanged as `.code`, raised
//! as the class the registry names. Each concern returns its own error
//! enum; [`Error`] wraps them all for the bindings.

pub mod audience;
pub mod batcher;
pub mod call;
pub mod code;
pub mod delivery;
pub mod error;
pub mod filter;
pub mod ingest;
pub mod json;
pub mod mapping;
pub mod misuse;
pub mod notify;
pub mod oauth;
pub mod ops;
pub mod protection;
pub mod receive;
pub mod retry;
pub mod routing;
pub mod segment;
pub mod shard;
pub mod signature;
pub mod sources;
pub mod standard;
pub mod timestamp;
pub mod webhooks;
mod weburl;

pub use audience::{AudienceError, AudienceSync};
pub use batcher::{
    BatchRequest, Batcher, BatcherConfig, BatcherEvent, ConfigError, EnqueueError, FailReason,
    Message,
};
pub use call::{
    id_string, Call, CallBuilder, CallError, CallKind, FieldKind, Object, Scalar, CALL_FIELDS,
    ID_FIELDS,
};
pub use code::{Code, ErrorClass};
pub use delivery::{
    Attempt, AttemptRecord, Delivery, DeliveryConfig, DeliveryOutcome, GiveUpReason, StateError,
};
pub use error::Error;
pub use json::{stringify, JsonError, JsonObject, KeyCase, Map, ObjectMark, Value, Writer};
pub use misuse::ApiMisuse;
pub use notify::{EventAttempt, Notifier, NotifierConfig};
pub use ops::{OpsEvent, OPS_EVENT_VERSION};
pub use protection::{
    EndpointGuard, EndpointState, GuardEvent, GuardState, Permit, ProtectionConfig, ProtectionError,
};
pub use receive::{
    receive, receive_any, verify_value, Coverage, Keys, ReceiveError, ReceiveOptions, Received,
    SEGMENT_SIGNATURE_HEADER,
};
pub use retry::{Outcome, Verdict};
pub use signature::{
    sign, signature_header, verify, verify_digests, KeyCache, Secret, SignatureError,
    SIGNATURE_HEADER, SIGNATURE_HEX_LEN,
};
pub use timestamp::{Timestamp, TimestampError};
pub use webhooks::{
    delete_notifications, write_body, DeleteSource, EndpointConfig, HeaderText, HostHmac, Mode,
    Request, RequestError, SettingsError, Webhooks,
};

/// callpost's version: the workspace's, the one source the Python and npm
/// packages take theirs from.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every numeric limit and default a binding exposes, by name, so the
/// bindings export this one table (Python `callpost.DEFAULTS`, JavaScript
/// `DEFAULTS`) and their tests check their signatures and type stubs
/// against it instead of restating numbers. Durations are in milliseconds.
pub const DEFAULTS: &[(&str, u64)] = &[
    // The batching client (client-library.md).
    ("flush_at", batcher::DEFAULT_FLUSH_AT as u64),
    ("flush_after_ms", batcher::DEFAULT_FLUSH_AFTER_MS),
    ("max_queue", batcher::DEFAULT_MAX_QUEUE as u64),
    ("max_attempts", batcher::DEFAULT_MAX_ATTEMPTS as u64),
    ("max_retry_ms", batcher::DEFAULT_MAX_RETRY_MS),
    ("request_timeout_ms", batcher::DEFAULT_REQUEST_TIMEOUT_MS),
    ("max_in_flight", batcher::DEFAULT_MAX_IN_FLIGHT as u64),
    (
        "batch_backoff_base_ms",
        batcher::DEFAULT_BATCH_BACKOFF.base_ms,
    ),
    (
        "batch_backoff_cap_ms",
        batcher::DEFAULT_BATCH_BACKOFF.cap_ms,
    ),
    ("shutdown_timeout_ms", batcher::DEFAULT_SHUTDOWN_TIMEOUT_MS),
    ("max_message_bytes", batcher::MAX_MESSAGE_BYTES as u64),
    ("max_batch_bytes", batcher::MAX_BATCH_BYTES as u64),
    // The Webhooks destination (webhooks-destination.md).
    ("max_endpoints", webhooks::MAX_ENDPOINTS as u64),
    ("webhook_timeout_ms", delivery::WEBHOOK_TIMEOUT_MS),
    ("retry_window_ms", delivery::RETRY_WINDOW_MS),
    (
        "delivery_backoff_base_ms",
        delivery::DELIVERY_BACKOFF.base_ms,
    ),
    ("delivery_backoff_cap_ms", delivery::DELIVERY_BACKOFF.cap_ms),
    ("host_hmac_min_bytes", webhooks::HOST_HMAC_MIN_BYTES as u64),
    (
        "host_hmac_request_min_bytes",
        webhooks::HOST_HMAC_REQUEST_MIN_BYTES as u64,
    ),
    // Receivers.
    ("seen_capacity", receive::DEFAULT_SEEN_CAPACITY as u64),
    // JSON values.
    ("max_depth", json::MAX_DEPTH as u64),
];

/// The value of `name` in [`DEFAULTS`].
pub fn default_value(name: &str) -> Option<u64> {
    DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}
