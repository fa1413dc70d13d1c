//! Delivery: claims, leases, the core's `Delivery` rounds, and the HTTP
//! client.
//!
//! A claimed delivery is restored from its saved state (or started from the
//! stored message) and driven as the core says: every request it gives is
//! sent (a parallel round's at once), every answer goes back to it, and
//! when it wants to wait, its state goes back to the store with its next
//! due time. When it ends, the row is finished or becomes a dead letter.
//! Every rule about rounds, retries, `Retry-After` and giving up is the
//! core's.
//!
//! # Fairness
//! One source's backlog or slow receiver must not hold back another's:
//! * claims are made per source, round-robin over the sources with an
//!   enabled destination;
//! * a source holds at most `max(concurrency / sources,
//!   min(concurrency, endpoint_concurrency))` deliveries at once. One
//!   source alone may use every slot; with many, each has at least its
//!   even share, and a source whose receiver hangs holds no more than its
//!   share (or, when shares are small, what its endpoint cap could keep
//!   busy), so the others still claim;
//! * a request waits for a permit of its endpoint URL (at most
//!   `endpoint_concurrency` requests in flight per URL, shared by every
//!   source that posts there) before it is sent, and the receiver's 5 s
//!   start only then ([`http`]);
//! * a 2xx counts as soon as its status line arrives; the answer body is
//!   read afterwards, to a small limit.
//!
//! # Leases
//! A claim leases its rows; a task renews the leases of everything held
//! every quarter lease, so a round that waits for its endpoint's cap or
//! walks several failover endpoints is never taken over while it runs.
//! Results are stored by one task, which writes everything that ended
//! since its last write in one `finish` call; a slot is free again once
//! its result is stored.
//!
//! # Relays on one database
//! Each delivering relay says so every [`SENDER_HEARTBEAT_MS`] and counts
//! those heard from lately (`housekeeping::heartbeat`); its guards take
//! their part of each URL's rate limit and cap (the core's rule,
//! [`callpost_core::protection`]). A relay
//! on a shared database with such limits waits one heartbeat before it
//! first claims, so the others have counted it by then. A pause or an open
//! circuit is written to the database when a guard decides it, read by
//! every relay every [`HOLD_SYNC_MS`], and read before the first claim (so
//! it outlives a restart).

mod batch;
mod connect;
mod http;

pub use self::http::{ANSWER_BODY_TIMEOUT, ANSWER_BYTES, HOLD_AFTER, POOL_IDLE_TIMEOUT};
pub use connect::check_destinations;

use self::http::{Access, AnswerStart, Http};
use crate::state::Relay;
use crate::store::{Claimed, Finish, StoreError};
use crate::trace::{Kind, Span, SpanContext, ATTEMPT_SPAN};
use callpost_core::protection::{EndpointState, Hold, HOLD_SYNC_MS, SENDER_HEARTBEAT_MS};
use callpost_core::{Call, Delivery, DeliveryConfig, DeliveryOutcome, KeyCase, Outcome, Timestamp};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::{JoinError, JoinHandle, JoinSet};
use tokio::time::Instant;

/// Rows per claim: at the benchmark's delivery rate (several thousand a
/// second, BENCHMARKS.md) a handful of claims a second, each one statement
/// and, on SQLite, one commit.
pub const CLAIM_BATCH: usize = 256;

/// The longest the workers sleep without looking at the store again: rows
/// that a CLI replay or another relay made due are picked up within this.
pub const IDLE_POLL: Duration = Duration::from_secs(1);

/// After a store call fails, the workers wait this long before the next.
pub const STORE_BACKOFF: Duration = Duration::from_secs(1);

/// How often pending rows of sources without an enabled destination are
/// set aside as undeliverable (and at start).
pub const PARK_INTERVAL: Duration = Duration::from_secs(60);

/// The delivery workers of one relay.
pub struct Deliverer {
    stop: watch::Sender<Option<Duration>>,
    main: Option<JoinHandle<()>>,
    /// The sender of operational events, when `[operator]` is set.
    events: Option<JoinHandle<()>>,
}

