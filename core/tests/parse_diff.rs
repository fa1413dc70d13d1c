//! Differential tests for the core's own JSON parser and the canonical-text
//! fast path of `Call::from_json_str`:
//!
//! * `Value::from_json_str` against serde_json (driving the same `Value`
//!   through serde), over generated texts with every kind of non-canonical
//!   form, plus corrupted ones;
//! * `Call::from_json_str` (streaming, keeps canonical objects as text)
//!   against `Call::from_owned` over the parsed tree: same bytes out, same
//!   error codes;
//! * every `JSON.stringify` output takes the fast path.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::{stringify, write_body, Call, JsonError, Map, Object, Timestamp, Value};
use proptest::prelude::*;

/// The reference: serde_json's parser building our `Value` through its
/// serde impl, then the depth rule, with serde_json's messages mapped to
/// our codes.
fn oracle(text: &str) -> Result<Value, &'static str> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => v.check_depth().map(|()| v).map_err(|e| e.code().as_str()),
        Err(e) => {
            let msg = e.to_string();
            Err(if msg.starts_with("integer out of range") {
                "integer_out_of_range"
            } else if msg.starts_with("recursion limit exceeded") {
                "too_deep"
            } else if msg.contains("surrogate") || msg.contains("end of hex escape") {
                "invalid_unicode"
            } else {
                "invalid_json"
            })
        }
    }
}

fn ws() -> impl Strategy<Value = &'static str> {
    prop_oneof![8 => Just(""), 1 => Just(" "), 1 => Just("\n\t "), 1 => Just("\r")]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?(0|[1-9][0-9]{0,22})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,3})?",
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| stringify(&Value::Number(f)).unwrap()),
        Just("-0".to_owned()),
        Just("9007199254740993".to_owned()),
        Just("1152921504606847000".to_owned()),
        Just("1e400".to_owned()),
    ]
}

fn string_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9 é😀]{0,6}",
        1 => prop::sample::select(vec![
            "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0001", "\\u001F",
            "\\u001f", "\\u000a", "\\u000b", "\\u0041", "\\u00e9", "\\ud83d\\ude00",
            "\\uD83D\\uDE00", "\\ud800", "\\udc00x", "\\u12", "\u{7f}", "\u{2028}",
        ])
        .prop_map(str::to_owned),
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop::collection::vec(string_piece(), 0..4).prop_map(|p| format!("\"{}\"", p.concat()))
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec!["a", "b", "c", "0", "1", "2", "10", "01", "4294967295"])
            .prop_map(|k| format!("\"{k}\"")),
        1 => string(),
    ]
}

fn text() -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        number(),
        string(),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec((ws(), inner.clone(), ws()), 0..5).prop_map(|items| {
                let items: Vec<String> = items
                    .into_iter()
                    .map(|(a, v, b)| format!("{a}{v}{b}"))
                    .collect();
                format!("[{}]", items.join(","))
            }),
            object_of(inner),
        ]
    })
    .boxed()
}

fn object_of(inner: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop::collection::vec((ws(), key(), ws(), inner), 0..6).prop_map(|entries| {
        let entries: Vec<String> = entries
            .into_iter()
            .map(|(a, k, b, v)| format!("{a}{k}{b}:{v}"))
            .collect();
        format!("{{{}}}", entries.join(","))
    })
}

/// Deletes, inserts or swaps in one byte, to reach the error paths.
fn corrupt(text: String, at: usize, with: u8, how: u8) -> String {
    let mut b = text.into_bytes();
    let at = if b.is_empty() { 0 } else { at % b.len() };
    match how % 3 {
        0 if !b.is_empty() => {
            b.remove(at);
        }
        1 => b.insert(at, with),
        _ if !b.is_empty() => b[at] = with,
        _ => b.push(with),
    }
    String::from_utf8(b).unwrap_or_default()
}

fn maybe_corrupt() -> impl Strategy<Value = String> {
    (
        text(),
        any::<bool>(),
        any::<usize>(),
        prop::sample::select(b"{}[],:\"\\0-1e. ntx".to_vec()),
        any::<u8>(),
    )
        .prop_map(|(t, bad, at, with, how)| if bad { corrupt(t, at, with, how) } else { t })
}

