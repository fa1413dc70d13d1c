//! The Webhooks destination (webhooks-destination.md): its settings
//! (`settings`), the body of each call kind (`body`), signed requests
//! (`request`) and delete notifications (`delete`).

mod address;
mod body;
mod delete;
mod request;
mod settings;

pub use address::is_public_address;
pub use body::write_body;
pub use delete::{delete_notifications, DeleteSource};
pub use request::{
    HeaderText, HostHmac, Request, RequestError, HOST_HMAC_MIN_BYTES, HOST_HMAC_REQUEST_MIN_BYTES,
    USER_AGENT,
};
pub use settings::{
    Endpoint, EndpointConfig, Mode, SettingsError, MAX_ENDPOINTS, RESERVED_HEADERS,
};

use crate::call::Call;
use crate::json::Value;
use crate::misuse::ApiMisuse;
use crate::routing::{is_enabled, WEBHOOKS};
use crate::signature::Secret;
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

#[derive(Debug)]
struct Settings {
    endpoints: Vec<Endpoint>,
    secret: Option<Secret>,
    mode: Mode,
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
            }),
        })
    }

    /// From the JSON settings form used by the shared vectors, the bindings
    /// and the relay's configuration: `{"endpoints": [url | {"url",
    /// "headers"}], "sharedSecret": "...", "mode": "parallel" | "failover"}`.
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
        let mode = match map.get("mode") {
            None | Some(Value::Null) => Mode::default(),
            Some(Value::String(s)) => Mode::parse(s).ok_or(SettingsError::InvalidField("mode"))?,
            Some(_) => return Err(SettingsError::InvalidField("mode")),
        };
        Self::with_mode(&endpoints, secret, mode)
    }

    /// The validated endpoints, in the order they were given.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.inner.endpoints
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
        let mut body = Vec::with_capacity(call.capacity_hint());
        write_body(call, now, &mut body)?;
        Ok(self.request_for_body(call.message_id.as_deref(), body, endpoint, hmac)?)
    }

    /// The request carrying `body` (written by [`write_body`]) to
    /// `endpoint`: headers, signature and idempotency key. Shared by
    /// [`Webhooks::request_with`] and [`Delivery`](crate::Delivery), which
    /// keeps the body it built once.
    pub(crate) fn request_for_body(
        &self,
        message_id: Option<&str>,
        body: Vec<u8>,
        endpoint: usize,
        hmac: Option<HostHmac<'_>>,
    ) -> Result<Request, ApiMisuse> {
        let ep = self
            .inner
            .endpoints
            .get(endpoint)
            .ok_or(ApiMisuse::EndpointOutOfRange(endpoint))?;
        Ok(request::build(
            ep,
            self.inner.secret.as_ref(),
            message_id,
            body,
            hmac,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::webhooks::EndpointConfig;

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
