//! How an endpoint's requests prove who sends them, beyond the signature:
//! HTTP Basic (RFC 7617), bearer tokens from an OAuth 2.0
//! client-credentials grant (RFC 6749 §4.4, run by [`crate::oauth`]), and
//! a client certificate for mutual TLS.
//!
//! Given per endpoint, beside its static headers, in the settings' JSON:
//!
//! ```json
//! {"url": "https://crm.example.com/users/{{userId}}",
//!  "auth": {"type": "oauth2", "token_url": "https://auth.example.com/token",
//!           "client_id": "callpost", "client_secret": "…", "scope": "users:write"},
//!  "client_certificate": {"certificate": "-----BEGIN CERTIFICATE-----…",
//!                         "private_key": "-----BEGIN PRIVATE KEY-----…"}}
//! ```
//!
//! Every secret (a password, a client secret, a private key) stays out of
//! `Debug`, errors and reports: only the kind of auth and the names of
//! what is missing are ever shown.

use crate::json::{Map, Value};
use base64::Engine as _;
use std::fmt;

/// The most bytes a credential field takes (user name, password, client
/// id, secret, scope, audience): far above any real one, and a bound on
/// what each request carries in its `Authorization` header.
pub const MAX_CREDENTIAL_BYTES: usize = 4096;

/// The most bytes of a PEM certificate chain or private key: a chain of a
/// few 4096-bit RSA certificates is under 10 KB.
pub const MAX_PEM_BYTES: usize = 64 * 1024;

/// How an endpoint authenticates its requests.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth {
    /// `Authorization: Basic base64(username:password)`.
    Basic {
        /// The user name: no `:` (RFC 7617 §2) and no control character.
        username: String,
        /// The password.
        password: String,
    },
    /// `Authorization: Bearer <token>`, the token fetched from
    /// `token_url` by the client-credentials grant, cached and refreshed
    /// before it expires.
    OAuth2(OAuth2),
}

/// An OAuth 2.0 client-credentials grant (RFC 6749 §4.4).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OAuth2 {
    /// The authorization server's token endpoint (http or https).
    pub token_url: String,
    /// The client's id.
    pub client_id: String,
    /// The client's secret.
    pub client_secret: String,
    /// Space-separated scopes to ask for, if any.
    pub scope: Option<String>,
    /// An `audience` parameter (Auth0's and Okta's name for the API the
    /// token is for), if the server needs one.
    pub audience: Option<String>,
    /// How the client's credentials travel to the token endpoint.
    pub client_auth: ClientAuth,
}

/// Where the client id and secret go in a token request (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClientAuth {
    /// HTTP Basic with the form-encoded id and secret
    /// (`client_secret_basic`): the RFC's must-support, the default.
    #[default]
    Basic,
    /// `client_id` and `client_secret` in the form body
    /// (`client_secret_post`), for servers that take only that.
    Body,
}

impl ClientAuth {
    /// `basic` or `body`, as the settings write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::Body => "body",
        }
    }
}

/// A client certificate and its private key, in PEM, for endpoints behind
/// a server that asks for one (mutual TLS). The core checks their shape;
/// the host's TLS stack loads them, and refuses a key that does not match.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientCertificate {
    /// The certificate, then any intermediates, in PEM.
    pub certificate: String,
    /// Its private key in PEM (PKCS #8, PKCS #1 or SEC1).
    pub private_key: String,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Basic { .. } => f.write_str("Auth::Basic(<redacted>)"),
            Self::OAuth2(o) => o.fmt(f),
        }
    }
}

impl fmt::Debug for OAuth2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2")
            .field("token_url", &crate::weburl::shown(&self.token_url))
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientCertificate(<redacted>)")
    }
}

