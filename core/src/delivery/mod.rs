//! One call through the Webhooks destination: failover across endpoints,
//! retries for up to 4 hours, and an attempt log (webhooks-destination.md,
//! Errors and Limits).

use crate::call::Call;
use crate::retry::{parse_retry_after, Backoff, Jitter, Outcome, Verdict};
use crate::timestamp::Timestamp;
use crate::webhooks::HostHmac;
use crate::webhooks::{write_body, Request, Webhooks};
use serde::{Deserialize, Serialize};

mod state;

pub use state::{StateError, STATE_VERSION};

/// The receiver must answer within 5 seconds (spec, Limits).
pub const WEBHOOK_TIMEOUT_MS: u64 = 5_000;

/// 5xx responses are retried "for a maximum of 4 hours" (spec, Errors).
pub const RETRY_WINDOW_MS: u64 = 4 * 60 * 60 * 1000;

/// Delay before retry round `n` is drawn from `[c/2, c]` with
/// `c = min(30 min, 10 s · 2^(n−1))` ("equal jitter").
///
/// Chosen so a dead receiver sees attempts spread over the whole window: the
/// ceilings run 10 s, 20 s, 40 s, … 21 min, then 30 min, so about 8 rounds
/// land in the first ~35 minutes and about 8 more every 15–30 minutes until
/// the 4 hours are up: roughly 16 rounds in all (the simulation test prints
/// the actual schedule). Svix and Standard Webhooks use a similar shape
/// (seconds, then minutes, then tens of minutes).
pub const DELIVERY_BACKOFF: Backoff = Backoff {
    base_ms: 10_000,
    cap_ms: 30 * 60 * 1000,
};

/// Timing settings for a delivery. The defaults are the spec's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryConfig {
    /// How long to wait for an answer ([`WEBHOOK_TIMEOUT_MS`]).
    pub timeout_ms: u64,
    /// No attempt starts later than this after the first
    /// ([`RETRY_WINDOW_MS`]).
    pub retry_window_ms: u64,
    /// Backoff between retry rounds ([`DELIVERY_BACKOFF`]).
    pub backoff: Backoff,
    /// Seed for jitter; hosts pass OS randomness, tests a constant.
    pub jitter_seed: u64,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            timeout_ms: WEBHOOK_TIMEOUT_MS,
            retry_window_ms: RETRY_WINDOW_MS,
            backoff: DELIVERY_BACKOFF,
            jitter_seed: 0,
        }
    }
}

/// One attempt, as recorded in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// 1-based attempt number across all endpoints.
    pub attempt: u32,
    /// Which endpoint.
    pub endpoint: usize,
    /// When it was sent (ms since the epoch).
    pub sent_at: i64,
    /// When its outcome arrived.
    pub ended_at: i64,
    /// What happened.
    pub outcome: Outcome,
    /// What that meant.
    pub verdict: Verdict,
}

/// Why a delivery gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GiveUpReason {
    /// The next attempt would start more than the retry window (4 hours)
    /// after the first.
    WindowExhausted,
    /// Every endpoint refused the call for good (4xx, 3xx or TLS failure).
    AllEndpointsRejected,
}

impl GiveUpReason {
    /// Stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            Self::WindowExhausted => "window_exhausted",
            Self::AllEndpointsRejected => "all_endpoints_rejected",
        }
    }
}

/// How a delivery ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// Endpoint `endpoint` answered 2xx to attempt `attempt`.
    Delivered {
        /// Which endpoint.
        endpoint: usize,
        /// 1-based attempt number across all endpoints.
        attempt: u32,
        /// When the 2xx arrived.
        at: i64,
    },
    /// No endpoint took the call.
    GaveUp {
        /// Why.
        reason: GiveUpReason,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's outcome.
        last: Option<Outcome>,
    },
    /// The call's `integrations` turn Webhooks off; nothing was sent.
    Disabled,
}

/// The next request to send.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Which endpoint it goes to.
    pub endpoint: usize,
    /// 1-based attempt number.
    pub attempt: u32,
    /// The signed request.
    pub request: Request,
    /// When to stop waiting and report a timeout (ms since the epoch).
    pub deadline: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Waiting { at: i64 },
    InFlight { endpoint: usize, sent_at: i64 },
    Done,
}

