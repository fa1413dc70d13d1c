//! The batching client's state machine on a fake clock.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::batcher::{MAX_BATCH_BYTES, MAX_MESSAGE_BYTES};
use callpost_core::{
    BatchRequest, BatcherConfig, BatcherEvent, Call, CallKind, ConfigError, EnqueueError,
    FailReason, Map, Outcome, Timestamp, Value,
};
use proptest::prelude::*;
use std::collections::HashMap;

const T0: i64 = 1_795_341_845_123;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

/// The core's `Batcher` with the clock as plain milliseconds, which keeps
/// the arithmetic of these tests readable.
#[derive(Debug)]
struct Batcher(callpost_core::Batcher);

impl Batcher {
    fn new(config: BatcherConfig, now: i64) -> Result<Self, ConfigError> {
        callpost_core::Batcher::new(config, t(now)).map(Self)
    }
    fn handle_call(
        &mut self,
        now: i64,
        call: Call,
        random: [u8; 16],
    ) -> Result<String, EnqueueError> {
        self.0.handle_call(t(now), call, random)
    }
    fn flush(&mut self, now: i64) {
        self.0.flush(t(now));
    }
    fn shutdown(&mut self) {
        self.0.shutdown();
    }
    fn poll_request(&mut self, now: i64) -> Option<BatchRequest> {
        self.0.poll_request(t(now))
    }
    fn handle_response(&mut self, now: i64, batch_id: u64, outcome: Outcome) {
        self.0.handle_response(t(now), batch_id, outcome);
    }
    fn handle_timeout(&mut self, now: i64) {
        self.0.handle_timeout(t(now));
    }
    fn poll_timeout(&self) -> Option<i64> {
        self.0.poll_timeout().map(Timestamp::as_millis)
    }
    fn poll_event(&mut self) -> Option<BatcherEvent> {
        self.0.poll_event()
    }
    fn poll_wake(&mut self) -> bool {
        self.0.poll_wake()
    }
    fn queued(&self) -> usize {
        self.0.queued()
    }
    fn is_idle(&self) -> bool {
        self.0.is_idle()
    }
}

fn config() -> BatcherConfig {
    BatcherConfig {
        jitter_seed: 42,
        ..BatcherConfig::new("wk_test")
    }
}

fn track(i: usize, pad: usize) -> Call {
    let mut c = Call::new(CallKind::Track);
    c.user_id = Some(format!("user-{i}"));
    c.event = Some("Tested".into());
    let mut p = Map::new();
    p.insert("i".into(), Value::Number(i as f64));
    p.insert("pad".into(), Value::String("x".repeat(pad)));
    c.properties = Some(p.into());
    c
}

fn random(i: usize) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&(i as u64).to_le_bytes());
    r
}

fn events(b: &mut Batcher) -> Vec<BatcherEvent> {
    std::iter::from_fn(|| b.poll_event()).collect()
}

fn body(req: &BatchRequest) -> serde_json::Value {
    serde_json::from_slice(&req.request.body).unwrap()
}

