//! The CPU a benchmark's process has used, shared by the examples that
//! report CPU per call.

/// The CPU this process has used, s (utime and stime of `/proc/self/stat`).
pub(crate) fn own_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime, fields 14 and 15 (11 and 12 after the name).
    (tick(11) + tick(12)) / 100.0
}
