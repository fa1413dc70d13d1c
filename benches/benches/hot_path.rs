//! Criterion benches on the hot path: signing, canonical serialization,
//! webhook request building and batching, at 423 B, 4 KB, 32 KB and 500 KB.
// Bench code: a broken fixture may panic.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use callpost_benches::{track, track_of_size, TRACK_JSON};
use callpost_core::{
    Batcher, BatcherConfig, EndpointConfig, Outcome, Secret, Timestamp, Value, Webhooks,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

const SIZES: [usize; 4] = [423, 4096, 32 * 1024, 500_000];

fn sign(c: &mut Criterion) {
    let mut g = c.benchmark_group("sign");
    let secret = Secret::new("whsec-bench").unwrap();
    for size in SIZES {
        let body = vec![b'a'; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(
            BenchmarkId::new("hmac_sha1_prekeyed", size),
            &body,
            |b, body| b.iter(|| secret.sign(black_box(body))),
        );
    }
    g.finish();
}

fn serialize(c: &mut Criterion) {
    let mut g = c.benchmark_group("serialize");
    for size in [423usize, 32 * 1024] {
        let call = track_of_size(size);
        let ours = Value::Object(call.properties.as_ref().unwrap().to_map().into_owned());
        let text = ours.to_json_string().unwrap();
        let theirs: serde_json::Value = serde_json::from_str(&text).unwrap();
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(
            BenchmarkId::new("callpost_canonical", size),
            &ours,
            |b, v| {
                b.iter(|| {
                    let mut out = Vec::with_capacity(text.len());
                    callpost_core::json::write_value(black_box(v), &mut out).unwrap();
                    out
                });
            },
        );
        g.bench_with_input(
            BenchmarkId::new("serde_json_to_vec", size),
            &theirs,
            |b, v| b.iter(|| serde_json::to_vec(black_box(v)).unwrap()),
        );
    }
    g.finish();
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    for size in [423usize, 32 * 1024] {
        let text = if size == 423 {
            TRACK_JSON.to_owned()
        } else {
            let call = track_of_size(size);
            let mut out = Vec::new();
            call.write_message(&mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("callpost_value", size), &text, |b, t| {
            b.iter(|| Value::from_json_str(black_box(t)).unwrap());
        });
        g.bench_with_input(BenchmarkId::new("callpost_call", size), &text, |b, t| {
            b.iter(|| callpost_core::Call::from_json_str(black_box(t)).unwrap());
        });
        g.bench_with_input(BenchmarkId::new("serde_json_value", size), &text, |b, t| {
            b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(t)).unwrap());
        });
    }
    g.finish();
}

fn webhook_request(c: &mut Criterion) {
    let mut g = c.benchmark_group("webhook_request");
    let hooks = Webhooks::new(
        &[EndpointConfig::new("https://hooks.example.com/segment")],
        Some(b"whsec-bench"),
    )
    .unwrap();
    let now = Timestamp::from_millis(1_795_341_845_123).unwrap();
    for size in [423usize, 4096, 32 * 1024] {
        let call = if size == 423 {
            track()
        } else {
            track_of_size(size)
        };
        let len = hooks.request(&call, 0, now).unwrap().body.len();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(
            BenchmarkId::new("build_serialize_sign", size),
            &call,
            |b, call| b.iter(|| hooks.request(black_box(call), 0, now).unwrap()),
        );
    }
    g.throughput(Throughput::Bytes(TRACK_JSON.len() as u64));
    g.bench_function("parse_json_then_build_423", |b| {
        b.iter(|| {
            let call = callpost_core::Call::from_json_str(black_box(TRACK_JSON)).unwrap();
            hooks.request(&call, 0, now).unwrap()
        });
    });
    g.finish();
}

fn batcher(c: &mut Criterion) {
    let mut g = c.benchmark_group("batcher");
    let call = track();
    g.throughput(Throughput::Elements(20));
    g.bench_function("push_20_poll_1_batch", |b| {
        let mut batcher = Batcher::new(BatcherConfig::new("wk"), at(0)).unwrap();
        let mut i = 0u64;
        b.iter(|| {
            for _ in 0..20 {
                i += 1;
                let mut r = [0u8; 16];
                r[..8].copy_from_slice(&i.to_le_bytes());
                batcher
                    .handle_call(at(1), black_box(call.clone()), r)
                    .unwrap();
            }
            let req = batcher.poll_request(at(1)).unwrap();
            batcher.handle_response(at(2), req.batch_id, Outcome::status(200));
            while batcher.poll_event().is_some() {}
            req.request.body.len()
        });
    });
    // One full 500 KB batch: about 1,100 messages of 423 bytes.
    let per_batch = 1100;
    g.throughput(Throughput::Elements(per_batch));
    g.bench_function("push_and_poll_500kb_batch", |b| {
        let mut batcher = Batcher::new(
            BatcherConfig {
                flush_at: 5000,
                ..BatcherConfig::new("wk")
            },
            at(0),
        )
        .unwrap();
        let mut i = 0u64;
        b.iter(|| {
            for _ in 0..per_batch {
                i += 1;
                let mut r = [0u8; 16];
                r[..8].copy_from_slice(&i.to_le_bytes());
                batcher.handle_call(at(1), call.clone(), r).unwrap();
            }
            batcher.flush(at(1));
            let mut bytes = 0;
            while let Some(req) = batcher.poll_request(at(1)) {
                assert!(req.request.body.len() <= callpost_core::batcher::MAX_BATCH_BYTES);
                bytes += req.request.body.len();
                batcher.handle_response(at(2), req.batch_id, Outcome::status(200));
            }
            while batcher.poll_event().is_some() {}
            bytes
        });
    });
    g.finish();
}

criterion_group!(benches, sign, serialize, parse, webhook_request, batcher);
criterion_main!(benches);