impl Deliverer {
    /// Starts claiming and delivering, on the current tokio runtime. With
    /// `deliver = false` (an ingest-only relay) nothing starts. Fails when
    /// there is no runtime, or `ca_file` cannot be used.
    pub fn start(relay: Arc<Relay>) -> std::io::Result<Self> {
        let (stop, stop_rx) = watch::channel(None);
        if !relay.cfg.deliver {
            return Ok(Self {
                stop,
                main: None,
                events: None,
            });
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let http = Http::new(
            &relay.cfg,
            Arc::clone(&relay.guards),
            Arc::clone(&relay.metrics),
        )?;
        let concurrency = relay.cfg.delivery_concurrency.max(1);
        let shared = Arc::new(Shared {
            book: Mutex::new(Book {
                held: HashMap::new(),
                per_source: HashMap::new(),
                share: concurrency,
            }),
            relay,
            http,
            concurrency,
            freed: Notify::new(),
            closing: AtomicBool::new(false),
        });
        log_lanes(&shared, shared.relay.sources().routed().len());
        let events = shared.relay.operator.clone().map(|op| {
            let relay = &shared.relay;
            let sender = Arc::clone(&shared);
            runtime.spawn(op.run(
                Arc::clone(&relay.clock),
                Arc::clone(&relay.metrics),
                move |request, budget| {
                    let sender = Arc::clone(&sender);
                    async move { sender.http.post(request, budget).await }
                },
            ))
        });
        let main = runtime.spawn(run(shared, stop_rx));
        Ok(Self {
            stop,
            main: Some(main),
            events,
        })
    }

    /// Stops claiming; waits up to `grace` for the attempts in flight to
    /// end and be stored, then gives the rest back (released: they are
    /// claimable again at once, and sent again at the next start).
    pub async fn stop(self, grace: Duration) {
        self.stop.send_replace(Some(grace));
        if let Some(events) = self.events {
            events.abort();
        }
        if let Some(main) = self.main {
            if let Err(e) = main.await {
                tracing::error!("the delivery workers ended abnormally: {e}");
            }
        }
    }
}

/// What the workers hold.
struct Book {
    /// row id → the claim that holds it.
    held: HashMap<i64, Held>,
    /// Deliveries held, by source.
    per_source: HashMap<Arc<str>, usize>,
    /// Deliveries in flight, per source: [`share_of`] the sources routed
    /// now.
    share: usize,
}

#[derive(Clone)]
struct Held {
    claim: i64,
    source: Arc<str>,
}

struct Shared {
    relay: Arc<Relay>,
    http: Http,
    /// Deliveries in flight, all sources together.
    concurrency: usize,
    book: Mutex<Book>,
    /// A result was stored: its slot is free.
    freed: Notify,
    /// Shutting down: the result writer stops retrying.
    closing: AtomicBool,
}

impl Shared {
    fn book(&self) -> MutexGuard<'_, Book> {
        // Every change to the book is made under one lock call, so a
        // poisoned lock still holds consistent data.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many more deliveries `source` may claim now. A claim is a write
    /// (on SQLite a transaction and its fsync), so one for every freed
    /// slot would cost more than the deliveries it starts: a source that
    /// still has deliveries in flight claims again only once a quarter of
    /// its share is free (0 until then).
    fn room(&self, source: &str) -> usize {
        let book = self.book();
        let mine = book.per_source.get(source).copied().unwrap_or(0);
        let own = book.share.saturating_sub(mine);
        let all = self.concurrency.saturating_sub(book.held.len());
        let room = own.min(all);
        let batch = (book.share / 4).clamp(1, CLAIM_BATCH);
        if mine > 0 && room < batch {
            0
        } else {
            room
        }
    }

    fn hold(&self, c: &Claimed, source: &Arc<str>) {
        let mut book = self.book();
        let held = Held {
            claim: c.claim,
            source: Arc::clone(source),
        };
        if book.held.insert(c.id, held).is_none() {
            *book.per_source.entry(Arc::clone(source)).or_default() += 1;
        }
    }

