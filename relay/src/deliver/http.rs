//! The HTTP client for deliveries: pooled HTTP/1.1 connections per host,
//! TLS with the system's roots plus `ca_file`, a cap on requests in flight
//! per endpoint URL, and the receiver's timeout counted from the send.
//!
//! The request is exactly the core's (method, URL, headers, body), plus
//! the attempt's `traceparent` when tracing is on, and the bearer token of
//! an endpoint with OAuth 2.0 auth ([`Tokens`]). An endpoint with a
//! client certificate is sent to by a client of its own, whose TLS
//! presents it (its pooled connections are never another endpoint's). No
//! redirect is followed (a 3xx goes to the core as its status), and no
//! proxy is taken from the environment: the relay posts where it is told.

use super::connect::{Connector, PrivateAddress};
use crate::clock::Clock;
use crate::config::Config;
use crate::guards::{Guarded, Guards};
use crate::metrics::Metrics;
use crate::trace::Span;
use bytes::Bytes;
use callpost_core::oauth::{TokenError, TokenRequest, TokenSource, TOKEN_ANSWER_BYTES};
use callpost_core::protection::{Permit, MAX_BREAKER_OPEN_MS};
use callpost_core::webhooks::{Auth, ClientCertificate, Endpoint as Settings, OAuth2};
use callpost_core::{Attempt, Outcome, Timestamp};
use http::{HeaderName, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::collections::HashMap;
use std::error::Error as StdError;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A receiver's answer body is read up to this much, so its connection
/// goes back to the pool; past it the connection is dropped instead. An
/// acknowledgement is a few bytes; 64 KB covers an error page and keeps
/// what one connection costs small.
pub const ANSWER_BYTES: usize = 64 * 1024;

/// The answer body must arrive within this once the status line has, or
/// its connection is dropped: the status is reported to the core before
/// the body is read, so a slow body never turns a 2xx into a timeout and
/// only costs its connection. The same 5 s the receiver had for its
/// answer.
pub const ANSWER_BODY_TIMEOUT: Duration = Duration::from_secs(5);

/// An idle pooled connection is closed after this: aiohttp's default
/// `keepalive_timeout`, and well under the 60-75 s most servers keep an
/// idle connection (so the relay, not the server, closes it first).
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// A wait for the receiver protections shorter than this (the rate
/// limit's spacing) is waited out with the delivery; a longer one (an open
/// circuit, a receiver's `Retry-After`) holds the attempt back
/// ([`Outcome::Held`]) and the delivery's next round comes after it.
pub const HOLD_AFTER: Duration = Duration::from_secs(1);

/// How often a request waiting for an answer to its endpoint (the guard's
/// cap, or a probe in flight) asks the guard again: a bound on a missed
/// wake-up, not the usual wait.
const ANSWER_POLL: Duration = Duration::from_millis(250);

type HttpClient = Client<HttpsConnector<Connector>, Full<Bytes>>;

/// What an endpoint's requests need beyond the core's request: its OAuth
/// 2.0 grant, its client certificate. `None` for most endpoints.
#[derive(Debug, Clone)]
pub(super) struct Access {
    oauth2: Option<OAuth2>,
    certificate: Option<ClientCertificate>,
}

impl Access {
    /// What `ep` needs, if anything.
    pub(super) fn of(ep: &Settings) -> Option<Self> {
        let oauth2 = match ep.auth() {
            Some(Auth::OAuth2(o)) => Some(o.clone()),
            _ => None,
        };
        let certificate = ep.client_certificate().cloned();
        (oauth2.is_some() || certificate.is_some()).then_some(Self {
            oauth2,
            certificate,
        })
    }
}

/// The delivery client.
pub(super) struct Http {
    client: HttpClient,
    /// A client per client certificate, made when first needed.
    identified: Mutex<HashMap<ClientCertificate, HttpClient>>,
    tls: rustls::ClientConfig,
    connector: Connector,
    pool_idle: usize,
    /// The token of each OAuth 2.0 grant, shared by its endpoints.
    tokens: Mutex<HashMap<OAuth2, Arc<tokio::sync::Mutex<TokenSource>>>>,
    metrics: Arc<Metrics>,
    /// endpoint URL → its cap on requests in flight.
    endpoints: Mutex<HashMap<String, Arc<Endpoint>>>,
    per_endpoint: usize,
    /// The receiver protections of each endpoint URL.
    guards: Arc<Guards>,
}

impl Http {
    /// The client `cfg` asks for. Fails when `ca_file` cannot be read or
    /// holds no certificate.
    pub(super) fn new(
        cfg: &Config,
        guards: Arc<Guards>,
        metrics: Arc<Metrics>,
    ) -> io::Result<Self> {
        let tls = tls_config(cfg.ca_file.as_deref())?;
        let connector = Connector::new(cfg.allow_private_networks);
        let mut endpoints = HashMap::new();
        let mut per_host: HashMap<(String, String), usize> = HashMap::new();
        for source in &cfg.sources {
            for e in source
                .destinations
                .iter()
                .flat_map(|d| d.webhooks.endpoints())
            {
                if endpoints.contains_key(e.url()) {
                    continue;
                }
                endpoints.insert(
                    e.url().to_owned(),
                    Arc::new(Endpoint::new(cfg.endpoint_concurrency)),
                );
                if let Ok(uri) = e.url_before_values().parse::<Uri>() {
                    let key = (
                        uri.scheme_str().unwrap_or_default().to_owned(),
                        uri.authority()
                            .map(|a| a.as_str().to_owned())
                            .unwrap_or_default(),
                    );
                    *per_host.entry(key).or_default() += 1;
                }
            }
        }
        // The pool is per scheme and authority: keep as many idle
        // connections to a host as requests can be in flight to it, so a
        // steady stream reuses every connection and none is kept for
        // nothing.
        let urls_per_host = per_host.values().copied().max().unwrap_or(1);
        let pool_idle = cfg.endpoint_concurrency.saturating_mul(urls_per_host);
        Ok(Self {
            client: client_of(tls.clone(), connector, pool_idle),
            identified: Mutex::new(HashMap::new()),
            tls,
            connector,
            pool_idle,
            tokens: Mutex::new(HashMap::new()),
            metrics,
            endpoints: Mutex::new(endpoints),
            per_endpoint: cfg.endpoint_concurrency,
            guards,
        })
    }

    /// Waits until the endpoint's guard lets a request go, or says why it
    /// is held back.
    async fn permit(&self, g: &Guarded, clock: &Clock) -> Result<(), Outcome> {
        loop {
            let now = clock.now();
            let permit = self.guards.with(g, now, |guard| {
                (guard.poll_permit(now), guard.endpoint_state(now))
            });
            match permit {
                (Permit::Send, _) => return Ok(()),
                (Permit::WaitUntil(until), state) => {
                    let wait = u64::try_from(until.millis_since(now)).unwrap_or(0);
                    if Duration::from_millis(wait) > HOLD_AFTER {
                        return Err(Outcome::Held {
                            until,
                            reason: state.as_str().into(),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(wait.max(1))).await;
                }
                (Permit::WaitForAnswer, _) => {
                    let _ = tokio::time::timeout(ANSWER_POLL, g.answered.notified()).await;
                }
                (Permit::Disabled, state) => {
                    return Err(Outcome::Held {
                        until: now.saturating_add_ms(MAX_BREAKER_OPEN_MS),
                        reason: state.as_str().into(),
                    })
                }
            }
        }
    }

    fn endpoint(&self, url: &str) -> Arc<Endpoint> {
        let mut map = self
            .endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            map.entry(url.to_owned())
                .or_insert_with(|| Arc::new(Endpoint::new(self.per_endpoint))),
        )
    }

    /// Sends `attempt` (to `endpoint_url`'s slot and protection: the
    /// endpoint as configured, a URL template's included, never the URL
    /// made for one call, so a template does not make a slot per user) and
    /// reports how it went, and when it went out
    /// (`None` when it never did). `polled_at` is when the core gave it:
    /// the core's deadline minus that is the receiver's time, counted from
    /// when the request goes out, after the wait for the endpoint's cap
    /// (the lease renewal covers that wait).
    ///
    /// `span` (tracing on) is the attempt's: its context goes to the
    /// receiver in `traceparent`, and it counts from the send to the
    /// answer.
    pub(super) async fn send(
        &self,
        attempt: Attempt,
        endpoint_url: &str,
        access: Option<&Access>,
        polled_at: Timestamp,
        clock: &Clock,
        mut span: Option<&mut Span>,
    ) -> (Option<Timestamp>, Outcome, AnswerStart) {
        let budget_ms = attempt
            .deadline
            .as_millis()
            .saturating_sub(polled_at.as_millis())
            .max(1);
        let budget = Duration::from_millis(u64::try_from(budget_ms).unwrap_or(1));
        let endpoint = self.endpoint(endpoint_url);
        let guard = self.guards.get(endpoint_url, clock.now());
        let mut core_request = attempt.request;
        let grant = access.and_then(|a| a.oauth2.as_ref());
        let mut bearer = None;
        if let Some(grant) = grant {
            match self.token(grant, clock).await {
                Ok(authorization) => {
                    core_request.authorize(&authorization);
                    bearer = Some(authorization);
                }
                Err(e) => {
                    let message = e.to_string();
                    return (None, Outcome::Token { message }, AnswerStart::none());
                }
            }
        }
        let client = match access.and_then(|a| a.certificate.as_ref()) {
            None => self.client.clone(),
            Some(c) => match self.identified(c) {
                Ok(client) => client,
                Err(message) => return (None, Outcome::tls(message), AnswerStart::none()),
            },
        };
        let mut request = match build(core_request) {
            Ok(r) => r,
            Err(message) => return (None, Outcome::connection(message), AnswerStart::none()),
        };
        if let Some(span) = span.as_deref() {
            // Hex digits and dashes: always a valid header value.
            if let Ok(v) = HeaderValue::from_str(&span.context.traceparent()) {
                request
                    .headers_mut()
                    .insert(HeaderName::from_static("traceparent"), v);
            }
        }
        let Ok(permit) = endpoint.acquire().await else {
            return (
                None,
                Outcome::connection("the relay is stopping"),
                AnswerStart::none(),
            );
        };
        // The guard is asked once a slot is free, right before the send:
        // answers that came in while this request waited for the slot
        // (a run of failures, a Retry-After) already count.
        if let Err(held) = self.permit(&guard, clock).await {
            return (None, held, AnswerStart::none());
        }
        let sent = clock.now();
        if let Some(span) = span.as_deref_mut() {
            span.restart();
        }
        let (outcome, body) = exchange(&client, request, budget).await;
        if let Some(span) = span {
            span.stop();
        }
        if let (Some(grant), Some(bearer), Outcome::Response { status: 401, .. }) =
            (grant, &bearer, &outcome)
        {
            // The core retries the call; the next attempt fetches a token.
            self.source(grant).lock().await.handle_rejected(bearer);
        }
        // The guard hears the answer before the slot is free, so the next
        // request to this URL is judged with it.
        let now = clock.now();
        self.guards.answered(&guard, sent, now, &outcome);
        // The body is read with the slot still taken: a connection is the
        // endpoint's until its answer has been read or dropped, so a
        // receiver that trickles its bodies holds no more connections than
        // its cap.
        let answer = AnswerStart::none();
        match body {
            Some(body) => {
                let slot = Slot { permit, endpoint };
                tokio::spawn(read_answer(body, answer.clone(), Some(slot)));
            }
            None => drop(permit),
        }
        guard.answered.notify_waiters();
        (Some(sent), outcome, answer)
    }

    /// The token source of `grant`, made when first asked for.
    fn source(&self, grant: &OAuth2) -> Arc<tokio::sync::Mutex<TokenSource>> {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(tokens.entry(grant.clone()).or_insert_with(|| {
            let seed = getrandom::u64().unwrap_or(0x5eed);
            Arc::new(tokio::sync::Mutex::new(TokenSource::new(
                grant.clone(),
                seed,
            )))
        }))
    }

    /// The `Authorization` value for `grant` now: the kept token, or one
    /// fetched first (one request per grant at a time: the others wait for
    /// it, at most [`callpost_core::oauth::TOKEN_TIMEOUT_MS`]).
    async fn token(&self, grant: &OAuth2, clock: &Clock) -> Result<String, TokenError> {
        let source = self.source(grant);
        let mut s = source.lock().await;
        if let Some(request) = s.poll_request(clock.now()) {
            let answer = self.fetch_token(request).await;
            let now = clock.now();
            let result = match answer {
                Ok((status, body)) => s.handle_response(now, status, &body),
                Err(message) => {
                    s.handle_failure(now, &message);
                    Err(TokenError::Unreachable(message))
                }
            };
            self.metrics.token_request(match &result {
                Ok(()) => "ok",
                Err(TokenError::Refused { .. }) => "refused",
                Err(TokenError::Unreachable(_)) => "unreachable",
                Err(_) => "invalid",
            });
            if let Err(e) = &result {
                tracing::warn!(
                    token_url = %callpost_core::ops::shown_url(&grant.token_url),
                    "an OAuth 2.0 token request failed: {e}"
                );
            }
        }
        s.authorization(clock.now()).map(str::to_owned)
    }

    /// Posts a token request (through the same private-network rule as
    /// every delivery) and reads its answer's status and first
    /// [`TOKEN_ANSWER_BYTES`], within [`callpost_core::oauth::TOKEN_TIMEOUT_MS`].
    async fn fetch_token(&self, t: TokenRequest) -> Result<(u16, Vec<u8>), String> {
        let uri: Uri = t
            .url
            .parse()
            .map_err(|e| format!("the token URL cannot be sent: {e}"))?;
        let mut builder = Request::builder().method("POST").uri(uri);
        for (name, value) in &t.headers {
            builder = builder.header(*name, value.as_str());
        }
        let request = builder
            .body(Full::new(Bytes::from(t.body)))
            .map_err(|e| format!("the token request cannot be built: {e}"))?;
        let budget = Duration::from_millis(callpost_core::oauth::TOKEN_TIMEOUT_MS);
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| outcome_of_error(&e).to_string())?;
            let status = response.status().as_u16();
            let mut body = response.into_body();
            let mut read = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| format!("the answer broke off: {e}"))?;
                if let Some(data) = frame.data_ref() {
                    let room = TOKEN_ANSWER_BYTES.saturating_sub(read.len());
                    read.extend_from_slice(&data[..data.len().min(room)]);
                    if room <= data.len() {
                        break;
                    }
                }
            }
            Ok((status, read))
        };
        tokio::time::timeout(budget, exchange)
            .await
            .unwrap_or_else(|_| Err("no answer within 5 s".into()))
    }

    /// The client that presents `certificate`, made when first needed.
    fn identified(&self, certificate: &ClientCertificate) -> Result<HttpClient, String> {
        let mut clients = self
            .identified
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(certificate) {
            return Ok(c.clone());
        }
        let mut tls = self.tls.clone();
        tls.client_auth_cert_resolver =
            Arc::new(Identity(crate::tls::client_identity(certificate)?));
        let client = client_of(tls, self.connector, self.pool_idle);
        clients.insert(certificate.clone(), client.clone());
        Ok(client)
    }
}

