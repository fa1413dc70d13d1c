//! The relay's operations beyond ingest, shared by the admin API and the
//! CLI: delete notifications, audience syncs, replays, status.
//!
//! Calls the relay makes itself are enriched by the core (`originate`: a
//! `messageId`, `receivedAt`) and stored like received ones, so they are
//! delivered, retried and dead-lettered the same way.

use crate::clock::Clock;
use crate::config;
use crate::config::{ConfigError, Destination, Source};
use crate::seal::SealError;
use crate::state::{Relay, Sources};
use crate::store::sealed::Sealer;
use crate::store::{ReplayFilter, Row, Stats, Status, Store, StoreError, NO_DESTINATION_NAME};
use callpost_core::ingest::{self, Accepted};
use callpost_core::webhooks::{delete_notifications, DeleteSource};
use callpost_core::{AudienceSync, Call, Code, Map, Value};
use serde_json::Value as Json;
use std::sync::Arc;

pub mod sources;

/// Why an operation failed. Each has the registry's code; the admin API
/// answers with the status its code has there (`api::status_of`), the
/// command line prints the message and the code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The database failed or did not answer in time: try again.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A setting or a source that cannot work: change what the message
    /// names.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A sealed source that does not open, or a seal that could not be
    /// made.
    #[error(transparent)]
    Seal(#[from] SealError),
    /// An argument the operation does not take, with the core's code
    /// (`invalid_argument`, `missing_user_id`, …): change it.
    #[error("{message}")]
    Invalid {
        /// The core's code.
        code: Code,
        /// What is wrong with it.
        message: String,
    },
    /// What the operation names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// Sources are kept in the database only with a key.
    #[error(
        "this relay has no {}: sources are kept in the database only sealed with one \
         (openssl rand -base64 32), and without it the relay runs from its file",
        crate::seal::SECRET_KEY_VAR
    )]
    NoSecretKey,
    /// Another change met this one at the same moment: try again.
    #[error("{0}")]
    Conflict(String),
    /// The operating system gave no random bytes: try again.
    #[error("the operating system gave no random bytes")]
    NoRandomness,
}

impl OpError {
    /// The registry's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Store(e) => e.code(),
            Self::Config(e) => e.code(),
            Self::Seal(e) => e.code(),
            Self::Invalid { code, .. } => *code,
            Self::NotFound(_) => Code::NotFound,
            Self::NoSecretKey => Code::NoSecretKey,
            Self::Conflict(_) => Code::Conflict,
            Self::NoRandomness => Code::Unavailable,
        }
    }
}

pub(crate) fn core_error(code: Code, message: String) -> OpError {
    OpError::Invalid { code, message }
}

/// Runs `f` with sixteen OS-random bytes for each `messageId` the core
/// fills in. `None` when the OS gave none: the caller stores nothing
/// rather than repeat ids. Ingest and the operations share it.
pub(crate) fn with_random_ids<T>(f: impl FnOnce(&mut dyn FnMut() -> [u8; 16]) -> T) -> Option<T> {
    let mut failed = false;
    let mut ids = || {
        let mut b = [0u8; 16];
        if getrandom::fill(&mut b).is_err() {
            failed = true;
        }
        b
    };
    let out = f(&mut ids);
    (!failed).then_some(out)
}

fn with_ids<T>(f: impl FnOnce(&mut dyn FnMut() -> [u8; 16]) -> T) -> Result<T, OpError> {
    with_random_ids(f).ok_or(OpError::NoRandomness)
}

/// The longest `operator` a deletion's audit record keeps.
pub const MAX_OPERATOR_LEN: usize = 200;

/// A user's deletion, as the admin API, the CLI and the console ask it.
#[derive(Debug, Clone)]
pub struct DeleteRequest<'a> {
    /// The id: calls whose `userId` or `anonymousId` it is are erased.
    pub user_id: &'a str,
    /// Also take none of the user's calls from now on.
    pub suppress: bool,
    /// Who asks, for the audit record.
    pub operator: &'a str,
}