    /// Forgets rows: their results are stored, or they are given up.
    fn let_go(&self, ids: impl IntoIterator<Item = i64>) {
        let mut book = self.book();
        for id in ids {
            if let Some(h) = book.held.remove(&id) {
                if let Some(n) = book.per_source.get_mut(&h.source) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        book.per_source.remove(&h.source);
                    }
                }
            }
        }
        drop(book);
        self.freed.notify_one();
    }

    fn tokens(&self) -> Vec<i64> {
        let mut t: Vec<i64> = self.book().held.values().map(|h| h.claim).collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

/// Deliveries in flight per source when `sources` are routed: one source
/// alone may use every slot; with many, each has at least its even share,
/// or what its endpoint cap could keep busy when shares are small.
fn share_of(concurrency: usize, endpoint_concurrency: usize, sources: usize) -> usize {
    if sources == 0 {
        return concurrency;
    }
    (concurrency / sources)
        .max(concurrency.min(endpoint_concurrency))
        .max(1)
}

fn log_lanes(shared: &Shared, sources: usize) {
    let endpoint = shared.relay.cfg.endpoint_concurrency;
    let share = share_of(shared.concurrency, endpoint, sources);
    tracing::info!(
        "delivering for {sources} sources: {} deliveries at once, at most {share} per source, \
         {endpoint} requests per endpoint URL",
        shared.concurrency,
    );
    // A batch is packed from one claim's rows: its calls are at most a
    // claim's, whatever the destination allows.
    let per_post = CLAIM_BATCH.min(share);
    for source in &shared.relay.sources().list {
        for d in source.enabled() {
            let Some(b) = d.webhooks.batching() else {
                continue;
            };
            if b.max_calls() > per_post {
                tracing::info!(
                    source = %source.name,
                    destination = %d.name,
                    "batches hold at most {per_post} calls (one claim's), under batch \
                     max_calls = {}",
                    b.max_calls()
                );
            }
        }
    }
}

/// Claims, starts deliveries, and at stop winds them down.
async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<Option<Duration>>) {
    let relay = Arc::clone(&shared.relay);
    let (finish_tx, finish_rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(store_results(Arc::clone(&shared), finish_rx));
    let renewer = tokio::spawn(renew_leases(Arc::clone(&shared)));
    // The holds kept from before a restart (or held by other relays) are
    // in force before the first claim: a receiver that asked to wait, or
    // whose circuit is open, is not sent a backlog at start.
    let mut seen = HashMap::new();
    if let Err(e) = sync_holds(&relay, &mut seen).await {
        tracing::warn!("reading the endpoints held back failed: {e}");
    }
    let holds = tokio::spawn(share_holds(Arc::clone(&relay), seen));
    if relay.store.shared() && relay.guards.shares_limits() {
        tracing::info!(
            "waiting {} s before delivering: other relays on this database count this one \
             among those sharing the endpoints' limits",
            SENDER_HEARTBEAT_MS / 1000
        );
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(SENDER_HEARTBEAT_MS)) => {}
            _ = stop.changed() => {}
        }
    }
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut rows: HashMap<tokio::task::Id, (Vec<i64>, Arc<str>)> = HashMap::new();
    let mut routed: Vec<Arc<str>> = Vec::new();
    let mut routed_keys: Vec<String> = Vec::new();
    let mut generation = None;
    let mut next_park = Instant::now();
    let mut turn = 0usize;

    let grace = loop {
        if let Some(grace) = *stop.borrow_and_update() {
            break grace;
        }
        while let Some(done) = tasks.try_join_next_with_id() {
            reap(&shared, &mut rows, done);
        }
        let sources = relay.sources();
        if generation != Some(sources.generation) {
            // Started, or the sources were reloaded: claims follow the
            // sources routed now, and the calls of those no longer routed
            // are set aside at once.
            routed = sources.routed().into_iter().map(Arc::from).collect();
            routed_keys = sources.routed_keys();
            let share = share_of(
                shared.concurrency,
                relay.cfg.endpoint_concurrency,
                routed.len(),
            );
            shared.book().share = share;
            if generation.is_some() {
                next_park = Instant::now();
                log_lanes(&shared, routed.len());
            }
            generation = Some(sources.generation);
        }
        drop(sources);
        let n = routed.len();
        let now = relay.clock.now_ms();
        if Instant::now() >= next_park {
            next_park = Instant::now() + PARK_INTERVAL;
            park(&relay, now, routed_keys.clone()).await;
        }

        // One pass: each source with room claims, starting one further
        // along each time.
        let mut more = false;
        let mut blocked = false;
        let mut failed = false;
        for k in 0..n {
            let source = &routed[(turn + k) % n];
            let room = shared.room(source);
            if room == 0 {
                blocked = true;
                continue;
            }
            let want = room.min(CLAIM_BATCH);
            match relay
                .store
                .claim(now, source, want, relay.cfg.lease_ms)
                .await
            {
                Ok(claimed) => {
                    more |= claimed.len() == want;
                    for c in &claimed {
                        shared.hold(c, source);
                    }
                    for work in batch::plan(&shared, source, claimed) {
                        let ids = work.ids();
                        let task =
                            tasks.spawn(deliver(Arc::clone(&shared), work, finish_tx.clone()));
                        rows.insert(task.id(), (ids, Arc::clone(source)));
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        source = %source,
                        "claiming deliveries failed: {e}; trying again in {} s",
                        STORE_BACKOFF.as_secs()
                    );
                    failed = true;
                    break;
                }
            }
        }
        turn = turn.wrapping_add(1);
        if more && !failed {
            continue;
        }
        let delay = if failed {
            STORE_BACKOFF
        } else if blocked {
            // A source waits for its slots: a freed slot wakes the loop,
            // and the store need not be asked when the next call is due.
            IDLE_POLL
        } else if n == 0 {
            // Nothing to deliver for: only the parking is left to do.
            next_park.saturating_duration_since(Instant::now())
        } else {
            match relay.store.next_due(now).await {
                Ok(Some(due)) if due > now => {
                    Duration::from_millis(u64::try_from(due - now).unwrap_or(0)).min(IDLE_POLL)
                }
                // Due now and not claimed: its source is at its share (a
                // freed slot wakes the loop) or another relay holds it.
                Ok(_) => IDLE_POLL,
                Err(e) => {
                    tracing::warn!("reading the next due time failed: {e}");
                    STORE_BACKOFF
                }
            }
        };
        tokio::select! {
            () = relay.wake.notified(), if !failed => {}
            () = shared.freed.notified(), if blocked && !failed => {}
            () = tokio::time::sleep(delay) => {}
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                reap(&shared, &mut rows, done);
            }
            _ = stop.changed() => {}
        }
    };

    // Stop: let what is in flight end and be stored, within `grace`.
    let deadline = Instant::now() + grace;
    loop {
        if shared.book().held.is_empty() {
            break;
        }
        tokio::select! {
            () = shared.freed.notified() => {}
            () = tokio::time::sleep_until(deadline) => break,
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                reap(&shared, &mut rows, done);
            }
        }
    }
    tasks.abort_all();
    while let Some(done) = tasks.join_next_with_id().await {
        reap(&shared, &mut rows, done);
    }
    // The writer stores what was queued (once more at most, if the store
    // fails), then ends: every sender is gone.
    shared.closing.store(true, Ordering::Release);
    drop(finish_tx);
    if let Err(e) = writer.await {
        tracing::error!("the delivery result writer ended abnormally: {e}");
    }
    renewer.abort();
    holds.abort();
    let rest: Vec<Finish> = shared
        .book()
        .held
        .iter()
        .map(|(&id, h)| Finish::Release { id, claim: h.claim })
        .collect();
    if rest.is_empty() {
        return;
    }
    let n = rest.len();
    match relay.store.finish(rest, relay.clock.now_ms()).await {
        Ok(_) => tracing::info!(
            "released {n} deliveries in flight at shutdown; they are sent again at the next start"
        ),
        Err(e) => tracing::warn!(
            "releasing {n} deliveries in flight at shutdown failed: {e}; they are sent again \
             when their leases end"
        ),
    }
}

