//! Signed requests: headers, `X-Signature` and the idempotency key.

use super::Endpoint;
use crate::call::CallError;
use crate::code::Code;
use crate::misuse::ApiMisuse;
use crate::signature::{Secret, SIGNATURE_HEX_LEN};
use crate::standard::StandardSecret;
use crate::timestamp::Timestamp;
use std::borrow::Cow;
use std::fmt;

/// Why [`Webhooks::request`](super::Webhooks::request) built no request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The call is invalid, or holds a value with no JSON form. Fix the call.
    #[error(transparent)]
    Call(#[from] CallError),
    /// An endpoint index past the configured endpoints.
    #[error(transparent)]
    Misuse(#[from] ApiMisuse),
    /// The destination's mapping built a body over
    /// [`MAX_BODY_BYTES`](crate::mapping::MAX_BODY_BYTES) for the call.
    #[error("the mapped body is over {} bytes", crate::mapping::MAX_BODY_BYTES)]
    MappedBodyTooLarge,
    /// The endpoint's URL template has no value for the call.
    #[error(transparent)]
    InvalidUrlValue(#[from] crate::mapping::UrlValueError),
}

impl RequestError {
    /// The stable code.
    pub fn code(&self) -> Code {
        match self {
            Self::Call(e) => e.code(),
            Self::Misuse(e) => e.code(),
            Self::MappedBodyTooLarge => Code::MappedBodyTooLarge,
            Self::InvalidUrlValue(e) => e.code(),
        }
    }
}

/// The `User-Agent` we send: the spec asks for "a fixed sender identifier
/// with version 1.0".
pub const USER_AGENT: &str = "callpost/1.0";

/// Bodies from this size up are offered to a [`HostHmac`]. Below it the
/// core's own HMAC is as fast as any host's: in Node, OpenSSL's SHA-NI
/// overtakes SHA-1 in wasm at about 2 KB once the key's state is cached
/// (crossovers measured at 2,048-2,560 B; BENCHMARKS.md, "sign"), and
/// handing a body across the wasm boundary costs more than hashing a
/// small one.
pub const HOST_HMAC_MIN_BYTES: usize = 1792;

/// Request bodies from this size up are offered to a [`HostHmac`]: a
/// request's body is built in the core, so the host's HMAC also pays for
/// copying it out and for keying its HMAC afresh, about 6 µs in Node. The
/// crossover in Node is between 6,000 and 10,000 B (BENCHMARKS.md,
/// "request signing").
pub const HOST_HMAC_REQUEST_MIN_BYTES: usize = 8192;

/// A header name or value: most are constants (`User-Agent`,
/// `Content-Type`), which are borrowed, so building a request allocates only
/// for the values that change (`X-Signature`, `Idempotency-Key`): six
/// allocations fewer per webhook request.
pub type HeaderText = Cow<'static, str>;

/// An HTTP request ready to send.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    /// `POST`, or the destination's `PUT` or `PATCH` ([`Method`](super::Method)).
    pub method: &'static str,
    /// The full URL.
    pub url: String,
    /// Headers in the order to send them.
    pub headers: Vec<(HeaderText, HeaderText)>,
    /// The body bytes, which are also what `X-Signature` signs.
    pub body: Vec<u8>,
}

/// Shows header names and the body size only: header values may be
/// credentials, and bodies hold customer data.
impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_ref()).collect();
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("header_names", &names)
            .field("body_len", &self.body.len())
            .finish()
    }
}

impl Request {
    /// Adds the `Authorization` value of an OAuth 2.0 endpoint's token
    /// ([`crate::oauth::TokenSource::authorization`]), after the static
    /// headers (which cannot hold one when `auth` is set).
    pub fn authorize(&mut self, authorization: &str) {
        self.headers
            .push(("Authorization".into(), authorization.to_owned().into()));
    }