/// A pooled client over `tls` and `connector`.
fn client_of(tls: rustls::ClientConfig, connector: Connector, pool_idle: usize) -> HttpClient {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(pool_idle)
        .pool_timer(TokioTimer::new())
        .build(https)
}

/// A client certificate presented to every server that asks for one
/// (rustls's own such resolver is private).
#[derive(Debug)]
struct Identity(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for Identity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl Http {
    /// Sends one of the core's requests outside any endpoint's cap and
    /// guard: the operator's events (a handful, one at a time).
    pub(super) async fn post(&self, request: callpost_core::Request, budget: Duration) -> Outcome {
        match build(request) {
            Ok(r) => {
                let (outcome, body) = exchange(&self.client, r, budget).await;
                if let Some(body) = body {
                    tokio::spawn(read_answer(body, AnswerStart::none(), None));
                }
                outcome
            }
            Err(message) => Outcome::connection(message),
        }
    }
}

/// Sends `request` and waits `budget` for its status line, which is the
/// attempt's result; the body, when there is an answer, is the caller's
/// to read afterwards ([`read_answer`]).
async fn exchange(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    budget: Duration,
) -> (Outcome, Option<Incoming>) {
    match tokio::time::timeout(budget, client.request(request)).await {
        Err(_) => (Outcome::Timeout, None),
        Ok(Err(e)) => (outcome_of_error(&e), None),
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            (
                Outcome::Response {
                    status,
                    retry_after,
                },
                Some(response.into_body()),
            )
        }
    }
}