/// A delivery task ended: a panic (a bug) lets its row go without a
/// result, so its lease runs out and it is claimed again.
fn reap(
    shared: &Shared,
    rows: &mut HashMap<tokio::task::Id, (Vec<i64>, Arc<str>)>,
    done: Result<(tokio::task::Id, ()), JoinError>,
) {
    let id = match &done {
        Ok((id, ())) => *id,
        Err(e) => e.id(),
    };
    let Some((row, source)) = rows.remove(&id) else {
        return;
    };
    if let Err(e) = done {
        if e.is_panic() {
            tracing::error!(
                source = %source,
                "a delivery failed in the relay; it is sent again when its lease ends"
            );
            shared.let_go(row);
        }
    }
}

/// Sets aside the pending rows of destinations that are not enabled (or
/// not there) now.
async fn park(relay: &Relay, now: i64, routed: Vec<String>) {
    match relay.store.park_unrouted(now, routed).await {
        Ok(0) => {}
        Ok(n) => {
            relay.metrics.delivery("undeliverable", n);
            tracing::info!(
                "{n} pending calls of destinations that are gone or disabled were set aside as \
                 undeliverable (replay them once the destination is back)"
            );
        }
        Err(e) => tracing::warn!("setting aside calls with no destination failed: {e}"),
    }
}

/// Stores results as deliveries end: everything that ended while the last
/// write ran goes in the next one.
async fn store_results(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Finish>) {
    let relay = Arc::clone(&shared.relay);
    let mut batch: Vec<Finish> = Vec::new();
    loop {
        if batch.is_empty() {
            match rx.recv().await {
                Some(f) => batch.push(f),
                None => return,
            }
        }
        while let Ok(f) = rx.try_recv() {
            batch.push(f);
        }
        let ids: Vec<i64> = batch.iter().map(Finish::id).collect();
        match relay
            .store
            .finish(batch.clone(), relay.clock.now_ms())
            .await
        {
            Ok(refused) => {
                if refused > 0 {
                    relay.metrics.stale_finishes(refused as u64);
                    tracing::warn!(
                        "{refused} delivery results refused: their lease had passed to another \
                         worker, whose result stands"
                    );
                }
                batch.clear();
                shared.let_go(ids);
            }
            Err(e) => {
                if shared.closing.load(Ordering::Acquire) {
                    tracing::warn!(
                        "storing {} delivery results failed at shutdown: {e}",
                        batch.len()
                    );
                    return;
                }
                tracing::warn!(
                    "storing {} delivery results failed: {e}; trying again in {} s",
                    batch.len(),
                    STORE_BACKOFF.as_secs()
                );
                tokio::time::sleep(STORE_BACKOFF).await;
            }
        }
    }
}

