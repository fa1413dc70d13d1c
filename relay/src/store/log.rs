//! The delivery log: which stored calls a search or a replay names, the
//! order a search reads them in, and what it gives back.
//!
//! A search is newest first, by `(received_at, id)` descending, and pages
//! with a cursor (the last row's pair), never an offset: a page deep in a
//! million rows costs what the first one does, and rows stored while an
//! operator pages do not shift the pages. Each field a search names has an
//! index that holds the rows in that order (the migrations'
//! `deliveries_*`), so a search reads about as many rows as it returns,
//! except when it combines fields and the first index's rows mostly fail
//! the others.

use super::sql::{Dialect, Value};
use super::Status;
use std::fmt;

/// The most rows one page of a search returns: the page is built in
/// memory. The admin API's own `MAX_LIMIT` for its lists, for the same
/// reason.
pub const MAX_PAGE: usize = 1000;

/// What a search's `status` names: the stored calls in one state, or the
/// calls refused inside accepted batches (kept apart, searched by source
/// and time only). The admin API and the command line read it here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStatus {
    /// Stored calls in this state.
    Calls(Status),
    /// Refused calls.
    Rejected,
}

impl LogStatus {
    /// The names it reads, for messages.
    pub const NAMES: &'static str = "pending, delivered, dead, undeliverable, filtered, rejected";

    /// The status named `name`.
    pub fn parse(name: &str) -> Result<Self, UnknownStatus> {
        if name == "rejected" {
            return Ok(Self::Rejected);
        }
        Status::named(name)
            .map(Self::Calls)
            .ok_or_else(|| UnknownStatus(name.to_owned()))
    }
}

/// A `status` that names no state (`invalid_argument`): the message says
/// which names there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status must be one of {names}, not {0:?}", names = LogStatus::NAMES)]
pub struct UnknownStatus(pub String);

/// Which stored calls a search or a replay names: every field given must
/// match (`None`: any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFilter {
    /// Only these `messageId`s.
    pub message_ids: Option<Vec<String>>,
    /// `userId`.
    pub user_id: Option<String>,
    /// `anonymousId`.
    pub anonymous_id: Option<String>,
    /// A track call's `event`.
    pub event: Option<String>,
    /// The call's type (`track`, …).
    pub kind: Option<String>,
    /// The source's name.
    pub source: Option<String>,
    /// The destination's name.
    pub destination: Option<String>,
    /// Only calls in this state.
    pub status: Option<Status>,
    /// Received at or after, ms.
    pub since: Option<i64>,
    /// Received before, ms.
    pub until: Option<i64>,
    /// The keyed hashes of `user_id`, `anonymous_id` and `event`, matched
    /// beside them where calls are sealed (`store::sealed`; a call stored
    /// before sealing keeps the plain value).
    #[doc(hidden)]
    pub hashed: [Option<String>; 3],
    /// Whether a search reads each call's message too (a sealed call's
    /// fields are shown from it).
    #[doc(hidden)]
    pub with_message: bool,
}

impl LogFilter {
    /// Whether it names calls by anything but their state: a replay that
    /// does not would take every dead letter.
    pub fn names_calls(&self) -> bool {
        self.message_ids.is_some()
            || self.user_id.is_some()
            || self.anonymous_id.is_some()
            || self.event.is_some()
            || self.kind.is_some()
            || self.source.is_some()
            || self.destination.is_some()
            || self.since.is_some()
            || self.until.is_some()
    }

    /// What of it a search of refused calls takes: the source and times.
    pub fn source_and_times(&self) -> Self {
        Self {
            source: self.source.clone(),
            since: self.since,
            until: self.until,
            ..Self::default()
        }
    }

    /// Whether a stored call matches (the memory store's search; the
    /// databases' is [`LogFilter::sql`]).
    pub fn matches(&self, call: &LogEntry) -> bool {
        fn same(want: Option<&String>, have: Option<&str>) -> bool {
            want.is_none_or(|w| have == Some(w.as_str()))
        }
        let keyed = |want: Option<&String>, hash: &Option<String>, have: Option<&str>| {
            same(want, have) || hash.is_some() && hash.as_deref() == have
        };
        self.message_ids
            .as_ref()
            .is_none_or(|ids| ids.contains(&call.message_id))
            && keyed(
                self.user_id.as_ref(),
                &self.hashed[0],
                call.user_id.as_deref(),
            )
            && keyed(
                self.anonymous_id.as_ref(),
                &self.hashed[1],
                call.anonymous_id.as_deref(),
            )
            && keyed(self.event.as_ref(), &self.hashed[2], call.event.as_deref())
            && same(self.kind.as_ref(), Some(&call.kind))
            && same(self.source.as_ref(), Some(&call.source))
            && same(self.destination.as_ref(), Some(&call.destination))
            && self.status.is_none_or(|s| s.name() == call.status)
            && self.since.is_none_or(|t| call.received_at >= t)
            && self.until.is_none_or(|t| call.received_at < t)
    }

