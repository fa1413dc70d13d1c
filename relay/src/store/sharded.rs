//! Shard groups: several databases as one [`Store`].
//!
//! Each group is a database of its own (a Postgres primary with its
//! standbys, or a single server), with the whole schema. A call goes to the
//! group its slot is mapped to (`callpost_core::shard`: a hash of its
//! source and user), so a call sent again lands where it was stored and is
//! deduplicated there, and all of a call's rows (one per destination) are
//! in one group, counted once. What is not spread lives in the **home**
//! group, the relay's `database`: sources, disabled endpoints and holds,
//! heartbeats, audiences (and the identify calls an audience sync stores
//! with its state, in one transaction), refused calls, and the slot map in
//! force.
//!
//! * **Ids.** A row's id outside is `id * MAX_GROUPS + group`, so a finish,
//!   a cursor or a claim names its group. With one group, ids are the
//!   database's own.
//! * **Claims** start at the next group in turn and take from each until
//!   the limit is met; a group whose claim failed is passed by for
//!   [`PASS_FAILED_MS`], so one group's outage delays the others'
//!   deliveries by one timed-out claim a second at most, never stops them.
//! * **Reads** (searches, counts, dead letters, replays, purges) ask every
//!   group at once and merge: a search keeps its order and its cursor
//!   across groups.
//! * **Ingest** splits a request's calls by group and stores each part at
//!   once; the request is acknowledged when every part is durable. A group
//!   that fails fails the request (503, the SDK sends it again, and the
//!   groups that stored their part deduplicate it): a batch holds many
//!   users, so a group's outage refuses most batches until its failover
//!   ends, and nothing acknowledged is lost. Storing a failed group's calls
//!   elsewhere would answer 200, but a call sent again would then land in
//!   its own group and be delivered twice.
//! * **Moves.** Rows never move. For a day after a slot moved
//!   ([`callpost_core::shard::MOVE_WINDOW_MS`]), its earlier groups are
//!   asked which calls they already hold before the new group stores them.
//! * **The map in force** is kept in the home group ([`SLOT_MAP_KEY`]). A
//!   relay opens with the configured map if it is the same or newer
//!   (recording the moves); it reads the map again with the sources'
//!   poll ([`Store::refresh`]), and if another relay has put a newer one
//!   in force, this relay refuses the calls whose slots moved (503) until it
//!   runs with the new configuration: it does not know the new group, and
//!   storing them in the old one would break deduplication.
//! * **Health** is ready while any group is: every relay sees the same
//!   groups, and a load balancer that took them all out of service for one
//!   group's outage would refuse every user's calls, not one group's.

use super::*;
use callpost_core::shard::{self as slots, SlotMap, MAX_GROUPS};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::RwLock;

/// The `meta` key the map in force is kept under, in the home group.
pub const SLOT_MAP_KEY: &str = "slot_map";

/// How long claims pass by a group whose claim failed: a second, so a
/// group that is down costs the others one timed-out claim a second.
pub const PASS_FAILED_MS: i64 = 1_000;

/// `MAX_GROUPS` as an id factor.
const M: i64 = MAX_GROUPS as i64;

/// Several groups as one store.
pub struct Sharded {
    /// By the map's group index: home first.
    groups: Vec<Arc<dyn Store>>,
    map: SlotMap,
    /// A newer map another relay put in force, once the poll saw it.
    newer: RwLock<Option<SlotMap>>,
    turn: AtomicUsize,
    passed_until: Vec<AtomicI64>,
}

impl fmt::Debug for Sharded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sharded")
            .field("groups", &self.map.groups())
            .field("version", &self.map.version())
            .finish_non_exhaustive()
    }
}

/// The map in force in `home`'s database, and the text it is kept as.
async fn kept_map(home: &dyn Store) -> Result<(SlotMap, Option<String>), StoreError> {
    let text = home.setting(SLOT_MAP_KEY).await?;
    let map = match &text {
        Some(t) => SlotMap::from_json(t).map_err(|e| StoreError::Refused(e.to_string()))?,
        None => SlotMap::single(),
    };
    Ok((map, text))
}