/// Shares what this relay's guards hold back through the database, and
/// takes what other relays' hold back, every [`HOLD_SYNC_MS`] and at once
/// when a guard here starts holding back. `seen` is each URL's hold as
/// last written or read, so a hold is taken once, and one this relay wrote
/// is not taken back after its own circuit closed.
async fn share_holds(relay: Arc<Relay>, mut seen: HashMap<String, Hold>) {
    let mut every = tokio::time::interval(Duration::from_millis(HOLD_SYNC_MS));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = relay.guards.held_now.notified() => {}
        }
        if let Err(e) = sync_holds(&relay, &mut seen).await {
            tracing::debug!("sharing the endpoints held back failed: {e}");
        }
    }
}

async fn sync_holds(relay: &Relay, seen: &mut HashMap<String, Hold>) -> Result<(), StoreError> {
    let now = relay.clock.now();
    for (url, hold) in relay.guards.holds(now) {
        if hold.outlasts(seen.get(&url)) {
            relay.store.put_hold(&url, hold).await?;
            let merged = hold.merge(seen.get(&url));
            seen.insert(url, merged);
        }
    }
    for (url, hold) in relay.store.holds(now.as_millis()).await? {
        if hold.outlasts(seen.get(&url)) {
            relay.guards.handle_hold(&url, &hold, now);
            let merged = hold.merge(seen.get(&url));
            seen.insert(url, merged);
        }
    }
    seen.retain(|_, h| h.paused_until.max(h.open_until).is_some_and(|t| t > now));
    Ok(())
}

/// Keeps the leases of everything held.
async fn renew_leases(shared: Arc<Shared>) {
    let relay = &shared.relay;
    let every = Duration::from_millis(u64::try_from(relay.cfg.lease_ms / 4).unwrap_or(1).max(1));
    loop {
        tokio::time::sleep(every).await;
        let tokens = shared.tokens();
        if tokens.is_empty() {
            continue;
        }
        let n = tokens.len();
        let until = relay.clock.now_ms().saturating_add(relay.cfg.lease_ms);
        if let Err(e) = relay.store.renew(tokens, until).await {
            tracing::warn!("renewing {n} leases failed: {e}");
        }
    }
}

/// One task's claimed rows delivered (one call, or a batch), their
/// results queued for the writer.
async fn deliver(shared: Arc<Shared>, work: batch::Work, results: mpsc::UnboundedSender<Finish>) {
    for finish in batch::run(&shared, work).await {
        // Closed only once the workers are stopping and this task is
        // aborted.
        let _ = results.send(finish);
    }
}

/// A seed for the core's retry jitter: deliveries that share one retry at
/// the same instants.
fn jitter_seed(row: &Claimed) -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        u64::from(nanos) ^ (row.id as u64).rotate_left(32)
    })
}

/// Why a claimed call is not delivered now.
enum NotNow {
    /// Its source has no enabled destination any more (a reload): kept as
    /// undeliverable, replayable.
    NoDestination,
    /// It cannot be delivered at all: a dead letter.
    Broken(callpost_core::Code, String),
}

/// The core's delivery for `row`, to its destination as it is now: restored from its saved state, or started from the stored message.
fn delivery(shared: &Shared, row: &Claimed) -> Result<Delivery, NotNow> {
    let sources = shared.relay.sources();
    let webhooks = sources
        .get(&row.source)
        .and_then(|s| s.routed(&row.destination))
        .ok_or(NotNow::NoDestination)?;
    if let Some(state) = &row.state {
        match Delivery::from_json(state, webhooks) {
            Ok(d) => return Ok(d),
            Err(e) => {
                // The source's endpoints changed since the state was saved.
                tracing::warn!(
                    source = %row.source,
                    message_id = %row.message_id,
                    "a delivery restarts with the current settings: {e}"
                );
            }
        }
    }
    let call =
        Call::from_json_str(&row.message).map_err(|e| NotNow::Broken(e.code(), e.to_string()))?;
    let config = DeliveryConfig::new(jitter_seed(row));
    Delivery::new(webhooks, &call, shared.relay.clock.now(), config)
        .map_err(|e| NotNow::Broken(e.code(), e.to_string()))
}

/// One row's turn: its delivery restored or started, driven, and stored
/// where it was left.
async fn turn(shared: &Arc<Shared>, row: Claimed) -> Finish {
    let mut d = match delivery(shared, &row) {
        Ok(d) => d,
        Err(why) => return not_now(shared, &row, why),
    };
    let traced = traced_by(&row);
    let (driven, made) = drive(shared, &mut d, &row.source, &row.message_id, traced).await;
    finish_row(shared, &row, &d, driven, row.attempts + made, None)
}

