//! The accept loop, and the protections every listener has.
//!
//! | protection | setting | default |
//! |---|---|---|
//! | headers must arrive within … of the connection opening, or of the first byte of a later request | `limits.header_timeout_ms` | 10 s |
//! | the body must arrive within … of its headers (else 408 and close) | `limits.body_timeout_ms` | 15 s |
//! | a keep-alive connection idle between requests is closed after … | `limits.idle_timeout_ms` | 60 s |
//! | the largest header block (else 431 and close) | `limits.max_header_bytes` | 32 KiB |
//! | open connections on the Tracking API listener | `limits.max_connections` | 10,000 |
//! | open connections on the admin listener | `limits.max_admin_connections` | 64 |
//! | open connections of one client address (an IPv4 address, an IPv6 /64) | `limits.max_connections_per_client` | a quarter of the listener's cap |
//!
//! hyper's own `header_read_timeout` starts when hyper begins reading a
//! request head, which on a keep-alive connection is as soon as the
//! previous answer is written: it would close every idle connection after
//! the header timeout, and leave no room for an idle timeout of its own.
//! So the timeouts are kept here instead: the connection's bytes pass
//! through a wrapper, which notes the first byte of each request; the
//! service notes when a request starts and ends; and a watchdog beside
//! the connection closes it when the phase it is in has lasted too long.
//! The body timeout is the handler's (it reads the body), so it can
//! answer 408 before closing.
//!
//! A connection over the cap, or over its client's share of it, is
//! accepted and closed at once (the kernel's accept queue would otherwise
//! hold it, unanswered, until the client gives up), counted, and logged at
//! most once a second. Near the cap (its last tenth), each new connection
//! first closes the connection that has been idle between requests the
//! longest: keep-alive connections nobody uses never keep a new client out.

use super::{Api, Serves, Throttle};
use crate::config::Limits;
use crate::metrics::Metrics;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};

/// How long requests in progress get to finish once shutdown begins:
/// longer than a stuck database call (5 s by default), shorter than the
/// 30 s a service manager usually waits before SIGKILL.
pub const GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(10);

/// After an accept error (out of file descriptors, most often), the loop
/// waits this long before accepting again instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A bound socket and what it serves.
pub(crate) struct Listener {
    name: &'static str,
    tcp: TcpListener,
    serves: Serves,
    cap: usize,
    cap_setting: &'static str,
}

impl Listener {
    pub(crate) fn new(
        name: &'static str,
        tcp: TcpListener,
        serves: Serves,
        cap: usize,
        cap_setting: &'static str,
    ) -> Self {
        Self {
            name,
            tcp,
            serves,
            cap,
            cap_setting,
        }
    }
}

/// What the connections are told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Run,
    /// Finish the request in progress, then close.
    Graceful,
    /// Close now.
    Now,
}

/// Serves `listeners` until `shutdown`, then shuts down gracefully.
pub(crate) async fn serve(
    api: Arc<Api>,
    listeners: Vec<Listener>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let (stop_tx, stop_rx) = watch::channel(Stop::Run);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // Off: the watchdog keeps the header and idle timeouts (module
        // docs). Set explicitly, since with a timer hyper's default is 30 s.
        .header_read_timeout(None)
        .max_header_size(api.relay.cfg.limits.max_header_bytes)
        .keep_alive(true);
    let builder = Arc::new(builder);
    let mut caps = Vec::new();
    let mut loops = Vec::new();
    for l in listeners {
        let cap = Arc::new(Semaphore::new(l.cap));
        caps.push((Arc::clone(&cap), l.cap));
        loops.push(tokio::spawn(accept_loop(
            l,
            cap,
            Arc::clone(&api),
            Arc::clone(&builder),
            stop_rx.clone(),
        )));
    }
    shutdown.await;
    stop_tx.send_replace(Stop::Graceful);
    for l in loops {
        // An accept loop ends on the signal; a panic in one is already
        // reported by the runtime.
        let _ = l.await;
    }
    // Every connection holds a permit of its listener's cap: all of them
    // back means every connection has closed.
    let all_closed = async {
        for (cap, n) in &caps {
            let n = u32::try_from(*n).unwrap_or(u32::MAX);
            let _ = cap.acquire_many(n).await;
        }
    };
    if tokio::time::timeout(GRACEFUL_SHUTDOWN, all_closed)
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still in progress {} s after shutdown began; closing their connections",
            GRACEFUL_SHUTDOWN.as_secs()
        );
        stop_tx.send_replace(Stop::Now);
    }
}

