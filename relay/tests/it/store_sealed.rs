//! Calls sealed at rest (`store::sealed`): what the database files hold,
//! searches by id and event, deletion of sealed refused calls, and a key's
//! rotation while calls flow. The store contract over a sealed store is in
//! `store_sqlite::sealed`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use crate::store_contract::{delivered, refused, T0};
use callpost_relay::seal::{is_sealed, SealKey};
use callpost_relay::store::sealed::{self, Sealer, RESEAL_SETTING};
use callpost_relay::store::{
    sqlite, Finish, LogFilter, Row, SealTable, Status, Store, StoreOptions, Synchronous,
};
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

/// Two keys (32 bytes of base64 each).
pub(crate) const KEY_A: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const KEY_B: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

/// What no byte of a sealed database may hold.
const USER: &str = "alice@example.com";
const ANON: &str = "anon-7f3e";
const EVENT: &str = "Order Completed \u{2603}";
const SECRET: &str = "card-ending-4242";
const ANSWER: &str = "receiver-said-teapot";

async fn sqlite_store(dir: &TempDir) -> Arc<dyn Store> {
    sqlite::open(
        dir.path().join("relay.db"),
        StoreOptions {
            synchronous: Synchronous::Full,
            timeout: Duration::from_secs(10),
            exclusive: false,
            ca_file: None,
        },
    )
    .await
    .unwrap()
}

fn keys(current: &str, previous: &str) -> Arc<SealKey> {
    Arc::new(SealKey::with_previous(current, previous).unwrap())
}

/// A track call of a user with something of theirs in its properties.
fn call(message_id: &str, at: i64, user: &str) -> Row {
    Row {
        source: "shop".into(),
        message_id: message_id.into(),
        destination: callpost_core::sources::DEFAULT_DESTINATION.into(),
        first: true,
        kind: "track",
        message: serde_json::json!({
            "type": "track",
            "messageId": message_id,
            "userId": user,
            "anonymousId": ANON,
            "event": EVENT,
            "properties": {"payment": SECRET, "total": 42.5},
        })
        .to_string(),
        received_at: at,
        status: Status::Pending,
        user_id: Some(user.into()),
        anonymous_id: Some(ANON.into()),
        event: Some(EVENT.into()),
    }
}

