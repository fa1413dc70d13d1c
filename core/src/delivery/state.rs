//! A [`Delivery`]'s saved state, as JSON text.
//!
//! Written by hand over the core's own [`Value`] rather than with
//! serde_json: the format stays under our control (versioned, with 64-bit
//! integers as strings so JavaScript readers keep every digit), restoring
//! checks the invariants the state machine indexes by, and serde_json's
//! deserializer was a quarter of the wasm module for this one feature.

use super::{AttemptRecord, Delivery, DeliveryConfig, DeliveryOutcome, GiveUpReason, Phase};
use crate::json::{Map, Value};
use crate::retry::{Backoff, Jitter, Outcome};

/// The format version written in `"version"`; restoring any other fails.
pub const STATE_VERSION: u32 = 1;

/// A saved delivery state that cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a saved delivery state: {0}")]
pub struct StateError(String);

impl StateError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> &'static str {
        "invalid_state"
    }
}

fn bad(what: impl Into<String>) -> StateError {
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
    }
}

/// Through [`Outcome::from_report`], the one reading of outcome kinds.
fn outcome_of(v: &Value) -> Result<Outcome, StateError> {
    let f = Fields::of(v, "outcome")?;
    let kind = f.kind()?;
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
    .ok_or_else(|| f.unknown("kind"))
}

fn record_value(r: &AttemptRecord) -> Value {
    object([
        ("attempt", int(r.attempt)),
        ("endpoint", int(r.endpoint as u64)),
        ("sent_at", int(r.sent_at)),
        ("ended_at", int(r.ended_at)),
        ("outcome", outcome_value(&r.outcome)),
    ])
}

/// A log record as users see it: the saved form plus its verdict.
fn public_record_value(r: &AttemptRecord) -> Value {
    let mut v = record_value(r);
    if let Value::Object(m) = &mut v {
        m.insert("verdict".into(), r.verdict.code().into());
    }
    v
}

impl DeliveryOutcome {
    /// The outcome as JSON text: snake_case keys and a `kind` tag, the
    /// shape the JS binding hands to users (and the serde derive writes;
    /// a test holds the two equal). Bindings parse this instead of each
    /// mapping the enum.
    pub fn to_json(&self) -> String {
        // Finite, shallow values: writing cannot fail.
        final_value(self).to_json_string().unwrap_or_default()
    }
}

fn record_of(v: &Value) -> Result<AttemptRecord, StateError> {
    let f = Fields::of(v, "log entry")?;
    let outcome = outcome_of(f.get("outcome")?)?;
    Ok(AttemptRecord {
        attempt: f.int("attempt")?,
        endpoint: f.int("endpoint")?,
        sent_at: f.int("sent_at")?,
        ended_at: f.int("ended_at")?,
        // Not saved: the verdict is always what the outcome means.
        verdict: outcome.verdict(),
        outcome,
    })
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
            ("at", int(*at)),
        ]),
        DeliveryOutcome::GaveUp {
            reason,
            attempts,
            last,
        } => object([
            ("kind", "gave_up".into()),
            ("reason", reason.code().into()),
            ("attempts", int(*attempts)),
            ("last", opt(last.as_ref().map(outcome_value))),
        ]),
        DeliveryOutcome::Disabled => object([("kind", "disabled".into())]),
    }
}

