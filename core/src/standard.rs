//! Standard Webhooks signatures (<https://www.standardwebhooks.com>), the
//! scheme Svix, Convoy and Outpost sign with: three headers,
//!
//! * `webhook-id`: the message's id (for a call, its `messageId`), the same
//!   on every retry, so a receiver can drop a request it has seen;
//! * `webhook-timestamp`: the sending time, whole seconds since the epoch;
//! * `webhook-signature`: `v1,<base64 HMAC-SHA256>` of `id.timestamp.body`
//!   under each secret, space-separated, so a sender rotating its secret
//!   signs with both and receivers holding either verify.
//!
//! Unlike `X-Signature` ([`crate::signature`]) the timestamp is signed: a
//! receiver refuses a request outside its tolerance, so a captured request
//! cannot be replayed later. Secrets are `whsec_` and the base64 of the key
//! bytes, as the specification's libraries take them.
//!
//! Sans-IO: the caller gives the time to sign at and the time to verify at.

use crate::code::Code;
use crate::timestamp::Timestamp;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// The message id header.
pub const ID_HEADER: &str = "webhook-id";
/// The timestamp header: whole seconds since the epoch.
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The signatures header: `v1,<base64>` entries separated by spaces.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
/// What a secret's text starts with (optional when parsing).
pub const SECRET_PREFIX: &str = "whsec_";
/// The signature scheme's version tag: the only one defined.
pub const VERSION: &str = "v1";

/// How far a request's timestamp may be from the receiver's clock, either
/// way: the specification's suggested default (5 minutes), which is also
/// what its reference libraries use.
pub const DEFAULT_TOLERANCE_MS: u64 = 5 * 60 * 1000;

/// The most signatures one header is read for: a sender rotating its
/// secret sends two; a header of thousands is an attack on the verifier's
/// time, and is refused rather than tried entry by entry.
pub const MAX_SIGNATURES: usize = 16;

/// Errors from Standard Webhooks signing and verifying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StandardError {
    /// The secret decodes to no bytes.
    #[error("the signing secret is empty")]
    EmptySecret,
    /// The secret is not `whsec_` and base64.
    #[error("a Standard Webhooks secret must be whsec_ followed by base64")]
    MalformedSecret,
    /// `verify` was given no secrets.
    #[error("no secrets given to verify against")]
    NoSecrets,
    /// One of the three headers is missing or empty.
    #[error("the request has no {0} header")]
    MissingHeader(&'static str),
    /// The timestamp is not whole seconds, or the signatures header holds
    /// no well-formed `v1` entry (or more than [`MAX_SIGNATURES`]).
    #[error("the {0} header is malformed")]
    Malformed(&'static str),
    /// The timestamp is older than the tolerance: a late or replayed
    /// request.
    #[error("the webhook-timestamp is more than the tolerance in the past")]
    TooOld,
    /// The timestamp is further ahead than the tolerance.
    #[error("the webhook-timestamp is more than the tolerance in the future")]
    TooNew,
    /// No `v1` signature matches under any of the secrets.
    #[error("no webhook-signature matches the request under any of the secrets")]
    Mismatch,
}

impl StandardError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::EmptySecret => Code::EmptySecret,
            Self::MalformedSecret => Code::MalformedSecret,
            Self::NoSecrets => Code::NoSecrets,
            Self::MissingHeader(_) => Code::MissingSignature,
            Self::Malformed(_) => Code::MalformedSignature,
            Self::TooOld => Code::TimestampTooOld,
            Self::TooNew => Code::TimestampTooNew,
            Self::Mismatch => Code::SignatureMismatch,
        }
    }
}

/// A Standard Webhooks secret, prekeyed. `Debug` never shows the key.
#[derive(Clone)]
pub struct StandardSecret {
    mac: HmacSha256,
}

impl fmt::Debug for StandardSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StandardSecret(<redacted>)")
    }
}

impl StandardSecret {
    /// Reads `whsec_<base64>` (the prefix may be left out; padding too, as
    /// the reference libraries allow).
    pub fn parse(text: &str) -> Result<Self, StandardError> {
        let b64 = text.strip_prefix(SECRET_PREFIX).unwrap_or(text);
        let trimmed = b64.trim_end_matches('=');
        let key = STANDARD_NO_PAD
            .decode(trimmed)
            .map_err(|_| StandardError::MalformedSecret)?;
        Self::from_bytes(&key)
    }

    /// A secret from its key bytes.
    pub fn from_bytes(key: &[u8]) -> Result<Self, StandardError> {
        if key.is_empty() {
            return Err(StandardError::EmptySecret);
        }
        // HMAC takes keys of any length.
        let mac = <HmacSha256 as KeyInit>::new_from_slice(key)
            .map_err(|_| StandardError::MalformedSecret)?;
        Ok(Self { mac })
    }

