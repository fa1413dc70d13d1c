//! Operational events: their bodies and signatures against
//! `testdata/ops_events.json`, and which endpoint state changes are
//! reported.
// Test code: a panic is how it reports.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use callpost_core::protection::DEFAULT_BREAKER_FAILURES;
use callpost_core::{
    EndpointConfig, EndpointGuard, OpsEvent, Outcome, Permit, ProtectionConfig, Timestamp, Webhooks,
};
use serde_json::Value;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).unwrap()
}

fn time(v: &Value) -> Option<Timestamp> {
    v.as_i64().map(t)
}

fn event(case: &Value) -> OpsEvent {
    let i = &case["input"];
    let url = || i["url"].as_str().unwrap().to_owned();
    match case["type"].as_str().unwrap() {
        "endpoint.circuit_opened" => OpsEvent::CircuitOpened {
            url: url(),
            until: time(&i["until"]).unwrap(),
        },
        "endpoint.circuit_closed" => OpsEvent::CircuitClosed { url: url() },
        "endpoint.disabled" => OpsEvent::EndpointDisabled {
            url: url(),
            failing_since: time(&i["failing_since"]),
        },
        "calls.dead_lettered" => OpsEvent::DeadLettered {
            count: i["count"].as_u64().unwrap(),
            sources: i["sources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_u64().unwrap()))
                .collect(),
            destinations: i["destinations"]
                .as_array()
                .map(|all| {
                    all.iter()
                        .map(|p| {
                            (
                                p[0].as_str().unwrap().to_owned(),
                                p[1].as_str().unwrap().to_owned(),
                                p[2].as_u64().unwrap(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            since: time(&i["since"]).unwrap(),
        },
        "backlog.over_threshold" => OpsEvent::BacklogOver {
            pending: i["pending"].as_u64().unwrap(),
            threshold: i["threshold"].as_u64().unwrap(),
            oldest_pending_at: time(&i["oldest_pending_at"]),
        },
        "database.unreachable" => OpsEvent::DatabaseUnreachable {
            since: time(&i["since"]).unwrap(),
            reason: i["reason"].as_str().unwrap().to_owned(),
        },
        "database.recovered" => OpsEvent::DatabaseRecovered {
            since: time(&i["since"]).unwrap(),
        },
        other => panic!("no event type {other}"),
    }
}

fn random(case: &Value) -> [u8; 16] {
    let mut r = [0u8; 16];
    hex::decode_to_slice(case["random"].as_str().unwrap(), &mut r).unwrap();
    r
}

#[test]
fn bodies_and_signatures_match_the_vectors() {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("../../testdata/ops_events.json")).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let e = event(case);
        assert_eq!(e.kind(), case["type"], "{name}");
        kinds.insert(e.kind());
        let now = t(case["now"].as_i64().unwrap());
        let expect = &case["expect"];
        assert_eq!(e.body(random(case), now), expect["body"], "{name}");
        let operator = Webhooks::new(
            &[EndpointConfig::new("https://ops.example.com/events")],
            Some(case["secret"].as_str().unwrap().as_bytes()),
        )
        .unwrap();
        let r = operator.event_request(&e, random(case), now, 0).unwrap();
        assert_eq!(
            r.body,
            expect["body"].as_str().unwrap().as_bytes(),
            "{name}"
        );
        assert_eq!(
            r.header("X-Signature"),
            expect["signature"].as_str(),
            "{name}"
        );
        assert_eq!(
            r.header("Idempotency-Key"),
            expect["idempotency_key"].as_str(),
            "{name}"
        );
    }
    assert_eq!(kinds.len(), 7, "every event type has a vector: {kinds:?}");
}

#[test]
fn a_circuit_opening_closing_and_a_disabling_are_reported_once_each() {
    const T0: i64 = 1_795_341_845_000;
    let url = "https://hooks.example.com/in";
    let mut g = EndpointGuard::new(
        ProtectionConfig {
            disable_after_ms: Some(4 * 3_600_000),
            ..ProtectionConfig::default()
        },
        t(T0),
    )
    .unwrap();
    let mut reported = vec![];
    let drain = |g: &mut EndpointGuard, reported: &mut Vec<&'static str>| {
        while let Some(ev) = g.poll_event() {
            if let Some(e) = OpsEvent::from_guard(url, &ev, g.state().failing_since) {
                reported.push(e.kind());
            }
        }
    };
    // Down for 5 hours: opens once, reopens after each failed probe (not
    // reported), then is disabled.
    let mut now = T0;
    while now < T0 + 5 * 3_600_000 {
        match g.poll_permit(t(now)) {
            Permit::Send => g.handle_outcome(t(now), &Outcome::status(502)),
            Permit::WaitUntil(at) => now = at.as_millis(),
            Permit::WaitForAnswer => unreachable!("every answer is immediate"),
            Permit::Disabled => break,
        }
        drain(&mut g, &mut reported);
    }
    assert_eq!(reported, ["endpoint.circuit_opened", "endpoint.disabled"]);
    // Enabled and answering: no circuit event, as it is closed already.
    g.enable(t(now));
    drain(&mut g, &mut reported);
    for _ in 0..DEFAULT_BREAKER_FAILURES {
        assert_eq!(g.poll_permit(t(now)), Permit::Send);
        g.handle_outcome(t(now), &Outcome::Timeout);
    }
    drain(&mut g, &mut reported);
    // Opened again, then a probe answers: closed.
    let Permit::WaitUntil(at) = g.poll_permit(t(now)) else {
        panic!("the circuit is open")
    };
    assert_eq!(g.poll_permit(at), Permit::Send);
    g.handle_outcome(at, &Outcome::status(200));
    drain(&mut g, &mut reported);
    assert_eq!(
        reported,
        [
            "endpoint.circuit_opened",
            "endpoint.disabled",
            "endpoint.circuit_opened",
            "endpoint.circuit_closed"
        ]
    );
}

#[test]
fn urls_are_shown_without_credentials_or_query() {
    use callpost_core::ops::shown_url;
    assert_eq!(
        shown_url("https://u:p@h.example/x?token=1"),
        "https://***@h.example/x"
    );
    assert_eq!(shown_url("https://h.example/x"), "https://h.example/x");
    assert_eq!(shown_url("http://h.example?x"), "http://h.example");
}
