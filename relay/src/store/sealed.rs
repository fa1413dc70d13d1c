//! Calls sealed at rest: with `CALLPOST_RELAY_SECRET_KEY`, the relay's
//! store is [`Sealed`] over the databases' own.
//!
//! * **What is sealed**, per row, under the current key
//!   ([`crate::seal::SealKey`], ChaCha20-Poly1305, the column's name as the
//!   associated data): a call's message, its saved state and its outcome
//!   (the attempts' log and the answers' starts), and a refused call's
//!   text. Each value names its key's id, so a rotation knows what it has
//!   left to do.
//! * **What is searched**: `user_id`, `anonymous_id` and `event` are kept
//!   as keyed hashes (HMAC-SHA256), so the log's searches by an exact id or
//!   event still use their indexes: a search hashes what it looks for and
//!   matches the hash and the plain value (a call stored before sealing
//!   keeps the plain one until [`reseal`] passes). The rows a search lists
//!   show the fields from the opened message.
//! * **The hashes' key** is derived once and kept: a database's first relay
//!   with a key stores the key derived from it in `meta`
//!   ([`HASH_KEY_SETTING`]), sealed; every relay after reads it, and a
//!   rotation seals it again. The hashes (of the calls, the suppressions,
//!   the deletion records) stay the same across rotations, so a suppression
//!   outlives a key.
//! * **Kept plain**: a call's source, messageId, type, times, status and
//!   counts (the queue runs on them, and deduplication needs the
//!   messageId), an audience's members (left alone: an audience sync
//!   compares its state as stored), refused calls' reasons.
//! * **A rotation** ([`reseal`]): every relay runs with the new key and
//!   the old one in `CALLPOST_RELAY_PREVIOUS_SECRET_KEYS`; `callpost-relay
//!   reseal` reads the rows in id order, a page at a time, seals again
//!   whatever is not sealed under the current key (plain values too) and
//!   writes each only where the row still holds what it read, so a finish
//!   or a deletion meanwhile wins and the next pass takes it. Its place is
//!   kept in `meta`, so a stopped run goes on where it was.

use super::*;
use crate::seal::{is_sealed, SealError, SealKey};
use base64::Engine as _;
use ring::hmac;

/// The `meta` key the user hashes' key is kept under, sealed.
pub const HASH_KEY_SETTING: &str = "user_hash_key";

/// The `meta` key a rotation keeps its place under: the key id it seals
/// with, the table and the last id done.
pub const RESEAL_SETTING: &str = "reseal";

/// Rows a rotation reads and writes at once: a write of this many rows
/// holds ingest up for a few milliseconds at most.
pub const RESEAL_PAGE: usize = 500;

/// The refused calls a deletion opens at once to look for the user.
const ERASE_PAGE: usize = 1_000;

/// The associated data of each sealed column.
const MESSAGE: &str = "message";
const STATE: &str = "state";
const OUTCOME: &str = "outcome";
const REJECTED: &str = "rejected";

/// The key of the user hashes and the keys that seal.
pub struct Sealer {
    keys: Arc<SealKey>,
    hashes: hmac::Key,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("key", &self.keys.id())
            .finish_non_exhaustive()
    }
}

fn refused(e: &SealError) -> StoreError {
    match e {
        SealError::NoRandomness => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Refused(e.to_string()),
    }
}

