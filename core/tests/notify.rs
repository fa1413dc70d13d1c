//! The operator's notifier on a fake clock: which events it sends and when,
//! and how each reaches the operator's destination (failover, backoff, the
//! same Idempotency-Key on every try, giving up).
// Test code: a panic is how it reports.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use callpost_core::notify::{
    DATABASE_UNREACHABLE_AFTER_MS, EVENT_RETRY_WINDOW_MS, MAX_QUEUED_EVENTS,
};
use callpost_core::protection::{EndpointState, GuardEvent};
use callpost_core::signature::{verify, Secret};
use callpost_core::{EndpointConfig, Notifier, NotifierConfig, Outcome, Timestamp, Webhooks};
use serde_json::Value;

const T0: i64 = 1_795_341_845_000;
const SECRET: &str = "operator-secret";

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

fn notifier(urls: &[&str], config: NotifierConfig) -> Notifier {
    let eps: Vec<EndpointConfig> = urls.iter().map(|u| EndpointConfig::new(*u)).collect();
    let hooks = Webhooks::new(&eps, Some(SECRET.as_bytes())).unwrap();
    Notifier::new(hooks, config, 7).unwrap()
}

/// What a receiver saw: (time, URL, idempotency key, body).
type Seen = Vec<(i64, String, String, Value)>;

/// Runs the notifier from `from` to `to`, answering each request with
/// `answer(url, n)` at once, and returns what was sent. Every request must
/// carry a valid signature.
fn run(
    n: &mut Notifier,
    from: i64,
    to: i64,
    answer: &mut dyn FnMut(&str, usize) -> Outcome,
) -> Seen {
    let mut seen = vec![];
    let mut now = from;
    let mut random = 0u8;
    while now <= to {
        random = random.wrapping_add(1);
        while let Some(a) = n.poll_request(t(now), [random; 16]) {
            let r = &a.request;
            let sig = r.header("X-Signature").unwrap();
            let secrets = [Secret::new(SECRET).unwrap()];
            assert!(verify(&r.body, sig, &secrets).unwrap(), "signed");
            let key = r.header("Idempotency-Key").unwrap().to_owned();
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(body["id"], key, "the id is the Idempotency-Key");
            seen.push((now, r.url.clone(), key, body));
            let outcome = answer(&r.url, seen.len());
            n.handle_response(t(now), a.token, &outcome);
            random = random.wrapping_add(1);
        }
        match n.poll_timeout() {
            Some(at) if at.as_millis() > now => now = at.as_millis().min(to + 1),
            Some(_) => now += 1,
            None => break,
        }
    }
    seen
}

fn ok(_: &str, _: usize) -> Outcome {
    Outcome::status(200)
}

fn opened(at: i64) -> GuardEvent {
    GuardEvent {
        at: t(at),
        from: EndpointState::Healthy,
        to: EndpointState::CircuitOpen {
            until: t(at + 30_000),
        },
    }
}

#[test]
fn a_circuit_opening_is_sent_at_once_signed_and_without_credentials() {
    let mut n = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig::default(),
    );
    n.handle_guard_event(
        t(T0),
        "https://user:pw@hooks.example.com/in?token=x",
        &opened(T0),
        None,
    );
    let seen = run(&mut n, T0, T0 + 1000, &mut ok);
    assert_eq!(seen.len(), 1);
    let body = &seen[0].3;
    assert_eq!(body["type"], "endpoint.circuit_opened");
    assert_eq!(body["version"], 1);
    assert_eq!(body["data"]["url"], "https://***@hooks.example.com/in");
    assert_eq!(seen[0].0, T0);
    assert_eq!(n.queued(), 0);
}