    fn mac(&self, id: &str, seconds: i64, body: &[u8]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(seconds.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// One `v1,<base64>` entry for `id`, `seconds` and `body`.
    pub fn sign(&self, id: &str, seconds: i64, body: &[u8]) -> String {
        let digest = self.mac(id, seconds, body).finalize().into_bytes();
        format!("{VERSION},{}", STANDARD.encode(digest))
    }
}

/// The three headers for `body` sent at `at` with message id `id`, signed
/// with each of `secrets` (in order; at least one).
pub fn sign(
    id: &str,
    at: Timestamp,
    body: &[u8],
    secrets: &[StandardSecret],
) -> Result<[(&'static str, String); 3], StandardError> {
    if secrets.is_empty() {
        return Err(StandardError::NoSecrets);
    }
    let seconds = at.as_millis().div_euclid(1000);
    let signatures: Vec<String> = secrets.iter().map(|s| s.sign(id, seconds, body)).collect();
    Ok([
        (ID_HEADER, id.to_owned()),
        (TIMESTAMP_HEADER, seconds.to_string()),
        (SIGNATURE_HEADER, signatures.join(" ")),
    ])
}

/// What a verified request said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandardVerified {
    /// `webhook-id`: drop a request whose id was seen before.
    pub id: String,
    /// `webhook-timestamp`, seconds since the epoch.
    pub timestamp: i64,
}

/// Verifies a request's Standard Webhooks headers against its raw `body`
/// at `now`: the timestamp within `tolerance_ms` either way, then some `v1`
/// signature matching under some secret, compared in constant time.
/// Header names match case-insensitively; the first of each counts.
pub fn verify<'a>(
    body: &[u8],
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    secrets: &[StandardSecret],
    now: Timestamp,
    tolerance_ms: u64,
) -> Result<StandardVerified, StandardError> {
    if secrets.is_empty() {
        return Err(StandardError::NoSecrets);
    }
    let (mut id, mut timestamp, mut signatures) = (None, None, None);
    for (name, value) in headers {
        let slot = if name.eq_ignore_ascii_case(ID_HEADER) {
            &mut id
        } else if name.eq_ignore_ascii_case(TIMESTAMP_HEADER) {
            &mut timestamp
        } else if name.eq_ignore_ascii_case(SIGNATURE_HEADER) {
            &mut signatures
        } else {
            continue;
        };
        slot.get_or_insert(value);
    }
    let present = |v: Option<&'a str>, name| {
        v.filter(|v| !v.is_empty())
            .ok_or(StandardError::MissingHeader(name))
    };
    let id = present(id, ID_HEADER)?;
    let timestamp = present(timestamp, TIMESTAMP_HEADER)?;
    let signatures = present(signatures, SIGNATURE_HEADER)?;
    // Whole seconds only: the reference libraries write integers, and a
    // receiver's cache of ids needs one spelling per request.
    let seconds: i64 = timestamp
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| timestamp.parse().ok())
        .flatten()
        .ok_or(StandardError::Malformed(TIMESTAMP_HEADER))?;
    let tolerance = i64::try_from(tolerance_ms / 1000).unwrap_or(i64::MAX);
    let now_s = now.as_millis().div_euclid(1000);
    if seconds < now_s.saturating_sub(tolerance) {
        return Err(StandardError::TooOld);
    }
    if seconds > now_s.saturating_add(tolerance) {
        return Err(StandardError::TooNew);
    }
    let mut given = Vec::new();
    for entry in signatures.split(' ').filter(|e| !e.is_empty()) {
        if given.len() == MAX_SIGNATURES {
            return Err(StandardError::Malformed(SIGNATURE_HEADER));
        }
        // Other versions are for other schemes: skipped, as the
        // specification asks.
        if let Some(b64) = entry.strip_prefix("v1,") {
            if let Ok(bytes) = STANDARD.decode(b64) {
                given.push(bytes);
            }
        }
    }
    if given.is_empty() {
        return Err(StandardError::Malformed(SIGNATURE_HEADER));
    }
    for secret in secrets {
        let mac = secret.mac(id, seconds, body);
        // `verify_slice` compares in constant time; each candidate is tried
        // against a fresh copy.
        if given
            .iter()
            .any(|sig| mac.clone().verify_slice(sig).is_ok())
        {
            return Ok(StandardVerified {
                id: id.to_owned(),
                timestamp: seconds,
            });
        }
    }
    Err(StandardError::Mismatch)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_millis(seconds * 1000).unwrap()
    }

    #[test]
    fn secrets_parse_with_or_without_prefix_and_padding_and_hide() {
        let a = StandardSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let b = StandardSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(a.sign("m", 1, b"x"), b.sign("m", 1, b"x"));
        assert_eq!(format!("{a:?}"), "StandardSecret(<redacted>)");
        assert_eq!(
            StandardSecret::parse("whsec_").unwrap_err(),
            StandardError::EmptySecret
        );
        assert_eq!(
            StandardSecret::parse("whsec_not base64!")
                .unwrap_err()
                .code(),
            Code::MalformedSecret
        );
    }

    #[test]
    fn a_header_of_too_many_signatures_is_refused_before_any_is_tried() {
        let s = StandardSecret::parse("whsec_c2VjcmV0").unwrap();
        let many = vec!["v1,AAAA"; MAX_SIGNATURES + 1].join(" ");
        let headers = [
            (ID_HEADER, "m"),
            (TIMESTAMP_HEADER, "100"),
            (SIGNATURE_HEADER, many.as_str()),
        ];
        let e = verify(b"{}", headers, &[s], at(100), DEFAULT_TOLERANCE_MS).unwrap_err();
        assert_eq!(e, StandardError::Malformed(SIGNATURE_HEADER));
    }
}
