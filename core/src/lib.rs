//! The sans-IO core of callpost.
//!
//! This crate performs no I/O of any kind: no network, no clock, no
//! randomness, no threads, no environment variables. The caller passes the
//! current time (milliseconds since the Unix epoch) and any random bytes in,
//! and carries requests out and sends them itself. That is what lets one
//! core serve Python (pyo3) and JavaScript (wasm) with identical behaviour,
//! and lets tests drive hours of retries on a fake clock.
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
//! * [`routing`], [`audience`], [`delete_notifications`]: which calls reach the
//!   destination, audience membership as identify calls, and delete
//!   notifications.
//! * [`Batcher`]: the client library's queue, batches and upload retries.
//! * [`Delivery`]: one call through the Webhooks destination, with failover
//!   and 4 hours of retries.
//!
//! The state machines follow one shape (after quinn-proto): inputs are
//! `handle_*(now, …)`, commands are verbs (`flush`, `shutdown`), outputs are
//! `poll_*()` returning `Option`, called until `None`, and `poll_timeout()`
//! says when to wake. What an HTTP outcome means is decided once, in
//! [`retry`], for both.
//!
//! Every error type has a stable snake_case `code()`, which the Python and
//! JavaScript packages expose unchanged.

pub mod audience;
pub mod batcher;
pub mod call;
pub mod delivery;
mod error;
pub mod json;
pub mod retry;
pub mod routing;
pub mod signature;
pub mod timestamp;
pub mod webhooks;
mod weburl;

pub use audience::{AudienceError, AudienceSync};
pub use batcher::{
    BatchRequest, Batcher, BatcherConfig, BatcherEvent, ConfigError, EnqueueError, FailReason,
    Message,
};
pub use call::{Call, CallBuilder, CallError, CallKind, FieldKind, Object, Scalar};
pub use delivery::{
    Attempt, AttemptRecord, Delivery, DeliveryConfig, DeliveryOutcome, GiveUpReason, StateError,
};
pub use error::Error;
pub use json::{stringify, JsonError, JsonObject, Map, ObjectMark, Value, Writer};
pub use retry::{Outcome, Verdict};
pub use signature::{
    sign, verify, verify_digests, verify_value, KeyCache, Secret, SignatureError, SIGNATURE_HEX_LEN,
};
pub use timestamp::{Timestamp, TimestampError};
pub use webhooks::{
    delete_notifications, write_body, DeleteSource, EndpointConfig, HeaderText, HostHmac, Request,
    SettingsError, Webhooks,
};