#[test]
fn flushes_at_twenty_with_a_segment_envelope() {
    let mut b = Batcher::new(config(), T0).unwrap();
    for i in 0..19 {
        b.handle_call(T0 + i as i64, track(i, 0), random(i))
            .unwrap();
        assert!(
            b.poll_request(T0 + i as i64).is_none(),
            "no flush before 20"
        );
    }
    b.handle_call(T0 + 19, track(19, 0), random(19)).unwrap();
    let req = b.poll_request(T0 + 19).unwrap();
    assert_eq!(req.message_count, 20);
    assert_eq!(req.request.url, "https://api.segment.io/v1/batch");
    // Basic auth: base64("wk_test:")
    assert_eq!(
        req.request.header("Authorization"),
        Some("Basic d2tfdGVzdDo=")
    );
    assert_eq!(req.request.header("Content-Type"), Some("application/json"));
    let v = body(&req);
    assert_eq!(v["sentAt"], "2026-11-22T10:04:05.142Z");
    let batch = v["batch"].as_array().unwrap();
    assert_eq!(batch.len(), 20);
    let m = &batch[3];
    assert_eq!(m["type"], "track");
    assert_eq!(m["userId"], "user-3");
    assert_eq!(m["timestamp"], "2026-11-22T10:04:05.126Z");
    assert_eq!(m["context"]["library"]["name"], "callpost");
    // UUID v4 from the caller's bytes: version and variant bits set.
    let id = m["messageId"].as_str().unwrap();
    assert_eq!(id, "03000000-0000-4000-8000-000000000000");
    b.handle_response(T0 + 30, req.batch_id, Outcome::status(200));
    let ev = events(&mut b);
    assert!(
        matches!(&ev[..], [BatcherEvent::Delivered { message_ids, .. }] if message_ids.len() == 20)
    );
    assert!(b.is_idle());
}

#[test]
fn flushes_after_the_interval() {
    let mut b = Batcher::new(config(), T0).unwrap();
    b.handle_call(T0 + 1000, track(0, 0), random(0)).unwrap();
    b.handle_call(T0 + 2000, track(1, 0), random(1)).unwrap();
    assert_eq!(b.poll_timeout(), Some(T0 + 5000));
    assert!(b.poll_request(T0 + 4999).is_none());
    let req = b.poll_request(T0 + 5000).unwrap();
    assert_eq!(req.message_count, 2);
    b.handle_response(T0 + 5010, req.batch_id, Outcome::status(200));
    // The interval restarts at the flush.
    b.handle_call(T0 + 6000, track(2, 0), random(2)).unwrap();
    assert_eq!(b.poll_timeout(), Some(T0 + 10_000));
}

#[test]
fn flush_at_one_sends_every_message_alone() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 1,
            ..config()
        },
        T0,
    )
    .unwrap();
    b.handle_call(T0, track(0, 0), random(0)).unwrap();
    assert_eq!(b.poll_request(T0).unwrap().message_count, 1);
}

#[test]
fn a_message_over_32kb_is_refused_and_nothing_else_changes() {
    let mut b = Batcher::new(config(), T0).unwrap();
    b.handle_call(T0, track(0, 10), random(0)).unwrap();
    let err = b
        .handle_call(T0, track(1, MAX_MESSAGE_BYTES), random(1))
        .unwrap_err();
    assert_eq!(err.code(), "message_too_large");
    assert_eq!(b.queued(), 1);
    // Just under the limit is fine.
    b.handle_call(T0, track(2, MAX_MESSAGE_BYTES - 300), random(2))
        .unwrap();
    assert_eq!(b.queued(), 2);
}

#[test]
fn a_prepared_message_is_what_handle_call_queues_and_is_queued_only_when_handed_back() {
    let mut b = Batcher::new(
        BatcherConfig {
            max_queue: 1,
            flush_at: 1,
            ..config()
        },
        T0,
    )
    .unwrap();
    let m = b.0.prepare(t(T0), track(1, 0), random(1)).unwrap();
    assert_eq!(b.queued(), 0);
    assert_eq!(b.poll_timeout(), None);
    let mut twin = Batcher::new(config(), T0).unwrap();
    let id = twin.handle_call(T0, track(1, 0), random(1)).unwrap();
    assert_eq!(m.message_id(), id);
    twin.flush(T0);
    let sent = twin.poll_request(T0).unwrap().request.body;
    assert!(
        String::from_utf8(sent).unwrap().contains(m.json()),
        "{}",
        m.json()
    );
    // Invalid or too large: refused by `prepare`, as by `handle_call`.
    assert_eq!(
        b.0.prepare(t(T0), Call::new(CallKind::Track), random(0))
            .unwrap_err()
            .code(),
        "missing_identity"
    );
    b.0.handle_message(m.clone()).unwrap();
    assert_eq!(b.queued(), 1);
    assert!(
        b.poll_timeout().is_some_and(|w| w <= T0),
        "flush_at 1: due now"
    );
    // A full queue refuses the message (the host still has it to report).
    assert_eq!(
        b.0.handle_message(m.clone()).unwrap_err().code(),
        "queue_full"
    );
    b.shutdown();
    assert_eq!(b.0.handle_message(m).unwrap_err().code(), "closed");
}

