//! Destination switches: the `integrations` map (client-library.md, rule 3).

use crate::json::{Map, Value};

/// The destination's name inside `integrations` (webhooks-destination.md).
pub const WEBHOOKS: &str = "Webhooks";

/// Whether `destination` receives a call with this `integrations` map.
///
/// Keys are case-sensitive. A key naming the destination decides alone:
/// `false` turns it off, and any other value (`true`, or an options object as
/// Segment allows) turns it on. Otherwise `"All": false` turns it off, and
/// everything else leaves it on, since all destinations are on by default.
pub fn is_enabled(integrations: Option<&Map>, destination: &str) -> bool {
    let Some(map) = integrations else { return true };
    match map.get(destination) {
        Some(v) => !matches!(v, Value::Bool(false)),
        None => !matches!(map.get("All"), Some(Value::Bool(false))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn on(json: &str) -> bool {
        let v = Value::from_json_str(json).unwrap();
        is_enabled(v.as_object(), WEBHOOKS)
    }

    #[test]
    fn switches() {
        assert!(is_enabled(None, WEBHOOKS));
        assert!(on("{}"));
        assert!(!on(r#"{"Webhooks":false}"#));
        assert!(!on(r#"{"All":false}"#));
        assert!(on(r#"{"All":false,"Webhooks":true}"#));
        assert!(on(r#"{"All":false,"Webhooks":{"option":1}}"#));
        assert!(!on(r#"{"All":true,"Webhooks":false}"#));
        assert!(
            !on(r#"{"All":false,"webhooks":true}"#),
            "keys are case-sensitive"
        );
        assert!(on(r#"{"webhooks":false}"#), "keys are case-sensitive");
    }
}