impl Auth {
    /// `basic` or `oauth2`, as the settings write it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Basic { .. } => "basic",
            Self::OAuth2(_) => "oauth2",
        }
    }

    /// From the settings' `auth` object; the error says what is wrong,
    /// never with a secret's value.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        let map = value
            .as_object()
            .ok_or("auth must be an object with a \"type\"")?;
        let kind = text(map, "type")?.ok_or("auth needs a \"type\": basic or oauth2")?;
        let auth = match kind {
            "basic" => {
                only(map, &["type", "username", "password"])?;
                let username = text(map, "username")?.ok_or("basic auth needs a username")?;
                let password = text(map, "password")?.ok_or("basic auth needs a password")?;
                Self::Basic {
                    username: username.to_owned(),
                    password: password.to_owned(),
                }
            }
            "oauth2" => {
                only(
                    map,
                    &[
                        "type",
                        "token_url",
                        "client_id",
                        "client_secret",
                        "scope",
                        "audience",
                        "client_auth",
                    ],
                )?;
                let field = |name: &'static str| -> Result<String, String> {
                    Ok(text(map, name)?
                        .ok_or_else(|| format!("oauth2 auth needs a {name}"))?
                        .to_owned())
                };
                let client_auth = match text(map, "client_auth")? {
                    None | Some("basic") => ClientAuth::Basic,
                    Some("body") => ClientAuth::Body,
                    Some(_) => return Err("auth.client_auth must be basic or body".into()),
                };
                Self::OAuth2(OAuth2 {
                    token_url: field("token_url")?,
                    client_id: field("client_id")?,
                    client_secret: field("client_secret")?,
                    scope: text(map, "scope")?.map(str::to_owned),
                    audience: text(map, "audience")?.map(str::to_owned),
                    client_auth,
                })
            }
            _ => return Err("auth.type must be basic or oauth2".into()),
        };
        auth.check()?;
        Ok(auth)
    }

    /// The settings' JSON form, secrets included (for a host that stores
    /// the settings sealed, never for display).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), self.kind().into());
        match self {
            Self::Basic { username, password } => {
                m.insert("username".into(), username.as_str().into());
                m.insert("password".into(), password.as_str().into());
            }
            Self::OAuth2(o) => {
                m.insert("token_url".into(), o.token_url.as_str().into());
                m.insert("client_id".into(), o.client_id.as_str().into());
                m.insert("client_secret".into(), o.client_secret.as_str().into());
                if let Some(s) = &o.scope {
                    m.insert("scope".into(), s.as_str().into());
                }
                if let Some(a) = &o.audience {
                    m.insert("audience".into(), a.as_str().into());
                }
                m.insert("client_auth".into(), o.client_auth.as_str().into());
            }
        }
        Value::Object(m)
    }

    /// The rules every auth holds, whichever way it was built.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Self::Basic { username, password } => {
                credential("username", username)?;
                if username.is_empty() {
                    return Err("auth.username is empty".into());
                }
                if username.contains(':') {
                    return Err("auth.username cannot contain ':' (RFC 7617)".into());
                }
                credential("password", password)
            }
            Self::OAuth2(o) => {
                let url = crate::weburl::parse(&o.token_url).map_err(|e| match e {
                    crate::weburl::UrlError::Invalid(why) => format!("auth.token_url: {why}"),
                    crate::weburl::UrlError::Scheme(s) => {
                        format!("auth.token_url: scheme {s:?} is not http or https")
                    }
                })?;
                if url.has_credentials {
                    return Err("auth.token_url must not contain credentials".into());
                }
                if url.has_fragment {
                    return Err("auth.token_url must not contain a #fragment".into());
                }
                for (name, v) in [
                    ("client_id", &o.client_id),
                    ("client_secret", &o.client_secret),
                ] {
                    credential(name, v)?;
                    if v.is_empty() {
                        return Err(format!("auth.{name} is empty"));
                    }
                }
                if let Some(scope) = &o.scope {
                    credential("scope", scope)?;
                    // RFC 6749 §3.3: scope-token = 1*NQCHAR, space-separated.
                    let nqchar = |b: u8| {
                        b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b)
                    };
                    if scope
                        .split(' ')
                        .any(|t| t.is_empty() || !t.bytes().all(nqchar))
                    {
                        return Err(
                            "auth.scope must be scope tokens separated by single spaces (RFC 6749 §3.3)"
                                .into(),
                        );
                    }
                }
                if let Some(audience) = &o.audience {
                    credential("audience", audience)?;
                }
                Ok(())
            }
        }
    }

    /// The `Authorization` value of a Basic auth: `Basic` and the base64
    /// of `username:password` in UTF-8 (RFC 7617 §2.1's `charset="UTF-8"`).
    pub fn basic_header(username: &str, password: &str) -> String {
        let pair = format!("{username}:{password}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

impl ClientCertificate {
    /// From the settings' `client_certificate` object.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        let map = value
            .as_object()
            .ok_or("client_certificate must be an object with certificate and private_key")?;
        only(map, &["certificate", "private_key"])
            .map_err(|e| format!("client_certificate: {e}"))?;
        let get = |name: &str| -> Result<String, String> {
            text(map, name)
                .map_err(|e| format!("client_certificate: {e}"))?
                .map(str::to_owned)
                .ok_or_else(|| format!("client_certificate needs a {name} in PEM"))
        };
        let c = Self {
            certificate: get("certificate")?,
            private_key: get("private_key")?,
        };
        c.check()?;
        Ok(c)
    }

    /// The settings' JSON form, the key included (never for display).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("certificate".into(), self.certificate.as_str().into());
        m.insert("private_key".into(), self.private_key.as_str().into());
        Value::Object(m)
    }

    /// Both in PEM: a `CERTIFICATE` block, and a `PRIVATE KEY` block of
    /// one of the three kinds rustls, OpenSSL and Node load.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("certificate", &self.certificate),
            ("private_key", &self.private_key),
        ] {
            if v.len() > MAX_PEM_BYTES {
                return Err(format!(
                    "client_certificate.{name} is over {MAX_PEM_BYTES} bytes"
                ));
            }
        }
        if !self.certificate.contains("-----BEGIN CERTIFICATE-----") {
            return Err(
                "client_certificate.certificate holds no PEM \"BEGIN CERTIFICATE\" block".into(),
            );
        }
        let key = ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"]
            .iter()
            .any(|k| self.private_key.contains(&format!("-----BEGIN {k}-----")));
        if !key {
            return Err(
                "client_certificate.private_key holds no PEM private key block \
                 (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// `name`'s string value, if present; a value of another type is an error.
fn text<'a>(map: &'a Map, name: &str) -> Result<Option<&'a str>, String> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("auth.{name} must be a string")),
    }
}

