//! The Webhooks destination (webhooks-destination.md): its settings
//! (`settings`), the body of each call kind (`body`), signed requests
//! (`request`) and delete notifications (`delete`).

mod address;
pub mod auth;
mod batch;
mod body;
mod delete;
mod request;
mod settings;

pub use address::is_public_address;
pub use batch::{
    is_batch_id, Batch, Batching, Packed, Skip, BATCH_ID_PREFIX, DEFAULT_BATCH_CALLS,
    MAX_BATCH_BYTES, MAX_BATCH_CALLS, MIN_BATCH_BYTES,
};
pub use body::write_body;
pub use delete::{delete_notifications, DeleteSource};
pub use request::{
    HeaderText, HostHmac, Request, RequestError, HOST_HMAC_MIN_BYTES, HOST_HMAC_REQUEST_MIN_BYTES,
    USER_AGENT,
};
pub use settings::{
    Auth, ClientAuth, ClientCertificate, Endpoint, EndpointConfig, Method, Mode, OAuth2,
    SettingsError, Signing, MAX_ENDPOINTS, RESERVED_HEADERS,
};

use crate::call::Call;
use crate::filter::{Decision, Filters};
use crate::json::Value;
use crate::mapping::{MapError, Mapping};
use crate::misuse::ApiMisuse;
use crate::routing::{is_enabled, WEBHOOKS};
use crate::signature::Secret;
use crate::standard::StandardSecret;
use crate::timestamp::Timestamp;
use std::sync::Arc;

/// The settings of one Webhooks destination: 1–5 endpoints, an optional
/// shared secret, and how a call is sent to several endpoints ([`Mode`]).
///
/// Cloning is cheap (the settings are shared), so every
/// [`Delivery`](crate::Delivery) keeps the settings it was made with.
#[derive(Clone, Debug)]
pub struct Webhooks {
    inner: Arc<Settings>,
}

#[derive(Debug, Clone)]
struct Settings {
    endpoints: Vec<Endpoint>,
    secret: Option<Secret>,
    mode: Mode,
    signing: Signing,
    /// The Standard Webhooks secrets, each signing every request (two
    /// during a rotation); empty with [`Signing::Segment`].
    signing_secrets: Vec<StandardSecret>,
    /// Which calls are sent, and without which fields ([`crate::filter`]).
    filters: Filters,
    /// Several calls per request when set ([`batch`]).
    batching: Option<Batching>,
    /// `POST`, or `PUT` or `PATCH`.
    method: Method,
    /// The body each call is sent with, when not the spec's
    /// ([`crate::mapping`]).
    mapping: Option<Mapping>,
}

impl Webhooks {
    /// Validates the settings, with the default [`Mode`]. An empty
    /// `shared_secret` means unsigned, as the spec's settings treat an
    /// unset secret.
    pub fn new(
        endpoints: &[EndpointConfig],
        shared_secret: Option<&[u8]>,
    ) -> Result<Self, SettingsError> {
        Self::with_mode(endpoints, shared_secret, Mode::default())
    }

    /// [`Webhooks::new`] with a [`Mode`].
    pub fn with_mode(
        endpoints: &[EndpointConfig],
        shared_secret: Option<&[u8]>,
        mode: Mode,
    ) -> Result<Self, SettingsError> {
        let endpoints = settings::validate_endpoints(endpoints)?;
        let secret = match shared_secret {
            None | Some([]) => None,
            // Non-empty, so keying cannot fail.
            Some(key) => {
                Some(Secret::new(key).map_err(|_| SettingsError::InvalidField("sharedSecret"))?)
            }
        };
        Ok(Self {
            inner: Arc::new(Settings {
                endpoints,
                secret,
                mode,
                signing: Signing::Segment,
                signing_secrets: Vec::new(),
                filters: Filters::none(),
                batching: None,
                mapping: None,
                method: Method::Post,
            }),
        })
    }

    /// These settings signing with `signing`: [`Signing::Standard`] and
    /// [`Signing::Both`] need at least one `whsec_` secret in
    /// `signing_secrets` (each signs every request), and
    /// [`Signing::Segment`] none.
    pub fn with_signing(
        self,
        signing: Signing,
        signing_secrets: &[&str],
    ) -> Result<Self, SettingsError> {
        let secrets = signing_secrets
            .iter()
            .map(|s| StandardSecret::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| SettingsError::InvalidField("signingSecrets"))?;
        if signing.standard() == secrets.is_empty() {
            return Err(SettingsError::InvalidField("signingSecrets"));
        }
        Ok(self.changed(|s| {
            s.signing = signing;
            s.signing_secrets = secrets;
        }))
    }