#[test]
fn dead_letters_are_counted_over_the_window_one_event_per_window() {
    let mut n = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig {
            dead_letter_window_ms: 60_000,
            ..NotifierConfig::default()
        },
    );
    // An outage kills 3,000 calls of two sources within the minute.
    for i in 0..3000 {
        let source = if i % 3 == 0 { "app" } else { "web" };
        n.handle_dead_letters(t(T0 + i * 10), source, 1);
    }
    let seen = run(&mut n, T0, T0 + 10 * 60_000, &mut ok);
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (at, _, _, body) = &seen[0];
    assert_eq!(*at, T0 + 60_000, "sent when the window ends");
    assert_eq!(body["type"], "calls.dead_lettered");
    assert_eq!(body["data"]["count"], 3000);
    assert_eq!(body["data"]["sources"]["app"], 1000);
    assert_eq!(body["data"]["sources"]["web"], 2000);
    assert!(body["data"].get("destinations").is_none(), "none named");
    // The next dead letter opens a new window.
    n.handle_dead_letters(t(T0 + 11 * 60_000), "web", 2);
    let more = run(&mut n, T0 + 11 * 60_000, T0 + 13 * 60_000, &mut ok);
    assert_eq!(more.len(), 1);
    assert_eq!(more[0].3["data"]["count"], 2);
    assert_eq!(more[0].0, T0 + 12 * 60_000);
}

#[test]
fn dead_letters_name_their_destinations_when_the_host_does() {
    let mut n = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig {
            dead_letter_window_ms: 60_000,
            ..NotifierConfig::default()
        },
    );
    n.handle_dead_letters_to(t(T0), "shop", "crm", 2);
    n.handle_dead_letters_to(t(T0 + 1), "shop", "chat", 1);
    n.handle_dead_letters_to(t(T0 + 2), "web", "webhooks", 4);
    let seen = run(&mut n, T0, T0 + 2 * 60_000, &mut ok);
    assert_eq!(seen.len(), 1, "{seen:?}");
    let data = &seen[0].3["data"];
    assert_eq!(data["count"], 7);
    assert_eq!(data["sources"]["shop"], 3);
    assert_eq!(data["destinations"]["shop"]["crm"], 2);
    assert_eq!(data["destinations"]["shop"]["chat"], 1);
    assert_eq!(data["destinations"]["web"]["webhooks"], 4);
}

#[test]
fn a_backlog_is_reported_as_it_crosses_and_again_only_after_half() {
    let mut n = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig {
            backlog_threshold: Some(1000),
            ..NotifierConfig::default()
        },
    );
    let mut now = T0;
    let mut sent = 0;
    for pending in [10, 999, 1000, 1001, 5000, 1200, 900, 501, 1500, 400, 1001] {
        n.handle_backlog(t(now), pending, Some(t(T0)));
        sent += run(&mut n, now, now + 1000, &mut ok).len();
        now += 5000;
    }
    // At 1001 (crossing); not again at 1500 (it never fell to 500); again
    // at the last 1001, after 400.
    assert_eq!(sent, 2);
    let mut quiet = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig::default(),
    );
    quiet.handle_backlog(t(T0), 1_000_000, None);
    assert_eq!(
        run(&mut quiet, T0, T0 + 1000, &mut ok).len(),
        0,
        "no threshold, no event"
    );
}

#[test]
fn the_database_is_reported_once_per_outage_after_failing_for_a_while() {
    let mut n = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig::default(),
    );
    let after = DATABASE_UNREACHABLE_AFTER_MS as i64;
    let mut sent = vec![];
    // A single failure between successes: no outage.
    for (at, r) in [
        (0, Err("timeout")),
        (5_000, Ok(())),
        (after, Err("timeout")),
    ] {
        n.handle_database(t(T0 + at), r);
    }
    sent.extend(run(&mut n, T0, T0 + after, &mut ok));
    assert!(sent.is_empty());
    // Failing from `after` on: reported once it has failed for `after`.
    let mut at = after;
    while at <= 10 * after {
        n.handle_database(t(T0 + at), Err("timeout"));
        sent.extend(run(&mut n, T0 + at, T0 + at + 1, &mut ok));
        at += 5_000;
    }
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, T0 + 2 * after);
    assert_eq!(sent[0].3["type"], "database.unreachable");
    assert_eq!(sent[0].3["data"]["reason"], "timeout");
    // Back: told once, with when the outage began (a second success adds
    // nothing).
    n.handle_database(t(T0 + 11 * after), Ok(()));
    n.handle_database(t(T0 + 11 * after + 5_000), Ok(()));
    let back = run(&mut n, T0 + 11 * after, T0 + 11 * after + 5_001, &mut ok);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].3["type"], "database.recovered");
    assert_eq!(back[0].3["data"]["since"], sent[0].3["data"]["since"]);
    // Down again: a new outage, a new event.
    for k in 0..4 {
        n.handle_database(t(T0 + 12 * after + k * 5_000), Err("refused"));
    }
    assert_eq!(
        run(&mut n, T0 + 14 * after, T0 + 14 * after + 1, &mut ok).len(),
        1
    );
}