/// How `row` is stored when it cannot be delivered now.
fn not_now(shared: &Shared, row: &Claimed, why: NotNow) -> Finish {
    let relay = &shared.relay;
    match why {
        NotNow::NoDestination => {
            relay
                .metrics
                .delivery_to(&row.source, &row.destination, "undeliverable", 1);
            Finish::Undeliverable {
                id: row.id,
                claim: row.claim,
                outcome: r#"{"kind":"undeliverable","reason":"no_destination"}"#.into(),
            }
        }
        NotNow::Broken(code, message) => {
            relay
                .metrics
                .delivery_to(&row.source, &row.destination, "dead", 1);
            if let Some(op) = &relay.operator {
                op.dead_letters(relay.clock.now(), &row.source, &row.destination, 1);
            }
            tracing::warn!(
                source = %row.source,
                message_id = %row.message_id,
                "a stored call cannot be delivered ({}); it is a dead letter",
                code.as_str()
            );
            let outcome = serde_json::json!({
                "kind": "gave_up",
                "reason": code.as_str(),
                "message": message,
            });
            Finish::Dead {
                id: row.id,
                claim: row.claim,
                attempts: row.attempts,
                state: None,
                outcome: outcome.to_string(),
                batch: None,
            }
        }
    }
}

/// Where [`drive`] left a delivery.
#[derive(Clone)]
enum Driven {
    /// It has an outcome.
    Ended(DeliveryOutcome),
    /// Its endpoint was disabled (the guard's decision).
    EndpointDisabled,
    /// It waits until the core's next time.
    Wait(Timestamp),
}

/// The context of the ingest span that stored `row`, if it was traced:
/// the parent of its attempts' spans.
fn traced_by(row: &Claimed) -> Option<SpanContext> {
    row.trace_parent.as_deref().and_then(SpanContext::parse)
}

/// Drives a delivery: sends what is due (a whole round at once in parallel
/// mode), reports each answer, and returns when the core has an outcome or
/// wants to wait, with the requests made. With tracing on, each attempt is
/// a span, a child of `traced` (the ingest span of the request that stored
/// the call) when known.
async fn drive(
    shared: &Arc<Shared>,
    d: &mut Delivery,
    source: &str,
    message_id: &str,
    traced: Option<SpanContext>,
) -> (Driven, i64) {
    let relay = &shared.relay;
    let mut made = 0i64;
    let mut disabled = false;
    let mut answers: Vec<(u32, AnswerStart)> = Vec::new();
    let driven = loop {
        let now = relay.clock.now();
        let mut sends = Vec::new();
        while let Some(a) = d.poll_request(now) {
            sends.push(a);
        }
        if !sends.is_empty() {
            made += sends.len() as i64;
            let logged = d.log().len();
            // Each attempt's endpoint as configured: its slot and its
            // receiver protection are the endpoint's, whatever URL a
            // template made for this call.
            let sends = sends
                .into_iter()
                .map(|a| {
                    let ep = d.settings().endpoints().get(a.endpoint);
                    let key = ep.map_or_else(|| a.request.url.clone(), |e| e.url().to_owned());
                    let access = ep.and_then(Access::of);
                    (a, key, access)
                })
                .collect();
            let sent_all = send_all(shared, sends, now, traced.as_ref()).await;
            for (attempt, sent, ended, outcome, answer, span) in sent_all {
                relay.metrics.attempt(&result_class(&outcome));
                disabled |= matches!(&outcome, Outcome::Held { reason, .. }
                    if reason == EndpointState::Disabled.as_str());
                let span = span.map(|mut s| {
                    s.set_str("callpost.message_id", message_id);
                    answered(&mut s, &outcome);
                    s
                });
                if let Some(sent) = sent {
                    d.handle_sent(sent, attempt);
                }
                d.handle_response(ended, attempt, outcome);
                if let (Some(tracer), Some(mut span)) = (&relay.tracer, span) {
                    // The core numbers the round once it has the answer.
                    if let Some(r) = d.log().iter().rev().find(|r| r.attempt == attempt) {
                        span.set_int("callpost.round", i64::from(r.round));
                    }
                    tracer.end(span);
                }
                answers.push((attempt, answer));
            }
            if tracing::enabled!(tracing::Level::DEBUG) {
                for r in d.log().iter().skip(logged) {
                    tracing::debug!(
                        source = %source,
                        message_id = %message_id,
                        "webhook attempt {} (round {}) to endpoint {}: {}",
                        r.attempt,
                        r.round,
                        r.endpoint,
                        r.outcome.code()
                    );
                }
            }
            continue;
        }
        if let Some(outcome) = d.poll_outcome() {
            break Driven::Ended(outcome);
        }
        if disabled {
            break Driven::EndpointDisabled;
        }
        break Driven::Wait(d.poll_timeout().unwrap_or(now));
    };
    // The answers' bodies are read in the background: one that came with
    // its status line is in by now, given a turn of the scheduler; a later
    // one is not waited for (`http::AnswerStart`).
    if !answers.is_empty() {
        tokio::task::yield_now().await;
    }
    for (attempt, start) in answers {
        let arrived = start.arrived();
        if !arrived.is_empty() {
            d.handle_answer(attempt, &arrived);
        }
    }
    (driven, made)
}

