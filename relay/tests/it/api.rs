//! The HTTP side of the relay, served on 127.0.0.1 over a memory store and
//! driven by raw TCP clients (half-sent requests need them): the Tracking
//! API's answers, CORS, the admin API, the probes, and every listener
//! protection.
//!
//! Timeouts in these tests are hang guards, never performance claims: a
//! protection that is missing shows as a guard firing.

use callpost_relay::clock::Clock;
use callpost_relay::config::{self, Overrides};
use callpost_relay::store::memory::MemoryStore;
use callpost_relay::store::{
    Claimed, CommitObserver, Cursor, DeadLetter, Deletion, Erased, Finish, Hold, LogEntry,
    LogFilter, LoggedCall, Page, Purged, RejectedEntry, RejectedRecord, RejectedRow, ReplayFilter,
    Resealed, Retention, Row, SealRow, SealTable, Stats, Status, Store, StoreError, StoredSources,
};
use callpost_relay::{App, Relay};
use serde_json::{json, Value};
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const TOKEN: &str = "api-test-admin-token-0123456789abcdef";
const KEY: &str = "wk-web";
const NOWHERE_KEY: &str = "wk-nowhere";
/// The longest any single step may take before the test is failed.
const GUARD: Duration = Duration::from_secs(10);

// -- the relay under test -------------------------------------------------

struct Setup {
    /// Top-level TOML settings (before any table).
    top: String,
    /// Tables (`[limits]`, `[ingest]`).
    tables: String,
    admin_token: bool,
    test_clock: Option<i64>,
    store: Arc<MemoryStore>,
    /// Serves through this store instead (it wraps `store`).
    wrapped: Option<Arc<dyn Store>>,
    /// Keeps the sources in the database (`CALLPOST_RELAY_SECRET_KEY`).
    secret_key: bool,
}

impl Setup {
    fn new() -> Self {
        Self {
            top: String::new(),
            tables: String::new(),
            admin_token: true,
            test_clock: None,
            store: Arc::new(MemoryStore::new()),
            wrapped: None,
            secret_key: false,
        }
    }

    fn secret_key(mut self) -> Self {
        self.secret_key = true;
        self
    }

    fn top(mut self, s: &str) -> Self {
        self.top.push_str(s);
        self.top.push('\n');
        self
    }

    fn tables(mut self, s: &str) -> Self {
        self.tables.push_str(s);
        self.tables.push('\n');
        self
    }

    fn no_admin_token(mut self) -> Self {
        self.admin_token = false;
        self
    }

    fn store(mut self, store: MemoryStore) -> Self {
        self.store = Arc::new(store);
        self
    }

    async fn start(self) -> TestRelay {
        logs();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relay.toml");
        let token = if self.admin_token {
            format!("admin_token = \"{TOKEN}\"")
        } else {
            String::new()
        };
        let text = format!(
            r#"
listen = "127.0.0.1:0"
{token}
{top}
[[sources]]
name = "web"
write_keys = ["{KEY}"]
[sources.webhooks]
urls = ["http://127.0.0.1:9/hook"]
shared_secret = "s3cret"

[[sources]]
name = "nowhere"
write_keys = ["{NOWHERE_KEY}"]

[security]
allow_private_networks = true

# The listeners are the subject: calls stay where ingest put them.
[delivery]
enabled = false
{tables}
"#,
            top = self.top,
            tables = self.tables,
        );
        std::fs::write(&path, text).unwrap();
        let secret_key = self.secret_key;
        let cfg = config::load(
            &Overrides {
                config: Some(path.to_string_lossy().into_owned()),
                test_clock: self.test_clock,
                ..Overrides::default()
            },
            &|k| {
                // 32 bytes of 0x2a, in base64.
                (secret_key && k == "CALLPOST_RELAY_SECRET_KEY")
                    .then(|| "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=".to_owned())
            },
        )
        .unwrap();
        let store: Arc<dyn Store> = match self.wrapped {
            Some(w) => w,
            None => self.store.clone(),
        };
        let app = App::start(cfg, store, Arc::new(Clock::new()), None)
            .await
            .unwrap();
        TestRelay {
            relay: Arc::clone(app.relay()),
            store: self.store,
            api: app.api_addr(),
            admin: app.admin_addr(),
            app: Some(app),
            _dir: dir,
        }
    }
}

struct TestRelay {
    relay: Arc<Relay>,
    store: Arc<MemoryStore>,
    api: SocketAddr,
    admin: Option<SocketAddr>,
    app: Option<App>,
    _dir: tempfile::TempDir,
}

impl TestRelay {
    /// A metric's value (0 when it has no such series yet).
    fn metric(&self, series: &str) -> f64 {
        let text = self
            .relay
            .metrics
            .render(&callpost_relay::metrics::StoreCounts {
                healthy: true,
                ..Default::default()
            });
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }

    async fn wait_metric(&self, series: &str, value: f64) {
        guard(async {
            while self.metric(series) != value {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        call(self.api, "POST", path, headers, body).await
    }

    async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let auth = format!("Bearer {TOKEN}");
        call(
            self.admin.unwrap_or(self.api),
            method,
            path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
        .await
    }

    async fn shutdown(mut self) {
        if let Some(app) = self.app.take() {
            guard(app.stop()).await;
        }
    }
}

/// Logs of every relay in this test binary, for the tests that check a
/// warning was written (and that no secret was).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buf);
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || LogWriter(Arc::clone(&writer)))
            .try_init();
        buf
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        std::io::Write::write(&mut *self.0.lock().unwrap(), b)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_text() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).into_owned()
}

async fn guard<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, f)
        .await
        .expect("hang guard: the step did not end")
}

// -- a raw HTTP/1.1 client ------------------------------------------------

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: relay.test\r\n");
    if close {
        r.push_str("Connection: close\r\n");
    }
    let mut typed = false;
    for (k, v) in headers {
        typed |= k.eq_ignore_ascii_case("content-type");
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        if !typed {
            r.push_str("Content-Type: application/json\r\n");
        }
        r.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    let mut out = r.into_bytes();
    out.extend_from_slice(body);
    out
}

/// One request on a new connection; the answer.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    guard(async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&request(method, path, headers, body, true))
            .await
            .unwrap();
        read_reply(&mut s).await.expect("an answer")
    })
    .await
}

/// Reads one answer (headers, then `Content-Length` bytes); `None` when
/// the connection closes first.
async fn read_reply(s: &mut TcpStream) -> Option<Reply> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// Waits until the server closes the connection (EOF or reset); returns
/// what it sent first.
async fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
}

