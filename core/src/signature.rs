//! `X-Signature`: lowercase hex HMAC-SHA1 of the exact body bytes, keyed with
//! the destination's shared secret (webhooks-destination.md, Authentication).

use crate::code::Code;
use hmac::digest::CtOutput;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use std::fmt;

type HmacSha1 = Hmac<Sha1>;

/// Hex characters in a signature (SHA-1 is 20 bytes).
pub const SIGNATURE_HEX_LEN: usize = 40;

/// The header the signature travels in (webhooks-destination.md,
/// Authentication).
pub const SIGNATURE_HEADER: &str = "X-Signature";

/// The signature among a request's headers: the first header named
/// [`SIGNATURE_HEADER`], matched case-insensitively as HTTP header names
/// are. Hosts pass their framework's headers as name/value pairs.
pub fn signature_header<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<&'a str> {
    headers
        .into_iter()
        .find(|(name, _)| is_signature_header(name))
        .map(|(_, value)| value)
}

/// Whether a header name is [`SIGNATURE_HEADER`]'s (case-insensitively).
pub fn is_signature_header(name: &str) -> bool {
    name.eq_ignore_ascii_case(SIGNATURE_HEADER)
}

/// Errors from signing and verifying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The secret is empty. An empty shared secret means "unsigned" in the
    /// destination settings; to sign or verify, pass a non-empty one.
    #[error("shared secret is empty")]
    EmptySecret,
    /// `verify` was given no secrets. Pass at least one.
    #[error("no secrets given to verify against")]
    NoSecrets,
    /// The signature is not 40 hexadecimal characters; it cannot be ours.
    /// Treat the request as unauthenticated.
    #[error("signature is not 40 hexadecimal characters")]
    MalformedSignature,
    /// The request carries neither `X-Signature` nor `X-Segment-Signature`.
    /// Treat it as unauthenticated (the sender may have no shared secret
    /// set).
    #[error("the request has no X-Signature or X-Segment-Signature header")]
    MissingSignature,
    /// The signature matches the body under none of the secrets: the body
    /// was changed, or signed with another secret. Verify the raw body as
    /// received, before any parsing.
    #[error("the signature does not match the body under any of the secrets")]
    Mismatch,
    /// A batched body whose `X-Signature` covers only its first event
    /// (Segment's Actions destination). Turn on "Use X-Segment-Signature
    /// Header" in the destination, or opt in to first-event signatures.
    #[error(
        "X-Signature covers only the first event of this batch; turn on \"Use X-Segment-Signature Header\" in the destination, or opt in with allow_first_event_signature"
    )]
    FirstEventOnly,
}

impl SignatureError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::EmptySecret => Code::EmptySecret,
            Self::NoSecrets => Code::NoSecrets,
            Self::MalformedSignature => Code::MalformedSignature,
            Self::MissingSignature => Code::MissingSignature,
            Self::Mismatch => Code::SignatureMismatch,
            Self::FirstEventOnly => Code::FirstEventSignature,
        }
    }
}

/// A shared secret, prekeyed: the HMAC inner and outer pads are computed
/// once, so each signature costs only the body's hashing.
///
/// `Debug` never shows the key.
#[derive(Clone)]
pub struct Secret {
    mac: HmacSha1,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// Keys a secret from its UTF-8 (or raw) bytes. Any length but zero.
    pub fn new(key: impl AsRef<[u8]>) -> Result<Self, SignatureError> {
        let key = key.as_ref();
        if key.is_empty() {
            return Err(SignatureError::EmptySecret);
        }
        // HMAC accepts keys of any length, so this cannot fail.
        let mac =
            <HmacSha1 as KeyInit>::new_from_slice(key).map_err(|_| SignatureError::EmptySecret)?;
        Ok(Self { mac })
    }

    /// The raw 20-byte HMAC-SHA1 of `body`.
    pub fn digest(&self, body: &[u8]) -> [u8; 20] {
        let mut mac = self.mac.clone();
        mac.update(body);
        mac.finalize().into_bytes().into()
    }

    /// The `X-Signature` value for `body`: 40 lowercase hex characters.
    pub fn sign(&self, body: &[u8]) -> String {
        // Hex digits are ASCII: the lossy conversion never replaces one,
        // and is one copy where collecting chars pushes them one by one.
        String::from_utf8_lossy(&self.sign_hex(body)).into_owned()
    }

