//! `callpost._callpost`: thin pyo3 bindings over `callpost-core`. Each
//! function converts its arguments, calls the core once and converts the
//! result; rules live in the core. The I/O loops are Python (`_io.py`).

mod convert;

use callpost_core as core;
use convert::{bytes_of, err, now_ms, now_ms as now_ms_of, to_call, to_json, to_value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// `JSON.stringify(value)`, exactly.
#[pyfunction]
fn stringify(value: &Bound<'_, PyAny>) -> PyResult<String> {
    // The writer emits only UTF-8 (str input, ASCII punctuation).
    String::from_utf8(to_json(value)?).map_err(|_| err(core::JsonError::InvalidUnicode))
}

/// The last secret `sign` or `verify` was given, prekeyed (see
/// `core::KeyCache`). Calls hold the GIL, so the lock is uncontended; if it
/// is ever busy, the call keys its own secret instead of waiting.
static KEYS: std::sync::Mutex<core::KeyCache> = std::sync::Mutex::new(core::KeyCache::new());

/// `f` with `key`'s prekeyed secret.
fn with_secret<T>(key: &[u8], f: impl FnOnce(&core::Secret) -> T) -> PyResult<T> {
    match KEYS.try_lock() {
        Ok(mut keys) => Ok(f(keys.secret(key).map_err(err)?)),
        Err(_) => Ok(f(&core::Secret::new(key).map_err(err)?)),
    }
}

/// Lowercase hex HMAC-SHA1 of `body`, keyed with `secret`.
#[pyfunction]
fn sign(secret: &Bound<'_, PyAny>, body: &Bound<'_, PyAny>) -> PyResult<String> {
    let key = bytes_of(secret, "secret")?;
    let body = bytes_of(body, "body")?;
    with_secret(&key, |s| s.sign(&body))
}

fn secrets_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<core::Secret>> {
    let raw: Vec<Vec<u8>> = if obj.cast::<PyString>().is_ok() || obj.cast::<PyBytes>().is_ok() {
        vec![bytes_of(obj, "secret")?]
    } else {
        obj.try_iter()?
            .map(|s| bytes_of(&s?, "secret"))
            .collect::<PyResult<_>>()?
    };
    raw.into_iter()
        .map(|k| core::Secret::new(k).map_err(err))
        .collect()
}

/// Verifies `signature` over the raw `body` against one secret or several.
#[pyfunction]
fn verify(body: &Bound<'_, PyAny>, signature: &str, secrets: &Bound<'_, PyAny>) -> PyResult<bool> {
    let body = bytes_of(body, "body")?;
    if secrets.cast::<PyString>().is_ok() || secrets.cast::<PyBytes>().is_ok() {
        let key = bytes_of(secrets, "secret")?;
        return with_secret(&key, |s| {
            core::verify(&body, signature, std::slice::from_ref(s))
        })?
        .map_err(err);
    }
    core::verify(&body, signature, &secrets_of(secrets)?).map_err(err)
}

/// Verifies a parsed body by re-stringifying it as JavaScript does.
#[pyfunction]
fn verify_parsed(
    value: &Bound<'_, PyAny>,
    signature: &str,
    secrets: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    core::verify_value(&to_value(value)?, signature, &secrets_of(secrets)?).map_err(err)
}

/// The snake_case trait name for an audience.
#[pyfunction]
fn trait_name(audience: &str) -> PyResult<String> {
    core::audience::trait_name(audience).map_err(err)
}

/// Parses an ISO 8601 timestamp to milliseconds since the epoch (UTC).
#[pyfunction]
fn parse_timestamp(text: &str) -> PyResult<i64> {
    Ok(core::Timestamp::parse(text).map_err(err)?.as_millis())
}

/// An HTTP request to send. `repr` shows header names only.
#[pyclass(frozen, module = "callpost._callpost")]
struct Request {
    inner: core::Request,
}

#[pymethods]
impl Request {
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method
    }
    #[getter]
    fn url(&self) -> &str {
        &self.inner.url
    }
    #[getter]
    fn headers(&self) -> Vec<(&str, &str)> {
        self.inner
            .headers
            .iter()
            .map(|(n, v)| (&**n, &**v))
            .collect()
    }
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.body)
    }
    /// The first header named `name` (case-insensitive), or None.
    fn header(&self, name: &str) -> Option<String> {
        self.inner.header(name).map(str::to_owned)
    }
    fn __repr__(&self) -> String {
        let names: Vec<&str> = self.inner.headers.iter().map(|(n, _)| &**n).collect();
        format!(
            "Request(method={:?}, url={:?}, header_names={:?}, body_len={})",
            self.inner.method,
            self.inner.url,
            names,
            self.inner.body.len()
        )
    }
}