impl Sealer {
    /// Reads the hashes' key from `store` (the home group's `meta`), or
    /// keeps the first one there.
    pub async fn load(store: &dyn Store, keys: Arc<SealKey>) -> Result<Self, StoreError> {
        let b64 = base64::engine::general_purpose::STANDARD;
        loop {
            match store.setting(HASH_KEY_SETTING).await? {
                Some(kept) => {
                    let text = keys.open(HASH_KEY_SETTING, &kept).map_err(|_| {
                        StoreError::Refused(format!(
                            "the database's key of the user hashes does not open with this \
                             relay's {} or {} (every relay on one database needs the same keys)",
                            crate::seal::SECRET_KEY_VAR,
                            crate::seal::PREVIOUS_KEYS_VAR
                        ))
                    })?;
                    let bytes = b64.decode(text).map_err(|_| {
                        StoreError::Refused("the key of the user hashes is damaged".into())
                    })?;
                    return Ok(Self {
                        hashes: hmac::Key::new(hmac::HMAC_SHA256, &bytes),
                        keys,
                    });
                }
                None => {
                    let first = keys.first_ids_key();
                    let sealed = keys
                        .seal(HASH_KEY_SETTING, &b64.encode(first))
                        .map_err(|e| refused(&e))?;
                    match store.swap_setting(HASH_KEY_SETTING, None, sealed).await {
                        // Two relays at once: the loser reads the winner's.
                        Ok(()) | Err(StoreError::Conflict(_)) => continue,
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// The keys that seal and open.
    pub fn keys(&self) -> &SealKey {
        &self.keys
    }

    /// The keyed hash a user id is kept as (HMAC-SHA256, hex): the same on
    /// every relay of the database, whatever key it seals with.
    pub fn user_hash(&self, id: &str) -> String {
        hex::encode(hmac::sign(&self.hashes, id.as_bytes()).as_ref())
    }

    /// The keyed hash an event is kept as: apart from the ids' (a zero byte
    /// and a label first), so an event and an id of one text differ.
    fn event_hash(&self, event: &str) -> String {
        let mut ctx = hmac::Context::with_key(&self.hashes);
        ctx.update(b"event\0");
        ctx.update(event.as_bytes());
        hex::encode(ctx.sign().as_ref())
    }

    fn seal(&self, name: &str, plain: &str) -> Result<String, StoreError> {
        self.keys.seal(name, plain).map_err(|e| refused(&e))
    }

    /// `text` opened, or as it is when it was stored plain.
    fn open(&self, name: &str, text: String) -> Result<String, StoreError> {
        if !is_sealed(&text) {
            return Ok(text);
        }
        self.keys.open(name, &text).map_err(|_| {
            let id = text.split('.').nth(1).unwrap_or("?");
            StoreError::Refused(format!(
                "a stored {name} sealed under key {id} does not open with this relay's keys: \
                 give it in {} or {}",
                crate::seal::SECRET_KEY_VAR,
                crate::seal::PREVIOUS_KEYS_VAR
            ))
        })
    }

    fn open_opt(&self, name: &str, text: Option<String>) -> Result<Option<String>, StoreError> {
        text.map(|t| self.open(name, t)).transpose()
    }

    fn seal_opt(&self, name: &str, text: &mut Option<String>) -> Result<(), StoreError> {
        if let Some(t) = text.as_mut().filter(|t| !is_sealed(t)) {
            *t = self.seal(name, t)?;
        }
        Ok(())
    }

    fn seal_row(&self, row: &mut Row) -> Result<(), StoreError> {
        row.message = self.seal(MESSAGE, &row.message)?;
        for id in [&mut row.user_id, &mut row.anonymous_id]
            .into_iter()
            .flatten()
        {
            *id = self.user_hash(id);
        }
        if let Some(e) = row.event.as_mut() {
            *e = self.event_hash(e);
        }
        Ok(())
    }

    fn seal_rows(&self, rows: &mut [Row], rejected: &mut [RejectedRow]) -> Result<(), StoreError> {
        for r in rows {
            self.seal_row(r)?;
        }
        for r in rejected {
            r.text = self.seal(REJECTED, &r.text)?;
        }
        Ok(())
    }

    fn seal_finish(&self, f: &mut Finish) -> Result<(), StoreError> {
        match f {
            Finish::Delivered { outcome, .. } => self.seal_opt(OUTCOME, outcome),
            Finish::Retry { state, .. } => self.seal_opt(STATE, state),
            Finish::Dead { state, outcome, .. } => {
                self.seal_opt(STATE, state)?;
                *outcome = self.seal(OUTCOME, outcome)?;
                Ok(())
            }
            Finish::Undeliverable { outcome, .. } | Finish::Filtered { outcome, .. } => {
                *outcome = self.seal(OUTCOME, outcome)?;
                Ok(())
            }
            Finish::Forget { .. } | Finish::Release { .. } => Ok(()),
        }
    }

    /// `filter` as the sealed columns are matched: with the hashes of what
    /// it looks for, and the messages read to show the fields.
    fn keyed(&self, mut filter: LogFilter) -> LogFilter {
        filter.hashed = [
            filter.user_id.as_deref().map(|u| self.user_hash(u)),
            filter.anonymous_id.as_deref().map(|a| self.user_hash(a)),
            filter.event.as_deref().map(|e| self.event_hash(e)),
        ];
        filter
    }

    /// A listed call's fields from its opened message, where it was sealed
    /// (a column left empty, as a delete notification's, stays empty).
    fn open_entry(&self, e: &mut LogEntry) -> Result<(), StoreError> {
        let Some(message) = e.message.take().filter(|m| is_sealed(m)) else {
            return Ok(());
        };
        let call: serde_json::Value =
            serde_json::from_str(&self.open(MESSAGE, message)?).unwrap_or_default();
        let field = |name: &str| match call.get(name) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(n @ serde_json::Value::Number(_)) => Some(n.to_string()),
            _ => None,
        };
        for (column, name) in [
            (&mut e.user_id, "userId"),
            (&mut e.anonymous_id, "anonymousId"),
            (&mut e.event, "event"),
        ] {
            if column.is_some() {
                *column = field(name);
            }
        }
        Ok(())
    }

    /// `row` sealed under the current key, or `None` when it is already.
    /// A search column of a row stored plain becomes its hash; one of a
    /// sealed row already is one (the hashes' key never changes).
    pub fn resealed(&self, table: SealTable, row: SealRow) -> Result<Option<Resealed>, StoreError> {
        let names = match table {
            SealTable::Calls => [MESSAGE, STATE, OUTCOME],
            SealTable::Rejected => [REJECTED, STATE, OUTCOME],
        };
        let done = row.texts.iter().flatten().all(|t| self.keys.sealed_now(t));
        if done {
            return Ok(None);
        }
        let was_plain = row.texts[0].as_deref().is_some_and(|m| !is_sealed(m));
        let mut texts = row.texts.clone();
        for (text, name) in texts.iter_mut().zip(names) {
            if let Some(t) = text.take() {
                *text = Some(self.seal(name, &self.open(name, t)?)?);
            }
        }
        let [u, a, e] = row.keys;
        let keys = if was_plain && table == SealTable::Calls {
            [
                u.map(|u| self.user_hash(&u)),
                a.map(|a| self.user_hash(&a)),
                e.map(|e| self.event_hash(&e)),
            ]
        } else {
            [u, a, e]
        };
        Ok(Some(Resealed {
            id: row.id,
            read: row.texts,
            texts,
            keys,
        }))
    }
}

/// The store sealed: what goes in is sealed, what comes out opened.
pub struct Sealed {
    inner: Arc<dyn Store>,
    sealer: Arc<Sealer>,
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealed")
            .field("inner", &self.inner)
            .field("sealer", &self.sealer)
            .finish()
    }
}

/// `store` sealed under `keys`, and its sealer (for the user hashes).
pub async fn wrap(
    store: Arc<dyn Store>,
    keys: Arc<SealKey>,
) -> Result<(Arc<dyn Store>, Arc<Sealer>), StoreError> {
    let sealer = Arc::new(Sealer::load(store.as_ref(), keys).await?);
    let sealed: Arc<dyn Store> = Arc::new(Sealed {
        inner: store,
        sealer: Arc::clone(&sealer),
    });
    Ok((sealed, sealer))
}

/// Refuses a relay without a key over a database whose calls are sealed
/// (a relay with a key kept the hashes' key there): it could neither send
/// a sealed call nor find one, and its calls would be stored plain.
pub async fn refuse_without_key(store: &dyn Store) -> Result<(), StoreError> {
    match store.setting(HASH_KEY_SETTING).await? {
        Some(_) => Err(StoreError::Refused(format!(
            "this database's calls are sealed: set {} (the key the other relays have)",
            crate::seal::SECRET_KEY_VAR
        ))),
        None => Ok(()),
    }
}

/// How far a rotation has come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Resealing {
    /// Rows read.
    pub read: u64,
    /// Rows sealed again.
    pub sealed: u64,
    /// Rows that changed between the read and the write (taken again by
    /// the next pass).
    pub changed: u64,
}

/// Where a rotation is, as kept in `meta`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Place {
    key: String,
    table: String,
    after: i64,
}

/// Seals again, under the current key, every row of `store` (the store
/// below [`Sealed`]) that is plain or sealed under another key, then the
/// hashes' key; goes on from the place a stopped run kept. Passes until a
/// pass finds nothing to do, so rows that changed under a pass are taken
/// by the next. `progress` hears after each page.
pub async fn reseal(
    store: &dyn Store,
    sealer: &Sealer,
    mut progress: impl FnMut(&Resealing) + Send,
) -> Result<Resealing, StoreError> {
    let key = sealer.keys.id().to_owned();
    let mut done = Resealing::default();
    let kept = store.setting(RESEAL_SETTING).await?;
    let mut place = kept
        .as_deref()
        .and_then(|t| serde_json::from_str::<Place>(t).ok())
        .filter(|p| p.key == key)
        .unwrap_or(Place {
            key: key.clone(),
            table: "calls".into(),
            after: 0,
        });
    let mut stored = kept;
    loop {
        let mut changed_in_pass = 0;
        for (table, name) in [
            (SealTable::Calls, "calls"),
            (SealTable::Rejected, "rejected"),
        ] {
            if place.table != name {
                continue;
            }
            loop {
                let rows = store.sealable(table, place.after, RESEAL_PAGE).await?;
                let Some(last) = rows.last().map(|r| r.id) else {
                    break;
                };
                done.read += rows.len() as u64;
                let mut writes = Vec::new();
                for r in rows {
                    if let Some(w) = sealer.resealed(table, r)? {
                        writes.push(w);
                    }
                }
                let wanted = writes.len() as u64;
                let written = store.reseal(table, writes).await?;
                done.sealed += written;
                done.changed += wanted - written.min(wanted);
                changed_in_pass += wanted - written.min(wanted);
                place.after = last;
                let text = serde_json::to_string(&place).unwrap_or_default();
                store
                    .swap_setting(RESEAL_SETTING, stored.take(), text.clone())
                    .await?;
                stored = Some(text);
                progress(&done);
            }
            if name == "calls" {
                place.table = "rejected".into();
                place.after = 0;
            }
        }
        // The hashes' key, under the current key.
        let kept = store.setting(HASH_KEY_SETTING).await?;
        if let Some(k) = kept.clone().filter(|k| !sealer.keys.sealed_now(k)) {
            let opened = sealer
                .keys
                .open(HASH_KEY_SETTING, &k)
                .map_err(|e| refused(&e))?;
            let again = sealer.seal(HASH_KEY_SETTING, &opened)?;
            store.swap_setting(HASH_KEY_SETTING, kept, again).await?;
        }
        if changed_in_pass == 0 {
            let text = serde_json::to_string(&Place {
                key: key.clone(),
                table: "done".into(),
                after: 0,
            })
            .unwrap_or_default();
            store.swap_setting(RESEAL_SETTING, stored, text).await?;
            return Ok(done);
        }
        place = Place {
            key: key.clone(),
            table: "calls".into(),
            after: 0,
        };
    }
}

#[async_trait]
impl Store for Sealed {
    fn migrated(&self) -> (i64, i64) {
        self.inner.migrated()
    }