    /// [`Secret::sign`] as ASCII bytes, for hosts that copy the signature
    /// out of a buffer instead of taking a `String` (the wasm binding).
    pub fn sign_hex(&self, body: &[u8]) -> [u8; SIGNATURE_HEX_LEN] {
        let mut out = [0u8; SIGNATURE_HEX_LEN];
        // 20 bytes always fill 40 hex digits exactly, so this cannot fail.
        let _ = hex::encode_to_slice(self.digest(body), &mut out);
        out
    }

    /// Whether `expected` (raw 20 bytes) is the digest of `body`, compared in
    /// constant time.
    fn matches(&self, body: &[u8], expected: &[u8; 20]) -> bool {
        let mut mac = self.mac.clone();
        mac.update(body);
        mac.verify_slice(expected).is_ok()
    }
}

/// The last key a host signed or verified with, prekeyed, for APIs that take
/// the secret on every call (`sign(secret, body)` in JS). Keying HMAC-SHA1
/// hashes two blocks, a quarter of the work for a 423 B body, and callers
/// nearly always pass the same secret again.
///
/// A key is compared with the cached one in constant time (`ctutils`); only
/// its length may show in the timing. The cache holds the key's bytes next
/// to its prekeyed state, which is no more than [`Secret`] holds: the pads'
/// states sign as well as the key does. `Debug` never shows either.
#[derive(Clone, Default)]
pub struct KeyCache {
    key: Vec<u8>,
    secret: Option<Secret>,
}

impl fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyCache(<redacted>)")
    }
}

impl KeyCache {
    /// An empty cache (`const`, so a binding can keep one in a `static`).
    pub const fn new() -> Self {
        Self {
            key: Vec::new(),
            secret: None,
        }
    }

    /// The prekeyed [`Secret`] for `key`: the cached one when `key` is the
    /// last key given, otherwise keyed now and cached in its place. An empty
    /// key is [`SignatureError::EmptySecret`] and leaves the cache as it was.
    pub fn secret(&mut self, key: &[u8]) -> Result<&Secret, SignatureError> {
        use ctutils::CtEq;
        let hit = self.secret.is_some() && self.key.as_slice().ct_eq(key).to_bool();
        if !hit {
            let secret = Secret::new(key)?;
            self.key.clear();
            self.key.extend_from_slice(key);
            self.secret = Some(secret);
        }
        // Set above when it was not already.
        self.secret.as_ref().ok_or(SignatureError::EmptySecret)
    }
}

/// Signs `body` with `secret`: lowercase hex HMAC-SHA1.
pub fn sign(secret: impl AsRef<[u8]>, body: impl AsRef<[u8]>) -> Result<String, SignatureError> {
    Ok(Secret::new(secret)?.sign(body.as_ref()))
}

/// Decodes a signature header. Hex digits of either case are accepted: the
/// spec says lowercase, but case carries no information and some proxies
/// normalise header values.
fn decode_signature(signature: &str) -> Result<[u8; 20], SignatureError> {
    let mut raw = [0u8; 20];
    if signature.len() != SIGNATURE_HEX_LEN {
        return Err(SignatureError::MalformedSignature);
    }
    hex::decode_to_slice(signature, &mut raw).map_err(|_| SignatureError::MalformedSignature)?;
    Ok(raw)
}

/// Verifies `signature` over the exact `body` bytes against one or more
/// secrets (several during a rotation). `Ok(false)` means no secret matches;
/// an `Err` means the inputs could never verify.
///
/// Every secret is tried, and each comparison is constant-time, so timing
/// reveals neither the digest nor which secret matched.
pub fn verify(body: &[u8], signature: &str, secrets: &[Secret]) -> Result<bool, SignatureError> {
    if secrets.is_empty() {
        return Err(SignatureError::NoSecrets);
    }
    let expected = decode_signature(signature)?;
    let mut ok = false;
    for secret in secrets {
        ok |= secret.matches(body, &expected);
    }
    Ok(ok)
}

