//! Receiver protection on a fake clock: a host that always has calls to
//! send asks the guard before each request, and a simulated receiver
//! answers. Hours of failures run in milliseconds.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::protection::{
    Hold, DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_OPEN_MS, HOLD_SYNC_MS, MAX_BREAKER_OPEN_MS,
};
use callpost_core::{
    EndpointGuard, EndpointState, GuardState, Outcome, Permit, ProtectionConfig, Timestamp,
};
use std::collections::VecDeque;

const T0: i64 = 1_795_341_845_000;
const SECOND: i64 = 1000;
const HOUR: i64 = 3_600_000;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

/// What the simulated receiver does with a request sent at `sent`: its
/// outcome, and after how many milliseconds it arrives.
type Receiver<'a> = &'a mut dyn FnMut(i64) -> (Outcome, i64);

/// The host's own requests in flight to one endpoint at most (the relay's
/// default per endpoint URL).
const HOST_SLOTS: usize = 32;

/// Runs a host that wants to send without pause (a deep backlog) from
/// `start` until `end`, and returns the times requests were sent. The host
/// sleeps until the guard's wake-up time or the next answer.
fn drive(guard: &mut EndpointGuard, start: i64, end: i64, receiver: Receiver<'_>) -> Vec<i64> {
    drive_many(std::slice::from_mut(guard), start, end, receiver, false)
        .pop()
        .unwrap()
}

/// As [`drive`], with one host per guard posting to one receiver; with
/// `share`, the hosts exchange their [`Hold`]s every [`HOLD_SYNC_MS`] as
/// relays on one database do. Returns each host's send times.
fn drive_many(
    guards: &mut [EndpointGuard],
    start: i64,
    end: i64,
    receiver: Receiver<'_>,
    share: bool,
) -> Vec<Vec<i64>> {
    let mut now = start;
    let mut sent = vec![vec![]; guards.len()];
    // Answers still to come, per host: (arrival time, outcome).
    let mut pending: Vec<VecDeque<(i64, Outcome)>> = vec![VecDeque::new(); guards.len()];
    let sync = HOLD_SYNC_MS as i64;
    // The first exchange is at the start: a relay reads the holds before
    // it delivers.
    let mut next_sync = start;
    while now < end {
        if share && now >= next_sync {
            let holds: Vec<Hold> = guards.iter().filter_map(|g| g.hold(t(now))).collect();
            for g in guards.iter_mut() {
                for h in &holds {
                    g.handle_hold(t(now), h);
                }
            }
            next_sync = now + sync;
        }
        let mut next = if share { next_sync } else { end };
        for (i, guard) in guards.iter_mut().enumerate() {
            let pending = &mut pending[i];
            while let Some(p) = pending.iter().position(|(at, _)| *at <= now) {
                let (_, outcome) = pending.remove(p).unwrap();
                guard.handle_outcome(t(now), &outcome);
            }
            let wake = loop {
                if pending.len() >= HOST_SLOTS {
                    break None;
                }
                match guard.poll_permit(t(now)) {
                    Permit::Send => {
                        sent[i].push(now);
                        let (outcome, takes) = receiver(now);
                        pending.push_back((now + takes, outcome));
                    }
                    Permit::WaitUntil(at) => break Some(at.as_millis()),
                    Permit::WaitForAnswer => break None,
                    Permit::Disabled => break Some(end),
                }
            };
            let next_answer = pending.iter().map(|(at, _)| *at).min();
            let own = [
                wake,
                next_answer,
                guard.poll_timeout().map(Timestamp::as_millis),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
            assert!(
                own > now || next_answer == Some(now),
                "the host would spin at {now}"
            );
            next = next.min(own);
        }
        now = next.max(now + 1).min(end);
    }
    sent
}

/// A receiver that answers its first request 429 with `Retry-After: 5`,
/// and every other 200, each in 10 ms.
fn busy_once() -> impl FnMut(i64) -> (Outcome, i64) {
    let mut first = true;
    move |_| {
        if std::mem::take(&mut first) {
            let retry_after = Some("5".into());
            (
                Outcome::Response {
                    status: 429,
                    retry_after,
                },
                10,
            )
        } else {
            (Outcome::status(200), 10)
        }
    }
}

fn guard(config: ProtectionConfig) -> EndpointGuard {
    EndpointGuard::new(config, t(T0)).unwrap()
}

#[test]
fn a_dead_receiver_is_probed_not_flooded_and_is_found_again() {
    let mut g = guard(ProtectionConfig::default());
    // Down for an hour: every connection is refused at once.
    let mut down = |_| (Outcome::connection("refused"), 5);
    let sent = drive(&mut g, T0, T0 + HOUR, &mut down);
    // The host's first requests all leave before any answer (its 32
    // slots); the circuit opens at the answer that makes 10 failures in a
    // row, and from then on one probe goes after 30 s, 60 s, … doubling up
    // to 10 minutes.
    let first = HOST_SLOTS;
    assert!(first >= DEFAULT_BREAKER_FAILURES as usize);
    assert!(sent[..first].iter().all(|s| *s == T0), "{sent:?}");
    let mut expected_probes = vec![];
    let (mut at, mut open) = (T0 + 5, DEFAULT_BREAKER_OPEN_MS as i64);
    loop {
        at += open;
        if at >= T0 + HOUR {
            break;
        }
        expected_probes.push(at);
        at += 5;
        open = (open * 2).min(MAX_BREAKER_OPEN_MS as i64);
    }
    eprintln!(
        "a receiver down for an hour saw {} requests: {first} before the first answers, then {} probes",
        sent.len(),
        expected_probes.len()
    );
    assert_eq!(sent[first..], expected_probes[..]);
    assert!(expected_probes.len() <= 12);
    assert!(matches!(
        g.endpoint_state(t(T0 + HOUR)),
        EndpointState::CircuitOpen { .. }
    ));
    // Back up: the next probe succeeds within the longest open time, and
    // the circuit closes and lets everything through.
    let mut up = |_| (Outcome::status(200), 5);
    let after = drive(&mut g, T0 + HOUR, T0 + HOUR + 11 * 60 * SECOND, &mut up);
    assert!(
        after[0] - (T0 + HOUR) <= MAX_BREAKER_OPEN_MS as i64,
        "{}",
        after[0]
    );
    assert!(after.len() > 1000, "requests flow again: {}", after.len());
    assert_eq!(g.endpoint_state(t(T0 + 2 * HOUR)), EndpointState::Healthy);
    let kinds: Vec<&str> = std::iter::from_fn(|| g.poll_event())
        .map(|e| e.to.as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"circuit_open"));
    assert_eq!(kinds.last(), Some(&"healthy"));
    assert!(kinds.contains(&"probing"));
}