fn endpoints_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<core::EndpointConfig>> {
    if obj.cast::<PyString>().is_ok() {
        return Err(PyTypeError::new_err(
            "endpoints must be a list of urls or {'url', 'headers'} dicts, not a str",
        ));
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        let v = to_value(&item?)?;
        out.push(core::EndpointConfig::from_value(&v).map_err(err)?);
    }
    Ok(out)
}

/// A Webhooks destination's settings: 1–5 endpoints and an optional secret.
#[pyclass(module = "callpost._callpost")]
struct Webhooks {
    inner: core::Webhooks,
}

#[pymethods]
impl Webhooks {
    #[new]
    #[pyo3(signature = (endpoints, shared_secret=None))]
    fn new(
        endpoints: &Bound<'_, PyAny>,
        shared_secret: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let secret = shared_secret
            .map(|s| bytes_of(s, "shared_secret"))
            .transpose()?;
        let inner =
            core::Webhooks::new(&endpoints_of(endpoints)?, secret.as_deref()).map_err(err)?;
        Ok(Self { inner })
    }

    /// The signed request delivering `call` to endpoint `endpoint`.
    #[pyo3(signature = (call, endpoint=0, now=None))]
    fn request(
        &self,
        py: Python<'_>,
        call: &Bound<'_, PyAny>,
        endpoint: usize,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Request> {
        let now = core::Timestamp::from_millis(now_ms(py, now)?).map_err(err)?;
        let inner = self
            .inner
            .request(&to_call(call)?, endpoint, now)
            .map_err(err)?;
        Ok(Request { inner })
    }

    /// Whether `call`'s integrations let it reach this destination.
    fn is_enabled_for(&self, call: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.is_enabled_for(&to_call(call)?))
    }

    /// Normalised endpoint URLs, in failover order.
    #[getter]
    fn urls(&self) -> Vec<String> {
        self.inner
            .endpoints()
            .iter()
            .map(|e| e.url().to_owned())
            .collect()
    }

    /// Whether requests carry `X-Signature`.
    #[getter]
    fn signed(&self) -> bool {
        self.inner.is_signed()
    }

    fn __repr__(&self) -> String {
        format!(
            "Webhooks(urls={:?}, signed={})",
            self.urls(),
            self.inner.is_signed()
        )
    }
}

fn outcome_of(
    status: Option<u16>,
    retry_after: Option<String>,
    error: Option<&str>,
    message: &str,
) -> PyResult<core::Outcome> {
    core::Outcome::from_report(status, retry_after, error, message).ok_or_else(|| {
        PyValueError::new_err("give either status, or error='timeout' | 'connection' | 'tls'")
    })
}

/// Outcomes and logs reach Python as the JSON the core writes for them
/// (the same text the JS binding parses), so their shape is the core's.
fn from_core_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// One attempt to send.
#[pyclass(frozen, module = "callpost._callpost")]
struct Attempt {
    #[pyo3(get)]
    endpoint: usize,
    #[pyo3(get)]
    attempt: u32,
    #[pyo3(get)]
    request: Py<Request>,
    #[pyo3(get)]
    deadline_ms: i64,
}

/// One call's webhook delivery, sans I/O (see the core's `Delivery`).
#[pyclass(module = "callpost._callpost")]
struct Delivery {
    inner: core::Delivery,
}