    fn backlog(&self) -> usize {
        self.inner.backlog()
    }

    fn healthy(&self) -> bool {
        self.inner.healthy()
    }

    fn group_health(&self) -> Vec<(String, bool)> {
        self.inner.group_health()
    }

    async fn insert(
        &self,
        mut rows: Vec<Row>,
        mut rejected: Vec<RejectedRow>,
    ) -> Result<usize, StoreError> {
        self.sealer.seal_rows(&mut rows, &mut rejected)?;
        self.inner.insert(rows, rejected).await
    }

    async fn insert_traced(
        &self,
        mut rows: Vec<Row>,
        mut rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError> {
        self.sealer.seal_rows(&mut rows, &mut rejected)?;
        self.inner.insert_traced(rows, rejected, trace_parent).await
    }

    async fn claim(
        &self,
        now: i64,
        source: &str,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        let mut claimed = self.inner.claim(now, source, limit, lease_ms).await?;
        for c in &mut claimed {
            c.message = self.sealer.open(MESSAGE, std::mem::take(&mut c.message))?;
            c.state = self.sealer.open_opt(STATE, c.state.take())?;
        }
        Ok(claimed)
    }

    async fn finish(&self, mut items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        for f in &mut items {
            self.sealer.seal_finish(f)?;
        }
        self.inner.finish(items, now).await
    }

    async fn renew(&self, tokens: Vec<i64>, until: i64) -> Result<(), StoreError> {
        self.inner.renew(tokens, until).await
    }

    async fn next_due(&self, now: i64) -> Result<Option<i64>, StoreError> {
        self.inner.next_due(now).await
    }

    async fn park_unrouted(&self, now: i64, routed: Vec<String>) -> Result<u64, StoreError> {
        self.inner.park_unrouted(now, routed).await
    }

    async fn purge_sources(
        &self,
        now: i64,
        retention: Retention,
        sources: Vec<(String, Retention)>,
    ) -> Result<Purged, StoreError> {
        self.inner.purge_sources(now, retention, sources).await
    }

    async fn replay(&self, now: i64, mut filter: ReplayFilter) -> Result<u64, StoreError> {
        filter.calls = self.sealer.keyed(filter.calls);
        self.inner.replay(now, filter).await
    }

    async fn replayable(&self, mut filter: ReplayFilter) -> Result<u64, StoreError> {
        filter.calls = self.sealer.keyed(filter.calls);
        self.inner.replayable(filter).await
    }

    async fn search(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<LogEntry>, StoreError> {
        let mut filter = self.sealer.keyed(filter);
        filter.with_message = true;
        let mut page = self.inner.search(filter, after, limit).await?;
        for e in &mut page.rows {
            self.sealer.open_entry(e)?;
        }
        Ok(page)
    }

    async fn search_rejected(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<RejectedEntry>, StoreError> {
        self.inner.search_rejected(filter, after, limit).await
    }

    async fn logged_call(
        &self,
        source: String,
        message_id: String,
        destination: Option<String>,
    ) -> Result<Option<LoggedCall>, StoreError> {
        let Some(mut call) = self
            .inner
            .logged_call(source, message_id, destination)
            .await?
        else {
            return Ok(None);
        };
        let s = &self.sealer;
        call.entry.message = Some(call.message.clone());
        s.open_entry(&mut call.entry)?;
        call.message = s.open(MESSAGE, std::mem::take(&mut call.message))?;
        call.state = s.open_opt(STATE, call.state.take())?;
        call.outcome = s.open_opt(OUTCOME, call.outcome.take())?;
        // A batch's log is its lead's state, else its outcome.
        call.batch_log = match call.batch_log.take() {
            Some(log) => Some(
                s.open(STATE, log.clone())
                    .or_else(|_| s.open(OUTCOME, log))?,
            ),
            None => None,
        };
        Ok(Some(call))
    }

    async fn stats(&self, now: i64) -> Result<Stats, StoreError> {
        self.inner.stats(now).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let mut dead = self.inner.dead_letters(limit).await?;
        for d in &mut dead {
            d.outcome = self.sealer.open_opt(OUTCOME, d.outcome.take())?;
        }
        Ok(dead)
    }

    async fn rejected(&self, limit: usize) -> Result<Vec<RejectedRecord>, StoreError> {
        let mut rejected = self.inner.rejected(limit).await?;
        for r in &mut rejected {
            r.text = self.sealer.open(REJECTED, std::mem::take(&mut r.text))?;
        }
        Ok(rejected)
    }

    async fn audience_state(
        &self,
        source: &str,
        audience: &str,
    ) -> Result<Option<String>, StoreError> {
        self.inner.audience_state(source, audience).await
    }

    async fn audience_sync(
        &self,
        source: &str,
        audience: &str,
        read: Option<String>,
        state: String,
        mut rows: Vec<Row>,
        now: i64,
    ) -> Result<usize, StoreError> {
        self.sealer.seal_rows(&mut rows, &mut [])?;
        self.inner
            .audience_sync(source, audience, read, state, rows, now)
            .await
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    async fn heartbeat(&self, relay: &str, now: i64, expired: i64) -> Result<u32, StoreError> {
        self.inner.heartbeat(relay, now, expired).await
    }

    async fn disabled_endpoints(&self) -> Result<Vec<String>, StoreError> {
        self.inner.disabled_endpoints().await
    }

    async fn set_endpoint_disabled(
        &self,
        url: &str,
        disabled: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        self.inner.set_endpoint_disabled(url, disabled, now).await
    }

    async fn holds(&self, now: i64) -> Result<Vec<(String, Hold)>, StoreError> {
        self.inner.holds(now).await
    }

    async fn put_hold(&self, url: &str, hold: Hold) -> Result<(), StoreError> {
        self.inner.put_hold(url, hold).await
    }

    async fn stored_sources(&self) -> Result<StoredSources, StoreError> {
        self.inner.stored_sources().await
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        self.inner.refresh().await
    }

    async fn write_sources(
        &self,
        version: i64,
        put: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), StoreError> {
        self.inner.write_sources(version, put, remove).await
    }

    /// The calls kept under the id and under its hash, the refused calls
    /// whose plain text names it, then those whose sealed text does (each
    /// opened: a refused call was never parsed, so its text is all there
    /// is).
    async fn erase_user(&self, id: &str) -> Result<Erased, StoreError> {
        let plain = self.inner.erase_user(id).await?;
        let hashed = self.inner.erase_user(&self.sealer.user_hash(id)).await?;
        let needle = serde_json::to_string(id).unwrap_or_default();
        let mut after = 0;
        let mut found = Vec::new();
        loop {
            let rows = self
                .inner
                .sealable(SealTable::Rejected, after, ERASE_PAGE)
                .await?;
            let Some(last) = rows.last().map(|r| r.id) else {
                break;
            };
            for r in rows {
                if let Some(text) = r.texts[0].clone().filter(|t| is_sealed(t)) {
                    if self.sealer.open(REJECTED, text)?.contains(&needle) {
                        found.push(r.id);
                    }
                }
            }
            after = last;
        }
        let sealed = self.inner.erase_rejected(found).await?;
        Ok(Erased {
            calls: plain.calls + hashed.calls,
            rejected: plain.rejected + hashed.rejected + sealed,
        })
    }

    async fn sealable(
        &self,
        table: SealTable,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SealRow>, StoreError> {
        self.inner.sealable(table, after, limit).await
    }

    async fn reseal(&self, table: SealTable, rows: Vec<Resealed>) -> Result<u64, StoreError> {
        self.inner.reseal(table, rows).await
    }

    async fn erase_rejected(&self, ids: Vec<i64>) -> Result<u64, StoreError> {
        self.inner.erase_rejected(ids).await
    }

    async fn record_deletion(&self, record: Deletion) -> Result<(), StoreError> {
        self.inner.record_deletion(record).await
    }

    async fn deletions(&self, limit: usize) -> Result<Vec<Deletion>, StoreError> {
        self.inner.deletions(limit).await
    }

    async fn suppressions(&self) -> Result<Vec<String>, StoreError> {
        self.inner.suppressions().await
    }

    async fn set_suppressed(
        &self,
        user_hash: &str,
        suppressed: bool,
        now: i64,
        operator: &str,
    ) -> Result<bool, StoreError> {
        self.inner
            .set_suppressed(user_hash, suppressed, now, operator)
            .await
    }

    async fn setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.inner.setting(key).await
    }

    async fn swap_setting(
        &self,
        key: &str,
        read: Option<String>,
        value: String,
    ) -> Result<(), StoreError> {
        self.inner.swap_setting(key, read, value).await
    }

    async fn known(
        &self,
        source: &str,
        message_ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.known(source, message_ids).await
    }

    fn statements(&self) -> u64 {
        self.inner.statements()
    }

    fn wal_bytes(&self) -> Option<u64> {
        self.inner.wal_bytes()
    }

    fn conflicts(&self) -> u64 {
        self.inner.conflicts()
    }

    fn set_commit_observer(&self, observer: CommitObserver) {
        self.inner.set_commit_observer(observer);
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}
