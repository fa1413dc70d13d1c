//! The defaults of Segment's own SDKs, kept by the drop-in layer
//! (`callpost.segment` in Python): code
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
