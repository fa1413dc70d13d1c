//! The contract every [`Store`] keeps, as async test functions over any
//! backend: `store_sqlite.rs`, `store_postgres.rs` and the memory store
//! (`deliver.rs`) run them all, each on a store of its own.
//!
//! Each function takes a fresh, empty store (no rows, no rejected calls,
//! no audiences) and may leave it dirty; the caller closes it. The
//! [`contract_tests!`] macro makes one `#[tokio::test]` per function from a
//! factory, so a backend cannot forget one:
//!
//! ```ignore
//! async fn fresh() -> (Arc<dyn Store>, Guard) { … }
//! contract_tests!(fresh);
//! ```
//!
//! The factory returns the store and a guard held until the test ends (a
//! temporary directory, a throwaway database; `()` if none).
//!
//! Times are explicit milliseconds around [`T0`], never the host's clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    dead_code,
    unused_macros,
    unused_macro_rules
)]

use callpost_relay::store::{
    Claimed, Cursor, Finish, Hold, LogFilter, Purged, RejectedRow, ReplayFilter, Resealed,
    Retention, Row, SealTable, Status, Store, StoreError,
};
use std::collections::HashSet;
use std::sync::Arc;

/// Makes one `#[tokio::test]` per contract function. `$factory` is an
/// `async fn() -> (Arc<dyn Store>, G)`; the guard `G` lives until the
/// store is closed.
///
/// `contract_tests!(fresh, if run())` makes each test return at once when
/// `run()` is false (a backend whose server the tests were told to skip).
macro_rules! contract_tests {
    ($factory:path) => {
        contract_tests!($factory, if true);
    };
    ($factory:path, if $run:expr) => {
        contract_tests!(@each $factory, $run;
            insert_counts_new_rows,
            a_call_is_kept_once_per_destination_and_counted_once,
            insert_repeated_id_in_one_call_stored_once,
            insert_keeps_rejected_calls,
            insert_undeliverable_rows_are_not_claimable,
            claim_per_source_oldest_due_first,
            claim_skips_leased_rows_until_the_lease_ends,
            finish_delivered,
            finish_counts_only_with_the_matching_token,
            finish_after_lease_end_counts_while_no_one_took_over,
            finish_retry_saves_state_and_due_time,
            finish_dead_makes_a_dead_letter,
            finish_undeliverable,
            finish_release_gives_back_unchanged,
            finish_forget_removes_the_row_while_it_holds_the_token,
            erase_user_removes_every_call_of_the_user_and_nothing_else,
            sealable_rows_page_in_id_order_and_a_reseal_writes_only_unchanged_rows,
            finish_mixed_kinds_counts_refused,
            renew_extends_leases,
            next_due_earliest_due_or_lease_end,
            park_unrouted_parks_only_unrouted_unleased_rows,
            purge_each_kind_by_its_retention,
            purge_keeps_each_source_by_its_own_retention,
            replay_dead_letters_by_message_ids,
            replay_filters_source_since_until,
            replay_includes_delivered_and_undeliverable_only_when_asked,
            replay_resets_state_and_makes_rows_due_now,
            replay_long_id_list,
            replay_of_more_rows_than_one_chunk,
            replay_by_user_event_type_and_status_with_a_dry_run,
            search_by_each_field_newest_first,
            search_pages_with_a_cursor,
            search_rejected_by_source_and_time,
            logged_call_has_its_message_state_and_outcome,
            stats_counts,
            dead_letters_oldest_first,
            rejected_newest_first,
            audience_state_and_sync,
            disabled_endpoints_are_kept_until_enabled,
            sources_are_written_and_removed_together,
            holds_keep_the_later_of_each_part,
            healthy_backlog_and_statements,
            closed_store_refuses,
        );
    };
    (@each $factory:path, $run:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if !$run {
                    return;
                }
                // The guard lives to the end, after the close.
                let (store, _guard) = $factory().await;
                $crate::store_contract::$name(store.clone()).await;
                store.close().await;
            }
        )*
    };
}

/// A fixed "now" for the tests, ms since the epoch.
pub(crate) const T0: i64 = 1_700_000_000_000;

/// A lease long enough never to end by accident inside a test.
const LEASE: i64 = 20_000;

