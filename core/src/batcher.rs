//! The client side of client-library.md: queue calls, flush them in batches,
//! retry uploads, and account for every message.

use crate::call::{Call, CallError, Object};
use crate::code::Code;
use crate::json::{KeyCase, Map, Value};
use crate::retry::{parse_retry_after, Backoff, Jitter, Outcome, Verdict};
use crate::timestamp::Timestamp;
use crate::webhooks::Request;
use base64::Engine as _;
use std::collections::VecDeque;
use std::fmt;

/// Largest serialized message. The spec says "32 KB"; we read KB as 1000
/// bytes, the smaller reading, as analytics-go (the spec's library) does in
/// `maxMessageBytes`, so a message we accept is within either reading.
pub const MAX_MESSAGE_BYTES: usize = 32_000;

/// Largest batch request body, envelope included. The spec's "500 KB",
/// read as 500,000 bytes for the same reason (analytics-go `maxBatchBytes`).
pub const MAX_BATCH_BYTES: usize = 500_000;

/// Default `flush_at` (spec: "Default flush count 20 messages").
pub const DEFAULT_FLUSH_AT: usize = 20;

/// Default `flush_after` (spec: "Default flush interval 5 seconds").
pub const DEFAULT_FLUSH_AFTER_MS: u64 = 5_000;

/// Default queue bound. analytics-python and analytics-node both cap their
/// queues at 10,000 messages.
pub const DEFAULT_MAX_QUEUE: usize = 10_000;

/// Segment's tracking API host; RudderStack and self-hosted ingest servers
/// speak the same `/v1/batch` API at their own base URL.
pub const DEFAULT_ENDPOINT: &str = "https://api.segment.io";

/// Path of the batch upload under the endpoint: the tracking API's
/// `POST /v1/batch` (Segment's HTTP API docs). analytics-node lets it be
/// set (its `path` option), for proxies that serve it elsewhere.
pub const DEFAULT_BATCH_PATH: &str = "/v1/batch";

/// Attempts per batch before it is reported failed: analytics-python retries
/// 10 times.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;

/// Total time a batch may spend retrying, from its first attempt: 10 minutes.
/// A client library holds data in memory, so it must give up much sooner than
/// a server-side destination (4 hours), and report the batch to the host.
pub const DEFAULT_MAX_RETRY_MS: u64 = 600_000;

/// Default backoff for batch retries: 1 s doubling to 60 s, full jitter
/// (analytics-python uses `backoff.expo` from 1 s with full jitter).
pub const DEFAULT_BATCH_BACKOFF: Backoff = Backoff {
    base_ms: 1_000,
    cap_ms: 60_000,
};

/// Default per-request timeout the host should apply: analytics-python's 15 s.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 15_000;

/// Default batches uploading or waiting to retry at once: one keeps batches
/// in order and backs pressure onto the queue when the server is slow, as
/// analytics-python's single consumer thread does.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1;

/// How long a host's `close()` waits for queued messages to be delivered
/// before it reports the rest as failed: analytics-node's `closeAndFlush`
/// waits 10 s by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 10_000;

/// `context.library.name` of the messages the batcher sends.
pub const DEFAULT_LIBRARY_NAME: &str = "callpost";

const ENVELOPE_HEAD: &[u8] = b"{\"batch\":[";
const ENVELOPE_MID: &[u8] = b"],\"sentAt\":\"";
const ENVELOPE_TAIL: &[u8] = b"\"}";
/// Bytes of the envelope around the messages: head, mid, 24-byte timestamp, tail.
const ENVELOPE_BYTES: usize = ENVELOPE_HEAD.len() + ENVELOPE_MID.len() + 24 + ENVELOPE_TAIL.len();