/// Every byte of the directory's files.
fn bytes_of(dir: &TempDir) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        all.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    all
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_sealed_database_holds_no_body_answer_id_or_event_and_its_calls_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = sealed::wrap(sqlite_store(&dir).await, keys(KEY_A, ""))
        .await
        .unwrap();
    store
        .insert(
            vec![call("m1", T0, USER), call("m2", T0 + 1, "bob")],
            vec![refused(
                "shop",
                T0,
                &format!(r#"{{"userId":"{USER}","note":"{SECRET}"}}"#),
            )],
        )
        .await
        .unwrap();
    // A worker gets the call as it came; its answer is kept sealed.
    let claimed = store.claim(T0 + 5, "shop", 10, 20_000).await.unwrap();
    let m1 = claimed.iter().find(|c| c.message_id == "m1").unwrap();
    assert!(m1.message.contains(SECRET), "opened for the worker");
    store
        .finish(
            vec![Finish::Dead {
                id: m1.id,
                claim: m1.claim,
                attempts: 3,
                state: Some(format!(r#"{{"log":"{ANSWER}"}}"#)),
                outcome: format!(r#"{{"answer":"{ANSWER}"}}"#),
                batch: None,
            }],
            T0 + 6,
        )
        .await
        .unwrap();
    let m2 = claimed.iter().find(|c| c.message_id == "m2").unwrap();
    store.finish(vec![delivered(m2, 1)], T0 + 6).await.unwrap();

    // Searches by exact id, anonymous id and event find the calls, and
    // show their fields as sent.
    for filter in [
        LogFilter {
            user_id: Some(USER.into()),
            ..LogFilter::default()
        },
        LogFilter {
            event: Some(EVENT.into()),
            user_id: Some(USER.into()),
            ..LogFilter::default()
        },
    ] {
        let page = store.search(filter, None, 10).await.unwrap();
        assert_eq!(page.rows.len(), 1);
        let e = &page.rows[0];
        assert_eq!(e.message_id, "m1");
        assert_eq!(e.user_id.as_deref(), Some(USER));
        assert_eq!(e.anonymous_id.as_deref(), Some(ANON));
        assert_eq!(e.event.as_deref(), Some(EVENT));
    }
    let by_anon = LogFilter {
        anonymous_id: Some(ANON.into()),
        ..LogFilter::default()
    };
    assert_eq!(store.search(by_anon, None, 10).await.unwrap().rows.len(), 2);
    let log = store
        .logged_call("shop".into(), "m1".into(), None)
        .await
        .unwrap()
        .unwrap();
    assert!(log.message.contains(SECRET));
    assert!(log.outcome.unwrap().contains(ANSWER));
    assert!(log.state.unwrap().contains(ANSWER));
    let dead = store.dead_letters(10).await.unwrap();
    assert!(dead[0].outcome.as_deref().unwrap().contains(ANSWER));
    assert!(store.rejected(10).await.unwrap()[0].text.contains(SECRET));

    // The files (database, WAL) hold none of it.
    store.close().await;
    let files = bytes_of(&dir);
    assert!(holds(&files, "m1"), "the test reads the files it means to");
    for plain in [USER, ANON, EVENT, SECRET, ANSWER, "bob"] {
        assert!(!holds(&files, plain), "{plain:?} is in the database files");
    }
}

#[tokio::test]
async fn a_deletion_erases_sealed_and_plain_calls_and_the_refused_calls_naming_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let plain = sqlite_store(&dir).await;
    // Stored before the key was set: plain.
    plain
        .insert(
            vec![call("old", T0, USER)],
            vec![refused("shop", T0, &format!(r#"{{"userId":"{USER}"}}"#))],
        )
        .await
        .unwrap();
    let (store, _) = sealed::wrap(Arc::clone(&plain), keys(KEY_A, ""))
        .await
        .unwrap();
    store
        .insert(
            vec![call("new", T0 + 1, USER), call("other", T0 + 1, "bob")],
            vec![
                refused("shop", T0, &format!(r#"["{USER}"]"#)),
                refused("shop", T0, r#"{"userId":"bob"}"#),
            ],
        )
        .await
        .unwrap();
    // Both found by the one search.
    let by_user = LogFilter {
        user_id: Some(USER.into()),
        ..LogFilter::default()
    };
    let found = store.search(by_user.clone(), None, 10).await.unwrap();
    let mut ids: Vec<&str> = found.rows.iter().map(|e| e.message_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["new", "old"]);
    let erased = store.erase_user(USER).await.unwrap();
    assert_eq!((erased.calls, erased.rejected), (2, 2));
    assert!(store
        .search(by_user, None, 10)
        .await
        .unwrap()
        .rows
        .is_empty());
    let left = store.rejected(10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert!(left[0].text.contains("bob"));
    store.close().await;
}

/// Rows the rotation has left to do: not sealed under `key`.
async fn not_sealed_under(store: &dyn Store, key: &SealKey) -> usize {
    let mut left = 0;
    for table in [SealTable::Calls, SealTable::Rejected] {
        for r in store.sealable(table, 0, 100_000).await.unwrap() {
            left += usize::from(!r.texts.iter().flatten().all(|t| key.sealed_now(t)));
        }
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_seals_every_row_again_while_calls_flow_and_keeps_the_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let raw = sqlite_store(&dir).await;
    raw.insert(vec![call("plain-0", T0, USER)], vec![])
        .await
        .unwrap();
    let (under_a, a) = sealed::wrap(Arc::clone(&raw), keys(KEY_A, ""))
        .await
        .unwrap();
    let rows: Vec<Row> = (0..1_200)
        .map(|i| call(&format!("a-{i}"), T0 + i, &format!("user-{}", i % 50)))
        .collect();
    under_a
        .insert(rows, vec![refused("shop", T0, "{\"x\":1}")])
        .await
        .unwrap();
    let hash_before = a.user_hash(USER);
    under_a.close().await;

    // Every relay now seals with B and opens A's rows.
    let raw = sqlite_store(&dir).await;
    let ring = keys(KEY_B, KEY_A);
    let (store, b) = sealed::wrap(Arc::clone(&raw), Arc::clone(&ring))
        .await
        .unwrap();
    assert_eq!(b.user_hash(USER), hash_before, "the hashes outlive the key");
    assert!(not_sealed_under(raw.as_ref(), &ring).await > 1_000);

    // Calls flow while the rotation runs: stored, claimed, finished.
    let flowing = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let mut n = 0;
            for round in 0..20 {
                let rows: Vec<Row> = (0..20)
                    .map(|i| call(&format!("b-{round}-{i}"), T0 + 5_000 + round, "carol"))
                    .collect();
                n += store.insert(rows, vec![]).await.unwrap();
                let claimed = store.claim(T0 + 10_000, "shop", 30, 60_000).await.unwrap();
                let done: Vec<Finish> = claimed.iter().map(|c| delivered(c, 1)).collect();
                store.finish(done, T0 + 10_001).await.unwrap();
                tokio::task::yield_now().await;
            }
            n
        })
    };
    let done = sealed::reseal(raw.as_ref(), &b, |_| {}).await.unwrap();
    let stored_meanwhile = flowing.await.unwrap();
    assert_eq!(stored_meanwhile, 400);
    assert!(done.sealed >= 1_202, "{done:?}");
    // A second run after the calls stopped finds what changed under the
    // first, and nothing after.
    sealed::reseal(raw.as_ref(), &b, |_| {}).await.unwrap();
    assert_eq!(not_sealed_under(raw.as_ref(), &ring).await, 0);

    // Nothing lost: every call is there, and found by its user.
    let all = store.stats(T0 + 20_000).await.unwrap();
    assert_eq!(all.pending + all.delivered, 1 + 1_200 + 400);
    let by_user = |u: &str| LogFilter {
        user_id: Some(u.into()),
        ..LogFilter::default()
    };
    let found = store.search(by_user(USER), None, 10).await.unwrap();
    assert_eq!(found.rows.len(), 1, "the call stored plain, now sealed");
    assert_eq!(found.rows[0].user_id.as_deref(), Some(USER));
    let found = store.search(by_user("user-7"), None, 100).await.unwrap();
    assert_eq!(found.rows.len(), 24);

    // B alone opens everything now, the hashes' key included; A alone
    // opens nothing.
    let (only_b, b_alone) = sealed::wrap(Arc::clone(&raw), keys(KEY_B, ""))
        .await
        .unwrap();
    assert_eq!(b_alone.user_hash(USER), hash_before);
    let claimed = only_b
        .claim(T0 + 30_000, "shop", 2_000, 60_000)
        .await
        .unwrap();
    assert!(claimed.iter().all(|c| c.message.contains(SECRET)));
    let e = sealed::wrap(Arc::clone(&raw), keys(KEY_A, ""))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("does not open"), "{e}");
    raw.close().await;
}

#[tokio::test]
async fn a_stopped_rotation_goes_on_where_it_was() {
    let store: Arc<dyn Store> = Arc::new(callpost_relay::store::memory::MemoryStore::new());
    store
        .insert(
            (0..10)
                .map(|i| call(&format!("m{i}"), T0 + i, USER))
                .collect(),
            vec![],
        )
        .await
        .unwrap();
    let ring = keys(KEY_B, "");
    let sealer = Sealer::load(store.as_ref(), Arc::clone(&ring))
        .await
        .unwrap();
    let ids: Vec<i64> = store
        .sealable(SealTable::Calls, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    // A run stopped after the sixth row: the next reads the other four.
    let place = serde_json::json!({"key": ring.id(), "table": "calls", "after": ids[5]});
    store
        .swap_setting(RESEAL_SETTING, None, place.to_string())
        .await
        .unwrap();
    let done = sealed::reseal(store.as_ref(), &sealer, |_| {})
        .await
        .unwrap();
    assert_eq!((done.read, done.sealed), (4, 4));
    let rows = store.sealable(SealTable::Calls, 0, 100).await.unwrap();
    let sealed_now: Vec<bool> = rows
        .iter()
        .map(|r| is_sealed(r.texts[0].as_deref().unwrap()))
        .collect();
    assert_eq!(sealed_now, [vec![false; 6], vec![true; 4]].concat());
    // A place kept for another key is not this rotation's: from the start.
    let kept = store.setting(RESEAL_SETTING).await.unwrap();
    let other = serde_json::json!({"key": "00000000", "table": "calls", "after": ids[8]});
    store
        .swap_setting(RESEAL_SETTING, kept, other.to_string())
        .await
        .unwrap();
    let done = sealed::reseal(store.as_ref(), &sealer, |_| {})
        .await
        .unwrap();
    assert_eq!((done.read, done.sealed), (10, 6));
}

#[tokio::test]
async fn a_relay_without_the_key_is_refused_by_a_sealed_database() {
    let store: Arc<dyn Store> = Arc::new(callpost_relay::store::memory::MemoryStore::new());
    // Before any relay sealed: a relay without a key is welcome.
    sealed::refuse_without_key(store.as_ref()).await.unwrap();
    sealed::wrap(Arc::clone(&store), keys(KEY_A, ""))
        .await
        .unwrap();
    let e = sealed::refuse_without_key(store.as_ref())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("CALLPOST_RELAY_SECRET_KEY"), "{e}");
}
