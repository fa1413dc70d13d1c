//! The destination's settings: endpoints, their static headers, and the
//! delivery mode (webhooks-destination.md, "Destination settings").

use crate::call::Call;
use crate::code::Code;
use crate::json::{Quoted, Value};
use crate::mapping::{UrlTemplate, UrlValueError};
use crate::timestamp::Timestamp;
use crate::weburl::UrlError;
use std::fmt;

pub use super::auth::{Auth, ClientAuth, ClientCertificate, OAuth2};

/// Endpoints per destination: "Maximum 5 entries" (destination settings).
pub const MAX_ENDPOINTS: usize = 5;

/// Headers we set ourselves, which a static header may not replace. The first
/// five are the spec's and HTTP's; `idempotency-key` is ours; the framing
/// headers are excluded because a wrong value would corrupt the request.
pub const RESERVED_HEADERS: [&str; 11] = [
    "content-type",
    "user-agent",
    "x-signature",
    "content-length",
    "host",
    "idempotency-key",
    "transfer-encoding",
    "connection",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];

/// Which signatures a destination's requests carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Signing {
    /// `X-Signature` (HMAC-SHA1 of the body under `sharedSecret`), the
    /// spec's scheme; unsigned without a secret. The default.
    #[default]
    Segment,
    /// Standard Webhooks (`webhook-id`, `webhook-timestamp`,
    /// `webhook-signature`) under the `whsec_` signing secrets
    /// ([`crate::standard`]).
    Standard,
    /// Both: `X-Signature` for Segment-style receivers and the Standard
    /// Webhooks headers for the others, during a move from one to the other.
    Both,
}

impl Signing {
    /// The setting's value: `segment`, `standard` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Segment => "segment",
            Self::Standard => "standard",
            Self::Both => "both",
        }
    }

    /// The scheme named `s` (exact, lowercase).
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Segment, Self::Standard, Self::Both]
            .into_iter()
            .find(|m| m.as_str() == s)
    }

    /// Whether requests carry `X-Signature` (when there is a secret).
    pub fn segment(self) -> bool {
        self != Self::Standard
    }

    /// Whether requests carry the Standard Webhooks headers.
    pub fn standard(self) -> bool {
        self != Self::Segment
    }
}

/// How a call reaches a destination with several endpoints.
///
/// The spec says only that once "sending to any one succeeds", the call
/// "is not retried to the others". Segment's own Webhooks integration
/// POSTed every call to all configured hooks at once, failed the call only
/// when every hook failed, and sent to all of them again on a retry;
/// [`Mode::Parallel`] does the same and is the default, so a second
/// endpoint (a CRM beside an analytics store, say) receives every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Each round sends the call to every live endpoint at once; a success
    /// from any one ends the delivery, and a round in which all failed is
    /// followed by another to all of them after the backoff.
    #[default]
    Parallel,
    /// Each round tries the live endpoints one after another, moving on
    /// when one fails; the first success ends the delivery, and later
    /// endpoints never see the call.
    Failover,
}

impl Mode {
    /// The setting's value: `parallel` or `failover`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Parallel => "parallel",
            Self::Failover => "failover",
        }
    }

    /// The mode named `s` (exact, lowercase).
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Parallel, Self::Failover]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// The HTTP method requests are sent with: the spec's `POST`, or `PUT` or
/// `PATCH` for a receiver that updates a record (Segment's Webhooks
/// (Actions) destination offers the same three). Retries, `Retry-After`
/// and the signatures are the same for each: every request carries the
/// call's `Idempotency-Key`, so a `POST` retried is as safe as a `PUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Method {
    /// The spec's.
    #[default]
    Post,
    /// Replace the record the URL names.
    Put,
    /// Change the record the URL names.
    Patch,
}

