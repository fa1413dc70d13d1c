//! The relay benchmark's open-loop sender (`benches/relay/bench.py`):
//! POSTs at a fixed rate, on a schedule that does not wait for answers, so
//! a stall in the server delays every request scheduled behind it and
//! shows in the percentiles (no coordinated omission). wrk, the saturation
//! sender, is closed-loop: each connection waits for its answer before it
//! sends again, so its percentiles hide a stall.
//!
//! Why a sender of our own: wrk2 (wrk with `-R`, a fixed rate) is not a
//! Debian package, and `oha` (crates.io) would add the build of a whole
//! dependency tree of its own to the benchmark; this file needs nothing
//! beyond the relay's own dependencies (tokio and hyper's client) and
//! builds in seconds beside the relay.
//!
//! ```text
//! bench_load --url http://127.0.0.1:PORT/v1/batch --rate 500 --seconds 20 TEMPLATES
//! ```
//!
//! `TEMPLATES` holds one request body a line; request `n` takes line
//! `n mod lines`, with every `__ID<k>__` in it replaced by eight
//! pseudo-random hex digits and `-<tag>-<n>-<k>`, so every call has a fresh
//! `messageId` that starts at random, and every `__U<k>__` by one of
//! 50,000 user ids. Each latency runs from the moment the sender's timer
//! released the request, at its slot in the schedule, to the end of its
//! answer; a request that finds every connection busy waits, and the
//! wait counts. How late the timer
//! released it after its slot (tokio's timer ticks each millisecond, and
//! later on a busy machine) is the sender's own delay, not the server's:
//! it is left out of the latency and reported apart, as `lag`. The last
//! line on stdout is
//! `RESULT <sent> <errors> <p50 µs> <p99 µs> <p99.9 µs> <max µs> <lag p99 µs>`.

// A benchmark tool: its output is what it is for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use bytes::Bytes;
use clap::Parser;
use http::header::{HeaderValue, CONTENT_TYPE, HOST};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Mutex};
use tokio::time::Instant;

/// Answers still missing this long after the last request was due count
/// as errors (a hang guard, not a measurement).
const GRACE: Duration = Duration::from_secs(30);

/// Time for every connection to be opened before the first request is
/// due, so that no latency includes a TCP handshake.
const WARM_UP: Duration = Duration::from_millis(300);

#[derive(Debug, Parser)]
#[command(
    about = "POST request bodies at a fixed rate (open loop), and report latency percentiles"
)]
struct Args {
    /// The URL to POST to (http only).
    #[arg(long)]
    url: String,
    /// Requests per second.
    #[arg(long)]
    rate: f64,
    /// How long to send for.
    #[arg(long)]
    seconds: f64,
    /// Connections kept open; a request waits when all are busy.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// The requests' Content-Type.
    #[arg(long, default_value = "application/json")]
    content_type: String,
    /// Begins every messageId, so that runs never share one.
    #[arg(long, default_value = "load")]
    tag: String,
    /// A file of request bodies, one a line.
    templates: String,
}

/// One body, cut at its `__ID<k>__` placeholders.
struct Template {
    /// The text around the placeholders: one more piece than `keys`.
    parts: Vec<Vec<u8>>,
    /// Each placeholder's `k`.
    keys: Vec<String>,
}

impl Template {
    fn parse(line: &str) -> Self {
        let mut parts = Vec::new();
        let mut keys = Vec::new();
        let mut rest = line;
        while let Some(start) = rest.find("__") {
            let after = &rest[start + 2..];
            // `ID` or `U`, digits, `__`: the key is what lies between.
            let key_len = ["ID", "U"]
                .into_iter()
                .find(|k| after.starts_with(k))
                .and_then(|k| {
                    let digits = after[k.len()..]
                        .bytes()
                        .take_while(u8::is_ascii_digit)
                        .count();
                    let end = k.len() + digits;
                    (digits > 0 && after[end..].starts_with("__")).then_some(end)
                });
            let Some(end) = key_len else {
                // Not a placeholder: keep it as text and look further on.
                parts.push(rest.as_bytes()[..start + 2].to_vec());
                keys.push(String::new());
                rest = after;
                continue;
            };
            parts.push(rest.as_bytes()[..start].to_vec());
            keys.push(after[..end].to_owned());
            rest = &after[end + 2..];
        }
        parts.push(rest.as_bytes().to_vec());
        Self { parts, keys }
    }

    /// The body of request `n`: each `__ID<k>__` a fresh messageId whose
    /// first characters are random (as an SDK's UUIDs are, so the ids'
    /// index is written at random places) and whose end makes it unique;
    /// each `__U<k>__` one of [`USERS`] user ids, drawn for the call.
    fn body(&self, tag: &str, n: u64) -> Bytes {
        let size = self.parts.iter().map(Vec::len).sum::<usize>() + self.keys.len() * 48;
        let mut out = Vec::with_capacity(size);
        for (part, key) in self.parts.iter().zip(&self.keys) {
            out.extend_from_slice(part);
            if let Some(k) = key.strip_prefix("ID") {
                let r = mix(n.wrapping_mul(64).wrapping_add(k.parse().unwrap_or(0)));
                out.extend_from_slice(format!("{:08x}-{tag}-{n}-{k}", r as u32).as_bytes());
            } else if let Some(k) = key.strip_prefix('U') {
                let r = mix(n.wrapping_mul(64).wrapping_add(k.parse().unwrap_or(0)) ^ 0x5555);
                out.extend_from_slice(format!("user-{}", r % USERS).as_bytes());
            }
        }
        if let Some(last) = self.parts.last() {
            out.extend_from_slice(last);
        }
        Bytes::from(out)
    }
}

