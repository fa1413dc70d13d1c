//! OpenTelemetry traces: a span per Tracking API request (`ingest`) and
//! one per delivery attempt (`webhook attempt`), exported by OTLP/HTTP
//! when `[tracing] otlp_endpoint` is set, and nothing at all otherwise.
//!
//! The ingest span's context is stored with each call it stored (the
//! `trace_parent` column, a W3C `traceparent`), so the attempts made
//! hours later, by any relay on the database, are its children; each
//! attempt's request carries its own context to the receiver in
//! `traceparent`.
//!
//! # Why not the official crates
//! `opentelemetry-otlp`'s HTTP exporters (`http-proto` and `http-json`
//! alike) build on `opentelemetry-proto`'s `gen-tonic-messages`, which
//! brings tonic and prost with their derive macros into a relay that
//! speaks no gRPC; its hyper client has no TLS, and the SDK's batch
//! processor runs on tokio only behind an experimental feature. Two span
//! kinds with a handful of attributes need none of that: this module
//! writes OTLP/HTTP JSON itself over the relay's own hyper client.
//!
//! # Bounded cost
//! Ended spans wait in a queue of at most [`MAX_QUEUED_SPANS`]; past it a
//! span is dropped and counted (`callpost_relay_trace_spans_dropped_total`).
//! One task posts them every [`EXPORT_INTERVAL`], or as soon as
//! [`EXPORT_BATCH`] wait, each POST limited to [`EXPORT_TIMEOUT`]; a batch
//! the collector does not take is dropped, never retried. Ingest and
//! delivery only ever push to the queue: a slow or down collector costs
//! that queue, no latency.

use crate::config::ConfigError;
use crate::metrics::Metrics;
use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// The collector's OTLP/HTTP path for traces (the OTLP specification's
/// default for `OTEL_EXPORTER_OTLP_ENDPOINT`).
pub const TRACES_PATH: &str = "/v1/traces";
/// Spans per POST: the OpenTelemetry SDKs' `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`
/// default.
pub const EXPORT_BATCH: usize = 512;
/// How often waiting spans are posted: a second (the SDKs' default is 5 s;
/// one keeps a trace visible while its deliveries are watched).
pub const EXPORT_INTERVAL: Duration = Duration::from_secs(1);
/// Ended spans kept for export at most: the SDKs' `OTEL_BSP_MAX_QUEUE_SIZE`
/// default. A few MB at most.
pub const MAX_QUEUED_SPANS: usize = 2048;
/// One POST to the collector: the SDKs' `OTEL_EXPORTER_OTLP_TIMEOUT`
/// default.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default `service.name`.
pub const DEFAULT_SERVICE_NAME: &str = "callpost-relay";

/// The name of the span of a Tracking API request.
pub const INGEST_SPAN: &str = "ingest";
/// The name of the span of one delivery attempt.
pub const ATTEMPT_SPAN: &str = "webhook attempt";

/// A span's place in a trace: W3C Trace Context ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    /// 16 bytes, never all zero.
    pub trace_id: [u8; 16],
    /// 8 bytes, never all zero.
    pub span_id: [u8; 8],
}

impl SpanContext {
    /// Reads a `traceparent` header: version `00` exactly as W3C Trace
    /// Context level 1 writes it; a later version by its first four fields
    /// (the specification's rule for versions it does not know). `None`
    /// for anything else, and for all-zero ids or version `ff`.
    pub fn parse(header: &str) -> Option<Self> {
        let h = header.trim();
        let b = h.as_bytes();
        // Every valid form is ASCII; the positions below are byte
        // positions, which only ASCII makes character boundaries.
        if b.len() < 55 || !h.is_ascii() {
            return None;
        }
        let version = &h[..2];
        if !is_lower_hex(version) || version == "ff" {
            return None;
        }
        if (version == "00" && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
            return None;
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let (trace, span, flags) = (&h[3..35], &h[36..52], &h[53..55]);
        if !(is_lower_hex(trace) && is_lower_hex(span) && is_lower_hex(flags)) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        unhex(trace, &mut trace_id)?;
        unhex(span, &mut span_id)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self { trace_id, span_id })
    }

