//! The operator's notifier: which operational events ([`OpsEvent`]) a
//! service sends, when, and how each reaches the operator's own Webhooks
//! destination. Sans-IO: the host reports what it sees (`handle_*(now,
//! …)`), sends what [`Notifier::poll_request`] gives, reports each answer
//! with [`Notifier::handle_response`], and wakes at
//! [`Notifier::poll_timeout`].
//!
//! What is reported, and how often:
//! * an endpoint's circuit opening and closing, and an endpoint disabled,
//!   each as it happens ([`OpsEvent::from_guard`]);
//! * dead letters counted over a window ([`NotifierConfig::dead_letter_window_ms`]):
//!   at most one event per window, with counts per source, however many
//!   calls gave up (Svix and Convoy send one event per failure; an outage
//!   that kills thousands of calls must not send thousands of events);
//! * a backlog over its threshold once as it crosses it, and again only
//!   after it has fallen to half the threshold (no event per check while it
//!   hovers at the line);
//! * the database unreachable once it has failed for
//!   [`DATABASE_UNREACHABLE_AFTER_MS`] without a success (a single slow
//!   call is not an outage), once per outage.
//!
//! Events go one at a time, in order, each with the same `Idempotency-Key`
//! on every try. A failure tries the destination's next URL at once; when
//! every URL has failed, the event waits the delivery backoff and starts
//! again from the first, until [`EVENT_RETRY_WINDOW_MS`] has passed since
//! its first try. A refusal (4xx) from every URL drops it.

use crate::delivery::{DELIVERY_BACKOFF, WEBHOOK_TIMEOUT_MS};
use crate::ops::OpsEvent;
use crate::protection::{GuardEvent, ProtectionError};
use crate::retry::{parse_retry_after, Backoff, Jitter, Outcome, Verdict};
use crate::timestamp::Timestamp;
use crate::webhooks::{Request, Webhooks};
use std::collections::{BTreeMap, VecDeque};

/// The default window dead letters are counted over: one event a minute at
/// most, soon enough to act on and few enough to read.
pub const DEFAULT_DEAD_LETTER_WINDOW_MS: u64 = 60_000;

/// The shortest and longest dead-letter windows accepted.
pub const DEAD_LETTER_WINDOW_RANGE_MS: (u64, u64) = (1_000, 3_600_000);

/// How long the database must fail, with no success between, before it is
/// reported unreachable: two of the relay's 5-second status checks.
pub const DATABASE_UNREACHABLE_AFTER_MS: u64 = 10_000;

/// How long an event is tried for: an operational event older than an hour
/// is history, which the operator reads in the log and metrics instead.
pub const EVENT_RETRY_WINDOW_MS: u64 = 3_600_000;

/// Events kept while the operator's destination does not answer; past
/// this, new events are dropped and counted ([`Notifier::dropped`]). Each
/// is a few hundred bytes.
pub const MAX_QUEUED_EVENTS: usize = 1_000;

/// The backoff between rounds of an event's tries: the webhooks'.
pub const EVENT_BACKOFF: Backoff = DELIVERY_BACKOFF;

/// What the notifier reports. The default reports dead letters each
/// minute and no backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifierConfig {
    /// Report a backlog of more than this many pending calls; `None`
    /// never does.
    pub backlog_threshold: Option<u64>,
    /// Dead letters are counted over this window, in milliseconds.
    pub dead_letter_window_ms: u64,
}

impl Default for NotifierConfig {
    fn default() -> Self {
        Self {
            backlog_threshold: None,
            dead_letter_window_ms: DEFAULT_DEAD_LETTER_WINDOW_MS,
        }
    }
}

impl NotifierConfig {
    /// Checks every setting (errors carry `invalid_settings`).
    pub fn validate(&self) -> Result<(), ProtectionError> {
        let (lo, hi) = DEAD_LETTER_WINDOW_RANGE_MS;
        if !(lo..=hi).contains(&self.dead_letter_window_ms) {
            return Err(ProtectionError::OutOfRange {
                field: "dead_letter_window_ms",
                value: self.dead_letter_window_ms,
                range: "1,000 to 3,600,000",
            });
        }
        if self.backlog_threshold == Some(0) {
            return Err(ProtectionError::OutOfRange {
                field: "backlog_threshold",
                value: 0,
                range: "at least 1",
            });
        }
        Ok(())
    }
}

/// One request for the host to send.
#[derive(Debug)]
pub struct EventAttempt {
    /// Report its answer with this.
    pub token: u64,
    /// The event's `type`, for logs.
    pub kind: &'static str,
    /// The signed request.
    pub request: Request,
    /// No answer by then is a timeout.
    pub deadline: Timestamp,
}