fn final_of(v: &Value) -> Result<DeliveryOutcome, StateError> {
    let f = Fields::of(v, "final outcome")?;
    Ok(match f.kind()? {
        "delivered" => DeliveryOutcome::Delivered {
            endpoint: f.int("endpoint")?,
            attempt: f.int("attempt")?,
            at: f.int("at")?,
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
        _ => return Err(f.unknown("kind")),
    })
}

fn phase_value(p: Phase) -> Value {
    match p {
        Phase::Waiting { at } => object([("kind", "waiting".into()), ("at", int(at))]),
        Phase::InFlight { endpoint, sent_at } => object([
            ("kind", "in_flight".into()),
            ("endpoint", int(endpoint as u64)),
            ("sent_at", int(sent_at)),
        ]),
        Phase::Done => object([("kind", "done".into())]),
    }
}

fn phase_of(v: &Value) -> Result<Phase, StateError> {
    let f = Fields::of(v, "phase")?;
    Ok(match f.kind()? {
        "waiting" => Phase::Waiting { at: f.int("at")? },
        "in_flight" => Phase::InFlight {
            endpoint: f.int("endpoint")?,
            sent_at: f.int("sent_at")?,
        },
        "done" => Phase::Done,
        _ => return Err(f.unknown("kind")),
    })
}

impl Delivery {
    /// The whole state as JSON text, to store and resume with
    /// [`Delivery::from_json`]. It holds the signed body (customer data),
    /// but never the secret: the same [`crate::Webhooks`] settings must be
    /// passed to `poll_request` after restoring.
    pub fn to_json(&self) -> String {
        let c = &self.config;
        let state = object([
            ("version", int(STATE_VERSION)),
            (
                "message_id",
                opt(self.message_id.as_deref().map(Value::from)),
            ),
            ("body", self.body.as_str().into()),
            (
                "rejected",
                Value::Array(self.rejected.iter().map(|b| Value::Bool(*b)).collect()),
            ),
            ("cursor", int(self.cursor as u64)),
            ("round", int(self.round)),
            ("round_retry_after", opt(self.round_retry_after.map(int))),
            ("phase", phase_value(self.phase)),
            ("first_sent", opt(self.first_sent.map(int))),
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
        ]);
        // Every value above is finite and shallow, so writing cannot fail.
        state.to_json_string().unwrap_or_default()
    }

    /// The attempt log as a JSON array, each record in the shape of
    /// [`AttemptRecord`] (snake_case keys, with its `verdict`).
    pub fn log_json(&self) -> String {
        Value::Array(self.log.iter().map(public_record_value).collect())
            .to_json_string()
            .unwrap_or_default()
    }

    /// Restores a state saved with [`Delivery::to_json`], checking that it
    /// is complete and self-consistent.
    pub fn from_json(text: &str) -> Result<Delivery, StateError> {
        let root = Value::from_json_str(text).map_err(|e| bad(e.to_string()))?;
        let f = Fields::of(&root, "state")?;
        let version: u32 = f.int("version")?;
        if version != STATE_VERSION {
            return Err(bad(format!("version {version} is not {STATE_VERSION}")));
        }
        let rejected = match f.get("rejected")? {
            Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    Value::Bool(b) => Ok(*b),
                    _ => Err(bad("state.rejected holds a non-boolean")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err(bad("state.rejected is not an array")),
        };
        let log = match f.get("log")? {
            Value::Array(items) => items.iter().map(record_of).collect::<Result<_, _>>()?,
            _ => return Err(bad("state.log is not an array")),
        };
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
        let d = Delivery {
            message_id: f.opt_str("message_id")?.map(str::to_owned),
            body: f.str("body")?.to_owned(),
            rejected,
            cursor: f.int("cursor")?,
            round: f.int("round")?,
            round_retry_after: f.opt_int("round_retry_after")?,
            phase: phase_of(f.get("phase")?)?,
            first_sent: f.opt_int("first_sent")?,
            attempts: f.int("attempts")?,
            log,
            outcome: f.opt("outcome").map(final_of).transpose()?,
            outcome_taken: f.bool("outcome_taken")?,
            config,
            rng: Jitter::from_state(f.int("jitter_state")?),
        };
        // The state machine indexes `rejected` by these.
        let endpoints = d.rejected.len();
        let in_range = |i: usize| i < endpoints;
        if !in_range(d.cursor)
            || matches!(d.phase, Phase::InFlight { endpoint, .. } if !in_range(endpoint))
        {
            return Err(bad("endpoint index out of range"));
        }
        Ok(d)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{Call, EndpointConfig, Outcome, Webhooks};

    fn delivery(seed: u64) -> Delivery {
        let hooks = Webhooks::new(
            &[
                EndpointConfig::new("https://a.example/h"),
                EndpointConfig::new("https://b.example/h"),
            ],
            Some(b"s3cret"),
        )
        .unwrap();
        let call =
            Call::from_json_str(r#"{"type":"track","userId":"u","event":"e","messageId":"m"}"#)
                .unwrap();
        let config = DeliveryConfig {
            jitter_seed: seed,
            ..DeliveryConfig::default()
        };
        let mut d = Delivery::new(&hooks, &call, 1_000, config).unwrap();
        let _ = d.poll_request(1_000, &hooks).unwrap();
        d.handle_response(
            1_200,
            Outcome::Response {
                status: 503,
                retry_after: Some("7".into()),
            },
        );
        let _ = d.poll_request(1_200, &hooks).unwrap();
        d
    }

    #[test]
    fn round_trips_with_64_bit_seeds_as_strings() {
        for seed in [0, 99, u64::MAX] {
            let d = delivery(seed);
            let text = d.to_json();
            assert!(!text.contains("s3cret"));
            let back = Delivery::from_json(&text).unwrap();
            assert_eq!(back, d);
            assert_eq!(back.to_json(), text);
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
            good.replace(r#""version":1"#, r#""version":2"#),
            good.replace(r#""cursor":1"#, r#""cursor":2"#),
            good.replace(
                r#""kind":"in_flight","endpoint":1"#,
                r#""kind":"in_flight","endpoint":9"#,
            ),
            good.replace(r#""kind":"response""#, r#""kind":"teapot""#),
            good.replace(r#""attempts":2"#, r#""attempts":-2"#),
            good.replace(r#""body":"#, r#""bodi":"#),
            good.replace(r#""rejected":[false,false]"#, r#""rejected":[0,false]"#),
        ];
        for text in cases {
            assert_ne!(text, good);
            let e = Delivery::from_json(&text).unwrap_err();
            assert_eq!(e.code(), "invalid_state", "{text}");
        }
    }
}
