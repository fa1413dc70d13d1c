//! The batcher and the delivery driven by arbitrary event sequences. Asserts:
//! no panic; every accepted message is reported exactly once (delivered or
//! failed) by the end; no batch over the limits; no delivery attempt starts
//! after the retry window; a restored delivery sends again what was in
//! flight, and saves as it was read.
//!
//! Bounded so a run costs about a millisecond: time jumps straight to the
//! next timer, and the few inputs that are expensive in themselves (many
//! ops, large messages, saving a state whose log grows with every attempt)
//! are capped well above what any limit or state needs.
#![no_main]

use arbitrary::Arbitrary;
use callpost_core::batcher::{MAX_BATCH_BYTES, MAX_MESSAGE_BYTES};
use callpost_core::{
    Batcher, BatcherConfig, BatcherEvent, Call, CallKind, Delivery, DeliveryConfig, EndpointConfig, Map, Mode, Outcome,
    Timestamp, Value, Webhooks,
};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;

/// Ops read per run: twice the largest queue ([`Input::max_queue`]), so
/// a run can still fill any queue and go on past it.
const MAX_OPS: usize = 256;

/// Padding built per run, over all calls: three full batches
/// ([`MAX_BATCH_BYTES`]), so the byte limit on a batch is reached, while
/// a long input of 33 KB calls cannot cost megabytes a run.
const PAD_BUDGET: usize = 3 * MAX_BATCH_BYTES;

/// Save-and-restore cycles per delivery. Each one writes and parses the
/// whole state, whose attempt log grows with every attempt: restoring at
/// every step made a run quadratic in the attempts (seconds for one
/// input). The fuzzer still picks at which steps they happen.
const MAX_RESTORES: usize = 2;

#[derive(Arbitrary, Debug)]
enum Op {
    Call { pad: u16, valid: bool },
    Advance(u32),
    /// Straight to the batcher's next timer ([`Batcher::poll_timeout`]),
    /// as a host sleeps until it.
    Wake,
    Respond { pick: u8, status: u16, retry_after: Option<u16> },
    Fail { pick: u8, kind: u8 },
    Flush,
    Timeout,
}