async fn accept_loop(
    l: Listener,
    cap: Arc<Semaphore>,
    api: Arc<Api>,
    builder: Arc<http1::Builder>,
    mut stop: watch::Receiver<Stop>,
) {
    let metrics = Arc::clone(&api.relay.metrics);
    let refused_log = Throttle::default();
    let error_log = Throttle::default();
    let per_client = api.relay.cfg.limits.max_connections_per_client.min(l.cap);
    // The last tenth of the cap (at least one connection) is kept free by
    // closing idle connections.
    let headroom = (l.cap / 10).max(1);
    let open = Arc::new(OpenConnections::default());
    loop {
        let accepted = tokio::select! {
            r = l.tcp.accept() => r,
            _ = stop.wait_for(|s| *s != Stop::Run) => break,
        };
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(e) => {
                if error_log.allow().is_some() {
                    tracing::warn!(
                        "accepting a connection on the {} listener failed: {e}",
                        l.name
                    );
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let client = ClientKey::of(remote.ip());
        let refused = |why: &str, held: Option<u64>| {
            if let Some(held) = held {
                tracing::warn!(
                    "{why}; refusing new connections ({held} more refused since the last warning)"
                );
            }
        };
        if cap.available_permits() <= headroom {
            open.close_longest_idle();
        }
        let Ok(permit) = Arc::clone(&cap).try_acquire_owned() else {
            drop(stream);
            metrics.connection_refused(l.name);
            refused(
                &format!("connection cap reached ({} = {})", l.cap_setting, l.cap),
                refused_log.allow(),
            );
            continue;
        };
        let Some(share) = open.admit(client, per_client) else {
            drop(permit);
            drop(stream);
            metrics.connection_refused(l.name);
            refused(
                &format!(
                    "a client at {} holds its share of the {} listener's connections \
                     (limits.max_connections_per_client = {per_client})",
                    client.shown(),
                    l.name
                ),
                refused_log.allow(),
            );
            continue;
        };
        // Answers are small and written whole: sending them at once
        // matters more than filling packets.
        let _ = stream.set_nodelay(true);
        let state = Arc::new(ConnState::new());
        let listed = open.list(Arc::clone(&state));
        tokio::spawn(connection(
            stream,
            remote,
            Conn {
                api: Arc::clone(&api),
                builder: Arc::clone(&builder),
                serves: l.serves,
                name: l.name,
                state,
                _permit: permit,
                _share: share,
                _listed: listed,
            },
            stop.clone(),
        ));
    }
}

/// What a client's connections are counted by: its IPv4 address, or its
/// IPv6 /64 (one host usually holds a whole /64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ClientKey {
    V4([u8; 4]),
    V6([u8; 8]),
}

impl ClientKey {
    fn of(ip: std::net::IpAddr) -> Self {
        match ip {
            std::net::IpAddr::V4(v4) => Self::V4(v4.octets()),
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::V4(v4.octets()),
                None => {
                    let o = v6.octets();
                    Self::V6([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]])
                }
            },
        }
    }

    fn shown(&self) -> String {
        match self {
            Self::V4(o) => std::net::Ipv4Addr::from(*o).to_string(),
            Self::V6(o) => {
                let mut full = [0u8; 16];
                full[..8].copy_from_slice(o);
                format!("{}/64", std::net::Ipv6Addr::from(full))
            }
        }
    }
}

