//! Receiver protection for one endpoint URL: a rate limit, a cap on
//! requests in flight, a pause after `429`/`503` with `Retry-After`, a
//! circuit breaker, and automatic disabling. Sans-IO like the rest of the
//! core: the host asks [`EndpointGuard::poll_permit`] before each request,
//! reports each answer with [`EndpointGuard::handle_outcome`], and keeps the
//! [`GuardState`] wherever it likes.
//!
//! Several senders (relays on one database) may post to one URL, each with
//! its own guard. They share the rate limit and the cap: each takes its
//! part ([`EndpointGuard::handle_senders`]), so together they stay within
//! the limits without asking a shared store before every request. Each
//! announces itself every [`SENDER_HEARTBEAT_MS`], counts those heard from
//! within [`SENDER_EXPIRY_MS`], and a sender that joins waits
//! [`SENDER_HEARTBEAT_MS`] before its first request, by which time every
//! other sender has counted it. The breaker and `Retry-After` stay each
//! sender's own: a dead receiver is probed by each, once per open period.
//!
//! The guard never changes a call's own schedule: each call keeps the
//! specs' 4-hour window and its backoff ([`crate::Delivery`]); the guard
//! only decides when the next request to this URL may leave.

use crate::code::Code;
use crate::retry::{parse_retry_after, Outcome, Verdict};
use crate::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Failures in a row (timeouts, connection errors, 5xx) that open the
/// circuit. Convoy, ngrok and Helidon judge a breaker over a minimum of 10
/// requests; requiring all 10 to fail (rather than Convoy's 70%) keeps a
/// flaky but working receiver from being cut off.
pub const DEFAULT_BREAKER_FAILURES: u32 = 10;

/// How long the circuit first stays open before one probe is let through:
/// Convoy's default error timeout and Portkey's minimum cooldown, 30 s.
pub const DEFAULT_BREAKER_OPEN_MS: u64 = 30_000;

/// The longest the circuit stays open: each failed probe doubles the time
/// up to this, so a receiver down for an hour gets about a dozen probes,
/// and one that comes back is found within 10 minutes.
pub const MAX_BREAKER_OPEN_MS: u64 = 600_000;

/// The period of failures after which an endpoint is disabled, when
/// automatic disabling is switched on (it is off by default): Svix disables
/// an endpoint that has failed for 5 days.
pub const DEFAULT_DISABLE_AFTER_MS: u64 = 5 * 24 * 3_600_000;

/// The shortest period automatic disabling accepts: one retry window (the
/// specs' 4 hours), so no call is given up on by disabling before its own
/// retries would have ended.
pub const MIN_DISABLE_AFTER_MS: u64 = crate::delivery::RETRY_WINDOW_MS;

/// The highest rate limit, in requests per second: the limiter spaces
/// requests in whole microseconds.
pub const MAX_RATE_PER_SECOND: u32 = 1_000_000;

/// How often each sender of one endpoint says it is sending: the relay's
/// 5-second status check, so it costs no extra wake-up.
pub const SENDER_HEARTBEAT_MS: u64 = 5_000;

/// A sender not heard from for this long no longer takes a part of the
/// limits: three heartbeats missed, so one slow database call does not
/// hand its part to the others.
pub const SENDER_EXPIRY_MS: u64 = 3 * SENDER_HEARTBEAT_MS;

/// How often senders sharing endpoints (relays on one database) exchange
/// their [`Hold`]s: a pause or an open circuit one of them decided reaches
/// the others within this, so a receiver that asked one sender to wait is
/// left alone by all of them a second later at most.
pub const HOLD_SYNC_MS: u64 = 1_000;

