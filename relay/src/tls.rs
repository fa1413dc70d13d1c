//! The certificates the relay trusts, for deliveries over HTTPS and for
//! Postgres over TLS: the system's roots plus those of `[security]
//! ca_file`, which adds to them rather than replacing them.

use crate::config::ConfigError;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use std::path::Path;

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