#[test]
fn a_failing_url_fails_over_then_backs_off_with_one_idempotency_key() {
    let urls = ["https://a.example.com/ops", "https://b.example.com/ops"];
    let mut n = notifier(&urls, NotifierConfig::default());
    n.handle_guard_event(t(T0), "https://hooks.example.com/in", &opened(T0), None);
    // Both URLs fail twice; then b answers.
    let mut answer = |url: &str, k: usize| {
        if k >= 5 && url.starts_with("https://b.") {
            Outcome::status(200)
        } else {
            Outcome::status(503)
        }
    };
    let seen = run(&mut n, T0, T0 + 3_600_000, &mut answer);
    let urls_seen: Vec<&str> = seen.iter().map(|s| &s.1[8..9]).collect();
    assert_eq!(urls_seen, ["a", "b", "a", "b", "a", "b"]);
    assert!(
        seen.iter().all(|s| s.2 == seen[0].2),
        "one key for every try"
    );
    // Failover is immediate; a new round waits the backoff (10 s, 20 s
    // ceilings, at least half of each).
    assert_eq!(seen[1].0, seen[0].0);
    let gap1 = seen[2].0 - seen[1].0;
    let gap2 = seen[4].0 - seen[3].0;
    assert!((5_000..=10_000).contains(&gap1), "{gap1}");
    assert!((10_000..=20_000).contains(&gap2), "{gap2}");
    assert_eq!(n.queued(), 0);
    assert_eq!(n.dropped(), 0);
}

#[test]
fn an_event_is_dropped_after_its_window_or_when_every_url_refuses_it() {
    let mut n = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig::default(),
    );
    n.handle_guard_event(t(T0), "https://hooks.example.com/in", &opened(T0), None);
    let down = run(
        &mut n,
        T0,
        T0 + 3 * EVENT_RETRY_WINDOW_MS as i64,
        &mut |_, _| Outcome::Timeout,
    );
    let last = down.last().unwrap().0;
    assert!(
        last - T0 <= EVENT_RETRY_WINDOW_MS as i64 + 30 * 60_000,
        "{}",
        last - T0
    );
    assert!(
        last - T0 >= EVENT_RETRY_WINDOW_MS as i64 - 30 * 60_000,
        "{}",
        last - T0
    );
    assert!(down.len() < 20, "backed off: {}", down.len());
    assert_eq!((n.queued(), n.dropped()), (0, 1));
    // A 4xx from every URL: dropped at once.
    n.handle_guard_event(t(T0), "https://hooks.example.com/in", &opened(T0), None);
    let refused = run(&mut n, T0, T0 + 60_000, &mut |_, _| Outcome::status(401));
    assert_eq!(refused.len(), 1);
    assert_eq!((n.queued(), n.dropped()), (0, 2));
}

#[test]
fn a_full_queue_drops_new_events_and_counts_them() {
    let mut n = notifier(
        &["https://ops.example.com/events"],
        NotifierConfig::default(),
    );
    for i in 0..MAX_QUEUED_EVENTS + 5 {
        n.handle_guard_event(
            t(T0),
            &format!("https://h{i}.example.com/"),
            &opened(T0),
            None,
        );
    }
    assert_eq!((n.queued(), n.dropped()), (MAX_QUEUED_EVENTS, 5));
}

#[test]
fn settings_out_of_range_are_refused_with_the_settings_code() {
    for bad in [
        NotifierConfig {
            dead_letter_window_ms: 999,
            ..NotifierConfig::default()
        },
        NotifierConfig {
            dead_letter_window_ms: 3_600_001,
            ..NotifierConfig::default()
        },
        NotifierConfig {
            backlog_threshold: Some(0),
            ..NotifierConfig::default()
        },
    ] {
        let e = bad.validate().unwrap_err();
        assert_eq!(e.code().as_str(), "invalid_settings", "{e}");
    }
    assert!(NotifierConfig::default().validate().is_ok());
}