impl Method {
    /// The method's name, as sent: `POST`, `PUT` or `PATCH`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
        }
    }

    /// The method named `s` (exact, uppercase, as HTTP writes it).
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Post, Self::Put, Self::Patch]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

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
    /// An endpoint's `auth` or `client_certificate` cannot be used; the
    /// reason names the field, never a secret's value.
    #[error("endpoint {index}: {reason}")]
    InvalidAuth {
        /// Which endpoint.
        index: usize,
        /// Why.
        reason: String,
    },
    /// A settings field has the wrong JSON type.
    #[error("settings field {0} has the wrong type")]
    InvalidField(&'static str),
    /// `batch` with an endpoint URL template: a batch carries many calls,
    /// a template's URL one call's values.
    #[error("batch cannot be set with a URL template ({{{{…}}}} in an endpoint URL): a batch carries many calls, and the URL names one")]
    BatchedTemplate,
    /// The `filters` cannot be used; the message names the rule.
    #[error(transparent)]
    Filter(#[from] crate::filter::FilterError),
    /// The `mapping` cannot be used; the message names the place.
    #[error(transparent)]
    Mapping(#[from] crate::mapping::MappingError),
}

impl SettingsError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::NoEndpoints => Code::NoEndpoints,
            Self::TooManyEndpoints(_) => Code::TooManyEndpoints,
            Self::InvalidUrl { .. } => Code::InvalidUrl,
            Self::UnsupportedScheme { .. } => Code::UnsupportedScheme,
            Self::UrlCredentials(_) => Code::UrlCredentials,
            Self::UrlFragment(_) => Code::UrlFragment,
            Self::InvalidHeaderName { .. } => Code::InvalidHeaderName,
            Self::InvalidHeaderValue { .. } => Code::InvalidHeaderValue,
            Self::ReservedHeader { .. } => Code::ReservedHeader,
            Self::InvalidAuth { .. } => Code::InvalidAuth,
            Self::InvalidField(_) | Self::BatchedTemplate => Code::InvalidSettings,
            Self::Filter(e) => e.code(),
            Self::Mapping(e) => e.code(),
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
    /// How its requests authenticate, beyond the signature.
    pub auth: Option<Auth>,
    /// A client certificate for a server that asks for one (mTLS).
    pub client_certificate: Option<ClientCertificate>,
}

/// Static header values are often credentials, so `Debug` shows names only.
fn debug_endpoint(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    url: &str,
    headers: &[(String, String)],
    auth: Option<&Auth>,
    client_certificate: bool,
) -> fmt::Result {
    let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    f.debug_struct(name)
        .field("url", &crate::weburl::redact_userinfo(url))
        .field("header_names", &names)
        .field("auth", &auth.map(Auth::kind))
        .field("client_certificate", &client_certificate)
        .finish()
}

impl fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_endpoint(
            f,
            "EndpointConfig",
            &self.url,
            &self.headers,
            self.auth.as_ref(),
            self.client_certificate.is_some(),
        )
    }
}

impl EndpointConfig {
    /// An endpoint with no static headers.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }

    /// From a JSON value: a URL string, or `{"url": ..., "headers": {...},
    /// "auth": {...}, "client_certificate": {...}}` ([`Auth`],
    /// [`ClientCertificate`]). `index` names the endpoint in errors.
    pub fn from_value(value: &Value) -> Result<Self, SettingsError> {
        Self::from_value_at(0, value)
    }

