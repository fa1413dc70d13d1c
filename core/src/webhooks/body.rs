//! The body of each call kind (webhooks-destination.md, "Body shape by
//! call kind").

use crate::call::{Call, CallError, CallKind, Object};
use crate::json::{write_string, write_value, Map, Value};
use crate::timestamp::Timestamp;

/// Writes the body for `call` exactly as the spec's "Body shape by call kind"
/// table gives it, keys in the table's order.
///
/// Decisions where the spec is silent:
/// * a missing `userId` (a call made with `anonymousId` only) leaves the key
///   out; the table has no `anonymousId`, so none is sent;
/// * missing `properties` or `traits` are written as `{}`, so receivers can
///   rely on the key being there;
/// * a screen call's `context` holds only `device`, `os` and `app`, each only
///   when the call has it; a screen without `name` leaves `name` out;
/// * free-form objects are written unchanged (in `JSON.stringify` form);
/// * `timestamp` is the call's, in UTC with milliseconds, or `now` if absent.
pub fn write_body(call: &Call, now: Timestamp, out: &mut Vec<u8>) -> Result<(), CallError> {
    call.validate()?;
    let mut w = BodyWriter { out, first: true };
    w.out.push(b'{');
    if call.kind != CallKind::Delete {
        w.key("version");
        w.out.push(b'1');
    }
    w.key("type");
    write_string(call.kind.as_str(), w.out);
    let ts = call.timestamp.unwrap_or(now);
    match call.kind {
        CallKind::Page => {
            w.opt_str("userId", call.user_id());
            w.object("properties", call.properties.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Screen => {
            w.opt_str("userId", call.user_id());
            w.opt_str("name", call.name.as_deref());
            w.timestamp(ts);
            w.key("context");
            let mut ctx = Map::new();
            if let Some(c) = call.context.as_ref().map(Object::to_map) {
                for part in ["device", "os", "app"] {
                    if let Some(v) = c.get(part) {
                        ctx.insert(part.to_owned(), v.clone());
                    }
                }
            }
            write_value(&Value::Object(ctx), w.out)?;
        }
        CallKind::Identify => {
            w.opt_str("userId", call.user_id());
            w.object("traits", call.traits.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Track => {
            w.opt_str("userId", call.user_id());
            w.opt_str("event", call.event.as_deref());
            w.object("properties", call.properties.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Alias => {
            w.opt_str("Previous ID", call.previous_id.as_deref());
            w.opt_str("User ID", call.user_id());
            w.timestamp(ts);
        }
        CallKind::Group => {
            w.opt_str("groupId", call.group_id.as_deref());
            w.opt_str("userId", call.user_id());
            w.object("traits", call.traits.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Delete => {
            w.opt_str("userId", call.user_id());
            w.timestamp(ts);
        }
    }
    w.out.push(b'}');
    Ok(())
}

struct BodyWriter<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl BodyWriter<'_> {
    fn key(&mut self, k: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_string(k, self.out);
        self.out.push(b':');
    }
    fn opt_str(&mut self, k: &str, v: Option<&str>) {
        if let Some(v) = v {
            self.key(k);
            write_string(v, self.out);
        }
    }
    fn object(&mut self, k: &str, o: Option<&Object>) -> Result<(), CallError> {
        self.key(k);
        match o {
            Some(o) => o.write(self.out)?,
            None => self.out.extend_from_slice(b"{}"),
        }
        Ok(())
    }
    fn timestamp(&mut self, ts: Timestamp) {
        self.key("timestamp");
        self.out.push(b'"');
        ts.write_iso(self.out);
        self.out.push(b'"');
    }
}
