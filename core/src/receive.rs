//! The receiving side of a webhook: which header to trust, which bytes it
//! covers, and the verified call handed back, so that a receiver cannot
//! accept a body it did not verify (after Stripe's `constructEvent` and
//! Svix's `verify`, which return the payload and raise on anything else).
//!
//! Two senders sign differently:
//!
//! * callpost and Segment's Webhooks (Classic) destination put the HMAC of
//!   the whole body in [`SIGNATURE_HEADER`] (`X-Signature`); the body is one
//!   call (webhooks-destination.md, Authentication).
//! * Segment's Webhooks (Actions) destination may batch: the body is then a
//!   JSON array of calls. With its "Use X-Segment-Signature Header" setting
//!   the HMAC of the whole body goes in [`SEGMENT_SIGNATURE_HEADER`];
//!   without it, the legacy `X-Signature` holds the HMAC of
//!   `JSON.stringify(first event)` only, so the other events are unsigned.
//!
//! * A destination in the Standard Webhooks mode ([`crate::standard`])
//!   signs `webhook-id.webhook-timestamp.body` with HMAC-SHA256 in
//!   `webhook-signature`, under `whsec_` secrets.
//!
//! [`receive`] prefers `X-Segment-Signature` when present. A batch whose
//! `X-Signature` covers only the first event is refused
//! ([`SignatureError::FirstEventOnly`]) unless the caller opts in
//! ([`ReceiveOptions::allow_first_event_signature`]).
//!
//! [`receive_any`] takes both kinds of secret ([`Keys`]). Which scheme a
//! request is held to is the receiver's choice, not the request's: with
//! Standard secrets only, a request must carry a valid `webhook-signature`
//! (an `X-Signature` alone is refused, so stripping the timestamped headers
//! cannot downgrade it); with both kinds, as while a destination moves from
//! `segment` to `both` to `standard`, a request carrying `webhook-signature`
//! is held to it, with no fallback, and one without it to `X-Signature`.

use crate::code::{Code, ErrorClass};
use crate::json::{write_value, JsonError, Value};
use crate::signature::{verify, Secret, SignatureError, SIGNATURE_HEADER};
use crate::standard::{self, StandardError, StandardSecret};
use crate::timestamp::Timestamp;

/// The header Segment's Webhooks (Actions) destination signs the whole body
/// in when its "Use X-Segment-Signature Header" setting is on (the
/// destination's `useSegmentSignatureHeader`).
pub const SEGMENT_SIGNATURE_HEADER: &str = "X-Segment-Signature";

/// How many message ids the framework helpers' default duplicate filter
/// remembers (an in-memory LRU per receiver). Segment and callpost retry a
/// call for up to 4 hours; 10,000 ids cover that window for a receiver
/// taking under about 0.7 calls a second, and cost about 1 MB. Busier
/// receivers pass their own `seen` hook backed by shared storage.
pub const DEFAULT_SEEN_CAPACITY: usize = 10_000;

/// Why [`receive`] refused a webhook. Its own enum (not the crate-wide
/// [`crate::Error`]) so the verify-only wasm module carries only these
/// messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// The signature is missing, malformed, or does not match.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// The verified body is not JSON (or not JSON JavaScript reads alike).
    #[error(transparent)]
    Json(#[from] JsonError),
    /// The Standard Webhooks headers are missing, malformed, outside the
    /// tolerance, or do not match.
    #[error(transparent)]
    Standard(#[from] StandardError),
}

impl ReceiveError {
    /// The stable code.
    pub fn code(&self) -> Code {
        match self {
            Self::Signature(e) => e.code(),
            Self::Json(e) => e.code(),
            Self::Standard(e) => e.code(),
        }
    }
}

/// What [`receive`] and [`receive_any`] accept beyond the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveOptions {
    /// Accept a batched body whose `X-Signature` covers only its first
    /// event (Segment's Actions destination without "Use X-Segment-Signature
    /// Header"). The other events are then unauthenticated: anyone who saw
    /// one signed request can append events to it.
    pub allow_first_event_signature: bool,
    /// How far a Standard Webhooks `webhook-timestamp` may be from the
    /// receiver's clock, either way ([`standard::DEFAULT_TOLERANCE_MS`]).
    pub tolerance_ms: u64,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        Self {
            allow_first_event_signature: false,
            tolerance_ms: standard::DEFAULT_TOLERANCE_MS,
        }
    }
}

/// The secrets a receiver verifies with (see the module docs for which
/// scheme a request is held to). At least one of the two lists is needed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Keys<'a> {
    /// `X-Signature` / `X-Segment-Signature` secrets (HMAC-SHA1).
    pub segment: &'a [Secret],
    /// Standard Webhooks `whsec_` secrets (HMAC-SHA256).
    pub standard: &'a [StandardSecret],
}

