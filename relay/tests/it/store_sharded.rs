//! What only shard groups have, over memory stores (the contract runs over
//! two groups of each database in `store_sqlite` and `store_postgres`):
//! calls spread by user, a failed group passed by, a moved slot
//! deduplicated against its earlier group, maps that cannot replace the
//! one in force.

use crate::store_contract::{row, T0};
use callpost_core::shard::{self, SlotMap, MOVE_WINDOW_MS};
use callpost_relay::store::memory::MemoryStore;
use callpost_relay::store::sharded::{self, PASS_FAILED_MS};
use callpost_relay::store::{Row, Store, StoreError};
use std::collections::HashSet;
use std::sync::Arc;

const LEASE: i64 = 20_000;

fn half() -> SlotMap {
    SlotMap::configured(1, &[("b".into(), "512-1023".into())]).unwrap()
}

fn call(user: &str, message_id: &str) -> Row {
    let mut r = row("web", message_id, T0);
    r.user_id = Some(user.into());
    r
}

/// A user whose calls the half map puts in `group` (0 home, 1 b).
fn user_in(group: usize, n: usize) -> String {
    let map = half();
    (0..)
        .map(|i| format!("user-{i}"))
        .filter(|u| map.group_of(shard::slot_of("web", Some(u), None, "")) == group)
        .nth(n)
        .unwrap()
}

fn stores() -> (Arc<MemoryStore>, Arc<MemoryStore>) {
    (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()))
}

async fn over(map: SlotMap, groups: &[&Arc<MemoryStore>]) -> Result<Arc<dyn Store>, StoreError> {
    let groups = groups
        .iter()
        .map(|g| -> Arc<dyn Store> { Arc::<MemoryStore>::clone(g) })
        .collect();
    sharded::open(map, groups, T0).await
}

#[tokio::test]
async fn a_user_s_calls_go_to_the_slot_s_group_and_every_group_delivers() {
    let (home, b) = stores();
    let store = over(half(), &[&home, &b]).await.unwrap();
    let rows: Vec<Row> = (0..200)
        .map(|i| call(&format!("user-{i}"), &format!("m{i}")))
        .collect();
    assert_eq!(store.insert(rows.clone(), vec![]).await.unwrap(), 200);
    // Sent again: every call is where it was, and stored once.
    assert_eq!(store.insert(rows, vec![]).await.unwrap(), 0);
    let map = half();
    for (g, s) in [&home, &b].into_iter().enumerate() {
        let held = s.rows();
        assert!(held.len() > 60, "group {g} holds {}", held.len());
        for r in held {
            let slot = shard::slot_of("web", r.user_id.as_deref(), None, "");
            assert_eq!(map.group_of(slot), g, "{}", r.message_id);
        }
    }
    // Claims take from both groups, and the ids name their group.
    let claimed = store.claim(T0, "web", 500, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 200);
    let finishes = claimed
        .iter()
        .map(|c| crate::store_contract::delivered(c, 1))
        .collect();
    assert_eq!(store.finish(finishes, T0 + 1).await.unwrap(), 0);
    assert_eq!(store.stats(T0 + 2).await.unwrap().delivered, 200);
    assert_eq!(home.stats(T0 + 2).await.unwrap().pending, 0);
    assert_eq!(b.stats(T0 + 2).await.unwrap().pending, 0);
}

#[tokio::test]
async fn claims_rotate_across_groups() {
    let (home, b) = stores();
    let store = over(half(), &[&home, &b]).await.unwrap();
    let rows: Vec<Row> = (0..10)
        .flat_map(|i| {
            [
                call(&user_in(0, i), &format!("h{i}")),
                call(&user_in(1, i), &format!("b{i}")),
            ]
        })
        .collect();
    store.insert(rows, vec![]).await.unwrap();
    // One at a time: the groups take turns.
    let mut firsts = Vec::new();
    for _ in 0..4 {
        let c = store.claim(T0, "web", 1, LEASE).await.unwrap();
        firsts.push(c[0].message_id.chars().next().unwrap());
    }
    assert!(firsts.contains(&'h') && firsts.contains(&'b'), "{firsts:?}");
}

