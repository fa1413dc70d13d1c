//! A [`Delivery`]'s saved state, as JSON text, and the public JSON shapes
//! of its log and outcome.
//!
//! Written by hand over the core's own [`Value`] rather than with
//! serde_json: the format stays under our control (versioned, with 64-bit
//! integers as strings so JavaScript readers keep every digit), restoring
//! checks the invariants the state machine indexes by, and serde_json's
//! deserializer was a quarter of the wasm module for this one feature.
//!
//! Format 2 adds the mode and the round in flight: the endpoints still to
//! send to, and those awaiting an answer. Format 1 (one request at a time,
//! always in failover order) still restores, as a failover delivery.

use super::{
    AttemptRecord, Delivery, DeliveryConfig, DeliveryOutcome, GiveUpReason, Phase, Round, Slot,
};
use crate::code::Code;
use crate::json::{KeyCase, Map, Value};
use crate::retry::{Backoff, Jitter, Outcome};
use crate::timestamp::Timestamp;
use crate::webhooks::{Mode, Webhooks};
use std::collections::VecDeque;

/// The format version written in `"version"`. Restoring reads this one and
/// format 1; anything else fails.
pub const STATE_VERSION: u32 = 2;

/// A saved delivery state that cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a saved delivery state: {0}")]
pub struct StateError(String);

impl StateError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        Code::InvalidState
    }
}

pub(crate) fn bad(what: impl Into<String>) -> StateError {
    StateError(what.into())
}

/// Integers up to 2^53 as numbers; larger ones (jitter seeds) as decimal
/// strings, which no JSON reader rounds.
fn int(n: impl Into<i128>) -> Value {
    let n = n.into();
    if n.unsigned_abs() <= 1 << 53 {
        Value::Number(n as f64)
    } else {
        Value::String(n.to_string())
    }
}

fn time(t: Timestamp) -> Value {
    int(t.as_millis())
}

fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

fn opt(v: Option<Value>) -> Value {
    v.unwrap_or(Value::Null)
}

struct Fields<'a>(&'a Map, &'static str);

impl<'a> Fields<'a> {
    fn of(v: &'a Value, what: &'static str) -> Result<Self, StateError> {
        v.as_object()
            .map(|m| Fields(m, what))
            .ok_or_else(|| bad(format!("{what} is not an object")))
    }

    fn get(&self, k: &str) -> Result<&'a Value, StateError> {
        self.0
            .get(k)
            .ok_or_else(|| bad(format!("{}.{k} is missing", self.1)))
    }

    fn opt(&self, k: &str) -> Option<&'a Value> {
        self.0.get(k).filter(|v| **v != Value::Null)
    }

    fn int<T: TryFrom<i128>>(&self, k: &str) -> Result<T, StateError> {
        self.opt_int(k)?
            .ok_or_else(|| bad(format!("{}.{k} is missing", self.1)))
    }

    fn opt_int<T: TryFrom<i128>>(&self, k: &str) -> Result<Option<T>, StateError> {
        let Some(v) = self.opt(k) else {
            return Ok(None);
        };
        let n = match v {
            Value::Number(f) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => {
                Some(*f as i128)
            }
            Value::String(s) => s.parse::<i128>().ok(),
            _ => None,
        };
        n.and_then(|n| T::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| bad(format!("{}.{k} is not an integer in range", self.1)))
    }

    fn time(&self, k: &str) -> Result<Timestamp, StateError> {
        self.opt_time(k)?
            .ok_or_else(|| bad(format!("{}.{k} is missing", self.1)))
    }

    fn opt_time(&self, k: &str) -> Result<Option<Timestamp>, StateError> {
        self.opt_int::<i64>(k)?
            .map(|ms| {
                Timestamp::from_millis(ms)
                    .map_err(|_| bad(format!("{}.{k} is not a time in range", self.1)))
            })
            .transpose()
    }

    fn str(&self, k: &str) -> Result<&'a str, StateError> {
        self.get(k)?
            .as_str()
            .ok_or_else(|| bad(format!("{}.{k} is not a string", self.1)))
    }

    fn opt_str(&self, k: &str) -> Result<Option<&'a str>, StateError> {
        self.opt(k).map(|_| self.str(k)).transpose()
    }

    fn bool(&self, k: &str) -> Result<bool, StateError> {
        match self.get(k)? {
            Value::Bool(b) => Ok(*b),
            _ => Err(bad(format!("{}.{k} is not a boolean", self.1))),
        }
    }

    fn array(&self, k: &str) -> Result<&'a [Value], StateError> {
        match self.get(k)? {
            Value::Array(items) => Ok(items),
            _ => Err(bad(format!("{}.{k} is not an array", self.1))),
        }
    }

    fn kind(&self) -> Result<&'a str, StateError> {
        self.str("kind")
    }

    fn unknown(&self, k: &str) -> StateError {
        bad(format!("{}.{k} has an unknown value", self.1))
    }
}