/// The batching client's settings.
#[derive(Clone)]
pub struct BatcherConfig {
    /// The source's write key, sent as the Basic auth user.
    pub write_key: String,
    /// Base URL; batches go to `{endpoint}{batch_path}`.
    pub endpoint: String,
    /// Path of the batch upload under `endpoint`: empty, or starting with
    /// `/`, with no query or fragment.
    pub batch_path: String,
    /// Messages queued before a flush; 1 sends every message at once.
    pub flush_at: usize,
    /// Milliseconds since the last flush after which a flush happens.
    pub flush_after_ms: u64,
    /// Messages held before [`EnqueueError::QueueFull`].
    pub max_queue: usize,
    /// Attempts per batch before it fails.
    pub max_attempts: u32,
    /// Milliseconds a batch may spend retrying, from its first attempt.
    pub max_retry_ms: u64,
    /// Retry backoff (full jitter).
    pub backoff: Backoff,
    /// Batches uploading or waiting to retry at once. 1 keeps order and
    /// backs pressure onto the queue when the server is slow.
    pub max_in_flight: usize,
    /// How long a request may go unanswered before it counts as a timeout.
    pub request_timeout_ms: u64,
    /// `context.library.name`.
    pub library_name: String,
    /// `context.library.version`.
    pub library_version: String,
    /// Seed for backoff jitter. The core has no entropy: hosts pass OS
    /// randomness, so clients that fail together do not all retry at the
    /// same instants; tests pass a constant. [`BatcherConfig::new`] sets 0.
    pub jitter_seed: u64,
}

/// The write key is a credential: `Debug` leaves it out.
impl fmt::Debug for BatcherConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatcherConfig")
            .field("write_key", &"<redacted>")
            .field("endpoint", &crate::weburl::redact_userinfo(&self.endpoint))
            .field("flush_at", &self.flush_at)
            .field("flush_after_ms", &self.flush_after_ms)
            .field("max_queue", &self.max_queue)
            .field("max_attempts", &self.max_attempts)
            .field("max_retry_ms", &self.max_retry_ms)
            .field("max_in_flight", &self.max_in_flight)
            .finish_non_exhaustive()
    }
}

impl BatcherConfig {
    /// The defaults, with `write_key`.
    pub fn new(write_key: impl Into<String>) -> Self {
        Self {
            write_key: write_key.into(),
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            batch_path: DEFAULT_BATCH_PATH.to_owned(),
            flush_at: DEFAULT_FLUSH_AT,
            flush_after_ms: DEFAULT_FLUSH_AFTER_MS,
            max_queue: DEFAULT_MAX_QUEUE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_retry_ms: DEFAULT_MAX_RETRY_MS,
            backoff: DEFAULT_BATCH_BACKOFF,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            library_name: DEFAULT_LIBRARY_NAME.to_owned(),
            library_version: crate::VERSION.to_owned(),
            jitter_seed: 0,
        }
    }
}

/// Bad batching-client settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The write key is empty. Pass the source's write key.
    #[error("write key is empty")]
    EmptyWriteKey,
    /// The endpoint is not an absolute http(s) URL without credentials,
    /// query or fragment.
    #[error("endpoint must be an absolute http or https url without credentials, query or fragment: {0}")]
    InvalidEndpoint(String),
    /// The batch path is neither empty nor a path starting with `/`, or it
    /// has a query or fragment.
    #[error("batch path must be empty or start with '/', without query or fragment: {0:?}")]
    InvalidBatchPath(String),
    /// A numeric setting is out of range; the message names it.
    #[error("{0} must be at least 1")]
    OutOfRange(&'static str),
}

impl ConfigError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::EmptyWriteKey => Code::EmptyWriteKey,
            Self::InvalidEndpoint(_) | Self::InvalidBatchPath(_) => Code::InvalidEndpoint,
            Self::OutOfRange(_) => Code::InvalidConfig,
        }
    }
}

/// Why a call was not queued. Nothing was queued and nothing else changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnqueueError {
    /// The call breaks the spec's rules or holds a value JSON cannot carry.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The serialized message is over [`MAX_MESSAGE_BYTES`]. Send less data
    /// in properties, traits or context.
    #[error("message is {0} bytes; the limit is {MAX_MESSAGE_BYTES}")]
    MessageTooLarge(usize),
    /// The queue holds `max_queue` messages. The server is slow or down;
    /// retry later, or raise `max_queue`.
    #[error("queue is full ({0} messages)")]
    QueueFull(usize),
    /// The batcher was shut down. Create a new one.
    #[error("batcher is shut down")]
    Closed,
}

impl EnqueueError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::Call(e) => e.code(),
            Self::MessageTooLarge(_) => Code::MessageTooLarge,
            Self::QueueFull(_) => Code::QueueFull,
            Self::Closed => Code::Closed,
        }
    }
}

/// The `Authorization` header holds the write key, and queued messages hold
/// customer data: `Debug` shows neither (the config shows its own redacted
/// form).
impl fmt::Debug for Batcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batcher")
            .field("config", &self.config)
            .field("queued", &self.queue.len())
            .field("batches", &self.batches.len())
            .field("next_batch_id", &self.next_batch_id)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