#[test]
fn invalid_calls_and_a_full_queue_are_typed_errors() {
    let mut b = Batcher::new(
        BatcherConfig {
            max_queue: 2,
            ..config()
        },
        T0,
    )
    .unwrap();
    assert_eq!(
        b.handle_call(T0, Call::new(CallKind::Track), random(0))
            .unwrap_err()
            .code(),
        "missing_identity"
    );
    b.handle_call(T0, track(0, 0), random(0)).unwrap();
    b.handle_call(T0, track(1, 0), random(1)).unwrap();
    assert_eq!(
        b.handle_call(T0, track(2, 0), random(2))
            .unwrap_err()
            .code(),
        "queue_full"
    );
    assert_eq!(
        Batcher::new(BatcherConfig::new(""), T0).unwrap_err().code(),
        "empty_write_key"
    );
    let bad = BatcherConfig {
        endpoint: "ftp://x.example".into(),
        ..config()
    };
    assert_eq!(
        Batcher::new(bad, T0).unwrap_err().code(),
        "invalid_endpoint"
    );
    // A working batcher's Debug shows neither the write key (it is in the
    // Authorization header, base64) nor the messages it holds.
    let mut b = Batcher::new(config(), T0).unwrap();
    b.handle_call(T0, track(7, 3), random(7)).unwrap();
    let shown = format!("{b:?}");
    let basic = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "wk_test:");
    for secret in ["wk_test", &basic, "user-7", "Tested"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("queued: 1"), "{shown}");
    // Credentials in a refused endpoint appear in neither the error nor Debug.
    let with_password = BatcherConfig {
        endpoint: "https://wk:hunter2@api.example/".into(),
        ..config()
    };
    let debug = format!("{with_password:?}");
    let err = Batcher::new(with_password, T0).unwrap_err();
    assert_eq!(err.code(), "invalid_endpoint");
    for shown in [err.to_string(), debug] {
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("https://***@api.example/"), "{shown}");
    }
    assert_eq!(
        Batcher::new(
            BatcherConfig {
                flush_at: 0,
                ..config()
            },
            T0
        )
        .unwrap_err()
        .code(),
        "invalid_config"
    );
}

#[test]
fn custom_endpoint_and_kept_ids_and_timestamps() {
    let cfg = BatcherConfig {
        endpoint: "http://127.0.0.1:9/ingest/".into(),
        flush_at: 1,
        ..config()
    };
    let mut b = Batcher::new(cfg, T0).unwrap();
    let mut c = track(0, 0);
    c.message_id = Some("mine".into());
    c.timestamp = Some(Timestamp::parse("2020-01-01T00:00:00Z").unwrap());
    assert_eq!(b.handle_call(T0, c, random(0)).unwrap(), "mine");
    let req = b.poll_request(T0).unwrap();
    assert_eq!(req.request.url, "http://127.0.0.1:9/ingest/v1/batch");
    let v = body(&req);
    assert_eq!(v["batch"][0]["messageId"], "mine");
    assert_eq!(
        v["batch"][0]["timestamp"], "2020-01-01T00:00:00.000Z",
        "historical imports keep their time"
    );
}

