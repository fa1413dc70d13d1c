//! Delete notifications (webhooks-destination.md, "Events").

use crate::call::{Call, CallError, CallKind};
use crate::json::Map;
use crate::routing::{is_enabled, WEBHOOKS};
use crate::timestamp::Timestamp;

/// A source affected by a deletion request, with its destination switches.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteSource {
    /// The source's identifier (not sent in the body; for the host's records).
    pub source_id: String,
    /// The source's `integrations` settings for this destination.
    pub integrations: Option<Map>,
}

/// One delete call per affected source that has Webhooks enabled
/// (webhooks-destination.md, Events), in the order the sources were given,
/// each paired with its source id.
pub fn delete_notifications(
    user_id: &str,
    sources: &[DeleteSource],
    now: Timestamp,
) -> Result<Vec<(String, Call)>, CallError> {
    let mut call = Call::new(CallKind::Delete);
    call.user_id = Some(user_id.to_owned());
    call.timestamp = Some(now);
    call.validate()?;
    Ok(sources
        .iter()
        .filter(|s| is_enabled(s.integrations.as_ref(), WEBHOOKS))
        .map(|s| (s.source_id.clone(), call.clone()))
        .collect())
}
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::json::Value;
    use crate::webhooks::write_body;

    #[test]
    fn delete_per_enabled_source() {
        let off = Value::from_json_str(r#"{"Webhooks":false}"#)
            .unwrap()
            .as_object()
            .cloned();
        let sources = [
            DeleteSource {
                source_id: "a".into(),
                integrations: None,
            },
            DeleteSource {
                source_id: "b".into(),
                integrations: off,
            },
            DeleteSource {
                source_id: "c".into(),
                integrations: None,
            },
        ];
        let out = delete_notifications("u1", &sources, Timestamp::from_millis(0).unwrap()).unwrap();
        let ids: Vec<&str> = out.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        let mut body = Vec::new();
        write_body(&out[0].1, Timestamp::from_millis(5).unwrap(), &mut body).unwrap();
        assert_eq!(
            body,
            br#"{"type":"delete","userId":"u1","timestamp":"1970-01-01T00:00:00.000Z"}"#
        );
    }
}