/// A queued message: its id and its serialized JSON.
///
/// Both live in one exactly sized allocation (the id, then the JSON): a
/// client that cannot flush holds every message it accepted, and the pages
/// it touches for them (zeroed by the kernel on first touch) were a quarter
/// of `handle_call`'s CPU with a growing queue (perf). Two `String`s and
/// the spare capacity of the writer's buffer took 725 bytes of resident
/// memory per 423 B track call (200,000 calls from Python); this takes 606.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    text: Box<str>,
    id_len: usize,
}

impl Message {
    /// `messageId`.
    pub fn message_id(&self) -> &str {
        self.text.get(..self.id_len).unwrap_or_default()
    }

    /// The message object, in `JSON.stringify` form.
    pub fn json(&self) -> &str {
        self.text.get(self.id_len..).unwrap_or_default()
    }
}

/// Why a batch's messages are reported failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailReason {
    /// The server refused the batch (3xx, 4xx other than 408/429, or a TLS
    /// failure); sending it again cannot succeed.
    Rejected(Outcome),
    /// Retries ran out (attempts or time); the last outcome is given.
    RetriesExhausted(Outcome),
    /// [`Batcher::shutdown`] was called before the messages were delivered.
    Shutdown,
}

impl FailReason {
    /// Stable snake_case code.
    pub fn code(&self) -> Code {
        match self {
            Self::Rejected(_) => Code::Rejected,
            Self::RetriesExhausted(_) => Code::RetriesExhausted,
            Self::Shutdown => Code::Shutdown,
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rejected(o) => write!(f, "rejected: {o}"),
            Self::RetriesExhausted(o) => write!(f, "retries exhausted, last: {o}"),
            Self::Shutdown => f.write_str("shut down before delivery"),
        }
    }
}

/// Something the host should know about; drain with [`Batcher::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatcherEvent {
    /// The batch was accepted (2xx).
    Delivered {
        /// The batch.
        batch_id: u64,
        /// Its messages' ids.
        message_ids: Vec<String>,
    },
    /// An attempt failed and the batch will be retried at `retry_at`.
    Retrying {
        /// The batch.
        batch_id: u64,
        /// The attempt that failed (1-based).
        attempt: u32,
        /// When the next attempt is due.
        retry_at: Timestamp,
        /// What went wrong.
        outcome: Outcome,
    },
    /// These messages will not be delivered. Hand them to the user's
    /// `on_error`.
    Failed {
        /// The batch, or `None` for messages still queued at shutdown.
        batch_id: Option<u64>,
        /// The messages, with their JSON for re-sending or logging.
        messages: Vec<Message>,
        /// Why.
        reason: FailReason,
    },
}

impl BatcherEvent {
    /// The event as a JSON object with keys in `case`: the one shape every
    /// binding hands its host, so none maps the variants itself.
    ///
    /// * `{"kind": "delivered", "batch_id", "message_ids": [id, …]}`
    /// * `{"kind": "retrying", "batch_id", "attempt", "retry_at_ms", "reason"}`
    /// * `{"kind": "failed", "batch_id" (null for messages never batched),
    ///   "code", "reason", "messages": [{"message_id", "json"}, …]}`, each
    ///   message's `json` its JSON text, to re-send or log as it was queued.
    pub fn to_json(&self, case: KeyCase) -> String {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_owned(), v);
        };
        // Batch ids and millisecond times stay far below 2^53: exact as
        // JSON numbers in every language.
        let number = |n: u64| Value::Number(n as f64);
        match self {
            Self::Delivered {
                batch_id,
                message_ids,
            } => {
                put("kind", "delivered".into());
                put("batch_id", number(*batch_id));
                put(
                    "message_ids",
                    Value::Array(message_ids.iter().map(|id| id.as_str().into()).collect()),
                );
            }
            Self::Retrying {
                batch_id,
                attempt,
                retry_at,
                outcome,
            } => {
                put("kind", "retrying".into());
                put("batch_id", number(*batch_id));
                put("attempt", number(u64::from(*attempt)));
                put(
                    "retry_at_ms",
                    number(u64::try_from(retry_at.as_millis()).unwrap_or(0)),
                );
                put("reason", outcome.to_string().into());
            }
            Self::Failed {
                batch_id,
                messages,
                reason,
            } => {
                put("kind", "failed".into());
                put("batch_id", batch_id.map_or(Value::Null, number));
                put("code", reason.code().as_str().into());
                put("reason", reason.to_string().into());
                let list = messages.iter().map(|msg| {
                    let mut o = Map::new();
                    o.insert("message_id".into(), msg.message_id().into());
                    o.insert("json".into(), msg.json().into());
                    Value::Object(o)
                });
                put("messages", Value::Array(list.collect()));
            }
        }
        // Strings, small numbers and shallow arrays: writing cannot fail.
        case.apply(Value::Object(m))
            .to_json_string()
            .unwrap_or_default()
    }
}