#[test]
fn four_xx_fails_for_good_and_reports_the_messages() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 2,
            ..config()
        },
        T0,
    )
    .unwrap();
    let id0 = b.handle_call(T0, track(0, 0), random(0)).unwrap();
    b.handle_call(T0, track(1, 0), random(1)).unwrap();
    let req = b.poll_request(T0).unwrap();
    b.handle_response(T0 + 5, req.batch_id, Outcome::status(400));
    let ev = events(&mut b);
    let [BatcherEvent::Failed {
        messages,
        reason: FailReason::Rejected(Outcome::Response { status: 400, .. }),
        ..
    }] = &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(messages.len(), 2);
    assert!(messages[0].json().contains("\"user-0\""));
    // The id and the JSON share one allocation; each accessor gets its own.
    assert_eq!(messages[0].message_id(), id0);
    let head = format!("{{\"type\":\"track\",\"messageId\":\"{id0}\",");
    assert!(
        messages[0].json().starts_with(&head),
        "{}",
        messages[0].json()
    );
    assert!(messages[0].json().ends_with('}'));
    assert!(b.is_idle());
    assert!(b.poll_request(T0 + 100_000).is_none(), "never retried");
}

#[test]
fn server_errors_are_retried_with_backoff_and_nothing_is_lost() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 3,
            ..config()
        },
        T0,
    )
    .unwrap();
    for i in 0..3 {
        b.handle_call(T0, track(i, 0), random(i)).unwrap();
    }
    let mut now = T0;
    let mut attempts = 0;
    loop {
        if let Some(req) = b.poll_request(now) {
            attempts += 1;
            let out = if attempts <= 3 {
                Outcome::status(500)
            } else {
                Outcome::status(200)
            };
            b.handle_response(now + 10, req.batch_id, out);
            continue;
        }
        let Some(t) = b.poll_timeout() else { break };
        now = t;
        b.handle_timeout(now);
    }
    let ev = events(&mut b);
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, BatcherEvent::Retrying { .. }))
            .count(),
        3
    );
    assert!(
        matches!(ev.last(), Some(BatcherEvent::Delivered { message_ids, .. }) if message_ids.len() == 3)
    );
}

#[test]
fn retry_after_429_is_honoured_and_attempts_are_bounded() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 1,
            max_attempts: 3,
            ..config()
        },
        T0,
    )
    .unwrap();
    b.handle_call(T0, track(0, 0), random(0)).unwrap();
    let req = b.poll_request(T0).unwrap();
    b.handle_response(
        T0,
        req.batch_id,
        Outcome::Response {
            status: 429,
            retry_after: Some("7".into()),
        },
    );
    assert_eq!(b.poll_timeout(), Some(T0 + 7000));
    assert!(b.poll_request(T0 + 6999).is_none());
    let req = b.poll_request(T0 + 7000).unwrap();
    assert_eq!(req.attempt, 2);
    b.handle_response(T0 + 7000, req.batch_id, Outcome::connection("reset"));
    let t = b.poll_timeout().unwrap();
    let req = b.poll_request(t).unwrap();
    b.handle_response(t, req.batch_id, Outcome::status(503));
    let ev = events(&mut b);
    assert!(
        matches!(ev.last(), Some(BatcherEvent::Failed { reason: FailReason::RetriesExhausted(_), messages, .. }) if messages.len() == 1),
        "{ev:?}"
    );
}

#[test]
fn unanswered_uploads_time_out() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 1,
            request_timeout_ms: 1000,
            ..config()
        },
        T0,
    )
    .unwrap();
    b.handle_call(T0, track(0, 0), random(0)).unwrap();
    let req = b.poll_request(T0).unwrap();
    assert_eq!(req.deadline, t(T0 + 1000));
    assert_eq!(b.poll_timeout(), Some(T0 + 1000));
    b.handle_timeout(T0 + 1000);
    assert!(matches!(
        &events(&mut b)[..],
        [BatcherEvent::Retrying {
            outcome: Outcome::Timeout,
            ..
        }]
    ));
    // A late answer to the timed-out attempt is ignored.
    b.handle_response(T0 + 1500, req.batch_id, Outcome::status(200));
    assert!(events(&mut b).is_empty());
}