    /// The value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

/// A host's HMAC-SHA1 for `X-Signature`, for platforms whose own is faster
/// for large bodies (Node's OpenSSL, against SHA-1 in wasm): given the
/// body, it returns the lowercase hex HMAC-SHA1 under the destination's
/// shared secret, or `None` to let the core sign. The core asks only for
/// bodies of [`HOST_HMAC_REQUEST_MIN_BYTES`] and more, and signs itself whenever
/// the answer is not 40 lowercase hex digits, so a broken host can never
/// send a request with a malformed signature.
pub type HostHmac<'a> = &'a mut dyn FnMut(&[u8]) -> Option<String>;

/// The host's signature for `body`, when it gives a well-formed one.
fn host_signature(hmac: Option<HostHmac<'_>>, body: &[u8]) -> Option<String> {
    if body.len() < HOST_HMAC_REQUEST_MIN_BYTES {
        return None;
    }
    let hex = hmac?(body)?;
    let lower_hex = |b: u8| matches!(b, b'0'..=b'9' | b'a'..=b'f');
    (hex.len() == SIGNATURE_HEX_LEN && hex.bytes().all(lower_hex)).then_some(hex)
}

/// A `webhook-id` for a call without a usable messageId: `msg_` and the
/// first 16 bytes of the body's SHA-256, in hex.
fn body_id(body: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body);
    format!("msg_{}", hex::encode(&digest[..16]))
}

/// The request for `body` to `ep`. Headers, in order: `User-Agent`,
/// `Content-Type`, the endpoint's static headers, a Basic `Authorization`
/// (when its auth is basic), `X-Signature` (when
/// signed), `Idempotency-Key` (when the call has a usable id), then the
/// Standard Webhooks headers when `standard` gives their secrets and the
/// sending time.
#[allow(clippy::too_many_arguments)] // one request's every part
pub(super) fn build(
    ep: &Endpoint,
    url: &str,
    method: super::Method,
    secret: Option<&Secret>,
    standard: Option<(&[StandardSecret], Timestamp)>,
    message_id: Option<&str>,
    body: Vec<u8>,
    hmac: Option<HostHmac<'_>>,
) -> Request {
    let mut headers = Vec::with_capacity(7 + ep.headers().len());
    headers.push(("User-Agent".into(), USER_AGENT.into()));
    headers.push(("Content-Type".into(), "application/json".into()));
    headers.extend(
        ep.headers()
            .iter()
            .map(|(n, v)| (n.clone().into(), v.clone().into())),
    );
    // A bearer token changes while the settings stay: the host adds it
    // ([`Request::authorize`]).
    if let Some(super::Auth::Basic { username, password }) = ep.auth() {
        headers.push((
            "Authorization".into(),
            super::Auth::basic_header(username, password).into(),
        ));
    }
    if let Some(secret) = secret {
        let signature = host_signature(hmac, &body).unwrap_or_else(|| secret.sign(&body));
        headers.push(("X-Signature".into(), signature.into()));
    }
    // Receivers de-duplicate retried deliveries with it. Only visible
    // ASCII can travel in a header, so other ids are left out rather than
    // mangled.
    let usable =
        message_id.filter(|id| !id.is_empty() && id.bytes().all(|b| (0x21..0x7f).contains(&b)));
    if let Some(id) = usable {
        headers.push(("Idempotency-Key".into(), id.to_owned().into()));
    }
    if let Some((secrets, now)) = standard {
        // The specification needs an id; a call always has a messageId by
        // the time it is delivered, and one a header cannot carry gets the
        // body's digest, which is the same on every retry.
        let id = usable.map_or_else(|| body_id(&body), str::to_owned);
        // Never fails: the settings hold at least one secret.
        if let Ok(signed) = crate::standard::sign(&id, now, &body, secrets) {
            headers.extend(signed.into_iter().map(|(n, v)| (n.into(), v.into())));
        }
    }
    Request {
        method: method.as_str(),
        url: url.to_owned(),
        headers,
        body,
    }
}
