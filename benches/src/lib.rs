//! Shared fixtures for the benches: the 423-byte track call that every
//! comparison in BENCHMARKS.md uses, and padded variants at larger sizes.
// A fixture that does not parse is a broken bench, which may panic.
#![allow(clippy::panic)]

use callpost_core::{Call, Value};

/// The fixture call as JSON text (`benches/fixtures/track.json`).
pub const TRACK_JSON: &str = include_str!("../fixtures/track.json");

/// The fixture call.
pub fn track() -> Call {
    Call::from_json_str(TRACK_JSON).unwrap_or_else(|e| panic!("fixture: {e}"))
}

/// The fixture with a `notes` property padded so the webhook body is about
/// `bytes` long.
pub fn track_of_size(bytes: usize) -> Call {
    let mut c = track();
    let pad = bytes.saturating_sub(440);
    let mut props = c
        .properties
        .take()
        .map(|p| p.to_map().into_owned())
        .unwrap_or_default();
    props.insert("notes".into(), Value::String("x".repeat(pad)));
    c.properties = Some(props.into());
    c
}
