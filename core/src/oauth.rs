//! Bearer tokens from an OAuth 2.0 client-credentials grant (RFC 6749
//! §4.4), for endpoints whose `auth` is `oauth2`
//! ([`crate::webhooks::Auth::OAuth2`]).
//!
//! [`TokenSource`] is sans-IO like the rest of the core: the host asks it
//! for the `Authorization` value of each request
//! ([`TokenSource::authorization`]), sends the token request it gives
//! ([`TokenSource::poll_request`]) when it has none or its token is due
//! for refresh, and reports the answer ([`TokenSource::handle_response`])
//! or the failure ([`TokenSource::handle_failure`]). A receiver's `401`
//! to a request made with a token drops that token
//! ([`TokenSource::handle_rejected`]).
//!
//! Decisions where RFC 6749 leaves room, as Segment's, Svix's and the
//! common client libraries (oauth2-rs, Authlib, golang.org/x/oauth2) take
//! them:
//! * a token is refreshed [`REFRESH_MARGIN_MS`] (or a tenth of its life,
//!   whichever is less) before it expires, so no request goes out with a
//!   token about to lapse; it stays in use while the refresh runs;
//! * a token answer without `expires_in` is kept [`DEFAULT_LIFETIME_MS`]
//!   (or until a receiver refuses it);
//! * a failed token request is tried again after a backoff
//!   ([`TOKEN_BACKOFF`], 1 s doubling to 1 min): meanwhile every attempt
//!   that needs a token fails at once, as a retryable attempt of its
//!   delivery, so the token endpoint's failures count against the
//!   destination and never hammer the token endpoint;
//! * only a `Bearer` token is taken (§7.1: a client must not use a token
//!   type it does not understand).

use crate::code::Code;
use crate::json::Value;
use crate::retry::{Backoff, Jitter};
use crate::timestamp::Timestamp;
use crate::webhooks::auth::{Auth, ClientAuth, OAuth2};
use std::fmt;

/// A token request must be answered within this: the webhook's own 5 s.
pub const TOKEN_TIMEOUT_MS: u64 = 5_000;

/// The most bytes of a token answer the host reads: a token is at most a
/// few KB (a JWT with many claims), and an error page is cut here.
pub const TOKEN_ANSWER_BYTES: usize = 64 * 1024;

/// A token is refreshed this long before it expires (or at nine tenths of
/// its life, if that is sooner): oauth2-rs and golang.org/x/oauth2 use
/// 10 s to 1 min; a minute covers a slow token endpoint and clock skew.
pub const REFRESH_MARGIN_MS: u64 = 60_000;

/// How long a token whose answer gives no `expires_in` is used: the usual
/// lifetime of client-credentials tokens (Auth0, Okta, Azure AD).
pub const DEFAULT_LIFETIME_MS: u64 = 60 * 60 * 1000;

/// Waits between failed token requests: 1 s, doubling to 1 min, with
/// jitter.
pub const TOKEN_BACKOFF: Backoff = Backoff {
    base_ms: 1_000,
    cap_ms: 60_000,
};

/// Why there is no token to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token endpoint answered with an error status (an RFC 6749 §5.2
    /// `error` code, when it gave one).
    #[error("the token endpoint answered {status}{}", .error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The answer's `error` code (`invalid_client`, …), if any.
        error: Option<String>,
    },
    /// The answer is not a bearer token the rules allow.
    #[error("the token endpoint's answer is not usable: {0}")]
    InvalidAnswer(String),
    /// The token endpoint could not be reached or did not answer in time.
    #[error("the token endpoint could not be reached: {0}")]
    Unreachable(String),
    /// No token has been fetched yet, and none is being fetched.
    #[error("no token yet")]
    NoToken,
}

impl TokenError {
    /// The stable code: every token failure is `token_unavailable`.
    pub fn code(&self) -> Code {
        Code::TokenUnavailable
    }
}

/// A token request to send: `POST` with a form body.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// The token endpoint.
    pub url: String,
    /// Headers, in order.
    pub headers: Vec<(&'static str, String)>,
    /// The form body (`application/x-www-form-urlencoded`).
    pub body: Vec<u8>,
    /// Unanswered by then, it has failed ([`TOKEN_TIMEOUT_MS`]).
    pub deadline: Timestamp,
}