/// What a deletion did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Deleted {
    /// The sources a delete notification was stored for.
    pub sources: Vec<String>,
    /// What was erased.
    pub erased: crate::store::Erased,
    /// Whether the user is suppressed now.
    pub suppressed: bool,
}

fn checked_user(user_id: &str) -> Result<(), OpError> {
    if user_id.is_empty() {
        return Err(core_error(
            Code::MissingUserId,
            "userId must be a non-empty string".into(),
        ));
    }
    Ok(())
}

fn checked_operator(operator: &str) -> Result<(), OpError> {
    if operator.is_empty()
        || operator.chars().count() > MAX_OPERATOR_LEN
        || operator.chars().any(char::is_control)
    {
        return Err(core_error(
            Code::InvalidArgument,
            format!(
                "operator must be 1 to {MAX_OPERATOR_LEN} characters with no control character"
            ),
        ));
    }
    Ok(())
}

fn keyed(key: Option<&Sealer>) -> Result<&Sealer, OpError> {
    key.ok_or_else(|| {
        core_error(
            Code::NoSecretKey,
            format!(
                "a suppressed user is kept as a keyed hash, never the id: set {} (openssl rand \
                 -base64 32) on every relay",
                crate::seal::SECRET_KEY_VAR
            ),
        )
    })
}

/// Deletes a user: with `suppress`, first stops taking their calls (this
/// relay at once, the others within their poll); erases every stored call
/// of theirs across sources and every refused call that names them;
/// stores the spec's delete notifications; keeps an audit record (the id
/// as a keyed hash, when the relay has a key). A call of theirs a worker
/// holds at that moment may still reach its receiver once (its row is gone,
/// so nothing more is recorded), before its delete notification.
pub async fn delete_user(
    store: &dyn Store,
    sources: &[Arc<Source>],
    clock: &Clock,
    key: Option<&Sealer>,
    request: DeleteRequest<'_>,
) -> Result<Deleted, OpError> {
    checked_user(request.user_id)?;
    checked_operator(request.operator)?;
    let now = clock.now();
    if request.suppress {
        keyed(key)?;
    }
    let hash = key.map(|k| k.user_hash(request.user_id));
    if let Some(hash) = hash.as_deref().filter(|_| request.suppress) {
        store
            .set_suppressed(hash, true, now.as_millis(), request.operator)
            .await?;
    }
    let erased = store.erase_user(request.user_id).await?;
    let notified = notify_deleted(store, sources, now, request.user_id).await?;
    store
        .record_deletion(crate::store::Deletion {
            user_hash: hash,
            at: now.as_millis(),
            operator: request.operator.to_owned(),
            calls: erased.calls,
            rejected: erased.rejected,
            suppressed: request.suppress,
        })
        .await?;
    Ok(Deleted {
        sources: notified,
        erased,
        suppressed: request.suppress,
    })
}

/// Takes a suppressed user's calls again (this relay at once, the others
/// within their poll); whether the user was suppressed.
pub async fn unsuppress(
    store: &dyn Store,
    clock: &Clock,
    key: Option<&Sealer>,
    user_id: &str,
    operator: &str,
) -> Result<bool, OpError> {
    checked_user(user_id)?;
    checked_operator(operator)?;
    let key = keyed(key)?;
    Ok(store
        .set_suppressed(&key.user_hash(user_id), false, clock.now_ms(), operator)
        .await?)
}

/// One page of a user's stored calls for an access request, as JSON lines
/// (each: source, destination, messageId, type, receivedAt, status,
/// attempts, finishedAt, and the message as stored), newest first, and
/// where the next page starts.
pub async fn export_user(
    store: &dyn Store,
    filter: crate::store::LogFilter,
    after: Option<crate::store::Cursor>,
    limit: usize,
) -> Result<(Vec<String>, Option<crate::store::Cursor>), OpError> {
    let page = store.search(filter, after, limit).await?;
    let mut lines = Vec::with_capacity(page.rows.len());
    for e in page.rows {
        let call = store
            .logged_call(
                e.source.clone(),
                e.message_id.clone(),
                Some(e.destination.clone()),
            )
            .await?;
        let message = call.as_ref().map_or(serde_json::Value::Null, |c| {
            serde_json::from_str(&c.message).unwrap_or(serde_json::Value::Null)
        });
        let line = serde_json::json!({
            "source": e.source,
            "destination": e.destination,
            "messageId": e.message_id,
            "type": e.kind,
            "receivedAt": e.received_at,
            "status": e.status,
            "attempts": e.attempts,
            "finishedAt": e.finished_at,
            "message": message,
        });
        lines.push(line.to_string());
    }
    Ok((lines, page.next))
}