#[tokio::test]
async fn a_failed_group_is_passed_by_and_the_others_deliver() {
    let (home, b) = stores();
    let store = over(half(), &[&home, &b]).await.unwrap();
    let (at_home, at_b) = (call(&user_in(0, 0), "h"), call(&user_in(1, 0), "b"));
    store
        .insert(vec![at_home.clone(), at_b.clone()], vec![])
        .await
        .unwrap();
    b.set_failure(Some(StoreError::Unavailable("down".into())));
    // Ingest: a call for the failed group fails its request (the SDK sends
    // it again); a request for the others is stored.
    let e = store
        .insert(vec![call(&user_in(1, 1), "b2")], vec![])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Unavailable(m) if m.contains("shard group \"b\"")),
        "{e:?}"
    );
    assert_eq!(
        store.group_health(),
        [("home".to_owned(), true), ("b".to_owned(), false)]
    );
    assert!(store.healthy(), "ready while a group answers");
    assert_eq!(
        store
            .insert(vec![call(&user_in(0, 1), "h2")], vec![])
            .await
            .unwrap(),
        1
    );
    // Claims: home's calls come, the failure is not an error.
    let claimed = store.claim(T0, "web", 10, LEASE).await.unwrap();
    let ids: HashSet<String> = claimed.iter().map(|c| c.message_id.clone()).collect();
    assert_eq!(ids, HashSet::from(["h".to_owned(), "h2".to_owned()]));
    // Passed by for a second: the failed group is not asked (its answer
    // would be the failure's), then asked again.
    let asked = b.statements();
    store
        .claim(T0 + PASS_FAILED_MS - 1, "web", 10, LEASE)
        .await
        .unwrap();
    assert_eq!(
        b.statements(),
        asked,
        "the failed group was asked within its pass"
    );
    assert!(store.next_due(T0).await.unwrap().is_some());
    b.set_failure(None);
    let later = store
        .claim(T0 + PASS_FAILED_MS + 1, "web", 10, LEASE)
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].message_id, "b");
    // Every group failed: the claim's failure is the caller's.
    home.set_failure(Some(StoreError::Unavailable("down".into())));
    b.set_failure(Some(StoreError::Unavailable("down".into())));
    assert!(store
        .claim(T0 + 10 * PASS_FAILED_MS, "web", 10, LEASE)
        .await
        .is_err());
    assert!(!store.healthy(), "no group answers: not ready");
}

#[tokio::test]
async fn a_group_added_during_a_run_stores_each_call_once() {
    let (home, b) = stores();
    // One database: every call at home.
    let one = over(SlotMap::single(), &[&home]).await.unwrap();
    let before: Vec<Row> = (0..100)
        .map(|i| call(&format!("user-{i}"), &format!("m{i}")))
        .collect();
    assert_eq!(one.insert(before.clone(), vec![]).await.unwrap(), 100);
    // Group b takes half the slots: the earlier calls stay at home, and
    // those sent again are found there, within the window.
    let two = over(half(), &[&home, &b]).await.unwrap();
    assert_eq!(two.insert(before.clone(), vec![]).await.unwrap(), 0);
    assert!(b.rows().is_empty());
    let new: Vec<Row> = (100..200)
        .map(|i| call(&format!("user-{i}"), &format!("m{i}")))
        .collect();
    assert_eq!(two.insert(new.clone(), vec![]).await.unwrap(), 100);
    assert!(!b.rows().is_empty());
    assert_eq!(home.rows().len() + b.rows().len(), 200);
    // Past the window, a moved slot's earlier group is no longer asked.
    let asked = home.statements();
    let mut late = call(&user_in(1, 0), "late");
    late.received_at = T0 + MOVE_WINDOW_MS + 1;
    assert_eq!(two.insert(vec![late], vec![]).await.unwrap(), 1);
    assert_eq!(home.statements(), asked);
    // Every call is claimed and delivered once, from both groups.
    let claimed = two
        .claim(T0 + MOVE_WINDOW_MS + 2, "web", 1000, LEASE)
        .await
        .unwrap();
    let ids: HashSet<String> = claimed.iter().map(|c| c.message_id.clone()).collect();
    assert_eq!((claimed.len(), ids.len()), (201, 201));
}

#[tokio::test]
async fn a_map_that_cannot_replace_the_one_in_force_is_refused() {
    let (home, b) = stores();
    over(half(), &[&home, &b]).await.unwrap();
    // An outdated configuration: refused, with what to do.
    let e = over(SlotMap::single(), &[&home]).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Refused(m) if m.contains("newer than this configuration's")),
        "{e:?}"
    );
    // The same version with other slots: refused.
    let other = SlotMap::configured(1, &[("b".into(), "0-511".into())]).unwrap();
    assert!(matches!(
        over(other, &[&home, &b]).await,
        Err(StoreError::Refused(_))
    ));
    // A group that holds calls cannot leave the map.
    let without = SlotMap::configured(2, &[]).unwrap();
    assert!(matches!(
        over(without, &[&home]).await,
        Err(StoreError::Refused(_))
    ));
    // As many databases as groups.
    assert!(matches!(
        over(half(), &[&home]).await,
        Err(StoreError::Refused(_))
    ));
}

#[tokio::test]
async fn a_running_relay_refuses_the_calls_of_slots_a_newer_map_moved() {
    let (home, b) = stores();
    let old = over(SlotMap::single(), &[&home]).await.unwrap();
    let (stay, moved) = (call(&user_in(0, 0), "stay"), call(&user_in(1, 0), "moved"));
    assert_eq!(old.insert(vec![moved.clone()], vec![]).await.unwrap(), 1);
    // Another relay starts with the new map.
    over(half(), &[&home, &b]).await.unwrap();
    // Until the old relay's poll reads it, the old map routes as before;
    // then a call whose slot moved is refused (it
    // would be stored where the new map's relays do not look), the others
    // are stored as before.
    let mut early = moved.clone();
    early.message_id = "moved-early".into();
    assert_eq!(old.insert(vec![early], vec![]).await.unwrap(), 1);
    old.refresh().await.unwrap();
    let mut again = moved.clone();
    again.message_id = "moved-2".into();
    let e = old.insert(vec![again], vec![]).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Unavailable(m) if m.contains("restart the relay")),
        "{e:?}"
    );
    assert_eq!(old.insert(vec![stay], vec![]).await.unwrap(), 1);
}
