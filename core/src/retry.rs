//! What an upload or delivery attempt's result means, and when to try again.
//! One rule set, shared by the [`Batcher`](crate::Batcher) and
//! [`Delivery`](crate::Delivery).

use crate::misuse::ApiMisuse;
use crate::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The result of one HTTP attempt, as the host's I/O saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The server answered with a status. `retry_after` is the raw
    /// `Retry-After` header, if any.
    Response {
        /// The HTTP status code.
        status: u16,
        /// The raw `Retry-After` header value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<String>,
    },
    /// No answer within the timeout.
    Timeout,
    /// The connection failed or broke (refused, reset, DNS, closed
    /// mid-response).
    Connection {
        /// For logs.
        message: String,
    },
    /// The TLS handshake failed, for example on a self-signed certificate.
    Tls {
        /// For logs.
        message: String,
    },
    /// Not sent: the endpoint's OAuth 2.0 token could not be had
    /// ([`crate::oauth::TokenError`]). Retried like a connection failure,
    /// so a failing token endpoint counts against the destination.
    Token {
        /// Why, for logs (never a secret).
        message: String,
    },
    /// Not sent: the host held the request back because its endpoint is
    /// protected until `until` ([`crate::protection`]: its circuit is
    /// open, or the receiver asked every caller to wait). A failure of the
    /// round that is not tried again before `until`; the call's window is
    /// unchanged.
    Held {
        /// When the endpoint takes requests again.
        until: Timestamp,
        /// The endpoint's state, for logs (`circuit_open`, `slowed`).
        reason: String,
    },
}

impl Outcome {
    /// A connection failure.
    pub fn connection(message: impl Into<String>) -> Self {
        Self::Connection {
            message: message.into(),
        }
    }

    /// A TLS failure.
    pub fn tls(message: impl Into<String>) -> Self {
        Self::Tls {
            message: message.into(),
        }
    }

    /// Builds an outcome from what a host's HTTP client reports: a `status`
    /// (with the raw `Retry-After` header), or an `error` kind, `"timeout"`,
    /// `"connection"`, `"tls"` or `"token"`, with a message for logs. Any other
    /// combination is [`ApiMisuse::InvalidOutcome`].
    pub fn from_report(
        status: Option<u16>,
        retry_after: Option<String>,
        error: Option<&str>,
        message: &str,
    ) -> Result<Self, ApiMisuse> {
        Ok(match (status, error) {
            (Some(status), None) => Self::Response {
                status,
                retry_after,
            },
            (None, Some("timeout")) => Self::Timeout,
            (None, Some("connection")) => Self::connection(message),
            (None, Some("tls")) => Self::tls(message),
            (None, Some("token")) => Self::Token {
                message: message.to_owned(),
            },
            _ => return Err(ApiMisuse::InvalidOutcome),
        })
    }

    /// A response with no `Retry-After`.
    pub fn status(status: u16) -> Self {
        Self::Response {
            status,
            retry_after: None,
        }
    }

    /// What this outcome means.
    pub fn verdict(&self) -> Verdict {
        match self {
            Self::Response { status, .. } => classify_status(*status),
            Self::Timeout | Self::Connection { .. } | Self::Held { .. } | Self::Token { .. } => {
                Verdict::Retry
            }
            Self::Tls { .. } => Verdict::Reject,
        }
    }

    /// A short stable description for logs and attempt records; never holds
    /// request data.
    pub fn code(&self) -> String {
        match self {
            Self::Response { status, .. } => format!("http_{status}"),
            Self::Timeout => "timeout".into(),
            Self::Connection { .. } => "connection_error".into(),
            Self::Tls { .. } => "tls_error".into(),
            Self::Held { .. } => "held".into(),
            Self::Token { .. } => "token_error".into(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Response { status, .. } => write!(f, "http status {status}"),
            Self::Timeout => f.write_str("timed out"),
            Self::Connection { message } => write!(f, "connection error: {message}"),
            Self::Tls { message } => write!(f, "tls error: {message}"),
            Self::Held { reason, .. } => write!(f, "held back: {reason}"),
            Self::Token { message } => write!(f, "no token: {message}"),
        }
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Delivered.
    Success,
    /// Try again later.
    Retry,
    /// Never try this again (at this endpoint).
    Reject,
}

impl Verdict {
    /// Stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Retry => "retry",
            Self::Reject => "reject",
        }
    }
}

/// The status rules, following the stricter practice among Segment's
/// libraries, RudderStack, Svix and Standard Webhooks:
///
/// * 2xx: success (every one of them agrees).
/// * 408 Request Timeout and 429 Too Many Requests: retry; both say "later"
///   (Segment's libraries and RudderStack retry 429; 408 is a timeout by
///   another name).
/// * 5xx: retry (the spec: "retried repeatedly, for a maximum of 4 hours").
/// * 3xx: reject. Redirects are not followed: following one would send
///   signed customer data to a URL nobody configured, and Standard Webhooks
///   counts 3xx as a failure.
/// * Other 4xx, 410 Gone included: reject. The receiver refused this request
///   and sending the same bytes again cannot change that (Segment and
///   RudderStack abort on 4xx; Svix and Standard Webhooks treat 410 as
///   "endpoint gone").
/// * 1xx and anything outside 100–599 is not a final HTTP answer: retry,
///   like a broken connection.
pub fn classify_status(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Success,
        408 | 429 => Verdict::Retry,
        500..=599 => Verdict::Retry,
        300..=499 => Verdict::Reject,
        _ => Verdict::Retry,
    }
}

/// The longest `Retry-After` honoured: one day. A larger value is clamped,
/// which in practice pushes the next attempt past every retry window.
pub const MAX_RETRY_AFTER_MS: u64 = 86_400_000;

