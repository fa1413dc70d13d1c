//! One call through the Webhooks destination: rounds of attempts to its
//! endpoints, retries for up to 4 hours, and an attempt log
//! (webhooks-destination.md, Errors and Limits).

use crate::call::{Call, CallError};
use crate::code::Code;
use crate::filter::Decision;
use crate::json::JsonError;
use crate::mapping::MapError;
use crate::retry::{parse_retry_after, Backoff, Jitter, Outcome, Verdict};
use crate::timestamp::Timestamp;
use crate::webhooks::{HostHmac, Mode, Request, Webhooks};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::VecDeque;

pub(crate) mod state;

pub use state::{StateError, STATE_VERSION};

/// The receiver must answer within 5 seconds (spec, Limits).
pub const WEBHOOK_TIMEOUT_MS: u64 = 5_000;

/// The most bytes of a receiver's answer an attempt's log keeps
/// ([`Delivery::handle_answer`]): room for an error message or an id.
/// Svix and Convoy keep whole answers; a relay that keeps the log of every
/// call it stores keeps their start, so a chatty receiver cannot grow the
/// database by more than this per attempt.
pub const ANSWER_LOG_BYTES: usize = 256;

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

/// What `outcome` means at `endpoint` of `settings`: the outcome's own
/// verdict, except that a 401 from an OAuth 2.0 endpoint is retried (its
/// bearer token was refused: the host drops it and fetches another).
pub(crate) fn verdict_at(settings: &Webhooks, endpoint: usize, outcome: &Outcome) -> Verdict {
    match outcome {
        Outcome::Response { status, .. }
            if settings
                .endpoints()
                .get(endpoint)
                .is_some_and(|e| e.token_refused(*status)) =>
        {
            Verdict::Retry
        }
        _ => outcome.verdict(),
    }
}

/// Timing settings for a delivery. The defaults are the spec's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryConfig {
    /// How long to wait for each answer ([`WEBHOOK_TIMEOUT_MS`]).
    pub timeout_ms: u64,
    /// No round starts later than this after the first attempt
    /// ([`RETRY_WINDOW_MS`]).
    pub retry_window_ms: u64,
    /// Backoff between retry rounds ([`DELIVERY_BACKOFF`]).
    pub backoff: Backoff,
    /// Seed for the backoff's jitter. The core has no entropy: hosts pass
    /// OS randomness, so deliveries that fail together do not all retry
    /// at the same instants; tests pass a constant.
    pub jitter_seed: u64,
}

impl DeliveryConfig {
    /// The spec's timings, with `jitter_seed`.
    pub fn new(jitter_seed: u64) -> Self {
        Self {
            timeout_ms: WEBHOOK_TIMEOUT_MS,
            retry_window_ms: RETRY_WINDOW_MS,
            backoff: DELIVERY_BACKOFF,
            jitter_seed,
        }
    }
}

/// One attempt, as recorded in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// 1-based attempt number across all endpoints and rounds.
    pub attempt: u32,
    /// 1-based round the attempt belongs to.
    pub round: u32,
    /// Which endpoint.
    pub endpoint: usize,
    /// When it was sent.
    pub sent_at: Timestamp,
    /// When its outcome arrived.
    pub ended_at: Timestamp,
    /// What happened.
    pub outcome: Outcome,
    /// What that meant.
    pub verdict: Verdict,
    /// The first bytes of the answer's body, when the host reported them
    /// ([`Delivery::handle_answer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// Why a delivery gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GiveUpReason {
    /// The next round would start more than the retry window (4 hours)
    /// after the first attempt.
    WindowExhausted,
    /// Every endpoint refused the call for good (4xx, 3xx or TLS failure).
    AllEndpointsRejected,
    /// An endpoint's URL template had no value for the call (or the
    /// delivery was of a batch, which a template cannot name); nothing was
    /// sent.
    InvalidUrlValue,
    /// The destination's mapping built a body over
    /// [`MAX_BODY_BYTES`](crate::mapping::MAX_BODY_BYTES) for the call;
    /// nothing was sent.
    MappedBodyTooLarge,
}

