//! The service's ingest side: requests of Segment's HTTP Tracking API, as
//! the client libraries send them, split into calls, checked, and enriched
//! as Segment's servers enrich them.
//!
//! A host (the relay) reads the HTTP request, hands the path, the
//! `Authorization` header and the body (decompressed) to [`parse_request`]
//! with the time it received them and a source of random ids, and stores
//! what comes back. Every rule is here: the routes, the limits, where the
//! write key comes from, which failures refuse the whole request and which
//! only one call, and the enrichment.
//!
//! Enrichment (Segment's "Common fields" spec, Timestamps):
//! * `messageId` is filled in when the call has none (a UUID v4 from the
//!   host's random bytes);
//! * `receivedAt` is the time the request arrived;
//! * `sentAt` is the call's own, or else the batch's;
//! * `originalTimestamp` is the `timestamp` the sender gave, if any;
//! * `timestamp` is corrected for the sender's clock skew,
//!   `receivedAt − (sentAt − originalTimestamp)`, when both are known; it
//!   is `originalTimestamp` when there is no `sentAt`, and `receivedAt`
//!   when the sender gave no timestamp;
//! * the batch's `context` and `integrations` are merged into each call's,
//!   key by key at the top level, the call's own keys winning.

use crate::call::{Call, CallError, CallKind, Object};
use crate::code::Code;
use crate::json::{JsonError, Map, Parser, Value};
use crate::timestamp::Timestamp;
use base64::Engine as _;
use std::fmt;

/// Largest request body, decompressed: Segment's "500KB per batch", read
/// as 500,000 bytes (the batching client's
/// [`MAX_BATCH_BYTES`](crate::batcher::MAX_BATCH_BYTES)).
pub const MAX_REQUEST_BYTES: usize = crate::batcher::MAX_BATCH_BYTES;

/// Largest call, as its JSON text: Segment's "32KB per call", read as
/// 32,000 bytes (the batching client's
/// [`MAX_MESSAGE_BYTES`](crate::batcher::MAX_MESSAGE_BYTES)).
pub const MAX_CALL_BYTES: usize = crate::batcher::MAX_MESSAGE_BYTES;

/// Most calls in one batch. Segment documents sizes, not a count; 2,500 is
/// RudderStack's gateway limit, and with 500 KB a batch at most averages
/// 200 bytes a call, already below any real call.
pub const MAX_BATCH_CALLS: usize = 2_500;

/// The longest `messageId` stored, in bytes. An id, not a payload: UUIDs
/// are 36 bytes and analytics.js's 41. 1,000 keeps the deduplication key
/// (source, messageId) far below Postgres's 2,704-byte limit on an index
/// entry, so SQLite and Postgres store the same calls; a longer one is
/// refused alone ([`Rejected`]), and the rest of its batch is kept.
pub const MAX_MESSAGE_ID_BYTES: usize = 1_000;

/// `Retry-After` on a 503: one second, long enough for a group commit to
/// catch up, short enough that a sender's backlog stays small.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// The body of the answer to an accepted request, exactly: Segment's, and
/// segment-analytics-python counts only a 200 as success.
pub const SUCCESS_BODY: &str = r#"{"success":true}"#;

/// What a request's path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/v1/batch`, `/v1/import` or analytics.js's `/v1/b`: `{"batch": [...]}`.
    Batch,
    /// `/v1/identify`, `/v1/track`, … or analytics.js's `/v1/i`, `/v1/t`, …:
    /// one call of that kind.
    Single(CallKind),
}

impl Route {
    /// The route for an HTTP path (`None`: not a Tracking API route).
    pub fn from_path(path: &str) -> Option<Self> {
        let name = path.strip_prefix("/v1/")?;
        let name = name.strip_suffix('/').unwrap_or(name);
        Some(match name {
            "batch" | "import" | "b" => Self::Batch,
            "identify" | "i" => Self::Single(CallKind::Identify),
            "track" | "t" => Self::Single(CallKind::Track),
            "page" | "p" => Self::Single(CallKind::Page),
            "screen" | "s" => Self::Single(CallKind::Screen),
            "group" | "g" => Self::Single(CallKind::Group),
            "alias" | "a" => Self::Single(CallKind::Alias),
            _ => return None,
        })
    }
}