/// The body and the `Authorization` header may hold the client's secret.
impl fmt::Debug for TokenRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRequest")
            .field("url", &crate::weburl::shown(&self.url))
            .finish_non_exhaustive()
    }
}

#[derive(Clone, PartialEq, Eq)]
struct Token {
    /// `Bearer <token>`.
    authorization: String,
    refresh_at: Timestamp,
    expires_at: Timestamp,
}

/// One grant's token: fetched, cached and refreshed. One per distinct
/// [`OAuth2`] settings in a host, shared by every request that uses them.
pub struct TokenSource {
    config: OAuth2,
    token: Option<Token>,
    in_flight: Option<Timestamp>,
    failures: u32,
    retry_at: Option<Timestamp>,
    last_error: Option<TokenError>,
    rng: Jitter,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("config", &self.config)
            .field("has_token", &self.token.is_some())
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    /// A source for `config`, with no token yet. `jitter_seed` spreads the
    /// retries of hosts that fail together.
    pub fn new(config: OAuth2, jitter_seed: u64) -> Self {
        Self {
            config,
            token: None,
            in_flight: None,
            failures: 0,
            retry_at: None,
            last_error: None,
            rng: Jitter::new(jitter_seed),
        }
    }

    /// The grant's settings.
    pub fn config(&self) -> &OAuth2 {
        &self.config
    }

    /// The `Authorization` value to send now (`Bearer …`), or why there is
    /// none: the last failure, or [`TokenError::NoToken`].
    pub fn authorization(&self, now: Timestamp) -> Result<&str, TokenError> {
        match &self.token {
            Some(t) if now < t.expires_at => Ok(&t.authorization),
            _ => Err(self.last_error.clone().unwrap_or(TokenError::NoToken)),
        }
    }

    /// A token request to send now, or `None`: when there is no valid
    /// token or it is due for refresh, none is in flight, and no backoff
    /// is running. A request in flight past its deadline counts as
    /// failed.
    #[must_use]
    pub fn poll_request(&mut self, now: Timestamp) -> Option<TokenRequest> {
        if let Some(deadline) = self.in_flight {
            if now < deadline {
                return None;
            }
            self.handle_failure(now, "no answer within 5 s");
        }
        if self.retry_at.is_some_and(|at| now < at) {
            return None;
        }
        if self.token.as_ref().is_some_and(|t| now < t.refresh_at) {
            return None;
        }
        let deadline = now.saturating_add_ms(TOKEN_TIMEOUT_MS);
        self.in_flight = Some(deadline);
        Some(self.request(deadline))
    }

    /// When to call [`poll_request`](Self::poll_request) next: the token's
    /// refresh time, the end of a backoff, or an unanswered request's
    /// deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if let Some(d) = self.in_flight {
            return Some(d);
        }
        match (&self.token, self.retry_at) {
            (_, Some(at)) => Some(at),
            (Some(t), None) => Some(t.refresh_at),
            (None, None) => None,
        }
    }

    /// The token endpoint answered `status` with `body` (its first
    /// [`TOKEN_ANSWER_BYTES`]). A 2xx with a bearer token keeps it;
    /// anything else is a failure, returned and kept for
    /// [`authorization`](Self::authorization).
    pub fn handle_response(
        &mut self,
        now: Timestamp,
        status: u16,
        body: &[u8],
    ) -> Result<(), TokenError> {
        self.in_flight = None;
        let result = if (200..300).contains(&status) {
            parse_token(body, now)
        } else {
            Err(TokenError::Refused {
                status,
                error: error_code(body),
            })
        };
        match result {
            Ok(token) => {
                self.token = Some(token);
                self.failures = 0;
                self.retry_at = None;
                self.last_error = None;
                Ok(())
            }
            Err(e) => {
                self.fail(now, e.clone());
                Err(e)
            }
        }
    }

    /// The token request failed without an answer (connection, TLS,
    /// timeout); `message` is for logs.
    pub fn handle_failure(&mut self, now: Timestamp, message: &str) {
        self.in_flight = None;
        self.fail(now, TokenError::Unreachable(message.to_owned()));
    }

    /// A receiver answered 401 to a request sent with `authorization`:
    /// that token is dropped (if it is still the one kept), and the next
    /// attempt fetches a new one.
    pub fn handle_rejected(&mut self, authorization: &str) {
        if self
            .token
            .as_ref()
            .is_some_and(|t| t.authorization == authorization)
        {
            self.token = None;
        }
    }

    fn fail(&mut self, now: Timestamp, e: TokenError) {
        self.failures = self.failures.saturating_add(1);
        let wait = TOKEN_BACKOFF.equal_jitter(self.failures, &mut self.rng);
        self.retry_at = Some(now.saturating_add_ms(wait));
        self.last_error = Some(e);
    }

    fn request(&self, deadline: Timestamp) -> TokenRequest {
        let c = &self.config;
        let mut form = Form::default();
        form.pair("grant_type", "client_credentials");
        if let Some(scope) = &c.scope {
            form.pair("scope", scope);
        }
        if let Some(audience) = &c.audience {
            form.pair("audience", audience);
        }
        let mut headers = vec![
            (
                "Content-Type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("Accept", "application/json".to_owned()),
            ("User-Agent", crate::webhooks::USER_AGENT.to_owned()),
        ];
        match c.client_auth {
            ClientAuth::Basic => {
                // §2.3.1: id and secret are form-encoded before Basic.
                headers.push((
                    "Authorization",
                    Auth::basic_header(&form_encode(&c.client_id), &form_encode(&c.client_secret)),
                ));
            }
            ClientAuth::Body => {
                form.pair("client_id", &c.client_id);
                form.pair("client_secret", &c.client_secret);
            }
        }
        TokenRequest {
            url: c.token_url.clone(),
            headers,
            body: form.0.into_bytes(),
            deadline,
        }
    }
}