impl GiveUpReason {
    /// Stable snake_case code.
    pub fn code(self) -> Code {
        match self {
            Self::WindowExhausted => Code::WindowExhausted,
            Self::AllEndpointsRejected => Code::AllEndpointsRejected,
            Self::MappedBodyTooLarge => Code::MappedBodyTooLarge,
            Self::InvalidUrlValue => Code::InvalidUrlValue,
        }
    }
}

/// How a delivery ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// Endpoint `endpoint` answered 2xx to attempt `attempt` (the first
    /// success, when several endpoints took the call in one round).
    Delivered {
        /// Which endpoint.
        endpoint: usize,
        /// 1-based attempt number.
        attempt: u32,
        /// When the 2xx arrived.
        at: Timestamp,
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
    /// The destination's filters dropped the call; nothing was sent.
    Filtered {
        /// The index of the rule that dropped it.
        rule: u32,
    },
}

/// A call [`Webhooks::pack`] put in no batch ends as it would alone.
impl From<crate::webhooks::Skip> for DeliveryOutcome {
    fn from(why: crate::webhooks::Skip) -> Self {
        match why {
            crate::webhooks::Skip::Disabled => Self::Disabled,
            crate::webhooks::Skip::Filtered { rule } => Self::Filtered { rule },
            crate::webhooks::Skip::MappedBodyTooLarge => {
                Self::unsent(GiveUpReason::MappedBodyTooLarge)
            }
        }
    }
}

impl DeliveryOutcome {
    /// Given up before any attempt: nothing was sent, for `reason`.
    pub fn unsent(reason: GiveUpReason) -> Self {
        Self::GaveUp {
            reason,
            attempts: 0,
            last: None,
        }
    }

    /// The message a host raises when the delivery gave up, or `None`
    /// when it did not.
    pub fn error_message(&self) -> Option<String> {
        let Self::GaveUp {
            reason,
            attempts,
            last,
        } = self
        else {
            return None;
        };
        let last = last
            .as_ref()
            .map_or_else(String::new, |o| format!("; last: {o}"));
        Some(format!(
            "delivery gave up after {attempts} attempts ({}){last}",
            reason.code()
        ))
    }
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Which endpoint it goes to.
    pub endpoint: usize,
    /// 1-based attempt number: pass it back to
    /// [`Delivery::handle_response`].
    pub attempt: u32,
    /// The signed request.
    pub request: Request,
    /// When to stop waiting and report a timeout.
    pub deadline: Timestamp,
}

/// A request of the current round: not yet sent (`sent_at` is `None`), or
/// in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    endpoint: usize,
    /// Given when the slot is first sent; kept when a restored delivery
    /// sends it again, so the log and the receiver see one attempt.
    attempt: Option<u32>,
    sent_at: Option<Timestamp>,
}

/// A round: the endpoints it still has to send to, those awaiting an
/// answer, and the first success, if one came.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Round {
    /// When the unsent slots may go.
    due: Timestamp,
    pending: VecDeque<Slot>,
    in_flight: Vec<Slot>,
    success: Option<DeliveryOutcome>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Round(Round),
    Done,
}

