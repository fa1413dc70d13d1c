//! Millisecond UTC timestamps, parsed from ISO 8601 and written the way
//! JavaScript's `Date.prototype.toISOString` writes them.

use serde::{Deserialize, Serialize};
use std::fmt;
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime, PrimitiveDateTime, Time};

/// Milliseconds since the Unix epoch, UTC. Years 0000 to 9999 only, so the
/// written form is always `YYYY-MM-DDTHH:MM:SS.sssZ` (24 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "i64")]
pub struct Timestamp(i64);

impl TryFrom<i64> for Timestamp {
    type Error = TimestampError;
    fn try_from(ms: i64) -> Result<Self, TimestampError> {
        Self::from_millis(ms)
    }
}

impl From<Timestamp> for i64 {
    fn from(t: Timestamp) -> i64 {
        t.0
    }
}

/// `0000-01-01T00:00:00.000Z`.
const MIN_MS: i64 = -62_167_219_200_000;
/// `9999-12-31T23:59:59.999Z`.
const MAX_MS: i64 = 253_402_300_799_999;

/// A timestamp that is not ISO 8601 with a zone, or is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timestamp {0:?}: expected ISO 8601 with a UTC offset, years 0000-9999, e.g. 2026-11-22T10:04:05.123Z")]
pub struct TimestampError(pub String);

impl Timestamp {
    /// From milliseconds since the epoch; fails outside years 0000–9999.
    pub fn from_millis(ms: i64) -> Result<Self, TimestampError> {
        if (MIN_MS..=MAX_MS).contains(&ms) {
            Ok(Self(ms))
        } else {
            Err(TimestampError(ms.to_string()))
        }
    }

    /// From milliseconds since the epoch, clamped into years 0000–9999. For
    /// advisory stamps (such as `sentAt`) where a wild host clock should not
    /// be an error.
    pub fn saturating_from_millis(ms: i64) -> Self {
        Self(ms.clamp(MIN_MS, MAX_MS))
    }

    /// Milliseconds since the epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// Parses ISO 8601 as used on the web: an RFC 3339 date-time (`T`, `t` or
    /// a space between date and time, any number of fraction digits, `Z` or
    /// `±hh:mm`), or a bare date, which means midnight UTC as in
    /// `Date.parse`. Offsets are converted to UTC and digits past the
    /// millisecond are cut, as `Date.parse` does. A date-time without an
    /// offset is rejected: it would mean the sender's local time, which a
    /// library with no clock or time zone cannot know.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let err = || TimestampError(text.chars().take(64).collect());
        let dt = if text.len() == 10 {
            let date = Date::parse(
                text,
                time::macros::format_description!("[year]-[month]-[day]"),
            )
            .map_err(|_| err())?;
            PrimitiveDateTime::new(date, Time::MIDNIGHT).assume_utc()
        } else {
            let normalized;
            let text = if text.as_bytes().get(10) == Some(&b' ') {
                normalized = format!("{}T{}", &text[..10], &text[11..]);
                normalized.as_str()
            } else {
                text
            };
            OffsetDateTime::parse(text, &Rfc3339).map_err(|_| err())?
        };
        let ms = dt.unix_timestamp_nanos().div_euclid(1_000_000);
        i64::try_from(ms)
            .ok()
            .and_then(|ms| Self::from_millis(ms).ok())
            .ok_or_else(err)
    }

    /// Writes `YYYY-MM-DDTHH:MM:SS.sssZ`.
    pub fn write_iso(self, out: &mut Vec<u8>) {
        let days = self.0.div_euclid(86_400_000);
        let ms_of_day = self.0.rem_euclid(86_400_000);
        let (y, m, d) = civil_from_days(days);
        let (hh, mm, ss, ms) = (
            ms_of_day / 3_600_000,
            ms_of_day / 60_000 % 60,
            ms_of_day / 1000 % 60,
            ms_of_day % 1000,
        );
        let mut buf = [0u8; 24];
        put(&mut buf[0..4], y);
        buf[4] = b'-';
        put(&mut buf[5..7], m);
        buf[7] = b'-';
        put(&mut buf[8..10], d);
        buf[10] = b'T';
        put(&mut buf[11..13], hh);
        buf[13] = b':';
        put(&mut buf[14..16], mm);
        buf[16] = b':';
        put(&mut buf[17..19], ss);
        buf[19] = b'.';
        put(&mut buf[20..23], ms);
        buf[23] = b'Z';
        out.extend_from_slice(&buf);
    }
}

fn put(dst: &mut [u8], mut n: i64) {
    for b in dst.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// Howard Hinnant's days-to-civil algorithm. Written here rather than going
/// through `time`'s formatter because it is on the hot path of every body and
/// is a dozen integer operations.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::with_capacity(24);
        self.write_iso(&mut out);
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        Timestamp::parse(s).unwrap().to_string()
    }

    #[test]
    fn normalises_iso_forms() {
        assert_eq!(norm("2026-11-22T10:04:05.123Z"), "2026-11-22T10:04:05.123Z");
        assert_eq!(norm("2026-11-22T10:04:05Z"), "2026-11-22T10:04:05.000Z");
        assert_eq!(norm("2026-11-22t10:04:05.1z"), "2026-11-22T10:04:05.100Z");
        assert_eq!(
            norm("2026-11-22 10:04:05.123456789+02:00"),
            "2026-11-22T08:04:05.123Z"
        );
        assert_eq!(
            norm("2026-01-01T00:30:00-01:00"),
            "2026-01-01T01:30:00.000Z"
        );
        assert_eq!(
            norm("2026-01-01T00:30:00+01:00"),
            "2025-12-31T23:30:00.000Z"
        );
        assert_eq!(norm("2024-02-29"), "2024-02-29T00:00:00.000Z");
        assert_eq!(norm("1969-12-31T23:59:59.999Z"), "1969-12-31T23:59:59.999Z");
        assert_eq!(norm("0000-01-01T00:00:00Z"), "0000-01-01T00:00:00.000Z");
    }

    #[test]
    fn rejects_bad_forms() {
        for s in [
            "",
            "2026-11-22T10:04:05",
            "2026-13-01T00:00:00Z",
            "2023-02-29",
            "yesterday",
            "2026-11-22T25:00:00Z",
            "1700000000",
            "2026-11-22T10:04:05.Z",
        ] {
            assert!(Timestamp::parse(s).is_err(), "{s}");
        }
        assert!(Timestamp::from_millis(MAX_MS + 1).is_err());
        assert!(Timestamp::from_millis(MIN_MS - 1).is_err());
    }

    #[test]
    fn civil_matches_time_crate() {
        for ms in (MIN_MS..MAX_MS).step_by(777_777_777_777) {
            let t = Timestamp(ms);
            let ours = t.to_string();
            let theirs = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000).unwrap();
            assert_eq!(Timestamp::parse(&ours).unwrap(), t);
            assert_eq!(&ours[..4], format!("{:04}", theirs.year()));
        }
    }
}
