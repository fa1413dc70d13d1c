//! A webhook receiver on 127.0.0.1 (or ::1, or over TLS) for the delivery
//! tests: it records every request, counts connections and requests in
//! flight, and answers as the test tells it to.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How the receiver answers.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    /// At once, with this status and these headers.
    Status(u16, Vec<(&'static str, String)>),
    /// With 200 after this long.
    After(Duration),
    /// With this status after this long.
    StatusAfter(u16, Duration),
    /// Not until the test opens the gate ([`Receiver::open`]), then 200.
    Hold,
    /// 200 and its headers at once, then a body of one byte every 100 ms,
    /// for 30 s.
    Trickle,
    /// At once, with this status and this JSON body (a token endpoint).
    Json(u16, String),
    /// 200 when the request's `Authorization` is this, else 401 (an API
    /// behind a bearer token).
    Authorized(String),
}

/// One request as received.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    /// The request's method.
    pub(crate) method: String,
    /// The request's path and query.
    pub(crate) path: String,
    /// `Idempotency-Key`.
    pub(crate) key: Option<String>,
    /// `X-Signature`.
    pub(crate) signature: Option<String>,
    /// Every header, names lowercase.
    pub(crate) headers: Vec<(String, String)>,
    /// The body.
    pub(crate) body: Vec<u8>,
}

struct State {
    answer: Mutex<Answer>,
    received: Mutex<Vec<Received>>,
    /// Requests whose headers arrived, answered or not.
    started: AtomicUsize,
    connections: AtomicUsize,
    open: AtomicUsize,
    max_open: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    gate: watch::Sender<bool>,
}

/// A running receiver.
#[derive(Clone)]
pub(crate) struct Receiver {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    state: Arc<State>,
}

/// Counts a request in flight while it lives.
struct InFlight(Arc<State>);

impl InFlight {
    fn new(state: &Arc<State>) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(Arc::clone(state))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts a connection open while it lives.
struct Open(Arc<State>);

impl Open {
    fn new(state: &Arc<State>) -> Self {
        let now = state.open.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_open.fetch_max(now, Ordering::SeqCst);
        Self(Arc::clone(state))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A body of one byte every 100 ms.
struct Trickle {
    tick: tokio::time::Interval,
    left: usize,
}

impl Body for Trickle {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        match self.tick.poll_tick(cx) {
            Poll::Ready(_) => {
                self.left -= 1;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

type AnswerBody = http_body_util::Either<http_body_util::Full<Bytes>, Trickle>;

impl Receiver {
    /// A receiver on `bind` (`127.0.0.1:0`, `[::1]:0`), answering 200.
    pub(crate) async fn start(bind: &str) -> std::io::Result<Self> {
        Self::start_with(bind, None).await
    }

    /// A receiver over TLS with `config`, on 127.0.0.1.
    pub(crate) async fn start_tls(config: Arc<rustls::ServerConfig>) -> Self {
        Self::start_with("127.0.0.1:0", Some(tokio_rustls::TlsAcceptor::from(config)))
            .await
            .unwrap()
    }

    async fn start_with(
        bind: &str,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            answer: Mutex::new(Answer::Status(200, vec![])),
            received: Mutex::new(Vec::new()),
            started: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            max_open: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            gate: watch::Sender::new(false),
        });
        let st = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                st.connections.fetch_add(1, Ordering::SeqCst);
                let st = Arc::clone(&st);
                let tls = tls.clone();
                tokio::spawn(async move {
                    let _open = Open::new(&st);
                    let service = service_fn(move |req| handle(Arc::clone(&st), req));
                    match tls {
                        None => {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(tcp), service)
                                .await;
                        }
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                });
            }
        });
        Ok(Self { addr, state })
    }

    /// `http://<addr>/hook`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// From now on, answer this way.
    pub(crate) fn answer(&self, answer: Answer) {
        *self.state.answer.lock().unwrap() = answer;
    }

    /// Lets every held request (and every later one) through.
    pub(crate) fn open(&self) {
        self.state.gate.send_replace(true);
    }

    /// Every request whose body arrived, in order.
    pub(crate) fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Requests whose headers arrived, answered or not.
    pub(crate) fn started(&self) -> usize {
        self.state.started.load(Ordering::SeqCst)
    }

    /// Connections accepted.
    pub(crate) fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// The most connections that were open at once.
    pub(crate) fn max_open(&self) -> usize {
        self.state.max_open.load(Ordering::SeqCst)
    }

    /// Requests being answered now.
    pub(crate) fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    /// The most requests that were being answered at once.
    pub(crate) fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

async fn handle(
    st: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<AnswerBody>, std::convert::Infallible> {
    st.started.fetch_add(1, Ordering::SeqCst);
    let _flight = InFlight::new(&st);
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let method = req.method().as_str().to_owned();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(String::new, |p| p.as_str().to_owned());
    let key = header("idempotency-key");
    let signature = header("x-signature");
    let authorization = header("authorization");
    let headers = req
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
    st.received.lock().unwrap().push(Received {
        method,
        path,
        key,
        signature,
        headers,
        body,
    });
    let answer = st.answer.lock().unwrap().clone();
    let full = |status: u16, headers: Vec<(&'static str, String)>| {
        let mut r = Response::builder().status(status);
        for (n, v) in headers {
            r = r.header(n, v);
        }
        r.body(http_body_util::Either::Left(http_body_util::Full::new(
            Bytes::from_static(b"ok"),
        )))
        .unwrap()
    };
    Ok(match answer {
        Answer::Status(status, headers) => full(status, headers),
        Answer::After(d) => {
            tokio::time::sleep(d).await;
            full(200, vec![])
        }
        Answer::StatusAfter(status, d) => {
            tokio::time::sleep(d).await;
            full(status, vec![])
        }
        Answer::Hold => {
            let mut gate = st.gate.subscribe();
            let _ = gate.wait_for(|open| *open).await;
            full(200, vec![])
        }
        Answer::Json(status, body) => Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(http_body_util::Either::Left(http_body_util::Full::new(
                Bytes::from(body),
            )))
            .unwrap(),
        Answer::Authorized(want) => {
            let status = if authorization.as_deref() == Some(want.as_str()) {
                200
            } else {
                401
            };
            full(status, vec![])
        }
        Answer::Trickle => Response::builder()
            .status(200)
            .body(http_body_util::Either::Right(Trickle {
                tick: tokio::time::interval(Duration::from_millis(100)),
                left: 300,
            }))
            .unwrap(),
    })
}
