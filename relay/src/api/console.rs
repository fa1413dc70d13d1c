//! The web console, `/console/`, wherever the admin API is served: plain
//! HTML, CSS and an ES module (`relay/console/`), built into the binary.
//! It holds no data of its own: its script reads and acts through the
//! admin API, and `/console/history` for the overview's charts.
//!
//! * Sign-in: a form posts the admin token to `POST /console/session`
//!   (checked in constant time; a wrong one counts, is logged and slowed
//!   as a wrong admin token is). The answer sets the cookie [`COOKIE`] =
//!   `<expiry>.<HMAC-SHA256(admin token, SESSION_CONTEXT "." expiry)>`
//!   (the expiry in seconds since the epoch, [`SESSION_TTL`] after the
//!   sign-in; the HMAC in hex): not the token itself, and no state kept
//!   here, so every relay behind one address takes the same cookie, a
//!   session ends by itself, and a new admin token signs every console out
//!   at once.
//! * Signing out (`POST /console/session/end`) clears the cookie, and is
//!   refused from another site's page as a sign-in is: no other site can
//!   sign an operator out.
//! * The cookie is `HttpOnly` (no script reads it), `SameSite=Strict`
//!   (no other site's page sends it) and `Path=/` (it goes with the
//!   `/admin/` requests). It is `Secure` when the sign-in came over HTTPS
//!   as the browser or a proxy tells ([`served_over_https`]): the relay's
//!   listeners serve plain HTTP, so HTTPS is a proxy's in front of it, and
//!   the cookie is `Secure` only there.
//! * The admin API takes the cookie instead of the token only with the
//!   header [`HEADER`]`: 1` ([`signed_in`]): a form, a link or an image on
//!   another site cannot set a header, and a script there cannot either
//!   without a CORS preflight, which the relay never answers. A request a
//!   browser marks as coming from another origin (`Sec-Fetch-Site`) is
//!   refused both at sign-in and with the cookie.
//! * Every answer here forbids framing and anything not from the relay
//!   itself ([`CSP`]), and is not cached without asking.

use super::{
    body_failed, body_timeout, closing, header, json_value, not_found, read_body, Answer, Api,
    BodyError, Throttle,
};
use crate::api::admin::{self, AUTH_FAILURE_DELAY};
use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
    COOKIE as COOKIE_HEADER, LOCATION, ORIGIN, REFERRER_POLICY, SET_COOKIE, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq as _;

/// The session cookie's name.
const COOKIE: &str = "callpost_console";

/// The header the console's script sends with each admin request, which
/// no cross-site form can.
const HEADER: &str = "x-callpost-console";

/// What the session cookie is the admin token's HMAC of (with its expiry);
/// versioned, so a later form of session signs older ones out.
const SESSION_CONTEXT: &[u8] = b"callpost console session v2";

/// How long a console session lasts before the token is asked for again:
/// a working day, as an AWS IAM user's console session (12 hours).
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// The largest sign-in body: `token=` and a token (at least 32
/// characters, a few hundred at most in practice), percent-encoded.
const MAX_SIGN_IN_BYTES: usize = 1024;

/// The console's Content-Security-Policy: its own files only, in no
/// frame; forms post only to the relay, and no `<base>` can move the
/// page's relative URLs elsewhere.
const CSP: &str = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

const INDEX: &str = include_str!("../../console/index.html");
const SIGN_IN: &str = include_str!("../../console/signin.html");
const SCRIPT: &str = include_str!("../../console/console.js");
const STYLE: &str = include_str!("../../console/console.css");

/// Where the sign-in page says why it is shown again.
const MESSAGE_SLOT: &str = "<!-- message -->";

const HTML: &str = "text/html; charset=utf-8";

/// Failed sign-ins, logged at most once a second as admin failures are.
static FAILURES: Throttle = Throttle::new(Duration::from_secs(1));