#[derive(Arbitrary, Debug)]
struct Input {
    flush_at: u8,
    in_flight: u8,
    max_queue: u8,
    seed: u64,
    ops: Vec<Op>,
    endpoints: u8,
    replies: Vec<(u16, u8)>,
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

fn outcome(kind: u8) -> Outcome {
    match kind % 3 {
        0 => Outcome::Timeout,
        1 => Outcome::connection("fuzz"),
        _ => Outcome::tls("fuzz"),
    }
}

fn batcher(input: &Input) {
    let cfg = BatcherConfig {
        flush_at: usize::from(input.flush_at % 40) + 1,
        max_in_flight: usize::from(input.in_flight % 3) + 1,
        max_queue: usize::from(input.max_queue % 128) + 1,
        jitter_seed: input.seed,
        ..BatcherConfig::new("wk")
    };
    let flush_at = cfg.flush_at;
    let mut b = Batcher::new(cfg, t(0)).unwrap();
    let mut now = 0i64;
    let mut accepted = HashSet::new();
    let mut reported = HashSet::new();
    let mut in_flight: Vec<u64> = Vec::new();
    let mut i = 0u64;
    let mut pad_left = PAD_BUDGET;
    let drain = |b: &mut Batcher, reported: &mut HashSet<String>| {
        while let Some(ev) = b.poll_event() {
            let ids: Vec<String> = match ev {
                BatcherEvent::Delivered { message_ids, .. } => message_ids,
                BatcherEvent::Failed { messages, .. } => messages.iter().map(|m| m.message_id().to_owned()).collect(),
                _ => continue,
            };
            for id in ids {
                assert!(reported.insert(id), "reported twice");
            }
        }
    };
    for op in input.ops.iter().take(MAX_OPS) {
        match op {
            Op::Call { pad, valid } => {
                i += 1;
                let mut c = Call::new(CallKind::Track);
                if *valid {
                    c.user_id = Some("u".into());
                }
                c.event = Some("e".into());
                let pad = (usize::from(*pad) % (MAX_MESSAGE_BYTES + 2000)).min(pad_left);
                pad_left -= pad;
                let mut p = Map::new();
                p.insert("pad".into(), Value::String("x".repeat(pad)));
                c.properties = Some(p.into());
                let mut r = [0u8; 16];
                r[..8].copy_from_slice(&i.to_le_bytes());
                if let Ok(id) = b.handle_call(t(now), c, r) {
                    assert!(accepted.insert(id));
                }
            }
            Op::Advance(ms) => now += i64::from(*ms % 600_000),
            Op::Wake => {
                if let Some(at) = b.poll_timeout() {
                    now = now.max(at.as_millis());
                    b.handle_timeout(t(now));
                }
            }
            Op::Respond { pick, status, retry_after } => {
                if !in_flight.is_empty() {
                    let id = in_flight.remove(usize::from(*pick) % in_flight.len());
                    b.handle_response(t(now), id, Outcome::Response { status: *status, retry_after: retry_after.map(|r| r.to_string()) });
                }
            }
            Op::Fail { pick, kind } => {
                if !in_flight.is_empty() {
                    let id = in_flight.remove(usize::from(*pick) % in_flight.len());
                    b.handle_response(t(now), id, outcome(*kind));
                }
            }
            Op::Flush => b.flush(t(now)),
            Op::Timeout => b.handle_timeout(t(now)),
        }
        while let Some(req) = b.poll_request(t(now)) {
            assert!(req.message_count <= flush_at);
            assert!(req.request.body.len() <= MAX_BATCH_BYTES);
            in_flight.push(req.batch_id);
        }
        drain(&mut b, &mut reported);
    }
    b.shutdown();
    drain(&mut b, &mut reported);
    assert_eq!(accepted, reported, "every accepted message is reported exactly once");
}

fn delivery(input: &Input) {
    let n = usize::from(input.endpoints % 5) + 1;
    let mode = if input.seed % 2 == 0 { Mode::Parallel } else { Mode::Failover };
    let eps: Vec<_> = (0..n).map(|i| EndpointConfig::new(format!("https://r{i}.example/"))).collect();
    let hooks = Webhooks::with_mode(&eps, Some(b"k"), mode).unwrap();
    let call = Call::from_json_str(r#"{"type":"track","userId":"u","event":"e"}"#).unwrap();
    let cfg = DeliveryConfig::new(input.seed);
    let window = cfg.retry_window_ms as i64;
    let mut d = Delivery::new(&hooks, &call, t(0), cfg).unwrap();
    let mut now = 0i64;
    let mut first = None;
    // Attempts the host is waiting on (number, deadline), answered in an
    // arbitrary order, possibly after the core timed them out.
    let mut waiting: Vec<(u32, i64)> = Vec::new();
    let mut restores = 0;
    // After a restore: the attempts that were in flight, which the next
    // polls must send again under the same numbers.
    let mut resend: Vec<u32> = Vec::new();
    for step in 0..10_000usize {
        while let Some(a) = d.poll_request(t(now)) {
            let start = *first.get_or_insert(now);
            assert!(now - start <= window, "attempt after the window");
            assert!(mode == Mode::Parallel || waiting.is_empty(), "failover sends one at a time");
            assert!(waiting.iter().all(|&(w, _)| w != a.attempt));
            resend.retain(|&r| r != a.attempt);
            waiting.push((a.attempt, a.deadline.as_millis()));
        }
        assert!(resend.is_empty(), "in flight when saved, not sent again after restoring: {resend:?}");
        if !waiting.is_empty() {
            let (status, kind) = input.replies.get(step % input.replies.len().max(1)).copied().unwrap_or((503, 0));
            let (attempt, _) = waiting.remove(usize::from(kind / 4) % waiting.len());
            match kind % 4 {
                0 => d.handle_response(t(now), attempt, Outcome::status(status)),
                // No answer: the core's timer ends it.
                1 => {}
                k => d.handle_response(t(now), attempt, outcome(k)),
            }
            // Save and restore now and then: what was in flight is sent
            // again, and the restored state saves as it was read.
            if status % 7 == 0 && restores < MAX_RESTORES {
                restores += 1;
                // Still in flight in the core: not answered, and not timed
                // out (handle_timeout runs each time the clock moves, so
                // every deadline up to now has fired).
                resend = waiting.iter().filter(|&&(_, deadline)| deadline > now).map(|&(a, _)| a).collect();
                let saved = Delivery::from_json(&d.to_json(), &hooks).expect("our own state restores").to_json();
                d = Delivery::from_json(&saved, &hooks).unwrap();
                assert_eq!(d.to_json(), saved);
                waiting.clear();
            }
            if kind % 4 != 1 {
                continue;
            }
        }
        match d.poll_timeout() {
            Some(at) => {
                let at = at.as_millis();
                assert!(at >= now, "a timer in the past");
                now = at;
                d.handle_timeout(t(now));
            }
            None => {
                assert!(d.poll_outcome().is_some(), "no timer, so the delivery ended");
                return;
            }
        }
    }
}

fuzz_target!(|input: Input| {
    batcher(&input);
    delivery(&input);
});
