//! Property tests over the core's invariants.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::{
    sign, verify, Call, CallKind, EndpointConfig, JsonError, JsonObject, Map, Object, Secret,
    Timestamp, Value, Webhooks, Writer,
};
use proptest::prelude::*;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::Number),
        (-1_000_000i64..1_000_000).prop_map(|n| Value::Number(n as f64)),
        any::<String>().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop_oneof!["[0-9]{1,3}", any::<String>()], inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map>())),
        ]
    })
}

fn object() -> impl Strategy<Value = Option<Map>> {
    prop::option::of(
        prop::collection::vec((any::<String>(), json_value()), 0..5)
            .prop_map(|kv| kv.into_iter().collect()),
    )
}

prop_compose! {
    fn call()(kind in prop::sample::select(CallKind::ALL.to_vec()),
              user in "[a-z0-9]{1,8}", other in any::<String>(),
              properties in object(), traits in object(), context in object(),
              ts in prop::option::of(-62_167_219_200_000i64..253_402_300_799_999)) -> Call {
        let mut c = Call::new(kind);
        c.user_id = Some(user);
        c.event = Some(format!("e{other}"));
        c.name = Some(other.clone());
        c.group_id = Some(format!("g{other}"));
        c.previous_id = Some(format!("p{other}"));
        c.message_id = Some(other);
        c.properties = properties.map(Into::into);
        c.traits = traits.map(Into::into);
        c.context = context.map(Into::into);
        c.timestamp = ts.map(|t| Timestamp::from_millis(t).unwrap());
        c
    }
}

/// Writes `v` the way a binding drives the streaming writer from its own
/// values: one call per node, no tree handed over.
fn drive(w: &mut Writer<'_>, v: &Value) -> Result<(), JsonError> {
    match v {
        Value::Null => w.null(),
        Value::Bool(b) => w.bool(*b),
        // Small integral doubles take the integer path, as Python ints do.
        Value::Number(n) if n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_992.0 => {
            w.integer(*n as i128)?;
        }
        Value::Number(n) => w.number(*n)?,
        Value::String(s) => w.string(s),
        Value::Array(items) => w.array(items, |w, _, item| drive(w, item))?,
        Value::Object(m) => w.object(m.iter().map(|(k, v)| (k.as_str(), v)), |w, _, v| {
            drive(w, v)
        })?,
    }
    Ok(())
}

/// As [`drive`], but objects go the way the Python binding walks a dict:
/// in its own order through `begin_object`/`key`, falling back to
/// `object` at the first array-index key.
fn drive_in_order(w: &mut Writer<'_>, v: &Value) -> Result<(), JsonError> {
    let Value::Object(m) = v else {
        return match v {
            Value::Array(items) => w.array(items, |w, _, item| drive_in_order(w, item)),
            _ => drive(w, v),
        };
    };
    let mut mark = w.begin_object()?;
    for (k, v) in m {
        if !w.key(&mut mark, k) {
            w.abandon_object(mark);
            return w.object(m.iter().map(|(k, v)| (k.as_str(), v)), |w, _, v| {
                drive_in_order(w, v)
            });
        }
        drive_in_order(w, v)?;
    }
    w.end_object(mark);
    Ok(())
}

/// `write` gives `stringify`'s text for `v`, or the same error code.
fn writes_as_stringify(
    v: &Value,
    write: fn(&mut Writer<'_>, &Value) -> Result<(), JsonError>,
) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    let streamed = write(&mut Writer::new(&mut out), v);
    match v.to_json_string() {
        Ok(text) => {
            prop_assert!(streamed.is_ok());
            prop_assert_eq!(String::from_utf8(out).unwrap(), text);
        }
        Err(e) => prop_assert_eq!(streamed.unwrap_err().code(), e.code()),
    }
    Ok(())
}

