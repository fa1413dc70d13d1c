//! Batched webhooks, opt-in per destination: several calls in one POST,
//! as Segment's Webhooks (Actions) destination sends them.
//!
//! * The body is a JSON array of the calls' bodies, each exactly as it is
//!   sent alone ([`write_body`]), in the order given, filters applied.
//! * A batch's id is `batch_` and the first 16 bytes of the SHA-256 of its
//!   calls' `messageId`s, each written as its length in UTF-8 bytes
//!   (decimal), `:` and the id (`2:m13:m10`), in hex: the same members give the
//!   same id, so a retried batch carries the same `Idempotency-Key` and
//!   `webhook-id`. A receiver that finds no `messageId` in an element takes
//!   `<id>.<index>` as its id ([`crate::receive::Received::message_ids`]).
//! * It is signed as one body; one answer decides the whole batch, under
//!   the same rules as a single call ([`crate::retry`]).
//! * A batch holds at most `max_calls` calls and `max_bytes` bytes of body.
//!   A call whose body alone is larger than `max_bytes` goes alone.

use super::{RequestError, SettingsError, Webhooks};
use crate::call::Call;
use crate::filter::Decision;
use crate::mapping::MapError;
use crate::misuse::ApiMisuse;
use crate::timestamp::Timestamp;

/// Calls per batch unless set: Segment's Webhooks (Actions) mapping's
/// default batch size.
pub const DEFAULT_BATCH_CALLS: usize = 1000;
/// The most calls a batch may be set to hold: Segment's Webhooks (Actions)
/// maximum batch size.
pub const MAX_BATCH_CALLS: usize = 4000;
/// Body bytes per batch unless set, and the most it may be set to: the
/// Tracking API's batch limit (client-library.md, 500 KB; the batcher's
/// `MAX_BATCH_BYTES`), a size receivers of Segment traffic already take.
pub const MAX_BATCH_BYTES: usize = 500_000;
/// The least `max_bytes` may be set to: two calls of the largest size a
/// call may have (client-library.md, 32 KB; the batcher's
/// `MAX_MESSAGE_BYTES`).
pub const MIN_BATCH_BYTES: usize = 2 * 32_000;

/// What a batch's id starts with.
pub const BATCH_ID_PREFIX: &str = "batch_";

/// Whether `id` (a delivery's message id) names a batch: a host that
/// keeps a batch's state with each of its calls finds them by it.
pub fn is_batch_id(id: &str) -> bool {
    id.starts_with(BATCH_ID_PREFIX)
}

/// How a destination groups calls into one POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    max_calls: usize,
    max_bytes: usize,
}

impl Default for Batching {
    fn default() -> Self {
        Self {
            max_calls: DEFAULT_BATCH_CALLS,
            max_bytes: MAX_BATCH_BYTES,
        }
    }
}

impl Batching {
    /// `max_calls` in 1..=[`MAX_BATCH_CALLS`], `max_bytes` in
    /// [`MIN_BATCH_BYTES`]..=[`MAX_BATCH_BYTES`]; `None` takes the default.
    pub fn new(max_calls: Option<usize>, max_bytes: Option<usize>) -> Result<Self, SettingsError> {
        let d = Self::default();
        let max_calls = max_calls.unwrap_or(d.max_calls);
        let max_bytes = max_bytes.unwrap_or(d.max_bytes);
        if !(1..=MAX_BATCH_CALLS).contains(&max_calls) {
            return Err(SettingsError::InvalidField("batch.maxCalls"));
        }
        if !(MIN_BATCH_BYTES..=MAX_BATCH_BYTES).contains(&max_bytes) {
            return Err(SettingsError::InvalidField("batch.maxBytes"));
        }
        Ok(Self {
            max_calls,
            max_bytes,
        })
    }

    /// The most calls in one batch.
    pub fn max_calls(&self) -> usize {
        self.max_calls
    }

    /// The most body bytes in one batch.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

/// One POST's worth of calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The batch's id: `Idempotency-Key` and `webhook-id`.
    pub id: String,
    /// The JSON array of the calls' bodies.
    pub body: Vec<u8>,
    /// The indexes (into the calls given) of the calls it carries.
    pub members: Vec<usize>,
}

/// What [`Webhooks::pack`] made of a list of calls.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Packed {
    /// The batches, in the calls' order.
    pub batches: Vec<Batch>,
    /// The calls that go in no batch (their indexes), with why.
    pub skipped: Vec<(usize, Skip)>,
}

/// Why a call goes in no batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The call's `integrations` turn Webhooks off.
    Disabled,
    /// The destination's filters dropped it.
    Filtered {
        /// The index of the rule that dropped it.
        rule: u32,
    },
    /// The destination's mapping built a body over
    /// [`MAX_BODY_BYTES`](crate::mapping::MAX_BODY_BYTES) for it.
    MappedBodyTooLarge,
}