/// A pending track call of `source`, received at `at`.
pub(crate) fn row(source: &str, message_id: &str, at: i64) -> Row {
    Row {
        source: source.into(),
        message_id: message_id.into(),
        destination: callpost_core::sources::DEFAULT_DESTINATION.into(),
        first: true,
        kind: "track",
        message: format!(r#"{{"type":"track","messageId":"{message_id}","event":"E"}}"#),
        received_at: at,
        status: Status::Pending,
        user_id: None,
        anonymous_id: None,
        event: Some("E".into()),
    }
}

/// `row` as a call of `user`.
pub(crate) fn of_user(mut row: Row, user: &str) -> Row {
    row.user_id = Some(user.into());
    row
}

/// As [`row`], stored not sent (its destination is off).
pub(crate) fn parked(source: &str, message_id: &str, at: i64) -> Row {
    Row {
        status: Status::Undeliverable,
        ..row(source, message_id, at)
    }
}

/// A call refused inside a batch.
pub(crate) fn refused(source: &str, at: i64, text: &str) -> RejectedRow {
    RejectedRow {
        source: source.into(),
        received_at: at,
        code: "message_too_large",
        reason: "too large".into(),
        text: text.into(),
    }
}

fn ids(claimed: &[Claimed]) -> Vec<String> {
    claimed.iter().map(|c| c.message_id.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

pub(crate) fn delivered(c: &Claimed, attempts: i64) -> Finish {
    Finish::Delivered {
        id: c.id,
        claim: c.claim,
        attempts,
        outcome: None,
        batch: None,
    }
}

fn dead(c: &Claimed) -> Finish {
    Finish::Dead {
        id: c.id,
        claim: c.claim,
        attempts: 3,
        state: Some(r#"{"s":"dead"}"#.into()),
        outcome: r#"{"kind":"gave_up","reason":"window_exhausted"}"#.into(),
        batch: None,
    }
}

fn undeliverable(c: &Claimed) -> Finish {
    Finish::Undeliverable {
        id: c.id,
        claim: c.claim,
        outcome: r#"{"kind":"undeliverable","reason":"no_destination"}"#.into(),
    }
}

/// Stores `rows`, claims every one of them at `now` and ends each with
/// `end`.
async fn stored_and_finished(
    store: &Arc<dyn Store>,
    rows: Vec<Row>,
    now: i64,
    end: fn(&Claimed) -> Finish,
) {
    let mut sources: Vec<String> = rows.iter().map(|r| r.source.clone()).collect();
    sources.sort();
    sources.dedup();
    let n = rows.len();
    store.insert(rows, vec![]).await.unwrap();
    let mut finishes = vec![];
    for s in &sources {
        for c in store.claim(now, s, 1000, LEASE).await.unwrap() {
            finishes.push(end(&c));
        }
    }
    assert_eq!(finishes.len(), n, "every row claimed");
    assert_eq!(store.finish(finishes, now).await.unwrap(), 0);
}

// -- insert ---------------------------------------------------------------

/// New rows are counted; a (source, messageId) already stored is skipped,
/// in a later call as in the same one; the same messageId from another
/// source is another call.
pub(crate) async fn insert_counts_new_rows(store: Arc<dyn Store>) {
    let n = store
        .insert(
            vec![row("a", "m1", T0), row("a", "m2", T0), row("a", "m3", T0)],
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(n, 3);
    let n = store
        .insert(
            vec![
                row("a", "m1", T0 + 1),
                row("a", "m4", T0 + 1),
                row("a", "m2", T0 + 1),
            ],
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(n, 1, "only m4 is new");
    let n = store
        .insert(vec![row("b", "m1", T0)], vec![])
        .await
        .unwrap();
    assert_eq!(n, 1, "another source's m1 is another call");
    assert_eq!(store.insert(vec![], vec![]).await.unwrap(), 0);
    let stats = store.stats(T0).await.unwrap();
    assert_eq!(stats.pending, 5);
    // The first copy is the one kept: it was received at T0.
    let claimed = store.claim(T0, "a", 10, LEASE).await.unwrap();
    assert_eq!(sorted(ids(&claimed)), strings(&["m1", "m2", "m3"]));
}

/// A batch that repeats a messageId stores it once.
pub(crate) async fn insert_repeated_id_in_one_call_stored_once(store: Arc<dyn Store>) {
    let n = store
        .insert(
            vec![row("a", "m1", T0), row("a", "m1", T0), row("a", "m2", T0)],
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(store.stats(T0).await.unwrap().pending, 2);
}

/// Refused calls are kept with the batch and are not counted as new.
pub(crate) async fn insert_keeps_rejected_calls(store: Arc<dyn Store>) {
    let n = store
        .insert(vec![row("a", "m1", T0)], vec![refused("a", T0, "{bad 1}")])
        .await
        .unwrap();
    assert_eq!(n, 1);
    let n = store
        .insert(
            vec![],
            vec![
                refused("b", T0 + 5, "{bad 2}"),
                refused("b", T0 + 5, "{bad 3}"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(n, 0, "refused calls are not new calls");
    let stats = store.stats(T0).await.unwrap();
    assert_eq!(stats.rejected, 3);
    assert_eq!(stats.pending, 1);
    let r = store.rejected(10).await.unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r[2].source, "a");
    assert_eq!(r[2].received_at, T0);
    assert_eq!(r[2].code, "message_too_large");
    assert_eq!(r[2].reason, "too large");
    assert_eq!(r[2].text, "{bad 1}");
}

/// A call stored undeliverable (its destination is off) is kept, counted,
/// and never claimed.
pub(crate) async fn insert_undeliverable_rows_are_not_claimable(store: Arc<dyn Store>) {
    let n = store
        .insert(vec![parked("a", "m1", T0), row("a", "m2", T0)], vec![])
        .await
        .unwrap();
    assert_eq!(n, 2);
    let claimed = store.claim(T0 + 1, "a", 10, LEASE).await.unwrap();
    assert_eq!(ids(&claimed), strings(&["m2"]));
    let stats = store.stats(T0 + 1).await.unwrap();
    assert_eq!(stats.undeliverable, 1);
    assert_eq!(stats.pending, 1);
}

// -- claim ----------------------------------------------------------------

/// A claim takes only its source's rows that are due, oldest due first, up
/// to `limit`, under one token, with what was stored.
pub(crate) async fn claim_per_source_oldest_due_first(store: Arc<dyn Store>) {
    // One user's calls: over shard groups, the order holds within a group
    // (the groups take turns), and a user's calls are in one.
    store
        .insert(
            vec![
                of_user(row("a", "a3", T0 + 3), "u"),
                of_user(row("a", "a1", T0 + 1), "u"),
                row("b", "b0", T0),
                of_user(row("a", "a2", T0 + 2), "u"),
                of_user(row("a", "later", T0 + 100), "u"),
            ],
            vec![],
        )
        .await
        .unwrap();
    let claimed = store.claim(T0 + 10, "a", 2, LEASE).await.unwrap();
    assert_eq!(ids(&claimed), strings(&["a1", "a2"]), "oldest due first");
    assert_eq!(claimed[0].claim, claimed[1].claim, "one token per claim");
    let c = &claimed[0];
    assert_eq!(c.source, "a");
    assert_eq!(
        c.message,
        r#"{"type":"track","messageId":"a1","event":"E"}"#
    );
    assert_eq!(c.state, None);
    assert_eq!(c.attempts, 0);

    let more = store.claim(T0 + 10, "a", 10, LEASE).await.unwrap();
    assert_eq!(ids(&more), strings(&["a3"]), "not due yet: later");
    assert_ne!(more[0].claim, claimed[0].claim, "a new token per claim");

    let b = store.claim(T0 + 10, "b", 10, LEASE).await.unwrap();
    assert_eq!(ids(&b), strings(&["b0"]));
    assert!(store
        .claim(T0 + 10, "c", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
    let later = store.claim(T0 + 100, "a", 10, LEASE).await.unwrap();
    assert_eq!(ids(&later), strings(&["later"]));
}

/// A forgotten delivery (a delete notification) leaves no row, only while
/// its row still holds the token.
pub(crate) async fn finish_forget_removes_the_row_while_it_holds_the_token(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0), row("a", "m2", T0)], vec![])
        .await
        .unwrap();
    let claimed = store.claim(T0, "a", 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 2);
    assert_eq!(claimed[0].kind, "track");
    let forget = |c: &Claimed, claim: i64| Finish::Forget { id: c.id, claim };
    let refused = store
        .finish(
            vec![
                forget(&claimed[0], claimed[0].claim),
                forget(&claimed[1], -1),
            ],
            T0 + 1,
        )
        .await
        .unwrap();
    assert_eq!(refused, 1, "the wrong token is refused");
    let found = store.search(LogFilter::default(), None, 10).await.unwrap();
    let ids: Vec<&str> = found.rows.iter().map(|e| e.message_id.as_str()).collect();
    assert_eq!(ids, [claimed[1].message_id.as_str()]);
    // Forgotten: the same messageId is new again.
    let again = row("a", &claimed[0].message_id, T0 + 2);
    assert_eq!(store.insert(vec![again], vec![]).await.unwrap(), 1);
}

/// Erasing a user removes their calls in every state, by userId and by
/// anonymousId, and the refused calls that hold the id; nothing else.
pub(crate) async fn erase_user_removes_every_call_of_the_user_and_nothing_else(
    store: Arc<dyn Store>,
) {
    let mut anon = row("b", "m2", T0);
    anon.anonymous_id = Some("u-1".into());
    store
        .insert(
            vec![
                of_user(row("a", "m1", T0), "u-1"),
                anon,
                of_user(row("a", "m3", T0), "u-2"),
                of_user(row("a", "m4", T0 + 1), "u-1"),
            ],
            vec![
                refused("a", T0, r#"{"userId":"u-1","event":5}"#),
                refused("a", T0, r#"{"userId":"u-10","event":5}"#),
            ],
        )
        .await
        .unwrap();
    // One finished, one held by a worker.
    let held = store.claim(T0 + 1, "a", 10, LEASE).await.unwrap();
    let m1 = held.iter().find(|c| c.message_id == "m1").unwrap();
    store.finish(vec![delivered(m1, 1)], T0 + 2).await.unwrap();
    let erased = store.erase_user("u-1").await.unwrap();
    assert_eq!((erased.calls, erased.rejected), (3, 1));
    let left = store.search(LogFilter::default(), None, 10).await.unwrap();
    let ids: Vec<&str> = left.rows.iter().map(|e| e.message_id.as_str()).collect();
    assert_eq!(ids, ["m3"]);
    let rejected = store.rejected(10).await.unwrap();
    assert_eq!(rejected.len(), 1);
    assert!(rejected[0].text.contains("u-10"));
    // The worker's finish of an erased call counts nothing.
    let m4 = held.iter().find(|c| c.message_id == "m4").unwrap();
    assert_eq!(
        store.finish(vec![delivered(m4, 1)], T0 + 3).await.unwrap(),
        1
    );
    assert_eq!(store.erase_user("u-1").await.unwrap(), Default::default());
    // Suppressions and deletion records.
    assert!(store.set_suppressed("h1", true, T0, "op").await.unwrap());
    assert!(!store.set_suppressed("h1", true, T0, "op").await.unwrap());
    assert_eq!(store.suppressions().await.unwrap(), ["h1"]);
    assert!(store.set_suppressed("h1", false, T0, "op").await.unwrap());
    assert!(store.suppressions().await.unwrap().is_empty());
    let record = callpost_relay::store::Deletion {
        user_hash: Some("h1".into()),
        at: T0,
        operator: "op".into(),
        calls: 3,
        rejected: 1,
        suppressed: false,
    };
    store.record_deletion(record.clone()).await.unwrap();
    assert_eq!(store.deletions(10).await.unwrap(), [record]);
}

/// A rotation's reads page through every call and refused call once each
/// (in id order within a group), and its writes land only where the row
/// still holds what was read: a finish in between wins.
pub(crate) async fn sealable_rows_page_in_id_order_and_a_reseal_writes_only_unchanged_rows(
    store: Arc<dyn Store>,
) {
    let rows: Vec<Row> = (0..7)
        .map(|i| of_user(row("a", &format!("m{i}"), T0 + i), &format!("u-{i}")))
        .collect();
    store
        .insert(rows, vec![refused("a", T0, "r0"), refused("a", T0, "r1")])
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = store.sealable(SealTable::Calls, after, 3).await.unwrap();
        let Some(last) = page.last() else { break };
        assert!(page.len() <= 3);
        after = last.id;
        seen.extend(page);
    }
    assert_eq!(seen.len(), 7);
    // Each row's user column (a sealed store keeps hashes there).
    let users: HashSet<String> = seen.iter().map(|r| r.keys[0].clone().unwrap()).collect();
    assert_eq!(users.len(), 7);
    // Each row once (in id order within a group; groups one after another).
    let unique: HashSet<i64> = seen.iter().map(|r| r.id).collect();
    assert_eq!(unique.len(), 7);
    assert!(seen
        .iter()
        .all(|r| r.texts[0].is_some() && r.texts[1].is_none()));
    // One row finishes between the read and the write.
    let claimed = store.claim(T0 + 10, "a", 10, LEASE).await.unwrap();
    let finished = claimed.iter().find(|c| c.message_id == "m2").unwrap();
    store.finish(vec![dead(finished)], T0 + 11).await.unwrap();
    let writes: Vec<Resealed> = seen
        .iter()
        .map(|r| Resealed {
            id: r.id,
            read: r.texts.clone(),
            texts: [Some(format!("sealed {}", r.id)), Some("s".into()), None],
            keys: [Some(format!("h{}", r.id)), None, None],
        })
        .collect();
    assert_eq!(store.reseal(SealTable::Calls, writes).await.unwrap(), 6);
    let log = store
        .logged_call("a".into(), "m2".into(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        log.outcome.as_deref(),
        Some(r#"{"kind":"gave_up","reason":"window_exhausted"}"#)
    );
    assert!(!log.message.starts_with("sealed"));
    let m0 = seen.iter().find(|r| r.id != finished.id).unwrap();
    let after_write = store.sealable(SealTable::Calls, 0, 100).await.unwrap();
    let m0 = after_write.iter().find(|r| r.id == m0.id).unwrap();
    assert_eq!(m0.texts[0], Some(format!("sealed {}", m0.id)));
    assert_eq!(m0.texts[1].as_deref(), Some("s"));
    assert_eq!(m0.keys[0], Some(format!("h{}", m0.id)));
    // The refused calls: their text, erased by id.
    let refused = store.sealable(SealTable::Rejected, 0, 10).await.unwrap();
    assert_eq!(refused.len(), 2);
    let first = &refused[0];
    let write = Resealed {
        id: first.id,
        read: first.texts.clone(),
        texts: [Some("sealed r".into()), None, None],
        keys: [None, None, None],
    };
    assert_eq!(
        store
            .reseal(SealTable::Rejected, vec![write.clone()])
            .await
            .unwrap(),
        1
    );
    // Read before that write: refused.
    assert_eq!(
        store
            .reseal(SealTable::Rejected, vec![write])
            .await
            .unwrap(),
        0
    );
    let texts: Vec<String> = store
        .rejected(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.text)
        .collect();
    assert!(texts.contains(&"sealed r".to_owned()), "{texts:?}");
    assert_eq!(store.erase_rejected(vec![first.id]).await.unwrap(), 1);
    assert_eq!(store.erase_rejected(vec![first.id]).await.unwrap(), 0);
    assert_eq!(store.rejected(10).await.unwrap().len(), 1);
}

/// A leased row is not claimed again until its lease ends; then it is,
/// under a new token.
pub(crate) async fn claim_skips_leased_rows_until_the_lease_ends(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0), row("a", "m2", T0 + 1)], vec![])
        .await
        .unwrap();
    let first = store.claim(T0 + 10, "a", 10, 1_000).await.unwrap();
    assert_eq!(first.len(), 2);
    assert!(store
        .claim(T0 + 10, "a", 10, 1_000)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .claim(T0 + 1_009, "a", 10, 1_000)
        .await
        .unwrap()
        .is_empty());
    let stats = store.stats(T0 + 1_009).await.unwrap();
    assert_eq!(stats.in_flight, 2);
    let again = store.claim(T0 + 1_010, "a", 10, 1_000).await.unwrap();
    assert_eq!(
        ids(&again),
        strings(&["m1", "m2"]),
        "the lease ended at T0 + 1010"
    );
    assert_ne!(again[0].claim, first[0].claim);
}

// -- finish ---------------------------------------------------------------

/// A delivered row is done: counted, never claimed again.
pub(crate) async fn finish_delivered(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, LEASE).await.unwrap();
    assert_eq!(
        store
            .finish(vec![delivered(&c[0], 1)], T0 + 5)
            .await
            .unwrap(),
        0
    );
    let stats = store.stats(T0 + 5).await.unwrap();
    assert_eq!((stats.pending, stats.delivered, stats.in_flight), (0, 1, 0));
    assert!(store
        .claim(T0 + LEASE + 5, "a", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.next_due(T0 + 5).await.unwrap(), None);
    // Finished once: the same finish again is refused.
    assert_eq!(
        store
            .finish(vec![delivered(&c[0], 1)], T0 + 6)
            .await
            .unwrap(),
        1
    );
}

/// A worker whose lease ran out and whose row was claimed again cannot
/// overwrite the new holder's result: its finish is refused and counted.
pub(crate) async fn finish_counts_only_with_the_matching_token(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let old = store.claim(T0, "a", 10, 1_000).await.unwrap();
    let new = store.claim(T0 + 1_000, "a", 10, 1_000).await.unwrap();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].id, old[0].id);

    let refusals = store.finish(vec![dead(&old[0])], T0 + 1_001).await.unwrap();
    assert_eq!(refusals, 1, "the stale token is refused");
    let stats = store.stats(T0 + 1_001).await.unwrap();
    assert_eq!((stats.pending, stats.dead, stats.in_flight), (1, 0, 1));

    let wrong = Finish::Delivered {
        id: new[0].id,
        claim: new[0].claim ^ 1,
        attempts: 1,
        outcome: None,
        batch: None,
    };
    assert_eq!(store.finish(vec![wrong], T0 + 1_001).await.unwrap(), 1);
    assert_eq!(
        store
            .finish(vec![delivered(&new[0], 2)], T0 + 1_002)
            .await
            .unwrap(),
        0
    );
    let stats = store.stats(T0 + 1_002).await.unwrap();
    assert_eq!((stats.pending, stats.delivered, stats.dead), (0, 1, 0));
}

/// The token fences, not the clock: a finish after the lease ended counts
/// while no other worker has claimed the row.
pub(crate) async fn finish_after_lease_end_counts_while_no_one_took_over(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, 1_000).await.unwrap();
    assert_eq!(
        store
            .finish(vec![delivered(&c[0], 1)], T0 + 5_000)
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.stats(T0 + 5_000).await.unwrap().delivered, 1);
}

/// A retry keeps the core's state and attempts, frees the lease and makes
/// the row due again at `due_at`, not before.
pub(crate) async fn finish_retry_saves_state_and_due_time(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, LEASE).await.unwrap();
    let retry = Finish::Retry {
        id: c[0].id,
        claim: c[0].claim,
        attempts: 2,
        state: Some(r#"{"round":1}"#.into()),
        due_at: T0 + 60_000,
        batch: None,
    };
    assert_eq!(store.finish(vec![retry], T0 + 10).await.unwrap(), 0);
    let stats = store.stats(T0 + 10).await.unwrap();
    assert_eq!((stats.pending, stats.in_flight), (1, 0));
    assert_eq!(stats.next_due_at, Some(T0 + 60_000));
    assert_eq!(store.next_due(T0 + 10).await.unwrap(), Some(T0 + 60_000));
    assert!(store
        .claim(T0 + 59_999, "a", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
    let again = store.claim(T0 + 60_000, "a", 10, LEASE).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].state.as_deref(), Some(r#"{"round":1}"#));
    assert_eq!(again[0].attempts, 2);
    // The old token was cleared by the retry: it cannot finish the new turn.
    assert_eq!(
        store
            .finish(vec![delivered(&c[0], 3)], T0 + 60_001)
            .await
            .unwrap(),
        1
    );
}

/// A dead letter keeps its outcome, attempts and when it gave up.
pub(crate) async fn finish_dead_makes_a_dead_letter(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, LEASE).await.unwrap();
    assert_eq!(store.finish(vec![dead(&c[0])], T0 + 7).await.unwrap(), 0);
    let stats = store.stats(T0 + 7).await.unwrap();
    assert_eq!((stats.pending, stats.dead), (0, 1));
    let d = store.dead_letters(10).await.unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].source, "a");
    assert_eq!(d[0].message_id, "m1");
    assert_eq!(d[0].kind, "track");
    assert_eq!(d[0].received_at, T0);
    assert_eq!(d[0].finished_at, Some(T0 + 7));
    assert_eq!(d[0].attempts, 3);
    assert_eq!(
        d[0].outcome.as_deref(),
        Some(r#"{"kind":"gave_up","reason":"window_exhausted"}"#)
    );
    assert!(store
        .claim(T0 + LEASE + 7, "a", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
}

/// An undeliverable finish parks the row: counted, not claimed, not a dead
/// letter.
pub(crate) async fn finish_undeliverable(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, LEASE).await.unwrap();
    assert_eq!(
        store
            .finish(vec![undeliverable(&c[0])], T0 + 7)
            .await
            .unwrap(),
        0
    );
    let stats = store.stats(T0 + 7).await.unwrap();
    assert_eq!((stats.pending, stats.undeliverable, stats.dead), (0, 1, 0));
    assert!(store.dead_letters(10).await.unwrap().is_empty());
    assert!(store
        .claim(T0 + LEASE + 7, "a", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.next_due(T0 + 7).await.unwrap(), None);
}

/// A release gives the row back as it was: claimable at once.
pub(crate) async fn finish_release_gives_back_unchanged(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, LEASE).await.unwrap();
    let release = Finish::Release {
        id: c[0].id,
        claim: c[0].claim,
    };
    assert_eq!(store.finish(vec![release], T0 + 1).await.unwrap(), 0);
    assert_eq!(store.stats(T0 + 1).await.unwrap().in_flight, 0);
    let again = store.claim(T0 + 1, "a", 10, LEASE).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempts, 0);
    assert_eq!(again[0].state, None);
}

/// One finish call may end rows in every way at once; only the refused
/// ones are counted.
pub(crate) async fn finish_mixed_kinds_counts_refused(store: Arc<dyn Store>) {
    let rows: Vec<Row> = (0..6).map(|i| row("a", &format!("m{i}"), T0 + i)).collect();
    store.insert(rows, vec![]).await.unwrap();
    let c = store.claim(T0 + 10, "a", 10, LEASE).await.unwrap();
    assert_eq!(c.len(), 6);
    let stale = Finish::Delivered {
        id: c[5].id,
        claim: c[5].claim.wrapping_add(1),
        attempts: 1,
        outcome: None,
        batch: None,
    };
    let items = vec![
        delivered(&c[0], 1),
        Finish::Retry {
            id: c[1].id,
            claim: c[1].claim,
            attempts: 1,
            state: Some("{}".into()),
            due_at: T0 + 1_000,
            batch: None,
        },
        dead(&c[2]),
        undeliverable(&c[3]),
        Finish::Release {
            id: c[4].id,
            claim: c[4].claim,
        },
        stale,
        Finish::Release {
            id: -1,
            claim: c[0].claim,
        },
    ];
    assert_eq!(store.finish(items, T0 + 20).await.unwrap(), 2);
    let stats = store.stats(T0 + 20).await.unwrap();
    assert_eq!(stats.delivered, 1);
    assert_eq!(stats.dead, 1);
    assert_eq!(stats.undeliverable, 1);
    assert_eq!(stats.pending, 3);
    assert_eq!(stats.in_flight, 1, "m5 is still held");
    assert_eq!(store.finish(vec![], T0 + 20).await.unwrap(), 0);
}

// -- renew, next_due, park_unrouted ----------------------------------------

/// A renewal extends the leases of the given tokens only, and only while
/// their rows are pending.
pub(crate) async fn renew_extends_leases(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0), row("b", "m2", T0)], vec![])
        .await
        .unwrap();
    let a = store.claim(T0, "a", 10, 1_000).await.unwrap();
    let b = store.claim(T0, "b", 10, 1_000).await.unwrap();
    store.renew(vec![a[0].claim], T0 + 5_000).await.unwrap();
    store.renew(vec![], T0 + 9_000).await.unwrap();
    assert_eq!(
        store.stats(T0 + 1_000).await.unwrap().in_flight,
        1,
        "a only"
    );
    assert!(store
        .claim(T0 + 1_000, "a", 10, 1_000)
        .await
        .unwrap()
        .is_empty());
    let b2 = store.claim(T0 + 1_000, "b", 10, 1_000).await.unwrap();
    assert_eq!(ids(&b2), strings(&["m2"]), "b was not renewed");
    assert_ne!(b2[0].claim, b[0].claim);
    assert_eq!(store.stats(T0 + 1_999).await.unwrap().in_flight, 2);
    assert!(store
        .claim(T0 + 4_999, "a", 10, 1_000)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.claim(T0 + 5_000, "a", 10, 1_000).await.unwrap().len(),
        1
    );
    // A finished row is not leased again by a renewal of its token.
    assert_eq!(
        store
            .finish(vec![delivered(&b2[0], 1)], T0 + 1_500)
            .await
            .unwrap(),
        0
    );
    store.renew(vec![b2[0].claim], T0 + 90_000).await.unwrap();
    assert_eq!(
        store.stats(T0 + 5_001).await.unwrap().in_flight,
        1,
        "a again"
    );
    assert_eq!(store.stats(T0 + 5_001).await.unwrap().delivered, 1);
}

/// The earliest time something pending is due or its lease ends.
pub(crate) async fn next_due_earliest_due_or_lease_end(store: Arc<dyn Store>) {
    assert_eq!(store.next_due(T0).await.unwrap(), None);
    store
        .insert(
            vec![row("a", "m1", T0 + 100), row("b", "m2", T0 + 300)],
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(store.next_due(T0).await.unwrap(), Some(T0 + 100));
    let c = store.claim(T0 + 100, "a", 10, 1_000).await.unwrap();
    assert_eq!(c.len(), 1);
    // m1 is leased until T0 + 1100; m2 is due at T0 + 300.
    assert_eq!(store.next_due(T0 + 100).await.unwrap(), Some(T0 + 300));
    let b = store.claim(T0 + 300, "b", 10, 1_000).await.unwrap();
    assert_eq!(store.next_due(T0 + 300).await.unwrap(), Some(T0 + 1_100));
    // Once the lease has ended, the row counts as due at its due time.
    assert_eq!(store.next_due(T0 + 1_200).await.unwrap(), Some(T0 + 100));
    store
        .finish(vec![delivered(&c[0], 1), delivered(&b[0], 1)], T0 + 400)
        .await
        .unwrap();
    assert_eq!(
        store.next_due(T0 + 400).await.unwrap(),
        None,
        "finished rows are not due"
    );
}

/// `row` for destination `name` of the call's destinations, the call's
/// first row or not.
fn row_to(name: &str, first: bool, source: &str, message_id: &str, at: i64) -> Row {
    Row {
        destination: name.into(),
        first,
        ..row(source, message_id, at)
    }
}

fn keys(pairs: &[(&str, &str)]) -> Vec<String> {
    pairs
        .iter()
        .map(|(s, d)| callpost_relay::store::routed_key(s, d))
        .collect()
}

/// A call goes in once for each destination, counted once; the same call
/// again is a duplicate at each destination it has, and new only at one it
/// has not (a destination added since); searches, claims and the log tell
/// the destinations apart.
pub(crate) async fn a_call_is_kept_once_per_destination_and_counted_once(store: Arc<dyn Store>) {
    let both = || {
        vec![
            row_to("webhooks", true, "a", "m1", T0),
            row_to("crm", false, "a", "m1", T0),
        ]
    };
    assert_eq!(store.insert(both(), vec![]).await.unwrap(), 1);
    assert_eq!(store.insert(both(), vec![]).await.unwrap(), 0);
    let later = vec![
        row_to("webhooks", true, "a", "m1", T0),
        row_to("crm", false, "a", "m1", T0),
        row_to("chat", false, "a", "m1", T0),
    ];
    assert_eq!(
        store.insert(later, vec![]).await.unwrap(),
        0,
        "counted by its first row: a duplicate"
    );
    let page = store.search(LogFilter::default(), None, 10).await.unwrap();
    let mut got: Vec<String> = page.rows.iter().map(|e| e.destination.clone()).collect();
    got.sort();
    assert_eq!(got, strings(&["chat", "crm", "webhooks"]));
    let crm = LogFilter {
        destination: Some("crm".into()),
        ..LogFilter::default()
    };
    let page = store.search(crm, None, 10).await.unwrap();
    assert_eq!(page.rows.len(), 1);
    assert_eq!(page.rows[0].destination, "crm");
    let claimed = store.claim(T0, "a", 10, LEASE).await.unwrap();
    let mut to: Vec<String> = claimed.iter().map(|c| c.destination.clone()).collect();
    to.sort();
    assert_eq!(to, strings(&["chat", "crm", "webhooks"]));
    let logged = store
        .logged_call("a".into(), "m1".into(), Some("crm".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(logged.entry.destination, "crm");
    let first = store
        .logged_call("a".into(), "m1".into(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.entry.destination, "webhooks", "the first stored");
    assert!(store
        .logged_call("a".into(), "m1".into(), Some("nowhere".into()))
        .await
        .unwrap()
        .is_none());
}

/// Pending rows whose destination is not routed (gone or disabled) are
/// parked (kept, replayable); leased rows are left to their worker.
pub(crate) async fn park_unrouted_parks_only_unrouted_unleased_rows(store: Arc<dyn Store>) {
    store
        .insert(
            vec![
                row("a", "a1", T0),
                row_to("crm", false, "a", "a1", T0),
                of_user(row("b", "b1", T0), "u"),
                of_user(row("b", "b2", T0 + 1), "u"),
                row("c", "c1", T0),
                row("c", "c2", T0 + 50_000),
            ],
            vec![],
        )
        .await
        .unwrap();
    let held = store.claim(T0 + 1, "b", 1, LEASE).await.unwrap();
    assert_eq!(ids(&held), strings(&["b1"]));
    let n = store
        .park_unrouted(T0 + 10, keys(&[("a", "webhooks")]))
        .await
        .unwrap();
    assert_eq!(n, 4, "a1 to crm, b2, c1 and c2 (not yet due: parked too)");
    let stats = store.stats(T0 + 10).await.unwrap();
    assert_eq!((stats.pending, stats.undeliverable), (2, 4));
    assert_eq!(store.claim(T0 + 10, "a", 10, LEASE).await.unwrap().len(), 1);
    assert!(store
        .claim(T0 + 60_000, "c", 10, LEASE)
        .await
        .unwrap()
        .is_empty());
    // The held row's worker can still finish it.
    assert_eq!(
        store
            .finish(vec![delivered(&held[0], 1)], T0 + 11)
            .await
            .unwrap(),
        0
    );
    // Every source routed: nothing to park.
    assert_eq!(
        store
            .park_unrouted(
                T0 + 12,
                keys(&[
                    ("a", "webhooks"),
                    ("a", "crm"),
                    ("b", "webhooks"),
                    ("c", "webhooks")
                ])
            )
            .await
            .unwrap(),
        0
    );
    // Parked rows come back with a replay that includes them.
    let back = store
        .replay(
            T0 + 20,
            ReplayFilter {
                calls: LogFilter {
                    source: Some("c".into()),
                    ..LogFilter::default()
                },
                include_undeliverable: true,
                ..ReplayFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(back, 2);
}

// -- purge ----------------------------------------------------------------

/// Each finished kind is deleted once older than its own retention
/// (delivered, undeliverable and dead by when they finished; a call stored
/// undeliverable at ingest finished when it was received; refused calls by
/// Sources with a retention of their own are purged by it; every other
/// source (one no longer configured included) by the relay's.
pub(crate) async fn purge_keeps_each_source_by_its_own_retention(store: Arc<dyn Store>) {
    store
        .insert(
            vec![
                row("short", "s1", T0),
                row("long", "l1", T0),
                row("other", "o1", T0),
            ],
            vec![refused("short", T0, "{}"), refused("other", T0, "{}")],
        )
        .await
        .unwrap();
    let claimed = store.claim(T0, "short", 10, LEASE).await.unwrap();
    let mut finishes: Vec<Finish> = claimed.iter().map(|c| delivered(c, 1)).collect();
    for source in ["long", "other"] {
        let c = store.claim(T0, source, 10, LEASE).await.unwrap();
        finishes.extend(c.iter().map(|c| delivered(c, 1)));
    }
    store.finish(finishes, T0).await.unwrap();
    let hours = |h: i64| h * 3_600_000;
    let relay = Retention {
        delivered_ms: hours(48),
        undeliverable_ms: hours(48),
        dead_ms: hours(48),
        rejected_ms: hours(48),
    };
    let short = Retention {
        delivered_ms: hours(24),
        rejected_ms: hours(24),
        ..relay
    };
    let long = Retention {
        delivered_ms: hours(96),
        ..relay
    };
    let own = vec![("short".to_owned(), short), ("long".to_owned(), long)];
    let at = |h: i64| T0 + hours(h) + 1;
    let p = store
        .purge_sources(at(24), relay, own.clone())
        .await
        .unwrap();
    assert_eq!(
        (p.delivered, p.rejected),
        (1, 1),
        "the short source's, at 24 h"
    );
    let p = store
        .purge_sources(at(48), relay, own.clone())
        .await
        .unwrap();
    assert_eq!((p.delivered, p.rejected), (1, 1), "the others', at 48 h");
    let left = store.search(LogFilter::default(), None, 10).await.unwrap();
    let ids: Vec<&str> = left.rows.iter().map(|e| e.message_id.as_str()).collect();
    assert_eq!(ids, ["l1"], "the long source's, kept");
    let p = store.purge_sources(at(96), relay, own).await.unwrap();
    assert_eq!(p.delivered, 1);
}

/// when they were received). Pending rows are never purged.
pub(crate) async fn purge_each_kind_by_its_retention(store: Arc<dyn Store>) {
    let t = T0 + 10;
    stored_and_finished(&store, vec![row("a", "d", T0)], t, |c| delivered(c, 1)).await;
    stored_and_finished(&store, vec![row("a", "x", T0)], t, dead).await;
    stored_and_finished(&store, vec![row("a", "u", T0)], t, undeliverable).await;
    store
        .insert(
            vec![parked("a", "p", t), row("a", "q", T0)],
            vec![refused("a", t, "{}")],
        )
        .await
        .unwrap();
    let retention = Retention {
        delivered_ms: 1_000,
        undeliverable_ms: 2_000,
        dead_ms: 3_000,
        rejected_ms: 4_000,
    };
    assert_eq!(
        store.purge(t + 1_000, retention).await.unwrap(),
        Purged::default(),
        "not older yet"
    );
    let p = store.purge(t + 1_001, retention).await.unwrap();
    assert_eq!(
        p,
        Purged {
            delivered: 1,
            ..Purged::default()
        }
    );
    let p = store.purge(t + 2_001, retention).await.unwrap();
    assert_eq!(
        p,
        Purged {
            undeliverable: 2,
            ..Purged::default()
        }
    );
    let p = store.purge(t + 3_001, retention).await.unwrap();
    assert_eq!(
        p,
        Purged {
            dead: 1,
            ..Purged::default()
        }
    );
    let p = store.purge(t + 4_001, retention).await.unwrap();
    assert_eq!(
        p,
        Purged {
            rejected: 1,
            ..Purged::default()
        }
    );
    let stats = store.stats(t + 4_001).await.unwrap();
    assert_eq!(
        (
            stats.pending,
            stats.delivered,
            stats.dead,
            stats.undeliverable,
            stats.rejected
        ),
        (1, 0, 0, 0, 0)
    );
    // A purged messageId is new again.
    assert_eq!(
        store
            .insert(vec![row("a", "d", t + 5_000)], vec![])
            .await
            .unwrap(),
        1
    );
    let p = store.purge(T0 + 10_000_000, retention).await.unwrap();
    assert_eq!(p, Purged::default(), "pending rows are never purged");
}

// -- replay ---------------------------------------------------------------

async fn dead_letters_of(store: &Arc<dyn Store>) -> Vec<String> {
    sorted(
        store
            .dead_letters(100)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.message_id)
            .collect(),
    )
}

/// Only the named dead letters come back.
pub(crate) async fn replay_dead_letters_by_message_ids(store: Arc<dyn Store>) {
    let rows = vec![
        row("a", "m1", T0),
        row("a", "m2", T0 + 1),
        row("b", "m1", T0 + 2),
    ];
    stored_and_finished(&store, rows, T0 + 10, dead).await;
    let n = store
        .replay(
            T0 + 20,
            ReplayFilter {
                calls: LogFilter {
                    message_ids: Some(strings(&["m1", "nope"])),
                    ..LogFilter::default()
                },
                ..ReplayFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(n, 2, "m1 of a and of b");
    assert_eq!(dead_letters_of(&store).await, strings(&["m2"]));
    let n = store
        .replay(
            T0 + 20,
            ReplayFilter {
                calls: LogFilter {
                    message_ids: Some(strings(&["m1"])),
                    ..LogFilter::default()
                },
                ..ReplayFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(n, 0, "pending rows are not replayed");
}

/// Source, since (inclusive) and until (exclusive) narrow a replay, and
/// combine.
pub(crate) async fn replay_filters_source_since_until(store: Arc<dyn Store>) {
    let rows = vec![
        row("a", "a0", T0),
        row("a", "a1", T0 + 100),
        row("a", "a2", T0 + 200),
        row("b", "b1", T0 + 100),
    ];
    stored_and_finished(&store, rows, T0 + 1_000, dead).await;
    let filter = |source: Option<&str>, since: Option<i64>, until: Option<i64>| ReplayFilter {
        calls: LogFilter {
            source: source.map(Into::into),
            since,
            until,
            ..LogFilter::default()
        },
        ..ReplayFilter::default()
    };
    let n = store
        .replay(
            T0 + 2_000,
            filter(Some("a"), Some(T0 + 100), Some(T0 + 200)),
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(dead_letters_of(&store).await, strings(&["a0", "a2", "b1"]));
    let n = store
        .replay(T0 + 2_000, filter(None, Some(T0 + 100), None))
        .await
        .unwrap();
    assert_eq!(n, 2, "a2 and b1");
    let n = store
        .replay(T0 + 2_000, filter(Some("b"), None, None))
        .await
        .unwrap();
    assert_eq!(n, 0);
    let n = store
        .replay(T0 + 2_000, filter(None, None, Some(T0 + 1)))
        .await
        .unwrap();
    assert_eq!(n, 1, "a0");
    assert!(dead_letters_of(&store).await.is_empty());
}

/// Delivered and undeliverable calls come back only when the filter asks
/// for them; dead letters always.
pub(crate) async fn replay_includes_delivered_and_undeliverable_only_when_asked(
    store: Arc<dyn Store>,
) {
    stored_and_finished(&store, vec![row("a", "d", T0)], T0 + 10, |c| {
        delivered(c, 1)
    })
    .await;
    stored_and_finished(&store, vec![row("a", "x", T0)], T0 + 10, dead).await;
    stored_and_finished(&store, vec![row("a", "u", T0)], T0 + 10, undeliverable).await;
    store
        .insert(vec![parked("a", "p", T0)], vec![])
        .await
        .unwrap();

    let all_sources = || ReplayFilter {
        calls: LogFilter {
            source: Some("a".into()),
            ..LogFilter::default()
        },
        ..ReplayFilter::default()
    };
    assert_eq!(
        store.replay(T0 + 20, all_sources()).await.unwrap(),
        1,
        "the dead letter"
    );
    assert_eq!(store.replay(T0 + 20, all_sources()).await.unwrap(), 0);
    let with_delivered = ReplayFilter {
        include_delivered: true,
        ..all_sources()
    };
    assert_eq!(
        store.replay(T0 + 20, with_delivered).await.unwrap(),
        1,
        "the delivered call"
    );
    let with_undeliverable = ReplayFilter {
        include_undeliverable: true,
        ..all_sources()
    };
    assert_eq!(
        store.replay(T0 + 20, with_undeliverable).await.unwrap(),
        2,
        "u and p"
    );
    let stats = store.stats(T0 + 20).await.unwrap();
    assert_eq!(
        (
            stats.pending,
            stats.delivered,
            stats.dead,
            stats.undeliverable
        ),
        (4, 0, 0, 0)
    );
}

/// A replayed call is pending again, due now, with no state, attempts,
/// outcome or lease: a fresh start with the same messageId.
pub(crate) async fn replay_resets_state_and_makes_rows_due_now(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, LEASE).await.unwrap();
    store
        .finish(
            vec![Finish::Retry {
                id: c[0].id,
                claim: c[0].claim,
                attempts: 1,
                state: Some("{}".into()),
                due_at: T0 + 100,
                batch: None,
            }],
            T0 + 1,
        )
        .await
        .unwrap();
    let c = store.claim(T0 + 100, "a", 10, LEASE).await.unwrap();
    store.finish(vec![dead(&c[0])], T0 + 200).await.unwrap();

    let now = T0 + 50_000_000;
    let n = store.replay(now, ReplayFilter::default()).await.unwrap();
    assert_eq!(n, 1);
    assert_eq!(store.next_due(now).await.unwrap(), Some(now), "due now");
    let stats = store.stats(now).await.unwrap();
    assert_eq!((stats.pending, stats.dead, stats.in_flight), (1, 0, 0));
    assert_eq!(stats.next_due_at, Some(now));
    assert!(
        store
            .claim(now - 1, "a", 10, LEASE)
            .await
            .unwrap()
            .is_empty(),
        "not before now"
    );
    let again = store.claim(now, "a", 10, LEASE).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].message_id, "m1");
    assert_eq!(again[0].state, None);
    assert_eq!(again[0].attempts, 0);
    assert_ne!(again[0].claim, c[0].claim);
    // The old holder's token is gone.
    assert_eq!(
        store.finish(vec![delivered(&c[0], 9)], now).await.unwrap(),
        1
    );
    assert_eq!(
        store
            .finish(vec![delivered(&again[0], 1)], now)
            .await
            .unwrap(),
        0
    );
}

/// An id list longer than a statement's parameter limit still works.
pub(crate) async fn replay_long_id_list(store: Arc<dyn Store>) {
    let rows: Vec<Row> = (0..1_200)
        .map(|i| row("a", &format!("m{i}"), T0 + i))
        .collect();
    store.insert(rows, vec![]).await.unwrap();
    let mut left = 1_200;
    while left > 0 {
        let c = store.claim(T0 + 2_000, "a", 500, LEASE).await.unwrap();
        assert!(!c.is_empty());
        left -= c.len();
        store
            .finish(c.iter().map(dead).collect(), T0 + 2_000)
            .await
            .unwrap();
    }
    let mut wanted: Vec<String> = (0..40_000).map(|i| format!("x{i}")).collect();
    wanted.extend((0..1_200).step_by(2).map(|i| format!("m{i}")));
    let n = store
        .replay(
            T0 + 3_000,
            ReplayFilter {
                calls: LogFilter {
                    message_ids: Some(wanted),
                    ..LogFilter::default()
                },
                ..ReplayFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(n, 600);
    assert_eq!(store.stats(T0 + 3_000).await.unwrap().dead, 600);
}

/// A replay runs in chunks of 10,000 rows, each a write of its own (so
/// ingest never waits behind one statement over millions of rows); every
/// row is replayed all the same, and the count is the sum of the chunks.
pub(crate) async fn replay_of_more_rows_than_one_chunk(store: Arc<dyn Store>) {
    const N: i64 = 10_000 * 2 + 7;
    let rows: Vec<Row> = (0..N)
        .map(|i| parked("a", &format!("p{i}"), T0 + i))
        .collect();
    for chunk in rows.chunks(5_000) {
        store.insert(chunk.to_vec(), vec![]).await.unwrap();
    }
    let n = store
        .replay(
            T0 + N,
            ReplayFilter {
                include_undeliverable: true,
                ..ReplayFilter::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(n, N.unsigned_abs());
    let stats = store.stats(T0 + N).await.unwrap();
    assert_eq!((stats.pending, stats.undeliverable), (N, 0));
}

// -- reads ----------------------------------------------------------------

/// Counts by state, held rows, refused calls, the oldest pending call and
/// the earliest due time.
pub(crate) async fn stats_counts(store: Arc<dyn Store>) {
    let s = store.stats(T0).await.unwrap();
    assert_eq!(s, Default::default());
    stored_and_finished(
        &store,
        vec![row("a", "d1", T0), row("b", "d2", T0)],
        T0,
        |c| delivered(c, 1),
    )
    .await;
    stored_and_finished(&store, vec![row("a", "x1", T0)], T0, dead).await;
    store
        .insert(
            vec![
                row("a", "p1", T0 + 50),
                row("a", "p2", T0 + 20),
                row("b", "p3", T0 + 30),
                parked("b", "u1", T0),
            ],
            vec![refused("a", T0, "{}"), refused("b", T0, "{}")],
        )
        .await
        .unwrap();
    store.claim(T0 + 30, "a", 1, 100).await.unwrap();
    let s = store.stats(T0 + 40).await.unwrap();
    assert_eq!(s.pending, 3);
    assert_eq!(s.in_flight, 1);
    assert_eq!(s.delivered, 2);
    assert_eq!(s.dead, 1);
    assert_eq!(s.undeliverable, 1);
    assert_eq!(s.rejected, 2);
    assert_eq!(s.oldest_pending_received_at, Some(T0 + 20));
    assert_eq!(s.next_due_at, Some(T0 + 20));
    assert_eq!(
        store.stats(T0 + 130).await.unwrap().in_flight,
        0,
        "the lease ended"
    );
}

/// Dead letters come oldest received first, at most `limit`.
pub(crate) async fn dead_letters_oldest_first(store: Arc<dyn Store>) {
    let rows = vec![
        row("a", "m3", T0 + 3),
        row("a", "m1", T0 + 1),
        row("b", "m2", T0 + 2),
    ];
    stored_and_finished(&store, rows, T0 + 10, dead).await;
    let d = store.dead_letters(2).await.unwrap();
    let got: Vec<_> = d
        .iter()
        .map(|d| (d.source.as_str(), d.message_id.as_str()))
        .collect();
    assert_eq!(got, vec![("a", "m1"), ("b", "m2")]);
    assert_eq!(store.dead_letters(10).await.unwrap().len(), 3);
}

/// Refused calls come newest first, at most `limit`.
pub(crate) async fn rejected_newest_first(store: Arc<dyn Store>) {
    for i in 0..3 {
        store
            .insert(vec![], vec![refused("a", T0, &format!("{{\"n\":{i}}}"))])
            .await
            .unwrap();
    }
    let r = store.rejected(2).await.unwrap();
    let texts: Vec<_> = r.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts, vec![r#"{"n":2}"#, r#"{"n":1}"#]);
}

/// Disabled endpoint URLs are kept until enabled; disabling twice keeps
/// the first time.
pub(crate) async fn disabled_endpoints_are_kept_until_enabled(store: Arc<dyn Store>) {
    assert!(store.disabled_endpoints().await.unwrap().is_empty());
    let (a, b) = ("https://a.example.com/in", "https://b.example.com/in");
    store.set_endpoint_disabled(b, true, T0).await.unwrap();
    store.set_endpoint_disabled(a, true, T0).await.unwrap();
    store.set_endpoint_disabled(a, true, T0 + 1).await.unwrap();
    assert_eq!(store.disabled_endpoints().await.unwrap(), vec![a, b]);
    store.set_endpoint_disabled(a, false, T0 + 2).await.unwrap();
    store.set_endpoint_disabled(a, false, T0 + 3).await.unwrap();
    assert_eq!(store.disabled_endpoints().await.unwrap(), vec![b]);
}

/// A hold is kept per URL at the later of each part, and read only while
/// some part has not ended.
pub(crate) async fn holds_keep_the_later_of_each_part(store: Arc<dyn Store>) {
    use callpost_core::Timestamp;
    let at = |ms: i64| Some(Timestamp::from_millis(ms).unwrap());
    let url = "https://a.example.com/in";
    assert!(store.holds(T0).await.unwrap().is_empty());
    let paused = Hold {
        paused_until: at(T0 + 5_000),
        open_until: None,
        open_ms: 0,
    };
    store.put_hold(url, paused).await.unwrap();
    let opened = Hold {
        paused_until: at(T0 + 1_000),
        open_until: at(T0 + 30_000),
        open_ms: 30_000,
    };
    store.put_hold(url, opened).await.unwrap();
    let both = Hold {
        paused_until: at(T0 + 5_000),
        open_until: at(T0 + 30_000),
        open_ms: 30_000,
    };
    assert_eq!(store.holds(T0).await.unwrap(), vec![(url.to_owned(), both)]);
    // An earlier circuit does not shorten it, nor change its length.
    let earlier = Hold {
        paused_until: None,
        open_until: at(T0 + 10_000),
        open_ms: 60_000,
    };
    store.put_hold(url, earlier).await.unwrap();
    assert_eq!(store.holds(T0).await.unwrap(), vec![(url.to_owned(), both)]);
    // Still read while the circuit is open, gone once both parts ended.
    assert_eq!(store.holds(T0 + 10_000).await.unwrap().len(), 1);
    assert!(store.holds(T0 + 30_000).await.unwrap().is_empty());
}

/// Sources are kept by name: a write creates, replaces and removes in one
/// go, and leaves the others as they are; it goes in only over the
/// version of the set it read.
pub(crate) async fn sources_are_written_and_removed_together(store: Arc<dyn Store>) {
    let first = store.stored_sources().await.unwrap();
    assert!(first.rows.is_empty());
    let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());
    store
        .write_sources(
            first.version,
            vec![pair("b", "v1.b"), pair("a", "v1.a")],
            vec![],
        )
        .await
        .unwrap();
    let second = store.stored_sources().await.unwrap();
    assert_eq!(second.rows, vec![pair("a", "v1.a"), pair("b", "v1.b")]);
    assert_ne!(second.version, first.version);
    // Written over a version another write replaced: nothing changes.
    let e = store
        .write_sources(first.version, vec![pair("z", "v1.z")], vec!["a".into()])
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
    assert_eq!(store.stored_sources().await.unwrap(), second);
    store
        .write_sources(
            second.version,
            vec![pair("a", "v1.a2"), pair("c", "v1.c")],
            vec!["b".into(), "z".into()],
        )
        .await
        .unwrap();
    let third = store.stored_sources().await.unwrap();
    assert_eq!(third.rows, vec![pair("a", "v1.a2"), pair("c", "v1.c")]);
    store
        .write_sources(third.version, vec![], vec!["a".into()])
        .await
        .unwrap();
    assert_eq!(
        store.stored_sources().await.unwrap().rows,
        vec![pair("c", "v1.c")]
    );
}

/// An audience's state and its identify calls are stored together, only
/// over the state the sync read; the calls are deduplicated like any
/// others.
pub(crate) async fn audience_state_and_sync(store: Arc<dyn Store>) {
    assert_eq!(store.audience_state("a", "vip").await.unwrap(), None);
    let n = store
        .audience_sync(
            "a",
            "vip",
            None,
            r#"{"v":1}"#.into(),
            vec![row("a", "i1", T0), row("a", "i2", T0)],
            T0,
        )
        .await
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        store.audience_state("a", "vip").await.unwrap().as_deref(),
        Some(r#"{"v":1}"#)
    );
    let n = store
        .audience_sync(
            "a",
            "vip",
            Some(r#"{"v":1}"#.into()),
            r#"{"v":2}"#.into(),
            vec![row("a", "i2", T0 + 1), row("a", "i3", T0 + 1)],
            T0 + 1,
        )
        .await
        .unwrap();
    assert_eq!(n, 1, "i2 was stored already");
    assert_eq!(
        store.audience_state("a", "vip").await.unwrap().as_deref(),
        Some(r#"{"v":2}"#)
    );
    // A sync that read a state another sync has replaced since writes
    // nothing: neither its state nor its calls.
    for read in [None, Some(r#"{"v":1}"#.to_owned())] {
        let e = store
            .audience_sync(
                "a",
                "vip",
                read,
                r#"{"v":"lost"}"#.into(),
                vec![row("a", "lost", T0 + 2)],
                T0 + 2,
            )
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
    }
    assert_eq!(
        store.audience_state("a", "vip").await.unwrap().as_deref(),
        Some(r#"{"v":2}"#)
    );
    let lost = LogFilter {
        message_ids: Some(vec!["lost".into()]),
        ..LogFilter::default()
    };
    assert!(store.search(lost, None, 10).await.unwrap().rows.is_empty());
    let n = store
        .audience_sync("a", "other", None, "{}".into(), vec![], T0)
        .await
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(
        store.audience_state("a", "other").await.unwrap().as_deref(),
        Some("{}")
    );
    assert_eq!(store.audience_state("b", "vip").await.unwrap(), None);
    assert_eq!(
        store.audience_state("a", "vip").await.unwrap().as_deref(),
        Some(r#"{"v":2}"#)
    );
    let claimed = store.claim(T0 + 1, "a", 10, LEASE).await.unwrap();
    assert_eq!(sorted(ids(&claimed)), strings(&["i1", "i2", "i3"]));
}

/// An open store is healthy, has nothing waiting once its calls are
/// answered, and counts its statements.
pub(crate) async fn healthy_backlog_and_statements(store: Arc<dyn Store>) {
    assert!(store.healthy());
    let before = store.statements();
    let mut calls = vec![];
    for i in 0..20 {
        let s = store.clone();
        calls.push(tokio::spawn(async move {
            s.insert(vec![row("a", &format!("m{i}"), T0)], vec![])
                .await
                .unwrap()
        }));
    }
    let mut new = 0;
    for c in calls {
        new += c.await.unwrap();
    }
    assert_eq!(new, 20);
    assert_eq!(store.backlog(), 0);
    assert!(store.healthy());
    assert!(store.statements() > before, "inserts run statements");
    let seen: HashSet<String> = store
        .claim(T0, "a", 100, LEASE)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.message_id)
        .collect();
    assert_eq!(seen.len(), 20);
}

/// After close, calls fail instead of hanging.
pub(crate) async fn closed_store_refuses(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    store.close().await;
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        store.insert(vec![row("a", "m2", T0)], vec![]),
    )
    .await
    .expect("answers, does not hang");
    assert!(r.is_err(), "{r:?}");
}

// -- the delivery log ---------------------------------------------------------

/// A call of `kind` with the ids and event a search names.
fn call(
    source: &str,
    message_id: &str,
    at: i64,
    kind: &'static str,
    user: Option<&str>,
    anon: Option<&str>,
    event: Option<&str>,
) -> Row {
    // The message holds what the columns do, as a stored call's does (a
    // sealed store shows the fields from it).
    let mut message = serde_json::json!({"type": kind, "messageId": message_id});
    for (name, value) in [("userId", user), ("anonymousId", anon), ("event", event)] {
        if let Some(v) = value {
            message[name] = v.into();
        }
    }
    Row {
        kind,
        user_id: user.map(Into::into),
        anonymous_id: anon.map(Into::into),
        event: event.map(Into::into),
        message: message.to_string(),
        ..row(source, message_id, at)
    }
}

/// The ids a search finds, in its order.
async fn found(store: &Arc<dyn Store>, filter: LogFilter) -> Vec<String> {
    let page = store.search(filter, None, 100).await.unwrap();
    assert_eq!(page.next, None);
    page.rows.into_iter().map(|e| e.message_id).collect()
}

/// The log's sample: two sources, users and anonymous visitors, track
/// and identify calls at distinct times; d1 and d2 are dead, v1 delivered,
/// the rest pending.
async fn log_sample(store: &Arc<dyn Store>) {
    stored_and_finished(
        store,
        vec![
            call(
                "a",
                "d1",
                T0 + 1,
                "track",
                Some("u1"),
                None,
                Some("Order Completed"),
            ),
            call("b", "d2", T0 + 2, "identify", Some("u2"), Some("x2"), None),
        ],
        T0 + 50,
        dead,
    )
    .await;
    stored_and_finished(
        store,
        vec![call(
            "a",
            "v1",
            T0 + 3,
            "track",
            Some("u1"),
            Some("x1"),
            Some("Signed Up"),
        )],
        T0 + 50,
        |c| delivered(c, 1),
    )
    .await;
    store
        .insert(
            vec![
                call(
                    "a",
                    "p1",
                    T0 + 4,
                    "track",
                    None,
                    Some("x1"),
                    Some("Order Completed"),
                ),
                call("b", "p2", T0 + 5, "identify", Some("u1"), None, None),
            ],
            vec![],
        )
        .await
        .unwrap();
}

/// Each field narrows the search alone, and they combine; every answer is
/// newest first.
pub(crate) async fn search_by_each_field_newest_first(store: Arc<dyn Store>) {
    log_sample(&store).await;
    let all = found(&store, LogFilter::default()).await;
    assert_eq!(all, strings(&["p2", "p1", "v1", "d2", "d1"]));
    let by = |f: LogFilter| found(&store, f);
    assert_eq!(
        by(LogFilter {
            user_id: Some("u1".into()),
            ..LogFilter::default()
        })
        .await,
        strings(&["p2", "v1", "d1"])
    );
    assert_eq!(
        by(LogFilter {
            anonymous_id: Some("x1".into()),
            ..LogFilter::default()
        })
        .await,
        strings(&["p1", "v1"])
    );
    assert_eq!(
        by(LogFilter {
            event: Some("Order Completed".into()),
            ..LogFilter::default()
        })
        .await,
        strings(&["p1", "d1"])
    );
    assert_eq!(
        by(LogFilter {
            kind: Some("identify".into()),
            ..LogFilter::default()
        })
        .await,
        strings(&["p2", "d2"])
    );
    assert_eq!(
        by(LogFilter {
            source: Some("b".into()),
            ..LogFilter::default()
        })
        .await,
        strings(&["p2", "d2"])
    );
    assert_eq!(
        by(LogFilter {
            message_ids: Some(strings(&["v1", "p2", "zz"])),
            ..LogFilter::default()
        })
        .await,
        strings(&["p2", "v1"])
    );
    for (status, want) in [
        (Status::Dead, &["d2", "d1"][..]),
        (Status::Delivered, &["v1"][..]),
        (Status::Pending, &["p2", "p1"][..]),
        (Status::Undeliverable, &[][..]),
    ] {
        assert_eq!(
            by(LogFilter {
                status: Some(status),
                ..LogFilter::default()
            })
            .await,
            strings(want),
            "{status:?}"
        );
    }
    assert_eq!(
        by(LogFilter {
            since: Some(T0 + 2),
            until: Some(T0 + 4),
            ..LogFilter::default()
        })
        .await,
        strings(&["v1", "d2"]),
        "since is inclusive, until exclusive"
    );
    assert_eq!(
        by(LogFilter {
            user_id: Some("u1".into()),
            kind: Some("track".into()),
            status: Some(Status::Dead),
            ..LogFilter::default()
        })
        .await,
        strings(&["d1"])
    );
    assert!(by(LogFilter {
        user_id: Some("nobody".into()),
        ..LogFilter::default()
    })
    .await
    .is_empty());
    let page = store
        .search(
            LogFilter {
                message_ids: Some(strings(&["d1"])),
                ..LogFilter::default()
            },
            None,
            1,
        )
        .await
        .unwrap();
    let d1 = &page.rows[0];
    assert_eq!(
        (
            d1.source.as_str(),
            d1.kind.as_str(),
            d1.status,
            d1.attempts,
            d1.finished_at
        ),
        ("a", "track", "dead", 3, Some(T0 + 50))
    );
    assert_eq!(d1.event.as_deref(), Some("Order Completed"));
    assert_eq!(
        (d1.user_id.as_deref(), d1.anonymous_id.as_deref()),
        (Some("u1"), None)
    );
}

/// Pages cut by the cursor cover every match once, newest first, ties in
/// time broken by the order of storing; the last page has no cursor.
pub(crate) async fn search_pages_with_a_cursor(store: Arc<dyn Store>) {
    // 25 calls, three to a millisecond.
    let rows: Vec<Row> = (0..25)
        .map(|i| row("a", &format!("m{i:02}"), T0 + i / 3))
        .collect();
    store.insert(rows, vec![]).await.unwrap();
    let mut seen = Vec::new();
    let mut after: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let page = store.search(LogFilter::default(), after, 10).await.unwrap();
        pages += 1;
        assert!(page.rows.len() <= 10);
        seen.extend(page.rows.iter().map(|e| e.message_id.clone()));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    // Newest first, each once. Calls of one millisecond come in the order of
    // their ids, which over shard groups is not the order they came in.
    let at = |m: &String| m[1..].parse::<i64>().unwrap() / 3;
    assert!(seen.windows(2).all(|w| at(&w[0]) >= at(&w[1])), "{seen:?}");
    let mut all = seen.clone();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 25);
    // A cursor read back from its text goes on from the same place.
    let first = store.search(LogFilter::default(), None, 4).await.unwrap();
    let text = first.next.unwrap().to_string();
    let again = store
        .search(LogFilter::default(), Cursor::parse(&text), 2)
        .await
        .unwrap();
    assert_eq!(
        again
            .rows
            .iter()
            .map(|e| e.message_id.clone())
            .collect::<Vec<_>>(),
        seen[4..6]
    );
}

/// Refused calls are searched by source and time, newest first, in pages.
pub(crate) async fn search_rejected_by_source_and_time(store: Arc<dyn Store>) {
    let rejected = vec![
        refused("a", T0, "{1}"),
        refused("b", T0 + 1, "{2}"),
        refused("a", T0 + 2, "{3}"),
        refused("a", T0 + 3, "{4}"),
    ];
    store.insert(vec![], rejected).await.unwrap();
    let page = store
        .search_rejected(
            LogFilter {
                source: Some("a".into()),
                ..LogFilter::default()
            },
            None,
            2,
        )
        .await
        .unwrap();
    let times: Vec<i64> = page.rows.iter().map(|r| r.received_at).collect();
    assert_eq!(times, vec![T0 + 3, T0 + 2]);
    assert_eq!(page.rows[0].code, "message_too_large");
    let rest = store
        .search_rejected(
            LogFilter {
                source: Some("a".into()),
                ..LogFilter::default()
            },
            page.next,
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        rest.rows.iter().map(|r| r.received_at).collect::<Vec<_>>(),
        vec![T0]
    );
    assert_eq!(rest.next, None);
    let window = store
        .search_rejected(
            LogFilter {
                since: Some(T0 + 1),
                until: Some(T0 + 3),
                ..LogFilter::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        window
            .rows
            .iter()
            .map(|r| r.received_at)
            .collect::<Vec<_>>(),
        vec![T0 + 2, T0 + 1]
    );
}

/// A stored call reads back with its message, its saved state while
/// pending, and its outcome record once finished; an unknown one is none.
pub(crate) async fn logged_call_has_its_message_state_and_outcome(store: Arc<dyn Store>) {
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let c = store.claim(T0, "a", 10, LEASE).await.unwrap();
    store
        .finish(
            vec![Finish::Retry {
                id: c[0].id,
                claim: c[0].claim,
                attempts: 1,
                state: Some(r#"{"log":[1]}"#.into()),
                due_at: T0 + 100,
                batch: None,
            }],
            T0 + 1,
        )
        .await
        .unwrap();
    let call = store
        .logged_call("a".into(), "m1".into(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(call.message, row("a", "m1", T0).message);
    assert_eq!(call.state.as_deref(), Some(r#"{"log":[1]}"#));
    assert_eq!(call.outcome, None);
    assert_eq!((call.entry.status, call.entry.attempts), ("pending", 1));
    let c = store.claim(T0 + 100, "a", 10, LEASE).await.unwrap();
    let record = r#"{"kind":"delivered","log":[1,2]}"#;
    store
        .finish(
            vec![Finish::Delivered {
                id: c[0].id,
                claim: c[0].claim,
                attempts: 2,
                outcome: Some(record.into()),
                batch: None,
            }],
            T0 + 101,
        )
        .await
        .unwrap();
    let call = store
        .logged_call("a".into(), "m1".into(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(call.outcome.as_deref(), Some(record));
    assert_eq!(call.state, None);
    assert_eq!(
        (
            call.entry.status,
            call.entry.attempts,
            call.entry.finished_at
        ),
        ("delivered", 2, Some(T0 + 101))
    );
    assert!(store
        .logged_call("b".into(), "m1".into(), None)
        .await
        .unwrap()
        .is_none());
}

/// A replay takes the search's filters; its dry run counts what it then
/// replays, and changes nothing.
pub(crate) async fn replay_by_user_event_type_and_status_with_a_dry_run(store: Arc<dyn Store>) {
    log_sample(&store).await;
    let by_user = ReplayFilter {
        calls: LogFilter {
            user_id: Some("u1".into()),
            ..LogFilter::default()
        },
        ..ReplayFilter::default()
    };
    // u1's dead letter only: v1 is delivered and p2 pending.
    assert_eq!(store.replayable(by_user.clone()).await.unwrap(), 1);
    assert_eq!(
        store.replayable(by_user.clone()).await.unwrap(),
        1,
        "a dry run changes nothing"
    );
    let delivered_too = ReplayFilter {
        include_delivered: true,
        ..by_user.clone()
    };
    assert_eq!(store.replayable(delivered_too).await.unwrap(), 2);
    let only_delivered = ReplayFilter {
        calls: LogFilter {
            user_id: Some("u1".into()),
            status: Some(Status::Delivered),
            ..LogFilter::default()
        },
        ..ReplayFilter::default()
    };
    assert_eq!(store.replayable(only_delivered.clone()).await.unwrap(), 1);
    assert_eq!(store.replay(T0 + 60, only_delivered).await.unwrap(), 1);
    assert_eq!(
        found(
            &store,
            LogFilter {
                status: Some(Status::Delivered),
                ..LogFilter::default()
            }
        )
        .await,
        Vec::<String>::new()
    );
    let by_event_and_type = ReplayFilter {
        calls: LogFilter {
            event: Some("Order Completed".into()),
            kind: Some("track".into()),
            ..LogFilter::default()
        },
        ..ReplayFilter::default()
    };
    assert_eq!(
        store.replayable(by_event_and_type.clone()).await.unwrap(),
        1
    );
    assert_eq!(store.replay(T0 + 60, by_event_and_type).await.unwrap(), 1);
    assert_eq!(
        found(
            &store,
            LogFilter {
                status: Some(Status::Dead),
                ..LogFilter::default()
            }
        )
        .await,
        strings(&["d2"])
    );
}
