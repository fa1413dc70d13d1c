//! Delivery end to end: the memory store, the relay's delivery workers,
//! and real receivers on 127.0.0.1. Also the store contract, kept by the
//! memory store the other tests stand on.

use crate::receiver;

use callpost_relay::clock::Clock;
use callpost_relay::config::{self, Config, Overrides};
use callpost_relay::deliver::{check_destinations, Deliverer};
use callpost_relay::store::memory::{MemoryStore, StoredRow};
use callpost_relay::store::{Row, Status, Store};
use callpost_relay::Relay;
use receiver::{Answer, Receiver};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

// -- the world --------------------------------------------------------------

const SECRET: &str = "s3cret";

/// A source in the test configuration.
struct Src<'a> {
    name: &'a str,
    urls: Vec<String>,
    mode: Option<&'a str>,
    /// The lines of `[sources.webhooks.protection]`.
    protection: Option<&'a str>,
}

fn src<'a>(name: &'a str, urls: &[&str]) -> Src<'a> {
    Src {
        name,
        urls: urls.iter().map(|u| (*u).to_owned()).collect(),
        mode: None,
        protection: None,
    }
}

/// The TOML for `sources` with `head` (top-level tables) before them.
fn toml(head: &str, sources: &[Src<'_>]) -> String {
    let mut t = head.to_owned();
    for s in sources {
        t += &format!(
            "\n[[sources]]\nname = \"{0}\"\nwrite_keys = [\"wk-{0}\"]\n",
            s.name
        );
        if s.urls.is_empty() {
            continue;
        }
        let urls: Vec<String> = s.urls.iter().map(|u| format!("\"{u}\"")).collect();
        t += &format!(
            "[sources.webhooks]\nurls = [{}]\nshared_secret = \"{SECRET}\"\n",
            urls.join(", ")
        );
        if let Some(m) = s.mode {
            t += &format!("mode = \"{m}\"\n");
        }
        if let Some(p) = s.protection {
            t += &format!("[sources.webhooks.protection]\n{p}\n");
        }
    }
    t
}

/// `[security]` and `[delivery]` for the tests.
fn head(private: bool, concurrency: usize, endpoint: usize, extra_security: &str) -> String {
    format!(
        "[security]\nallow_private_networks = {private}\n{extra_security}\n\
         [delivery]\nconcurrency = {concurrency}\nendpoint_concurrency = {endpoint}\nlease_seconds = 10\n"
    )
}

/// The relay's configuration from `text` as its file (the directory
/// holds the file for as long as the caller keeps it).
fn load_result(text: &str) -> (Result<Config, config::ConfigError>, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = config::load(
        &Overrides {
            config: Some(path.to_string_lossy().into_owned()),
            ..Overrides::default()
        },
        &|_| None,
    );
    (cfg, dir)
}

fn load(text: &str) -> (Config, TempDir) {
    let (cfg, dir) = load_result(text);
    (cfg.unwrap_or_else(|e| panic!("{e}\n{text}")), dir)
}

/// Why the relay refuses to start with `text` as its file.
fn load_err(text: &str) -> String {
    match load_result(text).0 {
        Ok(_) => panic!("loaded, and should not have:\n{text}"),
        Err(e) => e.to_string(),
    }
}

struct World {
    relay: Arc<Relay>,
    store: Arc<MemoryStore>,
    _dir: TempDir,
}

impl World {
    fn new(text: &str) -> Self {
        let (cfg, dir) = load(text);
        let store = Arc::new(MemoryStore::new());
        let dyn_store: Arc<dyn Store> = store.clone();
        let relay = Arc::new(Relay::new(cfg, dyn_store, Arc::new(Clock::new())));
        Self {
            relay,
            store,
            _dir: dir,
        }
    }

    fn start(&self) -> Deliverer {
        Deliverer::start(Arc::clone(&self.relay)).unwrap()
    }

    /// Stores calls `ids` of `source`, as ingest does, and wakes the
    /// workers.
    async fn add(&self, source: &str, ids: &[String]) {
        let calls: Vec<(String, String)> = ids.iter().map(|id| (id.clone(), message(id))).collect();
        self.add_calls(source, &calls).await;
    }

    /// Stores `(messageId, call)` pairs of `source` and wakes the workers.
    async fn add_calls(&self, source: &str, calls: &[(String, String)]) {
        let now = self.relay.clock.now_ms();
        let rows = calls
            .iter()
            .map(|(id, call)| Row {
                source: source.into(),
                message_id: id.clone(),
                destination: callpost_core::sources::DEFAULT_DESTINATION.into(),
                first: true,
                kind: "track",
                message: call.clone(),
                received_at: now,
                status: Status::Pending,
                user_id: None,
                anonymous_id: None,
                event: None,
            })
            .collect();
        assert_eq!(self.store.insert(rows, vec![]).await.unwrap(), calls.len());
        self.relay.wake.notify_one();
    }

    fn rows_of(&self, source: &str) -> Vec<StoredRow> {
        self.store
            .rows()
            .into_iter()
            .filter(|r| r.source == source)
            .collect()
    }

    fn all(&self, source: &str, status: Status) -> bool {
        let rows = self.rows_of(source);
        !rows.is_empty() && rows.iter().all(|r| r.status == status)
    }

    fn metrics(&self) -> String {
        self.relay
            .metrics
            .render(&callpost_relay::metrics::StoreCounts {
                healthy: true,
                ..Default::default()
            })
    }
}

/// A stored call, enriched as ingest stores it.
fn message(id: &str) -> String {
    format!(
        r#"{{"type":"track","event":"Signed Up","userId":"u-1","properties":{{"plan":"pro"}},"messageId":"{id}","timestamp":"2024-05-01T12:00:00.000Z","receivedAt":"2024-05-01T12:00:00.100Z"}}"#
    )
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Waits for `cond`; `within` only guards against a hang.
async fn eventually(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + within;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops the workers (a hang guard around `stop`).
async fn stop(d: Deliverer, grace: Duration) {
    tokio::time::timeout(grace + Duration::from_secs(20), d.stop(grace))
        .await
        .expect("stop returns");
}

fn count_by_key(received: &[receiver::Received]) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for r in received {
        *out.entry(r.key.clone().unwrap_or_default()).or_default() += 1;
    }
    out
}

fn verified(r: &receiver::Received) -> bool {
    let secret = callpost_core::Secret::new(SECRET).unwrap();
    let Some(sig) = &r.signature else {
        return false;
    };
    callpost_core::verify(&r.body, sig, &[secret]).unwrap_or(false)
}

// -- 1. every call once, signed, to every URL ------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_delivered_once_signed_in_parallel_and_failover() {
    let p1 = Receiver::start("127.0.0.1:0").await.unwrap();
    let p2 = Receiver::start("127.0.0.1:0").await.unwrap();
    let f1 = Receiver::start("127.0.0.1:0").await.unwrap();
    let f2 = Receiver::start("127.0.0.1:0").await.unwrap();
    f1.answer(Answer::Status(500, vec![]));
    let w = World::new(&toml(
        &head(true, 64, 8, ""),
        &[
            src("par", &[&p1.url(), &p2.url()]),
            // Every call meets f1's 500 first: the subject is failover, so
            // no circuit opens on f1 (a_failing_receiver_is_probed_not_flooded
            // is the breaker's test).
            Src {
                mode: Some("failover"),
                protection: Some("breaker_failures = 0"),
                ..src("fo", &[&f1.url(), &f2.url()])
            },
            src("nowhere", &[]),
        ],
    ));
    w.add("par", &ids("p", 20)).await;
    w.add("fo", &ids("f", 20)).await;
    w.add("nowhere", &ids("n", 1)).await;
    let d = w.start();
    eventually("every call delivered", Duration::from_secs(30), || {
        w.all("par", Status::Delivered) && w.all("fo", Status::Delivered)
    })
    .await;
    eventually(
        "the unrouted call set aside",
        Duration::from_secs(10),
        || w.all("nowhere", Status::Undeliverable),
    )
    .await;
    stop(d, Duration::from_secs(5)).await;

    for (r, prefix) in [(&p1, "p"), (&p2, "p"), (&f1, "f"), (&f2, "f")] {
        let got = r.received();
        let keys = count_by_key(&got);
        assert_eq!(keys.len(), 20, "each call reached {} once", r.url());
        for id in ids(prefix, 20) {
            assert_eq!(keys.get(&id), Some(&1), "{id} at {}", r.url());
        }
        // Idempotency-Key is the messageId: every id came exactly once.
        assert!(got.iter().all(verified), "X-Signature verifies");
        let body: serde_json::Value = serde_json::from_slice(&got[0].body).unwrap();
        assert_eq!(body["event"], "Signed Up", "{body}");
    }
    for row in w.rows_of("par").iter().chain(&w.rows_of("fo")) {
        assert_eq!(row.attempts, 2, "{row:?}");
    }
    let m = w.metrics();
    assert!(
        m.contains(r#"callpost_relay_deliveries_total{outcome="delivered"} 40"#),
        "{m}"
    );
    assert!(
        m.contains(r#"callpost_relay_webhook_attempts_total{result="5xx"} 20"#),
        "{m}"
    );
    assert!(
        m.contains(r#"callpost_relay_webhook_attempts_total{result="2xx"} 60"#),
        "{m}"
    );
}

/// A batch keeps its state (which holds the signed body) and its attempt
/// log once, on its first row: one failed round of a 256-call batch, and
/// then its death, store less than twice the batch's body. Before, every
/// row kept the whole state: 256 copies of the body, kept 30 days with the
/// dead letters.
#[cfg(feature = "test-clock")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_or_dead_batch_keeps_its_state_once() {
    const CALLS: usize = 256;
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::Status(503, vec![]));
    let mut text = toml(&head(true, CALLS, 8, ""), &[src("b", &[&r.url()])]);
    text += &format!("[sources.webhooks.batch]\nmax_calls = {CALLS}\n");
    let w = World::new(&text);
    w.add("b", &ids("c", CALLS)).await;
    let kept = |w: &World| -> usize {
        w.rows_of("b")
            .iter()
            .map(|row| {
                row.state.as_ref().map_or(0, String::len)
                    + row.outcome.as_ref().map_or(0, String::len)
            })
            .sum()
    };
    let d = w.start();
    eventually("the batch waits", Duration::from_secs(20), || {
        w.rows_of("b").iter().all(|row| row.attempts == 1)
    })
    .await;
    let got = r.received();
    assert_eq!(got.len(), 1, "one batch of {CALLS}");
    let body = got[0].body.len();
    assert!(
        kept(&w) < 2 * body,
        "waiting: {} bytes kept for a {body}-byte body",
        kept(&w)
    );

    // Refused (a 4xx is not retried) at its next try: dead.
    r.answer(Answer::Status(400, vec![]));
    w.relay.clock.set_offset(3_600_000);
    w.relay.wake.notify_one();
    eventually("the batch dies", Duration::from_secs(20), || {
        w.all("b", Status::Dead)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert!(
        kept(&w) < 2 * body,
        "dead: {} bytes kept for a {body}-byte body",
        kept(&w)
    );
}

/// A source's filters decide at delivery: the calls they drop are never
/// sent and are counted as filtered (closed, not dead), and the kept calls
/// arrive without the fields a rule drops, signed over the bytes sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sources_filters_drop_calls_and_fields_before_sending() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    let mut text = toml(&head(true, 8, 8, ""), &[src("shop", &[&r.url()])]);
    text += "[[sources.webhooks.filters]]\naction = \"drop\"\n\
             if = { field = \"properties.plan\", equals = \"free\" }\n\
             [[sources.webhooks.filters]]\naction = \"drop_fields\"\n\
             fields = [\"properties.card\"]\n";
    let w = World::new(&text);
    let call = |id: &str, plan: &str| {
        let body = format!(
            r#"{{"type":"track","event":"Order Completed","userId":"u-1","properties":{{"plan":"{plan}","card":{{"last4":"4242"}},"total":12.5}},"messageId":"{id}","timestamp":"2024-05-01T12:00:00.000Z"}}"#
        );
        (id.to_owned(), body)
    };
    let mut calls: Vec<(String, String)> =
        (0..6).map(|i| call(&format!("pro-{i}"), "pro")).collect();
    calls.extend((0..4).map(|i| call(&format!("free-{i}"), "free")));
    w.add_calls("shop", &calls).await;
    let d = w.start();
    eventually("every call closed", Duration::from_secs(30), || {
        w.rows_of("shop").iter().all(|row| {
            let want = if row.message_id.starts_with("free-") {
                Status::Filtered
            } else {
                Status::Delivered
            };
            row.status == want
        })
    })
    .await;
    stop(d, Duration::from_secs(5)).await;

    let got = r.received();
    let keys = count_by_key(&got);
    assert_eq!(keys.len(), 6, "only the kept calls were sent: {keys:?}");
    assert!(keys.keys().all(|k| k.starts_with("pro-")), "{keys:?}");
    assert!(
        got.iter().all(verified),
        "X-Signature verifies over what was sent"
    );
    for q in &got {
        let body: serde_json::Value = serde_json::from_slice(&q.body).unwrap();
        assert_eq!(
            body["properties"],
            json!({"plan": "pro", "total": 12.5}),
            "{body}"
        );
    }
    for row in w.rows_of("shop") {
        let expect = if row.message_id.starts_with("free-") {
            0
        } else {
            1
        };
        assert_eq!(row.attempts, expect, "{row:?}");
    }
    let m = w.metrics();
    assert!(
        m.contains(r#"callpost_relay_deliveries_total{outcome="filtered"} 4"#),
        "{m}"
    );
    assert!(
        m.contains(r#"callpost_relay_deliveries_total{outcome="delivered"} 6"#),
        "{m}"
    );
}

/// Waits until every call of `source` is delivered but `dead`, a dead
/// letter.
async fn all_delivered_but(w: &World, source: &str, dead: &str) {
    eventually("every call closed", Duration::from_secs(30), || {
        w.rows_of(source).iter().all(|row| {
            let want = if row.message_id == dead {
                Status::Dead
            } else {
                Status::Delivered
            };
            row.status == want
        })
    })
    .await;
}

/// A source with a method and a mapping sends each call with that method
/// and the body its mapping builds, signed over those bytes, to a real
/// receiver; a call the mapping cannot fit in 500,000 bytes is a dead
/// letter with no attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_sends_its_mapped_bodies_with_its_method() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    let mut text = toml(&head(true, 8, 8, ""), &[src("crm", &[&r.url()])]);
    text = text.replace(
        "[sources.webhooks]
",
        "[sources.webhooks]
method = \"PUT\"
",
    );
    text += "[sources.webhooks.mapping]
             id = { \"@path\" = \"userId\" }
             text = { \"@template\" = \"{{userId}} spent {{properties.total}}\" }
             copies = [{ \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" },              { \"@path\" = \"properties.pad\" }, { \"@path\" = \"properties.pad\" }]
";
    let w = World::new(&text);
    let call = |id: &str, pad: usize| {
        let pad = "x".repeat(pad);
        let body = format!(
            r#"{{"type":"track","event":"Order Completed","userId":"u-{id}","properties":{{"total":12.5,"pad":"{pad}"}},"messageId":"{id}","timestamp":"2024-05-01T12:00:00.000Z"}}"#
        );
        (id.to_owned(), body)
    };
    let mut calls: Vec<(String, String)> = (0..4).map(|i| call(&format!("m-{i}"), 3)).collect();
    calls.push(call("huge", 30_000));
    w.add_calls("crm", &calls).await;
    let d = w.start();
    all_delivered_but(&w, "crm", "huge").await;
    stop(d, Duration::from_secs(5)).await;
    let got = r.received();
    assert_eq!(got.len(), 4, "the huge call is never sent");
    for q in &got {
        assert_eq!(q.method, "PUT");
        assert!(verified(q), "X-Signature verifies over the mapped bytes");
        let id = q.key.as_deref().unwrap();
        assert_eq!(
            std::str::from_utf8(&q.body).unwrap(),
            format!(
                r#"{{"id":"u-{id}","text":"u-{id} spent 12.5","copies":{}}}"#,
                serde_json::to_string(&vec!["xxx"; 18]).unwrap()
            )
        );
    }
    let huge = w
        .rows_of("crm")
        .into_iter()
        .find(|row| row.message_id == "huge")
        .unwrap();
    assert_eq!(huge.attempts, 0, "{huge:?}");
}

/// A URL template sends each call to its own record's URL, the values
/// percent-encoded into the path, while the endpoint keeps one slot and
/// one receiver protection (the template's, not one per user); a call
/// with no value for the template is a dead letter with no attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_template_sends_each_call_to_its_record_through_one_endpoint() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    let template = format!(
        "{}/users/{{{{userId}}}}?plan={{{{properties.plan}}}}",
        r.url().trim_end_matches('/')
    );
    let mut text = toml(&head(true, 8, 8, ""), &[src("crm", &[&template])]);
    text = text.replace(
        "[sources.webhooks]\n",
        "[sources.webhooks]\nmethod = \"PATCH\"\n",
    );
    text += "[sources.webhooks.protection]\nrate_per_second = 1000\n";
    let w = World::new(&text);
    let call = |id: &str, user: &str| {
        let body = format!(
            r#"{{"type":"track","event":"Plan Changed","userId":"{user}","properties":{{"plan":"pro plus"}},"messageId":"{id}","timestamp":"2024-05-01T12:00:00.000Z"}}"#
        );
        (id.to_owned(), body)
    };
    let calls = vec![
        call("a", "u-1"),
        call("b", "u 2/../x"),
        call("c", "ü"),
        (
            "none".to_owned(),
            r#"{"type":"track","event":"Plan Changed","anonymousId":"anon","properties":{"plan":"pro"},"messageId":"none"}"#.to_owned(),
        ),
    ];
    w.add_calls("crm", &calls).await;
    let d = w.start();
    all_delivered_but(&w, "crm", "none").await;
    stop(d, Duration::from_secs(5)).await;
    let mut got: Vec<(String, String)> = r
        .received()
        .iter()
        .map(|q| (q.method.clone(), q.path.clone()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (
                "PATCH".to_owned(),
                "/hook/users/%C3%BC?plan=pro%20plus".to_owned()
            ),
            (
                "PATCH".to_owned(),
                "/hook/users/u%202%2F..%2Fx?plan=pro%20plus".to_owned()
            ),
            (
                "PATCH".to_owned(),
                "/hook/users/u-1?plan=pro%20plus".to_owned()
            ),
        ]
    );
    assert!(r.received().iter().all(verified));
    let none = w
        .rows_of("crm")
        .into_iter()
        .find(|row| row.message_id == "none")
        .unwrap();
    assert_eq!(none.attempts, 0, "{none:?}");
    let guarded = w.relay.guards.report(w.relay.clock.now());
    assert_eq!(
        guarded.iter().map(|g| g.url.as_str()).collect::<Vec<_>>(),
        [template.split('?').next().unwrap()],
        "one protection for the endpoint (shown without its query), none per user"
    );
}

/// A source that batches sends its calls several to a POST, as JSON
/// arrays of their bodies signed as one body; a batch answered 503 waits
/// with its state on its first row (each row names the batch) and is sent
/// again whole, the same bytes under the same id, and every call is
/// delivered once its batch is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batching_source_sends_calls_several_to_a_post_and_retries_a_batch_whole() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::Status(503, vec![]));
    let mut text = toml(&head(true, 64, 8, ""), &[src("b", &[&r.url()])]);
    text += "[sources.webhooks.batch]\nmax_calls = 4\n";
    let w = World::new(&text);
    w.add("b", &ids("c", 10)).await;
    let d = w.start();
    eventually("every batch tried once", Duration::from_secs(20), || {
        r.received().len() >= 3
    })
    .await;
    eventually("the batches wait", Duration::from_secs(10), || {
        w.rows_of("b").iter().all(|row| row.attempts == 1)
    })
    .await;
    // The rows of one batch share its due time and state.
    let waiting = w.rows_of("b");
    let dues: std::collections::BTreeSet<i64> = waiting.iter().map(|row| row.due_at).collect();
    assert!(dues.len() <= 3, "one due time per batch: {dues:?}");
    r.answer(Answer::Status(200, vec![]));
    eventually("every call delivered", Duration::from_secs(60), || {
        w.all("b", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;

    let got = r.received();
    assert!(got.iter().all(verified), "each batch is signed as one body");
    let mut by_key: HashMap<String, Vec<&receiver::Received>> = HashMap::new();
    for q in &got {
        by_key.entry(q.key.clone().unwrap()).or_default().push(q);
    }
    assert_eq!(by_key.len(), 3, "10 calls, at most 4 a batch");
    let mut calls = 0;
    for (key, sent) in &by_key {
        assert!(key.starts_with("batch_"), "{key}");
        // Once answered 503 and once sent again, whole: rows restored one
        // by one would each have sent it again.
        assert_eq!(sent.len(), 2, "{key}");
        assert!(
            sent.iter().all(|q| q.body == sent[0].body),
            "the same bytes each time"
        );
        let body: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
        let items = body.as_array().unwrap();
        assert!(items.len() <= 4 && items.iter().all(|c| c["event"] == "Signed Up"));
        calls += items.len();
    }
    assert_eq!(calls, 10);
    assert!(w.rows_of("b").iter().all(|row| row.attempts == 2));
    let m = w.metrics();
    assert!(
        m.contains(r#"callpost_relay_deliveries_total{outcome="delivered"} 10"#),
        "{m}"
    );
}

/// A request that waited for its endpoint's cap is logged as sent when it
/// went out: with one request in flight per URL and a receiver that takes
/// 300 ms, the second call's attempt goes out only after the first's
/// answer, and its log says so (the core's `handle_sent`), not the time
/// both were taken from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_waited_for_its_endpoint_is_logged_from_its_send() {
    let slow = Receiver::start("127.0.0.1:0").await.unwrap();
    slow.answer(Answer::StatusAfter(400, Duration::from_millis(300)));
    let w = World::new(&toml(&head(true, 64, 1, ""), &[src("s", &[&slow.url()])]));
    w.add("s", &ids("s", 2)).await;
    let d = w.start();
    eventually("both dead letters", Duration::from_secs(20), || {
        w.all("s", Status::Dead)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    let mut sent: Vec<(i64, i64)> = w
        .rows_of("s")
        .iter()
        .map(|row| {
            let o: serde_json::Value =
                serde_json::from_str(row.outcome.as_deref().unwrap()).unwrap();
            let at = |k: &str| {
                let t = &o["log"][0][k];
                t.as_i64().unwrap_or_else(|| panic!("{k} in {o}"))
            };
            (at("sent_at"), at("ended_at"))
        })
        .collect();
    sent.sort_unstable();
    let [(first_sent, first_ended), (second_sent, second_ended)] = sent[..] else {
        panic!("{sent:?}")
    };
    assert!(first_ended - first_sent >= 300, "{sent:?}");
    assert!(
        second_sent >= first_sent + 300,
        "the second went out after the first's answer: {sent:?}"
    );
    assert!(second_ended - second_sent >= 300, "{sent:?}");
}

/// The saved attempt log of a row (pending rows keep their delivery's
/// state, dead letters their record).
fn log_of(row: &StoredRow) -> Vec<serde_json::Value> {
    let text = row.state.as_deref().or(row.outcome.as_deref()).unwrap();
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    v["log"].as_array().cloned().unwrap_or_default()
}

/// A receiver that fails every request gets a run of them, then one probe
/// at a time: the circuit opens and the other calls are held back, each
/// rescheduled after the probe, instead of all being sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_is_probed_not_flooded() {
    let down = Receiver::start("127.0.0.1:0").await.unwrap();
    down.answer(Answer::Status(503, vec![]));
    let w = World::new(&toml(
        &head(true, 64, 1, ""),
        &[Src {
            protection: Some("breaker_failures = 3\nbreaker_open_ms = 60000"),
            ..src("s", &[&down.url()])
        }],
    ));
    w.add("s", &ids("s", 30)).await;
    let d = w.start();
    eventually("every call tried once", Duration::from_secs(30), || {
        let rows = w.rows_of("s");
        rows.iter().all(|r| r.state.is_some())
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    // Three failures open the circuit; the next probe is a minute away.
    assert_eq!(down.received().len(), 3);
    let rows = w.rows_of("s");
    let held: Vec<_> = rows
        .iter()
        .filter(|r| log_of(r)[0]["outcome"]["kind"] == "held")
        .collect();
    assert_eq!(held.len(), 27);
    let now = w.relay.clock.now_ms();
    for r in &held {
        assert_eq!(log_of(r)[0]["outcome"]["reason"], "circuit_open");
        assert!(
            r.due_at >= now + 50_000,
            "held until the probe: {}",
            r.due_at - now
        );
    }
    // `/admin/status` shows the endpoint as it stands.
    let shown = serde_json::to_value(w.relay.guards.report(w.relay.clock.now())).unwrap();
    assert_eq!(shown.as_array().map(Vec::len), Some(1), "{shown}");
    assert_eq!(shown[0]["url"], down.url(), "{shown}");
    assert_eq!(shown[0]["state"]["kind"], "circuit_open", "{shown}");
    assert!(shown[0]["state"]["until"].as_i64().unwrap() >= now + 50_000);
    assert_eq!(
        (shown[0]["failures"].clone(), shown[0]["in_flight"].clone()),
        (json!(3), json!(0))
    );
    let m = w.metrics();
    assert!(
        m.contains(r#"callpost_relay_endpoint_state_changes_total{state="circuit_open"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"callpost_relay_webhook_attempts_total{result="held"} 27"#),
        "{m}"
    );
}

/// `[operator]`: a circuit opening and dead letters reach the operator's
/// own URL as signed operational events, dead letters counted per window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operational_events_reach_the_operator_signed() {
    let ops = Receiver::start("127.0.0.1:0").await.unwrap();
    let down = Receiver::start("127.0.0.1:0").await.unwrap();
    down.answer(Answer::Status(503, vec![]));
    let refusing = Receiver::start("127.0.0.1:0").await.unwrap();
    refusing.answer(Answer::Status(400, vec![]));
    let operator = format!(
        "[operator]\nurls = [\"{}\"]\nshared_secret = \"ops-secret\"\ndead_letter_window_seconds = 1\n",
        ops.url()
    );
    let w = World::new(&toml(
        &(head(true, 64, 1, "") + &operator),
        &[
            Src {
                protection: Some("breaker_failures = 3\nbreaker_open_ms = 60000"),
                ..src("s", &[&down.url()])
            },
            src("bad", &[&refusing.url()]),
        ],
    ));
    w.add("s", &ids("s", 5)).await;
    w.add("bad", &ids("bad", 4)).await;
    let d = w.start();
    eventually("two operational events", Duration::from_secs(30), || {
        ops.received().len() >= 2
    })
    .await;
    // Nothing more comes: one event for the opening, one for the window.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop(d, Duration::from_secs(5)).await;
    let by_type: HashMap<String, serde_json::Value> = operator_events(&ops, "ops-secret")
        .into_iter()
        .map(|body| (body["type"].as_str().unwrap().to_owned(), body))
        .collect();
    assert_eq!(ops.received().len(), 2, "{by_type:?}");
    let opened = &by_type["endpoint.circuit_opened"];
    assert_eq!(opened["data"]["url"], down.url());
    let dead = &by_type["calls.dead_lettered"];
    assert_eq!(dead["data"]["count"], 4, "{dead}");
    assert_eq!(dead["data"]["sources"], json!({"bad": 4}));
    assert_eq!(
        dead["data"]["destinations"],
        json!({"bad": {"webhooks": 4}}),
        "named by destination too"
    );
    let m = w.metrics();
    assert!(
        m.contains(
            r#"callpost_relay_destination_deliveries_total{source="bad",destination="webhooks",outcome="dead"} 4"#
        ),
        "{m}"
    );
    assert!(
        m.contains(r#"callpost_relay_operator_events_total{result="sent"} 2"#),
        "{m}"
    );
}

/// The operational events `ops` received, each verified with `secret` and
/// its `id` checked against its `Idempotency-Key`, as bodies in order.
fn operator_events(ops: &Receiver, secret: &str) -> Vec<serde_json::Value> {
    let secret = callpost_core::Secret::new(secret).unwrap();
    ops.received()
        .iter()
        .map(|r| {
            let headers: Vec<(&str, &str)> = r
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let got = callpost_core::receive::receive(
                &r.body,
                headers,
                std::slice::from_ref(&secret),
                callpost_core::receive::ReceiveOptions::default(),
            );
            assert!(got.is_ok(), "verified with the operator's secret: {got:?}");
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(body["id"].as_str(), r.key.as_deref(), "{body}");
            body
        })
        .collect()
}

/// A circuit that closes again (its probe answered) is told too: the
/// operator gets `endpoint.circuit_opened`, then `endpoint.circuit_closed`,
/// both signed, and every call is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_is_told_when_a_circuit_opens_and_closes() {
    let ops = Receiver::start("127.0.0.1:0").await.unwrap();
    let flaky = Receiver::start("127.0.0.1:0").await.unwrap();
    flaky.answer(Answer::Status(503, vec![]));
    let operator = format!(
        "[operator]\nurls = [\"{}\"]\nshared_secret = \"ops-secret\"\n",
        ops.url()
    );
    let w = World::new(&toml(
        &(head(true, 64, 1, "") + &operator),
        &[Src {
            protection: Some("breaker_failures = 3\nbreaker_open_ms = 1000"),
            ..src("s", &[&flaky.url()])
        }],
    ));
    w.add("s", &ids("s", 5)).await;
    let d = w.start();
    eventually("the circuit opened", Duration::from_secs(30), || {
        !ops.received().is_empty()
    })
    .await;
    flaky.answer(Answer::Status(200, vec![]));
    eventually("every call delivered", Duration::from_secs(60), || {
        w.all("s", Status::Delivered)
    })
    .await;
    eventually("the circuit closed", Duration::from_secs(30), || {
        ops.received().len() >= 2
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    let events = operator_events(&ops, "ops-secret");
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["endpoint.circuit_opened", "endpoint.circuit_closed"]
    );
    assert_eq!(events[1]["data"]["url"], flaky.url());
}

/// A receiver's 429 with Retry-After holds back every call to its URL, not
/// only the one it answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_slows_the_endpoint_for_every_call() {
    let busy = Receiver::start("127.0.0.1:0").await.unwrap();
    busy.answer(Answer::Status(429, vec![("retry-after", "120".into())]));
    let w = World::new(&toml(&head(true, 64, 1, ""), &[src("s", &[&busy.url()])]));
    w.add("s", &ids("s", 10)).await;
    let d = w.start();
    eventually("every call tried once", Duration::from_secs(30), || {
        w.rows_of("s").iter().all(|r| r.state.is_some())
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(busy.received().len(), 1, "one request, then the pause");
    let now = w.relay.clock.now_ms();
    for r in w.rows_of("s") {
        assert!(r.due_at >= now + 100_000, "{}", r.due_at - now);
    }
}

/// With a rate limit, requests to the URL are spaced: ten calls at 5 a
/// second take at least 1.8 s whatever the machine (a lower bound the
/// limiter imposes, not a speed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_spaces_the_requests() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    let w = World::new(&toml(
        &head(true, 64, 8, ""),
        &[Src {
            protection: Some("rate_per_second = 5"),
            ..src("s", &[&r.url()])
        }],
    ));
    w.add("s", &ids("s", 10)).await;
    let started = std::time::Instant::now();
    let d = w.start();
    eventually("every call delivered", Duration::from_secs(30), || {
        w.all("s", Status::Delivered)
    })
    .await;
    let took = started.elapsed();
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.received().len(), 10);
    assert!(took >= Duration::from_millis(1_790), "{took:?}");
}

/// Protection settings are the core's, checked at start.
#[test]
fn bad_operator_settings_are_refused_at_start() {
    let url = "https://ops.example.com/events";
    for (lines, what) in [
        ("urls = []".to_owned(), "operator: "),
        (
            format!("urls = [\"{url}\"]\nbacklog_threshold = 0"),
            "operator.backlog_threshold",
        ),
        (
            format!("urls = [\"{url}\"]\ndead_letter_window_seconds = 0"),
            "operator.dead_letter_window_seconds",
        ),
        (
            format!("urls = [\"{url}\"]\ndead_letter_window_seconds = 3601"),
            "operator.dead_letter_window_seconds",
        ),
        ("urls = [\"ftp://x.example.com/\"]".to_owned(), "operator: "),
        (
            format!("urls = [\"{url}\"]\nthreshold = 5"),
            "unknown field",
        ),
    ] {
        let text = head(true, 64, 8, "") + "[operator]\n" + &lines + "\n";
        let e = load_err(&text);
        assert!(e.contains(what), "{lines}: {e}");
    }
    let (cfg, _dir) = load(&(head(true, 64, 8, "") + &format!("[operator]\nurls = [\"{url}\"]\n")));
    let op = cfg.operator.unwrap();
    assert_eq!(op.notify, callpost_core::NotifierConfig::default());
}

#[test]
fn bad_protection_settings_are_refused_at_start() {
    for (lines, what) in [
        ("rate_per_second = 0", "rate_per_second"),
        ("max_in_flight = 0", "max_in_flight"),
        ("breaker_open_ms = 5", "breaker_open_ms"),
        ("rate = 3", "unknown field"),
        ("disable_after_ms = 60000", "disable_after_ms"),
    ] {
        let text = toml(
            &head(true, 64, 8, ""),
            &[Src {
                protection: Some(lines),
                ..src("s", &["https://hooks.example.com/in"])
            }],
        );
        let e = load_err(&text);
        assert!(e.contains(what), "{lines}: {e}");
    }
    // Two sources may not protect one URL differently.
    let text = toml(
        &head(true, 64, 8, ""),
        &[
            Src {
                protection: Some("rate_per_second = 5"),
                ..src("a", &["https://hooks.example.com/in"])
            },
            Src {
                protection: Some("rate_per_second = 6"),
                ..src("b", &["https://hooks.example.com/in"])
            },
        ],
    );
    let e = load_err(&text);
    assert!(e.contains("other protection settings"), "{e}");
}

// -- 2. 3xx, 4xx, 429, 5xx -------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receivers_answers_are_handled_as_the_core_says() {
    let target = Receiver::start("127.0.0.1:0").await.unwrap();
    let moved = Receiver::start("127.0.0.1:0").await.unwrap();
    moved.answer(Answer::Status(302, vec![("location", target.url())]));
    let bad = Receiver::start("127.0.0.1:0").await.unwrap();
    bad.answer(Answer::Status(400, vec![]));
    let busy = Receiver::start("127.0.0.1:0").await.unwrap();
    busy.answer(Answer::Status(429, vec![("retry-after", "3600".into())]));
    let down = Receiver::start("127.0.0.1:0").await.unwrap();
    down.answer(Answer::Status(503, vec![]));
    let w = World::new(&toml(
        &head(true, 64, 8, ""),
        &[
            src("moved", &[&moved.url()]),
            src("bad", &[&bad.url()]),
            src("busy", &[&busy.url()]),
            src("down", &[&down.url()]),
        ],
    ));
    for s in ["moved", "bad", "busy", "down"] {
        w.add(s, &[format!("{s}-1")]).await;
    }
    let started = w.relay.clock.now_ms();
    let d = w.start();
    eventually("the first answers stored", Duration::from_secs(20), || {
        w.all("moved", Status::Dead)
            && w.all("bad", Status::Dead)
            && w.rows_of("busy")[0].state.is_some()
            && w.rows_of("down")[0].state.is_some()
    })
    .await;

    // 3xx and 4xx: rejected, and not followed.
    assert_eq!(target.connections(), 0, "the redirect is not followed");
    for (s, status) in [("moved", 302), ("bad", 400)] {
        let row = &w.rows_of(s)[0];
        assert_eq!(row.attempts, 1);
        let o: serde_json::Value = serde_json::from_str(row.outcome.as_deref().unwrap()).unwrap();
        assert_eq!(o["kind"], "gave_up", "{o}");
        assert_eq!(o["reason"], "all_endpoints_rejected", "{o}");
        assert!(
            o["message"]
                .as_str()
                .unwrap()
                .starts_with("delivery gave up after 1 attempts"),
            "{o}"
        );
        assert_eq!(o["log"].as_array().unwrap().len(), 1, "{o}");
        assert_eq!(o["log"][0]["outcome"]["status"], status, "{o}");
        // The Python record's order: the core's outcome, then message, then log.
        let text = row.outcome.as_deref().unwrap();
        assert!(text.starts_with(r#"{"kind":"gave_up","#), "{text}");
        let (m, l) = (
            text.find(r#","message":"#).unwrap(),
            text.find(r#","log":["#).unwrap(),
        );
        assert!(m < l && text.ends_with("]}"), "{text}");
    }
    // 429 with Retry-After: waits as long as it says.
    let busy_row = &w.rows_of("busy")[0];
    assert_eq!((busy_row.status, busy_row.attempts), (Status::Pending, 1));
    assert!(
        busy_row.due_at >= started + 3_600_000 - 1_000,
        "Retry-After is kept"
    );
    assert!(busy_row.claim.is_none(), "the lease is given back");
    // 5xx: retried after the core's backoff, from the saved state.
    let down_row = w.rows_of("down")[0].clone();
    assert_eq!((down_row.status, down_row.attempts), (Status::Pending, 1));
    assert!(
        down_row.due_at > w.relay.clock.now_ms(),
        "due later, not now"
    );
    down.answer(Answer::Status(200, vec![]));
    eventually("the retry delivered", Duration::from_secs(30), || {
        w.all("down", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    let got = down.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].body, got[1].body, "the same signed body");
    assert_eq!(got[0].key, got[1].key);
    assert_eq!(w.rows_of("down")[0].attempts, 2);
    assert_eq!(busy.received().len(), 1);
    let m = w.metrics();
    assert!(
        m.contains(r#"callpost_relay_deliveries_total{outcome="dead"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"callpost_relay_webhook_attempts_total{result="3xx"} 1"#),
        "{m}"
    );
}

// -- 3. a slow receiver does not hold back another source -------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_receiver_does_not_hold_back_another_source() {
    let slow = Receiver::start("127.0.0.1:0").await.unwrap();
    slow.answer(Answer::Hold);
    let fast = Receiver::start("127.0.0.1:0").await.unwrap();
    // 8 slots: each source may hold 4; 2 requests per endpoint.
    let w = World::new(&toml(
        &head(true, 8, 2, ""),
        &[src("slow", &[&slow.url()]), src("fast", &[&fast.url()])],
    ));
    w.add("slow", &ids("s", 10)).await;
    let d = w.start();
    eventually(
        "the slow receiver holding two requests",
        Duration::from_secs(10),
        || slow.started() == 2,
    )
    .await;
    w.add("fast", &ids("f", 6)).await;
    eventually("the other source's calls", Duration::from_secs(30), || {
        fast.received().len() == 6
    })
    .await;
    assert_eq!(
        slow.started(),
        2,
        "every call of the other source arrived while the slow receiver still held its first requests"
    );
    assert_eq!(slow.in_flight(), 2);
    eventually("stored", Duration::from_secs(10), || {
        w.all("fast", Status::Delivered)
    })
    .await;
    slow.open();
    stop(d, Duration::from_secs(5)).await;
}

// -- 4. the cap per endpoint ------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_to_one_endpoint_are_capped_across_sources() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::Hold);
    let w = World::new(&toml(
        &head(true, 32, 3, ""),
        &[src("a", &[&r.url()]), src("b", &[&r.url()])],
    ));
    w.add("a", &ids("a", 6)).await;
    w.add("b", &ids("b", 6)).await;
    let d = w.start();
    eventually("three requests held", Duration::from_secs(10), || {
        r.in_flight() == 3
    })
    .await;
    // Room for more to arrive, if the cap let them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        r.started(),
        3,
        "no more than endpoint_concurrency in flight"
    );
    r.open();
    eventually("every call delivered", Duration::from_secs(30), || {
        w.all("a", Status::Delivered) && w.all("b", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.max_in_flight(), 3);
    assert_eq!(r.started(), 12);
}

// -- 5. the receiver's 5 s start at the send --------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeout_counts_from_the_send_not_from_the_wait_for_a_permit() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::After(Duration::from_secs(1)));
    let w = World::new(&toml(&head(true, 32, 1, ""), &[src("a", &[&r.url()])]));
    w.add("a", &ids("a", 8)).await;
    let d = w.start();
    eventually("every call delivered", Duration::from_secs(60), || {
        w.all("a", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.started(), 8, "none timed out and was sent again");
    assert_eq!(r.max_in_flight(), 1);
    assert!(w.rows_of("a").iter().all(|row| row.attempts == 1));
    assert!(!w.metrics().contains(r#"result="timeout""#));
}

// -- 6. a 200 with a slow body ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_with_a_slow_body_is_delivered_not_retried() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::Trickle);
    let w = World::new(&toml(&head(true, 32, 4, ""), &[src("a", &[&r.url()])]));
    w.add("a", &ids("a", 2)).await;
    let d = w.start();
    // The body takes 30 s; the delivery is stored long before.
    eventually("delivered", Duration::from_secs(20), || {
        w.all("a", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.started(), 2);
    assert!(w.rows_of("a").iter().all(|row| row.attempts == 1));
}

/// A receiver that trickles its bodies holds no more of the relay's
/// connections than its endpoint's cap: a body still being read keeps its
/// request's slot, and gives it up (dropping its connection) as soon as
/// another request waits for it. Before, the rest of each body was read
/// apart from the cap, and such a receiver held thousands of sockets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_trickling_its_bodies_holds_no_more_connections_than_its_cap() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::Trickle);
    let w = World::new(&toml(&head(true, 64, 4, ""), &[src("a", &[&r.url()])]));
    w.add("a", &ids("a", 40)).await;
    // The relay's side, sampled from the kernel: its connections to the
    // receiver that are established (a connection it dropped is not; the
    // receiver notices the close only at its next write).
    let port = r.addr.port();
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sampler = {
        let most = Arc::clone(&most);
        tokio::spawn(async move {
            loop {
                let n = established_to(port);
                most.fetch_max(n, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let d = w.start();
    eventually("every call delivered", Duration::from_secs(60), || {
        w.all("a", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    sampler.abort();
    assert_eq!(r.started(), 40);
    let most = most.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("most connections established to the trickling receiver at once: {most}");
    // The cap, and as many idle in the pool (none here: no body ends).
    assert!(most <= 8, "{most} connections at once against a cap of 4");
}

/// How many established TCP connections go to `port` on 127.0.0.1, as the
/// kernel lists them (`/proc/net/tcp`: addresses in hex, state 01).
fn established_to(port: u16) -> usize {
    let remote = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2] == remote && f[3] == "01"
        })
        .count()
}

// -- 6b. a receiver that writes its status line and its body apart ---------

#[path = "../../examples/common/answer_receiver.rs"]
mod answer_receiver;

/// Delivers `n` calls to an [`answer_receiver::receiver`]: every one is
/// delivered; how long they took, and how many of their logs kept the
/// answer's start.
async fn deliver_to_raw(apart: bool, n: usize) -> (Duration, usize) {
    let url = answer_receiver::receiver(apart).await.unwrap();
    let w = World::new(&toml(&head(true, 64, 8, ""), &[src("a", &[&url])]));
    w.add("a", &ids("a", n)).await;
    let started = std::time::Instant::now();
    let d = w.start();
    eventually("every call delivered", Duration::from_secs(120), || {
        w.all("a", Status::Delivered)
    })
    .await;
    let took = started.elapsed();
    stop(d, Duration::from_secs(5)).await;
    let logged = w
        .rows_of("a")
        .iter()
        .filter(|row| log_of(row)[0]["answer"] == "ok")
        .count();
    (took, logged)
}

/// An attempt's result goes to the core at the status line: a receiver
/// that writes its body in a second write (held back about 40 ms by Nagle
/// on its side and delayed ACKs on ours) is delivered to about as fast as
/// one that writes both at once (x1.0 to x1.3 here). Waiting for the body
/// before recording the attempt (even 250 ms at most) made each attempt
/// about 40 ms longer: x8 over 2,000 calls. The bound, x3, is far from
/// both; each side is the faster of two runs, so a moment of load on a
/// shared machine does not decide it. The same comparison, measured, is
/// `relay/examples/bench_answer.rs` (`benches/relay.sh`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_writes_its_body_apart_is_delivered_to_as_fast() {
    const CALLS: usize = 2_000;
    let mut together = Duration::MAX;
    let mut apart = Duration::MAX;
    let mut logged = 0;
    for _ in 0..2 {
        let (took, n) = deliver_to_raw(false, CALLS).await;
        together = together.min(took);
        logged = logged.max(n);
        apart = apart.min(deliver_to_raw(true, CALLS).await.0);
    }
    let ratio = apart.as_secs_f64() / together.as_secs_f64();
    eprintln!(
        "{CALLS} deliveries: {together:?} to a receiver writing status and body together, \
         {apart:?} apart (x{ratio:.2}); answers logged with the body together: {logged}"
    );
    assert!(
        ratio < 3.0,
        "body apart {apart:?}, together {together:?}: x{ratio:.2}"
    );
    // The log keeps an answer that came with its status line and was read
    // by the end of the attempt's turn (most of them on a quiet machine).
    assert!(logged > 0, "no answer logged of {CALLS}");
}

// -- 7. the private-network rule --------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_never_connected_to() {
    let v4 = Receiver::start("127.0.0.1:0").await.unwrap();
    // Without IPv6 on the host the URL still names ::1, and the rule still
    // refuses it before any connection.
    let v6 = Receiver::start("[::1]:0").await.ok();
    let p4 = v4.addr.port();
    let p6 = v6.as_ref().map_or(p4, |r| r.addr.port());
    let urls = [
        ("v4", format!("http://127.0.0.1:{p4}/hook")),
        ("v6", format!("http://[::1]:{p6}/hook")),
        ("mapped", format!("http://[::ffff:127.0.0.1]:{p4}/hook")),
        ("name", format!("http://localhost:{p4}/hook")),
    ];
    let sources: Vec<Src<'_>> = urls.iter().map(|(n, u)| src(n, &[u])).collect();
    let w = World::new(&toml(&head(false, 32, 4, ""), &sources));
    // The configuration refuses a host written as a private address; a
    // name is left to the connection's check (its answer may change).
    for (name, url) in &urls {
        let one = World::new(&toml(&head(false, 32, 4, ""), &[src(name, &[url])]));
        let checked =
            check_destinations(&one.relay.cfg.sources, one.relay.cfg.allow_private_networks).await;
        if *name == "name" {
            assert!(checked.is_ok(), "{checked:?}");
        } else {
            let e = checked.unwrap_err();
            assert!(e.to_string().contains("private or loopback address"), "{e}");
            assert_eq!(e.code(), callpost_core::Code::PrivateAddress);
        }
    }
    for (name, _) in &urls {
        w.add(name, &[format!("{name}-1")]).await;
    }
    let d = w.start();
    eventually("every attempt made", Duration::from_secs(20), || {
        urls.iter().all(|(n, _)| w.rows_of(n)[0].attempts == 1)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(v4.connections(), 0, "nothing connected to 127.0.0.1");
    assert_eq!(
        v6.map_or(0, |r| r.connections()),
        0,
        "nothing connected to ::1"
    );
    for (name, _) in &urls {
        let row = &w.rows_of(name)[0];
        assert_eq!(
            (row.status, row.attempts),
            (Status::Pending, 1),
            "{name}: retried later"
        );
        let state = row.state.as_deref().unwrap();
        assert!(
            state.contains(
                "resolves only to private or loopback addresses (allow_private_networks is off)"
            ),
            "{name}: {state}"
        );
    }
    let m = w.metrics();
    assert!(
        m.contains(r#"callpost_relay_webhook_attempts_total{result="connection"} 4"#),
        "{m}"
    );
}

// -- 8. HTTPS with ca_file --------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_is_trusted_with_ca_file_and_refused_without() {
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("ca.pem");
    std::fs::write(&pem, cert.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    let r = Receiver::start_tls(Arc::new(server)).await;
    let url = format!("https://127.0.0.1:{}/hook", r.addr.port());

    let ca = format!("ca_file = \"{}\"", pem.display());
    let trusted = World::new(&toml(&head(true, 32, 4, &ca), &[src("a", &[&url])]));
    trusted.add("a", &ids("t", 2)).await;
    let d = trusted.start();
    eventually("delivered over HTTPS", Duration::from_secs(20), || {
        trusted.all("a", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.received().len(), 2);
    assert!(r.received().iter().all(verified));

    let untrusted = World::new(&toml(&head(true, 32, 4, ""), &[src("a", &[&url])]));
    untrusted.add("a", &ids("u", 1)).await;
    let d = untrusted.start();
    eventually("refused", Duration::from_secs(20), || {
        untrusted.all("a", Status::Dead)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.received().len(), 2, "nothing sent without trust");
    let row = &untrusted.rows_of("a")[0];
    let o: serde_json::Value = serde_json::from_str(row.outcome.as_deref().unwrap()).unwrap();
    assert_eq!(o["log"][0]["outcome"]["kind"], "tls", "{o}");
    assert!(untrusted.metrics().contains(r#"result="tls""#));
}

// -- 8b. outbound auth: OAuth 2.0 and mutual TLS ----------------------------

/// A source whose one endpoint is `endpoint` (an inline TOML table).
fn with_endpoint(head: &str, name: &str, endpoint: &str) -> String {
    toml(head, &[src(name, &["ENDPOINT"])]).replace("\"ENDPOINT\"", endpoint)
}

/// An OAuth 2.0 endpoint: its token is fetched once for many calls, with
/// the client's credentials in Basic and the grant in the form; a 401
/// drops it and the call is tried again with a new one; a token endpoint
/// that fails makes attempts that fail as `token` outcomes (retried,
/// counted) and never sends a request without a token.
#[cfg(feature = "test-clock")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth2_endpoint_sends_a_cached_bearer_token_and_refetches_it_after_a_401() {
    use base64::Engine as _;
    let token = |t: &str| {
        Answer::Json(
            200,
            format!(r#"{{"access_token":"{t}","token_type":"Bearer","expires_in":3600}}"#),
        )
    };
    let auth_server = Receiver::start("127.0.0.1:0").await.unwrap();
    auth_server.answer(token("t1"));
    let api = Receiver::start("127.0.0.1:0").await.unwrap();
    api.answer(Answer::Authorized("Bearer t1".into()));
    let w = World::new(&with_endpoint(
        &head(true, 8, 8, ""),
        "crm",
        &format!(
            "{{ url = \"{}\", auth = {{ type = \"oauth2\", token_url = \"{}\", \
             client_id = \"relay\", client_secret = \"t0ken-secret\", scope = \"users:write\" }} }}",
            api.url(),
            auth_server.url()
        ),
    ));
    w.add("crm", &ids("a", 5)).await;
    let d = w.start();
    eventually("delivered with t1", Duration::from_secs(20), || {
        w.all("crm", Status::Delivered)
    })
    .await;
    let asked = auth_server.received();
    assert_eq!(asked.len(), 1, "one token for five calls");
    assert_eq!(asked[0].method, "POST");
    assert_eq!(
        asked[0].body,
        b"grant_type=client_credentials&scope=users%3Awrite"
    );
    let authorization = |q: &receiver::Received| {
        q.headers
            .iter()
            .find(|(n, _)| n == "authorization")
            .map(|(_, v)| v.clone())
    };
    let basic = authorization(&asked[0]).unwrap();
    let pair = base64::engine::general_purpose::STANDARD
        .decode(basic.strip_prefix("Basic ").unwrap())
        .unwrap();
    assert_eq!(pair, b"relay:t0ken-secret");
    assert!(api
        .received()
        .iter()
        .all(|q| authorization(q).as_deref() == Some("Bearer t1")));
    assert!(api.received().iter().all(verified), "signed as ever");

    // The API revokes t1: a 401, then a new token, then the call.
    auth_server.answer(token("t2"));
    api.answer(Answer::Authorized("Bearer t2".into()));
    w.add("crm", &["rot".to_owned()]).await;
    let waiting = |w: &World, id: &str, attempts: i64| {
        w.rows_of("crm")
            .iter()
            .any(|r| r.message_id == id && r.status == Status::Pending && r.attempts == attempts)
    };
    eventually(
        "the 401 is retried, not dead",
        Duration::from_secs(20),
        || waiting(&w, "rot", 1),
    )
    .await;
    w.relay.clock.set_offset(60_000);
    w.relay.wake.notify_one();
    eventually("delivered with t2", Duration::from_secs(20), || {
        w.all("crm", Status::Delivered)
    })
    .await;
    assert_eq!(auth_server.received().len(), 2);
    assert_eq!(
        authorization(api.received().last().unwrap()).as_deref(),
        Some("Bearer t2")
    );

    // The token endpoint fails: the attempt fails as a token error and
    // nothing goes to the API without a token; once it is back, the call
    // goes.
    auth_server.answer(Answer::Json(401, r#"{"error":"invalid_client"}"#.into()));
    api.answer(Answer::Authorized("Bearer t3".into()));
    w.add("crm", &["down".to_owned()]).await;
    eventually("the 401 is retried", Duration::from_secs(20), || {
        waiting(&w, "down", 1)
    })
    .await;
    let sent = api.received().len();
    w.relay.clock.set_offset(120_000);
    w.relay.wake.notify_one();
    eventually("a token error, retried", Duration::from_secs(20), || {
        waiting(&w, "down", 2)
    })
    .await;
    assert_eq!(api.received().len(), sent, "no request without a token");
    let row = w
        .rows_of("crm")
        .into_iter()
        .find(|r| r.message_id == "down")
        .unwrap();
    let state = row.state.unwrap();
    assert!(state.contains(r#""kind":"token""#), "{state}");
    assert!(state.contains("invalid_client"), "{state}");
    assert!(!state.contains("t0ken-secret"), "no secret in the log");
    auth_server.answer(token("t3"));
    w.relay.clock.set_offset(900_000);
    w.relay.wake.notify_one();
    eventually("delivered with t3", Duration::from_secs(20), || {
        w.all("crm", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    let m = w.metrics();
    for line in [
        r#"callpost_relay_oauth_token_requests_total{result="ok"} 3"#,
        r#"callpost_relay_oauth_token_requests_total{result="refused"} 1"#,
        r#"callpost_relay_webhook_attempts_total{result="token"} 1"#,
    ] {
        assert!(m.contains(line), "{line}\n{m}");
    }
}

/// Endpoint auth the core refuses stops the relay at start, naming the
/// source and the endpoint, and never showing the secret.
#[test]
fn bad_endpoint_auth_is_refused_at_start() {
    for (auth, what) in [
        (
            r#"{ type = "basic", username = "a:b", password = "pw-secret" }"#,
            "cannot contain ':'",
        ),
        (
            r#"{ type = "oauth2", token_url = "ftp://auth.example.com/t", client_id = "c", client_secret = "pw-secret" }"#,
            "auth.token_url",
        ),
        (
            r#"{ type = "oauth2", token_url = "https://auth.example.com/t", client_id = "c", clientsecret = "pw-secret" }"#,
            "unknown field",
        ),
        (
            r#"{ type = "bearer", token = "pw-secret" }"#,
            "basic or oauth2",
        ),
    ] {
        let text = with_endpoint(
            &head(true, 8, 8, ""),
            "crm",
            &format!("{{ url = \"https://crm.example.com/in\", auth = {auth} }}"),
        );
        let e = load_err(&text);
        assert!(e.contains(what), "{auth}: {e}");
        assert!(e.contains("source \"crm\": webhooks.urls[0]"), "{e}");
        assert!(!e.contains("pw-secret"), "{e}");
    }
}

/// The token endpoint is reached under the receivers' rules: with private
/// networks off, a token URL written as a private address is refused when
/// the sources are checked, and one whose name resolves privately is
/// refused at each connection (the attempt fails as a token error; the
/// token server hears nothing).
#[cfg(feature = "test-clock")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoint_on_a_private_address_is_refused() {
    let auth_server = Receiver::start("127.0.0.1:0").await.unwrap();
    let grant = |host: &str| {
        format!(
            "{{ url = \"http://93.184.215.14/crm\", auth = {{ type = \"oauth2\", \
             token_url = \"http://{host}:{}/token\", client_id = \"c\", client_secret = \"s\" }} }}",
            auth_server.addr.port()
        )
    };
    let literal = World::new(&with_endpoint(
        &head(false, 8, 8, ""),
        "crm",
        &grant("127.0.0.1"),
    ));
    let e = check_destinations(&literal.relay.sources().list, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("the token host 127.0.0.1"), "{e}");
    check_destinations(&literal.relay.sources().list, true)
        .await
        .unwrap();

    let w = World::new(&with_endpoint(
        &head(false, 8, 8, ""),
        "crm",
        &grant("localhost"),
    ));
    w.add("crm", &["m".to_owned()]).await;
    let d = w.start();
    eventually("a token error", Duration::from_secs(20), || {
        w.rows_of("crm").iter().any(|r| r.attempts == 1)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    let row = &w.rows_of("crm")[0];
    let state = row.state.as_deref().unwrap();
    assert!(state.contains(r#""kind":"token""#), "{state}");
    assert!(state.contains("private or loopback"), "{state}");
    assert_eq!(auth_server.received().len(), 0);
}

/// A certificate `ca` signed for `names`, and its key.
fn issued(
    ca: &rcgen::Issuer<'_, rcgen::KeyPair>,
    names: &[&str],
) -> (rcgen::Certificate, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let cert = rcgen::CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, ca)
        .unwrap();
    (cert, key)
}

/// An endpoint behind a server that requires a client certificate: the
/// relay presents the endpoint's; without one the handshake fails (a tls
/// dead letter, nothing reaches the server's handler); a key that is not
/// the certificate's is refused when the sources are checked, without
/// showing the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_with_a_client_certificate_passes_mutual_tls() {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca = rcgen::Issuer::new(ca_params, ca_key);
    let (server_cert, server_key) = issued(&ca, &["127.0.0.1"]);
    let (client_cert, client_key) = issued(&ca, &["relay.test"]);
    let (_, other_key) = issued(&ca, &["other.test"]);

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_cert.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::clone(&provider),
    )
    .build()
    .unwrap();
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![server_cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        )
        .unwrap();
    let r = Receiver::start_tls(Arc::new(server)).await;
    let url = format!("https://127.0.0.1:{}/hook", r.addr.port());
    let dir = tempfile::tempdir().unwrap();
    let ca_pem = dir.path().join("ca.pem");
    std::fs::write(&ca_pem, ca_cert.pem()).unwrap();
    let head = head(true, 8, 8, &format!("ca_file = \"{}\"", ca_pem.display()));
    let config = |key: &rcgen::KeyPair| {
        with_endpoint(
            &head,
            "m",
            &format!(
                "{{ url = \"{url}\", client_certificate = {{ certificate = '''{}''', \
                 private_key = '''{}''' }} }}",
                client_cert.pem(),
                key.serialize_pem()
            ),
        )
    };

    let w = World::new(&config(&client_key));
    check_destinations(&w.relay.sources().list, true)
        .await
        .unwrap();
    w.add("m", &ids("c", 3)).await;
    let d = w.start();
    eventually("delivered over mutual TLS", Duration::from_secs(20), || {
        w.all("m", Status::Delivered)
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.received().len(), 3);
    assert!(r.received().iter().all(verified));

    let without = World::new(&toml(&head, &[src("m", &[&url])]));
    without.add("m", &ids("n", 1)).await;
    let d = without.start();
    eventually(
        "refused without a certificate",
        Duration::from_secs(20),
        || without.all("m", Status::Dead),
    )
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(r.received().len(), 3, "nothing reaches the API without one");

    let mismatched = World::new(&config(&other_key));
    let e = check_destinations(&mismatched.relay.sources().list, true)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not match"), "{e}");
    assert!(!e.contains("PRIVATE KEY"), "{e}");
}

// -- 8c. several destinations per source --------------------------------------

/// Stores calls of `source` as ingest does: one row for each destination
/// whose trigger takes the call.
async fn ingest(w: &World, source: &str, calls: &[&str]) {
    let now = w.relay.clock.now();
    let sources = w.relay.sources();
    let src = sources.get(source).unwrap();
    let mut rows = Vec::new();
    for (i, text) in calls.iter().enumerate() {
        let call = callpost_core::Call::from_json_str(text).unwrap();
        let byte = u8::try_from(i).unwrap();
        let accepted = callpost_core::ingest::originate(call, now, &mut || [byte; 16]).unwrap();
        callpost_relay::ops::push_rows(&mut rows, src, accepted, now.as_millis());
    }
    w.store.insert(rows, vec![]).await.unwrap();
    w.relay.wake.notify_one();
}

/// A source with three destinations, each with its own trigger, method,
/// mapping, batching and auth, against three real receivers: a CRM that
/// takes `PUT /users/{userId}` with a mapped body and an OAuth 2.0 bearer
/// token, a warehouse that takes every call in batches, and a chat
/// incoming webhook that takes `{"text": …}` for completed orders. Each
/// call reaches exactly the destinations its triggers name, each request
/// verifies, each delivery is kept apart (the log and a replay name the
/// destination), and a call no trigger takes is kept, undeliverable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_reaches_the_destinations_its_triggers_name() {
    let auth_server = Receiver::start("127.0.0.1:0").await.unwrap();
    auth_server.answer(Answer::Json(
        200,
        r#"{"access_token":"crm-token","token_type":"Bearer","expires_in":3600}"#.into(),
    ));
    let crm = Receiver::start("127.0.0.1:0").await.unwrap();
    crm.answer(Answer::Authorized("Bearer crm-token".into()));
    let warehouse = Receiver::start("127.0.0.1:0").await.unwrap();
    let chat = Receiver::start("127.0.0.1:0").await.unwrap();
    let text = format!(
        "{head}
[[sources]]
name = \"shop\"
write_keys = [\"wk-shop\"]

[[sources.destinations]]
name = \"crm\"
trigger = {{ field = \"type\", equals = \"identify\" }}
method = \"PUT\"
urls = [{{ url = \"http://{crm}/users/{{{{userId}}}}\", auth = {{ type = \"oauth2\", token_url = \"{token}\", client_id = \"relay\", client_secret = \"crm-secret\" }} }}]
shared_secret = \"{SECRET}\"
[sources.destinations.mapping]
email = {{ \"@path\" = \"traits.email\" }}
plan = {{ \"@path\" = \"traits.plan\" }}

[[sources.destinations]]
name = \"warehouse\"
trigger = {{ field = \"type\", in = [\"identify\", \"track\", \"page\"] }}
urls = [\"{wh}\"]
shared_secret = \"{SECRET}\"
[sources.destinations.batch]
max_calls = 10

[[sources.destinations]]
name = \"chat\"
trigger = {{ and = [{{ field = \"type\", equals = \"track\" }}, {{ field = \"event\", equals = \"Order Completed\" }}] }}
urls = [\"{chat}\"]
[sources.destinations.mapping]
text = {{ \"@template\" = \"{{{{userId}}}} ordered {{{{properties.total}}}} {{{{properties.currency}}}}\" }}
",
        head = head(true, 16, 8, ""),
        crm = crm.addr,
        token = auth_server.url(),
        wh = warehouse.url(),
        chat = chat.url(),
    );
    let w = World::new(&text);
    let calls = [
        r#"{"type":"identify","userId":"u1","traits":{"email":"ada@example.com","plan":"pro"},"messageId":"id-1"}"#,
        r#"{"type":"track","userId":"u1","event":"Order Completed","properties":{"total":25,"currency":"EUR"},"messageId":"oc-1"}"#,
        r#"{"type":"track","userId":"u2","event":"Product Viewed","messageId":"pv-1"}"#,
        r#"{"type":"page","userId":"u2","name":"Home","messageId":"pg-1"}"#,
        r#"{"type":"group","userId":"u2","groupId":"g1","messageId":"gr-1"}"#,
    ];
    ingest(&w, "shop", &calls).await;
    let d = w.start();
    eventually("every delivery ends", Duration::from_secs(20), || {
        w.rows_of("shop")
            .iter()
            .all(|r| r.status != Status::Pending)
    })
    .await;

    let to = |id: &str| -> Vec<(String, Status)> {
        let mut v: Vec<(String, Status)> = w
            .rows_of("shop")
            .into_iter()
            .filter(|r| r.message_id == id)
            .map(|r| (r.destination, r.status))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(
        to("id-1"),
        vec![
            ("crm".into(), Status::Delivered),
            ("warehouse".into(), Status::Delivered)
        ]
    );
    assert_eq!(
        to("oc-1"),
        vec![
            ("chat".into(), Status::Delivered),
            ("warehouse".into(), Status::Delivered)
        ]
    );
    assert_eq!(to("pv-1"), vec![("warehouse".into(), Status::Delivered)]);
    assert_eq!(to("pg-1"), vec![("warehouse".into(), Status::Delivered)]);
    assert_eq!(
        to("gr-1"),
        vec![(String::new(), Status::Undeliverable)],
        "no trigger takes a group call: kept, for no destination"
    );

    let got = crm.received();
    assert_eq!(got.len(), 1, "the CRM takes identify calls only");
    assert_eq!(
        (got[0].method.as_str(), got[0].path.as_str()),
        ("PUT", "/users/u1")
    );
    assert_eq!(got[0].body, br#"{"email":"ada@example.com","plan":"pro"}"#);
    assert!(verified(&got[0]));
    assert_eq!(auth_server.received().len(), 1);

    let got = warehouse.received();
    assert_eq!(got.len(), 1, "one batch");
    assert!(verified(&got[0]));
    let batch: Vec<serde_json::Value> = serde_json::from_slice(&got[0].body).unwrap();
    let mut ids: Vec<&str> = batch.iter().map(|b| b["type"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["identify", "page", "track", "track"]);

    let got = chat.received();
    assert_eq!(got.len(), 1, "the chat takes completed orders only");
    assert_eq!(got[0].body, br#"{"text":"u1 ordered 25 EUR"}"#);

    // A replay names one destination: only its deliveries go again.
    let filter = callpost_relay::store::ReplayFilter {
        calls: callpost_relay::store::LogFilter {
            source: Some("shop".into()),
            destination: Some("chat".into()),
            ..Default::default()
        },
        include_delivered: true,
        include_undeliverable: false,
    };
    let n = callpost_relay::ops::replay(&*w.store, &w.relay.clock, filter, false, false)
        .await
        .unwrap();
    assert_eq!(n, 1);
    w.relay.wake.notify_one();
    eventually("the chat gets it again", Duration::from_secs(20), || {
        chat.received().len() == 2
    })
    .await;
    stop(d, Duration::from_secs(5)).await;
    assert_eq!(crm.received().len(), 1);
    assert_eq!(warehouse.received().len(), 1);
}

// -- 9. stop ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_gives_back_what_is_still_in_flight_after_the_grace() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::Hold);
    let w = World::new(&toml(&head(true, 32, 8, ""), &[src("a", &[&r.url()])]));
    w.add("a", &ids("a", 3)).await;
    let d = w.start();
    eventually("three requests held", Duration::from_secs(10), || {
        r.in_flight() == 3
    })
    .await;
    assert!(w.rows_of("a").iter().all(|row| row.claim.is_some()));
    stop(d, Duration::from_millis(300)).await;
    for row in w.rows_of("a") {
        assert_eq!(row.status, Status::Pending);
        assert_eq!(
            (row.claim, row.lease_until),
            (None, None),
            "released: claimable at once"
        );
        assert_eq!((row.attempts, row.state.as_deref()), (0, None), "unchanged");
    }
    r.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_lets_attempts_in_flight_end_within_the_grace() {
    let r = Receiver::start("127.0.0.1:0").await.unwrap();
    r.answer(Answer::After(Duration::from_millis(500)));
    let w = World::new(&toml(&head(true, 32, 8, ""), &[src("a", &[&r.url()])]));
    w.add("a", &ids("a", 3)).await;
    let d = w.start();
    eventually("three requests sent", Duration::from_secs(10), || {
        r.started() == 3
    })
    .await;
    stop(d, Duration::from_secs(10)).await;
    assert!(w.all("a", Status::Delivered), "{:?}", w.rows_of("a"));
}

// -- 10. sources replaced while running ----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_replaced_while_running_apply_from_the_next_round() {
    let old = Receiver::start("127.0.0.1:0").await.unwrap();
    let new = Receiver::start("127.0.0.1:0").await.unwrap();
    let other = Receiver::start("127.0.0.1:0").await.unwrap();
    let down = Receiver::start("127.0.0.1:0").await.unwrap();
    down.answer(Answer::Status(500, vec![]));
    let w = World::new(&toml(
        &head(true, 64, 8, ""),
        &[src("a", &[&old.url()]), src("gone", &[&down.url()])],
    ));
    let d = w.start();
    w.add("a", &ids("a1", 5)).await;
    w.add("gone", &ids("g", 3)).await;
    eventually("the first calls delivered", Duration::from_secs(20), || {
        w.all("a", Status::Delivered)
    })
    .await;
    eventually(
        "gone's calls waiting for a retry",
        Duration::from_secs(20),
        || w.rows_of("gone").iter().all(|r| r.attempts > 0),
    )
    .await;

    // "a" now posts elsewhere, "b" appears, "gone" is removed.
    let (cfg, _dir) = load(&toml(
        &head(true, 64, 8, ""),
        &[src("a", &[&new.url()]), src("b", &[&other.url()])],
    ));
    w.relay.put_sources(
        cfg.sources.clone(),
        cfg.protections.clone(),
        w.relay.clock.now(),
    );
    assert_eq!(w.relay.sources().generation, 1);
    assert!(w.relay.sources().write_keys.contains_key("wk-b"));
    assert!(!w.relay.sources().write_keys.contains_key("wk-gone"));
    w.add("a", &ids("a2", 5)).await;
    w.add("b", &ids("b", 5)).await;
    eventually("the new calls delivered", Duration::from_secs(20), || {
        w.all("a", Status::Delivered) && w.all("b", Status::Delivered)
    })
    .await;
    eventually(
        "the removed source's calls set aside at once",
        Duration::from_secs(10),
        || w.all("gone", Status::Undeliverable),
    )
    .await;
    stop(d, Duration::from_secs(5)).await;

    let keys = |r: &Receiver| {
        let mut k: Vec<String> = count_by_key(&r.received()).into_keys().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&old), ids("a1", 5));
    assert_eq!(keys(&new), ids("a2", 5));
    assert_eq!(keys(&other), ids("b", 5));
    assert!(w.metrics().contains("undeliverable"), "{}", w.metrics());
}

// -- the memory store keeps the store contract -------------------------------

async fn memory_store() -> (Arc<dyn Store>, ()) {
    (Arc::new(MemoryStore::new()), ())
}

mod memory_contract {
    use super::*;
    contract_tests!(memory_store);
}
