//! Destination filters under arbitrary input (proptest): any JSON given as
//! settings is read or refused without a panic, and for generated rules
//! and calls, a kept call's body is the unfiltered body's bytes with at
//! most the listed fields taken out, and nothing else changed.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use callpost_core::call::Object;
use callpost_core::filter::{Decision, Filters};
use callpost_core::webhooks::write_body;
use callpost_core::{Call, Timestamp, Value};
use proptest::prelude::*;

/// Keys that take every path of the object writer: plain, Unicode, and an
/// array-index key (which `JSON.stringify` puts first).
const KEYS: [&str; 5] = ["a", "b", "ünï", "10", "total"];

fn scalar() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        (-1000i64..1000).prop_map(|n| serde_json::json!(n)),
        (-1000i32..1000).prop_map(|n| serde_json::json!(f64::from(n) / 8.0)),
        "[a-zé ]{0,6}".prop_map(serde_json::Value::String),
    ]
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(serde_json::Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..4).prop_map(
                |kv| serde_json::Value::Object(
                    kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                )
            ),
        ]
    })
}

fn object() -> impl Strategy<Value = Option<serde_json::Value>> {
    prop::option::of(
        prop::collection::vec((prop::sample::select(KEYS.to_vec()), json()), 0..5).prop_map(|kv| {
            serde_json::Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
        }),
    )
}

prop_compose! {
    /// A call as JSON text, so that its objects stay in text form until a
    /// rule names them (the relay's path).
    fn call_text()(kind in prop::sample::select(vec!["track", "page", "screen", "identify", "group", "alias"]),
                   anonymous in any::<bool>(),
                   event in prop::sample::select(vec!["Order Completed", "Viewed", "ünïcode"]),
                   properties in object(), traits in object(), context in object()) -> String {
        let mut call = serde_json::json!({
            "type": kind, "event": event, "name": event, "groupId": "g", "previousId": "p",
            "messageId": "m-1", "timestamp": "2026-11-22T10:00:00.000Z",
        });
        let id = if anonymous { "anonymousId" } else { "userId" };
        call[id] = "u-1".into();
        if kind == "alias" {
            call["userId"] = "u-2".into();
        }
        for (k, v) in [("properties", properties), ("traits", traits), ("context", context)] {
            if let Some(v) = v {
                call[k] = v;
            }
        }
        call.to_string()
    }
}

const FIELDS: [&str; 10] = [
    "type",
    "event",
    "userId",
    "anonymousId",
    "properties.a",
    "properties.a.b",
    "properties.10",
    "traits.ünï",
    "traits.total",
    "context.a.10",
];
const DROPPABLE: [&str; 7] = [
    "properties.a",
    "properties.a.b",
    "properties.10",
    "traits.ünï",
    "traits.total",
    "context.a",
    "context.a.10",
];

fn test() -> impl Strategy<Value = serde_json::Value> {
    (
        prop::sample::select(FIELDS.to_vec()),
        0..7u8,
        scalar(),
        -20i32..20,
    )
        .prop_map(|(field, which, value, n)| {
            let n = f64::from(n) / 2.0;
            match which {
                0 => serde_json::json!({"field": field, "equals": value}),
                1 => serde_json::json!({"field": field, "in": [value, "track", n]}),
                2 => serde_json::json!({"field": field, "exists": n > 0.0}),
                3 => serde_json::json!({"field": field, "gt": n}),
                4 => serde_json::json!({"field": field, "gte": n}),
                5 => serde_json::json!({"field": field, "lt": n}),
                _ => serde_json::json!({"field": field, "lte": n}),
            }
        })
}

fn condition() -> impl Strategy<Value = serde_json::Value> {
    test().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(|c| serde_json::json!({"and": c})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|c| serde_json::json!({"or": c})),
            inner.prop_map(|c| serde_json::json!({"not": c})),
        ]
    })
}

fn rule() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        condition().prop_map(|c| serde_json::json!({"action": "drop", "if": c})),
        condition().prop_map(|c| serde_json::json!({"action": "keep", "if": c})),
        (
            prop::collection::vec(prop::sample::select(DROPPABLE.to_vec()), 1..4),
            prop::option::of(condition())
        )
            .prop_map(|(fields, when)| match when {
                Some(c) => serde_json::json!({"action": "drop_fields", "fields": fields, "if": c}),
                None => serde_json::json!({"action": "drop_fields", "fields": fields}),
            }),
    ]
}

fn core_value(v: &serde_json::Value) -> Value {
    Value::from_json_slice(v.to_string().as_bytes()).unwrap()
}

fn body(call: &Call) -> String {
    let mut out = Vec::new();
    write_body(call, Timestamp::from_millis(0).unwrap(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Where a filter path sits in the spec's body: its root is a top-level
/// key of the body (`properties`, `traits`, `context`).
fn remove_path(body: &mut Value, path: &str) {
    let keys: Vec<&str> = path.split('.').collect();
    let mut at = body;
    for key in &keys[..keys.len() - 1] {
        match at {
            Value::Object(m) => match m.get_mut(*key) {
                Some(v) => at = v,
                None => return,
            },
            _ => return,
        }
    }
    if let Value::Object(m) = at {
        m.shift_remove(*keys.last().unwrap());
    }
}

fn has_path(body: &Value, path: &str) -> bool {
    let mut at = body;
    for key in path.split('.') {
        match at {
            Value::Object(m) => match m.get(key) {
                Some(v) => at = v,
                None => return false,
            },
            _ => return false,
        }
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_json_as_settings_is_read_or_refused(v in json(), rules in prop::collection::vec(json(), 0..4)) {
        let _ = Filters::from_value(&core_value(&v));
        let _ = Filters::from_value(&core_value(&serde_json::Value::Array(rules)));
    }

    #[test]
    fn a_kept_call_changes_only_by_its_dropped_fields(
        text in call_text(),
        rules in prop::collection::vec(rule(), 0..5),
        as_maps in any::<bool>(),
    ) {
        let filters = Filters::from_value(&core_value(&serde_json::Value::Array(rules.clone())))
            .unwrap_or_else(|e| panic!("generated rules are valid: {e}"));
        let mut call = Call::from_json_str(&text).unwrap();
        // A parsed call's objects are text; a built one's are maps. The
        // filters read and cut both.
        if as_maps {
            for slot in [&mut call.properties, &mut call.traits, &mut call.context] {
                *slot = slot.take().map(|o| Object::Map(o.into_map()));
            }
        }
        let before = body(&call);
        match filters.apply(&call) {
            Decision::Drop { rule } => {
                let action = rules[rule]["action"].as_str().unwrap();
                prop_assert!(action == "drop" || action == "keep", "{action}");
            }
            Decision::Keep(kept) => {
                let after = body(&kept);
                let listed: Vec<&str> = rules
                    .iter()
                    .filter(|r| r["action"] == "drop_fields")
                    .flat_map(|r| r["fields"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()))
                    .collect();
                if listed.is_empty() {
                    prop_assert_eq!(&after, &before);
                }
                // The unfiltered body without each listed field the filtered
                // one lacks is the filtered body, byte for byte.
                let after_value = Value::from_json_slice(after.as_bytes()).unwrap();
                let mut expected = Value::from_json_slice(before.as_bytes()).unwrap();
                prop_assert_eq!(&expected.to_json_string().unwrap(), &before);
                for path in listed {
                    if !has_path(&after_value, path) {
                        remove_path(&mut expected, path);
                    }
                }
                prop_assert_eq!(expected.to_json_string().unwrap(), after);
            }
        }
    }
}