/// Parses `Retry-After` (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date
/// (IMF-fixdate), which is converted to a delay from `now_ms`. A date in the
/// past means "now". Anything else (garbage, negative numbers, the obsolete
/// RFC 850 date form) gives `None`, and the normal backoff applies: a bad
/// header is the server's mistake and must not stall or speed up retries.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<u64> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Long digit strings saturate rather than fail: "wait a very long time".
        let secs: u64 = v.parse().unwrap_or(u64::MAX);
        return Some(secs.saturating_mul(1000).min(MAX_RETRY_AFTER_MS));
    }
    let at_ms = crate::timestamp::parse_http_date(v)?;
    Some(
        u64::try_from(at_ms.saturating_sub(now.as_millis()))
            .unwrap_or(0)
            .min(MAX_RETRY_AFTER_MS),
    )
}

/// A seedable pseudo-random source for backoff jitter (SplitMix64).
///
/// Written here rather than taken from `rand`: the state must serialize with
/// a persisted delivery and produce the same numbers on every platform,
/// including wasm with no entropy source, and it is eight lines. Jitter needs
/// spread, not unpredictability; ids come from the caller's secure random
/// bytes instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jitter {
    state: u64,
}

impl Jitter {
    /// A generator seeded by the host (from its OS random source, or a fixed
    /// value in tests).
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The generator's position, for saved state.
    pub(crate) fn state(&self) -> u64 {
        self.state
    }

    /// A generator at a saved position.
    pub(crate) fn from_state(state: u64) -> Self {
        Self { state }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next_u64();
        }
        // Modulo bias is below 2^-40 for the delays used here; irrelevant
        // for jitter.
        self.next_u64() % (max + 1)
    }
}

/// Exponential backoff: the `n`th retry (1-based) waits around
/// `min(cap, base * 2^(n-1))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    /// Delay before the first retry, in ms.
    pub base_ms: u64,
    /// Largest delay, in ms.
    pub cap_ms: u64,
}

impl Backoff {
    /// The un-jittered delay before retry `n` (1-based).
    pub fn ceiling(&self, n: u32) -> u64 {
        let exp = n.saturating_sub(1).min(63);
        self.base_ms.saturating_mul(1u64 << exp).min(self.cap_ms)
    }

    /// "Full jitter" (AWS Architecture Blog, 2015): uniform in
    /// `0..=ceiling`. Spreads a crowd of clients best; used for batches.
    pub fn full_jitter(&self, n: u32, rng: &mut Jitter) -> u64 {
        rng.up_to(self.ceiling(n))
    }

    /// "Equal jitter": uniform in `ceiling/2..=ceiling`. Keeps a floor under
    /// every delay, so a dead webhook receiver's attempts stay spread over
    /// the whole retry window instead of bunching early.
    pub fn equal_jitter(&self, n: u32, rng: &mut Jitter) -> u64 {
        let c = self.ceiling(n);
        c / 2 + rng.up_to(c - c / 2)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        use Verdict::*;
        for (s, v) in [
            (200, Success),
            (204, Success),
            (299, Success),
            (301, Reject),
            (304, Reject),
            (400, Reject),
            (401, Reject),
            (404, Reject),
            (408, Retry),
            (410, Reject),
            (413, Reject),
            (429, Retry),
            (500, Retry),
            (503, Retry),
            (599, Retry),
            (100, Retry),
            (0, Retry),
            (600, Retry),
        ] {
            assert_eq!(classify_status(s), v, "{s}");
        }
    }

    #[test]
    fn outcomes_from_host_reports() {
        assert_eq!(
            Outcome::from_report(Some(503), Some("5".into()), None, ""),
            Ok(Outcome::Response {
                status: 503,
                retry_after: Some("5".into())
            })
        );
        assert_eq!(
            Outcome::from_report(None, None, Some("timeout"), ""),
            Ok(Outcome::Timeout)
        );
        assert_eq!(
            Outcome::from_report(None, None, Some("tls"), "self-signed").map(|o| o.verdict()),
            Ok(Verdict::Reject)
        );
        assert_eq!(
            Outcome::from_report(None, None, Some("connection"), "reset").map(|o| o.code()),
            Ok("connection_error".into())
        );
        assert_eq!(
            Outcome::from_report(Some(200), None, Some("timeout"), ""),
            Err(ApiMisuse::InvalidOutcome)
        );
        for bad in [Some("dns"), None] {
            assert_eq!(
                Outcome::from_report(None, None, bad, ""),
                Err(ApiMisuse::InvalidOutcome)
            );
        }
    }

    #[test]
    fn retry_after_forms() {
        let now = Timestamp::from_millis(784_111_777_000).unwrap(); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse_retry_after("120", now), Some(120_000));
        assert_eq!(parse_retry_after(" 0 ", now), Some(0));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", now),
            Some(60_000)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:40:00 GMT", now),
            Some(0)
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(MAX_RETRY_AFTER_MS)
        );
        for bad in ["", "-5", "1.5", "soon", "Sunday, 06-Nov-94 08:49:37 GMT"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad}");
        }
    }

    #[test]
    fn backoff_bounds() {
        let b = Backoff {
            base_ms: 1000,
            cap_ms: 30_000,
        };
        let mut rng = Jitter::new(1);
        for n in 1..40 {
            let c = b.ceiling(n);
            assert!(c <= 30_000);
            let f = b.full_jitter(n, &mut rng);
            let e = b.equal_jitter(n, &mut rng);
            assert!(f <= c && e >= c / 2 && e <= c);
        }
        assert_eq!(b.ceiling(1), 1000);
        assert_eq!(b.ceiling(3), 4000);
    }
}