/// A row's part in a batch: the batch's id, and whether the row is the
/// batch's lead, which keeps the batch's saved state and attempt log for
/// all its rows (the state holds the whole batch's body: a copy on every
/// row would store the batch as many times as it has calls).
#[derive(Debug, Clone, Copy)]
pub(super) struct InBatch<'a> {
    /// The batch's id (its `Idempotency-Key`).
    pub(super) id: &'a str,
    /// Whether this row keeps the batch's state and log.
    pub(super) lead: bool,
}

/// How `row` is stored where its delivery `d` was left: `attempts` in all;
/// `batch` when the row went in one.
fn finish_row(
    shared: &Shared,
    row: &Claimed,
    d: &Delivery,
    driven: Driven,
    attempts: i64,
    batch: Option<InBatch<'_>>,
) -> Finish {
    match driven {
        Driven::Ended(outcome) => ended(shared, row, d, outcome, attempts, batch),
        Driven::EndpointDisabled => {
            // Kept, to be replayed once an operator enables the endpoint
            // again.
            shared
                .relay
                .metrics
                .delivery_to(&row.source, &row.destination, "undeliverable", 1);
            Finish::Undeliverable {
                id: row.id,
                claim: row.claim,
                outcome: r#"{"kind":"undeliverable","reason":"endpoint_disabled"}"#.into(),
            }
        }
        Driven::Wait(due) => Finish::Retry {
            id: row.id,
            claim: row.claim,
            attempts,
            state: batch.is_none_or(|b| b.lead).then(|| d.to_json()),
            due_at: due.as_millis(),
            batch: batch.map(|b| b.id.to_owned()),
        },
    }
}

/// One answered request of a step: its attempt, when it went out (if it
/// did), when it ended, how, the start of the answer's body (as it
/// arrives), and its span (tracing on), ended when the core has the answer.
type Sent = (
    u32,
    Option<Timestamp>,
    Timestamp,
    Outcome,
    AnswerStart,
    Option<Span>,
);

/// The span of attempt `a` (tracing on), a child of `parent` when known.
fn attempt_span(
    shared: &Shared,
    a: &callpost_core::Attempt,
    endpoint_url: &str,
    parent: Option<&SpanContext>,
) -> Option<Span> {
    let mut span = shared
        .relay
        .tracer
        .as_ref()?
        .start(ATTEMPT_SPAN, Kind::Client, parent)?;
    // Shown as operators see it everywhere: no credentials, no query, and
    // a URL template as configured, not filled with a call's values.
    span.set_str("url.full", callpost_core::ops::shown_url(endpoint_url));
    span.set_int("callpost.attempt", i64::from(a.attempt));
    Some(span)
}

/// An attempt's answer on its span: the status, or what kept it from one
/// (OpenTelemetry's `error.type`).
fn answered(span: &mut Span, outcome: &Outcome) {
    let error = match outcome {
        Outcome::Response { status, .. } => {
            span.set_int("http.response.status_code", i64::from(*status));
            if *status >= 400 {
                span.set_error();
            }
            return;
        }
        Outcome::Timeout => "timeout",
        Outcome::Connection { .. } => "connection",
        Outcome::Tls { .. } => "tls",
        Outcome::Held { .. } => "held",
        Outcome::Token { .. } => "token",
    };
    span.set_str("error.type", error);
    span.set_error();
}

