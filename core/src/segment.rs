//! The defaults of Segment's own SDKs, kept by the drop-in layer
//! (`callpost.segment` in Python, `callpost/segment` in JS): code
//! moved over by changing its import line behaves as it did, batching and
//! retrying on the same numbers. The batching, retry and size rules are
//! still the core's [`Batcher`](crate::Batcher)'s.

/// segment-analytics-python 2.x (`Client.DefaultConfig`), durations in
/// milliseconds.
pub const PYTHON_DEFAULTS: &[(&str, u64)] = &[
    // `upload_size`: messages per batch.
    ("upload_size", 100),
    // `upload_interval`: 0.5 s between the consumer's queue reads.
    ("upload_interval_ms", 500),
    ("max_queue_size", 10_000),
    // `max_retries`: retries after the first attempt.
    ("max_retries", 10),
    ("timeout_ms", 15_000),
    // `max_total_backoff_duration`: 12 hours of retrying, at most.
    ("max_total_backoff_duration_ms", 43_200_000),
    // `max_rate_limit_duration`: 30 minutes of 429 answers, at most.
    ("max_rate_limit_duration_ms", 1_800_000),
];

/// @segment/analytics-node 3.x (`Analytics` and its publisher), durations
/// in milliseconds.
pub const NODE_DEFAULTS: &[(&str, u64)] = &[
    // `flushAt`: messages per batch.
    ("flush_at", 15),
    // `flushInterval`: a batch goes out 10 s after its first message.
    ("flush_interval_ms", 10_000),
    // `maxRetries`: retries after the first attempt.
    ("max_retries", 10),
    ("http_request_timeout_ms", 10_000),
    // `maxTotalBackoffDuration`: 43,200 s (12 hours) of retrying.
    ("max_total_backoff_duration_ms", 43_200_000),
    // `maxRateLimitDuration`: 43,200 s of 429 answers.
    ("max_rate_limit_duration_ms", 43_200_000),
    // `closeAndFlush()` waits max(60 s, flushInterval) × 1.25 by default:
    // the floor, and the factor in percent.
    ("close_timeout_floor_ms", 60_000),
    ("close_timeout_percent", 125),
];