#[derive(Debug)]
struct Queued {
    event: OpsEvent,
    /// When it happened: the body's `timestamp`.
    at: Timestamp,
    /// Its id, fixed at its first try.
    id: Option<[u8; 16]>,
    first_sent: Option<Timestamp>,
    due: Timestamp,
    round: u32,
    endpoint: usize,
    /// Some URL answered with a failure to retry (not a refusal) this round.
    retry: bool,
}

/// The operator's notifier (see the module docs).
#[derive(Debug)]
pub struct Notifier {
    webhooks: Webhooks,
    config: NotifierConfig,
    queue: VecDeque<Queued>,
    sending: Option<u64>,
    next_token: u64,
    jitter: Jitter,
    dead: BTreeMap<String, u64>,
    /// Dead letters by (source, destination), where the host named it.
    dead_to: BTreeMap<(String, String), u64>,
    dead_since: Option<Timestamp>,
    backlog_over: bool,
    db_failing_since: Option<Timestamp>,
    db_reported: bool,
    dropped: u64,
}

impl Notifier {
    /// A notifier sending through `webhooks` (the operator's destination),
    /// its retry jitter seeded by the host.
    pub fn new(
        webhooks: Webhooks,
        config: NotifierConfig,
        jitter_seed: u64,
    ) -> Result<Self, ProtectionError> {
        config.validate()?;
        Ok(Self {
            webhooks,
            config,
            queue: VecDeque::new(),
            sending: None,
            next_token: 0,
            jitter: Jitter::new(jitter_seed),
            dead: BTreeMap::new(),
            dead_to: BTreeMap::new(),
            dead_since: None,
            backlog_over: false,
            db_failing_since: None,
            db_reported: false,
            dropped: 0,
        })
    }