#[pymethods]
impl Delivery {
    #[new]
    #[pyo3(signature = (webhooks, call, now=None, *, timeout_ms=5000, retry_window_ms=14_400_000,
                        backoff_base_ms=10_000, backoff_cap_ms=1_800_000, seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        webhooks: &Webhooks,
        call: &Bound<'_, PyAny>,
        now: Option<&Bound<'_, PyAny>>,
        timeout_ms: u64,
        retry_window_ms: u64,
        backoff_base_ms: u64,
        backoff_cap_ms: u64,
        seed: u64,
    ) -> PyResult<Self> {
        let backoff = core::retry::Backoff {
            base_ms: backoff_base_ms,
            cap_ms: backoff_cap_ms,
        };
        let config = core::DeliveryConfig {
            timeout_ms,
            retry_window_ms,
            backoff,
            jitter_seed: seed,
        };
        let inner = core::Delivery::new(&webhooks.inner, &to_call(call)?, now_ms(py, now)?, config)
            .map_err(err)?;
        Ok(Self { inner })
    }

    /// The next request to send at `now_ms`, or None.
    fn poll_request(
        &mut self,
        py: Python<'_>,
        now_ms: i64,
        webhooks: &Webhooks,
    ) -> PyResult<Option<Attempt>> {
        let Some(a) = self.inner.poll_request(now_ms, &webhooks.inner) else {
            return Ok(None);
        };
        Ok(Some(Attempt {
            endpoint: a.endpoint,
            attempt: a.attempt,
            request: Py::new(py, Request { inner: a.request })?,
            deadline_ms: a.deadline,
        }))
    }

    /// Reports the in-flight attempt's outcome: a `status` (with the raw
    /// `retry_after` header), or `error` = 'timeout' | 'connection' | 'tls'.
    #[pyo3(signature = (now_ms, status=None, retry_after=None, error=None, message=""))]
    fn handle_response(
        &mut self,
        now_ms: i64,
        status: Option<u16>,
        retry_after: Option<String>,
        error: Option<&str>,
        message: &str,
    ) -> PyResult<()> {
        self.inner
            .handle_response(now_ms, outcome_of(status, retry_after, error, message)?);
        Ok(())
    }

    fn handle_timeout(&mut self, now_ms: i64) {
        self.inner.handle_timeout(now_ms);
    }

    fn poll_timeout(&self) -> Option<i64> {
        self.inner.poll_timeout()
    }

    /// The final outcome as a dict, once.
    fn poll_outcome<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .poll_outcome()
            .map(|o| from_core_json(py, &o.to_json()))
            .transpose()
    }

    #[getter]
    fn outcome<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .outcome()
            .map(|o| from_core_json(py, &o.to_json()))
            .transpose()
    }

    #[getter]
    fn log<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_core_json(py, &self.inner.log_json())
    }

    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.body())
    }

    #[getter]
    fn done(&self) -> bool {
        self.inner.is_done()
    }

    /// The whole state as JSON, to store and resume with `from_json`.
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        let inner = core::Delivery::from_json(text).map_err(err)?;
        Ok(Self { inner })
    }
}

/// A batch upload to perform.
#[pyclass(frozen, module = "callpost._callpost")]
struct BatchRequest {
    #[pyo3(get)]
    batch_id: u64,
    #[pyo3(get)]
    attempt: u32,
    #[pyo3(get)]
    message_count: usize,
    #[pyo3(get)]
    request: Py<Request>,
    #[pyo3(get)]
    deadline_ms: i64,
}

/// The batching client's state machine, sans I/O (see the core's `Batcher`).
///
/// Safe to share between threads: each method holds `state`'s lock for its
/// core call only. So the client's `track()` needs no Python lock around
/// it, which was a quarter of its glue (`with lock` alone about 2,000
/// instructions of 23,000, callgrind). A Python object given to `track()`
/// is walked before the lock is taken, since walking can run Python code.
#[pyclass(frozen, module = "callpost._callpost")]
struct Batcher {
    state: Mutex<BatcherState>,
    /// Called, without the lock, after an input moved `poll_timeout()`
    /// earlier: the I/O loop sleeping until the old time must look again.
    on_wake: Option<Py<PyAny>>,
}

struct BatcherState {
    inner: core::Batcher,
    entropy: Entropy,
}