    /// As a `traceparent` header: version 00, sampled (every span is
    /// exported while tracing is on).
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-01",
            hex::encode(self.trace_id),
            hex::encode(self.span_id)
        )
    }

    /// A new span in a new trace; `None` when the OS gives no random bytes.
    pub fn root() -> Option<Self> {
        let mut trace_id = [0u8; 16];
        random_nonzero(&mut trace_id)?;
        Self::in_trace(trace_id)
    }

    /// A new span in `trace_id`'s trace.
    fn in_trace(trace_id: [u8; 16]) -> Option<Self> {
        let mut span_id = [0u8; 8];
        random_nonzero(&mut span_id)?;
        Some(Self { trace_id, span_id })
    }

    /// The trace id as hex.
    pub fn trace_hex(&self) -> String {
        hex::encode(self.trace_id)
    }

    /// The span id as hex.
    pub fn span_hex(&self) -> String {
        hex::encode(self.span_id)
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

fn unhex(s: &str, out: &mut [u8]) -> Option<()> {
    hex::decode_to_slice(s, out).ok()
}

/// Random ids, from the OS: ids made from the clock would collide across
/// relays started together.
fn random_nonzero(buf: &mut [u8]) -> Option<()> {
    getrandom::fill(buf).ok()?;
    if buf.iter().all(|&b| b == 0) {
        // 2^-64 at worst; an all-zero id is invalid, so one bit is set.
        buf[0] = 1;
    }
    Some(())
}

/// OTLP's `SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The relay answering a request (ingest).
    Server = 2,
    /// The relay making a request (an attempt).
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `stringValue`.
    Str(String),
    /// `intValue`.
    Int(i64),
}

/// A span under way: ended with [`Tracer::end`].
#[derive(Debug, Clone)]
pub struct Span {
    name: &'static str,
    kind: Kind,
    /// Its own context: what a child, a stored call or a receiver gets.
    pub context: SpanContext,
    parent: Option<[u8; 8]>,
    start: SystemTime,
    end: Option<SystemTime>,
    attributes: Vec<(&'static str, Value)>,
    error: bool,
}

impl Span {
    /// Sets a string attribute. Never a secret: spans leave the relay.
    pub fn set_str(&mut self, key: &'static str, value: impl Into<String>) {
        self.attributes.push((key, Value::Str(value.into())));
    }

    /// Sets an integer attribute.
    pub fn set_int(&mut self, key: &'static str, value: i64) {
        self.attributes.push((key, Value::Int(value)));
    }

    /// Marks it failed (OTLP status `ERROR`).
    pub fn set_error(&mut self) {
        self.error = true;
    }

    /// Counts it from now (the request goes out after waiting for its
    /// endpoint's cap).
    pub fn restart(&mut self) {
        self.start = SystemTime::now();
    }

    /// Ends it now, before [`Tracer::end`] queues it (the attempt's
    /// attributes are known only once the core has its answer).
    pub fn stop(&mut self) {
        self.end.get_or_insert_with(SystemTime::now);
    }