fn outputs(call: &Call) -> (Vec<u8>, Vec<u8>) {
    let mut body = Vec::new();
    let body_ok = write_body(call, Timestamp::from_millis(0).unwrap(), &mut body);
    let mut msg = Vec::new();
    let msg_ok = call.write_message(&mut msg);
    assert_eq!(body_ok.is_ok(), msg_ok.is_ok());
    (body, msg)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn parser_agrees_with_serde_json(t in maybe_corrupt()) {
        let ours = Value::from_json_str(&t).map_err(|e| e.code().as_str());
        prop_assert_eq!(ours, oracle(&t), "{}", t);
    }

    #[test]
    fn streaming_call_parse_equals_the_tree_path(
        props in prop_oneof![object_of(text()), text()],
        traits in object_of(text()),
        // The string fields, with escapes: the streaming parse borrows
        // them where it can.
        user in string(), event in string(), id in string(),
        dup in any::<bool>(),
        bad in any::<bool>(), at in any::<usize>(), how in any::<u8>(),
        with in prop::sample::select(b"{}[],:\" 1".to_vec()),
    ) {
        let mut t = format!(
            r#"{{"type":"track","userId":{user},"event":{event},"messageId":{id},"properties":{props},"x":{traits},"traits":{traits}"#
        );
        if dup {
            t.push_str(r#","properties":{"again":1}"#);
        }
        t.push('}');
        if bad {
            t = corrupt(t, at, with, how);
        }
        let fast = Call::from_json_str(&t);
        let tree = Value::from_json_str(&t).map_err(Into::into).and_then(Call::from_owned);
        match (fast, tree) {
            (Ok(a), Ok(b)) => prop_assert_eq!(outputs(&a), outputs(&b), "{}", t),
            (Err(a), Err(b)) => prop_assert_eq!(a.code(), b.code(), "{}", t),
            (a, b) => prop_assert!(false, "{t}: fast {a:?} tree {b:?}"),
        }
    }

    #[test]
    fn stringify_output_takes_the_fast_path(entries in prop::collection::vec(("[a-z0-9]{0,4}|\\PC{0,4}", any::<String>()), 0..8), n in any::<f64>()) {
        let mut m: Map = entries.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
        if n.is_finite() {
            m.insert("n".into(), Value::Number(n));
        }
        let props = stringify(&Value::Object(m.clone())).unwrap();
        let t = format!(r#"{{"type":"track","userId":"u","event":"e","properties":{props}}}"#);
        let call = Call::from_json_str(&t).unwrap();
        match &call.properties {
            Some(Object::Json(j)) => prop_assert_eq!(j.as_bytes(), props.as_bytes()),
            other => prop_assert!(false, "tree path for {props}: {other:?}"),
        }
    }
}

/// A value with no repeated keys (a map cannot hold them).
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::Number),
        (-1000i64..1000).prop_map(|n| Value::Number(n as f64)),
        "[a-z \"\\\\\u{1}é😀]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec!["a", "b", "é", "0", "7", "01", "k\"q"]),
                    inner
                ),
                0..5
            )
            .prop_map(|entries| Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect()
            )),
        ]
    })
}

/// `value` as Python's `json.dumps` writes it by default: spaces after `,`
/// and `:`, non-ASCII as `\uXXXX`, floats with `.0` or an exponent.
fn dumps(v: &Value) -> String {
    fn string(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
                c => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
        out.push('"');
        out
    }
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{n:.1}"),
        Value::Number(n) => format!("{n:e}"),
        Value::String(s) => string(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(dumps).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", string(k), dumps(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn has_index_key(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            m.keys()
                .any(|k| callpost_core::json::array_index(k).is_some())
                || m.values().any(has_index_key)
        }
        Value::Array(items) => items.iter().any(has_index_key),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Text as other serializers write it (spaces, `\u` escapes, numbers in
    /// other spellings) becomes the body's text without a tree
    /// (`Object::Json`), in `JSON.stringify` form; only an array-index key
    /// (which JavaScript moves to the front) takes the tree.
    #[test]
    fn other_spellings_are_transcoded_without_a_tree(
        entries in prop::collection::vec(("[a-z]{1,4}", value()), 1..5),
    ) {
        let props: Map = entries.into_iter().collect();
        let v = Value::Object(props);
        prop_assume!(v.check_depth().is_ok());
        let text = format!(r#"{{"type": "track", "userId": "u", "event": "e", "properties": {}}}"#, dumps(&v));
        let call = Call::from_json_str(&text).unwrap();
        let canonical = stringify(&v).unwrap();
        match &call.properties {
            Some(Object::Json(j)) => {
                prop_assert!(!has_index_key(&v), "{}", text);
                prop_assert_eq!(j.as_bytes(), canonical.as_bytes(), "{}", text);
            }
            Some(Object::Map(m)) => {
                prop_assert!(has_index_key(&v), "a tree for {}", text);
                prop_assert_eq!(stringify(&Value::Object(m.clone())).unwrap(), canonical);
            }
            None => prop_assert!(false),
        }
    }
}

#[test]
fn errors_keep_their_codes() {
    let code = |t: &str| Value::from_json_str(t).unwrap_err().code();
    assert_eq!(code(""), "invalid_json");
    assert_eq!(code("\u{feff}{}"), "invalid_json");
    assert_eq!(code("[1,]"), "invalid_json");
    assert_eq!(code("{\"a\":1}x"), "invalid_json");
    assert_eq!(code("\"\\ud800\\u0041\""), "invalid_unicode");
    assert_eq!(code("\"\\udc00\""), "invalid_unicode");
    assert_eq!(code("1e400"), "invalid_json");
    assert_eq!(code("-9223372036854775807"), "integer_out_of_range");
    // Beyond 64 bits a literal reads as the nearest double, as JSON.parse.
    assert_eq!(
        Value::from_json_str("100000000000000000000000").unwrap(),
        Value::Number(1e23)
    );
    let e = Value::from_json_str("[1, ?]").unwrap_err();
    assert!(
        matches!(e, JsonError::InvalidJson(ref m) if m.contains("byte 4")),
        "{e}"
    );
}

#[test]
fn call_errors_come_before_parse_of_the_rest_is_finished() {
    // A syntax error anywhere wins over a field error, as in the tree path.
    let e = Call::from_json_str(r#"{"type":7,"userId":"u","x":[1,]}"#).unwrap_err();
    assert_eq!(e.code(), "invalid_json");
    let e = Call::from_json_str(r#"[1]"#).unwrap_err();
    assert_eq!(e.code(), "not_an_object");
    // A repeated key: the last value counts, as in JSON.parse.
    let c = Call::from_json_str(
        r#"{"type":"track","userId":[],"event":"e","userId":"u","properties":{"a":1},"properties":{"b":2}}"#,
    )
    .unwrap();
    assert_eq!(c.user_id(), Some("u"));
    let mut msg = Vec::new();
    c.write_message(&mut msg).unwrap();
    assert!(String::from_utf8(msg)
        .unwrap()
        .ends_with(r#""properties":{"b":2}}"#));
}