    /// The `WHERE` conditions (joined by `AND`, empty for none) and their
    /// values, with `?` placeholders, as `d` writes them.
    pub(crate) fn sql(&self, d: Dialect) -> (Vec<String>, Vec<Value>) {
        let mut conds = Vec::new();
        let mut values = Vec::new();
        let mut text = |col: &str, v: &Option<String>, hash: &Option<String>| match (v, hash) {
            (Some(v), Some(h)) => {
                conds.push(format!("{} IN (?, ?)", d.column(col)));
                values.push(Value::Text(v.clone()));
                values.push(Value::Text(h.clone()));
            }
            (Some(v), None) => {
                conds.push(format!("{} = ?", d.column(col)));
                values.push(Value::Text(v.clone()));
            }
            _ => {}
        };
        let [uh, ah, eh] = &self.hashed;
        text("user_id", &self.user_id, uh);
        text("anonymous_id", &self.anonymous_id, ah);
        text("event", &self.event, eh);
        text("kind", &self.kind, &None);
        text("source", &self.source, &None);
        text("destination", &self.destination, &None);
        if let Some(ids) = &self.message_ids {
            conds.push(d.in_list("message_id"));
            values.push(Value::Texts(ids.clone()));
        }
        if let Some(s) = self.status {
            // The state is written as a number, not bound (`store::sql`):
            // `deliveries_dead` is `status = 2`, the finished rows' index
            // `status <> 0`. Delivered calls are most of the table, so a
            // search of them reads the time or field index instead. The
            // number is the enum's, never input.
            conds.push(match s {
                Status::Pending | Status::Delivered => format!("status = {}", s.as_i64()),
                Status::Dead | Status::Undeliverable | Status::Filtered => {
                    format!("status <> 0 AND status = {}", s.as_i64())
                }
            });
        }
        if let Some(t) = self.since {
            conds.push("received_at >= ?".into());
            values.push(Value::Int(t));
        }
        if let Some(t) = self.until {
            conds.push("received_at < ?".into());
            values.push(Value::Int(t));
        }
        (conds, values)
    }
}

/// Where a page of a search ends: the last row's `(received_at, id)`. As
/// text, `<received_at>.<id>`; operators pass it back as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The last row's receipt, ms.
    pub received_at: i64,
    /// The last row's id.
    pub id: i64,
}

impl Cursor {
    /// Reads the text form; `None` if it is not one.
    pub fn parse(text: &str) -> Option<Self> {
        let (at, id) = text.split_once('.')?;
        Some(Self {
            received_at: at.parse().ok()?,
            id: id.parse().ok()?,
        })
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.received_at, self.id)
    }
}

/// A stored call, as a search lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogEntry {
    /// The source's name.
    pub source: String,
    /// The destination this row is the call's delivery to (empty: none
    /// took the call).
    pub destination: String,
    /// `messageId`.
    pub message_id: String,
    /// The call's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// A track call's `event`.
    pub event: Option<String>,
    /// `userId`.
    pub user_id: Option<String>,
    /// `anonymousId`.
    pub anonymous_id: Option<String>,
    /// Received, ms.
    pub received_at: i64,
    /// `pending`, `delivered`, `dead` or `undeliverable`.
    pub status: &'static str,
    /// Attempts made (in the current window, after a replay).
    pub attempts: i64,
    /// When it was delivered or given up, ms.
    pub finished_at: Option<i64>,
    /// The row's id, for the cursor.
    #[serde(skip)]
    pub id: i64,
    /// The stored message, where the search asked for it
    /// ([`LogFilter::with_message`]).
    #[serde(skip)]
    pub message: Option<String>,
}

impl LogEntry {
    /// Where a page that ends with it goes on.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            received_at: self.received_at,
            id: self.id,
        }
    }
}

/// A refused call, as a search by `status = rejected` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RejectedEntry {
    /// The source's name.
    pub source: String,
    /// Received, ms.
    pub received_at: i64,
    /// Always `rejected`.
    pub status: &'static str,
    /// The core's code.
    pub code: String,
    /// The core's message.
    pub reason: String,
    /// The row's id, for the cursor.
    #[serde(skip)]
    pub id: i64,
}

impl RejectedEntry {
    /// Where a page that ends with it goes on.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            received_at: self.received_at,
            id: self.id,
        }
    }
}

/// One stored call with what its delivery kept: the message, the core's
/// saved state (while it is pending) and its outcome record (once it is
/// finished), whose logs hold its attempts.
#[derive(Debug, Clone)]
pub struct LoggedCall {
    /// What a search lists.
    pub entry: LogEntry,
    /// The stored message.
    pub message: String,
    /// The core's saved delivery state.
    pub state: Option<String>,
    /// The outcome record.
    pub outcome: Option<String>,
    /// The batch it waits or went in, if its destination packs calls.
    pub batch: Option<String>,
    /// For a row of a batch that is not the batch's lead: the lead's saved
    /// state or outcome record, which holds the attempts of the whole
    /// batch (each of its rows would otherwise keep a copy).
    pub batch_log: Option<String>,
}

/// A page of a search: its rows and, when there may be more, where the
/// next page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The rows, newest first.
    pub rows: Vec<T>,
    /// Pass back for the next page.
    pub next: Option<Cursor>,
}

impl<T> Page<T> {
    /// A page of `rows`, read with one row more than `limit` asked for: that
    /// row, if it came, only says there is a next page.
    pub fn of(mut rows: Vec<T>, limit: usize, at: impl Fn(&T) -> Cursor) -> Self {
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = if more { rows.last().map(at) } else { None };
        Self { rows, next }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_writes_and_nothing_else() {
        let c = Cursor {
            received_at: 1_700_000_000_000,
            id: 42,
        };
        assert_eq!(Cursor::parse(&c.to_string()), Some(c));
        for bad in ["", "1", "1.", ".1", "a.1", "1.b", "1.2.3"] {
            assert_eq!(Cursor::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_page_says_there_is_more_only_when_the_extra_row_came() {
        let at = |n: &i64| Cursor {
            received_at: *n,
            id: *n,
        };
        let p = Page::of(vec![5, 4, 3], 2, at);
        assert_eq!(p.rows, vec![5, 4]);
        assert_eq!(p.next, Some(at(&4)));
        let p = Page::of(vec![5, 4], 2, at);
        assert_eq!(p.next, None);
    }
}