/// A batch upload to perform.
#[derive(Debug, Clone)]
pub struct BatchRequest {
    /// Pass back to [`Batcher::handle_response`].
    pub batch_id: u64,
    /// Attempt number, 1-based.
    pub attempt: u32,
    /// Messages in the batch.
    pub message_count: usize,
    /// The HTTP request.
    pub request: Request,
    /// When the host should give up waiting and report a timeout.
    pub deadline: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchState {
    Ready { at: Timestamp },
    InFlight { since: Timestamp },
}

#[derive(Debug, Clone)]
struct Batch {
    id: u64,
    messages: Vec<Message>,
    attempts: u32,
    first_sent: Option<Timestamp>,
    state: BatchState,
}

/// The batching client, sans I/O.
///
/// # Driving it
/// * Inputs: [`handle_call`](Self::handle_call) (one call, with 16 random
///   bytes for its `messageId`), [`handle_response`](Self::handle_response)
///   (an upload's outcome), [`handle_timeout`](Self::handle_timeout).
/// * Commands: [`flush`](Self::flush) (send everything now, including batches
///   waiting to retry), [`shutdown`](Self::shutdown) (report everything left
///   as failed).
/// * Outputs, called until `None` after every input: first
///   [`poll_request`](Self::poll_request), then
///   [`poll_event`](Self::poll_event); then sleep until
///   [`poll_timeout`](Self::poll_timeout) and call `handle_timeout`.
///
/// Every accepted message ends in exactly one `Delivered` or `Failed` event.
pub struct Batcher {
    config: BatcherConfig,
    url: String,
    authorization: String,
    user_agent: String,
    library: Value,
    /// `{"library":…}` as JSON text, the context of calls that have none.
    library_context: String,
    queue: VecDeque<Message>,
    /// Where `handle_call` writes a message before it is queued.
    scratch: Vec<u8>,
    batches: Vec<Batch>,
    next_batch_id: u64,
    last_flush: Timestamp,
    flush_requested: bool,
    events: VecDeque<BatcherEvent>,
    rng: Jitter,
    closed: bool,
    /// A command moved [`Batcher::poll_timeout`] earlier since the host last
    /// read [`Batcher::poll_wake`].
    wake: bool,
}

impl Batcher {
    /// A batcher whose flush interval starts at `now`.
    pub fn new(config: BatcherConfig, now: Timestamp) -> Result<Self, ConfigError> {
        if config.write_key.is_empty() {
            return Err(ConfigError::EmptyWriteKey);
        }
        for (name, v) in [
            ("flush_at", config.flush_at),
            ("max_queue", config.max_queue),
            ("max_in_flight", config.max_in_flight),
            ("max_attempts", config.max_attempts as usize),
        ] {
            if v == 0 {
                return Err(ConfigError::OutOfRange(name));
            }
        }
        let base = crate::weburl::parse(&config.endpoint)
            .ok()
            .filter(|u| !u.has_credentials && !u.has_query && !u.has_fragment)
            // The message shows the URL, but never credentials in it.
            .ok_or_else(|| {
                ConfigError::InvalidEndpoint(
                    crate::weburl::redact_userinfo(&config.endpoint).into_owned(),
                )
            })?;
        let path = &config.batch_path;
        if !(path.is_empty() || path.starts_with('/')) || path.contains(['?', '#']) {
            return Err(ConfigError::InvalidBatchPath(path.clone()));
        }
        let url = format!("{}{path}", base.href.trim_end_matches('/'));
        let authorization = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{}:", config.write_key))
        );
        let user_agent = format!("{}/{}", config.library_name, config.library_version);
        let mut lib = Map::new();
        lib.insert("name".into(), Value::String(config.library_name.clone()));
        lib.insert(
            "version".into(),
            Value::String(config.library_version.clone()),
        );
        Ok(Self {
            rng: Jitter::new(config.jitter_seed),
            config,
            url,
            authorization,
            user_agent,
            library_context: {
                let mut ctx = Map::new();
                ctx.insert("library".into(), Value::Object(lib.clone()));
                // Two strings, shallow: writing cannot fail.
                crate::json::stringify(&Value::Object(ctx)).unwrap_or_default()
            },
            library: Value::Object(lib),
            queue: VecDeque::new(),
            scratch: Vec::new(),
            batches: Vec::new(),
            next_batch_id: 1,
            last_flush: now,
            flush_requested: false,
            events: VecDeque::new(),
            closed: false,
            wake: false,
        })
    }

