//! The Webhooks destination: settings, body shapes and signed requests
//! (webhooks-destination.md).

use crate::call::{Call, CallError, CallKind, Object};
use crate::json::{write_string, write_value, Map, Quoted, Value};
use crate::routing::{is_enabled, WEBHOOKS};
use crate::signature::{Secret, SignatureError};
use crate::timestamp::Timestamp;
use crate::weburl::UrlError;
use std::borrow::Cow;
use std::fmt;

/// Endpoints per destination: "Maximum 5 entries" (destination settings).
pub const MAX_ENDPOINTS: usize = 5;

/// The `User-Agent` we send: the spec asks for "a fixed sender identifier with
/// version 1.0".
pub const USER_AGENT: &str = "callpost/1.0";

/// Headers we set ourselves, which a static header may not replace. The first
/// five are the spec's and HTTP's; `idempotency-key` is ours; the framing
/// headers are excluded because a wrong value would corrupt the request.
pub const RESERVED_HEADERS: [&str; 8] = [
    "content-type",
    "user-agent",
    "x-signature",
    "content-length",
    "host",
    "idempotency-key",
    "transfer-encoding",
    "connection",
];

/// Bad destination settings. Raised when the settings are built, never later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// No endpoint was given. Configure 1 to 5 URLs.
    #[error("at least one endpoint url is required")]
    NoEndpoints,
    /// More than [`MAX_ENDPOINTS`] endpoints. Remove some.
    #[error("{0} endpoints given; the destination allows at most 5")]
    TooManyEndpoints(usize),
    /// The URL does not parse as an absolute URL with a host.
    #[error("endpoint {index}: invalid url: {reason}")]
    InvalidUrl {
        /// Which endpoint.
        index: usize,
        /// Why.
        reason: String,
    },
    /// Only `http` and `https` are delivered to.
    #[error("endpoint {index}: scheme {} is not http or https", Quoted(.scheme))]
    UnsupportedScheme {
        /// Which endpoint.
        index: usize,
        /// The scheme given.
        scheme: String,
    },
    /// The URL carries a user name or password. Put credentials in a static
    /// header (such as Authorization) so they stay out of logs and URLs;
    /// browsers' fetch refuses such URLs too.
    #[error("endpoint {0}: url must not contain credentials; use a static Authorization header")]
    UrlCredentials(usize),
    /// The URL has a `#fragment`, which HTTP never sends. Remove it.
    #[error("endpoint {0}: url must not contain a #fragment (it is never sent)")]
    UrlFragment(usize),
    /// A static header name is not an HTTP token.
    #[error("endpoint {index}: header name {} is not a valid http token", Quoted(.name))]
    InvalidHeaderName {
        /// Which endpoint.
        index: usize,
        /// The name given.
        name: String,
    },
    /// A static header value holds CR, LF, NUL or non-ASCII characters. Only
    /// visible ASCII, space and tab are allowed, which every HTTP client we
    /// drive (fetch, httpx) sends unchanged.
    #[error(
        "endpoint {index}: value of header {} contains a control or non-ascii character",
        Quoted(.name)
    )]
    InvalidHeaderValue {
        /// Which endpoint.
        index: usize,
        /// The header's name (the value is not shown: it may be a credential).
        name: String,
    },
    /// A static header tries to replace one we set ([`RESERVED_HEADERS`]).
    #[error("endpoint {index}: header {} is set by callpost and cannot be overridden", Quoted(.name))]
    ReservedHeader {
        /// Which endpoint.
        index: usize,
        /// The header's name.
        name: String,
    },
    /// A settings field has the wrong JSON type.
    #[error("settings field {0} has the wrong type")]
    InvalidField(&'static str),
}