/// Stores one delete notification per source whose Webhooks destination
/// is enabled (webhooks-destination.md, Events); returns those sources. A
/// source with its destination switched off (`enabled = false`) is passed
/// to the core as `{"Webhooks": false}`, which leaves it out. The
/// notifications carry the id to the destinations in their bodies, and
/// are kept without the log's user columns: no search by the user finds
/// them.
async fn notify_deleted(
    store: &dyn Store,
    sources: &[Arc<Source>],
    now: callpost_core::Timestamp,
    user_id: &str,
) -> Result<Vec<String>, OpError> {
    let delete: Vec<DeleteSource> = sources
        .iter()
        .filter(|s| !s.destinations.is_empty())
        .map(|s| DeleteSource {
            source_id: s.name.clone(),
            integrations: s.enabled().next().is_none().then(|| {
                let mut off = Map::new();
                off.insert("Webhooks".into(), Value::Bool(false));
                off
            }),
        })
        .collect();
    let calls = delete_notifications(user_id, &delete, now)
        .map_err(|e| core_error(e.code(), e.to_string()))?;
    let mut rows = Vec::with_capacity(calls.len());
    let mut names = Vec::with_capacity(calls.len());
    for (source, call) in calls {
        let accepted = with_ids(|ids| ingest::originate(call, now, ids))?
            .map_err(|e| core_error(e.code(), e.to_string()))?;
        // A user's deletion goes to every destination of the source,
        // whatever its trigger: each may hold the user's data.
        let Some(src) = sources.iter().find(|s| s.name == source) else {
            continue;
        };
        let row = Row::accepted(source.clone(), accepted, now.as_millis(), Status::Pending);
        for (i, d) in src.destinations.iter().enumerate() {
            let mut r = row.clone();
            r.destination.clone_from(&d.name);
            r.first = i == 0;
            r.user_id = None;
            r.anonymous_id = None;
            if !d.enabled {
                r.status = Status::Undeliverable;
            }
            rows.push(r);
        }
        names.push(source);
    }
    store.insert(rows, Vec::new()).await?;
    Ok(names)
}

/// The rows of an accepted call: one for each destination whose trigger
/// it meets, pending where the destination is enabled and the call's
/// `integrations` let Webhooks have it; a source with no destination keeps
/// it for the default one (undeliverable, replayable once it is there);
/// a call no trigger takes is kept once, undeliverable, for no
/// destination.
pub fn push_rows(rows: &mut Vec<Row>, source: &Source, a: Accepted, received_at: i64) {
    let sendable = a.webhooks_enabled();
    let takers: Vec<&Destination> = source
        .destinations
        .iter()
        .filter(|d| d.takes(&a.call))
        .collect();
    let status = |d: Option<&Destination>| {
        if sendable && d.is_some_and(|d| d.enabled) {
            Status::Pending
        } else {
            Status::Undeliverable
        }
    };
    let Some((last, others)) = takers.split_last() else {
        let mut row = Row::accepted(source.name.clone(), a, received_at, status(None));
        if !source.destinations.is_empty() {
            NO_DESTINATION_NAME.clone_into(&mut row.destination);
        }
        rows.push(row);
        return;
    };
    let first = rows.len();
    let row = Row::accepted(source.name.clone(), a, received_at, status(Some(last)));
    for d in others {
        let mut copy = row.clone();
        copy.destination.clone_from(&d.name);
        copy.status = status(Some(d));
        rows.push(copy);
    }
    let mut row = row;
    row.destination.clone_from(&last.name);
    rows.push(row);
    for (i, r) in rows.iter_mut().enumerate().skip(first) {
        r.first = i == first;
    }
}

