//! The Segment message form of a call: what the tracking API's `/v1/batch`
//! takes, and what the batching client queues.

use super::Call;
use crate::json::JsonError;

impl Call {
    /// Writes the call as a Segment-spec message (the form the tracking
    /// API's `/v1/batch` takes), in `JSON.stringify` form. Absent and empty
    /// fields are left out. Keys come in a fixed order: `type`, `messageId`,
    /// `timestamp`, ids, names, then the free-form objects.
    pub fn write_message(&self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        self.write_message_with_context(out, None)
    }

    /// [`Call::write_message`], with `context` written as the given JSON
    /// text when the call has none (the batcher's `{"library":…}`, written
    /// once instead of built as a map for every message).
    pub(crate) fn write_message_with_context(
        &self,
        out: &mut Vec<u8>,
        default_context: Option<&str>,
    ) -> Result<(), JsonError> {
        use crate::json::{write_map, write_string};
        out.push(b'{');
        out.extend_from_slice(b"\"type\":");
        write_string(self.kind.as_str(), out);
        let strings = [
            ("messageId", &self.message_id),
            ("userId", &self.user_id),
            ("anonymousId", &self.anonymous_id),
            ("event", &self.event),
            ("name", &self.name),
            ("category", &self.category),
            ("groupId", &self.group_id),
            ("previousId", &self.previous_id),
        ];
        for (i, (key, value)) in strings.into_iter().enumerate() {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                out.push(b',');
                write_string(key, out);
                out.push(b':');
                write_string(v, out);
            }
            if i == 0 {
                if let Some(ts) = self.timestamp {
                    out.extend_from_slice(b",\"timestamp\":\"");
                    ts.write_iso(out);
                    out.push(b'"');
                }
            }
        }
        for (key, value) in [
            ("properties", &self.properties),
            ("traits", &self.traits),
            ("context", &self.context),
        ] {
            if let Some(o) = value {
                out.push(b',');
                write_string(key, out);
                out.push(b':');
                o.write(out)?;
            } else if let Some(text) = default_context.filter(|_| key == "context") {
                out.extend_from_slice(b",\"context\":");
                out.extend_from_slice(text.as_bytes());
            }
        }
        if let Some(m) = &self.integrations {
            out.extend_from_slice(b",\"integrations\":");
            write_map(m, out)?;
        }
        out.push(b'}');
        Ok(())
    }
}