/// A request refused as a whole. Nothing from it is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// The path is not a Tracking API route.
    #[error("no such route; send calls to /v1/batch or /v1/<type>")]
    UnknownRoute,
    /// The body is not JSON (or not UTF-8). Fix the sender.
    #[error(transparent)]
    Json(JsonError),
    /// The body is not a JSON object, or `batch` is not an array of calls.
    #[error("{0}")]
    InvalidBatch(&'static str),
    /// The body is over [`MAX_REQUEST_BYTES`] (decompressed). Send smaller
    /// batches.
    #[error("request body is {0} bytes; the limit is {MAX_REQUEST_BYTES}")]
    BatchTooLarge(usize),
    /// A call's JSON is over [`MAX_CALL_BYTES`].
    #[error("call {index} is {bytes} bytes; the limit is {MAX_CALL_BYTES}")]
    CallTooLarge {
        /// Its position in the batch.
        index: usize,
        /// Its size.
        bytes: usize,
    },
    /// More than [`MAX_BATCH_CALLS`] calls.
    #[error("batch holds {0} calls; the limit is {MAX_BATCH_CALLS}")]
    TooManyCalls(usize),
    /// A compressed body inflates past [`MAX_REQUEST_BYTES`]: refused
    /// before it is inflated further (a zip bomb costs nothing). Same code
    /// as [`Self::BatchTooLarge`]; answered 413.
    #[error("request body inflates past {MAX_REQUEST_BYTES} bytes")]
    InflatesTooLarge,
    /// A `Content-Encoding: gzip` body that is not gzip data.
    #[error("request body is not valid gzip data")]
    InvalidCompression,
    /// A `Content-Encoding` other than `gzip` or `identity`.
    #[error("content encoding is not gzip or identity")]
    UnsupportedEncoding,
    /// A `Content-Type` that is not JSON (`application/json`) or the
    /// `text/plain` analytics.js sends to avoid a CORS preflight.
    #[error("content type must be application/json or text/plain")]
    UnsupportedMediaType,
    /// Neither the `Authorization` header (HTTP Basic, the write key as the
    /// user) nor the body (`writeKey`) carries a write key.
    #[error("no write key: send it as the Basic auth user or as writeKey")]
    MissingWriteKey,
    /// The write key is no source's. Segment answers 200 and drops the
    /// data; a self-hosted relay tells the sender instead.
    #[error("unknown write key")]
    UnknownWriteKey,
    /// A single-call route whose call breaks the spec.
    #[error(transparent)]
    Call(CallError),
    /// The service's storage is behind: nothing was stored, and the sender
    /// should retry after the `Retry-After` delay (503; the client
    /// libraries retry 5xx). Backpressure, never accept-and-drop.
    #[error("the relay's storage is behind; nothing was stored, retry later")]
    Overloaded,
    /// The service cannot store anything now (shutting down, or its
    /// storage failed): nothing was stored (503).
    #[error("the relay cannot store calls now; nothing was stored, retry later")]
    Unavailable,
}

impl IngestError {
    /// Stable snake_case code.
    pub fn code(&self) -> Code {
        match self {
            Self::UnknownRoute => Code::UnknownRoute,
            Self::Json(e) => e.code(),
            Self::InvalidBatch(_) => Code::InvalidBatch,
            Self::BatchTooLarge(_) => Code::BatchTooLarge,
            Self::CallTooLarge { .. } => Code::CallTooLarge,
            Self::TooManyCalls(_) => Code::TooManyCalls,
            Self::InflatesTooLarge => Code::BatchTooLarge,
            Self::InvalidCompression => Code::InvalidCompression,
            Self::UnsupportedEncoding => Code::UnsupportedEncoding,
            Self::UnsupportedMediaType => Code::UnsupportedMediaType,
            Self::MissingWriteKey => Code::MissingWriteKey,
            Self::UnknownWriteKey => Code::UnknownWriteKey,
            Self::Call(e) => e.code(),
            Self::Overloaded => Code::Overloaded,
            Self::Unavailable => Code::Unavailable,
        }
    }

    /// Seconds to put in `Retry-After`, for the refusals a sender should
    /// retry.
    pub fn retry_after(&self) -> Option<u32> {
        match self {
            Self::Overloaded | Self::Unavailable => Some(RETRY_AFTER_SECONDS),
            _ => None,
        }
    }

