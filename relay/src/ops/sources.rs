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
//! * A change is made to the set as read, and written only over that set
//!   (compare-and-swap on the set's version): of two changes at once,
//!   the second is made again to the set the first left.
//! * Sealing binds a row to its name, not to a version: whoever can write
//!   to the database can put back an older sealed copy of a source (as
//!   they could change its queue). The key is not rotated in place.

use super::OpError;
use crate::config::{checked_set, ConfigError, Source, SourceDoc};
use crate::seal::SealKey;
use crate::state::Relay;
use crate::store::{Store, StoreError};
use callpost_core::protection::ProtectionConfig;
pub use callpost_core::sources::SOURCES_POLL_MS;
use callpost_core::Code;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// The sources kept in the database, opened, by name.
pub async fn stored(store: &dyn Store, key: &SealKey) -> Result<Vec<SourceDoc>, OpError> {
    let stored = store.stored_sources().await?;
    open_rows(key, &stored.rows)
}

/// How many times a change to the sources reads the set again after
/// another change was written first: changes are an operator's, seconds
/// apart, so a few tries settle any that meet.
pub const WRITE_TRIES: usize = 3;

fn open_rows(key: &SealKey, rows: &[(String, String)]) -> Result<Vec<SourceDoc>, OpError> {
    rows.iter()
        .map(|(name, sealed)| {
            let doc = SourceDoc::from_json(&key.open(name, sealed)?)?;
            if doc.name() == name {
                Ok(doc)
            } else {
                // Sealed under its name, so only a writer of the table
                // with the key could have put it under another.
                Err(OpError::Seal(crate::seal::SealError::WrongKey {
                    what: "source",
                    name: name.to_owned(),
                }))
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

/// A change to the stored sources, made to the set as it is read.
#[derive(Debug, Clone, Copy)]
enum Edit<'a> {
    /// The whole set becomes these.
    Whole(&'a [SourceDoc]),
    /// This one is created or replaced.
    Put(&'a SourceDoc),
    /// The source `name` changes by a JSON Merge Patch (RFC 7396) of its
    /// JSON: what the patch leaves out stays as it is, `null` removes.
    Patch {
        name: &'a str,
        patch: &'a serde_json::Value,
    },
    /// The source `name` is removed.
    Remove(&'a str),
    /// One destination of the source `name` changes.
    Destination {
        name: &'a str,
        destination: &'a str,
        change: DestinationChange<'a>,
    },
}

/// A change to one destination of a source.
#[derive(Debug, Clone, Copy)]
pub enum DestinationChange<'a> {
    /// Created, or replaced whole, with this JSON (a `[[sources.destinations]]`
    /// table's, its name taken from the path).
    Put(&'a serde_json::Value),
    /// Changed by a JSON Merge Patch of its JSON: what the patch leaves out
    /// (its secrets among it) stays as stored.
    Patch(&'a serde_json::Value),
    /// Removed.
    Remove,
}

impl Edit<'_> {
    /// The set `before` becomes.
    fn apply(
        self,
        before: &BTreeMap<String, SourceDoc>,
    ) -> Result<BTreeMap<String, SourceDoc>, OpError> {
        let mut after = before.clone();
        match self {
            Self::Whole(docs) => {
                after.clear();
                for doc in docs {
                    if after.insert(doc.name().to_owned(), doc.clone()).is_some() {
                        return Err(OpError::Config(ConfigError::Settings {
                            code: Code::InvalidSettings,
                            message: format!(
                                "source names must be unique: {:?} is given twice",
                                doc.name()
                            ),
                        }));
                    }
                }
            }
            Self::Put(doc) => {
                after.insert(doc.name().to_owned(), doc.clone());
            }
            Self::Patch { name, patch } => {
                let old = before.get(name).ok_or_else(|| {
                    OpError::NotFound(format!("there is no source {name:?} in the database"))
                })?;
                if patch.get("name").is_some_and(|n| n.as_str() != Some(name)) {
                    return Err(OpError::Config(ConfigError::Settings {
                        code: Code::InvalidSettings,
                        message: "a patch cannot rename a source: name, when given, must be \
                                  the name in the path"
                            .into(),
                    }));
                }
                let mut value = old.to_value();
                json_patch::merge(&mut value, patch);
                after.insert(name.to_owned(), SourceDoc::from_value(value)?);
            }
            Self::Remove(name) => {
                after.remove(name);
            }
            Self::Destination {
                name,
                destination,
                change,
            } => {
                let old = before.get(name).ok_or_else(|| {
                    OpError::NotFound(format!("there is no source {name:?} in the database"))
                })?;
                let mut value = old.to_value();
                change_destination(&mut value, name, destination, change)?;
                after.insert(name.to_owned(), SourceDoc::from_value(value)?);
            }
        }
        Ok(after)
    }
}

/// Makes `change` to the destination `destination` in a source's JSON:
/// `webhooks` when it holds that name (the destination named `webhooks`
/// leaves its name out), else the element of `destinations` with it.
fn change_destination(
    source: &mut serde_json::Value,
    name: &str,
    destination: &str,
    change: DestinationChange<'_>,
) -> Result<(), OpError> {
    use serde_json::Value;
    let invalid = |message: String| {
        OpError::Config(ConfigError::Settings {
            code: Code::InvalidSettings,
            message,
        })
    };
    if let DestinationChange::Put(v) | DestinationChange::Patch(v) = change {
        if !v.is_object() {
            return Err(invalid("a destination is a JSON object".into()));
        }
        if v.get("name")
            .is_some_and(|n| n.as_str() != Some(destination))
        {
            return Err(invalid(
                "a destination's name, when given, must be the name in the path".into(),
            ));
        }
    }
    let Value::Object(doc) = source else {
        return Err(invalid("the stored source is not a JSON object".into()));
    };
    let default = destination == callpost_core::sources::DEFAULT_DESTINATION;
    let in_webhooks =
        doc.get("webhooks")
            .is_some_and(|w| match w.get("name").and_then(Value::as_str) {
                Some(n) => n == destination,
                None => default,
            });
    let mut items = match doc.remove("destinations") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(invalid(
                "the stored source's destinations are not a list".into(),
            ))
        }
    };
    let at = items
        .iter()
        .position(|d| d.get("name").and_then(Value::as_str) == Some(destination));
    let missing = || {
        OpError::NotFound(format!(
            "source {name:?} has no destination {destination:?}"
        ))
    };
    match change {
        DestinationChange::Remove => match (in_webhooks, at) {
            (true, _) => {
                doc.remove("webhooks");
            }
            (false, Some(i)) => {
                items.remove(i);
            }
            (false, None) => return Err(missing()),
        },
        DestinationChange::Patch(patch) => {
            let target = match (in_webhooks, at) {
                (true, _) => doc.get_mut("webhooks"),
                (false, Some(i)) => items.get_mut(i),
                (false, None) => None,
            }
            .ok_or_else(missing)?;
            json_patch::merge(target, patch);
        }
        DestinationChange::Put(whole) => {
            let mut whole = whole.clone();
            if in_webhooks || (default && at.is_none()) {
                if let Value::Object(m) = &mut whole {
                    m.remove("name");
                }
                doc.insert("webhooks".into(), whole);
            } else {
                if let Value::Object(m) = &mut whole {
                    m.insert("name".into(), Value::String(destination.to_owned()));
                }
                match at {
                    Some(i) => items[i] = whole,
                    None => items.push(whole),
                }
            }
        }
    }
    if !items.is_empty() {
        doc.insert("destinations".into(), Value::Array(items));
    }
    Ok(())
}

/// Changes one destination of the source `name` kept in the database,
/// through this running relay, as [`patch_live`] changes a whole source:
/// checked as a whole and put in force at once. `not_found` when the
/// source, or (for a patch or a removal) the destination, is not there.
pub async fn destination_live(
    relay: &Relay,
    name: &str,
    destination: &str,
    change: DestinationChange<'_>,
) -> Result<Changes, OpError> {
    edit_live(
        relay,
        Edit::Destination {
            name,
            destination,
            change,
        },
    )
    .await
}

/// Makes `edit` to the sources kept in the database through this running
/// relay (it needs the key), checked with its private-network rule, and
/// puts the result in force at once.
async fn edit_live(relay: &Relay, edit: Edit<'_>) -> Result<Changes, OpError> {
    let key = relay
        .cfg
        .secret_key
        .as_deref()
        .ok_or(OpError::NoSecretKey)?;
    let changes = write(
        &*relay.store,
        key,
        edit,
        Some(relay.cfg.allow_private_networks),
    )
    .await?;
    settle(relay, &changes).await?;
    Ok(changes)
}

/// Seals the stored sources again under the current key (a rotation);
/// how many were sealed again. Unchanged sources' documents are not read
/// for changes: each is opened and sealed as it is.
pub async fn reseal(store: &dyn Store, key: &SealKey) -> Result<usize, OpError> {
    for _ in 0..WRITE_TRIES {
        let stored = store.stored_sources().await?;
        let mut put = Vec::new();
        for (name, sealed) in stored.rows.iter().filter(|(_, s)| !key.sealed_now(s)) {
            put.push((name.clone(), key.seal(name, &key.open(name, sealed)?)?));
        }
        if put.is_empty() {
            return Ok(0);
        }
        let n = put.len();
        match store.write_sources(stored.version, put, Vec::new()).await {
            Ok(()) => return Ok(n),
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(OpError::Conflict(format!(
        "the sources were changed {WRITE_TRIES} times by another writer while they were sealed \
         again: run it again"
    )))
}

/// Makes `edit` to the stored sources, after checking the set that
/// results (and, with `private` = `Some(allowed)`, the private-network
/// rule for each source it adds or changes). Unchanged sources are left as
/// they are. The write goes in only over the set it checked: when another
/// change was written first (another relay, the command line), the set is
/// read, changed and checked again, at most [`WRITE_TRIES`] times.
async fn write(
    store: &dyn Store,
    key: &SealKey,
    edit: Edit<'_>,
    private: Option<bool>,
) -> Result<Changes, OpError> {
    for _ in 0..WRITE_TRIES {
        let stored = store.stored_sources().await?;
        let before: BTreeMap<String, SourceDoc> = open_rows(key, &stored.rows)?
            .into_iter()
            .map(|d| (d.name().to_owned(), d))
            .collect();
        let after = edit.apply(&before)?;
        // The sources this change adds or changes go last, so that a
        // conflict (a write key another source holds) is reported against
        // them: the message never names the other source to whoever is
        // guessing keys.
        let (same, new): (Vec<&SourceDoc>, Vec<&SourceDoc>) = after
            .values()
            .partition(|doc| before.get(doc.name()) == Some(*doc));
        let docs: Vec<SourceDoc> = same.into_iter().chain(new).cloned().collect();
        build(&docs)?;
        let mut changes = Changes::default();
        let mut put = Vec::new();
        for (name, doc) in &after {
            match before.get(name) {
                Some(old) if old == doc => continue,
                Some(_) => changes.changed.push(name.clone()),
                None => changes.added.push(name.clone()),
            }
            if let Some(allowed) = private {
                check_one(doc, allowed).await?;
            }
            put.push((name.clone(), key.seal(name, &doc.to_json())?));
        }
        changes.removed = before
            .keys()
            .filter(|n| !after.contains_key(*n))
            .cloned()
            .collect();
        if changes.is_empty() {
            return Ok(changes);
        }
        match store
            .write_sources(stored.version, put, changes.removed.clone())
            .await
        {
            Ok(()) => return Ok(changes),
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(OpError::Conflict(format!(
        "the sources were changed {WRITE_TRIES} times by another writer while this change was \
         checked: change them one at a time"
    )))
}

/// Makes the database's sources match `docs` (the file's): adds, changes
/// and removes what differs, and nothing else. Applying the same file
/// twice changes nothing the second time.
pub async fn apply(
    store: &dyn Store,
    key: Option<&SealKey>,
    docs: &[SourceDoc],
) -> Result<Changes, OpError> {
    write(
        store,
        key.ok_or(OpError::NoSecretKey)?,
        Edit::Whole(docs),
        None,
    )
    .await
}

/// Checks one source as the file's are: the core's rules, then the
/// private-network rule for its URLs (unless `allow_private`).
pub async fn check_one(doc: &SourceDoc, allow_private: bool) -> Result<(), OpError> {
    let source = doc.check(&format!("source {:?}", doc.name()))?;
    crate::deliver::check_destinations(&[Arc::new(source)], allow_private).await?;
    Ok(())
}

/// Creates or replaces one source.
pub async fn put(
    store: &dyn Store,
    key: Option<&SealKey>,
    doc: SourceDoc,
) -> Result<Changes, OpError> {
    write(
        store,
        key.ok_or(OpError::NoSecretKey)?,
        Edit::Put(&doc),
        None,
    )
    .await
}

/// Removes one source: `not_found` when there is none of that name.
pub async fn remove(
    store: &dyn Store,
    key: Option<&SealKey>,
    name: &str,
) -> Result<Changes, OpError> {
    let changes = write(
        store,
        key.ok_or(OpError::NoSecretKey)?,
        Edit::Remove(name),
        None,
    )
    .await?;
    if changes.removed.is_empty() {
        return Err(OpError::NotFound(format!(
            "there is no source {name:?} in the database"
        )));
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

/// Changes the source `name` kept in the database by a JSON Merge Patch
/// (RFC 7396) of its JSON, through this running relay: what the patch
/// leaves out (URLs with their credentials, secrets, filters, headers) is
/// kept as stored, and the result is checked and put in force as
/// [`put_live`]'s. `not_found` when the database has no such source.
pub async fn patch_live(
    relay: &Relay,
    name: &str,
    patch: &serde_json::Value,
) -> Result<Changes, OpError> {
    edit_live(relay, Edit::Patch { name, patch }).await
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
            Ok(build(&docs)?.0)
        }
    }
}

/// Reads the stored sources and, when they differ from what this relay
/// last read and are valid, puts them in force. Returns whether it did.
pub async fn sync(relay: &Relay) -> Result<bool, OpError> {
    let Some(key) = &relay.cfg.secret_key else {
        return Ok(false);
    };
    let rows = relay.store.stored_sources().await?.rows;
    if relay.stored_rows_seen(&rows) {
        return Ok(false);
    }
    let result: Result<_, OpError> = async {
        let docs = open_rows(key, &rows)?;
        let (list, protections) = build(&docs)?;
        crate::deliver::check_destinations(&list, relay.cfg.allow_private_networks).await?;
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
        assert_eq!(e.code(), Code::NoSecretKey);
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
        let rows = store.stored_sources().await.unwrap().rows;
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
        assert_eq!(e.code(), Code::InvalidSettings);
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
        assert_eq!(e.code(), Code::InvalidSettings, "{e}");
        assert!(
            e.to_string().contains("filters[0].if.eq: unknown test"),
            "{e}"
        );
        assert_eq!(
            remove(&store, Some(&key), "f").await.unwrap().removed,
            ["f"]
        );
        // Removing what is not there is not_found.
        assert_eq!(
            remove(&store, Some(&key), "zz").await.unwrap_err().code(),
            Code::NotFound
        );
        assert_eq!(
            remove(&store, Some(&key), "a").await.unwrap().removed,
            ["a"]
        );
        // Another key opens nothing.
        let other = SealKey::parse("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=").unwrap();
        assert_eq!(
            stored(&store, &other).await.unwrap_err().code(),
            Code::WrongSecretKey
        );
    }
}