/// Answers a request under `/console`.
pub(crate) async fn handle(
    api: &Api,
    req: Request<Incoming>,
    remote: SocketAddr,
    headers_in: Instant,
) -> Answer {
    let method = req.method().clone();
    match (&method, req.uri().path()) {
        (&Method::GET, "/console") => see_other("/console/", None),
        (&Method::GET, "/console/") => page(api, req.headers()),
        (&Method::GET, "/console/console.js") => asset(SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/console/console.css") => asset(STYLE, "text/css; charset=utf-8"),
        (&Method::GET, "/console/history") => {
            match admin::authorize(api, req.headers(), remote).await {
                Ok(()) => secured(json_value(200, &api.history.report())),
                Err(a) => secured(a),
            }
        }
        (&Method::POST, "/console/session") => sign_in(api, req, remote, headers_in).await,
        (&Method::POST, "/console/session/end") => {
            if from_elsewhere(req.headers()) {
                return closing(sign_in_page(
                    403,
                    "Sign out from the console's own page: a sign-out from another site is refused.",
                ));
            }
            see_other(
                "/console/",
                Some(format!(
                    "{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{}",
                    if served_over_https(req.headers()) {
                        "; Secure"
                    } else {
                        ""
                    }
                )),
            )
        }
        _ => secured(not_found()),
    }
}

/// Whether `headers` carry a console session the admin API takes in
/// place of the token: the right cookie, the console's own header, and
/// nothing saying the request comes from another origin.
pub(crate) fn signed_in(api: &Api, headers: &HeaderMap) -> bool {
    api.relay
        .cfg
        .admin_token
        .as_ref()
        .is_some_and(|t| console_request(t.expose(), headers, now_s(api)))
}

/// The relay's clock, in seconds since the epoch.
fn now_s(api: &Api) -> i64 {
    api.relay.clock.now_ms().div_euclid(1000)
}

/// [`signed_in`] for the admin token `token`, at `now` (seconds).
fn console_request(token: &str, headers: &HeaderMap, now: i64) -> bool {
    let own_header = headers.get_all(HEADER).iter().any(|v| v.as_bytes() == b"1");
    own_header && !cross_origin(headers) && has_session(token, headers, now)
}

/// Whether a `callpost_console` cookie in `headers` is a session of
/// `token` that has not expired at `now` (seconds; compared in constant
/// time).
fn has_session(token: &str, headers: &HeaderMap, now: i64) -> bool {
    let mut found = false;
    for value in headers.get_all(COOKIE_HEADER) {
        let Ok(text) = std::str::from_utf8(value.as_bytes()) else {
            continue;
        };
        for pair in text.split(';') {
            let Some((name, given)) = pair.trim().split_once('=') else {
                continue;
            };
            let Some(expires) = given
                .split_once('.')
                .and_then(|(e, _)| e.parse::<i64>().ok())
                .filter(|e| *e > now)
            else {
                continue;
            };
            // No early return: every cookie of that name is compared.
            let expected = session(token, expires);
            found |= name == COOKIE && bool::from(given.as_bytes().ct_eq(expected.as_bytes()));
        }
    }
    found
}

/// The session cookie's value for `token` until `expires` (seconds since
/// the epoch): the expiry, `.`, and the HMAC-SHA256 of [`SESSION_CONTEXT`],
/// `.` and the expiry under the token, in lowercase hex.
fn session(token: &str, expires: i64) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
    let mut signed = SESSION_CONTEXT.to_vec();
    signed.push(b'.');
    signed.extend_from_slice(expires.to_string().as_bytes());
    let tag = ring::hmac::sign(&key, &signed);
    format!("{expires}.{}", hex::encode(tag.as_ref()))
}

/// The `Set-Cookie` value that signs a browser in with `token` at `now`
/// (seconds), for [`SESSION_TTL`].
fn session_cookie(token: &str, secure: bool, now: i64) -> String {
    let ttl = SESSION_TTL.as_secs();
    format!(
        "{COOKIE}={}; Path=/; Max-Age={ttl}; HttpOnly; SameSite=Strict{}",
        session(token, now.saturating_add_unsigned(ttl)),
        if secure { "; Secure" } else { "" }
    )
}

