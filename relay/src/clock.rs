//! The relay's clock: the host's, plus an offset that only a test build
//! sets.
//!
//! Every time the relay uses (receipt, due times, the core's `now`) comes
//! from here, so a test can move the relay hours ahead, across restarts,
//! and watch the 4-hour retry window play out in seconds. The offset can
//! be set only in a build with the `test-clock` feature.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch, shifted by an offset (always 0 outside
/// test builds).
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    /// The host's clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock `offset_ms` ahead of the host's (test builds).
    #[cfg(feature = "test-clock")]
    pub fn with_offset(offset_ms: i64) -> Self {
        Self {
            offset_ms: AtomicI64::new(offset_ms),
        }
    }

    /// Moves the clock to `offset_ms` ahead of the host's (test builds).
    #[cfg(feature = "test-clock")]
    pub fn set_offset(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    /// Now, ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        let host = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        host.saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Now, as the core's timestamp.
    pub fn now(&self) -> callpost_core::Timestamp {
        callpost_core::Timestamp::saturating_from_millis(self.now_ms())
    }
}
