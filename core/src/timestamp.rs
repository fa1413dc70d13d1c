//! Millisecond UTC timestamps, parsed from ISO 8601 and written the way
//! JavaScript's `Date.prototype.toISOString` writes them.

//! The parsers are written here rather than taken from the `time` crate:
//! the two grammars needed (RFC 3339 and the HTTP date) are a few dozen
//! lines over fixed-width digits, while `time`'s general parser was about
//! 10% of the wasm module.

use crate::json::Quoted;
use serde::{Deserialize, Serialize};
use std::fmt;

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
    fn from(t: Timestamp) -> Self {
        t.0
    }
}

/// `0000-01-01T00:00:00.000Z`.
const MIN_MS: i64 = -62_167_219_200_000;
/// `9999-12-31T23:59:59.999Z`.
const MAX_MS: i64 = 253_402_300_799_999;

/// A timestamp that is not ISO 8601 with a zone, or is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimestampError {
    /// The text (shown), or the milliseconds, are not a timestamp in years
    /// 0000-9999. Send ISO 8601 with an offset, e.g.
    /// `2026-11-22T10:04:05.123Z`.
    #[error("invalid timestamp {}: expected ISO 8601 with a UTC offset, years 0000-9999, e.g. 2026-11-22T10:04:05.123Z", Quoted(.0))]
    Invalid(String),
    /// A host's date-time value with no time zone (a naive Python
    /// `datetime`): its instant is unknown, as for ISO text without an
    /// offset. Give it a zone.
    #[error(
        "datetime has no time zone; pass an aware datetime (for example with tzinfo=timezone.utc)"
    )]
    NoZone,
}

impl Timestamp {
    /// The earliest timestamp, `0000-01-01T00:00:00.000Z`.
    pub const MIN: Self = Self(MIN_MS);
    /// The latest timestamp, `9999-12-31T23:59:59.999Z`.
    pub const MAX: Self = Self(MAX_MS);

    /// From milliseconds since the epoch; fails outside years 0000–9999.
    pub fn from_millis(ms: i64) -> Result<Self, TimestampError> {
        if (MIN_MS..=MAX_MS).contains(&ms) {
            Ok(Self(ms))
        } else {
            Err(TimestampError::Invalid(ms.to_string()))
        }
    }