impl SettingsError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoEndpoints => "no_endpoints",
            Self::TooManyEndpoints(_) => "too_many_endpoints",
            Self::InvalidUrl { .. } => "invalid_url",
            Self::UnsupportedScheme { .. } => "unsupported_scheme",
            Self::UrlCredentials(_) => "url_credentials",
            Self::UrlFragment(_) => "url_fragment",
            Self::InvalidHeaderName { .. } => "invalid_header_name",
            Self::InvalidHeaderValue { .. } => "invalid_header_value",
            Self::ReservedHeader { .. } => "reserved_header",
            Self::InvalidField(_) => "invalid_settings",
        }
    }
}

/// One configured endpoint, before validation.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct EndpointConfig {
    /// Full http or https URL.
    pub url: String,
    /// Static headers sent with every request to this URL, in order.
    pub headers: Vec<(String, String)>,
}

/// Static header values are often credentials, so `Debug` shows names only.
fn debug_endpoint(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    url: &str,
    headers: &[(String, String)],
) -> fmt::Result {
    let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    f.debug_struct(name)
        .field("url", &crate::weburl::redact_userinfo(url))
        .field("header_names", &names)
        .finish()
}

impl fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_endpoint(f, "EndpointConfig", &self.url, &self.headers)
    }
}

impl EndpointConfig {
    /// An endpoint with no static headers.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
        }
    }

    /// From a JSON value: a URL string, or `{"url": ..., "headers": {...}}`.
    pub fn from_value(value: &Value) -> Result<Self, SettingsError> {
        match value {
            Value::String(url) => Ok(Self::new(url.clone())),
            Value::Object(map) => {
                let url = map
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or(SettingsError::InvalidField("url"))?;
                let mut headers = Vec::new();
                match map.get("headers") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(h)) => {
                        for (name, v) in h {
                            let v = v.as_str().ok_or(SettingsError::InvalidField("headers"))?;
                            headers.push((name.clone(), v.to_owned()));
                        }
                    }
                    Some(_) => return Err(SettingsError::InvalidField("headers")),
                }
                Ok(Self {
                    url: url.to_owned(),
                    headers,
                })
            }
            _ => Err(SettingsError::InvalidField("endpoints")),
        }
    }
}

/// A validated endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
    headers: Vec<(String, String)>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_endpoint(f, "Endpoint", &self.url, &self.headers)
    }
}