/// Puts `map` in force over the groups (home first, as `map` names them),
/// or refuses: a newer map is in force, or the same version with other
/// slots. The moves are recorded at `now`, ms.
pub async fn open(
    map: SlotMap,
    groups: Vec<Arc<dyn Store>>,
    now: i64,
) -> Result<Arc<dyn Store>, StoreError> {
    if groups.len() != map.groups().len() || groups.is_empty() {
        return Err(StoreError::Refused(format!(
            "{} databases for the {} groups of the slot map",
            groups.len(),
            map.groups().len()
        )));
    }
    let home = Arc::clone(&groups[0]);
    // Two relays opening at once: the loser of the swap reads again.
    let in_force = loop {
        let (kept, text) = kept_map(home.as_ref()).await?;
        match map.succeed(&kept, now) {
            Err(e) => return Err(StoreError::Refused(e.to_string())),
            Ok(None) => break kept,
            Ok(Some(next)) => match home.swap_setting(SLOT_MAP_KEY, text, next.to_json()).await {
                Ok(()) => {
                    tracing::info!(
                        version = next.version(),
                        moves = next.moves().len(),
                        "slot map put in force"
                    );
                    break next;
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(e),
            },
        }
    };
    let passed_until = groups.iter().map(|_| AtomicI64::new(0)).collect();
    Ok(Arc::new(Sharded {
        groups,
        map: in_force,
        newer: RwLock::new(None),
        turn: AtomicUsize::new(0),
        passed_until,
    }))
}

impl Sharded {
    fn single(&self) -> bool {
        self.groups.len() == 1
    }

    fn home(&self) -> &Arc<dyn Store> {
        &self.groups[0]
    }

    /// The id outside of row `id` of group `g`.
    fn outside(&self, id: i64, g: usize) -> i64 {
        if self.single() {
            id
        } else {
            id.saturating_mul(M).saturating_add(g as i64)
        }
    }

    /// The group and its own id of an id outside.
    fn inside(&self, id: i64) -> (usize, i64) {
        if self.single() {
            (0, id)
        } else {
            (id.rem_euclid(M) as usize, id.div_euclid(M))
        }
    }

    /// Where a search goes on in group `g` after `c` (an outside cursor):
    /// the rows of `g` whose outside `(received_at, id)` is below `c`'s are
    /// those whose own id is below `ceil((c.id - g) / M)`.
    fn cursor_in(&self, c: Cursor, g: usize) -> Cursor {
        if self.single() {
            return c;
        }
        let x = c.id.saturating_sub(g as i64);
        Cursor {
            received_at: c.received_at,
            id: x.saturating_add(M - 1).div_euclid(M),
        }
    }

    fn slot_of(row: &Row) -> u16 {
        slots::slot_of(
            &row.source,
            row.user_id.as_deref(),
            row.anonymous_id.as_deref(),
            &row.message_id,
        )
    }

    /// Each group's share of `rows`, by group index.
    fn split(&self, rows: Vec<Row>) -> Result<BTreeMap<usize, Vec<Row>>, StoreError> {
        let newer = self
            .newer
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut parts: BTreeMap<usize, Vec<Row>> = BTreeMap::new();
        for row in rows {
            let slot = Self::slot_of(&row);
            let g = self.map.group_of(slot);
            if let Some(newer) = newer.as_ref() {
                if newer.groups()[newer.group_of(slot)] != self.map.groups()[g] {
                    return Err(StoreError::Unavailable(format!(
                        "the database's slot map (version {}) moved slot {slot} from this \
                         relay's (version {}): restart the relay with the configuration that has it",
                        newer.version(),
                        self.map.version()
                    )));
                }
            }
            parts.entry(g).or_default().push(row);
        }
        Ok(parts)
    }

    /// Drops from `rows` (group `g`'s) the calls a moved slot's earlier
    /// group already holds.
    async fn not_held_before(&self, g: usize, rows: Vec<Row>) -> Result<Vec<Row>, StoreError> {
        if self.map.moves().is_empty() {
            return Ok(rows);
        }
        // (earlier group, source) → message ids to ask about.
        let mut ask: BTreeMap<(usize, String), HashSet<String>> = BTreeMap::new();
        for row in &rows {
            let slot = Self::slot_of(row);
            for earlier in self.map.earlier_groups(slot, row.received_at) {
                let Some(e) = self.map.groups().iter().position(|n| n == earlier) else {
                    continue;
                };
                if e != g {
                    ask.entry((e, row.source.clone()))
                        .or_default()
                        .insert(row.message_id.clone());
                }
            }
        }
        if ask.is_empty() {
            return Ok(rows);
        }
        let asked = ask.into_iter().map(|((e, source), ids)| async move {
            let held = self.groups[e]
                .known(&source, ids.into_iter().collect())
                .await?;
            Ok::<_, StoreError>(held.into_iter().map(move |m| (source.clone(), m)))
        });
        let mut held: HashSet<(String, String)> = HashSet::new();
        for found in futures_util::future::join_all(asked).await {
            held.extend(found?);
        }
        Ok(rows
            .into_iter()
            .filter(|r| !held.contains(&(r.source.clone(), r.message_id.clone())))
            .collect())
    }

    async fn insert_split(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError> {
        if self.single() && self.newer_is_none() {
            return self
                .home()
                .insert_traced(rows, rejected, trace_parent)
                .await;
        }
        let mut parts = self.split(rows)?;
        // Refused calls are kept at home, with home's share of the calls.
        if !rejected.is_empty() {
            parts.entry(0).or_default();
        }
        let mut rejected = Some(rejected);
        let stores = parts.into_iter().map(|(g, rows)| {
            let rejected = if g == 0 {
                rejected.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            let trace_parent = trace_parent.clone();
            async move {
                let rows = self.not_held_before(g, rows).await?;
                self.groups[g]
                    .insert_traced(rows, rejected, trace_parent)
                    .await
                    .map_err(|e| self.named(g, e))
            }
        });
        let mut new = 0;
        let mut failed = None;
        for stored in futures_util::future::join_all(stores).await {
            match stored {
                Ok(n) => new += n,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(new), Err)
    }

    fn newer_is_none(&self) -> bool {
        self.newer
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none()
    }

    /// Runs `f` on every group at once; each group's answer, by index, a
    /// failure naming its group.
    async fn each<'a, T, F, Fut>(&'a self, f: F) -> Vec<Result<T, StoreError>>
    where
        F: Fn(usize, &'a Arc<dyn Store>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + 'a,
    {
        let answers = self.groups.iter().enumerate().map(|(g, s)| {
            let asked = f(g, s);
            async move { asked.await.map_err(|e| self.named(g, e)) }
        });
        futures_util::future::join_all(answers).await
    }

    /// `e`, from group `g`, saying which group failed (with several): the
    /// operator's event and the answer name it.
    fn named(&self, g: usize, e: StoreError) -> StoreError {
        if self.single() {
            return e;
        }
        let group = &self.map.groups()[g];
        match e {
            StoreError::Timeout => {
                StoreError::Unavailable(format!("shard group {group:?}: {}", StoreError::Timeout))
            }
            StoreError::Unavailable(m) => {
                StoreError::Unavailable(format!("shard group {group:?}: {m}"))
            }
            other => other,
        }
    }

    /// Every group's answer, or the first failure.
    async fn all<'a, T, F, Fut>(&'a self, f: F) -> Result<Vec<T>, StoreError>
    where
        F: Fn(usize, &'a Arc<dyn Store>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + 'a,
    {
        self.each(f).await.into_iter().collect()
    }
}

#[async_trait]
impl Store for Sharded {
    fn migrated(&self) -> (i64, i64) {
        self.home().migrated()
    }

    fn backlog(&self) -> usize {
        self.groups.iter().map(|g| g.backlog()).sum()
    }

    fn healthy(&self) -> bool {
        self.groups.iter().any(|g| g.healthy())
    }

    fn group_health(&self) -> Vec<(String, bool)> {
        if self.single() {
            return Vec::new();
        }
        let names = self.map.groups().iter();
        names
            .zip(&self.groups)
            .map(|(n, g)| (n.clone(), g.healthy()))
            .collect()
    }

    async fn insert(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
    ) -> Result<usize, StoreError> {
        self.insert_split(rows, rejected, None).await
    }

    async fn insert_traced(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError> {
        self.insert_split(rows, rejected, trace_parent).await
    }

    async fn claim(
        &self,
        now: i64,
        source: &str,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        if self.single() {
            return self.home().claim(now, source, limit, lease_ms).await;
        }
        let n = self.groups.len();
        let first = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        let mut claimed = Vec::new();
        let mut failure = None;
        let mut asked = 0;
        for k in 0..n {
            let g = (first + k) % n;
            if claimed.len() >= limit {
                break;
            }
            if self.passed_until[g].load(Ordering::Relaxed) > now {
                continue;
            }
            asked += 1;
            match self.groups[g]
                .claim(now, source, limit - claimed.len(), lease_ms)
                .await
            {
                Ok(rows) => claimed.extend(rows.into_iter().map(|mut c| {
                    c.id = self.outside(c.id, g);
                    c
                })),
                Err(e) => {
                    self.passed_until[g]
                        .store(now.saturating_add(PASS_FAILED_MS), Ordering::Relaxed);
                    failure = Some(self.named(g, e));
                }
            }
        }
        match failure {
            // Every group asked failed: the caller backs off.
            Some(e) if claimed.is_empty() && asked > 0 => Err(e),
            _ => Ok(claimed),
        }
    }

    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        if self.single() {
            return self.home().finish(items, now).await;
        }
        let mut parts: BTreeMap<usize, Vec<Finish>> = BTreeMap::new();
        for mut item in items {
            let id = item.id_mut();
            let (g, own) = self.inside(*id);
            *id = own;
            parts.entry(g).or_default().push(item);
        }
        let finished = parts.into_iter().map(|(g, items)| async move {
            match self.groups.get(g) {
                Some(store) => store.finish(items, now).await,
                // An id no group gave: refused, as a finish without its token.
                None => Ok(items.len()),
            }
        });
        let mut refused = 0;
        let mut failed = None;
        for done in futures_util::future::join_all(finished).await {
            match done {
                Ok(n) => refused += n,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(refused), Err)
    }

    async fn renew(&self, tokens: Vec<i64>, until: i64) -> Result<(), StoreError> {
        // Tokens are random and unique: each group extends the ones it holds.
        let tokens = &tokens;
        self.all(|_, s| s.renew(tokens.clone(), until))
            .await
            .map(drop)
    }

    async fn next_due(&self, now: i64) -> Result<Option<i64>, StoreError> {
        let answers = self.each(|_, s| s.next_due(now)).await;
        let mut due: Option<i64> = None;
        let mut failure = None;
        let mut ok = false;
        for (g, a) in answers.into_iter().enumerate() {
            match a {
                Ok(d) => {
                    ok = true;
                    due = match (due, d) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(e) => {
                    // Asked again when its claims are.
                    let again = now.saturating_add(PASS_FAILED_MS);
                    self.passed_until[g].fetch_max(again, Ordering::Relaxed);
                    due = Some(due.map_or(again, |d| d.min(again)));
                    failure = Some(e);
                }
            }
        }
        match failure {
            Some(e) if !ok => Err(e),
            _ => Ok(due),
        }
    }

    async fn park_unrouted(&self, now: i64, routed: Vec<String>) -> Result<u64, StoreError> {
        let routed = &routed;
        Ok(self
            .all(|_, s| s.park_unrouted(now, routed.clone()))
            .await?
            .into_iter()
            .sum())
    }

    async fn purge_sources(
        &self,
        now: i64,
        retention: Retention,
        sources: Vec<(String, Retention)>,
    ) -> Result<Purged, StoreError> {
        let sources = &sources;
        let each = self
            .all(|_, s| s.purge_sources(now, retention, sources.clone()))
            .await?;
        Ok(each.into_iter().fold(Purged::default(), |a, b| Purged {
            delivered: a.delivered + b.delivered,
            filtered: a.filtered + b.filtered,
            undeliverable: a.undeliverable + b.undeliverable,
            dead: a.dead + b.dead,
            rejected: a.rejected + b.rejected,
        }))
    }

    async fn replay(&self, now: i64, filter: ReplayFilter) -> Result<u64, StoreError> {
        let filter = &filter;
        Ok(self
            .all(|_, s| s.replay(now, filter.clone()))
            .await?
            .into_iter()
            .sum())
    }

    async fn replayable(&self, filter: ReplayFilter) -> Result<u64, StoreError> {
        let filter = &filter;
        Ok(self
            .all(|_, s| s.replayable(filter.clone()))
            .await?
            .into_iter()
            .sum())
    }

    async fn search(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<LogEntry>, StoreError> {
        if self.single() {
            return self.home().search(filter, after, limit).await;
        }
        let filter = &filter;
        let pages = self
            .all(|g, s| {
                let after = after.map(|c| self.cursor_in(c, g));
                async move {
                    let mut page = s.search(filter.clone(), after, limit).await?;
                    for e in &mut page.rows {
                        e.id = self.outside(e.id, g);
                    }
                    Ok(page)
                }
            })
            .await?;
        let more = pages.iter().any(|p| p.next.is_some());
        let mut rows: Vec<LogEntry> = pages.into_iter().flat_map(|p| p.rows).collect();
        rows.sort_by_key(|e| std::cmp::Reverse((e.received_at, e.id)));
        let mut page = Page::of(rows, limit, LogEntry::cursor);
        if more && page.next.is_none() {
            page.next = page.rows.last().map(LogEntry::cursor);
        }
        Ok(page)
    }

    async fn search_rejected(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<RejectedEntry>, StoreError> {
        self.home().search_rejected(filter, after, limit).await
    }

    async fn logged_call(
        &self,
        source: String,
        message_id: String,
        destination: Option<String>,
    ) -> Result<Option<LoggedCall>, StoreError> {
        let (source, message_id, destination) = (&source, &message_id, &destination);
        let found = self
            .all(|g, s| async move {
                let call = s
                    .logged_call(source.clone(), message_id.clone(), destination.clone())
                    .await?;
                Ok(call.map(|mut c| {
                    c.entry.id = self.outside(c.entry.id, g);
                    c
                }))
            })
            .await?;
        // Its first stored delivery, when a move left copies in two groups.
        Ok(found
            .into_iter()
            .flatten()
            .min_by_key(|c| c.entry.received_at))
    }

    async fn stats(&self, now: i64) -> Result<Stats, StoreError> {
        let each = self.all(|_, s| s.stats(now)).await?;
        let min = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(each.into_iter().fold(Stats::default(), |a, b| Stats {
            pending: a.pending + b.pending,
            in_flight: a.in_flight + b.in_flight,
            delivered: a.delivered + b.delivered,
            dead: a.dead + b.dead,
            undeliverable: a.undeliverable + b.undeliverable,
            filtered: a.filtered + b.filtered,
            rejected: a.rejected + b.rejected,
            oldest_pending_received_at: min(
                a.oldest_pending_received_at,
                b.oldest_pending_received_at,
            ),
            next_due_at: min(a.next_due_at, b.next_due_at),
        }))
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let mut all: Vec<DeadLetter> = self
            .all(|_, s| s.dead_letters(limit))
            .await?
            .into_iter()
            .flatten()
            .collect();
        all.sort_by_key(|d| d.received_at);
        all.truncate(limit);
        Ok(all)
    }

    async fn rejected(&self, limit: usize) -> Result<Vec<RejectedRecord>, StoreError> {
        self.home().rejected(limit).await
    }

    async fn audience_state(
        &self,
        source: &str,
        audience: &str,
    ) -> Result<Option<String>, StoreError> {
        self.home().audience_state(source, audience).await
    }

    async fn audience_sync(
        &self,
        source: &str,
        audience: &str,
        read: Option<String>,
        state: String,
        rows: Vec<Row>,
        now: i64,
    ) -> Result<usize, StoreError> {
        self.home()
            .audience_sync(source, audience, read, state, rows, now)
            .await
    }

    fn shared(&self) -> bool {
        self.home().shared()
    }

    async fn heartbeat(&self, relay: &str, now: i64, expired: i64) -> Result<u32, StoreError> {
        self.home().heartbeat(relay, now, expired).await
    }

    async fn disabled_endpoints(&self) -> Result<Vec<String>, StoreError> {
        self.home().disabled_endpoints().await
    }

    async fn set_endpoint_disabled(
        &self,
        url: &str,
        disabled: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        self.home().set_endpoint_disabled(url, disabled, now).await
    }

    async fn holds(&self, now: i64) -> Result<Vec<(String, Hold)>, StoreError> {
        self.home().holds(now).await
    }

    async fn put_hold(&self, url: &str, hold: Hold) -> Result<(), StoreError> {
        self.home().put_hold(url, hold).await
    }

    async fn stored_sources(&self) -> Result<StoredSources, StoreError> {
        self.home().stored_sources().await
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        let (kept, _) = kept_map(self.home().as_ref()).await?;
        let mut newer = self
            .newer
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.version() > self.map.version() && newer.as_ref() != Some(&kept) {
            tracing::warn!(
                version = kept.version(),
                ours = self.map.version(),
                "another relay put a newer slot map in force: calls in the slots it moved are \
                 refused until this relay runs with the configuration that has it"
            );
            *newer = Some(kept);
        }
        Ok(())
    }

    async fn write_sources(
        &self,
        version: i64,
        put: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), StoreError> {
        self.home().write_sources(version, put, remove).await
    }

    async fn erase_user(&self, id: &str) -> Result<Erased, StoreError> {
        let each = self.all(|_, s| s.erase_user(id)).await?;
        Ok(each.into_iter().fold(Erased::default(), |a, b| Erased {
            calls: a.calls + b.calls,
            rejected: a.rejected + b.rejected,
        }))
    }

    async fn sealable(
        &self,
        table: SealTable,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SealRow>, StoreError> {
        if table == SealTable::Rejected {
            return self.home().sealable(table, after, limit).await;
        }
        // The groups one after the other: `after`'s group from its own id
        // on, then each next group from its start (outside id `g`: group
        // `g`, own id 0).
        let (mut g, mut own) = self.inside(after);
        while g < self.groups.len() {
            let mut rows = self.groups[g]
                .sealable(table, own, limit)
                .await
                .map_err(|e| self.named(g, e))?;
            if !rows.is_empty() {
                for r in &mut rows {
                    r.id = self.outside(r.id, g);
                }
                return Ok(rows);
            }
            g += 1;
            own = 0;
        }
        Ok(Vec::new())
    }

    async fn reseal(&self, table: SealTable, rows: Vec<Resealed>) -> Result<u64, StoreError> {
        if table == SealTable::Rejected {
            return self.home().reseal(table, rows).await;
        }
        let mut by_group: BTreeMap<usize, Vec<Resealed>> = BTreeMap::new();
        for mut r in rows {
            let (g, own) = self.inside(r.id);
            r.id = own;
            by_group.entry(g).or_default().push(r);
        }
        let mut n = 0;
        for (g, rows) in by_group {
            let Some(store) = self.groups.get(g) else {
                continue;
            };
            n += store
                .reseal(table, rows)
                .await
                .map_err(|e| self.named(g, e))?;
        }
        Ok(n)
    }

    async fn erase_rejected(&self, ids: Vec<i64>) -> Result<u64, StoreError> {
        self.home().erase_rejected(ids).await
    }

    async fn record_deletion(&self, record: Deletion) -> Result<(), StoreError> {
        self.home().record_deletion(record).await
    }

    async fn deletions(&self, limit: usize) -> Result<Vec<Deletion>, StoreError> {
        self.home().deletions(limit).await
    }

    async fn suppressions(&self) -> Result<Vec<String>, StoreError> {
        self.home().suppressions().await
    }

    async fn set_suppressed(
        &self,
        user_hash: &str,
        suppressed: bool,
        now: i64,
        operator: &str,
    ) -> Result<bool, StoreError> {
        self.home()
            .set_suppressed(user_hash, suppressed, now, operator)
            .await
    }

    async fn setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.home().setting(key).await
    }

    async fn swap_setting(
        &self,
        key: &str,
        read: Option<String>,
        value: String,
    ) -> Result<(), StoreError> {
        self.home().swap_setting(key, read, value).await
    }

    async fn known(
        &self,
        source: &str,
        message_ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        let ids = &message_ids;
        let mut found: Vec<String> = self
            .all(|_, s| s.known(source, ids.clone()))
            .await?
            .into_iter()
            .flatten()
            .collect();
        found.sort();
        found.dedup();
        Ok(found)
    }

    fn statements(&self) -> u64 {
        self.groups.iter().map(|g| g.statements()).sum()
    }

    fn wal_bytes(&self) -> Option<u64> {
        self.groups.iter().map(|g| g.wal_bytes()).sum()
    }

    fn conflicts(&self) -> u64 {
        self.groups.iter().map(|g| g.conflicts()).sum()
    }

    fn set_commit_observer(&self, observer: CommitObserver) {
        for g in &self.groups {
            g.set_commit_observer(Arc::clone(&observer));
        }
    }

    async fn close(&self) {
        futures_util::future::join_all(self.groups.iter().map(|g| g.close())).await;
    }
}
