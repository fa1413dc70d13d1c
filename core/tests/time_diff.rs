//! The core's own date parsers against the `time` crate's RFC 3339 and
//! RFC 2822 parsers, over generated strings around every field's limits.
//! Second 60 is left out: `time` accepts a leap second, we refuse it as
//! `Date.parse` does.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::retry::parse_retry_after;
use callpost_core::Timestamp;
use proptest::prelude::*;
use time::format_description::well_known::{Rfc2822, Rfc3339};
use time::OffsetDateTime;

const MIN_MS: i64 = -62_167_219_200_000;
const MAX_MS: i64 = 253_402_300_799_999;

fn ms_of(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos().div_euclid(1_000_000)) as i64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn rfc3339_agrees_with_time(
        y in prop_oneof![0i64..=9999, Just(0), Just(9999), Just(2000), Just(1900)],
        mo in 0i64..=13, d in 0i64..=32, h in 0i64..=24, mi in 0i64..=60, s in 0i64..=59,
        frac in prop::option::of("[0-9]{1,12}"),
        sep in prop::sample::select(vec!["T", "t"]),
        off in prop_oneof![Just("Z".to_owned()), Just("z".to_owned()),
            (prop::sample::select(vec!["+", "-"]), 0i64..=24, 0i64..=60)
                .prop_map(|(sg, oh, om)| format!("{sg}{oh:02}:{om:02}"))],
    ) {
        let f = frac.map(|f| format!(".{f}")).unwrap_or_default();
        let text = format!("{y:04}-{mo:02}-{d:02}{sep}{h:02}:{mi:02}:{s:02}{f}{off}");
        let ours = Timestamp::parse(&text).ok().map(Timestamp::as_millis);
        let theirs = OffsetDateTime::parse(&text, &Rfc3339)
            .ok()
            .map(ms_of)
            .filter(|ms| (MIN_MS..=MAX_MS).contains(ms));
        prop_assert_eq!(ours, theirs, "{}", text);
    }

    #[test]
    fn http_date_agrees_with_time(
        days in -25_567i64..2_932_896, secs in 0i64..86_400,
        d_off in prop_oneof![4 => Just(0i64), 1 => -3i64..=3],
        mo in prop_oneof![4 => Just(None), 1 => (0usize..12).prop_map(Some)],
    ) {
        const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let t = OffsetDateTime::from_unix_timestamp(days * 86_400 + secs).unwrap();
        let day = (t.day() as i64 + d_off).clamp(0, 99);
        let month = mo.map_or(MONTHS[t.month() as usize - 1], |m| MONTHS[m]);
        let text = format!(
            "{}, {day:02} {month} {:04} {:02}:{:02}:{:02} GMT",
            DAYS[days.rem_euclid(7) as usize], t.year(), t.hour(), t.minute(), t.second()
        );
        let now = 0;
        let ours = parse_retry_after(&text, Timestamp::from_millis(now).unwrap());
        let theirs = OffsetDateTime::parse(&text, &Rfc2822)
            .ok()
            .map(|at| u64::try_from(ms_of(at) - now).unwrap_or(0).min(86_400_000));
        // `time` also checks the day name against the date; we do not, so
        // compare only where the name is right or `time` accepted.
        if theirs.is_some() || (d_off == 0 && mo.is_none()) {
            prop_assert_eq!(ours, theirs, "{}", text);
        }
    }
}