fn hooks() -> Webhooks {
    Webhooks::new(
        &[EndpointConfig::new("https://example.com/hook")],
        Some(b"secret"),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_body_parses_and_is_stable(call in call()) {
        let req = hooks().request(&call, 0, Timestamp::from_millis(0).unwrap()).unwrap();
        // Parses as JSON for an independent parser...
        let _: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        // ...and is a fixed point of parse + stringify, which receivers rely on.
        let again = Value::from_json_slice(&req.body).unwrap().to_json_string().unwrap();
        prop_assert_eq!(again.as_bytes(), &req.body[..]);
        let sig = req.header("X-Signature").unwrap();
        prop_assert_eq!(verify(&req.body, sig, &[Secret::new("secret").unwrap()]), Ok(true));
    }

    #[test]
    fn stringify_round_trips_through_serde_json(v in json_value()) {
        let text = v.to_json_string().unwrap();
        let theirs: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ours = Value::from_json_str(&text).unwrap();
        prop_assert_eq!(ours.to_json_string().unwrap(), text);
        // Same number of top-level entries as an independent parser sees.
        match (&ours, &theirs) {
            (Value::Array(a), serde_json::Value::Array(b)) => prop_assert_eq!(a.len(), b.len()),
            (Value::Object(a), serde_json::Value::Object(b)) => prop_assert_eq!(a.len(), b.len()),
            _ => {}
        }
    }

    #[test]
    fn streaming_writer_equals_stringify(v in json_value()) {
        writes_as_stringify(&v, drive)?;
    }

    #[test]
    fn in_order_objects_equal_stringify(v in json_value(), tail in any::<bool>()) {
        // Inside an array with a value after it, so an abandoned object
        // must leave what came before it intact.
        let v = if tail { Value::Array(vec![Value::Null, v, Value::Bool(true)]) } else { v };
        writes_as_stringify(&v, drive_in_order)?;
    }

    #[test]
    fn strings_escape_as_serde_json_does(s in "[ -~\\x00-\\x1f\"\\\\\u{80}-\u{10ffff}]{0,80}") {
        // For Rust strings (no lone surrogates) JSON.stringify and
        // serde_json escape exactly the same bytes; this pins the chunked
        // fast path against an independent writer, at every offset.
        let mut out = Vec::new();
        callpost_core::json::write_string(&s, &mut out);
        prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&s).unwrap());
    }

    #[test]
    fn long_plain_strings_escape_as_serde_json_does(
        runs in prop::collection::vec(("[a-z é]{0,150}", "[\x00-\x1f\"\\\\]{0,2}"), 0..6),
    ) {
        // Mostly plain text with a rare escape, so the 64- and 8-byte block
        // scans run and must stop exactly at each escape.
        let s: String = runs.into_iter().flat_map(|(a, b)| [a, b]).collect();
        let mut out = Vec::new();
        callpost_core::json::write_string(&s, &mut out);
        prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&s).unwrap());
    }

    #[test]
    fn long_strings_parse_back(
        runs in prop::collection::vec(("[a-z é]{0,150}", "[\x00-\x1f\"\\\\]{0,2}"), 0..6),
    ) {
        // The parser's string scans (the tree parser's and the scanner that
        // keeps canonical `properties` text) share the writer's block scan:
        // each must stop exactly at each escape.
        let s: String = runs.into_iter().flat_map(|(a, b)| [a, b]).collect();
        let quoted = serde_json::to_string(&s).unwrap();
        prop_assert_eq!(Value::from_json_str(&quoted).unwrap(), Value::String(s.clone()));
        let call = format!(r#"{{"type":"track","userId":"u","event":"e","properties":{{"s":{quoted}}}}}"#);
        let call = Call::from_json_str(&call).unwrap();
        let props = call.properties.as_ref().unwrap().to_map();
        prop_assert_eq!(props.get("s"), Some(&Value::String(s)));
    }

    #[test]
    fn text_objects_give_the_same_body_as_maps(call in call()) {
        let now = Timestamp::from_millis(1_700_000_000_000).unwrap();
        let as_text = |o: &Option<Object>| o.as_ref().map(|o| {
            let m = o.to_map();
            Object::Json(JsonObject::from_entries(m.iter().map(|(k, v)| (k.as_str(), v)), |w, _, v| drive(w, v)).unwrap())
        });
        let mut text = call.clone();
        text.properties = as_text(&call.properties);
        text.traits = as_text(&call.traits);
        let (a, b) = (hooks().request(&call, 0, now), hooks().request(&text, 0, now));
        match (a, b) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a.body, b.body),
            (a, b) => prop_assert_eq!(a.is_err(), b.is_err()),
        }
        let (mut m1, mut m2) = (Vec::new(), Vec::new());
        prop_assert_eq!(call.write_message(&mut m1).is_ok(), text.write_message(&mut m2).is_ok());
        prop_assert_eq!(m1, m2);
    }

    #[test]
    fn sign_then_verify(secret in prop::collection::vec(any::<u8>(), 1..200), body in prop::collection::vec(any::<u8>(), 0..512)) {
        let sig = sign(&secret, &body).unwrap();
        prop_assert_eq!(sig.len(), 40);
        prop_assert!(sig.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        prop_assert_eq!(verify(&body, &sig, &[Secret::new(&secret).unwrap()]), Ok(true));
    }

    #[test]
    fn any_one_byte_change_fails(secret in "[ -~]{1,40}", body in prop::collection::vec(any::<u8>(), 1..256),
                                 at in any::<prop::sample::Index>(), flip in 1u8..=255, in_sig in any::<bool>()) {
        let key = [Secret::new(&secret).unwrap()];
        let sig = sign(&secret, &body).unwrap();
        if in_sig {
            let mut s = sig.into_bytes();
            let i = at.index(s.len());
            // Swap for another hex digit of a different value (either case).
            let digits = b"0123456789abcdef";
            let pos = digits.iter().position(|d| *d == s[i]).unwrap();
            s[i] = digits[(pos + 1 + (flip as usize % 15)) % 16];
            prop_assert_eq!(verify(&body, std::str::from_utf8(&s).unwrap(), &key), Ok(false));
        } else {
            let mut b = body.clone();
            let i = at.index(b.len());
            b[i] ^= flip;
            prop_assert_eq!(verify(&b, &sig, &key), Ok(false));
        }
    }

    #[test]
    fn header_values_with_cr_or_lf_are_rejected(pre in any::<String>(), post in any::<String>(), bad in prop::sample::select(vec!["\r", "\n", "\r\n"])) {
        let cfg = EndpointConfig { url: "https://example.com/".into(), headers: vec![("X-H".into(), format!("{pre}{bad}{post}"))], ..EndpointConfig::default() };
        prop_assert_eq!(Webhooks::new(&[cfg], None).unwrap_err().code(), "invalid_header_value");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    /// Our number layout (zmij digits, ECMAScript layout) equals ryu-js,
    /// an independent ECMAScript `Number::toString`, over all doubles and
    /// around every layout threshold.
    #[test]
    fn numbers_match_ryu_js(
        bits in any::<u64>(),
        near in (-1e-5f64..1e-5, -25i32..25, any::<bool>()),
    ) {
        let (m, e, neg) = near;
        for n in [f64::from_bits(bits), (1.0 + m) * 10f64.powi(e) * if neg { -1.0 } else { 1.0 }] {
            if !n.is_finite() {
                continue;
            }
            let mut ours = Vec::new();
            callpost_core::json::write_number(n, &mut ours).unwrap();
            let mut buf = ryu_js::Buffer::new();
            let want = if n == 0.0 { "0" } else { buf.format_finite(n) };
            prop_assert_eq!(String::from_utf8(ours).unwrap(), want, "{:e}", n);
        }
    }
}

/// Objects whose keys a mapping's paths can name.
fn named_object() -> impl Strategy<Value = Option<Map>> {
    prop::option::of(
        prop::collection::vec(
            (
                prop::sample::select(vec!["a", "b", "0", "1", "é"]),
                json_value(),
            ),
            0..5,
        )
        .prop_map(|kv| kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
    )
}

fn mapping_path() -> impl Strategy<Value = String> {
    let root = prop::sample::select(vec!["properties", "traits", "context", "$.properties"]);
    let step = prop::sample::select(vec![".a", ".b", ".0", "[0]", "[1]", ".é", ".1"]);
    prop_oneof![
        prop::sample::select(vec![
            "$",
            "event",
            "userId",
            "timestamp",
            "messageId",
            "type",
            "integrations",
            "nope"
        ])
        .prop_map(str::to_owned),
        (root, prop::collection::vec(step, 0..3)).prop_map(|(r, s)| format!("{r}{}", s.concat())),
    ]
}

fn mapping_node() -> impl Strategy<Value = Value> {
    let path = |p: String| Value::Object(Map::from_iter([("@path".to_owned(), Value::String(p))]));
    let leaf = prop_oneof![
        leaf(),
        mapping_path().prop_map(path),
        (mapping_path(), "[ -~]{0,6}").prop_map(|(p, t)| {
            Value::Object(Map::from_iter([(
                "@template".to_owned(),
                Value::String(format!("{t}{{{{{p}}}}}{t}")),
            )]))
        }),
    ];
    leaf.prop_recursive(4, 40, 4, move |inner| {
        let directive = |k: &str, v: Value| Value::Object(Map::from_iter([(k.to_owned(), v)]));
        prop_oneof![
            prop::collection::vec(
                (
                    prop::sample::select(vec!["x", "y", "3", "z"]),
                    inner.clone()
                ),
                0..4
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            (any::<bool>(), inner.clone(), inner.clone(), inner.clone()).prop_map(
                move |(blank, t, a, b)| {
                    let test = if blank { "blank" } else { "exists" };
                    directive(
                        "@if",
                        Value::Object(Map::from_iter([
                            (test.to_owned(), t),
                            ("then".to_owned(), a),
                            ("else".to_owned(), b),
                        ])),
                    )
                }
            ),
            prop::collection::vec(inner.clone(), 1..3)
                .prop_map(move |c| directive("@default", Value::Array(c))),
            (
                mapping_path(),
                prop::collection::vec((prop::sample::select(vec!["x", "2"]), inner), 1..3)
            )
                .prop_map(move |(p, shape)| {
                    let shape =
                        Value::Object(shape.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
                    directive(
                        "@arrayPath",
                        Value::Array(vec![Value::String(p.replace("$.", "")), shape]),
                    )
                }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A mapping copies a call's objects as their text or as maps alike,
    /// and what it builds is in `JSON.stringify` form.
    #[test]
    fn a_mapping_reads_text_and_maps_alike(
        call in call(),
        properties in named_object(),
        traits in named_object(),
        fields in prop::collection::vec((prop::sample::select(vec!["p", "q", "0", "10"]), mapping_node()), 0..5),
    ) {
        use callpost_core::mapping::Mapping;
        let mapping = Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
        let Ok(mapping) = Mapping::from_value(&mapping) else { return Ok(()) };
        let now = Timestamp::from_millis(1_700_000_000_000).unwrap();
        let mut as_map = call;
        as_map.properties = properties.map(Object::Map);
        as_map.traits = traits.map(Object::Map);
        let as_text_of = |o: &Option<Object>| o.as_ref().map(|o| Object::Json(JsonObject::from_map(&o.to_map()).unwrap()));
        let mut as_text = as_map.clone();
        as_text.properties = as_text_of(&as_map.properties);
        as_text.traits = as_text_of(&as_map.traits);
        as_text.context = as_text_of(&as_map.context);
        let (a, b) = (mapping.body(&as_map, now), mapping.body(&as_text, now));
        match (a, b) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(&a, &b);
                let text = std::str::from_utf8(&a).unwrap();
                let again = Value::from_json_str(text).unwrap().to_json_string().unwrap();
                prop_assert_eq!(text, again.as_str());
            }
            (a, b) => prop_assert_eq!(a.is_err(), b.is_err()),
        }
    }
}