    /// The HTTP status to answer with.
    pub fn status(&self) -> u16 {
        match self {
            Self::UnknownRoute => 404,
            Self::InflatesTooLarge => 413,
            Self::UnsupportedEncoding | Self::UnsupportedMediaType => 415,
            Self::MissingWriteKey | Self::UnknownWriteKey => 401,
            Self::Overloaded | Self::Unavailable => 503,
            _ => 400,
        }
    }

    /// The JSON answer: `{"code": ..., "message": ...}`.
    pub fn to_json(&self) -> String {
        let mut m = Map::new();
        m.insert("code".into(), self.code().as_str().into());
        m.insert("message".into(), self.to_string().into());
        Value::Object(m).to_json_string().unwrap_or_default()
    }
}

/// Checks a request's `Content-Type` and `Content-Encoding` headers, and
/// its declared length, before the body is read. Returns whether the body
/// is gzipped. A host reads at most [`MAX_REQUEST_BYTES`] of a body,
/// compressed or not, whatever the length says.
pub fn check_headers(
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    content_length: Option<usize>,
) -> Result<bool, IngestError> {
    if let Some(t) = content_type {
        let media = t.split(';').next().unwrap_or_default().trim();
        let json = media.eq_ignore_ascii_case("application/json")
            || media.eq_ignore_ascii_case("text/plain")
            || media.is_empty();
        if !json {
            return Err(IngestError::UnsupportedMediaType);
        }
    }
    let gzip = match content_encoding.map(str::trim) {
        None | Some("") => false,
        Some(e) if e.eq_ignore_ascii_case("identity") => false,
        Some(e) if e.eq_ignore_ascii_case("gzip") => true,
        Some(_) => return Err(IngestError::UnsupportedEncoding),
    };
    match content_length {
        // The limit holds on the wire too: gzip never makes a real batch
        // larger, so a compressed body over it would inflate past it.
        Some(n) if n > MAX_REQUEST_BYTES => Err(IngestError::BatchTooLarge(n)),
        _ => Ok(gzip),
    }
}

/// Inflates a gzip request body (one or more members, as `gzip` writes
/// them), refusing it as soon as it passes [`MAX_REQUEST_BYTES`].
pub fn inflate(body: &[u8]) -> Result<Vec<u8>, IngestError> {
    use std::io::Read as _;
    let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(MAX_REQUEST_BYTES + 1));
    // Read one byte past the limit: reaching it is the refusal.
    let limit = MAX_REQUEST_BYTES as u64 + 1;
    flate2::read::MultiGzDecoder::new(body)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|_| IngestError::InvalidCompression)?;
    if out.len() > MAX_REQUEST_BYTES {
        return Err(IngestError::InflatesTooLarge);
    }
    Ok(out)
}