/// A token answer (§5.1): `access_token`, `token_type` Bearer, and
/// `expires_in` seconds (a number, or a string of digits as some servers
/// send).
fn parse_token(body: &[u8], now: Timestamp) -> Result<Token, TokenError> {
    let bad = |s: &str| TokenError::InvalidAnswer(s.to_owned());
    let v = Value::from_json_slice(body).map_err(|_| bad("not JSON"))?;
    let m = v.as_object().ok_or_else(|| bad("not a JSON object"))?;
    let token = m
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("no access_token"))?;
    // RFC 6750 §2.1's b64token, which is what can travel in the header.
    let b64token = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b);
    if token.len() > crate::webhooks::auth::MAX_PEM_BYTES || !token.bytes().all(b64token) {
        return Err(bad("the access_token cannot be sent in a Bearer header"));
    }
    match m.get("token_type").and_then(Value::as_str) {
        Some(t) if t.eq_ignore_ascii_case("bearer") => {}
        Some(_) => return Err(bad("token_type is not Bearer")),
        None => return Err(bad("no token_type")),
    }
    let life_ms = match m.get("expires_in") {
        None | Some(Value::Null) => DEFAULT_LIFETIME_MS,
        Some(v) => {
            let secs = match v {
                Value::String(s) => s.trim().parse::<f64>().ok(),
                other => other.as_f64(),
            }
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| bad("expires_in is not a positive number of seconds"))?;
            // Saturating: a century is as good as forever.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ms = (secs * 1000.0).min(1e15) as u64;
            ms
        }
    };
    let margin = REFRESH_MARGIN_MS.min(life_ms / 10);
    Ok(Token {
        authorization: format!("Bearer {token}"),
        refresh_at: now.saturating_add_ms(life_ms - margin),
        expires_at: now.saturating_add_ms(life_ms),
    })
}

/// An error answer's `error` code (§5.2), if it is a short ASCII token.
fn error_code(body: &[u8]) -> Option<String> {
    let v = Value::from_json_slice(body).ok()?;
    let e = v.as_object()?.get("error")?.as_str()?;
    (e.len() <= 64 && e.bytes().all(|b| b.is_ascii_graphic())).then(|| e.to_owned())
}

/// `application/x-www-form-urlencoded` (WHATWG URL's serializer: space as
/// `+`, `*-._` and alphanumerics as they are, every other byte `%XX`).
#[derive(Default)]
struct Form(String);

impl Form {
    fn pair(&mut self, name: &str, value: &str) {
        if !self.0.is_empty() {
            self.0.push('&');
        }
        self.0.push_str(&form_encode(name));
        self.0.push('=');
        self.0.push_str(&form_encode(value));
    }
}

fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b' ' => out.push('+'),
            b'*' | b'-' | b'.' | b'_' => out.push(b as char),
            _ if b.is_ascii_alphanumeric() => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(client_auth: ClientAuth) -> OAuth2 {
        OAuth2 {
            token_url: "https://auth.example.com/token".into(),
            client_id: "id with space".into(),
            client_secret: "s3cr:t&".into(),
            scope: Some("users:write crm".into()),
            audience: None,
            client_auth,
        }
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + ms).unwrap()
    }

    #[test]
    fn the_request_is_rfc_6749s() {
        let mut s = TokenSource::new(config(ClientAuth::Basic), 1);
        let r = s.poll_request(at(0)).unwrap();
        assert_eq!(
            String::from_utf8(r.body).unwrap(),
            "grant_type=client_credentials&scope=users%3Awrite+crm"
        );
        let auth = &r.headers.iter().find(|h| h.0 == "Authorization").unwrap().1;
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(decoded, b"id+with+space:s3cr%3At%26");
        assert!(s.poll_request(at(1)).is_none(), "one request at a time");
        let mut s = TokenSource::new(config(ClientAuth::Body), 1);
        let r = s.poll_request(at(0)).unwrap();
        assert!(String::from_utf8(r.body)
            .unwrap()
            .ends_with("&client_id=id+with+space&client_secret=s3cr%3At%26"));
        assert!(r.headers.iter().all(|h| h.0 != "Authorization"));
    }

    #[test]
    fn a_token_is_kept_refreshed_before_it_expires_and_dropped_on_401() {
        let mut s = TokenSource::new(config(ClientAuth::Basic), 1);
        assert_eq!(s.authorization(at(0)), Err(TokenError::NoToken));
        let _ = s.poll_request(at(0)).unwrap();
        s.handle_response(
            at(10),
            200,
            br#"{"access_token":"abc.def","token_type":"bearer","expires_in":"3600"}"#,
        )
        .unwrap();
        assert_eq!(s.authorization(at(10)), Ok("Bearer abc.def"));
        // Refresh one minute before the end, while the token still serves.
        assert_eq!(s.poll_timeout(), Some(at(10 + 3_540_000)));
        assert!(s.poll_request(at(3_540_000)).is_none());
        assert!(s.poll_request(at(3_540_010)).is_some());
        assert_eq!(s.authorization(at(3_540_010)), Ok("Bearer abc.def"));
        s.handle_response(
            at(3_540_020),
            200,
            br#"{"access_token":"new","token_type":"Bearer","expires_in":60}"#,
        )
        .unwrap();
        // A stale token's 401 drops nothing; the kept one's drops it.
        s.handle_rejected("Bearer abc.def");
        assert_eq!(s.authorization(at(3_540_030)), Ok("Bearer new"));
        s.handle_rejected("Bearer new");
        assert_eq!(s.authorization(at(3_540_030)), Err(TokenError::NoToken));
        assert!(s.poll_request(at(3_540_030)).is_some());
    }

    #[test]
    fn failures_back_off_and_say_why() {
        let mut s = TokenSource::new(config(ClientAuth::Basic), 7);
        let _ = s.poll_request(at(0)).unwrap();
        let e = s
            .handle_response(at(5), 401, br#"{"error":"invalid_client"}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the token endpoint answered 401 (invalid_client)"
        );
        assert_eq!(s.authorization(at(6)), Err(e));
        let retry = s.poll_timeout().unwrap();
        assert!(retry >= at(505) && retry <= at(1005), "{retry:?}");
        assert!(s.poll_request(at(400)).is_none());
        let _ = s.poll_request(retry).unwrap();
        // Unanswered past its deadline: a failure, and the next waits longer.
        assert!(s
            .poll_request(retry.saturating_add_ms(TOKEN_TIMEOUT_MS))
            .is_none());
        assert!(matches!(
            s.authorization(retry),
            Err(TokenError::Unreachable(_))
        ));
        for (body, why) in [
            (
                &br#"{"access_token":"a b","token_type":"Bearer"}"#[..],
                "cannot be sent",
            ),
            (br#"{"access_token":"a","token_type":"mac"}"#, "not Bearer"),
            (
                br#"{"access_token":"a","token_type":"Bearer","expires_in":-1}"#,
                "expires_in",
            ),
            (b"<html>", "not JSON"),
        ] {
            let mut s = TokenSource::new(config(ClientAuth::Basic), 1);
            let _ = s.poll_request(at(0)).unwrap();
            let e = s.handle_response(at(1), 200, body).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
        }
    }
}