/// One call's delivery, sans I/O, and fully serializable: store it
/// ([`Delivery::to_json`]) and resume after a restart
/// ([`Delivery::from_json`]).
///
/// # Driving it
/// * Output: [`poll_request`](Self::poll_request), called until `None`,
///   gives every request due now (all of a round's at once in
///   [`Mode::Parallel`]); send them concurrently.
/// * Inputs: [`handle_response`](Self::handle_response) with each
///   request's attempt number and outcome, and
///   [`handle_timeout`](Self::handle_timeout) when `now` reaches
///   [`poll_timeout`](Self::poll_timeout).
/// * [`poll_outcome`](Self::poll_outcome) gives the final outcome once.
///
/// # Rounds
/// A round sends the call to every endpoint that has not rejected it:
/// all at once ([`Mode::Parallel`]), or one after another until one takes
/// it ([`Mode::Failover`]). A 2xx ends the delivery; in parallel mode it
/// ends when the round's other requests have ended too, so the log holds
/// each endpoint's outcome, and the endpoints that failed in that round
/// are not tried again. An endpoint that rejects the call (3xx, 4xx other
/// than 408/429, TLS failure) leaves the later rounds. When a round fails,
/// the next starts after a backoff, within the retry window.
#[derive(Clone)]
pub struct Delivery {
    settings: Webhooks,
    mode: Mode,
    message_id: Option<String>,
    body: String,
    /// Each endpoint's URL for this call, when an endpoint's is a
    /// template: made once, with the body.
    urls: Option<Vec<String>>,
    rejected: Vec<bool>,
    /// Rounds that ended without a success.
    round: u32,
    round_retry_after: Option<u64>,
    phase: Phase,
    first_sent: Option<Timestamp>,
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
            .field("mode", &self.mode)
            .field("message_id", &self.message_id)
            .field("body_len", &self.body.len())
            .field("rejected", &self.rejected)
            .field("round", &self.round)
            .field("phase", &self.phase)
            .field("attempts", &self.attempts)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// Starts delivering `call` with `settings` (first round due at `now`).
    /// The body is built once, here, so every attempt sends the same signed
    /// bytes.
    pub fn new(
        settings: &Webhooks,
        call: &Call,
        now: Timestamp,
        config: DeliveryConfig,
    ) -> Result<Self, CallError> {
        let enabled = settings.is_enabled_for(call);
        let (call, filtered) = match settings.filter(call) {
            Decision::Keep(kept) => (kept, None),
            Decision::Drop { rule } => (Cow::Borrowed(call), Some(rule)),
        };
        let mut body = Vec::with_capacity(call.capacity_hint());
        let mut too_large = false;
        if filtered.is_none() {
            match settings.write_call_body(&call, now, &mut body) {
                Ok(()) => {}
                Err(MapError::Call(e)) => return Err(e),
                Err(_) => too_large = true,
            }
        }
        let body = String::from_utf8(body).map_err(|_| JsonError::InvalidUnicode)?;
        let mut d = Self::unstarted(settings, call.message_id.clone(), body, config);
        let urls = settings.is_templated().then(|| {
            settings
                .endpoints()
                .iter()
                .map(|e| e.url_for(&call, now).map(Cow::into_owned))
                .collect::<Result<Vec<_>, _>>()
        });
        let no_url = matches!(urls, Some(Err(_)));
        d.urls = urls.and_then(Result::ok);
        if !enabled {
            d.finish(DeliveryOutcome::Disabled);
        } else if let Some(rule) = filtered {
            let rule = u32::try_from(rule).unwrap_or(u32::MAX);
            d.finish(DeliveryOutcome::Filtered { rule });
        } else if too_large {
            d.finish(crate::webhooks::Skip::MappedBodyTooLarge.into());
        } else if no_url {
            d.finish(DeliveryOutcome::unsent(GiveUpReason::InvalidUrlValue));
        } else {
            d.phase = Phase::Round(d.new_round(now));
        }
        Ok(d)
    }

    /// Starts delivering `batch` (from [`Webhooks::pack`]) with
    /// `settings`, first round due at `now`: one POST of the batch's body,
    /// under its id, decided by one answer.
    pub fn for_batch(
        settings: &Webhooks,
        batch: &crate::webhooks::Batch,
        now: Timestamp,
        config: DeliveryConfig,
    ) -> Result<Self, CallError> {
        let body = String::from_utf8(batch.body.clone()).map_err(|_| JsonError::InvalidUnicode)?;
        let mut d = Self::unstarted(settings, Some(batch.id.clone()), body, config);
        if settings.is_templated() {
            // A URL template names one call's values; `pack` refuses such
            // settings, so only a batch made by hand arrives here.
            d.finish(DeliveryOutcome::unsent(GiveUpReason::InvalidUrlValue));
        } else {
            d.phase = Phase::Round(d.new_round(now));
        }
        Ok(d)
    }

    /// A delivery of `body` with no round yet.
    fn unstarted(
        settings: &Webhooks,
        message_id: Option<String>,
        body: String,
        config: DeliveryConfig,
    ) -> Self {
        Self {
            settings: settings.clone(),
            mode: settings.mode(),
            message_id,
            body,
            urls: None,
            rejected: vec![false; settings.endpoints().len()],
            round: 0,
            round_retry_after: None,
            phase: Phase::Done,
            first_sent: None,
            attempts: 0,
            log: Vec::new(),
            outcome: None,
            outcome_taken: false,
            config,
            rng: Jitter::new(config.jitter_seed),
        }
    }