/// The write key of a request: the HTTP Basic user of `authorization`
/// (with an empty password, as the client libraries send it), else the
/// body's `writeKey`.
pub fn write_key(authorization: Option<&str>, body_key: Option<&str>) -> Option<String> {
    let from_header = authorization.and_then(|h| {
        let (scheme, credentials) = h.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(credentials.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let user = text.split_once(':').map_or(text.as_str(), |(u, _)| u);
        (!user.is_empty()).then(|| user.to_owned())
    });
    from_header.or_else(|| body_key.filter(|k| !k.is_empty()).map(str::to_owned))
}

/// The source a request is for: its write key ([`write_key`]) looked up
/// with `known`. No key is [`IngestError::MissingWriteKey`]; a key `known`
/// does not find is [`IngestError::UnknownWriteKey`] (answered 401:
/// Segment answers 200 and drops the data, which a self-hosted relay must
/// not do silently).
pub fn authenticate<T>(
    authorization: Option<&str>,
    body_key: Option<&str>,
    known: impl FnOnce(&str) -> Option<T>,
) -> Result<T, IngestError> {
    let key = write_key(authorization, body_key).ok_or(IngestError::MissingWriteKey)?;
    known(&key).ok_or(IngestError::UnknownWriteKey)
}

/// The body's own `writeKey`, found by a syntax-only scan of the top
/// level that builds no value: a host checks the key before the full parse
/// (credentials before expensive work).
/// As `JSON.parse` reads a repeated key, the last `writeKey` member counts,
/// and it must be a non-empty string; [`parse_request`]'s
/// [`Parsed::body_write_key`] reads the same one. `None` when the body has
/// none, is not a JSON object, or is not JSON.
pub fn body_write_key(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let mut p = Parser::new(text);
    p.ws();
    if !p.eat(b'{') {
        return None;
    }
    let mut found = None;
    p.entries(|p, key| -> Result<(), JsonError> {
        p.ws();
        if key == "writeKey" {
            found = if p.peek() == Some(b'"') {
                Some(p.string()?.into_owned())
            } else {
                p.skip_value()?;
                None
            };
            return Ok(());
        }
        p.skip_value()
    })
    .ok()?;
    p.end().ok()?;
    found.filter(|k| !k.is_empty())
}

/// A call accepted and enriched.
#[derive(Clone)]
pub struct Accepted {
    /// Its position in the request.
    pub index: usize,
    /// The call, enriched: the webhook body is built from it.
    pub call: Call,
    /// `messageId` (the sender's, or one filled in).
    pub message_id: String,
    /// The enriched Segment message, in `JSON.stringify` form: what a
    /// host stores.
    pub message: String,
}

impl Accepted {
    /// Whether the call lets the Webhooks destination have it (its
    /// `integrations`; see [`routing`](crate::routing)).
    pub fn webhooks_enabled(&self) -> bool {
        crate::routing::is_enabled(self.call.integrations.as_ref(), crate::routing::WEBHOOKS)
    }
}

/// Customer data: `Debug` shows the id only.
impl fmt::Debug for Accepted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Accepted")
            .field("index", &self.index)
            .field("kind", &self.call.kind)
            .field("message_id", &self.message_id)
            .finish_non_exhaustive()
    }
}

/// A call refused on its own: the others in its batch are kept.
#[derive(Clone)]
pub struct Rejected {
    /// Its position in the request.
    pub index: usize,
    /// Why.
    pub error: CallError,
    /// The call's JSON text as it came.
    pub text: String,
}

/// Customer data: `Debug` shows the code only.
impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("index", &self.index)
            .field("code", &self.error.code())
            .finish_non_exhaustive()
    }
}

/// A request split into its calls.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The body's `writeKey`, if it has one.
    pub body_write_key: Option<String>,
    /// Every call, in order: accepted or rejected.
    pub calls: Vec<Result<Accepted, Rejected>>,
}

/// The fields of a batch that apply to each of its calls.
#[derive(Default)]
struct BatchFields {
    sent_at: Option<Timestamp>,
    context: Option<Map>,
    integrations: Option<Map>,
    write_key: Option<String>,
}