    /// [`EndpointConfig::from_value`] for the endpoint at `index`.
    pub fn from_value_at(index: usize, value: &Value) -> Result<Self, SettingsError> {
        let invalid = |reason: String| SettingsError::InvalidAuth { index, reason };
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
                let auth = match map.get("auth") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(Auth::from_value(v).map_err(invalid)?),
                };
                let client_certificate = match map.get("client_certificate") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(ClientCertificate::from_value(v).map_err(invalid)?),
                };
                Ok(Self {
                    url: url.to_owned(),
                    headers,
                    auth,
                    client_certificate,
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
    auth: Option<Auth>,
    client_certificate: Option<ClientCertificate>,
    /// The URL's placeholders, when it takes values from each call.
    template: Option<UrlTemplate>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_endpoint(
            f,
            "Endpoint",
            &self.url,
            &self.headers,
            self.auth.as_ref(),
            self.client_certificate.is_some(),
        )
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

    /// How its requests authenticate, beyond the signature.
    pub fn auth(&self) -> Option<&Auth> {
        self.auth.as_ref()
    }

    /// Its client certificate, for mutual TLS.
    pub fn client_certificate(&self) -> Option<&ClientCertificate> {
        self.client_certificate.as_ref()
    }

    /// Whether a 401 from it means its bearer token was refused (and a
    /// new one should be fetched and the call tried again), rather than a
    /// refusal for good.
    pub fn token_refused(&self, status: u16) -> bool {
        status == 401 && matches!(self.auth, Some(Auth::OAuth2(_)))
    }

    fn validate(index: usize, config: &EndpointConfig) -> Result<Self, SettingsError> {
        // A URL template is checked as the URL it is with a sentinel for
        // each placeholder, so the host, port and scheme rules hold for it
        // as for any URL.
        let (checked, placeholders) = match UrlTemplate::placeholders(&config.url) {
            Ok(Some((sentinels, paths))) => (std::borrow::Cow::Owned(sentinels), Some(paths)),
            Ok(None) => (std::borrow::Cow::Borrowed(config.url.as_str()), None),
            Err(reason) => {
                // What is wrong with the URL itself is said first.
                return Err(crate::weburl::parse(&config.url)
                    .err()
                    .map_or(SettingsError::InvalidUrl { index, reason }, |e| {
                        url_error(index, e)
                    }));
            }
        };
        let url = crate::weburl::parse(&checked).map_err(|e| url_error(index, e))?;
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
        let invalid = |reason: String| SettingsError::InvalidAuth { index, reason };
        if let Some(auth) = &config.auth {
            auth.check().map_err(invalid)?;
            if headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
            {
                return Err(invalid(
                    "auth and a static Authorization header cannot both be set".into(),
                ));
            }
        }
        if let Some(c) = &config.client_certificate {
            c.check().map_err(invalid)?;
        }
        let (url, template) = match placeholders {
            None => (url.href, None),
            Some(paths) => {
                let (template, shown) = UrlTemplate::from_normalized(&url.href, paths)
                    .map_err(|reason| SettingsError::InvalidUrl { index, reason })?;
                (shown, Some(template))
            }
        };
        Ok(Self {
            url,
            headers,
            auth: config.auth.clone(),
            client_certificate: config.client_certificate.clone(),
            template,
        })
    }

    /// The URL up to its first placeholder (all of it without one): its
    /// scheme, host and port, which a call's values never change, for a
    /// host that checks where requests go or pools connections by host.
    pub fn url_before_values(&self) -> &str {
        self.url.split("{{").next().unwrap_or(&self.url)
    }

    /// The URL's placeholders, when it takes values from each call
    /// (`https://api.example.com/users/{{userId}}`).
    pub fn template(&self) -> Option<&UrlTemplate> {
        self.template.as_ref()
    }

    /// The URL a request for `call` goes to: the template's, filled from
    /// the call, or the URL as it is.
    pub fn url_for(
        &self,
        call: &Call,
        now: Timestamp,
    ) -> Result<std::borrow::Cow<'_, str>, UrlValueError> {
        match &self.template {
            None => Ok(std::borrow::Cow::Borrowed(&self.url)),
            Some(t) => t.render(call, now).map(std::borrow::Cow::Owned),
        }
    }
}

fn url_error(index: usize, e: UrlError) -> SettingsError {
    match e {
        UrlError::Invalid(reason) => SettingsError::InvalidUrl {
            index,
            reason: reason.into(),
        },
        UrlError::Scheme(scheme) => SettingsError::UnsupportedScheme { index, scheme },
    }
}

/// Checks 1 to [`MAX_ENDPOINTS`] endpoints and normalises their URLs.
pub(super) fn validate_endpoints(
    configs: &[EndpointConfig],
) -> Result<Vec<Endpoint>, SettingsError> {
    if configs.is_empty() {
        return Err(SettingsError::NoEndpoints);
    }
    if configs.len() > MAX_ENDPOINTS {
        return Err(SettingsError::TooManyEndpoints(configs.len()));
    }
    configs
        .iter()
        .enumerate()
        .map(|(i, c)| Endpoint::validate(i, c))
        .collect()
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::webhooks::Webhooks;

    fn settings_code(endpoints: Vec<EndpointConfig>) -> &'static str {
        Webhooks::new(&endpoints, None).unwrap_err().code().as_str()
    }

    fn ep_with(name: &str, value: &str) -> EndpointConfig {
        EndpointConfig {
            url: "https://example.com/hook".into(),
            headers: vec![(name.into(), value.into())],
            ..EndpointConfig::default()
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
}
