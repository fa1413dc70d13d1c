//! The batching client's state machine, sans I/O (the core's `Batcher`),
//! shared safely between threads.

use crate::call::{call_from_fields, to_call_with};
use crate::delivery::{from_core_json, os_seed, outcome_of};
use crate::error::err;
use crate::timestamp::{clock, millis, now_of};
use crate::webhooks::Request;
use callpost_core as core;
use callpost_core::ApiMisuse;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// Replaces a core default with the caller's value, when one was given.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// A batch upload to perform.
#[pyclass(frozen, module = "callpost._callpost")]
pub(crate) struct BatchRequest {
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
pub struct Batcher {
    state: Mutex<BatcherState>,
    /// Called, without the lock, after an input moved `poll_timeout()`
    /// earlier: the I/O loop sleeping until the old time must look again.
    on_wake: Option<Py<PyAny>>,
    /// `default=`: converts call values that have no JSON form.
    default: Option<Py<PyAny>>,
}

/// A message made by [`Batcher::prepare_fields`], not queued yet: its
/// `messageId` and its JSON text, as the batcher would send it.
#[pyclass(frozen, module = "callpost._callpost")]
pub(crate) struct Message {
    inner: core::Message,
}

#[pymethods]
impl Message {
    #[getter]
    fn message_id(&self) -> &str {
        self.inner.message_id()
    }
    #[getter]
    fn json(&self) -> &str {
        self.inner.json()
    }
    fn __repr__(&self) -> String {
        format!("Message(message_id={:?})", self.inner.message_id())
    }
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

    /// Queues `call` (see [`Self::queue`]).
    fn enqueue(
        &self,
        py: Python<'_>,
        now: core::Timestamp,
        call: core::Call,
        random: Option<[u8; 16]>,
    ) -> PyResult<String> {
        self.queue(py, |s| {
            let random = match random {
                Some(r) => r,
                None => s.entropy.take16()?,
            };
            s.inner.handle_call(now, call, random).map_err(err)
        })
    }

    /// Runs `enqueue` on the state and calls `on_wake` when the core says
    /// the sender must wake (`poll_wake`). Reading it under the same lock as
    /// the enqueue is what keeps a wake-up from being lost between two
    /// threads' calls.
    fn queue<T>(
        &self,
        py: Python<'_>,
        enqueue: impl FnOnce(&mut BatcherState) -> PyResult<T>,
    ) -> PyResult<T> {
        let (out, wake) = {
            let mut s = self.state(py);
            let out = enqueue(&mut s)?;
            (out, s.inner.poll_wake())
        };
        if let (true, Some(on_wake)) = (wake, &self.on_wake) {
            on_wake.call0(py)?;
        }
        Ok(out)
    }