impl Endpoint {
    /// The normalised URL (as the WHATWG URL parser writes it).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The static headers.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    fn validate(index: usize, config: &EndpointConfig) -> Result<Endpoint, SettingsError> {
        let url = crate::weburl::parse(&config.url).map_err(|e| match e {
            UrlError::Invalid(reason) => SettingsError::InvalidUrl {
                index,
                reason: reason.into(),
            },
            UrlError::Scheme(scheme) => SettingsError::UnsupportedScheme { index, scheme },
        })?;
        if url.has_credentials {
            return Err(SettingsError::UrlCredentials(index));
        }
        if url.has_fragment {
            return Err(SettingsError::UrlFragment(index));
        }
        let mut headers = Vec::with_capacity(config.headers.len());
        for (name, value) in &config.headers {
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                return Err(SettingsError::InvalidHeaderName {
                    index,
                    name: name.clone(),
                });
            }
            let lower = name.to_ascii_lowercase();
            if RESERVED_HEADERS.contains(&lower.as_str()) {
                return Err(SettingsError::ReservedHeader {
                    index,
                    name: name.clone(),
                });
            }
            if !value
                .bytes()
                .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
            {
                return Err(SettingsError::InvalidHeaderValue {
                    index,
                    name: name.clone(),
                });
            }
            // fetch trims surrounding spaces and tabs from header values;
            // trimming here makes every runtime send the same bytes.
            headers.push((name.clone(), value.trim_matches([' ', '\t']).to_owned()));
        }
        Ok(Endpoint {
            url: url.href,
            headers,
        })
    }
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A header name or value: most are constants (`User-Agent`,
/// `Content-Type`), which are borrowed, so building a request allocates only
/// for the values that change (`X-Signature`, `Idempotency-Key`): six
/// allocations fewer per webhook request.
pub type HeaderText = Cow<'static, str>;

/// An HTTP request ready to send.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    /// Always `POST`.
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
    /// The value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

/// The settings of one Webhooks destination: 1–5 endpoints and an optional
/// shared secret.
#[derive(Clone, Debug)]
pub struct Webhooks {
    endpoints: Vec<Endpoint>,
    secret: Option<Secret>,
}

impl Webhooks {
    /// Validates the settings. An empty `shared_secret` means unsigned, as
    /// the spec's settings treat an unset secret.
    pub fn new(
        endpoints: &[EndpointConfig],
        shared_secret: Option<&[u8]>,
    ) -> Result<Self, SettingsError> {
        if endpoints.is_empty() {
            return Err(SettingsError::NoEndpoints);
        }
        if endpoints.len() > MAX_ENDPOINTS {
            return Err(SettingsError::TooManyEndpoints(endpoints.len()));
        }
        let endpoints = endpoints
            .iter()
            .enumerate()
            .map(|(i, c)| Endpoint::validate(i, c))
            .collect::<Result<Vec<_>, _>>()?;
        let secret = match shared_secret {
            None | Some([]) => None,
            // Non-empty, so keying cannot fail.
            Some(key) => Some(
                Secret::new(key)
                    .map_err(|_: SignatureError| SettingsError::InvalidField("sharedSecret"))?,
            ),
        };
        Ok(Self { endpoints, secret })
    }

    /// From the JSON settings form used by the shared vectors and bindings:
    /// `{"endpoints": [url | {"url", "headers"}], "sharedSecret": "..."}`.
    pub fn from_value(value: &Value) -> Result<Self, SettingsError> {
        let map = value
            .as_object()
            .ok_or(SettingsError::InvalidField("settings"))?;
        let endpoints = match map.get("endpoints") {
            Some(Value::Array(items)) => items
                .iter()
                .map(EndpointConfig::from_value)
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err(SettingsError::InvalidField("endpoints")),
        };
        let secret = match map.get("sharedSecret") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_bytes()),
            Some(_) => return Err(SettingsError::InvalidField("sharedSecret")),
        };
        Self::new(&endpoints, secret)
    }

    /// The validated endpoints, in failover order.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Whether requests are signed.
    pub fn is_signed(&self) -> bool {
        self.secret.is_some()
    }

    /// Whether this destination receives `call`, per its `integrations`.
    pub fn is_enabled_for(&self, call: &Call) -> bool {
        is_enabled(call.integrations.as_ref(), WEBHOOKS)
    }

    /// Builds the signed request delivering `call` to endpoint `endpoint`.
    /// `now` stamps calls that carry no timestamp.
    ///
    /// Errors: [`Error::Call`](crate::Error::Call) for an invalid call or a
    /// value with no JSON form; [`Error::Endpoint`](crate::Error::Endpoint)
    /// for an index past the configured endpoints.
    pub fn request(
        &self,
        call: &Call,
        endpoint: usize,
        now: Timestamp,
    ) -> Result<Request, crate::Error> {
        self.request_with(call, endpoint, now, None)
    }

    /// [`Webhooks::request`], signed by the host's `hmac` when given (see
    /// [`Webhooks::request_for_body_with`]).
    pub fn request_with(
        &self,
        call: &Call,
        endpoint: usize,
        now: Timestamp,
        hmac: Option<HostHmac<'_>>,
    ) -> Result<Request, crate::Error> {
        let mut body = Vec::with_capacity(call.capacity_hint());
        write_body(call, now, &mut body)?;
        self.request_for_body_with(call.message_id.as_deref(), body, endpoint, hmac)
    }

    /// Wraps body bytes that [`write_body`] produced into the request for
    /// `endpoint`: headers, signature and idempotency key.
    pub fn request_for_body(
        &self,
        message_id: Option<&str>,
        body: Vec<u8>,
        endpoint: usize,
    ) -> Result<Request, crate::Error> {
        self.request_for_body_with(message_id, body, endpoint, None)
    }

    /// [`Webhooks::request_for_body`], with `X-Signature` computed by
    /// `hmac` when given: the host's own lowercase-hex HMAC-SHA1 of the body
    /// under the shared secret, the same function as the core's, or `None`
    /// to let the core sign. Hosts pass one where their platform's is
    /// faster (Node's OpenSSL, against SHA-1 in wasm, for large bodies).
    /// Which header, and when, stays here.
    pub fn request_for_body_with(
        &self,
        message_id: Option<&str>,
        body: Vec<u8>,
        endpoint: usize,
        hmac: Option<HostHmac<'_>>,
    ) -> Result<Request, crate::Error> {
        let ep = self
            .endpoints
            .get(endpoint)
            .ok_or(crate::Error::Endpoint(endpoint))?;
        let mut headers = Vec::with_capacity(4 + ep.headers.len());
        headers.push(("User-Agent".into(), USER_AGENT.into()));
        headers.push(("Content-Type".into(), "application/json".into()));
        headers.extend(
            ep.headers
                .iter()
                .map(|(n, v)| (n.clone().into(), v.clone().into())),
        );
        if let Some(secret) = &self.secret {
            let signature = hmac
                .and_then(|hmac| hmac(&body))
                .unwrap_or_else(|| secret.sign(&body));
            headers.push(("X-Signature".into(), signature.into()));
        }
        // Receivers de-duplicate retried deliveries with it. Only visible
        // ASCII can travel in a header, so other ids are left out rather
        // than mangled.
        if let Some(id) =
            message_id.filter(|id| !id.is_empty() && id.bytes().all(|b| (0x21..0x7f).contains(&b)))
        {
            headers.push(("Idempotency-Key".into(), id.to_owned().into()));
        }
        Ok(Request {
            method: "POST",
            url: ep.url.clone(),
            headers,
            body,
        })
    }
}