    /// The span's value of `key`, if set.
    #[cfg(test)]
    fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Makes spans and exports them.
pub struct Tracer {
    url: Uri,
    service_name: String,
    queue: Mutex<Vec<Span>>,
    /// A full batch waits, or the relay is stopping.
    ready: Notify,
    metrics: Arc<Metrics>,
    client: HttpClient,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Tracer {
    /// A tracer exporting to `cfg`'s endpoint; nothing is posted until
    /// [`Tracer::run`] runs.
    pub fn new(
        cfg: &crate::config::Tracing,
        ca_file: Option<&str>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, ConfigError> {
        let url: Uri = format!("{}{TRACES_PATH}", cfg.otlp_endpoint.trim_end_matches('/'))
            .parse()
            .map_err(|e| {
                ConfigError::Invalid(format!("tracing.otlp_endpoint cannot be used: {e}"))
            })?;
        let roots = crate::tls::roots(ca_file.map(std::path::Path::new))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ConfigError::Invalid(format!("TLS for tracing: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // The collector is the operator's own (often on localhost): the
        // private-network rule of deliveries does not apply to it.
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Self {
            url,
            service_name: cfg.service_name.clone(),
            queue: Mutex::new(Vec::new()),
            ready: Notify::new(),
            metrics,
            client,
        })
    }

    /// A span starting now; a child of `parent` when given, else the
    /// first of a new trace. `None` when the OS gives no random bytes
    /// (the work goes on untraced).
    pub fn start(
        &self,
        name: &'static str,
        kind: Kind,
        parent: Option<&SpanContext>,
    ) -> Option<Span> {
        let context = match parent {
            Some(p) => SpanContext::in_trace(p.trace_id)?,
            None => SpanContext::root()?,
        };
        Some(Span {
            name,
            kind,
            context,
            parent: parent.map(|p| p.span_id),
            start: SystemTime::now(),
            end: None,
            attributes: Vec::new(),
            error: false,
        })
    }

    /// The span of a Tracking API request whose headers were read at
    /// `headers_in`: a child of the request's valid `traceparent`, if any.
    pub fn ingest(&self, traceparent: Option<&str>, headers_in: Instant) -> Option<Span> {
        let parent = traceparent.and_then(SpanContext::parse);
        let mut span = self.start(INGEST_SPAN, Kind::Server, parent.as_ref())?;
        span.start = SystemTime::now()
            .checked_sub(headers_in.elapsed())
            .unwrap_or(span.start);
        Some(span)
    }

    /// Ends `span` and queues it for export; dropped and counted when the
    /// queue is full.
    pub fn end(&self, mut span: Span) {
        span.stop();
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.len() >= MAX_QUEUED_SPANS {
            drop(queue);
            self.metrics.trace_spans_dropped(1);
            return;
        }
        queue.push(span);
        let full = queue.len() >= EXPORT_BATCH;
        drop(queue);
        if full {
            self.ready.notify_one();
        }
    }

    fn take(&self) -> Vec<Span> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let n = queue.len().min(EXPORT_BATCH);
        queue.drain(..n).collect()
    }

    /// Posts waiting spans every [`EXPORT_INTERVAL`], or at once when a
    /// batch is full, until the task is aborted.
    pub async fn run(self: Arc<Self>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(EXPORT_INTERVAL) => {}
                () = self.ready.notified() => {}
            }
            self.flush().await;
        }
    }

    /// Posts every span waiting now, a batch at a time (at stop, so the
    /// last requests' spans are not lost).
    pub async fn flush(&self) {
        loop {
            let batch = self.take();
            if batch.is_empty() {
                return;
            }
            let n = batch.len();
            if let Err(e) = self.post(encode(&self.service_name, &batch)).await {
                self.metrics.trace_spans_dropped(n as u64);
                tracing::warn!("exporting {n} spans to the OTLP collector failed: {e}");
                return;
            }
            if n < EXPORT_BATCH {
                return;
            }
        }
    }

    async fn post(&self, body: String) -> Result<(), String> {
        let request = Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let sent = tokio::time::timeout(EXPORT_TIMEOUT, async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            // The answer is read (to a small limit) so the connection
            // goes back to the pool.
            let _ = http_body_util::BodyExt::collect(http_body_util::Limited::new(
                response.into_body(),
                64 * 1024,
            ))
            .await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the collector answered {}", status.as_u16()))
            }
        })
        .await;
        match sent {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} s", EXPORT_TIMEOUT.as_secs())),
        }
    }
}

fn nanos(t: SystemTime) -> String {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
}

fn attribute(key: &str, value: &Value) -> serde_json::Value {
    let value = match value {
        Value::Str(s) => serde_json::json!({ "stringValue": s }),
        // OTLP/JSON writes 64-bit integers as strings.
        Value::Int(i) => serde_json::json!({ "intValue": i.to_string() }),
    };
    serde_json::json!({ "key": key, "value": value })
}