impl Batcher {
    /// The state, locked. Uncontended (the common case) it is one atomic
    /// operation. Contended, the GIL is let go while waiting: the holder may
    /// need it to finish, and waiting with it held would deadlock.
    fn state(&self, py: Python<'_>) -> MutexGuard<'_, BatcherState> {
        loop {
            match self.state.try_lock() {
                Ok(guard) => return guard,
                // A panic inside the core is already a Python exception;
                // the state it left is what the next call sees, as with
                // pyo3's own borrow checking.
                Err(TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(TryLockError::WouldBlock) => py.detach(|| drop(self.state.lock())),
            }
        }
    }

    /// Queues `call` and calls `on_wake` when that moved the wake-up time
    /// earlier (the first queued message starts the flush timer, and
    /// `flush_at` messages make a batch due now). Deciding under the same
    /// lock as the enqueue is what keeps a wake-up from being lost between
    /// two threads' calls.
    fn enqueue(
        &self,
        py: Python<'_>,
        now: i64,
        call: core::Call,
        random: Option<[u8; 16]>,
    ) -> PyResult<String> {
        let (id, woke) = {
            let mut s = self.state(py);
            let random = match random {
                Some(r) => r,
                None => s.entropy.take16()?,
            };
            let before = s.inner.poll_timeout();
            let id = s.inner.handle_call(now, call, random).map_err(err)?;
            let after = s.inner.poll_timeout();
            (id, after.is_some_and(|a| before.is_none_or(|b| a < b)))
        };
        if let (true, Some(wake)) = (woke, &self.on_wake) {
            wake.call0(py)?;
        }
        Ok(id)
    }
}

/// OS randomness for message ids, read 4 KB at a time: one `getrandom`
/// system call per id was a tenth of `track()`'s CPU. The bytes are the
/// same CSPRNG output `os.urandom` returns, handed out once each (Node's
/// `crypto.randomUUID` buffers the same way).
struct Entropy {
    buf: Box<[u8; 4096]>,
    pos: usize,
    /// [`FORKS`] when `buf` was filled. A forked child must not reuse its
    /// parent's bytes: the same message ids from two processes would be
    /// de-duplicated downstream, silently dropping messages.
    forks: u64,
}

/// Forks into this process, counted in the child by an `os.register_at_fork`
/// hook (registered when the module loads). CPython runs those hooks in
/// every child it goes on running in: C code that forks must call
/// `PyOS_AfterFork_Child` for Python to keep working, and that runs them.
/// It replaced a `getpid` per message id (a system call, and no longer
/// cached by glibc): 5% of `track()`, 10% where a system call costs 0.3 µs.
static FORKS: AtomicU64 = AtomicU64::new(0);

#[pyfunction]
fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

impl Entropy {
    fn new() -> Self {
        Self {
            buf: Box::new([0; 4096]),
            pos: 4096,
            forks: 0,
        }
    }

    fn take16(&mut self) -> PyResult<[u8; 16]> {
        let forks = FORKS.load(Ordering::Relaxed);
        if self.pos + 16 > self.buf.len() || forks != self.forks {
            getrandom::fill(&mut self.buf[..])
                .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
            self.pos = 0;
            self.forks = forks;
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&self.buf[self.pos..self.pos + 16]);
        // Used bytes are wiped so they exist only in the id they became.
        self.buf[self.pos..self.pos + 16].fill(0);
        self.pos += 16;
        Ok(out)
    }
}

#[pymethods]
impl Batcher {
    #[new]
    #[pyo3(signature = (write_key, *, endpoint=None, flush_at=20, flush_after_ms=5000, max_queue=10_000,
                        max_attempts=10, max_retry_ms=600_000, request_timeout_ms=15_000, max_in_flight=1,
                        backoff_base_ms=1000, backoff_cap_ms=60_000,
                        library_name=None, library_version=None, seed=0, now=None, on_wake=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        write_key: String,
        endpoint: Option<String>,
        flush_at: usize,
        flush_after_ms: u64,
        max_queue: usize,
        max_attempts: u32,
        max_retry_ms: u64,
        request_timeout_ms: u64,
        max_in_flight: usize,
        backoff_base_ms: u64,
        backoff_cap_ms: u64,
        library_name: Option<String>,
        library_version: Option<String>,
        seed: u64,
        now: Option<&Bound<'_, PyAny>>,
        on_wake: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let d = core::BatcherConfig::new(write_key);
        let config = core::BatcherConfig {
            endpoint: endpoint.unwrap_or(d.endpoint.clone()),
            flush_at,
            flush_after_ms,
            max_queue,
            max_attempts,
            max_retry_ms,
            request_timeout_ms,
            max_in_flight,
            backoff: core::retry::Backoff {
                base_ms: backoff_base_ms,
                cap_ms: backoff_cap_ms,
            },
            library_name: library_name.unwrap_or(d.library_name.clone()),
            library_version: library_version.unwrap_or(d.library_version.clone()),
            jitter_seed: seed,
            ..d
        };
        let inner = core::Batcher::new(config, now_ms(py, now)?).map_err(err)?;
        Ok(Self {
            state: Mutex::new(BatcherState {
                inner,
                entropy: Entropy::new(),
            }),
            on_wake: on_wake.filter(|w| !w.is_none(py)),
        })
    }

    /// Queues a call (a dict with Segment's keys); `random` is 16 bytes for
    /// its messageId. Returns the messageId.
    ///
    /// `now_ms=None` reads the host clock and `random=None` reads the OS's
    /// entropy (what `os.urandom` reads), here rather than in Python because
    /// this is the per-call hot path.
    #[pyo3(signature = (now_ms, call, random=None))]
    fn handle_call(
        &self,
        py: Python<'_>,
        now_ms: Option<i64>,
        call: &Bound<'_, PyAny>,
        random: Option<&[u8]>,
    ) -> PyResult<String> {
        let random: Option<[u8; 16]> = random
            .map(|r| {
                r.try_into()
                    .map_err(|_| PyValueError::new_err("random must be exactly 16 bytes"))
            })
            .transpose()?;
        let call = to_call(call)?;
        let now = match now_ms {
            Some(ms) => ms,
            None => now_ms_of(py, None)?,
        };
        self.enqueue(py, now, call, random)
    }

    /// `handle_call` for a call given as its kind and fields (in the order
    /// of `convert::CALL_FIELDS`), which the clients' `track()` and friends
    /// pass as they got them: building a dict only to walk it again was a
    /// tenth of `track()`. The clock and the messageId's randomness are the
    /// host's, as for `handle_call(None, ..., None)`.
    ///
    /// Named parameters rather than `*fields`: pyo3 reads them from the
    /// call's argument array, while `*fields` builds a tuple to walk, which
    /// cost about 3% of `track()` (alternating runs, in both orders).
    #[pyo3(signature = (kind, user_id, anonymous_id, event, name, category, group_id, previous_id,
                        properties, traits, context, integrations, timestamp, message_id))]
    #[allow(clippy::too_many_arguments)]
    fn handle_fields(
        &self,
        py: Python<'_>,
        kind: &str,
        user_id: Option<&Bound<'_, PyAny>>,
        anonymous_id: Option<&Bound<'_, PyAny>>,
        event: Option<&Bound<'_, PyAny>>,
        name: Option<&Bound<'_, PyAny>>,
        category: Option<&Bound<'_, PyAny>>,
        group_id: Option<&Bound<'_, PyAny>>,
        previous_id: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyAny>>,
        traits: Option<&Bound<'_, PyAny>>,
        context: Option<&Bound<'_, PyAny>>,
        integrations: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
        message_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let call = convert::call_from_fields(
            kind,
            [
                user_id,
                anonymous_id,
                event,
                name,
                category,
                group_id,
                previous_id,
                properties,
                traits,
                context,
                integrations,
                timestamp,
                message_id,
            ],
        )?;
        let now = now_ms_of(py, None)?;
        self.enqueue(py, now, call, None)
    }

    fn flush(&self, py: Python<'_>, now_ms: i64) {
        self.state(py).inner.flush(now_ms);
    }

    fn shutdown(&self, py: Python<'_>) {
        self.state(py).inner.shutdown();
    }

    fn poll_request(&self, py: Python<'_>, now_ms: i64) -> PyResult<Option<BatchRequest>> {
        let Some(b) = self.state(py).inner.poll_request(now_ms) else {
            return Ok(None);
        };
        Ok(Some(BatchRequest {
            batch_id: b.batch_id,
            attempt: b.attempt,
            message_count: b.message_count,
            request: Py::new(py, Request { inner: b.request })?,
            deadline_ms: b.deadline,
        }))
    }

    #[pyo3(signature = (now_ms, batch_id, status=None, retry_after=None, error=None, message=""))]
    #[allow(clippy::too_many_arguments)] // the Python signature, plus the GIL token
    fn handle_response(
        &self,
        py: Python<'_>,
        now_ms: i64,
        batch_id: u64,
        status: Option<u16>,
        retry_after: Option<String>,
        error: Option<&str>,
        message: &str,
    ) -> PyResult<()> {
        let outcome = outcome_of(status, retry_after, error, message)?;
        self.state(py)
            .inner
            .handle_response(now_ms, batch_id, outcome);
        Ok(())
    }

    fn handle_timeout(&self, py: Python<'_>, now_ms: i64) {
        self.state(py).inner.handle_timeout(now_ms);
    }

    fn poll_timeout(&self, py: Python<'_>) -> Option<i64> {
        self.state(py).inner.poll_timeout()
    }

    /// The next event as a dict: {"kind": "delivered" | "retrying" | "failed", ...}.
    fn poll_event<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // The lock is let go before the dict is built.
        let Some(ev) = self.state(py).inner.poll_event() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        match ev {
            core::BatcherEvent::Delivered {
                batch_id,
                message_ids,
            } => {
                d.set_item("kind", "delivered")?;
                d.set_item("batch_id", batch_id)?;
                d.set_item("message_ids", message_ids)?;
            }
            core::BatcherEvent::Retrying {
                batch_id,
                attempt,
                retry_at,
                outcome,
            } => {
                d.set_item("kind", "retrying")?;
                d.set_item("batch_id", batch_id)?;
                d.set_item("attempt", attempt)?;
                d.set_item("retry_at_ms", retry_at)?;
                d.set_item("reason", outcome.to_string())?;
            }
            core::BatcherEvent::Failed {
                batch_id,
                messages,
                reason,
            } => {
                d.set_item("kind", "failed")?;
                d.set_item("batch_id", batch_id)?;
                d.set_item("code", reason.code())?;
                d.set_item("reason", reason.to_string())?;
                let list = PyList::empty(py);
                for m in messages {
                    list.append((m.message_id(), m.json()))?;
                }
                d.set_item("messages", list)?;
            }
            _ => d.set_item("kind", "unknown")?,
        }
        Ok(Some(d))
    }

    #[getter]
    fn queued(&self, py: Python<'_>) -> usize {
        self.state(py).inner.queued()
    }
    #[getter]
    fn in_batches(&self, py: Python<'_>) -> usize {
        self.state(py).inner.in_batches()
    }
    #[getter]
    fn idle(&self, py: Python<'_>) -> bool {
        self.state(py).inner.is_idle()
    }
}