fn basic(key: &str) -> String {
    // base64 of "key:" without a crate: the test keys are ASCII.
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let raw = format!("{key}:").into_bytes();
    let mut out = String::from("Basic ");
    for c in raw.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn track(n: u32) -> Value {
    json!({"type": "track", "userId": format!("u{n}"), "event": "Order Completed", "messageId": format!("m-{n}")})
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

// -- the Tracking API -----------------------------------------------------

#[tokio::test]
async fn batches_and_single_calls_are_stored_and_acknowledged_with_segments_answer() {
    let t = Setup::new().start().await;
    let auth = basic(KEY);
    let batch = json!({"batch": [track(1), track(2), {"type": "track", "userId": "u"}]});
    let r = t
        .post(
            "/v1/batch",
            &[("Authorization", &auth)],
            batch.to_string().as_bytes(),
        )
        .await;
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &br#"{"success":true}"#[..])
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    // The same batch again: stored once, counted as duplicates.
    let r = t
        .post(
            "/v1/batch",
            &[("Authorization", &auth)],
            batch.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, 200);
    // The key in the body, a single-call route, analytics.js's text/plain.
    let single = json!({"userId": "a", "event": "e", "messageId": "s-1", "writeKey": KEY});
    assert_eq!(
        t.post("/v1/track", &[], single.to_string().as_bytes())
            .await
            .status,
        200
    );
    let off = json!({"userId": "b", "event": "e", "messageId": "s-2", "writeKey": KEY,
                     "integrations": {"Webhooks": false}});
    let r = t
        .post(
            "/v1/t",
            &[("Content-Type", "text/plain")],
            off.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, 200);
    // gzip, and a source with no destination.
    let zipped = gzip(
        json!({"batch": [track(3)], "writeKey": NOWHERE_KEY})
            .to_string()
            .as_bytes(),
    );
    let r = t
        .post("/v1/b", &[("Content-Encoding", "gzip")], &zipped)
        .await;
    assert_eq!(r.status, 200);

    let mut rows: Vec<(String, String, Status)> = t
        .store
        .rows()
        .into_iter()
        .map(|r| (r.source, r.message_id, r.status))
        .collect();
    rows.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        rows,
        vec![
            ("web".into(), "m-1".into(), Status::Pending),
            ("web".into(), "m-2".into(), Status::Pending),
            ("nowhere".into(), "m-3".into(), Status::Undeliverable),
            ("web".into(), "s-1".into(), Status::Pending),
            ("web".into(), "s-2".into(), Status::Undeliverable),
        ]
    );
    assert_eq!(
        t.metric(r#"callpost_relay_calls_total{source="web",outcome="accepted"}"#),
        4.0
    );
    assert_eq!(
        t.metric(r#"callpost_relay_calls_total{source="web",outcome="duplicate"}"#),
        2.0
    );
    assert_eq!(
        t.metric(
            r#"callpost_relay_calls_total{source="web",outcome="rejected",code="missing_event"}"#
        ),
        2.0
    );
    assert_eq!(
        t.metric(r#"callpost_relay_requests_total{status="200"}"#),
        5.0
    );
    let rejected = t.admin("GET", "/admin/rejected", None).await.json();
    assert_eq!(rejected.as_array().unwrap().len(), 2);
    assert_eq!(rejected[0]["code"], "missing_event");
    assert_eq!(rejected[0]["source"], "web");
    t.shutdown().await;
}

#[tokio::test]
async fn refusals_carry_the_cores_status_and_code() {
    let t = Setup::new().start().await;
    let auth = basic(KEY);
    let a = [("Authorization", auth.as_str())];
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "/v1/batch",
            a.to_vec(),
            b"{\"batch\": [".to_vec(),
            400,
            "invalid_json",
        ),
        (
            "/v1/batch",
            a.to_vec(),
            b"[1]".to_vec(),
            400,
            "invalid_batch",
        ),
        (
            "/v1/batch",
            vec![a[0], ("Content-Type", "application/x-www-form-urlencoded")],
            b"{}".to_vec(),
            415,
            "unsupported_media_type",
        ),
        (
            "/v1/batch",
            vec![a[0], ("Content-Encoding", "br")],
            b"{}".to_vec(),
            415,
            "unsupported_encoding",
        ),
        (
            "/v1/batch",
            vec![a[0], ("Content-Encoding", "gzip")],
            b"not gzip".to_vec(),
            400,
            "invalid_compression",
        ),
        ("/v1/nope", a.to_vec(), b"{}".to_vec(), 404, "unknown_route"),
        (
            "/v1/track",
            a.to_vec(),
            b"{\"userId\":\"u\"}".to_vec(),
            400,
            "missing_event",
        ),
        (
            "/v1/batch",
            vec![("Authorization", "Basic bm9wZTo=")],
            b"{\"batch\":[]}".to_vec(),
            401,
            "unknown_write_key",
        ),
        (
            "/v1/batch",
            vec![],
            b"{\"batch\":[]}".to_vec(),
            401,
            "missing_write_key",
        ),
    ];
    for (path, headers, body, status, code) in cases {
        let r = t.post(path, &headers, &body).await;
        assert_eq!(
            (r.status, r.code()),
            (status, code.to_owned()),
            "{path} {headers:?}"
        );
        assert!(r.json()["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // A streamed body over the limit (no Content-Length) is not read
    // further: the core's batch_too_large.
    let big = vec![b' '; 600_000];
    let mut s = TcpStream::connect(t.api).await.unwrap();
    let head = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        big.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let _ = s.write_all(&big).await;
    let r = guard(read_reply(&mut s)).await.unwrap();
    assert_eq!((r.status, r.code()), (400, "batch_too_large".to_owned()));
    assert!(t.store.rows().is_empty());
    t.shutdown().await;
}

#[tokio::test]
async fn cors_answers_and_preflights_follow_the_origin_list() {
    let any = Setup::new().start().await;
    let body = json!({"batch": [track(1)], "writeKey": KEY}).to_string();
    let r = any
        .post(
            "/v1/batch",
            &[("Origin", "https://shop.example")],
            body.as_bytes(),
        )
        .await;
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    let r = call(
        any.api,
        "OPTIONS",
        "/v1/batch",
        &[
            ("Origin", "https://shop.example"),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "content-type,authorization",
            ),
        ],
        b"",
    )
    .await;
    assert_eq!(r.status, 204);
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("POST, OPTIONS")
    );
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("content-type,authorization")
    );
    assert_eq!(r.header("access-control-max-age"), Some("86400"));
    // No Origin: no CORS headers, and a refusal carries them too.
    let r = any.post("/v1/batch", &[], body.as_bytes()).await;
    assert_eq!(r.header("access-control-allow-origin"), None);
    let r = any
        .post("/v1/batch", &[("Origin", "https://shop.example")], b"{}")
        .await;
    assert_eq!(
        (r.status, r.header("access-control-allow-origin")),
        (401, Some("*"))
    );
    any.shutdown().await;

    let listed = Setup::new()
        .tables("[ingest]\ncors_origins = [\"https://shop.example\"]")
        .start()
        .await;
    let r = listed
        .post(
            "/v1/batch",
            &[("Origin", "https://shop.example")],
            body.as_bytes(),
        )
        .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://shop.example")
    );
    assert_eq!(r.header("vary"), Some("Origin"));
    let r = listed
        .post(
            "/v1/batch",
            &[("Origin", "https://evil.example")],
            body.as_bytes(),
        )
        .await;
    assert_eq!(
        (r.status, r.header("access-control-allow-origin")),
        (200, None)
    );
    let r = call(
        listed.api,
        "OPTIONS",
        "/v1/batch",
        &[("Origin", "https://evil.example")],
        b"",
    )
    .await;
    assert_eq!((r.status, r.code()), (403, "origin_not_allowed".to_owned()));
    let r = call(
        listed.api,
        "OPTIONS",
        "/v1/batch",
        &[("Origin", "https://shop.example")],
        b"",
    )
    .await;
    assert_eq!(
        (r.status, r.header("access-control-allow-headers")),
        (204, Some("content-type"))
    );
    listed.shutdown().await;
}

#[tokio::test]
async fn other_methods_are_405_and_unknown_paths_404() {
    let t = Setup::new().start().await;
    let r = call(t.api, "GET", "/v1/batch", &[], b"").await;
    assert_eq!((r.status, r.code()), (405, "method_not_allowed".to_owned()));
    assert_eq!(r.header("allow"), Some("POST, OPTIONS"));
    for (method, path) in [
        ("GET", "/nope"),
        ("POST", "/healthz"),
        ("GET", "/admin/nope"),
        ("GET", "/"),
    ] {
        let r = call(t.api, method, path, &[], b"").await;
        assert_eq!(r.status, 404, "{method} {path}");
        assert_eq!(
            r.json(),
            json!({"code": "not_found", "message": "no such endpoint"})
        );
    }
    t.shutdown().await;
}

#[tokio::test]
async fn a_relay_not_taking_calls_answers_503_and_is_not_ready() {
    let t = Setup::new().start().await;
    t.relay.set_ready(false);
    let body = json!({"batch": [track(1)], "writeKey": KEY}).to_string();
    let r = t.post("/v1/batch", &[], body.as_bytes()).await;
    assert_eq!((r.status, r.code()), (503, "unavailable".to_owned()));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(call(t.api, "GET", "/readyz", &[], b"").await.status, 503);
    assert_eq!(
        call(t.api, "GET", "/healthz", &[], b"").await.json(),
        json!({"status": "ok"})
    );
    t.relay.set_ready(true);
    let r = call(t.api, "GET", "/readyz", &[], b"").await;
    assert_eq!((r.status, r.json()), (200, json!({"status": "ready"})));
    t.shutdown().await;
}

#[tokio::test]
async fn a_stuck_store_makes_ingest_503_with_retry_after_and_readyz_not_ready() {
    let store = MemoryStore::with_timeout(Duration::from_millis(300));
    store.set_stalled(true);
    let t = Setup::new().store(store).start().await;
    let body = json!({"batch": [track(1)], "writeKey": KEY}).to_string();
    let r = t.post("/v1/batch", &[], body.as_bytes()).await;
    assert_eq!((r.status, r.code()), (503, "unavailable".to_owned()));
    assert_eq!(r.header("retry-after"), Some("1"));
    let r = call(t.api, "GET", "/readyz", &[], b"").await;
    assert_eq!((r.status, r.json()), (503, json!({"status": "not ready"})));
    assert!(
        t.store.rows().is_empty(),
        "nothing acknowledged, nothing kept"
    );
    t.store.set_stalled(false);
    assert_eq!(t.post("/v1/batch", &[], body.as_bytes()).await.status, 200);
    assert_eq!(call(t.api, "GET", "/readyz", &[], b"").await.status, 200);
    t.shutdown().await;
}

/// A memory store whose writer backlog the test sets, and which counts
/// the inserts begun.
#[derive(Debug)]
struct Observed {
    inner: Arc<MemoryStore>,
    backlog: AtomicUsize,
    inserts: AtomicUsize,
    /// The next reads of the stored sources that wait for one another
    /// (set by [`Observed::meet`]).
    meeting: AtomicUsize,
    gate: Mutex<Option<Arc<tokio::sync::Barrier>>>,
}

impl Observed {
    fn over(inner: &Arc<MemoryStore>, backlog: usize) -> Arc<Self> {
        Arc::new(Self {
            inner: Arc::clone(inner),
            backlog: AtomicUsize::new(backlog),
            inserts: AtomicUsize::new(0),
            meeting: AtomicUsize::new(0),
            gate: Mutex::new(None),
        })
    }

    /// The next `n` reads of the stored sources each wait until all `n`
    /// have read: `n` changes made at once all start from one set.
    fn meet(&self, n: usize) {
        *self.gate.lock().unwrap() = Some(Arc::new(tokio::sync::Barrier::new(n)));
        self.meeting.store(n, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Store for Observed {
    fn migrated(&self) -> (i64, i64) {
        self.inner.migrated()
    }
    fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }
    fn healthy(&self) -> bool {
        self.inner.healthy()
    }
    async fn insert(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
    ) -> Result<usize, StoreError> {
        self.inserts.fetch_add(1, Ordering::SeqCst);
        self.inner.insert(rows, rejected).await
    }
    async fn claim(
        &self,
        now: i64,
        source: &str,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.inner.claim(now, source, limit, lease_ms).await
    }
    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        self.inner.finish(items, now).await
    }
    async fn renew(&self, tokens: Vec<i64>, until: i64) -> Result<(), StoreError> {
        self.inner.renew(tokens, until).await
    }
    async fn next_due(&self, now: i64) -> Result<Option<i64>, StoreError> {
        self.inner.next_due(now).await
    }
    async fn park_unrouted(&self, now: i64, routed: Vec<String>) -> Result<u64, StoreError> {
        self.inner.park_unrouted(now, routed).await
    }
    async fn purge_sources(
        &self,
        now: i64,
        retention: Retention,
        sources: Vec<(String, Retention)>,
    ) -> Result<Purged, StoreError> {
        self.inner.purge_sources(now, retention, sources).await
    }
    async fn replay(&self, now: i64, filter: ReplayFilter) -> Result<u64, StoreError> {
        self.inner.replay(now, filter).await
    }
    async fn replayable(&self, filter: ReplayFilter) -> Result<u64, StoreError> {
        self.inner.replayable(filter).await
    }
    async fn search(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<LogEntry>, StoreError> {
        self.inner.search(filter, after, limit).await
    }
    async fn search_rejected(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<RejectedEntry>, StoreError> {
        self.inner.search_rejected(filter, after, limit).await
    }
    async fn logged_call(
        &self,
        source: String,
        message_id: String,
        destination: Option<String>,
    ) -> Result<Option<LoggedCall>, StoreError> {
        self.inner
            .logged_call(source, message_id, destination)
            .await
    }
    async fn stats(&self, now: i64) -> Result<Stats, StoreError> {
        self.inner.stats(now).await
    }
    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        self.inner.dead_letters(limit).await
    }
    async fn rejected(&self, limit: usize) -> Result<Vec<RejectedRecord>, StoreError> {
        self.inner.rejected(limit).await
    }
    async fn audience_state(
        &self,
        source: &str,
        audience: &str,
    ) -> Result<Option<String>, StoreError> {
        self.inner.audience_state(source, audience).await
    }
    async fn audience_sync(
        &self,
        source: &str,
        audience: &str,
        read: Option<String>,
        state: String,
        rows: Vec<Row>,
        now: i64,
    ) -> Result<usize, StoreError> {
        self.inner
            .audience_sync(source, audience, read, state, rows, now)
            .await
    }
    async fn heartbeat(&self, relay: &str, now: i64, expired: i64) -> Result<u32, StoreError> {
        self.inner.heartbeat(relay, now, expired).await
    }
    async fn disabled_endpoints(&self) -> Result<Vec<String>, StoreError> {
        self.inner.disabled_endpoints().await
    }
    async fn set_endpoint_disabled(
        &self,
        url: &str,
        disabled: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        self.inner.set_endpoint_disabled(url, disabled, now).await
    }
    async fn stored_sources(&self) -> Result<StoredSources, StoreError> {
        let read = self.inner.stored_sources().await;
        let waits = self
            .meeting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        let gate = self.gate.lock().unwrap().clone();
        if let (true, Some(gate)) = (waits, gate) {
            gate.wait().await;
        }
        read
    }
    async fn holds(&self, now: i64) -> Result<Vec<(String, Hold)>, StoreError> {
        self.inner.holds(now).await
    }
    async fn put_hold(&self, url: &str, hold: Hold) -> Result<(), StoreError> {
        self.inner.put_hold(url, hold).await
    }
    async fn write_sources(
        &self,
        version: i64,
        put: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), StoreError> {
        self.inner.write_sources(version, put, remove).await
    }
    async fn erase_user(&self, id: &str) -> Result<Erased, StoreError> {
        self.inner.erase_user(id).await
    }
    async fn record_deletion(&self, record: Deletion) -> Result<(), StoreError> {
        self.inner.record_deletion(record).await
    }
    async fn deletions(&self, limit: usize) -> Result<Vec<Deletion>, StoreError> {
        self.inner.deletions(limit).await
    }
    async fn suppressions(&self) -> Result<Vec<String>, StoreError> {
        self.inner.suppressions().await
    }
    async fn set_suppressed(
        &self,
        user_hash: &str,
        suppressed: bool,
        now: i64,
        operator: &str,
    ) -> Result<bool, StoreError> {
        self.inner
            .set_suppressed(user_hash, suppressed, now, operator)
            .await
    }
    async fn setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.inner.setting(key).await
    }
    async fn swap_setting(
        &self,
        key: &str,
        read: Option<String>,
        value: String,
    ) -> Result<(), StoreError> {
        self.inner.swap_setting(key, read, value).await
    }
    async fn known(&self, source: &str, ids: Vec<String>) -> Result<Vec<String>, StoreError> {
        self.inner.known(source, ids).await
    }
    async fn sealable(
        &self,
        table: SealTable,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SealRow>, StoreError> {
        self.inner.sealable(table, after, limit).await
    }
    async fn reseal(&self, table: SealTable, rows: Vec<Resealed>) -> Result<u64, StoreError> {
        self.inner.reseal(table, rows).await
    }
    async fn erase_rejected(&self, ids: Vec<i64>) -> Result<u64, StoreError> {
        self.inner.erase_rejected(ids).await
    }
    fn statements(&self) -> u64 {
        self.inner.statements()
    }
    fn set_commit_observer(&self, observer: CommitObserver) {
        self.inner.set_commit_observer(observer);
    }
    async fn close(&self) {
        self.inner.close().await;
    }
}

#[tokio::test]
async fn a_writer_behind_makes_ingest_503_overloaded_before_the_body_is_read() {
    let mut setup =
        Setup::new().tables("[ingest]\nmax_backlog = 40\n[limits]\nbody_timeout_ms = 600000");
    let store = Observed::over(&setup.store, 41);
    setup.wrapped = Some(store.clone());
    let t = setup.start().await;
    // Headers and the start of a body that never ends: only an answer
    // given before the body is read passes the guard.
    let mut s = TcpStream::connect(t.api).await.unwrap();
    let head = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"batch\":[",
        basic(KEY)
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let r = guard(read_reply(&mut s)).await.expect("an answer");
    assert_eq!((r.status, r.code()), (503, "overloaded".to_owned()));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(call(t.api, "GET", "/readyz", &[], b"").await.status, 503);
    store.backlog.store(40, Ordering::Relaxed);
    let body = json!({"batch": [track(1)], "writeKey": KEY}).to_string();
    assert_eq!(t.post("/v1/batch", &[], body.as_bytes()).await.status, 200);
    assert_eq!(call(t.api, "GET", "/readyz", &[], b"").await.status, 200);
    assert_eq!(t.store.rows().len(), 1);
    t.shutdown().await;
}

// -- credentials before any parse -----------------------------------------

#[tokio::test]
async fn a_request_without_a_known_write_key_is_401_before_its_body_is_parsed() {
    let t = Setup::new().start().await;
    let broken = b"{\"batch\": [ {\"type\": ";
    let r = t.post("/v1/batch", &[], broken).await;
    assert_eq!((r.status, r.code()), (401, "missing_write_key".to_owned()));
    let r = t
        .post("/v1/batch", &[], b"{\"writeKey\": \"nope\", \"batch\": []}")
        .await;
    assert_eq!((r.status, r.code()), (401, "unknown_write_key".to_owned()));
    // A key is read only from a body that is JSON (the last writeKey
    // counts, as JSON.parse reads it): a broken one has none.
    let r = t
        .post("/v1/batch", &[], b"{\"writeKey\": \"nope\", \"batch\": [ {")
        .await;
    assert_eq!((r.status, r.code()), (401, "missing_write_key".to_owned()));
    let r = t
        .post("/v1/track", &[], b"{\"writeKey\": \"\", \"userId\": ")
        .await;
    assert_eq!((r.status, r.code()), (401, "missing_write_key".to_owned()));
    let r = t
        .post("/v1/batch", &[("Authorization", &basic("nope"))], broken)
        .await;
    assert_eq!((r.status, r.code()), (401, "unknown_write_key".to_owned()));
    // Before the body is inflated, too.
    let r = t
        .post(
            "/v1/batch",
            &[
                ("Authorization", &basic("nope")),
                ("Content-Encoding", "gzip"),
            ],
            b"not gzip",
        )
        .await;
    assert_eq!((r.status, r.code()), (401, "unknown_write_key".to_owned()));
    // With a known key the same body is the parser's to refuse.
    let r = t
        .post("/v1/batch", &[("Authorization", &basic(KEY))], broken)
        .await;
    assert_eq!((r.status, r.code()), (400, "invalid_json".to_owned()));
    // The header's key counts over the body's.
    let body = json!({"batch": [track(1)], "writeKey": KEY}).to_string();
    let r = t
        .post(
            "/v1/batch",
            &[("Authorization", &basic("nope"))],
            body.as_bytes(),
        )
        .await;
    assert_eq!(r.status, 401);
    t.shutdown().await;
}

#[tokio::test]
async fn an_unknown_basic_key_is_refused_without_waiting_for_the_body() {
    // A body timeout far past the guard: only an answer given before the
    // body arrives passes.
    let t = Setup::new()
        .tables("[limits]\nbody_timeout_ms = 600000")
        .start()
        .await;
    let mut s = TcpStream::connect(t.api).await.unwrap();
    let head = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"batch\":[",
        basic("nope")
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let r = guard(read_reply(&mut s)).await.expect("an answer");
    assert_eq!((r.status, r.code()), (401, "unknown_write_key".to_owned()));
    t.shutdown().await;
}

#[tokio::test]
async fn a_gzip_bomb_is_refused_413() {
    let t = Setup::new().start().await;
    let bomb = gzip(&vec![b' '; 5_000_000]);
    assert!(bomb.len() < 100_000);
    let r = t
        .post(
            "/v1/batch",
            &[("Authorization", &basic(KEY)), ("Content-Encoding", "gzip")],
            &bomb,
        )
        .await;
    assert_eq!((r.status, r.code()), (413, "batch_too_large".to_owned()));
    t.shutdown().await;
}

// -- listener protections -------------------------------------------------

#[tokio::test]
async fn a_half_sent_header_block_is_cut_off_at_the_header_timeout() {
    let t = Setup::new()
        .tables(
            "[limits]\nheader_timeout_ms = 300\nidle_timeout_ms = 600000\nbody_timeout_ms = 600000",
        )
        .start()
        .await;
    let mut half = TcpStream::connect(t.api).await.unwrap();
    half.write_all(b"POST /v1/batch HTTP/1.1\r\nHost: x\r\nContent-Ty")
        .await
        .unwrap();
    let mut silent = TcpStream::connect(t.api).await.unwrap();
    assert!(guard(until_closed(&mut half)).await.is_empty());
    assert!(guard(until_closed(&mut silent)).await.is_empty());
    t.wait_metric(
        r#"callpost_relay_request_timeouts_total{phase="header"}"#,
        2.0,
    )
    .await;
    t.shutdown().await;
}

#[tokio::test]
async fn a_keep_alive_connection_outlives_the_header_timeout_between_requests() {
    // hyper's own header timeout would close it as soon as it sits idle
    // for header_timeout.
    let t = Setup::new()
        .tables("[limits]\nheader_timeout_ms = 200\nidle_timeout_ms = 600000")
        .start()
        .await;
    let mut s = TcpStream::connect(t.api).await.unwrap();
    for _ in 0..2 {
        s.write_all(&request("GET", "/healthz", &[], b"", false))
            .await
            .unwrap();
        let r = guard(read_reply(&mut s))
            .await
            .expect("an answer on the same connection");
        assert_eq!(r.status, 200);
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    t.shutdown().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let t = Setup::new()
        .tables("[limits]\nheader_timeout_ms = 600000\nidle_timeout_ms = 300")
        .start()
        .await;
    let mut s = TcpStream::connect(t.api).await.unwrap();
    s.write_all(&request("GET", "/healthz", &[], b"", false))
        .await
        .unwrap();
    assert_eq!(guard(read_reply(&mut s)).await.unwrap().status, 200);
    assert!(guard(until_closed(&mut s)).await.is_empty());
    t.wait_metric(
        r#"callpost_relay_request_timeouts_total{phase="idle"}"#,
        1.0,
    )
    .await;
    assert_eq!(
        t.metric(r#"callpost_relay_request_timeouts_total{phase="header"}"#),
        0.0
    );
    t.shutdown().await;
}

#[tokio::test]
async fn a_trickled_body_is_cut_off_with_408_at_the_body_timeout() {
    let t = Setup::new()
        .tables(
            "[limits]\nbody_timeout_ms = 500\nheader_timeout_ms = 600000\nidle_timeout_ms = 600000",
        )
        .start()
        .await;
    let s = TcpStream::connect(t.api).await.unwrap();
    let (mut read, mut write) = s.into_split();
    let head = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        basic(KEY)
    );
    write.write_all(head.as_bytes()).await.unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            if write.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut got = Vec::new();
    guard(read.read_to_end(&mut got)).await.ok();
    trickle.abort();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains(r#""code":"request_timeout""#), "{text}");
    assert_eq!(
        t.metric(r#"callpost_relay_request_timeouts_total{phase="body"}"#),
        1.0
    );
    assert_eq!(
        t.metric(r#"callpost_relay_requests_total{status="408"}"#),
        1.0
    );
    t.shutdown().await;
}

#[tokio::test]
async fn an_oversized_header_block_is_refused_431() {
    let t = Setup::new()
        .tables("[limits]\nmax_header_bytes = 8192")
        .start()
        .await;
    let small = "a".repeat(4000);
    let r = call(t.api, "GET", "/healthz", &[("X-Pad", &small)], b"").await;
    assert_eq!(r.status, 200);
    let big = "a".repeat(20_000);
    let mut s = TcpStream::connect(t.api).await.unwrap();
    let _ = s
        .write_all(&request("GET", "/healthz", &[("X-Pad", &big)], b"", true))
        .await;
    let got = guard(until_closed(&mut s)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    // A header block that never ends is refused as soon as it passes the
    // limit, not at the header timeout.
    let mut s = TcpStream::connect(t.api).await.unwrap();
    let endless = format!("GET /healthz HTTP/1.1\r\nX-Pad: {big}");
    let _ = s.write_all(endless.as_bytes()).await;
    let text = String::from_utf8_lossy(&guard(until_closed(&mut s)).await).into_owned();
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    t.shutdown().await;
}

#[tokio::test]
async fn the_connection_cap_closes_the_next_connection_at_once_and_says_so() {
    let t = Setup::new()
        .tables(
            "[limits]\nmax_connections = 2\nmax_connections_per_client = 2\n\
             header_timeout_ms = 600000",
        )
        .start()
        .await;
    let open = r#"callpost_relay_connections_open{listener="api"}"#;
    let first = TcpStream::connect(t.api).await.unwrap();
    let _second = TcpStream::connect(t.api).await.unwrap();
    t.wait_metric(open, 2.0).await;
    let mut third = TcpStream::connect(t.api).await.unwrap();
    let _ = third
        .write_all(&request("GET", "/healthz", &[], b"", true))
        .await;
    assert!(
        guard(until_closed(&mut third)).await.is_empty(),
        "closed without an answer"
    );
    assert_eq!(
        t.metric(r#"callpost_relay_connections_refused_total{listener="api"}"#),
        1.0
    );
    assert!(
        log_text().contains(
            "connection cap reached (limits.max_connections = 2); refusing new connections"
        ),
        "{}",
        log_text()
    );
    // A place freed is a place taken again.
    drop(first);
    t.wait_metric(open, 1.0).await;
    assert_eq!(call(t.api, "GET", "/healthz", &[], b"").await.status, 200);
    t.shutdown().await;
}

/// A keep-alive connection from `from` (a loopback address) that has had
/// one answer and is idle; `None` when the relay closed it at once.
async fn idle_from(from: &str, to: SocketAddr) -> Option<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = socket.connect(to).await.unwrap();
    s.write_all(&request("GET", "/healthz", &[], b"", false))
        .await
        .ok()?;
    let reply = guard(read_reply(&mut s)).await?;
    (reply.status == 200).then_some(s)
}

/// One client that holds every connection it can does not keep another
/// out: it holds at most its share of the cap (a quarter by default), and
/// near the cap the connection idle the longest is closed for a new one
/// (where the share is the whole cap, as behind a proxy). Before, one
/// client holding the cap with idle keep-alives had every other request
/// refused until they timed out.
#[tokio::test]
async fn one_client_holding_connections_does_not_keep_another_out() {
    let t = Setup::new()
        .tables("[limits]\nmax_connections = 20")
        .start()
        .await;
    let mut held = Vec::new();
    for _ in 0..20 {
        if let Some(s) = idle_from("127.0.0.1", t.api).await {
            held.push(s);
        }
    }
    assert_eq!(held.len(), 5, "a quarter of 20 for one client");
    assert!(
        log_text().contains(
            "a client at 127.0.0.1 holds its share of the api listener's connections \
             (limits.max_connections_per_client = 5)"
        ),
        "{}",
        log_text()
    );
    assert!(idle_from("127.0.0.2", t.api).await.is_some());
    t.shutdown().await;

    // One address may hold the whole cap: its idle connections make room.
    let t = Setup::new()
        .tables("[limits]\nmax_connections = 20\nmax_connections_per_client = 20")
        .start()
        .await;
    let mut held = Vec::new();
    for _ in 0..40 {
        if let Some(s) = idle_from("127.0.0.1", t.api).await {
            held.push(s);
        }
    }
    assert_eq!(held.len(), 40, "every new connection was served");
    for _ in 0..5 {
        assert!(
            idle_from("127.0.0.2", t.api).await.is_some(),
            "another client is served"
        );
    }
    assert!(
        t.metric(r#"callpost_relay_request_timeouts_total{phase="evicted"}"#) >= 20.0,
        "idle connections were closed to make room"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn shutdown_lets_a_request_in_progress_finish_and_takes_no_new_connection() {
    let memory = MemoryStore::with_timeout(Duration::from_secs(8));
    memory.set_stalled(true);
    let mut setup = Setup::new().store(memory);
    let observed = Observed::over(&setup.store, 0);
    setup.wrapped = Some(observed.clone());
    let t = setup.start().await;
    let body = json!({"batch": [track(1)], "writeKey": KEY}).to_string();
    let api = t.api;
    let pending =
        tokio::spawn(async move { call(api, "POST", "/v1/batch", &[], body.as_bytes()).await });
    // Wait until the request is inside the store.
    guard(async {
        while observed.inserts.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let TestRelay { mut app, store, .. } = t;
    let stopping = tokio::spawn(app.take().unwrap().stop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!stopping.is_finished(), "waits for the request in progress");
    store.set_stalled(false);
    let r = guard(pending).await.unwrap();
    assert_eq!(r.status, 200);
    guard(stopping).await.unwrap();
    assert!(
        TcpStream::connect(api).await.is_err(),
        "the listener is closed"
    );
}

// -- the admin API --------------------------------------------------------

#[tokio::test]
async fn admin_requests_without_the_token_are_401_slowed_counted_and_logged() {
    let t = Setup::new().start().await;
    let wrong = "Bearer wrong-token-that-must-never-be-logged";
    for (n, headers) in [
        vec![],
        vec![("Authorization", wrong)],
        vec![("Authorization", "Basic Zm9vOg==")],
    ]
    .into_iter()
    .enumerate()
    {
        let started = Instant::now();
        let r = call(t.api, "GET", "/admin/status", &headers, b"").await;
        assert!(
            started.elapsed() >= Duration::from_millis(950),
            "slowed: {:?}",
            started.elapsed()
        );
        assert_eq!((r.status, r.code()), (401, "unauthorized".to_owned()));
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert_eq!(r.header("connection"), Some("close"));
        assert_eq!(
            t.metric("callpost_relay_admin_auth_failures_total"),
            (n + 1) as f64
        );
    }
    let logs = log_text();
    assert!(
        logs.contains("refused an admin request from 127.0.0.1:"),
        "{logs}"
    );
    assert!(!logs.contains("wrong-token"), "{logs}");
    assert!(!logs.contains(TOKEN), "{logs}");
    let r = t.admin("GET", "/admin/status", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["pending"], 0);
    // Nothing posted yet: no endpoint has a state to show.
    assert_eq!(r.json()["endpoints"], json!([]));
    t.shutdown().await;
}

#[tokio::test]
async fn with_no_admin_token_the_admin_api_and_metrics_are_403() {
    let t = Setup::new().no_admin_token().start().await;
    for path in ["/admin/status", "/metrics"] {
        let r = call(t.api, "GET", path, &[("Authorization", "Bearer x")], b"").await;
        assert_eq!(
            (r.status, r.code()),
            (403, "admin_disabled".to_owned()),
            "{path}"
        );
    }
    t.shutdown().await;
}

#[tokio::test]
async fn metrics_need_the_admin_token() {
    let t = Setup::new().start().await;
    let r = call(t.api, "GET", "/metrics", &[], b"").await;
    assert_eq!(r.status, 401);
    let auth = format!("Bearer {TOKEN}");
    let r = call(t.api, "GET", "/metrics", &[("Authorization", &auth)], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = String::from_utf8(r.body).unwrap();
    assert!(
        text.contains("callpost_relay_admin_auth_failures_total 1"),
        "{text}"
    );
    assert!(text.contains("# EOF"), "{text}");
    t.shutdown().await;
}

#[tokio::test]
async fn admin_listen_keeps_the_admin_api_off_the_public_listener() {
    let t = Setup::new()
        .top("admin_listen = \"127.0.0.1:0\"")
        .start()
        .await;
    let admin = t.admin.expect("a second listener");
    assert_ne!(admin, t.api);
    let auth = format!("Bearer {TOKEN}");
    let token = [("Authorization", auth.as_str())];
    for path in ["/admin/status", "/metrics"] {
        let r = call(t.api, "GET", path, &token, b"").await;
        assert_eq!(
            (r.status, r.code()),
            (404, "not_found".to_owned()),
            "{path}"
        );
        assert_eq!(
            call(admin, "GET", path, &token, b"").await.status,
            200,
            "{path}"
        );
    }
    for addr in [t.api, admin] {
        assert_eq!(call(addr, "GET", "/healthz", &[], b"").await.status, 200);
        assert_eq!(call(addr, "GET", "/readyz", &[], b"").await.status, 200);
    }
    let body = json!({"batch": [track(1)], "writeKey": KEY}).to_string();
    assert_eq!(t.post("/v1/batch", &[], body.as_bytes()).await.status, 200);
    assert_eq!(
        call(admin, "POST", "/v1/batch", &[], body.as_bytes())
            .await
            .status,
        404
    );
    t.shutdown().await;
}

#[tokio::test]
async fn an_admin_body_over_the_limit_is_413_and_never_read_as_empty() {
    let t = Setup::new().start().await;
    let auth = format!("Bearer {TOKEN}");
    // Declared too long: refused before it is read.
    let mut s = TcpStream::connect(t.api).await.unwrap();
    let head = format!(
        "POST /admin/replay HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: 1000001\r\n\r\n{{\"messageIds\": ["
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let r = guard(read_reply(&mut s)).await.unwrap();
    assert_eq!((r.status, r.code()), (413, "payload_too_large".to_owned()));
    // Streamed: refused once it passes the limit.
    let ids: Vec<String> = (0..100_000).map(|n| format!("message-{n:06}")).collect();
    let body = json!({ "messageIds": ids }).to_string();
    assert!(body.len() > 1_000_000);
    let mut s = TcpStream::connect(t.api).await.unwrap();
    let head = format!(
        "POST /admin/replay HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let _ = s.write_all(body.as_bytes()).await;
    let _ = s.write_all(b"\r\n0\r\n\r\n").await;
    let r = guard(read_reply(&mut s)).await.unwrap();
    assert_eq!((r.status, r.code()), (413, "payload_too_large".to_owned()));
    t.shutdown().await;
}

#[tokio::test]
async fn admin_bodies_are_type_checked_and_a_replay_must_say_what_it_replays() {
    let t = Setup::new().start().await;
    let bad: Vec<(&str, Value, &str)> = vec![
        (
            "/admin/replay",
            json!({"messageIds": []}),
            "the list of messageIds is empty",
        ),
        ("/admin/replay", json!({}), "\"all\": true"),
        (
            "/admin/replay",
            json!({"includeDelivered": true}),
            "\"all\": true",
        ),
        ("/admin/replay", json!({"all": false}), "\"all\": true"),
        (
            "/admin/replay",
            json!({"source": "web", "includeDelivered": "false"}),
            "includeDelivered must be true or false",
        ),
        (
            "/admin/replay",
            json!({"all": "true"}),
            "all must be true or false",
        ),
        (
            "/admin/replay",
            json!({"all": 1}),
            "all must be true or false",
        ),
        (
            "/admin/replay",
            json!({"source": 5}),
            "source must be a string",
        ),
        (
            "/admin/replay",
            json!({"messageIds": "m-1"}),
            "messageIds must be a list of strings",
        ),
        (
            "/admin/replay",
            json!({"messageIds": ["m-1", 2]}),
            "messageIds must be a list of strings",
        ),
        (
            "/admin/replay",
            json!({"sorce": "web"}),
            "unknown field \"sorce\"",
        ),
        (
            "/admin/replay",
            json!({"since": "yesterday"}),
            "since must be an ISO 8601 time or milliseconds",
        ),
        (
            "/admin/replay",
            json!({"until": true}),
            "until must be an ISO 8601 time or milliseconds",
        ),
        ("/admin/replay", json!([1]), "must be a JSON object"),
        (
            "/admin/delete",
            json!({"userId": ""}),
            "userId must be a non-empty string",
        ),
        (
            "/admin/delete",
            json!({"userId": 5}),
            "userId must be a string",
        ),
        (
            "/admin/delete",
            json!({"userId": "u", "extra": 1}),
            "unknown field \"extra\"",
        ),
        (
            "/admin/audiences",
            json!({"source": "nope", "audience": "a", "members": []}),
            "source must name a configured source",
        ),
        (
            "/admin/audiences",
            json!({"source": "web", "audience": "a", "members": "u1"}),
            "members must be a list of strings",
        ),
    ];
    for (path, body, message) in bad {
        let r = t.admin("POST", path, Some(body.clone())).await;
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_argument".to_owned()),
            "{path} {body}"
        );
        let said = r.json()["message"].as_str().unwrap().to_owned();
        assert!(said.contains(message), "{path} {body}: {said}");
    }
    let auth = format!("Bearer {TOKEN}");
    let r = call(
        t.api,
        "POST",
        "/admin/replay",
        &[("Authorization", &auth)],
        b"{not json",
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "invalid_argument".to_owned()));
    let ok: Vec<Value> = vec![
        json!({"all": true}),
        json!({"source": "web", "includeDelivered": true, "includeUndeliverable": false}),
        json!({"messageIds": ["m-1"], "source": null}),
        json!({"since": "2026-01-01T00:00:00.000Z", "until": 1_900_000_000_000_i64}),
    ];
    for body in ok {
        let r = t.admin("POST", "/admin/replay", Some(body.clone())).await;
        assert_eq!(
            (r.status, r.json()),
            (200, json!({"replayed": 0})),
            "{body}"
        );
    }
    t.shutdown().await;
}

#[tokio::test]
async fn limit_is_bounded() {
    let t = Setup::new().start().await;
    for path in ["/admin/dead-letters", "/admin/rejected"] {
        for q in [
            "limit=0",
            "limit=1001",
            "limit=abc",
            "limit=-1",
            "limit=",
            "limt=5",
        ] {
            let r = t.admin("GET", &format!("{path}?{q}"), None).await;
            assert_eq!(
                (r.status, r.code()),
                (400, "invalid_argument".to_owned()),
                "{path}?{q}"
            );
        }
        for q in ["", "?limit=1", "?limit=1000"] {
            let r = t.admin("GET", &format!("{path}{q}"), None).await;
            assert_eq!((r.status, r.json()), (200, json!([])), "{path}{q}");
        }
    }
    let r = t.admin("GET", "/admin/status?limit=5", None).await;
    assert_eq!(r.status, 400);
    t.shutdown().await;
}

#[tokio::test]
async fn delete_audiences_replay_and_status_do_their_work() {
    let t = Setup::new().start().await;
    let r = t
        .admin("POST", "/admin/delete", Some(json!({"userId": "u-1"})))
        .await;
    assert_eq!(
        (r.status, r.json()),
        (
            200,
            json!({"sources": ["web"], "erased": {"calls": 0, "rejected": 0}, "suppressed": false})
        )
    );
    let deletes: Vec<_> = t
        .store
        .rows()
        .into_iter()
        .filter(|r| r.kind == "delete")
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(
        (deletes[0].source.as_str(), deletes[0].status),
        ("web", Status::Pending)
    );
    let sync = |members: Value| {
        t.admin(
            "POST",
            "/admin/audiences",
            Some(json!({"source": "web", "audience": "High Value", "members": members})),
        )
    };
    assert_eq!(sync(json!(["a", "b"])).await.json(), json!({"calls": 2}));
    assert_eq!(sync(json!(["b", "c"])).await.json(), json!({"calls": 2}));
    assert_eq!(sync(json!(["b", "c"])).await.json(), json!({"calls": 0}));
    let status = t.admin("GET", "/admin/status", None).await.json();
    assert_eq!(status["pending"], 5);
    assert_eq!(status["dead"], 0);
    let r = t
        .admin("POST", "/admin/replay", Some(json!({"source": "web"})))
        .await;
    assert_eq!((r.status, r.json()), (200, json!({"replayed": 0})));
    t.shutdown().await;
}

#[cfg(feature = "test-clock")]
#[tokio::test]
async fn the_test_clock_moves_the_relays_clock_when_started_with_it() {
    let t = Setup::new().start().await;
    let r = t
        .admin("POST", "/admin/test/clock", Some(json!({"offsetMs": 1000})))
        .await;
    assert_eq!(r.status, 404, "only with --test-clock");
    t.shutdown().await;

    let mut setup = Setup::new();
    setup.test_clock = Some(0);
    let t = setup.start().await;
    let hour = 3_600_000_i64;
    let before = t.relay.clock.now_ms();
    let r = t
        .admin("POST", "/admin/test/clock", Some(json!({"offsetMs": hour})))
        .await;
    assert_eq!((r.status, r.json()["offsetMs"].clone()), (200, json!(hour)));
    assert!(r.json()["nowMs"].as_i64().unwrap() >= before + hour);
    assert!(t.relay.clock.now_ms() >= before + hour);
    for bad in [json!({"offsetMs": -1}), json!({"offsetMs": "1"}), json!({})] {
        let r = t
            .admin("POST", "/admin/test/clock", Some(bad.clone()))
            .await;
        assert_eq!(r.status, 400, "{bad}");
    }
    t.shutdown().await;
}

// -- sources kept in the database ------------------------------------------

/// The stored source `name`, opened with the relay's key, as JSON.
async fn stored_source(t: &TestRelay, name: &str) -> Option<Value> {
    let key = t.relay.cfg.secret_key.clone().unwrap();
    callpost_relay::ops::sources::stored(&*t.relay.store, &key)
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.name() == name)
        .map(|d| d.to_value())
}

/// A source's mapping goes in through the API, is checked by the core
/// (refused naming the place), is in force (`mapped`), and keeps its keys'
/// order, which is the body's, through a PATCH of something else.
#[tokio::test]
async fn a_mapping_is_checked_put_in_force_and_keeps_its_order() {
    let t = Setup::new().secret_key().start().await;
    let mapping = r#"{"zeta":{"@path":"event"},"alpha":{"@template":"{{userId}}!"},"mid":{"@arrayPath":["properties.products",{"sku":{"@path":"sku"}}]}}"#;
    let shop = json!({
        "write_keys": ["wk-shop"],
        "webhooks": {
            "urls": ["http://127.0.0.1:9/in"],
            "mapping": serde_json::from_str::<Value>(mapping).unwrap()
        }
    });
    let mut bad = shop.clone();
    bad["webhooks"]["mapping"]["mid"] = json!({"@arrayPath": "properties.products"});
    let r = t.admin("PUT", "/admin/sources/shop", Some(bad)).await;
    assert_eq!(
        (r.status, r.code()),
        (400, "invalid_settings".to_owned()),
        "{}",
        r.text()
    );
    assert!(r.text().contains("mapping.mid.@arrayPath"), "{}", r.text());

    let r = t.admin("PUT", "/admin/sources/shop", Some(shop)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = t
        .admin(
            "PATCH",
            "/admin/sources/shop",
            Some(json!({"webhooks": {"enabled": false}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let stored = stored_source(&t, "shop").await.unwrap();
    assert_eq!(
        serde_json::to_string(&stored["webhooks"]["mapping"]).unwrap(),
        mapping
    );
    let listed = t.admin("GET", "/admin/sources", None).await.json();
    let shop = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "shop")
        .unwrap()
        .clone();
    assert_eq!(shop["webhooks"]["mapped"], json!(true), "{listed}");
    t.shutdown().await;
}

/// An operator tries a mapping over a stored call before saving it: the
/// exact body the destination would send, the source's filters applied,
/// nothing stored or sent; a mapping the core refuses names the place, and
/// a call the log lacks is 404.
#[tokio::test]
async fn a_mapping_is_tried_on_a_stored_call_before_it_is_saved() {
    let t = Setup::new().start().await;
    let call = json!({"type": "track", "userId": "u1", "event": "Order Completed", "messageId": "m-try",
        "properties": {"total": 27.50, "products": [{"sku": "p-1"}, {"sku": "p-2"}]}});
    let r = t
        .post(
            "/v1/track",
            &[("Authorization", &basic(KEY))],
            call.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, 200);
    let mapping = json!({"text": {"@template": "{{userId}} paid {{properties.total}}"},
        "skus": {"@arrayPath": ["properties.products", {"s": {"@path": "sku"}}]}});
    let tried = |body: Value| t.admin("POST", "/admin/mappings/try", Some(body));
    let r = tried(json!({"source": "web", "mapping": mapping, "messageId": "m-try"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"body": r#"{"text":"u1 paid 27.5","skus":[{"s":"p-1"},{"s":"p-2"}]}"#})
    );
    // Without a mapping: the source's own (none here), the spec's body.
    let r = tried(json!({"source": "web", "call": {"type": "alias", "userId": "u2", "previousId": "u1", "timestamp": "2026-11-28T00:00:00Z"}})).await;
    assert_eq!(
        r.json()["body"],
        json!(
            r#"{"version":1,"type":"alias","Previous ID":"u1","User ID":"u2","timestamp":"2026-11-28T00:00:00.000Z"}"#
        )
    );
    let r =
        tried(json!({"source": "web", "mapping": {"a": {"@path": "x["}}, "messageId": "m-try"}))
            .await;
    assert_eq!(
        (r.status, r.code()),
        (400, "invalid_settings".to_owned()),
        "{}",
        r.text()
    );
    assert!(r.text().contains("mapping.a.@path"), "{}", r.text());
    let r = tried(json!({"source": "web", "mapping": mapping, "messageId": "m-absent"})).await;
    assert_eq!((r.status, r.code()), (404, "not_found".to_owned()));
    let r = tried(json!({"source": "web", "mapping": mapping})).await;
    assert_eq!((r.status, r.code()), (400, "invalid_argument".to_owned()));
    let r = tried(json!({"source": "absent", "mapping": mapping, "messageId": "m-try"})).await;
    assert_eq!((r.status, r.code()), (404, "not_found".to_owned()));
    t.shutdown().await;
}

/// Outbound auth through the admin API: kept (sealed) as given, shown as
/// its kind and token URL only; a client certificate whose key is not its
/// own, or auth beside a static Authorization header, is refused naming
/// the endpoint, without the secret.
#[tokio::test]
async fn endpoint_auth_is_kept_sealed_and_shown_by_kind_only() {
    let t = Setup::new().secret_key().start().await;
    let cert = rcgen::generate_simple_self_signed(vec!["relay.test".to_owned()]).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    let shop = |key_pem: &str| {
        json!({
            "write_keys": ["wk-shop"],
            "webhooks": {
                "urls": [
                    {"url": "http://127.0.0.1:9/crm", "auth": {"type": "oauth2", "token_url": "http://127.0.0.1:9/token?tenant=t1", "client_id": "relay", "client_secret": "oauth-client-secret"}},
                    {"url": "http://127.0.0.1:9/legacy", "auth": {"type": "basic", "username": "relay", "password": "basic-password"}},
                    {"url": "http://127.0.0.1:9/partner", "client_certificate": {"certificate": cert.cert.pem(), "private_key": key_pem}}
                ]
            }
        })
    };
    let r = t
        .admin(
            "PUT",
            "/admin/sources/shop",
            Some(shop(&cert.signing_key.serialize_pem())),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let stored = stored_source(&t, "shop").await.unwrap();
    assert_eq!(
        stored["webhooks"]["urls"][0]["auth"]["client_secret"], "oauth-client-secret",
        "kept as given, sealed"
    );
    for path in ["/admin/sources", "/admin/sources/shop"] {
        let r = t.admin("GET", path, None).await;
        let text = r.text();
        for secret in [
            "oauth-client-secret",
            "basic-password",
            "PRIVATE KEY",
            "tenant=t1",
        ] {
            assert!(!text.contains(secret), "{path} shows {secret}: {text}");
        }
        let shown = r.json();
        let endpoints = if path.ends_with("shop") {
            shown["webhooks"]["endpoints"].clone()
        } else {
            let all = shown.as_array().unwrap();
            let shop = all.iter().find(|s| s["name"] == "shop").unwrap();
            shop["webhooks"]["endpoints"].clone()
        };
        assert_eq!(endpoints[0]["auth"], "oauth2", "{shown}");
        assert_eq!(endpoints[0]["token_url"], "http://127.0.0.1:9/token");
        assert_eq!(endpoints[1]["auth"], "basic");
        assert_eq!(endpoints[2]["client_certificate"], true);
        assert_eq!(endpoints[0]["client_certificate"], false);
    }

    let r = t
        .admin(
            "PUT",
            "/admin/sources/shop",
            Some(shop(&other.serialize_pem())),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (400, "invalid_auth".to_owned()),
        "{}",
        r.text()
    );
    assert!(
        r.text().contains("urls[2]") && r.text().contains("do not match"),
        "{}",
        r.text()
    );
    assert!(!r.text().contains("PRIVATE KEY"));
    let both = json!({
        "write_keys": ["wk-shop"],
        "webhooks": {"urls": [{"url": "http://127.0.0.1:9/crm", "headers": {"Authorization": "Bearer x"},
            "auth": {"type": "basic", "username": "relay", "password": "basic-password"}}]}
    });
    let r = t.admin("PUT", "/admin/sources/shop", Some(both)).await;
    assert_eq!(
        (r.status, r.code()),
        (400, "invalid_auth".to_owned()),
        "{}",
        r.text()
    );
    assert!(!r.text().contains("basic-password"));
    t.shutdown().await;
}

/// One destination changed at a time: a merge patch of it keeps what it
/// leaves out (its auth's secret), a PUT creates or replaces it, a DELETE
/// removes it; the destination named webhooks is the source's `webhooks`;
/// an unknown destination is 404, a rename 400.
#[tokio::test]
async fn one_destination_is_created_changed_and_removed_keeping_its_secrets() {
    let t = Setup::new().secret_key().start().await;
    let shop = json!({
        "write_keys": ["wk-shop"],
        "webhooks": {"urls": ["http://127.0.0.1:9/all"], "shared_secret": "shop-secret"},
        "destinations": [{
            "name": "crm",
            "trigger": {"field": "type", "equals": "identify"},
            "urls": [{"url": "http://127.0.0.1:9/crm", "auth": {"type": "basic", "username": "relay", "password": "crm-password"}}]
        }]
    });
    let r = t.admin("PUT", "/admin/sources/shop", Some(shop)).await;
    assert_eq!(r.status, 200, "{}", r.text());

    let r = t
        .admin(
            "PATCH",
            "/admin/sources/shop/destinations/crm",
            Some(json!({"enabled": false, "method": "PUT"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["changes"]["changed"], json!(["shop"]));
    let crm = &r.json()["source"]["destinations"][1];
    assert_eq!(
        (
            crm["name"].clone(),
            crm["enabled"].clone(),
            crm["method"].clone()
        ),
        (json!("crm"), json!(false), json!("PUT"))
    );
    let stored = stored_source(&t, "shop").await.unwrap();
    assert_eq!(
        stored["destinations"][0]["urls"][0]["auth"]["password"], "crm-password",
        "kept: the patch left it out"
    );
    assert_eq!(stored["webhooks"]["shared_secret"], "shop-secret");

    let r = t
        .admin(
            "PATCH",
            "/admin/sources/shop/destinations/webhooks",
            Some(json!({"mode": "failover"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["source"]["webhooks"]["mode"], "failover");

    let chat =
        json!({"urls": ["http://127.0.0.1:9/chat"], "mapping": {"text": {"@path": "event"}}});
    let r = t
        .admin("PUT", "/admin/sources/shop/destinations/chat", Some(chat))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let names: Vec<String> = r.json()["source"]["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["webhooks", "crm", "chat"]);

    for (method, path, body, want) in [
        (
            "PATCH",
            "/admin/sources/shop/destinations/nowhere",
            Some(json!({"enabled": true})),
            (404, "not_found"),
        ),
        (
            "PATCH",
            "/admin/sources/absent/destinations/crm",
            Some(json!({"enabled": true})),
            (404, "not_found"),
        ),
        (
            "PATCH",
            "/admin/sources/shop/destinations/crm",
            Some(json!({"name": "other"})),
            (400, "invalid_settings"),
        ),
        (
            "PUT",
            "/admin/sources/shop/destinations/bad%20name",
            Some(json!({"urls": ["http://127.0.0.1:9/x"]})),
            (400, "invalid_settings"),
        ),
        (
            "DELETE",
            "/admin/sources/shop/destinations/nowhere",
            None,
            (404, "not_found"),
        ),
    ] {
        let r = t.admin(method, path, body).await;
        assert_eq!(
            (r.status, r.code()),
            (want.0, want.1.to_owned()),
            "{method} {path}: {}",
            r.text()
        );
    }

    let r = t
        .admin("DELETE", "/admin/sources/shop/destinations/crm", None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let stored = stored_source(&t, "shop").await.unwrap();
    assert_eq!(stored["destinations"].as_array().unwrap().len(), 1);
    assert_eq!(stored["destinations"][0]["name"], "chat");
    assert!(!r.text().contains("crm-password") && !r.text().contains("shop-secret"));
    t.shutdown().await;
}

/// A PATCH (JSON Merge Patch) changes what it names and keeps the rest as
/// stored: the URL's query credential, the shared secret, the filters and
/// header values that the API never shows, so an editor that sends back
/// only what it shows loses nothing. `null` removes a setting; a patch
/// cannot rename a source; a source the database lacks is 404.
#[tokio::test]
async fn a_patch_keeps_what_it_leaves_out() {
    let t = Setup::new().secret_key().start().await;
    let shop = json!({
        "write_keys": ["wk-shop"],
        "webhooks": {
            "urls": [{"url": "http://127.0.0.1:9/in?token=query-credential", "headers": {"Authorization": "Bearer header-secret"}}],
            "shared_secret": "shop-secret",
            "filters": [{"action": "drop", "if": {"field": "type", "in": ["page"]}}],
            "protection": {"rate_per_second": 50}
        }
    });
    let r = t
        .admin("PUT", "/admin/sources/shop", Some(shop.clone()))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut before = stored_source(&t, "shop").await.unwrap();

    let r = t
        .admin(
            "PATCH",
            "/admin/sources/shop",
            Some(json!({"webhooks": {"enabled": false, "protection": {"rate_per_second": 5}}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["changes"]["changed"], json!(["shop"]));
    let after = stored_source(&t, "shop").await.unwrap();
    before["webhooks"]["enabled"] = json!(false);
    before["webhooks"]["protection"]["rate_per_second"] = json!(5);
    assert_eq!(after, before, "only what the patch named changed");
    assert!(!r.text().contains("query-credential") && !r.text().contains("header-secret"));

    // null removes; the same patch again changes nothing.
    let drop_filters = json!({"webhooks": {"filters": null}});
    let r = t
        .admin("PATCH", "/admin/sources/shop", Some(drop_filters.clone()))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(stored_source(&t, "shop").await.unwrap()["webhooks"]
        .get("filters")
        .is_none());
    let r = t
        .admin("PATCH", "/admin/sources/shop", Some(drop_filters))
        .await;
    assert_eq!(r.json()["changes"]["changed"], json!([]));

    let r = t
        .admin(
            "PATCH",
            "/admin/sources/shop",
            Some(json!({"name": "other"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "invalid_settings".to_owned()));
    let r = t
        .admin(
            "PATCH",
            "/admin/sources/shop",
            Some(json!({"write_keys": null})),
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "invalid_settings".to_owned()));
    let r = t
        .admin(
            "PATCH",
            "/admin/sources/absent",
            Some(json!({"write_keys": ["x"]})),
        )
        .await;
    assert_eq!((r.status, r.code()), (404, "not_found".to_owned()));
    assert_eq!(
        stored_source(&t, "shop").await.unwrap()["webhooks"]["shared_secret"],
        json!("shop-secret")
    );
    t.shutdown().await;
}

/// Two operators adding sources with one write key at the same moment:
/// both read the same stored set; one is written, and the other, written
/// over a set that changed, is checked again against it and refused. The
/// stored set stays valid, so later changes go through. Before, both were
/// written, and every later change (and every start) was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_puts_at_once_never_leave_a_set_that_refuses_changes() {
    let mut setup = Setup::new().secret_key();
    let observed = Observed::over(&setup.store, 0);
    setup.wrapped = Some(observed.clone());
    let t = setup.start().await;
    observed.meet(2);
    let put = |name: &'static str| {
        let t = &t;
        async move {
            t.admin(
                "PUT",
                &format!("/admin/sources/{name}"),
                Some(json!({"write_keys": ["wk-shared"]})),
            )
            .await
        }
    };
    let (a, b) = guard(async { tokio::join!(put("a"), put("b")) }).await;
    let mut statuses = [a.status, b.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 400], "{} / {}", a.text(), b.text());
    let refused = if a.status == 400 { &a } else { &b };
    assert_eq!(refused.code(), "invalid_settings");
    let stored: Vec<bool> = vec![
        stored_source(&t, "a").await.is_some(),
        stored_source(&t, "b").await.is_some(),
    ];
    assert_eq!(stored.iter().filter(|s| **s).count(), 1, "{stored:?}");
    // The set is still one the relay takes.
    let r = t
        .admin(
            "PUT",
            "/admin/sources/c",
            Some(json!({"write_keys": ["wk-c"]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    t.shutdown().await;
}

// -- privacy: delete, suppress, export ----------------------------------------

/// Stores a batch of u-1's calls and u-2's (one of u-1's refused).
async fn users_calls(t: &TestRelay, prefix: &str) -> Reply {
    let auth = basic(KEY);
    let batch = json!({"batch": [
        {"type": "track", "userId": "u-1", "event": "Order Completed", "messageId": format!("{prefix}1"),
         "properties": {"secret": "u-1's basket"}},
        {"type": "identify", "anonymousId": "u-1", "messageId": format!("{prefix}2"),
         "traits": {"email": "one@example.com"}},
        {"type": "track", "userId": "u-2", "event": "Viewed", "messageId": format!("{prefix}3")},
        {"type": "track", "userId": "u-1", "messageId": format!("{prefix}4")},
    ]});
    t.post(
        "/v1/batch",
        &[("Authorization", &auth)],
        batch.to_string().as_bytes(),
    )
    .await
}

/// A deletion erases every stored call of the user (by userId and by
/// anonymousId, in every state) and the refused call that names them, and
/// nothing of anyone else's; searches and the export find nothing of
/// theirs after; the audit record keeps a keyed hash, never the id.
#[tokio::test]
async fn a_deleted_user_s_calls_are_gone_from_the_store_the_log_and_the_export() {
    let t = Setup::new().secret_key().start().await;
    assert_eq!(users_calls(&t, "m").await.status, 200);
    let export = t.admin("GET", "/admin/export?userId=u-1", None).await;
    assert_eq!(export.status, 200);
    assert_eq!(export.header("content-type"), Some("application/x-ndjson"));
    let lines: Vec<Value> = String::from_utf8_lossy(&export.body)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["messageId"], "m1");
    assert_eq!(lines[0]["message"]["properties"]["secret"], "u-1's basket");
    let r = t
        .admin(
            "POST",
            "/admin/delete",
            Some(json!({"userId": "u-1", "operator": "privacy@example.com"})),
        )
        .await;
    assert_eq!(
        (r.status, r.json()),
        (
            200,
            json!({"sources": ["web"], "erased": {"calls": 2, "rejected": 1}, "suppressed": false})
        )
    );
    let rows = t.store.rows();
    assert!(
        rows.iter()
            .all(|r| r.kind == "delete" || r.message_id == "m3"),
        "{rows:?}"
    );
    // The notification carries the id to the destination, and no search
    // by the user finds it.
    assert!(rows.iter().all(|r| r.user_id.as_deref() != Some("u-1")));
    for query in ["userId=u-1", "anonymousId=u-1"] {
        let log = t.admin("GET", &format!("/admin/log?{query}"), None).await;
        assert_eq!(log.json()["calls"], json!([]), "{query}");
        let export = t
            .admin("GET", &format!("/admin/export?{query}"), None)
            .await;
        assert!(export.body.is_empty(), "{query}");
    }
    let rejected = t.admin("GET", "/admin/rejected", None).await.json();
    assert_eq!(rejected, json!([]));
    let records = t.admin("GET", "/admin/deletions", None).await.json();
    let record = &records["deletions"][0];
    assert_eq!(record["operator"], "privacy@example.com");
    assert_eq!(
        (record["calls"].clone(), record["rejected"].clone()),
        (json!(2), json!(1))
    );
    let hash = record["userHash"].as_str().unwrap();
    assert_eq!(hash.len(), 64);
    assert!(!records.to_string().contains("u-1"), "{records}");
    t.shutdown().await;
}

/// A suppressed user's calls are acknowledged and neither stored nor
/// counted as accepted; lifting the suppression takes them again.
#[tokio::test]
async fn a_suppressed_user_s_calls_are_acknowledged_and_never_stored_until_lifted() {
    let t = Setup::new().secret_key().start().await;
    let r = t
        .admin(
            "POST",
            "/admin/delete",
            Some(json!({"userId": "u-1", "suppress": true})),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["suppressed"].clone()),
        (200, json!(true))
    );
    assert_eq!(users_calls(&t, "s").await.status, 200);
    let stored: Vec<String> = t
        .store
        .rows()
        .into_iter()
        .filter(|r| r.kind != "delete")
        .map(|r| r.message_id)
        .collect();
    assert_eq!(stored, ["s3"], "only u-2's call is stored");
    let metrics = t.admin("GET", "/metrics", None).await;
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(
        // Its track, its identify, and the refused call that names it.
        text.contains(r#"callpost_relay_calls_total{source="web",outcome="suppressed"} 3"#),
        "{text}"
    );
    let r = t
        .admin("POST", "/admin/unsuppress", Some(json!({"userId": "u-1"})))
        .await;
    assert_eq!((r.status, r.json()), (200, json!({"lifted": true})));
    assert_eq!(users_calls(&t, "l").await.status, 200);
    assert!(t.store.rows().iter().any(|r| r.message_id == "l1"));
    let r = t
        .admin("POST", "/admin/unsuppress", Some(json!({"userId": "u-1"})))
        .await;
    assert_eq!(r.json(), json!({"lifted": false}));
    t.shutdown().await;
}

/// Without a secret key there is no keyed hash to keep: suppression is
/// refused with `no_secret_key`, and a deletion's record has no hash.
#[tokio::test]
async fn suppression_needs_the_secret_key_and_bad_operators_are_refused() {
    let t = Setup::new().start().await;
    let r = t
        .admin(
            "POST",
            "/admin/delete",
            Some(json!({"userId": "u-1", "suppress": true})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "no_secret_key".to_owned()));
    let r = t
        .admin("POST", "/admin/unsuppress", Some(json!({"userId": "u-1"})))
        .await;
    assert_eq!((r.status, r.code()), (409, "no_secret_key".to_owned()));
    for operator in [json!(""), json!("a\nb"), json!("x".repeat(201)), json!(7)] {
        let r = t
            .admin(
                "POST",
                "/admin/delete",
                Some(json!({"userId": "u-1", "operator": operator})),
            )
            .await;
        assert_eq!(r.status, 400, "{operator}");
    }
    let r = t
        .admin("POST", "/admin/delete", Some(json!({"userId": "u-1"})))
        .await;
    assert_eq!(r.status, 200);
    let records = t.admin("GET", "/admin/deletions", None).await.json();
    assert_eq!(records["deletions"][0]["userHash"], Value::Null);
    assert_eq!(records["deletions"][0]["operator"], "admin-api");
    for bad in [
        "/admin/export",
        "/admin/export?userId=a&anonymousId=b",
        "/admin/export?userId=",
    ] {
        assert_eq!(t.admin("GET", bad, None).await.status, 400, "{bad}");
    }
    t.shutdown().await;
}

/// A call a worker holds when its user is deleted: its row is gone, so
/// its finish counts nothing (it may have reached its receiver once).
#[tokio::test]
async fn a_call_in_flight_at_a_deletion_leaves_nothing_when_it_finishes() {
    let store = MemoryStore::new();
    let mut row = crate::store_contract::row("web", "m1", crate::store_contract::T0);
    row.user_id = Some("u-1".into());
    store.insert(vec![row], vec![]).await.unwrap();
    let held = store
        .claim(crate::store_contract::T0, "web", 10, 20_000)
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    let erased = store.erase_user("u-1").await.unwrap();
    assert_eq!(erased.calls, 1);
    let refused = store
        .finish(
            vec![crate::store_contract::delivered(&held[0], 1)],
            crate::store_contract::T0 + 1,
        )
        .await
        .unwrap();
    assert_eq!(refused, 1);
    assert!(store.rows().is_empty());
}