/// How many times an audience sync reads the state again after another
/// sync of the same audience stored a new one first: syncs of one
/// audience come from one operator's job, so more than a couple at once is
/// a mistake worth reporting (`conflict`), not a queue to wait in.
pub const AUDIENCE_SYNC_TRIES: usize = 3;

/// Takes an audience's current member set, and stores an identify call for
/// each user who joined (trait `true`) or left (`false`) since the last
/// sync (the core's `AudienceSync`; the first sync sends everyone). The new
/// state and the calls are stored in one transaction, and only over the
/// state this sync read: syncs of one audience that run at once, through
/// any relay on the database or the command line, never interleave (the
/// one that finds the state changed reads it again, at most
/// [`AUDIENCE_SYNC_TRIES`] times). Returns how many calls were stored.
pub async fn sync_audience(
    store: &dyn Store,
    sources: &[Arc<Source>],
    clock: &Clock,
    source: &str,
    audience: &str,
    members: Vec<String>,
) -> Result<usize, OpError> {
    let Some(src) = sources.iter().find(|s| s.name == source) else {
        return Err(OpError::NotFound(format!("no source named {source:?}")));
    };
    for _ in 0..AUDIENCE_SYNC_TRIES {
        let read = store.audience_state(source, audience).await?;
        let mut sync = match &read {
            Some(state) => {
                AudienceSync::from_json(state).map_err(|e| core_error(e.code(), e.to_string()))?
            }
            None => AudienceSync::new(audience).map_err(|e| core_error(e.code(), e.to_string()))?,
        };
        let now = clock.now();
        sync.handle_sync(now, members.clone());
        let mut rows = Vec::new();
        let mut n = 0;
        while let Some(call) = sync.poll_call() {
            let accepted = originate(call, now)?;
            push_rows(&mut rows, src, accepted, now.as_millis());
            n += 1;
        }
        match store
            .audience_sync(
                source,
                audience,
                read,
                sync.to_json(),
                rows,
                now.as_millis(),
            )
            .await
        {
            Ok(_) => return Ok(n),
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(OpError::Conflict(format!(
        "audience {audience:?} of source {source:?} was synced by another sync {AUDIENCE_SYNC_TRIES} \
         times while this one ran: run one sync of an audience at a time"
    )))
}

fn originate(call: Call, now: callpost_core::Timestamp) -> Result<Accepted, OpError> {
    with_ids(|ids| ingest::originate(call, now, ids))?
        .map_err(|e| core_error(e.code(), e.to_string()))
}

/// Makes the matching dead letters (and, as the filter says, delivered and
/// undeliverable calls) pending again, due now, with a fresh 4-hour window
/// and the same `messageId` (so the same `Idempotency-Key`). Returns how
/// many. A replay names what it replays, or says `all`: an empty id list
/// or no filter is refused, never read as "everything".
pub async fn replay(
    store: &dyn Store,
    clock: &Clock,
    filter: ReplayFilter,
    all: bool,
    dry_run: bool,
) -> Result<u64, OpError> {
    if filter.calls.message_ids.as_ref().is_some_and(Vec::is_empty) {
        return Err(core_error(
            Code::InvalidArgument,
            "the list of messageIds is empty: list the calls to replay, or leave it out".into(),
        ));
    }
    if filter.calls.status == Some(Status::Pending) {
        return Err(core_error(
            Code::InvalidArgument,
            "pending calls are waiting for their delivery already: replay dead, delivered or \
             undeliverable ones"
                .into(),
        ));
    }
    if !filter.names_calls() && !all {
        return Err(core_error(
            Code::InvalidArgument,
            "name what to replay (messageIds, userId, anonymousId, event, type, a source, since \
             or until), or ask for all of them (\"all\": true, --all) to replay every dead letter"
                .into(),
        ));
    }
    if dry_run {
        return Ok(store.replayable(filter).await?);
    }
    Ok(store.replay(clock.now_ms(), filter).await?)
}

/// One call of the delivery log as the admin API and the CLI show it: what
/// a search lists, the message, each attempt (with its endpoint's URL as
/// the source names it now, credentials and query left out, and its
/// latency) and how it ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CallReport {
    /// What a search lists.
    #[serde(flatten)]
    pub entry: crate::store::LogEntry,
    /// The stored message.
    pub message: Json,
    /// Each attempt, oldest first.
    pub attempts: Vec<Json>,
    /// The outcome record without its log (`None` while pending).
    pub outcome: Option<Json>,
    /// The batch it waits or went in, when its destination packs calls
    /// (its attempts are the batch's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
}

/// The delivery log's view of one stored call's delivery to
/// `destination` (the first stored, without one); `None` if there is
/// none.
pub async fn logged_call(
    store: &dyn Store,
    sources: &[Arc<Source>],
    source: &str,
    message_id: &str,
    destination: Option<String>,
) -> Result<Option<CallReport>, OpError> {
    let Some(call) = store
        .logged_call(source.to_owned(), message_id.to_owned(), destination)
        .await?
    else {
        return Ok(None);
    };
    let parse = |text: &Option<String>| -> Option<Json> {
        text.as_deref()
            .and_then(|t| serde_json::from_str::<Json>(t).ok())
    };
    let mut outcome = parse(&call.outcome);
    // A finished call's log is in its outcome record; a pending one's in
    // the core's saved state; a batch's row that is not its lead has its
    // log in the lead's (`LoggedCall::batch_log`).
    let take_log = |mut v: Json| v.get_mut("log").map(Json::take);
    let log = outcome
        .as_mut()
        .and_then(Json::as_object_mut)
        .and_then(|o| o.remove("log"))
        .or_else(|| parse(&call.state).and_then(take_log))
        .or_else(|| parse(&call.batch_log).and_then(take_log));
    let urls: Vec<String> = sources
        .iter()
        .find(|s| s.name == source)
        .and_then(|s| s.destination(&call.entry.destination))
        .map(|d| {
            d.webhooks
                .endpoints()
                .iter()
                .map(|e| callpost_core::ops::shown_url(e.url()))
                .collect()
        })
        .unwrap_or_default();
    let attempts = match log {
        Some(Json::Array(items)) => items
            .into_iter()
            .map(|mut a| {
                if let Some(o) = a.as_object_mut() {
                    let at = |k: &str| o.get(k).and_then(Json::as_i64);
                    if let (Some(sent), Some(ended)) = (at("sent_at"), at("ended_at")) {
                        o.insert("latency_ms".into(), (ended - sent).into());
                    }
                    let url = o
                        .get("endpoint")
                        .and_then(Json::as_u64)
                        .and_then(|i| urls.get(usize::try_from(i).ok()?));
                    if let Some(url) = url {
                        o.insert("url".into(), url.clone().into());
                    }
                }
                a
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(Some(CallReport {
        message: serde_json::from_str(&call.message).unwrap_or(Json::Null),
        entry: call.entry,
        attempts,
        outcome,
        batch: call.batch,
    }))
}

/// What an operator asks to try: a mapping (or the source's own) over a
/// stored call (`message_id`) or one given (`call`), with the source's
/// filters.
#[derive(Debug, Clone)]
pub struct MappingTrial {
    /// The source whose filters, and (without `mapping`) mapping, apply.
    pub source: String,
    /// Its destination whose filters and mapping apply (its first,
    /// without one).
    pub destination: Option<String>,
    /// The mapping to try, in the core's JSON form; `None` for the
    /// source's own (or the spec's body when it has none).
    pub mapping: Option<Json>,
    /// A stored call of the source, by its `messageId`.
    pub message_id: Option<String>,
    /// A call given whole.
    pub call: Option<Json>,
}

/// What the trial built: the exact body, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MappingTrialReport {
    /// The body the destination would send, as its exact text.
    pub body: Option<String>,
    /// The filter rule that drops the call (no body), if one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filtered: Option<usize>,
    /// Why the body was not built (`mapped_body_too_large`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// The reason, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Builds the body `trial` asks for, as a delivery starting at `now`
/// would: the source's filters, then the mapping. Nothing is stored or
/// sent. A mapping the core refuses is `invalid_settings`, naming the
/// place; an unknown source or stored call is `not_found`.
pub async fn try_mapping(
    store: &dyn Store,
    sources: &[Arc<Source>],
    now: callpost_core::Timestamp,
    trial: MappingTrial,
) -> Result<MappingTrialReport, OpError> {
    use callpost_core::filter::Decision;
    use callpost_core::mapping::{MapError, Mapping};
    let invalid = |code: Code, message: String| OpError::Invalid { code, message };
    let source = sources
        .iter()
        .find(|s| s.name == trial.source)
        .ok_or_else(|| OpError::NotFound(format!("no source is named {:?}", trial.source)))?;
    let destination = match &trial.destination {
        Some(name) => source.destination(name).ok_or_else(|| {
            OpError::NotFound(format!(
                "source {:?} has no destination {name:?}",
                trial.source
            ))
        })?,
        None => source.destinations.first().ok_or_else(|| {
            OpError::NotFound(format!("source {:?} has no destination", trial.source))
        })?,
    };
    let webhooks = &destination.webhooks;
    let mapping = match &trial.mapping {
        None => webhooks.mapping().cloned(),
        Some(m) => {
            let value = config::core_value(&trial.source, m, "mapping")?;
            Some(Mapping::from_value(&value).map_err(|e| invalid(e.code(), e.to_string()))?)
        }
    };
    let text = match (trial.message_id, trial.call) {
        (Some(id), None) => {
            store
                .logged_call(trial.source.clone(), id.clone(), None)
                .await?
                .ok_or_else(|| {
                    OpError::NotFound(format!(
                        "no stored call of {:?} has messageId {id:?} (it may have been purged)",
                        trial.source
                    ))
                })?
                .message
        }
        (None, Some(call)) => call.to_string(),
        _ => {
            return Err(invalid(
                Code::InvalidArgument,
                "give a stored call's messageId or a call, one of them".into(),
            ))
        }
    };
    let call = Call::from_json_str(&text).map_err(|e| invalid(e.code(), e.to_string()))?;
    let kept = match webhooks.filter(&call) {
        Decision::Drop { rule } => {
            return Ok(MappingTrialReport {
                body: None,
                filtered: Some(rule),
                code: None,
                message: None,
            })
        }
        Decision::Keep(kept) => kept,
    };
    let mut body = Vec::new();
    let built = match &mapping {
        Some(m) => m.write_body(&kept, now, &mut body),
        None => callpost_core::webhooks::write_body(&kept, now, &mut body).map_err(MapError::from),
    };
    match built {
        Ok(()) => Ok(MappingTrialReport {
            body: Some(String::from_utf8_lossy(&body).into_owned()),
            filtered: None,
            code: None,
            message: None,
        }),
        Err(MapError::Call(e)) => Err(invalid(e.code(), e.to_string())),
        Err(e) => Ok(MappingTrialReport {
            body: None,
            filtered: None,
            code: Some(e.code().as_str()),
            message: Some(e.to_string()),
        }),
    }
}

/// Queue depth, deliveries by state, the oldest pending delivery.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusReport {
    /// Row counts.
    #[serde(flatten)]
    pub stats: Stats,
    /// `undeliverable` under its former name, for existing dashboards.
    pub disabled: i64,
    /// How old the oldest pending call is, seconds.
    pub oldest_pending_age_seconds: Option<f64>,
    /// The receiver protection of each endpoint URL the relay answering
    /// has posted to: kept in that relay's memory, so the admin API shows
    /// it and `status` from the command line (the database alone) does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Vec<crate::guards::EndpointReport>>,
    /// The endpoint URLs disabled for failing too long (from the database,
    /// shown without credentials or query).
    pub disabled_endpoints: Vec<String>,
}

/// The store's counts now, with the oldest pending call's age.
pub async fn status(store: &dyn Store, clock: &Clock) -> Result<StatusReport, OpError> {
    let now = clock.now_ms();
    let stats = store.stats(now).await?;
    let disabled_endpoints = store
        .disabled_endpoints()
        .await?
        .iter()
        .map(|u| callpost_core::ops::shown_url(u))
        .collect();
    Ok(StatusReport {
        disabled_endpoints,
        disabled: stats.undeliverable,
        oldest_pending_age_seconds: stats
            .oldest_pending_received_at
            .map(|t| (now - t).max(0) as f64 / 1000.0),
        stats,
        endpoints: None,
    })
}

/// What a reload put in force.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Reloaded {
    /// The sources in force now, by name.
    pub sources: Vec<String>,
    /// Those that were not before.
    pub added: Vec<String>,
    /// Those that are gone (their pending calls are set aside as
    /// undeliverable).
    pub removed: Vec<String>,
}

/// Reads the configuration again as it was read at start (file,
/// environment, flags) and, when it is valid, puts its sources in force:
/// write keys, destinations and their protections. Logs the outcome, for
/// a SIGHUP and `POST /admin/reload` alike. Other settings take effect at
/// the next start.
pub async fn reload(relay: &Relay) -> Result<Reloaded, OpError> {
    let result = async {
        let overrides = relay.reload_from.get().ok_or_else(|| {
            ConfigError::Invalid(
                "this relay was not started from a configuration it can read again".into(),
            )
        })?;
        let cfg = config::load(overrides, &|k| std::env::var(k).ok())?;
        crate::deliver::check_destinations(&cfg.sources, cfg.allow_private_networks).await?;
        let before = relay.sources().names();
        if relay.cfg.secret_key.is_some() {
            // The file's sources go to the database, whose set is put in
            // force (the key itself is the one the relay started with).
            sources::start(relay, &cfg.source_docs).await?;
        } else {
            relay.put_sources(
                cfg.sources.clone(),
                cfg.protections.clone(),
                relay.clock.now(),
            );
        }
        let sources = relay.sources().names();
        Ok(Reloaded {
            added: sources
                .iter()
                .filter(|n| !before.contains(n))
                .cloned()
                .collect(),
            removed: before
                .into_iter()
                .filter(|n| !sources.contains(n))
                .collect(),
            sources,
        })
    }
    .await;
    match &result {
        Ok(r) => {
            let mut summary = format!("{} source(s) in force", r.sources.len());
            if !r.added.is_empty() {
                summary += &format!(", added {}", r.added.join(", "));
            }
            if !r.removed.is_empty() {
                summary += &format!(
                    ", removed {} (their pending calls are set aside as undeliverable)",
                    r.removed.join(", ")
                );
            }
            tracing::info!(
                "configuration reloaded: {summary}; settings other than the sources take \
                 effect at the next start"
            );
        }
        Err(e) => tracing::error!(
            "reloading the configuration failed, the sources in force stay: {}",
            e
        ),
    }
    result
}

/// What `GET /admin/sources` shows of one source in force: never a write
/// key, a secret or a header's value (any may be a credential); URLs
/// without credentials or query.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourceReport {
    /// Its name.
    pub name: String,
    /// How many write keys it has.
    pub write_keys: usize,
    /// Its default destination (`[sources.webhooks]`, named `webhooks`),
    /// if it has one: also in `destinations`.
    pub webhooks: Option<WebhooksReport>,
    /// Every destination, in order.
    pub destinations: Vec<WebhooksReport>,
}

/// A destination as [`SourceReport`] shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WebhooksReport {
    /// Its name.
    pub name: String,
    /// Which calls it takes, as given (none: every call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Value>,
    /// Each endpoint URL, with the names of the headers it is sent with.
    pub endpoints: Vec<EndpointReport>,
    /// `parallel` or `failover`.
    pub mode: &'static str,
    /// `POST`, `PUT` or `PATCH`.
    pub method: &'static str,
    /// False: calls are kept as undeliverable.
    pub enabled: bool,
    /// Whether requests carry a signature (`X-Signature` with a shared
    /// secret, or the Standard Webhooks headers).
    pub signed: bool,
    /// The signatures they carry: `segment`, `standard` or `both`.
    pub signature: &'static str,
    /// How many destination filter rules apply (the rules themselves are
    /// in `GET /admin/sources/{name}`).
    pub filters: usize,
    /// Whether a mapping builds the bodies.
    pub mapped: bool,
    /// The mapping, as it was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mapping: Option<Value>,
}

