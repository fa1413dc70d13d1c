//! Operational events to the operator's own Webhooks destination
//! (`[operator]`): the host of the core's `notify::Notifier`.
//!
//! The relay reports what it sees (an endpoint's state changes, dead
//! letters, the backlog and the database at each 5-second status check);
//! which of those become events, when, and how each is retried are the
//! core's rules. One task sends them, one at a time, through the delivery
//! client (the same TLS trust and private-network rule as deliveries).
//! Events still queued when the relay stops are not sent: they are news of
//! the moment, and the log and metrics keep the same facts.

use crate::clock::Clock;
use crate::config::Operator as OperatorConfig;
use crate::metrics::Metrics;
use callpost_core::protection::GuardEvent;
use callpost_core::{Notifier, Outcome, Timestamp};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// The longest the sender sleeps without asking the notifier again: a
/// bound on a missed wake-up.
const IDLE_POLL: Duration = Duration::from_secs(5);

/// What the relay tells its operator.
pub struct Operator {
    notifier: Mutex<Notifier>,
    wake: Notify,
}

impl Operator {
    /// The notifier for `cfg` (checked when the configuration was loaded).
    pub fn new(cfg: &OperatorConfig) -> Option<Self> {
        let seed = getrandom::u64().unwrap_or(0x5eed);
        match Notifier::new(cfg.webhooks.clone(), cfg.notify, seed) {
            Ok(notifier) => Some(Self {
                notifier: Mutex::new(notifier),
                wake: Notify::new(),
            }),
            Err(e) => {
                tracing::error!("operational events are off: {e}");
                None
            }
        }
    }

    fn notifier(&self) -> MutexGuard<'_, Notifier> {
        // Each call is one method of the notifier: a poisoned lock still
        // holds consistent state.
        self.notifier.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn tell(&self, f: impl FnOnce(&mut Notifier)) {
        f(&mut self.notifier());
        self.wake.notify_one();
    }

    /// An endpoint's guard changed state.
    pub fn guard_event(
        &self,
        now: Timestamp,
        url: &str,
        event: &GuardEvent,
        failing_since: Option<Timestamp>,
    ) {
        self.tell(|n| n.handle_guard_event(now, url, event, failing_since));
    }

    /// `n` deliveries to `destination` of `source` became dead letters.
    pub fn dead_letters(&self, now: Timestamp, source: &str, destination: &str, n: u64) {
        self.tell(|x| x.handle_dead_letters_to(now, source, destination, n));
    }

    /// The status check's counts, or its failure.
    pub fn status_check(&self, now: Timestamp, counts: Result<(u64, Option<Timestamp>), &str>) {
        self.tell(|n| match counts {
            Ok((pending, oldest)) => {
                n.handle_database(now, Ok(()));
                n.handle_backlog(now, pending, oldest);
            }
            Err(reason) => n.handle_database(now, Err(reason)),
        });
    }

    /// Counts and logs the events the notifier gave up since `counted`.
    fn count_dropped(&self, counted: &mut u64, metrics: &Metrics) {
        let now = self.notifier().dropped();
        if now > *counted {
            let more = now - *counted;
            *counted = now;
            for _ in 0..more {
                metrics.operator_event("dropped");
            }
            tracing::warn!("{more} operational event(s) given up");
        }
    }

    /// Sends what the notifier gives, until the task is dropped. `post`
    /// sends one request within its budget.
    pub(crate) async fn run<F, Fut>(
        self: Arc<Self>,
        clock: Arc<Clock>,
        metrics: Arc<Metrics>,
        post: F,
    ) where
        F: Fn(callpost_core::Request, Duration) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let mut dropped = 0;
        loop {
            let now = clock.now();
            let mut random = [0u8; 16];
            // Without OS randomness the id is all zeros: still sent, and
            // the receiver's deduplication is the only thing it weakens.
            let _ = getrandom::fill(&mut random);
            let next = self.notifier().poll_request(now, random);
            if let Some(a) = next {
                let budget = Duration::from_millis(
                    u64::try_from(a.deadline.millis_since(now))
                        .unwrap_or(1)
                        .max(1),
                );
                let outcome = post(a.request, budget).await;
                let ok = outcome.verdict() == callpost_core::retry::Verdict::Success;
                metrics.operator_event(if ok { "sent" } else { "failed" });
                if !ok {
                    tracing::warn!(
                        "an operational event ({}) was not taken: {}",
                        a.kind,
                        outcome.code()
                    );
                }
                self.notifier()
                    .handle_response(clock.now(), a.token, &outcome);
                self.count_dropped(&mut dropped, &metrics);
                continue;
            }
            // Dropped while the queue was full: counted at the wake-up
            // the event that found it full caused, not at the next answer.
            self.count_dropped(&mut dropped, &metrics);
            let wait = self
                .notifier()
                .poll_timeout()
                .map_or(IDLE_POLL, |at| {
                    Duration::from_millis(u64::try_from(at.millis_since(now)).unwrap_or(0))
                })
                .min(IDLE_POLL);
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use callpost_core::notify::MAX_QUEUED_EVENTS;
    use callpost_core::protection::EndpointState;
    use callpost_core::{EndpointConfig, NotifierConfig, Webhooks};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn dropped(metrics: &Metrics) -> u64 {
        let text = metrics.render(&crate::metrics::StoreCounts {
            healthy: true,
            ..Default::default()
        });
        text.lines()
            .find(|l| l.starts_with("callpost_relay_operator_events_total{result=\"dropped\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .map_or(0, |n| n.parse().unwrap())
    }

    #[tokio::test]
    async fn events_dropped_while_the_operator_is_down_are_counted_at_once() {
        let cfg = OperatorConfig {
            webhooks: Webhooks::new(
                &[EndpointConfig::new("https://ops.example.com/in")],
                Some(b"secret"),
            )
            .unwrap(),
            notify: NotifierConfig::default(),
        };
        let op = Arc::new(Operator::new(&cfg).unwrap());
        let metrics = Arc::new(Metrics::new());
        let clock = Arc::new(Clock::new());
        let posts = Arc::new(AtomicUsize::new(0));
        let tries = Arc::clone(&posts);
        // The first try is refused and the event waits for its backoff;
        // any later try never ends, so only a count made while the sender
        // waits can show the drops.
        tokio::spawn(
            Arc::clone(&op).run(Arc::clone(&clock), Arc::clone(&metrics), move |_, _| {
                let first = tries.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if !first {
                        std::future::pending::<()>().await;
                    }
                    Outcome::connection("refused")
                }
            }),
        );
        let opened = |i: usize| GuardEvent {
            at: clock.now(),
            from: EndpointState::Healthy,
            to: EndpointState::CircuitOpen {
                until: clock.now().saturating_add_ms(30_000 + i as u64),
            },
        };
        op.guard_event(clock.now(), "https://a.example.com/", &opened(0), None);
        while posts.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let over: u64 = 5;
        for i in 1..=MAX_QUEUED_EVENTS + over as usize {
            op.guard_event(
                clock.now(),
                &format!("https://a{i}.example.com/"),
                &opened(i),
                None,
            );
        }
        for _ in 0..200 {
            if dropped(&metrics) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(dropped(&metrics), 1 + over);
    }
}