/// A host's HMAC-SHA1 for `X-Signature`: lowercase hex of the body under
/// the shared secret, or `None` to let the core sign (see
/// [`Webhooks::request_for_body_with`]).
pub type HostHmac<'a> = &'a mut dyn FnMut(&[u8]) -> Option<String>;

/// Writes the body for `call` exactly as the spec's "Body shape by call kind"
/// table gives it, keys in the table's order.
///
/// Decisions where the spec is silent:
/// * a missing `userId` (a call made with `anonymousId` only) leaves the key
///   out; the table has no `anonymousId`, so none is sent;
/// * missing `properties` or `traits` are written as `{}`, so receivers can
///   rely on the key being there;
/// * a screen call's `context` holds only `device`, `os` and `app`, each only
///   when the call has it; a screen without `name` leaves `name` out;
/// * free-form objects are written unchanged (in `JSON.stringify` form);
/// * `timestamp` is the call's, in UTC with milliseconds, or `now` if absent.
pub fn write_body(call: &Call, now: Timestamp, out: &mut Vec<u8>) -> Result<(), CallError> {
    call.validate()?;
    let mut w = BodyWriter { out, first: true };
    w.out.push(b'{');
    if call.kind != CallKind::Delete {
        w.key("version");
        w.out.push(b'1');
    }
    w.key("type");
    write_string(call.kind.as_str(), w.out);
    let ts = call.timestamp.unwrap_or(now);
    match call.kind {
        CallKind::Page => {
            w.opt_str("userId", call.user_id());
            w.object("properties", call.properties.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Screen => {
            w.opt_str("userId", call.user_id());
            w.opt_str("name", call.name.as_deref());
            w.timestamp(ts);
            w.key("context");
            let mut ctx = Map::new();
            if let Some(c) = &call.context {
                for part in ["device", "os", "app"] {
                    if let Some(v) = c.get(part) {
                        ctx.insert(part.to_owned(), v.clone());
                    }
                }
            }
            write_value(&Value::Object(ctx), w.out)?;
        }
        CallKind::Identify => {
            w.opt_str("userId", call.user_id());
            w.object("traits", call.traits.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Track => {
            w.opt_str("userId", call.user_id());
            w.opt_str("event", call.event.as_deref());
            w.object("properties", call.properties.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Alias => {
            w.opt_str("Previous ID", call.previous_id.as_deref());
            w.opt_str("User ID", call.user_id());
            w.timestamp(ts);
        }
        CallKind::Group => {
            w.opt_str("groupId", call.group_id.as_deref());
            w.opt_str("userId", call.user_id());
            w.object("traits", call.traits.as_ref())?;
            w.timestamp(ts);
        }
        CallKind::Delete => {
            w.opt_str("userId", call.user_id());
            w.timestamp(ts);
        }
    }
    w.out.push(b'}');
    Ok(())
}

struct BodyWriter<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl BodyWriter<'_> {
    fn key(&mut self, k: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_string(k, self.out);
        self.out.push(b':');
    }
    fn opt_str(&mut self, k: &str, v: Option<&str>) {
        if let Some(v) = v {
            self.key(k);
            write_string(v, self.out);
        }
    }
    fn object(&mut self, k: &str, o: Option<&Object>) -> Result<(), CallError> {
        self.key(k);
        match o {
            Some(o) => o.write(self.out)?,
            None => self.out.extend_from_slice(b"{}"),
        }
        Ok(())
    }
    fn timestamp(&mut self, ts: Timestamp) {
        self.key("timestamp");
        self.out.push(b'"');
        ts.write_iso(self.out);
        self.out.push(b'"');
    }
}

/// A source affected by a deletion request, with its destination switches.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteSource {
    /// The source's identifier (not sent in the body; for the host's records).
    pub source_id: String,
    /// The source's `integrations` settings for this destination.
    pub integrations: Option<Map>,
}

/// One delete call per affected source that has Webhooks enabled
/// (webhooks-destination.md, Events), in the order the sources were given,
/// each paired with its source id.
pub fn delete_notifications(
    user_id: &str,
    sources: &[DeleteSource],
    now: Timestamp,
) -> Result<Vec<(String, Call)>, CallError> {
    let mut call = Call::new(CallKind::Delete);
    call.user_id = Some(user_id.to_owned());
    call.timestamp = Some(now);
    call.validate()?;
    Ok(sources
        .iter()
        .filter(|s| is_enabled(s.integrations.as_ref(), WEBHOOKS))
        .map(|s| (s.source_id.clone(), call.clone()))
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings_code(endpoints: Vec<EndpointConfig>) -> &'static str {
        Webhooks::new(&endpoints, None).unwrap_err().code()
    }

    fn ep_with(name: &str, value: &str) -> EndpointConfig {
        EndpointConfig {
            url: "https://example.com/hook".into(),
            headers: vec![(name.into(), value.into())],
        }
    }

    #[test]
    fn settings_rules() {
        assert_eq!(settings_code(vec![]), "no_endpoints");
        assert_eq!(
            settings_code(vec![EndpointConfig::new("https://a.example/"); 6]),
            "too_many_endpoints"
        );
        assert_eq!(
            settings_code(vec![EndpointConfig::new("ftp://a.example/")]),
            "unsupported_scheme"
        );
        assert_eq!(
            settings_code(vec![EndpointConfig::new("/relative")]),
            "invalid_url"
        );
        assert_eq!(
            settings_code(vec![EndpointConfig::new("https://u:p@a.example/")]),
            "url_credentials"
        );
        assert_eq!(
            settings_code(vec![EndpointConfig::new("https://a.example/#x")]),
            "url_fragment"
        );
        assert_eq!(
            settings_code(vec![ep_with("X-Ok", "a\r\nInjected: 1")]),
            "invalid_header_value"
        );
        assert_eq!(
            settings_code(vec![ep_with("X-Ok", "a\0")]),
            "invalid_header_value"
        );
        assert_eq!(
            settings_code(vec![ep_with("Bad Name", "v")]),
            "invalid_header_name"
        );
        assert_eq!(
            settings_code(vec![ep_with("x-SIGNATURE", "v")]),
            "reserved_header"
        );
        assert!(Webhooks::new(
            &vec![EndpointConfig::new("https://a.example/"); 5],
            Some(b"")
        )
        .is_ok());
    }

    #[test]
    fn debug_hides_header_values() {
        let s = format!("{:?}", ep_with("Authorization", "Bearer s3cr3t"));
        assert!(!s.contains("s3cr3t"), "{s}");
        let w = Webhooks::new(
            &[ep_with("Authorization", "Bearer s3cr3t")],
            Some(b"k3y-material"),
        )
        .unwrap();
        let s = format!("{w:?}");
        assert!(!s.contains("s3cr3t") && !s.contains("k3y-material"), "{s}");
    }

    #[test]
    fn delete_per_enabled_source() {
        let off = Value::from_json_str(r#"{"Webhooks":false}"#)
            .unwrap()
            .as_object()
            .cloned();
        let sources = [
            DeleteSource {
                source_id: "a".into(),
                integrations: None,
            },
            DeleteSource {
                source_id: "b".into(),
                integrations: off,
            },
            DeleteSource {
                source_id: "c".into(),
                integrations: None,
            },
        ];
        let out = delete_notifications("u1", &sources, Timestamp::from_millis(0).unwrap()).unwrap();
        let ids: Vec<&str> = out.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        let mut body = Vec::new();
        write_body(&out[0].1, Timestamp::from_millis(5).unwrap(), &mut body).unwrap();
        assert_eq!(
            body,
            br#"{"type":"delete","userId":"u1","timestamp":"1970-01-01T00:00:00.000Z"}"#
        );
    }

    #[test]
    fn debug_shows_neither_header_values_nor_url_credentials() {
        let mut ep = EndpointConfig::new("https://user:hunter2@a.example/hook");
        ep.headers
            .push(("Authorization".into(), "Bearer s3cret".into()));
        let shown = format!("{ep:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("s3cret"),
            "{shown}"
        );
        assert!(shown.contains("https://***@a.example/hook") && shown.contains("Authorization"));
    }

    #[test]
    fn a_host_hmac_signs_when_it_answers_and_the_core_otherwise() {
        let call = Call::from_json_str(r#"{"type":"track","userId":"u","event":"e"}"#).unwrap();
        let now = Timestamp::from_millis(0).unwrap();
        let eps = [EndpointConfig::new("https://a.example/")];
        let signed = Webhooks::new(&eps, Some(b"k")).unwrap();
        let core = signed.request(&call, 0, now).unwrap();
        let mut calls = 0;
        let mut host = |body: &[u8]| {
            calls += 1;
            assert_eq!(body, &core.body[..]);
            Some("f".repeat(40))
        };
        let r = signed.request_with(&call, 0, now, Some(&mut host)).unwrap();
        assert_eq!(r.header("X-Signature"), Some("f".repeat(40).as_str()));
        assert_eq!(
            (r.body, r.headers.len()),
            (core.body.clone(), core.headers.len())
        );
        let mut declines = |_: &[u8]| None;
        let r = signed
            .request_with(&call, 0, now, Some(&mut declines))
            .unwrap();
        assert_eq!(r.headers, core.headers);
        // Without a secret nothing is signed, by anyone.
        let unsigned = Webhooks::new(&eps, None).unwrap();
        let r = unsigned
            .request_with(&call, 0, now, Some(&mut host))
            .unwrap();
        assert_eq!(r.header("X-Signature"), None);
        assert_eq!(calls, 1);
    }
}