/// How many users the calls come from (as in `bench_log`).
const USERS: u64 = 50_000;

/// splitmix64's finaliser: well-spread bits from a counter.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A request's place in the schedule.
struct Job {
    n: u64,
    /// When the sender's timer let it go (at or just after its slot).
    released: Instant,
    /// How late the timer let it go.
    lag: Duration,
}

/// What one request came to.
struct Sample {
    latency: Duration,
    lag: Duration,
    ok: bool,
}

/// What every connection shares.
struct Target {
    addr: SocketAddr,
    host: HeaderValue,
    uri: Uri,
    content_type: HeaderValue,
    templates: Vec<Template>,
    tag: String,
}

type Sender = http1::SendRequest<Full<Bytes>>;

async fn connect(target: &Target) -> Option<Sender> {
    let stream = TcpStream::connect(target.addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(async move {
        // The connection ends when the sender is dropped or the server
        // closes it; either way the next request reconnects.
        let _ = conn.await;
    });
    Some(sender)
}

async fn send(target: &Target, sender: &mut Sender, n: u64) -> Result<bool, hyper::Error> {
    let template = &target.templates[(n % target.templates.len() as u64) as usize];
    let mut req = Request::new(Full::new(template.body(&target.tag, n)));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = target.uri.clone();
    req.headers_mut().insert(HOST, target.host.clone());
    req.headers_mut()
        .insert(CONTENT_TYPE, target.content_type.clone());
    sender.ready().await?;
    let res = sender.send_request(req).await?;
    let ok = res.status().is_success();
    res.into_body().collect().await?;
    Ok(ok)
}

async fn connection(
    target: Arc<Target>,
    jobs: Arc<Mutex<mpsc::UnboundedReceiver<Job>>>,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut sender = connect(&target).await;
    loop {
        let job = jobs.lock().await.recv().await;
        let Some(job) = job else { break };
        if sender.as_ref().is_none_or(Sender::is_closed) {
            sender = connect(&target).await;
        }
        let ok = match sender.as_mut() {
            Some(s) => match send(&target, s, job.n).await {
                Ok(ok) => ok,
                Err(_) => {
                    sender = None;
                    false
                }
            },
            None => false,
        };
        samples.push(Sample {
            latency: job.released.elapsed(),
            lag: job.lag,
            ok,
        });
    }
    samples
}

/// The `q` quantile (nearest rank) of sorted `v`, µs.
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.saturating_sub(1).min(v.len() - 1)]
}

async fn run(args: Args) -> Result<(), String> {
    let uri: Uri = args.url.parse().map_err(|e| format!("--url: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err("--url must be http://host:port/path".into());
    }
    let authority = uri
        .authority()
        .ok_or("--url has no host")?
        .as_str()
        .to_owned();
    let addr = tokio::net::lookup_host(&authority)
        .await
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    let text = std::fs::read_to_string(&args.templates)
        .map_err(|e| format!("cannot read {}: {e}", args.templates))?;
    let templates: Vec<Template> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(Template::parse)
        .collect();
    if templates.is_empty() {
        return Err(format!("{} has no request body", args.templates));
    }
    if !(args.rate > 0.0 && args.seconds > 0.0 && args.connections > 0) {
        return Err("--rate, --seconds and --connections must be above 0".into());
    }
    let target = Arc::new(Target {
        addr,
        host: HeaderValue::from_str(&authority).map_err(|e| e.to_string())?,
        uri: uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|e: http::uri::InvalidUri| e.to_string())?,
        content_type: HeaderValue::from_str(&args.content_type).map_err(|e| e.to_string())?,
        templates,
        tag: args.tag.clone(),
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let rx = Arc::new(Mutex::new(rx));
    let workers: Vec<_> = (0..args.connections)
        .map(|_| tokio::spawn(connection(Arc::clone(&target), Arc::clone(&rx))))
        .collect();
    let total = (args.rate * args.seconds).round() as u64;
    let start = Instant::now() + WARM_UP;
    for n in 0..total {
        let due = start + Duration::from_secs_f64(n as f64 / args.rate);
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        let released = Instant::now();
        let _ = tx.send(Job {
            n,
            released,
            lag: released.saturating_duration_since(due),
        });
    }
    drop(tx);
    let deadline = Instant::now() + GRACE;
    let mut samples = Vec::with_capacity(total as usize);
    for w in workers {
        // A connection still waiting past the grace period, or failed:
        // what it had not recorded counts as errors below.
        if let Ok(Ok(s)) = tokio::time::timeout_at(deadline, w).await {
            samples.extend(s);
        }
    }
    let answered = samples.len() as u64;
    let errors = samples.iter().filter(|s| !s.ok).count() as u64 + total.saturating_sub(answered);
    let mut latencies: Vec<u64> = samples
        .iter()
        .filter(|s| s.ok)
        .map(|s| s.latency.as_micros() as u64)
        .collect();
    latencies.sort_unstable();
    let mut lags: Vec<u64> = samples.iter().map(|s| s.lag.as_micros() as u64).collect();
    lags.sort_unstable();
    println!(
        "{total} requests at {} /s to {}: {errors} errors, p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs; timer lag p99 {} µs",
        args.rate,
        args.url,
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.99),
        quantile(&latencies, 0.999),
        latencies.last().copied().unwrap_or(0),
        quantile(&lags, 0.99),
    );
    println!(
        "RESULT {total} {errors} {} {} {} {} {}",
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.99),
        quantile(&latencies, 0.999),
        latencies.last().copied().unwrap_or(0),
        quantile(&lags, 0.99),
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    // One thread, as wrk is run with one (`-t1`): the sender takes at
    // most one of the two cores it shares with the server.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_load: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_load: {e}");
            ExitCode::FAILURE
        }
    }
}