/// A listener's open connections: how many each client holds, and each
/// one's state (to find the one idle the longest).
#[derive(Default)]
struct OpenConnections {
    per_client: Mutex<HashMap<ClientKey, usize>>,
    states: Mutex<HashMap<u64, Arc<ConnState>>>,
    next: AtomicU64,
}

impl OpenConnections {
    /// A place for one more connection of `client`, if it holds fewer than
    /// `limit`.
    fn admit(self: &Arc<Self>, client: ClientKey, limit: usize) -> Option<ClientShare> {
        let mut counts = self
            .per_client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = counts.entry(client).or_default();
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(ClientShare {
            open: Arc::clone(self),
            client,
        })
    }

    /// Lists a connection's state while it lives.
    fn list(self: &Arc<Self>, state: Arc<ConnState>) -> Listed {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, state);
        Listed {
            open: Arc::clone(self),
            id,
        }
    }

    /// Closes the connection idle between requests the longest, if any.
    fn close_longest_idle(&self) {
        let states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let longest = states
            .values()
            .filter_map(|s| match s.get() {
                (Phase::Idle, since) => Some((since, s)),
                _ => None,
            })
            .min_by_key(|(since, _)| *since);
        if let Some((_, state)) = longest {
            state.evict();
        }
    }
}

/// One connection of a client, counted while it lives.
struct ClientShare {
    open: Arc<OpenConnections>,
    client: ClientKey,
}

impl Drop for ClientShare {
    fn drop(&mut self) {
        let mut counts = self
            .open
            .per_client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

/// A connection's place in [`OpenConnections::states`], while it lives.
struct Listed {
    open: Arc<OpenConnections>,
    id: u64,
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.open
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// What a connection's task holds; the permit goes back to the cap, and
/// the client's share with it, when the task ends, however it ends.
struct Conn {
    api: Arc<Api>,
    builder: Arc<http1::Builder>,
    serves: Serves,
    name: &'static str,
    state: Arc<ConnState>,
    _permit: OwnedSemaphorePermit,
    _share: ClientShare,
    _listed: Listed,
}

/// Counts a connection open while it lives.
struct Open {
    metrics: Arc<Metrics>,
    name: &'static str,
}

impl Open {
    fn new(metrics: Arc<Metrics>, name: &'static str) -> Self {
        metrics.connections(name, 1);
        Self { metrics, name }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics.connections(self.name, -1);
    }
}

async fn connection(
    stream: TcpStream,
    remote: SocketAddr,
    conn: Conn,
    mut stop: watch::Receiver<Stop>,
) {
    let relay = Arc::clone(&conn.api.relay);
    let _open = Open::new(Arc::clone(&relay.metrics), conn.name);
    let limits = relay.cfg.limits;
    let state = Arc::clone(&conn.state);
    let io = TokioIo::new(Watched {
        io: stream,
        state: Arc::clone(&state),
    });
    let api = Arc::clone(&conn.api);
    let serves = conn.serves;
    let service_state = Arc::clone(&state);
    let service = service_fn(move |req| {
        let api = Arc::clone(&api);
        let state = Arc::clone(&service_state);
        async move {
            let headers_in = Instant::now();
            state.set(Phase::Busy);
            let answer = api.handle(req, remote, serves, headers_in).await;
            state.set(Phase::Idle);
            Ok::<_, Infallible>(answer)
        }
    });
    let served = conn.builder.serve_connection(io, service);
    tokio::pin!(served);
    let mut graceful = false;
    loop {
        tokio::select! {
            r = served.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("connection from {remote} ended: {e}");
                }
                break;
            }
            what = watchdog(&state, &limits) => {
                relay.metrics.timeout(what);
                tracing::debug!("closed the connection from {remote}: {what} timeout");
                break;
            }
            () = state.evicted() => {
                relay.metrics.timeout("evicted");
                tracing::debug!("closed the idle connection from {remote}: the listener is near its cap");
                break;
            }
            changed = stop.changed() => {
                let now = if changed.is_err() { Stop::Now } else { *stop.borrow_and_update() };
                match now {
                    Stop::Now => break,
                    // hyper would wait for the first request of a
                    // connection that has sent nothing yet.
                    Stop::Graceful if state.get().0 == Phase::Fresh => break,
                    Stop::Graceful if !graceful => {
                        graceful = true;
                        served.as_mut().graceful_shutdown();
                    }
                    _ => {}
                }
            }
        }
    }
}

// -- timeouts -------------------------------------------------------------

/// Where a connection is between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Just opened, no byte yet: the first request's headers are due
    /// within the header timeout of the accept.
    Fresh,
    /// Between requests, no byte of the next one yet: the idle timeout.
    Idle,
    /// A request's first bytes are in: its headers are due within the
    /// header timeout (of the accept, for a connection's first request).
    Head,
    /// A request is being answered: the handler keeps the body timeout;
    /// its own work (a database call) has the database's limit.
    Busy,
}