#[test]
fn flush_releases_batches_waiting_in_backoff_and_shutdown_reports_the_rest() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 1,
            ..config()
        },
        T0,
    )
    .unwrap();
    b.handle_call(T0, track(0, 0), random(0)).unwrap();
    let req = b.poll_request(T0).unwrap();
    b.handle_response(
        T0,
        req.batch_id,
        Outcome::Response {
            status: 503,
            retry_after: Some("600".into()),
        },
    );
    b.handle_call(T0, track(1, 0), random(1)).unwrap();
    assert!(
        b.poll_request(T0 + 1).is_none(),
        "lane busy with the waiting batch"
    );
    b.flush(T0 + 2);
    let req = b.poll_request(T0 + 2).expect("the waiting batch goes now");
    assert_eq!(req.attempt, 2);
    b.handle_response(T0 + 3, req.batch_id, Outcome::status(200));
    let req = b.poll_request(T0 + 3).expect("then the queued message");
    assert_eq!(req.message_count, 1);
    // Shut down with that one in flight and two more queued.
    b.handle_call(T0 + 4, track(2, 0), random(2)).unwrap();
    b.handle_call(T0 + 4, track(3, 0), random(3)).unwrap();
    b.shutdown();
    let failed: usize = events(&mut b)
        .iter()
        .map(|e| match e {
            BatcherEvent::Failed {
                messages,
                reason: FailReason::Shutdown,
                ..
            } => messages.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(failed, 3);
    assert_eq!(
        b.handle_call(T0 + 5, track(4, 0), random(4))
            .unwrap_err()
            .code(),
        "closed"
    );
}

#[test]
fn a_long_queue_splits_into_batches_under_500kb() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 100,
            ..config()
        },
        T0,
    )
    .unwrap();
    for i in 0..300 {
        b.handle_call(T0, track(i, 20_000), random(i)).unwrap();
    }
    b.flush(T0);
    let mut sizes = vec![];
    let mut now = T0;
    while let Some(req) = b.poll_request(now) {
        assert!(
            req.request.body.len() <= MAX_BATCH_BYTES,
            "{}",
            req.request.body.len()
        );
        assert_eq!(
            body(&req)["batch"].as_array().unwrap().len(),
            req.message_count
        );
        sizes.push(req.message_count);
        now += 1;
        b.handle_response(now, req.batch_id, Outcome::status(200));
    }
    assert_eq!(sizes.iter().sum::<usize>(), 300);
    assert!(
        sizes.iter().all(|n| *n == 24 || *n == 300 % 24),
        "{sizes:?}"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Call { pad: usize, valid: bool },
    Advance(u32),
    Respond(u8),
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop_oneof![8 => 0usize..2000, 1 => 20_000usize..40_000], prop::bool::weighted(0.95))
            .prop_map(|(pad, valid)| Op::Call { pad, valid }),
        3 => (0u32..20_000).prop_map(Op::Advance),
        3 => any::<u8>().prop_map(Op::Respond),
        1 => Just(Op::Flush),
    ]
}