    fn default_hook<'py>(&self, py: Python<'py>) -> Option<&Bound<'py, PyAny>> {
        self.default.as_ref().map(|d| d.bind(py))
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
pub(crate) fn after_fork_in_child() {
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
    #[pyo3(signature = (write_key, *, endpoint=None, flush_at=None, flush_after_ms=None, max_queue=None,
                        max_attempts=None, max_retry_ms=None, request_timeout_ms=None, max_in_flight=None,
                        backoff_base_ms=None, backoff_cap_ms=None, library_name=None, library_version=None,
                        seed=None, now=None, on_wake=None, default=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn new(
        py: Python<'_>,
        write_key: String,
        endpoint: Option<String>,
        flush_at: Option<usize>,
        flush_after_ms: Option<u64>,
        max_queue: Option<usize>,
        max_attempts: Option<u32>,
        max_retry_ms: Option<u64>,
        request_timeout_ms: Option<u64>,
        max_in_flight: Option<usize>,
        backoff_base_ms: Option<u64>,
        backoff_cap_ms: Option<u64>,
        library_name: Option<String>,
        library_version: Option<String>,
        seed: Option<u64>,
        now: Option<&Bound<'_, PyAny>>,
        on_wake: Option<Py<PyAny>>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        // Only what the caller gave replaces the core's defaults.
        let mut c = core::BatcherConfig::new(write_key);
        c.jitter_seed = match seed {
            Some(s) => s,
            None => os_seed()?,
        };
        set(&mut c.endpoint, endpoint);
        set(&mut c.flush_at, flush_at);
        set(&mut c.flush_after_ms, flush_after_ms);
        set(&mut c.max_queue, max_queue);
        set(&mut c.max_attempts, max_attempts);
        set(&mut c.max_retry_ms, max_retry_ms);
        set(&mut c.request_timeout_ms, request_timeout_ms);
        set(&mut c.max_in_flight, max_in_flight);
        set(&mut c.backoff.base_ms, backoff_base_ms);
        set(&mut c.backoff.cap_ms, backoff_cap_ms);
        set(&mut c.library_name, library_name);
        set(&mut c.library_version, library_version);
        let inner = core::Batcher::new(c, now_of(now)?).map_err(err)?;
        Ok(Self {
            state: Mutex::new(BatcherState {
                inner,
                entropy: Entropy::new(),
            }),
            on_wake: on_wake.filter(|w| !w.is_none(py)),
            default: default.filter(|d| !d.is_none(py)),
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
            .map(|r| r.try_into().map_err(|_| err(ApiMisuse::RandomLength(16))))
            .transpose()?;
        let call = to_call_with(call, self.default_hook(py))?;
        let now = match now_ms {
            Some(ms) => millis(ms)?,
            None => clock()?,
        };
        self.enqueue(py, now, call, random)
    }

    /// `handle_call` for a call given as its kind and fields (in the order
    /// of the core's `CALL_FIELDS`), which the clients' `track()` and friends
    /// pass as they got them: building a dict only to walk it again was a
    /// tenth of `track()`. The clock and the messageId's randomness are the
    /// host's, as for `handle_call(None, ..., None)`.
    ///
    /// Named parameters rather than `*fields`: pyo3 reads them from the
    /// call's argument array, while `*fields` builds a tuple to walk, which
    /// cost about 3% of `track()` (alternating runs, in both orders).
    #[pyo3(signature = (kind, user_id, anonymous_id, event, name, category, properties, traits,
                        context, integrations, group_id, previous_id, timestamp, message_id))]
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
        properties: Option<&Bound<'_, PyAny>>,
        traits: Option<&Bound<'_, PyAny>>,
        context: Option<&Bound<'_, PyAny>>,
        integrations: Option<&Bound<'_, PyAny>>,
        group_id: Option<&Bound<'_, PyAny>>,
        previous_id: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
        message_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        // In the order of the core's CALL_FIELDS (a Python test holds the
        // parameter names to it).
        let call = call_from_fields(
            kind,
            [
                user_id,
                anonymous_id,
                event,
                name,
                category,
                properties,
                traits,
                context,
                integrations,
                group_id,
                previous_id,
                timestamp,
                message_id,
            ],
            self.default_hook(py),
        )?;
        self.enqueue(py, clock()?, call, None)
    }

    /// The message `handle_fields` would queue, not queued: for hosts that
    /// return it to their caller first (Segment's SDKs do) and queue it
    /// with [`Self::handle_message`]. Checks the call and its size, not the
    /// queue's room.
    #[pyo3(signature = (kind, user_id, anonymous_id, event, name, category, properties, traits,
                        context, integrations, group_id, previous_id, timestamp, message_id))]
    #[allow(clippy::too_many_arguments)]
    fn prepare_fields(
        &self,
        py: Python<'_>,
        kind: &str,
        user_id: Option<&Bound<'_, PyAny>>,
        anonymous_id: Option<&Bound<'_, PyAny>>,
        event: Option<&Bound<'_, PyAny>>,
        name: Option<&Bound<'_, PyAny>>,
        category: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyAny>>,
        traits: Option<&Bound<'_, PyAny>>,
        context: Option<&Bound<'_, PyAny>>,
        integrations: Option<&Bound<'_, PyAny>>,
        group_id: Option<&Bound<'_, PyAny>>,
        previous_id: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
        message_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Message> {
        let call = call_from_fields(
            kind,
            [
                user_id,
                anonymous_id,
                event,
                name,
                category,
                properties,
                traits,
                context,
                integrations,
                group_id,
                previous_id,
                timestamp,
                message_id,
            ],
            self.default_hook(py),
        )?;
        let now = clock()?;
        let mut s = self.state(py);
        let random = s.entropy.take16()?;
        let inner = s.inner.prepare(now, call, random).map_err(err)?;
        Ok(Message { inner })
    }

    /// Queues a message from [`Self::prepare_fields`] of this batcher.
    fn handle_message(&self, py: Python<'_>, message: &Message) -> PyResult<()> {
        let message = message.inner.clone();
        self.queue(py, |s| s.inner.handle_message(message).map_err(err))
    }

    fn flush(&self, py: Python<'_>, now_ms: i64) -> PyResult<()> {
        let now = millis(now_ms)?;
        self.queue(py, |s| {
            s.inner.flush(now);
            Ok(())
        })
    }

    fn shutdown(&self, py: Python<'_>) {
        self.state(py).inner.shutdown();
    }

    fn poll_request(&self, py: Python<'_>, now_ms: i64) -> PyResult<Option<BatchRequest>> {
        let now = millis(now_ms)?;
        let Some(b) = self.state(py).inner.poll_request(now) else {
            return Ok(None);
        };
        Ok(Some(BatchRequest {
            batch_id: b.batch_id,
            attempt: b.attempt,
            message_count: b.message_count,
            request: Py::new(py, Request { inner: b.request })?,
            deadline_ms: b.deadline.as_millis(),
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
        let now = millis(now_ms)?;
        self.state(py).inner.handle_response(now, batch_id, outcome);
        Ok(())
    }

    fn handle_timeout(&self, py: Python<'_>, now_ms: i64) -> PyResult<()> {
        let now = millis(now_ms)?;
        self.state(py).inner.handle_timeout(now);
        Ok(())
    }

    fn poll_timeout(&self, py: Python<'_>) -> Option<i64> {
        self.state(py)
            .inner
            .poll_timeout()
            .map(core::Timestamp::as_millis)
    }

    /// The next event as a dict: {"kind": "delivered" | "retrying" | "failed", ...},
    /// in the core's shape (`BatcherEvent::to_json`).
    fn poll_event<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        // The lock is let go before the dict is built.
        let Some(ev) = self.state(py).inner.poll_event() else {
            return Ok(None);
        };
        from_core_json(py, &ev.to_json(core::KeyCase::Snake)).map(Some)
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
