//! Deterministic simulation of webhook deliveries: a fake clock and fake
//! receivers drive hours of retries in milliseconds, with no sleeping.
//! Requests of a round are in flight together, as a host sends them, and
//! each answer arrives after its receiver's latency.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::delivery::{RETRY_WINDOW_MS, WEBHOOK_TIMEOUT_MS};
use callpost_core::{
    Call, Delivery, DeliveryConfig, DeliveryOutcome, EndpointConfig, GiveUpReason, KeyCase, Mode,
    Outcome, Timestamp, Verdict, Webhooks,
};

const T0: i64 = 1_795_341_845_123;
const HOUR: i64 = 3_600_000;
const MINUTE: i64 = 60_000;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

/// What a fake receiver does with one request.
#[derive(Clone)]
enum Reply {
    /// Answers after `latency` ms (past the timeout, the answer comes too
    /// late and is ignored).
    Answer(Outcome, i64),
    /// Never answers.
    Hang,
}

fn hooks(n: usize, mode: Mode) -> Webhooks {
    let eps: Vec<_> = (0..n)
        .map(|i| EndpointConfig::new(format!("https://r{i}.example/hook")))
        .collect();
    Webhooks::with_mode(&eps, Some(b"sim-secret"), mode).unwrap()
}

fn call() -> Call {
    Call::from_json_str(r#"{"type":"track","userId":"u","event":"Sim","messageId":"m-1"}"#).unwrap()
}

fn status(s: u16) -> Reply {
    Reply::Answer(Outcome::status(s), 20)
}

/// The host: the fake clock, the answers on their way, and every request
/// sent as `(time, endpoint, attempt)`.
struct Host {
    now: i64,
    answers: Vec<(i64, u32, Outcome)>,
    sent: Vec<(i64, usize, u32)>,
}

impl Host {
    fn new() -> Self {
        Self {
            now: T0,
            answers: Vec::new(),
            sent: Vec::new(),
        }
    }

    /// Sends every request due now, then moves the clock to the next event
    /// (an answer, or the delivery's timer) and reports it. Returns false
    /// once the delivery is done.
    fn step(&mut self, d: &mut Delivery, recv: &mut impl FnMut(i64, usize) -> Reply) -> bool {
        while let Some(a) = d.poll_request(at(self.now)) {
            assert_eq!(a.request.header("Idempotency-Key"), Some("m-1"));
            assert_eq!(a.deadline, at(self.now + WEBHOOK_TIMEOUT_MS as i64));
            self.sent.push((self.now, a.endpoint, a.attempt));
            if let Reply::Answer(o, latency) = recv(self.now, a.endpoint) {
                self.answers.push((self.now + latency, a.attempt, o));
            }
        }
        let timer = d.poll_timeout().map(Timestamp::as_millis);
        let next = self
            .answers
            .iter()
            .enumerate()
            .min_by_key(|(_, (t, ..))| *t)
            .map(|(i, (t, ..))| (i, *t));
        match (next, timer) {
            // An answer first (at a tie too: it arrived before the timer).
            (Some((i, t)), timer) if timer.is_none_or(|timer| t <= timer) => {
                assert!(t >= self.now, "time never runs backwards");
                self.now = t;
                let (_, attempt, o) = self.answers.remove(i);
                d.handle_response(at(t), attempt, o);
                true
            }
            (_, Some(t)) => {
                assert!(t >= self.now, "time never runs backwards");
                self.now = t;
                d.handle_timeout(at(t));
                true
            }
            (None, None) => false,
            (Some(_), None) => unreachable!(),
        }
    }

    fn run(
        &mut self,
        d: &mut Delivery,
        mut recv: impl FnMut(i64, usize) -> Reply,
    ) -> DeliveryOutcome {
        let mut steps = 0;
        while self.step(d, &mut recv) {
            steps += 1;
            assert!(steps < 100_000, "delivery never ended");
        }
        // Answers still on their way arrive after the end, and change nothing.
        for (t, attempt, o) in std::mem::take(&mut self.answers) {
            d.handle_response(at(t.max(self.now)), attempt, o);
            assert!(d.poll_request(at(t.max(self.now))).is_none());
        }
        d.poll_outcome().unwrap()
    }
}

fn run(
    hooks: &Webhooks,
    seed: u64,
    recv: impl FnMut(i64, usize) -> Reply,
) -> (DeliveryOutcome, Delivery, Host) {
    let mut d = Delivery::new(hooks, &call(), at(T0), DeliveryConfig::new(seed)).unwrap();
    let mut host = Host::new();
    let outcome = host.run(&mut d, recv);
    (outcome, d, host)
}

fn minutes(ms: i64) -> String {
    format!("{:.1}", ms as f64 / MINUTE as f64)
}

#[test]
fn dead_receiver_gets_attempts_spread_over_four_hours_and_never_after() {
    for mode in [Mode::Parallel, Mode::Failover] {
        let h = hooks(1, mode);
        for seed in 0..50 {
            let (outcome, d, _) = run(&h, seed, |_, _| status(503));
            let times: Vec<i64> = d.log().iter().map(|r| r.sent_at.as_millis() - T0).collect();
            if seed == 0 {
                let mins: Vec<String> = times.iter().map(|t| minutes(*t)).collect();
                eprintln!(
                    "one dead endpoint, {mode:?} (minutes, seed 0): {}",
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
                *times.last().unwrap() > 3 * HOUR + 25 * MINUTE,
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
}

#[test]
fn five_dead_endpoints_in_parallel_get_every_round_at_once() {
    let h = hooks(5, Mode::Parallel);
    for seed in 0..20 {
        let (outcome, d, host) = run(&h, seed, |_, ep| {
            // Two refuse connections at once, one answers 503, one times
            // out, one answers 500 slowly.
            match ep {
                0 | 1 => Reply::Answer(Outcome::connection("refused"), 1),
                2 => status(503),
                3 => Reply::Hang,
                _ => Reply::Answer(Outcome::status(500), 4_000),
            }
        });
        let DeliveryOutcome::GaveUp {
            reason: GiveUpReason::WindowExhausted,
            attempts,
            ..
        } = outcome
        else {
            panic!("{outcome:?}")
        };
        let rounds = d.log().last().unwrap().round;
        assert_eq!(attempts, rounds * 5);
        assert_eq!(d.log().len() as u32, attempts);
        // Every round sends to all five at the same instant.
        for round in 1..=rounds {
            let sent: Vec<(i64, usize)> = d
                .log()
                .iter()
                .filter(|r| r.round == round)
                .map(|r| (r.sent_at.as_millis(), r.endpoint))
                .collect();
            assert_eq!(sent.len(), 5, "round {round}");
            assert!(sent.iter().all(|(t, _)| *t == sent[0].0));
            let mut eps: Vec<usize> = sent.iter().map(|(_, e)| *e).collect();
            eps.sort_unstable();
            assert_eq!(eps, [0, 1, 2, 3, 4]);
            // The round ends with its slowest request: the timeout.
            let end = d
                .log()
                .iter()
                .filter(|r| r.round == round)
                .map(|r| r.ended_at)
                .max()
                .unwrap();
            assert_eq!(end.millis_since(at(sent[0].0)), WEBHOOK_TIMEOUT_MS as i64);
        }
        let last = host.sent.last().unwrap().0 - T0;
        assert!(last <= RETRY_WINDOW_MS as i64 && last > 3 * HOUR + 25 * MINUTE);
        if seed == 0 {
            let starts: Vec<String> = (1..=rounds)
                .map(|r| {
                    let t = d.log().iter().find(|x| x.round == r).unwrap().sent_at;
                    minutes(t.as_millis() - T0)
                })
                .collect();
            eprintln!(
                "five dead endpoints, parallel (seed 0): {rounds} rounds, {attempts} attempts, \
                 last attempt {} min after the first; round starts (minutes): {}",
                minutes(last),
                starts.join(", ")
            );
        }
    }
}

#[test]
fn every_endpoint_is_reached_in_round_one_when_all_are_healthy() {
    let h = hooks(5, Mode::Parallel);
    let mut hits = [0; 5];
    let (outcome, d, host) = run(&h, 1, |_, ep| {
        hits[ep] += 1;
        // Different latencies: the first to answer is endpoint 4.
        Reply::Answer(Outcome::status(200), 50 - 10 * ep as i64)
    });
    assert_eq!(hits, [1; 5]);
    assert_eq!(host.sent.len(), 5);
    assert!(host.sent.iter().all(|(t, ..)| *t == T0));
    // The first success is the one reported; the delivery ends when the
    // round does, with every endpoint's outcome in the log.
    assert_eq!(
        outcome,
        DeliveryOutcome::Delivered {
            endpoint: 4,
            attempt: 5,
            at: at(T0 + 10)
        }
    );
    assert_eq!(d.log().len(), 5);
    assert!(d
        .log()
        .iter()
        .all(|r| r.verdict == Verdict::Success && r.round == 1));
}

#[test]
fn endpoints_that_failed_beside_a_success_are_not_retried() {
    let h = hooks(3, Mode::Parallel);
    let mut hits = [0; 3];
    let (outcome, d, host) = run(&h, 2, |_, ep| {
        hits[ep] += 1;
        match ep {
            0 => status(503),
            1 => status(200),
            _ => Reply::Hang,
        }
    });
    assert_eq!(hits, [1, 1, 1]);
    assert!(matches!(
        outcome,
        DeliveryOutcome::Delivered { endpoint: 1, .. }
    ));
    // Done when the hanging request timed out, not before.
    assert_eq!(host.now, T0 + WEBHOOK_TIMEOUT_MS as i64);
    let kinds: Vec<Verdict> = d.log().iter().map(|r| r.verdict).collect();
    assert_eq!(kinds, [Verdict::Retry, Verdict::Success, Verdict::Retry]);
}

#[test]
fn a_receiver_that_recovers_at_two_hours_gets_the_call_once() {
    for mode in [Mode::Parallel, Mode::Failover] {
        let h = hooks(3, mode);
        let mut delivered = 0;
        let (outcome, d, _) = run(&h, 7, |now, ep| match ep {
            0 if now >= T0 + 2 * HOUR => {
                delivered += 1;
                status(200)
            }
            0 => status(500),
            1 => Reply::Answer(Outcome::tls("self-signed certificate"), 3),
            _ => Reply::Hang,
        });
        assert_eq!(delivered, 1, "{mode:?}");
        let DeliveryOutcome::Delivered {
            endpoint: 0, at: t, ..
        } = outcome
        else {
            panic!("{outcome:?}")
        };
        assert!(
            (T0 + 2 * HOUR..T0 + 2 * HOUR + 31 * MINUTE).contains(&t.as_millis()),
            "recovery noticed within one cap"
        );
        // The TLS failure was final for endpoint 1: one attempt only.
        assert_eq!(d.log().iter().filter(|r| r.endpoint == 1).count(), 1);
    }
}

#[test]
fn five_endpoints_with_mixed_answers_over_the_window() {
    // Endpoint 0 rejects (404), 1 answers 503 for 90 minutes, 2 times out,
    // 3 refuses connections, 4 answers 502 then 410 after an hour.
    let recv = |now: i64, ep: usize| match ep {
        0 => status(404),
        1 if now < T0 + 90 * MINUTE => status(503),
        1 => status(201),
        2 => Reply::Hang,
        3 => Reply::Answer(Outcome::connection("refused"), 1),
        _ if now < T0 + HOUR => status(502),
        _ => status(410),
    };
    let h = hooks(5, Mode::Parallel);
    for seed in 0..20 {
        let (outcome, d, _) = run(&h, seed, recv);
        let DeliveryOutcome::Delivered {
            endpoint: 1, at: t, ..
        } = outcome
        else {
            panic!("{outcome:?}")
        };
        assert!(t.as_millis() >= T0 + 90 * MINUTE);
        let per = |ep: usize| d.log().iter().filter(|r| r.endpoint == ep).count();
        assert_eq!(per(0), 1, "a 404 leaves the later rounds");
        let rounds = d.log().last().unwrap().round as usize;
        assert_eq!(per(1), rounds);
        assert_eq!(per(2), rounds);
        assert_eq!(per(3), rounds);
        assert!(per(4) < rounds, "the 410 left the later rounds");
        assert_eq!(
            d.log()
                .iter()
                .filter(|r| r.verdict == Verdict::Success)
                .count(),
            1
        );
    }
    // Every endpoint rejecting ends the delivery at once.
    let (outcome, d, _) = run(&h, 1, |_, ep| {
        if ep % 2 == 0 {
            status(400)
        } else {
            status(301)
        }
    });
    assert!(matches!(
        outcome,
        DeliveryOutcome::GaveUp {
            reason: GiveUpReason::AllEndpointsRejected,
            attempts: 5,
            ..
        }
    ));
    assert_eq!(d.log().len(), 5);
    // Rejections spread over rounds: once the last live endpoint rejects.
    let (outcome, d, _) = run(&h, 1, |now, ep| {
        if ep == 4 && now < T0 + 30 * MINUTE {
            status(503)
        } else {
            status(403)
        }
    });
    assert!(matches!(
        outcome,
        DeliveryOutcome::GaveUp {
            reason: GiveUpReason::AllEndpointsRejected,
            ..
        }
    ));
    assert!(d.log().last().unwrap().round > 1);
}

#[test]
fn failover_tries_the_next_endpoint_only_when_one_fails() {
    let h = hooks(3, Mode::Failover);
    let mut hits = vec![0; 3];
    let (outcome, _, _) = run(&h, 1, |_, ep| {
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
    let (outcome, d, _) = run(&h, 1, |now, ep| {
        seen.push((now, ep));
        if ep == 0 {
            status(502)
        } else {
            Reply::Answer(Outcome::connection("refused"), 1)
        }
    });
    // Round 1 fails over 0 → 1 → 2 without waiting; round 2 starts after
    // the backoff, at the first endpoint.
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
    let (outcome, _, _) = run(&h, 1, |_, ep| {
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
fn timeouts_are_retried_and_late_answers_ignored() {
    for mode in [Mode::Parallel, Mode::Failover] {
        let h = hooks(1, mode);
        let mut n = 0;
        let (outcome, d, _) = run(&h, 3, |_, _| {
            n += 1;
            match n {
                1 => Reply::Hang,
                // Answers 200 after the timeout: too late to count.
                2 => Reply::Answer(Outcome::status(200), 6_000),
                _ => status(204),
            }
        });
        assert!(matches!(
            outcome,
            DeliveryOutcome::Delivered { attempt: 3, .. }
        ));
        let log = d.log();
        assert_eq!(log[0].outcome, Outcome::Timeout);
        assert_eq!(
            log[0].ended_at.millis_since(log[0].sent_at),
            WEBHOOK_TIMEOUT_MS as i64
        );
        assert_eq!(log[1].outcome, Outcome::Timeout);
        assert_eq!(log.len(), 3);
    }
}

#[test]
fn permanent_rejections_are_not_retried() {
    for s in [400u16, 401, 403, 404, 410, 413, 301, 302] {
        let h = hooks(1, Mode::Parallel);
        let mut hits = 0;
        let (outcome, _, _) = run(&h, 2, |_, _| {
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
    for mode in [Mode::Parallel, Mode::Failover] {
        let h = hooks(2, mode);
        let mut hits = [0; 2];
        let _ = run(&h, 2, |_, ep| {
            hits[ep] += 1;
            if ep == 0 {
                Reply::Answer(Outcome::tls("self-signed certificate"), 1)
            } else {
                status(503)
            }
        });
        assert_eq!(hits[0], 1, "a TLS failure is final for that endpoint");
        assert!(hits[1] > 10);
    }
    // 408 and 429 are retried.
    for s in [408u16, 429] {
        let h = hooks(1, Mode::Parallel);
        let mut n = 0;
        let (outcome, _, _) = run(&h, 2, |_, _| {
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
    let h = hooks(2, Mode::Parallel);
    let mut times = vec![];
    let (outcome, _, _) = run(&h, 4, |now, ep| {
        times.push(now);
        match (times.len(), ep) {
            // The round's longest Retry-After wins.
            (1 | 2, 0) => Reply::Answer(
                Outcome::Response {
                    status: 429,
                    retry_after: Some("3600".into()),
                },
                0,
            ),
            (1 | 2, _) => Reply::Answer(
                Outcome::Response {
                    status: 503,
                    retry_after: Some("60".into()),
                },
                0,
            ),
            _ => status(200),
        }
    });
    assert!(matches!(outcome, DeliveryOutcome::Delivered { .. }));
    assert!(
        times[2] - times[0] >= HOUR,
        "waited {} ms",
        times[2] - times[0]
    );
    assert!(times[2] - times[0] < HOUR + 1_000);
    // A Retry-After beyond the window ends the delivery instead of waiting.
    let h = hooks(1, Mode::Parallel);
    let (outcome, d, _) = run(&h, 4, |_, _| {
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
    let h = hooks(1, Mode::Parallel);
    let c = Call::from_json_str(
        r#"{"type":"track","userId":"u","event":"e","integrations":{"All":false}}"#,
    )
    .unwrap();
    let mut d = Delivery::new(&h, &c, at(T0), DeliveryConfig::new(0)).unwrap();
    assert!(d.poll_request(at(T0)).is_none());
    assert_eq!(d.poll_outcome(), Some(DeliveryOutcome::Disabled));
    assert_eq!(d.poll_timeout(), None);
}

/// A receiver pattern that depends only on time and endpoint, so every
/// run sees the same world. Every outcome kind appears in the log before
/// the state is saved, so each must survive serialization.
fn world(now: i64, ep: usize) -> Reply {
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
}

#[test]
fn restored_between_rounds_continues_exactly_as_if_never_stopped() {
    for mode in [Mode::Parallel, Mode::Failover] {
        let h = hooks(3, mode);
        let start = Delivery::new(&h, &call(), at(T0), DeliveryConfig::new(99)).unwrap();
        let mut d = start.clone();
        let want_outcome = Host::new().run(&mut d, world);
        let want_log = d.log().to_vec();
        let mut checked = 0;
        for stop_after in 1..60 {
            let mut d = start.clone();
            let mut host = Host::new();
            let mut r = world;
            if !(0..stop_after).all(|_| host.step(&mut d, &mut r)) {
                break;
            }
            // Only where nothing is in flight: a request in flight is sent
            // again on restore (the next test).
            if !host.answers.is_empty() || d.log().len() as u32 != host.sent.len() as u32 {
                continue;
            }
            checked += 1;
            let saved = d.to_json();
            let mut restored = Delivery::from_json(&saved, &h).unwrap();
            assert_eq!(restored.to_json(), saved);
            assert_eq!(host.run(&mut restored, world), want_outcome);
            assert_eq!(
                restored.log(),
                want_log,
                "{mode:?}, stopped after {stop_after} steps"
            );
        }
        assert!(
            checked >= 5,
            "{mode:?}: only {checked} stops between rounds"
        );
    }
}

#[test]
fn restored_mid_round_sends_again_only_what_got_no_answer() {
    let h = hooks(4, Mode::Parallel);
    let mut d = Delivery::new(&h, &call(), at(T0), DeliveryConfig::new(5)).unwrap();
    let sent: Vec<_> = std::iter::from_fn(|| d.poll_request(at(T0))).collect();
    assert_eq!(sent.len(), 4);
    // Endpoint 0 answered 503 and endpoint 1 404; 2 and 3 are in flight
    // when the process dies.
    d.handle_response(at(T0 + 10), sent[0].attempt, Outcome::status(503));
    d.handle_response(at(T0 + 12), sent[1].attempt, Outcome::status(404));
    let saved = d.to_json();
    drop(d);

    let mut d = Delivery::from_json(&saved, &h).unwrap();
    let later = at(T0 + 30_000);
    let again: Vec<_> = std::iter::from_fn(|| d.poll_request(later)).collect();
    let resent: Vec<(usize, u32)> = again.iter().map(|a| (a.endpoint, a.attempt)).collect();
    assert_eq!(resent, [(2, 3), (3, 4)], "same attempts, same endpoints");
    assert_eq!(again[0].request.body, sent[2].request.body);
    assert_eq!(
        again[0].request.header("X-Signature"),
        sent[2].request.header("X-Signature")
    );
    // Answers to the dead process's requests are not expected any more.
    d.handle_response(at(T0 + 30_005), 3, Outcome::status(500));
    d.handle_response(at(T0 + 30_010), 4, Outcome::status(200));
    assert_eq!(
        d.poll_outcome(),
        Some(DeliveryOutcome::Delivered {
            endpoint: 3,
            attempt: 4,
            at: at(T0 + 30_010)
        })
    );
    let log: Vec<(usize, u32)> = d.log().iter().map(|r| (r.endpoint, r.attempt)).collect();
    assert_eq!(log, [(0, 1), (1, 2), (2, 3), (3, 4)]);

    // Failover: the endpoint in flight is sent again, then the round goes on.
    let h = hooks(3, Mode::Failover);
    let mut d = Delivery::new(&h, &call(), at(T0), DeliveryConfig::new(5)).unwrap();
    let a = d.poll_request(at(T0)).unwrap();
    d.handle_response(at(T0 + 5), a.attempt, Outcome::status(502));
    let b = d.poll_request(at(T0 + 5)).unwrap();
    assert_eq!(b.endpoint, 1);
    let mut d = Delivery::from_json(&d.to_json(), &h).unwrap();
    let again = d.poll_request(at(T0 + 9_000)).unwrap();
    assert_eq!((again.endpoint, again.attempt), (1, 2));
    assert!(d.poll_request(at(T0 + 9_000)).is_none(), "one at a time");
    d.handle_response(at(T0 + 9_010), 2, Outcome::connection("reset"));
    let next = d.poll_request(at(T0 + 9_010)).unwrap();
    assert_eq!((next.endpoint, next.attempt), (2, 3));
}

#[test]
fn outcome_and_log_json_have_the_serde_shape() {
    // The bindings hand users `DeliveryOutcome::to_json` and
    // `Delivery::log_json`; the serde derive on the same types is the
    // independent statement of that shape (snake_case), and camelCase is
    // the same with its keys renamed.
    let same = |text: String, want: serde_json::Value| {
        let got: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(got, want, "{text}");
    };
    let camel = |text: String| {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut keys = vec![];
        fn walk(v: &serde_json::Value, keys: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        keys.push(k.clone());
                        walk(v, keys);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, keys)),
                _ => {}
            }
        }
        walk(&v, &mut keys);
        keys
    };
    let h = hooks(3, Mode::Parallel);
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
        let (outcome, d, _) = run(&h, 7, recv);
        same(
            outcome.to_json(KeyCase::Snake),
            serde_json::to_value(&outcome).unwrap(),
        );
        same(
            d.log_json(KeyCase::Snake),
            serde_json::to_value(d.log()).unwrap(),
        );
        let keys = camel(d.log_json(KeyCase::Camel));
        assert!(keys.contains(&"sentAt".to_owned()) && keys.contains(&"endedAt".to_owned()));
        assert!(keys.iter().all(|k| !k.contains('_')), "{keys:?}");
        kinds.insert(outcome.to_json(KeyCase::Snake)[..12].to_owned());
        for r in d.log() {
            kinds.insert(format!("{:?}", r.verdict));
        }
    }
    let c = Call::from_json_str(
        r#"{"type":"track","userId":"u","event":"e","integrations":{"All":false}}"#,
    )
    .unwrap();
    let mut d = Delivery::new(&h, &c, at(T0), DeliveryConfig::new(0)).unwrap();
    let disabled = d.poll_outcome().unwrap();
    same(
        disabled.to_json(KeyCase::Snake),
        serde_json::to_value(&disabled).unwrap(),
    );
    assert_eq!(d.log_json(KeyCase::Camel), "[]");
    // Delivered and gave up; every verdict appeared in some log.
    assert_eq!(kinds.len(), 5, "{kinds:?}");
}

#[test]
fn debug_shows_the_body_length_not_the_body() {
    let c =
        Call::from_json_str(r#"{"type":"track","userId":"user-4f2a","event":"Checkout"}"#).unwrap();
    let d = Delivery::new(
        &hooks(1, Mode::Parallel),
        &c,
        at(T0),
        DeliveryConfig::new(1),
    )
    .unwrap();
    let shown = format!("{d:?}");
    for data in ["user-4f2a", "Checkout"] {
        assert!(!shown.contains(data), "{shown}");
    }
    assert!(shown.contains("body_len"), "{shown}");
}

/// A host that waits for a slot of its endpoint before sending says when
/// it sent: the receiver gets its whole 5 s from then, and the log shows
/// the receiver's latency, not the wait.
#[test]
fn an_attempt_sent_after_a_wait_is_timed_from_its_send() {
    let mut d = Delivery::new(
        &hooks(1, Mode::Parallel),
        &call(),
        at(T0),
        DeliveryConfig::new(7),
    )
    .unwrap();
    let a = d.poll_request(at(T0)).unwrap();
    // Three seconds waiting for a slot, then sent.
    let sent = T0 + 3_000;
    d.handle_sent(at(sent), a.attempt);
    // Past 5 s from the poll, not from the send: no timeout yet.
    assert_eq!(d.poll_timeout(), Some(at(sent + WEBHOOK_TIMEOUT_MS as i64)));
    d.handle_timeout(at(T0 + WEBHOOK_TIMEOUT_MS as i64 + 1));
    assert!(d.log().is_empty(), "timed out from the poll");
    d.handle_response(at(sent + 40), a.attempt, Outcome::status(200));
    let r = &d.log()[0];
    assert_eq!((r.sent_at, r.ended_at), (at(sent), at(sent + 40)));
    // An attempt not in flight, or a time before the poll, changes nothing.
    d.handle_sent(at(sent + 100), a.attempt);
    let mut e = Delivery::new(
        &hooks(1, Mode::Parallel),
        &call(),
        at(T0),
        DeliveryConfig::new(7),
    )
    .unwrap();
    let b = e.poll_request(at(T0)).unwrap();
    e.handle_sent(at(T0 - 500), b.attempt);
    e.handle_sent(at(T0 + 10), b.attempt + 1);
    assert_eq!(e.poll_timeout(), Some(at(T0 + WEBHOOK_TIMEOUT_MS as i64)));
}

fn held(until: i64, reason: &str) -> Reply {
    Reply::Answer(
        Outcome::Held {
            until: at(until),
            reason: reason.into(),
        },
        0,
    )
}

/// A host holds a request back while its endpoint is protected (an open
/// circuit, a receiver's Retry-After): the round fails without a send, and
/// the next is not before the endpoint takes requests again.
#[test]
fn a_held_attempt_waits_for_its_endpoint_and_keeps_the_window() {
    // The circuit is open for the first 30 minutes, then the receiver
    // answers.
    let open_until = T0 + 30 * MINUTE;
    let mut hits = 0;
    let (outcome, d, _) = run(&hooks(1, Mode::Parallel), 1, |now, _| {
        if now < open_until {
            held(open_until, "circuit_open")
        } else {
            hits += 1;
            status(200)
        }
    });
    let DeliveryOutcome::Delivered { at: done, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(done.as_millis() >= open_until);
    assert_eq!(hits, 1, "one request reached the receiver");
    let log = d.log();
    assert_eq!(log[0].outcome.code(), "held");
    assert_eq!(log[0].verdict, Verdict::Retry);
    assert!(log[1].sent_at.as_millis() >= open_until, "{log:?}");
    // The log keeps the held attempt through a save and restore.
    let saved = d.to_json();
    assert!(saved.contains(r#""kind":"held""#), "{saved}");
    let back = Delivery::from_json(&saved, &hooks(1, Mode::Parallel)).unwrap();
    assert_eq!(back.log(), d.log());

    // Held past the window: the call gives up at once, unsent.
    let mut hits = 0;
    let (outcome, d, _) = run(&hooks(1, Mode::Parallel), 2, |now, _| {
        if now < T0 + 5 * HOUR {
            held(T0 + 5 * HOUR, "circuit_open")
        } else {
            hits += 1;
            status(200)
        }
    });
    assert!(
        matches!(
            outcome,
            DeliveryOutcome::GaveUp {
                reason: GiveUpReason::WindowExhausted,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!((hits, d.log().len()), (0, 1));
}

/// In parallel mode a held endpoint does not hold back the others: the
/// call is delivered through the endpoint that answers, and the held one
/// is never sent to.
#[test]
fn a_held_endpoint_beside_a_live_one_is_never_sent_to() {
    let mut hits = [0, 0];
    let (outcome, d, _) = run(&hooks(2, Mode::Parallel), 3, |now, e| {
        if e == 0 {
            return held(now + 10 * MINUTE, "circuit_open");
        }
        hits[1] += 1;
        if now < T0 + HOUR {
            status(500)
        } else {
            status(200)
        }
    });
    assert!(
        matches!(outcome, DeliveryOutcome::Delivered { endpoint: 1, .. }),
        "{outcome:?}"
    );
    assert_eq!(hits[0], 0);
    // Rounds are at least the hold apart.
    let rounds: Vec<i64> = d
        .log()
        .iter()
        .filter(|r| r.endpoint == 1)
        .map(|r| r.sent_at.as_millis())
        .collect();
    for w in rounds.windows(2) {
        assert!(w[1] - w[0] >= 10 * MINUTE, "{rounds:?}");
    }
}
