//! Times: the host clock, aware `datetime`s, and ISO 8601 text, as the
//! core's [`Timestamp`].

use crate::error::err;
use callpost_core::{Timestamp, TimestampError};
use pyo3::prelude::*;

/// Parses an ISO 8601 timestamp to milliseconds since the epoch (UTC).
#[pyfunction]
pub(crate) fn parse_timestamp(text: &str) -> PyResult<i64> {
    Ok(Timestamp::parse(text).map_err(err)?.as_millis())
}

/// Milliseconds since the epoch of an aware datetime. A naive one is
/// refused for the reason the core refuses ISO text without an offset: its
/// instant is unknown.
pub(crate) fn datetime_millis(dt: &Bound<'_, PyAny>) -> PyResult<i64> {
    if dt.getattr("tzinfo")?.is_none() || dt.call_method0("utcoffset")?.is_none() {
        return Err(err(TimestampError::NoZone));
    }
    let ts: f64 = dt.call_method0("timestamp")?.extract()?;
    // timestamp() is a float of seconds; keep the millisecond it denotes.
    let micros: i64 = dt.getattr("microsecond")?.extract()?;
    Ok((ts.floor() as i64) * 1000 + micros / 1000)
}

/// The host clock. Reading it is the binding's job: the core has none.
pub(crate) fn clock() -> PyResult<Timestamp> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?
        .as_millis();
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX)).map_err(err)
}

/// A time given as `int` milliseconds.
pub(crate) fn millis(ms: i64) -> PyResult<Timestamp> {
    Timestamp::from_millis(ms).map_err(err)
}

/// A time given as `int` milliseconds or an aware `datetime`; `None` reads
/// the host clock.
pub(crate) fn now_of(now: Option<&Bound<'_, PyAny>>) -> PyResult<Timestamp> {
    match now {
        Some(v) if !v.is_none() => match v.extract::<i64>() {
            Ok(ms) => millis(ms),
            Err(_) => millis(datetime_millis(v)?),
        },
        _ => clock(),
    }
}