fn outcome_value(o: &Outcome) -> Value {
    match o {
        Outcome::Response {
            status,
            retry_after,
        } => {
            let mut o = object([("kind", "response".into()), ("status", int(*status))]);
            // Absent rather than null, as the public shape has it.
            if let (Value::Object(m), Some(r)) = (&mut o, retry_after) {
                m.insert("retry_after".into(), r.as_str().into());
            }
            o
        }
        Outcome::Timeout => object([("kind", "timeout".into())]),
        Outcome::Connection { message } => object([
            ("kind", "connection".into()),
            ("message", message.as_str().into()),
        ]),
        Outcome::Tls { message } => {
            object([("kind", "tls".into()), ("message", message.as_str().into())])
        }
        Outcome::Token { message } => object([
            ("kind", "token".into()),
            ("message", message.as_str().into()),
        ]),
        Outcome::Held { until, reason } => object([
            ("kind", "held".into()),
            ("until", time(*until)),
            ("reason", reason.as_str().into()),
        ]),
    }
}

/// Through [`Outcome::from_report`], the one reading of outcome kinds.
fn outcome_of(v: &Value) -> Result<Outcome, StateError> {
    let f = Fields::of(v, "outcome")?;
    let kind = f.kind()?;
    // Not a report of an HTTP client: the host's own decision.
    if kind == "held" {
        return Ok(Outcome::Held {
            until: f.time("until")?,
            reason: f.str("reason")?.to_owned(),
        });
    }
    let status = if kind == "response" {
        Some(f.int("status")?)
    } else {
        None
    };
    Outcome::from_report(
        status,
        f.opt_str("retry_after")?.map(str::to_owned),
        status.is_none().then_some(kind),
        f.opt_str("message")?.unwrap_or_default(),
    )
    .map_err(|_| f.unknown("kind"))
}

fn record_value(r: &AttemptRecord) -> Value {
    let mut v = object([
        ("attempt", int(r.attempt)),
        ("round", int(r.round)),
        ("endpoint", int(r.endpoint as u64)),
        ("sent_at", time(r.sent_at)),
        ("ended_at", time(r.ended_at)),
        ("outcome", outcome_value(&r.outcome)),
    ]);
    // Only when the host reported it, so a log without answers keeps the
    // form it has always had.
    if let (Some(answer), Value::Object(m)) = (&r.answer, &mut v) {
        m.insert("answer".into(), answer.as_str().into());
    }
    v
}

fn record_of(v: &Value) -> Result<AttemptRecord, StateError> {
    let f = Fields::of(v, "log entry")?;
    let outcome = outcome_of(f.get("outcome")?)?;
    Ok(AttemptRecord {
        attempt: f.int("attempt")?,
        // Format 1 had no rounds; its readers saw none.
        round: f.opt_int("round")?.unwrap_or(0),
        endpoint: f.int("endpoint")?,
        sent_at: f.time("sent_at")?,
        ended_at: f.time("ended_at")?,
        // Not saved: the verdict is always what the outcome means (at its
        // endpoint: `from_json` reads it again with the settings).
        verdict: outcome.verdict(),
        outcome,
        answer: f.opt_str("answer")?.map(str::to_owned),
    })
}

/// A log record as users see it: the saved form plus its verdict.
fn public_record_value(r: &AttemptRecord) -> Value {
    let mut v = record_value(r);
    if let Value::Object(m) = &mut v {
        m.insert("verdict".into(), r.verdict.code().into());
    }
    v
}

fn final_value(o: &DeliveryOutcome) -> Value {
    match o {
        DeliveryOutcome::Delivered {
            endpoint,
            attempt,
            at,
        } => object([
            ("kind", "delivered".into()),
            ("endpoint", int(*endpoint as u64)),
            ("attempt", int(*attempt)),
            ("at", time(*at)),
        ]),
        DeliveryOutcome::GaveUp {
            reason,
            attempts,
            last,
        } => object([
            ("kind", "gave_up".into()),
            ("reason", reason.code().as_str().into()),
            ("attempts", int(*attempts)),
            ("last", opt(last.as_ref().map(outcome_value))),
        ]),
        DeliveryOutcome::Disabled => object([("kind", "disabled".into())]),
        DeliveryOutcome::Filtered { rule } => {
            object([("kind", "filtered".into()), ("rule", int(u64::from(*rule)))])
        }
    }
}