    /// How many calls a batch's delivery carries (the elements of its
    /// body); `None` for one call's. A host that keeps a batch's state with
    /// each of its calls checks it has all of them before it sends.
    pub fn batch_size(&self) -> Option<usize> {
        let id = self.message_id.as_deref()?;
        if !crate::webhooks::is_batch_id(id) {
            return None;
        }
        match crate::json::Value::from_json_str(&self.body) {
            Ok(crate::json::Value::Array(items)) => Some(items.len()),
            _ => None,
        }
    }

    /// The settings the delivery sends with.
    pub fn settings(&self) -> &Webhooks {
        &self.settings
    }

    /// How this delivery reaches several endpoints.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The call's `messageId`, also sent as `Idempotency-Key`.
    pub fn message_id(&self) -> Option<&str> {
        self.message_id.as_deref()
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

    /// A request to send now, or `None`: call it until `None` and send
    /// every request it gave. Changes after `handle_response` and
    /// `handle_timeout`, and as `now` reaches
    /// [`poll_timeout`](Self::poll_timeout).
    #[must_use]
    pub fn poll_request(&mut self, now: Timestamp) -> Option<Attempt> {
        self.poll_request_with(now, None)
    }

    /// [`Delivery::poll_request`], with `X-Signature` computed by the
    /// host's HMAC where that is faster (see [`HostHmac`]).
    #[must_use]
    pub fn poll_request_with(
        &mut self,
        now: Timestamp,
        hmac: Option<HostHmac<'_>>,
    ) -> Option<Attempt> {
        let Phase::Round(r) = &mut self.phase else {
            return None;
        };
        let sequential = self.mode == Mode::Failover;
        if now < r.due || (sequential && !r.in_flight.is_empty()) {
            return None;
        }
        let mut slot = r.pending.pop_front()?;
        let attempt = match slot.attempt {
            Some(a) => a,
            None => {
                self.attempts += 1;
                self.attempts
            }
        };
        slot.attempt = Some(attempt);
        slot.sent_at = Some(now);
        r.in_flight.push(slot);
        self.first_sent.get_or_insert(now);
        let request = self
            .settings
            .request_for_body(
                self.message_id.as_deref(),
                self.body.clone().into_bytes(),
                slot.endpoint,
                self.urls
                    .as_ref()
                    .and_then(|u| u.get(slot.endpoint))
                    .map(String::as_str),
                now,
                hmac,
            )
            // Restoring checks the endpoint count against the settings,
            // so every slot's endpoint exists.
            .ok()?;
        Some(Attempt {
            endpoint: slot.endpoint,
            attempt,
            request,
            deadline: now.saturating_add_ms(self.config.timeout_ms),
        })
    }

    /// The host sent attempt `attempt` at `now`, later than it polled it
    /// (it waited for a free slot of its endpoint): the attempt's timeout
    /// and its log entry count from `now`, so the receiver has its whole
    /// 5 s and the log shows the receiver's latency, not the host's queue.
    /// Optional: without it an attempt counts as sent when polled. Ignored
    /// for an attempt not in flight, or a time before the poll.
    pub fn handle_sent(&mut self, now: Timestamp, attempt: u32) {
        let Phase::Round(r) = &mut self.phase else {
            return;
        };
        if let Some(slot) = r.in_flight.iter_mut().find(|s| s.attempt == Some(attempt)) {
            slot.sent_at = slot.sent_at.max(Some(now));
        }
    }

    /// Keeps the start of attempt `attempt`'s answer body in its log
    /// record, after [`Delivery::handle_response`] reported the attempt: at
    /// most [`ANSWER_LOG_BYTES`], cut at a character boundary, invalid
    /// UTF-8 replaced. An attempt not in the log is ignored.
    pub fn handle_answer(&mut self, attempt: u32, body: &[u8]) {
        let Some(record) = self.log.iter_mut().rev().find(|r| r.attempt == attempt) else {
            return;
        };
        let text = String::from_utf8_lossy(&body[..body.len().min(ANSWER_LOG_BYTES)]);
        let mut end = text.len().min(ANSWER_LOG_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        record.answer = Some(text[..end].to_owned());
    }

    /// Reports the outcome of attempt `attempt`. Answers to attempts not
    /// in flight (from an earlier round, or already timed out) are ignored.
    pub fn handle_response(&mut self, now: Timestamp, attempt: u32, outcome: Outcome) {
        let Phase::Round(r) = &mut self.phase else {
            return;
        };
        let Some(i) = r.in_flight.iter().position(|s| s.attempt == Some(attempt)) else {
            return;
        };
        let slot = r.in_flight.remove(i);
        let verdict = verdict_at(&self.settings, slot.endpoint, &outcome);
        self.log.push(AttemptRecord {
            attempt,
            round: self.round + 1,
            endpoint: slot.endpoint,
            sent_at: slot.sent_at.unwrap_or(now),
            ended_at: now,
            outcome: outcome.clone(),
            verdict,
            answer: None,
        });
        match verdict {
            Verdict::Success => {
                r.success.get_or_insert(DeliveryOutcome::Delivered {
                    endpoint: slot.endpoint,
                    attempt,
                    at: now,
                });
                // A success ends the delivery: nothing more goes out.
                r.pending.clear();
            }
            Verdict::Reject => self.rejected[slot.endpoint] = true,
            Verdict::Retry => {
                let wait = match &outcome {
                    Outcome::Response {
                        retry_after: Some(v),
                        ..
                    } => parse_retry_after(v, now),
                    Outcome::Held { until, .. } => {
                        Some(u64::try_from(until.millis_since(now)).unwrap_or(0))
                    }
                    _ => None,
                };
                self.round_retry_after = self.round_retry_after.max(wait);
            }
        }
        if !r.in_flight.is_empty() {
            return;
        }
        if let Some(success) = r.success.take() {
            return self.finish(success);
        }
        let window_end = self
            .first_sent
            .unwrap_or(now)
            .saturating_add_ms(self.config.retry_window_ms);
        if !r.pending.is_empty() {
            // Failover: the next endpoint of this round, straight away.
            if now > window_end {
                return self.give_up(GiveUpReason::WindowExhausted, outcome);
            }
            r.due = now;
            return;
        }
        if self.rejected.iter().all(|&r| r) {
            return self.give_up(GiveUpReason::AllEndpointsRejected, outcome);
        }
        self.round += 1;
        let backoff = self.config.backoff.equal_jitter(self.round, &mut self.rng);
        let delay = backoff.max(self.round_retry_after.take().unwrap_or(0));
        let at = now.saturating_add_ms(delay);
        if at > window_end {
            return self.give_up(GiveUpReason::WindowExhausted, outcome);
        }
        self.phase = Phase::Round(self.new_round(at));
    }

    /// Call when `now` reaches [`poll_timeout`](Self::poll_timeout).
    /// Requests unanswered past the timeout count as [`Outcome::Timeout`].
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let Phase::Round(r) = &self.phase else {
            return;
        };
        let timeout = self.config.timeout_ms;
        let expired: Vec<u32> = r
            .in_flight
            .iter()
            .filter(|s| {
                s.sent_at
                    .is_some_and(|t| now >= t.saturating_add_ms(timeout))
            })
            .filter_map(|s| s.attempt)
            .collect();
        for attempt in expired {
            self.handle_response(now, attempt, Outcome::Timeout);
        }
    }

    /// When to call [`poll_request`](Self::poll_request) or
    /// [`handle_timeout`](Self::handle_timeout) next, or `None` when done.
    /// Changes after every input.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let Phase::Round(r) = &self.phase else {
            return None;
        };
        let sendable =
            !r.pending.is_empty() && (self.mode == Mode::Parallel || r.in_flight.is_empty());
        let deadlines = r
            .in_flight
            .iter()
            .filter_map(|s| s.sent_at)
            .map(|t| t.saturating_add_ms(self.config.timeout_ms));
        deadlines.chain(sendable.then_some(r.due)).min()
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

    /// A round to every endpoint that has not rejected the call, due at `at`.
    fn new_round(&self, at: Timestamp) -> Round {
        Round {
            due: at,
            pending: (0..self.rejected.len())
                .filter(|&i| !self.rejected[i])
                .map(|endpoint| Slot {
                    endpoint,
                    attempt: None,
                    sent_at: None,
                })
                .collect(),
            in_flight: Vec::new(),
            success: None,
        }
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