/// Refuses a field not in `known`: a misspelt `client_secret` must not
/// send requests without one.
fn only(map: &Map, known: &[&str]) -> Result<(), String> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!("auth has an unknown field {k:?}")),
        None => Ok(()),
    }
}

/// A credential travels in a header or a form: no control characters,
/// and bounded.
fn credential(name: &str, v: &str) -> Result<(), String> {
    if v.len() > MAX_CREDENTIAL_BYTES {
        return Err(format!("auth.{name} is over {MAX_CREDENTIAL_BYTES} bytes"));
    }
    if v.chars().any(char::is_control) {
        return Err(format!("auth.{name} contains a control character"));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn auth(json: &str) -> Result<Auth, String> {
        Auth::from_value(&Value::from_json_str(json).unwrap())
    }

    #[test]
    fn basic_is_rfc_7617() {
        // RFC 7617 §2's example.
        assert_eq!(
            Auth::basic_header("Aladdin", "open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        // §2.1: UTF-8.
        assert_eq!(Auth::basic_header("test", "123£"), "Basic dGVzdDoxMjPCow==");
        assert!(auth(r#"{"type":"basic","username":"a:b","password":"p"}"#)
            .unwrap_err()
            .contains("':'"));
    }

    #[test]
    fn errors_never_show_a_secret() {
        for json in [
            r#"{"type":"basic","username":"u","password":"hunter2\n"}"#,
            r#"{"type":"oauth2","token_url":"https://a.example/t","client_id":"c","client_secret":"hunter2\u0000"}"#,
            r#"{"type":"oauth2","token_url":"https://a.example/t","client_id":"c","client_secret":"hunter2","scope":"a  b"}"#,
            r#"{"type":"oauth2","token_url":"ftp://a.example/t","client_id":"c","client_secret":"hunter2"}"#,
            r#"{"type":"oauth2","token_url":"https://a.example/t","client_id":"c","clientsecret":"hunter2"}"#,
        ] {
            let e = auth(json).unwrap_err();
            assert!(!e.contains("hunter2"), "{e}");
        }
        let ok = auth(r#"{"type":"oauth2","token_url":"https://a.example/t","client_id":"c","client_secret":"hunter2"}"#).unwrap();
        assert!(!format!("{ok:?}").contains("hunter2"));
    }
}
