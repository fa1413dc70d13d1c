//! Segment's Tracking API: `POST /v1/*`, its CORS preflight, and the
//! answers of the core's [`ingest`] rules.
//!
//! A request is refused as early, and as cheaply, as it can be:
//!
//! 1. the relay is not taking calls: 503;
//! 2. the route ([`Route::from_path`]): 404;
//! 3. `Content-Type`, `Content-Encoding`, `Content-Length`
//!    ([`ingest::check_headers`]), before any byte of the body is read;
//! 4. a write key in the `Authorization` header is looked up now: an
//!    unknown one is 401 before the body is read;
//! 5. backpressure: the storage writer is behind, 503 + `Retry-After`;
//! 6. the body, read to [`ingest::MAX_REQUEST_BYTES`] at most, within
//!    `limits.body_timeout`, then inflated by the core (capped);
//! 7. with no key in the header, the body's `writeKey`, found by the
//!    core's shallow scan ([`ingest::body_write_key`]): missing or unknown
//!    is 401 before the body is parsed;
//! 8. the core's parse and enrichment ([`ingest::parse_request`]);
//! 9. the store: the answer is 200 only once the calls are durable; any
//!    store failure is 503 + `Retry-After`, nothing acknowledged.
//!
//! With `[tracing]`, each POST is an `ingest` span from its headers to the
//! store's answer (a child of the request's `traceparent`, if valid), and
//! its context is stored with its calls.

use super::{
    body_failed, body_timeout, header, json, read_body, refusal, with, Answer, Api, BodyError,
    Throttle,
};
use crate::config::Source;
use crate::state::Relay;
use crate::store::RejectedRow;
use crate::trace::Span;
use bytes::Bytes;
use callpost_core::ingest::{self, IngestError, Route};
use callpost_core::Code;
use http::header::{
    HeaderName, HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS, ALLOW,
    AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ORIGIN, RETRY_AFTER, VARY,
};
use http::{HeaderMap, Method, Request};
use hyper::body::Incoming;
use std::sync::Arc;
use std::time::Instant;

/// A store failure is logged at most once a second (a stuck database
/// fails every request).
static STORE_FAILED: Throttle = Throttle::new(std::time::Duration::from_secs(1));

/// Answers a request to `/v1/*`, and counts it by status.
pub(crate) async fn handle(api: &Api, req: Request<Incoming>, headers_in: Instant) -> Answer {
    let relay = &api.relay;
    let cors = cors(&relay.cfg.cors_origins, req.headers());
    let answer = match *req.method() {
        Method::POST => {
            let mut span = relay.tracer.as_ref().and_then(|t| {
                t.ingest(
                    header(req.headers(), &HeaderName::from_static("traceparent")),
                    headers_in,
                )
            });
            let answer = match ingest(relay, req, headers_in, span.as_mut()).await {
                Ok(()) => json(200, Bytes::from_static(ingest::SUCCESS_BODY.as_bytes())),
                Err(Refusal::Ingest(e)) => refuse(&e),
                Err(Refusal::Answer(a)) => a,
            };
            if let (Some(tracer), Some(mut span)) = (&relay.tracer, span) {
                let status = answer.status().as_u16();
                span.set_int("http.response.status_code", i64::from(status));
                // A server span fails on a 5xx only (OpenTelemetry's HTTP
                // conventions): a 4xx is the sender's mistake.
                if status >= 500 {
                    span.set_error();
                }
                tracer.end(span);
            }
            answer
        }
        Method::OPTIONS => return preflight(relay, req.headers(), cors),
        _ => with(
            refusal(Code::MethodNotAllowed, "use POST"),
            ALLOW,
            HeaderValue::from_static("POST, OPTIONS"),
        ),
    };
    relay.metrics.request(answer.status().as_u16());
    add(answer, cors)
}