    /// These settings with `filters` deciding which calls are delivered
    /// and without which fields ([`crate::filter`]).
    pub fn with_filters(self, filters: Filters) -> Self {
        self.changed(|s| s.filters = filters)
    }

    /// These settings sending their requests with `method`.
    pub fn with_method(self, method: Method) -> Self {
        self.changed(|s| s.method = method)
    }

    /// The method requests are sent with.
    pub fn method(&self) -> Method {
        self.inner.method
    }

    /// These settings sending each call with the body `mapping` builds
    /// (`Some`), or with the spec's body (`None`, the default).
    pub fn with_mapping(self, mapping: Option<Mapping>) -> Self {
        self.changed(|s| s.mapping = mapping)
    }

    /// The mapping the bodies are built with, if any.
    pub fn mapping(&self) -> Option<&Mapping> {
        self.inner.mapping.as_ref()
    }

    /// Writes the body `call` is sent with: the mapping's when the
    /// destination has one, else the spec's ([`write_body`]).
    pub fn write_call_body(
        &self,
        call: &Call,
        now: Timestamp,
        out: &mut Vec<u8>,
    ) -> Result<(), MapError> {
        match &self.inner.mapping {
            Some(m) => m.write_body(call, now, out),
            None => Ok(write_body(call, now, out)?),
        }
    }

    /// These settings sending several calls per POST (`Some`), or one
    /// (`None`, the spec's and the default). A destination whose URL is a
    /// template cannot batch ([`SettingsError::BatchedTemplate`]): a
    /// batch carries many calls, and the URL names one.
    pub fn with_batching(self, batching: Option<Batching>) -> Result<Self, SettingsError> {
        if batching.is_some() && self.is_templated() {
            return Err(SettingsError::BatchedTemplate);
        }
        Ok(self.changed(|s| s.batching = batching))
    }