/// One endpoint URL's protections. Every one is optional; the default is
/// no rate limit, no cap, the breaker on with its defaults, and no
/// automatic disabling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProtectionConfig {
    /// Requests per second, at most, evenly spaced (no bursts: a receiver
    /// limited to N a second never sees more than N in any second). Shared
    /// by all senders, each taking a whole number a second; with fewer
    /// than there are senders, the average holds and any one second may
    /// see one request from each.
    pub rate_per_second: Option<u32>,
    /// Requests in flight at once, at most. Shared by all senders; each
    /// keeps at least one, so with fewer than there are senders the cap
    /// is the number of senders.
    pub max_in_flight: Option<u32>,
    /// Failures in a row that open the circuit; 0 switches the breaker off.
    pub breaker_failures: u32,
    /// How long the circuit first stays open, in milliseconds.
    pub breaker_open_ms: u64,
    /// Disable the endpoint after this long with no success, in
    /// milliseconds; `None` never does.
    pub disable_after_ms: Option<u64>,
}

impl Default for ProtectionConfig {
    fn default() -> Self {
        Self {
            rate_per_second: None,
            max_in_flight: None,
            breaker_failures: DEFAULT_BREAKER_FAILURES,
            breaker_open_ms: DEFAULT_BREAKER_OPEN_MS,
            disable_after_ms: None,
        }
    }
}

impl ProtectionConfig {
    /// Whether senders share a limit (a rate or a cap), and so need to
    /// count each other.
    pub fn is_shared(&self) -> bool {
        self.rate_per_second.is_some() || self.max_in_flight.is_some()
    }
}

/// Protection settings that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtectionError {
    /// A setting outside its range; the message gives the range.
    #[error("{field} must be {range}, not {value}")]
    OutOfRange {
        /// The setting.
        field: &'static str,
        /// What it was.
        value: u64,
        /// What it may be.
        range: &'static str,
    },
}

impl ProtectionError {
    /// Always [`Code::InvalidSettings`].
    pub fn code(&self) -> Code {
        Code::InvalidSettings
    }
}

impl ProtectionConfig {
    /// Checks every setting; the relay runs this on each change an operator
    /// makes.
    pub fn validate(&self) -> Result<(), ProtectionError> {
        let out = |field, value, range| {
            Err(ProtectionError::OutOfRange {
                field,
                value,
                range,
            })
        };
        if let Some(r) = self.rate_per_second {
            if r == 0 || r > MAX_RATE_PER_SECOND {
                return out("rate_per_second", r.into(), "1 to 1,000,000");
            }
        }
        if self.max_in_flight == Some(0) {
            return out("max_in_flight", 0, "at least 1");
        }
        if self.breaker_failures > 0
            && !(1_000..=MAX_BREAKER_OPEN_MS).contains(&self.breaker_open_ms)
        {
            return out("breaker_open_ms", self.breaker_open_ms, "1,000 to 600,000");
        }
        if let Some(d) = self.disable_after_ms {
            if d < MIN_DISABLE_AFTER_MS {
                return out("disable_after_ms", d, "at least 14,400,000 (4 hours)");
            }
        }
        Ok(())
    }
}

/// The circuit breaker's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Circuit {
    /// Requests flow.
    Closed,
    /// Nothing is sent until `until`; then one probe.
    Open {
        /// When the probe may go.
        until: Timestamp,
        /// How long it was opened for (the next opening doubles it).
        open_ms: u64,
    },
    /// One probe at a time; its answer closes or reopens the circuit.
    HalfOpen {
        /// A probe is in flight.
        probing: bool,
        /// How long the circuit was last open.
        open_ms: u64,
    },
}

/// Everything the guard remembers, for the host to store and restore
/// ([`EndpointGuard::restore`]). Times are the host's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardState {
    /// The earliest time the rate limit lets the next request go, in
    /// microseconds since the epoch.
    pub next_allowed_us: i64,
    /// Nothing is sent before this, after a `429` or `503` with `Retry-After`.
    pub paused_until: Option<Timestamp>,
    /// Requests sent and not yet answered.
    pub in_flight: u32,
    /// Failures in a row.
    pub failures: u32,
    /// The breaker.
    pub circuit: Circuit,
    /// The first answer that was not a success since the last success.
    pub failing_since: Option<Timestamp>,
    /// Disabled (automatically, or by the operator); only
    /// [`EndpointGuard::enable`] sends again.
    pub disabled: bool,
}

