//! Sources kept in the database, shared by every relay on it, and changed
//! at runtime through the admin API and the command line.
//!
//! * A source is kept as the JSON of a `[[sources]]` table (name, write
//!   keys, Webhooks destination with its shared secret, header values and
//!   protections), sealed whole with ChaCha20-Poly1305 under the 32-byte
//!   key in `CALLPOST_RELAY_SECRET_KEY`. The name is the associated data,
//!   so a sealed row cannot be moved under another name. A dump of the
//!   database alone shows the names and nothing else; no API answer, log
//!   line or metric ever shows a key, secret or header value.
//! * With a key, the database's sources are in force. The file's (and
//!   the flags') sources, when it gives any, are applied to the database
//!   at start and at each reload first: the database is made to match the
//!   file, as `callpost-relay apply` does. Without a key the relay runs
//!   from the file alone, and changes through the API are refused.
//! * Every relay reads the table every [`SOURCES_POLL_MS`] and puts a
//!   changed set in force when it is valid as a whole (the relay that made
//!   a change puts it in force at once). A set that is not valid, such as
//!   two relays writing one write key into two sources at the same moment,
//!   is logged and the sources in force stay.
//! * A changed destination applies from each call's next round, as a
//!   reload's does; a removed source's pending calls are set aside as
//!   undeliverable.

use crate::app::Relay;
use crate::config::{checked_set, ConfigError, Source, SourceDoc};
use crate::ops::OpError;
use crate::store::Store;
use base64::Engine as _;
use callpost_core::code::Code;
use callpost_core::protection::ProtectionConfig;
pub use callpost_core::sources::SOURCES_POLL_MS;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The environment variable that holds the key.
pub const SECRET_KEY_VAR: &str = "CALLPOST_RELAY_SECRET_KEY";

/// What a sealed document starts with: the format, so another can follow.
const SEALED_PREFIX: &str = "v1.";

/// The key that seals the sources kept in the database.
pub struct SealKey(LessSafeKey);

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(***)")
    }
}

impl SealKey {
    /// A key from its base64 form (32 bytes: `openssl rand -base64 32`).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let refused = || {
            ConfigError(format!(
                "{SECRET_KEY_VAR} must be 32 random bytes in base64 (openssl rand -base64 32)"
            ))
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| refused())?;
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes).map_err(|_| refused())?;
        Ok(Self(LessSafeKey::new(key)))
    }

    /// Seals `plain` under `name`. Fails only when the OS gives no random
    /// bytes for the nonce.
    pub fn seal(&self, name: &str, plain: &str) -> Result<String, OpError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| OpError {
            status: 503,
            code: Code::Unavailable.as_str(),
            message: "the operating system gave no random bytes to seal the source with".into(),
        })?;
        let mut data = plain.as_bytes().to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name.as_bytes()),
                &mut data,
            )
            .map_err(|_| key_error(name))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!(
            "{SEALED_PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        ))
    }

    /// Opens what [`SealKey::seal`] sealed under `name`.
    pub fn open(&self, name: &str, sealed: &str) -> Result<String, OpError> {
        let bytes = sealed
            .strip_prefix(SEALED_PREFIX)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .filter(|b| b.len() > NONCE_LEN)
            .ok_or_else(|| key_error(name))?;
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| key_error(name))?;
        let mut data = data.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut data)
            .map_err(|_| key_error(name))?;
        String::from_utf8(plain.to_vec()).map_err(|_| key_error(name))
    }
}

fn key_error(name: &str) -> OpError {
    OpError {
        status: 409,
        code: Code::InvalidConfig.as_str(),
        message: format!(
            "the stored source {name:?} does not open with this relay's {SECRET_KEY_VAR} \
             (every relay on one database needs the same key)"
        ),
    }
}

fn no_key() -> OpError {
    OpError {
        status: 409,
        code: Code::InvalidConfig.as_str(),
        message: format!(
            "this relay has no {SECRET_KEY_VAR}: sources are kept in the database only sealed \
             with one (openssl rand -base64 32), and without it the relay runs from its file"
        ),
    }
}

fn invalid(e: &ConfigError) -> OpError {
    OpError {
        status: 400,
        code: Code::InvalidSettings.as_str(),
        message: e.to_string(),
    }
}

/// The sources kept in the database, opened, by name.
pub async fn stored(store: &dyn Store, key: &SealKey) -> Result<Vec<SourceDoc>, OpError> {
    let rows = store.stored_sources().await?;
    open_rows(key, &rows)
}

