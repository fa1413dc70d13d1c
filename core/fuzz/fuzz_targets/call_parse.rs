//! Call parsing and validation: any bytes either parse into a valid call, or
//! fail with a typed error; a valid call always yields a webhook body and a
//! Segment message that are JSON and fixed points of re-stringification.
//! The streaming parse (which keeps canonical objects as text) gives the
//! same bytes and the same error codes as the tree path.
#![no_main]

use callpost_core::{Call, Timestamp, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let tree = Value::from_json_str(text)
        .map_err(callpost_core::CallError::from)
        .and_then(Call::from_owned);
    let fast = Call::from_json_str(text);
    match (&fast, &tree) {
        (Ok(a), Ok(b)) => assert_eq!(outputs(a), outputs(b)),
        (Err(a), Err(b)) => assert_eq!(a.code(), b.code()),
        _ => panic!("streaming {fast:?} vs tree {tree:?}"),
    }
    match fast {
        Err(e) => assert!(!e.code().as_str().is_empty()),
        Ok(call) => {
            call.validate().expect("a parsed call is valid");
            let mut body = Vec::new();
            if callpost_core::write_body(&call, Timestamp::from_millis(0).unwrap(), &mut body).is_ok() {
                let again = Value::from_json_slice(&body).expect("body parses").to_json_string().unwrap();
                assert_eq!(again.as_bytes(), &body[..]);
            }
            let mut msg = Vec::new();
            if call.write_message(&mut msg).is_ok() {
                serde_json::from_slice::<serde_json::Value>(&msg).expect("message is JSON");
            }
        }
    }
});

fn outputs(call: &Call) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let mut body = Vec::new();
    let body = callpost_core::write_body(call, Timestamp::from_millis(0).unwrap(), &mut body)
        .ok()
        .map(|_| body);
    let mut msg = Vec::new();
    let msg = call.write_message(&mut msg).ok().map(|_| msg);
    (body, msg)
}