#[test]
fn a_rate_limited_receiver_never_sees_more_than_its_rate_in_any_second() {
    for rate in [1u32, 5, 50, 333] {
        let mut g = guard(ProtectionConfig {
            rate_per_second: Some(rate),
            ..ProtectionConfig::default()
        });
        let mut ok = |_| (Outcome::status(200), 20);
        let sent = drive(&mut g, T0, T0 + 60 * SECOND, &mut ok);
        for (i, at) in sent.iter().enumerate() {
            let in_window = sent[i..].iter().take_while(|s| **s < at + SECOND).count();
            assert!(
                in_window <= rate as usize,
                "{in_window} requests in the second from {at}"
            );
        }
        // And the limit is used, not undershot.
        let expected = 60 * rate as usize;
        eprintln!("rate {rate}/s: {} requests in 60 s", sent.len());
        assert!(
            sent.len() >= expected * 98 / 100,
            "{} of {expected}",
            sent.len()
        );
    }
}

#[test]
fn requests_in_flight_never_pass_the_cap() {
    let mut g = guard(ProtectionConfig {
        max_in_flight: Some(3),
        ..ProtectionConfig::default()
    });
    let mut in_flight: Vec<i64> = vec![];
    let mut slow = |now: i64| {
        in_flight.retain(|end| *end > now);
        in_flight.push(now + 1500);
        assert!(
            in_flight.len() <= 3,
            "{} in flight at {now}",
            in_flight.len()
        );
        (Outcome::status(200), 1500)
    };
    let sent = drive(&mut g, T0, T0 + 30 * SECOND, &mut slow);
    // Three every 1.5 s: the cap is used, not undershot.
    assert_eq!(sent.len(), 3 * 20);
}