/// One endpoint of a [`WebhooksReport`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EndpointReport {
    /// The URL without credentials or query.
    pub url: String,
    /// The names of its extra headers.
    pub headers: Vec<String>,
    /// Its auth's kind (`basic`, `oauth2`), if any: never a credential.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<&'static str>,
    /// For oauth2, the token endpoint (without credentials or query).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// Whether it presents a client certificate (mutual TLS).
    pub client_certificate: bool,
    /// Its receiver protection (the core's defaults when it has none).
    pub protection: callpost_core::protection::ProtectionConfig,
}

/// The sources in force, as [`SourceReport`]s.
pub fn sources_report(sources: &Sources) -> Vec<SourceReport> {
    sources
        .list
        .iter()
        .map(|s| {
            let destinations: Vec<WebhooksReport> = s
                .destinations
                .iter()
                .map(|d| destination_report(sources, d))
                .collect();
            SourceReport {
                name: s.name.clone(),
                write_keys: s.write_keys.len(),
                webhooks: destinations
                    .iter()
                    .find(|d| d.name == callpost_core::sources::DEFAULT_DESTINATION)
                    .cloned(),
                destinations,
            }
        })
        .collect()
}

fn destination_report(sources: &Sources, d: &Destination) -> WebhooksReport {
    let w = &d.webhooks;
    WebhooksReport {
        name: d.name.clone(),
        trigger: d
            .trigger
            .as_ref()
            .and_then(|t| serde_json::from_str(&t.to_value().to_json_string().ok()?).ok()),
        endpoints: w
            .endpoints()
            .iter()
            .map(|e| EndpointReport {
                url: callpost_core::ops::shown_url(e.url()),
                headers: e.headers().iter().map(|(k, _)| k.clone()).collect(),
                auth: e.auth().map(callpost_core::webhooks::Auth::kind),
                token_url: match e.auth() {
                    Some(callpost_core::webhooks::Auth::OAuth2(o)) => {
                        Some(callpost_core::ops::shown_url(&o.token_url))
                    }
                    _ => None,
                },
                client_certificate: e.client_certificate().is_some(),
                protection: sources
                    .protections
                    .get(e.url())
                    .copied()
                    .unwrap_or_default(),
            })
            .collect(),
        mode: w.mode().as_str(),
        method: w.method().as_str(),
        enabled: d.enabled,
        signed: (w.is_signed() && w.signing().segment()) || w.signing().standard(),
        signature: w.signing().as_str(),
        filters: w.filters().len(),
        mapped: w.mapping().is_some(),
        mapping: w.mapping().map(|m| m.to_value().clone()),
    }
}

/// Enables again the disabled endpoint `url` (as the status shows it, or
/// in full) in the database: every relay on it takes requests for it
/// within 5 s. Returns the full URLs enabled; none is `not_found`.
pub async fn enable_endpoint(
    store: &dyn Store,
    clock: &Clock,
    url: &str,
) -> Result<Vec<String>, OpError> {
    let matched: Vec<String> = store
        .disabled_endpoints()
        .await?
        .into_iter()
        .filter(|u| u == url || callpost_core::ops::shown_url(u) == url)
        .collect();
    if matched.is_empty() {
        return Err(OpError::NotFound(format!(
            "{} is not a disabled endpoint",
            callpost_core::ops::shown_url(url)
        )));
    }
    for u in &matched {
        store
            .set_endpoint_disabled(u, false, clock.now_ms())
            .await?;
    }
    Ok(matched)
}