impl Default for GuardState {
    fn default() -> Self {
        Self {
            next_allowed_us: i64::MIN,
            paused_until: None,
            in_flight: 0,
            failures: 0,
            circuit: Circuit::Closed,
            failing_since: None,
            disabled: false,
        }
    }
}

/// What one sender holds back for an endpoint, to share with the others
/// that post to it (and to keep across a restart): a receiver's
/// `Retry-After` pause and an open circuit. The host stores it and hands
/// it to the other senders' guards ([`EndpointGuard::handle_hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// Nothing is sent before this.
    pub paused_until: Option<Timestamp>,
    /// The circuit is open until this: one probe then.
    pub open_until: Option<Timestamp>,
    /// How long that circuit was opened for (a failed probe doubles it).
    pub open_ms: u64,
}

impl Hold {
    /// Whether it holds back anything `other` does not: a later pause or a
    /// later open circuit.
    pub fn outlasts(&self, other: Option<&Self>) -> bool {
        let later =
            |a: Option<Timestamp>, b: Option<Timestamp>| a.is_some_and(|a| b.is_none_or(|b| a > b));
        match other {
            None => self.paused_until.is_some() || self.open_until.is_some(),
            Some(o) => {
                later(self.paused_until, o.paused_until) || later(self.open_until, o.open_until)
            }
        }
    }

    /// The later of each part of the two.
    #[must_use]
    pub fn merge(self, other: Option<&Self>) -> Self {
        let Some(o) = other else {
            return self;
        };
        let open = if self.open_until >= o.open_until {
            self
        } else {
            *o
        };
        Self {
            paused_until: self.paused_until.max(o.paused_until),
            open_until: open.open_until,
            open_ms: open.open_ms,
        }
    }
}

/// What the endpoint looks like to an operator: `/admin/status`, metrics
/// and the log show this, and each change is a [`GuardEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EndpointState {
    /// Requests flow (within the rate limit and cap).
    Healthy,
    /// Paused by the receiver's `Retry-After`.
    Slowed {
        /// Until when.
        until: Timestamp,
    },
    /// The circuit is open.
    CircuitOpen {
        /// When a probe goes.
        until: Timestamp,
    },
    /// The circuit is half open: one probe at a time.
    Probing,
    /// Disabled: nothing is sent until the endpoint is enabled.
    Disabled,
}

impl EndpointState {
    /// Stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Slowed { .. } => "slowed",
            Self::CircuitOpen { .. } => "circuit_open",
            Self::Probing => "probing",
            Self::Disabled => "disabled",
        }
    }
}

/// The endpoint's state changed at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardEvent {
    /// When.
    pub at: Timestamp,
    /// The state before.
    pub from: EndpointState,
    /// The state now.
    pub to: EndpointState,
}

/// Whether a request may go to the endpoint now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Send it: a slot is taken; report its answer with
    /// [`EndpointGuard::handle_outcome`], or [`EndpointGuard::handle_unsent`]
    /// if it never leaves.
    Send,
    /// Ask again at this time (rate limit, pause, or open circuit).
    WaitUntil(Timestamp),
    /// Ask again after an answer frees a slot (the cap, or a probe in
    /// flight).
    WaitForAnswer,
    /// The endpoint is disabled.
    Disabled,
}

/// One endpoint URL's protections and what they remember.
#[derive(Debug, Clone)]
pub struct EndpointGuard {
    config: ProtectionConfig,
    /// Senders sharing the limits, this one included (at least 1).
    senders: u32,
    state: GuardState,
    /// The state last reported as an event.
    shown: EndpointState,
    events: VecDeque<GuardEvent>,
}