fn final_of(v: &Value) -> Result<DeliveryOutcome, StateError> {
    let f = Fields::of(v, "final outcome")?;
    Ok(match f.kind()? {
        "delivered" => DeliveryOutcome::Delivered {
            endpoint: f.int("endpoint")?,
            attempt: f.int("attempt")?,
            at: f.time("at")?,
        },
        "gave_up" => DeliveryOutcome::GaveUp {
            reason: {
                let code = f.str("reason")?;
                [
                    GiveUpReason::WindowExhausted,
                    GiveUpReason::AllEndpointsRejected,
                ]
                .into_iter()
                .find(|r| r.code() == code)
                .ok_or_else(|| f.unknown("reason"))?
            },
            attempts: f.int("attempts")?,
            last: f.opt("last").map(outcome_of).transpose()?,
        },
        "disabled" => DeliveryOutcome::Disabled,
        "filtered" => DeliveryOutcome::Filtered {
            rule: f.int("rule")?,
        },
        _ => return Err(f.unknown("kind")),
    })
}

/// `JSON.stringify` of a value the core built (finite numbers, shallow):
/// writing cannot fail.
fn text(v: &Value) -> String {
    v.to_json_string().unwrap_or_default()
}

impl DeliveryOutcome {
    /// The outcome as JSON text, with a `kind` tag and keys in `case`: the
    /// shape the bindings hand to users (the serde derive writes the same
    /// in snake_case; a test holds the two equal). Bindings parse this
    /// instead of each mapping the enum.
    pub fn to_json(&self, case: KeyCase) -> String {
        text(&case.apply(final_value(self)))
    }
}

fn slot_value(s: &Slot) -> Value {
    object([
        ("endpoint", int(s.endpoint as u64)),
        ("attempt", opt(s.attempt.map(int))),
        ("sent_at", opt(s.sent_at.map(time))),
    ])
}

fn slot_of(v: &Value) -> Result<Slot, StateError> {
    let f = Fields::of(v, "slot")?;
    Ok(Slot {
        endpoint: f.int("endpoint")?,
        attempt: f.opt_int("attempt")?,
        sent_at: f.opt_time("sent_at")?,
    })
}

fn phase_value(p: &Phase) -> Value {
    match p {
        Phase::Round(r) => object([
            ("kind", "round".into()),
            ("due", time(r.due)),
            (
                "pending",
                Value::Array(r.pending.iter().map(slot_value).collect()),
            ),
            (
                "in_flight",
                Value::Array(r.in_flight.iter().map(slot_value).collect()),
            ),
            ("success", opt(r.success.as_ref().map(final_value))),
        ]),
        Phase::Done => object([("kind", "done".into())]),
    }
}

/// A round as saved in format 2. Requests that were in flight got no answer
/// this process will ever see: they go back to the front of the round's
/// pending requests, keeping their attempt numbers, and are sent again at
/// once (with the same `Idempotency-Key`). The rest of the round is as it
/// was.
fn phase_of(v: &Value) -> Result<Phase, StateError> {
    let f = Fields::of(v, "phase")?;
    Ok(match f.kind()? {
        "round" => {
            let mut pending = f
                .array("pending")?
                .iter()
                .map(slot_of)
                .collect::<Result<VecDeque<_>, _>>()?;
            let in_flight = f
                .array("in_flight")?
                .iter()
                .map(slot_of)
                .collect::<Result<Vec<_>, _>>()?;
            let mut due = f.time("due")?;
            for mut s in in_flight.into_iter().rev() {
                if s.attempt.is_none() {
                    return Err(bad("an in-flight request has no attempt number"));
                }
                due = due.min(s.sent_at.unwrap_or(due));
                s.sent_at = None;
                pending.push_front(s);
            }
            Phase::Round(Round {
                due,
                pending,
                in_flight: Vec::new(),
                success: f.opt("success").map(final_of).transpose()?,
            })
        }
        "done" => Phase::Done,
        _ => return Err(f.unknown("kind")),
    })
}