/// The requests of one step, sent at once.
async fn send_all(
    shared: &Arc<Shared>,
    sends: Vec<(callpost_core::Attempt, String, Option<Access>)>,
    polled_at: Timestamp,
    parent: Option<&SpanContext>,
) -> Vec<Sent> {
    let clock = &shared.relay.clock;
    if sends.len() == 1 {
        let mut out = Vec::with_capacity(1);
        for (a, key, access) in sends {
            let attempt = a.attempt;
            let mut span = attempt_span(shared, &a, &key, parent);
            let (sent, outcome, answer) = shared
                .http
                .send(a, &key, access.as_ref(), polled_at, clock, span.as_mut())
                .await;
            out.push((attempt, sent, clock.now(), outcome, answer, span));
        }
        return out;
    }
    let mut set = JoinSet::new();
    for (a, key, access) in sends {
        let shared = Arc::clone(shared);
        let mut span = attempt_span(&shared, &a, &key, parent);
        set.spawn(async move {
            let attempt = a.attempt;
            let clock = &shared.relay.clock;
            let (sent, outcome, answer) = shared
                .http
                .send(a, &key, access.as_ref(), polled_at, clock, span.as_mut())
                .await;
            (attempt, sent, clock.now(), outcome, answer, span)
        });
    }
    let mut out = Vec::new();
    while let Some(done) = set.join_next().await {
        match done {
            Ok(r) => out.push(r),
            // A send that panicked is left unanswered; the core counts it
            // as timed out when the delivery next runs.
            Err(e) => tracing::error!("a webhook request failed in the relay: {e}"),
        }
    }
    out
}

/// How a delivery that has an outcome is stored.
fn ended(
    shared: &Shared,
    row: &Claimed,
    d: &Delivery,
    outcome: DeliveryOutcome,
    attempts: i64,
    batch: Option<InBatch<'_>>,
) -> Finish {
    let relay = &shared.relay;
    // A batch's rows but its lead keep the outcome without the attempt
    // log, which is the batch's (the lead keeps it).
    let with_log = batch.is_none_or(|b| b.lead);
    let batch_id = batch.map(|b| b.id.to_owned());
    match &outcome {
        // A call its filters keep out was never sent: it has a state of
        // its own, neither delivered nor dead.
        DeliveryOutcome::Filtered { .. } => {
            relay
                .metrics
                .delivery_to(&row.source, &row.destination, "filtered", 1);
            Finish::Filtered {
                id: row.id,
                claim: row.claim,
                outcome: outcome_record(d, &outcome, with_log),
            }
        }
        // A call the destination does not take (its integrations turned
        // it off after it was stored) is closed as a delivered one is,
        // with no attempt, and counted apart.
        DeliveryOutcome::Delivered { .. } | DeliveryOutcome::Disabled => {
            let kind = match outcome {
                DeliveryOutcome::Disabled => "disabled",
                _ => "delivered",
            };
            relay
                .metrics
                .delivery_to(&row.source, &row.destination, kind, 1);
            if row.kind == "delete" {
                // It carries the erased user's id: nothing of it is kept.
                return Finish::Forget {
                    id: row.id,
                    claim: row.claim,
                };
            }
            Finish::Delivered {
                id: row.id,
                claim: row.claim,
                attempts,
                outcome: Some(outcome_record(d, &outcome, with_log)),
                batch: batch_id,
            }
        }
        DeliveryOutcome::GaveUp { reason, .. } => {
            relay
                .metrics
                .delivery_to(&row.source, &row.destination, "dead", 1);
            if let Some(op) = &relay.operator {
                op.dead_letters(relay.clock.now(), &row.source, &row.destination, 1);
            }
            tracing::warn!(
                source = %row.source,
                message_id = %row.message_id,
                "a delivery gave up ({}); it is a dead letter",
                reason.code().as_str()
            );
            // No saved state: a replay starts the call afresh, and the
            // attempt log is in the outcome record (a batch's on its
            // first row), so the signed body is not kept for 30 days.
            Finish::Dead {
                id: row.id,
                claim: row.claim,
                attempts,
                state: None,
                outcome: outcome_record(d, &outcome, with_log),
                batch: batch_id,
            }
        }
    }
}

/// A finished call's record, for dead letters and the delivery log: the
/// core's outcome, with the message a host raises for it (null for a
/// success) and, `with_log`, the attempt log, keys in that order: the
/// record's own fields first, as the delivery log and the dead-letter
/// list show them.
fn outcome_record(d: &Delivery, outcome: &DeliveryOutcome, with_log: bool) -> String {
    let fields = outcome.to_json(KeyCase::Snake);
    let message = serde_json::to_string(&outcome.error_message()).unwrap_or_else(|_| "null".into());
    let log = if with_log {
        format!(",\"log\":{}", d.log_json(KeyCase::Snake))
    } else {
        String::new()
    };
    match fields.strip_suffix('}') {
        Some(head) if head.len() > 1 => format!("{head},\"message\":{message}{log}}}"),
        _ => format!("{{\"message\":{message}{log}}}"),
    }
}

/// The metric label of an attempt's result.
fn result_class(o: &Outcome) -> String {
    match o {
        Outcome::Response { status, .. } => format!("{}xx", status / 100),
        Outcome::Timeout => "timeout".into(),
        Outcome::Connection { .. } => "connection".into(),
        Outcome::Tls { .. } => "tls".into(),
        Outcome::Held { .. } => "held".into(),
        Outcome::Token { .. } => "token".into(),
    }
}