impl EndpointGuard {
    /// A guard with nothing remembered.
    pub fn new(config: ProtectionConfig, now: Timestamp) -> Result<Self, ProtectionError> {
        Self::restore(config, GuardState::default(), now)
    }

    /// A guard continuing from a stored state, under `config` (which may
    /// have changed since; a breaker switched off closes the circuit).
    pub fn restore(
        config: ProtectionConfig,
        mut state: GuardState,
        now: Timestamp,
    ) -> Result<Self, ProtectionError> {
        config.validate()?;
        if config.breaker_failures == 0 {
            state.circuit = Circuit::Closed;
        }
        let mut g = Self {
            config,
            senders: 1,
            state,
            shown: EndpointState::Healthy,
            events: VecDeque::new(),
        };
        g.shown = g.endpoint_state(now);
        Ok(g)
    }

    /// The settings in force.
    pub fn config(&self) -> &ProtectionConfig {
        &self.config
    }

    /// `senders` senders (this one included) now share the rate limit and
    /// the cap: this guard takes `1/senders` of each. Requests already in
    /// flight stay; the next permits follow the new part.
    pub fn handle_senders(&mut self, senders: u32) {
        self.senders = senders.max(1);
    }

    /// This sender's part of the cap on requests in flight, if there is one.
    pub fn own_max_in_flight(&self) -> Option<u32> {
        self.config.max_in_flight.map(|m| (m / self.senders).max(1))
    }

    /// This sender's spacing between requests under the rate limit, in
    /// microseconds, rounded up. Each takes a whole number of requests a
    /// second, `rate / senders` rounded down: a fraction would let each
    /// sender put one more request into some second (at 7/s over three
    /// senders, 2.33/s each gives 3 in the first second, 9 together). With
    /// fewer requests a second than senders, each sends one every
    /// `senders / rate` seconds: the average holds, though the senders'
    /// requests may fall in one second.
    fn own_interval_us(&self, rate: u32) -> i64 {
        let own = rate / self.senders;
        let us = if own > 0 {
            1_000_000_u64.div_ceil(u64::from(own))
        } else {
            (1_000_000_u64 * u64::from(self.senders)).div_ceil(u64::from(rate))
        };
        i64::try_from(us).unwrap_or(i64::MAX)
    }

    /// What to store. Changes after every input.
    pub fn state(&self) -> &GuardState {
        &self.state
    }

    /// The endpoint's state at `now`.
    pub fn endpoint_state(&self, now: Timestamp) -> EndpointState {
        let s = &self.state;
        if s.disabled {
            return EndpointState::Disabled;
        }
        match s.circuit {
            Circuit::Open { until, .. } if now < until => {
                return EndpointState::CircuitOpen { until }
            }
            Circuit::Open { .. } | Circuit::HalfOpen { .. } => return EndpointState::Probing,
            Circuit::Closed => {}
        }
        match s.paused_until {
            Some(until) if now < until => EndpointState::Slowed { until },
            _ => EndpointState::Healthy,
        }
    }