fn outcome_for(k: u8) -> Outcome {
    match k % 8 {
        0..=3 => Outcome::status(200),
        4 => Outcome::status(500),
        5 => Outcome::Response {
            status: 429,
            retry_after: Some("2".into()),
        },
        6 => Outcome::Timeout,
        _ => Outcome::status(if k % 16 == 7 { 400 } else { 503 }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every accepted message ends in exactly one Delivered or Failed event;
    /// batches hold at most flush_at messages and 500 KB; with the lane free
    /// and the host honouring poll_timeout, nothing waits past flush_after.
    #[test]
    fn every_message_is_accounted_for(ops in prop::collection::vec(op(), 1..150), flush_at in 1usize..30,
                                      in_flight in 1usize..3) {
        let cfg = BatcherConfig { flush_at, max_in_flight: in_flight, max_queue: 200, max_retry_ms: 60_000, ..config() };
        let mut b = Batcher::new(cfg, T0).unwrap();
        let mut now = T0;
        let mut accepted: HashMap<String, i64> = HashMap::new();
        let mut outcome: HashMap<String, &'static str> = HashMap::new();
        let mut in_flight_ids: Vec<u64> = vec![];
        let mut i = 0;
        let record = |b: &mut Batcher, outcome: &mut HashMap<String, &'static str>| {
            while let Some(e) = b.poll_event() {
                let (ids, kind): (Vec<String>, &'static str) = match e {
                    BatcherEvent::Delivered { message_ids, .. } => (message_ids, "delivered"),
                    BatcherEvent::Failed { messages, .. } => (messages.iter().map(|m| m.message_id().to_owned()).collect(), "failed"),
                    _ => continue,
                };
                for id in ids {
                    assert!(outcome.insert(id.clone(), kind).is_none(), "message {id} reported twice");
                }
            }
        };
        let drain = |b: &mut Batcher, now: i64, in_flight_ids: &mut Vec<u64>| {
            while let Some(req) = b.poll_request(now) {
                prop_assert!(req.message_count <= flush_at);
                prop_assert!(req.request.body.len() <= MAX_BATCH_BYTES);
                in_flight_ids.push(req.batch_id);
            }
            Ok(())
        };
        for op in ops {
            match op {
                Op::Call { pad, valid } => {
                    i += 1;
                    let mut c = track(i, pad);
                    if !valid { c.user_id = None; }
                    match b.handle_call(now, c, random(i)) {
                        Ok(id) => { accepted.insert(id, now); }
                        Err(e) => prop_assert!(matches!(e.code().as_str(), "message_too_large" | "queue_full" | "missing_identity"), "{e}"),
                    }
                }
                Op::Advance(ms) => {
                    now += ms as i64;
                    b.handle_timeout(now);
                }
                Op::Respond(k) => {
                    if !in_flight_ids.is_empty() {
                        let id = in_flight_ids.remove(k as usize % in_flight_ids.len());
                        b.handle_response(now, id, outcome_for(k));
                    }
                }
                Op::Flush => b.flush(now),
            }
            drain(&mut b, now, &mut in_flight_ids)?;
            record(&mut b, &mut outcome);
        }
        // Close: flush, then drive on the fake clock answering 200 until idle.
        b.flush(now);
        let mut guard = 0;
        while !b.is_idle() {
            guard += 1;
            prop_assert!(guard < 10_000);
            drain(&mut b, now, &mut in_flight_ids)?;
            for id in std::mem::take(&mut in_flight_ids) {
                b.handle_response(now, id, Outcome::status(200));
            }
            record(&mut b, &mut outcome);
            if let Some(t) = b.poll_timeout() { now = now.max(t); b.handle_timeout(now); }
        }
        record(&mut b, &mut outcome);
        let mut lost: Vec<&String> = accepted.keys().filter(|id| !outcome.contains_key(*id)).collect();
        lost.sort();
        prop_assert!(lost.is_empty(), "lost {lost:?}");
        prop_assert_eq!(outcome.len(), accepted.len(), "reported messages that were never accepted");
    }

    /// A sender that sleeps until the wake-up time it last read, and is woken
    /// only when poll_wake says so, never sleeps past the batcher's real
    /// wake-up time, whatever the calls, flushes and answers.
    #[test]
    fn a_sender_woken_by_poll_wake_never_oversleeps(ops in prop::collection::vec(op(), 1..120), flush_at in 1usize..25) {
        let mut b = Batcher::new(BatcherConfig { flush_at, max_queue: 100, ..config() }, T0).unwrap();
        let mut now = T0;
        let mut asleep_until = b.poll_timeout();
        let mut i = 0;
        for op in ops {
            match op {
                Op::Call { pad, valid } => {
                    i += 1;
                    let mut c = track(i, pad);
                    if !valid { c.user_id = None; }
                    let _ = b.handle_call(now, c, random(i));
                }
                Op::Flush => b.flush(now),
                Op::Advance(ms) => now += ms as i64,
                Op::Respond(_) => {}
            }
            if b.poll_wake() {
                asleep_until = b.poll_timeout();
            }
            // The sender's own turn: while its alarm is due, it runs the
            // batcher, answers every upload 200 and reads the next alarm.
            while let Some(t) = asleep_until.filter(|t| *t <= now) {
                b.handle_timeout(now.max(t));
                while let Some(req) = b.poll_request(now) {
                    b.handle_response(now, req.batch_id, Outcome::status(200));
                }
                while b.poll_event().is_some() {}
                let _ = b.poll_wake();
                asleep_until = b.poll_timeout();
                if asleep_until == Some(t) { break; }
            }
            if let Some(due) = b.poll_timeout() {
                prop_assert!(asleep_until.is_some_and(|a| a <= due),
                    "the batcher is due at {due} and the sender sleeps until {asleep_until:?}");
            }
        }
    }

    /// With instant 200s, no message waits in the queue past flush_after.
    #[test]
    fn flush_after_is_respected(gaps in prop::collection::vec(0i64..3000, 1..60), flush_at in 2usize..25) {
        let mut b = Batcher::new(BatcherConfig { flush_at, ..config() }, T0).unwrap();
        let mut now = T0;
        let mut enqueued_at: HashMap<String, i64> = HashMap::new();
        let mut sent_at: HashMap<String, i64> = HashMap::new();
        let send = |b: &mut Batcher, now: i64, sent_at: &mut HashMap<String, i64>| {
            while let Some(req) = b.poll_request(now) {
                let v: serde_json::Value = serde_json::from_slice(&req.request.body).unwrap();
                for m in v["batch"].as_array().unwrap() {
                    sent_at.insert(m["messageId"].as_str().unwrap().to_owned(), now);
                }
                b.handle_response(now, req.batch_id, Outcome::status(200));
            }
        };
        for (i, gap) in gaps.iter().enumerate() {
            // The host sleeps until poll_timeout or the next call, whichever is first.
            let next_call = now + gap;
            while let Some(t) = b.poll_timeout().filter(|t| *t <= next_call) {
                now = now.max(t);
                b.handle_timeout(now);
                send(&mut b, now, &mut sent_at);
            }
            now = next_call;
            let id = b.handle_call(now, track(i, 0), random(i)).unwrap();
            enqueued_at.insert(id, now);
            send(&mut b, now, &mut sent_at);
        }
        while let Some(t) = b.poll_timeout() { now = now.max(t); b.handle_timeout(now); send(&mut b, now, &mut sent_at); }
        for (id, t) in &enqueued_at {
            let s = sent_at[id];
            prop_assert!(s - t <= 5000, "message waited {} ms", s - t);
        }
    }
}

#[test]
fn batches_go_to_the_batch_path_under_the_endpoint() {
    let url_for = |endpoint: &str, batch_path: &str| {
        let mut b = Batcher::new(
            BatcherConfig {
                endpoint: endpoint.into(),
                batch_path: batch_path.into(),
                flush_at: 1,
                ..config()
            },
            T0,
        )
        .map_err(|e| e.code().as_str())?;
        b.handle_call(T0, track(1, 0), random(1)).unwrap();
        Ok::<_, &str>(b.poll_request(T0).unwrap().request.url)
    };
    assert_eq!(
        url_for("https://in.example/", "/v1/batch"),
        Ok("https://in.example/v1/batch".into())
    );
    assert_eq!(
        url_for("https://in.example/proxy", "/segment/batch"),
        Ok("https://in.example/proxy/segment/batch".into())
    );
    assert_eq!(
        url_for("https://in.example/collect", ""),
        Ok("https://in.example/collect".into())
    );
    for bad in ["v1/batch", "/v1/batch?x=1", "/v1#f"] {
        assert_eq!(
            url_for("https://in.example", bad),
            Err("invalid_endpoint"),
            "{bad}"
        );
    }
}

#[test]
fn poll_wake_is_raised_only_when_the_wake_up_time_moves_earlier() {
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 3,
            ..config()
        },
        T0,
    )
    .unwrap();
    assert!(!b.poll_wake(), "nothing queued");
    b.handle_call(T0, track(1, 0), random(1)).unwrap();
    assert!(b.poll_wake(), "the first message starts the flush timer");
    assert!(!b.poll_wake(), "reading it resets it");
    b.handle_call(T0 + 10, track(2, 0), random(2)).unwrap();
    assert!(!b.poll_wake(), "the timer is unchanged");
    b.handle_call(T0 + 20, track(3, 0), random(3)).unwrap();
    assert!(b.poll_wake(), "flush_at messages make a batch due now");
    let req = b.poll_request(T0 + 20).unwrap();
    b.handle_response(T0 + 20, req.batch_id, Outcome::status(200));
    assert!(!b.poll_wake(), "answers are the sender's own doing");
    b.flush(T0 + 30);
    assert!(!b.poll_wake(), "a flush with nothing queued moves nothing");
    b.handle_call(T0 + 40, track(4, 0), random(4)).unwrap();
    assert!(b.poll_wake());
    b.flush(T0 + 50);
    assert!(b.poll_wake(), "a flush makes the queued message due now");
}