/// Whether the browser says the request comes from a page of another
/// origin (`Sec-Fetch-Site`, sent by every current browser). A request
/// without the header (an older browser, a script) is judged by the
/// other checks alone.
fn cross_origin(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() != b"same-origin")
}

/// Whether a form post comes from another site's page: as
/// [`cross_origin`] says, or, from a browser that sends no
/// `Sec-Fetch-Site`, an `Origin` whose host is neither the `Host` the
/// request was sent to nor the one a proxy forwarded (`X-Forwarded-Host`).
/// A post with neither header comes from no page (a script) and is
/// judged by the other checks.
fn from_elsewhere(headers: &HeaderMap) -> bool {
    if headers.contains_key("sec-fetch-site") {
        return cross_origin(headers);
    }
    let Some(origin) = header(headers, &ORIGIN) else {
        return false;
    };
    let host = origin.split_once("://").map_or("", |(_, h)| h);
    let same = |name: &HeaderName| {
        header(headers, name).is_some_and(|h| h.trim().eq_ignore_ascii_case(host))
    };
    !(same(&http::header::HOST) || same(&HeaderName::from_static("x-forwarded-host")))
}

/// Whether the page was served over HTTPS, as the browser (`Origin`) or
/// the proxy in front of the relay (`X-Forwarded-Proto`) tells: either
/// could lie, but only to make the cookie stricter.
fn served_over_https(headers: &HeaderMap) -> bool {
    let origin = header(headers, &ORIGIN).is_some_and(|o| o.starts_with("https://"));
    let forwarded = header(headers, &HeaderName::from_static("x-forwarded-proto"))
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    origin || forwarded
}

/// The console page when the browser has a session, else the sign-in
/// page (neither holds any data).
fn page(api: &Api, headers: &HeaderMap) -> Answer {
    match &api.relay.cfg.admin_token {
        None => sign_in_page(
            403,
            "The admin API is off: set admin_token to use the console.",
        ),
        Some(t) if has_session(t.expose(), headers, now_s(api)) => asset(INDEX, HTML),
        Some(_) => sign_in_page(200, ""),
    }
}

/// `POST /console/session`, from the sign-in form.
async fn sign_in(
    api: &Api,
    req: Request<Incoming>,
    remote: SocketAddr,
    headers_in: Instant,
) -> Answer {
    let relay = &api.relay;
    let Some(token) = relay.cfg.admin_token.as_ref() else {
        return sign_in_page(
            403,
            "The admin API is off: set admin_token to use the console.",
        );
    };
    if from_elsewhere(req.headers()) {
        return closing(sign_in_page(
            403,
            "Sign in from the console's own page: a sign-in from another site is refused.",
        ));
    }
    let secure = served_over_https(req.headers());
    let declared =
        header(req.headers(), &CONTENT_LENGTH).and_then(|v| v.trim().parse::<usize>().ok());
    let deadline = headers_in + relay.cfg.limits.body_timeout;
    let raw = match read_body(req.into_body(), MAX_SIGN_IN_BYTES, declared, deadline).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return closing(sign_in_page(
                413,
                "That is not an admin token: it is too long.",
            ))
        }
        Err(BodyError::TimedOut) => return secured(body_timeout(relay)),
        Err(BodyError::Failed) => return secured(body_failed()),
    };
    let given = form_field(&raw, "token").unwrap_or_default();
    if bool::from(given.as_bytes().ct_eq(token.expose().as_bytes())) {
        return see_other(
            "/console/",
            Some(session_cookie(token.expose(), secure, now_s(api))),
        );
    }
    relay.metrics.admin_auth_failure();
    if let Some(held) = FAILURES.allow() {
        tracing::warn!(
            "refused a console sign-in from {remote}: wrong admin token ({held} more refused since the last warning)"
        );
    }
    tokio::time::sleep(AUTH_FAILURE_DELAY).await;
    closing(sign_in_page(401, "That is not the admin token."))
}