/// The start of an answer's body, for the delivery log
/// ([`callpost_core::delivery::ANSWER_LOG_BYTES`] of it), filled as the
/// body arrives.
///
/// An attempt's result goes to the core at the status line and never
/// waits for the body: a receiver that writes its status line and its body
/// in two writes (Python's `http.server`, many small frameworks) has its
/// body held back about 40 ms by Nagle's algorithm on its side and delayed
/// ACKs on ours, and waiting for it would add that to every attempt. The
/// log keeps what has arrived by the time the delivery's turn ends, which
/// for a receiver that writes both at once is the whole start.
#[derive(Debug, Clone, Default)]
pub(super) struct AnswerStart(Arc<Mutex<Vec<u8>>>);

impl AnswerStart {
    /// Nothing yet (and, for a request that got no answer, nothing ever).
    pub(super) fn none() -> Self {
        Self::default()
    }

    /// What of the start has arrived so far.
    pub(super) fn arrived(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn push(&self, data: &[u8]) {
        let mut start = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let room = callpost_core::delivery::ANSWER_LOG_BYTES.saturating_sub(start.len());
        start.extend_from_slice(&data[..data.len().min(room)]);
    }
}

/// An endpoint URL's cap on requests in flight, which also covers the
/// connections whose answers are still being read: a receiver that
/// trickles its bodies holds no more of the relay's sockets than its cap.
struct Endpoint {
    slots: Arc<Semaphore>,
    /// Requests waiting for a slot.
    waiting: AtomicUsize,
    /// A request began to wait.
    wanted: Notify,
}

impl Endpoint {
    fn new(slots: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(slots)),
            waiting: AtomicUsize::new(0),
            wanted: Notify::new(),
        }
    }

    /// A slot, once one is free; the bodies still read with theirs are
    /// told a request waits.
    async fn acquire(&self) -> Result<OwnedSemaphorePermit, tokio::sync::AcquireError> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        self.wanted.notify_waiters();
        let permit = Arc::clone(&self.slots).acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        permit
    }

    /// Resolves once a request waits for a slot.
    async fn wanted(&self) {
        loop {
            let notified = self.wanted.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.waiting.load(Ordering::Acquire) > 0 {
                return;
            }
            notified.await;
        }
    }
}

