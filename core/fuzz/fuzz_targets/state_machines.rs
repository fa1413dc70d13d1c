//! The batcher and the delivery driven by arbitrary event sequences. Asserts:
//! no panic; every accepted message is reported exactly once (delivered or
//! failed) by the end; no batch over the limits; no delivery attempt starts
//! after the retry window.
#![no_main]

use arbitrary::Arbitrary;
use callpost_core::batcher::{MAX_BATCH_BYTES, MAX_MESSAGE_BYTES};
use callpost_core::{
    Batcher, BatcherConfig, BatcherEvent, Call, CallKind, Delivery, DeliveryConfig, EndpointConfig, Map, Mode, Outcome,
    Timestamp, Value, Webhooks,
};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;

#[derive(Arbitrary, Debug)]
enum Op {
    Call { pad: u16, valid: bool },
    Advance(u32),
    Respond { pick: u8, status: u16, retry_after: Option<u16> },
    Fail { pick: u8, kind: u8 },
    Flush,
    Timeout,
}

#[derive(Arbitrary, Debug)]
struct Input {
    flush_at: u8,
    in_flight: u8,
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
        max_queue: 500,
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
    for op in &input.ops {
        match op {
            Op::Call { pad, valid } => {
                i += 1;
                let mut c = Call::new(CallKind::Track);
                if *valid {
                    c.user_id = Some("u".into());
                }
                c.event = Some("e".into());
                let mut p = Map::new();
                p.insert("pad".into(), Value::String("x".repeat(usize::from(*pad) % (MAX_MESSAGE_BYTES + 2000))));
                c.properties = Some(p.into());
                let mut r = [0u8; 16];
                r[..8].copy_from_slice(&i.to_le_bytes());
                if let Ok(id) = b.handle_call(t(now), c, r) {
                    assert!(accepted.insert(id));
                }
            }
            Op::Advance(ms) => now += i64::from(*ms % 600_000),
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
    // Attempts the host is waiting on, answered in an arbitrary order.
    let mut waiting: Vec<u32> = Vec::new();
    for step in 0..10_000usize {
        while let Some(a) = d.poll_request(t(now)) {
            let start = *first.get_or_insert(now);
            assert!(now - start <= window, "attempt after the window");
            assert!(mode == Mode::Parallel || waiting.is_empty(), "failover sends one at a time");
            assert!(!waiting.contains(&a.attempt));
            waiting.push(a.attempt);
        }
        if !waiting.is_empty() {
            let (status, kind) = input.replies.get(step % input.replies.len().max(1)).copied().unwrap_or((503, 0));
            let attempt = waiting.remove(usize::from(kind / 4) % waiting.len());
            match kind % 4 {
                0 => d.handle_response(t(now), attempt, Outcome::status(status)),
                // No answer: the core's timer ends it.
                1 => {}
                k => d.handle_response(t(now), attempt, outcome(k)),
            }
            // Save and restore now and then: what was in flight is sent
            // again, and the restored state saves as it was read.
            if status % 7 == 0 {
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
