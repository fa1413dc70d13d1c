//! The HTTP listeners: the Tracking API, and the admin API with
//! `/metrics` and the probes (on their own listener when `admin_listen`
//! is set).
//!
//! * [`tracking`]: `POST /v1/*` and its CORS preflight. Credentials are
//!   checked before the body is parsed; the body is read with a size cap
//!   and a time limit; a call is acknowledged only once stored.
//! * [`admin`]: `/admin/*` behind the admin token (constant-time check,
//!   failures counted, logged and slowed), with bounded, type-checked
//!   bodies.
//! * [`probes`]: `/healthz`, `/readyz`, and `/metrics` (behind the token).
//! * `console`: the web console at `/console/`, where the admin API is
//!   served; it signs in with the admin token and works through the
//!   admin API.
//! * [`listener`]: the accept loop and the protections every listener
//!   has: header, body and idle timeouts, a header size limit, a
//!   connection cap, graceful shutdown.
//!
//! The server is hyper's HTTP/1.1 connection over tokio, with no
//! framework: a request is one match on (method, path) and one handler.

pub mod admin;
mod console;
pub mod listener;
pub mod probes;
pub mod tracking;

use crate::housekeeping::history::History;
use crate::state::Relay;
use bytes::{Bytes, BytesMut};
use callpost_core::Code;
use http::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// What a handler answers: the whole body at once (every answer is small
/// except `/metrics` and the admin lists, which are built in memory
/// anyway).
pub type Answer = Response<Full<Bytes>>;

/// Which routes a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// Everything: the Tracking API, the probes, `/metrics` and `/admin/*`
    /// (no `admin_listen`).
    All,
    /// The public listener when `admin_listen` is set: the Tracking API
    /// and the probes; `/admin/*` and `/metrics` are 404 there.
    Tracking,
    /// The `admin_listen` listener: `/admin/*`, `/metrics` and the probes.
    Admin,
}

impl Serves {
    fn tracking(self) -> bool {
        matches!(self, Self::All | Self::Tracking)
    }

    fn admin(self) -> bool {
        matches!(self, Self::All | Self::Admin)
    }
}

/// What the handlers share: the relay, the admin API's own state, and
/// the console's history.
pub struct Api {
    /// The relay's shared state.
    pub relay: Arc<Relay>,
    admin: admin::AdminState,
    history: Arc<History>,
}

impl Api {
    /// The handlers over `relay`; the console charts `history`.
    pub fn new(relay: Arc<Relay>, history: Arc<History>) -> Self {
        Self {
            relay,
            admin: admin::AdminState::default(),
            history,
        }
    }

    /// Answers one request. `headers_in` is when its headers were read:
    /// the body must arrive within `limits.body_timeout` of it.
    pub async fn handle(
        &self,
        req: Request<Incoming>,
        remote: SocketAddr,
        serves: Serves,
        headers_in: Instant,
    ) -> Answer {
        let path = req.uri().path();
        if serves.tracking() && path.starts_with("/v1/") {
            return tracking::handle(self, req, headers_in).await;
        }
        match (req.method(), path) {
            (&Method::GET, "/healthz") => probes::healthz(),
            (&Method::GET, "/readyz") => probes::readyz(&self.relay),
            (&Method::GET, "/metrics") if serves.admin() => {
                probes::metrics(self, req.headers(), remote).await
            }
            (method, p) if serves.admin() && p.starts_with("/admin/") => {
                match admin::Route::of(method, p) {
                    Some(route) => admin::handle(self, route, req, remote, headers_in).await,
                    None => not_found(),
                }
            }
            (_, p) if serves.admin() && (p == "/console" || p.starts_with("/console/")) => {
                console::handle(self, req, remote, headers_in).await
            }
            _ => not_found(),
        }
    }
}

/// Bound listeners, not yet serving.
pub struct Server {
    /// Where the Tracking API listens.
    pub api_addr: SocketAddr,
    /// Where the admin API listens, when apart.
    pub admin_addr: Option<SocketAddr>,
    api: Arc<Api>,
    listeners: Vec<listener::Listener>,
}

impl Server {
    /// Binds the listeners the configuration names; the console charts
    /// `history`.
    pub async fn bind(relay: Arc<Relay>, history: Arc<History>) -> io::Result<Self> {
        let cfg = Arc::clone(&relay.cfg);
        let api_at = cfg.listen_addr().map_err(io::Error::other)?;
        let admin_at = cfg.admin_addr().map_err(io::Error::other)?;
        let limits = cfg.limits;
        let api_listener = TcpListener::bind(api_at).await?;
        let api_addr = api_listener.local_addr()?;
        let mut listeners = vec![listener::Listener::new(
            "api",
            api_listener,
            if admin_at.is_some() {
                Serves::Tracking
            } else {
                Serves::All
            },
            limits.max_connections,
            "limits.max_connections",
        )];
        let mut admin_addr = None;
        if let Some(at) = admin_at {
            let l = TcpListener::bind(at).await?;
            admin_addr = Some(l.local_addr()?);
            listeners.push(listener::Listener::new(
                "admin",
                l,
                Serves::Admin,
                limits.max_admin_connections,
                "limits.max_admin_connections",
            ));
        }
        Ok(Self {
            api_addr,
            admin_addr,
            api: Arc::new(Api::new(relay, history)),
            listeners,
        })
    }

    /// Serves until `shutdown` resolves, then stops taking connections and
    /// lets requests in progress end (for at most
    /// [`listener::GRACEFUL_SHUTDOWN`]).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        if let Some(addr) = self.admin_addr {
            tracing::info!(
                "admin API, console, /metrics and probes on http://{addr} (admin_listen)"
            );
        }
        listener::serve(self.api, self.listeners, shutdown).await;
    }
}