    /// Whether a request may leave now; [`Permit::Send`] takes a slot.
    #[must_use]
    pub fn poll_permit(&mut self, now: Timestamp) -> Permit {
        self.handle_timeout(now);
        let cap = self.own_max_in_flight();
        let interval = self.config.rate_per_second.map(|r| self.own_interval_us(r));
        let s = &mut self.state;
        if s.disabled {
            return Permit::Disabled;
        }
        match s.circuit {
            Circuit::Open { until, .. } => return Permit::WaitUntil(until),
            Circuit::HalfOpen { probing: true, .. } => return Permit::WaitForAnswer,
            Circuit::HalfOpen { .. } | Circuit::Closed => {}
        }
        if let Some(until) = s.paused_until.filter(|u| now < *u) {
            return Permit::WaitUntil(until);
        }
        if cap.is_some_and(|m| s.in_flight >= m) {
            return Permit::WaitForAnswer;
        }
        let now_us = now.as_millis().saturating_mul(1000);
        if now_us < s.next_allowed_us {
            // Rounded up to the next millisecond: asking earlier would be
            // refused again.
            let ms = s.next_allowed_us.div_euclid(1000)
                + i64::from(s.next_allowed_us.rem_euclid(1000) != 0);
            return Permit::WaitUntil(Timestamp::saturating_from_millis(ms));
        }
        if let Some(interval) = interval {
            // A host on a millisecond clock comes back up to 1 ms after the
            // time it was given; counting from that time, not from its
            // arrival, keeps the rate from drifting below the limit. Later
            // than that, the schedule starts again from now: no catching up
            // in a burst.
            let late = now_us.saturating_sub(s.next_allowed_us);
            let from = if (0..1000).contains(&late) {
                s.next_allowed_us
            } else {
                now_us
            };
            s.next_allowed_us = from.saturating_add(interval);
        }
        if let Circuit::HalfOpen { open_ms, .. } = s.circuit {
            s.circuit = Circuit::HalfOpen {
                probing: true,
                open_ms,
            };
        }
        s.in_flight += 1;
        Permit::Send
    }

    /// A request given [`Permit::Send`] was answered (or timed out, or
    /// failed to connect).
    pub fn handle_outcome(&mut self, now: Timestamp, outcome: &Outcome) {
        let s = &mut self.state;
        s.in_flight = s.in_flight.saturating_sub(1);
        if let Outcome::Response {
            status: 429 | 503,
            retry_after: Some(v),
        } = outcome
        {
            if let Some(ms) = parse_retry_after(v, now).filter(|ms| *ms > 0) {
                let until = now.saturating_add_ms(ms);
                s.paused_until = Some(s.paused_until.map_or(until, |p| p.max(until)));
            }
        }
        let slow_down = matches!(outcome, Outcome::Response { status: 429, .. });
        match outcome.verdict() {
            Verdict::Success => {
                s.failures = 0;
                s.failing_since = None;
                s.circuit = Circuit::Closed;
            }
            // "Slow down" comes from a receiver that is up: the pause
            // above is the answer to it, not the breaker.
            Verdict::Retry if slow_down => {
                s.failing_since.get_or_insert(now);
                if let Circuit::HalfOpen { open_ms, .. } = s.circuit {
                    s.circuit = Circuit::HalfOpen {
                        probing: false,
                        open_ms,
                    };
                }
            }
            Verdict::Retry => {
                s.failures = s.failures.saturating_add(1);
                s.failing_since.get_or_insert(now);
                let threshold = self.config.breaker_failures;
                s.circuit = match s.circuit {
                    Circuit::HalfOpen { open_ms, .. } => {
                        let open_ms = open_ms.saturating_mul(2).min(MAX_BREAKER_OPEN_MS);
                        Circuit::Open {
                            until: now.saturating_add_ms(open_ms),
                            open_ms,
                        }
                    }
                    Circuit::Closed if threshold > 0 && s.failures >= threshold => {
                        let open_ms = self.config.breaker_open_ms;
                        Circuit::Open {
                            until: now.saturating_add_ms(open_ms),
                            open_ms,
                        }
                    }
                    other => other,
                };
            }
            // A refusal (4xx, a TLS failure) ends each call at once, so it
            // floods nobody; it closes a probing circuit (the receiver
            // answered) but is no success for automatic disabling.
            Verdict::Reject => {
                s.failures = 0;
                s.failing_since.get_or_insert(now);
                if let Circuit::HalfOpen { .. } = s.circuit {
                    s.circuit = Circuit::Closed;
                }
            }
        }
        if let (Some(after), Some(since)) = (self.config.disable_after_ms, s.failing_since) {
            if now.millis_since(since) >= i64::try_from(after).unwrap_or(i64::MAX) {
                s.disabled = true;
            }
        }
        self.note(now);
    }

