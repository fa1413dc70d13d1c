//! Builds the signed webhook request for every call kind, then verifies each
//! one as a receiver would (raw body, and re-stringified parsed body).
// An example prints what it does, and stops on the first error.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use callpost_core::{
    verify, verify_value, Call, EndpointConfig, Secret, Timestamp, Value, Webhooks,
};

fn main() -> Result<(), callpost_core::Error> {
    let hooks = Webhooks::new(
        &[EndpointConfig {
            url: "https://hooks.example.com/segment".into(),
            headers: vec![("Authorization".into(), "Bearer demo".into())],
            ..EndpointConfig::default()
        }],
        Some(b"demo-shared-secret"),
    )?;
    let receiver_keys = [Secret::new("demo-shared-secret")?];
    let now = Timestamp::parse("2026-11-22T10:04:05.123Z")?;
    let calls = [
        r#"{"type":"page","userId":"u1","properties":{"path":"/","title":"Home","url":"https://shop.example/"}}"#,
        r#"{"type":"screen","userId":"u1","name":"Cart","context":{"app":{"name":"Shop","version":"2.1","build":"7"},"ip":"203.0.113.1"}}"#,
        r#"{"type":"identify","userId":"u1","traits":{"plan":"pro","10":"index keys go first"}}"#,
        r#"{"type":"track","userId":"u1","event":"Order Completed","properties":{"total":25.0,"tiny":1.5e-7},"messageId":"m-1"}"#,
        r#"{"type":"alias","userId":"u1","previousId":"anon-9"}"#,
        r#"{"type":"group","userId":"u1","groupId":"g1","traits":{"name":"Initech"},"timestamp":"2026-11-22T12:00:00+02:00"}"#,
        r#"{"type":"delete","userId":"u1"}"#,
    ];
    for text in calls {
        let call = Call::from_json_str(text)?;
        let req = hooks.request(&call, 0, now)?;
        let sig = req.header("X-Signature").unwrap_or_default();
        let raw_ok = verify(&req.body, sig, &receiver_keys)?;
        let parsed_ok = verify_value(&Value::from_json_slice(&req.body)?, sig, &receiver_keys)?;
        println!("{} {}", req.method, req.url);
        for (name, value) in &req.headers {
            println!("  {name}: {value}");
        }
        println!("  {}", String::from_utf8_lossy(&req.body));
        println!("  verified raw={raw_ok} parsed={parsed_ok}\n");
        assert!(raw_ok && parsed_ok);
    }
    let bad = Call::from_json_str(r#"{"type":"track","userId":"u1"}"#).unwrap_err();
    println!(
        "an invalid call is refused with code {:?}: {bad}",
        bad.code()
    );
    Ok(())
}
