//! The Rust example of docs/reference.md ("The Rust core"), as shown there;
//! python/tests/test_docs.py checks that every statement of it is here.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::{verify, Call, EndpointConfig, Secret, Timestamp, Webhooks};

#[test]
fn readme_example() -> Result<(), callpost_core::Error> {
    let hooks = Webhooks::new(
        &[EndpointConfig::new("https://hooks.example.com/segment")],
        Some(b"shared-secret"),
    )?;
    let call = Call::from_json_str(r#"{"type":"track","userId":"u1","event":"Signed Up"}"#)?;
    let now = Timestamp::from_millis(1_795_341_845_123)?;
    let req = hooks.request(&call, 0, now)?;
    assert_eq!(
        req.body,
        br#"{"version":1,"type":"track","userId":"u1","event":"Signed Up","properties":{},"timestamp":"2026-11-22T10:04:05.123Z"}"#
    );
    let ok = verify(
        &req.body,
        req.header("X-Signature").unwrap(),
        &[Secret::new("shared-secret")?],
    )?;
    assert!(ok);
    Ok(())
}