    /// A request given [`Permit::Send`] never left (the call was settled
    /// otherwise, or the host stopped): its slot is freed, and a probe may
    /// go again.
    pub fn handle_unsent(&mut self, now: Timestamp) {
        let s = &mut self.state;
        s.in_flight = s.in_flight.saturating_sub(1);
        if let Circuit::HalfOpen { open_ms, .. } = s.circuit {
            s.circuit = Circuit::HalfOpen {
                probing: false,
                open_ms,
            };
        }
        self.note(now);
    }

    /// Moves the state on with time (an open circuit lets a probe through,
    /// a pause ends).
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let s = &mut self.state;
        if let Circuit::Open { until, open_ms } = s.circuit {
            if now >= until {
                s.circuit = Circuit::HalfOpen {
                    probing: false,
                    open_ms,
                };
            }
        }
        if s.paused_until.is_some_and(|u| now >= u) {
            s.paused_until = None;
        }
        self.note(now);
    }

    /// The operator enables the endpoint again: everything it remembered
    /// of failures is forgotten.
    pub fn enable(&mut self, now: Timestamp) {
        let in_flight = self.state.in_flight;
        self.state = GuardState {
            in_flight,
            ..GuardState::default()
        };
        self.note(now);
    }

    /// The operator disables the endpoint.
    pub fn disable(&mut self, now: Timestamp) {
        self.state.disabled = true;
        self.note(now);
    }

    /// What this guard holds back at `now`, to share with the other
    /// senders: its pause and its open circuit, or `None`.
    #[must_use]
    pub fn hold(&self, now: Timestamp) -> Option<Hold> {
        let s = &self.state;
        let paused_until = s.paused_until.filter(|u| *u > now);
        let (open_until, open_ms) = match s.circuit {
            Circuit::Open { until, open_ms } if until > now => (Some(until), open_ms),
            _ => (None, 0),
        };
        (paused_until.is_some() || open_until.is_some()).then_some(Hold {
            paused_until,
            open_until,
            open_ms,
        })
    }

    /// Another sender's [`Hold`] on this endpoint (or this one's, kept
    /// across a restart). Its pause is taken as if this guard had been
    /// answered the `Retry-After`. Its open circuit opens this one until
    /// the same time unless this one is probing (the probe's answer
    /// decides) or already open longer: when it ends each sender probes
    /// once, instead of every sender but one sending every due call to a
    /// receiver that is down.
    pub fn handle_hold(&mut self, now: Timestamp, hold: &Hold) {
        let s = &mut self.state;
        if s.disabled {
            return;
        }
        if let Some(until) = hold.paused_until.filter(|u| *u > now) {
            s.paused_until = Some(s.paused_until.map_or(until, |p| p.max(until)));
        }
        if let Some(until) = hold.open_until.filter(|u| *u > now) {
            let open = Circuit::Open {
                until,
                open_ms: hold.open_ms,
            };
            s.circuit = match s.circuit {
                Circuit::Closed | Circuit::HalfOpen { probing: false, .. } => open,
                Circuit::Open { until: mine, .. } if mine < until => open,
                other => other,
            };
        }
        self.note(now);
    }

    /// When the state next changes by time alone (a circuit's probe, a
    /// pause's end), or `None`. Changes after every input.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let open = match self.state.circuit {
            Circuit::Open { until, .. } => Some(until),
            _ => None,
        };
        open.into_iter().chain(self.state.paused_until).min()
    }

    /// The next change of the endpoint's state, or `None`. Changes after
    /// every input.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<GuardEvent> {
        self.events.pop_front()
    }

    fn note(&mut self, now: Timestamp) {
        let state = self.endpoint_state(now);
        if state != self.shown {
            self.events.push_back(GuardEvent {
                at: now,
                from: self.shown,
                to: state,
            });
            self.shown = state;
        }
    }
}