/// Which bytes the accepted signature covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// The whole body.
    Body,
    /// Only the first event of a batch (opted in).
    FirstEvent,
}

impl Coverage {
    /// `"body"` or `"first_event"`, as the bindings report it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Body => "body",
            Self::FirstEvent => "first_event",
        }
    }
}

/// A verified webhook body.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The parsed body: one call (an object), or a batch (an array).
    pub value: Value,
    /// The header whose signature was accepted.
    pub header: &'static str,
    /// What that signature covers.
    pub coverage: Coverage,
    /// The request's id as given: its `Idempotency-Key` header (callpost's
    /// sender puts the call's `messageId` there, since the spec's body has
    /// no such field), or under the Standard scheme its verified
    /// `webhook-id`. No signature covers the header: it names the request
    /// in logs, never for duplicates ([`Received::signed_id`]).
    pub idempotency_key: Option<String>,
    /// The request's id taken from what its signature covers, for
    /// duplicates: under the Standard scheme its verified `webhook-id`;
    /// under `X-Signature` or `X-Segment-Signature` over the whole body,
    /// [`BODY_ID_PREFIX`] and the first 16 bytes of the body's SHA-256 in
    /// hex (the same request sent again, under any `Idempotency-Key`, has
    /// the same); `None` when the signature covers only the first event.
    pub signed_id: Option<String>,
    /// Under the Standard scheme, the verified `webhook-timestamp`
    /// (seconds since the epoch).
    pub timestamp: Option<i64>,
}

impl Received {
    /// Whether the body is a batch (a JSON array of calls).
    pub fn is_batch(&self) -> bool {
        matches!(self.value, Value::Array(_))
    }

    /// The calls: the batch's elements, or the body itself.
    pub fn calls(&self) -> &[Value] {
        match &self.value {
            Value::Array(items) => items,
            one => std::slice::from_ref(one),
        }
    }

    /// Each call's id for duplicate detection, in [`Received::calls`]
    /// order: its `messageId` (Segment's bodies carry it); else for a
    /// single call the request's [`Received::signed_id`], and for the call
    /// at `index` of a batch `<signed id>.<index>` (a callpost batch's
    /// `webhook-id` names its members in order, [`crate::webhooks::Batch`]);
    /// else `None`: such calls cannot be recognised as duplicates. Only
    /// what a signature covers makes an id: a captured request sent again
    /// with a new `Idempotency-Key` is still a duplicate (Stripe and Svix
    /// receivers key on their signed event id the same way).
    pub fn message_ids(&self) -> Vec<Option<String>> {
        let key = self.signed_id.as_deref().filter(|k| !k.is_empty());
        if !self.is_batch() {
            return vec![message_id(&self.value).or(key).map(str::to_owned)];
        }
        self.calls()
            .iter()
            .enumerate()
            .map(|(i, call)| match message_id(call) {
                Some(id) => Some(id.to_owned()),
                None => key.map(|k| format!("{k}.{i}")),
            })
            .collect()
    }
}

/// A call's `messageId`, when it is a non-empty string.
pub fn message_id(call: &Value) -> Option<&str> {
    call.as_object()?
        .get("messageId")?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// The header callpost's sender carries a call's `messageId` in.
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// What a body's id ([`Received::signed_id`]) starts with.
pub const BODY_ID_PREFIX: &str = "body_";

/// A body's id: [`BODY_ID_PREFIX`] and the first 16 bytes of its SHA-256,
/// in hex (as a batch's id, [`crate::webhooks::Batch`]).
fn body_id(body: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body);
    format!("{BODY_ID_PREFIX}{}", hex::encode(&digest[..16]))
}

/// Whether a header name is [`SEGMENT_SIGNATURE_HEADER`]'s.
pub fn is_segment_signature_header(name: &str) -> bool {
    name.eq_ignore_ascii_case(SEGMENT_SIGNATURE_HEADER)
}

/// The signature to check among a request's headers: the first
/// `X-Segment-Signature`, else the first `X-Signature` (names matched
/// case-insensitively), with the header's canonical name.
pub fn pick_signature<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<(&'static str, &'a str)> {
    let mut legacy = None;
    for (name, value) in headers {
        if is_segment_signature_header(name) {
            return Some((SEGMENT_SIGNATURE_HEADER, value));
        }
        if legacy.is_none() && crate::signature::is_signature_header(name) {
            legacy = Some(value);
        }
    }
    legacy.map(|v| (SIGNATURE_HEADER, v))
}

