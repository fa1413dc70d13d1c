//! Deterministic simulation of webhook deliveries: a fake clock and fake
//! receivers drive hours of retries in milliseconds, with no sleeping.
#![allow(clippy::unwrap_used, missing_docs)]

use callpost_core::delivery::{RETRY_WINDOW_MS, WEBHOOK_TIMEOUT_MS};
use callpost_core::{
    Call, Delivery, DeliveryConfig, DeliveryOutcome, EndpointConfig, GiveUpReason, Outcome,
    Verdict, Webhooks,
};

const T0: i64 = 1_795_341_845_123;
const HOUR: i64 = 3_600_000;

/// What a fake receiver does with one request.
enum Reply {
    /// Answers after `latency` ms.
    Answer(Outcome, i64),
    /// Never answers.
    Hang,
}

fn hooks(n: usize) -> Webhooks {
    let eps: Vec<_> = (0..n)
        .map(|i| EndpointConfig::new(format!("https://r{i}.example/hook")))
        .collect();
    Webhooks::new(&eps, Some(b"sim-secret")).unwrap()
}

fn call() -> Call {
    Call::from_json_str(r#"{"type":"track","userId":"u","event":"Sim","messageId":"m-1"}"#).unwrap()
}

fn config(seed: u64) -> DeliveryConfig {
    DeliveryConfig {
        jitter_seed: seed,
        ..DeliveryConfig::default()
    }
}

/// One step of the host loop. Returns false once the delivery is done.
fn step(
    d: &mut Delivery,
    hooks: &Webhooks,
    now: &mut i64,
    recv: &mut impl FnMut(i64, usize) -> Reply,
) -> bool {
    if let Some(a) = d.poll_request(*now, hooks) {
        assert_eq!(a.request.header("Idempotency-Key"), Some("m-1"));
        match recv(*now, a.endpoint) {
            Reply::Answer(o, latency) => {
                *now += latency;
                d.handle_response(*now, o);
            }
            Reply::Hang => {
                *now = a.deadline;
                d.handle_timeout(*now);
            }
        }
        return true;
    }
    match d.poll_timeout() {
        None => false,
        Some(t) => {
            assert!(t >= *now, "time never runs backwards");
            *now = t;
            d.handle_timeout(*now);
            true
        }
    }
}

fn run(
    mut d: Delivery,
    hooks: &Webhooks,
    mut recv: impl FnMut(i64, usize) -> Reply,
) -> (DeliveryOutcome, Delivery) {
    let mut now = T0;
    let mut steps = 0;
    while step(&mut d, hooks, &mut now, &mut recv) {
        steps += 1;
        assert!(steps < 10_000, "delivery never ended");
    }
    (d.poll_outcome().unwrap(), d)
}

fn status(s: u16) -> Reply {
    Reply::Answer(Outcome::status(s), 20)
}

#[test]
fn dead_receiver_gets_attempts_spread_over_four_hours_and_never_after() {
    let h = hooks(1);
    for seed in 0..50 {
        let d = Delivery::new(&h, &call(), T0, config(seed)).unwrap();
        let (outcome, d) = run(d, &h, |_, _| status(503));
        let times: Vec<i64> = d.log().iter().map(|r| r.sent_at - T0).collect();
        if seed == 0 {
            let mins: Vec<String> = times
                .iter()
                .map(|t| format!("{:.1}", *t as f64 / 60_000.0))
                .collect();
            eprintln!(
                "schedule (minutes after first attempt, seed 0): {}",
                mins.join(", ")
            );
        }
        assert!(matches!(
            outcome,
            DeliveryOutcome::GaveUp {
                reason: GiveUpReason::WindowExhausted,
                ..
            }
        ));
        assert!(
            times.iter().all(|t| *t <= RETRY_WINDOW_MS as i64),
            "an attempt after 4 h: {times:?}"
        );
        assert!(
            *times.last().unwrap() > 3 * HOUR + 25 * 60_000,
            "attempts stop early: {times:?}"
        );
        assert!(
            (12..=22).contains(&times.len()),
            "{} attempts: {times:?}",
            times.len()
        );
        // Not bunched at the start: at least 6 attempts in the last 3 hours.
        assert!(
            times.iter().filter(|t| **t > HOUR).count() >= 6,
            "{times:?}"
        );
    }
}

#[test]
fn receiver_that_recovers_at_two_hours_gets_the_call_exactly_once() {
    let h = hooks(1);
    let mut delivered = 0;
    let d = Delivery::new(&h, &call(), T0, config(7)).unwrap();
    let (outcome, d) = run(d, &h, |now, _| {
        if now < T0 + 2 * HOUR {
            status(500)
        } else {
            delivered += 1;
            status(200)
        }
    });
    assert_eq!(delivered, 1);
    let DeliveryOutcome::Delivered {
        endpoint: 0,
        attempt,
        at,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(attempt as usize, d.log().len());
    assert!(
        (T0 + 2 * HOUR..T0 + 2 * HOUR + 31 * 60_000).contains(&at),
        "recovery noticed within one cap"
    );
}

#[test]
fn second_endpoint_only_when_first_fails() {
    let h = hooks(3);
    let mut hits = vec![0; 3];
    let d = Delivery::new(&h, &call(), T0, config(1)).unwrap();
    let (outcome, _) = run(d, &h, |_, ep| {
        hits[ep] += 1;
        status(200)
    });
    assert_eq!(hits, [1, 0, 0]);
    assert!(matches!(
        outcome,
        DeliveryOutcome::Delivered {
            endpoint: 0,
            attempt: 1,
            ..
        }
    ));

    let mut seen = vec![];
    let d = Delivery::new(&h, &call(), T0, config(1)).unwrap();
    let (outcome, d) = run(d, &h, |now, ep| {
        seen.push((now, ep));
        if ep == 0 {
            status(502)
        } else {
            Reply::Answer(Outcome::connection("refused"), 1)
        }
    });
    // Round 1 fails over 0 → 1 → 2 without waiting; endpoint 2's 200 would
    // have ended it, but here 2 is refused too, so round 2 starts after backoff.
    assert_eq!(seen[0].1, 0);
    assert_eq!(seen[1], (seen[0].0 + 20, 1), "failover is immediate");
    assert_eq!(seen[2].1, 2);
    assert!(
        seen[3].0 >= seen[2].0 + 5_000,
        "a new round waits for the backoff"
    );
    assert_eq!(seen[3].1, 0, "each round starts at the first endpoint");
    assert!(matches!(outcome, DeliveryOutcome::GaveUp { .. }));
    assert!(d.log().iter().all(|r| r.verdict == Verdict::Retry));

    let mut hits = vec![0; 3];
    let d = Delivery::new(&h, &call(), T0, config(1)).unwrap();
    let (outcome, _) = run(d, &h, |_, ep| {
        hits[ep] += 1;
        if ep == 0 {
            status(500)
        } else {
            status(200)
        }
    });
    assert_eq!(
        hits,
        [1, 1, 0],
        "the first 2xx ends it; endpoint 2 never sees the call"
    );
    assert!(matches!(
        outcome,
        DeliveryOutcome::Delivered {
            endpoint: 1,
            attempt: 2,
            ..
        }
    ));
}

#[test]
fn timeouts_are_retried() {
    let h = hooks(1);
    let mut n = 0;
    let d = Delivery::new(&h, &call(), T0, config(3)).unwrap();
    let (outcome, d) = run(d, &h, |_, _| {
        n += 1;
        if n <= 2 {
            Reply::Hang
        } else {
            status(204)
        }
    });
    assert!(matches!(
        outcome,
        DeliveryOutcome::Delivered { attempt: 3, .. }
    ));
    let log = d.log();
    assert_eq!(log[0].outcome, Outcome::Timeout);
    assert_eq!(log[0].ended_at - log[0].sent_at, WEBHOOK_TIMEOUT_MS as i64);
    assert_eq!(log[1].outcome, Outcome::Timeout);
}

#[test]
fn permanent_rejections_are_not_retried() {
    for s in [400u16, 401, 403, 404, 410, 413, 301, 302] {
        let h = hooks(1);
        let mut hits = 0;
        let d = Delivery::new(&h, &call(), T0, config(2)).unwrap();
        let (outcome, _) = run(d, &h, |_, _| {
            hits += 1;
            status(s)
        });
        assert_eq!(hits, 1, "status {s}");
        assert!(
            matches!(
                outcome,
                DeliveryOutcome::GaveUp {
                    reason: GiveUpReason::AllEndpointsRejected,
                    attempts: 1,
                    ..
                }
            ),
            "{s}: {outcome:?}"
        );
    }
    // A rejecting endpoint drops out; the others keep being retried.
    let h = hooks(2);
    let mut hits = [0; 2];
    let d = Delivery::new(&h, &call(), T0, config(2)).unwrap();
    let (_, _) = run(d, &h, |_, ep| {
        hits[ep] += 1;
        if ep == 0 {
            Reply::Answer(Outcome::tls("self-signed certificate"), 1)
        } else {
            status(503)
        }
    });
    assert_eq!(hits[0], 1, "a TLS failure is final for that endpoint");
    assert!(hits[1] > 10);
    // 408 and 429 are retried.
    for s in [408u16, 429] {
        let h = hooks(1);
        let mut n = 0;
        let d = Delivery::new(&h, &call(), T0, config(2)).unwrap();
        let (outcome, _) = run(d, &h, |_, _| {
            n += 1;
            if n == 1 {
                status(s)
            } else {
                status(200)
            }
        });
        assert!(
            matches!(outcome, DeliveryOutcome::Delivered { attempt: 2, .. }),
            "{s}"
        );
    }
}

#[test]
fn retry_after_is_honoured() {
    let h = hooks(1);
    let mut times = vec![];
    let d = Delivery::new(&h, &call(), T0, config(4)).unwrap();
    let (outcome, _) = run(d, &h, |now, _| {
        times.push(now);
        if times.len() == 1 {
            Reply::Answer(
                Outcome::Response {
                    status: 429,
                    retry_after: Some("3600".into()),
                },
                0,
            )
        } else {
            status(200)
        }
    });
    assert!(matches!(outcome, DeliveryOutcome::Delivered { .. }));
    assert!(
        times[1] - times[0] >= HOUR,
        "waited {} ms",
        times[1] - times[0]
    );
    assert!(times[1] - times[0] < HOUR + 1_000);
    // A Retry-After beyond the window ends the delivery instead of waiting.
    let d = Delivery::new(&h, &call(), T0, config(4)).unwrap();
    let (outcome, d) = run(d, &h, |_, _| {
        Reply::Answer(
            Outcome::Response {
                status: 503,
                retry_after: Some("86400".into()),
            },
            0,
        )
    });
    assert!(matches!(
        outcome,
        DeliveryOutcome::GaveUp {
            reason: GiveUpReason::WindowExhausted,
            attempts: 1,
            ..
        }
    ));
    assert_eq!(d.log().len(), 1);
}

#[test]
fn disabled_calls_send_nothing() {
    let h = hooks(1);
    let c = Call::from_json_str(
        r#"{"type":"track","userId":"u","event":"e","integrations":{"All":false}}"#,
    )
    .unwrap();
    let mut d = Delivery::new(&h, &c, T0, config(0)).unwrap();
    assert!(d.poll_request(T0, &h).is_none());
    assert_eq!(d.poll_outcome(), Some(DeliveryOutcome::Disabled));
    assert_eq!(d.poll_timeout(), None);
}

#[test]
fn restored_state_continues_exactly_as_if_never_stopped() {
    let h = hooks(3);
    // A receiver pattern that depends only on time and endpoint, so both runs see the same world.
    // Every outcome kind appears in the log before the state is saved, so
    // each must survive serialization.
    let recv = |now: i64, ep: usize| {
        if now > T0 + 3 * HOUR && ep == 1 {
            status(200)
        } else if ep == 2 {
            Reply::Answer(Outcome::tls("self-signed certificate"), 3)
        } else if (now / 1000) % 3 == 0 {
            Reply::Hang
        } else if (now / 1000) % 3 == 1 {
            Reply::Answer(Outcome::connection("reset by peer"), 2)
        } else {
            Reply::Answer(
                Outcome::Response {
                    status: 503,
                    retry_after: Some("garbage".into()),
                },
                20,
            )
        }
    };
    let d = Delivery::new(&h, &call(), T0, config(99)).unwrap();
    let (want_outcome, want) = run(d.clone(), &h, recv);

    for stop_after in [1, 2, 5, 9, 17] {
        let mut d = d.clone();
        let mut now = T0;
        let mut r = recv;
        for _ in 0..stop_after {
            assert!(step(&mut d, &h, &mut now, &mut r));
        }
        let saved = d.to_json();
        let restored = Delivery::from_json(&saved).unwrap();
        assert_eq!(restored, d);
        assert_eq!(restored.to_json(), saved);
        let mut d = restored;
        while step(&mut d, &h, &mut now, &mut r) {}
        assert_eq!(d.poll_outcome().unwrap(), want_outcome);
        assert_eq!(d.log(), want.log(), "stopped after {stop_after} steps");
    }
}

#[test]
fn outcome_and_log_json_have_the_serde_shape() {
    // The bindings hand users `DeliveryOutcome::to_json` and
    // `Delivery::log_json`; the serde derive on the same types is the
    // independent statement of that shape.
    let same = |text: String, want: serde_json::Value| {
        let got: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(got, want, "{text}");
    };
    let h = hooks(3);
    let mixed = |now: i64, ep: usize| match (ep, (now / 1000) % 4) {
        (2, _) => Reply::Answer(Outcome::tls("self-signed certificate"), 3),
        (_, 0) => Reply::Hang,
        (_, 1) => Reply::Answer(Outcome::connection("reset by peer"), 2),
        (_, 2) => Reply::Answer(
            Outcome::Response {
                status: 503,
                retry_after: Some("120".into()),
            },
            20,
        ),
        _ if now > T0 + HOUR => status(204),
        _ => status(500),
    };
    let scenarios: Vec<Box<dyn Fn(i64, usize) -> Reply>> = vec![
        Box::new(mixed),
        Box::new(|_, _| status(503)),
        Box::new(|_, _| status(404)),
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for recv in scenarios {
        let d = Delivery::new(&h, &call(), T0, config(7)).unwrap();
        let (outcome, d) = run(d, &h, recv);
        same(outcome.to_json(), serde_json::to_value(&outcome).unwrap());
        same(d.log_json(), serde_json::to_value(d.log()).unwrap());
        kinds.insert(outcome.to_json()[..12].to_owned());
        for r in d.log() {
            kinds.insert(format!("{:?}", r.verdict));
        }
    }
    let c = Call::from_json_str(
        r#"{"type":"track","userId":"u","event":"e","integrations":{"All":false}}"#,
    )
    .unwrap();
    let mut d = Delivery::new(&h, &c, T0, config(0)).unwrap();
    let disabled = d.poll_outcome().unwrap();
    same(disabled.to_json(), serde_json::to_value(&disabled).unwrap());
    assert_eq!(d.log_json(), "[]");
    // Delivered and gave up; every verdict appeared in some log.
    assert_eq!(kinds.len(), 5, "{kinds:?}");
}

#[test]
fn debug_shows_the_body_length_not_the_body() {
    let c =
        Call::from_json_str(r#"{"type":"track","userId":"user-4f2a","event":"Checkout"}"#).unwrap();
    let d = Delivery::new(&hooks(1), &c, T0, config(1)).unwrap();
    let shown = format!("{d:?}");
    for data in ["user-4f2a", "Checkout"] {
        assert!(!shown.contains(data), "{shown}");
    }
    assert!(shown.contains("body_len"), "{shown}");
}
