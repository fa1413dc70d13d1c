//! Canonical JSON against serde_json: our output parses with serde_json to
//! the same value, and writing it again gives the same bytes.
#![no_main]

use callpost_core::Value;
use libfuzzer_sys::fuzz_target;

fn same(ours: &Value, theirs: &serde_json::Value) -> bool {
    match (ours, theirs) {
        (Value::Null, serde_json::Value::Null) => true,
        (Value::Bool(a), serde_json::Value::Bool(b)) => a == b,
        (Value::Number(a), serde_json::Value::Number(b)) => b.as_f64() == Some(*a) || (*a == 0.0 && b.as_f64() == Some(0.0)),
        (Value::String(a), serde_json::Value::String(b)) => a == b,
        (Value::Array(a), serde_json::Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y)),
        (Value::Object(a), serde_json::Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = Value::from_json_slice(data) else { return };
    let Ok(text) = value.to_json_string() else { return };
    let theirs: serde_json::Value = serde_json::from_str(&text).expect("our output is JSON");
    assert!(same(&value, &theirs), "{text}");
    let again = Value::from_json_str(&text).expect("our output re-parses").to_json_string().unwrap();
    assert_eq!(again, text, "stable");
});