/// Verifies a received webhook and returns its parsed body.
///
/// `body` is the raw request body, byte for byte; `headers` the request's
/// header pairs. Checks, in order: a signature header is present
/// ([`SignatureError::MissingSignature`]), it is 40 hex digits
/// ([`SignatureError::MalformedSignature`]), it matches the body under one
/// of `secrets` ([`SignatureError::Mismatch`]); then the body must be JSON
/// (the JSON errors). For a batch under `X-Signature` that matches only its
/// first event, see the module docs.
pub fn receive<'a>(
    body: &[u8],
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    secrets: &[Secret],
    options: ReceiveOptions,
) -> Result<Received, ReceiveError> {
    if secrets.is_empty() {
        return Err(SignatureError::NoSecrets.into());
    }
    let headers: Vec<(&str, &str)> = headers.into_iter().collect();
    let (header, signature) =
        pick_signature(headers.iter().copied()).ok_or(SignatureError::MissingSignature)?;
    let idempotency_key = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(IDEMPOTENCY_KEY_HEADER))
        .map(|(_, v)| (*v).to_owned());
    if verify(body, signature, secrets)? {
        let value = Value::from_json_slice(body)?;
        return Ok(Received {
            value,
            header,
            coverage: Coverage::Body,
            idempotency_key,
            signed_id: Some(body_id(body)),
            timestamp: None,
        });
    }
    // Only Segment's legacy header on a batch may sign less than the body.
    if header != SIGNATURE_HEADER || !starts_as_array(body) {
        return Err(SignatureError::Mismatch.into());
    }
    let value = Value::from_json_slice(body).map_err(|_| SignatureError::Mismatch)?;
    let first = match &value {
        Value::Array(items) => items.first(),
        _ => None,
    };
    let Some(first) = first else {
        return Err(SignatureError::Mismatch.into());
    };
    let mut signed = Vec::with_capacity(body.len().min(64 * 1024));
    write_value(first, &mut signed)?;
    if !verify(&signed, signature, secrets)? {
        return Err(SignatureError::Mismatch.into());
    }
    if !options.allow_first_event_signature {
        return Err(SignatureError::FirstEventOnly.into());
    }
    Ok(Received {
        value,
        header,
        coverage: Coverage::FirstEvent,
        idempotency_key,
        signed_id: None,
        timestamp: None,
    })
}

/// Verifies a received webhook signed either way and returns its parsed
/// body: the Standard Webhooks headers under `keys.standard` (the
/// timestamp within `options.tolerance_ms` of `now`), or `X-Signature` /
/// `X-Segment-Signature` under `keys.segment` as [`receive`] does. Which
/// one a request is held to is in the module docs.
pub fn receive_any<'a>(
    body: &[u8],
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    keys: Keys<'_>,
    now: Timestamp,
    options: ReceiveOptions,
) -> Result<Received, ReceiveError> {
    if keys.standard.is_empty() {
        return receive(body, headers, keys.segment, options);
    }
    let headers: Vec<(&str, &str)> = headers.into_iter().collect();
    let standard_signed = headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(standard::SIGNATURE_HEADER));
    if !standard_signed && !keys.segment.is_empty() {
        return receive(body, headers, keys.segment, options);
    }
    let verified = standard::verify(
        body,
        headers.iter().copied(),
        keys.standard,
        now,
        options.tolerance_ms,
    )?;
    Ok(Received {
        value: Value::from_json_slice(body)?,
        header: standard::SIGNATURE_HEADER,
        coverage: Coverage::Body,
        signed_id: Some(verified.id.clone()),
        idempotency_key: Some(verified.id),
        timestamp: Some(verified.timestamp),
    })
}

/// The HTTP status a receiver answers a refused webhook with: 401 when it
/// did not verify (the sender's secret or header is wrong, and Segment does
/// not retry a 4xx), 400 for anything else about the request (a verified
/// body that is not JSON, an argument the helper could not use).
pub fn refusal_status(code: Code) -> u16 {
    match code.class() {
        ErrorClass::Signature => 401,
        _ => 400,
    }
}

fn starts_as_array(body: &[u8]) -> bool {
    body.iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .is_some_and(|&b| b == b'[')
}