#[pymodule]
fn _callpost(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Windows has no fork, and no `register_at_fork`.
    let os = m.py().import("os")?;
    if os.hasattr("register_at_fork")? {
        let hook = PyDict::new(m.py());
        hook.set_item("after_in_child", wrap_pyfunction!(after_fork_in_child, m)?)?;
        os.call_method("register_at_fork", (), Some(&hook))?;
    }
    m.add_function(wrap_pyfunction!(stringify, m)?)?;
    m.add_function(wrap_pyfunction!(sign, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(verify_parsed, m)?)?;
    m.add_function(wrap_pyfunction!(trait_name, m)?)?;
    m.add_function(wrap_pyfunction!(parse_timestamp, m)?)?;
    m.add_class::<Request>()?;
    m.add_class::<Webhooks>()?;
    m.add_class::<Attempt>()?;
    m.add_class::<Delivery>()?;
    m.add_class::<BatchRequest>()?;
    m.add_class::<Batcher>()?;
    m.add("USER_AGENT", core::webhooks::USER_AGENT)?;
    m.add("MAX_MESSAGE_BYTES", core::batcher::MAX_MESSAGE_BYTES)?;
    m.add("MAX_BATCH_BYTES", core::batcher::MAX_BATCH_BYTES)?;
    Ok(())
}