    /// Queues a call. Completes it into a Segment message first: `messageId`
    /// (a UUID v4 from `random`, unless the call has one), `timestamp` (`now`,
    /// unless the call has one, for historical imports) and
    /// `context.library`. Returns the `messageId`.
    ///
    /// On error nothing is queued and nothing else changes.
    pub fn handle_call(
        &mut self,
        now: Timestamp,
        call: Call,
        random: [u8; 16],
    ) -> Result<String, EnqueueError> {
        self.accepting()?;
        let message = self.prepare(now, call, random)?;
        let id = message.message_id().to_owned();
        self.push(message);
        Ok(id)
    }

    /// The message [`handle_call`](Self::handle_call) would queue for
    /// `call`, without queueing it: for hosts that return the message to
    /// their caller (Segment's SDKs return it) or decide afterwards whether
    /// to queue it ([`handle_message`](Self::handle_message)). Checks the
    /// call and its size, not whether the queue has room.
    pub fn prepare(
        &mut self,
        now: Timestamp,
        mut call: Call,
        random: [u8; 16],
    ) -> Result<Message, EnqueueError> {
        call.validate()?;
        if call.message_id.as_ref().is_none_or(String::is_empty) {
            let id = uuid::Builder::from_random_bytes(random).into_uuid();
            call.message_id = Some(id.hyphenated().to_string());
        }
        if call.timestamp.is_none() {
            call.timestamp = Some(now);
        }
        if let Some(context) = call.context.take() {
            let mut context = context.into_map();
            context.insert("library".into(), self.library.clone());
            call.context = Some(Object::Map(context));
        }
        let message_id = call.message_id.as_deref().unwrap_or_default();
        // The id, then the message (see `Message`), written in a buffer kept
        // for the next call and then copied to an allocation of exactly its
        // size: shrinking a larger one leaves holes in the heap between the
        // queued messages.
        let text = &mut self.scratch;
        text.clear();
        text.reserve(message_id.len() + call.capacity_hint());
        text.extend_from_slice(message_id.as_bytes());
        // Most calls carry no context: theirs is the library's, as text.
        call.write_message_with_context(text, Some(&self.library_context))
            .map_err(CallError::from)?;
        let json_len = text.len() - message_id.len();
        if json_len > MAX_MESSAGE_BYTES {
            return Err(EnqueueError::MessageTooLarge(json_len));
        }
        // The writer emits UTF-8 only (see json::Value::to_json_string).
        let text = std::str::from_utf8(text)
            .map_err(|_| CallError::Json(crate::JsonError::InvalidUnicode))?;
        Ok(Message {
            text: text.into(),
            id_len: message_id.len(),
        })
    }

    /// Queues a message made by [`prepare`](Self::prepare) (of this
    /// batcher: its `context.library` is this batcher's).
    pub fn handle_message(&mut self, message: Message) -> Result<(), EnqueueError> {
        self.accepting()?;
        self.push(message);
        Ok(())
    }

    fn push(&mut self, message: Message) {
        let before = self.poll_timeout();
        self.queue.push_back(message);
        self.note_wake(before);
    }

    /// Raises [`Batcher::poll_wake`] when the wake-up time is now earlier
    /// than `before`: the first queued message starts the flush timer,
    /// `flush_at` messages or a flush make a batch due now.
    fn note_wake(&mut self, before: Option<Timestamp>) {
        let after = self.poll_timeout();
        self.wake |= after.is_some_and(|a| before.is_none_or(|b| a < b));
    }