/// Parses a Tracking API request body (decompressed) received at
/// `received_at`: splits it into calls, checks the limits, and enriches
/// each call. `random` gives 16 random bytes for each `messageId` that must
/// be filled in.
///
/// A body that is not JSON, over a limit, or not a batch refuses the whole
/// request ([`IngestError`]); a call that breaks the spec is
/// [`Rejected`] and its batch's other calls are kept, except on a
/// single-call route, where the one call is the request.
pub fn parse_request(
    route: Route,
    body: &[u8],
    received_at: Timestamp,
    random: &mut dyn FnMut() -> [u8; 16],
) -> Result<Parsed, IngestError> {
    if body.len() > MAX_REQUEST_BYTES {
        return Err(IngestError::BatchTooLarge(body.len()));
    }
    let text =
        std::str::from_utf8(body).map_err(|_| IngestError::Json(JsonError::InvalidUnicode))?;
    let mut batch = BatchFields::default();
    let spans = match route {
        Route::Batch => split_batch(text, &mut batch)?,
        Route::Single(_) => {
            let mut p = Parser::new(text);
            p.ws();
            let start = p.pos();
            p.skip_value().map_err(IngestError::Json)?;
            let span = p.since(start);
            p.end().map_err(IngestError::Json)?;
            if !span.starts_with('{') {
                return Err(IngestError::InvalidBatch(
                    "the body must be a JSON object: one call",
                ));
            }
            vec![span]
        }
    };
    if spans.len() > MAX_BATCH_CALLS {
        return Err(IngestError::TooManyCalls(spans.len()));
    }
    if let Some((index, span)) = spans
        .iter()
        .enumerate()
        .find(|(_, s)| s.len() > MAX_CALL_BYTES)
    {
        return Err(IngestError::CallTooLarge {
            index,
            bytes: span.len(),
        });
    }
    let forced = match route {
        Route::Single(kind) => Some(kind),
        Route::Batch => None,
    };
    let mut calls = Vec::with_capacity(spans.len());
    for (index, span) in spans.into_iter().enumerate() {
        let mut sent_at = None;
        let parsed = Call::from_json_str_with(span, forced, |key, p| {
            match key {
                "sentAt" => {
                    // Advisory, as Segment treats it: one that does not
                    // parse is ignored, and no skew correction happens.
                    sent_at = match p.value(2)? {
                        Value::String(s) => Timestamp::parse(&s).ok(),
                        _ => None,
                    };
                }
                // The last one counts, as JSON.parse reads it (and as
                // body_write_key does).
                "writeKey" if forced.is_some() => {
                    batch.write_key = match p.value(2)? {
                        Value::String(s) => Some(s),
                        _ => None,
                    };
                }
                _ => return Ok(false),
            }
            Ok(true)
        });
        let parsed = parsed.and_then(check_message_id);
        match parsed {
            Ok(call) => {
                let accepted = enrich(index, call, sent_at, &batch, received_at, random)
                    .map_err(IngestError::Json)?;
                calls.push(Ok(accepted));
            }
            // A syntax error cannot be one call's: the splitter checked the
            // syntax, so this is a value rule (depth, number, surrogate).
            Err(error) if forced.is_some() => return Err(IngestError::Call(error)),
            Err(error) => calls.push(Err(Rejected {
                index,
                error,
                text: span.to_owned(),
            })),
        }
    }
    Ok(Parsed {
        body_write_key: batch.write_key,
        calls,
    })
}

/// A `messageId` every store can key on (see [`MAX_MESSAGE_ID_BYTES`]):
/// not over the limit, and without U+0000, which Postgres's `text` cannot
/// hold.
fn check_message_id(call: Call) -> Result<Call, CallError> {
    let invalid = |got| CallError::InvalidField {
        field: "messageId",
        expected: "a string of at most 1000 bytes without U+0000",
        got,
    };
    match call.message_id.as_deref() {
        Some(id) if id.len() > MAX_MESSAGE_ID_BYTES => Err(invalid("a longer string")),
        Some(id) if id.contains('\0') => Err(invalid("a string with U+0000")),
        _ => Ok(call),
    }
}

/// The batch body's calls, as text spans, and its batch-level fields.
fn split_batch<'a>(text: &'a str, batch: &mut BatchFields) -> Result<Vec<&'a str>, IngestError> {
    let mut p = Parser::new(text);
    p.ws();
    if !p.eat(b'{') {
        p.skip_value().map_err(IngestError::Json)?;
        p.end().map_err(IngestError::Json)?;
        return Err(IngestError::InvalidBatch(
            "the body must be a JSON object with a batch array",
        ));
    }
    let mut spans = None;
    let mut misshapen = None;
    p.entries(|p, key| -> Result<(), JsonError> {
        p.ws();
        match &*key {
            "batch" => {
                if !p.eat(b'[') {
                    p.skip_value()?;
                    misshapen = Some("batch must be an array of calls");
                    return Ok(());
                }
                let mut found = Vec::new();
                p.ws();
                if !p.eat(b']') {
                    loop {
                        p.ws();
                        let start = p.pos();
                        p.skip_value()?;
                        found.push(p.since(start));
                        p.ws();
                        if p.eat(b']') {
                            break;
                        }
                        if !p.eat(b',') {
                            return Err(JsonError::InvalidJson(format!(
                                "expected ',' or ']' at byte {}",
                                p.pos()
                            )));
                        }
                    }
                }
                spans = Some(found);
            }
            "sentAt" => {
                if let Value::String(s) = p.value(2)? {
                    batch.sent_at = Timestamp::parse(&s).ok();
                }
            }
            "context" => {
                if let Value::Object(m) = p.value(2)? {
                    batch.context = Some(m);
                }
            }
            "integrations" => {
                if let Value::Object(m) = p.value(2)? {
                    batch.integrations = Some(m);
                }
            }
            "writeKey" => {
                batch.write_key = match p.value(2)? {
                    Value::String(s) => Some(s),
                    _ => None,
                };
            }
            _ => p.skip_value()?,
        }
        Ok(())
    })
    .map_err(IngestError::Json)?;
    p.end().map_err(IngestError::Json)?;
    if let Some(why) = misshapen {
        return Err(IngestError::InvalidBatch(why));
    }
    spans.ok_or(IngestError::InvalidBatch("the body has no batch array"))
}