/// One call's delivery, sans I/O, and fully serializable: store it
/// ([`Delivery::to_json`]) and resume after a restart
/// ([`Delivery::from_json`]) with the same [`Webhooks`] settings.
///
/// # Driving it
/// * Output: [`poll_request`](Self::poll_request) gives the next request
///   when one is due.
/// * Inputs: [`handle_response`](Self::handle_response) with its outcome,
///   or [`handle_timeout`](Self::handle_timeout) when `now` reaches
///   [`poll_timeout`](Self::poll_timeout).
/// * [`poll_outcome`](Self::poll_outcome) gives the final outcome once.
///
/// Endpoints are tried in order within a round; a failure moves straight on
/// to the next endpoint (failover), and the first 2xx ends the delivery.
/// When a round fails, the next round starts after a backoff. An endpoint
/// that rejects the call (3xx, 4xx other than 408/429, TLS failure) is not
/// tried again.
#[derive(Clone, PartialEq, Eq)]
pub struct Delivery {
    message_id: Option<String>,
    body: String,
    rejected: Vec<bool>,
    cursor: usize,
    round: u32,
    round_retry_after: Option<u64>,
    phase: Phase,
    first_sent: Option<i64>,
    attempts: u32,
    log: Vec<AttemptRecord>,
    outcome: Option<DeliveryOutcome>,
    outcome_taken: bool,
    config: DeliveryConfig,
    rng: Jitter,
}