/// The slot an answer's body is read with, and its endpoint.
struct Slot {
    permit: OwnedSemaphorePermit,
    endpoint: Arc<Endpoint>,
}

/// Reads an answer body to its end, keeping its start in `start` (the
/// connection then goes back to the pool), or drops it (and its
/// connection) once it is longer or slower than the limits, or, read with
/// its endpoint's `slot`, as soon as another request waits for the slot:
/// a body that was not in when the status line came is read only while
/// nothing else wants the connection. Then the slot goes.
async fn read_answer(mut body: Incoming, start: AnswerStart, slot: Option<Slot>) {
    let read = async {
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return };
            if let Some(data) = frame.data_ref() {
                if seen < callpost_core::delivery::ANSWER_LOG_BYTES {
                    start.push(data);
                }
                seen += data.len();
                if seen > ANSWER_BYTES {
                    return;
                }
            }
        }
    };
    let read = tokio::time::timeout(ANSWER_BODY_TIMEOUT, read);
    match &slot {
        Some(slot) => {
            tokio::select! {
                _ = read => {}
                () = slot.endpoint.wanted() => {}
            }
        }
        None => {
            let _ = read.await;
        }
    }
    drop(body);
    drop(slot.map(|s| s.permit));
}

/// The core's request as hyper's; a message when it cannot be one (the
/// core validated the URL and headers, so this does not happen).
fn build(r: callpost_core::Request) -> Result<Request<Full<Bytes>>, String> {
    let uri: Uri = r
        .url
        .parse()
        .map_err(|e| format!("the endpoint URL cannot be sent: {e}"))?;
    let mut request = Request::builder()
        .method(r.method)
        .uri(uri)
        .body(Full::new(Bytes::from(r.body)))
        .map_err(|e| format!("the request cannot be built: {e}"))?;
    let headers = request.headers_mut();
    for (name, value) in r.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header {name:?} cannot be sent"))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| format!("the value of header {name} cannot be sent"))?;
        headers.append(name, value);
    }
    Ok(request)
}

