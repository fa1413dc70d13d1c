//! Criterion benches on the hot paths, over the shared fixtures in
//! `benches/fixtures/` (realistic Segment calls: a 423-byte track, a 4 KB
//! checkout step with a full context, 200 identify traits, long non-ASCII
//! text, number arrays, product lists of 32 KB): parsing (against
//! serde_json), canonical writing, webhook requests from JSON text as a
//! forwarder receives it, signing and batching.
// Bench code: a broken fixture may panic.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use callpost_benches::{track, Fixture, FIXTURES};
use callpost_core::{
    Batcher, BatcherConfig, Call, EndpointConfig, Outcome, Secret, Timestamp, Value, Webhooks,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

const SIZES: [usize; 4] = [423, 4096, 32 * 1024, 500_000];

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

/// Each fixture in both forms: `name` (as `JSON.stringify` writes it) and
/// `name.dumps` (as Python's `json.dumps` does by default).
fn texts() -> Vec<(String, &'static str)> {
    FIXTURES
        .iter()
        .flat_map(|f: &Fixture| {
            [
                (f.name.to_owned(), f.compact),
                (format!("{}.dumps", f.name), f.dumps),
            ]
        })
        .collect()
}

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
    for f in FIXTURES {
        let ours = Value::from_json_str(f.compact).unwrap();
        let theirs: serde_json::Value = serde_json::from_str(f.compact).unwrap();
        let len = ours.to_json_string().unwrap().len();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(
            BenchmarkId::new("callpost_canonical", f.name),
            &ours,
            |b, v| {
                b.iter(|| {
                    let mut out = Vec::with_capacity(len);
                    callpost_core::json::write_value(black_box(v), &mut out).unwrap();
                    out
                });
            },
        );
        g.bench_with_input(
            BenchmarkId::new("serde_json_to_vec", f.name),
            &theirs,
            |b, v| {
                b.iter(|| serde_json::to_vec(black_box(v)).unwrap());
            },
        );
    }
    g.finish();
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    for (name, text) in texts() {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("callpost_value", &name), text, |b, t| {
            b.iter(|| Value::from_json_str(black_box(t)).unwrap());
        });
        g.bench_with_input(BenchmarkId::new("serde_json_value", &name), text, |b, t| {
            b.iter(|| {
                serde_json::from_slice::<serde_json::Value>(black_box(t.as_bytes())).unwrap()
            });
        });
        g.bench_with_input(BenchmarkId::new("callpost_call", &name), text, |b, t| {
            b.iter(|| Call::from_json_str(black_box(t)).unwrap());
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
    let now = at(1_795_341_845_123);
    // A forwarder's job: JSON text in, the signed request out.
    for (name, text) in texts() {
        let call = Call::from_json_str(text).unwrap();
        let len = hooks.request(&call, 0, now).unwrap().body.len();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("from_text", &name), text, |b, t| {
            b.iter(|| {
                hooks
                    .request(&Call::from_json_str(black_box(t)).unwrap(), 0, now)
                    .unwrap()
            });
        });
    }
    g.finish();
}

/// The cost of each signing mode per call: the same parsed call's request
/// under `segment` (the default: `X-Signature`), `standard` (the three
/// Standard Webhooks headers, HMAC-SHA256 over `id.timestamp.body`) and
/// `both`, one secret each, in one run.
fn signing_mode(c: &mut Criterion) {
    use callpost_core::webhooks::Signing;
    let mut g = c.benchmark_group("signing_mode");
    let endpoints = [EndpointConfig::new("https://hooks.example.com/segment")];
    let whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let now = at(1_795_341_845_123);
    let modes = [
        (
            "segment",
            Signing::Segment,
            Some(&b"whsec-bench"[..]),
            &[][..],
        ),
        ("standard", Signing::Standard, None, &[whsec][..]),
        (
            "both",
            Signing::Both,
            Some(&b"whsec-bench"[..]),
            &[whsec][..],
        ),
    ];
    for name in ["track_423", "order_completed", "identify_200_traits"] {
        let call = Call::from_json_str(callpost_benches::fixture(name).compact).unwrap();
        for (mode, signing, secret, secrets) in modes {
            let hooks = Webhooks::new(&endpoints, secret)
                .unwrap()
                .with_signing(signing, secrets)
                .unwrap();
            let len = hooks.request(&call, 0, now).unwrap().body.len();
            g.throughput(Throughput::Bytes(len as u64));
            g.bench_with_input(BenchmarkId::new(mode, name), &call, |b, call| {
                b.iter(|| hooks.request(black_box(call), 0, now).unwrap());
            });
        }
    }
    g.finish();
}

/// The cost of destination filters per call, beside none, on the same
/// parsed call as a delivery starts it (filters, then the body): a test on
/// `event` (no object parsed), a test on `properties.total` (the
/// properties' text parsed), and a field dropped (parsed and written back).
fn filters(c: &mut Criterion) {
    use callpost_core::filter::Filters;
    use callpost_core::{Delivery, DeliveryConfig};
    let mut g = c.benchmark_group("filters");
    let endpoints = [EndpointConfig::new("https://hooks.example.com/segment")];
    let now = at(1_795_341_845_123);
    let rules = [
        ("none", "[]"),
        (
            "keep_on_event",
            r#"[{"action":"keep","if":{"field":"event","in":["Order Completed","Checkout Step Viewed","Signed Up"]}}]"#,
        ),
        (
            "keep_on_property",
            r#"[{"action":"keep","if":{"not":{"field":"properties.total","lt":0}}}]"#,
        ),
        (
            "drop_a_field",
            r#"[{"action":"drop_fields","fields":["properties.coupon","traits.email"]}]"#,
        ),
    ];
    for name in ["track_423", "order_completed", "identify_200_traits"] {
        let call = Call::from_json_str(callpost_benches::fixture(name).compact).unwrap();
        for (rule, json) in rules {
            let filters = Filters::from_value(&Value::from_json_str(json).unwrap()).unwrap();
            let hooks = Webhooks::new(&endpoints, Some(b"whsec-bench"))
                .unwrap()
                .with_filters(filters);
            g.bench_with_input(BenchmarkId::new(rule, name), &call, |b, call| {
                b.iter(|| {
                    Delivery::new(&hooks, black_box(call), now, DeliveryConfig::new(1)).unwrap()
                });
            });
        }
    }
    g.finish();
}

/// Mappings beside the spec's body: the delivery a host starts for a call
/// (body and signature of the first request), with no mapping and with
/// the mappings people write: a CRM's fields, a chat message, one row per
/// product, and whole objects copied.
fn mappings(c: &mut Criterion) {
    use callpost_core::mapping::Mapping;
    use callpost_core::{Delivery, DeliveryConfig};
    let mut g = c.benchmark_group("mappings");
    let endpoints = [EndpointConfig::new("https://hooks.example.com/segment")];
    let now = at(1_795_341_845_123);
    let mappings = [
        ("spec_body", None),
        (
            "crm_fields",
            Some(
                r#"{"id":{"@path":"userId"},"event":{"@path":"event"},"email":{"@default":[{"@path":"traits.email"},{"@path":"context.traits.email"},"unknown"]},"total":{"@path":"properties.total"},"currency":{"@path":"properties.currency"},"at":{"@path":"timestamp"}}"#,
            ),
        ),
        (
            "chat_template",
            Some(
                r#"{"text":{"@template":"{{userId}} did {{event}}: {{properties.total}} {{properties.currency}} ({{properties.products[0].name}})"}}"#,
            ),
        ),
        (
            "product_rows",
            Some(
                r#"{"order":{"@path":"properties.order_id"},"items":{"@arrayPath":["properties.products",{"sku":{"@path":"sku"},"name":{"@path":"name"},"price":{"@path":"price"},"qty":{"@default":[{"@path":"quantity"},1]}}]}}"#,
            ),
        ),
        (
            "copy_objects",
            Some(
                r#"{"event":{"@path":"event"},"user":{"@path":"userId"},"properties":{"@path":"properties"},"traits":{"@path":"traits"},"context":{"@path":"context"}}"#,
            ),
        ),
    ];
    for name in [
        "track_423",
        "order_completed",
        "identify_200_traits",
        "product_list_32k",
    ] {
        let call = Call::from_json_str(callpost_benches::fixture(name).compact).unwrap();
        for (mapping, json) in mappings {
            let hooks = Webhooks::new(&endpoints, Some(b"whsec-bench"))
                .unwrap()
                .with_mapping(json.map(|j| Mapping::from_json(j).unwrap()));
            g.bench_with_input(BenchmarkId::new(mapping, name), &call, |b, call| {
                b.iter(|| {
                    Delivery::new(&hooks, black_box(call), now, DeliveryConfig::new(1)).unwrap()
                });
            });
        }
    }
    g.finish();
}

/// Batched webhooks beside one call per POST: the deliveries a host starts
/// for 20 calls (bodies and signatures of the first requests), as 20
/// deliveries or as one batch the core packs.
fn batching(c: &mut Criterion) {
    use callpost_core::webhooks::Batching;
    use callpost_core::{Delivery, DeliveryConfig};
    let mut g = c.benchmark_group("batching");
    let endpoints = [EndpointConfig::new("https://hooks.example.com/segment")];
    let now = at(1_795_341_845_123);
    let single = Webhooks::new(&endpoints, Some(b"whsec-bench")).unwrap();
    let batched = single
        .clone()
        .with_batching(Some(Batching::default()))
        .unwrap();
    for name in ["track_423", "identify_200_traits"] {
        let call = Call::from_json_str(callpost_benches::fixture(name).compact).unwrap();
        let calls: Vec<Call> = (0..20)
            .map(|i| {
                let mut c = call.clone();
                c.message_id = Some(format!("m-{i}"));
                c
            })
            .collect();
        g.throughput(Throughput::Elements(calls.len() as u64));
        g.bench_with_input(
            BenchmarkId::new("one_per_post", name),
            &calls,
            |b, calls| {
                b.iter(|| {
                    for call in calls {
                        let mut d =
                            Delivery::new(&single, black_box(call), now, DeliveryConfig::new(1))
                                .unwrap();
                        black_box(d.poll_request(now));
                    }
                });
            },
        );
        g.bench_with_input(BenchmarkId::new("one_batch", name), &calls, |b, calls| {
            b.iter(|| {
                for batch in batched.pack(black_box(calls), now).unwrap().batches {
                    let mut d =
                        Delivery::for_batch(&batched, &batch, now, DeliveryConfig::new(1)).unwrap();
                    black_box(d.poll_request(now));
                }
            });
        });
    }
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

criterion_group!(
    benches,
    sign,
    serialize,
    parse,
    webhook_request,
    signing_mode,
    filters,
    mappings,
    batching,
    batcher
);
criterion_main!(benches);