/// Format 1's phase: the next request goes to endpoint `cursor` (at `at`,
/// or again at once if it was in flight), then on through the later
/// endpoints that have not rejected the call: a failover round.
fn phase_of_v1(f: &Fields<'_>, rejected: &[bool], attempts: u32) -> Result<Phase, StateError> {
    let p = Fields::of(f.get("phase")?, "phase")?;
    let cursor: usize = f.int("cursor")?;
    let (due, first_attempt) = match p.kind()? {
        "waiting" => (p.time("at")?, None),
        "in_flight" => (p.time("sent_at")?, Some(attempts)),
        "done" => return Ok(Phase::Done),
        _ => return Err(p.unknown("kind")),
    };
    if cursor >= rejected.len() {
        return Err(bad("endpoint index out of range"));
    }
    let pending = (cursor..rejected.len())
        .filter(|&i| i == cursor || !rejected[i])
        .map(|endpoint| Slot {
            endpoint,
            attempt: if endpoint == cursor {
                first_attempt
            } else {
                None
            },
            sent_at: None,
        })
        .collect();
    Ok(Phase::Round(Round {
        due,
        pending,
        in_flight: Vec::new(),
        success: None,
    }))
}

impl Delivery {
    /// The whole state as JSON text, to store and resume with
    /// [`Delivery::from_json`]. It holds the signed body (customer data),
    /// but never the secret or the endpoints' settings: the same
    /// [`Webhooks`] are passed when restoring.
    pub fn to_json(&self) -> String {
        let c = &self.config;
        text(&object([
            ("version", int(STATE_VERSION)),
            ("mode", self.mode.as_str().into()),
            (
                "message_id",
                opt(self.message_id.as_deref().map(Value::from)),
            ),
            ("body", self.body.as_str().into()),
            (
                "urls",
                opt(self
                    .urls
                    .as_ref()
                    .map(|u| Value::Array(u.iter().map(|s| Value::from(s.as_str())).collect()))),
            ),
            (
                "rejected",
                Value::Array(self.rejected.iter().map(|b| Value::Bool(*b)).collect()),
            ),
            ("round", int(self.round)),
            ("round_retry_after", opt(self.round_retry_after.map(int))),
            ("phase", phase_value(&self.phase)),
            ("first_sent", opt(self.first_sent.map(time))),
            ("attempts", int(self.attempts)),
            (
                "log",
                Value::Array(self.log.iter().map(record_value).collect()),
            ),
            ("outcome", opt(self.outcome.as_ref().map(final_value))),
            ("outcome_taken", Value::Bool(self.outcome_taken)),
            (
                "config",
                object([
                    ("timeout_ms", int(c.timeout_ms)),
                    ("retry_window_ms", int(c.retry_window_ms)),
                    ("backoff_base_ms", int(c.backoff.base_ms)),
                    ("backoff_cap_ms", int(c.backoff.cap_ms)),
                    ("jitter_seed", int(c.jitter_seed)),
                ]),
            ),
            ("jitter_state", int(self.rng.state())),
        ]))
    }

    /// The attempt log as a JSON array, each record in the shape of
    /// [`AttemptRecord`] (with its `verdict`), keys in `case`.
    pub fn log_json(&self, case: KeyCase) -> String {
        text(&case.apply(Value::Array(
            self.log.iter().map(public_record_value).collect(),
        )))
    }

    /// The message id a state saved with [`Delivery::to_json`] delivers
    /// (a call's `messageId`, or a batch's id), read without restoring it:
    /// a host finds the calls that share a batch's state by it. `None` for
    /// text that is not such a state or has none.
    pub fn saved_message_id(text: &str) -> Option<String> {
        let root = Value::from_json_str(text).ok()?;
        root.as_object()?
            .get("message_id")?
            .as_str()
            .map(str::to_owned)
    }