    /// Refuses a call when closed or when the queue is full; checked before
    /// a call is prepared, so a full queue costs no work per call.
    fn accepting(&self) -> Result<(), EnqueueError> {
        if self.closed {
            return Err(EnqueueError::Closed);
        }
        if self.queue.len() >= self.config.max_queue {
            return Err(EnqueueError::QueueFull(self.queue.len()));
        }
        Ok(())
    }

    /// Makes everything queued due now, and brings every batch waiting to
    /// retry forward to `now`. Hosts call it on close and at exit.
    pub fn flush(&mut self, now: Timestamp) {
        let before = self.poll_timeout();
        if !self.queue.is_empty() {
            self.flush_requested = true;
        }
        for b in &mut self.batches {
            if let BatchState::Ready { at } = &mut b.state {
                *at = (*at).min(now);
            }
        }
        self.note_wake(before);
    }

    /// Gives up: every message still queued or in a batch is reported in a
    /// `Failed` event with [`FailReason::Shutdown`], and later calls are
    /// refused. Wait for in-flight responses first, or their batches are
    /// reported failed even if the server accepts them.
    pub fn shutdown(&mut self) {
        self.closed = true;
        for b in std::mem::take(&mut self.batches) {
            self.events.push_back(BatcherEvent::Failed {
                batch_id: Some(b.id),
                messages: b.messages,
                reason: FailReason::Shutdown,
            });
        }
        if !self.queue.is_empty() {
            let messages = self.queue.drain(..).collect();
            self.events.push_back(BatcherEvent::Failed {
                batch_id: None,
                messages,
                reason: FailReason::Shutdown,
            });
        }
        self.flush_requested = false;
    }