/// [`verify`] for a host that computed the HMACs itself: `digests` holds
/// each secret's HMAC-SHA1 of the body as 40 lowercase hex digits, one after
/// another. The JS package uses it in Node for large bodies, where
/// `node:crypto`'s SHA-NI beats SHA-1 in wasm (1.8x at 32 KB); the rules stay
/// here: the signature's form, at least one secret, and a constant-time
/// comparison against every digest (`ctutils`, through `digest::CtOutput`).
///
/// `None` when `digests` is not a whole number of lowercase-hex digests (a
/// host that answered wrongly): the caller then verifies with the secrets.
pub fn verify_digests(digests: &[u8], signature: &str) -> Option<Result<bool, SignatureError>> {
    let lower_hex = |b: &u8| matches!(b, b'0'..=b'9' | b'a'..=b'f');
    if !digests.len().is_multiple_of(SIGNATURE_HEX_LEN) || !digests.iter().all(lower_hex) {
        return None;
    }
    if digests.is_empty() {
        return Some(Err(SignatureError::NoSecrets));
    }
    let expected = match decode_signature(signature) {
        Ok(e) => e,
        Err(e) => return Some(Err(e)),
    };
    let expected = CtOutput::<Hmac<Sha1>>::new(expected.into());
    let mut ok = false;
    for hex_digest in digests.chunks_exact(SIGNATURE_HEX_LEN) {
        let mut raw = [0u8; 20];
        hex::decode_to_slice(hex_digest, &mut raw).ok()?;
        ok |= CtOutput::<Hmac<Sha1>>::new(raw.into()) == expected;
    }
    Some(Ok(ok))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts() {
        let s = Secret::new("hunter2-secret").unwrap();
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
    }

    #[test]
    fn key_cache_signs_as_each_key_does() {
        let mut cache = KeyCache::new();
        // Repeats, a prefix and an extension of the cached key, another key
        // of the same length, a long key (hashed to 20 bytes by HMAC), and an
        // empty key in between, which must leave the cache working.
        let long = "k".repeat(100);
        let keys: [&[u8]; 11] = [
            b"ab",
            b"ab",
            b"a",
            b"ab",
            b"xy",
            b"abc",
            b"",
            b"abc",
            long.as_bytes(),
            b"ab",
            b"ab\0",
        ];
        for key in keys {
            let body = b"body of the call";
            match cache.secret(key) {
                Ok(secret) => assert_eq!(Ok(secret.sign(body)), sign(key, body), "{key:?}"),
                Err(e) => assert!(key.is_empty() && e == SignatureError::EmptySecret),
            }
        }
        assert_eq!(format!("{cache:?}"), "KeyCache(<redacted>)");
    }

    #[test]
    fn host_digests_verify_as_secrets_do() {
        let (a, b) = (Secret::new("a").unwrap(), Secret::new("b").unwrap());
        let body = b"body";
        let sig = a.sign(body);
        let both = format!("{}{}", b.sign(body), a.sign(body));
        for signature in [
            sig.clone(),
            sig.to_uppercase(),
            b.sign(body),
            "0".repeat(40),
        ] {
            assert_eq!(
                verify_digests(both.as_bytes(), &signature),
                Some(verify(body, &signature, &[b.clone(), a.clone()])),
                "{signature}"
            );
            assert_eq!(
                verify_digests(b.sign(body).as_bytes(), &signature),
                Some(verify(body, &signature, std::slice::from_ref(&b)))
            );
        }
        assert_eq!(
            verify_digests(b"", &sig),
            Some(Err(SignatureError::NoSecrets))
        );
        assert_eq!(
            verify_digests(both.as_bytes(), &sig[..39]),
            Some(Err(SignatureError::MalformedSignature))
        );
        // A host answer that is not lowercase hex digests is not used.
        assert_eq!(verify_digests(sig.to_uppercase().as_bytes(), &sig), None);
        assert_eq!(verify_digests(&both.as_bytes()[1..], &sig), None);
    }

    #[test]
    fn verify_rules() {
        let a = Secret::new("a").unwrap();
        let b = Secret::new("b").unwrap();
        let sig = a.sign(b"body");
        assert_eq!(verify(b"body", &sig, &[b.clone(), a.clone()]), Ok(true));
        assert_eq!(
            verify(b"body", &sig.to_uppercase(), std::slice::from_ref(&a)),
            Ok(true)
        );
        assert_eq!(verify(b"body", &sig, std::slice::from_ref(&b)), Ok(false));
        assert_eq!(verify(b"body", &sig, &[]), Err(SignatureError::NoSecrets));
        assert_eq!(
            verify(b"body", &sig[..39], std::slice::from_ref(&a)),
            Err(SignatureError::MalformedSignature)
        );
        let bad = format!("{}g", &sig[..39]);
        assert_eq!(
            verify(b"body", &bad, &[a]),
            Err(SignatureError::MalformedSignature)
        );
        assert_eq!(Secret::new("").unwrap_err(), SignatureError::EmptySecret);
    }
}