#[test]
fn senders_sharing_a_rate_limit_stay_within_it_together() {
    for (rate, senders) in [(10u32, 2u32), (7, 3), (333, 2), (1, 2)] {
        // Each sender runs its own guard, all starting at the same instant
        // (their requests line up: the worst case for a window).
        let mut all = vec![];
        for _ in 0..senders {
            let mut g = guard(ProtectionConfig {
                rate_per_second: Some(rate),
                ..ProtectionConfig::default()
            });
            g.handle_senders(senders);
            let mut ok = |_| (Outcome::status(200), 20);
            all.extend(drive(&mut g, T0, T0 + 60 * SECOND, &mut ok));
        }
        all.sort_unstable();
        // Fewer requests a second than senders: each may put one into the
        // same second, and the average holds.
        let most = rate.max(senders) as usize;
        for (i, at) in all.iter().enumerate() {
            let in_window = all[i..].iter().take_while(|s| **s < at + SECOND).count();
            assert!(
                in_window <= most,
                "{senders} senders at {rate}/s: {in_window} requests in the second from {at}"
            );
        }
        // Each uses its whole part: rate / senders rounded down, a second.
        let own = (rate / senders) as usize;
        let expected = if own > 0 {
            60 * own * senders as usize
        } else {
            60 * rate as usize
        };
        eprintln!(
            "{senders} senders sharing {rate}/s: {} requests in 60 s",
            all.len()
        );
        assert!(
            all.len() >= expected * 98 / 100 && all.len() <= 60 * rate as usize + senders as usize,
            "{} of {expected}",
            all.len()
        );
    }
}

#[test]
fn senders_sharing_a_cap_each_take_their_part_and_keep_one() {
    let config = ProtectionConfig {
        max_in_flight: Some(4),
        ..ProtectionConfig::default()
    };
    for (senders, own) in [(1, 4), (2, 2), (3, 1), (4, 1), (9, 1), (0, 4)] {
        let mut g = guard(config);
        g.handle_senders(senders);
        assert_eq!(g.own_max_in_flight(), Some(own), "{senders} senders");
        let mut slow = |_| (Outcome::status(200), 1000);
        let sent = drive(&mut g, T0, T0 + 10 * SECOND, &mut slow);
        assert_eq!(sent.len(), 10 * own as usize, "{senders} senders");
    }
    // Without a cap there is nothing to share.
    let mut g = guard(ProtectionConfig::default());
    g.handle_senders(3);
    assert_eq!(g.own_max_in_flight(), None);
    assert!(!ProtectionConfig::default().is_shared() && config.is_shared());
}

#[test]
fn retry_after_on_429_and_503_pauses_the_endpoint_for_every_call() {
    for status in [429, 503] {
        let mut g = guard(ProtectionConfig::default());
        let mut answered = false;
        let mut once = |_| {
            if answered {
                (Outcome::status(200), 10)
            } else {
                answered = true;
                (
                    Outcome::Response {
                        status,
                        retry_after: Some("5".into()),
                    },
                    10,
                )
            }
        };
        let sent = drive(&mut g, T0, T0 + 20 * SECOND, &mut once);
        // The first request is answered at T0 + 10 with "wait 5 s"; other
        // requests leave in that 10 ms, then nothing until T0 + 5,010.
        let gap: Vec<_> = sent
            .iter()
            .filter(|s| **s > T0 + 10 && **s < T0 + 10 + 5 * SECOND)
            .collect();
        assert!(gap.is_empty(), "{status}: sent during the pause: {gap:?}");
        assert!(
            sent.contains(&(T0 + 10 + 5 * SECOND)),
            "{status}: resumed on time"
        );
        let kinds: Vec<&str> = std::iter::from_fn(|| g.poll_event())
            .map(|e| e.to.as_str())
            .collect();
        assert_eq!(kinds, ["slowed", "healthy"], "{status}");
    }
}