    /// Events dropped: the queue was full, their window passed, or every
    /// URL refused them.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Events waiting to be sent or in flight.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    fn push(&mut self, now: Timestamp, event: OpsEvent) {
        if self.queue.len() >= MAX_QUEUED_EVENTS {
            self.dropped += 1;
            return;
        }
        self.queue.push_back(Queued {
            event,
            at: now,
            id: None,
            first_sent: None,
            due: now,
            round: 0,
            endpoint: 0,
            retry: false,
        });
    }

    /// An endpoint guard's state change for `url`
    /// ([`crate::protection::EndpointGuard::poll_event`]).
    pub fn handle_guard_event(
        &mut self,
        now: Timestamp,
        url: &str,
        event: &GuardEvent,
        failing_since: Option<Timestamp>,
    ) {
        if let Some(e) = OpsEvent::from_guard(url, event, failing_since) {
            self.push(now, e);
        }
    }

    /// `n` calls of `source` became dead letters.
    pub fn handle_dead_letters(&mut self, now: Timestamp, source: &str, n: u64) {
        if n == 0 {
            return;
        }
        *self.dead.entry(source.to_owned()).or_default() += n;
        self.dead_since.get_or_insert(now);
        self.flush_dead(now);
    }

    /// `n` deliveries to `destination` of `source` became dead letters:
    /// [`Notifier::handle_dead_letters`], with the event naming the
    /// destination too.
    pub fn handle_dead_letters_to(
        &mut self,
        now: Timestamp,
        source: &str,
        destination: &str,
        n: u64,
    ) {
        if n == 0 {
            return;
        }
        *self
            .dead_to
            .entry((source.to_owned(), destination.to_owned()))
            .or_default() += n;
        self.handle_dead_letters(now, source, n);
    }

    /// The backlog now: `pending` calls, the oldest received at
    /// `oldest_pending_at`.
    pub fn handle_backlog(
        &mut self,
        now: Timestamp,
        pending: u64,
        oldest_pending_at: Option<Timestamp>,
    ) {
        let Some(threshold) = self.config.backlog_threshold else {
            return;
        };
        if pending > threshold && !self.backlog_over {
            self.backlog_over = true;
            self.push(
                now,
                OpsEvent::BacklogOver {
                    pending,
                    threshold,
                    oldest_pending_at,
                },
            );
        } else if pending <= threshold / 2 {
            self.backlog_over = false;
        }
    }

    /// A call to the database succeeded (`Ok`) or failed with a reason
    /// (without credentials).
    pub fn handle_database(&mut self, now: Timestamp, result: Result<(), &str>) {
        match result {
            Ok(()) => {
                let since = self.db_failing_since.take();
                if std::mem::take(&mut self.db_reported) {
                    // Only an outage the operator was told of: a slow
                    // check or two said nothing, and need no all-clear.
                    if let Some(since) = since {
                        self.push(now, OpsEvent::DatabaseRecovered { since });
                    }
                }
            }
            Err(reason) => {
                let since = *self.db_failing_since.get_or_insert(now);
                let after = i64::try_from(DATABASE_UNREACHABLE_AFTER_MS).unwrap_or(i64::MAX);
                if !self.db_reported && now.millis_since(since) >= after {
                    self.db_reported = true;
                    self.push(
                        now,
                        OpsEvent::DatabaseUnreachable {
                            since,
                            reason: reason.to_owned(),
                        },
                    );
                }
            }
        }
    }

    /// Turns the dead letters counted into an event once their window has
    /// passed.
    fn flush_dead(&mut self, now: Timestamp) {
        let Some(since) = self.dead_since else {
            return;
        };
        let window = i64::try_from(self.config.dead_letter_window_ms).unwrap_or(i64::MAX);
        if now.millis_since(since) < window {
            return;
        }
        let sources: Vec<(String, u64)> = std::mem::take(&mut self.dead).into_iter().collect();
        let destinations = std::mem::take(&mut self.dead_to)
            .into_iter()
            .map(|((s, d), n)| (s, d, n))
            .collect();
        let count = sources.iter().map(|(_, n)| n).sum();
        self.dead_since = None;
        self.push(
            now,
            OpsEvent::DeadLettered {
                count,
                sources,
                destinations,
                since,
            },
        );
    }

    /// The next request to send, if one is due and none is in flight.
    /// `random` is 16 bytes from the host's secure source: the event's id
    /// when this is its first try.
    pub fn poll_request(&mut self, now: Timestamp, random: [u8; 16]) -> Option<EventAttempt> {
        self.flush_dead(now);
        if self.sending.is_some() {
            return None;
        }
        loop {
            let q = self.queue.front_mut()?;
            if q.due > now {
                return None;
            }
            let id = *q.id.get_or_insert(random);
            q.first_sent.get_or_insert(now);
            match self.webhooks.event_request(&q.event, id, q.at, q.endpoint) {
                Ok(request) => {
                    let token = self.next_token;
                    self.next_token += 1;
                    self.sending = Some(token);
                    return Some(EventAttempt {
                        token,
                        kind: q.event.kind(),
                        request,
                        deadline: now.saturating_add_ms(WEBHOOK_TIMEOUT_MS),
                    });
                }
                // The destination has no such endpoint (no URLs at all):
                // nothing can carry the event.
                Err(_) => {
                    self.queue.pop_front();
                    self.dropped += 1;
                }
            }
        }
    }

    /// The answer to request `token` (a timeout is [`Outcome::Timeout`]).
    pub fn handle_response(&mut self, now: Timestamp, token: u64, outcome: &Outcome) {
        if self.sending != Some(token) {
            return;
        }
        self.sending = None;
        let urls = self.webhooks.endpoints().len();
        let Some(q) = self.queue.front_mut() else {
            return;
        };
        let verdict = outcome.verdict();
        if verdict == Verdict::Success {
            self.queue.pop_front();
            return;
        }
        q.retry |= verdict == Verdict::Retry;
        let mut wait = 0;
        if let Outcome::Response {
            retry_after: Some(v),
            ..
        } = outcome
        {
            wait = parse_retry_after(v, now).unwrap_or(0);
        }
        q.endpoint += 1;
        if q.endpoint < urls {
            q.due = now;
            return;
        }
        // Every URL failed this round.
        let first = q.first_sent.unwrap_or(now);
        let window = i64::try_from(EVENT_RETRY_WINDOW_MS).unwrap_or(i64::MAX);
        if !q.retry || now.millis_since(first) >= window {
            self.queue.pop_front();
            self.dropped += 1;
            return;
        }
        q.round += 1;
        q.endpoint = 0;
        q.retry = false;
        let delay = EVENT_BACKOFF
            .equal_jitter(q.round, &mut self.jitter)
            .max(wait);
        q.due = now.saturating_add_ms(delay);
    }

    /// When the host should call [`Self::poll_request`] next, if nothing
    /// else wakes it: the next event's retry, or the end of the dead-letter
    /// window.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let next = if self.sending.is_none() {
            self.queue.front().map(|q| q.due)
        } else {
            None
        };
        let window = self
            .dead_since
            .map(|s| s.saturating_add_ms(self.config.dead_letter_window_ms));
        [next, window].into_iter().flatten().min()
    }
}