    /// A copy of the settings with `change` made; the others that share
    /// these keep them as they are.
    fn changed(self, change: impl FnOnce(&mut Settings)) -> Self {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// How calls are batched, when they are.
    pub fn batching(&self) -> Option<Batching> {
        self.inner.batching
    }

    /// The destination filters.
    pub fn filters(&self) -> &Filters {
        &self.inner.filters
    }

    /// What the filters decide for `call`: drop it, or keep it (without the
    /// fields they drop). [`Delivery`](crate::Delivery), and so every
    /// host's `deliver` and the relay, applies it; [`Webhooks::request`]
    /// builds the request of the call it is given.
    pub fn filter<'a>(&self, call: &'a Call) -> Decision<'a> {
        self.inner.filters.apply(call)
    }

    /// Which signatures requests carry.
    pub fn signing(&self) -> Signing {
        self.inner.signing
    }

    /// From the JSON settings form used by the shared vectors, the bindings
    /// and the relay's configuration: `{"endpoints": [url | {"url",
    /// "headers", "auth", "client_certificate"}], "sharedSecret": "...", "mode": "parallel" | "failover",
    /// "method": "POST" | "PUT" | "PATCH", "signature", "signingSecrets",
    /// "filters", "mapping", "batch"}`.
    pub fn from_value(value: &Value) -> Result<Self, SettingsError> {
        let map = value
            .as_object()
            .ok_or(SettingsError::InvalidField("settings"))?;
        let endpoints = match map.get("endpoints") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| EndpointConfig::from_value_at(i, v))
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err(SettingsError::InvalidField("endpoints")),
        };
        let secret = match map.get("sharedSecret") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_bytes()),
            Some(_) => return Err(SettingsError::InvalidField("sharedSecret")),
        };
        let mode = match map.get("mode") {
            None | Some(Value::Null) => Mode::default(),
            Some(Value::String(s)) => Mode::parse(s).ok_or(SettingsError::InvalidField("mode"))?,
            Some(_) => return Err(SettingsError::InvalidField("mode")),
        };
        let signing = match map.get("signature") {
            None | Some(Value::Null) => Signing::default(),
            Some(Value::String(s)) => {
                Signing::parse(s).ok_or(SettingsError::InvalidField("signature"))?
            }
            Some(_) => return Err(SettingsError::InvalidField("signature")),
        };
        let signing_secrets: Vec<&str> = match map.get("signingSecrets") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .ok_or(SettingsError::InvalidField("signingSecrets"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(SettingsError::InvalidField("signingSecrets")),
        };
        let filters = match map.get("filters") {
            None | Some(Value::Null) => Filters::none(),
            Some(v) => Filters::from_value(v)?,
        };
        let method = match map.get("method") {
            None | Some(Value::Null) => Method::default(),
            Some(Value::String(s)) => {
                Method::parse(s).ok_or(SettingsError::InvalidField("method"))?
            }
            Some(_) => return Err(SettingsError::InvalidField("method")),
        };
        let mapping = match map.get("mapping") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Mapping::from_value(v)?),
        };
        let batching = match map.get("batch") {
            None | Some(Value::Null) => None,
            Some(Value::Object(b)) => {
                let count = |key: &str, field: &'static str| match b.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Number(n)) if n.fract() == 0.0 && *n >= 0.0 => {
                        Ok(Some(*n as usize))
                    }
                    Some(_) => Err(SettingsError::InvalidField(field)),
                };
                if b.keys()
                    .any(|k| !matches!(k.as_str(), "maxCalls" | "maxBytes"))
                {
                    return Err(SettingsError::InvalidField("batch"));
                }
                Some(Batching::new(
                    count("maxCalls", "batch.maxCalls")?,
                    count("maxBytes", "batch.maxBytes")?,
                )?)
            }
            Some(_) => return Err(SettingsError::InvalidField("batch")),
        };
        Self::with_mode(&endpoints, secret, mode)?
            .with_signing(signing, &signing_secrets)?
            .with_filters(filters)
            .with_mapping(mapping)
            .with_method(method)
            .with_batching(batching)
    }

    /// The validated endpoints, in the order they were given.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.inner.endpoints
    }

    /// Refuses, as [`SettingsError::InvalidAuth`], a destination with an
    /// endpoint that presents a client certificate: a host that sends over
    /// an HTTP client of its own (the Python and JavaScript `deliver`)
    /// asks this first, so it never sends such a request without it. (An
    /// OAuth 2.0 endpoint's token is the host's to add, with
    /// [`crate::oauth::TokenSource`] and [`Request::authorize`].)
    pub fn check_sent_as_built(&self) -> Result<(), SettingsError> {
        match self
            .inner
            .endpoints
            .iter()
            .position(|e| e.client_certificate().is_some())
        {
            Some(index) => Err(SettingsError::InvalidAuth {
                index,
                reason: "a client certificate (mutual TLS) is presented by callpost-relay, not \
                         by this package's deliver"
                    .into(),
            }),
            None => Ok(()),
        }
    }

    /// Whether requests are signed.
    pub fn is_signed(&self) -> bool {
        self.inner.secret.is_some()
    }

    /// How a call reaches several endpoints.
    pub fn mode(&self) -> Mode {
        self.inner.mode
    }

    /// Whether this destination receives `call`, per its `integrations`.
    pub fn is_enabled_for(&self, call: &Call) -> bool {
        is_enabled(call.integrations.as_ref(), WEBHOOKS)
    }

    /// The signed request delivering `call` to endpoint `endpoint`. `now`
    /// stamps calls that carry no timestamp.
    ///
    /// Errors: [`RequestError::Call`] for an invalid call or a value with no
    /// JSON form; [`RequestError::Misuse`] for an index past the configured
    /// endpoints.
    pub fn request(
        &self,
        call: &Call,
        endpoint: usize,
        now: Timestamp,
    ) -> Result<Request, RequestError> {
        self.request_with(call, endpoint, now, None)
    }

    /// [`Webhooks::request`], with `X-Signature` computed by the host's
    /// HMAC where that is faster (see [`HostHmac`]).
    pub fn request_with(
        &self,
        call: &Call,
        endpoint: usize,
        now: Timestamp,
        hmac: Option<HostHmac<'_>>,
    ) -> Result<Request, RequestError> {
        let ep = self
            .inner
            .endpoints
            .get(endpoint)
            .ok_or(ApiMisuse::EndpointOutOfRange(endpoint))?;
        let url = ep.url_for(call, now)?;
        let mut body = Vec::with_capacity(call.capacity_hint());
        self.write_call_body(call, now, &mut body)
            .map_err(|e| match e {
                MapError::Call(e) => RequestError::Call(e),
                _ => RequestError::MappedBodyTooLarge,
            })?;
        Ok(self.request_for_body(
            call.message_id.as_deref(),
            body,
            endpoint,
            Some(&url),
            now,
            hmac,
        )?)
    }

    /// Whether an endpoint URL takes values from each call (a URL
    /// template): such a destination sends each call alone.
    pub fn is_templated(&self) -> bool {
        self.inner.endpoints.iter().any(|e| e.template().is_some())
    }

    /// The request carrying `body` (written by [`write_body`]) to
    /// `endpoint` at `url` (the endpoint's own when `None`; a URL
    /// template's filled in for the call), sent at `now`: headers,
    /// signatures and idempotency key. Shared by
    /// [`Webhooks::request_with`] and [`Delivery`](crate::Delivery), which
    /// keeps the body and URLs it built once.
    pub(crate) fn request_for_body(
        &self,
        message_id: Option<&str>,
        body: Vec<u8>,
        endpoint: usize,
        url: Option<&str>,
        now: Timestamp,
        hmac: Option<HostHmac<'_>>,
    ) -> Result<Request, ApiMisuse> {
        let ep = self
            .inner
            .endpoints
            .get(endpoint)
            .ok_or(ApiMisuse::EndpointOutOfRange(endpoint))?;
        let url = match (url, ep.template()) {
            (Some(url), _) => url,
            (None, None) => ep.url(),
            (None, Some(_)) => {
                return Err(ApiMisuse::Argument(
                    "this endpoint's URL takes values from a call: give the call".into(),
                ))
            }
        };
        let s = &self.inner;
        let secret = s.secret.as_ref().filter(|_| s.signing.segment());
        let standard = s
            .signing
            .standard()
            .then_some((&s.signing_secrets[..], now));
        Ok(request::build(
            ep, url, s.method, secret, standard, message_id, body, hmac,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::standard::{self, DEFAULT_TOLERANCE_MS};
    use crate::webhooks::EndpointConfig;

    const NEW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const OLD: &str = "whsec_c2VjcmV0LW9sZA==";

    fn headers(r: &Request) -> Vec<(&str, &str)> {
        r.headers
            .iter()
            .map(|(n, v)| (n.as_ref(), v.as_ref()))
            .collect()
    }

    #[test]
    fn standard_signing_adds_the_three_headers_and_both_keeps_x_signature() {
        let call =
            Call::from_json_str(r#"{"type":"track","userId":"u","event":"e","messageId":"m-1"}"#)
                .unwrap();
        let now = Timestamp::from_millis(1_795_341_845_123).unwrap();
        let eps = [EndpointConfig::new("https://a.example/")];
        let segment = Webhooks::new(&eps, Some(b"k")).unwrap();
        let plain = segment.request(&call, 0, now).unwrap();
        let secrets: Vec<_> = [NEW, OLD]
            .iter()
            .map(|s| StandardSecret::parse(s).unwrap())
            .collect();
        for (signing, x_signature) in [(Signing::Standard, false), (Signing::Both, true)] {
            let hooks = segment.clone().with_signing(signing, &[NEW, OLD]).unwrap();
            let r = hooks.request(&call, 0, now).unwrap();
            assert_eq!(r.body, plain.body, "{signing:?}: the body is the same");
            assert_eq!(
                r.header("X-Signature").is_some(),
                x_signature,
                "{signing:?}"
            );
            assert_eq!(r.header("webhook-id"), Some("m-1"));
            assert_eq!(r.header("webhook-timestamp"), Some("1795341845"));
            // One signature per secret: either verifies on its own.
            assert_eq!(r.header("webhook-signature").unwrap().split(' ').count(), 2);
            for secret in &secrets {
                let got = standard::verify(
                    &r.body,
                    headers(&r),
                    std::slice::from_ref(secret),
                    now,
                    DEFAULT_TOLERANCE_MS,
                );
                assert!(got.is_ok(), "{signing:?}: {got:?}");
            }
        }
        // A call whose id no header can carry gets the body's digest, the
        // same for every request of it.
        let odd =
            Call::from_json_str(r#"{"type":"track","userId":"u","event":"e","messageId":"m é"}"#)
                .unwrap();
        let hooks = segment.with_signing(Signing::Standard, &[NEW]).unwrap();
        let a = hooks.request(&odd, 0, now).unwrap();
        let b = hooks.request(&odd, 0, now).unwrap();
        let id = a.header("webhook-id").unwrap();
        assert!(id.starts_with("msg_") && id.len() == 36, "{id}");
        assert_eq!(Some(id), b.header("webhook-id"));
    }

    #[test]
    fn signing_settings_are_checked() {
        let eps = [EndpointConfig::new("https://a.example/")];
        let hooks = Webhooks::new(&eps, None).unwrap();
        let bad = SettingsError::InvalidField("signingSecrets");
        // Standard signing needs a secret; Segment's takes none of these.
        assert_eq!(
            hooks
                .clone()
                .with_signing(Signing::Standard, &[])
                .unwrap_err(),
            bad
        );
        assert_eq!(
            hooks
                .clone()
                .with_signing(Signing::Segment, &[NEW])
                .unwrap_err(),
            bad
        );
        assert_eq!(
            hooks
                .clone()
                .with_signing(Signing::Both, &["whsec_!!"])
                .unwrap_err(),
            bad
        );
        let parsed = |json: &str| Webhooks::from_value(&Value::from_json_str(json).unwrap());
        let ok = parsed(&format!(
            r#"{{"endpoints":["https://a.example/"],"signature":"standard","signingSecrets":["{NEW}"]}}"#
        ))
        .unwrap();
        assert_eq!(ok.signing(), Signing::Standard);
        assert!(
            parsed(r#"{"endpoints":["https://a.example/"]}"#)
                .unwrap()
                .signing()
                == Signing::Segment
        );
        assert_eq!(
            parsed(r#"{"endpoints":["https://a.example/"],"signature":"svix"}"#).unwrap_err(),
            SettingsError::InvalidField("signature")
        );
        assert_eq!(
            parsed(
                r#"{"endpoints":["https://a.example/"],"signature":"both","signingSecrets":"x"}"#
            )
            .unwrap_err(),
            bad
        );
        // The Standard Webhooks headers are callpost's to set.
        let mut ep = EndpointConfig::new("https://a.example/");
        ep.headers.push(("Webhook-Signature".into(), "v1,x".into()));
        assert!(matches!(
            Webhooks::new(&[ep], None).unwrap_err(),
            SettingsError::ReservedHeader { .. }
        ));
    }

    #[test]
    fn a_host_hmac_signs_large_bodies_when_it_answers_well_and_the_core_otherwise() {
        let pad = "x".repeat(HOST_HMAC_REQUEST_MIN_BYTES);
        let large = Call::from_json_str(&format!(
            r#"{{"type":"track","userId":"u","event":"e","properties":{{"p":"{pad}"}}}}"#
        ))
        .unwrap();
        let small = Call::from_json_str(r#"{"type":"track","userId":"u","event":"e"}"#).unwrap();
        let now = Timestamp::from_millis(0).unwrap();
        let eps = [EndpointConfig::new("https://a.example/")];
        let signed = Webhooks::new(&eps, Some(b"k")).unwrap();
        let core = signed.request(&large, 0, now).unwrap();
        let mut calls = 0;
        let mut host = |body: &[u8]| {
            calls += 1;
            assert_eq!(body, &core.body[..]);
            Some("f".repeat(40))
        };
        let r = signed
            .request_with(&large, 0, now, Some(&mut host))
            .unwrap();
        assert_eq!(r.header("X-Signature"), Some("f".repeat(40).as_str()));
        assert_eq!(
            (r.body, r.headers.len()),
            (core.body.clone(), core.headers.len())
        );
        // Small bodies are the core's to sign: the host is not asked.
        let r = signed
            .request_with(&small, 0, now, Some(&mut host))
            .unwrap();
        assert_eq!(r.headers, signed.request(&small, 0, now).unwrap().headers);
        // An answer that is not 40 lowercase hex digits is not used.
        for answer in [
            None,
            Some("F".repeat(40)),
            Some("f".repeat(39)),
            Some("g".repeat(40)),
        ] {
            let mut bad = |_: &[u8]| answer.clone();
            let r = signed.request_with(&large, 0, now, Some(&mut bad)).unwrap();
            assert_eq!(r.headers, core.headers, "{answer:?}");
        }
        // Without a secret nothing is signed, by anyone.
        let unsigned = Webhooks::new(&eps, None).unwrap();
        let r = unsigned
            .request_with(&large, 0, now, Some(&mut host))
            .unwrap();
        assert_eq!(r.header("X-Signature"), None);
        assert_eq!(calls, 1);
    }

    #[test]
    fn mode_is_a_setting_parallel_by_default() {
        let v = |t: &str| Value::from_json_str(t).unwrap();
        let parse = |t: &str| Webhooks::from_value(&v(t)).map(|w| w.mode());
        assert_eq!(
            parse(r#"{"endpoints":["https://a.example/"]}"#),
            Ok(Mode::Parallel)
        );
        assert_eq!(
            parse(r#"{"endpoints":["https://a.example/"],"mode":"failover"}"#),
            Ok(Mode::Failover)
        );
        for bad in [r#""both""#, "1", r#""Parallel""#] {
            let e = parse(&format!(
                r#"{{"endpoints":["https://a.example/"],"mode":{bad}}}"#
            ))
            .unwrap_err();
            assert_eq!(e.code(), "invalid_settings");
        }
    }
}