// -- answers --------------------------------------------------------------

/// A JSON answer.
pub(crate) fn json(status: u16, body: impl Into<Bytes>) -> Answer {
    let mut a = Response::new(Full::new(body.into()));
    *a.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    a.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    a
}

/// A JSON value as the answer's body.
pub(crate) fn json_value<T: serde::Serialize>(status: u16, value: &T) -> Answer {
    match serde_json::to_vec(value) {
        Ok(body) => json(status, body),
        Err(e) => refusal(
            Code::Internal,
            &format!("the answer could not be written: {e}"),
        ),
    }
}

/// The HTTP status the relay answers each code with: the one table where
/// a code becomes a status (the Tracking API's refusals carry the core's
/// own, `IngestError::status`, which Segment's API fixes).
pub(crate) fn status_of(code: Code) -> u16 {
    match code {
        Code::Unauthorized => 401,
        Code::AdminDisabled | Code::OriginNotAllowed => 403,
        Code::NotFound | Code::UnknownRoute => 404,
        Code::MethodNotAllowed => 405,
        Code::RequestTimeout => 408,
        Code::Conflict | Code::NoSecretKey | Code::WrongSecretKey => 409,
        Code::PayloadTooLarge | Code::BatchTooLarge | Code::CallTooLarge => 413,
        Code::Unavailable | Code::Overloaded | Code::DatabaseRefused => 503,
        Code::Internal => 500,
        // Arguments, settings and calls the request got wrong.
        _ => 400,
    }
}

/// `{"code": ..., "message": ...}`, with the status of its code.
pub(crate) fn refusal(code: Code, message: &str) -> Answer {
    json_value(
        status_of(code),
        &serde_json::json!({"code": code.as_str(), "message": message}),
    )
}

/// Adds a header.
pub(crate) fn with(mut a: Answer, name: HeaderName, value: HeaderValue) -> Answer {
    a.headers_mut().append(name, value);
    a
}

/// Closes the connection after this answer: the rest of the request was
/// not read, or the client is being slowed down.
pub(crate) fn closing(a: Answer) -> Answer {
    with(a, CONNECTION, HeaderValue::from_static("close"))
}

pub(crate) fn not_found() -> Answer {
    refusal(Code::NotFound, "no such endpoint")
}

/// A header as text (`None` when absent or not visible ASCII/UTF-8).
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers
        .get(name)
        .map(|v| std::str::from_utf8(v.as_bytes()).unwrap_or("\u{fffd}"))
}

// -- bodies ---------------------------------------------------------------

/// Why a body was not read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// It passed the limit; the rest was not read.
    TooLarge,
    /// It did not arrive within `limits.body_timeout`.
    TimedOut,
    /// The connection failed or the framing was broken.
    Failed,
}

/// Reads a request body of at most `limit` bytes, all of it by
/// `deadline`. A body that comes in one frame is not copied.
pub(crate) async fn read_body(
    body: Incoming,
    limit: usize,
    declared: Option<usize>,
    deadline: Instant,
) -> Result<Bytes, BodyError> {
    if declared.is_some_and(|n| n > limit) {
        return Err(BodyError::TooLarge);
    }
    let collect = async move {
        let mut body = body;
        let mut first: Option<Bytes> = None;
        let mut more: Option<BytesMut> = None;
        let mut size = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| BodyError::Failed)?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            size = size.saturating_add(data.len());
            if size > limit {
                return Err(BodyError::TooLarge);
            }
            match (&mut first, &mut more) {
                (None, _) => first = Some(data),
                (Some(f), None) => {
                    let mut m = BytesMut::with_capacity(declared.unwrap_or(size).max(size));
                    m.extend_from_slice(f);
                    m.extend_from_slice(&data);
                    more = Some(m);
                }
                (Some(_), Some(m)) => m.extend_from_slice(&data),
            }
        }
        Ok(match (first, more) {
            (_, Some(m)) => m.freeze(),
            (Some(f), None) => f,
            (None, None) => Bytes::new(),
        })
    };
    tokio::time::timeout_at(deadline.into(), collect)
        .await
        .unwrap_or(Err(BodyError::TimedOut))
}

/// The 408 answer for a body that was too slow.
pub(crate) fn body_timeout(relay: &Relay) -> Answer {
    relay.metrics.timeout("body");
    closing(refusal(
        Code::RequestTimeout,
        &format!(
            "the request body did not arrive within {} ms (limits.body_timeout_ms)",
            relay.cfg.limits.body_timeout.as_millis()
        ),
    ))
}

/// The answer for a body the connection failed to deliver.
pub(crate) fn body_failed() -> Answer {
    closing(refusal(
        Code::InvalidBody,
        "the request body could not be read",
    ))
}

// -- logs -----------------------------------------------------------------

/// Lets a warning through at most once per `every`, and counts the ones
/// held back, so a flood (refused connections, a stuck database, failed
/// admin attempts) cannot flood the log.
#[derive(Debug)]
pub(crate) struct Throttle {
    every: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    pub(crate) const fn new(every: Duration) -> Self {
        Self {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(held back since the last line)` when a line may be written
    /// now.
    pub(crate) fn allow(&self) -> Option<u64> {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        match s.0 {
            Some(last) if now.duration_since(last) < self.every => {
                s.1 += 1;
                None
            }
            _ => {
                let held = s.1;
                *s = (Some(now), 0);
                Some(held)
            }
        }
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new(Duration::from_secs(1))
    }
}