fn open_rows(key: &SealKey, rows: &[(String, String)]) -> Result<Vec<SourceDoc>, OpError> {
    rows.iter()
        .map(|(name, sealed)| {
            let doc = SourceDoc::from_json(&key.open(name, sealed)?).map_err(|e| invalid(&e))?;
            if doc.name() == name {
                Ok(doc)
            } else {
                Err(key_error(name))
            }
        })
        .collect()
}

/// Sources checked as a set, with the protection of each endpoint URL that
/// has one.
pub type Built = (Vec<Arc<Source>>, HashMap<String, ProtectionConfig>);

/// Checks every source and the set.
pub fn build(docs: &[SourceDoc]) -> Result<Built, ConfigError> {
    let list = docs
        .iter()
        .map(|d| d.check(&format!("source {:?}", d.name())).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let protections = checked_set(&list)?;
    Ok((list, protections))
}

/// What [`apply`] or a change through the API did, by source name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Changes {
    /// Sources that were not in the database.
    pub added: Vec<String>,
    /// Sources whose settings changed.
    pub changed: Vec<String>,
    /// Sources taken out of the database.
    pub removed: Vec<String>,
}

impl Changes {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// One line per change, for the log and the command line.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.added.iter().map(|n| format!("added source {n:?}")));
        out.extend(self.changed.iter().map(|n| format!("changed source {n:?}")));
        out.extend(self.removed.iter().map(|n| format!("removed source {n:?}")));
        out
    }
}

/// Writes `next` over the stored sources (the whole set when `whole`,
/// otherwise only the names in `next` and `remove`), after checking the
/// set that results. Unchanged sources are left as they are.
async fn write(
    store: &dyn Store,
    key: &SealKey,
    next: &[SourceDoc],
    remove: &[String],
    whole: bool,
) -> Result<Changes, OpError> {
    let before: BTreeMap<String, SourceDoc> = stored(store, key)
        .await?
        .into_iter()
        .map(|d| (d.name().to_owned(), d))
        .collect();
    let mut after = if whole {
        BTreeMap::new()
    } else {
        before.clone()
    };
    for name in remove {
        after.remove(name);
    }
    let mut given = std::collections::HashSet::new();
    for doc in next {
        after.insert(doc.name().to_owned(), doc.clone());
        if !given.insert(doc.name()) {
            return Err(invalid(&ConfigError(format!(
                "source names must be unique: {:?} is given twice (invalid_settings)",
                doc.name()
            ))));
        }
    }
    let docs: Vec<SourceDoc> = after.values().cloned().collect();
    build(&docs).map_err(|e| invalid(&e))?;
    let mut changes = Changes::default();
    let mut put = Vec::new();
    for (name, doc) in &after {
        match before.get(name) {
            Some(old) if old == doc => continue,
            Some(_) => changes.changed.push(name.clone()),
            None => changes.added.push(name.clone()),
        }
        put.push((name.clone(), key.seal(name, &doc.to_json())?));
    }
    changes.removed = before
        .keys()
        .filter(|n| !after.contains_key(*n))
        .cloned()
        .collect();
    if !changes.is_empty() {
        store.write_sources(put, changes.removed.clone()).await?;
    }
    Ok(changes)
}

/// Makes the database's sources match `docs` (the file's): adds, changes
/// and removes what differs, and nothing else. Applying the same file
/// twice changes nothing the second time.
pub async fn apply(
    store: &dyn Store,
    key: Option<&SealKey>,
    docs: &[SourceDoc],
) -> Result<Changes, OpError> {
    write(store, key.ok_or_else(no_key)?, docs, &[], true).await
}

/// Checks one source as the file's are: the core's rules, then the
/// private-network rule for its URLs (unless `allow_private`).
pub async fn check_one(doc: &SourceDoc, allow_private: bool) -> Result<(), OpError> {
    let source = doc
        .check(&format!("source {:?}", doc.name()))
        .map_err(|e| invalid(&e))?;
    crate::deliver::check_destinations(&[Arc::new(source)], allow_private)
        .await
        .map_err(|e| invalid(&e))
}

/// Creates or replaces one source.
pub async fn put(
    store: &dyn Store,
    key: Option<&SealKey>,
    doc: SourceDoc,
) -> Result<Changes, OpError> {
    write(store, key.ok_or_else(no_key)?, &[doc], &[], false).await
}

/// Removes one source: `not_found` when there is none of that name.
pub async fn remove(
    store: &dyn Store,
    key: Option<&SealKey>,
    name: &str,
) -> Result<Changes, OpError> {
    let changes = write(
        store,
        key.ok_or_else(no_key)?,
        &[],
        &[name.to_owned()],
        false,
    )
    .await?;
    if changes.removed.is_empty() {
        return Err(OpError {
            status: 404,
            code: "not_found",
            message: format!("there is no source {name:?} in the database"),
        });
    }
    Ok(changes)
}

