//! The relay benchmark's ceiling (`benches/relay/bench.py`): an HTTP server
//! on the relay's own runtime and HTTP stack (tokio's multi-threaded
//! runtime, hyper 1's HTTP/1.1 connection) that reads every request body
//! whole and answers `{"success":true}`, as the relay answers a stored
//! batch, and does nothing else: no write key, no parse, no storage.
//!
//! ```text
//! cargo build --profile relay -p callpost-relay --example bench_echo
//! target/relay/examples/bench_echo [PORT]
//! ```
//!
//! Prints `listening on http://127.0.0.1:PORT` once bound (PORT 0, the
//! default, picks a free one), and serves until killed.

// A benchmark tool: its output is what it is for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;
use tokio::net::TcpListener;

/// The relay's answer to a stored batch.
const ANSWER: &[u8] = br#"{"success":true}"#;

/// The relay's header read timeout (`limits.header_timeout_ms`), so that
/// the echo arms the same timer per request as the relay's listener does.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    // The whole body, as the relay reads it before it answers.
    let body = req.into_body().collect().await?.to_bytes();
    drop(body);
    let mut res = Response::new(Full::new(Bytes::from_static(ANSWER)));
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(res)
}

async fn serve(port: u16) -> std::io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let mut out = std::io::stdout();
    writeln!(out, "listening on http://{addr}")?;
    out.flush()?;
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            // Out of file descriptors and the like: the sender sees it as
            // errors; the echo goes on.
            Err(e) => {
                eprintln!("bench_echo: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Small answers go out at once rather than waiting for the
        // client's delayed ACK.
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service_fn(answer));
            // A client closing mid-request is no concern of the echo's.
            let _ = conn.await;
        });
    }
}

fn main() -> ExitCode {
    let port = match std::env::args().nth(1).map(|p| p.parse::<u16>()) {
        None => 0,
        Some(Ok(p)) => p,
        Some(Err(_)) => {
            eprintln!("usage: bench_echo [PORT]");
            return ExitCode::from(2);
        }
    };
    // The relay's runtime (relay/src/cli.rs): multi-threaded, one worker
    // per core.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_echo: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(port)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_echo: {e}");
            ExitCode::FAILURE
        }
    }
}