/// A failed request as the core's outcome: `tls` when the handshake or a
/// certificate failed, `connection` otherwise (refused, reset, DNS, the
/// private-network rule, closed mid-answer), with the causes for the log.
fn outcome_of_error(e: &hyper_util::client::legacy::Error) -> Outcome {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(p) = err.downcast_ref::<PrivateAddress>() {
            return Outcome::connection(p.to_string());
        }
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Outcome::tls(t.to_string());
        }
        let text = err.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        // An io::Error's source() skips the error it wraps; get_ref() is
        // the way in.
        cur = match err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner),
            None => err.source(),
        };
    }
    Outcome::connection(parts.join(": "))
}

/// TLS for deliveries: certificates are always verified, against
/// [`roots`].
fn tls_config(ca_file: Option<&str>) -> io::Result<rustls::ClientConfig> {
    let roots = roots(ca_file)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The system's roots plus the PEM certificates in `ca_file`: a private
/// CA is added to what the system trusts, never in its place.
fn roots(ca_file: Option<&str>) -> io::Result<rustls::RootCertStore> {
    let roots = crate::tls::roots(ca_file.map(std::path::Path::new))
        .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
    if roots.is_empty() {
        tracing::warn!(
            "no trusted CA certificate (the system has none and ca_file is not set): \
             deliveries over HTTPS will fail"
        );
    }
    Ok(roots)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let e = tls_config(Some(path.to_str().unwrap())).unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = tls_config(Some("/nonexistent/ca.pem")).unwrap_err();
        assert!(e.to_string().contains("ca_file"), "{e}");
    }

    #[test]
    fn ca_file_adds_to_the_system_roots() {
        let system = roots(None).unwrap().len();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        let a = rcgen::generate_simple_self_signed(vec!["a.test".to_owned()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b.test".to_owned()]).unwrap();
        std::fs::write(&path, a.cert.pem() + &b.cert.pem()).unwrap();
        let with = roots(Some(path.to_str().unwrap())).unwrap().len();
        assert_eq!(
            with,
            system + 2,
            "every certificate of the file, beside the system's"
        );
    }
}