/// A call the service makes itself (a delete notification, an audience
/// identify), enriched as a received one would be at `now`: a `messageId`
/// filled in when it has none, `receivedAt` set, and its message text.
pub fn originate(
    call: Call,
    now: Timestamp,
    random: &mut dyn FnMut() -> [u8; 16],
) -> Result<Accepted, CallError> {
    call.validate()?;
    enrich(0, call, None, &BatchFields::default(), now, random).map_err(CallError::from)
}

/// Completes an accepted call as Segment's servers do (module docs).
fn enrich(
    index: usize,
    mut call: Call,
    sent_at: Option<Timestamp>,
    batch: &BatchFields,
    received_at: Timestamp,
    random: &mut dyn FnMut() -> [u8; 16],
) -> Result<Accepted, JsonError> {
    if call.message_id.as_deref().is_none_or(str::is_empty) {
        let id = uuid::Builder::from_random_bytes(random()).into_uuid();
        call.message_id = Some(id.hyphenated().to_string());
    }
    let sent_at = sent_at.or(batch.sent_at);
    let original = call.timestamp;
    call.timestamp = Some(match (original, sent_at) {
        (Some(o), Some(s)) => {
            Timestamp::saturating_from_millis(received_at.as_millis() - s.millis_since(o))
        }
        (Some(o), None) => o,
        (None, _) => received_at,
    });
    if let Some(extra) = &batch.context {
        let mut context = call
            .context
            .take()
            .map(Object::into_map)
            .unwrap_or_default();
        merge_missing(&mut context, extra);
        call.context = Some(Object::Map(context));
    }
    if let Some(extra) = &batch.integrations {
        let mut integrations = call.integrations.take().unwrap_or_default();
        merge_missing(&mut integrations, extra);
        call.integrations = Some(integrations);
    }
    let mut message = Vec::with_capacity(call.capacity_hint() + 96);
    call.write_message(&mut message)?;
    // The three server timestamps, after the call's own fields.
    message.pop();
    for (key, value) in [
        ("originalTimestamp", original),
        ("sentAt", sent_at),
        ("receivedAt", Some(received_at)),
    ] {
        if let Some(t) = value {
            message.extend_from_slice(b",\"");
            message.extend_from_slice(key.as_bytes());
            message.extend_from_slice(b"\":\"");
            t.write_iso(&mut message);
            message.push(b'"');
        }
    }
    message.push(b'}');
    let message = String::from_utf8(message).map_err(|_| JsonError::InvalidUnicode)?;
    Ok(Accepted {
        index,
        message_id: call.message_id.clone().unwrap_or_default(),
        call,
        message,
    })
}