/// The value of `name` in an `application/x-www-form-urlencoded` body.
fn form_field(body: &Bytes, name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| {
            let v = v.replace('+', " ");
            percent_encoding::percent_decode_str(&v)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

fn sign_in_page(status: u16, message: &str) -> Answer {
    let body = if message.is_empty() {
        SIGN_IN.to_owned()
    } else {
        // Only the relay's own sentences go here, never what was sent.
        SIGN_IN.replace(
            MESSAGE_SLOT,
            &format!(r#"<p class="error" role="alert">{message}</p>"#),
        )
    };
    let mut a = asset_bytes(Bytes::from(body), HTML);
    *a.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
    a
}

fn asset(text: &'static str, content_type: &'static str) -> Answer {
    asset_bytes(Bytes::from_static(text.as_bytes()), content_type)
}

fn asset_bytes(body: Bytes, content_type: &'static str) -> Answer {
    let mut a = Response::new(Full::new(body));
    a.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    secured(a)
}

/// A 303 to `to`, setting `cookie` if given.
fn see_other(to: &'static str, cookie: Option<String>) -> Answer {
    let mut a = Response::new(Full::new(Bytes::new()));
    *a.status_mut() = StatusCode::SEE_OTHER;
    a.headers_mut()
        .insert(LOCATION, HeaderValue::from_static(to));
    if let Some(c) = cookie.and_then(|c| HeaderValue::try_from(c).ok()) {
        a.headers_mut().insert(SET_COOKIE, c);
    }
    secured(a)
}

/// Adds the headers every console answer has.
fn secured(mut a: Answer) -> Answer {
    let h = a.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    a
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TOKEN: &str = "admin-test-token-0123456789abcdef0123";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// A time to sign in at, seconds since the epoch.
    const NOW: i64 = 1_800_000_000;

    /// [`console_request`] at [`NOW`].
    fn request(token: &str, h: &HeaderMap) -> bool {
        console_request(token, h, NOW)
    }

    fn cookie() -> String {
        format!("{COOKIE}={}", session(TOKEN, NOW + 3600))
    }

    #[test]
    fn the_cookie_is_http_only_same_site_strict_and_secure_over_https() {
        let c = session_cookie(TOKEN, false, NOW);
        let attrs: Vec<&str> = c.split("; ").collect();
        assert_eq!(
            attrs[0],
            format!("{COOKIE}={}", session(TOKEN, NOW + 12 * 3600))
        );
        assert_eq!(
            &attrs[1..],
            ["Path=/", "Max-Age=43200", "HttpOnly", "SameSite=Strict"]
        );
        assert!(session_cookie(TOKEN, true, NOW).ends_with("; HttpOnly; SameSite=Strict; Secure"));
        assert!(served_over_https(&headers(&[(
            "origin",
            "https://ops.example.com"
        )])));
        assert!(served_over_https(&headers(&[(
            "x-forwarded-proto",
            "HTTPS"
        )])));
        assert!(!served_over_https(&headers(&[(
            "origin",
            "http://127.0.0.1:9000"
        )])));
        assert!(!served_over_https(&HeaderMap::new()));
    }

    #[test]
    fn the_session_is_derived_from_the_token_not_the_token_itself() {
        let s = session(TOKEN, NOW);
        assert_eq!(s.len(), 11 + 64);
        assert!(!s.contains(TOKEN));
        assert_ne!(s, session("another-admin-token-0123456789abcdef", NOW));
        // HMAC-SHA256, checked against an independent implementation
        // (Python: hmac.new(b"key", b"callpost console session v2.1800000000",
        // sha256).hexdigest()).
        assert_eq!(
            session("key", NOW),
            "1800000000.21f6bc4fcd7ee95e0ae3c1be79fc301e40c49cf732757bf4e1761a479c1025b7"
        );
    }

    #[test]
    fn the_right_cookie_and_the_console_header_sign_in() {
        let c = cookie();
        assert!(request(TOKEN, &headers(&[("cookie", &c), (HEADER, "1")])));
        assert!(request(
            TOKEN,
            &headers(&[
                ("cookie", &format!("theme=dark; {c}; other=1")),
                (HEADER, "1"),
                ("sec-fetch-site", "same-origin"),
            ])
        ));
    }

    /// A session ends at its expiry, and its expiry cannot be moved: it is
    /// signed with the rest.
    #[test]
    fn a_session_ends_at_its_expiry() {
        let c = session_cookie(TOKEN, false, NOW);
        let value = c.split("; ").next().unwrap();
        let with = |now: i64, cookie: &str| {
            console_request(TOKEN, &headers(&[("cookie", cookie), (HEADER, "1")]), now)
        };
        assert!(with(NOW, value));
        assert!(with(NOW + 12 * 3600 - 1, value));
        assert!(!with(NOW + 12 * 3600, value), "expired");
        let (_, mac) = value.split_once('.').unwrap();
        let later = format!("{COOKIE}={}.{mac}", NOW + 100 * 3600);
        assert!(!with(NOW + 13 * 3600, &later), "an expiry moved by hand");
    }

    #[test]
    fn a_form_post_from_another_site_is_told_apart() {
        let from = |pairs: &[(&'static str, &str)]| from_elsewhere(&headers(pairs));
        assert!(!from(&[
            ("sec-fetch-site", "same-origin"),
            ("origin", "https://evil.example")
        ]));
        assert!(from(&[("sec-fetch-site", "cross-site")]));
        assert!(from(&[("sec-fetch-site", "same-site")]));
        assert!(!from(&[
            ("origin", "http://127.0.0.1:8088"),
            ("host", "127.0.0.1:8088")
        ]));
        assert!(!from(&[
            ("origin", "https://ops.example.com"),
            ("host", "127.0.0.1:8088"),
            ("x-forwarded-host", "ops.example.com"),
        ]));
        assert!(from(&[
            ("origin", "https://evil.example"),
            ("host", "127.0.0.1:8088")
        ]));
        assert!(from(&[("origin", "null"), ("host", "127.0.0.1:8088")]));
        assert!(!from(&[("host", "127.0.0.1:8088")]), "no page: a script");
    }

    #[test]
    fn a_wrong_or_missing_cookie_is_refused() {
        assert!(!request(TOKEN, &headers(&[(HEADER, "1")])));
        let wrong = format!(
            "{COOKIE}={}",
            session("not-the-admin-token-0123456789abcdef", NOW + 3600)
        );
        assert!(!request(
            TOKEN,
            &headers(&[("cookie", &wrong), (HEADER, "1")])
        ));
        // The token itself is not a session.
        let token = format!("{COOKIE}={TOKEN}");
        assert!(!request(
            TOKEN,
            &headers(&[("cookie", &token), (HEADER, "1")])
        ));
        let other_name = format!("callpost_consol={}", session(TOKEN, NOW + 3600));
        assert!(!request(
            TOKEN,
            &headers(&[("cookie", &other_name), (HEADER, "1")])
        ));
    }

    #[test]
    fn the_cookie_without_the_console_header_is_refused() {
        let c = cookie();
        assert!(!request(TOKEN, &headers(&[("cookie", &c)])));
        assert!(!request(TOKEN, &headers(&[("cookie", &c), (HEADER, "0")])));
    }

    #[test]
    fn a_request_from_another_origin_is_refused_even_with_both() {
        let c = cookie();
        for site in ["cross-site", "same-site", "none"] {
            assert!(!request(
                TOKEN,
                &headers(&[("cookie", &c), (HEADER, "1"), ("sec-fetch-site", site)])
            ));
        }
    }

    #[test]
    fn the_token_is_read_from_the_form() {
        let body = Bytes::from_static(b"next=x&token=a%2Bb+c%3D");
        assert_eq!(form_field(&body, "token").as_deref(), Some("a+b c="));
        assert_eq!(form_field(&Bytes::from_static(b"tok=1"), "token"), None);
    }

    #[test]
    fn the_sign_in_page_has_a_place_for_its_message_and_no_inline_code() {
        assert!(SIGN_IN.contains(MESSAGE_SLOT));
        for page in [SIGN_IN, INDEX] {
            assert!(!page.contains("<script>") && !page.contains("style="));
            assert!(!page.contains("http://") && !page.contains("https://"));
        }
    }
}