#[test]
fn senders_sharing_holds_probe_a_dead_receiver_together_and_heed_one_retry_after() {
    // A receiver down for an hour, and a second sender that starts two
    // minutes in (a relay started or restarted) while the first holds the
    // circuit open: sharing, the new one sends nothing but the probes, at
    // the first one's times; on its own, it floods its slots first.
    let start = T0 + 2 * 60 * SECOND;
    let mut first = guard(ProtectionConfig::default());
    let mut down = |_| (Outcome::connection("refused"), 5);
    drive(&mut first, T0, start, &mut down);
    let mut down = |_| (Outcome::connection("refused"), 5);
    let fresh = EndpointGuard::new(ProtectionConfig::default(), t(start)).unwrap();
    let mut pair = [first.clone(), fresh.clone()];
    let sent = drive_many(&mut pair, start, T0 + HOUR, &mut down, true);
    let mut alone = [first, fresh];
    let apart = drive_many(&mut alone, start, T0 + HOUR, &mut down, false);
    eprintln!(
        "a sender joining while the circuit is open, over the rest of an hour: {} requests sharing holds, {} on its own",
        sent[1].len(),
        apart[1].len()
    );
    assert_eq!(sent[1], sent[0], "the two probe together");
    assert!(sent[1].len() <= 10, "{:?}", sent[1]);
    assert!(apart[1].len() >= HOST_SLOTS, "{}", apart[1].len());

    // A 429 with Retry-After: 5 to one sender: the other stops within a
    // sync, and neither sends until the pause ends.
    let mut once = busy_once();
    let limited = ProtectionConfig {
        rate_per_second: Some(100),
        ..ProtectionConfig::default()
    };
    let mut pair = [guard(limited), guard(limited)];
    let sent = drive_many(&mut pair, T0, T0 + 20 * SECOND, &mut once, true);
    let told = T0 + HOLD_SYNC_MS as i64;
    for (i, s) in sent.iter().enumerate() {
        let during: Vec<_> = s
            .iter()
            .filter(|at| **at >= told && **at < T0 + 10 + 5 * SECOND)
            .collect();
        assert!(
            during.is_empty(),
            "sender {i} sent during the pause: {during:?}"
        );
        assert!(
            s.iter().any(|at| *at >= T0 + 10 + 5 * SECOND),
            "sender {i} resumed"
        );
    }
    // Without sharing, the sender that was not told keeps sending.
    let mut once = busy_once();
    let mut pair = [guard(limited), guard(limited)];
    let sent = drive_many(&mut pair, T0, T0 + 20 * SECOND, &mut once, false);
    assert!(sent[1]
        .iter()
        .any(|at| *at >= told && *at < T0 + 5 * SECOND));
}

#[test]
fn a_hold_outlasts_and_merges_by_its_later_parts() {
    let h = |p: Option<i64>, o: Option<i64>| Hold {
        paused_until: p.map(t),
        open_until: o.map(t),
        open_ms: o.map_or(0, |_| 30_000),
    };
    assert!(h(Some(T0), None).outlasts(None));
    assert!(!h(None, None).outlasts(None));
    assert!(h(Some(T0 + 1), None).outlasts(Some(&h(Some(T0), None))));
    assert!(!h(Some(T0), None).outlasts(Some(&h(Some(T0), Some(T0)))));
    assert!(h(None, Some(T0 + 1)).outlasts(Some(&h(Some(T0 + 5), Some(T0)))));
    assert_eq!(
        h(Some(T0 + 5), Some(T0)).merge(Some(&h(Some(T0), Some(T0 + 9)))),
        h(Some(T0 + 5), Some(T0 + 9))
    );
    // A guard that is probing keeps probing; a disabled one stays so.
    let mut g = guard(ProtectionConfig::default());
    g.disable(t(T0));
    g.handle_hold(t(T0), &h(Some(T0 + 5), Some(T0 + 5)));
    assert_eq!(g.endpoint_state(t(T0)), EndpointState::Disabled);
    // A hold in the past changes nothing.
    let mut g = guard(ProtectionConfig::default());
    g.handle_hold(t(T0 + 10), &h(Some(T0), Some(T0)));
    assert_eq!(g.endpoint_state(t(T0 + 10)), EndpointState::Healthy);
    assert_eq!(g.hold(t(T0 + 10)), None);
}

#[test]
fn a_429_without_retry_after_or_many_429s_never_open_the_circuit() {
    let mut g = guard(ProtectionConfig::default());
    let mut busy = |_| (Outcome::status(429), 5);
    let sent = drive(&mut g, T0, T0 + 10 * SECOND, &mut busy);
    assert!(sent.len() > 100);
    assert_eq!(
        g.endpoint_state(t(T0 + 10 * SECOND)),
        EndpointState::Healthy
    );
}