/// Creates or replaces `doc` through this running relay: checked as the
/// file's sources are (the private-network rule included), kept, and in
/// force here at once (on the other relays within [`SOURCES_POLL_MS`]).
pub async fn put_live(relay: &Relay, doc: SourceDoc) -> Result<Changes, OpError> {
    check_one(&doc, relay.cfg.allow_private_networks).await?;
    let changes = put(&*relay.store, relay.cfg.secret_key.as_deref(), doc).await?;
    settle(relay, &changes).await?;
    Ok(changes)
}

/// Removes the source `name` through this running relay, as
/// [`put_live`] changes one.
pub async fn remove_live(relay: &Relay, name: &str) -> Result<Changes, OpError> {
    let changes = remove(&*relay.store, relay.cfg.secret_key.as_deref(), name).await?;
    settle(relay, &changes).await?;
    Ok(changes)
}

async fn settle(relay: &Relay, changes: &Changes) -> Result<(), OpError> {
    for line in changes.lines() {
        tracing::info!("through the admin API: {line}");
    }
    relay.forget_stored_rows();
    sync(relay).await.map(|_| ())
}

/// The sources a command works with: the database's with a key, the
/// file's otherwise.
pub async fn in_force(
    store: &dyn Store,
    cfg: &crate::config::Config,
) -> Result<Vec<Arc<Source>>, OpError> {
    match &cfg.secret_key {
        None => Ok(cfg.sources.clone()),
        Some(key) => {
            let docs = stored(store, key).await?;
            Ok(build(&docs).map_err(|e| invalid(&e))?.0)
        }
    }
}

/// Reads the stored sources and, when they differ from what this relay
/// last read and are valid, puts them in force. Returns whether it did.
pub async fn sync(relay: &Relay) -> Result<bool, OpError> {
    let Some(key) = &relay.cfg.secret_key else {
        return Ok(false);
    };
    let rows = relay.store.stored_sources().await?;
    if relay.stored_rows_seen(&rows) {
        return Ok(false);
    }
    let result: Result<_, OpError> = async {
        let docs = open_rows(key, &rows)?;
        let (list, protections) = build(&docs).map_err(|e| invalid(&e))?;
        crate::deliver::check_destinations(&list, relay.cfg.allow_private_networks)
            .await
            .map_err(|e| invalid(&e))?;
        Ok((list, protections))
    }
    .await;
    // Seen either way: a set that fails is logged once, not every poll.
    relay.set_stored_rows(rows);
    let (list, protections) = result?;
    let names: Vec<&str> = list.iter().map(|s| s.name.as_str()).collect();
    tracing::info!(
        "sources from the database in force: {}",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    );
    relay.put_sources(list, protections, relay.clock.now());
    Ok(true)
}

/// Polls the stored sources every [`SOURCES_POLL_MS`] (with a key).
pub async fn poll(relay: Arc<Relay>) {
    let mut every = tokio::time::interval(Duration::from_millis(SOURCES_POLL_MS));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if let Err(e) = sync(&relay).await {
            tracing::error!(
                "the sources in the database cannot be put in force, those in force stay: {e}"
            );
        }
    }
}