/// Why a request was not accepted.
enum Refusal {
    /// The core's refusal, answered with its status, code and
    /// `Retry-After`.
    Ingest(IngestError),
    /// An answer of the HTTP layer (a slow or broken body).
    Answer(Answer),
}

impl From<IngestError> for Refusal {
    fn from(e: IngestError) -> Self {
        Self::Ingest(e)
    }
}

fn refuse(e: &IngestError) -> Answer {
    let mut a = json(e.status(), e.to_json());
    if let Some(s) = e.retry_after() {
        a = with(a, RETRY_AFTER, HeaderValue::from(s));
    }
    a
}

async fn ingest(
    relay: &Relay,
    req: Request<Incoming>,
    headers_in: Instant,
    span: Option<&mut Span>,
) -> Result<(), Refusal> {
    if !relay.is_ready() {
        return Err(IngestError::Unavailable.into());
    }
    let route = Route::from_path(req.uri().path()).ok_or(IngestError::UnknownRoute)?;
    let h = req.headers();
    let declared = header(h, &CONTENT_LENGTH).and_then(|v| v.trim().parse::<usize>().ok());
    let gzip = ingest::check_headers(
        header(h, &CONTENT_TYPE),
        header(h, &CONTENT_ENCODING),
        declared,
    )?;
    // Credentials before the body: a key in the header is the one that
    // counts (the core's precedence), so an unknown one is refused before
    // a byte of the body is read. Write keys are public (browsers send
    // them); they are still never logged.
    let header_source =
        match header(h, &AUTHORIZATION).and_then(|a| ingest::write_key(Some(a), None)) {
            Some(key) => Some(lookup(relay, &key)?),
            None => None,
        };
    if relay.store.backlog() > relay.cfg.max_backlog {
        return Err(IngestError::Overloaded.into());
    }
    let deadline = headers_in + relay.cfg.limits.body_timeout;
    let body = match read_body(
        req.into_body(),
        ingest::MAX_REQUEST_BYTES,
        declared,
        deadline,
    )
    .await
    {
        Ok(b) => b,
        // The core's refusal for a body over the limit; what is left of
        // it is not read.
        Err(BodyError::TooLarge) => {
            return Err(IngestError::BatchTooLarge(ingest::MAX_REQUEST_BYTES + 1).into())
        }
        Err(BodyError::TimedOut) => return Err(Refusal::Answer(body_timeout(relay))),
        Err(BodyError::Failed) => return Err(Refusal::Answer(body_failed())),
    };
    let body = if gzip {
        Bytes::from(ingest::inflate(&body)?)
    } else {
        body
    };
    let source = match header_source {
        Some(s) => s,
        None => {
            let key = ingest::write_key(None, ingest::body_write_key(&body).as_deref())
                .ok_or(IngestError::MissingWriteKey)?;
            lookup(relay, &key)?
        }
    };
    let now = relay.clock.now();
    let Some(parsed) =
        crate::ops::with_random_ids(|ids| ingest::parse_request(route, &body, now, ids))
    else {
        // Never repeat ids: an OS with no randomness stores nothing.
        tracing::error!("the operating system gave no random bytes for messageIds; answered 503");
        return Err(IngestError::Unavailable.into());
    };
    let parsed = parsed?;
    let received_at = now.as_millis();
    let mut rows = Vec::with_capacity(parsed.calls.len());
    let mut rejected = Vec::new();
    let mut total = 0;
    let mut suppressed = 0;
    let hidden = relay.suppressed();
    for call in parsed.calls {
        match call {
            Ok(a) => {
                // A suppressed user's call is acknowledged, and neither
                // stored nor delivered.
                let (user, anonymous) = (a.call.user_id.as_deref(), a.call.anonymous_id.as_deref());
                if !hidden.is_empty() && relay.is_suppressed(&hidden, user, anonymous) {
                    suppressed += 1;
                    continue;
                }
                total += 1;
                crate::ops::push_rows(&mut rows, &source, a, received_at);
            }
            // A refused call of a suppressed user is not kept for review
            // either (its text names the user).
            Err(r) if !hidden.is_empty() && refused_of(relay, &hidden, &r.text) => {
                suppressed += 1;
            }
            Err(r) => rejected.push(RejectedRow {
                source: source.name.clone(),
                received_at,
                code: r.error.code().as_str(),
                reason: r.error.to_string(),
                text: r.text,
            }),
        }
    }
    let codes: Vec<&'static str> = rejected.iter().map(|r| r.code).collect();
    let trace_parent = span.map(|s| {
        s.set_str("callpost.source", source.name.clone());
        s.set_int("callpost.calls", (rows.len() + rejected.len()) as i64);
        s.context.traceparent()
    });
    let new = match relay
        .store
        .insert_traced(rows, rejected, trace_parent)
        .await
    {
        Ok(n) => n,
        Err(e) => {
            if let Some(held) = STORE_FAILED.allow() {
                tracing::warn!(
                    "storing calls failed: {e}; answered 503 ({held} more since the last warning)"
                );
            }
            return Err(IngestError::Unavailable.into());
        }
    };
    let m = &relay.metrics;
    m.calls(&source.name, "accepted", new as u64, None);
    if suppressed > 0 {
        m.calls(&source.name, "suppressed", suppressed, None);
    }
    if total > new {
        m.calls(&source.name, "duplicate", (total - new) as u64, None);
    }
    for code in codes {
        m.calls(&source.name, "rejected", 1, Some(code));
    }
    if new > 0 {
        relay.wake.notify_one();
    }
    Ok(())
}