#[test]
fn an_endpoint_failing_past_its_period_is_disabled_and_enabled_by_the_operator() {
    let period = 6 * HOUR;
    let mut g = guard(ProtectionConfig {
        disable_after_ms: Some(period as u64),
        ..ProtectionConfig::default()
    });
    let mut down = |_| (Outcome::status(500), 5);
    let sent = drive(&mut g, T0, T0 + 8 * HOUR, &mut down);
    let last = *sent.last().unwrap();
    assert!(last >= T0 + period, "disabled too early, at {last}");
    assert!(last <= T0 + period + MAX_BREAKER_OPEN_MS as i64 + 5);
    assert_eq!(g.endpoint_state(t(T0 + 8 * HOUR)), EndpointState::Disabled);
    assert_eq!(g.poll_permit(t(T0 + 8 * HOUR)), Permit::Disabled);
    let disabled: Vec<_> = std::iter::from_fn(|| g.poll_event())
        .filter(|e| e.to == EndpointState::Disabled)
        .collect();
    assert_eq!(disabled.len(), 1);
    g.enable(t(T0 + 8 * HOUR));
    assert_eq!(g.endpoint_state(t(T0 + 8 * HOUR)), EndpointState::Healthy);
    assert_eq!(g.poll_permit(t(T0 + 8 * HOUR)), Permit::Send);
}

#[test]
fn refusals_and_successes_between_failures_keep_the_circuit_closed() {
    let mut g = guard(ProtectionConfig::default());
    let mut n = 0;
    // Nine failures, then a success, over and over: never ten in a row.
    let mut flaky = |_| {
        n += 1;
        if n % 10 == 0 {
            (Outcome::status(200), 5)
        } else {
            (Outcome::Timeout, 5)
        }
    };
    let sent = drive(&mut g, T0, T0 + 60 * SECOND, &mut flaky);
    assert!(sent.len() > 5000);
    assert_eq!(
        g.endpoint_state(t(T0 + 60 * SECOND)),
        EndpointState::Healthy
    );
    // Without the breaker, a dead receiver gets every request.
    let mut g = guard(ProtectionConfig {
        breaker_failures: 0,
        ..ProtectionConfig::default()
    });
    let mut down = |_| (Outcome::Timeout, 5);
    assert!(drive(&mut g, T0, T0 + 60 * SECOND, &mut down).len() > 5000);
}

#[test]
fn the_state_survives_a_store_and_restore() {
    let config = ProtectionConfig {
        rate_per_second: Some(2),
        ..ProtectionConfig::default()
    };
    let mut g = guard(config);
    let mut down = |_| (Outcome::connection("refused"), 5);
    drive(&mut g, T0, T0 + 20 * SECOND, &mut down);
    let text = serde_json::to_string(g.state()).unwrap();
    let state: GuardState = serde_json::from_str(&text).unwrap();
    assert_eq!(&state, g.state());
    let now = t(T0 + 20 * SECOND);
    let mut back = EndpointGuard::restore(config, state, now).unwrap();
    assert_eq!(back.endpoint_state(now), g.endpoint_state(now));
    assert!(matches!(
        back.endpoint_state(now),
        EndpointState::CircuitOpen { .. }
    ));
    assert_eq!(back.poll_permit(now), g.poll_permit(now));
    assert_eq!(back.poll_event(), None, "a restore is no change");
}

#[test]
fn settings_out_of_range_are_refused_with_the_settings_code() {
    let bad = [
        ProtectionConfig {
            rate_per_second: Some(0),
            ..ProtectionConfig::default()
        },
        ProtectionConfig {
            max_in_flight: Some(0),
            ..ProtectionConfig::default()
        },
        ProtectionConfig {
            breaker_open_ms: 10,
            ..ProtectionConfig::default()
        },
        ProtectionConfig {
            disable_after_ms: Some(60_000),
            ..ProtectionConfig::default()
        },
    ];
    for config in bad {
        let e = EndpointGuard::new(config, t(T0)).unwrap_err();
        assert_eq!(e.code().as_str(), "invalid_settings", "{e}");
        assert_eq!(
            callpost_core::Error::from(e).code().as_str(),
            "invalid_settings"
        );
    }
    // The breaker's open time is not checked when the breaker is off.
    let off = ProtectionConfig {
        breaker_failures: 0,
        breaker_open_ms: 0,
        ..ProtectionConfig::default()
    };
    assert!(off.validate().is_ok());
    let json: ProtectionConfig = serde_json::from_str(r#"{"rate_per_second": 10}"#).unwrap();
    assert_eq!(json.rate_per_second, Some(10));
    assert_eq!(json.breaker_failures, DEFAULT_BREAKER_FAILURES);
    assert!(serde_json::from_str::<ProtectionConfig>(r#"{"rate": 10}"#).is_err());
}