/// Verifies a signature when only the parsed body is at hand: re-stringifies
/// `value` as `JSON.stringify` does, then verifies those bytes. This is the
/// spec's own verification recipe; prefer [`verify`] over the raw body, or
/// [`receive`] over the whole request.
pub fn verify_value(
    value: &Value,
    signature: &str,
    secrets: &[Secret],
) -> Result<bool, ReceiveError> {
    let mut body = Vec::with_capacity(256);
    write_value(value, &mut body)?;
    Ok(verify(&body, signature, secrets)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn secret() -> Vec<Secret> {
        vec![Secret::new("s3cret").unwrap()]
    }

    fn sig(body: &[u8]) -> String {
        secret()[0].sign(body)
    }

    #[test]
    fn single_call_under_x_signature() {
        let body = br#"{"type":"track","event":"A","messageId":"m1"}"#;
        let s = sig(body);
        let r = receive(
            body,
            [("x-signature", s.as_str())],
            &secret(),
            Default::default(),
        )
        .unwrap();
        assert_eq!(r.header, SIGNATURE_HEADER);
        assert_eq!(r.coverage, Coverage::Body);
        assert!(!r.is_batch());
        assert_eq!(r.message_ids(), vec![Some("m1".to_owned())]);
        // callpost's own bodies (the spec's) carry no messageId: the id is
        // the signed body's, whatever Idempotency-Key says, so the same
        // request sent again under a new key is a duplicate.
        let body = br#"{"version":1,"type":"track","event":"A"}"#;
        let s = sig(body);
        let ids = |key: &str| {
            let h = [("X-Signature", s.as_str()), ("idempotency-key", key)];
            let r = receive(body, h, &secret(), Default::default()).unwrap();
            assert_eq!(r.idempotency_key.as_deref(), Some(key));
            r.message_ids()
        };
        assert_eq!(ids("m2"), ids("a-new-key"));
        let id = ids("m2")[0].clone().unwrap();
        assert!(id.starts_with(BODY_ID_PREFIX) && id.len() == 5 + 32, "{id}");
    }

    #[test]
    fn errors_in_order() {
        let body = br#"{"type":"track"}"#;
        let code = |h: Vec<(&str, &str)>| {
            receive(body, h, &secret(), Default::default())
                .unwrap_err()
                .code()
        };
        assert_eq!(
            code(vec![("Content-Type", "application/json")]),
            Code::MissingSignature
        );
        assert_eq!(code(vec![("X-Signature", "zz")]), Code::MalformedSignature);
        let other = "0".repeat(40);
        assert_eq!(
            code(vec![("X-Signature", other.as_str())]),
            Code::SignatureMismatch
        );
        let e = receive(body, [("X-Signature", "0")], &[], Default::default()).unwrap_err();
        assert_eq!(e.code(), Code::NoSecrets);
        assert_eq!(refusal_status(Code::SignatureMismatch), 401);
        assert_eq!(refusal_status(Code::InvalidJson), 400);
    }

    #[test]
    fn a_verified_body_that_is_not_json() {
        let body = b"not json";
        let s = sig(body);
        let e = receive(
            body,
            [("X-Signature", s.as_str())],
            &secret(),
            Default::default(),
        );
        assert_eq!(e.unwrap_err().code(), Code::InvalidJson);
    }

    #[test]
    fn segment_signature_is_preferred_and_covers_the_batch() {
        let body = br#"[{"messageId":"a"},{"messageId":"b"},{"type":"track"}]"#;
        let s = sig(body);
        let wrong = "f".repeat(40);
        let h = [
            ("X-Signature", wrong.as_str()),
            ("X-Segment-Signature", s.as_str()),
        ];
        let r = receive(body, h, &secret(), Default::default()).unwrap();
        assert_eq!(r.header, SEGMENT_SIGNATURE_HEADER);
        assert!(r.is_batch());
        let ids = r.message_ids();
        let third = format!("{}.2", r.signed_id.clone().unwrap());
        assert_eq!(ids, vec![Some("a".into()), Some("b".into()), Some(third)]);
        // A tampered batch under X-Segment-Signature never falls back.
        let tampered = br#"[{"messageId":"a"},{"messageId":"b"},{"type":"x"}]"#;
        let e = receive(tampered, h, &secret(), Default::default()).unwrap_err();
        assert_eq!(e.code(), Code::SignatureMismatch);
    }

    #[test]
    fn first_event_signature_needs_the_opt_in() {
        // Pretty-printed on purpose: the signature is over the first
        // event's JSON.stringify form, not its bytes in the body.
        let body = b"[\n  {\"messageId\": \"a\", \"n\": 1.0},\n  {\"messageId\": \"b\"}\n]";
        let s = sig(br#"{"messageId":"a","n":1}"#);
        let h = [("X-Signature", s.as_str())];
        let e = receive(body, h, &secret(), Default::default()).unwrap_err();
        assert_eq!(e.code(), Code::FirstEventSignature);
        let opts = ReceiveOptions {
            allow_first_event_signature: true,
            ..Default::default()
        };
        let r = receive(body, h, &secret(), opts).unwrap();
        assert_eq!(r.coverage, Coverage::FirstEvent);
        assert_eq!(r.calls().len(), 2);
        // A first event that does not match is a mismatch, opted in or not.
        let other = sig(br#"{"messageId":"z"}"#);
        let e = receive(body, [("X-Signature", other.as_str())], &secret(), opts).unwrap_err();
        assert_eq!(e.code(), Code::SignatureMismatch);
    }
}