/// The body holds customer data: `Debug` shows its length, as `Request`'s
/// does.
impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("message_id", &self.message_id)
            .field("body_len", &self.body.len())
            .field("rejected", &self.rejected)
            .field("cursor", &self.cursor)
            .field("round", &self.round)
            .field("phase", &self.phase)
            .field("attempts", &self.attempts)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// Starts delivering `call` (first attempt due at `now`). The body is
    /// built once, here, so every attempt sends the same signed bytes.
    pub fn new(
        hooks: &Webhooks,
        call: &Call,
        now: i64,
        config: DeliveryConfig,
    ) -> Result<Self, crate::Error> {
        let enabled = hooks.is_enabled_for(call);
        let mut body = Vec::with_capacity(call.capacity_hint());
        write_body(call, Timestamp::from_millis(now)?, &mut body)?;
        let body = String::from_utf8(body).map_err(|_| crate::JsonError::InvalidUnicode)?;
        let n = hooks.endpoints().len();
        let mut d = Self {
            message_id: call.message_id.clone(),
            body,
            rejected: vec![false; n],
            cursor: 0,
            round: 0,
            round_retry_after: None,
            phase: Phase::Waiting { at: now },
            first_sent: None,
            attempts: 0,
            log: Vec::new(),
            outcome: None,
            outcome_taken: false,
            config,
            rng: Jitter::new(config.jitter_seed),
        };
        if !enabled {
            d.finish(DeliveryOutcome::Disabled);
        }
        Ok(d)
    }

    /// The body every attempt sends.
    pub fn body(&self) -> &[u8] {
        self.body.as_bytes()
    }

    /// The attempts so far, oldest first.
    pub fn log(&self) -> &[AttemptRecord] {
        &self.log
    }

    /// The final outcome, once there is one.
    pub fn outcome(&self) -> Option<&DeliveryOutcome> {
        self.outcome.as_ref()
    }

    /// The request to send now, or `None` (not due yet, in flight, or done).
    /// Changes after `handle_response`, `handle_timeout`, and as `now`
    /// reaches [`poll_timeout`](Self::poll_timeout).
    ///
    /// `hooks` must be the settings the delivery was created with.
    #[must_use]
    pub fn poll_request(&mut self, now: i64, hooks: &Webhooks) -> Option<Attempt> {
        self.poll_request_with(now, hooks, None)
    }

    /// [`Delivery::poll_request`], signed by the host's `hmac` when given
    /// (see [`Webhooks::request_for_body_with`]).
    #[must_use]
    pub fn poll_request_with(
        &mut self,
        now: i64,
        hooks: &Webhooks,
        hmac: Option<HostHmac<'_>>,
    ) -> Option<Attempt> {
        let Phase::Waiting { at } = self.phase else {
            return None;
        };
        if now < at {
            return None;
        }
        let endpoint = self.cursor;
        // Only fails if the settings lost endpoints since the delivery began.
        let request = hooks
            .request_for_body_with(
                self.message_id.as_deref(),
                self.body.clone().into_bytes(),
                endpoint,
                hmac,
            )
            .ok()?;
        self.attempts += 1;
        self.first_sent.get_or_insert(now);
        self.phase = Phase::InFlight {
            endpoint,
            sent_at: now,
        };
        Some(Attempt {
            endpoint,
            attempt: self.attempts,
            request,
            deadline: now.saturating_add_unsigned(self.config.timeout_ms),
        })
    }

    /// Reports the outcome of the request in flight. Ignored when none is.
    pub fn handle_response(&mut self, now: i64, outcome: Outcome) {
        let Phase::InFlight { endpoint, sent_at } = self.phase else {
            return;
        };
        let verdict = outcome.verdict();
        self.log.push(AttemptRecord {
            attempt: self.attempts,
            endpoint,
            sent_at,
            ended_at: now,
            outcome: outcome.clone(),
            verdict,
        });
        match verdict {
            Verdict::Success => {
                return self.finish(DeliveryOutcome::Delivered {
                    endpoint,
                    attempt: self.attempts,
                    at: now,
                });
            }
            Verdict::Reject => self.rejected[endpoint] = true,
            Verdict::Retry => {
                if let Outcome::Response {
                    retry_after: Some(v),
                    ..
                } = &outcome
                {
                    let ra = parse_retry_after(v, now);
                    self.round_retry_after = self.round_retry_after.max(ra);
                }
            }
        }
        let first = self.first_sent.unwrap_or(sent_at);
        let window_end = first.saturating_add_unsigned(self.config.retry_window_ms);
        // Failover: the next endpoint in this round, straight away.
        if let Some(next) = (endpoint + 1..self.rejected.len()).find(|&i| !self.rejected[i]) {
            if now > window_end {
                return self.give_up(GiveUpReason::WindowExhausted, outcome);
            }
            self.cursor = next;
            self.phase = Phase::Waiting { at: now };
            return;
        }
        let Some(first_open) = self.rejected.iter().position(|r| !r) else {
            return self.give_up(GiveUpReason::AllEndpointsRejected, outcome);
        };
        self.round += 1;
        let backoff = self.config.backoff.equal_jitter(self.round, &mut self.rng);
        let delay = backoff.max(self.round_retry_after.take().unwrap_or(0));
        let at = now.saturating_add_unsigned(delay);
        if at > window_end {
            return self.give_up(GiveUpReason::WindowExhausted, outcome);
        }
        self.cursor = first_open;
        self.phase = Phase::Waiting { at };
    }

    /// Call when `now` reaches [`poll_timeout`](Self::poll_timeout). A
    /// request unanswered past the timeout counts as [`Outcome::Timeout`].
    pub fn handle_timeout(&mut self, now: i64) {
        if let Phase::InFlight { sent_at, .. } = self.phase {
            if now >= sent_at.saturating_add_unsigned(self.config.timeout_ms) {
                self.handle_response(now, Outcome::Timeout);
            }
        }
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) or
    /// [`poll_request`](Self::poll_request) next, or `None` when done.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<i64> {
        match self.phase {
            Phase::Waiting { at } => Some(at),
            Phase::InFlight { sent_at, .. } => {
                Some(sent_at.saturating_add_unsigned(self.config.timeout_ms))
            }
            Phase::Done => None,
        }
    }

    /// The final outcome, returned once. Changes after `handle_response` and
    /// `handle_timeout`.
    #[must_use]
    pub fn poll_outcome(&mut self) -> Option<DeliveryOutcome> {
        if self.outcome_taken {
            return None;
        }
        let o = self.outcome.clone()?;
        self.outcome_taken = true;
        Some(o)
    }

    /// True once the delivery has an outcome.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    fn give_up(&mut self, reason: GiveUpReason, last: Outcome) {
        self.finish(DeliveryOutcome::GaveUp {
            reason,
            attempts: self.attempts,
            last: Some(last),
        });
    }

    fn finish(&mut self, outcome: DeliveryOutcome) {
        self.phase = Phase::Done;
        self.outcome = Some(outcome);
    }
}