impl Webhooks {
    /// Groups `calls` into batches as the destination's [`Batching`] says
    /// (the default batching when it has none), filters applied, each
    /// body built at `now` for calls without a timestamp. Errors: the first
    /// call with no JSON body.
    pub fn pack(&self, calls: &[Call], now: Timestamp) -> Result<Packed, RequestError> {
        if self.is_templated() {
            return Err(ApiMisuse::Argument(
                "this destination's URL takes values from each call (a URL template): send each call \
                 alone"
                    .into(),
            )
            .into());
        }
        let limits = self.batching().unwrap_or_default();
        let mut out = Packed::default();
        let mut open: Option<Open> = None;
        for (i, call) in calls.iter().enumerate() {
            if !self.is_enabled_for(call) {
                out.skipped.push((i, Skip::Disabled));
                continue;
            }
            let kept = match self.filter(call) {
                Decision::Keep(kept) => kept,
                Decision::Drop { rule } => {
                    let rule = u32::try_from(rule).unwrap_or(u32::MAX);
                    out.skipped.push((i, Skip::Filtered { rule }));
                    continue;
                }
            };
            let mut body = Vec::with_capacity(kept.capacity_hint());
            match self.write_call_body(&kept, now, &mut body) {
                Ok(()) => {}
                Err(MapError::Call(e)) => return Err(e.into()),
                Err(_) => {
                    out.skipped.push((i, Skip::MappedBodyTooLarge));
                    continue;
                }
            }
            let id = kept.message_id.clone().unwrap_or_default();
            // The open batch's bytes hold its `[` and commas; this call
            // adds a comma, its body, and the closing `]`.
            const COMMA_AND_CLOSE: usize = 2;
            let fits = open.as_ref().is_some_and(|b| {
                b.members.len() < limits.max_calls
                    && b.body.len() + COMMA_AND_CLOSE + body.len() <= limits.max_bytes
            });
            if !fits {
                out.batches.extend(open.take().map(Open::close));
                open = Some(Open::default());
            }
            if let Some(b) = open.as_mut() {
                b.push(i, &id, &body);
            }
        }
        out.batches.extend(open.map(Open::close));
        Ok(out)
    }
}

/// A batch being filled.
#[derive(Default)]
struct Open {
    body: Vec<u8>,
    ids: Vec<u8>,
    members: Vec<usize>,
}

impl Open {
    fn push(&mut self, index: usize, id: &str, body: &[u8]) {
        self.body
            .push(if self.members.is_empty() { b'[' } else { b',' });
        self.body.extend_from_slice(body);
        // Each id after its length: a message id may hold any character
        // (a newline included), and no two lists of ids may digest alike.
        self.ids
            .extend_from_slice(format!("{}:", id.len()).as_bytes());
        self.ids.extend_from_slice(id.as_bytes());
        self.members.push(index);
    }

    fn close(mut self) -> Batch {
        use sha2::Digest as _;
        self.body.push(b']');
        let digest = sha2::Sha256::digest(&self.ids);
        Batch {
            id: format!("{BATCH_ID_PREFIX}{}", hex::encode(&digest[..16])),
            body: self.body,
            members: self.members,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::json::Value;

    #[test]
    fn the_limits_are_the_batchers_and_are_checked() {
        // Written out here so that webhooks need not import the batcher
        // (the core's modules form layers); held equal by this test.
        assert_eq!(MAX_BATCH_BYTES, crate::batcher::MAX_BATCH_BYTES);
        assert_eq!(MIN_BATCH_BYTES, 2 * crate::batcher::MAX_MESSAGE_BYTES);
        assert_eq!(Batching::default().max_calls(), DEFAULT_BATCH_CALLS);
        assert!(Batching::new(Some(MAX_BATCH_CALLS), Some(MIN_BATCH_BYTES)).is_ok());
        for (calls, bytes, field) in [
            (Some(0), None, "batch.maxCalls"),
            (Some(MAX_BATCH_CALLS + 1), None, "batch.maxCalls"),
            (None, Some(MIN_BATCH_BYTES - 1), "batch.maxBytes"),
            (None, Some(MAX_BATCH_BYTES + 1), "batch.maxBytes"),
        ] {
            assert_eq!(
                Batching::new(calls, bytes),
                Err(SettingsError::InvalidField(field))
            );
        }
        let settings = |batch: &str| {
            let text = format!(r#"{{"endpoints":["https://a.example.com/"],"batch":{batch}}}"#);
            Webhooks::from_value(&Value::from_json_str(&text).unwrap())
        };
        assert_eq!(
            settings("{}").unwrap().batching(),
            Some(Batching::default())
        );
        assert!(settings(r#"{"maxCalls":2.5}"#).is_err());
        assert!(settings(r#"{"size":10}"#).is_err());
        assert!(settings("true").is_err());
        assert_eq!(settings("null").unwrap().batching(), None);
    }
}