fn lookup(relay: &Relay, key: &str) -> Result<Arc<Source>, IngestError> {
    relay
        .sources()
        .write_keys
        .get(key)
        .cloned()
        .ok_or(IngestError::UnknownWriteKey)
}

// -- CORS -----------------------------------------------------------------

type Headers = Vec<(HeaderName, HeaderValue)>;

/// The CORS headers for a request's `Origin`: `*` when any origin may
/// send, the origin itself (and `Vary: Origin`) when it is listed, none
/// otherwise.
fn cors(origins: &[String], headers: &HeaderMap) -> Headers {
    let Some(origin) = headers.get(ORIGIN) else {
        return Vec::new();
    };
    if origins.iter().any(|o| o == "*") {
        return vec![(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"))];
    }
    if origins.iter().any(|o| o.as_bytes() == origin.as_bytes()) {
        return vec![
            (ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone()),
            (VARY, HeaderValue::from_static("Origin")),
        ];
    }
    Vec::new()
}

fn add(mut a: Answer, headers: Headers) -> Answer {
    for (k, v) in headers {
        a.headers_mut().append(k, v);
    }
    a
}

/// A browser's preflight: 204 with the methods and the headers it asked
/// for, or 403 for an origin not listed.
fn preflight(relay: &Relay, headers: &HeaderMap, cors: Headers) -> Answer {
    if cors.is_empty() {
        let a = refusal(Code::OriginNotAllowed, "origin not allowed");
        relay.metrics.request(403);
        return a;
    }
    let requested = headers
        .get(ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("content-type"));
    let mut a = add(json(204, Bytes::new()), cors);
    let h = a.headers_mut();
    h.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, OPTIONS"),
    );
    h.insert(ACCESS_CONTROL_ALLOW_HEADERS, requested);
    h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    relay.metrics.request(204);
    a
}

/// Whether a refused call's text names a suppressed user (its `userId` or
/// `anonymousId`, when it is a JSON object that has them as strings).
fn refused_of(relay: &Relay, hidden: &std::collections::HashSet<String>, text: &str) -> bool {
    let Ok(serde_json::Value::Object(call)) = serde_json::from_str::<serde_json::Value>(text)
    else {
        return false;
    };
    let id = |k: &str| call.get(k).and_then(serde_json::Value::as_str);
    relay.is_suppressed(hidden, id("userId"), id("anonymousId"))
}
