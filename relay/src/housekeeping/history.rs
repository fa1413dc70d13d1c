//! The last hour of the relay's counts, kept in memory for the console's
//! overview charts (`GET /console/history`).
//!
//! A sample is taken every [`SAMPLE_EVERY`] and the latest [`SAMPLES`]
//! are kept. Each one reads what the relay already has: the calls
//! committed since start (a counter of this process), and the store's
//! counts that the relay reads on its own interval for the `/metrics`
//! gauges ([`Relay::stats`]); sampling costs no database work. The browser
//! turns the counters into rates from one sample to the next.
//!
//! The history is this process's: it starts empty at each start, and each
//! relay behind one address keeps its own (the store's counts are the
//! same for all of them; the ingest counter is this relay's).

use crate::state::Relay;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often a sample is taken: twice the store counts' own interval
/// (5 s), so each sample sees fresh counts, and fine enough that an
/// hour's chart has a point every few pixels.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// How many samples are kept: one hour at [`SAMPLE_EVERY`], the overview's
/// span (longer views are Prometheus's job, from `/metrics`). About 30 KB
/// of memory.
pub const SAMPLES: usize = 360;

/// The relay's counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Sample {
    /// When, in ms on the relay's clock.
    pub at: i64,
    /// Calls this relay has stored since it started (a counter).
    pub ingested: i64,
    /// Calls a receiver took since the relay started (a counter, for the
    /// delivery rate: the store's count of kept delivered calls falls as
    /// retention purges them).
    pub delivered_total: u64,
    /// The store's counts as last read (`None` until the first read, or
    /// while the database does not answer).
    #[serde(flatten)]
    pub counts: Option<Counts>,
}

/// The store's counts in a [`Sample`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Counts {
    /// Delivered calls still kept: it only grows, except when retention
    /// deletes old ones (the browser counts a fall as no deliveries).
    pub delivered: i64,
    /// Deliveries pending (the backlog).
    pub pending: i64,
    /// Dead letters waiting for a replay.
    pub dead: i64,
    /// Calls kept with no destination to send them to.
    pub undeliverable: i64,
    /// Calls refused inside accepted batches.
    pub rejected: i64,
    /// How old the oldest pending call is, seconds (`None`: none pending).
    pub oldest_pending_age_seconds: Option<f64>,
}

/// The latest [`SAMPLES`] samples.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

/// What `GET /console/history` answers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HistoryReport {
    /// [`SAMPLE_EVERY`], in ms.
    pub interval_ms: u64,
    /// Oldest first.
    pub samples: Vec<Sample>,
}

impl History {
    /// Keeps `sample`, forgetting the oldest past [`SAMPLES`].
    pub fn push(&self, sample: Sample) {
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() == SAMPLES {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The samples kept, oldest first.
    pub fn report(&self) -> HistoryReport {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        HistoryReport {
            interval_ms: u64::try_from(SAMPLE_EVERY.as_millis()).unwrap_or(u64::MAX),
            samples: samples.iter().copied().collect(),
        }
    }
}

/// The relay's counts now.
pub fn sample(relay: &Relay) -> Sample {
    let at = relay.clock.now_ms();
    let counts = relay.stats().map(|s| Counts {
        delivered: s.delivered,
        pending: s.pending,
        dead: s.dead,
        undeliverable: s.undeliverable,
        rejected: s.rejected,
        oldest_pending_age_seconds: s
            .oldest_pending_received_at
            .map(|t| (at - t).max(0) as f64 / 1000.0),
    });
    Sample {
        at,
        ingested: relay.metrics.committed_calls(),
        delivered_total: relay.metrics.delivered_calls(),
        counts,
    }
}

/// Samples `relay` into `history` every [`SAMPLE_EVERY`], from now on,
/// until dropped.
pub async fn run(relay: Arc<Relay>, history: Arc<History>) {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    // A tick missed while the runtime was busy is a gap, not a burst of
    // samples all at one moment.
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        history.push(sample(&relay));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(at: i64) -> Sample {
        Sample {
            at,
            ingested: at,
            delivered_total: 0,
            counts: None,
        }
    }

    #[test]
    fn it_keeps_the_last_hour_oldest_first() {
        let h = History::default();
        for i in 0..(SAMPLES as i64 + 5) {
            h.push(at(i));
        }
        let r = h.report();
        assert_eq!(r.interval_ms, 10_000);
        assert_eq!(r.samples.len(), SAMPLES);
        assert_eq!(r.samples[0].at, 5);
        assert_eq!(r.samples[SAMPLES - 1].at, SAMPLES as i64 + 4);
    }

    #[test]
    fn a_sample_without_counts_says_so() {
        let json = serde_json::to_value(at(7)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"at": 7, "ingested": 7, "delivered_total": 0})
        );
    }
}