/// An `ExportTraceServiceRequest` in OTLP/JSON (ids in hex, as the
/// OTLP/JSON mapping requires, not base64).
fn encode(service_name: &str, spans: &[Span]) -> String {
    let spans: Vec<serde_json::Value> = spans
        .iter()
        .map(|s| {
            let mut v = serde_json::json!({
                "traceId": s.context.trace_hex(),
                "spanId": s.context.span_hex(),
                "name": s.name,
                "kind": s.kind as i32,
                "startTimeUnixNano": nanos(s.start),
                "endTimeUnixNano": nanos(s.end.unwrap_or(s.start)),
                "attributes": s.attributes.iter().map(|(k, v)| attribute(k, v)).collect::<Vec<_>>(),
                "status": { "code": if s.error { 2 } else { 0 } },
            });
            if let (Some(parent), Some(obj)) = (s.parent, v.as_object_mut()) {
                obj.insert("parentSpanId".into(), hex::encode(parent).into());
            }
            v
        })
        .collect();
    serde_json::json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [attribute("service.name", &Value::Str(service_name.to_owned()))],
            },
            "scopeSpans": [{
                "scope": { "name": "callpost-relay", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }],
        }],
    })
    .to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_reads_and_writes_back() {
        let c = SpanContext::parse(VALID).unwrap();
        assert_eq!(c.trace_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.span_hex(), "00f067aa0ba902b7");
        assert_eq!(c.traceparent(), VALID);
        // Not sampled upstream: still read, and written as sampled.
        let unsampled = VALID.replace("-01", "-00");
        assert_eq!(SpanContext::parse(&unsampled).unwrap(), c);
        // A later version: its first four fields count, more may follow.
        let later = VALID.replacen("00", "01", 1) + "-whatever";
        assert_eq!(SpanContext::parse(&later).unwrap(), c);
    }

    #[test]
    fn invalid_traceparents_are_ignored() {
        let bad = [
            // Version ff is forbidden; 00 takes exactly four fields.
            VALID.replacen("00", "ff", 1),
            format!("{VALID}-extra"),
            // All-zero ids.
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01".into(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01".into(),
            // Wrong lengths.
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01".into(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01".into(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1".into(),
            String::new(),
            // Upper case, and other characters.
            VALID.to_uppercase(),
            VALID.replace('-', "_"),
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01".into(),
            // Not ASCII: a character across the positions of the fields
            // (a byte index there is no character boundary), and the
            // replacement character a header that is not UTF-8 reads as.
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01".into(),
            "é0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            format!("\u{fffd}{}", &VALID[1..]),
            "\u{fffd}".repeat(20),
            // A later version with a fifth field not set apart by a dash.
            VALID.replacen("00", "01", 1) + "x",
        ];
        for h in &bad {
            assert_eq!(SpanContext::parse(h), None, "{h:?}");
        }
    }

    #[test]
    fn new_ids_are_random_and_children_stay_in_the_trace() {
        let a = SpanContext::root().unwrap();
        let b = SpanContext::root().unwrap();
        assert_ne!(a.trace_id, b.trace_id);
        let child = SpanContext::in_trace(a.trace_id).unwrap();
        assert_eq!(child.trace_id, a.trace_id);
        assert_ne!(child.span_id, a.span_id);
        assert_eq!(SpanContext::parse(&child.traceparent()), Some(child));
    }

    #[test]
    fn spans_are_written_as_otlp_json() {
        let cfg = crate::config::Tracing {
            otlp_endpoint: "http://127.0.0.1:4318".into(),
            service_name: "relay-a".into(),
        };
        let tracer = Tracer::new(&cfg, None, Arc::new(Metrics::new())).unwrap();
        assert_eq!(tracer.url.to_string(), "http://127.0.0.1:4318/v1/traces");
        let parent = SpanContext::parse(VALID).unwrap();
        let mut span = tracer
            .start(ATTEMPT_SPAN, Kind::Client, Some(&parent))
            .unwrap();
        span.set_int("callpost.attempt", 2);
        span.set_str("url.full", "https://example.com/hook");
        span.set_error();
        span.stop();
        let doc: serde_json::Value =
            serde_json::from_str(&encode("relay-a", std::slice::from_ref(&span))).unwrap();
        let rs = &doc["resourceSpans"][0];
        assert_eq!(
            rs["resource"]["attributes"][0]["value"]["stringValue"],
            "relay-a"
        );
        let s = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], parent.trace_hex());
        assert_eq!(s["parentSpanId"], parent.span_hex());
        assert_eq!(s["spanId"], span.context.span_hex());
        assert_eq!(s["kind"], 3);
        assert_eq!(s["status"]["code"], 2);
        assert_eq!(s["attributes"][0]["value"]["intValue"], "2");
        assert_eq!(
            span.attribute("url.full"),
            Some(&Value::Str("https://example.com/hook".into()))
        );
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let cfg = crate::config::Tracing {
            otlp_endpoint: "http://127.0.0.1:9".into(),
            service_name: DEFAULT_SERVICE_NAME.into(),
        };
        let metrics = Arc::new(Metrics::new());
        let tracer = Tracer::new(&cfg, None, Arc::clone(&metrics)).unwrap();
        for _ in 0..MAX_QUEUED_SPANS + 3 {
            let span = tracer.start(INGEST_SPAN, Kind::Server, None).unwrap();
            tracer.end(span);
        }
        assert_eq!(tracer.queue.lock().unwrap().len(), MAX_QUEUED_SPANS);
        assert_eq!(metrics.trace_spans_dropped_total(), 3);
    }
}
