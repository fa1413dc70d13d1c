//! The certificates the relay trusts, for deliveries over HTTPS and for
//! Postgres over TLS: the system's roots plus those of `[security]
//! ca_file`, which adds to them rather than replacing them.

use crate::config::ConfigError;
use callpost_core::webhooks::ClientCertificate;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// The system's CA certificates and every PEM certificate in `ca_file`.
/// An unreadable `ca_file`, or one with no certificate, is an error whose
/// message names it.
pub fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, ConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::warn!("a system CA certificate could not be read: {e}");
    }
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = ca_file {
        let bad = |e: &dyn std::fmt::Display| {
            ConfigError::Invalid(format!("ca_file {} cannot be used: {e}", path.display()))
        };
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(&e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        if certs.is_empty() {
            return Err(bad(&"it holds no PEM certificate"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| bad(&e))?;
        }
    }
    Ok(roots)
}

/// An endpoint's client certificate, loaded: its chain and its key, which
/// must match. The message says what is wrong, never with the key.
pub fn client_identity(c: &ClientCertificate) -> Result<Arc<rustls::sign::CertifiedKey>, String> {
    let (chain, key) = identity_parts(c)?;
    let key = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("client_certificate.private_key cannot be used: {e}"))?;
    let certified = rustls::sign::CertifiedKey::new(chain, key);
    certified.keys_match().map_err(|e| {
        format!("client_certificate: the certificate and the key do not match: {e}")
    })?;
    Ok(Arc::new(certified))
}

fn identity_parts(
    c: &ClientCertificate,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain = CertificateDer::pem_slice_iter(c.certificate.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("client_certificate.certificate cannot be read: {e}"))?;
    if chain.is_empty() {
        return Err("client_certificate.certificate holds no PEM certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(c.private_key.as_bytes())
        .map_err(|_| "client_certificate.private_key holds no usable PEM private key".to_owned())?;
    Ok((chain, key))
}