    /// Restores a state saved with [`Delivery::to_json`] (this format or
    /// format 1), checking that it is complete, self-consistent, and saved
    /// for as many endpoints as `settings` has. Requests that were in
    /// flight when it was saved are sent again by the next
    /// [`poll_request`](Delivery::poll_request), with their attempt numbers
    /// and the same `Idempotency-Key`: their answers were lost with the
    /// process that sent them.
    pub fn from_json(text: &str, settings: &Webhooks) -> Result<Self, StateError> {
        let root = Value::from_json_str(text).map_err(|e| bad(e.to_string()))?;
        let f = Fields::of(&root, "state")?;
        let version: u32 = f.int("version")?;
        if version != STATE_VERSION && version != 1 {
            return Err(bad(format!(
                "version {version} is not 1 or {STATE_VERSION}"
            )));
        }
        let rejected = f
            .array("rejected")?
            .iter()
            .map(|v| match v {
                Value::Bool(b) => Ok(*b),
                _ => Err(bad("state.rejected holds a non-boolean")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let endpoints = settings.endpoints().len();
        if rejected.len() != endpoints {
            return Err(bad(format!(
                "saved for {} endpoints, but the settings have {endpoints}",
                rejected.len()
            )));
        }
        let mut log: Vec<AttemptRecord> = f
            .array("log")?
            .iter()
            .map(record_of)
            .collect::<Result<_, _>>()?;
        for r in &mut log {
            r.verdict = super::verdict_at(settings, r.endpoint, &r.outcome);
        }
        let cf = Fields::of(f.get("config")?, "config")?;
        let config = DeliveryConfig {
            timeout_ms: cf.int("timeout_ms")?,
            retry_window_ms: cf.int("retry_window_ms")?,
            backoff: Backoff {
                base_ms: cf.int("backoff_base_ms")?,
                cap_ms: cf.int("backoff_cap_ms")?,
            },
            jitter_seed: cf.int("jitter_seed")?,
        };
        let attempts = f.int("attempts")?;
        let (mode, phase) = if version == 1 {
            (Mode::Failover, phase_of_v1(&f, &rejected, attempts)?)
        } else {
            let mode = Mode::parse(f.str("mode")?).ok_or_else(|| f.unknown("mode"))?;
            (mode, phase_of(f.get("phase")?)?)
        };
        if let Phase::Round(r) = &phase {
            // The state machine indexes `rejected` by these.
            if r.pending.iter().any(|s| s.endpoint >= endpoints) {
                return Err(bad("endpoint index out of range"));
            }
        }
        // A URL template's URLs were made from the call, which the state
        // does not keep: they are saved, and needed when the settings have
        // a template.
        let urls = match f.opt("urls") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .filter(|u| u.len() == endpoints)
                    .ok_or_else(|| bad("state.urls is not one URL per endpoint"))?,
            ),
            Some(_) => return Err(bad("state.urls is not a list")),
        };
        if urls.is_none() && settings.is_templated() {
            return Err(bad(
                "the settings' URL takes values from the call, and the state has no urls",
            ));
        }
        Ok(Self {
            urls,
            settings: settings.clone(),
            mode,
            message_id: f.opt_str("message_id")?.map(str::to_owned),
            body: f.str("body")?.to_owned(),
            rejected,
            round: f.int("round")?,
            round_retry_after: f.opt_int("round_retry_after")?,
            phase,
            first_sent: f.opt_time("first_sent")?,
            attempts,
            log,
            outcome: f.opt("outcome").map(final_of).transpose()?,
            outcome_taken: f.bool("outcome_taken")?,
            config,
            rng: Jitter::from_state(f.int("jitter_state")?),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::delivery::ANSWER_LOG_BYTES;
    use crate::{Call, EndpointConfig, Outcome, Webhooks};

    fn hooks(mode: Mode) -> Webhooks {
        Webhooks::with_mode(
            &[
                EndpointConfig::new("https://a.example/h"),
                EndpointConfig::new("https://b.example/h"),
            ],
            Some(b"s3cret"),
            mode,
        )
        .unwrap()
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms).unwrap()
    }

    /// A failover delivery whose first endpoint answered 503 and whose
    /// second is in flight.
    fn delivery(seed: u64) -> Delivery {
        let call =
            Call::from_json_str(r#"{"type":"track","userId":"u","event":"e","messageId":"m"}"#)
                .unwrap();
        let mut d = Delivery::new(
            &hooks(Mode::Failover),
            &call,
            at(1_000),
            DeliveryConfig::new(seed),
        )
        .unwrap();
        let a = d.poll_request(at(1_000)).unwrap();
        d.handle_response(
            at(1_200),
            a.attempt,
            Outcome::Response {
                status: 503,
                retry_after: Some("7".into()),
            },
        );
        let _ = d.poll_request(at(1_200)).unwrap();
        d
    }

    #[test]
    fn an_answer_is_kept_cut_at_its_limit_and_saved() {
        let mut d = delivery(1);
        // A 3-byte character across the limit is left out whole.
        let mut body = "a".repeat(ANSWER_LOG_BYTES - 1).into_bytes();
        body.extend_from_slice("€ and more".as_bytes());
        d.handle_answer(1, &body);
        d.handle_answer(9, b"not an attempt in the log");
        let kept = d.log()[0].answer.clone().unwrap();
        assert_eq!(kept, "a".repeat(ANSWER_LOG_BYTES - 1));
        let back = Delivery::from_json(&d.to_json(), &hooks(Mode::Failover)).unwrap();
        assert_eq!(back.log()[0].answer.as_deref(), Some(kept.as_str()));
        assert!(d.log_json(KeyCase::Snake).contains(r#""answer":"aaa"#));
        d.handle_answer(1, b"\xff{\"id\":1}");
        assert_eq!(d.log()[0].answer.as_deref(), Some("\u{fffd}{\"id\":1}"));
    }

    #[test]
    fn round_trips_with_64_bit_seeds_as_strings() {
        for seed in [0, 99, u64::MAX] {
            let mut d = delivery(seed);
            let text = d.to_json();
            assert!(!text.contains("s3cret"));
            let mut back = Delivery::from_json(&text, &hooks(Mode::Failover)).unwrap();
            // The request in flight is sent again, as the same attempt.
            let again = back.poll_request(at(5_000)).unwrap();
            assert_eq!((again.endpoint, again.attempt), (1, 2));
            let _ = d.poll_request(at(5_000));
            assert_eq!(back.log(), d.log());
            // A restored state with nothing in flight saves as it was read.
            let idle = Delivery::from_json(&text, &hooks(Mode::Failover))
                .unwrap()
                .to_json();
            assert_eq!(
                Delivery::from_json(&idle, &hooks(Mode::Failover))
                    .unwrap()
                    .to_json(),
                idle
            );
        }
        assert!(delivery(u64::MAX)
            .to_json()
            .contains(r#""jitter_seed":"18446744073709551615""#));
    }

    #[test]
    fn bad_states_are_refused_with_a_code() {
        let good = delivery(5).to_json();
        let cases = [
            "{nope".to_owned(),
            "[]".to_owned(),
            good.replace(r#""version":2"#, r#""version":3"#),
            good.replace(r#""mode":"failover""#, r#""mode":"both""#),
            good.replace(r#""endpoint":1"#, r#""endpoint":9"#),
            good.replace(r#""kind":"response""#, r#""kind":"teapot""#),
            good.replace(r#""attempts":2"#, r#""attempts":-2"#),
            good.replace(r#""body":"#, r#""bodi":"#),
            good.replace(r#""rejected":[false,false]"#, r#""rejected":[0,false]"#),
            good.replace(r#""rejected":[false,false]"#, r#""rejected":[false]"#),
        ];
        for text in cases {
            assert_ne!(text, good);
            let e = Delivery::from_json(&text, &hooks(Mode::Failover)).unwrap_err();
            assert_eq!(e.code(), "invalid_state", "{text}");
        }
    }

    #[test]
    fn format_1_restores_as_failover() {
        // Saved by the previous release: endpoint 0 answered 503, endpoint
        // 1 in flight.
        let v1 = r#"{"version":1,"message_id":"m","body":"{}","rejected":[false,false],"cursor":1,"round":0,"round_retry_after":7000,"phase":{"kind":"in_flight","endpoint":1,"sent_at":1200},"first_sent":1000,"attempts":2,"log":[{"attempt":1,"endpoint":0,"sent_at":1000,"ended_at":1200,"outcome":{"kind":"response","status":503,"retry_after":"7"}}],"outcome":null,"outcome_taken":false,"config":{"timeout_ms":5000,"retry_window_ms":14400000,"backoff_base_ms":10000,"backoff_cap_ms":1800000,"jitter_seed":5},"jitter_state":5}"#;
        // A Parallel settings object: the saved mode wins.
        let mut d = Delivery::from_json(v1, &hooks(Mode::Parallel)).unwrap();
        assert_eq!(d.mode(), Mode::Failover);
        let a = d.poll_request(at(9_000)).unwrap();
        assert_eq!((a.endpoint, a.attempt), (1, 2));
        assert!(d.poll_request(at(9_000)).is_none());
        d.handle_response(at(9_100), 2, Outcome::status(200));
        assert_eq!(
            d.poll_outcome(),
            Some(DeliveryOutcome::Delivered {
                endpoint: 1,
                attempt: 2,
                at: at(9_100)
            })
        );
    }
}