    /// The next batch to upload now, or `None`. Changes after `handle_call`,
    /// `flush`, `handle_response` and `handle_timeout`, and as `now` passes
    /// the flush interval or a retry time.
    #[must_use]
    pub fn poll_request(&mut self, now: Timestamp) -> Option<BatchRequest> {
        self.form_batches(now);
        let b = self
            .batches
            .iter_mut()
            .find(|b| matches!(b.state, BatchState::Ready { at } if at <= now))?;
        b.state = BatchState::InFlight { since: now };
        b.attempts += 1;
        b.first_sent.get_or_insert(now);
        let body_len =
            ENVELOPE_BYTES + b.messages.iter().map(|m| m.json().len() + 1).sum::<usize>();
        let mut body = Vec::with_capacity(body_len);
        body.extend_from_slice(ENVELOPE_HEAD);
        for (i, m) in b.messages.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(m.json().as_bytes());
        }
        body.extend_from_slice(ENVELOPE_MID);
        // sentAt is advisory (Segment uses it to correct clock skew), so a
        // wild host clock is clamped rather than failing the upload.
        now.write_iso(&mut body);
        body.extend_from_slice(ENVELOPE_TAIL);
        Some(BatchRequest {
            batch_id: b.id,
            attempt: b.attempts,
            message_count: b.messages.len(),
            request: Request {
                method: "POST",
                url: self.url.clone(),
                headers: vec![
                    ("User-Agent".into(), self.user_agent.clone().into()),
                    ("Content-Type".into(), "application/json".into()),
                    ("Authorization".into(), self.authorization.clone().into()),
                ],
                body,
            },
            deadline: now.saturating_add_ms(self.config.request_timeout_ms),
        })
    }

    /// Reports the outcome of the upload of `batch_id`. Unknown or stale ids
    /// (a batch already timed out or shut down) are ignored.
    pub fn handle_response(&mut self, now: Timestamp, batch_id: u64, outcome: Outcome) {
        let Some(pos) = self
            .batches
            .iter()
            .position(|b| b.id == batch_id && matches!(b.state, BatchState::InFlight { .. }))
        else {
            return;
        };
        match outcome.verdict() {
            Verdict::Success => {
                let b = self.batches.remove(pos);
                let message_ids = b
                    .messages
                    .iter()
                    .map(|m| m.message_id().to_owned())
                    .collect();
                self.events.push_back(BatcherEvent::Delivered {
                    batch_id,
                    message_ids,
                });
            }
            Verdict::Reject => self.fail(pos, FailReason::Rejected(outcome)),
            Verdict::Retry => {
                let b = &mut self.batches[pos];
                let retry_after = match &outcome {
                    Outcome::Response {
                        retry_after: Some(v),
                        ..
                    } => parse_retry_after(v, now),
                    _ => None,
                };
                let delay = retry_after
                    .unwrap_or_else(|| self.config.backoff.full_jitter(b.attempts, &mut self.rng));
                let retry_at = now.saturating_add_ms(delay);
                let first = b.first_sent.unwrap_or(now);
                let out_of_time = retry_at.millis_since(first)
                    > i64::try_from(self.config.max_retry_ms).unwrap_or(i64::MAX);
                if b.attempts >= self.config.max_attempts || out_of_time {
                    self.fail(pos, FailReason::RetriesExhausted(outcome));
                } else {
                    b.state = BatchState::Ready { at: retry_at };
                    let attempt = b.attempts;
                    self.events.push_back(BatcherEvent::Retrying {
                        batch_id,
                        attempt,
                        retry_at,
                        outcome,
                    });
                }
            }
        }
    }

    /// Call when `now` reaches [`poll_timeout`](Self::poll_timeout). An
    /// upload unanswered past its deadline counts as a timeout, so a lost
    /// response can never wedge the queue.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let expired: Vec<u64> = self
            .batches
            .iter()
            .filter(|b| {
                matches!(b.state, BatchState::InFlight { since }
                    if now >= since.saturating_add_ms(self.config.request_timeout_ms))
            })
            .map(|b| b.id)
            .collect();
        for id in expired {
            self.handle_response(now, id, Outcome::Timeout);
        }
    }

    /// Whether the host must wake its sender now: true once after a
    /// `handle_call`, `handle_message` or `flush` moved
    /// [`poll_timeout`](Self::poll_timeout) earlier (the first queued
    /// message starts the flush timer; `flush_at` messages or a flush make
    /// a batch due now). A sender asleep until the wake-up time it last read
    /// would otherwise sleep past the new one; any other change only makes
    /// the wake-up time later, which a sender finds when it wakes. Reading
    /// it resets it. A host with threads reads it under the same lock as
    /// the command, so no wake-up is lost between two threads.
    #[must_use]
    pub fn poll_wake(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// The next event, or `None`. Changes after `handle_response`,
    /// `handle_timeout` and `shutdown`.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<BatcherEvent> {
        self.events.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, or `None`
    /// when nothing is waiting on time. Changes after
    /// every input and command.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let batch_times = self.batches.iter().map(|b| match b.state {
            BatchState::Ready { at } => at,
            BatchState::InFlight { since } => {
                since.saturating_add_ms(self.config.request_timeout_ms)
            }
        });
        let flush = (!self.queue.is_empty() && self.batches.len() < self.config.max_in_flight)
            .then(|| self.next_flush_due());
        batch_times.chain(flush).min()
    }

    /// Messages queued and not yet in a batch.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Messages in batches being uploaded or waiting to retry.
    pub fn in_batches(&self) -> usize {
        self.batches.iter().map(|b| b.messages.len()).sum()
    }

    /// True when nothing is queued, uploading or waiting to retry.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.batches.is_empty()
    }

    fn next_flush_due(&self) -> Timestamp {
        if self.flush_requested || self.queue.len() >= self.config.flush_at {
            Timestamp::MIN
        } else {
            self.last_flush
                .saturating_add_ms(self.config.flush_after_ms)
        }
    }

    fn form_batches(&mut self, now: Timestamp) {
        while self.batches.len() < self.config.max_in_flight && !self.queue.is_empty() {
            if self.next_flush_due() > now {
                break;
            }
            let mut size = ENVELOPE_BYTES;
            let mut messages = Vec::new();
            while let Some(m) = self.queue.front() {
                let add = m.json().len() + usize::from(!messages.is_empty());
                if messages.len() == self.config.flush_at || size + add > MAX_BATCH_BYTES {
                    break;
                }
                size += add;
                messages.extend(self.queue.pop_front());
            }
            let id = self.next_batch_id;
            self.next_batch_id += 1;
            self.batches.push(Batch {
                id,
                messages,
                attempts: 0,
                first_sent: None,
                state: BatchState::Ready { at: now },
            });
            self.last_flush = now;
        }
        if self.queue.is_empty() {
            self.flush_requested = false;
        }
    }

    fn fail(&mut self, pos: usize, reason: FailReason) {
        let b = self.batches.remove(pos);
        self.events.push_back(BatcherEvent::Failed {
            batch_id: Some(b.id),
            messages: b.messages,
            reason,
        });
    }
}