/// Adds `from`'s keys that `into` lacks: the call's own keys win.
fn merge_missing(into: &mut Map, from: &Map) {
    for (k, v) in from {
        if !into.contains_key(k) {
            into.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ids() -> impl FnMut() -> [u8; 16] {
        let mut n = 0u8;
        move || {
            n += 1;
            [n; 16]
        }
    }

    #[test]
    fn the_body_write_key_is_the_one_the_full_parse_reads() {
        let key = |b: &str| body_write_key(b.as_bytes());
        let parsed = |b: &str| {
            parse_request(
                Route::Batch,
                b.as_bytes(),
                Timestamp::saturating_from_millis(0),
                &mut ids(),
            )
            .map(|p| p.body_write_key.filter(|k| !k.is_empty()))
        };
        for (body, want) in [
            (r#"{"writeKey":"wk","batch":[]}"#, Some("wk")),
            (
                r#" { "batch" : [ {"writeKey":"inner"} ], "writeKey" : "w\u006b" } "#,
                Some("wk"),
            ),
            // JSON.parse keeps the last of a repeated key.
            (r#"{"writeKey":"A","batch":[],"writeKey":"B"}"#, Some("B")),
            (r#"{"writeKey":"","batch":[],"writeKey":"B"}"#, Some("B")),
            (r#"{"writeKey":"A","batch":[],"writeKey":1}"#, None),
            (r#"{"writeKey":"A","batch":[],"writeKey":""}"#, None),
            (r#"{"batch":[]}"#, None),
            (r#"{"writeKey":17,"batch":[]}"#, None),
        ] {
            assert_eq!(key(body).as_deref(), want, "{body}");
            assert_eq!(parsed(body).unwrap().as_deref(), want, "{body}");
        }
        for not_json in [
            r#"[{"writeKey":"wk"}]"#,
            r#"{"writeKey":"wk", this is not json"#,
            r#"{"batch": [ "#,
            "",
        ] {
            assert_eq!(key(not_json), None, "{not_json}");
        }
        assert_eq!(body_write_key(b"{\"writeKey\":\"\xff\"}"), None);
    }

    #[test]
    fn webhooks_enabled_follows_the_calls_integrations() {
        let body = br#"{"batch":[
            {"type":"track","userId":"u","event":"e"},
            {"type":"track","userId":"u","event":"e","integrations":{"Webhooks":false}},
            {"type":"track","userId":"u","event":"e","integrations":{"All":false}}]}"#;
        let parsed = parse_request(
            Route::Batch,
            body,
            Timestamp::saturating_from_millis(0),
            &mut ids(),
        )
        .unwrap();
        let enabled: Vec<bool> = parsed
            .calls
            .iter()
            .map(|c| c.as_ref().unwrap().webhooks_enabled())
            .collect();
        assert_eq!(enabled, [true, false, false]);
    }

    #[test]
    fn authenticate_says_which_key_is_wrong() {
        let known = |k: &str| (k == "wk").then_some("web");
        assert_eq!(authenticate(None, Some("wk"), known), Ok("web"));
        assert_eq!(
            authenticate(None, Some("other"), known),
            Err(IngestError::UnknownWriteKey)
        );
        assert_eq!(
            authenticate(Some("Bearer x"), None, known),
            Err(IngestError::MissingWriteKey)
        );
        assert_eq!(IngestError::UnknownWriteKey.status(), 401);
    }

    #[test]
    fn a_syntax_error_in_one_call_refuses_the_request() {
        // The splitter checks the whole body's syntax first: a broken call
        // cannot be told apart from a broken batch.
        let body = br#"{"batch":[{"type":"track","userId":"u","event":"e"},{"type":}]}"#;
        let err = parse_request(Route::Batch, body, Timestamp::MIN, &mut ids()).unwrap_err();
        assert_eq!(err.code(), Code::InvalidJson);
    }

    #[test]
    fn deep_nesting_refuses_only_its_call() {
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let body = format!(
            r#"{{"batch":[{{"type":"track","userId":"u","event":"e","properties":{{"d":{deep}}}}},{{"type":"track","userId":"u","event":"e"}}]}}"#
        );
        let parsed =
            parse_request(Route::Batch, body.as_bytes(), Timestamp::MIN, &mut ids()).unwrap();
        assert_eq!(parsed.calls.len(), 2);
        assert_eq!(
            parsed.calls[0].as_ref().unwrap_err().error.code(),
            Code::TooDeep
        );
        assert!(parsed.calls[1].is_ok());
    }

    #[test]
    fn originated_calls_get_an_id_and_receipt_time() {
        let mut call = Call::new(CallKind::Delete);
        call.user_id = Some("u".into());
        let now = Timestamp::from_millis(1_000).unwrap();
        let a = originate(call, now, &mut ids()).unwrap();
        assert_eq!(a.message_id, "01010101-0101-4101-8101-010101010101");
        assert_eq!(
            a.message,
            r#"{"type":"delete","messageId":"01010101-0101-4101-8101-010101010101","timestamp":"1970-01-01T00:00:01.000Z","userId":"u","receivedAt":"1970-01-01T00:00:01.000Z"}"#
        );
        assert_eq!(
            originate(Call::new(CallKind::Delete), now, &mut ids())
                .unwrap_err()
                .code(),
            Code::MissingUserId
        );
    }
}