#[test]
fn events_are_one_json_shape_in_either_key_case() {
    use callpost_core::KeyCase;
    let mut b = Batcher::new(
        BatcherConfig {
            flush_at: 1,
            max_attempts: 2,
            ..config()
        },
        T0,
    )
    .unwrap();
    let id = b.handle_call(T0, track(1, 0), random(1)).unwrap();
    let req = b.poll_request(T0).unwrap();
    b.handle_response(T0, req.batch_id, Outcome::status(500));
    let retrying = b.poll_event().unwrap();
    let v: serde_json::Value = serde_json::from_str(&retrying.to_json(KeyCase::Snake)).unwrap();
    let retry_at = b.poll_timeout().unwrap();
    assert_eq!(
        v,
        serde_json::json!({"kind": "retrying", "batch_id": req.batch_id, "attempt": 1,
                           "retry_at_ms": retry_at, "reason": "http status 500"})
    );
    b.handle_timeout(retry_at);
    let req = b.poll_request(retry_at).unwrap();
    b.handle_response(retry_at, req.batch_id, Outcome::status(500));
    let failed = b.poll_event().unwrap();
    let BatcherEvent::Failed { messages, .. } = &failed else {
        panic!("{failed:?}")
    };
    let json = messages[0].json().to_owned();
    let v: serde_json::Value = serde_json::from_str(&failed.to_json(KeyCase::Camel)).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"kind": "failed", "batchId": req.batch_id, "code": "retries_exhausted",
                           "reason": "retries exhausted, last: http status 500",
                           "messages": [{"messageId": id, "json": json}]})
    );
    b.handle_call(retry_at, track(2, 0), random(2)).unwrap();
    let req = b.poll_request(retry_at).unwrap();
    b.handle_response(retry_at, req.batch_id, Outcome::status(200));
    let v: serde_json::Value =
        serde_json::from_str(&b.poll_event().unwrap().to_json(KeyCase::Camel)).unwrap();
    assert_eq!(v["kind"], "delivered");
    assert_eq!(v["messageIds"].as_array().unwrap().len(), 1);
    b.handle_call(retry_at, track(3, 0), random(3)).unwrap();
    b.shutdown();
    let v: serde_json::Value =
        serde_json::from_str(&b.poll_event().unwrap().to_json(KeyCase::Snake)).unwrap();
    assert_eq!(v["batch_id"], serde_json::Value::Null, "never batched");
    assert_eq!(v["code"], "shutdown");
}
