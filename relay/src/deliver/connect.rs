//! Connections to receivers, and the private-network rule.
//!
//! The relay posts to URLs its operators configure, so it must not become
//! a way into the network it runs in. Every connection resolves its host
//! here (an IP literal, bracketed IPv6 included, stands for itself) and
//! asks the core's rule ([`is_public_address`]: loopback, private,
//! link-local and other special ranges are refused, and an IPv4 address
//! carried in IPv6, `::ffff:127.0.0.1` say, is judged as that IPv4
//! address) about every address before connecting, unless
//! `allow_private_networks` is on. The check runs at each connection, not
//! once at start, so a name that later resolves somewhere private is
//! caught too, and whichever way the relay was started. The
//! configuration's own check ([`check_destinations`]) refuses only hosts
//! written as addresses: a name's answer is checked at each connection.

use crate::config::{ConfigError, Source};
use callpost_core::webhooks::{is_public_address, Auth};
use callpost_core::Code;
use http::Uri;
use hyper_util::rt::TokioIo;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::net::TcpStream;

/// A host whose addresses are all refused by the private-network rule.
/// Its message is what the attempt log and the dead letter show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PrivateAddress {
    host: String,
}

impl fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} resolves only to private or loopback addresses (allow_private_networks is off)",
            self.host
        )
    }
}

impl std::error::Error for PrivateAddress {}

/// The TCP connector under the client's TLS: resolves, applies the
/// private-network rule to every address, and connects to the first
/// allowed address that answers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Connector {
    allow_private_networks: bool,
}

impl Connector {
    /// A connector that refuses non-public addresses unless
    /// `allow_private_networks`.
    pub(super) fn new(allow_private_networks: bool) -> Self {
        Self {
            allow_private_networks,
        }
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let allow = self.allow_private_networks;
        Box::pin(async move { connect(&uri, allow).await })
    }
}

/// The host of `uri` without IPv6 brackets, and its port.
fn host_port(uri: &Uri) -> io::Result<(String, u16)> {
    let host = uri
        .host()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the URL has no host"))?;
    let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    });
    Ok((unbracket(host).to_owned(), port))
}

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Every address `host` stands for: an IP literal itself, a name as the
/// system resolves it.
async fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{host} resolves to no address"),
        ));
    }
    Ok(addrs)
}

/// The addresses of `host` a connection may use.
async fn allowed(host: &str, port: u16, allow_private: bool) -> io::Result<Vec<SocketAddr>> {
    let addrs = resolve(host, port).await?;
    if allow_private {
        return Ok(addrs);
    }
    let public: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| is_public_address(a.ip()))
        .collect();
    if public.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            PrivateAddress {
                host: host.to_owned(),
            },
        ));
    }
    Ok(public)
}

async fn connect(uri: &Uri, allow_private: bool) -> io::Result<TokioIo<TcpStream>> {
    let (host, port) = host_port(uri)?;
    let mut last = None;
    for addr in allowed(&host, port, allow_private).await? {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // Requests are written whole; waiting to coalesce them only
                // adds latency.
                stream.set_nodelay(true)?;
                return Ok(TokioIo::new(stream));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address to connect to")))
}

/// Refuses client certificates that cannot be presented (a key that does
/// not load or is not the certificate's), then destinations whose host is
/// written as a loopback, private or
/// other non-public address (`http://10.0.0.5/`), unless
/// `allow_private_networks`; the message names the source, the host and
/// the address. Such a URL can never be delivered to, whatever happens.
///
/// A host written as a name is not refused here: what it resolves to is
/// the name's owner's to change at any moment (its own DNS, a filter's
/// `0.0.0.0`, split horizon), so one receiver's answer must not keep every
/// relay from starting or every later change of the sources from taking
/// effect. Every connection checks each address it would use instead (the
/// rule above), and a delivery to a name that resolves privately ends as
/// any refused connection does. A name that resolves privately now is
/// logged as a warning, once per check.
pub async fn check_destinations(
    sources: &[Arc<Source>],
    allow_private_networks: bool,
) -> Result<(), ConfigError> {
    // A client certificate whose key does not load, or is not the
    // certificate's, could never be presented.
    for source in sources {
        for d in &source.destinations {
            for (i, endpoint) in d.webhooks.endpoints().iter().enumerate() {
                if let Some(c) = endpoint.client_certificate() {
                    crate::tls::client_identity(c).map_err(|why| ConfigError::Settings {
                        code: Code::InvalidAuth,
                        message: format!("{}.urls[{i}]: {why}", d.at(&source.name)),
                    })?;
                }
            }
        }
    }
    if allow_private_networks {
        return Ok(());
    }
    for source in sources {
        // Each endpoint's URL, and the token endpoint of its OAuth 2.0
        // grant: the relay connects to both.
        let mut urls: Vec<(&'static str, String)> = Vec::new();
        for e in source.enabled().flat_map(|d| d.webhooks.endpoints()) {
            urls.push(("webhook", e.url_before_values().to_owned()));
            if let Some(Auth::OAuth2(o)) = e.auth() {
                urls.push(("token", o.token_url.clone()));
            }
        }
        for (what, url) in urls {
            let Ok(uri) = url.parse::<Uri>() else {
                continue;
            };
            let Ok((host, port)) = host_port(&uri) else {
                continue;
            };
            if let Ok(ip) = host.parse::<IpAddr>() {
                if !is_public_address(ip) {
                    return Err(ConfigError::Settings {
                        code: Code::PrivateAddress,
                        message: format!(
                            "source {:?}: the {what} host {host} is a private or loopback \
                             address; set [security] allow_private_networks = true to allow it",
                            source.name
                        ),
                    });
                }
                continue;
            }
            let Ok(addrs) = resolve(&host, port).await else {
                continue;
            };
            let mut private: Vec<String> = addrs
                .iter()
                .map(SocketAddr::ip)
                .filter(|ip| !is_public_address(*ip))
                .map(|ip| ip.to_string())
                .collect();
            private.sort();
            private.dedup();
            if !private.is_empty() {
                tracing::warn!(
                    source = %source.name,
                    "the {what} host {host} resolves to private or loopback addresses ({}); \
                     deliveries refuse to connect to them while allow_private_networks is off",
                    private.join(", ")
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn literals_and_names_are_checked_before_any_connection() {
        for (url, host) in [
            ("http://127.0.0.1:9/", "127.0.0.1"),
            ("http://[::1]:9/", "::1"),
            ("http://[::ffff:127.0.0.1]:9/", "::ffff:127.0.0.1"),
            ("http://[::ffff:7f00:1]:9/", "::ffff:7f00:1"),
            ("http://10.1.2.3/", "10.1.2.3"),
            ("http://localhost:9/", "localhost"),
        ] {
            let uri: Uri = url.parse().unwrap();
            let e = connect(&uri, false).await.unwrap_err();
            let private = e
                .get_ref()
                .and_then(|i| i.downcast_ref::<PrivateAddress>())
                .unwrap_or_else(|| panic!("{url}: {e}"));
            assert_eq!(private.host, host);
        }
    }

    #[tokio::test]
    async fn a_public_literal_passes_the_rule() {
        let addrs = allowed("93.184.215.14", 443, false).await.unwrap();
        assert_eq!(addrs, vec!["93.184.215.14:443".parse().unwrap()]);
        let addrs = allowed("::1", 8080, true).await.unwrap();
        assert_eq!(addrs, vec!["[::1]:8080".parse().unwrap()]);
    }
}