/// At start (and at a reload), with a key: applies the file's sources to
/// the database when it gives any, logging what changed, then puts the
/// database's in force.
pub async fn start(relay: &Relay, docs: &[SourceDoc]) -> Result<Changes, OpError> {
    let Some(key) = &relay.cfg.secret_key else {
        return Ok(Changes::default());
    };
    let changes = if docs.is_empty() {
        Changes::default()
    } else {
        apply(&*relay.store, Some(key), docs).await?
    };
    for line in changes.lines() {
        tracing::info!("sources applied from the configuration: {line}");
    }
    relay.forget_stored_rows();
    sync(relay).await?;
    Ok(changes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

    #[test]
    fn a_sealed_source_opens_under_its_name_only_and_shows_nothing() {
        let key = SealKey::parse(KEY).unwrap();
        let sealed = key.seal("shop", "{\"shared_secret\":\"hunter2\"}").unwrap();
        assert!(sealed.starts_with(SEALED_PREFIX));
        assert!(!sealed.contains("hunter2"));
        assert_eq!(
            key.open("shop", &sealed).unwrap(),
            "{\"shared_secret\":\"hunter2\"}"
        );
        // Moved under another name, or opened with another key: refused.
        assert_eq!(
            key.open("other", &sealed).unwrap_err().code,
            "invalid_config"
        );
        let other = SealKey::parse("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=").unwrap();
        assert!(other.open("shop", &sealed).is_err());
        // Two seals of one text differ (a fresh nonce each time).
        assert_ne!(
            sealed,
            key.seal("shop", "{\"shared_secret\":\"hunter2\"}").unwrap()
        );
        assert_eq!(format!("{key:?}"), "SealKey(***)");
    }

    fn doc(json: &str) -> SourceDoc {
        SourceDoc::from_json(json).unwrap()
    }

    #[tokio::test]
    async fn apply_makes_the_database_match_and_changes_nothing_the_second_time() {
        let store = crate::store::memory::MemoryStore::new();
        let key = SealKey::parse(KEY).unwrap();
        let a = doc(r#"{"name":"a","write_keys":["ka"]}"#);
        let b = doc(
            r#"{"name":"b","write_keys":["key-of-b"],"webhooks":{"urls":["https://b.example.com/in"],"shared_secret":"secret-of-b"}}"#,
        );
        // Without a key, nothing is kept.
        let e = apply(&store, None, std::slice::from_ref(&a))
            .await
            .unwrap_err();
        assert_eq!((e.status, e.code), (409, "invalid_config"));
        let first = apply(&store, Some(&key), &[a.clone(), b.clone()])
            .await
            .unwrap();
        assert_eq!(first.added, ["a", "b"]);
        assert!(apply(&store, Some(&key), &[a.clone(), b.clone()])
            .await
            .unwrap()
            .is_empty());
        // Sealed at rest: neither the secret nor a write key shows (base64
        // has no '-', so the check cannot pass or fail by chance).
        let rows = store.stored_sources().await.unwrap();
        assert!(rows
            .iter()
            .all(|(_, s)| !s.contains("secret-of-b") && !s.contains("key-of-b")));
        // One source put: the others stay; the file applied again puts
        // back what it says.
        let b2 = doc(r#"{"name":"b","write_keys":["kb2"]}"#);
        let c = doc(r#"{"name":"c","write_keys":["kc"]}"#);
        assert_eq!(put(&store, Some(&key), b2).await.unwrap().changed, ["b"]);
        assert_eq!(put(&store, Some(&key), c).await.unwrap().added, ["c"]);
        let again = apply(&store, Some(&key), &[a.clone(), b.clone()])
            .await
            .unwrap();
        assert_eq!(
            (again.changed, again.removed),
            (vec!["b".to_owned()], vec!["c".to_owned()])
        );
        // A set the core refuses is not kept.
        let clash = doc(r#"{"name":"d","write_keys":["ka"]}"#);
        let e = put(&store, Some(&key), clash).await.unwrap_err();
        assert_eq!((e.status, e.code), (400, "invalid_settings"));
        assert_eq!(stored(&store, &key).await.unwrap(), vec![a, b]);
        // Filters come in the JSON of a put and are checked by the core.
        let filtered = doc(
            r#"{"name":"f","write_keys":["kf"],"webhooks":{"urls":["https://f.example.com/in"],
                "filters":[{"action":"drop","if":{"field":"type","equals":"page"}}]}}"#,
        );
        assert_eq!(
            put(&store, Some(&key), filtered.clone())
                .await
                .unwrap()
                .added,
            ["f"]
        );
        assert!(stored(&store, &key).await.unwrap().contains(&filtered));
        let bad = doc(
            r#"{"name":"g","write_keys":["kg"],"webhooks":{"urls":["https://g.example.com/in"],
                "filters":[{"action":"drop","if":{"field":"type","eq":"page"}}]}}"#,
        );
        let e = put(&store, Some(&key), bad).await.unwrap_err();
        assert_eq!((e.status, e.code), (400, "invalid_settings"), "{e}");
        assert!(e.message.contains("filters[0].if.eq: unknown test"), "{e}");
        assert_eq!(
            remove(&store, Some(&key), "f").await.unwrap().removed,
            ["f"]
        );
        // Removing what is not there is not_found.
        assert_eq!(
            remove(&store, Some(&key), "zz").await.unwrap_err().status,
            404
        );
        assert_eq!(
            remove(&store, Some(&key), "a").await.unwrap().removed,
            ["a"]
        );
        // Another key opens nothing.
        let other = SealKey::parse("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=").unwrap();
        assert_eq!(
            stored(&store, &other).await.unwrap_err().code,
            "invalid_config"
        );
    }

    #[test]
    fn a_key_must_be_32_bytes_of_base64() {
        assert!(SealKey::parse("c2hvcnQ=").is_err());
        assert!(SealKey::parse("not base64 at all!").is_err());
        let e = SealKey::parse("c2hvcnQ=").unwrap_err();
        assert!(e.0.contains(SECRET_KEY_VAR), "{e}");
    }
}