    /// From a JavaScript time value (`Date.now()`, a `number`): a whole
    /// number of milliseconds in years 0000–9999. The message shows the
    /// number as JavaScript prints it (the core's number writer, so no
    /// float formatting tables reach the wasm modules).
    pub fn from_millis_f64(ms: f64) -> Result<Self, TimestampError> {
        // `as` saturates and truncates: anything fractional or out of range
        // fails the round trip or the range check.
        let whole = ms as i64;
        if whole as f64 == ms {
            if let Ok(t) = Self::from_millis(whole) {
                return Ok(t);
            }
        }
        let mut shown = Vec::new();
        let shown = match crate::json::write_number(ms, &mut shown) {
            Ok(()) => String::from_utf8(shown).unwrap_or_default(),
            Err(_) => "a non-finite number".to_owned(),
        };
        Err(TimestampError::Invalid(shown))
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

    /// `ms` milliseconds later, clamped to [`Timestamp::MAX`]: deadlines
    /// and retry times past the year 9999 are never reached anyway.
    #[must_use]
    pub fn saturating_add_ms(self, ms: u64) -> Self {
        Self::saturating_from_millis(self.0.saturating_add_unsigned(ms))
    }

    /// Milliseconds from `earlier` to `self` (negative when `earlier` is
    /// later).
    pub fn millis_since(self, earlier: Self) -> i64 {
        self.0 - earlier.0
    }

    /// Parses ISO 8601 as used on the web: an RFC 3339 date-time (`T`, `t` or
    /// a space between date and time, any number of fraction digits, `Z` or
    /// `±hh:mm`), or a bare date, which means midnight UTC as in
    /// `Date.parse`. Offsets are converted to UTC and digits past the
    /// millisecond are cut, as `Date.parse` does. A date-time without an
    /// offset is rejected: it would mean the sender's local time, which a
    /// library with no clock or time zone cannot know.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        parse_iso(text.as_bytes())
            .and_then(|ms| Self::from_millis(ms).ok())
            .ok_or_else(|| TimestampError::Invalid(text.chars().take(64).collect()))
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

const MS_PER_DAY: i64 = 86_400_000;

/// Reads fixed-width fields left to right.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    /// Exactly `n` ASCII digits as a number.
    fn digits(&mut self, n: usize) -> Option<i64> {
        let field = self.b.get(self.i..self.i + n)?;
        let mut v = 0;
        for &d in field {
            if !d.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(d - b'0');
        }
        self.i += n;
        Some(v)
    }

    /// The next byte, if it is one of `any`.
    fn one_of(&mut self, any: &[u8]) -> Option<u8> {
        let b = *self.b.get(self.i)?;
        any.contains(&b).then(|| {
            self.i += 1;
            b
        })
    }

    fn lit(&mut self, s: &[u8]) -> Option<()> {
        self.b
            .get(self.i..)?
            .starts_with(s)
            .then(|| self.i += s.len())
    }

    fn done(&self) -> bool {
        self.i == self.b.len()
    }

    /// `hh:mm:ss` as ms of the day. Second 60 is refused, as `Date.parse`
    /// refuses it.
    fn time_of_day(&mut self) -> Option<i64> {
        let h = self.digits(2).filter(|h| *h <= 23)?;
        self.lit(b":")?;
        let m = self.digits(2).filter(|m| *m <= 59)?;
        self.lit(b":")?;
        let s = self.digits(2).filter(|s| *s <= 59)?;
        Some(((h * 60 + m) * 60 + s) * 1000)
    }
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

/// Days since 1970-01-01 of a valid proleptic Gregorian date, or `None`.
fn days_of(y: i64, m: i64, d: i64) -> Option<i64> {
    let month_len = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => return None,
    };
    (1..=month_len)
        .contains(&d)
        .then(|| days_from_civil(y, m, d))
}

/// Howard Hinnant's civil-to-days algorithm (the inverse of
/// [`civil_from_days`]).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// RFC 3339 (`T`, `t` or a space between date and time; any number of
/// fraction digits, cut to milliseconds; `Z`, `z` or `±hh:mm`), or a bare
/// `YYYY-MM-DD`, as milliseconds since the epoch.
fn parse_iso(b: &[u8]) -> Option<i64> {
    let mut c = Cursor { b, i: 0 };
    let y = c.digits(4)?;
    c.lit(b"-")?;
    let mo = c.digits(2)?;
    c.lit(b"-")?;
    let d = c.digits(2)?;
    let days = days_of(y, mo, d)?;
    if c.done() {
        return Some(days * MS_PER_DAY);
    }
    c.one_of(b"Tt ")?;
    let mut ms = days * MS_PER_DAY + c.time_of_day()?;
    if c.lit(b".").is_some() {
        let start = c.i;
        while c.digits(1).is_some() {}
        let frac = &b[start..c.i];
        if frac.is_empty() {
            return None;
        }
        // Digits past the millisecond are cut, as Date.parse cuts them.
        ms += frac
            .iter()
            .chain(b"00")
            .take(3)
            .fold(0, |v, d| v * 10 + i64::from(d - b'0'));
    }
    match c.one_of(b"Zz+-")? {
        b'Z' | b'z' => {}
        sign => {
            let oh = c.digits(2).filter(|h| *h <= 23)?;
            c.lit(b":")?;
            let om = c.digits(2).filter(|m| *m <= 59)?;
            let offset = (oh * 60 + om) * 60_000;
            ms += if sign == b'+' { -offset } else { offset };
        }
    }
    c.done().then_some(ms)
}

/// An HTTP-date in the IMF-fixdate form (RFC 9110 §5.6.7), such as
/// `Sun, 06 Nov 1994 08:49:37 GMT`, as milliseconds since the epoch. The
/// obsolete RFC 850 and asctime forms are not read (see
/// [`crate::retry::parse_retry_after`]); the day name is not checked
/// against the date.
pub(crate) fn parse_http_date(text: &str) -> Option<i64> {
    const DAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
    const MONTHS: [&[u8]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let b = text.as_bytes();
    if !DAYS.contains(&b.get(..3)?) {
        return None;
    }
    let mut c = Cursor { b, i: 3 };
    c.lit(b", ")?;
    let d = c.digits(2)?;
    c.lit(b" ")?;
    let name = b.get(c.i..c.i + 3)?;
    let mo = MONTHS.iter().position(|m| *m == name)? as i64 + 1;
    c.i += 3;
    c.lit(b" ")?;
    let y = c.digits(4)?;
    c.lit(b" ")?;
    let t = c.time_of_day()?;
    c.lit(b" GMT")?;
    c.done().then_some(days_of(y, mo, d)? * MS_PER_DAY + t)
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
    fn civil_round_trips() {
        for ms in (MIN_MS..MAX_MS).step_by(777_777_777) {
            let t = Timestamp(ms);
            assert_eq!(Timestamp::parse(&t.to_string()).unwrap(), t);
        }
        for days in -719_528..2_932_897 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_of(y, m, d), Some(days));
        }
    }

    #[test]
    fn second_sixty_and_bad_offsets_are_refused() {
        for s in [
            "2026-06-30T23:59:60Z",
            "2026-11-22T10:04:05+24:00",
            "2026-11-22T10:04:05+01:60",
            "2026-11-22T10:04:05+0100",
            "2026-11-22T10:04:05Zjunk",
            "2026-11-22T10:04",
            "2026-11-2",
            "+2026-11-22",
            "2026-11-22T",
            "0000-01-01T00:00:00+00:01",
        ] {
            assert!(Timestamp::parse(s).is_err(), "{s}");
        }
        assert_eq!(
            norm("9999-12-31T23:59:59.9999Z"),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            norm("2000-02-29T12:00:00-00:00"),
            "2000-02-29T12:00:00.000Z"
        );
    }

    #[test]
    fn http_dates() {
        let at = |s: &str| parse_http_date(s);
        assert_eq!(at("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777_000));
        assert_eq!(at("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(at("Tue, 29 Feb 2000 00:00:00 GMT"), Some(951_782_400_000));
        for s in [
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT ",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "",
        ] {
            assert_eq!(at(s), None, "{s}");
        }
    }
}