/// A connection's phase and since when, shared by its I/O, its service
/// and its watchdog.
struct ConnState {
    phase: Mutex<(Phase, Instant)>,
    /// Fresh or idle: lets [`Watched`] skip the lock for every read but
    /// the first of a request.
    waiting: AtomicBool,
    changed: Notify,
    /// Told to close: the listener is near its cap and this connection
    /// has been idle the longest.
    evict: Notify,
}

impl ConnState {
    fn new() -> Self {
        Self {
            phase: Mutex::new((Phase::Fresh, Instant::now())),
            waiting: AtomicBool::new(true),
            changed: Notify::new(),
            evict: Notify::new(),
        }
    }

    /// Closes the connection if it is still idle between requests.
    fn evict(&self) {
        self.evict.notify_one();
    }

    /// Resolves once the connection is told to close while idle.
    async fn evicted(&self) {
        loop {
            self.evict.notified().await;
            if self.get().0 == Phase::Idle {
                return;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Phase, Instant)> {
        self.phase
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self) -> (Phase, Instant) {
        *self.lock()
    }

    fn set(&self, phase: Phase) {
        *self.lock() = (phase, Instant::now());
        self.waiting.store(
            matches!(phase, Phase::Fresh | Phase::Idle),
            Ordering::Release,
        );
        self.changed.notify_one();
    }

    /// Bytes arrived: if the connection was waiting, a request has begun.
    /// The first request's headers stay due from the accept.
    fn bytes_in(&self) {
        if !self.waiting.load(Ordering::Acquire) {
            return;
        }
        let mut p = self.lock();
        let since = match p.0 {
            Phase::Fresh => p.1,
            Phase::Idle => Instant::now(),
            Phase::Head | Phase::Busy => return,
        };
        *p = (Phase::Head, since);
        self.waiting.store(false, Ordering::Release);
        drop(p);
        self.changed.notify_one();
    }
}

/// Resolves with the phase's name (`header`, `idle`) when the connection
/// has stayed in one phase longer than its limit.
async fn watchdog(state: &ConnState, limits: &Limits) -> &'static str {
    loop {
        let (phase, since) = state.get();
        let limit = match phase {
            Phase::Fresh | Phase::Head => Some((limits.header_timeout, "header")),
            Phase::Idle => Some((limits.idle_timeout, "idle")),
            Phase::Busy => None,
        };
        let Some((limit, what)) = limit else {
            state.changed.notified().await;
            continue;
        };
        tokio::select! {
            () = state.changed.notified() => {}
            () = tokio::time::sleep_until((since + limit).into()) => {
                if state.get() == (phase, since) {
                    return what;
                }
            }
        }
    }
}

/// The connection's socket, noting the first bytes of each request.
struct Watched {
    io: TcpStream,
    state: Arc<ConnState>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.state.bytes_in();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
